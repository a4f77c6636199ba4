"""The text verdict: a byte-level language model of Python's standard library, one per mixer (notebook 12 §6).

The article says linear attention "costs 0.5–2 points of accuracy". MQAR shows where a ledger fails;
next-byte prediction shows what that costs on text — and only that: bits per byte on source code is
not the downstream accuracy the article means, and a model this small is far from where that claim
was made. The corpus is every ``.py`` file of the running interpreter's standard library
(``sysconfig``'s "stdlib", without ``site-packages``, tests and ``idlelib``): every machine has it,
nothing is downloaded. Files, not bytes, are split: the CRC-32 of a file's relative path is 0 mod 10
for test, 1 for validation, anything else for training, so the split never changes and no held-out
window overlaps a training file.

The protocol is MQAR's (``study.rate_then_seeds``): each mixer's rates at seed 0, the lowest
validation bits/byte kept, then the other seeds there, each scored on the test split. An epoch is
every training window of ``seq_len`` bytes once, in an order drawn from the seed; the training loss
is kept per eighth of training (the curve that shows how fast each mixer learns).
"""

import math
import sysconfig
import zlib
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

from course_lib.models import TinyLM
from course_tools.recall.study import (VARIANTS, WIDER, NotTrained, Runner, Variant, fit_until_diverged, rate_then_seeds,
                                      timing)

SKIPPED_DIRS = {"site-packages", "test", "tests", "idlelib", "__pycache__"}
SPLITS = ("train", "validation", "test")
TEXT_BYTES = 2_000_000  # the training split is cut to this many bytes (the held-out splits too): one epoch fits a CPU


def split_of(relative_path: str) -> str:
    """"test" when the CRC-32 of the path is 0 mod 10, "validation" when 1, else "train"."""
    remainder = zlib.crc32(relative_path.encode()) % 10
    return SPLITS[2] if remainder == 0 else SPLITS[1] if remainder == 1 else SPLITS[0]


def stdlib_files(root: Path) -> list[Path]:
    """The standard library's ``.py`` files under ``root``, sorted by relative path."""
    return sorted((p for p in root.rglob("*.py") if not SKIPPED_DIRS & set(p.relative_to(root).parts[:-1])),
                  key=lambda p: p.relative_to(root).as_posix())


def corpus(root: Path | None = None, *, max_bytes: int | None = TEXT_BYTES) -> dict[str, torch.Tensor]:
    """{"train", "validation", "test"}: each split's files joined by newlines, uint8 [bytes], at most ``max_bytes``."""
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    parts: dict[str, list[bytes]] = {split: [] for split in SPLITS}
    for path in stdlib_files(root):
        parts[split_of(path.relative_to(root).as_posix())].append(path.read_bytes() + b"\n")
    return {split: torch.frombuffer(bytearray(b"".join(chunks)[:max_bytes]), dtype=torch.uint8)
            for split, chunks in parts.items()}


_stdlib_corpus = lru_cache(maxsize=2)(lambda max_bytes: corpus(max_bytes=max_bytes))  # once per worker process


@dataclass(frozen=True)
class LanguageRun:
    """One byte-level model; every mixer gets the same but the variant and (after the sweep) the rate."""

    variant: Variant
    lr: float = 1e-3
    seed: int = 0
    d_model: int = 64
    n_heads: int = 2
    n_layers: int = 2
    seq_len: int = 512
    batch_size: int = 16
    epochs: int = 1
    eval_windows: int = 128
    max_bytes: int = TEXT_BYTES


def _score(model: TinyLM, data: torch.Tensor, run: LanguageRun, seed: int, device: torch.device) -> dict:
    """Bits per byte and next-byte accuracy over ``run.eval_windows`` fixed windows of ``data``."""
    starts = torch.randint(0, data.numel() - run.seq_len - 1, (run.eval_windows,), generator=torch.Generator().manual_seed(seed))
    windows = torch.stack([data[s : s + run.seq_len + 1] for s in starts.tolist()]).long()  # [W, T + 1]
    losses, hits = [], []
    with torch.no_grad():
        for block in windows.to(device).split(32):
            logits, following = model(block[:, :-1]).flatten(0, 1), block[:, 1:].flatten()
            losses.append(F.cross_entropy(logits, following, reduction="sum"))
            hits.append((logits.argmax(-1) == following).sum())
    count = windows[:, 1:].numel()
    return {"bits_per_byte": float(sum(losses)) / count / math.log(2), "accuracy": float(sum(hits)) / count}


