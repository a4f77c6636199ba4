"""The recall study: Zoology's MQAR, every ledger the course teaches, and a protocol the code enforces.

The protocol (``PROTOCOL``, printed with every report and quoted by notebook 12) is what ``run_study``
does; nothing in the report is chosen by hand:

1. Settings (P pairs, T tokens) are taken one at a time, each at the grid's first budget (steps).
2. Softmax first: every rate of the grid with seed 0 and, while the best is the lowest or highest rate
   tried, the next rate beyond that edge (3e-4 then 1e-4 below, 3e-2 then 1e-1 above); the rate with the
   best **validation** recall kept, then the other seeds at that rate, each scored on the **test**
   examples (another draw, never used to choose anything).
3. The setting counts only if softmax's test recall is ≥ 95 % on every seed (``verdict.is_valid``;
   when seed 0 already misses it, the other seeds are not trained). If not, the setting is tried
   again at the next budget; if no budget validates it, it is reported as
   "budget" and no other mixer is trained there (their numbers would measure the budget, not the ledger).
4. In a setting that counts, every other variant gets step 2's treatment at the same budget.

Every run records its rates' validation recall, its test recall overall and per distance bucket (the
distance from a query back to its key), its state in bytes (``models.state_bytes``), its training
throughput and its CPU time. Finished runs go to a JSON-lines cache as they finish, so an interrupted
study resumes where it stopped; ``jobs`` runs train at a time, one process and one thread each.
"""

import json
import math
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from tqdm import tqdm

from course_lib.device import one_thread
from course_lib.models import TinyLM, state_bytes
from course_lib.recall import IGNORE, recall_by_distance, zoology_mqar
from course_lib.recall.train import fit
from course_tools.recall.verdict import VALID_RECALL, is_valid

PROTOCOL = __doc__.split("\n\n")[2].replace("``", "").replace("**", "")  # the numbered steps, plain text
DISTANCE_EDGES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # distance buckets [2, 4), [4, 8), …
VALIDATION_SEED, TEST_SEED = 1_000_003, 2_000_003  # the two held-out draws (no training stream uses them)


@dataclass(frozen=True)
class Variant:
    """One mixer as the study trains it: TinyLM's ``mixer`` and options; ``features_per_dim`` sets FAVOR+'s
    m = features_per_dim × head dim."""

    label: str
    mixer: str
    normaliser: bool = True
    features_per_dim: int | None = None

    def model_options(self, head_dim: int) -> dict:
        m = None if self.features_per_dim is None else self.features_per_dim * head_dim
        return {"mixer": self.mixer, "normaliser": self.normaliser, "performer_features": m}


VARIANTS = (
    Variant("softmax", "softmax"),
    Variant("elu+1", "linear"),
    Variant("elu+1, no normaliser", "linear", normaliser=False),  # ablation: the denominator
    Variant("FAVOR+ m=dh", "performer"),
    Variant("FAVOR+ m=4dh", "performer", features_per_dim=4),
    Variant("decay", "decay"),
    Variant("delta", "delta"),
    Variant("delta, additive write", "delta_additive"),  # ablation: the eraser
    Variant("gla", "gla"),
    Variant("gated delta", "gated_delta"),
    Variant("based", "based"),
)
ABLATIONS = {"the eraser": ("delta", "delta, additive write"), "the normaliser": ("elu+1", "elu+1, no normaliser")}


