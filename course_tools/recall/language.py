"""A byte-level language model on Python's own standard library, one per mixer (notebook 12 §5).

The article says linear attention "costs 0.5–2 points of accuracy". A recall task shows where a ledger
fails; ordinary next-token prediction shows what that costs on text. The corpus is every ``.py``
file of the running interpreter's standard library (``sysconfig``'s "stdlib" path, without
``site-packages``, ``test`` and ``idlelib``), so every machine has it and nothing is downloaded.
Files are split, not bytes: a file goes to validation when the CRC-32 of its relative path is
0 mod 10, so the split is fixed across runs and no validation window overlaps a training file.
Every mixer gets the same model size, steps, batches, training loop (``train.fit``) and
validation windows; the score is the validation cross-entropy in bits per byte.
"""

import math
import sysconfig
import time
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from course_lib.models import TinyLM
from course_lib.recall.train import fit

SKIPPED_DIRS = {"site-packages", "test", "tests", "idlelib", "__pycache__"}


def stdlib_files(root: Path | None = None) -> list[Path]:
    """The standard library's ``.py`` files, sorted by relative path (``root`` defaults to sysconfig's stdlib)."""
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    return sorted((p for p in root.rglob("*.py") if not SKIPPED_DIRS & set(p.relative_to(root).parts[:-1])),
                  key=lambda p: p.relative_to(root).as_posix())


def is_validation(relative_path: str) -> bool:
    """A file is held out when the CRC-32 of its relative path is 0 mod 10 (about a tenth of the files)."""
    return zlib.crc32(relative_path.encode()) % 10 == 0


def corpus(root: Path | None = None, *, max_bytes: int | None = None) -> dict[str, torch.Tensor]:
    """{"train", "validation"}: the files' bytes joined by newlines, uint8 tensors [bytes].

    ``max_bytes`` caps each split (files taken in path order), for quick runs.
    """
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    parts: dict[str, list[bytes]] = {"train": [], "validation": []}
    for path in stdlib_files(root):
        split = "validation" if is_validation(path.relative_to(root).as_posix()) else "train"
        if max_bytes is None or sum(map(len, parts[split])) < max_bytes:
            parts[split].append(path.read_bytes() + b"\n")
    return {split: torch.frombuffer(bytearray(b"".join(chunks)[:max_bytes]), dtype=torch.uint8)
            for split, chunks in parts.items()}


def windows(data: torch.Tensor, count: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` random windows of ``length`` + 1 bytes, [count, length + 1] long (inputs and next bytes)."""
    starts = torch.randint(0, data.numel() - length - 1, (count,), generator=generator)
    return torch.stack([data[s : s + length + 1] for s in starts.tolist()]).long()


@dataclass(frozen=True)
class LanguageRun:
    """One byte-level model: the same for every mixer but the mixer."""

    mixer: str
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    seq_len: int = 128
    steps: int = 1000
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    validation_windows: int = 256


def train_language(run: LanguageRun, data: dict[str, torch.Tensor], device: torch.device | str = "cpu") -> dict:
    """{**the run, "validation_bits_per_byte", "validation_accuracy" (next byte = arg-max), "train_bits_per_byte"
    (last step), "parameters", "seconds"}."""
    device = torch.device(device)
    model = TinyLM(256, d_model=run.d_model, n_layers=run.n_layers, n_heads=run.n_heads, mixer=run.mixer,
                   max_len=run.seq_len, seed=run.seed).to(device)
    generator = torch.Generator().manual_seed(run.seed)

    def next_batch():
        batch = windows(data["train"], run.batch_size, run.seq_len, generator).to(device)  # [B, T + 1]
        return batch[:, :-1], batch[:, 1:]

    started = time.perf_counter()
    train_loss = fit(model, next_batch, steps=run.steps, lr=run.lr)
    seconds = time.perf_counter() - started
    held_out = windows(data["validation"], run.validation_windows, run.seq_len, torch.Generator().manual_seed(99))
    losses, hits = [], []
    with torch.no_grad():
        for block in held_out.to(device).split(64):  # [≤64, T + 1]
            logits, following = model(block[:, :-1]).flatten(0, 1), block[:, 1:].flatten()
            losses.append(F.cross_entropy(logits, following))
            hits.append((logits.argmax(-1) == following).float().mean())
    return {**asdict(run), "validation_bits_per_byte": float(torch.stack(losses).mean()) / math.log(2),
            "validation_accuracy": float(torch.stack(hits).mean()), "train_bits_per_byte": train_loss / math.log(2),
            "parameters": model.parameter_count(), "seconds": seconds}


FULL = LanguageRun("softmax")
QUICK = LanguageRun("softmax", d_model=16, n_heads=2, seq_len=32, steps=10, batch_size=8, validation_windows=16)
QUICK_BYTES = 200_000  # a quick run reads only the first 200 kB of each split


def run_language(template: LanguageRun, device: torch.device, *, mixers: tuple[str, ...],
                 max_bytes: int | None = None) -> dict:
    """One ``train_language`` per mixer on the same corpus: {"corpus_bytes", "runs"}, with a tqdm bar."""
    data = corpus(max_bytes=max_bytes)
    runs = [train_language(replace(template, mixer=mixer), data, device)
            for mixer in tqdm(mixers, desc="byte-level LM", disable=None)]
    return {"corpus_bytes": {split: int(x.numel()) for split, x in data.items()}, "runs": runs}
