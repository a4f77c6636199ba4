"""ex09_estimator_bias: the bias (mean − exact) and noise (sample std) of FAVOR+ over fresh feature draws."""

import math

import torch

from course_lib import attention, random_features

from .common import make_mutants, rows_of, trivial_answers


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


MUTANTS = make_mutants(
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
)
MISTAKE_FEEDBACK = [
    ("ex09_rmse_not_bias", "bias_shrinks_like_1_over_m", "expected an exponent in [-1.5, -0.7] (1/m)"),
    ("ex09_rmse_not_bias", "bias_matches", "your bias is never negative"),
    ("ex09_rmse_not_bias", "bias_matches", "the bias (mean output − softmax output) at entry ("),
    ("ex09_sign_flipped", "bias_matches", "the sign is flipped"),
    ("ex09_kernel_estimate_only", "constant_values", "compare the NORMALISED output"),
    ("ex09_kernel_estimate_only", "noise_matches", "the noise (sample std of one redraw's output) at entry ("),
    ("ex09_population_std", "noise_matches", "that divides by R (population)"),
    ("ex09_population_std", "noise_matches", "with R = 3 redraws, Σ noise² over the entries averages"),
    ("ex09_error_bar_as_noise", "noise_matches", "that is std/√R, the error bar of the mean"),
    ("ex09_same_features_every_redraw", "noise_matches", "the noise is 0: every redraw used the same features"),
    ("ex09_same_features_every_redraw", "bias_matches", "every redraw gave the same output"),
    ("ex09_global_rng", "shape_and_dtype", "two calls with the same inputs gave different outputs"),
    ("ex09_same_features_every_redraw", "noise_shrinks_like_1_over_sqrt_m", "is 0, 0, 0, 0: it must be > 0"),
    ("ex09_global_rng", "uses_generator", "the call advanced torch's global random generator"),
    ("ex09_summarised_over_entries", "shape_and_dtype", "output has shape [], expected [5, 3] = [..., n, dv]"),
]


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


ALTERNATIVES = [ex09_one_map_redrawn, ex09_redraw_before_every_use, ex09_iid_features]


def _bias_trivial(kind):
    def answer(q, k, v, num_features, redraws, generator):
        shape = (*q.shape[:-1], v.shape[-1])
        if kind == "zeros":
            return torch.zeros(shape, dtype=q.dtype), torch.zeros(shape, dtype=q.dtype)
        if kind == "copy":
            return rows_of(q, v), rows_of(q, v)
        return tuple(torch.randn(shape, generator=generator, dtype=q.dtype) for _ in range(2))  # from `generator`

    return answer


TRIVIAL = trivial_answers("ex09", _bias_trivial)
TRIVIAL_FEEDBACK = [
    ("ex09_trivial_random", "uses_generator", "the output stays the same when q changes"),
]
