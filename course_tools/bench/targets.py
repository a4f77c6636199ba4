"""The performance targets, as one table: each row names the measurement it judges, how it compares
with its limit, and why that limit.

All at B = 1, H = 8, d = 64, fp32, each ratio from numbers measured in the same run. ``measurements``
picks the numbers out of the suites' results (a flat dict; a number that is None or absent was not
measured) and ``evaluate_targets`` judges every row on them. A quick run measures smaller sizes: the
ratios are computed there (the largest N up to the target's, recorded as ``at_n``) but reported as
"SKIP (quick run)".
"""

import operator
from dataclasses import dataclass, field

TARGET_SHAPE = {"heads": 8, "d": 64}
SPEEDUP_N, MEMORY_N = 8192, 16384
COMPARISONS = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Target:
    """A row: ``name`` passes when ``measurements[measured] <comparison> limit``."""

    name: str
    measured: str  # the key of ``measurements`` it judges
    comparison: str  # a key of COMPARISONS
    limit: float
    why: str
    details: dict[str, str] = field(default_factory=dict)  # verdict key -> the measurement shown beside the value
    also: tuple[str, str] | None = None  # (a measurement that must be true as well, its words in the limit)
    ran: str | None = None  # the measurement that says it ran, where a None value is itself a result (never)


TARGETS = (
    Target("causal linear / SDPA causal speedup", "causal_speedup", ">=", 15.0,
           "causal linear attention (method 'auto') at least 15x faster than SDPA causal at N = 8192",
           details={"at_n": "at_n"}),
    Target("causal / non-causal linear time (worst N)", "worst_causal_over_noncausal", "<=", 1.3,
           "causality costs at most 1.3x the non-causal call's time, at every measured N >= 4096",
           details={"per_n": "causal_over_noncausal"}),
    Target("causal linear fraction of the matmul roof", "roof_fraction_causal", ">=", 0.5,
           "the causal call reaches half the same-run matmul roof at N = 8192",
           details={"at_n": "at_n", "noncausal_fraction": "roof_fraction_noncausal"}),
    Target("ledger decode latency last/first, bytes constant", "decode_last_over_first", "<=", 1.2,
           "a ledger's step does not grow with the tokens behind it: the median latency of the last 256 tokens "
           "within 1.2x the first 256's, and the same nbytes at the first and last step",
           details={"bytes_first": "ledger_bytes_first", "bytes_last": "ledger_bytes_last"},
           also=("ledger_bytes_constant", "equal bytes")),
    Target("causal call time outside the matmuls (share)", "outside_matmul_share", "<=", 0.2,
           "at most a fifth of the causal call outside its matrix products at N = 8192; beside it exp_share (one "
           "exp over q and k, of the call) and floor_share = exp / (matmuls + exp), the least share of a call doing "
           "the same matmuls and elu + 1's one unavoidable exp pass: above 0.2, eager kernels cannot meet it there",
           details={"at_n": "profile_n", "exp_share": "exp_share", "floor_share": "floor_share"}),
    Target("decayed causal time, 4x the tokens / 1x", "decay_long_over_short", "<=", 4.5,
           "the decayed causal call stays linear in N: time(65536) / time(16384) near 4",
           details={"ns": "decay_ns"}),
    Target("decayed / undecayed causal time", "decay_over_undecayed", "<=", 1.3,
           "a decay costs at most 1.3x the undecayed call at N = 65536", details={"at_n": "decay_long_n"}),
    Target("causal forward+backward / forward time", "backward_over_forward", "<=", 3.0,
           "forward and backward together at most 3x the forward at N = 4096",
           details={"at_n": "backward_n", "note": "backward_error"}),
    Target("ledger step latency, us per token (median)", "step_us", "<=", 40.0,
           "LinearAttentionState.step at most 40 us per token, median over the decode"),
    Target("KV cache slower than the ledger from token t*", "ledger_faster_from", "<=", 512,
           "the KV cache is slower than the ledger for good from <= 512 cached tokens; a cache that never is fails",
           details={"note": "ledger_crossover_status"}, ran="ledger_crossover_status"),
    Target("causal prefill peak memory / SDPA causal's", "prefill_memory_ratio", "<=", 1.2,
           "causal prefill's peak memory at most 1.2x SDPA causal's at N = 16384", details={"at_n": "memory_n"}),
    Target("gated chunked / recurrent speedup, per-channel gate", "gated_speedup_per_channel", ">=", 10.0,
           "gated_linear_attention's chunked form (GLA's two levels) at least 10x faster than the recurrence at "
           "N = 4096", details={"at_n": "gated_n"}),
    Target("gated chunked / recurrent speedup, scalar gate", "gated_speedup_scalar", ">=", 10.0,
           "the chunked form with one gate per token (Mamba-2) at least 10x faster than the recurrence at N = 4096",
           details={"at_n": "gated_n"}),
    Target("gated chunked forward+backward / forward, per-channel", "gated_backward_per_channel", "<=", 3.5,
           "forward and backward through q, k, v and the gate at most 3.5x the chunked forward at N = 4096",
           details={"at_n": "gated_n"}),
    Target("gated chunked forward+backward / forward, scalar", "gated_backward_scalar", "<=", 3.5,
           "the same with one gate per token", details={"at_n": "gated_n"}),
    Target("fla naive_chunk_simple_gla / gated chunked scalar time", "fla_simple_gla_over_ours", ">=", 1.0,
           "the chunked scalar gate at least as fast as fla's pure-torch reference on the same shapes, when fla "
           "imports and its output matches ours",
           details={"at_n": "gated_n", "fla": "fla_version", "note": "fla_simple_gla_note"}),
    Target("fla naive_chunk_gated_delta_rule / gated delta chunked time", "fla_gated_delta_over_ours", ">=", 1.0,
           "the chunked gated delta rule at least as fast as fla's pure-torch reference on the same shapes",
           details={"at_n": "gated_n", "fla": "fla_version", "note": "fla_gated_delta_note"}),
)