@dataclass(frozen=True)
class StudyRun:
    """One training run: the variant, the task, the model and the optimisation (stored with its result)."""

    variant: Variant
    num_pairs: int
    seq_len: int
    steps: int
    lr: float
    seed: int
    vocab_size: int = 128
    d_model: int = 64
    n_heads: int = 2
    n_layers: int = 2
    tokens_per_step: int = 2048
    power_a: float = 0.01
    eval_examples: int = 1024

    @property
    def batch_size(self) -> int:
        return max(1, self.tokens_per_step // self.seq_len)

    def task(self) -> dict:
        return {"num_pairs": self.num_pairs, "seq_len": self.seq_len, "vocab_size": self.vocab_size,
                "power_a": self.power_a}


def evaluate(model: TinyLM, run: StudyRun, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(hits [N] bool, distances [N] long) over ``run.eval_examples`` examples drawn from ``seed``, 256 at a time."""
    batch = zoology_mqar(run.eval_examples, generator=torch.Generator().manual_seed(seed), **run.task())
    hits, distances = [], []
    with torch.no_grad():
        for tokens, targets, distance in zip(*(x.split(256) for x in batch)):
            scored = targets != IGNORE
            hits.append(model(tokens.to(device), at=scored.to(device)).argmax(-1).cpu() == targets[scored])
            distances.append(distance[scored])
    return torch.cat(hits), torch.cat(distances)


def fit_until_diverged(model: TinyLM, next_batch: Callable, *, steps: int, lr: float, **options) -> dict:
    """``fit``, stopped at the first step whose loss or gradient is not finite, or whose mixer refuses a
    non-finite input (a rate too high for the model): {"final_loss" (None if diverged), "diverged_at" (the
    step, or None), "losses" (each finished step's), "seconds", "cpu_seconds"}."""
    losses: list[float] = []
    watch = lambda step, loss, norm: not (math.isfinite(loss) and math.isfinite(norm))  # noqa: E731
    cpu_started, started = time.process_time(), time.perf_counter()
    try:
        final_loss = fit(model, next_batch, steps=steps, lr=lr, progress=losses.append, watch=watch, **options)
    except ValueError as error:
        if "finite" not in str(error):
            raise
        final_loss = float("nan")
    diverged = not math.isfinite(final_loss) or len(losses) < steps
    return {"final_loss": None if diverged else final_loss, "diverged_at": len(losses) if diverged else None,
            "losses": losses, "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu_started}


def timing(trained: dict, tokens_per_step: int) -> dict:
    """Seconds, seconds per finished step, tokens per second and CPU seconds of a ``fit_until_diverged`` run."""
    steps = max(1, len(trained["losses"]))
    return {"seconds": trained["seconds"], "step_seconds": trained["seconds"] / steps,
            "tokens_per_second": steps * tokens_per_step / trained["seconds"], "cpu_seconds": trained["cpu_seconds"]}


def train_study_run(run: StudyRun, device: torch.device | str = "cpu") -> dict:
    """Train ``run`` (loss at the scored positions only, ``fit(scored_only=True)``) and score it on both draws;
    "curve" is the training loss averaged over each tenth of the steps. A run that diverges is scored as
    recalling nothing (recall 0, no distance buckets) and keeps the step it diverged at."""
    device = torch.device(device)
    head_dim = run.d_model // run.n_heads
    options = run.variant.model_options(head_dim)
    model = TinyLM(run.vocab_size, d_model=run.d_model, n_layers=run.n_layers, n_heads=run.n_heads,
                   max_len=run.seq_len, seed=run.seed, **options).to(device)
    stream = torch.Generator().manual_seed(run.seed)

    def next_batch():
        tokens, targets, _ = zoology_mqar(run.batch_size, generator=stream, **run.task())
        return tokens.to(device), targets.to(device)

    trained = fit_until_diverged(model, next_batch, steps=run.steps, lr=run.lr, scored_only=True)
    if trained["diverged_at"] is None:
        validation, _ = evaluate(model, run, VALIDATION_SEED, device)
        hits, distances = evaluate(model, run, TEST_SEED, device)
        scores = {"validation_recall": float(validation.float().mean()), "test_recall": float(hits.float().mean()),
                  "by_distance": recall_by_distance(hits, distances, DISTANCE_EDGES)}
    else:
        scores = {"validation_recall": 0.0, "test_recall": 0.0, "by_distance": []}
    memory = state_bytes(run.variant.mixer, d_model=run.d_model, n_heads=run.n_heads, n_layers=run.n_layers,
                         seq_len=run.seq_len, normaliser=run.variant.normaliser,
                         performer_features=options["performer_features"])
    curve = [float(part.mean()) for part in torch.tensor(trained["losses"]).chunk(10)] if trained["losses"] else []
    return {"run": asdict(run), **scores, "final_loss": trained["final_loss"], "diverged_at": trained["diverged_at"],
            "curve": curve, "parameters": model.parameter_count(), "state_bytes": memory,
            **timing(trained, run.batch_size * run.seq_len)}


class RunCache:
    """Finished runs, one JSON line each, keyed by the run's fields: a study started again trains only what is missing."""

    def __init__(self, path: Path | None):
        self.path, self.done = path, {}
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                result = json.loads(line)
                self.done[json.dumps(result["run"], sort_keys=True)] = result

    @staticmethod
    def key(run) -> str:
        return json.dumps(asdict(run), sort_keys=True)

    def add(self, run, result: dict) -> None:
        self.done[self.key(run)] = result
        if self.path is not None:
            with self.path.open("a") as file:
                file.write(json.dumps(result) + "\n")


def _on_one_thread(trainer: Callable, run, device: torch.device) -> dict:
    """``trainer`` with torch on one CPU thread (``device.one_thread``: a tiny model's step is fastest there)."""
    with one_thread():
        return trainer(run, device)


class NotTrained(Exception):
    """A ``Runner(train=False)`` met runs its cache does not hold."""


@dataclass
class Runner:
    """Trains runs a batch at a time through the cache, ``jobs`` processes at once, with one tqdm bar;
    ``train=False`` only reads the cache and raises ``NotTrained`` for a batch it does not hold."""

    device: torch.device
    cache: RunCache
    trainer: Callable[[object, torch.device], dict]
    jobs: int = 1
    train: bool = True
    bar: tqdm = field(default_factory=lambda: tqdm(desc="runs", unit="run", disable=None))

    def __call__(self, runs: list) -> list[dict]:
        todo = list({RunCache.key(run): run for run in runs if RunCache.key(run) not in self.cache.done}.values())
        if todo and not self.train:
            raise NotTrained(f"{len(todo)} of {len(runs)} runs are not in the cache")
        self.bar.total = (self.bar.total or 0) + len(runs)
        self.bar.update(len(runs) - len(todo))
        context = multiprocessing.get_context("spawn")  # a fresh interpreter per worker: never fork torch
        with ProcessPoolExecutor(self.jobs, mp_context=context) if self.jobs > 1 and len(todo) > 1 else nullcontext() as pool:
            finished = (pool.map(_on_one_thread, [self.trainer] * len(todo), todo, [self.device] * len(todo)) if pool
                        else (_on_one_thread(self.trainer, run, self.device) for run in todo))
            for run, result in zip(todo, finished):
                self.cache.add(run, result)
                self.bar.update()
        return [self.cache.done[RunCache.key(run)] for run in runs]


WIDER = ((3e-4, 1e-4), (3e-2, 1e-1))  # rates beyond the grid, nearest first: below it, above it


def _best(tried: dict, score: Callable[[dict], float]) -> float:
    """The rate whose run scores highest; ties go to the lower rate."""
    return max(sorted(tried), key=lambda lr: (score(tried[lr]), -lr))


def rate_then_seeds(runner: Runner, templates: list, rates: tuple[float, ...], seeds: tuple[int, ...],
                    score: Callable[[dict], float], wider: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())) -> list[dict]:
    """Protocol step 2 for each template run: ``rates`` at seeds[0]; while the best ``score`` (validation, higher
    is better; ties to the lower rate) is the lowest or highest rate tried, the next rate of ``wider`` (below,
    above) beyond it; the best kept, then seeds[1:] at it. One cell per template:
    {"sweep": [{"lr", "validation"}] by rate, "chosen_lr", "seeds": [results at the chosen rate]}."""
    swept = runner([replace(t, lr=lr, seed=seeds[0]) for t in templates for lr in rates])
    tried = [dict(zip(rates, swept[i * len(rates):(i + 1) * len(rates)])) for i in range(len(templates))]
    while True:  # widen the grid past whichever edge wins, one rate a round for every template at once
        wanted = []
        for index, runs in enumerate(tried):
            best = _best(runs, score)
            below, above = ([r for r in side if r not in runs] for side in wider)  # untried, nearest first
            if best == min(runs) and below:
                wanted.append((index, below[0]))
            elif best == max(runs) and above:
                wanted.append((index, above[0]))
        if not wanted:
            break
        for (index, lr), result in zip(wanted, runner([replace(templates[i], lr=lr, seed=seeds[0]) for i, lr in wanted])):
            tried[index][lr] = result
    chosen = [_best(runs, score) for runs in tried]
    rest = runner([replace(t, lr=lr, seed=s) for t, lr in zip(templates, chosen) for s in seeds[1:]])
    per = len(seeds) - 1
    return [{"sweep": [{"lr": lr, "validation": score(runs[lr])} for lr in sorted(runs)], "chosen_lr": lr,
             "seeds": [runs[lr], *rest[index * per:(index + 1) * per]]}
            for index, (runs, lr) in enumerate(zip(tried, chosen))]


@dataclass(frozen=True)
class StudySettings:
    """The grid: settings (num_pairs, seq_len), budgets (steps, tried in order), rates (and ``wider``, the rates
    beyond them tried when an edge wins), seeds, the variants (softmax first) and the model and task every run
    shares (``template``); ``notes``: what is kept from
    Zoology and what is scaled down, stored with the results."""

    grid: tuple[tuple[int, int], ...]
    budgets: tuple[int, ...]
    rates: tuple[float, ...]
    seeds: tuple[int, ...]
    template: StudyRun
    variants: tuple[Variant, ...] = VARIANTS
    wider: tuple[tuple[float, ...], tuple[float, ...]] = WIDER
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        if self.variants[0].mixer != "softmax":
            raise ValueError("variants must start with softmax: the validity rule needs it first")
        if len(self.rates) < 3 or len(self.seeds) < 3:
            raise ValueError(f"the protocol needs >= 3 rates and >= 3 seeds, got {self.rates} and {self.seeds}")


def run_study(settings: StudySettings, runner: Runner) -> dict:
    """The protocol (module docstring) over ``settings.grid``: {"protocol", "settings", "status", "cells"}.

    ``status``: one row per setting, "verdict" (with the budget that validated it), "budget", or, when
    ``runner.train`` is False and the cache lacks its runs, "not yet trained"; ``cells``:
    one per (variant, setting) trained, the variant's label, the setting, the budget and ``rate_then_seeds``'s
    sweep, chosen rate and seeds.
    """
    status, cells = [], []
    for num_pairs, seq_len in settings.grid:
        row = {"num_pairs": num_pairs, "seq_len": seq_len, "status": "budget", "tried": []}
        status.append(row)
        try:
            cells += _one_setting(settings, runner, row)
        except NotTrained:  # a report from an unfinished cache: this setting and the rest are still to come
            row["status"] = "not yet trained"
    return {"protocol": PROTOCOL, "settings": asdict(settings), "status": status, "cells": cells}


def _one_setting(settings: StudySettings, runner: Runner, row: dict) -> list[dict]:
    """Protocol steps 2–4 for one setting; fills ``row`` ("tried", "status", "steps") and returns its cells."""
    num_pairs, seq_len = row["num_pairs"], row["seq_len"]
    score = lambda result: result["validation_recall"]  # noqa: E731
    for steps in settings.budgets:
        base = replace(settings.template, num_pairs=num_pairs, seq_len=seq_len, steps=steps)
        softmax = [replace(base, variant=settings.variants[0])]
        reference, = rate_then_seeds(runner, softmax, settings.rates, settings.seeds[:1], score, settings.wider)
        if reference["seeds"][0]["test_recall"] >= VALID_RECALL:  # else seed 0 alone already fails the rule
            reference, = rate_then_seeds(runner, softmax, settings.rates, settings.seeds, score, settings.wider)
        softmax_recalls = [seed["test_recall"] for seed in reference["seeds"]]
        row["tried"].append({"steps": steps, "softmax_test_recall": softmax_recalls})
        if is_valid(softmax_recalls):
            others = rate_then_seeds(runner, [replace(base, variant=v) for v in settings.variants[1:]],
                                     settings.rates, settings.seeds, score, settings.wider)
            row.update(status="verdict", steps=steps)
            return [{"label": variant.label, "num_pairs": num_pairs, "seq_len": seq_len, "steps": steps, **cell}
                    for variant, cell in zip(settings.variants, [reference, *others])]
    return []


_KEPT = ("Kept from Zoology: distinct keys and values, random filler (unscored), power-law query gaps "
         "(a = 0.01), T and P set independently, a short causal convolution before every mixer.")
CPU = StudySettings(
    grid=((8, 64), (4, 64), (16, 64), (8, 128)), budgets=(1000, 2000, 3000), rates=(1e-3, 3e-3, 1e-2), seeds=(0, 1, 2),
    template=StudyRun(VARIANTS[0], num_pairs=8, seq_len=64, steps=1000, lr=1e-3, seed=0),
    notes=(_KEPT, "Scaled down for 2 CPU cores: V = 128 (Zoology 8,192), d_model 64 with 2 heads of 32, 2 layers, "
           "2,048 tokens a step for 1,000 steps (2,000 or 3,000 where softmax needs them), T <= 128 (Zoology 64-512), "
           "P <= 16 (Zoology 4-64), three rates and three seeds (Zoology sweeps more rates, one seed)."),
)
GPU = StudySettings(
    grid=((16, 256), (64, 512)), budgets=(1000, 2000), rates=(3e-4, 1e-3, 3e-3), seeds=(0, 1, 2),
    template=StudyRun(VARIANTS[0], num_pairs=16, seq_len=256, steps=1000, lr=1e-3, seed=0, vocab_size=8192,
                      d_model=128, tokens_per_step=16384),
    notes=(_KEPT, "Zoology's vocabulary (8,192) and d_model 128 with 2 heads; 16,384 tokens a step."),
)
QUICK = StudySettings(
    grid=((2, 16),), budgets=(20,), rates=(1e-3, 3e-3, 1e-2), seeds=(0, 1, 2),
    template=StudyRun(VARIANTS[0], num_pairs=2, seq_len=16, steps=20, lr=1e-3, seed=0, vocab_size=32, d_model=16,
                      tokens_per_step=256, eval_examples=64),
    variants=(VARIANTS[0], VARIANTS[1], VARIANTS[6]), wider=((), ()),
    notes=("A CI-sized study: seconds, not a measurement.",),
)
