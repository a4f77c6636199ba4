"""Positional encodings that keep attention linear: RoPE, RoFormer's linear-attention RoPE, cosFormer.

Plain linear attention has no idea of order: non-causal, permuting the keys and
values together leaves every output unchanged. Each scheme here puts positions
back in and keeps the blackboard Σ_j φ(k_j)v_jᵀ (notebook 07):

- ``rope``: rotate pairs of dims by position · θ_i, so (R_i q)ᵀ(R_j k) = qᵀR_{j−i}k.
- ``rope_linear_attention``: RoFormer's version for linear attention: rotate the
  features φ(q), φ(k) in the numerator only (the oracle is ``rope_kernel_attention``).
- ``cosformer_attention``: ReLU features re-weighted by cos(π(i−j)/(2M)) (the oracle
  is ``cosformer_kernel_attention``).
- decay (retention): ``linear_attention(..., causal=True, decay=γ)`` weights key j by
  γ^{i−j}, ALiBi's multiplicative counterpart (the oracle is
  ``retention.retention_kernel_attention``).
- the article's two remedies: ``add_absolute_positions`` (a sinusoidal table added to q, k
  before φ) and a causal sliding window (``window_linear_attention``, the oracle
  ``window_kernel_attention``); ``cosformer_weights`` and ``window_weights`` are the
  position factors that multiply φ(q_i)ᵀφ(k_j) (``retention.decay_weights`` for decay).

Positions are the row indices: queries at 0..n−1, keys at 0..m−1 (causal needs n = m).
q [..., n, d], k [..., m, d], v [..., m, dv] -> [..., n, dv], as in ``course_lib.attention``.
"""

import math

import torch

from course_lib.attention import METHODS, linear_sums
from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair, relu
from course_lib.linear_forms import causal_mask
from course_lib.validation import (
    Inputs,
    check_choice,
    check_inputs,
    check_int,
    check_number,
    require_finite,
    require_tensor,
)


def _check_base(base: float) -> float:
    return check_number("base", base, above=0)