def verdict(target: Target, measured: dict, *, quick: bool) -> dict:
    """``target`` judged on ``measured``: value, limit, passed (None: not measured), status, why, and the
    details that were measured."""
    value = measured.get(target.measured)
    also, words = target.also or (None, "")
    ran = measured.get(target.ran or target.measured) is not None and (also is None or measured.get(also) is not None)
    passed = bool(value is not None and COMPARISONS[target.comparison](value, target.limit)
                  and (also is None or measured[also])) if ran else None
    status = "NOT MEASURED" if passed is None else "SKIP (quick run)" if quick else "PASS" if passed else "FAIL"
    limit = f"{target.comparison} {target.limit}" + (f", {words}" if words else "")
    details = {key: measured[name] for key, name in target.details.items() if measured.get(name) is not None}
    return {"target": target.name, "value": value, "limit": limit, "passed": passed, "status": status,
            "why": target.why} | details


def evaluate_targets(measured: dict, *, quick: bool) -> list[dict]:
    """One verdict per row of TARGETS."""
    return [verdict(target, measured, quick=quick) for target in TARGETS]


def _largest_up_to(ns: list[int], target_n: int, quick: bool) -> int | None:
    """The N a target is judged at: its own N in a full run, the largest measured N up to it in a quick one."""
    return max([n for n in ns if n <= target_n], default=None) if quick else target_n


