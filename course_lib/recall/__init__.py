"""Multi-query associative recall (MQAR), the task that shows what a fixed-size ledger forgets (notebook 12).

Zoology (Arora et al., 2023, "Zoology: Measuring and Improving Recall in Efficient Language Models")
found that most of the quality gap between attention and its sub-quadratic replacements is recall:
finding the value that went with a key seen earlier. MQAR isolates it. Each example is

    k₁ v₁ k₂ v₂ … k_P v_P │ x k₃ x x k₁ x … k₂ x
    context: P pairs      │ queries: every key once, among filler tokens x

and the model, at each query key, must predict the value paired with it in the context; every other
position is ignored (target −100, ``torch.nn.functional.cross_entropy``'s ``ignore_index``).
Keys come from the lower half of the vocabulary (1 … V/2 − 1, distinct within an example), values
from the upper half. Softmax attention can look every pair up; a ledger of f × dv numbers must hold
all P pairs at once, which it can exactly only while P ≤ f for orthogonal keys (notebook 05, §capacity).

Two generators: ``zoology_mqar`` follows Zoology's own (distinct values, random filler, power-law
query gaps, T and P independent, each answer's distance recorded) and is what notebook 12's study
trains on; ``mqar`` is the course's simpler one (values drawn with replacement, filler token 0,
uniform query places), kept for the small demos of notebooks 09 and 13.
"""

from typing import NamedTuple

import torch

from course_lib.validation import check_ints, check_number

IGNORE = -100  # the target of a position that is not scored


