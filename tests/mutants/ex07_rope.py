"""ex07_rope: rotary position embedding, pair (x_2i, x_2i+1) rotated by p·θ_i with θ_i = 10000^(−2i/d)."""

import torch

from course_lib import positional

from .common import make_mutants, trivial_answers


def _rope(x, positions, *, halves=False, sign=1.0, exponent=2.0, sin_halves=False, cast=True, pairs=None):
    """A configurable RoPE the ex07 mutants are built from; the defaults give the right answer.

    ``halves`` pairs dim i with dim i + d/2 instead of 2i with 2i + 1; θ_i = 10000^(−exponent·i/d);
    ``sin_halves`` lays the sines out for the halves pairing and the cosines for the interleaved one;
    ``pairs(x)`` slices out (x_even, x_odd); ``cast`` brings the float64 cos/sin back to x's dtype.
    """
    d = x.shape[-1]
    theta = 10000.0 ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)  # [d/2]
    angles = sign * positions.to(torch.float64)[:, None] * theta  # [n, d/2]
    cos, sin = (angles.cos().to(x.dtype), angles.sin().to(x.dtype)) if cast else (angles.cos(), angles.sin())
    if halves:
        first, second = x[..., : d // 2], x[..., d // 2 :]  # [..., n, d/2] each
        return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)
    even, odd = (x[..., 0::2], x[..., 1::2]) if pairs is None else pairs(x)
    partner = torch.stack((-odd, even), dim=-1).flatten(-2)  # [..., n, d]: (x0, x1) -> (−x1, x0)
    sin = sin.repeat(1, 2) if sin_halves else sin.repeat_interleave(2, dim=-1)  # [n, d]
    return x * cos.repeat_interleave(2, dim=-1) + partner * sin


def ex07_halves_pairing(x, positions):
    return _rope(x, positions, halves=True)


def ex07_rotates_backwards(x, positions):
    return _rope(x, positions, sign=-1.0)


def ex07_theta_without_factor_2(x, positions):
    return _rope(x, positions, exponent=1.0)


def ex07_ignores_positions(x, positions):
    return _rope(x, torch.arange(x.shape[-2]))


def ex07_sin_laid_out_as_halves(x, positions):
    return _rope(x, positions, sin_halves=True)


def ex07_float64_cos_sin(x, positions):
    return _rope(x, positions, cast=False)


def ex07_pairs_from_axis_1(x, positions):
    return _rope(x, positions, pairs=lambda x: (x[:, 0::2], x[:, 1::2]))  # right only for x [n, d]


MUTANTS = make_mutants(
    (ex07_halves_pairing, "values batch_dims uses_positions",
     "pairs dim i with dim i + d/2 (the halves layout) instead of 2i with 2i + 1"),
    (ex07_rotates_backwards, "values batch_dims uses_positions",
     "rotates by −pθ instead of +pθ, turning every pair the wrong way"),
    (ex07_theta_without_factor_2, "values batch_dims uses_positions",
     "uses θ_i = 10000^(−i/d), dropping the factor 2 in the exponent"),
    (ex07_ignores_positions, "uses_positions",
     "rotates by the row index 0, 1, …, n − 1, ignoring the given `positions`"),
    (ex07_sin_laid_out_as_halves, "values norm_preserved relative_position",
     "repeats the sines as [sin, sin] halves but the cosines pair by pair"),
    (ex07_float64_cos_sin, "shape_and_dtype",
     "leaves cos and sin in float64, so a float32 x comes back as float64"),
    (ex07_pairs_from_axis_1, "batch_dims",
     "slices the pairs with x[:, 0::2], along axis 1: right only for an unbatched x"),
)
MISTAKE_FEEDBACK = [
    ("ex07_halves_pairing", "values", "pairing neighbouring dims (0, 1), (2, 3)"),
    ("ex07_ignores_positions", "uses_positions", "this is the rotation at positions 0 .. n−1: use positions[t]"),
    ("ex07_rotates_backwards", "uses_positions", "the answer is wrong whatever the positions"),
    ("ex07_sin_laid_out_as_halves", "norm_preserved", "the same angle for its cos and its sin"),
    ("ex07_sin_laid_out_as_halves", "relative_position", "when both positions moved by 1000"),
    ("ex07_pairs_from_axis_1", "batch_dims", "the batch dims are mishandled: take the pairs from the last axis"),
    ("ex07_float64_cos_sin", "shape_and_dtype", "output has dtype torch.float64, expected torch.float32"),
]


def ex07_complex_rotation(x, positions):
    """RoPE as complex multiplication: pair (x_2i, x_2i+1) is the number x_2i + i·x_2i+1, times e^{i p θ_i}."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]
    phase = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), positions[:, None] * theta)
    z = torch.view_as_complex(x.double().unflatten(-1, (d // 2, 2)).contiguous()) * phase  # [..., n, d/2]
    return torch.view_as_real(z).flatten(-2).to(x.dtype)


def ex07_rotation_matrices(x, positions):
    """RoPE as one [d, d] block-diagonal rotation matrix per position, applied with einsum."""
    R = torch.stack([positional.rope_matrix(float(p), x.shape[-1]) for p in positions]).to(x.dtype)  # [n, d, d]
    return torch.einsum("nij,...nj->...ni", R, x)


ALTERNATIVES = [ex07_complex_rotation, ex07_rotation_matrices]


def _rope_trivial(kind):
    def answer(x, positions):
        if kind == "zeros":
            return torch.zeros_like(x)
        if kind == "copy":
            return x.clone()
        return torch.randn(x.shape, dtype=x.dtype)

    return answer


TRIVIAL = trivial_answers("ex07", _rope_trivial)
TRIVIAL_FEEDBACK = [
    ("ex07_trivial_copy", "relative_position", "the output stays the same when positions changes"),
]
