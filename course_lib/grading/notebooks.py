"""Grade a submitted notebook: execute it in a fresh kernel, then grade its function there.

The notebook runs with ``COURSE_LIB_GRADING=1`` (its ``check()`` cells skip) and
on the CPU. An injected last cell calls ``emit_grade``, which grades the
function the notebook defined and prints the result as one marked JSON line.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_lib.grading.core import shorten
from course_lib.grading.isolation import grade, not_run
from course_lib.grading.registry import Exercise, exercise_ids, load_exercise
from course_lib.grading.report import BATCH_ENV_VAR
from course_lib.grading.results import GradeResult

RESULT_MARKER = "COURSE_LIB_GRADE_RESULT "
GRADING_CELL = """from course_lib.grading.notebooks import emit_grade
emit_grade({exercise!r}, {function!r}, globals(), timeout={timeout!r})"""


@dataclass
class NotebookGrade:
    """The grade of one submitted notebook; ``result`` is None when its exercise is unknown."""

    path: Path
    exercise: str
    result: GradeResult | None
    notes: str

    @property
    def score(self) -> int:
        return self.result.score if self.result else 0

    @property
    def max_score(self) -> int:
        return self.result.max_score if self.result else 0


def emit_grade(exercise_id: str, function_name: str, namespace: dict, *, timeout: float) -> None:
    """Run inside the submission's kernel: grade ``namespace[function_name]``, print one marked JSON line."""
    exercise = load_exercise(exercise_id)
    fn = namespace.get(function_name)
    if fn is None:
        result = not_run(exercise, f"the notebook defines no {function_name}")
    elif not callable(fn):
        result = not_run(exercise, f"{function_name} is a {type(fn).__name__}, not a function")
    else:
        result = grade(exercise_id, fn, timeout=timeout)
    print(RESULT_MARKER + json.dumps(result.to_dict()))


def identify(notebook: nbformat.NotebookNode, path: Path) -> tuple[Exercise, str] | None:
    """(exercise, function name) from metadata ``course_lib``, else from an exercise id in the file name."""
    meta = notebook.metadata.get("course_lib", {})
    if meta.get("exercise") in exercise_ids():
        exercise = load_exercise(meta["exercise"])
        return exercise, meta.get("function") or exercise.function_name
    matches = [exercise_id for exercise_id in exercise_ids() if exercise_id in path.stem]
    if len(matches) == 1:
        exercise = load_exercise(matches[0])
        return exercise, exercise.function_name
    return None


def grade_notebook(path: Path, *, timeout: float = 60.0, cell_timeout: float = 120.0) -> NotebookGrade:
    """Execute the notebook at ``path`` and grade its function; never raises for a bad notebook.

    ``timeout`` bounds the grading of the function (see ``grade``); ``cell_timeout``
    bounds each of the notebook's own cells (a cell that runs over is interrupted).
    """
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as error:  # noqa: BLE001 - any unreadable file is a note in the table
        return NotebookGrade(path, "?", None, f"not a readable notebook: {type(error).__name__}: {error}")
    found = identify(notebook, path)
    if found is None:
        known = ", ".join(exercise_ids())
        return NotebookGrade(
            path, "?", None, f"cannot tell the exercise: no course_lib metadata, no id ({known}) in the name"
        )
    exercise, function = found
    source = GRADING_CELL.format(exercise=exercise.id, function=function, timeout=timeout)
    notebook.cells.append(nbformat.v4.new_code_cell(source))
    grading_id = notebook.cells[-1].id
    client = NotebookClient(
        notebook,
        timeout=int(cell_timeout),
        timeout_func=lambda cell: int(cell_timeout + (timeout if cell.get("id") == grading_id else 0)),
        interrupt_on_timeout=True,
        allow_errors=True,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute(env={**os.environ, BATCH_ENV_VAR: "1", "COURSE_DEVICE": "cpu"})
    except Exception as error:  # noqa: BLE001 - a dead kernel or a broken notebook scores 0 with the reason
        reason = f"the notebook did not execute: {type(error).__name__}: {error}"
        return NotebookGrade(path, exercise.id, not_run(exercise, reason), reason)
    errors = _cell_errors(notebook.cells)
    result = _read_result(notebook.cells[-1]) or not_run(exercise, "the grading cell gave no result")
    return NotebookGrade(path, exercise.id, result, "; ".join([*_summary(result), *errors]))


def _summary(result: GradeResult) -> list[str]:
    """The run's message, else the failed tests, for the notes column."""
    if result.message:
        return [result.message]
    failed = [test.name for test in result.tests if not test.passed]
    return [f"failed {', '.join(failed)}"] if failed else []


def _cell_errors(cells: list) -> list[str]:
    """'cell N raised ErrorName: message' for every cell that raised while executing."""
    found = []
    for index, cell in enumerate(cells, start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                detail = f": {output['evalue']}" if output["evalue"] else ""
                found.append(shorten(f"cell {index} raised {output['ename']}{detail}", 200))
    return found


def _read_result(cell: nbformat.NotebookNode) -> GradeResult | None:
    """The GradeResult printed by ``emit_grade`` in the grading cell's output, if any."""
    streams = [output.get("text", "") for output in cell.get("outputs", []) if output.get("output_type") == "stream"]
    for line in "".join(streams).splitlines():
        if line.startswith(RESULT_MARKER):
            return GradeResult.from_dict(json.loads(line[len(RESULT_MARKER) :]))
    return None
