"""ex08_interview_quiz: quiz_answers() -> {"student": id, "Q1": number, ...}, graded for that id's numbers.

Each mutant answers one bank question with a plausible slip, for a student whose ten include it; two
more hand in notebook 10's letters, and a classmate's right answers under one's own id.
"""

import importlib.util
import math
from pathlib import Path

from course_tools.grading.quiz_bank import BANK, questions_for

from .common import make_mutants

_spec = importlib.util.spec_from_file_location("quiz_bank_key", Path(__file__).parents[2] / "solutions" / "quiz_bank_key.py")
_key = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_key)
KEY = _key.ANSWERS  # the instructor's formulas (solutions/ only)
STUDENTS = ("practice", "alice", "bob", "chen", "dana")  # the first whose ten hold a template answers its mutant

SLIPS = {  # template -> (wrong formula, what it gets wrong)
    "score_multiplications": (lambda n, d: n * d * d, "counts N·d² multiplications for QKᵀ instead of N²·d"),
    "weights_mib": (lambda b, h, n: b * h * n * n * 4 / 1e6, "divides by 10⁶ bytes, not 2²⁰, for a MiB"),
    "crossover": (lambda d: d, "gives N = d, where the two costs are equal, not the first N below"),
    "ledger_numbers": (lambda m, dv, h: h * m * dv, "counts the state S but not the normaliser z"),
    "kv_cache_numbers": (lambda h, d, t: h * d * t, "caches the keys but forgets the values"),
    "chunk_scores": (lambda n, c, m: (n // c) * c * (c + 1) // 2 * m, "counts only the causal half of each C×C block"),
    "positive_mse": (lambda m, s: math.exp(s) / m, "drops the (1 − e^(−‖x+y‖²)) factor of Lemma 2"),
    "rope_angle": (lambda d, p, r, i: (p + r) * 10000 ** (-2 * i / d), "adds the two positions' angles"),
    "decay_half_life": (lambda g: math.floor(math.log(0.5) / math.log(g)), "gives the last t whose weight is still ≥ 1/2"),
    "decay_memory": (lambda g: g / (1 - g), "starts the geometric series at γ¹, leaving out the current token"),
    "delta_readback": (lambda t, b: t * b, "adds β per write, as an additive ledger would, with no erasing"),
    "recall_capacity": (lambda f: f * f, "counts the f·f numbers of a square state instead of its rank"),
}


def right_answers(student: str) -> dict:
    """The key's answers to ``student``'s ten questions."""
    return {"student": student, **{q.number: KEY[q.template.id](**q.values) for q in questions_for(student)}}


def _slip_mutant(template_id: str) -> tuple:
    """(fn, target, mistake): right everywhere but ``template_id``'s question, for a student who has it."""
    student = next(s for s in STUDENTS if any(q.template.id == template_id for q in questions_for(s)))
    question = next(q for q in questions_for(student) if q.template.id == template_id)
    formula, mistake = SLIPS[template_id]

    def quiz_answers():
        return {**right_answers(student), question.number: formula(**question.values)}

    quiz_answers.__name__ = f"ex08_slip_{template_id}"
    return quiz_answers, question.number.lower(), mistake


def ex08_lesson_letters():
    """Notebook 10's self-check letters, handed in for the graded quiz."""
    letters = ("B", "ABD", "D", "C", "C", "ABD", "A", "C", "ABD", "B")
    return {"student": "practice", **{f"Q{i}": answer for i, answer in enumerate(letters, start=1)}}


def ex08_classmates_answers():
    """Alice's right answers handed in under Bob's id."""
    return {**right_answers("alice"), "student": "bob"}


def _differing(mine: str, theirs: str) -> str:
    """The tests ``theirs``'s right answers fail under ``mine``'s id (a different question or other numbers)."""
    own, copied = questions_for(mine), right_answers(theirs)
    return " ".join(q.number.lower() for q in own
                    if not math.isclose(copied.get(q.number, math.nan), KEY[q.template.id](**q.values), rel_tol=1e-3))


MUTANTS = make_mutants(
    *(_slip_mutant(template.id) for template in BANK),
    (ex08_lesson_letters, " ".join(f"q{i}" for i in range(1, 11)), "hands in notebook 10's letters: every answer is a number"),
    (ex08_classmates_answers, _differing("bob", "alice"), "hands in a classmate's answers, right for the classmate's numbers"),
)


def ex08_strings_and_ints():
    """The right answers as strings ("1.234e5") and rounded to five significant figures."""
    answers = right_answers("practice")
    return {k: (v if k == "student" else f"{float(v):.5g}" if isinstance(v, float) else int(v)) for k, v in answers.items()}


ALTERNATIVES = [ex08_strings_and_ints]
# No TRIVIAL: the quiz takes no inputs; its stub and empty or malformed answers are tests/test_quiz_bank.py's.
