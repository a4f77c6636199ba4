"""The validation contract shared by every attention form and the streaming state.

Bad input raises a ``ValueError`` that names the argument, what was expected and what
arrived. Shapes, dtypes and options are checked up front, before any arithmetic. Values are
checked with the result, by one host sync (``check_result``): a NaN or ∞ in v always reaches
the output (0·∞ is NaN too), but one in q or k need not — ReLU maps −∞ to 0 — so a
``checksum`` finite exactly when q and k are is checked beside the output and the
normaliser: a running sum of q and k, or, on the engine's elu + 1 path (whose φ is non-finite
exactly when its input is), the ledger's z = Σφ(k) (``feature_maps.bad_values_reach_the_sums``). Only when one
is bad are the inputs re-scanned (``Suspects.explain``), in the contract's order — q, k, v,
then the features, then decay, then the normaliser, then the output — so the error still
names the culprit, with the same message an up-front scan would give.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

HALF_TYPES = (torch.float16, torch.bfloat16)


class ArgumentTypeError(ValueError, TypeError):
    """An argument of the wrong type: a ``ValueError`` like every refusal here, and a ``TypeError``."""


def require_tensor(name: str, x: object, *, min_dims: int = 2) -> torch.Tensor:
    """Check that ``x`` is a floating-point tensor with data and at least ``min_dims`` dims."""
    if not isinstance(x, torch.Tensor):
        raise ArgumentTypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must have a floating-point dtype, got {x.dtype}")
    if x.is_meta:
        raise ValueError(f"{name} is a meta tensor (a shape without values); attention needs real data")
    if x.dim() < min_dims:
        layout = "[..., n, d]" if min_dims == 2 else "[..., d]"
        raise ValueError(f"{name} must have shape {layout} (at least {min_dims} dims), got shape {tuple(x.shape)}")
    return x


def require_one_query(query: object, keys: object, values: object) -> None:
    """Check the shapes of one query against its keys: query [d], keys [n, d], values [n, dv].

    The Monte Carlo and closed-form studies of one attention row (notebook 06) take this layout.
    """
    require_tensor("query", query, min_dims=1)
    require_tensor("keys", keys, min_dims=2)
    require_tensor("values", values, min_dims=2)
    if query.dim() != 1 or keys.dim() != 2 or keys.shape[-1] != query.shape[-1]:
        got = f"{tuple(query.shape)} and {tuple(keys.shape)}"
        raise ValueError(f"query must be [d] and keys [n, d] with the same d, got {got}")
    if values.dim() != 2 or values.shape[0] != keys.shape[0]:
        rows = keys.shape[0]
        raise ValueError(f"values must be [n, dv] with n = {rows} rows, got {tuple(values.shape)}")


def all_finite(x: torch.Tensor) -> bool:
    """True when ``x`` holds no NaN or infinity.

    Fast path: one reduction. Any NaN or ±inf makes the sum NaN or ±inf, so a finite sum
    proves every entry finite; only a non-finite sum (a bad entry, or finite entries whose
    sum overflowed) pays for the elementwise check.
    """
    wide = torch.float32 if x.element_size() < 4 else None  # half types would overflow at 65504
    return math.isfinite(x.sum(dtype=wide).item()) or bool(torch.isfinite(x).all())


def require_finite(name: str, x: torch.Tensor) -> None:
    """Raise if ``x`` holds a NaN or an infinity."""
    if not all_finite(x):
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name} must hold finite values, found {bad} NaN/inf entries")


def check_flag(name: str, value: object) -> bool:
    """A yes/no option is a real bool: ``causal="no"`` is not silently truthy."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_scale(scale: object) -> float | None:
    """The softmax temperature: None (1/√d) or a finite real number."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None, got {scale!r}")
    return float(scale)


def check_qk(q: torch.Tensor, k: torch.Tensor, *, causal: bool) -> None:
    """Shapes of queries [..., n, d] and keys [..., m, d] (values are checked by ``check_result``)."""
    require_tensor("q", q)
    require_tensor("k", k)
    check_flag("causal", causal)
    if k.dtype != q.dtype or k.device != q.device:
        raise ValueError(f"q and k must share dtype and device, got {q.dtype}/{q.device} and {k.dtype}/{k.device}")
    n, d = q.shape[-2:]
    m, dk = k.shape[-2:]
    if n == 0 or m == 0:
        raise ValueError(f"sequences must not be empty, got q with n={n} and k with m={m}")
    if d == 0:
        raise ValueError("q and k must have at least one feature dim, got d=0")
    if dk != d:
        raise ValueError(f"q and k must have the same feature dim, got {d} and {dk}")
    if causal and n != m:
        raise ValueError(f"causal=True pairs query i with key i, so q and k need the same length, got n={n} and m={m}")
    _require_broadcastable(q=q, k=k)


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> None:
    """Shapes of q [..., n, d], k [..., m, d], v [..., m, dv]."""
    check_qk(q, k, causal=causal)
    require_tensor("v", v)
    if v.dtype != q.dtype or v.device != q.device:
        raise ValueError(f"v must share dtype and device with q, got {v.dtype}/{v.device} and {q.dtype}/{q.device}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"k and v must have the same length, got {k.shape[-2]} and {v.shape[-2]}")
    if v.shape[-1] == 0:
        raise ValueError("v must have at least one feature dim, got dv=0")
    _require_broadcastable(q=q, k=k, v=v)


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the arithmetic runs in: float32 for float16/bfloat16 inputs (their sums overflow at
    65504, or keep 8 bits), the inputs' own dtype otherwise. Outputs come back in the inputs' dtype."""
    return torch.float32 if dtype in HALF_TYPES else dtype


