"""Grader tests of exercise 11: ``delta_rule(q, k, v, beta)``, the delta rule's ledger token by token.

With q̂, k̂ the L2-normalised q and k, S_0 = 0 [d, dv] and, for t = 0 … n−1,
S_t = S_{t−1} + β_t k̂_t (v_t − S_{t−1}ᵀk̂_t)ᵀ and o_t = S_tᵀq̂_t. The answer key is
``course_lib.delta.delta_rule_attention`` (float64, tolerance 1e-10; its recurrent and chunked
forms agree to ~1e-15).
"""

import torch
import torch.nn.functional as F

from course_lib.delta import delta_rule_attention
from course_lib.device import seeded_qkv
from course_tools.grading.checks import (
    EXACT,
    answers,
    call,
    compare,
    expect_computes,
    expect_no_future_leak,
    expect_output,
)
from course_tools.grading.core import GradingFailure, grader_test
from course_tools.grading.exercises.ex06_chunked_causal import DTYPE_CLASH

FUNCTION_NAME = "delta_rule"
TITLE = "The delta rule: a ledger that corrects instead of piling up"
FORBIDDEN = (
    "course_lib.delta.delta_rule_attention",
    "course_lib.delta.delta_rule_recurrent",
    "course_lib.delta.delta_rule_chunked",
    "course_lib.delta.DeltaRuleState",
)

FORMULA_HINT = (
    "expected S_t = S_{t−1} + β_t k̂_t (v_t − S_{t−1}ᵀk̂_t)ᵀ and o_t = S_tᵀq̂_t, with q̂, k̂ the L2-normalised q, k "
    "and S_0 = 0 [d, dv]"
)
WRITE_FIRST_HINT = "write token t into the ledger before reading it with q_t: o_t = S_tᵀq̂_t, not S_{t−1}ᵀq̂_t"
NORMALISE_HINT = "normalise q and k to length 1 over their last dim (F.normalize(x, dim=-1)) before anything else"
LEDGER_DTYPE_HINT = (
    "your ledger is float32 while the inputs are float64: torch.zeros(d, dv) makes float32 unless told "
    "otherwise; create S with q.new_zeros(d, dv) or torch.zeros(d, dv, dtype=q.dtype, device=q.device)"
)
NAMES = ("q", "k", "v", "beta")


def explain(error: BaseException) -> str:
    """The ledger-dtype hint when the student's code raised a float32/float64 clash, else "" (as in ex06)."""
    return LEDGER_DTYPE_HINT if any(clash in str(error) for clash in DTYPE_CLASH) else ""


def delta_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """The answer key: course_lib's delta rule, [..., n, dv]."""
    return delta_rule_attention(q, k, v, beta, method="recurrent")


