"""ex08_interview_quiz: quiz_answers() -> {question id: letters}, each question graded against the key."""

import json
from collections.abc import Callable
from pathlib import Path

from .common import make_mutants

QUIZ_KEY = {
    qid: entry["answer"]
    for qid, entry in json.loads((Path(__file__).parents[2] / "solutions" / "quiz_key.json").read_text()).items()
}  # the instructor's plaintext key (solutions/ only)


def _quiz_mutant(question_id: str) -> Callable:
    """quiz_answers() right everywhere except ``question_id``, which gets the next letter after the key's first."""
    key = QUIZ_KEY[question_id]
    wrong = "ABCD"[("ABCD".index(key[0]) + 1) % 4]

    def quiz_answers():
        return {**QUIZ_KEY, question_id: wrong}

    quiz_answers.__name__ = f"ex08_wrong_{question_id.lower()}"
    return quiz_answers


def _quiz_mistake(question_id: str) -> str:
    """What ``_quiz_mutant(question_id)`` gets wrong, without giving the key away."""
    key, wrong = QUIZ_KEY[question_id], _quiz_mutant(question_id)()[question_id]
    if len(key) > 1 and wrong in key:
        return f"ticks only one of the {len(key)} correct options of interview question {question_id}"
    return f"picks a wrong option for interview question {question_id}"


MUTANTS = make_mutants(*((_quiz_mutant(qid), qid.lower(), _quiz_mistake(qid)) for qid in QUIZ_KEY))


def ex08_letters_as_sets():
    """The key in lower case, multiple-choice answers as sets of letters instead of sorted strings."""
    return {qid: set(key.lower()) if len(key) > 1 else key.lower() for qid, key in QUIZ_KEY.items()}


ALTERNATIVES = [ex08_letters_as_sets]
# No TRIVIAL: the quiz takes no inputs, so nothing can be of the right shape yet computed from nothing;
# its answers are letters, each graded against the key (tests/test_quiz.py).
