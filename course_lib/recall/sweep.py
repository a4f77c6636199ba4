"""The recall sweep: every mixer × num_pairs × head dim × seed, same steps and seeds for all (notebook 12 §d).

``run_sweep`` trains one ``train.RecallRun`` per combination and summarises recall per (mixer, head
dim, num_pairs) as the mean over seeds with the lowest and highest seed beside it; ``sweep_figure``
plots it, one panel per head dim, a dotted line where num_pairs equals the head dim (an elu + 1
ledger per head is head_dim × head_dim: notebook 05's capacity argument says exact recall of more
keys than f is impossible for one head).
"""

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from itertools import product
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from tqdm import tqdm

from course_lib.device import one_thread
from course_lib.recall.train import RecallRun, train_recall

RECALL_MIXERS = ("softmax", "linear", "performer", "decay", "delta")  # the committed sweep's (no gated mixer yet)


@dataclass(frozen=True)
class SweepSettings:
    """What the sweep trains; every run is ``template`` with mixer, num_pairs, head_dim and seed replaced.

    The sequence grows with the pairs (seq_len = ``tokens_per_pair`` · num_pairs) and the batch
    shrinks (batch_size = ``tokens_per_step`` / seq_len), so every run sees the same tokens and the
    same number of scored queries per step (tokens_per_step / tokens_per_pair). With a fixed
    seq_len, a run with 4 pairs gets a quarter of the answers to learn from that a run with 16
    gets, and whether it learned at all became a coin toss (softmax: 100 % on one seed, 19 % on
    the other, in this sweep's first version).
    """

    num_pairs: tuple[int, ...]
    head_dims: tuple[int, ...]
    seeds: tuple[int, ...]
    template: RecallRun
    tokens_per_step: int
    tokens_per_pair: int = 4
    mixers: tuple[str, ...] = RECALL_MIXERS

    def runs(self) -> list[RecallRun]:
        return [replace(self.template, mixer=mixer, num_pairs=pairs, head_dim=head_dim, seed=seed,
                        seq_len=self.tokens_per_pair * pairs,
                        batch_size=self.tokens_per_step // (self.tokens_per_pair * pairs))
                for head_dim, pairs, seed, mixer in product(self.head_dims, self.num_pairs, self.seeds, self.mixers)]


# lr 1e-2: at 3e-3 the delta rule had not left chance at 16 pairs after 800 steps (softmax had).
# 4,096 tokens (1,024 scored queries) per step, 1,200 steps, 32 pairs at most: 63 keys fit in V = 128.
FULL = SweepSettings(num_pairs=(4, 8, 16, 32), head_dims=(8, 16), seeds=(0, 1), tokens_per_step=4096,
                     template=RecallRun("softmax", num_pairs=4, steps=1200, vocab_size=128, lr=1e-2))
QUICK = SweepSettings(num_pairs=(2, 4), head_dims=(8,), seeds=(0,), tokens_per_step=256,
                      template=RecallRun("softmax", num_pairs=2, steps=20, vocab_size=32, lr=1e-2, test_examples=64))


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (mixer, head_dim, num_pairs): mean, lowest and highest accuracy over its seeds."""
    groups: dict[tuple, list[float]] = {}
    for run in runs:
        groups.setdefault((run["mixer"], run["head_dim"], run["num_pairs"]), []).append(run["accuracy"])
    return [{"mixer": mixer, "head_dim": head_dim, "num_pairs": pairs, "mean": sum(values) / len(values),
             "lowest": min(values), "highest": max(values), "seeds": len(values)}
            for (mixer, head_dim, pairs), values in groups.items()]


def _train_on_one_thread(run: RecallRun, device: torch.device) -> dict:
    """``train_recall`` with torch on one CPU thread (see ``device.one_thread``): a tiny model's step is
    many small ops, fastest on one thread, and with several they stall whenever the CPU is busy."""
    with one_thread():
        return train_recall(run, device)


def run_sweep(settings: SweepSettings, device: torch.device, *, jobs: int = 1, partial: Path | None = None) -> dict:
    """{"settings", "runs" (one result per run, in ``settings.runs()`` order), "summary" (``summarise``)}.

    ``jobs`` runs train at a time, each in its own process on one thread (runs are seeded, so the
    results do not depend on ``jobs``). Each finished run is appended to ``partial`` (JSON lines)
    when given, and runs already there are not trained again: an interrupted sweep resumes.
    A tqdm bar counts the runs.
    """
    runs = settings.runs()
    done = {}
    if partial is not None and partial.exists():
        for line in partial.read_text().splitlines():
            result = json.loads(line)
            done[json.dumps({key: result[key] for key in asdict(runs[0])}, sort_keys=True)] = result
    key = lambda run: json.dumps(asdict(run), sort_keys=True)  # noqa: E731
    todo = [run for run in runs if key(run) not in done]
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc="recall sweep", disable=None)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter per worker: never fork torch
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) if jobs > 1 else nullcontext() as pool:
        finished = (pool.map(_train_on_one_thread, todo, [device] * len(todo)) if pool
                    else (_train_on_one_thread(run, device) for run in todo))
        for run, result in zip(todo, finished):
            done[key(run)] = result
            if partial is not None:
                with partial.open("a") as file:
                    file.write(json.dumps(result) + "\n")
            bar.update()
    bar.close()
    results = [done[key(run)] for run in runs]
    return {"settings": asdict(settings), "runs": results, "summary": summarise(results)}


def sweep_figure(summary: list[dict], label: str) -> plt.Figure:
    """Recall against num_pairs, one line per mixer (band: lowest to highest seed), a panel per head dim."""
    head_dims = sorted({row["head_dim"] for row in summary})
    figure, axes = plt.subplots(1, len(head_dims), figsize=(5.5 * len(head_dims), 4), sharey=True, squeeze=False)
    for ax, head_dim in zip(axes[0], head_dims):
        for mixer in dict.fromkeys(row["mixer"] for row in summary):
            rows = sorted((r for r in summary if r["mixer"] == mixer and r["head_dim"] == head_dim),
                          key=lambda r: r["num_pairs"])
            pairs = [r["num_pairs"] for r in rows]
            line, = ax.plot(pairs, [r["mean"] for r in rows], marker="o", label=mixer)
            ax.fill_between(pairs, [r["lowest"] for r in rows], [r["highest"] for r in rows],
                            color=line.get_color(), alpha=0.15)
        ax.axvline(head_dim, color="black", linestyle=":", linewidth=1)
        ax.text(head_dim, 0.02, f" num_pairs = head dim = {head_dim}", fontsize=8)
        ax.set(title=f"head dim {head_dim}", xlabel="key-value pairs to recall (num_pairs)", ylim=(0, 1.02))
    axes[0][0].set_ylabel("recall accuracy (held-out examples)")
    axes[0][-1].legend(loc="lower left")
    figure.suptitle(f"MQAR recall by mixer — {label}", fontsize=10)
    figure.tight_layout()
    return figure