def check_feature_shapes(name: str, phi: torch.Tensor, rows: int) -> None:
    """A feature map's output: a tensor [..., rows, f] with f ≥ 1."""
    if not isinstance(phi, torch.Tensor) or phi.dim() < 2 or phi.shape[-2] != rows:
        shape = tuple(phi.shape) if isinstance(phi, torch.Tensor) else type(phi).__name__
        raise ValueError(f"feature_map({name}) must return [..., {rows}, f], got {shape}")
    if phi.shape[-1] == 0:
        raise ValueError(f"feature_map({name}) returned zero features (f=0)")


def require_finite_features(name: str, phi: torch.Tensor) -> None:
    """A feature map's output holds no NaN or ∞ (checked only when a result came out bad)."""
    if not all_finite(phi):
        raise ValueError(f"feature_map({name}) produced non-finite features (overflow?); rescale the inputs")


def check_eps(eps: float, dtype: torch.dtype | None = None) -> float:
    """eps is a finite float ≥ 0, and finite in ``dtype`` (1e300 is ∞ in float32)."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    if dtype is not None and eps > torch.finfo(working_dtype(dtype)).max:
        raise ValueError(f"eps must be a finite number >= 0 in {working_dtype(dtype)}, got {eps!r} (overflows)")
    return float(eps)


def check_decay(decay: object, batch: torch.Size, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log γ as a [*batch] tensor in like's dtype/device, and the check of its values still to make.

    γ is a number in (0, 1], checked here, or a tensor of them broadcasting to the batch dims,
    whose values are checked with the result: the second return is then a 0-dim bool
    tensor (False when some γ lies outside (0, 1]) for ``Suspects.decay_ok``; None for a number.
    Differentiable in a tensor γ.
    """
    if isinstance(decay, bool) or not isinstance(decay, (int, float, torch.Tensor)):
        raise ArgumentTypeError(f"decay must be a number in (0, 1] or a tensor of them, got {decay!r}")
    if isinstance(decay, torch.Tensor):
        gamma = decay.to(device=like.device, dtype=like.dtype)
        values_ok = ((gamma > 0) & (gamma <= 1)).all()
    elif not (math.isfinite(decay) and 0 < decay <= 1):
        raise ValueError(f"decay must lie in (0, 1], got {decay!r}")
    else:
        gamma, values_ok = torch.tensor(float(decay), dtype=like.dtype, device=like.device), None
    try:
        return gamma.log().expand(batch), values_ok
    except RuntimeError:
        raise ValueError(f"decay of shape {tuple(gamma.shape)} must broadcast to the batch dims {tuple(batch)}") from None


def check_chunk_size(chunk_size: int | None) -> int | None:
    """chunk_size is a positive int, or None (chosen per shape)."""
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size!r}")
    return chunk_size


def broadcast_batch(**tensors: torch.Tensor) -> torch.Size:
    """The common leading (batch/head) shape of tensors laid out as [..., n, d]."""
    return _require_broadcastable(**tensors)


