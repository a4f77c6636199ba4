"""Decay (retention): causal linear attention whose ledger fades by γ per token (notebook 07).

    S_i = γ S_{i−1} + φ(k_i)v_iᵀ,   z_i = γ z_{i−1} + φ(k_i),   o_i = φ(q_i)ᵀS_i / φ(q_i)ᵀz_i

so key j enters query i with weight γ^{i−j} φ(q_i)ᵀφ(k_j): the multiplicative counterpart of
ALiBi's additive bias −λ(i−j) (exp(s − λ(i−j)) = exp(s)·γ^{i−j} with γ = e^{−λ}). Associativity
survives, so does the constant-size ledger (RetNet, Sun et al. 2023, with our normaliser kept).
γ may be one number or a tensor broadcasting to the batch/head dims (one γ per head).
"""

import torch

from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair
from course_lib.linear_forms import decay_matrix
from course_lib.validation import check_decay, check_inputs, check_int, require_in_unit_interval


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
    inputs = check_inputs(q, k, v, causal=True, eps=eps, decay=decay)
    phi_q, phi_k = feature_pair(feature_map, inputs.q, inputs.k)  # [..., n, f]
    scores = (phi_q @ phi_k.transpose(-2, -1)) * decay_matrix(q.shape[-2], inputs.log_gamma)  # [..., n, n], 0 for j > i
    return inputs.normalise(scores @ inputs.v, scores.sum(-1), features=lambda: (phi_q, phi_k))


def decay_weights(
    n: int, decay: float | torch.Tensor, *, dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The decay factors W_ij = γ^{i−j} for j ≤ i, else 0: [*γ.shape, n, n] (notebook 07 §3c, 09 §3).

    The position weight ``retention_kernel_attention`` multiplies φ(q_i)ᵀφ(k_j) by;
    γ^{i−j} = γ^i · γ^{−j} is one query part times one key part. ``decay``: a number or
    a tensor of γ in (0, 1] (one per head); differentiable in a tensor γ.
    """
    check_int("n", n)
    like = torch.empty(0, dtype=dtype, device=device)
    log_gamma, gamma = check_decay(decay, torch.as_tensor(decay).shape, like)
    if gamma is not None:
        require_in_unit_interval("decay", gamma)
    return decay_matrix(n, log_gamma)  # [..., n, n]
