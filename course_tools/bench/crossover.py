"""The crossover suite: time and peak memory of every contender against N, same inputs.

For each head dim d, head count H and length N: one q, k, v [1, H, N, d] fp32 (a seeded
CPU generator, then moved to the device), every contender timed on it ``repeats`` times
(median, min and max are stored: the spread is what a re-run would show), and each linear
contender quoted against the matmul roof of its own FLOPs, timed in the same run.
"""

from dataclasses import asdict, dataclass

import torch
from tqdm import tqdm

from course_lib.attention import linear_attention
from course_lib.fast_forms import auto_chunk_size
from course_lib.measure import time_call
from course_tools.bench.flops import Roof, roof_for, shaped_roof_for
from course_tools.bench.kernels import Contender, suite_qkv
from course_tools.bench.timing import interleaved_times, peak_memory, spread

GIB = 2**30


@dataclass(frozen=True)
class CrossoverSettings:
    """What the sweep covers; stored in the JSON as it ran."""

    ds: tuple[int, ...]
    heads: tuple[int, ...]
    ns: tuple[int, ...]
    memory_budget_bytes: int  # skip a contender whose estimated n×n memory exceeds this
    recurrent_max_n: int  # the per-token Python loop is skipped beyond this N
    min_run_time: float  # seconds per torch.utils.benchmark measurement (one repeat)
    repeats: int = 5  # timings per contender and size: median, min, max stored
    chunk_sizes: tuple[int, ...] = (16, 32, 64, 128, 256)  # the causal chunk sweep, at the largest N and H
    batch: int = 1
    seed: int = 0
    dtype: str = "float32"


SHORT_NS = (64, 96, 128, 192, 256, 384, 512, 768, 1024)  # dense where the crossovers sit
FULL = CrossoverSettings(  # 1 GiB: the explicit softmax's multi-GiB sizes made the machine slow for minutes after
    ds=(32, 64, 128), heads=(1, 8), ns=SHORT_NS + tuple(2**p for p in range(11, 15)),
    memory_budget_bytes=1 * GIB, recurrent_max_n=2048, min_run_time=0.1, repeats=5,
)
QUICK = CrossoverSettings(
    ds=(32, 64), heads=(8,), ns=(64, 512),
    memory_budget_bytes=4 * GIB, recurrent_max_n=256, min_run_time=0.01, repeats=2,
)


def skip_reason(contender: Contender, settings: CrossoverSettings, bh: int, n: int, itemsize: int) -> str | None:
    """Why ``contender`` is not run at this size, or None."""
    if contender.python_loop and n > settings.recurrent_max_n:
        return f"per-token Python loop: capped at N <= {settings.recurrent_max_n} (its time only grows linearly in N)"
    estimate = contender.dense_bytes(bh, n, itemsize)
    if estimate > settings.memory_budget_bytes:
        budget = settings.memory_budget_bytes / GIB
        return f"estimated n x n memory {estimate / GIB:.1f} GiB exceeds the budget of {budget:.1f} GiB"
    return None


class RoofTimer:
    """Times each roof matmul a [BH, M, K] @ b [BH, K, P] once per shape and reuses the time."""

    def __init__(self, device: torch.device, min_run_time: float):
        self.device, self.min_run_time, self.cache = device, min_run_time, {}

    def seconds(self, roof: Roof) -> float:
        """Seconds the roof matmul would take for exactly the kernel's FLOPs."""
        key = (roof.bh, roof.m, roof.k, roof.p)
        if key not in self.cache:
            generator = torch.Generator().manual_seed(0)
            a = torch.randn(roof.bh, roof.m, roof.k, generator=generator).to(self.device)  # [BH, M, K]
            b = torch.randn(roof.bh, roof.k, roof.p, generator=generator).to(self.device)  # [BH, K, P]
            self.cache[key] = time_call(lambda: torch.bmm(a, b), min_run_time=self.min_run_time)
        return self.cache[key] * roof.scale


