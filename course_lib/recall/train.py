"""Train one ``models.TinyLM`` on the course's simple MQAR and measure its recall (notebooks 09 and 13).

Every step draws a fresh batch (the task has no fixed training set to memorise); accuracy is
measured on ``test_examples`` held-out examples from another seed. AdamW with a linear warm-up
then cosine decay; gradients clipped at norm 1. Same steps, batch and seed for every mixer.
"""

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from course_lib.models import TinyLM
from course_lib.recall import IGNORE, mqar, recall_accuracy


@dataclass(frozen=True)
class RecallRun:
    """One training run: the task, the model and the optimisation (all stored with its result)."""

    mixer: str
    num_pairs: int
    head_dim: int = 16
    seq_len: int = 64
    vocab_size: int = 128
    n_heads: int = 2
    n_layers: int = 2
    steps: int = 600
    batch_size: int = 64
    lr: float = 3e-3
    seed: int = 0
    test_examples: int = 512
    feature_map: str | None = None  # mixer "linear" only: TinyLM's feature_map and normaliser
    normaliser: bool = True

    @property
    def d_model(self) -> int:
        return self.head_dim * self.n_heads


def warmup_cosine(step: int, steps: int, lr: float) -> float:
    """The learning rate at ``step`` of ``steps``: linear warm-up over the first tenth, then cosine decay to 0."""
    warmup = max(1, steps // 10)
    if step < warmup:
        return lr * (step + 1) / warmup
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def fit(model: torch.nn.Module, next_batch: Callable[[], tuple[torch.Tensor, torch.Tensor]], *, steps: int,
        lr: float, progress: Callable[[float], object] | None = None,
        watch: Callable[[int, float, float], bool] | None = None, scored_only: bool = False) -> float:
    """Train ``model`` in place for ``steps`` steps; the last step's loss.

    ``next_batch()`` gives (inputs [B, T] long, targets [B, T] long) on the model's device; the loss
    is the cross-entropy of the logits at every target ≠ −100. AdamW (weight decay 0.1),
    ``warmup_cosine`` learning rate, gradient norm clipped at 1. ``progress``: an optional callable
    taking each step's loss (a ``tqdm`` bar's update, for one). ``watch(step, loss, grad_norm)``, if
    given, sees each step's loss and gradient norm before clipping, after the backward pass and
    before the update; returning True stops training there (``stability`` stops at a NaN). Shared by
    MQAR, the recall study (``course_tools.recall``), the byte-level LM and ``stability``. ``scored_only``: the model's output layer runs only at
    the scored positions (``TinyLM(..., at=)``), the same loss for a task that scores few (MQAR).
    """
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        inputs, targets = next_batch()
        for group in optimiser.param_groups:
            group["lr"] = warmup_cosine(step, steps, lr)
        if scored_only:  # the same loss, the output layer only where a target is scored
            scored = targets != IGNORE
            loss = F.cross_entropy(model(inputs, at=scored), targets[scored])  # logits [N, V]
        else:
            loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        if watch is not None and watch(step, loss.item(), grad_norm):
            break
        optimiser.step()
        if progress is not None:
            progress(loss.item())
    return loss.item()


def train_recall(run: RecallRun, device: torch.device | str = "cpu", progress=None) -> dict:
    """Train ``run`` on ``device``: {**the run, "accuracy", "final_loss", "parameters", "seconds"}.

    ``progress``: as in ``fit``.
    """
    device = torch.device(device)
    model = TinyLM(run.vocab_size, d_model=run.d_model, n_layers=run.n_layers, n_heads=run.n_heads,
                   mixer=run.mixer, max_len=run.seq_len, seed=run.seed, feature_map=run.feature_map,
                   normaliser=run.normaliser).to(device)
    task = dict(num_pairs=run.num_pairs, seq_len=run.seq_len, vocab_size=run.vocab_size)
    train_generator = torch.Generator().manual_seed(run.seed)

    def next_batch():
        return tuple(x.to(device) for x in mqar(run.batch_size, generator=train_generator, **task))

    started = time.perf_counter()
    final_loss = fit(model, next_batch, steps=run.steps, lr=run.lr, progress=progress)
    seconds = time.perf_counter() - started
    test_tokens, test_targets = mqar(run.test_examples, generator=torch.Generator().manual_seed(10_000 + run.seed),
                                     **task)
    with torch.no_grad():
        accuracy = recall_accuracy(model(test_tokens.to(device)).cpu(), test_targets)
    return {**asdict(run), "accuracy": accuracy, "final_loss": final_loss, "parameters": model.parameter_count(),
            "seconds": seconds}
