"""Lesson metadata: the ``course`` block of every notebook's metadata, read and checked.

Every notebook in ``notebooks/`` carries, in ``metadata["course"]``, what The Carpentries put at
the top and bottom of an episode — ``questions``, ``objectives``, ``keypoints`` — plus what an
instructor needs to plan a room: ``demo`` (what to run live), ``discussion`` (questions for the
room), ``interview`` (which of the article's interview questions Q1–Q10 and follow-ups F1–F3 it
prepares), ``prerequisites`` (notebook stems), and minutes. Which exercises follow a lesson is
stated once, on the exercise's side: its notebook's ``course_lib.lessons`` (from ``solutions/`` via
``make exercises``), so a new exercise leaves the lesson notebooks alone.

Minutes are a measurement plus a stated rule, never a guess typed in:

* ``run_seconds``: the notebook's measured run time (``python -m course_tools.workshop measure``
  executes it and records the seconds and the machine in ``measured_on``);
* ``teaching_minutes`` = ⌈run_seconds / 60 + prose words / WORDS_PER_MINUTE + MINUTES_PER_EQUATION ·
  display equations + MINUTES_PER_CODE_CELL · code cells⌉, counted from the notebook itself
  (``teaching_minutes``; the generated ``course-header`` cells are not counted).

The first rule (prose at 120 words a minute, half a minute a cell) was reading speed: notebook 08
came out at 47 minutes, of which reading its 4,102 words alone would fill about 70 %, and a notebook
dense with derivations got no more time than one of prose. The weights now go to what takes time in a
room: a display equation is written out and each symbol named (1.5 min), a code cell is run and its
output read together, often a check of the derivation above it (0.75 min), and the prose around them
is explained at 150 words a minute (the display maths is not counted as words). These are the course's
stated assumptions, not a measurement of a workshop: no workshop has been timed yet, and the first
one's timings are what should replace them.
* ``exercise_minutes``: the sum of its exercises' stated estimates, each kept in the exercise
  notebook's metadata (``course_lib.minutes``), summed when the lessons are loaded.

``problems(root)`` lists everything wrong (a missing block or key, a prerequisite or lesson that
does not exist, an exercise no lesson leads to, minutes that do not follow the rule); the test
suite requires it empty.
"""

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

WORDS_PER_MINUTE = 150  # explaining the prose around the maths and the code, display maths not counted
MINUTES_PER_EQUATION = 1.5  # a display equation ($$…$$ or an align/equation block), written out and explained
MINUTES_PER_CODE_CELL = 0.75  # running a cell and reading its output together (often the check of a derivation)
DISPLAY_MATH = re.compile(r"\$\$.+?\$\$|\\begin\{(?:align|equation)\*?\}.+?\\end\{(?:align|equation)\*?\}", re.S)
HEADER_TAG = "course-header"  # the generated badge and Colab cells (``headers``): not part of the lesson
LIST_KEYS = ("questions", "objectives", "keypoints", "demo", "discussion", "interview", "prerequisites")
INTERVIEW_IDS = tuple(f"Q{i}" for i in range(1, 11)) + ("F1", "F2", "F3")


@dataclass(frozen=True)
class Lesson:
    """One notebook's lesson metadata, with the counts its minutes are derived from."""

    stem: str
    title: str
    meta: dict
    words: int  # of prose in markdown cells, display maths left out
    code_cells: int
    equations: int  # display equations in markdown cells
    exercises: tuple[str, ...] = ()  # the exercise ids whose ``course_lib.lessons`` name this notebook
    exercise_minutes: int = 0  # their stated minutes, summed

    @property
    def teaching_minutes(self) -> int:
        return int(self.meta["teaching_minutes"])


def teaching_minutes(run_seconds: float, words: int, code_cells: int, equations: int) -> int:
    """⌈run_seconds/60 + words/WORDS_PER_MINUTE + MINUTES_PER_EQUATION·equations + MINUTES_PER_CODE_CELL·code_cells⌉."""
    return math.ceil(run_seconds / 60 + words / WORDS_PER_MINUTE + MINUTES_PER_EQUATION * equations
                     + MINUTES_PER_CODE_CELL * code_cells)


