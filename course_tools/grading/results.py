"""What a grading run returns: one record per test, and their sum."""

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TestResult:
    """The verdict of one grader test: points earned out of ``max_points``, and why."""

    __test__ = False  # a result record, not a pytest test class

    name: str
    points: int
    max_points: int
    passed: bool
    feedback: str
    seconds: float

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TestResult":
        """Rebuild a record from ``dataclasses.asdict`` output (the worker's JSON lines)."""
        return cls(
            name=str(data["name"]),
            points=int(data["points"]),
            max_points=int(data["max_points"]),
            passed=bool(data["passed"]),
            feedback=str(data["feedback"]),
            seconds=float(data["seconds"]),
        )


@dataclass
class GradeResult:
    """All tests of one exercise run on one function.

    ``message`` explains a problem with the run as a whole (time limit, crash,
    a function that could not be sent to the grading process); it is "" otherwise.
    ``ran`` is False when no test could run at all (``isolation.not_run``): then every test
    scores 0 with the reason, and a batch reports the notebook as "not graded".
    """

    exercise: str
    tests: list[TestResult]
    message: str = field(default="")
    ran: bool = True

    @property
    def score(self) -> int:
        """Points earned over all tests."""
        return sum(test.points for test in self.tests)

    @property
    def max_score(self) -> int:
        """Points available over all tests."""
        return sum(test.max_points for test in self.tests)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``from_dict`` inverts it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GradeResult":
        """Rebuild a result from ``to_dict`` output."""
        tests = [TestResult.from_dict(test) for test in data["tests"]]
        return cls(exercise=str(data["exercise"]), tests=tests, message=str(data.get("message", "")),
                   ran=bool(data.get("ran", True)))

    def __repr__(self) -> str:
        note = f", message={self.message!r}" if self.message else ""
        return f"GradeResult({self.exercise!r}, score={self.score}/{self.max_score}{note})"
