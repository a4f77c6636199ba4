"""The decode suite: generating T tokens one at a time, KV cache against the ledger.

(a) KV cache: k and v caches [B, H, T, d] preallocated; step t writes k_t, v_t and
    attends q_t to cache[:, :, :t+1] with SDPA. Work and bytes in use grow with t.
(b) ``LinearAttentionState().step(q_t, k_t, v_t)``: a constant-size ledger (S, z).
(c) ``bench.baselines.PlainLedger.step``: the same ledger in plain torch, preallocated,
    without checks: the gap between (b) and (c) is the library's per-token bookkeeping.
All decode the same fixed random stream. Every step is timed with ``time.perf_counter``
(synchronised on CUDA), so the latency curve against t is measured, not modelled.

Crossover: a ledger's latency is constant, its median L over all steps; the cache's step reads
t cached keys and grows. The cache counts as slower from the first bin t* from which its binned
median exceeds L in at least ``STAY_ABOVE`` of the later bins: one stalled bin (the scheduler on
a shared machine) neither makes nor breaks a crossing. The band uses the ledger's quartiles in
place of its median.
"""

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from tqdm import tqdm

from course_lib.cost import kv_cache_bytes
from course_lib.state import LinearAttentionState
from course_tools.bench.baselines import PlainLedger
from course_tools.bench.kernels import suite_qkv
from course_tools.bench.timing import synchronize


@dataclass(frozen=True)
class DecodeSettings:
    """What the decode suite runs; stored in the JSON."""

    tokens: int
    window: int = 256  # medians over the first and the last ``window`` steps
    curve_points: int = 128  # the latency curve keeps the median of this many bins
    batch: int = 1
    heads: int = 8
    d: int = 64
    seed: int = 0
    dtype: str = "float32"


FULL = DecodeSettings(tokens=16384)
QUICK = DecodeSettings(tokens=256, window=64, curve_points=32)


def timed_steps(step: Callable[[int], object], tokens: int, device: torch.device, label: str) -> list[float]:
    """Seconds of ``step(t)`` for t = 0 … tokens−1, each timed on its own (the progress bar draws between steps)."""
    seconds = []
    for t in tqdm(range(tokens), desc=label, disable=None, mininterval=0.5):
        synchronize(device)
        start = time.perf_counter()
        step(t)
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return seconds


