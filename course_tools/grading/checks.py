"""Building blocks of grader tests: fixed-seed inputs, calling the student, comparing answers.

The pattern every test follows (so mutating inputs cannot change a verdict):
make fresh inputs from a fixed seed (``course_lib.device.seeded_qkv``), compute the expected answer with course_lib
FIRST, then ``call`` the student's function, which only ever sees clones.
"""

from collections.abc import Callable

import torch

from course_lib.attention import linear_attention
from course_lib.device import seeded_qkv
from course_tools.grading.core import GradingFailure

EXACT = {"atol": 1e-10, "rtol": 1e-10}  # float64 answers that must agree to rounding (every exercise's default)
FLOAT32_HINT = (
    "errors of this size are float32 rounding: some tensor on the way is float32 while the inputs are "
    "float64 (torch.zeros, torch.ones and torch.tensor make float32 unless given dtype=q.dtype)"
)
COMPUTES_HINT = "a property's points go to an answer computed from its inputs"
Explain = Callable[[BaseException], str]  # the student's exception -> a hint naming the likely mistake, or ""


def _join(message: str, hint: str) -> str:
    return f"{message}; {hint}" if hint else message


def call(
    fn: Callable, *args: torch.Tensor, hint: str = "", explain: Explain | None = None, **kwargs: object
) -> object:
    """``fn(*clones of args, **kwargs)``; an exception in it becomes a ``GradingFailure`` (see ``attempt``)."""
    shapes = ", ".join(str(list(arg.shape)) for arg in args)
    extra = "".join(f", {key}={value!r}" for key, value in kwargs.items())
    shown = f"inputs of shape {shapes}{extra}"
    return attempt(fn, *(arg.clone() for arg in args), shown=shown, hint=hint, explain=explain, **kwargs)


def attempt(
    fn: Callable, *args: object, shown: str, hint: str = "", explain: Explain | None = None, **kwargs: object
) -> object:
    """``fn(*args, **kwargs)`` as given; an exception in it becomes a ``GradingFailure`` naming ``fn(shown)``.

    For arguments that are not tensors (sizes, a generator), where ``call`` has
    nothing to clone; ``shown`` describes them readably and stably, e.g.
    ``"8, 4, generator=<seeded with 3>"``. ``explain(error)`` may recognise the
    exception (a dtype clash, a broadcast of mismatched shapes) and return a hint
    naming the likely mistake; that hint then replaces ``hint``, which was written
    for wrong answers, not for crashes.
    """
    try:
        return fn(*args, **kwargs)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the student's exception is the feedback
        name = getattr(fn, "__name__", "your function")
        diagnosis = explain(error) if explain is not None else ""
        message = f"{name}({shown}) raised {type(error).__name__}: {error}"
        raise GradingFailure(_join(message, diagnosis or hint)) from None


def answers(
    fn: Callable,
    reference: Callable,
    inputs: tuple[torch.Tensor, ...],
    *,
    hint: str = "",
    explain: Explain | None = None,
    **kwargs: object,
) -> tuple[object, torch.Tensor]:
    """(fn's answer, the expected answer) on ``inputs``: the reference runs FIRST, fn gets clones."""
    expected = reference(*inputs, **kwargs)
    return call(fn, *inputs, hint=hint, explain=explain, **kwargs), expected


def expect_output(
    out: object,
    expected: torch.Tensor,
    *,
    hint: str = "",
    layout: str = "[..., n, dv]",
    dtype_reason: str = "the inputs' dtype",
) -> torch.Tensor:
    """``out`` must be a finite tensor with ``expected``'s shape and dtype; returns it on the CPU.

    ``hint`` is added to the message about NaN/inf entries (type, shape and dtype
    messages speak for themselves); ``layout`` names the expected axes and
    ``dtype_reason`` why that dtype is expected.
    """
    shape = f"{list(expected.shape)} = {layout}"
    if not isinstance(out, torch.Tensor):
        raise GradingFailure(f"expected a torch.Tensor of shape {shape}, got {type(out).__name__}")
    if out.shape != expected.shape:
        raise GradingFailure(f"output has shape {list(out.shape)}, expected {shape}")
    if out.dtype != expected.dtype:
        raise GradingFailure(f"output has dtype {out.dtype}, expected {expected.dtype} ({dtype_reason})")
    bad = ~torch.isfinite(out.detach().cpu())
    if bad.any():
        first = tuple(int(i) for i in bad.nonzero()[0])
        raise GradingFailure(
            _join(f"output holds {int(bad.sum())} NaN/inf entries of {out.numel()} (first at index {first})", hint)
        )
    return out.detach().cpu()


