"""Do sign-indefinite feature maps make training unstable? The grid behind notebook 09 §4.

    .venv/bin/python benchmarks/signed_feature_maps.py [--jobs 2] [--no-normaliser]
    # writes course_lib/results/signed_feature_maps_cpu.json (about 5 min on 2 CPU cores)

Protocol, fixed before the first run: TinyLM (2 layers, 2 heads of 16 dims, the "linear" mixer)
on MQAR with 4 pairs in 16 tokens (vocabulary 64, chance = 1/32), 400 steps of 128 examples,
AdamW with warm-up and cosine decay at two peak learning rates (3e-3 and 1e-2), seeds 0, 1, 2.
The normaliser φ(q_i)ᵀΣ_{j≤i}φ(k_j) + eps is divided by as it comes, without course_lib's refusal
(``models.TinyLM(feature_map=...)``). Maps: elu + 1 (the baseline), identity, ReLU with eps = 0
and ReLU with eps = 1e-6 (the usual patch). Per run: the first non-finite loss, loss spikes
(``stability.count_spikes``), the smallest |normaliser| seen, the largest gradient norm, the final
loss and held-out recall (``course_lib.recall.stability``).

``--no-normaliser`` runs the same protocol for identity and elu + 1 with no division at all, an RMS
norm per head instead (``TinyLM(normaliser=False)``), into ``stability.NO_NORMALISER_FILE``:
notebook 13 §5 sets it beside the identity map divided by its normaliser.
"""

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from itertools import product
from pathlib import Path

import torch

from course_lib.records import finish_run, machine_metadata
from course_lib.device import one_thread
from course_lib.recall.stability import (
    GRID_FILE,
    NO_NORMALISER_FILE,
    SPIKE_JUMP,
    SPIKE_WINDOW,
    StabilityRun,
    train_watching_normaliser,
)

MAPS = (("elu+1", 0.0), ("identity", 0.0), ("relu", 0.0), ("relu", 1e-6))  # (feature map, eps)
MAPS_WITHOUT_NORMALISER = (("identity", 0.0), ("elu+1", 0.0))  # eps means nothing without a division
LEARNING_RATES = (3e-3, 1e-2)
SEEDS = (0, 1, 2)


def grid(maps=MAPS, normaliser: bool = True) -> list[StabilityRun]:
    return [StabilityRun(feature_map, eps=eps, lr=lr, seed=seed, normaliser=normaliser)
            for (feature_map, eps), lr, seed in product(maps, LEARNING_RATES, SEEDS)]


def train_on_one_thread(run: StabilityRun) -> dict:
    with one_thread():  # a tiny model's step is many small ops: fastest on one thread
        return train_watching_normaliser(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at a time, one process each")
    parser.add_argument("--no-normaliser", action="store_true", help="no division, an RMS norm per head")
    parser.add_argument("--out", type=Path, help=f"default {GRID_FILE.name}, or {NO_NORMALISER_FILE.name}")
    args = parser.parse_args()
    out = args.out or (NO_NORMALISER_FILE if args.no_normaliser else GRID_FILE)
    maps = MAPS_WITHOUT_NORMALISER if args.no_normaliser else MAPS
    started, runs = time.perf_counter(), grid(maps, normaliser=not args.no_normaliser)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
        results = []
        for run, result in zip(runs, pool.map(train_on_one_thread, runs)):
            results.append(result)
            print(f"{run.feature_map:>8} eps={run.eps:g} lr={run.lr:g} seed={run.seed}: "
                  f"recall {result['accuracy']:.2f}, first non-finite step {result['first_nonfinite_step']}, "
                  f"spikes {result['spikes']}, min |normaliser| {result['smallest_normaliser']}", flush=True)
    meta = machine_metadata(torch.device("cpu"), quick=False) | {
        "jobs": args.jobs, "spike_rule": f"loss > lowest of the previous {SPIKE_WINDOW} steps + {SPIKE_JUMP} nat"}
    common = {key: value for key, value in asdict(runs[0]).items() if key not in ("feature_map", "eps", "lr", "seed")}
    finish_run(out, {"meta": meta, "protocol": common | {"maps": maps, "lr": LEARNING_RATES, "seeds": SEEDS},
                     "runs": results}, started)


if __name__ == "__main__":
    main()
