"""The matmul "roof": a batched matmul of the same FLOPs as a kernel, to quote the kernel against.

FLOPs are twice the multiply-adds of ``course_lib.cost`` (one multiply and one add per MAC):
``bench.kernels`` gives every contender its count that way.
"""

from dataclasses import dataclass

FLOPS_PER_MAC = 2


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