def train_language(run: LanguageRun, device: torch.device | str = "cpu") -> dict:
    """Train ``run`` for its epochs; {"run", "validation_bits_per_byte", "test_bits_per_byte", "test_accuracy",
    "curve" (training bits/byte per eighth), "diverged_at", "steps", "parameters", "seconds", "step_seconds",
    "tokens_per_second", "cpu_seconds"}. A run that diverges is scored as the uniform model (8 bits a byte)."""
    device = torch.device(device)
    data = _stdlib_corpus(run.max_bytes)
    train = data["train"][: data["train"].numel() // run.seq_len * run.seq_len + 1]
    model = TinyLM(256, d_model=run.d_model, n_layers=run.n_layers, n_heads=run.n_heads, max_len=run.seq_len,
                   seed=run.seed, **run.variant.model_options(run.d_model // run.n_heads)).to(device)
    generator = torch.Generator().manual_seed(run.seed)
    starts = torch.cat([torch.randperm((train.numel() - 1) // run.seq_len, generator=generator) * run.seq_len
                        for _ in range(run.epochs)])  # every window once an epoch
    steps = starts.numel() // run.batch_size
    batches = iter(starts[: steps * run.batch_size].view(steps, run.batch_size))

    def next_batch():
        rows = torch.stack([train[s : s + run.seq_len + 1] for s in next(batches).tolist()]).long().to(device)
        return rows[:, :-1], rows[:, 1:]  # [B, T] each

    trained = fit_until_diverged(model, next_batch, steps=steps, lr=run.lr)
    eighths = [float(part.mean()) / math.log(2) for part in torch.tensor(trained["losses"]).chunk(8)] if trained["losses"] else []
    if trained["diverged_at"] is None:
        validation, test = (_score(model, data[split], run, seed, device) for split, seed in (("validation", 7), ("test", 8)))
    else:  # scored as the uniform model: 8 bits a byte, no byte right
        validation = test = {"bits_per_byte": 8.0, "accuracy": 0.0}
    return {"run": asdict(run), "validation_bits_per_byte": validation["bits_per_byte"],
            "test_bits_per_byte": test["bits_per_byte"], "test_accuracy": test["accuracy"], "curve": eighths,
            "diverged_at": trained["diverged_at"], "steps": steps, "parameters": model.parameter_count(),
            **timing(trained, run.batch_size * run.seq_len)}


@dataclass(frozen=True)
class TextSettings:
    """The text study: variants (softmax first), rates, seeds and the run they share."""

    variants: tuple[Variant, ...]
    rates: tuple[float, ...]
    seeds: tuple[int, ...]
    template: LanguageRun
    wider: tuple[tuple[float, ...], tuple[float, ...]] = WIDER


def run_text_study(settings: TextSettings, runner: Runner) -> dict:
    """{"settings", "corpus_bytes", "status", "cells"}: one ``rate_then_seeds`` cell per variant (lowest validation
    bits/byte); status "done", or "not yet trained" (no cells) when a ``Runner(train=False)`` lacks runs."""
    templates = [replace(settings.template, variant=v) for v in settings.variants]
    sizes = {split: int(x.numel()) for split, x in _stdlib_corpus(settings.template.max_bytes).items()}
    try:
        cells = rate_then_seeds(runner, templates, settings.rates, settings.seeds,
                                lambda result: -result["validation_bits_per_byte"], settings.wider)
    except NotTrained:  # a report from an unfinished cache
        return {"settings": asdict(settings), "corpus_bytes": sizes, "status": "not yet trained", "cells": []}
    for variant, cell in zip(settings.variants, cells):
        cell["label"] = variant.label
        cell["sweep"] = [{"lr": row["lr"], "validation_bits_per_byte": -row.pop("validation")} for row in cell["sweep"]]
    return {"settings": asdict(settings), "corpus_bytes": sizes, "status": "done", "cells": cells}


_TEXT_VARIANTS = tuple(v for v in VARIANTS if v.label in ("softmax", "elu+1", "delta", "gla", "gated delta", "based"))
FULL = TextSettings(_TEXT_VARIANTS, rates=(1e-3, 3e-3, 1e-2), seeds=(0, 1, 2), template=LanguageRun(VARIANTS[0]))
QUICK = TextSettings(_TEXT_VARIANTS[:2], rates=(1e-3, 3e-3, 1e-2), seeds=(0, 1, 2), wider=((), ()),
                     template=LanguageRun(VARIANTS[0], d_model=16, seq_len=32, batch_size=8, eval_windows=8,
                                          max_bytes=4096))
