"""Feature maps φ that turn a similarity into a dot product: K(q, k) = φ(q)ᵀφ(k).

Derived in notebook 02 (the blackboard) and, for random features, notebook 03.
"""

import math
from collections.abc import Callable

import torch

from course_lib.validation import broadcast_batch, check_features, require_tensor


FeatureMap = Callable[[torch.Tensor], torch.Tensor]


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1, elementwise: x + 1 for x > 0, exp(x) for x ≤ 0.

    The Linear Transformer's map (Katharopoulos et al. 2020). It defines its own
    kernel; it does not approximate exp(qᵀk). Computed branch by branch: the literal
    ``F.elu(x) + 1`` forms exp(x) − 1 + 1 and cancels to exactly 0 already at
    x ≈ −17 (float32) or −37 (float64); this form stays positive until exp(x)
    itself underflows (≈ −104 in float32, ≈ −745 in float64).
    Shapes: [..., d] -> [..., d].
    """
    negative_part = x.clamp(max=0.0)  # min(x, 0)
    out = x - negative_part  # max(x, 0), exactly
    return out.add_(negative_part.exp_())  # two temporaries, not torch.where's four (3× faster at 4M entries)


def relu(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = max(x, 0): non-negative, but a query or key with no positive entry has φ = 0."""
    return torch.relu(x)


def identity(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = x: decomposable (φ(q)ᵀφ(k) = qᵀk) but signed, so the normaliser can be 0 or negative."""
    return x


def taylor_features(x: torch.Tensor, order: int) -> torch.Tensor:
    """The truncated Taylor map of exp(qᵀk): φ(q)ᵀφ(k) = Σ_{p ≤ order} (qᵀk)^p / p!.

    φ(x) = (1, x, x^{⊗2}/√2!, …, x^{⊗P}/√P!), the tensor powers flattened, so
    [..., d] -> [..., 1 + d + d² + … + d^order]. For illustration (notebook 03,
    section 1; the rank argument of notebook 03b): the size explodes with d and
    order, and the series is inaccurate for large |qᵀk|. Differentiable.
    """
    require_tensor("x", x, min_dims=1)
    if isinstance(order, bool) or not isinstance(order, int) or order < 0:
        raise ValueError(f"order must be an int >= 0, got {order!r}")
    power = torch.ones_like(x[..., :1])  # x^{⊗0} = 1, [..., 1]
    blocks = [power]
    for p in range(1, order + 1):
        power = (power.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)  # [..., d^p]: x^{⊗p}
        blocks.append(power / math.sqrt(math.factorial(p)))
    return torch.cat(blocks, dim=-1)


FEATURE_MAPS = {"elu_plus_one": elu_plus_one, "relu": relu, "identity": identity}


def get_feature_map(name: str):
    """The simple feature map registered under ``name`` (see ``FEATURE_MAPS``)."""
    if name not in FEATURE_MAPS:
        raise ValueError(f"feature map must be one of {tuple(FEATURE_MAPS)}, got {name!r}")
    return FEATURE_MAPS[name]


def query_key_features(feature_map, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(φ(q), φ(k)) as the attention functions use them.

    A map may define ``for_queries`` and ``for_keys`` (``PerformerFeatures`` does) to
    return φ(q)·c_q and φ(k)·c with c_q > 0 per query and c a constant per feature
    fixed before seeing data: numerically safer, and the same attention output,
    since c_q cancels between numerator and denominator. Plain maps apply φ to both.
    """
    if hasattr(feature_map, "for_queries") and hasattr(feature_map, "for_keys"):
        return feature_map.for_queries(q), feature_map.for_keys(k)
    return feature_map(q), feature_map(k)


def feature_pair(feature_map, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(φ(q) [..., n, f], φ(k) [..., m, f]) over the common batch dims, checked.

    Applies the map through ``query_key_features`` and refuses a map that returns
    no features, non-finite ones, or different feature counts for q and k.
    """
    batch = broadcast_batch(q=q, k=k)
    phi_q, phi_k = query_key_features(feature_map, q.expand(*batch, *q.shape[-2:]), k.expand(*batch, *k.shape[-2:]))
    check_features("q", phi_q, q.shape[-2])
    check_features("k", phi_k, k.shape[-2])
    if phi_q.shape[-1] != phi_k.shape[-1]:
        raise ValueError(f"feature_map gave q and k different feature counts: {phi_q.shape[-1]} and {phi_k.shape[-1]}")
    return phi_q, phi_k
