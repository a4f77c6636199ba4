"""Grader tests: the ``@grader_test`` decorator, ``GradingFailure``, and running one test.

A grader test is a function ``test(fn) -> None`` that calls the student's ``fn``
and raises ``GradingFailure("what was wrong")`` when the answer is wrong. The
decorator attaches the points it is worth; the first line of its docstring is
the feedback shown when it passes.
"""

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from course_tools.grading.results import TestResult

MAX_FEEDBACK_CHARS = 600
BATCH_ENV_VAR = "COURSE_LIB_GRADING"  # set in a graded batch: check() cells skip
# Whose submission the batch grader is grading (from its file or folder name), None in check(): a test
# whose answers depend on the student (the quiz's numbers) takes the id from here, not from the notebook.
SUBMITTER: ContextVar[str | None] = ContextVar("submitter", default=None)


class GradingFailure(Exception):
    """Raised by a grader test to fail it; the message is the student's feedback."""


@dataclass(frozen=True)
class GraderTest:
    """A test function with its points; ``name`` is the function's name."""

    __test__ = False  # a grader test, not a pytest test class

    run: Callable[[Callable], None]
    points: int
    name: str
    description: str
    module: str

    def __call__(self, fn: Callable) -> None:
        self.run(fn)


def grader_test(*, points: int) -> Callable[[Callable[[Callable], None]], GraderTest]:
    """Decorator: make ``test(fn)`` a grader test worth ``points`` (a positive int)."""
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise ValueError(f"points must be a positive int, got {points!r}")

    def decorate(run: Callable[[Callable], None]) -> GraderTest:
        doc = (run.__doc__ or "").strip()
        if not doc:
            raise ValueError(f"grader test {run.__name__} needs a docstring: its first line is the pass feedback")
        return GraderTest(run, points, run.__name__, doc.splitlines()[0], run.__module__)

    return decorate


def shorten(text: str, limit: int = MAX_FEEDBACK_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marking the cut."""
    return text if len(text) <= limit else text[: limit - 15] + " …[truncated]"


def run_test(test: GraderTest, fn: Callable) -> TestResult:
    """Run one grader test on ``fn`` in this process; every outcome becomes a ``TestResult``.

    A ``GradingFailure`` carries the feedback. Any other exception escaping the
    test (``SystemExit`` included, so a student's ``exit()`` cannot end grading)
    is reported too: it means the check itself tripped over the answer.
    """
    start = time.perf_counter()
    try:
        test(fn)
        passed, feedback = True, test.description
    except GradingFailure as failure:
        passed, feedback = False, str(failure)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - any crash is feedback, never a grader crash
        passed, feedback = False, f"the check could not run on your answer: {type(error).__name__}: {error}"
    return TestResult(
        name=test.name,
        points=test.points if passed else 0,
        max_points=test.points,
        passed=passed,
        feedback=shorten(feedback),
        seconds=time.perf_counter() - start,
    )