def _rope_cos_sin(
    positions: torch.Tensor, half: int, base: float, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles p·θ_i, θ_i = base^(−2i/d), i < d/2 = half: [n, half] each, in x's dtype.

    The angles are formed in float64 (float32 where the device has no float64,
    i.e. MPS): a position of 10⁴ times θ_0 = 1 in float32 already carries an
    angle error of ~1e-3, which cos/sin would pass on to a float32 ``x``.
    """
    work = torch.float32 if x.device.type == "mps" else torch.float64
    i = torch.arange(half, dtype=work, device=x.device)
    theta = base ** (-2.0 * i / (2 * half))  # [half]
    angles = positions.to(device=x.device, dtype=work)[:, None] * theta  # [n, half]
    return angles.cos().to(x.dtype), angles.sin().to(x.dtype)


def rope(x: torch.Tensor, *, base: float = 10000.0, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotary position embedding (RoPE, Su et al. 2021, eq. 14–15): x [..., n, d] -> [..., n, d].

    Row t (at position p_t, default p_t = t) is cut into d/2 interleaved pairs
    (x_{2i}, x_{2i+1}) and pair i is rotated by the angle p_t·θ_i, θ_i = base^(−2i/d):

        out_{2i}   = x_{2i} cos(p_t θ_i) − x_{2i+1} sin(p_t θ_i)
        out_{2i+1} = x_{2i} sin(p_t θ_i) + x_{2i+1} cos(p_t θ_i)

    i.e. out_t = R_{p_t} x_t with R_p block-diagonal (``rope_matrix``). Rotations
    compose, R_iᵀR_j = R_{j−i}, so (R_i q)ᵀ(R_j k) = qᵀR_{j−i}k depends only on
    j − i. This is RoFormer's interleaved pairing; some libraries pair dim i with
    dim i + d/2 instead ("halves"), which is a permutation of the dims, not the
    same function. ``positions``: [n] integer or float positions; d must be even.
    """
    require_tensor("x", x)
    require_finite("x", x)
    return _rotate(x, _check_base(base), positions)


def _rotate(x: torch.Tensor, base: float, positions: torch.Tensor | None = None) -> torch.Tensor:
    """``rope`` without the scan of x's values (for features whose result is checked anyway)."""
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"rope rotates pairs of dims, so x's last dim must be even, got d={d}")
    if positions is None:
        positions = torch.arange(n, device=x.device)
    elif not isinstance(positions, torch.Tensor) or positions.shape != (n,):
        shape = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise ValueError(f"positions must be a tensor of shape [n] = [{n}] (one position per row of x), got {shape}")
    if positions.is_floating_point():
        require_finite("positions", positions)
    cos, sin = _rope_cos_sin(positions, d // 2, base, x)  # [n, d/2] each
    pairs = x.unflatten(-1, (d // 2, 2))  # [..., n, d/2, 2]
    even, odd = pairs[..., 0], pairs[..., 1]  # [..., n, d/2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)  # [..., n, d]


def rope_matrix(position: float, d: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """R_p [d, d]: the block-diagonal rotation ``rope`` applies at position p (rope(x)_t = R_{p_t} x_t)."""
    if check_int("d", d, at_least=2) % 2:
        raise ValueError(f"d must be even (R_p rotates pairs of dims), got d={d}")
    at = torch.tensor([position], dtype=torch.float64)  # [1]
    return rope(torch.eye(d, dtype=dtype)[:, None, :], base=base, positions=at).squeeze(1).T  # rows R e_c -> R


def _rotated_features(feature_map: FeatureMap, q: torch.Tensor, k: torch.Tensor, base: float) -> tuple:
    """φ(q), φ(k) and their rotations R_iφ(q_i), R_jφ(k_j) (f must be even)."""
    phi_q, phi_k = feature_pair(feature_map, q, k)
    f = phi_q.shape[-1]
    if f % 2:
        raise ValueError(f"RoPE rotates pairs of features, so feature_map must give an even count, got f={f}")
    return phi_q, phi_k, _rotate(phi_q, base), _rotate(phi_k, base)


def rope_kernel_weights(
    q: torch.Tensor, k: torch.Tensor, feature_map: FeatureMap = elu_plus_one, *, causal: bool = False,
    eps: float = 0.0, base: float = 10000.0,
) -> torch.Tensor:
    """A_ij = (R_iφ(q_i))ᵀ(R_jφ(k_j)) / (Σ_j' φ(q_i)ᵀφ(k_j') + eps), masked to j ≤ i if causal: [..., n, m].

    The denominator is the unrotated one, so a row need not sum to 1, and an
    entry can be negative: the rotation can turn φ(q_i), φ(k_j) ≥ 0 away from each
    other by more than 90°.
    """
    return _rope_weights(check_inputs(q, k, causal=causal, eps=eps), feature_map, causal, base)


def _rope_weights(inputs: Inputs, feature_map: FeatureMap, causal: bool, base: float) -> torch.Tensor:
    """``rope_kernel_weights`` of inputs already checked (in the inputs' dtype)."""
    phi_q, phi_k, rot_q, rot_k = _rotated_features(feature_map, inputs.q, inputs.k, _check_base(base))
    scores = rot_q @ rot_k.transpose(-2, -1)  # [..., n, m], relative: φ(q_i)ᵀR_{j−i}φ(k_j)
    plain = phi_q @ phi_k.transpose(-2, -1)  # [..., n, m]
    if causal:
        future = ~causal_mask(inputs.q.shape[-2], inputs.q.device)
        scores, plain = scores.masked_fill(future, 0.0), plain.masked_fill(future, 0.0)
    return inputs.normalise(scores, plain.sum(-1), features=lambda: (phi_q, phi_k))


def rope_kernel_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, feature_map: FeatureMap = elu_plus_one, *,
    causal: bool = False, eps: float = 0.0, base: float = 10000.0,
) -> torch.Tensor:
    """The explicit oracle of RoFormer's linear-attention RoPE: ``rope_kernel_weights`` @ v, [..., n, dv].

    Builds the n×m matrix: O(n·m·f) time, O(n·m) memory.
    """
    inputs = check_inputs(q, k, v, causal=causal, eps=eps)
    weights = _rope_weights(inputs, feature_map, causal, base)
    return inputs.finish(weights.to(inputs.v.dtype) @ inputs.v)


def rope_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, feature_map: FeatureMap = elu_plus_one, *,
    causal: bool = False, eps: float = 0.0, base: float = 10000.0, method: str = "auto", chunk_size: int | None = None,
) -> torch.Tensor:
    """RoFormer's RoPE for linear attention (Su et al., eq. 19), in O(n) without the n×m matrix:

        out_i = Σ_j (R_iφ(q_i))ᵀ(R_jφ(k_j)) v_j / (Σ_j φ(q_i)ᵀφ(k_j) + eps),   j ≤ i if causal.

    Associativity survives, because each rotation belongs to one token:
    numerator_i = (R_iφ(q_i))ᵀ Σ_j (R_jφ(k_j)) v_jᵀ, a blackboard of rotated keys
    (and a recurrent state S_i = S_{i−1} + R_iφ(k_i)v_iᵀ), while the denominator
    keeps the plain z = Σ_j φ(k_j). Rotating the denominator too could make it 0 or
    negative; left plain, it stays positive, but the weights no longer sum to 1 and
    can be negative (``rope_kernel_weights``). ``method``/``chunk_size`` as in
    ``attention.linear_attention``; f = the feature count must be even.
    """
    inputs = check_inputs(q, k, v, causal=causal, eps=eps, method=method, methods=METHODS, chunk_size=chunk_size)
    phi_q, phi_k, rot_q, rot_k = _rotated_features(feature_map, inputs.q, inputs.k, _check_base(base))
    sums = {"causal": causal, "method": method, "chunk_size": inputs.chunk_size}
    numerator, _ = linear_sums(rot_q, rot_k, inputs.v, **sums)[:2]  # the raw sums (eps = NO_EPS)
    _, denominator = linear_sums(phi_q, phi_k, inputs.v[..., :1], **sums)[:2]
    return inputs.normalise(numerator, denominator, features=lambda: (phi_q, phi_k))


def _cosformer_horizon(n: int, m: int, horizon: int | None) -> int:
    """M: max(n, m) by default (the official cosFormer code), else a given int ≥ max(n, m)."""
    if horizon is None:
        return max(n, m)
    return check_int("horizon M", horizon, at_least=max(n, m), meaning="the sequence length max(n, m)")


def _angles(length: int, horizon: int, like: torch.Tensor) -> torch.Tensor:
    """a_t = π t / (2M) for t < length: [length, 1] in like's dtype and device."""
    return (torch.arange(length, dtype=torch.float64) * (math.pi / (2 * horizon))).to(like)[:, None]


def cosformer_kernel_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, feature_map: FeatureMap = relu, *, causal: bool = False,
    eps: float = 0.0, horizon: int | None = None,
) -> torch.Tensor:
    """The explicit oracle of cosFormer (Qin et al. 2022, eq. 9–11), [..., n, dv]:

        s_ij = φ(q_i)ᵀφ(k_j) · cos(π(i − j)/(2M)),   out_i = Σ_j s_ij v_j / (Σ_j s_ij + eps),

    φ = ReLU by default, j ≤ i if causal. M = ``horizon`` (default max(n, m), as in
    the official code); with M ≥ max(n, m), |i − j| < M keeps the cosine > 0, so
    the weights are non-negative and decay with distance. Builds the n×m matrix.
    """
    inputs = check_inputs(q, k, v, causal=causal, eps=eps)
    n, m = q.shape[-2], k.shape[-2]
    horizon = _cosformer_horizon(n, m, horizon)
    phi_q, phi_k = feature_pair(feature_map, inputs.q, inputs.k)
    distance = _angles(n, horizon, phi_q) - _angles(m, horizon, phi_q).T  # [n, m], π(i − j)/(2M)
    scores = (phi_q @ phi_k.transpose(-2, -1)) * distance.cos()  # [..., n, m]
    if causal:
        scores = scores.masked_fill(~causal_mask(n, q.device), 0.0)
    return inputs.normalise(scores @ inputs.v, scores.sum(-1), features=lambda: (phi_q, phi_k))


def cosformer_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, feature_map: FeatureMap = relu, *, causal: bool = False,
    eps: float = 0.0, horizon: int | None = None, method: str = "auto", chunk_size: int | None = None,
) -> torch.Tensor:
    """cosFormer in O(n), the same function as ``cosformer_kernel_attention``.

    cos(a_i − a_j) = cos a_i cos a_j + sin a_i sin a_j with a_t = πt/(2M) splits
    s_ij into two linear attentions, one with features φ(q_i)cos a_i, φ(k_j)cos a_j
    and one with φ(q_i)sin a_i, φ(k_j)sin a_j. Both are run at once by concatenating
    the two into 2f features, ψ(x_t) = [φ(x_t)cos a_t, φ(x_t)sin a_t]: then
    ψ(q_i)ᵀψ(k_j) = s_ij exactly, numerator and denominator alike. Associativity
    survives (each factor belongs to one token), and so does the recurrent state
    (S is [2f, dv]), but M must be fixed in advance: a stream needs an upper bound
    on its length. ``method``/``chunk_size`` as in ``attention.linear_attention``.
    """
    inputs = check_inputs(q, k, v, causal=causal, eps=eps, method=method, methods=METHODS, chunk_size=chunk_size)
    horizon = _cosformer_horizon(q.shape[-2], k.shape[-2], horizon)
    phi_q, phi_k = feature_pair(feature_map, inputs.q, inputs.k)
    a_q, a_k = _angles(q.shape[-2], horizon, phi_q), _angles(k.shape[-2], horizon, phi_k)  # [n, 1], [m, 1]
    psi_q = torch.cat((phi_q * a_q.cos(), phi_q * a_q.sin()), dim=-1)  # [..., n, 2f]
    psi_k = torch.cat((phi_k * a_k.cos(), phi_k * a_k.sin()), dim=-1)  # [..., m, 2f]
    numerator, denominator = linear_sums(psi_q, psi_k, inputs.v, causal=causal, method=method,
                                         chunk_size=inputs.chunk_size)[:2]  # the raw sums (eps = NO_EPS)
    return inputs.normalise(numerator, denominator, features=lambda: (phi_q, phi_k))


