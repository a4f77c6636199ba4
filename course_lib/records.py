"""Measurements as records: where the committed results live, how to read them back, and how a
run writes its own (the machine it ran on, a text table, the JSON file, the lines that end the run).

Notebooks 08, 09 and 12 read the committed results; the benchmark (``python -m course_tools.bench``)
and the recall sweep (``python -m course_tools.recall``) write them with the same helpers.

The results live inside the package, in ``course_lib/results/``, and ship as its package data
(``pyproject.toml``), so a plain ``pip install`` of the repository (Colab's ``pip install git+URL``)
carries the files the notebooks read, found with ``importlib.resources``. Keeping them in the package,
rather than mapping an outside folder into it, leaves one copy on disk that an editable install, a
clone and an installed wheel all read, and a full run started from a clone's root writes straight
into that same folder.
"""

import datetime
import json
import os
import platform
import tempfile
import time
from importlib import resources
from pathlib import Path

import torch

from course_lib.device import describe_device
from course_lib.validation import check_choice

RESULTS_DIR = Path(resources.files(__package__) / "results")  # the committed results, package data


def results_path(device_type: str, stem: str = "bench") -> Path:
    """``course_lib/results/<stem>_<device_type>.json``, what a full run of ``python -m course_tools.<stem>``
    writes ("bench": the benchmark; "recall": the recall sweep of notebook 12)."""
    check_choice("device_type", device_type, ("cpu", "cuda"))
    check_choice("stem", stem, ("bench", "recall"))
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


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor(), else None."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def device_label(meta: dict) -> str:
    """A label for every committed number and plot, from a run's ``meta``: e.g.
    "2-core CPU (AMD EPYC), 2 threads, torch 2.13.0+cpu" or "cuda:0 (NVIDIA H200), torch 2.13.0"."""
    device, machine = meta["device"], meta.get("machine", {})
    if device.startswith("cpu"):
        model = machine.get("cpu_model") or "unknown model"
        threads = meta.get("threads")
        where = f"{machine.get('cores', '?')}-core CPU ({model})" + (f", {threads} threads" if threads else "")
    else:
        where = device
    return f"{where}, torch {meta.get('torch', '?')}"


def machine_metadata(device: torch.device, *, quick: bool) -> dict:
    """Where and when numbers were taken: machine, torch, threads, device, time, and ``device_label``."""
    meta = {
        "machine": {"platform": platform.platform(), "cpu_model": cpu_model(), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "torch": torch.__version__, "threads": torch.get_num_threads(), "device": describe_device(device),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "quick": quick,
    }
    return meta | {"device_label": device_label(meta)}


def table(headers: list[str], rows: list[list]) -> str:
    """Right-aligned text columns; floats with 3 significant digits."""
    cells = [[f"{c:.3g}" if isinstance(c, float) else "-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def cli_output_path(out: Path | None, *, stem: str, device: torch.device, quick: bool) -> Path:
    """Where a CLI writes its JSON: ``out`` if given (it must end in .json), else
    ``course_lib/results/<stem>_<device>.json`` (the package's results folder when run from the
    repository's root), or a fresh temporary folder for a ``quick`` run
    (so CI-sized numbers never overwrite the committed ones). Raises ValueError naming ``--out``."""
    if out is None:
        folder = Path(tempfile.mkdtemp(prefix=f"course_{stem}_")) if quick else Path("course_lib/results")
        out = folder / f"{stem}_{device.type}.json"
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file, got {out}")
    return out


def write_json(path: Path, payload: dict) -> None:
    """Indented JSON; NaN and infinities are refused (they are not JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")


def finish_run(out: Path, payload: dict, started: float, *pictures: Path) -> None:
    """The end of a run: ``payload["meta"]["wall_s"]`` (seconds since ``started``, a ``time.perf_counter()``),
    the JSON at ``out``, then a line for it and each of its already written ``pictures``, and the wall time."""
    payload["meta"]["wall_s"] = round(time.perf_counter() - started, 1)
    write_json(out, payload)
    print("".join(f"\nwrote {path}" for path in (out, *pictures)) + f"\nwall time {payload['meta']['wall_s']:.0f} s")
