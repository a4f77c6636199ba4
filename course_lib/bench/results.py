"""The committed benchmark results: where they live and how to read them back (notebook 08)."""

import json
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"  # the repository's results folder


def results_path(device_type: str) -> Path:
    """``benchmarks/results/bench_<device_type>.json``, what a full ``python -m course_lib.bench`` run writes."""
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device_type must be 'cpu' or 'cuda', got {device_type!r}")
    return RESULTS_DIR / f"bench_{device_type}.json"


def load_results(device_type: str) -> dict | None:
    """The committed full-run payload for ``device_type``, or None when no such run was committed."""
    path = results_path(device_type)
    if not path.exists():
        return None
    payload = json.loads(path.read_text())
    if payload.get("meta", {}).get("quick"):
        raise ValueError(f"{path} holds a --quick run; commit a full run there")
    return payload
