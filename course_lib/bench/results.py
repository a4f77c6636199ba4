"""The committed benchmark results: where they live and how to read them back (notebook 08)."""

import json
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"  # the repository's results folder


def results_path(device_type: str, stem: str = "bench") -> Path:
    """``benchmarks/results/<stem>_<device_type>.json``, what a full run of ``python -m course_lib.<stem>``
    writes ("bench": the benchmark; "recall": the recall sweep of notebook 12)."""
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device_type must be 'cpu' or 'cuda', got {device_type!r}")
    if stem not in ("bench", "recall"):
        raise ValueError(f"stem must be 'bench' or 'recall', got {stem!r}")
    return RESULTS_DIR / f"{stem}_{device_type}.json"


def load_results(device_type: str, stem: str = "bench") -> dict | None:
    """The committed full-run payload of ``stem`` for ``device_type``, or None when no such run was committed."""
    path = results_path(device_type, stem)
    if not path.exists():
        return None
    payload = json.loads(path.read_text())
    if payload.get("meta", {}).get("quick"):
        raise ValueError(f"{path} holds a --quick run; commit a full run there")
    return payload
