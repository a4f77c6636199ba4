"""Grader tests of exercise 9: ``output_bias_and_noise(q, k, v, num_features, redraws, generator)``.

The Performer output is a ratio of two unbiased kernel estimates, so it is biased
at every finite m: the student measures, over R redraws of PerformerFeatures, the
bias (mean output − softmax output) and the noise (the sample standard deviation
of one redraw's output), entry by entry. The answer key repeats the computation
with the same seeds (float64, tolerance 1e-10); the scaling tests fit how the
student's own bias and noise shrink with m (1/m and 1/√m).
"""

import math

import torch

from course_lib.attention import linear_attention, softmax_attention
from course_lib.device import one_thread
from course_lib.grading.checks import EXACT, attempt, expect_close, expect_output, make_qkv
from course_lib.grading.core import GradingFailure, grader_test
from course_lib.measure import fit_power_law
from course_lib.random_features import PerformerFeatures

FUNCTION_NAME = "output_bias_and_noise"
TITLE = "The price of a ratio: bias and noise of the Performer output against m"

RECIPE = (
    "for each of the R redraws build PerformerFeatures(d, num_features, generator=generator) and take "
    "linear_attention(q, k, v, features); bias = mean over redraws − softmax_attention(q, k, v), "
    "noise = their sample standard deviation (R − 1), both [..., n, dv]"
)
SCALING_MS = (2, 4, 8, 16)  # feature counts of the scaling tests
SCALING_REDRAWS = 500
BIAS_SLOPES, NOISE_SLOPES = (-1.5, -0.7), (-0.7, -0.3)  # the fitted exponents allowed (1/m: −1, 1/√m: −0.5)


def bias_and_noise_key(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_features: int, redraws: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer key: (bias, noise), each [..., n, dv], from ``redraws`` fresh PerformerFeatures."""
    exact = softmax_attention(q, k, v)  # [..., n, dv]
    draws = [PerformerFeatures(q.shape[-1], num_features, generator=generator) for _ in range(redraws)]
    outputs = torch.stack([linear_attention(q, k, v, features) for features in draws])  # [R, ..., n, dv]
    return outputs.mean(0) - exact, outputs.std(0)


def student(fn, inputs, num_features: int, redraws: int, *, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fn's (bias, noise) on clones of ``inputs`` with a generator seeded ``seed``, checked like the key's.

    Both must be finite float64 tensors of the key's shape [..., n, dv].
    """
    q, k, v = inputs
    shapes = ", ".join(str(list(x.shape)) for x in inputs)
    shown = f"inputs of shape {shapes}, {num_features}, {redraws}, generator=<seeded with {seed}>"
    generator = torch.Generator().manual_seed(seed)
    answer = attempt(fn, q.clone(), k.clone(), v.clone(), num_features, redraws, generator=generator, shown=shown)
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise GradingFailure(f"expected a pair (bias, noise) of tensors, got {type(answer).__name__}: {RECIPE}")
    layout = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype)  # [..., n, dv]
    return tuple(expect_output(part, layout, layout="[..., n, dv]") for part in answer)


def graded(fn, which: int, *, seed: int, hint: str) -> None:
    """Part ``which`` (0: bias, 1: noise) of fn's answer must match the key's to 1e-10."""
    inputs = make_qkv(n=5, m=6, d=4, dv=3, seed=seed, scale=0.5)
    expected = bias_and_noise_key(*inputs, 6, 8, torch.Generator().manual_seed(seed))
    answer = student(fn, inputs, 6, 8, seed=seed)
    expect_close(answer[which], expected[which], **EXACT, hint=hint(answer, expected) or RECIPE)


def _bias_hint(answer, expected) -> str:
    bias, noise = answer
    if (bias >= 0).all() and not (expected[0] >= 0).all():
        return "your bias is never negative: it is an average error with its sign, mean output − softmax output"
    if torch.allclose(bias, -expected[0], **EXACT):
        return "the sign is flipped: bias = mean over redraws of the output − softmax_attention(q, k, v)"
    if (noise == 0).all():
        return "every redraw gave the same output: build fresh PerformerFeatures inside the loop"
    return ""


def _noise_hint(answer, expected) -> str:
    noise, key = answer[1], expected[1]
    if (noise == 0).all():
        return "the noise is 0: every redraw used the same features; build fresh PerformerFeatures inside the loop"
    if torch.allclose(noise, key * math.sqrt(7 / 8), **EXACT):
        return "that divides by R (population); the spread of R samples divides by R − 1: torch.std's default"
    if torch.allclose(noise, key / math.sqrt(8), **EXACT):
        return "that is std/√R, the error bar of the mean; the noise is the spread of one redraw's output, std"
    return ""


@grader_test(points=1)
def shape_and_dtype(fn):
    """returns (bias, noise), two float64 tensors [..., n, dv] (n = 5 queries, 6 keys, dv = 3)"""
    student(fn, make_qkv(n=5, m=6, d=4, dv=3, seed=91, scale=0.5), 4, 3, seed=1)


@grader_test(points=2)
def bias_matches(fn):
    """the bias matches the grader's own 8 redraws of m = 6 features with the same seed (float64, 1e-10)"""
    graded(fn, 0, seed=92, hint=_bias_hint)


@grader_test(points=2)
def noise_matches(fn):
    """the noise (sample standard deviation over the 8 redraws) matches the grader's with the same seed"""
    graded(fn, 1, seed=93, hint=_noise_hint)


