"""A quiz session: checks each answer against the key (when this copy has it) and records the latest.

The session is notebook 10's self-check, so a later answer replaces an earlier one; the graded
quiz is exercise ex08's, with its own questions (``course_tools.grading.quiz_bank``). Where the key
file is absent (a workshop's student copy, a plain pip install; see ``key``) the session records
answers and says where their explanations are.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from course_lib.quiz.key import load_key
from course_lib.quiz.links import to_markdown
from course_lib.quiz.questions import QUESTIONS, Question

NO_KEY = ("This copy has no quiz key (solutions/quiz_key.json): your answer is recorded, not checked; "
          "your instructor has the key and its explanations.")


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer; ``correct`` and ``key`` are None when this copy has no key."""

    question_id: str
    answer: str
    correct: bool | None
    key: str | None
    explanation: str

    def text(self) -> str:
        """Verdict and explanation (or that there is no key), as plain text."""
        if self.correct is None:
            return f"{self.question_id}: {self.answer} recorded.\n{self.explanation}"
        verdict = "correct" if self.correct else f"not correct (the key is {self.key})"
        return f"{self.question_id}: {self.answer} is {verdict}.\n{self.explanation}"

    def markdown(self) -> str:
        """Verdict and explanation as markdown, the explanation's notebook pointers as links."""
        verdict, explanation = self.text().split("\n", 1)
        return f"**{verdict}**\n\n{to_markdown(explanation)}"

    def _repr_markdown_(self) -> str:
        """A notebook shows the markdown (links); ``print`` shows ``text()``."""
        return self.markdown()

    def __str__(self) -> str:
        return self.text()


class Quiz:
    """The questions, the key (None without the file) and the latest answer to each (``answers``)."""

    def __init__(self, questions: Iterable[Question] = QUESTIONS, *, key_path: Path | None = None) -> None:
        self.questions = {q.id: q for q in questions}
        if not self.questions:
            raise ValueError("questions must hold at least one Question, got none")
        self.key = load_key(key_path)
        self.answers: dict[str, str] = {}

    def answer(self, question_id: str, answer: str | Iterable[str]) -> Feedback:
        """Record ``answer`` to ``question_id`` and check it against the key.

        ``answer`` is one letter (single choice) or letters in any order and form
        (``"DB"``, ``"b, d"``, ``{"B", "D"}``). ValueError for an unknown id or a
        malformed answer; a malformed answer is not recorded.
        """
        if question_id not in self.questions:
            raise ValueError(f"question_id must be one of {', '.join(self.questions)}, got {question_id!r}")
        given = self.questions[question_id].canonical(answer)
        self.answers[question_id] = given
        if self.key is None:
            return Feedback(question_id, given, None, None, NO_KEY)
        entry = self.key[question_id]
        return Feedback(question_id, given, given == entry.answer, entry.answer, entry.explanation)

    def __repr__(self) -> str:
        return f"Quiz({len(self.questions)} questions, {len(self.answers)} answered)"
