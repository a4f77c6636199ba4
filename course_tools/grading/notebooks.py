"""Grade a submitted notebook: run it in its own sandbox, then judge its function from outside.

The notebook is copied alone into a fresh private folder; ``answers`` runs its code cells
there inside a ``sandbox.Sandbox`` (``check()`` cells skip) and then only answers calls. The
grader tests run in this process (``isolation.run_tests``), so nothing the notebook prints,
patches or writes can change a verdict, and the process tree is dead before the grade is
returned.
"""

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_tools.grading.isolation import not_run, run_tests
from course_tools.grading.registry import Exercise, exercise_ids, load_exercise
from course_tools.grading.remote import private_folder
from course_tools.grading.results import GradeResult
from course_tools.grading.sandbox import Limits, Sandbox

MAX_NOTEBOOK_BYTES = 20 << 20
CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (newlines and tabs kept)."""
    return CONTROL.sub("", text)


@dataclass
class NotebookGrade:
    """The grade of one submitted notebook.

    ``status``: "graded" (its tests ran; some may have failed), or "not graded" (unreadable,
    unknown exercise, no function, not ready in time) with ``reason``. ``result`` is None only
    when the exercise is unknown, and then the score is 0/0.
    """

    path: Path
    exercise: str
    result: GradeResult | None
    status: str
    reason: str
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> int:
        return self.result.score if self.result else 0

    @property
    def max_score(self) -> int:
        return self.result.max_score if self.result else 0


def identify(notebook: nbformat.NotebookNode | None, path: Path) -> tuple[Exercise, str] | None:
    """(exercise, function name) from metadata ``course_lib``, else from an exercise id in the file name."""
    meta = notebook.metadata.get("course_lib", {}) if notebook is not None else {}
    if isinstance(meta, dict) and meta.get("exercise") in exercise_ids():
        exercise = load_exercise(meta["exercise"])
        function = meta.get("function")
        return exercise, function if isinstance(function, str) and function.isidentifier() else exercise.function_name
    matches = [exercise_id for exercise_id in exercise_ids() if exercise_id in path.stem]
    if len(matches) == 1:
        exercise = load_exercise(matches[0])
        return exercise, exercise.function_name
    return None


def read_notebook(path: Path) -> tuple[bytes | None, nbformat.NotebookNode | None, str]:
    """(the file's bytes, the parsed notebook, "") or what makes it unreadable as the third item."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None, None, f"the file is larger than {MAX_NOTEBOOK_BYTES >> 20} MB"
        data = path.read_bytes()
        return data, nbformat.reads(data.decode("utf-8"), as_version=4), ""
    except Exception as error:  # noqa: BLE001 - any unreadable file is a reason in the table
        return None, None, clean(f"not a readable notebook: {type(error).__name__}: {error}")[:300]


def grade_notebook(path: Path, *, timeout: float = 60.0, cell_timeout: float = 120.0,
                   notebook_timeout: float = 300.0, hidden: tuple[Path, ...] = (),
                   use_bubblewrap: bool = True) -> NotebookGrade:
    """Run the notebook at ``path`` in a sandbox and grade its function; never raises for a bad notebook.

    ``notebook_timeout`` bounds running its cells (each also stopped after ``cell_timeout``),
    ``timeout`` the tests that follow; ``hidden`` folders cannot be read from the sandbox.
    """
    data, notebook, problem = read_notebook(path)
    found = identify(notebook, path)
    if found is None:
        reason = problem or f"cannot tell the exercise: no course_lib metadata, no id ({', '.join(exercise_ids())}) in the name"
        return NotebookGrade(path, "?", None, "not graded", reason)
    exercise, function = found
    if problem:
        return NotebookGrade(path, exercise.id, not_run(exercise, problem), "not graded", problem)
    folder = private_folder()
    try:
        (folder / "submission.ipynb").write_bytes(data)
        cpu = int(2 * (notebook_timeout + timeout)) + 10  # CPU seconds over every thread: a backstop to the wall clock
        sandbox = Sandbox(folder, hidden=hidden, limits=Limits(cpu_seconds=cpu), use_bubblewrap=use_bubblewrap)
        spec = {"kind": "notebook", "exercise": exercise.id, "forbidden": list(exercise.forbidden),
                "notebook": str(sandbox.folder / "submission.ipynb"), "function": function,
                "cell_timeout": cell_timeout}
        result, notes = run_tests(exercise, spec, sandbox, timeout=timeout, load_timeout=notebook_timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    status = "graded" if result.ran else "not graded"
    failed = [test.name for test in result.tests if not test.passed]
    why = result.message or (f"failed {', '.join(failed)}" if failed else "")
    return NotebookGrade(path, exercise.id, result, status, clean(why), [clean(n) for n in notes])