def mqar(
    batch_size: int, *, num_pairs: int, seq_len: int, vocab_size: int, generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [B, T] long, targets [B, T] long) of ``batch_size`` examples of the course's simple MQAR: values
    from V/2 … V − 1 drawn with replacement, filler token 0, queries at uniform places (``zoology_mqar``: Zoology's).

    The first 2·num_pairs tokens are the pairs, the rest the query region, which needs room for
    every key once: seq_len ≥ 3·num_pairs. Deterministic given a CPU ``generator`` (the examples
    are drawn on the CPU; move them with ``.to(device)``).
    """
    check_ints(batch_size=batch_size, num_pairs=num_pairs, seq_len=seq_len, vocab_size=vocab_size)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if seq_len < 3 * num_pairs:
        raise ValueError(f"num_pairs={num_pairs} needs seq_len >= 3 * num_pairs = {3 * num_pairs} "
                         f"(the pairs, then every key once as a query), got seq_len={seq_len}")
    num_keys = vocab_size // 2 - 1  # tokens 1 … V/2 − 1
    if num_pairs > num_keys:
        raise ValueError(f"num_pairs={num_pairs} distinct keys need vocab_size >= {2 * (num_pairs + 1)} "
                         f"(keys are 1 … vocab_size/2 − 1), got vocab_size={vocab_size}")
    B, P, query_region = batch_size, num_pairs, seq_len - 2 * num_pairs
    keys = torch.rand(B, num_keys, generator=generator).argsort(-1)[:, :P] + 1  # [B, P] distinct
    values = torch.randint(vocab_size // 2, vocab_size, (B, P), generator=generator)  # [B, P]
    slots = torch.rand(B, query_region, generator=generator).argsort(-1)[:, :P] + 2 * P  # [B, P] query positions
    order = torch.rand(B, P, generator=generator).argsort(-1)  # [B, P]: which pair each slot asks for
    tokens = torch.zeros(B, seq_len, dtype=torch.long)
    tokens[:, 0 : 2 * P : 2], tokens[:, 1 : 2 * P : 2] = keys, values
    tokens.scatter_(1, slots, keys.gather(1, order))
    targets = torch.full((B, seq_len), IGNORE, dtype=torch.long).scatter_(1, slots, values.gather(1, order))
    return tokens, targets


class MQARBatch(NamedTuple):
    """Zoology's MQAR examples: tokens [B, T], targets [B, T] (−100 where unscored) and, at each scored
    position, the distance from the query back to its key in tokens (0 where unscored) [B, T]."""

    tokens: torch.Tensor
    targets: torch.Tensor
    distances: torch.Tensor


ZOOLOGY_VOCAB = 8192  # Zoology's default vocabulary (a GPU run's); a CPU run affords 128


def gap_law(space: int, power_a: float = 0.01) -> torch.Tensor:
    """Zoology's law for where a query sits [space] float64: gap g = 0 … space − 1 (in pairs of tokens after
    the context) has probability ∝ (g + 1)^(a − 1), a = ``power_a``: near 1/(g + 1) for a = 0.01, so most
    queries come soon after the context and a few far away; a = 1 is uniform."""
    check_ints(space=space)
    check_number("power_a", power_a, above=0)
    law = torch.arange(1, space + 1, dtype=torch.float64) ** (power_a - 1)
    return law / law.sum()


def zoology_mqar(batch_size: int, *, num_pairs: int, seq_len: int, vocab_size: int = 128, power_a: float = 0.01,
                 generator: torch.Generator | None = None) -> MQARBatch:
    """MQAR as Zoology's ``multiquery_ar`` defines it (Arora et al. 2023, its data/associative_recall.py).

    Each example: P pairs k₁ v₁ … k_P v_P (keys distinct, from 1 … V/2 − 1; values distinct, from V/2 …
    V − 1), then a query region of T − 2P tokens where key i is asked at offset 2·gᵢ, the gaps gᵢ distinct
    and drawn from ``gap_law``; every other query-region token is filler drawn uniformly from the whole
    vocabulary and is not scored. T and P are set independently (T even, T ≥ 4P, as Zoology asserts).
    Deterministic given a CPU ``generator``.
    """
    check_ints(batch_size=batch_size, num_pairs=num_pairs, seq_len=seq_len, vocab_size=vocab_size)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if seq_len % 2 or seq_len < 4 * num_pairs:
        raise ValueError(f"seq_len must be even and >= 4 * num_pairs = {4 * num_pairs} (Zoology's layout), "
                         f"got seq_len={seq_len}")
    if num_pairs > vocab_size // 2 - 1:
        raise ValueError(f"num_pairs={num_pairs} distinct keys need vocab_size >= {2 * (num_pairs + 1)}, "
                         f"got vocab_size={vocab_size}")
    B, P, half = batch_size, num_pairs, vocab_size // 2
    keys = torch.rand(B, half - 1, generator=generator).argsort(-1)[:, :P] + 1  # [B, P] distinct
    values = torch.rand(B, vocab_size - half, generator=generator).argsort(-1)[:, :P] + half  # [B, P] distinct
    law = gap_law((seq_len - 2 * P) // 2, power_a)
    gaps = torch.multinomial(law.expand(B, -1), P, replacement=False, generator=generator)  # [B, P] distinct
    asked_at = 2 * P + 2 * gaps  # [B, P]: where key i is asked
    tokens = torch.randint(0, vocab_size, (B, seq_len), generator=generator)  # filler everywhere, then:
    tokens[:, 0 : 2 * P : 2], tokens[:, 1 : 2 * P : 2] = keys, values
    tokens.scatter_(1, asked_at, keys)
    targets = torch.full((B, seq_len), IGNORE, dtype=torch.long).scatter_(1, asked_at, values)
    distances = torch.zeros(B, seq_len, dtype=torch.long).scatter_(1, asked_at, asked_at - 2 * torch.arange(P))
    return MQARBatch(tokens, targets, distances)


def recall_by_distance(hits: torch.Tensor, distances: torch.Tensor, edges: tuple[int, ...]) -> list[dict]:
    """Recall per distance bucket [edges[i], edges[i+1]): one {"from", "to", "recall", "count"} per bucket with
    answers in it. ``hits`` [N] bool (answer right) and ``distances`` [N] long, one per scored position."""
    if hits.shape != distances.shape or hits.dim() != 1:
        raise ValueError(f"hits and distances must be [N] alike, got {tuple(hits.shape)} and {tuple(distances.shape)}")
    buckets = []
    for low, high in zip(edges, edges[1:]):
        inside = (distances >= low) & (distances < high)
        if bool(inside.any()):
            buckets.append({"from": low, "to": high, "recall": float(hits[inside].float().mean()),
                            "count": int(inside.sum())})
    return buckets


def recall_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of scored positions (target ≠ −100) where the arg-max of ``logits`` [B, T, V] is the target."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits [B, T, V] and targets [B, T] must agree, got {tuple(logits.shape)} "
                         f"and {tuple(targets.shape)}")
    scored = targets != IGNORE
    if not bool(scored.any()):
        raise ValueError("targets score no position (every entry is -100)")
    return float((logits.argmax(-1) == targets)[scored].float().mean())
