"""The recall sweep: every mixer × num_pairs × head dim × seed, same steps and seeds for all (notebook 12 §d).

``run_sweep`` trains one ``train.RecallRun`` per combination and summarises recall per (mixer, head
dim, num_pairs) as the mean over seeds with the lowest and highest seed beside it; ``sweep_figure``
plots it, one panel per head dim, a dotted line where num_pairs equals the head dim (an elu + 1
ledger per head is head_dim × head_dim: notebook 05's capacity argument says exact recall of more
keys than f is impossible for one head).
"""

from dataclasses import asdict, dataclass, replace
from itertools import product

import matplotlib.pyplot as plt
import torch
from tqdm import tqdm

from course_lib.models import MIXERS
from course_lib.recall.train import RecallRun, train_recall


@dataclass(frozen=True)
class SweepSettings:
    """What the sweep trains; every run is ``template`` with mixer, num_pairs, head_dim and seed replaced."""

    num_pairs: tuple[int, ...]
    head_dims: tuple[int, ...]
    seeds: tuple[int, ...]
    template: RecallRun
    mixers: tuple[str, ...] = MIXERS

    def runs(self) -> list[RecallRun]:
        return [replace(self.template, mixer=mixer, num_pairs=pairs, head_dim=head_dim, seed=seed)
                for head_dim, pairs, seed, mixer in product(self.head_dims, self.num_pairs, self.seeds, self.mixers)]


# lr 1e-2 and 1,500 steps: at 3e-3, or at 800 steps, the delta rule had not left chance at 16 pairs
# (softmax had). The whole run, with the language models, fits in ~45 min on the 2-core CPU.
FULL = SweepSettings(num_pairs=(4, 8, 16), head_dims=(8, 16), seeds=(0, 1),
                     template=RecallRun("softmax", num_pairs=4, steps=1500, seq_len=64, vocab_size=128, lr=1e-2))
QUICK = SweepSettings(num_pairs=(2, 4), head_dims=(8,), seeds=(0,),
                      template=RecallRun("softmax", num_pairs=2, steps=20, seq_len=16, vocab_size=32, lr=1e-2,
                                         batch_size=16, test_examples=64))


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (mixer, head_dim, num_pairs): mean, lowest and highest accuracy over its seeds."""
    groups: dict[tuple, list[float]] = {}
    for run in runs:
        groups.setdefault((run["mixer"], run["head_dim"], run["num_pairs"]), []).append(run["accuracy"])
    return [{"mixer": mixer, "head_dim": head_dim, "num_pairs": pairs, "mean": sum(values) / len(values),
             "lowest": min(values), "highest": max(values), "seeds": len(values)}
            for (mixer, head_dim, pairs), values in groups.items()]


def run_sweep(settings: SweepSettings, device: torch.device) -> dict:
    """{"settings", "runs" (one result per run), "summary" (``summarise``)}, with a tqdm bar over the runs."""
    results = []
    for run in tqdm(settings.runs(), desc="recall sweep", disable=None):
        results.append(train_recall(run, device))
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
