"""Grader tests of exercise 12: ``gated_ledger(q, k, v, log_decay, state=None)``, the gated ledger token by token.

With S_{−1} = ``state`` (zeros [..., dk, dv] when None) and, for t = 0 … n−1,
S_t = diag(exp(g_t)) S_{t−1} + k_t v_tᵀ and o_t = d_k^−½ S_tᵀq_t; the log gate ``log_decay`` is
[..., n, dk] (one gate per key channel, GLA) or [..., n] (one per token, Mamba-2). The answer is the
pair (out [..., n, dv], S_{n−1} [..., dk, dv]), so calls chain. The answer key is
``course_lib.gated.gated_linear_attention`` with ``method="recurrent"`` (float64, tolerance 1e-10).
"""

import torch

from course_lib.device import seeded_qkv
from course_lib.gated import gated_linear_attention
from course_tools.grading.checks import (
    EXACT,
    answers,
    blame_batch_dims,
    call,
    expect_close,
    expect_computes,
    expect_no_future_leak,
    expect_output,
)
from course_tools.grading.core import GradingFailure, grader_test
from course_tools.grading.exercises.ex06_chunked_causal import DTYPE_CLASH

FUNCTION_NAME = "gated_ledger"
TITLE = "The gated ledger: each window decides how much of the past to keep"
FORBIDDEN = (
    "course_lib.gated.gated_linear_attention",
    "course_lib.gated.gated_recurrent",
    "course_lib.gated.gated_chunked",
    "course_lib.gated.GatedLedgerState",
)

FORMULA_HINT = (
    "expected S_t = diag(exp(g_t)) S_{t−1} + k_t v_tᵀ (fade the old ledger, then write) and o_t = d_k^−½ S_tᵀq_t, "
    "no normaliser"
)
PAIR_HINT = "return the pair (out, S): the outputs [..., n, dv] and the ledger after the last token [..., dk, dv]"
STATE_HINT = (
    "the second call must start from the state the first returned (S = state when one is given, zeros only "
    "when it is None), and return the ledger after its last token, unscaled"
)
GATE_SHAPE_HINT = (
    "tell the gate's two shapes apart by their number of dims: log_decay.dim() == q.dim() is one gate per key "
    "channel, one fewer is one per token (log_decay.unsqueeze(-1) makes it [..., n, 1])"
)
GATE_AXIS_HINT = (
    "the gate meets the ledger S [..., dk, dv] on the wrong axis: it fades S's rows, one per key channel, so "
    "fade S with exp(g_t).unsqueeze(-1) ([..., dk, 1]) per channel, exp(g_t)[..., None, None] per token"
)
LEDGER_DTYPE_HINT = (
    "your ledger is float32 while the inputs are float64: torch.zeros(dk, dv) makes float32 unless told "
    "otherwise; create S with q.new_zeros(..., dk, dv) or torch.zeros(..., dtype=q.dtype, device=q.device)"
)
BROADCAST = ("must match the size of tensor", "shape mismatch", "cannot be broadcast")
NAMES = ("q", "k", "v", "log_decay")


def explain(error: BaseException) -> str:
    """A hint for the crashes this exercise invites: a float32 ledger meeting float64 inputs, a gate of the
    wrong shape meeting the ledger; else ""."""
    if any(clash in str(error) for clash in DTYPE_CLASH):
        return LEDGER_DTYPE_HINT
    if "too many indices" in str(error):
        return GATE_SHAPE_HINT
    return GATE_AXIS_HINT if any(text in str(error) for text in BROADCAST) else ""