# --- the article's two remedies and the position weights of notebook 07's verdict table -------------


def sinusoidal_positions(
    n: int, d: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The absolute sinusoidal table P [n, d] (Vaswani et al. 2017), notebook 07 §3e:

        P_{p, 2i} = sin(p θ_i),   P_{p, 2i+1} = cos(p θ_i),   θ_i = base^(−2i/d),   p = 0..n−1.

    Row p depends on p alone, not on any other position: ``add_absolute_positions``
    adds it to q and k before φ. d must be even. Not differentiable (no tensor input).
    """
    n, d = check_int("n", n), check_int("d", d)
    if d % 2:
        raise ValueError(f"d must be even (sin and cos share each frequency), got d={d}")
    like = torch.empty(0, dtype=dtype, device=device)
    cos, sin = _rope_cos_sin(torch.arange(n), d // 2, _check_base(base), like)  # [n, d/2] each
    return torch.stack((sin, cos), dim=-1).flatten(-2)  # [n, d], interleaved like rope's pairs


def add_absolute_positions(x: torch.Tensor, *, scale: float = 1.0, base: float = 10000.0) -> torch.Tensor:
    """x_t + scale · P_t, P = ``sinusoidal_positions``: x [..., n, d] -> [..., n, d] (notebook 07 §3e).

    The article's first remedy: put an absolute position into q and k *before* φ. Each row
    gets its own shift, so φ(q_i + P_i)ᵀφ(k_j + P_j) is still one query part times one
    key part (the blackboard and the ledger survive), and the order is seen; but the
    score now depends on i and j, not on j − i alone (the relative property is lost).
    """
    require_tensor("x", x)
    check_number("scale", scale)
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"x's last dim must be even (sin/cos pairs), got d={d}")
    return x + scale * sinusoidal_positions(n, d, base=base, dtype=x.dtype, device=x.device)


def cosformer_weights(
    n: int, m: int | None = None, *, horizon: int | None = None, causal: bool = False,
    dtype: torch.dtype = torch.float64, device: torch.device | str | None = None,
) -> torch.Tensor:
    """cosFormer's position weights W_ij = cos(π(i − j)/(2M)) [n, m] (0 above the diagonal if causal).

    The factor ``cosformer_kernel_attention`` multiplies φ(q_i)ᵀφ(k_j) by; M = ``horizon``
    (default max(n, m)). Notebook 07 §3b, notebook 09 §3. Not differentiable (no tensor input).
    """
    n = check_int("n", n)
    m = n if m is None else check_int("m", m)
    if causal and m != n:
        raise ValueError(f"causal weights need n = m, got n={n} and m={m}")
    like = torch.empty(0, dtype=dtype, device=device)
    horizon = _cosformer_horizon(n, m, horizon)
    weights = (_angles(n, horizon, like) - _angles(m, horizon, like).T).cos()  # [n, m]
    return weights.masked_fill(~causal_mask(n, like.device), 0.0) if causal else weights


def _check_window(window: int) -> int:
    return check_int("window", window, meaning="how many keys each query sees")


def window_weights(
    n: int, window: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> torch.Tensor:
    """W_ij = 1 if 0 ≤ i − j < window else 0, [n, n]: a causal sliding window of ``window`` keys.

    W = (causal prefix up to i) − (causal prefix up to i − window): the difference of two
    prefix masks, which is why the ledger of ``window_linear_attention`` adds the new key
    and subtracts the one leaving. Notebook 07 §3e. Not differentiable (no tensor input).
    """
    n, window = check_int("n", n), _check_window(window)
    offset = torch.arange(n, device=device)[:, None] - torch.arange(n, device=device)[None, :]  # i − j
    return ((offset >= 0) & (offset < window)).to(dtype)


def window_kernel_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, feature_map: FeatureMap = elu_plus_one, *,
    eps: float = 0.0,
) -> torch.Tensor:
    """The explicit oracle of causal sliding-window linear attention, [..., n, dv]:

        s_ij = φ(q_i)ᵀφ(k_j) · W_ij,   W = ``window_weights(n, window)``,   out_i = Σ_j s_ij v_j / (Σ_j s_ij + eps).

    Builds the n×n matrix (n = m). window ≥ n gives plain causal linear attention.
    """
    inputs, window = check_inputs(q, k, v, causal=True, eps=eps), _check_window(window)
    phi_q, phi_k = feature_pair(feature_map, inputs.q, inputs.k)
    scores = (phi_q @ phi_k.transpose(-2, -1)) * window_weights(q.shape[-2], window, dtype=phi_q.dtype,
                                                                device=phi_q.device)  # [..., n, n]
    return inputs.normalise(scores @ inputs.v, scores.sum(-1), features=lambda: (phi_q, phi_k))


def window_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, feature_map: FeatureMap = elu_plus_one, *,
    eps: float = 0.0, method: str = "ledger",
) -> torch.Tensor:
    """The article's second remedy, a causal sliding window of ``window`` keys, without the n×n matrix.

    method="ledger": the running state with the leaving token subtracted (a Python loop),

        S_i = S_{i−1} + φ(k_i)v_iᵀ − φ(k_{i−w})v_{i−w}ᵀ,   z_i = z_{i−1} + φ(k_i) − φ(k_{i−w}),

    O(n·f·dv) time, but it must keep the last w keys and values to know what leaves: a
    KV cache of w tokens next to the f×dv state. The additions and subtractions round
    separately, so in low precision the error of S grows with n (recompute S now and then).
    method="banded": each query reads its w keys directly, O(n·w·f) time and memory.
    Both equal ``window_kernel_attention``; q [..., n, d], k [..., n, d], v [..., n, dv].
    """
    inputs = check_inputs(q, k, v, causal=True, eps=eps, method=method, methods=("ledger", "banded"))
    window = _check_window(window)
    q, k, v = inputs.q, inputs.k, inputs.v
    phi_q, phi_k = feature_pair(feature_map, q, k)  # [..., n, f] each
    features = lambda: (phi_q, phi_k)  # noqa: E731
    if method == "banded":
        w = min(window, q.shape[-2])
        # the features (not the keys) are zero-padded in front, so the w − 1 missing keys weigh 0
        keys = torch.nn.functional.pad(phi_k, (0, 0, w - 1, 0)).unfold(-2, w, 1)  # [..., n, f, w]
        values = torch.nn.functional.pad(v, (0, 0, w - 1, 0)).unfold(-2, w, 1)  # [..., n, dv, w]
        scores = (phi_q[..., :, :, None] * keys).sum(-2)  # [..., n, w]
        return inputs.normalise((values * scores[..., None, :]).sum(-1), scores.sum(-1), features=features)
    S = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1], v.shape[-1])  # [..., f, dv]
    z = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1])  # [..., f]
    numerators, denominators = [], []
    for i in range(q.shape[-2]):
        S, z = S + phi_k[..., i, :, None] * v[..., i, None, :], z + phi_k[..., i, :]
        if i >= window:  # token i − w leaves the window
            S = S - phi_k[..., i - window, :, None] * v[..., i - window, None, :]
            z = z - phi_k[..., i - window, :]
        numerators.append(phi_q[..., i, None, :] @ S)  # [..., 1, dv]
        denominators.append((phi_q[..., i, :] * z).sum(-1, keepdim=True))  # [..., 1]
    return inputs.normalise(torch.cat(numerators, dim=-2), torch.cat(denominators, dim=-1), features=features)
