"""Attention, three ways: the softmax definition, the explicit kernel oracle, linear attention.

Tensors are [..., n, d] with any leading batch/head dims, as in
``torch.nn.functional.scaled_dot_product_attention``:
q [..., n, d], k [..., m, d], v [..., m, dv] -> out [..., n, dv].
"""

import torch

from course_lib.fast_forms import auto_chunk_size
from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair  # FeatureMap: re-exported
from course_lib.linear_forms import METHODS, causal_mask, check_method, evaluate_form  # METHODS, causal_mask: re-exported
from course_lib.validation import broadcast_qkv, check_eps, check_qk, check_qkv, normalise
from course_lib.retention import decayed_chunked_form, decayed_recurrent_form, log_decay


def softmax_weights(q: torch.Tensor, k: torch.Tensor, *, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """A = softmax(q kᵀ · scale) over keys, [..., n, m]; scale defaults to 1/√d (notebook 01)."""
    check_qk(q, k, causal=causal)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # [..., n, m]
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], q.device), float("-inf"))
    return torch.softmax(scores, dim=-1)


def softmax_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None
) -> torch.Tensor:
    """softmax(q kᵀ/√d) v: the O(n·m·d) definition, [..., n, dv] (notebook 01).

    Builds the full n×m weight matrix; ``causal`` masks keys j > i (needs n = m).
    """
    check_qkv(q, k, v, causal=causal)
    return softmax_weights(q, k, causal=causal, scale=scale) @ v


def kernel_weights(
    q: torch.Tensor, k: torch.Tensor, feature_map: FeatureMap = elu_plus_one, *, causal: bool = False, eps: float = 0.0
) -> torch.Tensor:
    """A_ij = φ(q_i)ᵀφ(k_j) / (Σ_j' φ(q_i)ᵀφ(k_j') + eps), masked to j ≤ i if causal, [..., n, m]."""
    check_qk(q, k, causal=causal)
    eps = check_eps(eps)
    phi_q, phi_k = feature_pair(feature_map, q, k)  # [..., n, f], [..., m, f]
    scores = phi_q @ phi_k.transpose(-2, -1)  # [..., n, m]
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], q.device), 0.0)
    return normalise(scores, scores.sum(-1), eps)


def kernel_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    feature_map: FeatureMap = elu_plus_one,
    *,
    causal: bool = False,
    eps: float = 0.0,
) -> torch.Tensor:
    """The explicit oracle: (φ(Q)φ(K)ᵀ, masked, row-normalised) V, [..., n, dv].

    Builds the n×m kernel matrix, so it costs O(n·m·f) time and O(n·m) memory. This,
    not softmax, is what every linear form must reproduce exactly (notebook 02).
    """
    check_qkv(q, k, v, causal=causal)
    return kernel_weights(q, k, feature_map, causal=causal, eps=eps) @ v


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    feature_map: FeatureMap = elu_plus_one,
    *,
    causal: bool = False,
    eps: float = 0.0,
    method: str = "auto",
    chunk_size: int | None = None,
    decay: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """out_i = φ(q_i)ᵀ Σ_j φ(k_j)v_jᵀ / (φ(q_i)ᵀ Σ_j φ(k_j) + eps), sums over j ≤ i if causal.

    q [..., n, d], k [..., m, d], v [..., m, dv] -> [..., n, dv]; never builds n×m.
    ``method``: "parallel" (associativity, notebook 02), "recurrent" (the ledger loop,
    notebook 05), "chunked" (chunkwise parallel, notebook 05) or "auto" (the fast path of
    ``fast_forms``: values carry a ones column so one matmul gives numerator and
    denominator; causal runs chunk by chunk; notebook 08 times it). ``chunk_size`` is
    accepted by every method and used by "chunked" and "auto"; None picks
    ``fast_forms.auto_chunk_size`` for the shape. ``eps`` > 0 floors the denominator and so changes
    the result; with eps = 0 a normaliser ≤ 0 or non-finite raises ``ValueError``.
    A map with ``for_queries``/``for_keys`` (``PerformerFeatures``) is applied through
    them (``feature_maps.query_key_features``): the output is the same, but the
    denominator that eps is added to is the rescaled one.
    ``decay`` γ ∈ (0, 1] (a number, or one per head broadcasting to the batch dims) weights
    key j by γ^{i−j} (retention, notebook 07; needs causal=True and method "recurrent",
    "chunked" or "auto"); the oracle is ``retention.retention_kernel_attention``.
    """
    check_qkv(q, k, v, causal=causal)
    eps = check_eps(eps)
    chunk_size = check_method(method, chunk_size)
    q, k, v = broadcast_qkv(q, k, v)
    phi_q, phi_k = feature_pair(feature_map, q, k)  # [..., n, f], [..., m, f]
    if decay is None:
        numerator, denominator = evaluate_form(phi_q, phi_k, v, causal=causal, method=method, chunk_size=chunk_size)
    elif not causal or method == "parallel":
        raise ValueError(
            "decay weights the past by γ^(i-j): it needs causal=True and method 'recurrent', 'chunked' or 'auto' "
            f"(the parallel prefix sums would need γ^(-j)), got causal={causal}, method={method!r}"
        )
    elif method == "recurrent":
        numerator, denominator = decayed_recurrent_form(phi_q, phi_k, v, log_decay(decay, q.shape[:-2], q))
    else:
        log_gamma = log_decay(decay, q.shape[:-2], q)
        chunk_size = chunk_size or auto_chunk_size(k.shape[-2], phi_k.shape[-1], v.shape[-1])
        numerator, denominator, _ = decayed_chunked_form(phi_q, phi_k, v, log_gamma, chunk_size=chunk_size)
    return normalise(numerator, denominator, eps, in_place=True)  # the forms return fresh numerators
