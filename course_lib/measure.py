"""Measuring what attention costs: wall-clock time, power-law fits and multiply counts.

Used by notebook 01 (the N² wall) and notebook 02 (N²d against Nd²); small enough
to reuse in a benchmark suite.
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
