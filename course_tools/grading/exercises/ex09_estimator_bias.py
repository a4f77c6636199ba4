"""Grader tests of exercise 9: ``output_bias_and_noise(q, k, v, num_features, redraws, generator)``.

The Performer output is a ratio of two unbiased kernel estimates, so it is biased
at every finite m: the student measures, over R redraws of PerformerFeatures, the
bias (mean output − softmax output) and the noise (the sample standard deviation
of one redraw's output), entry by entry. Any correct way of drawing the features
gives other random numbers than the key, so the answers are graded statistically:
against a reference of 60 000 redraws (orthogonal features, the statement's default,
or iid ones, which it allows), within 5 standard errors of the student's Monte Carlo
average; the scaling tests fit how the student's own bias and noise shrink with m
(1/m and 1/√m).
"""

import math
from functools import cache

import torch

from course_lib.attention import softmax_attention
from course_lib.device import one_thread, seeded_qkv
from course_lib.measure import fit_power_law
from course_lib.random_features import positive_random_features
from course_tools.grading.checks import attempt, expect_computes, expect_output
from course_tools.grading.core import GradingFailure, grader_test

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
Z = 5  # standard errors allowed by the statistical tests
FEATURES, REDRAWS, REFERENCE_REDRAWS = 6, 400, 60_000  # m, the student's R, the reference's R
SMALL_R, CALLS = 3, 200  # the sample-std test: CALLS calls of SMALL_R redraws each
KINDS = ("orthogonal", "iid")


def problem() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The graded attention problem: 5 queries, 6 keys, d = 4, dv = 3, q and k scaled by 0.5 (float64)."""
    return seeded_qkv(n=5, m=6, d=4, dv=3, seed=92, scale=0.5)


def draw_omegas(redraws: int, m: int, d: int, generator: torch.Generator, kind: str) -> torch.Tensor:
    """[R, m, d] projections: R independent panels, orthogonal blocks with chi(d) lengths or iid N(0, I_d).

    The same distribution as ``course_lib.random_features.orthogonal_gaussian`` and
    ``iid_gaussian``, drawn for all R panels at once.
    """
    if kind == "iid":
        return torch.randn(redraws, m, d, generator=generator, dtype=torch.float64)
    blocks = -(-m // d)
    gaussian = torch.randn(redraws, blocks, d, d, generator=generator, dtype=torch.float64)
    basis, triangle = torch.linalg.qr(gaussian)  # [R, blocks, d, d]
    basis = basis * torch.sign(torch.diagonal(triangle, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar
    rows = basis.transpose(-2, -1).reshape(redraws, blocks * d, d)[:, :m]  # [R, m, d]
    return rows * torch.randn(redraws, m, d, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)


def performer_outputs(q, k, v, omegas: torch.Tensor) -> torch.Tensor:
    """[R, n, dv]: the normalised Performer output φ(q)ᵀΣφ(k)vᵀ / φ(q)ᵀΣφ(k) for each panel ω [R, m, d]."""
    scale = q.shape[-1] ** -0.25  # PerformerFeatures' default: φ(q)ᵀφ(k) estimates exp(qᵀk/√d)
    phi_q, phi_k = positive_random_features(q * scale, omegas), positive_random_features(k * scale, omegas)
    return (phi_q @ (phi_k.transpose(-2, -1) @ v)) / (phi_q @ phi_k.sum(-2).unsqueeze(-1))  # [R, n, dv]


@cache
def reference(kind: str) -> dict[str, torch.Tensor]:
    """The key for ``problem()`` from 60 000 redraws of ``kind`` features: bias, noise, their spreads.

    ``bias`` and ``noise`` [n, dv]; ``noise_spread`` [n, dv], the standard deviation of one redraw's
    squared deviation (for the error of a sample std); ``pooled`` and ``pooled_spread``: the mean and
    the standard deviation of Σ_entries s², s the sample std of SMALL_R redraws (the small-R test).
    """
    q, k, v = problem()
    outputs = performer_outputs(q, k, v, draw_omegas(REFERENCE_REDRAWS, FEATURES, 4, torch.Generator().manual_seed(9),
                                                     kind))  # [R, n, dv]
    mean, noise = outputs.mean(0), outputs.std(0)
    groups = outputs[: REFERENCE_REDRAWS // SMALL_R * SMALL_R].unflatten(0, (-1, SMALL_R))  # [G, SMALL_R, n, dv]
    pooled = groups.var(1).sum((-2, -1))  # [G], Σ_entries s² of each group
    return {
        "bias": mean - softmax_attention(q, k, v),
        "noise": noise,
        "noise_spread": (outputs - mean).pow(2).std(0),
        "pooled": pooled.mean(),
        "pooled_spread": pooled.std(),
    }


def student(fn, inputs, num_features: int, redraws: int, *, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fn's (bias, noise) on clones of ``inputs`` with a generator seeded ``seed``.

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


def bias_only(fn):
    """fn's bias alone, [..., n, dv] (``expect_computes`` calls it with q, k, v and a generator seeded 97)."""

    def bias(q, k, v):
        return student(fn, (q, k, v), 4, 3, seed=97)[0]

    bias.__name__ = getattr(fn, "__name__", "output_bias_and_noise")
    return bias


