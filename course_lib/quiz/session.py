"""A quiz session: records each question's FIRST answer and explains after it.

The first answer per question is the one that counts: later answers still get
feedback, but only the first is kept for ``answers_code()``, the
``quiz_answers()`` function the student submits for grading.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from course_lib.quiz.questions import QUESTIONS, Question


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer; ``recorded`` is False when an earlier answer already counts."""

    question_id: str
    answer: str
    correct: bool
    recorded: bool
    first_answer: str
    key: str
    explanation: str

    def text(self) -> str:
        """Verdict, which answer counts, and the explanation, as plain text."""
        verdict = "correct" if self.correct else f"not correct (the key is {self.key})"
        lines = [f"{self.question_id}: {self.answer} is {verdict}."]
        if not self.recorded:
            lines.append(f"Your first answer, {self.first_answer}, is the one recorded for grading.")
        return "\n".join([*lines, self.explanation])

    def __str__(self) -> str:
        return self.text()


class Quiz:
    """The questions and the first answer given to each (``first_answers``: id -> canonical letters)."""

    def __init__(self, questions: Iterable[Question] = QUESTIONS) -> None:
        self.questions = {q.id: q for q in questions}
        if not self.questions:
            raise ValueError("questions must hold at least one Question, got none")
        self.first_answers: dict[str, str] = {}

    def answer(self, question_id: str, answer: str | Iterable[str]) -> Feedback:
        """Grade ``answer`` to ``question_id``, record it if it is the first, and explain.

        ``answer`` is one letter (single choice) or letters in any order and form
        (``"DB"``, ``"b, d"``, ``{"B", "D"}``). ValueError for an unknown id or a
        malformed answer; a malformed answer is not recorded.
        """
        if question_id not in self.questions:
            raise ValueError(f"question_id must be one of {', '.join(self.questions)}, got {question_id!r}")
        q = self.questions[question_id]
        given = q.canonical(answer)
        recorded = question_id not in self.first_answers
        first = self.first_answers.setdefault(question_id, given)
        key, explanation = q.reveal()
        return Feedback(question_id, given, q.is_correct(given), recorded, first, key, explanation)

    def answers_code(self) -> str:
        """The recorded first answers as the ``quiz_answers()`` function to paste into the exercise notebook."""
        answered = [qid for qid in self.questions if qid in self.first_answers]
        missing = [qid for qid in self.questions if qid not in self.first_answers]
        entries = ", ".join(f"{qid!r}: {self.first_answers[qid]!r}" for qid in answered)
        lines = ["def quiz_answers():"]
        if missing:
            lines.append(f"    # not answered yet: {', '.join(missing)}")
        lines.append(f"    return {{{entries}}}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Quiz({len(self.questions)} questions, {len(self.first_answers)} answered)"
