"""The validation contract shared by every attention form and the streaming state.

Bad input raises a ``ValueError`` that names the argument, what was expected and what
arrived. An attention call enters this module twice: ``check_inputs`` checks shapes, dtypes and
options up front, before any arithmetic, and ``Inputs.finish`` checks the values with the result, by
one host sync (``check_result``): a NaN or ∞ in v always reaches the output (0·∞ is NaN too),
but one in q or k need not — ReLU maps −∞ to 0 — so a ``checksum`` finite exactly when q and
k are is checked beside the output and the normaliser: a running sum of q and k, or, on the
engine's elu + 1 path (whose φ is non-finite exactly when its input is), the ledger's
z = Σφ(k) (``feature_maps.bad_values_reach_the_sums``). Only when one is bad are the inputs
re-scanned (``Suspects.explain``), in the contract's order — q, k, v, then the features, then
the gates (decay γ, the delta rule's β), then the normaliser, then the output — so the error
still names the culprit, with the same message an up-front scan would give. Scalar options
have one message style: "{name} must be {what is expected}, got {value!r}".
"""

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from course_lib.linear_forms import divide

_HALF_TYPES = (torch.float16, torch.bfloat16)


class ArgumentTypeError(ValueError, TypeError):
    """An argument of the wrong type: a ``ValueError`` like every refusal here, and a ``TypeError``."""


# --- scalar options ---------------------------------------------------------------------------------


def _refuse(name: str, expected: str, value: object, meaning: str | None, error: type = ValueError):
    why = f" ({meaning})" if meaning else ""
    raise error(f"{name} must be {expected}{why}, got {value!r}")


def check_flag(name: str, value: object, *, meaning: str | None = None) -> bool:
    """A yes/no option is a real bool: ``causal="no"`` is not silently truthy."""
    if not isinstance(value, bool):
        _refuse(name, "True or False", value, meaning, ArgumentTypeError)
    return value


def check_int(name: str, value: object, *, at_least: int = 1, optional: bool = False,
              meaning: str | None = None) -> int | None:
    """A whole number (an int or a numpy integer, not a bool) ≥ ``at_least``; or None if ``optional``."""
    if optional and value is None:
        return None
    expected = ("a positive int" if at_least == 1 else f"an int >= {at_least}") + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _refuse(name, expected, value, meaning, ArgumentTypeError)
    if value < at_least:
        _refuse(name, expected, value, meaning)
    return int(value)


def check_ints(*, at_least: int = 1, **values: object) -> None:
    """``check_int`` of each named value: ``check_ints(n=n, d=d)``."""
    for name, value in values.items():
        check_int(name, value, at_least=at_least)


def check_number(name: str, value: object, *, above: float | None = None, at_least: float | None = None,
                 optional: bool = False, unit: str | None = None, meaning: str | None = None) -> float | None:
    """A finite real number (not a bool), > ``above`` or ≥ ``at_least`` when given; or None if ``optional``."""
    if optional and value is None:
        return None
    bound = f" > {above}" if above is not None else f" >= {at_least}" if at_least is not None else ""
    expected = f"a finite number{f' of {unit}' if unit else ''}{bound}" + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _refuse(name, expected, value, meaning, ArgumentTypeError)
    low_ok = (above is None or value > above) and (at_least is None or value >= at_least)
    if not (math.isfinite(value) and low_ok):
        _refuse(name, expected, value, meaning)
    return float(value)


def check_choice(name: str, value: object, choices: tuple) -> object:
    """One of ``choices``."""
    if value not in choices:
        _refuse(name, f"one of {tuple(choices)!r}", value, None)
    return value


def check_eps(eps: object, dtype: torch.dtype | None = None) -> float:
    """eps is a finite float ≥ 0, and finite in ``dtype``'s working dtype (1e300 is ∞ in float32)."""
    eps = check_number("eps", eps, at_least=0)
    if dtype is not None and eps > torch.finfo(working_dtype(dtype)).max:
        raise ValueError(f"eps must be a finite number >= 0 in {working_dtype(dtype)}, got {eps!r} (overflows)")
    return eps