def looks_like_float32_rounding(error: torch.Tensor, expected: torch.Tensor, rtol: float) -> bool:
    """True when a float64 answer misses by 1e-9 .. 1e-5 of the output's size: float32 rounding, not a formula.

    A wrong formula misses by a sizeable fraction of the output; a float32 tensor
    somewhere on the way (eps 1.2e-7) leaves errors of ~1e-7 relative. Only asked
    of float64 answers graded to rounding (``rtol`` below 1e-8).
    """
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    if expected.dtype != torch.float64 or rtol >= 1e-8 or not scale > 0:
        return False
    return 1e-9 < float(error.max()) / scale < 1e-5


def expect_close(
    out: torch.Tensor,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    hint: str = "",
    float32_hint: str = FLOAT32_HINT,
) -> None:
    """|out - expected| ≤ atol + rtol·|expected| everywhere, else name the worst entry.

    When the miss looks like float32 rounding (``looks_like_float32_rounding``),
    ``float32_hint`` replaces ``hint``: the formula is right, a dtype is not.
    """
    error = (out - expected).abs()
    excess = error - (atol + rtol * expected.abs())
    if (excess > 0).any():
        worst = int(error.argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), error.shape))
        relative = float(error.max()) / max(float(expected.abs().max()), 1e-300)
        message = f"output differs from the reference: max |error| {float(error.max()):.3g} at index {index}"
        if looks_like_float32_rounding(error, expected, rtol):
            message, hint = f"{message} ({relative:.1e} of the output's size)", float32_hint
        raise GradingFailure(_join(message, hint))


def compare(
    out: object,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    hint: str = "",
    layout: str = "[..., n, dv]",
    float32_hint: str = FLOAT32_HINT,
) -> None:
    """``expect_output`` then ``expect_close``: right type, shape, dtype, finite, and values."""
    checked = expect_output(out, expected, hint=hint, layout=layout)
    expect_close(checked, expected, atol=atol, rtol=rtol, hint=hint, float32_hint=float32_hint)


def compare_batched(
    fn: Callable,
    reference: Callable,
    inputs: tuple[torch.Tensor, ...],
    *,
    atol: float,
    rtol: float,
    advice: str = "use k.transpose(-2, -1), not k.T",
    layout: str = "[..., n, dv]",
    explain: Explain | None = None,
    **kwargs: object,
) -> None:
    """``compare`` on batched inputs [B, H, n, d], with a hint that says whether the batch dims are to blame.

    On a mismatch the first slice [n, d] is graded alone (inputs with two dims
    stay whole): right there means the batch handling is wrong, and ``advice``
    says how to fix it (typically ``.T``); wrong there means the formula is.
    ``layout`` names the output's axes; ``explain`` goes to ``attempt``; ``kwargs`` go to
    both ``fn`` and ``reference``.
    """
    def check(given: tuple[torch.Tensor, ...]) -> None:
        compare(*answers(fn, reference, given, explain=explain, **kwargs), atol=atol, rtol=rtol, layout=layout)

    first = tuple(x[(0,) * (x.dim() - 2)] for x in inputs)  # [n, d]: one batch entry, one head
    blame_batch_dims(check, inputs, first, advice)


