"""The performance targets of issue 5, as pure functions of measured ratios.

All at B = 1, H = 8, d = 64, fp32:
1. causal linear attention ("auto") ≥ 15× faster than SDPA causal at N = 8192;
2. causal "auto" ≤ 1.3× the time of non-causal linear at every measured N ≥ 4096;
3. causal "auto" reaches ≥ 50 % of the same-run matmul roof at N = 8192 (executed FLOPs);
4. ledger decoding: median latency of the last 256 tokens ≤ 1.2× the first 256, and
   ``nbytes`` equal at the first and last step.
A quick run measures smaller sizes: the ratios are computed at its largest N (targets
1, 3) and N ≥ half of it (target 2) but reported as "SKIP (quick run)".
"""

from dataclasses import dataclass, field

TARGET_SHAPE = {"heads": 8, "d": 64}
TARGET_N = 8192
MIN_SPEEDUP, MAX_CAUSAL_OVERHEAD, MIN_ROOF_FRACTION, MAX_DECODE_DRIFT = 15.0, 1.3, 0.5, 1.2


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


def _verdict(name: str, value, limit: str, passed: bool | None, quick: bool, **extra) -> dict:
    status = "NOT MEASURED" if passed is None else "SKIP (quick run)" if quick else "PASS" if passed else "FAIL"
    return {"target": name, "value": value, "limit": limit, "passed": passed, "status": status} | extra


def evaluate_targets(inputs: TargetInputs, *, quick: bool) -> list[dict]:
    """One verdict per target: value, limit, passed (None if not measured) and status."""
    speedup, overheads = inputs.causal_speedup, inputs.causal_over_noncausal
    worst = max(overheads.values()) if overheads else None
    roof = inputs.roof_fraction_causal
    drift = inputs.decode_last_over_first
    bytes_equal = None if inputs.ledger_bytes_first is None else inputs.ledger_bytes_first == inputs.ledger_bytes_last
    return [
        _verdict("1 causal auto vs SDPA causal speedup", speedup, f">= {MIN_SPEEDUP}",
                 None if speedup is None else speedup >= MIN_SPEEDUP, quick, at_n=inputs.at_n),
        _verdict("2 causal auto / non-causal linear time (worst N)", worst, f"<= {MAX_CAUSAL_OVERHEAD}",
                 None if worst is None else worst <= MAX_CAUSAL_OVERHEAD, quick,
                 per_n={str(n): ratio for n, ratio in sorted(overheads.items())}),
        _verdict("3 causal auto fraction of matmul roof", roof, f">= {MIN_ROOF_FRACTION}",
                 None if roof is None else roof >= MIN_ROOF_FRACTION, quick, at_n=inputs.at_n,
                 noncausal_fraction=inputs.roof_fraction_noncausal),
        _verdict("4 ledger decode latency last/first, nbytes constant", drift, f"<= {MAX_DECODE_DRIFT}, equal bytes",
                 None if drift is None or bytes_equal is None else drift <= MAX_DECODE_DRIFT and bytes_equal, quick,
                 bytes_first=inputs.ledger_bytes_first, bytes_last=inputs.ledger_bytes_last),
    ]


def target_inputs(crossover: dict | None, decode: dict | None, *, quick: bool) -> TargetInputs:
    """Pick the target numbers out of the suites' results (either may be None: not run)."""
    values = {}
    if crossover is not None:
        runs = {(r["name"], r["n"]): r for r in crossover["records"]
                if not r.get("skipped") and all(r[key] == value for key, value in TARGET_SHAPE.items())}
        ns = sorted({n for _, n in runs})
        at_n = max([n for n in ns if n <= TARGET_N], default=None) if quick else TARGET_N
        auto, sdpa, linear = (runs.get((name, at_n)) for name in ("linear_causal_auto", "sdpa_causal", "linear"))
        values = {
            "at_n": at_n,
            "causal_speedup": sdpa["time_s"] / auto["time_s"] if auto and sdpa else None,
            "causal_over_noncausal": {n: runs[("linear_causal_auto", n)]["time_s"] / runs[("linear", n)]["time_s"]
                                      for n in ns if at_n and n >= at_n // 2
                                      and ("linear_causal_auto", n) in runs and ("linear", n) in runs},
            "roof_fraction_causal": auto["roof"]["fraction"] if auto else None,
            "roof_fraction_noncausal": linear["roof"]["fraction"] if linear else None,
        }
    if decode is not None:
        ledger = decode["ledger"]
        values |= {"decode_last_over_first": ledger["last_over_first"], "ledger_bytes_first": ledger["bytes_first"],
                   "ledger_bytes_last": ledger["bytes_last"]}
    return TargetInputs(**values)
