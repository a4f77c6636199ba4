"""How accurate the random-feature estimators of the softmax kernel are, in closed form (notebooks 03 and 06).

SM(x, y) = exp(xᵀy) is estimated by φ(x)ᵀφ(y) with m tasters ω_r ~ N(0, I_d)
(``course_lib.random_features``). The estimators are unbiased, so their mean squared
error is their variance; Choromanski et al. (2021), Lemma 2 and Theorem 2, give it.
Throughout, x and y are [..., d] (broadcastable) and every function returns [...],
with s = ‖x + y‖², t = ‖x − y‖² and c = (‖x‖² + ‖y‖²)/2.

The *normalised* attention output, a ratio of two such unbiased estimates, is biased:
``ratio_bias_delta`` and ``ratio_variance_delta`` give its O(1/m) bias and variance by the
delta method (notebook 06, "The normalised output is biased").
"""

import math

import torch

from course_lib.validation import check_int, check_number, require_one_query, require_tensor


def _pair(x: torch.Tensor, y: torch.Tensor) -> int:
    require_tensor("x", x, min_dims=1)
    require_tensor("y", y, min_dims=1)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x and y must have the same feature dim, got {x.shape[-1]} and {y.shape[-1]}")
    if x.shape[-1] == 0:
        raise ValueError("x and y must have at least one feature dim, got d=0")
    return x.shape[-1]


def _count(m: int) -> None:
    check_int("m (the number of tasters)", m)


