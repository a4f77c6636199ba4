"""Grader tests of exercise 8: ``quiz_answers()``, the answers to the ten interview questions.

One test per question, 1 point each: the student's answer, in any order or
form (``"DBA"``, ``"a, b, d"``, ``{"A", "B", "D"}``), is compared with the key in
the grader's process (``course_lib.quiz.key``: ``solutions/quiz_key.json``, which no
submission can read), so every wrong letter, missing letter or extra letter loses
that question's point. Feedback never shows the key.
"""

from collections.abc import Callable, Mapping

from course_lib.quiz import QUESTIONS, Question
from course_lib.quiz.key import KEY_PATH, load_key
from course_tools.grading.checks import attempt
from course_tools.grading.core import GraderTest, GradingFailure, grader_test

FUNCTION_NAME = "quiz_answers"
TITLE = "The interview quiz: ten questions"


def _answer_of(fn: Callable, q: Question) -> str:
    """The canonical answer ``fn()`` gives to ``q``; GradingFailure if it gives none or a malformed one."""
    answers = attempt(fn, shown="")
    if not isinstance(answers, Mapping):
        raise GradingFailure(f'quiz_answers() must return a dict like {{"Q1": "A", ...}}, got {type(answers).__name__}')
    if q.id not in answers:
        raise GradingFailure(f"quiz_answers() has no answer for {q.id}")
    try:
        return q.canonical(answers[q.id])
    except ValueError as error:
        raise GradingFailure(str(error)) from None


def _question_test(q: Question) -> GraderTest:
    """The 1-point grader test of question ``q``, named after it (``q3``)."""

    def run(fn: Callable) -> None:
        key = load_key()
        if key is None:
            where = KEY_PATH or "solutions/quiz_key.json"
            raise GradingFailure(f"the quiz key ({where}) is not in this copy: your instructor grades the quiz")
        answer = _answer_of(fn, q)
        if answer != key[q.id].answer:
            how = "every letter must be right: no missing, no extra" if q.multiple else "one letter"
            raise GradingFailure(f"{q.id} ({q.kind}, {how}): {answer} is not the key")

    run.__name__ = run.__qualname__ = q.id.lower()
    run.__doc__ = f"{q.id} ({q.kind}) answered correctly"
    return grader_test(points=1)(run)


q1, q2, q3, q4, q5, q6, q7, q8, q9, q10 = (_question_test(q) for q in QUESTIONS)
