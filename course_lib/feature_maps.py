"""Feature maps φ that turn a similarity into a dot product: K(q, k) = φ(q)ᵀφ(k).

Derived in notebook 02 (the blackboard) and, for random features, notebook 03.
"""

import math
from collections.abc import Callable

import torch

from course_lib.validation import check_int, require_tensor


FeatureMap = Callable[[torch.Tensor], torch.Tensor]


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1, elementwise: x + 1 for x > 0, exp(x) for x ≤ 0.

    The Linear Transformer's map (Katharopoulos et al. 2020). It defines its own
    kernel; it does not approximate exp(qᵀk). Computed branch by branch: the literal
    ``F.elu(x) + 1`` forms exp(x) − 1 + 1 and cancels to exactly 0 already at
    x ≈ −17 (float32) or −37 (float64); this form stays positive until exp(x)
    itself underflows (≈ −104 in float32, ≈ −745 in float64).
    Its derivative is min(φ(x), 1) (exp(x) ≤ 1 on the left, 1 on the right; 1 at 0), which
    the backward reads from the saved output: two passes instead of autograd's six.
    Shapes: [..., d] -> [..., d].
    """
    if torch.is_grad_enabled() and x.requires_grad:
        return _EluPlusOne.apply(x)
    return elu_plus_one_into(x, torch.empty_like(x), torch.empty_like(x))


def elu_plus_one_into(x: torch.Tensor, out: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """φ(x) written into ``out``, with ``scratch`` (same shape) holding min(x, 0); returns ``out``.

    Four passes, no allocation: the engine reuses its buffers block after block, because a
    fresh 1 MB tensor costs its page faults on first touch, here as much time as the
    arithmetic. Not differentiable (it writes into buffers); ``elu_plus_one`` is.
    """
    torch.clamp(x, max=0.0, out=scratch)  # min(x, 0)
    torch.sub(x, scratch, out=out)  # max(x, 0), exactly (and NaN for −inf: −inf − (−inf))
    return out.add_(scratch.exp_())


class _EluPlusOne(torch.autograd.Function):
    """elu + 1 with the backward grad · min(φ, 1); twice differentiable (the backward is autograd ops)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        out = elu_plus_one_into(x, torch.empty_like(x), torch.empty_like(x))  # not torch.where's four temporaries
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (out,) = ctx.saved_tensors
        return out.clamp(max=1.0).mul_(grad)


def bad_values_reach_the_sums(feature_map) -> bool:
    """True for a map whose φ is ≥ 0 and is ±∞ or NaN exactly when its input is: elu + 1
    (``elu_plus_one_into`` gives NaN for −∞, as −∞ − (−∞)). Then a bad q or k always spoils what
    the engine computes anyway — a bad φ(k_j) the ledger's z = Σ_j φ(k_j), a bad φ(q_i) its
    normaliser φ(q_i)ᵀz (0·∞ is NaN too) — so no checksum pass over the inputs is needed
    (``fast_forms``, ``fast_step``). Not ReLU: it maps −∞ to 0."""
    return feature_map is elu_plus_one


def into_buffers(feature_map) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None:
    """The map's form that writes φ(x) into given buffers, ``f(x, out, scratch) -> out`` (not
    differentiable), for the engine's reused blocks and the decode step; None for a map without one.
    Only elu + 1 has one (``elu_plus_one_into``)."""
    return elu_plus_one_into if feature_map is elu_plus_one else None


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
    check_int("order", order, at_least=0)
    power = torch.ones_like(x[..., :1])  # x^{⊗0} = 1, [..., 1]
    blocks = [power]
    for p in range(1, order + 1):
        power = (power.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)  # [..., d^p]: x^{⊗p}
        blocks.append(power / math.sqrt(math.factorial(p)))
    return torch.cat(blocks, dim=-1)


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
    """(φ(q) [..., n, f], φ(k) [..., m, f]) of q, k with the same batch dims, shapes checked.

    Applies the map through ``query_key_features`` and refuses a map that returns no
    features or different feature counts for q and k (``check_feature_pair``). Their values
    are examined only when a result comes out bad (``validation.Suspects``).
    """
    phi_q, phi_k = query_key_features(feature_map, q, k)
    check_feature_pair(phi_q, phi_k, q.shape[-2], k.shape[-2])
    return phi_q, phi_k


def check_feature_pair(phi_q: object, phi_k: object, n: int, m: int) -> None:
    """A map's output for n queries and m keys: tensors [..., n, f] and [..., m, f] with the same f ≥ 1."""
    for name, phi, rows in (("q", phi_q, n), ("k", phi_k, m)):
        if not isinstance(phi, torch.Tensor) or phi.dim() < 2 or phi.shape[-2] != rows:
            shape = tuple(phi.shape) if isinstance(phi, torch.Tensor) else type(phi).__name__
            raise ValueError(f"feature_map({name}) must return [..., {rows}, f], got {shape}")
        if phi.shape[-1] == 0:
            raise ValueError(f"feature_map({name}) returned zero features (f=0)")
    if phi_q.shape[-1] != phi_k.shape[-1]:
        raise ValueError(f"feature_map gave q and k different feature counts: {phi_q.shape[-1]} and {phi_k.shape[-1]}")
