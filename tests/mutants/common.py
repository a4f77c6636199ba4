"""What several exercises' wrong answers share: the Mutant record, trivial answers, the cheats' moves."""

from collections.abc import Callable
from dataclasses import dataclass

import torch

TRIVIAL_KINDS = ("zeros", "copy", "random")


@dataclass(frozen=True)
class Mutant:
    fn: Callable
    targets: frozenset[str]
    mistake: str  # what the wrong answer does, in plain words: "forgets the 1/√d scaling of the scores"

    @property
    def name(self) -> str:
        return self.fn.__name__


def make_mutants(*triples: tuple[Callable, str, str]) -> list[Mutant]:
    """(fn, "target tests separated by spaces", mistake) -> Mutant, for each triple."""
    return [Mutant(fn, frozenset(targets.split()), mistake) for fn, targets, mistake in triples]


def trivial_answers(prefix: str, make: Callable[[str], Callable]) -> list[Callable]:
    """``make(kind)`` for each of TRIVIAL_KINDS, named ``<prefix>_trivial_<kind>`` (``ex01_trivial_zeros``)."""
    answers = []
    for kind in TRIVIAL_KINDS:
        answer = make(kind)
        answer.__name__ = answer.__qualname__ = f"{prefix}_trivial_{kind}"
        answers.append(answer)
    return answers


def rows_of(q, v):
    """[..., n, dv] taken from v's first n rows: an answer of the right shape computed from nothing."""
    return v[..., : q.shape[-2], :].clone()


def attention_trivial(kind):
    """(q, k, v, *rest) -> zeros, a copy of v's rows, or standard-normal numbers [..., n, dv] in q's dtype."""

    def answer(q, k, v, *rest, **options):
        shape = (*q.shape[:-1], v.shape[-1])
        if kind == "zeros":
            return torch.zeros(shape, dtype=q.dtype)
        if kind == "copy":
            return rows_of(q, v)
        return torch.randn(shape, dtype=q.dtype)

    return answer


def zero_v_and_answer_zeros(q, k, v):
    """A cheat: a grader that computed the answer after the call would now expect zeros."""
    v.zero_()
    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)


def scribble_on(q, k, v):
    """What a scribbling answer does to its inputs once it has computed its output."""
    q.zero_()
    k.fill_(float("nan"))
    v.mul_(-1)
