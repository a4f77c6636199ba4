"""The performance targets, as pure functions of measured ratios: one function per target.

All at B = 1, H = 8, d = 64, fp32, each ratio from numbers measured in the same run:

* ``causal_speedup``: causal linear attention ("auto") ≥ 15× faster than SDPA causal at N = 8192;
* ``causal_overhead``: causal "auto" ≤ 1.3× the time of non-causal linear at every measured N ≥ 4096;
* ``roof_fraction``: causal "auto" reaches ≥ 50 % of the same-run matmul roof at N = 8192;
* ``decode_drift``: ledger decoding, median latency of the last 256 tokens ≤ 1.2× the first 256,
  and ``nbytes`` equal at the first and last step;
* ``outside_matmuls``: ≤ 20 % of the causal call's time outside its matrix products at N = 8192
  (shown beside it: ``exp_share``, one exp over q and k as a share of the call, and
  ``floor_share`` = exp / (matmuls + exp), the least share that a call doing the same matmuls
  and elu + 1's one unavoidable exp pass could have; a floor above 0.2 means the target cannot
  be met by eager kernels on that machine);
* ``decay_scaling``: the decayed causal call, time(65536) / time(16384) ≤ 4.5 (linear in N: 4);
* ``decay_overhead``: decayed ≤ 1.3× undecayed at N = 65536;
* ``backward_cost``: causal forward + backward ≤ 3× the forward at N = 4096;
* ``step_latency``: ``LinearAttentionState.step`` ≤ 40 µs per token (median over the decode);
* ``ledger_crossover``: the KV cache is slower than the ledger for good from ≤ 512 cached tokens;
* ``prefill_memory``: causal "auto" peak memory ≤ 1.2× SDPA causal's at N = 16384.

A quick run measures smaller sizes: the ratios are computed there (the largest N up to the
target's, recorded as ``at_n``) but reported as "SKIP (quick run)".
"""

from collections.abc import Callable
from dataclasses import dataclass, field

TARGET_SHAPE = {"heads": 8, "d": 64}
SPEEDUP_N, MEMORY_N = 8192, 16384
MIN_SPEEDUP, MAX_CAUSAL_OVERHEAD, MIN_ROOF_FRACTION, MAX_DECODE_DRIFT = 15.0, 1.3, 0.5, 1.2
MAX_OUTSIDE_SHARE, MAX_DECAY_SCALING, MAX_DECAY_OVERHEAD, MAX_BACKWARD_COST = 0.2, 4.5, 1.3, 3.0
MAX_STEP_US, MAX_LEDGER_CROSSOVER, MAX_PREFILL_MEMORY = 40.0, 512, 1.2


@dataclass(frozen=True)
class TargetInputs:
    """The measured numbers the targets judge; None where the suite did not run or the size was skipped."""

    at_n: int | None = None
    causal_speedup: float | None = None  # SDPA causal time / causal auto time at at_n
    causal_over_noncausal: dict[int, float] = field(default_factory=dict)  # N -> causal auto / non-causal
    roof_fraction_causal: float | None = None
    roof_fraction_noncausal: float | None = None
    decode_last_over_first: float | None = None
    ledger_bytes_first: int | None = None
    ledger_bytes_last: int | None = None
    profile_n: int | None = None
    outside_matmul_share: float | None = None  # of the causal call at profile_n
    exp_share: float | None = None  # one exp over q and k alone, of the same call
    floor_share: float | None = None  # exp / (matmuls + exp): the least share any eager call could have
    decay_ns: tuple[int, int] | None = None
    decay_long_over_short: float | None = None
    decay_over_undecayed: float | None = None  # at the long N
    backward_n: int | None = None
    backward_over_forward: float | None = None  # (forward + backward) / forward
    backward_error: str | None = None  # "not measured: ..." when the backward raised
    step_us: float | None = None  # median LinearAttentionState.step latency
    ledger_faster_from: int | None = None  # t*: the cache is slower from this many cached tokens on
    ledger_crossover_status: str | None = None
    memory_n: int | None = None
    prefill_memory_ratio: float | None = None  # causal auto peak / SDPA causal peak at memory_n


