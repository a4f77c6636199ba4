"""Decay (retention): causal linear attention whose ledger fades by γ per token (notebook 07).

    S_i = γ S_{i−1} + φ(k_i)v_iᵀ,   z_i = γ z_{i−1} + φ(k_i),   o_i = φ(q_i)ᵀS_i / φ(q_i)ᵀz_i

so key j enters query i with weight γ^{i−j} φ(q_i)ᵀφ(k_j): the multiplicative counterpart of
ALiBi's additive bias −λ(i−j) (exp(s − λ(i−j)) = exp(s)·γ^{i−j} with γ = e^{−λ}). Associativity
survives, so does the constant-size ledger (RetNet, Sun et al. 2023, with our normaliser kept).
γ may be one number or a tensor broadcasting to the batch/head dims (one γ per head).
"""

from dataclasses import replace

import torch

from course_lib.feature_maps import FeatureMap, elu_plus_one
from course_lib.linear_forms import decay_matrix
from course_lib.attention import _kernel_scores
from course_lib.validation import broadcast_qkv, check_decay, check_eps, check_qkv, normalise


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
    eps = check_eps(eps, q.dtype)
    q, k, v = broadcast_qkv(q, k, v)
    scores, suspects = _kernel_scores(q, k, feature_map, True, v)
    log_gamma, decay_ok = check_decay(decay, q.shape[:-2], scores)
    scores = scores * decay_matrix(q.shape[-2], log_gamma)  # [..., n, n]
    suspects = replace(suspects, decay_ok=decay_ok, decay=decay)
    return normalise(scores @ v.to(scores.dtype), scores.sum(-1), eps, suspects).to(v.dtype)


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
    log_gamma, decay_ok = check_decay(decay, torch.as_tensor(decay).shape, like)
    if decay_ok is not None and not bool(decay_ok):
        raise ValueError(f"decay must lie in (0, 1], got {decay!r}")
    return decay_matrix(n, log_gamma)  # [..., n, n]
