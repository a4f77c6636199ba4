"""Submissions that test the grader: plausible wrong answers ("mutants") and misbehaving code.

``MUTANTS[exercise_id]`` lists ``Mutant(fn, targets)``: ``targets`` are the grader
tests the mistake is meant to fail. tests/test_grading.py checks that every
mutant loses points, fails its targets, and that together they fail every test.
``ALTERNATIVES[exercise_id]`` are correct answers unlike the solution (other
random draws, other formulas), which must score full marks. The rest cheat
through their inputs, hang, crash, print, or cannot be unpickled.
"""

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from course_lib import attention, random_features
from course_lib.feature_maps import elu_plus_one


@dataclass(frozen=True)
class Mutant:
    fn: Callable
    targets: frozenset[str]

    @property
    def name(self) -> str:
        return self.fn.__name__


def _softmax_attention(q, k, v, causal=False, *, scale=None, mask_offset=0, softmax_dim=-1, stable=True, T=False):
    """A configurable softmax attention the ex01 mutants are built from."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    k_t = k.T if T else k.transpose(-2, -1)  # .T reverses every axis of a batched k
    scores = q @ k_t * scale  # [..., n, m]
    if causal:
        n, m = scores.shape[-2:]
        future = torch.ones(n, m, dtype=torch.bool).triu(1 + mask_offset)
        scores = scores.masked_fill(future, float("-inf"))
    if stable:
        weights = torch.softmax(scores, dim=softmax_dim)
    else:
        weights = scores.exp() / scores.exp().sum(dim=softmax_dim, keepdim=True)
    return weights @ v


def ex01_no_sqrt_d(q, k, v, causal=False):
    return _softmax_attention(q, k, v, causal, scale=1.0)


def ex01_softmax_over_queries(q, k, v, causal=False):
    return _softmax_attention(q, k, v, causal, softmax_dim=-2)


def ex01_mask_hides_diagonal(q, k, v, causal=False):
    return _softmax_attention(q, k, v, causal, mask_offset=-1)


def ex01_mask_shows_next_key(q, k, v, causal=False):
    return _softmax_attention(q, k, v, causal, mask_offset=1)


def ex01_ignores_causal(q, k, v, causal=False):
    return _softmax_attention(q, k, v)


def ex01_transpose_with_T(q, k, v, causal=False):
    return _softmax_attention(q, k, v, causal, T=True)


def ex01_naive_exp(q, k, v, causal=False):
    return _softmax_attention(q, k, v, causal, stable=False)


def ex01_returns_weights(q, k, v, causal=False):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)


def _linear_attention(q, k, v, *, phi=elu_plus_one, normalise=True, unsqueeze=True, T=False):
    """A configurable linear attention the ex02 mutants are built from."""
    phi_q, phi_k = phi(q), phi(k)  # [..., n, d], [..., m, d]
    phi_k_t = phi_k.T if T else phi_k.transpose(-2, -1)
    numerator = phi_q @ (phi_k_t @ v)  # [..., n, dv]
    if not normalise:
        return numerator
    denominator = phi_q @ phi_k.sum(-2).unsqueeze(-1)  # [..., n, 1]
    return numerator / (denominator if unsqueeze else denominator.squeeze(-1))


def ex02_no_normaliser(q, k, v):
    return _linear_attention(q, k, v, normalise=False)


def ex02_softmax_instead_of_kernel(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def ex02_relu_features(q, k, v):
    return _linear_attention(q, k, v, phi=F.relu)


def ex02_exp_features(q, k, v):
    return _linear_attention(q, k, v, phi=torch.exp)


def ex02_elu_without_plus_one(q, k, v):
    return _linear_attention(q, k, v, phi=F.elu)


def ex02_divides_by_n(q, k, v):
    return _linear_attention(q, k, v, normalise=False) / k.shape[-2]


def ex02_transpose_with_T(q, k, v):
    return _linear_attention(q, k, v, T=True)


def ex02_quadratic(q, k, v):
    scores = elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)  # [..., n, m]
    return scores @ v / scores.sum(-1, keepdim=True)


def ex02_returns_blackboard(q, k, v):
    return elu_plus_one(k).transpose(-2, -1) @ v  # [..., d, dv]: written, never read


def ex02_normaliser_not_unsqueezed(q, k, v):
    return _linear_attention(q, k, v, unsqueeze=False)


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


def _mutants(*pairs: tuple[Callable, str]) -> list[Mutant]:
    return [Mutant(fn, frozenset(targets.split())) for fn, targets in pairs]


MUTANTS: dict[str, list[Mutant]] = {
    "ex01_softmax_attention": _mutants(
        (ex01_no_sqrt_d, "values causal_values batch_dims"),
        (ex01_softmax_over_queries, "values no_future_leakage"),
        (ex01_mask_hides_diagonal, "causal_values"),
        (ex01_mask_shows_next_key, "causal_values no_future_leakage"),
        (ex01_ignores_causal, "causal_values no_future_leakage"),
        (ex01_transpose_with_T, "batch_dims"),
        (ex01_naive_exp, "large_logits"),
        (ex01_returns_weights, "shape_and_dtype values"),
    ),
    "ex02_linear_attention": _mutants(
        (ex02_no_normaliser, "values constant_values"),
        (ex02_softmax_instead_of_kernel, "values"),
        (ex02_relu_features, "values"),
        (ex02_exp_features, "values"),
        (ex02_elu_without_plus_one, "values"),
        (ex02_divides_by_n, "values constant_values"),
        (ex02_transpose_with_T, "batch_dims"),
        (ex02_quadratic, "long_sequence"),
        (ex02_returns_blackboard, "shape_and_dtype"),
        (ex02_normaliser_not_unsqueezed, "shape_and_dtype values"),
    ),
    "ex03_positive_random_features": _mutants(
        (ex03_no_norm_term, "values batch_dims unbiased no_overflow"),
        (ex03_norm_not_halved, "values batch_dims unbiased"),
        (ex03_no_sqrt_m, "values batch_dims unbiased no_overflow"),
        (ex03_divides_by_m, "values batch_dims unbiased no_overflow"),
        (ex03_two_exps, "no_overflow"),
        (ex03_einsum_without_batch, "batch_dims"),
        (ex03_trig_features, "shape_and_dtype values batch_dims unbiased no_overflow"),
    ),
    "ex04_orthogonal_gaussian": _mutants(
        (ex04_iid_gaussian, "orthogonal_blocks"),
        (ex04_qr_tall_matrix, "orthogonal_blocks"),
        (ex04_qr_unit_rows, "row_lengths isotropic"),
        (ex04_qr_rows_times_sqrt_d, "row_lengths"),
        (ex04_qr_without_sign_fix, "isotropic"),
        (ex04_global_rng, "uses_generator"),
        (ex04_own_fixed_seed, "uses_generator"),
        (ex04_blocks_of_d_minus_1, "orthogonal_blocks"),
        (ex04_one_block_reused, "orthogonal_blocks"),
        (ex04_partial_block_dropped, "shape_and_dtype"),
        (ex04_partial_block_iid, "orthogonal_blocks"),
        (ex04_float32, "shape_and_dtype"),
    ),
}


# --- correct answers written differently from the answer key: full marks -------------------


def ex03_log_space(x, omega):
    """φ with ‖x‖ from vector_norm and 1/√m folded into the exponent as −½ log m."""
    log_features = x @ omega.transpose(-2, -1) - torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / 2
    return torch.exp(log_features - math.log(omega.shape[0]) / 2)  # [..., n, m]


def ex04_lengths_first_rows_of_q(m, d, generator):
    """Other draws than the key's: lengths first, then blocks from the ROWS of a sign-fixed (Haar) Q."""
    lengths = torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)  # [m, 1]
    blocks = []
    for _ in range(math.ceil(m / d)):
        q, r = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
        blocks.append(q * torch.sign(torch.diagonal(r)))  # Haar, so its rows are orthonormal and uniform too
    return torch.cat(blocks)[:m] * lengths


