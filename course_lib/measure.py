"""Measuring attention: wall-clock time, power-law fits, multiply counts, errors and Monte Carlo error bars.

Used by notebook 01 (the N² wall), 02 (N²d against Nd²), 03 (Monte Carlo checks),
04 and 06 (relative errors); small enough to reuse in a benchmark suite.
"""

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.utils import benchmark


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
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, (int, float)) or not 0 < min_run_time < math.inf:
        raise ValueError(f"min_run_time must be a positive number of seconds, got {min_run_time!r}")
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


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


def _positive_ints(**sizes: int) -> None:
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"{name} must be a positive int, got {size!r}")


def macs_softmax(n: int, m: int, d: int, dv: int) -> int:
    """Multiply-accumulates of the matrix products in softmax(q kᵀ/√d) v.

    Scores q kᵀ: n·m·d, then weights @ v: n·m·dv, so n·m·(d + dv) in all. For
    self-attention (n = m = N, dv = d) that is the article's 2N²d "multiplications".
    Not counted: the scaling, exp and row sums (≈ n·m each, lower order in d).
    A FLOP count (one multiply + one add per MAC) is twice this.
    """
    _positive_ints(n=n, m=m, d=d, dv=dv)
    return n * m * d + n * m * dv


def macs_linear(n: int, m: int, f: int, dv: int) -> int:
    """Multiply-accumulates of the matrix products in linear attention φ(Q)(φ(K)ᵀV).

    Memory S = φ(K)ᵀV: m·f·dv, then every query reads it, φ(Q)S: n·f·dv, so
    (n + m)·f·dv in all. For self-attention with f = dv = d that is the article's
    2Nd². Not counted: the feature map and the normaliser z = Σφ(k), φ(q)ᵀz
    ((n + m)·f, lower order). A FLOP count is twice this.
    """
    _positive_ints(n=n, m=m, f=f, dv=dv)
    return (n + m) * f * dv


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
    if isinstance(num_standard_errors, bool) or not isinstance(num_standard_errors, (int, float)) or not (
        0 < num_standard_errors < math.inf
    ):
        raise ValueError(f"num_standard_errors must be a finite number > 0, got {num_standard_errors!r}")
    if (torch.as_tensor(error_bar) < 0).any():
        raise ValueError("error_bar must be >= 0 everywhere (a standard error), got a negative entry")
    return (mean - truth).abs() <= num_standard_errors * error_bar