def blame_batch_dims(check: Callable[[tuple], None], batched: tuple, single: tuple, advice: str,
                     first_fix: str = "the `values` test") -> None:
    """``check(batched)``; on a failure, ``check(single)`` (one batch entry, one head) tells the student
    whether the batch dims are to blame (``advice`` says how to keep them) or the formula is."""
    try:
        check(batched)
    except GradingFailure as failure:
        try:
            check(single)
            hint = f"a single [n, d] slice is right, so the batch dims are mishandled: {advice}"
        except GradingFailure:
            hint = f"the answer is wrong even without batch dims: fix {first_fix} first"
        raise GradingFailure(f"{failure}; {hint}") from None


def expect_within_noise(
    estimate: torch.Tensor,
    target: torch.Tensor | float,
    standard_error: torch.Tensor | float,
    *,
    z: float,
    what: str,
    hint: str = "",
) -> None:
    """|estimate − target| ≤ z · standard_error everywhere (a CLT tolerance for a Monte Carlo average).

    ``what`` names the estimated quantity in the message, which gives the worst
    entry, its target and the allowed spread; tensors broadcast against each other.
    """
    values = (torch.as_tensor(x, dtype=torch.float64) for x in (estimate, target, standard_error))
    estimate, target, error = torch.broadcast_tensors(*values)
    excess = (estimate - target).abs() / error  # [...] in standard errors
    if not (excess <= z).all():  # NaN counts as a failure
        worst = int(torch.nan_to_num(excess, nan=torch.inf).argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), excess.shape))
        where = f" at index {index}" if index else ""
        value, expected, spread = (float(x.flatten()[worst]) for x in (estimate, target, error))
        allowed = f"{expected:.4g} ± {z * spread:.2g} ({z:g} standard errors)"
        raise GradingFailure(_join(f"{what}{where} is {value:.4g}, expected {allowed}", hint))


def expect_no_future_leak(
    fn: Callable,
    reference: Callable,
    inputs: tuple[torch.Tensor, ...],
    future: tuple[torch.Tensor, ...],
    *,
    t: int,
    hint: str = "",
    explain: Explain | None = None,
    names: tuple[str, ...] = ("q", "k", "v"),
    axes: tuple[int, ...] | None = None,
    **kwargs: object,
) -> None:
    """Causal attention: outputs 0..t of ``fn`` must not move when only the tokens after position t change,
    and must move when one input (each of ``names``, the leading inputs) changes at positions 0..t.

    ``fn`` runs on ``inputs`` (each [..., n, ·], or positions on ``axes``) and again on them
    with the rows after t taken from ``future`` (same shapes); then once per name with only
    that input's rows 0..t taken from ``future``: a constant or copied answer does not leak
    either, so it earns nothing here. ``reference`` gives the expected shapes. The message
    names the first position that moved; ``explain`` goes to ``attempt``.
    """
    axes = (-2,) * len(inputs) if axes is None else axes  # the positions axis of every input

    def splice(early: torch.Tensor, late: torch.Tensor, axis: int) -> torch.Tensor:  # 0..t of early, then late
        return torch.cat([early.narrow(axis, 0, t + 1), late.narrow(axis, t + 1, late.shape[axis] - t - 1)], axis)

    spliced = tuple(splice(x, y, a) for x, y, a in zip(inputs, future, axes, strict=True))  # past kept
    before = expect_output(*answers(fn, reference, inputs, hint=hint, explain=explain, **kwargs), hint=hint)
    after = expect_output(*answers(fn, reference, spliced, hint=hint, explain=explain, **kwargs), hint=hint)
    moved = ((before - after).abs()[..., : t + 1, :] > 1e-12).any(dim=-1)  # [..., t + 1]
    if moved.any():
        position = int(moved.nonzero()[:, -1].min())
        raise GradingFailure(
            _join(
                f"output at position {position} changed when only the tokens after position {t} changed: "
                "the future leaks into the past",
                hint,
            )
        )
    for index, name in enumerate(names):  # and the past does reach the past outputs
        past = tuple(splice(y, x, a) if i == index else x for i, (x, y, a) in enumerate(zip(inputs, future, axes)))
        again = expect_output(*answers(fn, reference, past, hint=hint, explain=explain, **kwargs), hint=hint)
        if torch.equal(again[..., : t + 1, :], before[..., : t + 1, :]):
            raise GradingFailure(
                f"outputs 0..{t} stay the same when {name} at positions 0..{t} changes: a constant or copied "
                f"answer has no future to leak; {COMPUTES_HINT} ({', '.join(names)})"
            )


