"""Submissions that test the grader: plausible wrong answers ("mutants") and misbehaving code.

``MUTANTS[exercise_id]`` lists ``Mutant(fn, targets, mistake)``: ``targets`` are the grader
tests the mistake is meant to fail, ``mistake`` says in plain words what the wrong answer
does (one line, for the instructor guide's common mistakes). tests/test_grading.py checks that
every mutant loses points, fails its targets, and that together they fail every test.
``ALTERNATIVES[exercise_id]`` are correct answers unlike the solution (other
random draws, other formulas), which must score full marks. ``TRIVIAL[exercise_id]`` are
answers of the right shape that compute nothing (zeros, a copy of an input, random numbers),
which must score 0: a property's points need an answer computed from the inputs. The rest cheat
through their inputs, hang, crash, print, or cannot be unpickled.
"""

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from course_lib import attention, positional, random_features
from course_lib.feature_maps import elu_plus_one


@dataclass(frozen=True)
class Mutant:
    fn: Callable
    targets: frozenset[str]
    mistake: str  # what the wrong answer does, in plain words: "forgets the 1/√d scaling of the scores"

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


def _causal_linear(q, k, v, *, prefix=True, exclusive=False, normalise=True, eps=0.0, batched=True):
    """A configurable causal elu+1 linear attention by prefix sums, for the ex05 mutants."""
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # [..., n, d]
    outer = torch.einsum("...nd,...ne->...nde" if batched else "nd,ne->nde", phi_k, v)  # [..., n, d, dv]
    if prefix:
        S, z = outer.cumsum(-3), phi_k.cumsum(-2)  # [..., n, d, dv], [..., n, d]: the ledger after key i
    else:
        S, z = outer.sum(-3, keepdim=True), phi_k.sum(-2, keepdim=True)  # every query reads the whole sequence
    if exclusive:
        S, z = S - outer, z - phi_k  # the ledger before key i: query 0 reads an empty one
    numerator = torch.einsum("...nd,...nde->...ne", phi_q, S)  # [..., n, dv]
    if not normalise:
        return numerator
    return numerator / ((phi_q * z).sum(-1, keepdim=True) + eps)


def ex05_sums_all_keys(q, k, v):
    return _causal_linear(q, k, v, prefix=False)


def ex05_exclusive_prefix(q, k, v):
    return _causal_linear(q, k, v, exclusive=True)  # 0 / 0 at position 0


def ex05_exclusive_prefix_eps(q, k, v):
    return _causal_linear(q, k, v, exclusive=True, eps=1e-6)  # position 0 gets 0 instead of NaN


def ex05_no_normaliser(q, k, v):
    return _causal_linear(q, k, v, normalise=False)


def ex05_einsum_without_batch(q, k, v):
    return _causal_linear(q, k, v, batched=False)


def ex05_quadratic(q, k, v):
    scores = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)).tril()  # [..., n, n]: 4 TiB at n = 2**20
    return scores @ v / scores.sum(-1, keepdim=True)


def ex05_returns_ledger(q, k, v):
    return torch.einsum("...nd,...ne->...nde", elu_plus_one(k), v).cumsum(-3)  # [..., n, d, dv]: never read


def ex05_float64_ledger(q, k, v):
    return _causal_linear(q.double(), k.double(), v.double())  # float64 out for float32 in


def _chunked_causal(
    q, k, v, chunk_size, *, mask=0, read_after_update=False, drop_last=False, update=True, normalise=True, T=False
):
    """A configurable loop over chunks (tables) for the ex06 mutants; the defaults give the right answer.

    ``mask``: the diagonal offset of the intra-chunk tril (-1 hides the diagonal, None
    masks nothing); ``read_after_update``: the chunk's keys enter the ledger before its
    queries read it; ``drop_last``: a partial last chunk is skipped; ``update``: the
    ledger is ever written; ``T``: keys transposed with ``.T``.
    """
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # [..., n, d]
    S = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1], v.shape[-1])  # [..., d, dv]
    z = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1], 1)  # [..., d, 1]
    n = q.shape[-2]
    outputs = []
    for start in range(0, n - n % chunk_size if drop_last else n, chunk_size):
        qc, kc, vc = (x[..., start : start + chunk_size, :] for x in (phi_q, phi_k, v))  # [..., C, ·]
        if update and read_after_update:
            S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2).unsqueeze(-1)
        scores = qc @ (kc.T if T else kc.transpose(-2, -1))  # [..., C, C]
        scores = scores if mask is None else scores.tril(mask)
        numerator = scores @ vc + qc @ S  # [..., C, dv]
        outputs.append(numerator / (scores.sum(-1, keepdim=True) + qc @ z) if normalise else numerator)
        if update and not read_after_update:
            S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2).unsqueeze(-1)
    return torch.cat(outputs, dim=-2)