def check_decay(decay: object, batch: torch.Size, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log γ [*batch] in like's dtype/device, γ as a tensor whose values are still to be checked, or None).

    γ is a number in (0, 1], checked here, or a tensor of them broadcasting to the batch dims,
    whose values are checked with the result (a gate of ``Suspects``). Differentiable in a tensor γ.
    """
    if isinstance(decay, bool) or not isinstance(decay, (int, float, torch.Tensor)):
        raise ArgumentTypeError(f"decay must be a number in (0, 1] or a tensor of them, got {decay!r}")
    if isinstance(decay, torch.Tensor):
        gamma = unchecked = decay.to(device=like.device, dtype=like.dtype)
    elif not (math.isfinite(decay) and 0 < decay <= 1):
        raise ValueError(f"decay must lie in (0, 1], got {decay!r}")
    else:
        gamma, unchecked = torch.tensor(float(decay), dtype=like.dtype, device=like.device), None
    try:
        return gamma.log().expand(batch), unchecked
    except RuntimeError:
        raise ValueError(f"decay of shape {tuple(gamma.shape)} must broadcast to the batch dims {tuple(batch)}") from None


# --- tensors ----------------------------------------------------------------------------------------


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


def check_log_decay(log_decay: object, q: torch.Tensor, *, per_channel: bool = True) -> torch.Tensor:
    """A log gate as [..., n, dk] or [..., n, 1]: ``log_decay`` [..., n, dk] (as many dims as q, one gate per
    key channel; refused unless ``per_channel``) or [..., n] (one per token); refuses a positive or
    non-finite entry, naming the first."""
    require_tensor("log_decay", log_decay, min_dims=1)
    if log_decay.dtype != q.dtype or log_decay.device != q.device:
        raise ValueError(f"log_decay must share dtype and device with q, got {log_decay.dtype}/{log_decay.device} "
                         f"and {q.dtype}/{q.device}")
    n, dk = q.shape[-2:]
    if per_channel and log_decay.dim() == q.dim() and log_decay.shape[-2:] == (n, dk):
        gates = log_decay
    elif log_decay.dim() == q.dim() - 1 and log_decay.shape[-1] == n:
        gates = log_decay.unsqueeze(-1)
    else:
        channel = f"[..., n, dk] = [..., {n}, {dk}] (one gate per key channel, as many dims as q) or " if per_channel else ""
        raise ValueError(f"log_decay must be {channel}[..., n] = [..., {n}] (one per token, one dim fewer than q), "
                         f"got {tuple(log_decay.shape)} for q {tuple(q.shape)}")
    if log_decay.numel() == 0:
        return gates
    lowest, highest = torch.aminmax(log_decay)  # one pass; a NaN makes both NaN, and NaN <= 0 is False
    if not (highest <= 0 and lowest > -torch.inf):
        bad = ~(log_decay <= 0) | torch.isinf(log_decay)  # positive, NaN or −inf
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"log_decay must be finite and <= 0 (a gate exp(g) in (0, 1]), found {int(bad.sum())} "
                         f"entries that are not, the first at {index}: {log_decay[index].item()!r}")
    return gates


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


def require_in_unit_interval(name: str, x: torch.Tensor) -> None:
    """Raise if ``x`` holds a value outside (0, 1] (a NaN included)."""
    outside = ~_in_unit_interval(x)
    if outside.any():
        raise ValueError(f"{name} must lie in (0, 1], found {int(outside.sum())} of {x.numel()} values outside it")


def _in_unit_interval(x: torch.Tensor) -> torch.Tensor:
    return (x > 0) & (x <= 1)


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the arithmetic runs in: float32 for float16/bfloat16 inputs (their sums overflow at
    65504, or keep 8 bits), the inputs' own dtype otherwise. Outputs come back in the inputs' dtype."""
    return torch.float32 if dtype in _HALF_TYPES else dtype


def broadcast_batch(**tensors: torch.Tensor) -> torch.Size:
    """The common leading (batch/head) shape of tensors laid out as [..., n, d]."""
    shapes = [t.shape[:-2] for t in tensors.values()]
    if all(shape == shapes[0] for shape in shapes):
        return shapes[0]  # the usual case, without torch.broadcast_shapes' ~30 µs
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError:
        shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        raise ValueError(f"leading (batch/head) dims must broadcast, got {shapes}") from None


def _check_shapes(q: object, k: object, v: object | None, causal: object) -> torch.Size:
    """q [..., n, d], k [..., m, d] and v [..., m, dv] (if given) that fit together: their common batch dims."""
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
    if v is None:
        return broadcast_batch(q=q, k=k)
    require_tensor("v", v)
    if v.dtype != q.dtype or v.device != q.device:
        raise ValueError(f"v must share dtype and device with q, got {v.dtype}/{v.device} and {q.dtype}/{q.device}")
    if v.shape[-2] != m:
        raise ValueError(f"k and v must have the same length, got {m} and {v.shape[-2]}")
    if v.shape[-1] == 0:
        raise ValueError("v must have at least one feature dim, got dv=0")
    return broadcast_batch(q=q, k=k, v=v)


# --- one attention call: its inputs, then its result -----------------------------------------------


@dataclass
class Inputs:
    """One call's inputs as ``check_inputs`` accepted them, and the check of its result (``finish``)."""

    q: torch.Tensor  # [*batch, n, d] in the working dtype, expanded (no copy) to the common batch dims
    k: torch.Tensor  # [*batch, m, d]
    v: torch.Tensor | None  # [*batch, m, dv]
    dtype: torch.dtype  # the inputs' own, which the output comes back in
    eps: float
    chunk_size: int | None
    log_gamma: torch.Tensor | None  # [*batch]: log γ of ``decay``, in the ledger's dtype
    gates: dict[str, torch.Tensor]  # {"decay": γ} for a γ tensor, whose values are checked with the result

    def finish(self, out: torch.Tensor, normaliser: torch.Tensor | None = None, *,
               features: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
               checksum: torch.Tensor | None = None, more: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """``out`` in the inputs' dtype once ``check_result`` accepts it with its normaliser [..., n].

        ``features`` recomputes (φ(q), φ(k)) to blame; ``checksum`` replaces Σq + Σk (``Suspects``);
        ``more`` names tensors to blame after q, k and v.
        """
        named = {"q": self.q, "k": self.k} | ({} if self.v is None else {"v": self.v}) | (more or {})
        suspects = Suspects(named, features, self.gates, checksum)
        return check_result(out, normaliser, self.eps, suspects).to(self.dtype)

    def normalise(self, numerator: torch.Tensor, denominator: torch.Tensor, *,
                  features: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None) -> torch.Tensor:
        """out = numerator / (denominator + eps), refusing a degenerate normaliser (``finish``).

        numerator [..., n, dv], denominator [..., n]. The denominator is φ(q_i)ᵀΣ_j φ(k_j);
        with eps = 0 it must be > 0 and finite for every query. eps > 0 adds a floor,
        which also changes the answer: the weights then sum to den / (den + eps) < 1.
        Differentiable (out of place).
        """
        return self.finish(*divide(numerator, denominator, self.eps), features=features)


def check_inputs(
    q: object, k: object, v: object | None = None, *, causal: object, eps: object = 0.0, method: object = None,
    methods: tuple[str, ...] = (), chunk_size: object = None, decay: object = None,
    ledger_dtype: torch.dtype | None = None,
) -> Inputs:
    """Everything a form checks before its arithmetic, in the contract's order: the shapes of
    q [..., n, d], k [..., m, d] and v [..., m, dv] (v None for a form of weights), ``causal``,
    ``eps`` (finite in the ledger's dtype), ``method`` (one of ``methods``), ``chunk_size`` (a
    positive int or None) and ``decay`` (needs causal). ``ledger_dtype``: the dtype the sums are
    kept in, default the working dtype (``working_dtype``)."""
    batch = _check_shapes(q, k, v, causal)
    work = working_dtype(q.dtype)
    ledger_dtype = ledger_dtype or work
    eps = check_eps(eps, ledger_dtype)
    if method is not None:
        check_choice("method", method, methods)
    chunk_size = check_int("chunk_size", chunk_size, optional=True)
    dtype = q.dtype
    q, k, v = (None if x is None else x.expand(*batch, *x.shape[-2:]).to(work) for x in (q, k, v))
    log_gamma, gates = None, {}
    if decay is not None:
        if not causal:
            raise ValueError(f"decay weights the past by γ^(i-j): it needs causal=True, got causal={causal}")
        log_gamma, gamma = check_decay(decay, batch, q.new_empty(0, dtype=ledger_dtype))
        gates = {} if gamma is None else {"decay": gamma}
    return Inputs(q, k, v, dtype, eps, chunk_size, log_gamma, gates)


_DEGENERATE = (
    "degenerate normaliser: φ(q)ᵀΣφ(k) + eps is <= 0 or not finite for {bad} of {total} queries (eps={eps}); the "
    "features underflowed or the feature map is not positive. Rescale the inputs, use a positive feature map, "
    "or pass eps > 0 (this changes the result)."
)


@dataclass
class Suspects:
    """What a form re-examines, in the contract's order, when its result came out bad.

    ``inputs``: the named raw tensors (q, k, v, ...); ``features``: recomputes (φ(q), φ(k)) on
    demand (a fast path never holds them whole); ``gates``: named tensors whose values must lie
    in (0, 1] (decay γ, the delta rule's β), checked with the result; ``checksum``: a 0-dim
    tensor, finite exactly when the inputs whose bad values might not reach the result are
    finite (default: Σ of the first two inputs, q and k); ``overflow``: why a finite input
    can still give a non-finite output.
    """

    inputs: dict[str, torch.Tensor]
    features: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None
    gates: dict[str, torch.Tensor] = field(default_factory=dict)
    checksum: torch.Tensor | None = None
    overflow: str = "the feature sums overflowed; rescale the inputs"

    def __post_init__(self):
        if self.checksum is None:
            self.checksum = _checksum(*list(self.inputs.values())[:2])

    def explain(self, normaliser: torch.Tensor | None, out: torch.Tensor, eps: float) -> None:
        """Raise the contract's first failing check; return if none fails (a sum overflowed, no entry)."""
        for name, x in self.inputs.items():
            require_finite(name, x)
        if self.features is not None:
            for name, phi in zip("qk", self.features()):
                if not all_finite(phi):
                    message = "produced non-finite features (overflow?); rescale the inputs"
                    raise ValueError(f"feature_map({name}) {message}")
        for name, gate in self.gates.items():
            require_in_unit_interval(name, gate)
        if normaliser is not None:
            degenerate = ~(normaliser > 0)  # <= 0 or NaN
            if degenerate.any():
                message = _DEGENERATE.format(bad=int(degenerate.sum()), total=normaliser.numel(), eps=eps)
                raise ValueError(message)
            overflowed = int(torch.isinf(normaliser).sum())
            if overflowed:
                raise ValueError(
                    f"the normaliser φ(q)ᵀΣφ(k) + eps overflowed to inf for {overflowed} of {normaliser.numel()} "
                    "queries: the feature sums are too large for the dtype; rescale the inputs"
                )
        if not all_finite(out):
            raise ValueError(f"attention output is not finite: {self.overflow}")


def _checksum(*tensors: torch.Tensor) -> torch.Tensor:
    """Σ of every entry of ``tensors`` (float32 or wider), 0-dim: NaN or ±∞ if any entry is, and
    finite otherwise unless finite entries overflow the sum (``Suspects.explain`` then finds nothing)."""
    wide = torch.float64 if tensors[0].dtype == torch.float64 else torch.float32
    return sum((x.sum(dtype=wide) for x in tensors[1:]), tensors[0].sum(dtype=wide))


def check_result(out: torch.Tensor, normaliser: torch.Tensor | None, eps: float, suspects: Suspects) -> torch.Tensor:
    """``out`` itself if it and the normaliser are sound; otherwise the error ``suspects`` explains.

    Sound: the sums of ``out`` and of the normaliser are finite (so is every entry), the
    normaliser's minimum is > 0 and every gate lies in (0, 1]. All of it is decided by one host
    sync (one ``tolist``).
    """
    if out.numel() == 0:  # a batch dim of size 0: nothing to divide, nothing to check
        return out
    wide = torch.float32 if out.element_size() < 4 else out.dtype
    flags = [out.sum(dtype=wide), suspects.checksum.to(wide)]
    if normaliser is not None:
        flags += [normaliser.sum(dtype=wide), normaliser.amin().to(wide)]  # values[2], values[3]
    gates = [_in_unit_interval(gate).all().to(wide) for gate in suspects.gates.values()]
    values = torch.stack(flags + gates).tolist()
    sums_finite = all(math.isfinite(x) for x in values)
    positive = normaliser is None or values[3] > 0
    if not (sums_finite and positive and all(x == 1 for x in values[len(flags):])):
        suspects.explain(normaliser, out, eps)
    return out