def broadcast_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v expanded (no copy) to their common leading dims: [B..., n, d], [B..., m, d], [B..., m, dv]."""
    batch = _require_broadcastable(q=q, k=k, v=v)
    return tuple(x.expand(*batch, *x.shape[-2:]) for x in (q, k, v))


def _require_broadcastable(**tensors: torch.Tensor) -> torch.Size:
    shapes = [t.shape[:-2] for t in tensors.values()]
    if all(shape == shapes[0] for shape in shapes):
        return shapes[0]  # the usual case, without torch.broadcast_shapes' ~30 µs
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError:
        shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        raise ValueError(f"leading (batch/head) dims must broadcast, got {shapes}") from None


DEGENERATE = (
    "degenerate normaliser: φ(q)ᵀΣφ(k) + eps is <= 0 or not finite for {bad} of {total} queries (eps={eps}); the "
    "features underflowed or the feature map is not positive. Rescale the inputs, use a positive feature map, "
    "or pass eps > 0 (this changes the result)."
)


@dataclass
class Suspects:
    """What a form re-examines, in the contract's order, when its result came out bad.

    ``inputs``: the named raw tensors (q, k, v, ...); ``features``: recomputes (φ(q), φ(k)) on
    demand (a fast path never holds them whole); ``decay_ok``: a 0-dim bool tensor, False when
    a γ tensor held a value outside (0, 1]; ``decay``: what the user passed, for the message;
    ``checksum``: a 0-dim tensor, finite exactly when the inputs whose bad values might not
    reach the result are finite (default: ``checksum`` of the first two inputs, q and k).
    """

    inputs: dict[str, torch.Tensor]
    features: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None
    decay_ok: torch.Tensor | None = None
    decay: object = None
    checksum: torch.Tensor | None = None

    def __post_init__(self):
        if self.checksum is None:
            self.checksum = checksum(*list(self.inputs.values())[:2])

    def explain(self, normaliser: torch.Tensor | None, out: torch.Tensor, eps: float) -> None:
        """Raise the contract's first failing check; return if none fails (a sum overflowed, no entry)."""
        for name, x in self.inputs.items():
            require_finite(name, x)
        if self.features is not None:
            for name, phi in zip("qk", self.features()):
                require_finite_features(name, phi)
        if self.decay_ok is not None and not bool(self.decay_ok):
            raise ValueError(f"decay must lie in (0, 1], got {self.decay!r}")
        if normaliser is not None:
            degenerate = ~(normaliser > 0)  # <= 0 or NaN
            if degenerate.any():
                message = DEGENERATE.format(bad=int(degenerate.sum()), total=normaliser.numel(), eps=eps)
                raise ValueError(message)
            overflowed = int(torch.isinf(normaliser).sum())
            if overflowed:
                raise ValueError(
                    f"the normaliser φ(q)ᵀΣφ(k) + eps overflowed to inf for {overflowed} of {normaliser.numel()} "
                    "queries: the feature sums are too large for the dtype; rescale the inputs"
                )
        if not all_finite(out):
            raise ValueError("attention output is not finite: the feature sums overflowed; rescale the inputs")


def checksum(*tensors: torch.Tensor) -> torch.Tensor:
    """Σ of every entry of ``tensors`` (float32 or wider), 0-dim: NaN or ±∞ if any entry is, and
    finite otherwise unless finite entries overflow the sum (``Suspects.explain`` then finds nothing)."""
    wide = torch.float64 if tensors[0].dtype == torch.float64 else torch.float32
    return sum((x.sum(dtype=wide) for x in tensors[1:]), tensors[0].sum(dtype=wide))


def check_result(out: torch.Tensor, normaliser: torch.Tensor | None, eps: float, suspects: Suspects) -> torch.Tensor:
    """``out`` itself if it and the normaliser are sound; otherwise the error ``suspects`` explains.

    Sound: the sums of ``out`` and of the normaliser are finite (so is every entry) and the
    normaliser's minimum is > 0. All of it is decided by one host sync (one ``tolist``).
    """
    if out.numel() == 0:  # a batch dim of size 0: nothing to divide, nothing to check
        return out
    wide = torch.float32 if out.element_size() < 4 else out.dtype
    flags = [out.sum(dtype=wide), suspects.checksum.to(wide)]
    if normaliser is not None:
        flags += [normaliser.sum(dtype=wide), normaliser.amin().to(wide)]  # values[2], values[3]
    if suspects.decay_ok is not None:
        flags.append(suspects.decay_ok.to(wide))
    values = torch.stack(flags).tolist()
    sums_finite = all(math.isfinite(x) for x in values)
    positive = normaliser is None or values[3] > 0
    if not (sums_finite and positive and (suspects.decay_ok is None or values[-1] == 1)):
        suspects.explain(normaliser, out, eps)
    return out


def normalise(numerator: torch.Tensor, denominator: torch.Tensor, eps: float, suspects: Suspects) -> torch.Tensor:
    """out = numerator / (denominator + eps), refusing a degenerate normaliser (``check_result``).

    numerator [..., n, dv], denominator [..., n]. The denominator is φ(q_i)ᵀΣ_j φ(k_j);
    with eps = 0 it must be > 0 and finite for every query. eps > 0 adds a floor,
    which also changes the answer: the weights then sum to den / (den + eps) < 1.
    Differentiable (out of place).
    """
    normaliser = denominator + eps  # [..., n]
    return check_result(numerator / normaliser.unsqueeze(-1), normaliser, eps, suspects)