def ex06_ledger_includes_own_chunk(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, read_after_update=True)  # the chunk's keys counted twice


def ex06_strict_mask(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, mask=-1)


def ex06_unmasked_block(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, mask=None)


def ex06_last_partial_chunk_dropped(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, drop_last=True)


def ex06_ledger_never_updated(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, update=False)


def ex06_ignores_chunk_size(q, k, v, chunk_size):
    return ex05_quadratic(q, k, v)  # one n×n block: 256 GiB at n = 2**18


def ex06_no_normaliser(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, normalise=False)


def ex06_transpose_with_T(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, T=True)


def _float32_ledger(q, k, v, chunk_size, *, cast_on_read=False):
    """The natural start ``S = torch.zeros(d, dv)``: float32 whatever the inputs are (ex06 mutants)."""
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # [n, d]
    S, z = torch.zeros(q.shape[-1], v.shape[-1]), torch.zeros(q.shape[-1], 1)  # float32 on the CPU
    plates = []
    for start in range(0, q.shape[-2], chunk_size):
        qc, kc, vc = (x[..., start : start + chunk_size, :] for x in (phi_q, phi_k, v))
        scores = (qc @ kc.transpose(-2, -1)).tril()  # [C, C]
        ledger, total = (S.to(qc.dtype), z.to(qc.dtype)) if cast_on_read else (S, z)
        plates.append((scores @ vc + qc @ ledger) / (scores.sum(-1, keepdim=True) + qc @ total))
        if cast_on_read:  # in place: the sums are rounded to float32 at every update
            S += kc.transpose(-2, -1) @ vc
            z += kc.sum(-2).unsqueeze(-1)
        else:  # float32 @ float64 raises before this line is reached
            S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2).unsqueeze(-1)
    return torch.cat(plates, dim=-2)


def ex06_float32_ledger(q, k, v, chunk_size):
    return _float32_ledger(q, k, v, chunk_size)  # passes the notebook's float32 check, not float64


def ex06_float32_ledger_cast_on_read(q, k, v, chunk_size):
    return _float32_ledger(q, k, v, chunk_size, cast_on_read=True)  # runs, but rounds to float32


def _bias_and_noise(
    q, k, v, num_features, redraws, generator, *, error="bias", normalise=True, fresh=True, target="softmax",
    spread="sample",
):
    """A configurable bias/noise measurement for the ex09 mutants; the defaults give the right answer.

    ``error``: "bias" (mean − exact), "rmse" (root mean square of each redraw's error), "abs"
    (mean |error|), "flipped" (exact − mean); ``normalise=False`` measures the kernel estimate
    φ(Q)φ(K)ᵀV against exp(QKᵀ/√d)V; ``fresh=False`` draws the features once; ``target``
    "mean_kernel" compares with the ratio of the averaged numerator and denominator;
    ``spread``: "sample" (R − 1), "population" (R) or "error_bar" (std/√R).
    """
    exact = attention.softmax_attention(q, k, v)  # [..., n, dv]
    features = random_features.PerformerFeatures(q.shape[-1], num_features, generator=generator)
    numerators, denominators = [], []
    for _ in range(redraws):
        if fresh and numerators:
            features = random_features.PerformerFeatures(q.shape[-1], num_features, generator=generator)
        phi_q, phi_k = features(q), features(k)  # [..., n, m], [..., m_keys, m]
        numerators.append(phi_q @ (phi_k.transpose(-2, -1) @ v))  # [..., n, dv]
        denominators.append(phi_q @ phi_k.sum(-2).unsqueeze(-1))  # [..., n, 1]
    numerator, denominator = torch.stack(numerators), torch.stack(denominators)
    if normalise:
        outputs = numerator / denominator  # [R, ..., n, dv]
    else:
        outputs = numerator
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        exact = scores.exp() @ v  # the kernel's own target
    if target == "mean_kernel":
        exact = numerator.mean(0) / denominator.mean(0)
    errors = outputs - exact
    bias = {
        "bias": errors.mean(0),
        "rmse": errors.pow(2).mean(0).sqrt(),
        "abs": errors.abs().mean(0),
        "flipped": -errors.mean(0),
    }[error]
    noise = outputs.std(0, correction=0 if spread == "population" else 1)
    return bias, noise / math.sqrt(redraws) if spread == "error_bar" else noise


def ex09_rmse_not_bias(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, generator, error="rmse")


def ex09_mean_abs_error(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, generator, error="abs")


def ex09_sign_flipped(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, generator, error="flipped")


def ex09_kernel_estimate_only(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, generator, normalise=False)


def ex09_population_std(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, generator, spread="population")


def ex09_error_bar_as_noise(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, generator, spread="error_bar")


def ex09_same_features_every_redraw(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, generator, fresh=False)