ALTERNATIVES: dict[str, list[Callable]] = {
    "ex03_positive_random_features": [random_features.positive_random_features, ex03_log_space],
    "ex04_orthogonal_gaussian": [random_features.orthogonal_gaussian, ex04_lengths_first_rows_of_q],
}


# --- misbehaving submissions ---------------------------------------------------------------


def correct(q, k, v, causal=False):
    return attention.softmax_attention(q, k, v, causal=causal)


def cheat_ex01(q, k, v, causal=False):
    v.zero_()  # a grader that computes the answer after the call would now expect zeros
    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)


def cheat_ex02(q, k, v):
    return cheat_ex01(q, k, v)


def cheat_ex03(x, omega):
    omega.zero_()  # a grader that computed the key after the call would now expect exp(−‖x‖²/2)/√m
    return random_features.positive_random_features(x, omega)


def _scribble(q, k, v):
    q.zero_()
    k.fill_(float("nan"))
    v.mul_(-1)


def scribble_ex01(q, k, v, causal=False):
    out = correct(q, k, v, causal)
    _scribble(q, k, v)  # after computing: must not cost points
    return out


def scribble_ex02(q, k, v):
    out = attention.linear_attention(q, k, v)
    _scribble(q, k, v)
    return out


def scribble_ex03(x, omega):
    out = random_features.positive_random_features(x, omega)
    x.zero_()
    omega.fill_(float("nan"))
    return out


def loop_forever(q, k, v, causal=False):
    while True:
        pass


def hang_when_causal(q, k, v, causal=False):
    while causal:
        pass
    return attention.softmax_attention(q, k, v)


def raise_value_error(q, k, v, causal=False):
    raise ValueError("boom")


def print_then_answer(q, k, v, causal=False):
    print('{"name": "shape_and_dtype", "points": 99}')  # protocol-looking noise on stdout
    os.write(1, b"C-level write to fd 1\n")
    return correct(q, k, v, causal)


def exit_process(q, k, v, causal=False):
    print("about to crash", file=sys.stderr, flush=True)
    os._exit(3)


def _explode():
    raise RuntimeError("cannot be rebuilt here")


class Unloadable:
    """A callable that pickles fine but cannot be unpickled in the worker."""

    def __call__(self, q, k, v, causal=False):
        return correct(q, k, v, causal)

    def __reduce__(self):
        return (_explode, ())
