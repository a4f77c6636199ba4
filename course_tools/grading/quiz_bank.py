"""The graded quiz's bank (exercise ex08): questions whose numbers change with the student's id.

Notebook 10's ten interview questions are a self-check, and their explanations sit folded in the
lesson, so a graded quiz cannot be those. Each question here is a template: the numbers in it
(N, d, γ, β, …) are drawn from a SHA-256 hash of the student's id and the template's name, and
ten of the bank's templates are drawn the same way. Two students get different numbers, so the
answers a classmate hands over are wrong for anyone else, and the lessons hold the method but not
the result. The answers are numbers; their formulas are the instructor's key,
``solutions/quiz_bank_key.py``, which no copy a student receives contains (``grading.exercises
.ex08_interview_quiz`` reads it). Hashing by hand rather than ``random``: a SHA-256 digest is the
same on every Python and platform, so a student's questions never change under them.
"""

import hashlib
import textwrap
from dataclasses import dataclass

QUESTIONS_PER_STUDENT = 10


@dataclass(frozen=True)
class Template:
    """A question with named numbers: ``prompt`` formats with one value drawn from each ``choices``;
    ``exact``: the answer is a count, graded exactly (else to 4 significant figures)."""

    id: str
    lesson: str  # where the method is taught
    prompt: str
    choices: dict[str, tuple[int | float, ...]]
    exact: bool = True


@dataclass(frozen=True)
class Variant:
    """One student's copy of a template: ``number`` is its place ("Q1"), ``values`` its numbers."""

    number: str
    template: Template
    values: dict[str, int | float]

    def text(self) -> str:
        how = "an exact integer" if self.template.exact else "a number, at least 4 significant figures"
        prompt = self.template.prompt.format(**self.values)
        return textwrap.fill(f"{self.number} (answer: {how}; see notebook {self.template.lesson}). {prompt}", 100)


BANK: tuple[Template, ...] = (
    Template("score_multiplications", "01", "Softmax attention, one head, N = {n} tokens, head dimension "
             "d = {d}: how many scalar multiplications does the score matrix QKᵀ take?",
             {"n": tuple(range(500, 8001, 100)), "d": tuple(range(16, 257, 16))}),
    Template("weights_mib", "01", "Batch {b}, {h} heads, N = {n} tokens: how many MiB (2²⁰ bytes) do the "
             "float32 attention weights take, every head of the batch at once?",
             {"b": tuple(range(1, 9)), "h": (4, 6, 8, 12, 16, 24, 32), "n": tuple(range(1000, 16001, 500))}, exact=False),
    Template("crossover", "08", "Non-causal attention with d = d_v = {d}, counting multiplications: softmax "
             "costs N²d for QKᵀ and N²d for the weights times V; linear attention with φ of {d} features costs "
             "N·d·d for φ(K)ᵀV and N·d·d for φ(Q) times it. The smallest N at which linear attention costs "
             "strictly fewer?", {"d": tuple(range(16, 513, 8))}),
    Template("ledger_numbers", "05", "Causal linear attention with {h} heads, feature dimension m = {m}, value "
             "dimension d_v = {dv}: how many numbers does the ledger hold for one sequence (the state "
             "S = Σ φ(k)vᵀ and the normaliser z = Σ φ(k), every head)?",
             {"m": tuple(range(16, 257, 16)), "dv": tuple(range(16, 257, 16)), "h": (2, 4, 6, 8, 12, 16)}),
    Template("kv_cache_numbers", "05", "Softmax decoding, {h} heads of key and value dimension {d}: how many "
             "numbers does the KV cache hold after t = {t} tokens?",
             {"h": (2, 4, 6, 8, 12, 16), "d": (32, 48, 64, 80, 96, 128), "t": tuple(range(1000, 100001, 1000))}),
    Template("chunk_scores", "05", "Chunkwise causal linear attention, N = {n} tokens in chunks of C = {c}, "
             "feature dimension {m}: how many multiplications do the intra-chunk scores φ(Q_c)φ(K_c)ᵀ take "
             "over all chunks, each counted as a full C×C product (the mask applied after)?",
             {"n": tuple(range(1024, 32769, 1024)), "c": (16, 32, 64, 128), "m": tuple(range(16, 129, 16))}),
    Template("positive_mse", "06", "Positive random features with m = {m} iid tasters estimate exp(xᵀy); "
             "with ‖x + y‖² = {s}, what is the estimator's relative MSE, MSE / exp(xᵀy)² (Lemma 2)?",
             {"m": tuple(range(16, 1025, 16)), "s": (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)}, exact=False),
    Template("rope_angle", "07", "RoPE with head dimension d = {d} and base 10000 rotates pair i by "
             "position × 10000^(−2i/d). A query at position {p}, a key at position {r}: on pair i = {i}, the "
             "query's rotation angle minus the key's, in radians?",
             {"d": (32, 64, 96, 128), "p": tuple(range(10, 500, 7)), "r": tuple(range(10)), "i": (1, 2, 3, 4, 5)}, exact=False),
    Template("decay_half_life", "07", "Retention with decay γ = {g}: a token t steps back weighs γᵗ. The "
             "smallest whole number t at which that weight is below 1/2?",
             {"g": (0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.96, 0.97, 0.98, 0.99, 0.995, 0.999)}),
    Template("decay_memory", "07", "With decay γ = {g}, what do the weights 1 + γ + γ² + … of an endless "
             "past sum to (the ledger's memory, in tokens)?", {"g": (0.5, 0.6, 0.75, 0.8, 0.9, 0.92, 0.95, 0.96, 0.98, 0.99)},
             exact=False),
    Template("delta_readback", "12", "Delta rule with a unit key k, from the empty state: the same pair "
             "(k, v) is written {t} times with β = {b}. Reading at k then gives what fraction of v?",
             {"t": (1, 2, 3, 4, 5, 6), "b": (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9)}, exact=False),
    Template("recall_capacity", "12", "A linear ledger with keys of dimension f = {f} stores key–value "
             "pairs, the keys generic and the values arbitrary. At most how many pairs can any f × d_v "
             "state read back exactly?", {"f": tuple(range(8, 257, 4))}),
)


def _draw(student_id: str, *names: str) -> int:
    """A number from SHA-256 of the id and ``names``: the same on every machine, unrelated across names."""
    return int.from_bytes(hashlib.sha256("|".join((student_id, *names)).encode()).digest()[:8], "big")


def normalise(student_id: object) -> str:
    """The id as the grader compares it (stripped, lower case); ValueError naming ``student_id``."""
    if not isinstance(student_id, str) or not student_id.strip():
        raise ValueError(f"student_id must be a non-empty string (the id your instructor uses), got {student_id!r}")
    return student_id.strip().lower()


def questions_for(student_id: str) -> tuple[Variant, ...]:
    """The student's ten questions: templates drawn by the id's hash, in the bank's (lesson) order."""
    sid = normalise(student_id)
    drawn = {t.id for t in sorted(BANK, key=lambda t: _draw(sid, t.id))[:QUESTIONS_PER_STUDENT]}
    chosen = [t for t in BANK if t.id in drawn]
    return tuple(
        Variant(f"Q{place}", t, {name: values[_draw(sid, t.id, name) % len(values)] for name, values in t.choices.items()})
        for place, t in enumerate(chosen, start=1)
    )
