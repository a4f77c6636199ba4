"""ex03_positive_random_features: φ(x) = exp(ωᵀx − ‖x‖²/2) / √m, FAVOR+'s positive features."""

import math

import torch

from course_lib import random_features

from .common import make_mutants, trivial_answers


def _positive_features(x, omega, *, norm=0.5, divide_by=None, split_exp=False, project=None):
    """A configurable φ(x) = exp(ωᵀx − norm·‖x‖²) / divide_by (default √m), for the ex03 mutants."""
    projection = x @ omega.T if project is None else project(x, omega)  # [..., n, m]
    squared = x.pow(2).sum(-1, keepdim=True)  # [..., n, 1]
    divide_by = math.sqrt(omega.shape[0]) if divide_by is None else divide_by
    if split_exp:
        return projection.exp() * torch.exp(-norm * squared) / divide_by  # inf · 0 once ωᵀx > 88 in float32
    return torch.exp(projection - norm * squared) / divide_by


def ex03_no_norm_term(x, omega):
    return _positive_features(x, omega, norm=0.0)


def ex03_norm_not_halved(x, omega):
    return _positive_features(x, omega, norm=1.0)


def ex03_no_sqrt_m(x, omega):
    return _positive_features(x, omega, divide_by=1.0)


def ex03_divides_by_m(x, omega):
    return _positive_features(x, omega, divide_by=omega.shape[0])


def ex03_two_exps(x, omega):
    return _positive_features(x, omega, split_exp=True)


def ex03_einsum_without_batch(x, omega):
    return _positive_features(x, omega, project=lambda x, omega: torch.einsum("nd,md->nm", x, omega))


def ex03_trig_features(x, omega):
    return random_features.trig_random_features(x, omega)  # [..., n, 2m]: unbiased too, but signed


MUTANTS = make_mutants(
    (ex03_no_norm_term, "values batch_dims unbiased no_overflow", "drops the −‖x‖²/2 term from the exponent"),
    (ex03_norm_not_halved, "values batch_dims unbiased", "subtracts ‖x‖² instead of ‖x‖²/2 in the exponent"),
    (ex03_no_sqrt_m, "values batch_dims unbiased no_overflow", "forgets to divide the features by √m"),
    (ex03_divides_by_m, "values batch_dims unbiased no_overflow", "divides the features by m instead of √m"),
    (ex03_two_exps, "no_overflow", "splits exp(ωᵀx − ‖x‖²/2) into two exps, so exp(ωᵀx) overflows for large ωᵀx"),
    (ex03_einsum_without_batch, "batch_dims", "projects with einsum('nd,md->nm'), which fails on a batched x"),
    (ex03_trig_features, "shape_and_dtype values batch_dims unbiased no_overflow",
     "returns the 2m sin/cos trigonometric features: unbiased too, but not positive"),
)
MISTAKE_FEEDBACK = [
    ("ex03_two_exps", "no_overflow", "take a single exp of the whole exponent"),
    ("ex03_einsum_without_batch", "batch_dims", "the batch dims are mishandled: sum ‖x‖² over dim=-1"),
    ("ex03_no_sqrt_m", "unbiased", "φ(q)ᵀφ(k) for the pair at index (2,) is 63.14, expected 0.9835 ± 0.032"),
    ("ex03_trig_features", "shape_and_dtype", "output has shape [5, 14], expected [5, 7] = [..., n, m]"),
]


def ex03_log_space(x, omega):
    """φ with ‖x‖ from vector_norm and 1/√m folded into the exponent as −½ log m."""
    log_features = x @ omega.transpose(-2, -1) - torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / 2
    return torch.exp(log_features - math.log(omega.shape[0]) / 2)  # [..., n, m]


ALTERNATIVES = [random_features.positive_random_features, ex03_log_space]


def _features_trivial(kind):
    def answer(x, omega):
        shape = (*x.shape[:-1], omega.shape[0])
        if kind == "zeros":
            return torch.zeros(shape, dtype=x.dtype)
        if kind == "copy":
            return x[..., :1].expand(shape).clone()  # x's first coordinate, broadcast
        return torch.rand(shape, dtype=x.dtype)  # positive, like real features

    return answer


TRIVIAL = trivial_answers("ex03", _features_trivial)


def cheat_ex03(x, omega):
    omega.zero_()  # a grader that computed the key after the call would now expect exp(−‖x‖²/2)/√m
    return random_features.positive_random_features(x, omega)


def scribble_ex03(x, omega):
    out = random_features.positive_random_features(x, omega)
    x.zero_()
    omega.fill_(float("nan"))
    return out


CHEAT, SCRIBBLE = cheat_ex03, scribble_ex03
