"""Grader tests of exercise 10: the multiply-add cost model and its crossover length N*.

The student writes three functions and hands them over in one dict,
``cost_model() -> {"macs_softmax": ..., "macs_linear": ..., "predicted_crossover": ...}``
(one graded object, like ex08's ``quiz_answers``). Counts are multiply-adds
(MACs), the course's one unit, of one head, self-attention over N tokens:

* softmax:  N·N·d (scores) + N·N·dv (weights @ V)
* linear:   2·N·f·dv (S = φ(K)ᵀV, then φ(Q)S); FAVOR+ adds its projections x ωᵀ for
  queries and keys, 2·N·d·f; the causal chunked form adds its C×C blocks, N·C·(f + dv)
* crossover: the smallest whole N at which linear costs no more than softmax,
  ⌈(2·f·dv + 2·d·f·[projections]) / (d + dv)⌉ (N = d for elu+1, N = 2m for FAVOR+ with m
  features, when dv = d); the causal chunked form is compared with causal softmax, which
  computes only the unmasked half of the scores, N·N·(d + dv)/2: ⌈2·(per-token cost) / (d + dv)⌉,
  N = 2(d + C) for elu+1.

The normaliser (z = Σφ(k), read as φ(q)ᵀz: 2·N·f) is left out of the linear count, and counting
it is accepted too. The crossover is graded against the student's OWN counts (a convention
chosen there costs nothing twice): the returned N must be the first whole N where the student's
linear count is at most the student's softmax count (half of it with ``chunk``). Only these
deterministic parts are graded; the notebook's timing cell is not.
"""

import numbers
from collections.abc import Callable

from course_tools.grading.checks import attempt
from course_tools.grading.core import GradingFailure, grader_test

FUNCTION_NAME = "cost_model"
TITLE = "When the blackboard pays: the cost model and its crossover N*"
FORBIDDEN = (
    "course_lib.cost.macs_softmax",
    "course_lib.cost.macs_linear",
    "course_lib.cost.macs_causal_chunked",
    "course_lib.cost.feature_map_macs",
)

PARTS = ("macs_softmax", "macs_linear", "predicted_crossover")


def softmax_key(n: int, d: int, dv: int) -> int:
    """N·N·(d + dv) MACs: the scores and the weighted sum of the values."""
    return n * n * (d + dv)


def linear_key(n: int, d: int, dv: int, f: int, *, projections: bool = False, chunk: int | None = None) -> int:
    """2·N·f·dv MACs, + 2·N·d·f with FAVOR+'s projections, + N·C·(f + dv) for causal chunks of C."""
    total = 2 * n * f * dv
    if projections:
        total += 2 * n * d * f
    if chunk is not None:
        total += n * chunk * (f + dv)
    return total


