"""Attention, three ways: the softmax definition, the explicit kernel oracle, linear attention.

Tensors are [..., n, d] with any leading batch/head dims, as in
``torch.nn.functional.scaled_dot_product_attention``:
q [..., n, d], k [..., m, d], v [..., m, dv] -> out [..., n, dv].
Every function here is differentiable in q, k and v. float16/bfloat16 inputs are computed
in float32 (``validation.working_dtype``) and returned in their own dtype.
"""

from collections.abc import Callable

import torch

from course_lib import fast_forms
from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair
from course_lib.linear_forms import FORMS, causal_mask, divide
from course_lib.validation import Inputs, check_inputs, check_number

METHODS = ("auto", "parallel", "recurrent", "chunked")


def softmax_weights(q: torch.Tensor, k: torch.Tensor, *, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """A = softmax(q kᵀ · scale) over keys, [..., n, m]; scale defaults to 1/√d (notebook 01)."""
    inputs = check_inputs(q, k, causal=causal)
    weights, scores = _softmax(inputs, causal, check_number("scale", scale, optional=True))
    return inputs.finish(weights, more=scores)


def softmax_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None
) -> torch.Tensor:
    """softmax(q kᵀ/√d) v: the O(n·m·d) definition, [..., n, dv] (notebook 01).

    Builds the full n×m weight matrix; ``causal`` masks keys j > i (needs n = m). Scores
    that overflow the dtype (|q·k|·scale beyond its range) are refused, not turned into NaN.
    """
    inputs = check_inputs(q, k, v, causal=causal)
    weights, scores = _softmax(inputs, causal, check_number("scale", scale, optional=True))
    return inputs.finish(weights @ inputs.v.to(weights.dtype), more=scores)


def _softmax(inputs: Inputs, causal: bool, scale: float | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(softmax weights [..., n, m] in the working dtype, unchecked; the scores, named, to blame if they are bad).

    A finite q·k can still overflow (1e20² in float32).
    """
    q, k = inputs.q, inputs.k
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # [..., n, m]
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], q.device), float("-inf"))
    visible = scores.masked_fill(scores == float("-inf"), 0.0) if causal else scores  # the mask is no overflow
    blame = {"the scores q·kᵀ·scale (the inputs overflow the dtype: rescale them)": visible}
    return torch.softmax(scores, dim=-1), blame


def kernel_weights(
    q: torch.Tensor, k: torch.Tensor, feature_map: FeatureMap = elu_plus_one, *, causal: bool = False, eps: float = 0.0
) -> torch.Tensor:
    """A_ij = φ(q_i)ᵀφ(k_j) / (Σ_j' φ(q_i)ᵀφ(k_j') + eps), masked to j ≤ i if causal, [..., n, m]."""
    inputs = check_inputs(q, k, causal=causal, eps=eps)
    scores, features = _kernel_scores(inputs, feature_map, causal)
    return inputs.normalise(scores, scores.sum(-1), features=features)


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
    inputs = check_inputs(q, k, v, causal=causal, eps=eps)
    scores, features = _kernel_scores(inputs, feature_map, causal)
    return inputs.normalise(scores @ inputs.v.to(scores.dtype), scores.sum(-1), features=features)


def _kernel_scores(inputs: Inputs, feature_map, causal: bool) -> tuple[torch.Tensor, Callable]:
    """(φ(Q)φ(K)ᵀ [..., n, m], masked to j ≤ i if causal, in the working dtype; the features, to blame)."""
    phi_q, phi_k = feature_pair(feature_map, inputs.q, inputs.k)  # [..., n, f], [..., m, f]
    scores = phi_q @ phi_k.transpose(-2, -1)  # [..., n, m]
    if causal:
        scores = scores.masked_fill(~causal_mask(inputs.q.shape[-2], inputs.q.device), 0.0)
    return scores, lambda: (phi_q, phi_k)


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
    notebook 05), "chunked" (chunkwise parallel, notebook 05) — the readable forms of
    ``linear_forms`` — or "auto", the engine of ``fast_forms``: causal runs one loop over
    chunks with its own backward (notebook 08 times it). ``chunk_size`` is used by "chunked"
    and "auto"; None picks ``fast_forms.auto_chunk_size`` for the shape. ``eps`` > 0 floors
    the denominator and so changes the result; with eps = 0 a normaliser ≤ 0 or non-finite
    raises ``ValueError``. A map with ``for_queries``/``for_keys`` (``PerformerFeatures``) is
    applied through them (``feature_maps.query_key_features``): the output is the same, but
    the denominator that eps is added to is the rescaled one.
    ``decay`` γ ∈ (0, 1] (a number, or one per head broadcasting to the batch dims) weights
    key j by γ^{i−j} (retention, notebook 07; needs causal=True); the oracle is
    ``retention.retention_kernel_attention``. Differentiable in q, k, v (and a tensor γ).
    """
    inputs = check_inputs(q, k, v, causal=causal, eps=eps, method=method, methods=METHODS, chunk_size=chunk_size,
                          decay=decay)
    sums = linear_sums(inputs.q, inputs.k, inputs.v, feature_map, causal=causal, method=method,
                       chunk_size=inputs.chunk_size, eps=inputs.eps, log_gamma=inputs.log_gamma)
    features = lambda: feature_pair(feature_map, inputs.q, inputs.k)  # noqa: E731 - recomputed on failure only
    return inputs.finish(sums.out, sums.normaliser, features=features, checksum=sums.checksum)


def linear_sums(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, feature_map: FeatureMap | None = None, *, causal: bool,
    method: str, chunk_size: int | None = None, eps: float | None = fast_forms.NO_EPS,
    log_gamma: torch.Tensor | None = None,
) -> fast_forms.Sums:
    """Linear attention's sums by ``method``, for inputs already checked: the one dispatcher.

    q [..., n, d], k [..., m, d], v [..., m, dv] share their batch dims; ``feature_map`` None means
    q and k are features already (the positional forms pass their own). "auto" is the engine,
    ``fast_forms``: the chunk loop when causal (it computes the features a block at a time and
    divides as it goes), one pass when not; the other methods are the readable ``linear_forms``.
    Returns ``fast_forms.Sums``: out [..., n, dv] and normaliser [..., n], or with eps = NO_EPS
    the raw numerator and denominator.
    """
    if method == "auto" and causal:
        return fast_forms.causal_attention(q, k, v, feature_map, chunk_size=chunk_size, eps=eps, log_gamma=log_gamma)
    phi_q, phi_k = (q, k) if feature_map is None else feature_pair(feature_map, q, k)  # [..., n, f], [..., m, f]
    if method == "auto":
        numerator, denominator = fast_forms.fast_noncausal(phi_q, phi_k, v)
    else:
        C = chunk_size or fast_forms.auto_chunk_size(phi_k.shape[-2], phi_k.shape[-1], v.shape[-1])
        options = {"chunk_size": C} if method == "chunked" else {}
        numerator, denominator, _ = FORMS[method](phi_q, phi_k, v, causal=causal, log_gamma=log_gamma, **options)
    if eps is fast_forms.NO_EPS:
        return fast_forms.Sums(numerator, denominator, None, None)
    return fast_forms.Sums(*divide(numerator, denominator, eps), None, None)
