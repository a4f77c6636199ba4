"""Grader tests of exercise 13: ``chunked_gate(q, k, v, log_decay, chunk_size=16)``, the gated ledger in chunks.

The same outputs as exercise 12 with one gate per token (log_decay [..., n]) and no state given,
o_t = d_k^−½ S_tᵀq_t with S_t = exp(g_t) S_{t−1} + k_t v_tᵀ, computed chunk by chunk in log space: with
G_i the running sum of g from the chunk's start and S₀ the ledger before the chunk,
o_i = d_k^−½ [exp(G_i) q_iᵀS₀ + Σ_{j≤i} exp(G_i − G_j)(q_iᵀk_j) v_j] and S_C = exp(G_C) S₀ + Σ_j exp(G_C − G_j) k_j v_jᵀ.
The answer key is ``course_lib.gated.gated_linear_attention`` with ``method="recurrent"`` (float64,
tolerance 1e-10); ``strong_gates`` runs in float32 with gates down to −10 a token, where the exponent
split as exp(G_i)·exp(−G_j) overflows.
"""

import torch

from course_lib.device import seeded_qkv
from course_lib.gated import gated_linear_attention
from course_tools.grading.checks import (
    EXACT,
    answers,
    blame_batch_dims,
    compare,
    expect_close,
    expect_computes,
    expect_no_future_leak,
    expect_output,
)
from course_tools.grading.core import grader_test
from course_tools.grading.exercises.ex06_chunked_causal import DTYPE_CLASH
from course_tools.grading.exercises.ex12_gated_ledger import FORBIDDEN as GATED_LEDGER_FORMS

FUNCTION_NAME = "chunked_gate"
TITLE = "The gated ledger in chunks: one difference in the exponent"
FORBIDDEN = GATED_LEDGER_FORMS

BLOCK_HINT = (
    "in each chunk, with G the running sum of g from the chunk's start: exp(G_i) q_iᵀS₀ plus "
    "Σ_{j≤i} exp(G_i − G_j)(q_iᵀk_j) v_j, then S = exp(G_C) S₀ + Σ_j exp(G_C − G_j) k_j v_jᵀ, and d_k^−½ on the output"
)
LAST_CHUNK_HINT = "the last chunk may be shorter than chunk_size: x[..., start : start + chunk_size, :] handles it"
OVERFLOW_HINT = (
    "exp(−G_j) overflows float32 once a chunk's gates sum below −88 (gates of −10 a token get there in 9 tokens), "
    "and so does a ratio of running products: keep exp(G_i − G_j) as one difference, ≤ 0 for j ≤ i, with G counted "
    "from the chunk's start, and mask j > i to −inf BEFORE exp (a mask applied after it meets inf, and inf · 0 is NaN)"
)
LEDGER_DTYPE_HINT = (
    "your ledger is float32 while the inputs are float64: torch.zeros(dk, dv) makes float32 unless told "
    "otherwise; create S with q.new_zeros(..., dk, dv) or torch.zeros(..., dtype=q.dtype, device=q.device)"
)
NAMES = ("q", "k", "v", "log_decay")
AXES = (-2, -2, -2, -1)  # the positions axis of q, k, v and of the gate [..., n]
STRONG = (-10.0, -0.5)  # strong_gates' log gates: a chunk of 32 sums to about −170


def explain(error: BaseException) -> str:
    """The ledger-dtype hint when the student's code raised a float32/float64 clash, else "" (as in ex06)."""
    return LEDGER_DTYPE_HINT if any(clash in str(error) for clash in DTYPE_CLASH) else ""


def gate_key(q, k, v, log_decay, *, chunk_size: int) -> torch.Tensor:
    """The answer key: course_lib's gated ledger token by token in float64, [..., n, dv] in q's dtype.

    The recurrence does not chunk, so ``chunk_size`` only sets what the student is asked for.
    """
    exact = gated_linear_attention(q.double(), k.double(), v.double(), log_decay.double(), method="recurrent")
    return exact.to(q.dtype)