def constant_value_inputs(
    q: torch.Tensor, k: torch.Tensor, value: tuple[float, ...]
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """Inputs (q, k, v) whose every value row is ``value``, and the answer any normalised attention gives.

    q [..., n, d] and k [..., m, d] are kept; v is [..., m, dv] and the expected
    output [..., n, dv] with every row ``value``: weights that sum to 1 average
    copies of one vector into that vector, whatever the weights are.
    """
    row = torch.tensor(value, dtype=q.dtype)  # [dv]
    v = row.expand(*k.shape[:-1], len(value)).clone()  # [..., m, dv]
    return (q, k, v), row.expand(*q.shape[:-1], len(value)).clone()  # [..., n, dv]


def long_causal_inputs(n: int, *, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 q, k [n, 2] and v [n, 2] = noise + k, so every causal output depends on the keys it saw
    (the long-sequence tests of the causal exercises 5 and 6)."""
    q, k, v = seeded_qkv(n=n, d=2, seed=seed, dtype=torch.float32)
    return q, k, v + k


def long_causal_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **_: object) -> torch.Tensor:
    """Causal linear attention in float64 by prefix sums ([n, d, dv] of state: 32 MB at 2**20), in q's dtype."""
    exact = linear_attention(q.double(), k.double(), v.double(), causal=True, method="parallel")
    return exact.to(q.dtype)




def expect_computes(
    fn: Callable,
    inputs: tuple[torch.Tensor, ...],
    names: tuple[str, ...],
    *,
    seed: int,
    explain: Explain | None = None,
    **kwargs: object,
) -> None:
    """``fn`` must compute its answer from every input: the same inputs give the same answer, fresh
    values of any one input named in ``names`` move it.

    A property (a shape, no leak from the future, an exact constant) holds for a constant
    answer, a copy of one input or random numbers too; a test gates its points on this first.
    ``names`` names the leading ``inputs`` in order (``None`` skips one); each is replaced in
    turn by fresh standard-normal values of its shape and dtype (an integer input, positions,
    by a permutation of 0 .. n−1 plus 7), drawn from a generator seeded 10 000 + ``seed``; ``kwargs``
    go to every call.
    """
    first = call(fn, *inputs, explain=explain, **kwargs)
    again = call(fn, *inputs, explain=explain, **kwargs)
    if not all(isinstance(x, torch.Tensor) for x in (first, again)) or first.shape != again.shape:
        return  # not a tensor, or not one shape: the test's own checks say what is wrong
    if not torch.isfinite(first.detach().cpu()).all():
        return  # NaN or inf: the test's own checks name the first one
    if not torch.equal(first.detach().cpu(), again.detach().cpu()):
        gap = float((first.detach().cpu().double() - again.detach().cpu().double()).abs().max())
        raise GradingFailure(
            f"two calls with the same inputs gave different outputs (max difference {gap:.3g}): "
            f"{COMPUTES_HINT}, not random numbers (draw any randomness from the generator you are given)"
        )
    g = torch.Generator().manual_seed(10_000 + seed)  # never the stream that made the inputs (seeded_qkv)
    for index, name in enumerate(names):
        if name is None:
            continue
        x = inputs[index]
        if x.is_floating_point():
            fresh = torch.randn(x.shape, generator=g, dtype=x.dtype)
        else:
            fresh = (torch.randperm(x.shape[-1], generator=g) + 7).expand(x.shape).clone().to(x.dtype)
        changed = (*inputs[:index], fresh, *inputs[index + 1 :])
        moved = call(fn, *changed, explain=explain, **kwargs)
        if not isinstance(moved, torch.Tensor) or moved.shape != first.shape:
            return
        if torch.equal(moved.detach().cpu(), first.detach().cpu()):
            raise GradingFailure(
                f"the output stays the same when {name} changes: {COMPUTES_HINT} ({', '.join(n for n in names if n)})"
            )
