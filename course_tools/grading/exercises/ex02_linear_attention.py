"""Grader tests of exercise 2: non-causal ``linear_attention(q, k, v)`` with φ(x) = elu(x) + 1.

The answer keys are ``course_lib.attention.kernel_attention`` (the explicit n×m
oracle, float64, tolerance 1e-10) and, for the long sequence where n×m cannot
exist, ``course_lib.attention.linear_attention`` in float32 (see that test).
"""

import torch

from course_lib.attention import kernel_attention, linear_attention
from course_lib.device import seeded_qkv
from course_tools.grading.checks import (
    EXACT,
    answers,
    call,
    compare,
    compare_batched,
    expect_computes,
    expect_output,
)
from course_tools.grading.core import grader_test
from course_tools.grading.exercises import LINEAR_ATTENTION_FORMS

FUNCTION_NAME = "linear_attention"
TITLE = "Linear attention: one blackboard for the whole canteen"
FORBIDDEN = LINEAR_ATTENTION_FORMS

FORMULA_HINT = "expected out_i = φ(q_i)ᵀ(φ(K)ᵀV) / (φ(q_i)ᵀ Σ_j φ(k_j)) with φ(x) = elu(x) + 1"
NORMALISER_HINT = (
    "the normaliser φ(Q)z has shape [..., n] and the numerator [..., n, dv]: give the normaliser a "
    "trailing axis, [..., n, 1] (z.unsqueeze(-1), or keepdim=True), so it divides each row"
)
LONG_N = 2**23


def explain(error: BaseException) -> str:
    """The normaliser hint for a broadcast error (the division the exercise warns about), else ""."""
    return NORMALISER_HINT if "must match the size of tensor" in str(error) else ""


@grader_test(points=2)
def shape_and_dtype(fn):
    """returns a tensor [..., n, dv] in the inputs' dtype (checked with n != m and dv != d), computed from q, k, v"""
    inputs = seeded_qkv(n=5, m=7, d=4, dv=3, seed=11)
    expect_output(*answers(fn, kernel_attention, inputs, explain=explain))
    expect_computes(fn, inputs, ("q", "k", "v"), seed=16, explain=explain)


@grader_test(points=3)
def values(fn):
    """matches the kernel oracle (φ(Q)φ(K)ᵀ, row-normalised) V in float64"""
    out, expected = answers(fn, kernel_attention, seeded_qkv(n=6, m=9, d=8, dv=5, seed=12), explain=explain)
    compare(out, expected, **EXACT, hint=FORMULA_HINT)


@grader_test(points=2)
def batch_dims(fn):
    """keeps leading batch/head dims: q [2, 3, n, d] -> [2, 3, n, dv]"""
    inputs = seeded_qkv(2, 3, n=6, m=9, d=4, dv=5, seed=13)
    compare_batched(fn, kernel_attention, inputs, **EXACT, explain=explain)


@grader_test(points=1)
def constant_values(fn):
    """returns v itself when every value row is the same vector (the normaliser makes it an average)"""
    q, k, v = seeded_qkv(n=6, m=9, d=4, dv=3, seed=14)
    expect_computes(fn, (q, k, v), ("q", "k", "v"), seed=17, explain=explain)  # a copy of v is no average
    v = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64).expand(9, 3).clone()  # v_j = c for every key
    expected = v[:1].expand(6, 3).clone()  # [n, dv]: every query gets c, whatever its weights
    out = call(fn, q, k, v, explain=explain)
    compare(out, expected, **EXACT, hint="each query's weights must sum to 1: divide by φ(q_i)ᵀ Σ_j φ(k_j)")


@grader_test(points=2)
def long_sequence(fn):
    """handles n = m = 2**23 (d = dv = 2) without the n×m matrix, which would need 281 TB

    float32: both answers sum 2**23 terms, so they agree to ~1e-6 relative, well
    inside the tolerance (atol 1e-4, rtol 1e-3; outputs are ~0.3, as v depends on k).
    The inputs take 200 MB; an answer by associativity runs in ~1 s.
    """
    q, k, v = seeded_qkv(n=LONG_N, m=LONG_N, d=2, dv=2, seed=15, dtype=torch.float32)
    v += k  # [m, 2], correlated with k so each query's output depends on it
    hint = "compute φ(K)ᵀV [d, dv] and Σ_j φ(k_j) [d] first, never the n×m matrix φ(Q)φ(K)ᵀ"
    out, expected = answers(fn, linear_attention, (q, k, v), hint=hint, explain=explain)
    compare(out, expected, atol=1e-4, rtol=1e-3, hint=FORMULA_HINT)