def ledger_key(q, k, v, log_decay, state=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer key: course_lib's gated ledger, (out [..., n, dv], S after [..., dk, dv])."""
    return gated_linear_attention(q, k, v, log_decay, method="recurrent", initial_state=state, return_state=True)


def out_key(q, k, v, log_decay, state=None) -> torch.Tensor:
    """The key's outputs alone, for the checks that look at outputs only."""
    return ledger_key(q, k, v, log_decay, state)[0]


def outputs_of(fn):
    """``fn`` with only its outputs kept: a property check (computed from its inputs, no leak) looks at those."""

    def answer(*args, **kwargs):
        result = fn(*args, **kwargs)
        return result[0] if isinstance(result, (tuple, list)) and len(result) == 2 else result

    answer.__name__ = answer.__qualname__ = getattr(fn, "__name__", "your function")
    return answer


def make_gates(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Log gates in [−1.5, −0.05] of ``shape``: strong enough that a sign or an order is seen."""
    u = torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return -1.5 + 1.45 * u


def inputs(*, n: int, dk: int, dv: int, seed: int, batch: tuple[int, ...] = (), per_channel: bool = True,
           dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
    """q, k [*batch, n, dk], v [*batch, n, dv] and the log gate, [*batch, n, dk] or [*batch, n]."""
    q, k, v = seeded_qkv(*batch, n=n, m=n, d=dk, dv=dv, seed=seed, dtype=dtype)
    gates = make_gates(*batch, n, *((dk,) if per_channel else ()), seed=seed + 1000, dtype=dtype)
    return q, k, v, gates


def a_state(*batch: int, dk: int, dv: int, seed: int) -> torch.Tensor:
    """A non-zero ledger to start from, [*batch, dk, dv] in float64."""
    return torch.randn(*batch, dk, dv, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def pair(result: object, expected: tuple[torch.Tensor, torch.Tensor], *, hint: str = "",
         dtype_reason: str = "the inputs' dtype") -> tuple[torch.Tensor, torch.Tensor]:
    """(out, S) from the student's ``result``, each a finite tensor of the expected shape and dtype."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = f"{type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else type(result).__name__
        raise GradingFailure(f"expected a pair (out, state), got a {got}; {PAIR_HINT}")
    out = expect_output(result[0], expected[0], hint=hint, dtype_reason=dtype_reason)
    try:
        state = expect_output(result[1], expected[1], hint=hint, layout="[..., dk, dv]", dtype_reason=dtype_reason)
    except GradingFailure as failure:
        raise GradingFailure(f"the state (the second result): {failure}") from None
    return out, state


def expect_pair_close(got: tuple[torch.Tensor, torch.Tensor], expected: tuple[torch.Tensor, torch.Tensor], *,
                      hint: str, state_hint: str = "") -> None:
    """Outputs and the ledger after both equal the key's to rounding (float64)."""
    expect_close(got[0], expected[0], **EXACT, hint=hint, float32_hint=LEDGER_DTYPE_HINT)
    try:
        expect_close(got[1], expected[1], **EXACT, hint=state_hint or hint, float32_hint=LEDGER_DTYPE_HINT)
    except GradingFailure as failure:
        raise GradingFailure(f"the outputs are right, but the state (the ledger after the last token): {failure}"
                             ) from None


def graded(fn, given: tuple[torch.Tensor, ...], *, hint: str = FORMULA_HINT, state_hint: str = "") -> None:
    """``fn(*given)`` must return the key's pair in float64 (``given`` may end with a state)."""
    result, expected = answers(fn, ledger_key, given, hint=hint, explain=explain)
    expect_pair_close(pair(result, expected, hint=hint), expected, hint=hint, state_hint=state_hint)


@grader_test(points=1)
def shape_and_dtype(fn):
    """returns the pair (out [..., n, dv], state [..., dk, dv]) in the inputs' dtype (float64 and float32), from q, k, v, g"""
    reason = "the inputs' dtype; a ledger made by torch.zeros(dk, dv) is float32: use q.new_zeros(..., dk, dv)"
    for dtype in (torch.float64, torch.float32):
        given = inputs(n=7, dk=4, dv=3, seed=121, dtype=dtype)
        result, expected = answers(fn, ledger_key, given, hint=FORMULA_HINT, explain=explain)
        pair(result, expected, hint=FORMULA_HINT, dtype_reason=reason)
    expect_computes(outputs_of(fn), given, NAMES, seed=129, explain=explain)


@grader_test(points=2)
def per_channel_gates(fn):
    """matches the recurrence in float64 with one gate per key channel, log_decay [n, dk] (n = 12, dk = 5, dv = 3)"""
    graded(fn, inputs(n=12, dk=5, dv=3, seed=122),
           state_hint="return S itself, the ledger after the last token, with no d_k^−½ folded in")


@grader_test(points=2)
def scalar_gates(fn):
    """matches the recurrence in float64 with one gate per token, log_decay [n], fading every channel alike (n = 12 and n = dk = 4)"""
    hint = f"{FORMULA_HINT}; a gate per token is [..., n]: {GATE_SHAPE_HINT}"
    for n, dk, seed in ((12, 5, 123), (4, 4, 124)):  # n = dk: the gate's size does not tell its shape
        graded(fn, inputs(n=n, dk=dk, dv=3, seed=seed, per_channel=False), hint=hint)


@grader_test(points=1)
def given_state(fn):
    """starts from the state it is given: a non-zero ledger [dk, dv] fades and is read like any earlier entry"""
    given = (*inputs(n=6, dk=4, dv=3, seed=125, per_channel=False), a_state(dk=4, dv=3, seed=1125))
    graded(fn, given, hint="S_{−1} is the state given, not zeros: start from S = state when one is given, and "
                           "fade it like any earlier entry")


@grader_test(points=2)
def chained_calls(fn):
    """two calls passing the state on equal one call over the joined sequence (n = 13 as 5 + 8 tokens, per-channel gates)"""
    whole = inputs(n=13, dk=4, dv=3, seed=126)
    halves = [tuple(x[..., span, :] for x in whole) for span in (slice(0, 5), slice(5, 13))]
    expected, after_first = ledger_key(*whole), ledger_key(*halves[0])
    first = pair(call(fn, *halves[0], hint=FORMULA_HINT, explain=explain), after_first, hint=FORMULA_HINT)
    second = call(fn, *halves[1], first[1], hint=STATE_HINT, explain=explain)  # the state it returned
    second = pair(second, ledger_key(*halves[1], after_first[1]), hint=STATE_HINT)
    joined = (torch.cat([first[0], second[0]], dim=-2), second[1])
    expect_pair_close(joined, expected, hint=f"tokens 0..4, then 5..12 from the state after token 4: {STATE_HINT}")


@grader_test(points=1)
def batch_dims(fn):
    """keeps leading batch/head dims: q [2, 3, n, dk], log_decay [2, 3, n, dk] and [2, 3, n], a state [2, 3, dk, dv]"""
    for per_channel, seed in ((True, 127), (False, 128)):
        given = (*inputs(batch=(2, 3), n=6, dk=4, dv=2, seed=seed, per_channel=per_channel),
                 a_state(2, 3, dk=4, dv=2, seed=seed + 1000))
        advice = ("keep `...` in front, index the gate of token t as log_decay[..., t, :] (per channel) or "
                  "log_decay[..., t] (per token) and fade S [..., dk, dv] with [..., dk, 1] or [..., 1, 1]")
        blame_batch_dims(lambda x: graded(fn, x), given, tuple(x[0, 0] for x in given), advice,
                         first_fix="the per-channel and scalar gate tests")


@grader_test(points=1)
def no_future_leakage(fn):
    """changing the tokens after position t leaves outputs 0..t unchanged (and earlier ones move them)"""
    now, future = inputs(n=9, dk=4, dv=3, seed=130), inputs(n=9, dk=4, dv=3, seed=131)
    hint = "token t may read only the ledger after tokens 0..t"
    expect_no_future_leak(outputs_of(fn), out_key, now, future, t=3, hint=hint, explain=explain, names=NAMES)