def make_gates(*shape: int, seed: int, low: float = -1.5, high: float = -0.05,
               dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Log gates uniform in [low, high] of ``shape``."""
    u = torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (low + (high - low) * u).to(dtype)


def inputs(*, n: int, d: int, dv: int, seed: int, batch: tuple[int, ...] = (), dtype: torch.dtype = torch.float64,
           gates: tuple[float, float] = (-1.5, -0.05)) -> tuple[torch.Tensor, ...]:
    """q, k [*batch, n, d], v [*batch, n, dv] and one log gate per token [*batch, n]."""
    q, k, v = seeded_qkv(*batch, n=n, m=n, d=d, dv=dv, seed=seed, dtype=dtype)
    return q, k, v, make_gates(*batch, n, seed=seed + 1000, low=gates[0], high=gates[1], dtype=dtype)


def graded(fn, given: tuple[torch.Tensor, ...], chunk_sizes: tuple[int, ...], why: str = "") -> None:
    """``fn(*given, chunk_size=c)`` must match the key in float64 for every c; ``why`` follows c in the hint."""
    for chunk_size in chunk_sizes:
        hint = f"chunk_size={chunk_size}{why}: {BLOCK_HINT}"
        out, expected = answers(fn, gate_key, given, hint=hint, explain=explain, chunk_size=chunk_size)
        compare(out, expected, **EXACT, hint=hint, float32_hint=LEDGER_DTYPE_HINT)


@grader_test(points=1)
def shape_and_dtype(fn):
    """returns a tensor [..., n, dv] in the inputs' dtype (float64 and float32; n = 23, chunk_size = 5), from q, k, v, g"""
    reason = "the inputs' dtype; a ledger made by torch.zeros(dk, dv) is float32: use q.new_zeros(..., dk, dv)"
    for dtype in (torch.float64, torch.float32):
        given = inputs(n=23, d=4, dv=3, seed=131, dtype=dtype)
        out, expected = answers(fn, gate_key, given, hint=LAST_CHUNK_HINT, explain=explain, chunk_size=5)
        expect_output(out, expected, hint=BLOCK_HINT, dtype_reason=reason)
    expect_computes(fn, given, NAMES, seed=139, explain=explain, chunk_size=5)


@grader_test(points=2)
def values(fn):
    """matches the recurrence in float64 when chunk_size does not divide n (n = 23 with chunk_size 5 and 4)"""
    graded(fn, inputs(n=23, d=6, dv=5, seed=132), (5, 4))


@grader_test(points=2)
def any_chunk_size(fn):
    """gives the same outputs for chunk_size 1 (the recurrence), 16 and 45 ≥ n (one block) on n = 38"""
    graded(fn, inputs(n=38, d=4, dv=3, seed=133), (1, 16, 45), " (any chunk size gives the same numbers)")


@grader_test(points=1)
def batch_dims(fn):
    """keeps leading batch/head dims: q [2, 3, n, d], log_decay [2, 3, n] -> [2, 3, n, dv] (n = 11, chunk_size = 4)"""
    given = inputs(batch=(2, 3), n=11, d=4, dv=5, seed=134)
    advice = ("slice chunks as x[..., a:b, :] and the gate as g[..., a:b], transpose with .transpose(-2, -1), "
              "keep S [..., dk, dv] and give exp(G) the shape [..., C, 1] to scale rows")
    blame_batch_dims(lambda x: graded(fn, x, (4,)), given, tuple(x[0, 0] for x in given), advice)


@grader_test(points=1)
def no_future_leakage(fn):
    """changing the tokens after t = 6, in the middle of chunk [5, 10), leaves outputs 0..6 unchanged (earlier ones move them)"""
    now, future = inputs(n=13, d=4, dv=3, seed=135), inputs(n=13, d=4, dv=3, seed=136)
    hint = "inside a chunk, query i sees keys j ≤ i only; the ledger S₀ holds the earlier chunks only"
    expect_no_future_leak(fn, gate_key, now, future, t=6, hint=hint, explain=explain, names=NAMES, axes=AXES,
                          chunk_size=5)


@grader_test(points=3)
def strong_gates(fn):
    """stays finite and right in float32 with gates from −10 to −0.5 a token (n = 100, chunk_size 32 and 64)

    A chunk of 32 such gates sums to about −170: exp(−G_j) is then far past float32's largest number
    (about e^88.7), and exp(G_i) far below its smallest, so the split exp(G_i)·exp(−G_j) gives inf · 0 = NaN,
    while exp(G_i − G_j) stays in [0, 1]. The key is the float64 recurrence on the same float32 inputs; a
    float32 chunked answer stays within ~1e-6 of it (outputs ~1), inside atol 1e-4, rtol 1e-3.
    """
    given = inputs(n=100, d=8, dv=4, seed=137, dtype=torch.float32, gates=STRONG)
    for chunk_size in (32, 64):
        hint = f"chunk_size={chunk_size}: {OVERFLOW_HINT}"
        out, expected = answers(fn, gate_key, given, hint=hint, explain=explain, chunk_size=chunk_size)
        out = expect_output(out, expected, hint=hint)  # NaN or inf: the exponent was split, or masked after exp
        expect_close(out, expected, atol=1e-4, rtol=1e-3, hint=f"chunk_size={chunk_size}, float32: {BLOCK_HINT}")
