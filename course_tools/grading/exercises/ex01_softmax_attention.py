"""Grader tests of exercise 1: ``softmax_attention(q, k, v, causal=False)``.

The answer key is ``course_lib.attention.softmax_attention``. Exactness checks run
in float64 with tolerance 1e-10 (any correct float64 implementation lands within
~1e-15); the large-logit check runs in float32, see its docstring.
"""

import torch

from course_lib.attention import softmax_attention
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
from course_tools.grading.core import grader_test

FUNCTION_NAME = "softmax_attention"
TITLE = "Softmax attention: every student asks every window"
FORBIDDEN = (  # the model answer, and torch's fused attention that computes it
    "course_lib.attention.softmax_attention",
    "course_lib.attention.softmax_weights",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
)

VALUES_HINT = "did you scale the scores by 1/sqrt(d) and take the softmax over the keys (the last axis)?"
CAUSAL_HINT = "with causal=True query i sees keys j <= i only: set the scores with j > i to -inf (keep the diagonal)"


@grader_test(points=2)
def shape_and_dtype(fn):
    """returns a tensor [..., n, dv] in the inputs' dtype (checked with n != m and dv != d), computed from q, k, v"""
    inputs = seeded_qkv(n=5, m=7, d=4, dv=3, seed=1)
    expect_output(*answers(fn, softmax_attention, inputs))
    expect_computes(fn, inputs, ("q", "k", "v"), seed=8)


@grader_test(points=2)
def values(fn):
    """matches softmax(q kᵀ/√d) v in float64 (non-causal, n != m)"""
    out, expected = answers(fn, softmax_attention, seeded_qkv(n=6, m=9, d=8, dv=5, seed=2))
    compare(out, expected, **EXACT, hint=VALUES_HINT)


@grader_test(points=2)
def causal_values(fn):
    """matches the causal reference in float64 (query i sees keys j <= i)"""
    out, expected = answers(fn, softmax_attention, seeded_qkv(n=7, m=7, d=4, dv=3, seed=3), causal=True)
    compare(out, expected, **EXACT, hint=CAUSAL_HINT)


@grader_test(points=1)
def no_future_leakage(fn):
    """with causal=True, changing the tokens after position t leaves outputs 0..t unchanged (and earlier ones move them)"""
    inputs, future = (seeded_qkv(n=8, m=8, d=4, dv=3, seed=seed) for seed in (4, 5))
    expect_no_future_leak(fn, softmax_attention, inputs, future, t=3, hint=CAUSAL_HINT, causal=True)


@grader_test(points=2)
def batch_dims(fn):
    """keeps leading batch/head dims: q [2, 3, n, d] -> [2, 3, n, dv]"""
    compare_batched(fn, softmax_attention, seeded_qkv(2, 3, n=6, m=9, d=4, dv=5, seed=6), **EXACT)


@grader_test(points=1)
def large_logits(fn):
    """stays finite and correct in float32 when the scores are ~1e3 (exp would overflow)

    Scores of ~1e3 carry float32 rounding of ~1e-4, which moves the weights by as
    much; the 1e-2 tolerance covers that with room, while an overflow gives NaN/inf.
    """
    inputs = seeded_qkv(n=6, m=6, d=4, dv=3, seed=7, dtype=torch.float32, scale=30.0)
    out, expected = answers(fn, softmax_attention, inputs)
    hint = "exp(1000) overflows: subtract each row's max score before exp (torch.softmax does this for you)"
    compare(out, expected, atol=1e-2, rtol=1e-2, hint=hint)