@grader_test(points=1)
def constant_values(fn):
    """bias and noise are 0 when every value row is the same vector: a normalised output is exact then"""
    q, k, _ = make_qkv(n=5, m=6, d=4, dv=3, seed=94, scale=0.5)
    v = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64).expand(6, 3).clone()  # every key serves c
    bias, noise = student(fn, (q, k, v), 6, 8, seed=94)
    hint = (
        "compare the NORMALISED output φ(q)ᵀΣφ(k)v / φ(q)ᵀΣφ(k) (linear_attention) with softmax_attention: "
        "weights that sum to 1 average copies of c into c, at every redraw"
    )
    for name, part in (("bias", bias), ("noise", noise)):
        if part.abs().max() > 1e-12:
            raise GradingFailure(f"{name} reaches {float(part.abs().max()):.3g}, expected 0 (1e-12); {hint}")


@grader_test(points=1)
def uses_generator(fn):
    """takes all randomness from `generator`: same seed, same answer; new seed, new answer; global RNG untouched"""
    inputs = make_qkv(n=5, m=6, d=4, dv=3, seed=95, scale=0.5)
    advice = "build every PerformerFeatures with generator=generator, and draw nothing else at random"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        state = torch.get_rng_state()
        first = student(fn, inputs, 4, 3, seed=95)
        if not torch.equal(torch.get_rng_state(), state):
            raise GradingFailure(f"the call advanced torch's global random generator; {advice}")
        torch.manual_seed(2)
        if not all(torch.equal(a, b) for a, b in zip(student(fn, inputs, 4, 3, seed=95), first)):
            raise GradingFailure(f"the same generator seed gave a different answer; {advice}")
        if all(torch.equal(a, b) for a, b in zip(student(fn, inputs, 4, 3, seed=96), first)):
            raise GradingFailure(f"generators seeded 95 and 96 gave the same answer: the generator is ignored; {advice}")


_scaling_cache: dict[int, tuple[object, list[tuple[float, float]]]] = {}


def scaling_runs(fn) -> list[tuple[float, float]]:
    """(bias, noise) summarised over entries for m = 2, 4, 8, 16, from fn's own answers (500 redraws each).

    bias: the root mean square over the 32 entries of bias² − noise²/R, the Monte
    Carlo part of the measured bias (its variance noise²/R) removed; noise: the
    root mean square of the noise. Inputs: 16 queries, 6 keys, d = 4, dv = 2,
    scaled by 0.35 (the regime where the asymptotic laws already hold at m = 2).
    Computed once per function and kept for the second scaling test.
    """
    cached = _scaling_cache.get(id(fn))
    if cached is not None and cached[0] is fn:
        return cached[1]
    inputs = make_qkv(n=16, m=6, d=4, dv=2, seed=91, scale=0.35)
    runs = []
    with one_thread():  # a Python loop over 2000 small redraws: see one_thread
        for m in SCALING_MS:
            bias, noise = student(fn, inputs, m, SCALING_REDRAWS, seed=9100 + m)
            corrected = (bias.pow(2) - noise.pow(2) / SCALING_REDRAWS).mean().clamp_min(0).sqrt()
            runs.append((float(corrected), float(noise.pow(2).mean().sqrt())))
    _scaling_cache.clear()
    _scaling_cache[id(fn)] = (fn, runs)
    return runs


def require_rate(values: list[float], what: str, hint: str, bounds: tuple[float, float], law: str) -> None:
    """Fail unless values ≈ c·m^a over m = 2, 4, 8, 16 with a within ``bounds``; values must be > 0."""
    shown = ", ".join(f"{x:.3g}" for x in values)
    if not all(x > 0 for x in values):
        raise GradingFailure(f"{what} at m = 2, 4, 8, 16 is {shown}: it must be > 0 to shrink at a rate; {hint}")
    exponent = fit_power_law(list(SCALING_MS), values)[0]
    low, high = bounds
    if not low <= exponent <= high:
        raise GradingFailure(
            f"{what} is {shown} at m = 2, 4, 8, 16: it shrinks like m^{exponent:.2f}, "
            f"expected an exponent in [{low}, {high}] ({law}); {hint}"
        )


@grader_test(points=2)
def bias_shrinks_like_1_over_m(fn):
    """your bias shrinks like 1/m: its fitted exponent over m = 2 .. 16 lies in [−1.5, −0.7] (500 redraws each)

    The ratio estimator's bias is O(1/m) while its noise is O(1/√m); an answer that
    averages |errors| or squared errors measures the noise instead (exponent ≈ −0.45).
    """
    values = [bias for bias, _ in scaling_runs(fn)]
    hint = "bias is the mean error with its sign (mean − softmax), not the mean size of the errors"
    require_rate(values, "the RMS of your bias over entries (Monte Carlo part noise²/R removed)", hint,
                 BIAS_SLOPES, "1/m")


@grader_test(points=1)
def noise_shrinks_like_1_over_sqrt_m(fn):
    """your noise shrinks like 1/√m: its fitted exponent over m = 2 .. 16 lies in [−0.7, −0.3]"""
    values = [noise for _, noise in scaling_runs(fn)]
    hint = "the noise is the spread of the outputs of independent redraws: fresh features every time"
    require_rate(values, "the RMS of your noise", hint, NOISE_SLOPES, "1/√m")