def make_beta(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Write strengths in [0.1, 1) of shape [..., n]."""
    return 0.1 + 0.9 * torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def inputs(*, n: int, d: int, dv: int, seed: int, batch: tuple[int, ...] = (), dtype=torch.float64):
    q, k, v = seeded_qkv(*batch, n=n, m=n, d=d, dv=dv, seed=seed, dtype=dtype)
    return q, k, v, make_beta(*batch, n, seed=seed + 1000, dtype=dtype)


@grader_test(points=2)
def shape_and_dtype(fn):
    """returns a tensor [..., n, dv] in the inputs' dtype (float64 and float32, dv != d), computed from q, k, v, β"""
    reason = "the inputs' dtype; a ledger made by torch.zeros(d, dv) is float32: use q.new_zeros(d, dv)"
    for dtype in (torch.float64, torch.float32):
        given = inputs(n=7, d=4, dv=3, seed=111, dtype=dtype)
        out, expected = answers(fn, delta_key, given, explain=explain)
        expect_output(out, expected, hint=FORMULA_HINT, dtype_reason=reason)
    expect_computes(fn, given, NAMES, seed=119, explain=explain)


@grader_test(points=3)
def values(fn):
    """matches the recurrence in float64 (n = 12, d = 5, dv = 3, β between 0.1 and 1)"""
    out, expected = answers(fn, delta_key, inputs(n=12, d=5, dv=3, seed=112), explain=explain)
    compare(out, expected, **EXACT, hint=FORMULA_HINT, float32_hint=LEDGER_DTYPE_HINT)


@grader_test(points=1)
def batch_dims(fn):
    """keeps leading batch/head dims: q [2, 3, n, d], beta [2, 3, n] -> [2, 3, n, dv]"""
    hint = "keep `...` in front: S is [..., d, dv], and read with k_t.unsqueeze(-2) @ S, not k.T"
    out, expected = answers(fn, delta_key, inputs(batch=(2, 3), n=6, d=4, dv=2, seed=113), explain=explain)
    compare(out, expected, **EXACT, hint=hint)


@grader_test(points=1)
def writes_before_reading(fn):
    """the first output is β_0 (q̂_0·k̂_0) v_0: token 0 is in the ledger when q_0 reads it"""
    q, k, v, beta = inputs(n=5, d=4, dv=3, seed=114)
    out = expect_output(*answers(fn, delta_key, (q, k, v, beta), hint=WRITE_FIRST_HINT, explain=explain),
                        hint=WRITE_FIRST_HINT)
    expected = beta[0] * (F.normalize(q[0], dim=0) @ F.normalize(k[0], dim=0)) * v[0]
    if not torch.allclose(out[0], expected, **EXACT):
        got, want = ([round(float(x), 4) for x in row] for row in (out[0], expected))
        raise GradingFailure(f"output at position 0 is {got}, expected β_0 (q̂_0·k̂_0) v_0 = {want}; {WRITE_FIRST_HINT}")


@grader_test(points=1)
def exact_read_back(fn):
    """with β = 1, a query equal to the last key reads back exactly the last value (the error is written whole)"""
    q, k, v, _ = inputs(n=6, d=4, dv=3, seed=115)
    q[-1] = k[-1]
    ones = torch.ones(6, dtype=torch.float64)
    expect_computes(fn, (q, k, v, ones), NAMES[:3], seed=115, explain=explain)  # a copy of v reads back v too
    out = expect_output(call(fn, q, k, v, ones, hint=FORMULA_HINT, explain=explain), v, hint=FORMULA_HINT)
    if not torch.allclose(out[-1], v[-1], **EXACT):
        got, want = ([round(float(x), 4) for x in row] for row in (out[-1], v[-1]))
        raise GradingFailure(f"with β = 1 the last output is {got}, expected the last value {want}: the write "
                             "must replace what the ledger held at k̂ by v (v − Sᵀk̂, not Sᵀk̂ − v), with ‖k̂‖ = 1")


@grader_test(points=1)
def key_length_does_not_matter(fn):
    """multiplying q and k by 10 leaves the output unchanged (they are normalised)"""
    q, k, v, beta = inputs(n=6, d=4, dv=3, seed=116)
    expect_computes(fn, (q, k, v, beta), NAMES, seed=116, explain=explain)  # zeros or a copy of v ignore q, k too
    before = expect_output(*answers(fn, delta_key, (q, k, v, beta), hint=NORMALISE_HINT, explain=explain),
                           hint=NORMALISE_HINT)
    after = expect_output(call(fn, 10 * q, 10 * k, v, beta, hint=NORMALISE_HINT, explain=explain), before,
                          hint=NORMALISE_HINT)
    if not torch.allclose(before, after, **EXACT):
        change = float((before - after).abs().max())
        raise GradingFailure(f"scaling q and k by 10 changed the output by up to {change:.3g}; {NORMALISE_HINT}")


@grader_test(points=1)
def no_future_leakage(fn):
    """changing the tokens after position t leaves outputs 0..t unchanged (and earlier ones move them)

    β is passed by position, like every input, so the fourth parameter may have any name.
    """
    now, future = inputs(n=9, d=4, dv=3, seed=117), inputs(n=9, d=4, dv=3, seed=118)
    hint = "token t may read only the ledger after tokens 0..t"
    expect_no_future_leak(fn, delta_key, now, future, t=3, hint=hint, explain=explain, names=NAMES,
                          axes=(-2, -2, -2, -1))