def summary(seconds: list[float], held: list[int], window: int, points: int) -> dict:
    """Medians of the first and last ``window`` steps and their ratio, quartiles of all steps, bytes held
    at the first and last step, and the curves (median seconds per bin of steps, bytes at each bin's start)."""
    first, last = statistics.median(seconds[:window]), statistics.median(seconds[-window:])
    width = max(1, len(seconds) // points)
    starts = list(range(0, len(seconds), width))
    q25, q50, q75 = statistics.quantiles(seconds, n=4) if len(seconds) > 1 else seconds * 3
    return {"median_first_s": first, "median_last_s": last, "last_over_first": last / first,
            "median_s": q50, "q25_s": q25, "q75_s": q75,
            "bytes_first": held[0], "bytes_last": held[-1], "curve_t": starts,
            "curve_s": [statistics.median(seconds[t : t + width]) for t in starts],
            "curve_bytes": [held[t] for t in starts]}


def decode_kv_cache(q, k, v) -> tuple[list[float], list[int], dict]:
    """KV-cache decoding: per-step seconds, bytes of cache in use after each step, the preallocated total."""
    batch, heads, tokens, d = k.shape
    cache_k, cache_v = torch.zeros_like(k), torch.zeros_like(v)  # [B, H, T, d] each, preallocated

    def step(t: int) -> torch.Tensor:
        cache_k[:, :, t], cache_v[:, :, t] = k[:, :, t], v[:, :, t]
        return F.scaled_dot_product_attention(q[:, :, t : t + 1], cache_k[:, :, : t + 1], cache_v[:, :, : t + 1])

    seconds = timed_steps(step, tokens, k.device, "decode kv cache")
    held = [kv_cache_bytes(batch * heads, t + 1, d, v.shape[-1], k.element_size()) for t in range(tokens)]
    return seconds, held, {"bytes_preallocated": cache_k.nbytes + cache_v.nbytes}


def decode_ledger(q, k, v) -> tuple[list[float], list[int], dict]:
    """``LinearAttentionState.step`` decoding: per-step seconds and ``nbytes`` after each step."""
    state, held = LinearAttentionState(), []

    def step(t: int) -> None:
        state.step(q[:, :, t], k[:, :, t], v[:, :, t])
        held.append(state.nbytes)

    seconds = timed_steps(step, k.shape[-2], k.device, "decode ledger")
    return seconds, held, {"bytes_preallocated": 0}


def decode_plain_ledger(q, k, v) -> tuple[list[float], list[int], dict]:
    """``PlainLedger.step`` decoding: per-step seconds and the (preallocated, constant) bytes of S and z."""
    batch, heads, tokens, d = k.shape
    ledger = PlainLedger((batch, heads), d, v.shape[-1], dtype=k.dtype, device=k.device)

    def step(t: int) -> None:
        ledger.step(q[:, :, t], k[:, :, t], v[:, :, t])

    seconds = timed_steps(step, tokens, k.device, "decode plain ledger")
    return seconds, [ledger.nbytes] * tokens, {"bytes_preallocated": ledger.nbytes}


DECODERS = (("kv_cache", decode_kv_cache), ("ledger", decode_ledger), ("plain_ledger", decode_plain_ledger))


STAY_ABOVE = 0.9  # fraction of the later bins in which the cache must stay slower


def _first_slower(curve_t: list[int], curve_s: list[float], level: float) -> int | None:
    """First curve_t[i] with curve_s[j] > level for at least STAY_ABOVE of the bins j >= i; None if none."""
    above = [s > level for s in curve_s]
    for i, t in enumerate(curve_t):
        later = above[i:]
        if above[i] and sum(later) >= STAY_ABOVE * len(later):
            return t
    return None


def decode_crossover(curve_t: list[int], curve_s: list[float], ledger: dict) -> dict:
    """Where the KV cache's binned latency ``curve_s`` (at token ``curve_t``) overtakes a ledger.

    ``ledger``: a ``summary`` with median_s, q25_s, q75_s. Returns {"t_star", "t_star_low",
    "t_star_high", "status", "rule"}: t* against the median, the band against the quartiles
    (a faster ledger, q25, is overtaken earlier); None where the cache never stays slower.
    """
    if len(curve_t) != len(curve_s) or len(curve_t) < 2:
        raise ValueError(f"curve_t and curve_s must have the same length >= 2, got {len(curve_t)}, {len(curve_s)}")
    at = {key: _first_slower(curve_t, curve_s, ledger[key]) for key in ("median_s", "q25_s", "q75_s")}
    status = "crossed" if at["median_s"] is not None else "cache never stays slower"
    return {"t_star": at["median_s"], "t_star_low": at["q25_s"], "t_star_high": at["q75_s"], "status": status,
            "rule": f"first bin from which the cache is slower in >= {STAY_ABOVE:.0%} of the later bins"}


def run_decode(settings: DecodeSettings, device: torch.device) -> dict:
    """Every decoder on one random stream [B, H, T, d]; latencies, bytes held, crossovers against the cache."""
    q, k, v = suite_qkv(settings, settings.heads, settings.tokens, settings.d, device)
    result = {"settings": asdict(settings)}
    for name, decoder in DECODERS:
        seconds, held, extra = decoder(q, k, v)
        result[name] = summary(seconds, held, settings.window, settings.curve_points) | extra
    cache = result["kv_cache"]
    result["crossovers"] = {name: decode_crossover(cache["curve_t"], cache["curve_s"], result[name])
                            for name in ("ledger", "plain_ledger")}
    return result
