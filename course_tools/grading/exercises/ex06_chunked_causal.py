"""Grader tests of exercise 6: ``chunked_causal_linear_attention(q, k, v, chunk_size)``, the chunkwise form.

Same outputs as exercise 5, computed table by table: a masked quadratic block
inside each chunk of ``chunk_size`` tokens plus the ledger of all earlier chunks,
updated once per chunk. The answer key is ``course_lib.attention.linear_attention``
with ``causal=True`` and the same ``chunk_size`` (float64, tolerance 1e-10; every
form agrees with the n×n oracle to ~1e-15); the long sequence runs in float32.
"""

import torch

from course_lib.attention import linear_attention
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
from course_tools.grading.core import grader_test
from course_tools.grading.exercises import LINEAR_ATTENTION_FORMS

FUNCTION_NAME = "chunked_causal_linear_attention"
TITLE = "Chunked causal linear attention: the ledger updated once per table"
FORBIDDEN = LINEAR_ATTENTION_FORMS

LONG_N = 2**18
BLOCK_HINT = (
    "in each chunk: tril(Qc Kcᵀ) (diagonal kept) times Vc, plus Qc times the ledger of the EARLIER chunks; "
    "add the chunk's own keys to the ledger only after its queries have read it"
)
LAST_CHUNK_HINT = "the last chunk may be shorter than chunk_size: x[..., start : start + chunk_size, :] handles it"
LEDGER_DTYPE_HINT = (
    "your ledger is float32 while the inputs are float64: torch.zeros(d, dv) makes float32 unless told "
    "otherwise; create S and z with phi_k.new_zeros(...) or torch.zeros(..., dtype=q.dtype, device=q.device)"
)
LEDGER_ROUNDING_HINT = (
    "errors of this size are float32 rounding, not a wrong formula: your ledger is float32 while the inputs "
    "are float64 (torch.zeros(d, dv) makes float32; S += ... keeps it float32); create S and z with "
    "phi_k.new_zeros(...)"
)
DTYPE_CLASH = ("same dtype", "scalar type", "double != float", "Double and Float", "Float and Double")


def explain(error: BaseException) -> str:
    """The ledger-dtype hint when the student's code raised a float32/float64 clash, else "".

    Every test but long_sequence feeds float64 inputs, and a ledger started with
    ``torch.zeros(d, dv)`` is float32: the first matmul with it raises.
    """
    return LEDGER_DTYPE_HINT if any(clash in str(error) for clash in DTYPE_CLASH) else ""


def chunked_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, chunk_size: int) -> torch.Tensor:
    """The answer key: course_lib's chunked causal linear attention, [..., n, dv]."""
    return linear_attention(q, k, v, causal=True, method="chunked", chunk_size=chunk_size)


def graded(fn, inputs: tuple[torch.Tensor, ...], chunk_sizes: tuple[int, ...], why: str = "") -> None:
    """``fn(*inputs, chunk_size=c)`` must match the key in float64 for every c; ``why`` follows c in the hint."""
    for chunk_size in chunk_sizes:
        hint = f"chunk_size={chunk_size}{why}: {BLOCK_HINT}"
        out, expected = answers(fn, chunked_key, inputs, hint=hint, explain=explain, chunk_size=chunk_size)
        compare(out, expected, **EXACT, hint=hint, float32_hint=LEDGER_ROUNDING_HINT)


@grader_test(points=1)
def shape_and_dtype(fn):
    """returns a tensor [..., n, dv] in the inputs' dtype (float64 and float32; n = 23, chunk_size = 5), from q, k, v"""
    reason = "the inputs' dtype; a ledger made by torch.zeros(d, dv) is float32: use phi_k.new_zeros(...)"
    for dtype in (torch.float64, torch.float32):
        inputs = seeded_qkv(n=23, m=23, d=4, dv=3, seed=61, dtype=dtype)
        out, expected = answers(fn, chunked_key, inputs, hint=LAST_CHUNK_HINT, explain=explain, chunk_size=5)
        expect_output(out, expected, hint=BLOCK_HINT, dtype_reason=reason)
    expect_computes(fn, inputs, ("q", "k", "v"), seed=70, explain=explain, chunk_size=5)


