"""Grader tests of exercise 4: ``orthogonal_gaussian(m, d, generator)``, FAVOR+'s orthogonal projections.

A correct answer draws other numbers than ``course_lib.random_features.orthogonal_gaussian``
(the model answer), so the tests check properties, never values: shape and
dtype, orthogonality within each block of d rows, and, over many draws, chi(d)
row lengths and rows distributed as N(0, I_d). Those use CLT tolerances of 6
standard errors, so a correct answer fails one with a probability of the order of
1e-7 (and, the random seeds being fixed, the same answer always gets the same verdict).
"""

import math

import torch

from course_tools.grading.checks import attempt, expect_output, expect_within_noise
from course_tools.grading.core import GradingFailure, grader_test

FUNCTION_NAME = "orthogonal_gaussian"
TITLE = "Orthogonal tasters: no two in a block taste the same direction"
FORBIDDEN = ("course_lib.random_features.orthogonal_gaussian", "course_lib.random_features.PerformerFeatures")

Z = 6  # standard errors allowed by the statistical tests
BLOCK_HINT = (
    "each block of d consecutive rows, starting at row 0, must be d orthonormal directions (from the QR of a fresh "
    "d×d Gaussian) times lengths; the last block keeps the m mod d rows left"
)
LENGTH_HINT = (
    "scale each orthonormal row by its own length, the norm of a fresh N(0, I_d) vector (chi(d) distributed): "
    "unit rows, or rows all of length √d, are not Gaussian"
)
GAUSSIAN_HINT = (
    "each row must be N(0, I_d): a uniformly random direction times a chi(d) length. torch.linalg.qr's Q is not "
    "uniformly random until column j is multiplied by the sign of R[j, j]"
)
GENERATOR_HINT = "draw every random number with torch.randn(..., generator=generator) and nothing without it"


def draws(fn, m: int, d: int, *, seed: int, count: int = 1, strict_dtype: bool = False) -> torch.Tensor:
    """``count`` calls fn(m, d, generator=g) with one generator g seeded ``seed``: [count, m, d] float64 on the CPU.

    Each answer must be a finite floating-point tensor [m, d]; an exception or a
    wrong shape fails the test with the call that went wrong. Only with
    ``strict_dtype`` (the shape_and_dtype test) must it be float64: the other tests
    widen a float32 answer to float64 and judge its properties, so a float32 answer
    loses the dtype test's points and no others.
    """
    generator = torch.Generator().manual_seed(seed)
    layout = torch.empty(m, d, dtype=torch.float64)  # what every answer must look like
    out = []
    for index in range(1, count + 1):
        state = f"seeded with {seed}" + (f", call {index} of {count}" if count > 1 else "")
        answer = attempt(fn, m, d, generator=generator, shown=f"{m}, {d}, generator=<{state}>")
        if not strict_dtype and isinstance(answer, torch.Tensor) and answer.is_floating_point():
            answer = answer.detach().cpu().to(torch.float64)
        out.append(expect_output(answer, layout, layout="[m, d]", dtype_reason="projections are float64"))
    return torch.stack(out)


def cosine_tolerance(fn, m: int, d: int) -> float:
    """|cos| allowed within a block: 1e-8 for float64 answers (QR gives ~1e-15), 64 eps of a coarser dtype.

    The dtype is the one fn returns (one extra call); float32 gets 7.6e-6, where its
    own rounding leaves ~1e-7.
    """
    answer = attempt(fn, m, d, generator=torch.Generator().manual_seed(0), shown=f"{m}, {d}, generator=<seeded with 0>")
    if isinstance(answer, torch.Tensor) and answer.is_floating_point() and answer.dtype != torch.float64:
        return max(1e-8, 64 * torch.finfo(answer.dtype).eps)
    return 1e-8


@grader_test(points=2)
def shape_and_dtype(fn):
    """returns a float64 tensor [m, d] drawn from `generator`, for (m, d) = (8, 4), (10, 4) and (3, 5)

    (10, 4) has a partial last block and (3, 5) has m < d. A constant or a random matrix not drawn from ``generator`` has the shape too; the
    points go to a panel that the same seed gives again and another seed changes.
    """
    for m, d in ((8, 4), (10, 4), (3, 5)):
        draws(fn, m, d, seed=41, strict_dtype=True)
    first = draws(fn, 8, 4, seed=47)
    if not torch.equal(draws(fn, 8, 4, seed=47), first):
        raise GradingFailure(f"the same generator seed gave a different matrix: {GENERATOR_HINT}")
    if torch.equal(draws(fn, 8, 4, seed=48), first):
        raise GradingFailure(f"generators seeded 47 and 48 gave the same matrix: {GENERATOR_HINT}")


