"""Lesson metadata: the ``course`` block of every notebook's metadata, read and checked.

Every notebook in ``notebooks/`` carries, in ``metadata["course"]``, what The Carpentries put at
the top and bottom of an episode — ``questions``, ``objectives``, ``keypoints`` — plus what an
instructor needs to plan a room: ``demo`` (what to run live), ``discussion`` (questions for the
room), ``interview`` (which of the article's interview questions Q1–Q10 and follow-ups F1–F3 it
prepares), ``prerequisites`` (notebook stems), ``exercises`` (exercise ids), and minutes.

Minutes are a measurement plus a stated rule, never a guess typed in:

* ``run_seconds``: the notebook's measured run time (``python -m course_tools.workshop measure``
  executes it and records the seconds and the machine in ``measured_on``);
* ``teaching_minutes`` = ⌈run_seconds / 60 + prose words / WORDS_PER_MINUTE +
  MINUTES_PER_CODE_CELL · code cells⌉, counted from the notebook itself (``teaching_minutes``);
* ``exercise_minutes``: the sum of its exercises' stated estimates, each kept in the exercise
  notebook's metadata (``course_lib.minutes``, from ``solutions/`` via ``make exercises``).

``problems(root)`` lists everything wrong (a missing block or key, a prerequisite or exercise
that does not exist, minutes that do not follow the rule); the test suite requires it empty.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

WORDS_PER_MINUTE = 120  # explaining prose to a room, with pauses: slower than reading alone
MINUTES_PER_CODE_CELL = 0.5  # running a cell and reading its output together
LIST_KEYS = ("questions", "objectives", "keypoints", "demo", "discussion", "interview", "prerequisites", "exercises")
INTERVIEW_IDS = tuple(f"Q{i}" for i in range(1, 11)) + ("F1", "F2", "F3")


@dataclass(frozen=True)
class Lesson:
    """One notebook's lesson metadata, with the counts its minutes are derived from."""

    stem: str
    title: str
    meta: dict
    words: int  # in markdown cells
    code_cells: int

    @property
    def teaching_minutes(self) -> int:
        return int(self.meta["teaching_minutes"])

    @property
    def exercise_minutes(self) -> int:
        return int(self.meta["exercise_minutes"])


def teaching_minutes(run_seconds: float, words: int, code_cells: int) -> int:
    """⌈run_seconds/60 + words/WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL·code_cells⌉."""
    return math.ceil(run_seconds / 60 + words / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * code_cells)


def read_lesson(path: Path) -> Lesson:
    """The lesson of the notebook at ``path`` (its ``course`` block may be missing: then ``meta`` is {})."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = notebook["cells"]
    markdown = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]
    heading = next((line for text in markdown for line in text.splitlines() if line.startswith("# ")), path.stem)
    title = heading.lstrip("# ").split("·", 1)[-1].strip()
    words = sum(len(text.split()) for text in markdown)
    code_cells = sum(1 for cell in cells if cell["cell_type"] == "code" and "".join(cell["source"]).strip())
    return Lesson(path.stem, title, notebook["metadata"].get("course", {}), words, code_cells)


def notebook_paths(root: Path) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def load_lessons(root: Path) -> dict[str, Lesson]:
    """stem -> Lesson for every notebook under ``root/notebooks``, in course order."""
    return {path.stem: read_lesson(path) for path in notebook_paths(root)}


def exercise_minutes(root: Path) -> dict[str, int]:
    """exercise id -> the stated minutes in its notebook's metadata (``course_lib.minutes``; 0 if missing)."""
    found = {}
    for path in sorted((root / "exercises").glob("*.ipynb")):
        meta = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("course_lib", {})
        found[path.stem] = meta.get("minutes", 0)
    return found


def problems(root: Path) -> list[str]:
    """Everything wrong with the lesson metadata under ``root``, one line each ([] when it is all right)."""
    lessons = load_lessons(root)
    exercises = exercise_minutes(root)
    found = [f"exercises/{name}.ipynb: 'course_lib.minutes' must be a positive whole number, got {minutes!r}"
             for name, minutes in exercises.items() if not isinstance(minutes, int) or minutes <= 0]
    for stem, lesson in lessons.items():
        meta = lesson.meta
        if not meta:
            found.append(f"{stem}: no 'course' block in the notebook metadata")
            continue
        for key in LIST_KEYS:
            value = meta.get(key)
            if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
                found.append(f"{stem}: '{key}' must be a list of non-empty strings, got {value!r}")
        for key in ("questions", "objectives", "keypoints"):
            if isinstance(meta.get(key), list) and not meta[key]:
                found.append(f"{stem}: '{key}' is empty")
        found += [f"{stem}: prerequisite {p!r} is not a notebook" for p in meta.get("prerequisites", []) if p not in lessons]
        found += [f"{stem}: exercise {e!r} is not in exercises/" for e in meta.get("exercises", []) if e not in exercises]
        found += [f"{stem}: interview id {q!r} is not one of {', '.join(INTERVIEW_IDS)}"
                  for q in meta.get("interview", []) if q not in INTERVIEW_IDS]
        found += _minute_problems(lesson, exercises)
    return found


def _minute_problems(lesson: Lesson, exercises: dict[str, int]) -> list[str]:
    meta, stem = lesson.meta, lesson.stem
    seconds = meta.get("run_seconds")
    if not isinstance(seconds, (int, float)) or seconds <= 0 or not meta.get("measured_on"):
        return [f"{stem}: 'run_seconds' (> 0) and 'measured_on' must come from `python -m course_tools.workshop measure`"]
    found = []
    expected = teaching_minutes(seconds, lesson.words, lesson.code_cells)
    if meta.get("teaching_minutes") != expected:
        found.append(f"{stem}: teaching_minutes is {meta.get('teaching_minutes')!r}, the rule gives {expected} "
                     f"({seconds:.0f} s run, {lesson.words} words, {lesson.code_cells} code cells): run measure")
    stated = sum(exercises.get(name, 0) for name in meta.get("exercises", []))
    if meta.get("exercise_minutes") != stated:
        found.append(f"{stem}: exercise_minutes is {meta.get('exercise_minutes')!r}, its exercises' minutes add up "
                     f"to {stated}: run measure")
    return found