@grader_test(points=2)
def values(fn):
    """matches the key in float64 when chunk_size does not divide n (n = 23 with chunk_size 5 and 4)"""
    graded(fn, seeded_qkv(n=23, m=23, d=8, dv=5, seed=62), (5, 4))


@grader_test(points=1)
def chunk_size_one(fn):
    """chunk_size = 1 (every chunk one token: the pure recurrence) matches the key"""
    graded(fn, seeded_qkv(n=9, m=9, d=4, dv=3, seed=63), (1,), " is the ledger read token by token")


@grader_test(points=1)
def one_chunk(fn):
    """chunk_size ≥ n (one chunk: the masked quadratic block alone) matches the key, for chunk_size = n and n + 7"""
    graded(fn, seeded_qkv(n=9, m=9, d=4, dv=3, seed=64), (9, 16), " ≥ n is one masked block")


@grader_test(points=1)
def batch_dims(fn):
    """keeps leading batch/head dims: q [2, 3, n, d] -> [2, 3, n, dv] (n = 11, chunk_size = 4)"""
    inputs = seeded_qkv(2, 3, n=11, m=11, d=4, dv=5, seed=65)
    advice = "transpose with .transpose(-2, -1), slice chunks as x[..., a:b, :] and keep the ledger [..., d, dv]"
    compare_batched(fn, chunked_key, inputs, **EXACT, advice=advice, explain=explain, chunk_size=4)


@grader_test(points=1)
def no_future_leakage(fn):
    """changing the tokens after t = 6, in the middle of chunk [5, 10), leaves outputs 0..6 unchanged (earlier ones move them)"""
    inputs, future = (seeded_qkv(n=13, m=13, d=4, dv=3, seed=seed) for seed in (66, 67))
    hint = "inside a chunk, query i sees keys j ≤ i only (tril); the ledger holds the earlier chunks only"
    expect_no_future_leak(fn, chunked_key, inputs, future, t=6, hint=hint, explain=explain, chunk_size=5)


@grader_test(points=1)
def constant_values(fn):
    """returns that vector at every position when every value row is the same vector (the normaliser)"""
    generic = seeded_qkv(n=12, m=12, d=4, dv=3, seed=68)
    expect_computes(fn, generic, ("q", "k", "v"), seed=68, explain=explain, chunk_size=5)  # a copy of v is too
    inputs, expected = constant_value_inputs(*generic[:2], (1.5, -2.0, 0.25))
    hint = "divide each query's numerator (block + ledger) by its denominator (block row sum + φ(q_i)ᵀz)"
    out = call(fn, *inputs, hint=hint, explain=explain, chunk_size=5)
    compare(out, expected, **EXACT, hint=hint, float32_hint=LEDGER_ROUNDING_HINT)


@grader_test(points=2)
def long_sequence(fn):
    """handles n = 2**18 tokens with chunk_size = 64 (d = dv = 2, float32) without the n×n matrix (256 GiB)

    Chunk by chunk that is 4096 blocks of 64×64 and a [d, dv] ledger: well under
    a second vectorised, about a second as a Python loop over chunks. The key is
    computed in float64 from the same float32 inputs; a float32 chunked answer
    stays within ~3e-6 of it (outputs ~0.3), inside atol 1e-4, rtol 1e-3.
    """
    hint = "never build φ(Q)φ(K)ᵀ: only chunk_size × chunk_size blocks and the [d, dv] ledger"
    with one_thread():  # a loop over 4096 chunks: see one_thread
        out, expected = answers(fn, long_causal_key, long_causal_inputs(LONG_N, seed=69), hint=hint, chunk_size=64)
    compare(out, expected, atol=1e-4, rtol=1e-3, hint=BLOCK_HINT)
