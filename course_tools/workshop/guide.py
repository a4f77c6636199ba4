"""``docs/instructor_guide.md``, written from the notebooks' lesson metadata, the schedules and the
graders' known mistakes — never edited by hand (a test fails when the committed file is stale).

The common mistakes of each exercise are the graders' mutants (``tests/mutants/<exercise>.py``, gathered
by ``tests/grader_mutants.py``: the plausible wrong answers every grader test is proven against), each
with its mistake in plain words and the tests it fails; the guide is therefore written from a repository
checkout.
The article's interview questions come from ``course_lib.quiz`` (Q1–Q10) and from notebook 10's
"Three questions to dig deeper" (F1–F3).
"""

import importlib.util
import json
import re
from pathlib import Path

from course_lib.quiz.questions import QUESTIONS
from course_tools.grading.registry import load_exercise
from course_tools.workshop import schedules
from course_tools.workshop.lessons import MINUTES_PER_CODE_CELL, MINUTES_PER_EQUATION, WORDS_PER_MINUTE, Lesson, exercise_minutes, load_lessons

GUIDE = Path("docs/instructor_guide.md")
FOLLOW_UP = re.compile(r"^\d\.\s+\*\*(.+?)\*\*", re.M)


def load_mutants(root: Path) -> dict:
    """``MUTANTS`` of ``root/tests/grader_mutants.py`` (exercise id -> list of Mutant, from ``tests/mutants/``)."""
    path = root / "tests" / "grader_mutants.py"
    if not path.exists():
        raise ValueError(f"the guide is written from a repository checkout: {path} is missing")
    spec = importlib.util.spec_from_file_location("grader_mutants", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MUTANTS


def interview_prompts(root: Path) -> dict[str, str]:
    """Q1–Q10 from the quiz, F1–F3 from notebook 10's follow-up questions."""
    prompts = {question.id: question.prompt for question in QUESTIONS}
    cells = json.loads((root / "notebooks" / "10_interview_quiz.ipynb").read_text(encoding="utf-8"))["cells"]
    follow_ups = FOLLOW_UP.findall("\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"))
    prompts |= {f"F{i}": text for i, text in enumerate(follow_ups[:3], start=1)}
    return prompts


def _bullets(items: list[str]) -> list[str]:
    return [f"- {item}" for item in items] or ["- (none)"]


def _lesson_section(lesson: Lesson, mutants: dict, prompts: dict[str, str], exercises: dict[str, int]) -> list[str]:
    meta = lesson.meta
    before = ", ".join(f"[{p}](#{p})" for p in meta["prerequisites"]) or "none"
    lines = [f"### {lesson.stem}", "", f"**{lesson.title}** — [open the notebook](../notebooks/{lesson.stem}.ipynb)",
             "", f"Prerequisites: {before}. Teaching **{lesson.teaching_minutes} min** "
             f"(run {meta['run_seconds']:.0f} s on {meta['measured_on']}; {lesson.words:,} words of prose, "
             f"{lesson.equations} display equations, {lesson.code_cells} code cells), exercises **{lesson.exercise_minutes} min**.", ""]
    for title, key in (("Questions", "questions"), ("Objectives", "objectives"), ("Key points", "keypoints"),
                       ("Demo live", "demo"), ("Discussion", "discussion")):
        lines += [f"**{title}**", "", *_bullets(meta[key]), ""]
    asked = [f"{qid}: {prompts.get(qid, '?')}" for qid in meta["interview"]]
    lines += ["**Interview questions it prepares** (the notebook's own *Interview check* closes it, answers folded)",
              "", *_bullets(asked), ""]
    for exercise_id in lesson.exercises:
        lines += _exercise_lines(exercise_id, mutants.get(exercise_id, []), exercises[exercise_id])
    return lines


def _exercise_lines(exercise_id: str, mutants: list, minutes: int) -> list[str]:
    exercise = load_exercise(exercise_id)
    lines = [f"**Exercise [{exercise_id}](../exercises/{exercise_id}.ipynb)** — {exercise.title}: "
             f"`{exercise.function_name}`, {exercise.max_score} points over {len(exercise.tests)} tests, "
             f"{minutes} min. "
             "Mistakes the grader knows (each is a tested wrong answer; the tests it fails in brackets):", ""]
    lines += [f"- {mutant.mistake} ({', '.join(sorted(mutant.targets))})" for mutant in mutants] or ["- (none recorded)"]
    return lines + [""]


def _schedule_lines(plan: schedules.Plan, lessons: dict[str, Lesson], exercises: dict[str, int]) -> list[str]:
    rows = schedules.build(plan, lessons, exercises)
    lines = [f"### {plan.name} ({len(plan.days)} × {plan.minutes_per_day} min from {plan.start})", ""]
    lines += ["| day | start | min | block | what |", "|---|---|---|---|---|"]
    for row in rows:
        what = {"lesson": f"[{row.what}](#{row.what})",
                "exercise": f"[{row.what}](../exercises/{row.what}.ipynb)"}.get(row.kind, row.what)
        lines.append(f"| {row.day} | {row.start} | {row.minutes} | {row.kind} | {what} |")
    later = [f"- {stem}'s exercise does not follow it here: {why}." for stem, why in plan.exercise_later]
    return lines + [""] + (later + [""] if later else [])


def render(root: Path) -> str:
    """The whole guide as markdown."""
    lessons = load_lessons(root)
    mutants, prompts = load_mutants(root), interview_prompts(root)
    lines = [
        "# Instructor guide", "",
        "Generated by `python -m course_tools.workshop guide` from the notebooks' lesson metadata "
        "(`metadata.course`), the graders' tested mistakes and the quiz; do not edit it by hand. "
        "`tests/test_workshop.py` fails when it is stale.", "",
        f"Minutes: **teaching** = the notebook's measured run time + its prose at {WORDS_PER_MINUTE} words "
        f"a minute + {MINUTES_PER_EQUATION} min per display equation to write out and explain + "
        f"{MINUTES_PER_CODE_CELL} min per code cell to run and read together, rounded up (the course's stated "
        "assumptions, to be replaced by a timed workshop: `course_tools.workshop.lessons` says why); "
        "**exercises** is a stated estimate for writing the function and reading the grader's feedback. "
        "Re-measure with `python -m course_tools.workshop measure` after changing a notebook.", "",
        "## Schedules", "",
        "Every day ends with a buffer for questions and catch-up, so the blocks add up to the day.", "",
    ]
    exercises = exercise_minutes(root)
    for plan in schedules.PLANS:
        lines += _schedule_lines(plan, lessons, exercises)
    lines += ["## Lessons", ""]
    for lesson in lessons.values():
        lines += _lesson_section(lesson, mutants, prompts, exercises)
    return "\n".join(lines).rstrip() + "\n"
