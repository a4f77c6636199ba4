"""Attention, three ways: the softmax definition, the explicit kernel oracle, linear attention.

Tensors are [..., n, d] with any leading batch/head dims, as in
``torch.nn.functional.scaled_dot_product_attention``:
q [..., n, d], k [..., m, d], v [..., m, dv] -> out [..., n, dv].
Every function here is differentiable in q, k and v. float16/bfloat16 inputs are computed
in float32 (``validation.working_dtype``) and returned in their own dtype.
"""

import torch

from course_lib import fast_forms
from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair
from course_lib.linear_forms import FORMS, causal_mask
from course_lib.validation import (
    Suspects,
    broadcast_qkv,
    check_chunk_size,
    check_decay,
    check_eps,
    check_qk,
    check_qkv,
    check_result,
    check_scale,
    normalise,
    working_dtype,
)

METHODS = ("auto", "parallel", "recurrent", "chunked")


def softmax_weights(q: torch.Tensor, k: torch.Tensor, *, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """A = softmax(q kᵀ · scale) over keys, [..., n, m]; scale defaults to 1/√d (notebook 01)."""
    check_qk(q, k, causal=causal)
    weights, suspects = _softmax(q, k, causal, check_scale(scale))
    return check_result(weights, None, 0.0, suspects).to(q.dtype)


def softmax_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None
) -> torch.Tensor:
    """softmax(q kᵀ/√d) v: the O(n·m·d) definition, [..., n, dv] (notebook 01).

    Builds the full n×m weight matrix; ``causal`` masks keys j > i (needs n = m). Scores
    that overflow the dtype (|q·k|·scale beyond its range) are refused, not turned into NaN.
    """
    check_qkv(q, k, v, causal=causal)
    weights, suspects = _softmax(q, k, causal, check_scale(scale), v)
    return check_result(weights @ v.to(weights.dtype), None, 0.0, suspects).to(v.dtype)


def _softmax(q, k, causal: bool, scale: float | None, v: torch.Tensor | None = None) -> tuple[torch.Tensor, Suspects]:
    """(softmax weights [..., n, m] in the working dtype, unchecked; what to blame if they are bad).

    Suspects: q, k (and v), then the scores: a finite q·k can still overflow (1e20² in float32).
    """
    work = working_dtype(q.dtype)
    q, k = q.to(work), k.to(work)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # [..., n, m]
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], q.device), float("-inf"))
    named = {"q": q, "k": k} | ({} if v is None else {"v": v})
    visible = scores.masked_fill(scores == float("-inf"), 0.0) if causal else scores  # the mask is no overflow
    named["the scores q·kᵀ·scale (the inputs overflow the dtype: rescale them)"] = visible
    return torch.softmax(scores, dim=-1), Suspects(named)


def kernel_weights(
    q: torch.Tensor, k: torch.Tensor, feature_map: FeatureMap = elu_plus_one, *, causal: bool = False, eps: float = 0.0
) -> torch.Tensor:
    """A_ij = φ(q_i)ᵀφ(k_j) / (Σ_j' φ(q_i)ᵀφ(k_j') + eps), masked to j ≤ i if causal, [..., n, m]."""
    check_qk(q, k, causal=causal)
    scores, suspects = _kernel_scores(q, k, feature_map, causal)
    return normalise(scores, scores.sum(-1), check_eps(eps, q.dtype), suspects).to(q.dtype)


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
    eps = check_eps(eps, q.dtype)
    scores, suspects = _kernel_scores(q, k, feature_map, causal, v)
    return normalise(scores @ v.to(scores.dtype), scores.sum(-1), eps, suspects).to(v.dtype)


def _kernel_scores(q, k, feature_map, causal: bool, v: torch.Tensor | None = None) -> tuple[torch.Tensor, Suspects]:
    """(φ(Q)φ(K)ᵀ [..., n, m], masked to j ≤ i if causal, in the working dtype; what to blame if bad)."""
    work = working_dtype(q.dtype)
    q, k = q.to(work), k.to(work)
    phi_q, phi_k = feature_pair(feature_map, q, k)  # [..., n, f], [..., m, f]
    scores = phi_q @ phi_k.transpose(-2, -1)  # [..., n, m]
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], q.device), 0.0)
    named = {"q": q, "k": k} | ({} if v is None else {"v": v})
    return scores, Suspects(named, features=lambda: (phi_q, phi_k))


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
    check_qkv(q, k, v, causal=causal)
    eps = check_eps(eps, q.dtype)
    chunk_size = check_method(method, chunk_size)
    dtype = q.dtype
    q, k, v = (x.to(working_dtype(dtype)) for x in broadcast_qkv(q, k, v))
    log_gamma, decay_ok = None, None
    if decay is not None:
        if not causal:
            raise ValueError(f"decay weights the past by γ^(i-j): it needs causal=True, got causal={causal}")
        log_gamma, decay_ok = check_decay(decay, q.shape[:-2], q)
    named, features = {"q": q, "k": k, "v": v}, lambda: feature_pair(feature_map, q, k)
    if method == "auto" and causal:
        out, normaliser, _, total = fast_forms.causal_attention(
            q, k, v, feature_map, chunk_size=chunk_size, eps=eps, log_gamma=log_gamma)
        return check_result(out, normaliser, eps, Suspects(named, features, decay_ok, decay, total)).to(dtype)
    suspects = Suspects(named, features, decay_ok, decay)
    phi_q, phi_k = feature_pair(feature_map, q, k)  # [..., n, f], [..., m, f]
    numerator, denominator = linear_sums(phi_q, phi_k, v, causal=causal, method=method, chunk_size=chunk_size,
                                         log_gamma=log_gamma)
    return normalise(numerator, denominator, eps, suspects).to(dtype)


def check_method(method: str, chunk_size: int | None) -> int | None:
    """``method`` is one of ``METHODS`` and ``chunk_size`` a positive int or None; returns chunk_size."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return check_chunk_size(chunk_size)


def linear_sums(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool, method: str,
    chunk_size: int | None, log_gamma: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(numerator [..., n, dv], denominator [..., n]) of features φq, φk and values v by ``method``.

    The one dispatcher: "auto" is ``fast_forms`` (the chunk loop when causal), the others the
    readable ``linear_forms``. The positional forms call it with their own features.
    """
    C = chunk_size or fast_forms.auto_chunk_size(phi_k.shape[-2], phi_k.shape[-1], v.shape[-1])
    if method == "auto" and causal:
        return fast_forms.causal_attention(phi_q, phi_k, v, chunk_size=C, eps=fast_forms.NO_EPS, log_gamma=log_gamma)[:2]
    if method == "auto":
        return fast_forms.fast_noncausal(phi_q, phi_k, v)
    options = {"chunk_size": C} if method == "chunked" else {}
    return FORMS[method](phi_q, phi_k, v, causal=causal, log_gamma=log_gamma, **options)[:2]
