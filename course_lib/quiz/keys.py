"""Answer keys that can be checked but not read: salted hashes and answer-keyed encryption.

A question's key is stored as ``sha256(SALT ‖ question id ‖ canonical answer)``
and its explanation (which gives the answer away) is XOR-ed with a keystream
derived from the correct answer, so reading ``course_lib`` shows neither.

What this protects against, honestly: *reading*. It does not stop *guessing*:
a question with 4 options has 4 single or 15 multiple answers, and
``find_key`` itself tries them all to reveal an explanation after a first answer.
That is why the quiz records a student's FIRST answer per question and the
grader scores what the student submits, not what the widget shows afterwards.
"""

import base64
import hashlib
from collections.abc import Iterable
from itertools import combinations

SALT = b"linear-attention-course/quiz/v1"
SEPARATORS = " ,;+/"


def canonical_answer(answer: str | Iterable[str], *, letters: str, multiple: bool) -> str:
    """The answer as sorted unique upper-case letters: ``"dba"``, ``"B, D, A"`` and ``{"A", "B", "D"}`` give ``"ABD"``.

    ``letters`` are the options (e.g. ``"ABCD"``); a single-choice question
    (``multiple=False``) takes exactly one. ValueError names what is wrong.
    """
    if isinstance(answer, str):
        chosen = [c for c in answer.upper() if c not in SEPARATORS]
    elif isinstance(answer, Iterable):
        chosen = [str(item).strip().upper() for item in answer]
    else:
        raise ValueError(f"answer must be a string of letters or a set of letters, got {type(answer).__name__}")
    unknown = sorted({c for c in chosen if len(c) != 1 or c not in letters})
    if unknown:
        raise ValueError(f"answer must use the options {', '.join(letters)}; got {', '.join(map(repr, unknown))}")
    picked = "".join(sorted(set(chosen)))
    if not picked:
        raise ValueError("answer is empty: pick at least one option")
    if not multiple and len(picked) > 1:
        raise ValueError(f"answer must be one letter (single choice), got {picked!r}")
    return picked


def answer_hash(question_id: str, answer: str) -> str:
    """Hex ``sha256(SALT ‖ 0 ‖ question_id ‖ 0 ‖ answer)``; ``answer`` must be canonical."""
    return hashlib.sha256(b"\0".join([SALT, question_id.encode(), answer.encode()])).hexdigest()


def _keystream(question_id: str, answer: str, length: int) -> bytes:
    """``length`` bytes of sha256(SALT ‖ "explanation" ‖ id ‖ answer ‖ counter) blocks.

    The "explanation" label keeps the stream apart from ``answer_hash``: were
    they equal, the public hash would decrypt the first 32 bytes.
    """
    blocks = (
        hashlib.sha256(b"\0".join([SALT, b"explanation", question_id.encode(), answer.encode(), str(i).encode()]))
        for i in range(-(-length // 32))
    )
    return b"".join(block.digest() for block in blocks)[:length]


def seal(question_id: str, answer: str, text: str) -> str:
    """``text`` XOR the answer's keystream, base64: readable only with the right ``answer``."""
    data = text.encode()
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, _keystream(question_id, answer, len(data))))).decode()


def unseal(question_id: str, answer: str, sealed: str) -> str:
    """Inverse of ``seal``; with any other ``answer`` the bytes are noise, usually not UTF-8 (ValueError)."""
    data = base64.b64decode(sealed)
    plain = bytes(a ^ b for a, b in zip(data, _keystream(question_id, answer, len(data))))
    try:
        return plain.decode()
    except UnicodeDecodeError:
        raise ValueError(f"sealed text of {question_id} does not open with answer {answer!r}") from None


def candidates(letters: str, *, multiple: bool) -> list[str]:
    """Every canonical answer: the letters (single choice), or every non-empty subset (2^k − 1 of them)."""
    sizes = range(1, len(letters) + 1) if multiple else [1]
    return ["".join(c) for size in sizes for c in combinations(sorted(letters), size)]


def find_key(question_id: str, key_hash: str, letters: str, *, multiple: bool) -> str:
    """The canonical answer whose hash is ``key_hash``, found by trying every candidate (see the module docstring)."""
    for answer in candidates(letters, multiple=multiple):
        if answer_hash(question_id, answer) == key_hash:
            return answer
    raise ValueError(f"no answer of {question_id} matches its stored hash: the sealed key is out of date")
