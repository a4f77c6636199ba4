"""Does a signed feature map make training unstable? TinyLM on MQAR, watched step by step (notebook 09 §4).

One run trains ``models.TinyLM`` with the "linear" mixer and a chosen ``feature_map`` (elu + 1,
identity or ReLU) dividing by the normaliser φ(q_i)ᵀΣ_{j≤i}φ(k_j) + eps as it comes, with no
refusal, on multi-query associative recall, with ``train.fit`` (AdamW, weight decay
0.1, warm-up then cosine, gradient norm clipped at 1). Every step records the loss, the smallest
|normaliser| of any layer, head and token, and the gradient norm before clipping. A run stops at its
first non-finite loss or gradient (one more optimiser step would make every weight NaN). ``benchmarks/signed_feature_maps.py`` runs the
grid and commits the JSON; the notebook reads it and repeats one short run live.
"""

import json
import math
import time
from dataclasses import asdict, dataclass

import torch

from course_lib.records import RESULTS_DIR
from course_lib.models import TinyLM
from course_lib.recall import mqar, recall_accuracy
from course_lib.recall.train import fit

GRID_FILE = RESULTS_DIR / "signed_feature_maps_cpu.json"  # written by benchmarks/signed_feature_maps.py
NO_NORMALISER_FILE = RESULTS_DIR / "normaliser_free_cpu.json"  # its --no-normaliser grid (notebook 13 §5)
SPIKE_WINDOW, SPIKE_JUMP = 50, 1.0  # a spike: the loss rises > 1 nat above the lowest of the previous 50 steps


@dataclass(frozen=True)
class StabilityRun:
    """One run: the feature map and eps under test, the rest the same for every map."""

    feature_map: str
    eps: float = 0.0
    lr: float = 1e-2
    seed: int = 0
    steps: int = 400
    num_pairs: int = 4
    seq_len: int = 16
    vocab_size: int = 64
    batch_size: int = 128
    head_dim: int = 16
    n_heads: int = 2
    n_layers: int = 2
    test_examples: int = 512
    keep_every: int = 4  # the traces keep every 4th step (the summaries use every step)
    normaliser: bool = True  # False: no division, an RMS norm per head (TinyLM(normaliser=False), notebook 13)


def count_spikes(losses: list[float], window: int = SPIKE_WINDOW, jump: float = SPIKE_JUMP) -> int:
    """Steps whose loss exceeds the lowest loss of the ``window`` steps before it by more than ``jump`` nats."""
    return sum(loss > min(losses[max(0, t - window) : t]) + jump for t, loss in enumerate(losses) if t > 0)


def train_watching_normaliser(run: StabilityRun) -> dict:
    """Train ``run`` on the CPU: {**the run, "accuracy", "final_loss", "first_nonfinite_step",
    "nonfinite_in", "spikes", "smallest_normaliser", "largest_grad_norm", "seconds", "trace": {"step",
    "loss", "smallest_normaliser", "grad_norm"} (every ``keep_every``-th step and the last)}.

    "first_nonfinite_step": the step whose loss or gradient norm ("nonfinite_in") was NaN or
    infinite, where the run stopped (None: it ran to the end). "final_loss": the mean of the last
    20 steps' losses (None if it stopped); "accuracy": recall on ``test_examples`` held-out
    examples (0 if it stopped). Non-finite numbers are stored as None, so the result is plain JSON.
    """
    model = TinyLM(run.vocab_size, d_model=run.head_dim * run.n_heads, n_layers=run.n_layers,
                   n_heads=run.n_heads, mixer="linear", max_len=run.seq_len, seed=run.seed,
                   feature_map=run.feature_map, eps=run.eps, normaliser=run.normaliser)
    task = dict(num_pairs=run.num_pairs, seq_len=run.seq_len, vocab_size=run.vocab_size)
    generator = torch.Generator().manual_seed(run.seed)
    losses, smallest, grad_norms, stopped, where = [], [], [], None, None

    def watch(step: int, loss: float, grad_norm: float) -> bool:
        nonlocal stopped, where
        losses.append(loss)
        smallest.append(model.smallest_normaliser() if run.normaliser else math.nan)  # of this step's forward pass
        grad_norms.append(grad_norm)
        if math.isfinite(loss) and math.isfinite(grad_norm):
            return False
        # one more update would make every weight NaN; a NaN gradient under a finite loss is e.g. 0/0
        # at a position the loss does not score
        stopped, where = step, "loss" if not math.isfinite(loss) else "gradient"
        return True

    started = time.perf_counter()
    fit(model, lambda: mqar(run.batch_size, generator=generator, **task), steps=run.steps, lr=run.lr, watch=watch)
    seconds = time.perf_counter() - started
    accuracy = 0.0
    if stopped is None:
        test = mqar(run.test_examples, generator=torch.Generator().manual_seed(10_000 + run.seed), **task)
        with torch.no_grad():
            accuracy = recall_accuracy(model(test[0]), test[1])
    kept = sorted(set(range(0, len(losses), run.keep_every)) | {len(losses) - 1})
    return {**asdict(run), "accuracy": accuracy,
            "final_loss": None if stopped is not None else sum(losses[-20:]) / len(losses[-20:]),
            "first_nonfinite_step": stopped, "nonfinite_in": where, "spikes": count_spikes(losses),
            "smallest_normaliser": _finite(min(smallest)),
            "largest_grad_norm": _finite(max((x for x in grad_norms if math.isfinite(x)), default=math.nan)),
            "seconds": seconds,
            "trace": {"step": kept, "loss": [_finite(losses[t]) for t in kept],
                      "smallest_normaliser": [_finite(smallest[t]) for t in kept],
                      "grad_norm": [_finite(grad_norms[t]) for t in kept]}}


def _finite(x: float) -> float | None:
    """``x``, or None when it is NaN or infinite (JSON has neither)."""
    return x if math.isfinite(x) else None


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (feature_map, eps, lr), in first-seen order: "seeds", "nonfinite_steps" (per seed,
    None where it ran to the end), "spikes" (summed), "smallest_normaliser" (min), "largest_grad_norm"
    (max), "recall" and "final_loss" (per seed); min and max skip None and are None if all are."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((run["feature_map"], run["eps"], run["lr"]), []).append(run)

    def extreme(pick, values):
        values = [v for v in values if v is not None]
        return pick(values) if values else None

    return [{"feature_map": feature_map, "eps": eps, "lr": lr, "seeds": [r["seed"] for r in group],
             "nonfinite_steps": [r["first_nonfinite_step"] for r in group],
             "spikes": sum(r["spikes"] for r in group),
             "smallest_normaliser": extreme(min, (r["smallest_normaliser"] for r in group)),
             "largest_grad_norm": extreme(max, (r["largest_grad_norm"] for r in group)),
             "recall": [r["accuracy"] for r in group], "final_loss": [r["final_loss"] for r in group]}
            for (feature_map, eps, lr), group in groups.items()]


def load_grid(path=GRID_FILE) -> dict:
    """A committed grid, ``GRID_FILE`` or ``NO_NORMALISER_FILE``: {"meta", "protocol", "runs"}
    (``train_watching_normaliser`` results)."""
    return json.loads(path.read_text())
