"""``check()``: grade a function from a notebook and print a friendly report."""

import os
from collections.abc import Callable

from course_tools.progress import record_check
from course_tools.grading.core import BATCH_ENV_VAR
from course_tools.grading.isolation import grade
from course_tools.grading.registry import load_exercise
from course_tools.grading.results import GradeResult


def mark(ok: bool) -> str:
    """"✓" where a "Try it" check holds and "✗" where it does not, so a wrong value stands out."""
    return "✓" if ok else "✗"


def format_report(result: GradeResult) -> str:
    """The report ``check()`` prints: a title, a line per test, the total.

    No timings, so the text is the same on every run; the last line is always
    ``Score: {score}/{max_score}``.
    """
    lines = [f"{result.exercise}: {load_exercise(result.exercise).title}"]
    for test in result.tests:
        mark = "✓" if test.passed else "✗"
        feedback = test.feedback.replace("\n", "\n    ")
        lines.append(f"{mark} {test.name} ({test.points}/{test.max_points}): {feedback}")
    if result.message:
        lines.append(f"Note: {result.message}")
    lines.append(f"Score: {result.score}/{result.max_score}")
    return "\n".join(lines)


def check(exercise_id: str, fn: Callable, *, timeout: float = 60.0, record: bool = True) -> GradeResult | None:
    """Grade ``fn`` on exercise ``exercise_id`` (in a fresh process), print the report, return the result.

    With ``record`` (the default) the score also goes to the learner's progress file
    (``course_tools.progress``: ``python -m course_tools.progress`` lists it); a demo of the grader passes False.

    When the environment variable ``COURSE_LIB_GRADING=1`` is set (the instructor's
    batch run, ``python -m course_tools.grade``), it prints a line and returns None
    without grading: the batch run grades every submission itself.
    """
    if os.environ.get(BATCH_ENV_VAR) == "1":
        print("check() skipped during batch grading")
        return None
    result = grade(exercise_id, fn, timeout=timeout)
    print(format_report(result))
    if record:
        record_check(result.exercise, score=result.score, max_score=result.max_score,
                     passed=sum(test.passed for test in result.tests), tests=len(result.tests))
    return result