def ex09_summarised_over_entries(q, k, v, num_features, redraws, generator):
    bias, noise = _bias_and_noise(q, k, v, num_features, redraws, generator)
    return bias.pow(2).mean().sqrt(), noise.pow(2).mean().sqrt()  # two numbers, not [..., n, dv]


def ex09_global_rng(q, k, v, num_features, redraws, generator):
    return _bias_and_noise(q, k, v, num_features, redraws, None)


def _cost_model(
    *, flops=1, softmax="both", products=2, projections=2, chunks="all", rounding="ceil", normaliser=False,
    causal_half=True,
):
    """A configurable ex10 cost model (cost_model() -> dict of the three functions); defaults are right.

    ``flops=2`` counts FLOPs; ``softmax``: "both" (N²(d + dv)), "scores" (N²d), "2d" (2N²d whatever dv);
    ``products``: 2 or 1 product of linear attention counted; ``projections``: how many of
    FAVOR+'s x ωᵀ are counted (0 ignores the feature map); ``chunks``: "all" (N·C·(f + dv)),
    "one" (a single C×C block) or "none"; ``rounding``: "ceil", "floor", "round" or "float";
    ``normaliser=True`` counts the normaliser's 2·N·f too (a convention the grader accepts);
    ``causal_half=False`` compares the causal chunked form with the full softmax count.
    """

    def macs_softmax(n, d, dv):
        per_pair = {"both": d + dv, "scores": d, "2d": 2 * d}[softmax]
        return flops * n * n * per_pair

    def macs_linear(n, d, dv, f, *, projections=False, chunk=None):
        total = products * n * f * dv + (projections_counted * n * d * f if projections else 0)
        total += 2 * n * f if normaliser else 0
        if chunk is not None and chunks != "none":
            total += (n * chunk if chunks == "all" else chunk * chunk) * (f + dv)
        return flops * total

    def predicted_crossover(d, dv, f, *, projections=False, chunk=None):
        per_token = macs_linear(1, d, dv, f, projections=projections, chunk=chunk)
        per_pair = macs_softmax(1, d, dv) / (2 if chunk is not None and causal_half else 1)  # causal: unmasked half
        if chunk is not None and chunks == "one":
            per_token = macs_linear(1, d, dv, f, projections=projections)  # its constant block ignored
        quotient = per_token / per_pair
        return {"ceil": math.ceil, "floor": math.floor, "round": round, "float": float}[rounding](quotient)

    projections_counted = projections

    def cost_model():
        return {"macs_softmax": macs_softmax, "macs_linear": macs_linear, "predicted_crossover": predicted_crossover}

    return cost_model


def _ex10(name, **settings):
    cost_model = _cost_model(**settings)
    cost_model.__name__ = name
    return cost_model


ex10_counts_flops = _ex10("ex10_counts_flops", flops=2)  # every count doubled; N* unchanged
ex10_softmax_scores_only = _ex10("ex10_softmax_scores_only", softmax="scores")
ex10_softmax_2n2d = _ex10("ex10_softmax_2n2d", softmax="2d")  # the article's 2N²d, wrong once dv != d
ex10_linear_one_product = _ex10("ex10_linear_one_product", products=1)
ex10_causal_vs_full_softmax = _ex10("ex10_causal_vs_full_softmax", causal_half=False)  # N* = d + C, not 2(d + C)
ex10_counts_normaliser = _ex10("ex10_counts_normaliser", normaliser=True)  # a convention: full marks
ex10_no_feature_cost = _ex10("ex10_no_feature_cost", projections=0)  # the explorer's old N = m
ex10_one_projection = _ex10("ex10_one_projection", projections=1)
ex10_one_chunk_block = _ex10("ex10_one_chunk_block", chunks="one")
ex10_no_chunk_blocks = _ex10("ex10_no_chunk_blocks", chunks="none")
ex10_crossover_floor = _ex10("ex10_crossover_floor", rounding="floor")
ex10_crossover_round = _ex10("ex10_crossover_round", rounding="round")
ex10_crossover_float = _ex10("ex10_crossover_float", rounding="float")


QUIZ_KEY = {
    qid: entry["answer"]
    for qid, entry in json.loads((Path(__file__).parents[1] / "solutions" / "quiz_key.json").read_text()).items()
}  # the instructor's plaintext key (solutions/ only)


def _quiz_mutant(question_id: str) -> Callable:
    """quiz_answers() right everywhere except ``question_id``, which gets the next letter after the key's first."""
    key = QUIZ_KEY[question_id]
    wrong = "ABCD"[("ABCD".index(key[0]) + 1) % 4]

    def quiz_answers():
        return {**QUIZ_KEY, question_id: wrong}

    quiz_answers.__name__ = f"ex08_wrong_{question_id.lower()}"
    return quiz_answers


def _quiz_mistake(question_id: str) -> str:
    """What ``_quiz_mutant(question_id)`` gets wrong, without giving the key away."""
    key, wrong = QUIZ_KEY[question_id], _quiz_mutant(question_id)()[question_id]
    if len(key) > 1 and wrong in key:
        return f"ticks only one of the {len(key)} correct options of interview question {question_id}"
    return f"picks a wrong option for interview question {question_id}"