def _crossover_measurements(crossover: dict, quick: bool) -> dict:
    runs = {(r["name"], r["n"]): r for r in crossover["records"]
            if not r.get("skipped") and all(r[key] == value for key, value in TARGET_SHAPE.items())}
    ns = sorted({n for _, n in runs})
    at_n, memory_n = _largest_up_to(ns, SPEEDUP_N, quick), _largest_up_to(ns, MEMORY_N, quick)
    auto, sdpa, linear = (runs.get((name, at_n)) for name in ("linear_causal_auto", "sdpa_causal", "linear"))
    auto_memory, sdpa_memory = (runs.get((name, memory_n)) for name in ("linear_causal_auto", "sdpa_causal"))
    overheads = {n: runs[("linear_causal_auto", n)]["time_s"] / runs[("linear", n)]["time_s"]
                 for n in ns if at_n and n >= at_n // 2 and ("linear_causal_auto", n) in runs and ("linear", n) in runs}
    return {
        "at_n": at_n,
        "causal_speedup": sdpa["time_s"] / auto["time_s"] if auto and sdpa else None,
        "causal_over_noncausal": {str(n): ratio for n, ratio in overheads.items()},  # N -> causal / non-causal
        "worst_causal_over_noncausal": max(overheads.values(), default=None),
        "roof_fraction_causal": auto["roof"]["fraction"] if auto else None,
        "roof_fraction_noncausal": linear["roof"]["fraction"] if linear else None,
        "memory_n": memory_n,
        "prefill_memory_ratio": auto_memory["peak_bytes"] / sdpa_memory["peak_bytes"]
        if auto_memory and sdpa_memory and sdpa_memory["peak_bytes"] > 0 else None,
    }


def _decode_measurements(decode: dict) -> dict:
    ledger, crossing = decode["ledger"], decode["crossovers"]["ledger"]
    first, last = ledger["bytes_first"], ledger["bytes_last"]
    return {"decode_last_over_first": ledger["last_over_first"], "ledger_bytes_first": first,
            "ledger_bytes_last": last, "ledger_bytes_constant": first == last,
            "step_us": ledger["median_s"] * 1e6,  # median LinearAttentionState.step latency
            "ledger_faster_from": crossing["t_star"], "ledger_crossover_status": crossing["status"]}


def _engine_measurements(engine: dict) -> dict:
    profile, decay, backward = engine["profile"], engine["decay"], engine["backward"]
    short, long = decay["ns"]
    return {"profile_n": profile["n"], "outside_matmul_share": profile["outside_share"],
            "exp_share": profile.get("exp_share"), "floor_share": floor_share(profile),
            "decay_ns": f"{long}/{short}", "decay_long_n": long, "decay_long_over_short": decay["long_over_short"],
            "decay_over_undecayed": decay["decayed_over_undecayed"], "backward_n": backward["n"],
            "backward_over_forward": backward.get("ratio"), "backward_error": backward.get("error")}


def floor_share(profile: dict) -> float | None:
    """exp_s / (matmul_s + exp_s): the share outside the matmuls of a call that did nothing else but the
    profiled matmuls and one exp over q and k (elu + 1 needs that exp); None without an exp measurement."""
    if profile.get("exp_s") is None:
        return None
    return profile["exp_s"] / (profile["matmul_s"] + profile["exp_s"])


def _gated_measurements(gated: dict) -> dict:
    speedup, backward, peers = gated["speedup"], gated["backward"], gated["peers"]
    measured = {"gated_n": gated["settings"]["n"]}
    for gate in ("per_channel", "scalar"):
        measured |= {f"gated_speedup_{gate}": speedup[gate]["ratio"], f"gated_backward_{gate}": backward[gate]["ratio"]}
    for peer in ("simple_gla", "gated_delta"):  # the note says why a peer was not timed
        entry = peers.get(peer, {})
        note = entry.get("error", None if "ratio" in entry else peers["note"])
        measured |= {f"fla_{peer}_over_ours": entry.get("ratio"), f"fla_{peer}_note": note}
    return measured | {"fla_version": peers["version"]}


def measurements(crossover: dict | None, decode: dict | None, engine: dict | None, gated: dict | None = None, *,
                 quick: bool) -> dict:
    """The numbers the targets judge, picked out of the suites' results (any may be None: not run)."""
    measured = {}
    if gated is not None:
        measured |= _gated_measurements(gated)
    if crossover is not None:
        measured |= _crossover_measurements(crossover, quick)
    if decode is not None:
        measured |= _decode_measurements(decode)
    if engine is not None:
        measured |= _engine_measurements(engine)
    return measured
