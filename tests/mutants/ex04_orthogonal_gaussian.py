"""ex04_orthogonal_gaussian: m × d projections, blocks of d orthogonal rows with chi-distributed lengths."""

import math

import torch

from course_lib import random_features

from .common import make_mutants, trivial_answers


def _orthogonal_blocks(m, d, generator, *, size=None, lengths="chi", sign_fix=True, fresh=True):
    """A configurable orthogonal draw the ex04 mutants are built from: blocks of ``size`` rows (default d)."""
    size = d if size is None else size
    blocks, basis = [], None
    for start in range(0, m, size):
        if basis is None or fresh:
            q, r = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
            basis = (q * torch.sign(torch.diagonal(r)) if sign_fix else q).T  # [d, d], orthonormal rows
        blocks.append(basis[: min(size, m - start)])
    directions = torch.cat(blocks)  # [m, d], unit rows
    if lengths == "unit":
        return directions
    if lengths == "sqrt_d":
        return directions * math.sqrt(d)
    return directions * torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)


def ex04_iid_gaussian(m, d, generator):
    return random_features.iid_gaussian(m, d, generator=generator)


def ex04_qr_tall_matrix(m, d, generator):
    q, _ = torch.linalg.qr(torch.randn(m, d, generator=generator, dtype=torch.float64))  # orthonormal COLUMNS
    return q * torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)


def ex04_qr_unit_rows(m, d, generator):
    return _orthogonal_blocks(m, d, generator, lengths="unit")


def ex04_qr_rows_times_sqrt_d(m, d, generator):
    return _orthogonal_blocks(m, d, generator, lengths="sqrt_d")


def ex04_qr_without_sign_fix(m, d, generator):
    return _orthogonal_blocks(m, d, generator, sign_fix=False)


def ex04_global_rng(m, d, generator):
    return _orthogonal_blocks(m, d, None)


def ex04_own_fixed_seed(m, d, generator):
    return _orthogonal_blocks(m, d, torch.Generator().manual_seed(0))


def ex04_blocks_of_d_minus_1(m, d, generator):
    return _orthogonal_blocks(m, d, generator, size=d - 1)


def ex04_one_block_reused(m, d, generator):
    return _orthogonal_blocks(m, d, generator, fresh=False)


def ex04_partial_block_dropped(m, d, generator):
    return _orthogonal_blocks(m - m % d, d, generator)


def ex04_partial_block_iid(m, d, generator):
    omega = _orthogonal_blocks(m, d, generator)  # [m, d]
    omega[m - m % d :] = random_features.iid_gaussian(m % d, d, generator=generator)  # last block: not orthogonal
    return omega


def ex04_float32(m, d, generator):
    return _orthogonal_blocks(m, d, generator).float()


MUTANTS = make_mutants(
    (ex04_iid_gaussian, "orthogonal_blocks", "draws i.i.d. Gaussian rows, never making them orthogonal"),
    (ex04_qr_tall_matrix, "orthogonal_blocks",
     "runs QR on one tall m×d matrix, whose columns, not rows, are orthonormal"),
    (ex04_qr_unit_rows, "row_lengths isotropic",
     "keeps the orthogonal rows at unit length instead of chi-distributed lengths"),
    (ex04_qr_rows_times_sqrt_d, "row_lengths",
     "scales every orthogonal row to length √d instead of a chi-distributed length"),
    (ex04_qr_without_sign_fix, "isotropic",
     "skips the sign fix by diag(R), so the orthogonal blocks are not Haar-distributed"),
    (ex04_global_rng, "uses_generator", "draws from torch's global generator, ignoring the `generator` argument"),
    (ex04_own_fixed_seed, "uses_generator",
     "draws from its own generator seeded 0, ignoring the `generator` argument"),
    (ex04_blocks_of_d_minus_1, "orthogonal_blocks", "stacks blocks of d − 1 orthogonal rows instead of d"),
    (ex04_one_block_reused, "orthogonal_blocks",
     "reuses one orthogonal block for every group of d rows instead of drawing fresh ones"),
    (ex04_partial_block_dropped, "shape_and_dtype",
     "drops the partial last block, returning m − m mod d rows instead of m"),
    (ex04_partial_block_iid, "orthogonal_blocks",
     "fills the partial last block with i.i.d. Gaussian rows, not orthogonal ones"),
    (ex04_float32, "shape_and_dtype", "returns float32 instead of float64"),
)
MISTAKE_FEEDBACK = [
    ("ex04_iid_gaussian", "orthogonal_blocks", "share block 1 but are not orthogonal"),
    ("ex04_one_block_reused", "orthogonal_blocks", "of different blocks are parallel"),
    ("ex04_qr_unit_rows", "row_lengths", "the mean of ‖ω‖² is 1, expected 16 ± 0.69 (6 standard errors)"),
    ("ex04_qr_rows_times_sqrt_d", "row_lengths", "the variance of ‖ω‖² is "),
    ("ex04_qr_without_sign_fix", "isotropic", "multiplied by the sign of R[j, j]"),
    ("ex04_global_rng", "uses_generator", "the call advanced torch's global random generator"),
    ("ex04_own_fixed_seed", "uses_generator", "generators seeded 45 and 46 gave the same matrix"),
    ("ex04_partial_block_dropped", "shape_and_dtype", "output has shape [8, 4], expected [10, 4] = [m, d]"),
    ("ex04_float32", "shape_and_dtype", "expected torch.float64 (projections are float64)"),
]
EXACTLY_FAILS = [  # mistakes that must cost these tests' points and no others
    ("ex04_float32", {"shape_and_dtype"}),  # a float32 panel is otherwise perfect: only the dtype test costs
]


def ex04_lengths_first_rows_of_q(m, d, generator):
    """Other draws than the key's: lengths first, then blocks from the ROWS of a sign-fixed (Haar) Q."""
    lengths = torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)  # [m, 1]
    blocks = []
    for _ in range(math.ceil(m / d)):
        q, r = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
        blocks.append(q * torch.sign(torch.diagonal(r)))  # Haar, so its rows are orthonormal and uniform too
    return torch.cat(blocks)[:m] * lengths


ALTERNATIVES = [random_features.orthogonal_gaussian, ex04_lengths_first_rows_of_q]


def _panel_trivial(kind):
    def answer(m, d, generator):
        if kind == "zeros":
            return torch.zeros(m, d, dtype=torch.float64)
        if kind == "copy":
            return torch.eye(d, dtype=torch.float64).repeat(math.ceil(m / d), 1)[:m]  # the same unit block again
        return torch.rand(m, d, dtype=torch.float64)  # uniform on [0, 1), not from `generator`

    return answer


TRIVIAL = trivial_answers("ex04", _panel_trivial)
