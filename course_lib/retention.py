"""Decay (retention): causal linear attention whose ledger fades by γ per token (notebook 07).

    S_i = γ S_{i−1} + φ(k_i)v_iᵀ,   z_i = γ z_{i−1} + φ(k_i),   o_i = φ(q_i)ᵀS_i / φ(q_i)ᵀz_i

so key j enters query i with weight γ^{i−j} φ(q_i)ᵀφ(k_j): the multiplicative counterpart of
ALiBi's additive bias −λ(i−j) (exp(s − λ(i−j)) = exp(s)·γ^{i−j} with γ = e^{−λ}). Associativity
survives, so does the constant-size ledger (RetNet, Sun et al. 2023, with our normaliser kept).
γ may be one number or a tensor broadcasting to the batch/head dims (one γ per head).
"""

import torch
import torch.nn.functional as F

from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair
from course_lib.linear_forms import Ledger, causal_mask
from course_lib.validation import broadcast_qkv, check_eps, check_qkv, normalise


def log_decay(decay: float | torch.Tensor, batch: torch.Size, like: torch.Tensor) -> torch.Tensor:
    """log γ as a [*batch] tensor in like's dtype/device; γ must lie in (0, 1]."""
    gamma = torch.as_tensor(decay, dtype=like.dtype, device=like.device)
    if not torch.isfinite(gamma).all() or (gamma <= 0).any() or (gamma > 1).any():
        raise ValueError(f"decay must lie in (0, 1], got {decay!r}")
    try:
        return gamma.log().expand(batch)
    except RuntimeError:
        raise ValueError(f"decay of shape {tuple(gamma.shape)} must broadcast to the batch dims {tuple(batch)}") from None