def measure_one(contender: Contender, q, k, v, roof_timer: RoofTimer, seconds: list[float]) -> dict:
    """The record of one contender at one size from its repeated timings ``seconds``: time (median,
    min, max, the repeats), peak memory of one call, FLOPs and, for linear routes, the fraction of
    the matmul roofs (at the median time)."""
    batch, heads, n, d = q.shape
    timing, peak = spread(seconds), peak_memory(contender.make(q, k, v), q.device)
    median, flops = timing["time_s"], batch * heads * contender.flops(n, d)
    record = timing | {"peak_bytes": peak, "flops": flops, "gflop_per_s": flops / median / 1e9}
    if contender.route == "linear":
        for key, roof in (("roof", roof_for(flops, batch * heads)), ("shaped_roof", shaped_roof_for(flops, batch * heads, n, d))):
            roof_seconds = roof_timer.seconds(roof)
            record[key] = {"matmul": [roof.bh, roof.m, roof.k, roof.p], "time_s": roof_seconds,
                           "gflop_per_s": flops / roof_seconds / 1e9, "fraction": roof_seconds / median}
    return record


def warm_up(contenders: list[Contender], settings: CrossoverSettings, device: torch.device) -> None:
    """One untimed call of each contender at the smallest size: thread pools and lazy inits start here."""
    q, k, v = suite_qkv(settings, max(settings.heads), min(settings.ns), max(settings.ds), device)
    for contender in contenders:
        contender.make(q, k, v)()


def run_crossover(settings: CrossoverSettings, device: torch.device, contenders: list[Contender]) -> dict:
    """The sweep: {"settings": ..., "records": [one dict per (d, heads, n, contender)]}."""
    configs = [(d, h, n) for d in settings.ds for h in settings.heads for n in settings.ns]
    roof_timer = RoofTimer(device, settings.min_run_time)
    warm_up(contenders, settings, device)
    records = []
    for d, heads, n in tqdm(configs, desc="crossover", disable=None):
        q, k, v = suite_qkv(settings, heads, n, d, device)
        reasons = {c.name: skip_reason(c, settings, settings.batch * heads, n, q.element_size()) for c in contenders}
        calls = {c.name: c.make(q, k, v) for c in contenders if reasons[c.name] is None}
        seconds = interleaved_times(calls, device, repeats=settings.repeats, min_run_time=settings.min_run_time)
        for contender in contenders:
            base = {"d": d, "heads": heads, "n": n, "name": contender.name, "route": contender.route,
                    "causal": contender.causal}
            reason = reasons[contender.name]
            measured = {"skipped": reason} if reason else measure_one(contender, q, k, v, roof_timer,
                                                                       seconds[contender.name])
            records.append(base | measured)
    return {"settings": asdict(settings), "records": records}


def run_chunk_sweep(settings: CrossoverSettings, device: torch.device) -> dict:
    """Causal ``linear_attention`` time against the chunk size C, per d, at the largest N and H (the
    evidence behind ``auto_chunk_size``): {"n", "heads", "auto": {d: C}, "records": [{d, chunk, time_s}]}."""
    n, heads = max(settings.ns), max(settings.heads)
    records, bar = [], tqdm(total=len(settings.ds) * len(settings.chunk_sizes), desc="chunk sweep", disable=None)
    for d in settings.ds:
        q, k, v = suite_qkv(settings, heads, n, d, device)
        for chunk in settings.chunk_sizes:
            call = lambda: linear_attention(q, k, v, causal=True, chunk_size=chunk)  # noqa: E731
            seconds = time_call(call, min_run_time=settings.min_run_time * settings.repeats)
            records.append({"d": d, "chunk": chunk, "time_s": seconds})
            bar.update()
    bar.close()
    return {"n": n, "heads": heads, "auto": {str(d): auto_chunk_size(n, d, d) for d in settings.ds}, "records": records}