_answer_cache: dict[int, tuple[object, tuple[torch.Tensor, torch.Tensor]]] = {}


def graded_answer(fn) -> tuple[torch.Tensor, torch.Tensor]:
    """fn's (bias, noise) on ``problem()`` with m = 6 and R = 400 (computed once per function, for both tests)."""
    cached = _answer_cache.get(id(fn))
    if cached is not None and cached[0] is fn:
        return cached[1]
    with one_thread():  # a Python loop over 400 small redraws: see one_thread
        answer = student(fn, problem(), FEATURES, REDRAWS, seed=93)
    _answer_cache.clear()
    _answer_cache[id(fn)] = (fn, answer)
    return answer


def closest(errors: dict[str, torch.Tensor]) -> str:
    """The kind of features (orthogonal or iid) whose reference the answer is closest to, in standard errors."""
    return min(errors, key=lambda kind: float(errors[kind].max()))


def _bias_hint(bias: torch.Tensor, noise: torch.Tensor, key: torch.Tensor, spread: torch.Tensor) -> str:
    if (noise == 0).all():
        return "every redraw gave the same output: build fresh PerformerFeatures inside the loop (or .redraw them)"
    if ((bias + key).abs() <= Z * spread).all():
        return "the sign is flipped: bias = mean over redraws of the output − softmax_attention(q, k, v)"
    if (bias >= 0).all() and not (key >= 0).all():
        return "your bias is never negative: it is an average error with its sign, mean output − softmax output"
    return RECIPE


@grader_test(points=1)
def shape_and_dtype(fn):
    """returns (bias, noise), two float64 tensors [..., n, dv] (n = 5 queries, 6 keys, dv = 3), computed from q, k, v"""
    inputs = seeded_qkv(n=5, m=6, d=4, dv=3, seed=91, scale=0.5)
    student(fn, inputs, 4, 3, seed=1)
    expect_computes(bias_only(fn), inputs, ("q", "k", "v"), seed=98)


@grader_test(points=2)
def bias_matches(fn):
    """your bias over 400 redraws of m = 6 features is within 5 standard errors of a 60 000-redraw reference

    The reference is computed for orthogonal features (the statement's default) and
    for iid ones; the answer must match either, entry by entry. The standard error of
    an entry is noise·√(1/400 + 1/60 000): any correct way of drawing the features
    lands within it, while a flipped sign, an RMS error or features drawn once are
    tens of standard errors away.
    """
    bias, noise = graded_answer(fn)
    spreads = {kind: reference(kind)["noise"] * math.sqrt(1 / REDRAWS + 1 / REFERENCE_REDRAWS) for kind in KINDS}
    errors = {kind: (bias - reference(kind)["bias"]).abs() / spreads[kind] for kind in KINDS}
    kind = closest(errors)
    if (errors[kind] <= Z).all():
        return
    key, spread = reference(kind)["bias"], spreads[kind]
    worst = tuple(int(i) for i in torch.unravel_index(errors[kind].argmax(), bias.shape))
    raise GradingFailure(
        f"the bias (mean output − softmax output) at entry {worst} is {float(bias[worst]):.4g}, expected "
        f"{float(key[worst]):.4g} ± {Z * float(spread[worst]):.2g} ({Z} standard errors of a {REDRAWS}-redraw average, "
        f"{kind} features); {_bias_hint(bias, noise, key, spread)}"
    )


