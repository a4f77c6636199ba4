"""The study's rules of evidence: when a setting counts, and how sure a "points lost" figure is.

* A setting enters the verdict only when softmax, the reference, recalls ≥ ``VALID_RECALL`` on the
  test split with **every** seed (``is_valid``); otherwise the task was too hard for the budget, not a
  finding about ledgers, and the study reports it as "budget".
* Every mean over seeds carries a 95 % percentile-bootstrap interval (``mean_interval``), and every
  gap between two mixers one over the two sets of seeds resampled independently (``gap_interval``).
  With three seeds a bootstrap interval cannot be wider than the seeds' own range, so the study prints
  every seed beside it; a gap whose interval holds 0 reads "cannot tell".

Written by hand: the bootstrap is twelve lines of torch, and SciPy (whose ``stats.bootstrap`` does the
same) is not otherwise a dependency of the course.
"""

import torch

VALID_RECALL = 0.95  # softmax must reach this on every seed for a setting to count
LEVEL, DRAWS = 0.95, 10_000  # the intervals' coverage and bootstrap resamples


def _resampled_means(values: list[float], generator: torch.Generator) -> torch.Tensor:
    data = torch.tensor(values, dtype=torch.float64)  # [S]
    picks = torch.randint(0, len(values), (DRAWS, len(values)), generator=generator)  # [DRAWS, S]
    return data[picks].mean(-1)  # [DRAWS]


def _checked(name: str, values: list[float]) -> list[float]:
    if not values or any(not isinstance(v, (int, float)) or v != v for v in values):
        raise ValueError(f"{name} must be a non-empty list of numbers (one per seed), got {values!r}")
    return [float(v) for v in values]


def mean_interval(values: list[float], *, seed: int = 0) -> dict:
    """{"mean", "low", "high"}: the mean over seeds and its 95 % percentile-bootstrap interval."""
    values = _checked("values", values)
    means = _resampled_means(values, torch.Generator().manual_seed(seed))
    tail = (1 - LEVEL) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return {"mean": sum(values) / len(values), "low": low, "high": high}


def gap_interval(reference: list[float], other: list[float], *, seed: int = 0) -> dict:
    """{"gap", "low", "high", "reading"}: mean(reference) − mean(other) with a 95 % bootstrap interval (each
    list's seeds resampled independently); reading "reference higher", "other higher" or "cannot tell"."""
    reference, other = _checked("reference", reference), _checked("other", other)
    generator = torch.Generator().manual_seed(seed)
    gaps = _resampled_means(reference, generator) - _resampled_means(other, generator)
    tail = (1 - LEVEL) / 2
    low, high = torch.quantile(gaps, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    reading = "reference higher" if low > 0 else "other higher" if high < 0 else "cannot tell"
    return {"gap": sum(reference) / len(reference) - sum(other) / len(other), "low": low, "high": high,
            "reading": reading}


def is_valid(softmax_recalls: list[float]) -> bool:
    """Whether a setting counts: softmax's test recall ≥ ``VALID_RECALL`` on every seed."""
    return min(_checked("softmax_recalls", softmax_recalls)) >= VALID_RECALL