def _delta_rule(q, k, v, beta, *, use_beta=True, read_first=False, normalise=True, sign=1.0, carry=True,
                transposed_read=False, final_read=False, float32_ledger=False):
    """A configurable recurrent delta rule the ex11 mutants are built from; the defaults give the right answer.

    ``float32_ledger``: the natural start ``S = torch.zeros(d, dv)``, float32 whatever the inputs are.
    """
    if normalise:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # [..., d, dv]
    S = torch.zeros(q.shape[-1], v.shape[-1]) if float32_ledger else S
    outputs = []
    for t in range(q.shape[-2]):
        q_t, k_t, v_t = q[..., t, :], k[..., t, :], v[..., t, :]
        if not carry:
            S = torch.zeros_like(S)
        if read_first:
            outputs.append((q_t.unsqueeze(-2) @ S).squeeze(-2))
        error = sign * (v_t - (k_t.unsqueeze(-2) @ S).squeeze(-2))  # v_t − Sᵀk_t [..., dv]
        strength = beta[..., t, None] if use_beta else 1.0
        S = S + k_t.unsqueeze(-1) * (strength * error).unsqueeze(-2)
        if not read_first:
            read = (S @ q_t.unsqueeze(-1)).squeeze(-1) if transposed_read else (q_t.unsqueeze(-2) @ S).squeeze(-2)
            outputs.append(read)
    return q @ S if final_read else torch.stack(outputs, dim=-2)


def ex11_float32_ledger(q, k, v, beta):
    return _delta_rule(q, k, v, beta, float32_ledger=True)  # float64 inputs meet a float32 ledger: torch raises


def ex11_ignores_beta(q, k, v, beta):
    return _delta_rule(q, k, v, beta, use_beta=False)


def ex11_reads_before_writing(q, k, v, beta):
    return _delta_rule(q, k, v, beta, read_first=True)


def ex11_unnormalised_keys(q, k, v, beta):
    return _delta_rule(q, k, v, beta, normalise=False)


def ex11_error_sign_flipped(q, k, v, beta):
    return _delta_rule(q, k, v, beta, sign=-1.0)


def ex11_ledger_transposed(q, k, v, beta):
    return _delta_rule(q, k, v, beta, transposed_read=True)  # S q instead of Sᵀq: [..., d], not [..., dv]


def ex11_state_not_carried(q, k, v, beta):
    return _delta_rule(q, k, v, beta, carry=False)


def ex11_reads_final_ledger(q, k, v, beta):
    return _delta_rule(q, k, v, beta, final_read=True)  # every query reads S_nᵀq̂_t: the future leaks into the past



# --- trivial answers: zeros, a copy of an input, random numbers, each of the right shape: 0 points ---------


def _rows_of(q, v):
    """[..., n, dv] taken from v's first n rows: an answer of the right shape computed from nothing."""
    return v[..., : q.shape[-2], :].clone()


def _attention_trivial(kind):
    """(q, k, v, *rest) -> zeros, a copy of v's rows, or standard-normal numbers [..., n, dv] in q's dtype."""

    def answer(q, k, v, *rest, **options):
        shape = (*q.shape[:-1], v.shape[-1])
        if kind == "zeros":
            return torch.zeros(shape, dtype=q.dtype)
        if kind == "copy":
            return _rows_of(q, v)
        return torch.randn(shape, dtype=q.dtype)

    return answer


def _trivial(exercise_id, kind, fn):
    fn.__name__ = fn.__qualname__ = f"{exercise_id[:4]}_trivial_{kind}"
    return fn


def _features_trivial(kind):
    def answer(x, omega):
        shape = (*x.shape[:-1], omega.shape[0])
        if kind == "zeros":
            return torch.zeros(shape, dtype=x.dtype)
        if kind == "copy":
            return x[..., :1].expand(shape).clone()  # x's first coordinate, broadcast
        return torch.rand(shape, dtype=x.dtype)  # positive, like real features

    return answer


def _panel_trivial(kind):
    def answer(m, d, generator):
        if kind == "zeros":
            return torch.zeros(m, d, dtype=torch.float64)
        if kind == "copy":
            return torch.eye(d, dtype=torch.float64).repeat(math.ceil(m / d), 1)[:m]  # the same unit block again
        return torch.rand(m, d, dtype=torch.float64)  # uniform on [0, 1), not from `generator`

    return answer


def _rope_trivial(kind):
    def answer(x, positions):
        if kind == "zeros":
            return torch.zeros_like(x)
        if kind == "copy":
            return x.clone()
        return torch.randn(x.shape, dtype=x.dtype)

    return answer