def _powers(exponents: torch.Tensor, lg: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """γ^exponents where ``keep``, else 0: exp(exponents · log γ), [..., a, b] for exponents [a, b]."""
    return torch.where(keep, torch.exp(torch.where(keep, exponents, 0) * lg), 0)


def decayed_recurrent_form(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, log_gamma: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fading ledger token by token: S_i = γ S_{i−1} + φ(k_i)v_iᵀ (the definition, a Python loop)."""
    gamma = log_gamma.exp()  # [...]
    S = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1], v.shape[-1])  # [..., f, dv]
    z = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1])  # [..., f]
    numerators, denominators = [], []
    for i in range(phi_k.shape[-2]):
        S = gamma[..., None, None] * S + phi_k[..., i, :, None] * v[..., i, None, :]
        z = gamma[..., None] * z + phi_k[..., i, :]
        numerators.append(phi_q[..., i, None, :] @ S)  # [..., 1, dv]
        denominators.append((phi_q[..., i, :] * z).sum(-1, keepdim=True))  # [..., 1]
    return torch.cat(numerators, dim=-2), torch.cat(denominators, dim=-1)


def decayed_chunked_form(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    log_gamma: torch.Tensor,
    *,
    chunk_size: int,
    ledger: Ledger | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Ledger]:
    """Chunkwise with decay: for local positions t, s in a chunk and γ^x = exp(x log γ),

        numerator_t = Σ_{s≤t} γ^{t−s} (q_t·k_s) v_s + γ^{t+1} q_tᵀ S_{<c}
        S_{<c+1}    = γ^C S_{<c} + Σ_s γ^{C−1−s} k_s v_sᵀ

    (likewise the denominator with 1 for v). The sequence is zero-padded at the front, so
    its end is a chunk end; ``ledger`` (S, z at the position before the first token) is read
    with γ^{i+1}. Every exponent is ≤ 0: nothing overflows. Returns (numerator, denominator,
    ledger after the sequence).
    """
    n = phi_q.shape[-2]
    C = min(chunk_size, n)
    pad = -n % C
    Qc, Kc, Vc = (F.pad(x, (0, 0, pad, 0)).unflatten(-2, (-1, C)) for x in (phi_q, phi_k, v))  # [..., nc, C, ·]
    nc = Qc.shape[-3]
    lg = log_gamma[..., None, None]  # [..., 1, 1]
    t = torch.arange(C, device=phi_q.device, dtype=phi_q.dtype)
    intra = _powers(t[:, None] - t[None, :], lg, causal_mask(C, phi_q.device))  # [..., C, C]: γ^{t−s}, s ≤ t
    scores = (Qc @ Kc.transpose(-2, -1)) * intra.unsqueeze(-3)  # [..., nc, C, C]
    to_end = torch.exp((C - 1 - t) * lg[..., 0])  # [..., C]: γ^{C−1−s}
    chunk_S = (Kc * to_end[..., None, :, None]).transpose(-2, -1) @ Vc  # [..., nc, f, dv]
    chunk_z = (Kc * to_end[..., None, :, None]).sum(-2)  # [..., nc, f]
    c = torch.arange(nc, device=phi_q.device, dtype=phi_q.dtype)
    carry = _powers(C * (c[:, None] - 1 - c[None, :]), lg, causal_mask(nc, phi_q.device).tril(-1))  # γ^{C(c−1−c')}
    S_before = torch.einsum("...cd,...dfv->...cfv", carry, chunk_S)  # [..., nc, f, dv]
    z_before = torch.einsum("...cd,...df->...cf", carry, chunk_z)  # [..., nc, f]
    from_start = torch.exp((t + 1) * lg[..., 0])[..., None, :]  # [..., 1, C]: γ^{t+1}
    numerator = scores @ Vc + (Qc @ S_before) * from_start[..., None]
    denominator = scores.sum(-1) + (Qc @ z_before.unsqueeze(-1)).squeeze(-1) * from_start
    numerator = numerator.flatten(-3, -2)[..., pad:, :]  # [..., n, dv]
    denominator = denominator.flatten(-2, -1)[..., pad:]  # [..., n]

    last = torch.exp(C * (nc - 1 - c) * lg[..., 0])  # [..., nc]: γ^{C(nc−1−c)}, chunk end → sequence end
    S_end = torch.einsum("...c,...cfv->...fv", last, chunk_S)
    z_end = torch.einsum("...c,...cf->...f", last, chunk_z)
    if ledger is not None:
        S0, z0 = ledger
        since = torch.exp((torch.arange(n, device=phi_q.device, dtype=phi_q.dtype) + 1) * lg[..., 0])  # [..., n]
        numerator = numerator + (phi_q @ S0) * since[..., None]
        denominator = denominator + (phi_q @ z0.unsqueeze(-1)).squeeze(-1) * since
        S_end = S_end + S0 * torch.exp(n * log_gamma)[..., None, None]
        z_end = z_end + z0 * torch.exp(n * log_gamma)[..., None]
    return numerator, denominator, (S_end, z_end)


def retention_kernel_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    decay: float | torch.Tensor,
    feature_map: FeatureMap = elu_plus_one,
    *,
    eps: float = 0.0,
) -> torch.Tensor:
    """The explicit oracle: A_ij = γ^{i−j} φ(q_i)ᵀφ(k_j) for j ≤ i, row-normalised, times V; [..., n, dv]."""
    check_qkv(q, k, v, causal=True)
    eps = check_eps(eps)
    q, k, v = broadcast_qkv(q, k, v)
    lg = log_decay(decay, q.shape[:-2], q)[..., None, None]  # [..., 1, 1]
    phi_q, phi_k = feature_pair(feature_map, q, k)
    i = torch.arange(q.shape[-2], device=q.device, dtype=q.dtype)
    weights = _powers(i[:, None] - i[None, :], lg, causal_mask(q.shape[-2], q.device))  # [..., n, n]: γ^{i−j}, j ≤ i
    scores = (phi_q @ phi_k.transpose(-2, -1)) * weights  # [..., n, n]
    return normalise(scores @ v, scores.sum(-1), eps)


def decay_weights(
    n: int, decay: float | torch.Tensor, *, dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The decay factors W_ij = γ^{i−j} for j ≤ i, else 0: [*γ.shape, n, n] (notebook 07 §3c, 09 §3).

    The position weight ``retention_kernel_attention`` multiplies φ(q_i)ᵀφ(k_j) by;
    γ^{i−j} = γ^i · γ^{−j} is one query part times one key part. ``decay``: a number or
    a tensor of γ in (0, 1] (one per head); differentiable in a tensor γ.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    like = torch.empty(0, dtype=dtype, device=device)
    lg = log_decay(decay, torch.as_tensor(decay).shape, like)[..., None, None]  # [..., 1, 1]
    i = torch.arange(n, dtype=dtype, device=like.device)
    return _powers(i[:, None] - i[None, :], lg, causal_mask(n, like.device))  # [..., n, n]