@grader_test(points=2)
def orthogonal_blocks(fn):
    """rows within each block of d (the last one partial) are orthogonal; rows of different blocks are not copies

    Checked on (m, d) = (10, 4), (16, 8) and (3, 5) through the cosines of the
    rows: within a block |cos| < 1e-8 (float64 QR gives ~1e-15; a float32 answer
    is allowed 64 float32 eps, see ``cosine_tolerance``); across blocks
    |cos| < 1 − 1e-6 (independent blocks reach that with probability ~1e-9).
    """
    for m, d in ((10, 4), (16, 8), (3, 5)):
        tolerance = cosine_tolerance(fn, m, d)
        omega = draws(fn, m, d, seed=42)[0]  # [m, d]
        lengths = omega.norm(dim=-1)  # [m]
        if (lengths == 0).any():
            raise GradingFailure(f"row {int((lengths == 0).nonzero()[0])} is all zeros (m={m}, d={d}); {LENGTH_HINT}")
        unit = omega / lengths.unsqueeze(-1)  # [m, d]
        cosines = (unit @ unit.T).abs().fill_diagonal_(0)  # [m, m]
        block = torch.arange(m) // d  # [m], the block of every row
        same = block.unsqueeze(0) == block.unsqueeze(1)  # [m, m]
        within, across = cosines * same, cosines * ~same
        if within.max() > tolerance:
            i, j = divmod(int(within.argmax()), m)
            cosine = float(within.max())
            raise GradingFailure(
                f"rows {i} and {j} share block {int(block[i])} but are not orthogonal "
                f"(|cos| = {cosine:.3g}, m={m}, d={d}); {BLOCK_HINT}"
            )
        if across.max() > 1 - 1e-6:
            i, j = divmod(int(across.argmax()), m)
            raise GradingFailure(
                f"rows {i} and {j} of different blocks are parallel (m={m}, d={d}): "
                "draw a fresh Gaussian matrix for every block, do not reuse one"
            )


@grader_test(points=2)
def row_lengths(fn):
    """over 100 draws (m = 24, d = 16), ‖ω‖² has mean d and variance 2d (chi-square with d degrees of freedom)

    For N independent chi-square(d) values the sample mean has standard error
    √(2d/N) and the sample variance √((8d² + 48d)/N) (its fourth central moment
    is 12d² + 48d). Each draw has a full and a partial block.
    """
    m, d, count = 24, 16, 100
    squared = draws(fn, m, d, seed=43, count=count).pow(2).sum(-1).flatten()  # [N], N = count · m
    size = squared.numel()
    mean_error, variance_error = math.sqrt(2 * d / size), math.sqrt((8 * d**2 + 48 * d) / size)
    expect_within_noise(squared.mean(), d, mean_error, z=Z, what="the mean of ‖ω‖²", hint=LENGTH_HINT)
    expect_within_noise(squared.var(), 2 * d, variance_error, z=Z, what="the variance of ‖ω‖²", hint=LENGTH_HINT)


@grader_test(points=2)
def isotropic(fn):
    """over 150 draws (m = 12, d = 8), ωωᵀ averages to I_d and every row to 0: each row is N(0, I_d)

    Standard errors of independent N(0, I_d) rows: √(2/N) for an entry of the
    average ωωᵀ (orthogonal blocks only lower it) and 1/√150 for a coordinate of
    one row's average over the draws. QR without the sign fix shifts some of
    those averages by 0.6 to 0.8, against an allowed 0.49.
    """
    m, d, count = 12, 8, 150
    omega = draws(fn, m, d, seed=44, count=count)  # [count, m, d]
    rows = omega.reshape(-1, d)  # [N, d]
    second_moment = rows.T @ rows / len(rows)  # [d, d]
    error = math.sqrt(2 / len(rows))
    expect_within_noise(second_moment, torch.eye(d), error, z=Z, what="the average of ωωᵀ", hint=GAUSSIAN_HINT)
    mean = omega.mean(0)  # [m, d]: each row's own average over the draws
    what = "the average over draws of ω[row, coordinate]"
    expect_within_noise(mean, 0.0, 1 / math.sqrt(count), z=Z, what=what, hint=GAUSSIAN_HINT)


@grader_test(points=2)
def uses_generator(fn):
    """takes all randomness from `generator`: same seed, same matrix; new seed, new matrix; global RNG untouched"""
    with torch.random.fork_rng(devices=[]):  # the global RNG is restored afterwards
        torch.manual_seed(1)
        state = torch.get_rng_state()
        first = draws(fn, 10, 4, seed=45)
        if not torch.equal(torch.get_rng_state(), state):
            raise GradingFailure(f"the call advanced torch's global random generator; {GENERATOR_HINT}")
        torch.manual_seed(2)
        if not torch.equal(draws(fn, 10, 4, seed=45), first):
            raise GradingFailure(f"the same generator seed gave a different matrix; {GENERATOR_HINT}")
        if torch.equal(draws(fn, 10, 4, seed=46), first):
            raise GradingFailure(
                f"generators seeded 45 and 46 gave the same matrix: the generator is ignored; {GENERATOR_HINT}"
            )
