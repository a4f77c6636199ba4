"""The validation contract shared by every attention form and the streaming state.

Bad input raises an error that names the argument, what was expected and what
arrived, before any arithmetic can turn it into a silent NaN.
"""

import math

import torch


def require_tensor(name: str, x: object, *, min_dims: int = 2) -> torch.Tensor:
    """Check that ``x`` is a floating-point tensor with at least ``min_dims`` dims."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must have a floating-point dtype, got {x.dtype}")
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


def check_qk(q: torch.Tensor, k: torch.Tensor, *, causal: bool) -> None:
    """Shapes and values of queries [..., n, d] and keys [..., m, d]."""
    require_tensor("q", q)
    require_tensor("k", k)
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
    require_finite("q", q)
    require_finite("k", k)


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> None:
    """Shapes and values of q [..., n, d], k [..., m, d], v [..., m, dv]."""
    check_qk(q, k, causal=causal)
    require_tensor("v", v)
    if v.dtype != q.dtype or v.device != q.device:
        raise ValueError(f"v must share dtype and device with q, got {v.dtype}/{v.device} and {q.dtype}/{q.device}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"k and v must have the same length, got {k.shape[-2]} and {v.shape[-2]}")
    if v.shape[-1] == 0:
        raise ValueError("v must have at least one feature dim, got dv=0")
    _require_broadcastable(q=q, k=k, v=v)
    require_finite("v", v)


def check_features(name: str, phi: torch.Tensor, rows: int) -> None:
    """A feature map's output: [..., rows, f] with f ≥ 1 and finite values."""
    if not isinstance(phi, torch.Tensor) or phi.dim() < 2 or phi.shape[-2] != rows:
        shape = tuple(phi.shape) if isinstance(phi, torch.Tensor) else type(phi).__name__
        raise ValueError(f"feature_map({name}) must return [..., {rows}, f], got {shape}")
    if phi.shape[-1] == 0:
        raise ValueError(f"feature_map({name}) returned zero features (f=0)")
    if not all_finite(phi):
        raise ValueError(f"feature_map({name}) produced non-finite features (overflow?); rescale the inputs")


def check_eps(eps: float) -> float:
    """eps is a finite float ≥ 0."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


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


def normalise(numerator: torch.Tensor, denominator: torch.Tensor, eps: float, *, in_place: bool = False) -> torch.Tensor:
    """out = numerator / (denominator + eps), refusing a degenerate normaliser.

    numerator [..., n, dv], denominator [..., n]. The denominator is φ(q_i)ᵀΣ_j φ(k_j);
    with eps = 0 it must be > 0 and finite for every query. eps > 0 adds a floor,
    which also changes the answer: the weights then sum to den / (den + eps) < 1.
    ``in_place`` divides ``numerator`` itself (only for a buffer the caller has just made).
    """
    denominator = denominator + eps  # [..., n]
    if denominator.amin().item() > 0 and all_finite(denominator):  # NaN fails the first test, ±inf the second
        bad = None
    else:
        bad = ~(denominator > 0) | ~torch.isfinite(denominator)
    if bad is not None and bad.any():
        raise ValueError(
            f"degenerate normaliser: φ(q)ᵀΣφ(k) + eps is <= 0 or not finite for {int(bad.sum())} of "
            f"{denominator.numel()} queries (eps={eps}); the features underflowed or the feature map is not "
            "positive. Rescale the inputs, use a positive feature map, or pass eps > 0 (this changes the result)."
        )
    if in_place:  # the caller's fresh buffer: no new tensor of the output's size
        out = numerator.div_(denominator.unsqueeze(-1)).contiguous()
    else:
        out = torch.empty(numerator.shape, dtype=numerator.dtype, device=numerator.device)  # contiguous
        torch.div(numerator, denominator.unsqueeze(-1), out=out)
    if not all_finite(out):
        raise ValueError("attention output is not finite: the feature sums overflowed; rescale the inputs")
    return out
