"""FLOP counts of every contender, and the matmul "roof" with the same FLOPs.

One FLOP = one multiply or one add, so a multiply-accumulate is 2 FLOPs. Counts are per
(batch, head) entry for self-attention over N tokens with d-dim queries/keys, f features
(f = d for ``elu_plus_one``) and dv-dim values; only the matrix products are counted.

* softmax (explicit and SDPA):   2·N²·(d + dv)        scores q kᵀ, then weights @ v.
  SDPA causal is quoted with this same dense count: on the CPU the fused kernel still
  visits every block up to the diagonal, and the count keeps the pairing comparable.
* linear, non-causal:            4·N·f·dv             S = φ(K)ᵀV, then φ(Q)S (+ lower-order z terms).
* linear, causal recurrent:      4·N·f·dv             one rank-1 update and one read per token.
* linear, causal chunked (C):    4·N·f·dv + 2·N·C·(f + dv)
  what the chunked algorithm executes: chunk summaries and reads (4·N·f·dv) plus the
  C×C block inside each chunk, Qc Kcᵀ (2·N·C·f) and its product with Vc (2·N·C·dv),
  the masked upper half included.
"""

from dataclasses import dataclass

from course_lib.measure import macs_linear, macs_softmax


def softmax_flops(n: int, d: int, dv: int) -> int:
    """2·N²·(d + dv): the dense q kᵀ and weights @ v of one head (twice ``measure.macs_softmax``)."""
    return 2 * macs_softmax(n, n, d, dv)


def linear_flops(n: int, f: int, dv: int) -> int:
    """4·N·f·dv: building S = φ(K)ᵀV and reading it with φ(Q), one head (twice ``measure.macs_linear``)."""
    return 2 * macs_linear(n, n, f, dv)


def chunked_flops(n: int, f: int, dv: int, chunk: int) -> int:
    """4·N·f·dv + 2·N·C·(f + dv): the linear part plus the full C×C block of every chunk, one head.

    The N/C blocks each cost C·C·(f + dv) MACs, N·C·(f + dv) in all = ``measure.macs_softmax(N, C, f, dv)``.
    """
    return linear_flops(n, f, dv) + 2 * macs_softmax(n, chunk, f, dv)


@dataclass(frozen=True)
class Roof:
    """A batched matmul a [BH, M, K] @ b [BH, K, P] standing in for a kernel of ``flops`` FLOPs.

    The matmul executes 2·BH·M·K·P FLOPs (``matmul_flops``); ``scale`` = kernel FLOPs / matmul
    FLOPs converts its measured time into the time it would take for exactly the kernel's FLOPs.
    """

    bh: int
    m: int
    k: int
    p: int
    flops: int

    @property
    def matmul_flops(self) -> int:
        return 2 * self.bh * self.m * self.k * self.p

    @property
    def scale(self) -> float:
        return self.flops / self.matmul_flops


def _check_positive(flops: int, **sizes: int) -> None:
    if flops <= 0 or min(sizes.values()) < 1:
        raise ValueError(f"flops and {', '.join(sizes)} must be positive, got {flops}, {tuple(sizes.values())}")


def roof_for(flops: int, bh: int) -> Roof:
    """The roof: BH square matmuls [s, s] @ [s, s] with 2·BH·s³ ≈ ``flops`` — what the machine's
    matmul does at its best for this much work. The target fraction is quoted against it."""
    _check_positive(flops, bh=bh)
    side = max(1, round((flops / (2 * bh)) ** (1 / 3)))
    return Roof(bh, side, side, side, flops)


def shaped_roof_for(flops: int, bh: int, n: int, d: int) -> Roof:
    """A roof with the kernel's own operand shapes, [BH, N, d] @ [BH, d, r·d] with r ≈ flops / (2·BH·N·d²):
    how fast products shaped like linear attention's can run here (thin, memory-heavy ones)."""
    _check_positive(flops, bh=bh, n=n, d=d)
    r = max(1, round(flops / (2 * bh * n * d * d)))
    return Roof(bh, n, d, r * d, flops)
