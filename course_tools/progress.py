"""Your progress through the exercises: the last ``check()`` score of each, and when it ran.

``check()`` records each run in ``~/.linear_attention_course/progress.json`` (``{"version": 1, "exercises":
{id: {"score", "max_score", "passed", "tests", "attempts", "when"}}}``) and ``python -m course_tools.progress``
lists every exercise beside its last score. The file is in the home folder, not the course folder, because
the course folder is what a learner replaces (a fresh clone, a new student copy, a private copy on the hub).
``COURSE_PROGRESS_FILE`` names another file; empty, it turns recording off (the test suite's setting:
grading the solutions is not your work). The exercises listed are the exercise notebooks of the course
folder you are in (``exercises/`` here or in a folder above), else beside this package (an editable install).
"""

import argparse
import json
import os
from datetime import datetime, timezone
from pathlib import Path

ENV_VAR = "COURSE_PROGRESS_FILE"
DEFAULT_PATH = Path("~/.linear_attention_course/progress.json")
FORMAT_VERSION = 1
_warned: set[str] = set()  # each unwritable file is reported once per session, not after every check()


class ProgressFileError(ValueError):
    """The progress file exists but cannot be read as the course's progress record."""


def progress_path() -> Path | None:
    """The progress file: ``COURSE_PROGRESS_FILE`` when set (None when it is empty: recording off)."""
    chosen = os.environ.get(ENV_VAR, str(DEFAULT_PATH))
    return Path(chosen).expanduser() if chosen.strip() else None


def read_progress(path: Path) -> dict[str, dict]:
    """exercise id -> its last recorded check; {} when the file does not exist yet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ProgressFileError(damaged(path, str(error))) from error
    entries = data.get("exercises") if isinstance(data, dict) and data.get("version") == FORMAT_VERSION else None
    if not isinstance(entries, dict) or not all(isinstance(entry, dict) for entry in entries.values()):
        raise ProgressFileError(damaged(path, f"not a version-{FORMAT_VERSION} progress record"))
    return entries


def damaged(path: Path, why: str) -> str:
    return f"cannot read the progress file {path} ({why}): delete it to start afresh, or set {ENV_VAR} to another file"


def record_check(exercise_id: str, *, score: int, max_score: int, passed: int, tests: int) -> Path | None:
    """Record one ``check()`` run; the file written, or None when nothing could be (said once, never raised)."""
    path = progress_path()
    if path is None:
        return None
    try:
        entries = read_progress(path)
        attempts = int(entries.get(exercise_id, {}).get("attempts", 0)) + 1
        entries[exercise_id] = {"score": score, "max_score": max_score, "passed": passed, "tests": tests,
                                "attempts": attempts, "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps({"version": FORMAT_VERSION, "exercises": entries}, indent=1), encoding="utf-8")
        os.replace(partial, path)  # a crash mid-write leaves the old record, never half a file
    except (OSError, ValueError) as error:
        if str(path) not in _warned:
            _warned.add(str(path))
            print(f"Note: your progress was not saved ({error}); set {ENV_VAR} to a file you can write.")
        return None
    return path


def exercises_folder(start: Path | None = None) -> Path:
    """``exercises/`` in ``start`` (default: the working folder) or the nearest folder above it that has one,
    else the one beside this package; it may not exist (a plain install run outside a course folder)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / "exercises").glob("ex*.ipynb")):
            return folder / "exercises"
    return Path(__file__).resolve().parents[1] / "exercises"


def exercise_list(folder: Path) -> dict[str, tuple[str, int]]:
    """exercise id -> (title, stated minutes), from the exercise notebooks in ``folder`` ({} if none)."""
    found = {}
    for notebook_path in sorted(folder.glob("ex*.ipynb")):
        notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
        meta = notebook.get("metadata", {}).get("course_lib", {})
        headings = [line for cell in notebook["cells"] if cell["cell_type"] == "markdown"
                    for line in "".join(cell["source"]).splitlines() if line.startswith("# ")]
        title = headings[0].lstrip("# ").split("·", 1)[-1].strip() if headings else notebook_path.stem
        found[meta.get("exercise", notebook_path.stem)] = (title, int(meta.get("minutes", 0)))
    return found


def progress_table(exercises: dict[str, tuple[str, int]], entries: dict[str, dict]) -> str:
    """One line per exercise (the known ones, then any only the file names): id, title, minutes, last score."""
    lines = []
    for exercise_id in [*exercises, *sorted(set(entries) - set(exercises))]:
        title, minutes = exercises.get(exercise_id, ("(not among the exercise notebooks)", 0))
        entry = entries.get(exercise_id)
        last = (f"{entry.get('score')}/{entry.get('max_score')} on {str(entry.get('when', '?'))[:16].replace('T', ' ')}"
                if entry else "not tried")
        lines.append(f"{exercise_id:<31} {minutes:>3} min  {last:<26} {title}")
    full = sum(1 for e in entries.values() if e.get("max_score") and e.get("score") == e.get("max_score"))
    lines.append(f"Full marks in {full} of {len(lines)} exercises.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.progress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercises", type=Path, help="the exercise notebooks' folder (default: found from here)")
    folder = parser.parse_args(argv).exercises or exercises_folder()
    path = progress_path()
    if path is None:
        print(f"Recording is off ({ENV_VAR} is empty).")
        return 0
    try:
        entries = read_progress(path)
    except ProgressFileError as error:
        print(f"Error: {error}")
        return 1
    exercises = exercise_list(folder)
    print(f"Progress file: {path}" + ("" if path.exists() else " (nothing recorded yet)"))
    if not exercises:
        print(f"No exercise notebooks found in {folder}: listing what the file holds (--exercises DIR).")
    print(progress_table(exercises, entries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
