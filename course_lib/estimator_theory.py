"""How accurate the random-feature estimators of the softmax kernel are, in closed form (notebooks 03 and 06).

SM(x, y) = exp(xᵀy) is estimated by φ(x)ᵀφ(y) with m tasters ω_r ~ N(0, I_d)
(``course_lib.random_features``). The estimators are unbiased, so their mean squared
error is their variance; Choromanski et al. (2021), Lemma 2 and Theorem 2, give it.
Throughout, x and y are [..., d] (broadcastable) and every function returns [...],
with s = ‖x + y‖², t = ‖x − y‖² and c = (‖x‖² + ‖y‖²)/2.
"""

import math

import torch

from course_lib.validation import require_tensor


def _pair(x: torch.Tensor, y: torch.Tensor) -> int:
    require_tensor("x", x, min_dims=1)
    require_tensor("y", y, min_dims=1)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x and y must have the same feature dim, got {x.shape[-1]} and {y.shape[-1]}")
    if x.shape[-1] == 0:
        raise ValueError("x and y must have at least one feature dim, got d=0")
    return x.shape[-1]


def _count(m: int) -> None:
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m (the number of tasters) must be a positive int, got {m!r}")


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
    if isinstance(length, bool) or not isinstance(length, (int, float)) or not 0 < length < math.inf:
        raise ValueError(f"length must be a finite number > 0, got {length!r}")
    s, c = _squared_norms(x, y)
    return torch.exp(-c) * _hypergeometric((), (d / 2,), length**2 * s / 4)
