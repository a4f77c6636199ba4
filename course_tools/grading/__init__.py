"""The autograder: per-exercise grader tests run on a student's function in a fresh process.

In a notebook: ``check("ex01_softmax_attention", softmax_attention)`` prints a
report ending in ``Score: 10/10``. Programmatically: ``grade(exercise_id, fn)``
returns a ``GradeResult``. For a folder of submitted notebooks:
``python -m course_tools.grade submissions/ --csv scores.csv``.
Writing an exercise's tests: ``course_tools/grading/exercises/exNN_*.py`` with
``@grader_test(points=...)``, raising ``GradingFailure`` with what was wrong. ``mark(ok)``
puts ✓ or ✗ in front of a "Try it" line.
"""

from course_tools.grading.core import GraderTest, GradingFailure, grader_test
from course_tools.grading.isolation import grade
from course_tools.grading.registry import Exercise, exercise_ids, load_exercise
from course_tools.grading.report import check, format_report, mark
from course_tools.grading.results import GradeResult, TestResult

__all__ = [
    "Exercise",
    "GradeResult",
    "GraderTest",
    "GradingFailure",
    "TestResult",
    "check",
    "exercise_ids",
    "format_report",
    "grade",
    "grader_test",
    "load_exercise",
    "mark",
]
