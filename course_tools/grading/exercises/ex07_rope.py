"""Grader tests of exercise 7: ``rope(x, positions)``, the rotary position embedding with base 10000.

The answer key is ``course_lib.positional.rope`` (interleaved pairs (x_{2i}, x_{2i+1})
rotated by p·θ_i, θ_i = 10000^(−2i/d)). Exactness checks run in float64 with
tolerance 1e-10; any correct float64 rotation lands within ~1e-13 at these positions.
"""

import torch

from course_lib.positional import rope
from course_tools.grading.checks import (
    EXACT,
    answers,
    call,
    compare,
    compare_batched,
    expect_close,
    expect_computes,
    expect_output,
)
from course_tools.grading.core import GradingFailure, grader_test

FUNCTION_NAME = "rope"
TITLE = "RoPE: every dish turned by its place in the queue"
FORBIDDEN = ("course_lib.positional.rope", "course_lib.positional.rope_matrix", "course_lib.positional._rotate")

LAYOUT = "[..., n, d]"
FORMULA_HINT = (
    "expected out_2i = x_2i·cos(p·θ_i) − x_2i+1·sin(p·θ_i) and out_2i+1 = x_2i·sin(p·θ_i) + x_2i+1·cos(p·θ_i), "
    "pairing neighbouring dims (0, 1), (2, 3), ... with θ_i = 10000^(−2i/d), i = 0 .. d/2 − 1"
)
BATCH_ADVICE = "take the pairs from the last axis (x[..., 0::2], x[..., 1::2]) and the positions from axis -2"


def key(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The answer key in the exercise's signature."""
    return rope(x, positions=positions)


def _inputs(*batch: int, n: int, d: int, seed: int, dtype: torch.dtype = torch.float64) -> tuple:
    """x [*batch, n, d] ~ N(0, 1) and positions = arange(n) (int64)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*batch, n, d, generator=g, dtype=dtype), torch.arange(n)


@grader_test(points=1)
def shape_and_dtype(fn):
    """returns a tensor [..., n, d] in x's dtype (float64 and float32), computed from x and the positions"""
    for dtype in (torch.float64, torch.float32):
        inputs = _inputs(n=5, d=6, seed=71, dtype=dtype)
        expect_output(*answers(fn, key, inputs), layout=LAYOUT)
    expect_computes(fn, inputs, ("x", "positions"), seed=77)


@grader_test(points=2)
def values(fn):
    """matches the RoPE rotation in float64 (positions 0 .. n−1, d = 8)"""
    out, expected = answers(fn, key, _inputs(n=7, d=8, seed=72))
    compare(out, expected, **EXACT, hint=FORMULA_HINT, layout=LAYOUT)


@grader_test(points=2)
def batch_dims(fn):
    """keeps leading batch/head dims: x [2, 3, n, d] with positions [n] -> [2, 3, n, d]"""
    compare_batched(fn, key, _inputs(2, 3, n=6, d=8, seed=73), **EXACT, advice=BATCH_ADVICE, layout=LAYOUT)


@grader_test(points=1)
def norm_preserved(fn):
    """keeps every row's length: ‖rope(x)_t‖ = ‖x_t‖ (a rotation)"""
    x, positions = _inputs(n=9, d=8, seed=74)
    expect_computes(fn, (x, positions), ("x", "positions"), seed=74)  # x itself keeps its lengths too
    out = expect_output(call(fn, x, positions), key(x, positions), layout=LAYOUT)
    change = (out.norm(dim=-1) - x.norm(dim=-1)).abs()  # [n]
    if (change > 1e-10).any():
        t = int(change.argmax())
        raise GradingFailure(
            f"row {t} changed length by {float(change[t]):.3g}: each pair must be turned by a rotation "
            "[[cos, −sin], [sin, cos]] using the same angle for its cos and its sin"
        )


@grader_test(points=2)
def relative_position(fn):
    """scores (R_i q)ᵀ(R_j k) depend only on j − i: shifting every position by 1000 leaves them unchanged"""
    g = torch.Generator().manual_seed(75)
    q, k = (torch.randn(8, 8, generator=g, dtype=torch.float64) for _ in range(2))
    positions = torch.arange(8)
    expect_computes(fn, (q, positions), ("x", "positions"), seed=75)  # x itself, or zeros, keep every score too
    expected = key(q, positions)
    scores = []
    for offset in (0, 1000):
        rotated_q = expect_output(call(fn, q, positions + offset), expected, layout=LAYOUT)
        rotated_k = expect_output(call(fn, k, positions + offset), expected, layout=LAYOUT)
        scores.append(rotated_q @ rotated_k.T)  # [n, n]
    change = (scores[0] - scores[1]).abs()
    if (change > 1e-9).any():
        i, j = (int(a) for a in torch.unravel_index(change.argmax(), change.shape))
        raise GradingFailure(
            f"the score of query {i} and key {j} changed by {float(change[i, j]):.3g} when both positions moved by "
            "1000: rotate each pair by an angle proportional to the position (p·θ_i), with the same angle for "
            "cos and sin, so that R_iᵀR_j = R_(j−i)"
        )


@grader_test(points=2)
def uses_positions(fn):
    """rotates row t by its given position positions[t] (here [5, 0, 17, 3, 1000, 2], not 0 .. n−1)"""
    x, arange = _inputs(n=6, d=8, seed=76)
    positions = torch.tensor([5, 0, 17, 3, 1000, 2])
    out, expected = answers(fn, key, (x, positions))
    out = expect_output(out, expected, layout=LAYOUT)
    if torch.allclose(out, key(x, arange), **EXACT):
        hint = "this is the rotation at positions 0 .. n−1: use positions[t] as the position of row t"
    else:
        hint = "the answer is wrong whatever the positions: fix the `values` test first"
    expect_close(out, expected, **EXACT, hint=hint)
