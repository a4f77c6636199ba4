"""The quiz key: one plaintext file, ``solutions/quiz_key.json``, read by the self-check and by the grader.

Nothing is hashed or encrypted. A key shipped beside its questions can be read however it is
wrapped (the salted hashes an earlier version used gave up all ten answers in 0.16 ms: a
four-option question has at most 15 answers to try). So the course says what holds:

* **self-study** (the repository): ``Quiz`` checks each answer against this file and explains
  it — an honest self-check, which a student can only fool themself out of;
* **a graded workshop**: the student copy leaves ``solutions/`` out, so the quiz only records
  answers; the instructor's grader, which runs outside every submission's sandbox, reads the key;
* **a plain pip install** (Colab): ``course_lib`` is not in a clone (``clone.CLONE`` is None), so
  there is no key either and the quiz records answers.

Format: ``{"Q1": {"answer": "B", "explanation": "..."}, ...}``, one entry per question.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from course_lib.quiz.clone import CLONE
from course_lib.quiz.questions import QUESTIONS

KEY_PATH = None if CLONE is None else CLONE / "solutions" / "quiz_key.json"  # None: not in a clone


@dataclass(frozen=True)
class KeyEntry:
    """A question's canonical answer and its explanation."""

    answer: str
    explanation: str


def load_key(path: Path | None = None) -> dict[str, KeyEntry] | None:
    """The key at ``path`` (default ``KEY_PATH``) by question id, or None when there is no such file.

    ValueError when the file does not answer exactly the questions, or an answer or
    explanation is malformed.
    """
    path = KEY_PATH if path is None else path
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    ids = [q.id for q in QUESTIONS]
    if not isinstance(data, dict) or sorted(data) != sorted(ids):
        raise ValueError(f"{path}: the key must answer exactly {', '.join(ids)}")
    key = {}
    for q in QUESTIONS:
        entry = data[q.id]
        explanation = entry.get("explanation", "") if isinstance(entry, dict) else ""
        if not isinstance(explanation, str) or not explanation.strip():
            raise ValueError(f"{path}: {q.id} has no explanation")
        key[q.id] = KeyEntry(q.canonical(entry["answer"]), explanation)
    return key
