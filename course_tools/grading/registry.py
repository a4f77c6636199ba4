"""The exercise registry: exercise id → the module holding its grader tests.

Every module ``course_tools/grading/exercises/exNN_<name>.py`` is an exercise whose
id is the module name. It defines ``FUNCTION_NAME`` (what the student writes),
``TITLE``, its tests with ``@grader_test``, collected in definition order, and
optionally ``FORBIDDEN``: dotted names of the model answer (the course's own
implementation of what the student writes), which raise while graded.
"""

import importlib
import pkgutil
import re
from dataclasses import dataclass
from functools import cache

from course_tools.grading import exercises
from course_tools.grading.core import GraderTest

EXERCISE_ID = re.compile(r"ex\d\d_\w+")


@dataclass(frozen=True)
class Exercise:
    """One registered exercise and its grader tests."""

    id: str
    title: str
    function_name: str
    tests: tuple[GraderTest, ...]
    forbidden: tuple[str, ...] = ()  # dotted names of the model answer, refused while graded

    @property
    def max_score(self) -> int:
        """Points available over all tests."""
        return sum(test.points for test in self.tests)


def exercise_ids() -> list[str]:
    """The registered exercise ids, sorted (e.g. ``["ex01_softmax_attention", ...]``)."""
    names = (info.name for info in pkgutil.iter_modules(exercises.__path__))
    return sorted(name for name in names if EXERCISE_ID.fullmatch(name))


@cache
def load_exercise(exercise_id: str) -> Exercise:
    """The exercise called ``exercise_id``; ValueError naming the known ids if there is none."""
    known = exercise_ids()
    if exercise_id not in known:
        raise ValueError(f"unknown exercise id {exercise_id!r}; known exercises: {', '.join(known)}")
    module = importlib.import_module(f"{exercises.__name__}.{exercise_id}")
    tests = tuple(obj for obj in vars(module).values() if isinstance(obj, GraderTest) and obj.module == module.__name__)
    if not tests:
        raise ValueError(f"exercise {exercise_id} defines no @grader_test")
    return Exercise(exercise_id, module.TITLE, module.FUNCTION_NAME, tests, tuple(getattr(module, "FORBIDDEN", ())))
