"""Grader tests of the practice exercise: ``running_mean(v)``, the ledger with a single page.

Practice only (notebook 00 uses it to show how ``check()`` reports): no lesson's answer and no
grade depends on it. The reference is the course's causal linear attention with the constant
feature map φ ≡ 1: every key weighs the same, so output i is the mean of v_1 .. v_i. Exactness
checks run in float64 with tolerance 1e-10.
"""

import torch

from course_lib.attention import linear_attention
from course_lib.device import seeded_qkv
from course_tools.grading.checks import (
    EXACT,
    answers,
    compare,
    compare_batched,
    expect_computes,
    expect_no_future_leak,
    expect_output,
)
from course_tools.grading.core import GradingFailure, grader_test

FUNCTION_NAME = "running_mean"
TITLE = "Practice: the running mean, a ledger with one page"

HINT = "output i is the mean of v at positions 0..i: the running sum (cumsum over axis -2) divided by i + 1"


def reference(v: torch.Tensor) -> torch.Tensor:
    """[..., n, dv] -> [..., n, dv]: causal linear attention whose features are all ones."""
    return linear_attention(v, v, v, feature_map=torch.ones_like, causal=True)


def values_only(seed: int, *batch: int, n: int = 6, dv: int = 3) -> tuple[torch.Tensor]:
    """(v,): standard-normal [*batch, n, dv] in float64, from ``seeded_qkv``'s stream."""
    return (seeded_qkv(*batch, n=n, d=dv, seed=seed)[2],)


def expect_averages(fn, inputs: tuple[torch.Tensor]) -> None:
    """A copy of v passes the shape and causality checks; only position 0 of a running mean equals v."""
    (v,) = inputs
    output = expect_output(*answers(fn, reference, inputs))
    if torch.equal(output[..., 1:, :], v[..., 1:, :]):
        raise GradingFailure("returns v unchanged: a running mean averages the rows so far, so only row 0 equals v")


@grader_test(points=2)
def shape_and_dtype(fn):
    """returns a tensor [..., n, dv] in v's dtype, computed from v"""
    inputs = values_only(1, n=5, dv=3)
    expect_output(*answers(fn, reference, inputs))
    expect_computes(fn, inputs, ("v",), seed=1)
    expect_averages(fn, inputs)


@grader_test(points=3)
def values(fn):
    """matches (v_0 + … + v_i) / (i + 1) at every position i, in float64"""
    compare(*answers(fn, reference, values_only(2, n=7, dv=4)), **EXACT, hint=HINT)


@grader_test(points=3)
def no_future_leakage(fn):
    """changing v after position t leaves outputs 0..t unchanged (and changing v before it moves them)"""
    inputs, future = values_only(3, n=8), values_only(4, n=8)
    hint = "a mean over the whole sequence lets every position read the future: sum positions 0..i only"
    expect_no_future_leak(fn, reference, inputs, future, t=3, hint=hint, names=("v",))
    expect_averages(fn, inputs)


@grader_test(points=2)
def batch_dims(fn):
    """keeps leading batch/head dims: v [2, 3, n, dv] -> [2, 3, n, dv], the mean taken over positions (axis -2)"""
    advice = "take the running sum over positions, axis -2, not axis 0 or 1"
    compare_batched(fn, reference, values_only(5, 2, 3), **EXACT, advice=advice)