def read_lesson(path: Path) -> Lesson:
    """The lesson of the notebook at ``path`` (its ``course`` block may be missing: then ``meta`` is {})."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = [cell for cell in notebook["cells"] if HEADER_TAG not in cell["metadata"].get("tags", [])]
    markdown = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]
    heading = next((line for text in markdown for line in text.splitlines() if line.startswith("# ")), path.stem)
    title = heading.lstrip("# ").split("·", 1)[-1].strip()
    words = sum(len(DISPLAY_MATH.sub(" ", text).split()) for text in markdown)
    equations = sum(len(DISPLAY_MATH.findall(text)) for text in markdown)
    code_cells = sum(1 for cell in cells if cell["cell_type"] == "code" and "".join(cell["source"]).strip())
    return Lesson(path.stem, title, notebook["metadata"].get("course", {}), words, code_cells, equations)


def notebook_paths(root: Path) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def exercise_metadata(root: Path) -> dict[str, dict]:
    """exercise id -> its notebook's ``course_lib`` metadata (``function``, ``minutes``, ``lessons``)."""
    return {path.stem: json.loads(path.read_text(encoding="utf-8"))["metadata"].get("course_lib", {})
            for path in sorted((root / "exercises").glob("*.ipynb"))}


def exercise_minutes(root: Path) -> dict[str, int]:
    """exercise id -> the stated minutes in its notebook's metadata (``course_lib.minutes``; 0 if missing)."""
    return {exercise_id: meta.get("minutes", 0) for exercise_id, meta in exercise_metadata(root).items()}


def load_lessons(root: Path) -> dict[str, Lesson]:
    """stem -> Lesson for every notebook under ``root/notebooks``, in course order, with its exercises."""
    exercises = exercise_metadata(root)
    lessons = {}
    for path in notebook_paths(root):
        lesson = read_lesson(path)
        own = tuple(e for e, meta in exercises.items() if lesson.stem in _listed(meta.get("lessons")))
        minutes = sum(exercises[e].get("minutes", 0) for e in own)
        lessons[path.stem] = replace(lesson, exercises=own, exercise_minutes=minutes)
    return lessons


def _listed(value: object) -> list:
    return value if isinstance(value, list) else []  # a malformed entry is reported by ``problems``


def problems(root: Path) -> list[str]:
    """Everything wrong with the lesson metadata under ``root``, one line each ([] when it is all right)."""
    lessons = load_lessons(root)
    found = []
    for name, meta in exercise_metadata(root).items():
        minutes, leads = meta.get("minutes", 0), meta.get("lessons")
        if not isinstance(minutes, int) or isinstance(minutes, bool) or minutes <= 0:
            found.append(f"exercises/{name}.ipynb: 'course_lib.minutes' must be a positive whole number, got {minutes!r}")
        if not isinstance(leads, list) or not leads:
            found.append(f"exercises/{name}.ipynb: 'course_lib.lessons' must list the notebooks it follows, got {leads!r}")
        else:
            found += [f"exercises/{name}.ipynb: lesson {stem!r} is not a notebook" for stem in leads if stem not in lessons]
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
        found += [f"{stem}: interview id {q!r} is not one of {', '.join(INTERVIEW_IDS)}"
                  for q in meta.get("interview", []) if q not in INTERVIEW_IDS]
        found += _minute_problems(lesson)
    return found


def _minute_problems(lesson: Lesson) -> list[str]:
    meta, stem = lesson.meta, lesson.stem
    seconds = meta.get("run_seconds")
    if not isinstance(seconds, (int, float)) or seconds <= 0 or not meta.get("measured_on"):
        return [f"{stem}: 'run_seconds' (> 0) and 'measured_on' must come from `python -m course_tools.workshop measure`"]
    expected = teaching_minutes(seconds, lesson.words, lesson.code_cells, lesson.equations)
    if meta.get("teaching_minutes") != expected:
        return [f"{stem}: teaching_minutes is {meta.get('teaching_minutes')!r}, the rule gives {expected} "
                f"({seconds:.0f} s run, {lesson.words} words, {lesson.equations} equations, {lesson.code_cells} "
                "code cells): run measure"]
    return []