def _verdict(name: str, value, limit: str, passed: bool | None, quick: bool, **extra) -> dict:
    status = "NOT MEASURED" if passed is None else "SKIP (quick run)" if quick else "PASS" if passed else "FAIL"
    return {"target": name, "value": value, "limit": limit, "passed": passed, "status": status} | extra


def _at_most(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def causal_speedup(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.causal_speedup
    return _verdict("causal linear / SDPA causal speedup", value, f">= {MIN_SPEEDUP}",
                    None if value is None else value >= MIN_SPEEDUP, quick, at_n=inputs.at_n)


def causal_overhead(inputs: TargetInputs, *, quick: bool) -> dict:
    overheads = inputs.causal_over_noncausal
    worst = max(overheads.values()) if overheads else None
    return _verdict("causal / non-causal linear time (worst N)", worst, f"<= {MAX_CAUSAL_OVERHEAD}",
                    _at_most(worst, MAX_CAUSAL_OVERHEAD), quick,
                    per_n={str(n): ratio for n, ratio in sorted(overheads.items())})


def roof_fraction(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.roof_fraction_causal
    return _verdict("causal linear fraction of the matmul roof", value, f">= {MIN_ROOF_FRACTION}",
                    None if value is None else value >= MIN_ROOF_FRACTION, quick, at_n=inputs.at_n,
                    noncausal_fraction=inputs.roof_fraction_noncausal)


def decode_drift(inputs: TargetInputs, *, quick: bool) -> dict:
    drift, first, last = inputs.decode_last_over_first, inputs.ledger_bytes_first, inputs.ledger_bytes_last
    passed = None if drift is None or first is None else drift <= MAX_DECODE_DRIFT and first == last
    return _verdict("ledger decode latency last/first, bytes constant", drift,
                    f"<= {MAX_DECODE_DRIFT}, equal bytes", passed, quick, bytes_first=first, bytes_last=last)


def outside_matmuls(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.outside_matmul_share
    return _verdict("causal call time outside the matmuls (share)", value, f"<= {MAX_OUTSIDE_SHARE}",
                    _at_most(value, MAX_OUTSIDE_SHARE), quick, at_n=inputs.profile_n, exp_share=inputs.exp_share,
                    floor_share=inputs.floor_share)


def decay_scaling(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.decay_long_over_short
    ns = inputs.decay_ns
    return _verdict("decayed causal time, 4x the tokens / 1x", value, f"<= {MAX_DECAY_SCALING}",
                    _at_most(value, MAX_DECAY_SCALING), quick, ns=None if ns is None else f"{ns[1]}/{ns[0]}")


def decay_overhead(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.decay_over_undecayed
    return _verdict("decayed / undecayed causal time", value, f"<= {MAX_DECAY_OVERHEAD}",
                    _at_most(value, MAX_DECAY_OVERHEAD), quick,
                    at_n=None if inputs.decay_ns is None else inputs.decay_ns[1])


def backward_cost(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.backward_over_forward
    extra = {"note": inputs.backward_error} if inputs.backward_error else {}
    return _verdict("causal forward+backward / forward time", value, f"<= {MAX_BACKWARD_COST}",
                    _at_most(value, MAX_BACKWARD_COST), quick, at_n=inputs.backward_n, **extra)


def step_latency(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.step_us
    return _verdict("ledger step latency, us per token (median)", value, f"<= {MAX_STEP_US}",
                    _at_most(value, MAX_STEP_US), quick)


def ledger_crossover(inputs: TargetInputs, *, quick: bool) -> dict:
    """The cache must stay slower than the ledger from t* ≤ 512 on; a cache that never does fails."""
    value, status = inputs.ledger_faster_from, inputs.ledger_crossover_status
    passed = None if status is None else value is not None and value <= MAX_LEDGER_CROSSOVER
    return _verdict("KV cache slower than the ledger from token t*", value, f"<= {MAX_LEDGER_CROSSOVER}",
                    passed, quick, note=status)


def prefill_memory(inputs: TargetInputs, *, quick: bool) -> dict:
    value = inputs.prefill_memory_ratio
    return _verdict("causal prefill peak memory / SDPA causal's", value, f"<= {MAX_PREFILL_MEMORY}",
                    _at_most(value, MAX_PREFILL_MEMORY), quick, at_n=inputs.memory_n)


TARGETS: tuple[Callable[..., dict], ...] = (
    causal_speedup, causal_overhead, roof_fraction, decode_drift, outside_matmuls, decay_scaling, decay_overhead,
    backward_cost, step_latency, ledger_crossover, prefill_memory,
)


def evaluate_targets(inputs: TargetInputs, *, quick: bool) -> list[dict]:
    """One verdict per target: value, limit, passed (None if not measured) and status."""
    return [target(inputs, quick=quick) for target in TARGETS]


def _largest_up_to(ns: list[int], target_n: int, quick: bool) -> int | None:
    """The N a target is judged at: its own N in a full run, the largest measured N up to it in a quick one."""
    return max([n for n in ns if n <= target_n], default=None) if quick else target_n


def _crossover_inputs(crossover: dict, quick: bool) -> dict:
    runs = {(r["name"], r["n"]): r for r in crossover["records"]
            if not r.get("skipped") and all(r[key] == value for key, value in TARGET_SHAPE.items())}
    ns = sorted({n for _, n in runs})
    at_n, memory_n = _largest_up_to(ns, SPEEDUP_N, quick), _largest_up_to(ns, MEMORY_N, quick)
    auto, sdpa, linear = (runs.get((name, at_n)) for name in ("linear_causal_auto", "sdpa_causal", "linear"))
    auto_memory, sdpa_memory = (runs.get((name, memory_n)) for name in ("linear_causal_auto", "sdpa_causal"))
    return {
        "at_n": at_n,
        "causal_speedup": sdpa["time_s"] / auto["time_s"] if auto and sdpa else None,
        "causal_over_noncausal": {n: runs[("linear_causal_auto", n)]["time_s"] / runs[("linear", n)]["time_s"]
                                  for n in ns if at_n and n >= at_n // 2
                                  and ("linear_causal_auto", n) in runs and ("linear", n) in runs},
        "roof_fraction_causal": auto["roof"]["fraction"] if auto else None,
        "roof_fraction_noncausal": linear["roof"]["fraction"] if linear else None,
        "memory_n": memory_n,
        "prefill_memory_ratio": auto_memory["peak_bytes"] / sdpa_memory["peak_bytes"]
        if auto_memory and sdpa_memory and sdpa_memory["peak_bytes"] > 0 else None,
    }


def _decode_inputs(decode: dict) -> dict:
    ledger, crossing = decode["ledger"], decode["crossovers"]["ledger"]
    return {"decode_last_over_first": ledger["last_over_first"], "ledger_bytes_first": ledger["bytes_first"],
            "ledger_bytes_last": ledger["bytes_last"], "step_us": ledger["median_s"] * 1e6,
            "ledger_faster_from": crossing["t_star"], "ledger_crossover_status": crossing["status"]}


def _engine_inputs(engine: dict) -> dict:
    profile, decay, backward = engine["profile"], engine["decay"], engine["backward"]
    return {"profile_n": profile["n"], "outside_matmul_share": profile["outside_share"],
            "exp_share": profile.get("exp_share"), "floor_share": floor_share(profile),
            "decay_ns": tuple(decay["ns"]), "decay_long_over_short": decay["long_over_short"],
            "decay_over_undecayed": decay["decayed_over_undecayed"], "backward_n": backward["n"],
            "backward_over_forward": backward.get("ratio"), "backward_error": backward.get("error")}


def floor_share(profile: dict) -> float | None:
    """exp_s / (matmul_s + exp_s): the share outside the matmuls of a call that did nothing else but the
    profiled matmuls and one exp over q and k (elu + 1 needs that exp); None without an exp measurement."""
    if profile.get("exp_s") is None:
        return None
    return profile["exp_s"] / (profile["matmul_s"] + profile["exp_s"])


def target_inputs(crossover: dict | None, decode: dict | None, engine: dict | None, *, quick: bool) -> TargetInputs:
    """Pick the target numbers out of the suites' results (any may be None: not run)."""
    values = {}
    if crossover is not None:
        values |= _crossover_inputs(crossover, quick)
    if decode is not None:
        values |= _decode_inputs(decode)
    if engine is not None:
        values |= _engine_inputs(engine)
    return TargetInputs(**values)