def _squared_norms(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, c) = (‖x + y‖², (‖x‖² + ‖y‖²)/2), each [...]."""
    return (x + y).pow(2).sum(-1), (x.pow(2).sum(-1) + y.pow(2).sum(-1)) / 2


def _hypergeometric(upper: tuple[float, ...], lower: tuple[float, ...], t: torch.Tensor) -> torch.Tensor:
    """pFq(upper; lower; t) = Σ_k Π(a)_k / Π(b)_k · t^k / k!, summed until the terms stop mattering, [...].

    Only the two cases needed here: Kummer's ₁F₁(d; d/2; t) and ₀F₁(; d/2; t), t ≥ 0, so all terms are ≥ 0.
    """
    total, term = torch.zeros_like(t), torch.ones_like(t)
    for k in range(10_000):
        total = total + term
        if not (term > torch.finfo(t.dtype).eps * total).any():
            return total
        term = term * (math.prod(a + k for a in upper) / math.prod(b + k for b in lower) * t / (k + 1))
    raise ValueError(f"the hypergeometric series did not converge for t up to {t.max().item():.3g}")


def softmax_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """SM(x, y) = exp(xᵀy), [...] for x, y [..., d]."""
    _pair(x, y)
    return torch.exp((x * y).sum(-1))


def mse_positive(x: torch.Tensor, y: torch.Tensor, m: int) -> torch.Tensor:
    """MSE of the positive estimator with m iid tasters (Lemma 2), [...].

    (1/m) exp(‖x+y‖²) SM²(x, y) (1 − exp(−‖x+y‖²)) = SM² (e^s − 1)/m: zero when y = −x.
    """
    _pair(x, y)
    _count(m)
    s, _ = _squared_norms(x, y)
    return torch.exp(s) * softmax_kernel(x, y) ** 2 * (1 - torch.exp(-s)) / m


def mse_trig(x: torch.Tensor, y: torch.Tensor, m: int) -> torch.Tensor:
    """MSE of the sin/cos estimator with m iid tasters, 2m features (Lemma 2), [...].

    (1/(2m)) exp(‖x+y‖²) SM⁻²(x, y) (1 − exp(−‖x−y‖²))² = SM² · 2 sinh²(t/2)/m: zero when y = x.
    """
    _pair(x, y)
    _count(m)
    s, _ = _squared_norms(x, y)
    t = (x - y).pow(2).sum(-1)
    return torch.exp(s) * softmax_kernel(x, y) ** -2 * (1 - torch.exp(-t)) ** 2 / (2 * m)


def mse_orthogonal(x: torch.Tensor, y: torch.Tensor, m: int) -> torch.Tensor:
    """Exact MSE of the positive estimator with m orthogonal tasters in d = x.shape[-1] dims, [...].

    Tasters come in independent blocks of d mutually orthogonal rows with chi(d) lengths
    (``orthogonal_gaussian``). MSE = Var(Y)/m + (P/m²) Cov(Y_r, Y_s), where P counts the
    ordered pairs r ≠ s within one block (m(m − 1) for m ≤ d) and, for two such tasters,

        Cov(Y_r, Y_s) = e^{−2c} [₁F₁(d; d/2; s/2) − e^s] < 0.

    Derived in notebook 06 (not stated in the paper); equals ``mse_positive`` at m = 1.
    """
    d = _pair(x, y)
    _count(m)
    s, c = _squared_norms(x, y)
    covariance = torch.exp(-2 * c) * (_hypergeometric((d,), (d / 2,), s / 2) - torch.exp(s))  # [...]
    full_blocks, rest = divmod(m, d)
    same_block_pairs = full_blocks * d * (d - 1) + rest * (rest - 1)
    return mse_positive(x, y, m) + same_block_pairs / m**2 * covariance


def theorem2_bound(x: torch.Tensor, y: torch.Tensor, m: int) -> torch.Tensor:
    """Theorem 2's upper bound on the orthogonal MSE, m ≤ d = x.shape[-1] tasters, [...].

    MSE(iid) − 2(m − 1)/(m(d + 2)) · (SM(x, y) − exp(−(‖x‖² + ‖y‖²)/2))².
    """
    d = _pair(x, y)
    _count(m)
    if m > d:
        raise ValueError(f"Theorem 2 holds for m <= d orthogonal tasters (one block), got m={m} and d={d}")
    _, c = _squared_norms(x, y)
    return mse_positive(x, y, m) - 2 * (m - 1) / (m * (d + 2)) * (softmax_kernel(x, y) - torch.exp(-c)) ** 2


def fixed_length_kernel(x: torch.Tensor, y: torch.Tensor, length: float) -> torch.Tensor:
    """E[φ(x)ᵀφ(y)] when every taster is a uniform direction of fixed ``length`` (not chi(d)), [...].

    e^{−c} ₀F₁(; d/2; length² ‖x+y‖²/4), d = x.shape[-1]: what orthogonal rows of length 1
    (plain QR) or √d estimate instead of SM(x, y) = e^{−c} e^{‖x+y‖²/2}. A bias, not a variance.
    """
    d = _pair(x, y)
    check_number("length", length, above=0)
    s, c = _squared_norms(x, y)
    return torch.exp(-c) * _hypergeometric((), (d / 2,), length**2 * s / 4)


def _ratio_moments(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(C, b, o, D) for one query [d], keys [n, d], values [n, dv], positive iid tasters.

    C_ij = Cov(Y_i, Y_j) for one taster's verdicts Y_j = exp(ωᵀ(q + k_j) − (‖q‖² + ‖k_j‖²)/2):
    E[Y_i Y_j] = exp(‖2q + k_i + k_j‖²/2 − ‖q‖² − (‖k_i‖² + ‖k_j‖²)/2) (Gaussian MGF), minus
    SM_i SM_j. b = Σ_j SM_j, o = Σ_j SM_j v_j / b (the softmax output), D = values − o [n, dv].
    """
    require_one_query(query, keys, values)
    kernel = softmax_kernel(query, keys)  # [n]
    sums = 2 * query + keys[:, None, :] + keys[None, :, :]  # [n, n, d]
    norms = keys.pow(2).sum(-1)  # [n]
    log_second = sums.pow(2).sum(-1) / 2 - query.pow(2).sum() - (norms[:, None] + norms[None, :]) / 2
    covariance = torch.exp(log_second) - kernel[:, None] * kernel[None, :]  # [n, n]
    b = kernel.sum()
    output = kernel @ values / b  # [dv]
    return covariance, b, output, values - output


def ratio_bias_delta(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, m: int) -> torch.Tensor:
    """Delta-method bias of the normalised FAVOR+ output (positive features, m iid tasters), [dv].

    The output is A/B with A = Σ_j K̂_j v_j, B = Σ_j K̂_j, both unbiased. To second order,
    E[A/B] − E[A]/E[B] ≈ −Cov(A, B)/E[B]² + E[A] Var(B)/E[B]³ = Σ_ij C_ij (o − v_i) / (m b²),
    with C, b, o of ``_ratio_moments``: O(1/m). Notebook 06, "The normalised output is biased".
    """
    _count(m)
    covariance, b, _, deviations = _ratio_moments(query, keys, values)
    return -(covariance.sum(1) @ deviations) / (m * b**2)


def ratio_variance_delta(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, m: int) -> torch.Tensor:
    """Delta-method variance of each component of the normalised FAVOR+ output, [dv].

    Var(A/B) ≈ Var(A − o B)/E[B]² = Σ_ij C_ij (v_i − o)(v_j − o) / (m b²), componentwise:
    O(1/m), so the noise (its square root) is O(1/√m). Notebook 06.
    """
    _count(m)
    covariance, b, _, deviations = _ratio_moments(query, keys, values)
    return torch.einsum("ij,ia,ja->a", covariance, deviations, deviations) / (m * b**2)
