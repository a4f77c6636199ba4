"""Grader tests of exercise 5: ``causal_linear_attention(q, k, v)``, elu+1 linear attention through the ledger.

Query i reads the prefix state S_i = Σ_{j≤i} φ(k_j)v_jᵀ, z_i = Σ_{j≤i} φ(k_j):
o_i = φ(q_i)ᵀS_i / φ(q_i)ᵀz_i. The answer key is ``course_lib.attention.kernel_attention``
with ``causal=True`` (the explicit masked n×n oracle, float64, tolerance 1e-10) and,
for the long sequence where n×n cannot exist, ``linear_attention`` (``checks.long_causal_key``).
"""

import torch

from course_lib.attention import kernel_attention
from course_lib.device import one_thread, seeded_qkv
from course_tools.grading.checks import (
    EXACT,
    answers,
    call,
    compare,
    compare_batched,
    constant_value_inputs,
    expect_computes,
    expect_no_future_leak,
    expect_output,
    long_causal_inputs,
    long_causal_key,
)
from course_tools.grading.core import GradingFailure, grader_test
from course_tools.grading.exercises import LINEAR_ATTENTION_FORMS

FUNCTION_NAME = "causal_linear_attention"
TITLE = "Causal linear attention: the ledger carried down the line"
FORBIDDEN = LINEAR_ATTENTION_FORMS

FORMULA_HINT = (
    "expected o_i = φ(q_i)ᵀS_i / φ(q_i)ᵀz_i "
    "with S_i = Σ_{j≤i} φ(k_j)v_jᵀ, z_i = Σ_{j≤i} φ(k_j), φ = elu + 1"
)
PREFIX_HINT = "query i reads the ledger AFTER key i is added: the sums run over j ≤ i, the diagonal included"
LEAK_HINT = "query i may read only the ledger of keys j ≤ i (a cumulative sum over positions), never the full sums"
LONG_N = 2**20


def causal_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The answer key: the masked, row-normalised n×n kernel oracle, [..., n, dv]."""
    return kernel_attention(q, k, v, causal=True)


@grader_test(points=2)
def shape_and_dtype(fn):
    """returns a tensor [..., n, dv] in the inputs' dtype (float64 and float32, dv != d), computed from q, k, v"""
    for dtype in (torch.float64, torch.float32):
        inputs = seeded_qkv(n=7, m=7, d=4, dv=3, seed=51, dtype=dtype)
        expect_output(*answers(fn, causal_key, inputs), hint=PREFIX_HINT)
    expect_computes(fn, inputs, ("q", "k", "v"), seed=59)


@grader_test(points=2)
def values(fn):
    """matches the masked kernel oracle (φ(Q)φ(K)ᵀ with j ≤ i, row-normalised) V in float64"""
    out, expected = answers(fn, causal_key, seeded_qkv(n=9, m=9, d=8, dv=5, seed=52))
    compare(out, expected, **EXACT, hint=FORMULA_HINT)


@grader_test(points=1)
def batch_dims(fn):
    """keeps leading batch/head dims: q [2, 3, n, d] -> [2, 3, n, dv]"""
    advice = "take the prefix sums over the positions axis (-3 for S [..., n, d, dv], -2 for z) and keep `...`"
    compare_batched(fn, causal_key, seeded_qkv(2, 3, n=8, m=8, d=4, dv=5, seed=53), **EXACT, advice=advice)


@grader_test(points=1)
def no_future_leakage(fn):
    """changing the tokens after position t leaves outputs 0..t unchanged (and earlier ones move them)"""
    inputs, future = (seeded_qkv(n=10, m=10, d=4, dv=3, seed=seed) for seed in (54, 55))
    expect_no_future_leak(fn, causal_key, inputs, future, t=3, hint=LEAK_HINT)


@grader_test(points=1)
def first_position(fn):
    """the first output is v_0: query 0 sees key 0 alone, so its weights are [1]"""
    q, k, v = seeded_qkv(n=6, m=6, d=4, dv=3, seed=56)
    expect_computes(fn, (q, k, v), ("q", "k", "v"), seed=60)  # a copy of v starts with v_0 too
    out = expect_output(*answers(fn, causal_key, (q, k, v), hint=PREFIX_HINT), hint=PREFIX_HINT)
    if not torch.allclose(out[0], v[0], **EXACT):
        got, want = ([round(float(x), 4) for x in row] for row in (out[0], v[0]))
        raise GradingFailure(f"output at position 0 is {got}, expected v_0 = {want}; {PREFIX_HINT}")


@grader_test(points=1)
def constant_values(fn):
    """returns that vector at every position when every value row is the same vector (the normaliser)"""
    generic = seeded_qkv(n=8, m=8, d=4, dv=3, seed=57)
    expect_computes(fn, generic, ("q", "k", "v"), seed=57)  # a copy of v is constant too
    inputs, expected = constant_value_inputs(*generic[:2], (1.5, -2.0, 0.25))
    hint = "each query's weights must sum to 1: divide φ(q_i)ᵀS_i by φ(q_i)ᵀz_i"
    compare(call(fn, *inputs, hint=hint), expected, **EXACT, hint=hint)


@grader_test(points=2)
def long_sequence(fn):
    """handles n = 2**20 tokens (d = dv = 2, float32) without the n×n matrix, which would need 4 TiB

    The prefix state is [n, d, dv] = 2**22 numbers (16 MB); a cumulative sum runs
    in well under a second. The key is computed in float64 from the same float32
    inputs; float32 prefix sums over 2**20 terms stay within ~1e-5 of it here
    (outputs ~0.3), far inside the tolerance atol 1e-4, rtol 1e-3.
    """
    hint = "build the prefix sums S_i [n, d, dv] and z_i [n, d] with cumsum over the positions, never φ(Q)φ(K)ᵀ"
    with one_thread():  # in case of a loop over chunks: see one_thread
        out, expected = answers(fn, long_causal_key, long_causal_inputs(LONG_N, seed=58), hint=hint)
    compare(out, expected, atol=1e-4, rtol=1e-3, hint=FORMULA_HINT)