def _bias_trivial(kind):
    def answer(q, k, v, num_features, redraws, generator):
        shape = (*q.shape[:-1], v.shape[-1])
        if kind == "zeros":
            return torch.zeros(shape, dtype=q.dtype), torch.zeros(shape, dtype=q.dtype)
        if kind == "copy":
            return _rows_of(q, v), _rows_of(q, v)
        return tuple(torch.randn(shape, generator=generator, dtype=q.dtype) for _ in range(2))  # from `generator`

    return answer


def _cost_trivial(kind):
    import random

    def count(*args, **options):
        return {"zeros": 0, "copy": args[0], "random": random.randrange(1, 10**9)}[kind]

    def cost_model():
        return {"macs_softmax": count, "macs_linear": count, "predicted_crossover": count}

    return cost_model


TRIVIAL_MAKERS = {
    "ex01_softmax_attention": _attention_trivial,
    "ex02_linear_attention": _attention_trivial,
    "ex03_positive_random_features": _features_trivial,
    "ex04_orthogonal_gaussian": _panel_trivial,
    "ex05_causal_linear_attention": _attention_trivial,
    "ex06_chunked_causal": _attention_trivial,
    "ex07_rope": _rope_trivial,
    "ex09_estimator_bias": _bias_trivial,
    "ex10_crossover": _cost_trivial,
    "ex11_delta_rule": _attention_trivial,
}  # ex08 has no inputs: its answers are letters, each graded against the key
TRIVIAL: dict[str, list[Callable]] = {  # not MUTANTS (the guide's common mistakes): answers that compute nothing
    exercise_id: [_trivial(exercise_id, kind, make(kind)) for kind in ("zeros", "copy", "random")]
    for exercise_id, make in TRIVIAL_MAKERS.items()
}


def _mutants(*triples: tuple[Callable, str, str]) -> list[Mutant]:
    return [Mutant(fn, frozenset(targets.split()), mistake) for fn, targets, mistake in triples]


