"""Measure how long each notebook runs and record it in its lesson metadata (``lessons``).

``python -m course_tools.workshop measure [NOTEBOOK ...]`` executes each notebook from a fresh
kernel on the CPU (``COURSE_DEVICE=cpu``, as CI runs them), times the whole run, kernel start
included, and writes ``run_seconds``, ``measured_on`` and the ``teaching_minutes`` that follow
from them into ``metadata["course"]``. Outputs are not touched: the committed, executed outputs
stay as they are. Run it on a quiet machine; a busy one inflates every number.
"""

import os
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_lib.records import machine_metadata
from course_lib.device import get_device
from course_tools.workshop.lessons import read_lesson, teaching_minutes


def run_seconds(path: Path, *, timeout: float = 600.0) -> float:
    """Wall seconds to execute the notebook at ``path`` in a new kernel (its folder as working directory)."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.perf_counter()
    client.execute(env={**os.environ, "COURSE_DEVICE": "cpu"})  # the kernel's environment
    return time.perf_counter() - started


def machine_label() -> str:
    return machine_metadata(get_device("cpu"), quick=False)["device_label"]


def record(path: Path, seconds: float, machine: str) -> int:
    """Write ``run_seconds``, ``measured_on`` and ``teaching_minutes`` into the notebook's ``course``
    block (created if missing); returns the teaching minutes."""
    lesson = read_lesson(path)
    notebook = nbformat.read(path, as_version=4)
    course = notebook.metadata.setdefault("course", {})
    minutes = teaching_minutes(seconds, lesson.words, lesson.code_cells, lesson.equations)
    course.update(run_seconds=round(seconds, 1), measured_on=machine, teaching_minutes=minutes)
    nbformat.write(notebook, path)
    return minutes
