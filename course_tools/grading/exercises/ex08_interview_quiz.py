"""Grader tests of exercise 8: ``quiz_answers()``, ten questions with the student's own numbers.

The questions come from the bank (``grading.quiz_bank``): which ten, and the numbers in each,
follow from the student's id. ``quiz_answers()`` returns ``{"student": id, "Q1": number, ...}``.
In a batch the id is the submitter's, read from the file or folder name (``core.SUBMITTER``), and
answers made out for anyone else score nothing; in ``check()`` it is the notebook's own. Each
question is worth 1 point against the key's formula for those numbers (``solutions/
quiz_bank_key.py``, loaded here in the grader's process; no copy a student receives has it):
counts exactly, the rest to a relative 1e-3. Feedback never shows the key's answer.
"""

import importlib.util
import math
from collections.abc import Callable, Mapping
from pathlib import Path

from course_tools.grading.checks import attempt
from course_tools.grading.core import SUBMITTER, GraderTest, GradingFailure, grader_test
from course_tools.grading.quiz_bank import QUESTIONS_PER_STUDENT, Variant, normalise, questions_for

FUNCTION_NAME = "quiz_answers"
TITLE = "The graded quiz: ten questions with your own numbers"
KEY_PATH = Path(__file__).resolve().parents[3] / "solutions" / "quiz_bank_key.py"
RELATIVE_TOLERANCE = 1e-3
NO_KEY = f"the quiz key ({KEY_PATH.name}) is not in this copy: your instructor grades the quiz"


def load_key(path: Path | None = None) -> dict[str, Callable] | None:
    """The key's formulas by template id (from ``path``, default ``KEY_PATH``), or None where there is no file."""
    path = KEY_PATH if path is None else path
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("quiz_bank_key", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ANSWERS


def student_questions(answers: object) -> tuple[Variant, ...]:
    """The questions of the student these answers are graded for; GradingFailure naming what is wrong."""
    if not isinstance(answers, Mapping):
        raise GradingFailure(f'quiz_answers() must return a dict like {{"student": STUDENT_ID, "Q1": 12.5, ...}}, '
                             f"got {type(answers).__name__}")
    try:
        claimed = normalise(answers.get("student"))
    except ValueError:
        raise GradingFailure('quiz_answers() must say whose answers they are: {"student": STUDENT_ID, ...}') from None
    owner = SUBMITTER.get()
    if owner is not None and normalise(owner) != claimed:
        raise GradingFailure(f"these answers are for student {claimed!r}, but this is {owner!r}'s submission: set "
                             "STUDENT_ID to your own id, print your questions again and answer those")
    return questions_for(claimed)


def as_number(question: Variant, answer: object) -> float:
    """The answer as a float; GradingFailure for anything that is not a finite number."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float, str)):
        raise GradingFailure(f"{question.number}: the answer must be a number, got {type(answer).__name__}")
    try:
        value = float(answer)
    except ValueError:
        raise GradingFailure(f"{question.number}: the answer must be a number, got {answer!r}") from None
    if not math.isfinite(value):
        raise GradingFailure(f"{question.number}: the answer must be a finite number, got {answer!r}")
    return value


def _question_test(place: int) -> GraderTest:
    """The 1-point test of the student's question number ``place`` (1-based)."""

    def run(fn: Callable) -> None:
        key = load_key()
        if key is None:
            raise GradingFailure(NO_KEY)
        answers = attempt(fn, shown="")
        question = student_questions(answers)[place - 1]
        if question.number not in answers:
            raise GradingFailure(f"quiz_answers() has no answer for {question.number}")
        given, expected = as_number(question, answers[question.number]), key[question.template.id](**question.values)
        right = given == expected if question.template.exact else math.isclose(given, expected, rel_tol=RELATIVE_TOLERANCE)
        if not right:
            how = "an exact integer" if question.template.exact else f"within a relative {RELATIVE_TOLERANCE:g}"
            raise GradingFailure(f"{question.number} (notebook {question.template.lesson}): {answers[question.number]!r} "
                                 f"is not the answer for your numbers ({how})")

    run.__name__ = run.__qualname__ = f"q{place}"
    run.__doc__ = f"Q{place} answered right for your numbers"
    return grader_test(points=1)(run)


q1, q2, q3, q4, q5, q6, q7, q8, q9, q10 = (_question_test(place) for place in range(1, QUESTIONS_PER_STUDENT + 1))