def small_r_noise(fn) -> float:
    """Σ_entries noise², averaged over CALLS calls of fn with R = SMALL_R redraws (generators seeded 9300, 9301, ...)."""
    total = 0.0
    with one_thread():
        for call_index in range(CALLS):
            noise = student(fn, problem(), FEATURES, SMALL_R, seed=9300 + call_index)[1]
            total += float(noise.pow(2).sum())
    return total / CALLS


@grader_test(points=2)
def noise_matches(fn):
    """your noise (sample std of one redraw's output) is within 5 standard errors of the reference's, at R = 400 and R = 3

    At R = 400 entry by entry (the standard error of a sample std, from the
    reference's fourth moments); then Σ noise² averaged over 200 calls with R = 3,
    where the sample std (R − 1) and the population std (R) differ by a third.
    """
    noise = graded_answer(fn)[1]
    spreads = {kind: reference(kind)["noise_spread"] / (2 * reference(kind)["noise"] * math.sqrt(REDRAWS))
               for kind in KINDS}
    errors = {kind: (noise - reference(kind)["noise"]).abs() / spreads[kind] for kind in KINDS}
    kind = closest(errors)
    key = reference(kind)["noise"]
    if not (errors[kind] <= Z).all():
        worst = tuple(int(i) for i in torch.unravel_index(errors[kind].argmax(), noise.shape))
        ratio = float((noise / key).median())
        if (noise == 0).all():
            why = "the noise is 0: every redraw used the same features; build fresh PerformerFeatures inside the loop"
        elif abs(ratio * math.sqrt(REDRAWS) - 1) < 0.2:
            why = "that is std/√R, the error bar of the mean; the noise is the spread of one redraw's output, std"
        else:
            why = RECIPE
        raise GradingFailure(
            f"the noise (sample std of one redraw's output) at entry {worst} is {float(noise[worst]):.4g}, expected "
            f"{float(key[worst]):.4g} ± {Z * float(spreads[kind][worst]):.2g} ({Z} standard errors, {kind} features)"
            f"; {why}"
        )
    pooled = small_r_noise(fn)
    allowed = {kind: Z * float(reference(kind)["pooled_spread"]) * math.sqrt(1 / CALLS + 1 / (REFERENCE_REDRAWS // SMALL_R))
               for kind in KINDS}
    misses = {kind: abs(pooled - float(reference(kind)["pooled"])) / allowed[kind] for kind in KINDS}
    kind = min(misses, key=misses.get)
    target = float(reference(kind)["pooled"])
    if misses[kind] > 1:
        ratio = pooled / target
        if abs(ratio - (SMALL_R - 1) / SMALL_R) < abs(ratio - 1):
            why = "that divides by R (population); the spread of R samples divides by R − 1: torch.std's default"
        elif abs(ratio - 1 / SMALL_R) < abs(ratio - 1):
            why = "that is std/√R, the error bar of the mean; the noise is the spread of one redraw's output, std"
        else:
            why = RECIPE
        raise GradingFailure(
            f"with R = {SMALL_R} redraws, Σ noise² over the entries averages {pooled:.4g} over {CALLS} calls, expected "
            f"{target:.4g} ± {allowed[kind]:.2g} ({Z} standard errors, {kind} features; ratio {ratio:.2f}); {why}"
        )


@grader_test(points=1)
def constant_values(fn):
    """bias and noise are 0 when every value row is the same vector: a normalised output is exact then"""
    q, k, generic = seeded_qkv(n=5, m=6, d=4, dv=3, seed=94, scale=0.5)
    expect_computes(bias_only(fn), (q, k, generic), ("q", "k", "v"), seed=94)  # zeros are 0 here too
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
    inputs = seeded_qkv(n=5, m=6, d=4, dv=3, seed=95, scale=0.5)
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
    expect_computes(bias_only(fn), inputs, ("q", "k", "v"), seed=95)  # numbers drawn from `generator` alone are not


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
    inputs = seeded_qkv(n=16, m=6, d=4, dv=2, seed=91, scale=0.35)
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