def crossover_key(d: int, dv: int, f: int, *, projections: bool = False, chunk: int | None = None) -> int:
    """The smallest N ≥ 1 with linear_key(N) ≤ softmax_key(N) (/ 2 with ``chunk``: causal softmax's unmasked half).

    ⌈per-token linear cost / (d + dv)⌉, or ⌈2 · per-token cost / (d + dv)⌉ for the causal chunked form.
    """
    per_token = linear_key(1, d, dv, f, projections=projections, chunk=chunk)
    return -(-per_token * (1 if chunk is None else 2) // (d + dv))


def normaliser_key(n: int, f: int) -> int:
    """2·N·f MACs of the normaliser, z = Σφ(k_j) and φ(q_i)ᵀz: not counted by the key, accepted when counted."""
    return 2 * n * f


def parts(fn) -> dict[str, Callable]:
    """The three functions of ``fn()``'s dict; a missing or non-callable entry fails the test."""
    bundle = attempt(fn, shown="")
    if not isinstance(bundle, dict):
        keys = ", ".join(PARTS)
        raise GradingFailure(f"cost_model() must return a dict with the keys {keys}, got {type(bundle).__name__}")
    for name in PARTS:
        if not callable(bundle.get(name)):
            raise GradingFailure(f"cost_model()[{name!r}] must be your function {name}, got {bundle.get(name)!r}")
    return bundle


def shown(*args: int, **kwargs: object) -> str:
    return ", ".join([*(str(a) for a in args), *(f"{key}={value!r}" for key, value in kwargs.items())])


def whole(value: object, call: str) -> int:
    """``value`` as an int; a float, a tensor or a bool fails: counts and token numbers are whole numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise GradingFailure(
            f"{call} returned {value!r} ({type(value).__name__}); return an int: MACs and token counts are whole "
            "numbers (integer arithmetic, or math.ceil for a quotient)"
        )
    return int(value)


def expect_count(
    fn: Callable, name: str, args: tuple, kwargs: dict, expected: int, diagnose: Callable, also: int | None = None
) -> None:
    """fn(*args, **kwargs) must return exactly ``expected`` (or ``also``, another accepted convention);
    ``diagnose(got)`` names a known mistake."""
    call = f"{name}({shown(*args, **kwargs)})"
    got = whole(attempt(fn, *args, shown=shown(*args, **kwargs), **kwargs), call)
    if got != expected and got != also:
        why = diagnose(got)
        message = f"{call} returned {got:,}, expected {expected:,} multiply-adds"
        raise GradingFailure(f"{message}; {why}" if why else message)


def _flops(got: int, expected: int) -> str:
    if got == 2 * expected:
        return "that is twice the count: FLOPs (2 per multiply-add); the course counts multiply-adds"
    return ""


@grader_test(points=2)
def softmax_count(fn):
    """macs_softmax(n, d, dv) = N·N·(d + dv) at 6 shapes, dv ≠ d included"""
    macs_softmax = parts(fn)["macs_softmax"]
    for n, d, dv in ((1, 1, 1), (7, 3, 5), (64, 64, 64), (1000, 64, 32), (4096, 128, 128), (5, 16, 8)):

        def diagnose(got, n=n, d=d, dv=dv):
            if got == n * n * d:
                return "that is the scores Q Kᵀ only: the weighted sum of the values adds N·N·dv"
            if got == 2 * n * n * d:
                return "2N²d holds only when dv = d: count N·N·d for the scores plus N·N·dv for weights @ V"
            return _flops(got, softmax_key(n, d, dv))

        expect_count(macs_softmax, "macs_softmax", (n, d, dv), {}, softmax_key(n, d, dv), diagnose)


def _linear_diagnosis(n, d, dv, f, **kwargs) -> Callable[[int], str]:
    expected = linear_key(n, d, dv, f, **kwargs)
    plain = linear_key(n, d, dv, f)

    def diagnose(got: int) -> str:
        if kwargs.get("projections") and got == plain:
            return "the feature map is free here: FAVOR+ computes x ωᵀ for the queries and for the keys, 2·N·d·f"
        if kwargs.get("projections") and got == plain + n * d * f:
            return "only one projection counted: x ωᵀ is computed for the queries AND for the keys, 2·N·d·f"
        if got == expected - n * f * dv:
            return "one product is missing: writing S = φ(K)ᵀV costs N·f·dv and reading it, φ(Q)S, another N·f·dv"
        if got == linear_key(n, d, dv, d, **kwargs) and f != d:
            return "the products run over the f features, not the d input dims"
        if kwargs.get("chunk") and got == plain:
            return "the C×C blocks inside the chunks are missing: N/C chunks of C·C·(f + dv) each, N·C·(f + dv)"
        if kwargs.get("chunk") and got == plain + kwargs["chunk"] ** 2 * (f + dv):
            return "one C×C block counted: there are N/C of them, N·C·(f + dv) in all"
        return _flops(got, expected)

    return diagnose


LINEAR_SHAPES = ((1, 1, 1, 1), (512, 64, 64, 64), (1000, 32, 48, 16), (4096, 64, 32, 256), (9, 5, 7, 3))


@grader_test(points=2)
def linear_count(fn):
    """macs_linear(n, d, dv, f) = 2·N·f·dv at 5 shapes with f, d and dv all different"""
    macs_linear = parts(fn)["macs_linear"]
    for n, d, dv, f in LINEAR_SHAPES:
        expected, also = linear_key(n, d, dv, f), linear_key(n, d, dv, f) + normaliser_key(n, f)
        expect_count(macs_linear, "macs_linear", (n, d, dv, f), {}, expected, _linear_diagnosis(n, d, dv, f), also)


@grader_test(points=1)
def favor_projections(fn):
    """macs_linear(..., projections=True) adds FAVOR+'s projections x ωᵀ of queries and keys, 2·N·d·f"""
    macs_linear = parts(fn)["macs_linear"]
    for n, d, dv, f in LINEAR_SHAPES:
        kwargs = {"projections": True}
        expected, diagnose = linear_key(n, d, dv, f, **kwargs), _linear_diagnosis(n, d, dv, f, **kwargs)
        expect_count(macs_linear, "macs_linear", (n, d, dv, f), kwargs, expected, diagnose,
                     expected + normaliser_key(n, f))


@grader_test(points=1)
def causal_chunks(fn):
    """macs_linear(..., chunk=C) adds the C×C blocks of the causal chunked form, N·C·(f + dv) (C divides N)"""
    macs_linear = parts(fn)["macs_linear"]
    shapes = ((512, 64, 64, 64, 64), (1024, 32, 48, 16, 16), (8192, 64, 64, 256, 128), (6, 2, 3, 5, 2))
    for n, d, dv, f, chunk in shapes:
        kwargs = {"chunk": chunk}
        expected, diagnose = linear_key(n, d, dv, f, **kwargs), _linear_diagnosis(n, d, dv, f, **kwargs)
        expect_count(macs_linear, "macs_linear", (n, d, dv, f), kwargs, expected, diagnose,
                     expected + normaliser_key(n, f))


def own_costs(bundle: dict, n: int, args: tuple, kwargs: dict) -> tuple[int, int]:
    """(the student's linear count, the student's softmax count) at N = n, for ``predicted_crossover(*args)``.

    Each is asked twice and must give the same whole number > 0: a count is a property of the
    shapes, not a random number, and a zero count has no crossover to be consistent with.
    """
    d, dv, f = args
    counts = []
    for name, call_args, call_kwargs in (("macs_linear", (n, d, dv, f), kwargs), ("macs_softmax", (n, d, dv), {})):
        text = f"{name}({shown(*call_args, **call_kwargs)})"
        first, again = (whole(attempt(bundle[name], *call_args, shown=shown(*call_args, **call_kwargs),
                                      **call_kwargs), text) for _ in range(2))
        if first != again or first < 1:
            what = f"gave {first:,} then {again:,}" if first != again else f"returned {first:,}"
            raise GradingFailure(f"{text} {what}: the crossover is graded against your own counts, which must be "
                                 "whole numbers > 0 computed from the shapes")
        counts.append(first)
    return counts[0], counts[1]


def expect_crossover(bundle: dict, args: tuple, kwargs: dict, why: Callable[[int], str] = lambda got: "") -> None:
    """predicted_crossover(*args, **kwargs) must be the smallest whole N where YOUR linear count ≤ YOUR softmax count.

    With ``chunk`` (the causal form) the softmax count is halved: causal softmax computes only
    the unmasked half of the scores. ``why(got)`` may name a known mistake.
    """
    call = f"predicted_crossover({shown(*args, **kwargs)})"
    got = whole(attempt(bundle["predicted_crossover"], *args, shown=shown(*args, **kwargs), **kwargs), call)
    if got < 1:
        raise GradingFailure(f"{call} returned {got}: N* is a number of tokens, at least 1")
    causal = kwargs.get("chunk") is not None
    half = " / 2 (causal softmax: the unmasked half)" if causal else ""

    def pays(n: int) -> tuple[bool, int, int]:  # does linear cost no more than softmax at N = n, by your counts?
        linear, softmax = own_costs(bundle, n, args, kwargs)
        return (2 * linear <= softmax if causal else linear <= softmax), linear, softmax

    at, linear, softmax = pays(got)
    if not at:
        detail = f"at N = {got} your counts give linear {linear:,} > softmax {softmax:,}{half}"
        if pays(got + 1)[0]:
            detail += ": N* is the smallest whole N where it costs no more, so round the quotient UP (math.ceil)"
        elif causal and linear <= softmax:
            detail += ("; the causal chunked form is compared with causal softmax, which computes only the unmasked "
                       "half of the N·N scores: N·N·(d + dv)/2, so N* = 2(d + C) for elu+1")
        raise GradingFailure(f"{call} returned {got}, but {why(got) or detail}")
    if got > 1:
        before, linear, softmax = pays(got - 1)
        if before:
            detail = f"N = {got - 1} already breaks even by your counts ({linear:,} ≤ {softmax:,}{half})"
            raise GradingFailure(f"{call} returned {got}, but {why(got) or detail}: round the quotient up, not further")


@grader_test(points=1)
def elu_crossover_is_d(fn):
    """predicted_crossover(d, d, d), elu+1, is the first N where your counts break even (N = d by the course's), d = 16 .. 128"""
    bundle = parts(fn)
    for d in (16, 32, 64, 128):
        expect_crossover(bundle, (d, d, d), {})


@grader_test(points=1)
def favor_crossover_is_2m(fn):
    """predicted_crossover(d, d, m, projections=True), FAVOR+, is the first N where your counts break even (N = 2m by the course's)"""
    bundle = parts(fn)
    for d, m in ((64, 256), (32, 64), (128, 512), (16, 100)):

        def why(got, m=m):
            if got == m:
                return "N = m leaves out the projections x ωᵀ (2·N·d·m), and with them half the cost"
            return ""

        expect_crossover(bundle, (d, d, m), {"projections": True}, why)


@grader_test(points=1)
def crossover_general(fn):
    """predicted_crossover agrees with your counts at 6 shapes: dv ≠ d, f ≠ d, FAVOR+, causal chunks (vs half of softmax)"""
    bundle = parts(fn)
    cases = (
        ((64, 32, 64), {}),
        ((32, 128, 32), {}),
        ((64, 64, 256), {"projections": True}),
        ((64, 64, 64), {"chunk": 64}),
        ((32, 48, 16), {"chunk": 16}),
        ((64, 32, 128), {"projections": True, "chunk": 32}),
    )
    for args, kwargs in cases:
        expect_crossover(bundle, args, kwargs)


@grader_test(points=1)
def crossover_rounds_up(fn):
    """where N* is not a whole number, predicted_crossover returns the next one (6 shapes, e.g. N* = 4.67 -> 5)"""
    bundle = parts(fn)
    cases = (
        ((8, 4, 7), {}),  # N* = 56 / 12 = 4.67
        ((10, 3, 2), {}),  # N* = 12 / 13 = 0.92: the answer is 1, never 0
        ((6, 4, 6), {"chunk": 5}),  # causal: 2 · 98 / 10 = 19.6
        ((5, 7, 9), {"projections": True, "chunk": 2}),  # causal: 2 · 248 / 12 = 41.33
        ((64, 32, 64), {}),  # 4096 / 96 = 42.67
        ((32, 128, 32), {}),  # 8192 / 160 = 51.2: round() gives 51
    )
    for args, kwargs in cases:
        expect_crossover(bundle, args, kwargs)
