"""Grader tests of exercise 3: ``positive_random_features(x, omega)``, FAVOR+ features exp(ωᵀx − ‖x‖²/2)/√m.

The answer key is ``course_lib.random_features.positive_random_features``. Exactness
checks run in float64 with tolerance 1e-10; ``unbiased`` averages over random ω
with a CLT tolerance and ``no_overflow`` runs in float32, see their docstrings.
"""

import torch

from course_lib.random_features import iid_gaussian, positive_random_features
from course_tools.grading.checks import (
    EXACT,
    answers,
    call,
    compare,
    compare_batched,
    expect_computes,
    expect_output,
    expect_within_noise,
)
from course_tools.grading.core import grader_test

FUNCTION_NAME = "positive_random_features"
TITLE = "Positive random features: m tasters score every dish"
FORBIDDEN = (
    "course_lib.random_features.positive_random_features",
    "course_lib.random_features.positive_log_features",
    "course_lib.random_features.PerformerFeatures",
)

LAYOUT = "[..., n, m]"
FORMULA_HINT = "expected φ(x)_r = exp(ω_rᵀx − ‖x‖²/2) / √m, with ‖x‖² summed over the last axis of x"
ONE_EXP_HINT = (
    "exp(ωᵀx) overflows on its own when ‖x‖ is large, and inf · 0 or inf / inf is NaN: "
    "take a single exp of the whole exponent ωᵀx − ‖x‖²/2"
)
BATCH_ADVICE = "sum ‖x‖² over dim=-1 and project with x @ omega.T (omega has no batch dims), never x.T"


def _inputs(*batch: int, n: int, m: int, d: int, seed: int, dtype: torch.dtype = torch.float64) -> tuple:
    """x [*batch, n, d] (entries ~N(0, 1/4), so φ stays moderate) and omega [m, d] ~ N(0, I)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, n, d, generator=g, dtype=dtype) / 2
    return x, iid_gaussian(m, d, generator=g).to(dtype)


@grader_test(points=2)
def shape_and_dtype(fn):
    """returns a tensor [..., n, m] in the inputs' dtype (float64 and float32, n, m, d all different), from x and ω"""
    for dtype in (torch.float64, torch.float32):
        inputs = _inputs(n=5, m=7, d=4, seed=31, dtype=dtype)
        expect_output(*answers(fn, positive_random_features, inputs), layout=LAYOUT)
    expect_computes(fn, inputs, ("x", "omega"), seed=36)


@grader_test(points=2)
def values(fn):
    """matches exp(ωᵀx − ‖x‖²/2)/√m in float64"""
    out, expected = answers(fn, positive_random_features, _inputs(n=6, m=9, d=8, seed=32))
    compare(out, expected, **EXACT, hint=FORMULA_HINT, layout=LAYOUT)


@grader_test(points=2)
def batch_dims(fn):
    """keeps leading batch/head dims: x [2, 3, n, d] with omega [m, d] -> [2, 3, n, m]"""
    inputs = _inputs(2, 3, n=6, m=9, d=4, seed=33)
    compare_batched(fn, positive_random_features, inputs, **EXACT, advice=BATCH_ADVICE, layout=LAYOUT)


@grader_test(points=2)
def unbiased(fn):
    """averaged over 200 independent draws of ω, φ(q)ᵀφ(k) estimates exp(qᵀk) (4 pairs, m = 64, d = 4)

    One positive feature has relative variance exp(‖q + k‖²) − 1 (Performer,
    Lemma 2), so the average of R draws of m features has standard error
    exp(qᵀk)·√((exp(‖q + k‖²) − 1)/(R·m)); every pair must be within 5 of them.
    The draws are seeded, so a correct answer reproduces the key's average, which
    is within 0.6 standard errors here; a wrong factor (√m, exp(−‖x‖²/2), the
    ½) is off by 30 or more.
    """
    pairs, m, d, draws = 4, 64, 4, 200
    g = torch.Generator().manual_seed(34)
    q, k = (torch.randn(pairs, d, generator=g, dtype=torch.float64) / 2 for _ in range(2))  # [pairs, d] each
    x = torch.cat([q, k])  # [2 pairs, d]: queries then keys, featurised together
    total = torch.zeros(pairs, dtype=torch.float64)
    for _ in range(draws):
        omega = iid_gaussian(m, d, generator=g)  # [m, d], a fresh panel of tasters
        features = expect_output(*answers(fn, positive_random_features, (x, omega)), layout=LAYOUT)  # [2 pairs, m]
        total += (features[:pairs] * features[pairs:]).sum(-1)  # φ(q_p)ᵀφ(k_p)
    kernel = (q * k).sum(-1).exp()  # [pairs], exp(qᵀk)
    spread = kernel * ((q + k).pow(2).sum(-1).exp() - 1).div(draws * m).sqrt()
    what = "the average of φ(q)ᵀφ(k) for the pair"
    expect_within_noise(total / draws, kernel, spread, z=5, what=what, hint=FORMULA_HINT)


@grader_test(points=2)
def no_overflow(fn):
    """stays finite and correct in float32 for ‖x‖ = 30 (d = 16), where exp(ωᵀx) alone overflows

    Rows of ω near x/2 make ωᵀx ≈ 450 (exp overflows float32 past 88.7) while
    the exponent ωᵀx − ‖x‖²/2 stays within a few units of 0, so φ is finite.
    The expected answer is the key in float64 on the same float32 inputs;
    float32 rounding of the ~450-sized terms moves the exponent by ~1e-4,
    which the 1e-2 relative tolerance covers with room.
    """
    n, m, d = 6, 8, 16
    g = torch.Generator().manual_seed(35)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x = 30 * x / x.norm(dim=-1, keepdim=True)  # [n, d], every ‖x_i‖ = 30
    omega = iid_gaussian(m, d, generator=g)  # [m, d]
    omega[:n] = x.flip(0) / 2 + omega[:n] / 20  # taster r leans towards x_{n-1-r}: exponent ~N(0, 2.25)
    x, omega = x.float(), omega.float()
    expected = positive_random_features(x.double(), omega.double()).float()  # [n, m]
    out = call(fn, x, omega, hint=ONE_EXP_HINT)
    compare(out, expected, atol=1e-6, rtol=1e-2, hint=ONE_EXP_HINT, layout=LAYOUT)