MUTANTS: dict[str, list[Mutant]] = {
    "ex01_softmax_attention": _mutants(
        (ex01_no_sqrt_d, "values causal_values batch_dims", "forgets the 1/√d scaling of the scores"),
        (ex01_softmax_over_queries, "values no_future_leakage",
         "takes the softmax over the queries (dim −2) instead of over the keys"),
        (ex01_mask_hides_diagonal, "causal_values",
         "masks the diagonal too, so query i cannot see key i (and row 0 is all NaN)"),
        (ex01_mask_shows_next_key, "causal_values no_future_leakage",
         "shifts the mask by one, so query i also sees the next key i + 1"),
        (ex01_ignores_causal, "causal_values no_future_leakage", "ignores `causal` and never masks the future"),
        (ex01_transpose_with_T, "batch_dims", "transposes a batched k with .T, which reverses every axis"),
        (ex01_naive_exp, "large_logits",
         "exponentiates the scores without subtracting the max, so large logits overflow"),
        (ex01_returns_weights, "shape_and_dtype values",
         "returns the softmax weights instead of weights @ v (and ignores `causal`)"),
    ),
    "ex02_linear_attention": _mutants(
        (ex02_no_normaliser, "values constant_values",
         "leaves out the normaliser φ(q)ᵀΣφ(k) and returns the numerator alone"),
        (ex02_softmax_instead_of_kernel, "values", "computes ordinary softmax attention instead of the elu + 1 kernel"),
        (ex02_relu_features, "values", "uses relu as the feature map instead of elu + 1"),
        (ex02_exp_features, "values", "uses exp as the feature map instead of elu + 1"),
        (ex02_elu_without_plus_one, "values", "uses elu without the + 1, so features and weights can be negative"),
        (ex02_divides_by_n, "values constant_values",
         "divides the numerator by the number of keys instead of by the normaliser"),
        (ex02_transpose_with_T, "batch_dims", "transposes a batched φ(k) with .T, which reverses every axis"),
        (ex02_quadratic, "long_sequence",
         "builds the n×m table φ(Q)φ(K)ᵀ before multiplying by V, so memory grows as n·m"),
        (ex02_returns_blackboard, "shape_and_dtype",
         "returns the blackboard φ(K)ᵀV [..., d, dv] without letting the queries read it"),
        (ex02_normaliser_not_unsqueezed, "shape_and_dtype values",
         "divides by a [..., n] normaliser, which broadcasts along dv instead of n"),
    ),
    "ex03_positive_random_features": _mutants(
        (ex03_no_norm_term, "values batch_dims unbiased no_overflow", "drops the −‖x‖²/2 term from the exponent"),
        (ex03_norm_not_halved, "values batch_dims unbiased", "subtracts ‖x‖² instead of ‖x‖²/2 in the exponent"),
        (ex03_no_sqrt_m, "values batch_dims unbiased no_overflow", "forgets to divide the features by √m"),
        (ex03_divides_by_m, "values batch_dims unbiased no_overflow", "divides the features by m instead of √m"),
        (ex03_two_exps, "no_overflow", "splits exp(ωᵀx − ‖x‖²/2) into two exps, so exp(ωᵀx) overflows for large ωᵀx"),
        (ex03_einsum_without_batch, "batch_dims", "projects with einsum('nd,md->nm'), which fails on a batched x"),
        (ex03_trig_features, "shape_and_dtype values batch_dims unbiased no_overflow",
         "returns the 2m sin/cos trigonometric features: unbiased too, but not positive"),
    ),
    "ex04_orthogonal_gaussian": _mutants(
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
    ),
    "ex07_rope": _mutants(
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
    ),
    "ex05_causal_linear_attention": _mutants(
        (ex05_sums_all_keys, "values no_future_leakage first_position",
         "sums the whole sequence into the ledger, so the future leaks into the past"),
        (ex05_exclusive_prefix, "shape_and_dtype values first_position",
         "uses an exclusive prefix sum: query i misses key i and query 0 gets 0/0 = NaN"),
        (ex05_exclusive_prefix_eps, "values first_position",
         "uses an exclusive prefix sum plus ε: query i misses key i and query 0 outputs 0"),
        (ex05_no_normaliser, "values first_position constant_values",
         "leaves out the normaliser φ(q_i)ᵀz_i and returns the numerator alone"),
        (ex05_einsum_without_batch, "batch_dims",
         "builds the outer products with einsum('nd,ne->nde'), which fails on batched inputs"),
        (ex05_quadratic, "long_sequence", "builds the masked n×n score table, so memory grows as n²"),
        (ex05_returns_ledger, "shape_and_dtype",
         "returns the running ledger [..., n, d, dv] without letting the queries read it"),
        (ex05_float64_ledger, "shape_and_dtype long_sequence",
         "accumulates in float64 and forgets to cast the output back to the inputs' dtype"),
    ),
    "ex06_chunked_causal": _mutants(
        (ex06_ledger_includes_own_chunk, "values chunk_size_one one_chunk no_future_leakage",
         "adds a chunk to the ledger before its queries read it: keys count twice, later ones leak"),
        (ex06_strict_mask, "shape_and_dtype values chunk_size_one one_chunk",
         "masks the diagonal of each chunk's block, so query i cannot see key i"),
        (ex06_unmasked_block, "values one_chunk no_future_leakage",
         "leaves each chunk's block unmasked, so queries see later keys of their chunk"),
        (ex06_last_partial_chunk_dropped, "shape_and_dtype values one_chunk",
         "skips a partial last chunk, returning fewer than n rows"),
        (ex06_ledger_never_updated, "values chunk_size_one long_sequence",
         "never adds the chunks to the ledger, so each chunk sees only its own keys"),
        (ex06_ignores_chunk_size, "long_sequence",
         "ignores chunk_size and builds one masked n×n table, so memory grows as n²"),
        (ex06_no_normaliser, "values constant_values", "leaves out the normaliser and returns the numerator alone"),
        (ex06_transpose_with_T, "batch_dims", "transposes a batched chunk of keys with .T, which reverses every axis"),
        (ex06_float32_ledger, "shape_and_dtype values chunk_size_one one_chunk no_future_leakage constant_values",
         "starts the ledger as torch.zeros(d, dv), so float64 inputs crash on a float32 ledger"),
        (ex06_float32_ledger_cast_on_read, "values chunk_size_one constant_values",
         "keeps a float32 ledger updated in place, so float64 inputs' sums are rounded to float32"),
    ),
    "ex08_interview_quiz": _mutants(*((_quiz_mutant(qid), qid.lower(), _quiz_mistake(qid)) for qid in QUIZ_KEY)),
    "ex09_estimator_bias": _mutants(
        (ex09_rmse_not_bias, "bias_matches bias_shrinks_like_1_over_m",
         "reports the root mean square error of the redraws as the bias, not mean − exact"),
        (ex09_mean_abs_error, "bias_matches bias_shrinks_like_1_over_m",
         "reports the mean absolute error of the redraws as the bias, not mean − exact"),
        (ex09_sign_flipped, "bias_matches", "computes the bias as exact − mean, flipping its sign"),
        (ex09_kernel_estimate_only, "bias_matches noise_matches constant_values",
         "measures the kernel estimate φ(Q)φ(K)ᵀV against exp(QKᵀ/√d)V, not the normalised output"),
        (ex09_population_std, "noise_matches",
         "takes the population std (divides by R) instead of the sample std (R − 1)"),
        (ex09_error_bar_as_noise, "noise_matches",
         "reports the error bar of the mean (std/√R) as the noise, not one redraw's std"),
        (ex09_same_features_every_redraw, "bias_matches noise_matches noise_shrinks_like_1_over_sqrt_m",
         "draws the features once and reuses them, so the redraws never differ"),
        (ex09_global_rng, "shape_and_dtype constant_values uses_generator",  # right on average: graded statistically
         "draws the features from torch's global generator, ignoring the `generator` argument"),
        (ex09_summarised_over_entries, "shape_and_dtype bias_matches noise_matches",
         "collapses bias and noise into one root mean square each, not [..., n, dv]"),
    ),
    "ex11_delta_rule": _mutants(
        (ex11_float32_ledger, "shape_and_dtype values writes_before_reading exact_read_back key_length_does_not_matter "
                              "no_future_leakage",
         "starts the ledger as torch.zeros(d, dv), so float64 inputs crash on a float32 ledger"),
        (ex11_ignores_beta, "values batch_dims writes_before_reading",
         "ignores β and writes every correction at full strength"),
        (ex11_reads_before_writing, "values batch_dims writes_before_reading exact_read_back",
         "reads the ledger before writing token t, so query t misses its own key-value pair"),
        (ex11_unnormalised_keys, "values batch_dims writes_before_reading exact_read_back key_length_does_not_matter",
         "skips the L2 normalisation of the queries and keys"),
        (ex11_error_sign_flipped, "values batch_dims writes_before_reading exact_read_back",
         "writes the error as Sᵀk − v instead of v − Sᵀk, pushing the ledger away from v"),
        (ex11_ledger_transposed, "shape_and_dtype values batch_dims writes_before_reading exact_read_back "
                                 "key_length_does_not_matter no_future_leakage",
         "reads the [d, dv] ledger as S q instead of Sᵀq: a [..., d] output, or a crash"),
        (ex11_state_not_carried, "values batch_dims",  # with β = 1 the last read is still exact
         "resets the ledger to zero at every token, so nothing is carried over"),
        (ex11_reads_final_ledger, "values batch_dims writes_before_reading no_future_leakage",
         "reads every query from the final ledger, so the future leaks into the past"),
    ),
    "ex10_crossover": _mutants(
        (ex10_counts_flops, "softmax_count linear_count favor_projections causal_chunks",
         "counts FLOPs instead of multiply-adds, doubling every count"),
        (ex10_softmax_scores_only, "softmax_count",  # its crossover agrees with its own counts: graded once
         "counts only softmax's N²d scores, leaving out weights @ V (N²dv)"),
        (ex10_softmax_2n2d, "softmax_count", "counts softmax as 2N²d, which is right only when dv = d"),
        (ex10_linear_one_product, "linear_count favor_projections causal_chunks",
         "counts one product of linear attention (N·f·dv) instead of two"),
        (ex10_no_feature_cost, "favor_projections", "leaves FAVOR+'s projections x ωᵀ out of the linear cost"),
        (ex10_one_projection, "favor_projections",
         "counts FAVOR+'s projections once (N·d·f), not for both queries and keys"),
        (ex10_one_chunk_block, "causal_chunks crossover_general",
         "counts a single C×C block for the causal chunks instead of one per chunk"),
        (ex10_no_chunk_blocks, "causal_chunks", "leaves the causal chunks' C×C blocks out of the linear cost"),
        (ex10_causal_vs_full_softmax, "crossover_general crossover_rounds_up",
         "compares the causal chunked form with full softmax, not its unmasked half (N* = d + C)"),
        (ex10_crossover_floor, "crossover_general crossover_rounds_up",
         "rounds the crossover N* down with floor instead of up"),
        (ex10_crossover_round, "crossover_general crossover_rounds_up",
         "rounds the crossover N* to the nearest whole number instead of up"),
        (ex10_crossover_float, "elu_crossover_is_d favor_crossover_is_2m crossover_general crossover_rounds_up",
         "returns the crossover N* as an unrounded float"),
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


def ex05_course_lib(q, k, v):
    """The chunkwise-parallel route (course_lib, chunks of 64) instead of one cumulative sum."""
    return attention.linear_attention(q, k, v, causal=True)


def ex05_float64_ledger_cast_back(q, k, v):
    """The ledger accumulated in float64 for accuracy, the plates returned in the inputs' dtype."""
    return ex05_float64_ledger(q, k, v).to(q.dtype)


def ex06_course_lib(q, k, v, chunk_size):
    """All chunks at once: course_lib's vectorised chunked form (padding, cumsum of chunk summaries)."""
    return attention.linear_attention(q, k, v, causal=True, method="chunked", chunk_size=chunk_size)


def ex08_letters_as_sets():
    """The key in lower case, multiple-choice answers as sets of letters instead of sorted strings."""
    return {qid: set(key.lower()) if len(key) > 1 else key.lower() for qid, key in QUIZ_KEY.items()}


def ex09_one_map_redrawn(q, k, v, num_features, redraws, generator):
    """One PerformerFeatures redrawn in place, the outputs by kernel_attention, std via var().sqrt()."""
    features = random_features.PerformerFeatures(q.shape[-1], num_features, generator=generator)
    outputs = []
    for index in range(redraws):
        if index:
            features.redraw(generator)  # the same draws as a fresh PerformerFeatures
        outputs.append(attention.kernel_attention(q, k, v, features))
    outputs = torch.stack(outputs, dim=-1)  # [..., n, dv, R]
    return outputs.mean(-1) - attention.softmax_attention(q, k, v), outputs.var(-1).sqrt()


def ex09_redraw_before_every_use(q, k, v, num_features, redraws, generator):
    """One PerformerFeatures, redrawn before every redraw (the first included): other draws than the key's."""
    features = random_features.PerformerFeatures(q.shape[-1], num_features, generator=generator)
    outputs = []
    for _ in range(redraws):
        outputs.append(attention.linear_attention(q, k, v, features.redraw(generator)))
    outputs = torch.stack(outputs)  # [R, ..., n, dv]
    return outputs.mean(0) - attention.softmax_attention(q, k, v), outputs.std(0)


def ex09_iid_features(q, k, v, num_features, redraws, generator):
    """iid Gaussian projections (orthogonal=False), which the statement allows: another reference, same test."""
    outputs = torch.stack([
        attention.linear_attention(
            q, k, v, random_features.PerformerFeatures(q.shape[-1], num_features, orthogonal=False, generator=generator)
        )
        for _ in range(redraws)
    ])  # [R, ..., n, dv]
    return outputs.mean(0) - attention.softmax_attention(q, k, v), outputs.std(0)


def ex10_closed_forms():
    """N* written out case by case with math.ceil instead of from the per-token count."""

    def predicted_crossover(d, dv, f, *, projections=False, chunk=None):
        top = 2 * f * dv + (2 * d * f if projections else 0) + (chunk * (f + dv) if chunk else 0)
        return math.ceil(top / (d + dv)) if not chunk else math.ceil(2 * top / (d + dv))

    return {**_cost_model()(), "predicted_crossover": predicted_crossover}


def ex11_strength_named_otherwise(q, k, v, strength):
    """The fourth parameter called `strength`, not `beta`: the grader passes every input by position."""
    return _delta_rule(q, k, v, strength)


def ex11_values_by_keys_ledger(q, k, v, beta):
    """The ledger laid out [dv, d] (S ← S + β (v − S k̂) k̂ᵀ, read S q̂) and updated as (I − β k̂k̂ᵀ) form."""
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    S = q.new_zeros(*q.shape[:-2], v.shape[-1], q.shape[-1])  # [..., dv, d]
    eye = torch.eye(q.shape[-1], dtype=q.dtype)
    outputs = []
    for t in range(q.shape[-2]):
        k_t, b = k[..., t, :], beta[..., t, None, None]
        S = S @ (eye - b * k_t.unsqueeze(-1) * k_t.unsqueeze(-2)) + b * v[..., t, :, None] * k_t.unsqueeze(-2)
        outputs.append((S @ q[..., t, :, None]).squeeze(-1))
    return torch.stack(outputs, dim=-2)


ALTERNATIVES: dict[str, list[Callable]] = {
    "ex03_positive_random_features": [random_features.positive_random_features, ex03_log_space],
    "ex04_orthogonal_gaussian": [random_features.orthogonal_gaussian, ex04_lengths_first_rows_of_q],
    "ex07_rope": [ex07_complex_rotation, ex07_rotation_matrices],
    "ex11_delta_rule": [ex11_values_by_keys_ledger, ex11_strength_named_otherwise],
    "ex05_causal_linear_attention": [ex05_course_lib, ex05_float64_ledger_cast_back],
    "ex06_chunked_causal": [ex06_course_lib],
    "ex08_interview_quiz": [ex08_letters_as_sets],
    "ex09_estimator_bias": [ex09_one_map_redrawn, ex09_redraw_before_every_use, ex09_iid_features],
    "ex10_crossover": [ex10_closed_forms, ex10_counts_normaliser],
}


# --- misbehaving submissions ---------------------------------------------------------------


def correct(q, k, v, causal=False):
    """A right answer to ex01 written here: course_lib's own is not allowed while graded."""
    return _softmax_attention(q, k, v, causal)


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


def cheat_ex05(q, k, v):
    return cheat_ex01(q, k, v)


def cheat_ex06(q, k, v, chunk_size):
    return cheat_ex01(q, k, v)


def scribble_ex05(q, k, v):
    return scribble_ex06(q, k, v, 64)


def scribble_ex06(q, k, v, chunk_size):
    out = attention.linear_attention(q, k, v, causal=True, chunk_size=chunk_size)
    _scribble(q, k, v)
    return out


def loop_forever(q, k, v, causal=False):
    while True:
        pass


def hang_when_causal(q, k, v, causal=False):
    while causal:
        pass
    return correct(q, k, v)


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
