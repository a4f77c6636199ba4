"""Measuring attention: wall-clock time, power-law fits, errors and Monte Carlo error bars.

Used by notebook 01 (the N² wall), 02 (N²d against Nd², timed in this process and in fresh
ones: ``time_in_fresh_processes``), 03 (Monte Carlo checks),
04 and 06 (relative errors; notebook 06's many-redraws harness: ``pairs_with_angle``,
``taster_sets``, ``kernel_estimates``, ``simulate_kernel_estimates``,
``normalised_output_estimates``); small enough to reuse in a benchmark suite.
"""

import json
import math
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch.utils import benchmark

from course_lib.random_features import iid_gaussian, orthogonal_gaussian
from course_lib.validation import check_choice, check_int, check_ints, check_number, require_one_query, require_tensor


def time_call(fn: Callable[[], object], *, min_run_time: float = 0.2) -> float:
    """Median seconds per call of ``fn()``, on any device.

    Uses ``torch.utils.benchmark.Timer.blocked_autorange``, which warms up, picks a
    block size that hides the timer's own overhead, and synchronises the accelerator
    (CUDA, MPS) around every block, so asynchronous kernels are counted in full.
    The Timer runs on one thread unless told otherwise; here it is given
    ``torch.get_num_threads()`` so the timing matches an ordinary call.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable with no arguments, got {type(fn).__name__}")
    check_number("min_run_time", min_run_time, above=0, unit="seconds")
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def _time_statements_from_stdin() -> None:
    """The child side of ``time_in_fresh_processes``: read the job as JSON, print the times as JSON."""
    job = json.load(sys.stdin)
    torch.set_num_threads(job["threads"])
    namespace: dict = {}
    exec(job["setup"], namespace)
    calls = {}
    for name, statement in job["statements"].items():
        exec(f"def _call():\n    return {statement}", namespace)
        calls[name] = namespace.pop("_call")
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(job["repeats"]):  # interleaved: a noisy moment hits every statement
        for name, call in calls.items():
            times[name].append(time_call(call, min_run_time=job["min_run_time"]))
    print(json.dumps(times))


def time_in_fresh_processes(
    setup: str,
    statements: Mapping[str, str],
    *,
    processes: int = 3,
    repeats: int = 3,
    min_run_time: float = 0.05,
    timeout: float = 120.0,
) -> dict[str, list[list[float]]]:
    """Seconds per call of each statement, timed in ``processes`` fresh Python interpreters.

    Repeats inside one process share its memory layout, thread pool and allocator state, so they
    miss the spread between processes (the same call can take several times as long in the next).
    Each process, started one after another with ``sys.executable`` and this process's thread count,
    runs ``setup`` (source code: imports, inputs) once, then times every statement (an expression
    over setup's names) with ``time_call``, ``repeats`` times, interleaved.
    Returns ``{name: [[seconds per repeat] per process]}``, i.e. ``[processes][repeats]`` per name.
    A child that fails raises ``RuntimeError`` with the end of its stderr.
    Notebook 02, "One process is not enough".
    """
    if not isinstance(setup, str):
        raise TypeError(f"setup must be Python source code (a str), got {type(setup).__name__}")
    if not isinstance(statements, Mapping) or not statements:
        raise ValueError(f"statements must be a non-empty mapping name -> expression, got {statements!r}")
    for name, statement in statements.items():
        if not (isinstance(name, str) and isinstance(statement, str) and statement.strip()):
            raise ValueError(f"statements must map str names to expressions (str), got {name!r}: {statement!r}")
    check_ints(processes=processes, repeats=repeats)
    for name, value in (("min_run_time", min_run_time), ("timeout", timeout)):
        check_number(name, value, above=0, unit="seconds")
    job = json.dumps({"setup": setup, "statements": dict(statements), "repeats": repeats,
                      "min_run_time": min_run_time, "threads": torch.get_num_threads()})
    child = "from course_lib.measure import _time_statements_from_stdin; _time_statements_from_stdin()"
    found: dict[str, list[list[float]]] = {name: [] for name in statements}
    for index in range(processes):
        run = subprocess.run([sys.executable, "-c", child], input=job, capture_output=True, text=True,
                             timeout=timeout, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"timing process {index + 1} of {processes} failed (exit code "
                               f"{run.returncode}):\n{run.stderr[-2000:]}")
        times = json.loads(run.stdout.strip().splitlines()[-1])
        for name in statements:
            found[name].append([float(t) for t in times[name]])
    return found


def _positive_1d(name: str, values: Sequence[float] | np.ndarray | torch.Tensor) -> np.ndarray:
    array = np.asarray(values.detach().cpu() if isinstance(values, torch.Tensor) else values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not (np.isfinite(array).all() and (array > 0).all()):
        raise ValueError(f"{name} must hold finite values > 0 (a power law is fitted in log space), got {array}")
    return array


def fit_power_law(
    x: Sequence[float] | np.ndarray | torch.Tensor, y: Sequence[float] | np.ndarray | torch.Tensor
) -> tuple[float, float]:
    """Least-squares fit of y ≈ c · x^a in log space: log y = a · log x + log c.

    Returns (a, c): the exponent (the slope on log-log axes) and the prefactor.
    ``x`` and ``y`` are 1-D, of the same length ≥ 2, finite and > 0, with at least
    two distinct x values.
    """
    x, y = _positive_1d("x", x), _positive_1d("y", y)
    if len(x) != len(y):
        raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) < 2:
        raise ValueError(f"x must hold at least 2 points to fit a line, got {len(x)}")
    if np.ptp(x) == 0:
        raise ValueError(f"x must hold at least two distinct values, got only {x[0]}")
    exponent, log_prefactor = np.polyfit(np.log(x), np.log(y), deg=1)
    return float(exponent), float(math.exp(log_prefactor))


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """‖actual − expected‖ / ‖expected‖, Frobenius norms over all entries; same shapes, ‖expected‖ > 0."""
    for name, value in (("actual", actual), ("expected", expected)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if actual.shape != expected.shape:
        shapes = f"{tuple(actual.shape)} and {tuple(expected.shape)}"
        raise ValueError(f"actual and expected must have the same shape, got {shapes}")
    scale = expected.norm()
    if not 0 < scale < math.inf:
        raise ValueError(f"expected must have a finite, nonzero norm to compare against, got {scale.item()}")
    return ((actual - expected).norm() / scale).item()


def mean_and_error_bar(samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard error of independent samples along the last dim: [..., M] -> ([...], [...]).

    standard error = sample standard deviation (M − 1 in the denominator) / √M, M ≥ 2.
    """
    if not isinstance(samples, torch.Tensor):
        raise TypeError(f"samples must be a torch.Tensor [..., M], got {type(samples).__name__}")
    if not samples.is_floating_point() or samples.dim() < 1:
        got = f"{samples.dtype} of shape {tuple(samples.shape)}"
        raise ValueError(f"samples must be a floating-point tensor [..., M], got {got}")
    if samples.shape[-1] < 2:
        raise ValueError(f"samples needs at least 2 samples along the last dim, got {samples.shape[-1]}")
    return samples.mean(-1), samples.std(-1) / math.sqrt(samples.shape[-1])


def within_error_bar(
    mean: torch.Tensor, error_bar: torch.Tensor, truth: float | torch.Tensor, *, num_standard_errors: float = 4.0
) -> torch.Tensor:
    """|mean − truth| ≤ num_standard_errors · error_bar, elementwise (a bool tensor, broadcast shape).

    With the default 4, a correct estimator fails about once in 16,000 checks (CLT);
    a biased one fails once its bias exceeds 4 error bars.
    """
    check_number("num_standard_errors", num_standard_errors, above=0)
    if (torch.as_tensor(error_bar) < 0).any():
        raise ValueError("error_bar must be >= 0 everywhere (a standard error), got a negative entry")
    return (mean - truth).abs() <= num_standard_errors * error_bar


# --- Notebook 06's Monte Carlo harness: many independent redraws of the tasters at once ---------

FeatureFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
TASTER_KINDS = ("iid", "orthogonal")


def pairs_with_angle(
    norm_x: float | Sequence[float] | torch.Tensor,
    norm_y: float | Sequence[float] | torch.Tensor,
    angle: float | Sequence[float] | torch.Tensor,
    d: int,
    *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """P pairs (x_p, y_p) with ‖x_p‖ = norm_x, ‖y_p‖ = norm_y and angle(x_p, y_p) = angle (radians).

    Each pair is randomly oriented in R^d (d ≥ 2): x = ‖x‖ u, y = ‖y‖ (cos θ u + sin θ w) with u
    uniform on the sphere and w a unit vector orthogonal to u. Returns x, y [P, d] float64 on the
    CPU, P = the broadcast length of the three arguments. Random-feature estimates of exp(xᵀy)
    depend on a pair only through these three numbers (notebook 06, "Tools"). Not differentiable
    in the arguments (they are converted to float64 constants).
    """
    check_int("d", d, at_least=2, meaning="to hold a pair at an angle")
    columns = [torch.as_tensor(a, dtype=torch.float64).reshape(-1) for a in (norm_x, norm_y, angle)]
    norm_x, norm_y, angle = (c[:, None] for c in torch.broadcast_tensors(*columns))  # [P, 1] each
    if not (norm_x >= 0).all() or not (norm_y >= 0).all():
        raise ValueError(f"norm_x and norm_y must be >= 0, got {norm_x.flatten()} and {norm_y.flatten()}")
    u, w = torch.randn(2, angle.shape[0], d, generator=generator, dtype=torch.float64)  # [P, d] each
    u = u / u.norm(dim=-1, keepdim=True)
    w = w - (w * u).sum(-1, keepdim=True) * u  # orthogonal to u
    w = w / w.norm(dim=-1, keepdim=True)
    return norm_x * u, norm_y * (angle.cos() * u + angle.sin() * w)


def taster_sets(
    sets: int, m: int, d: int, *, kind: str = "iid", generator: torch.Generator | None = None
) -> torch.Tensor:
    """``sets`` independent sets of m tasters ω ~ N(0, I_d), stacked: [sets·m, d] float64 on the CPU.

    Set s is rows s·m … (s + 1)·m − 1. ``kind="iid"``: every row independent
    (``iid_gaussian``). ``kind="orthogonal"``: each set is the first m ≤ d rows of its own
    orthogonal block (``orthogonal_gaussian``), so sets are independent of each other.
    """
    check_ints(sets=sets, m=m, d=d)
    if check_choice("kind", kind, TASTER_KINDS) == "iid":
        return iid_gaussian(sets * m, d, generator=generator)
    if m > d:
        raise ValueError(f"orthogonal sets hold m <= d tasters (one block), got m={m} and d={d}")
    blocks = orthogonal_gaussian(sets * d, d, generator=generator).unflatten(0, (sets, d))
    return blocks[:, :m].flatten(0, 1)  # [sets·m, d]


def kernel_estimates(
    features: FeatureFn, x: torch.Tensor, y: torch.Tensor, omega: torch.Tensor, redraws: int
) -> torch.Tensor:
    """φ(x_p)ᵀφ(y_p) for every pair p and every set of tasters stacked in omega: [P, redraws].

    x, y [P, d]; omega [redraws·m, d], set s = rows s·m … (s + 1)·m − 1 (``taster_sets``).
    ``features(x, omega)`` is ``positive_random_features`` or ``trig_random_features``: it
    divides by √(rows) = √(redraws·m), so a set's sum of products carries 1/(redraws·m), and
    multiplying by ``redraws`` restores the set's own 1/m. Differentiable in x and y.
    """
    for name, value in (("x", x), ("y", y)):
        require_tensor(name, value, min_dims=2)
    require_tensor("omega", omega, min_dims=2)
    check_ints(redraws=redraws)
    if x.shape != y.shape or x.dim() != 2 or x.shape[-1] != omega.shape[-1]:
        shapes = f"{tuple(x.shape)}, {tuple(y.shape)} and omega {tuple(omega.shape)}"
        raise ValueError(f"x and y must both be [P, d] with omega [rows, d], got {shapes}")
    if omega.shape[0] % redraws:
        raise ValueError(f"omega's {omega.shape[0]} rows must split into redraws={redraws} equal sets")
    m = omega.shape[0] // redraws
    products = features(x, omega) * features(y, omega)  # [P, F·redraws·m], F = 1 or 2 (sin | cos)
    return products.unflatten(-1, (-1, redraws, m)).sum((-3, -1)) * redraws


def simulate_kernel_estimates(
    features: FeatureFn,
    x: torch.Tensor,
    y: torch.Tensor,
    m: int,
    redraws: int,
    *,
    kind: str = "iid",
    generator: torch.Generator | None = None,
    rows_per_chunk: int = 2**16,
) -> torch.Tensor:
    """``redraws`` independent estimates of exp(x_pᵀy_p) with m tasters each: [P, redraws].

    Tasters are drawn on the CPU (``taster_sets(..., kind=kind)``, seeded by ``generator``),
    moved to x's device and dtype, and evaluated by ``kernel_estimates`` in chunks of about
    ``rows_per_chunk`` rows, so memory stays small. Notebook 06, sections 1–2.
    """
    check_ints(m=m, redraws=redraws, rows_per_chunk=rows_per_chunk)
    sets_per_chunk = max(1, rows_per_chunk // m)
    chunks = []
    for start in range(0, redraws, sets_per_chunk):
        sets = min(sets_per_chunk, redraws - start)
        omega = taster_sets(sets, m, x.shape[-1], kind=kind, generator=generator)
        chunks.append(kernel_estimates(features, x, y, omega.to(x.device, x.dtype), sets))
    return torch.cat(chunks, dim=-1)


def normalised_output_estimates(
    features: FeatureFn,
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    m: int,
    redraws: int,
    *,
    kind: str = "iid",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The random-feature attention output of one query, for ``redraws`` sets of m tasters: [redraws, dv].

    query [d], keys [n, d], values [n, dv]. For each set, K̂_j = φ(query)ᵀφ(k_j) (unbiased for
    exp(queryᵀk_j)), and the output is the ratio Σ_j K̂_j v_j / Σ_j K̂_j: an estimate of the
    softmax output that is biased at every finite m (notebook 06, "The normalised output is
    biased"). Query and keys enter unscaled: softmax here is of queryᵀk_j.
    """
    require_one_query(query, keys, values)
    pairs = query.expand_as(keys)  # [n, d]: the query paired with every key
    estimates = simulate_kernel_estimates(features, pairs, keys, m, redraws, kind=kind, generator=generator)
    return (estimates.T @ values) / estimates.sum(0)[:, None]  # [redraws, dv]
