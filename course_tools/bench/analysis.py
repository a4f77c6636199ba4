"""From the crossover records to ratios, crossover lengths N* and how N* scales with d.

The FLOP model: softmax costs 2N²(d + dv), linear 4Nf·dv; with f = dv = d their
ratio is 2N²·2d / 4Nd² = N/d, so the model puts the crossover at N* = d (N* ∝ d).
Measured crossovers sit elsewhere (constants, memory traffic, kernel quality); the
exponent of N* against d says whether the proportionality survives.
"""

import math

from course_lib.measure import fit_power_law


def crossover_n(ns: list[int], ratios: list[float]) -> tuple[float | None, str]:
    """Where the time ratio (softmax / linear) first rises through 1, log-interpolated.

    Between consecutive points with r_i < 1 ≤ r_{i+1}:
        log N* = log N_i + (0 − log r_i) · (log N_{i+1} − log N_i) / (log r_{i+1} − log r_i).
    Returns (N*, "crossed"), or (None, "linear faster at every N") when r ≥ 1 from the
    first point on, or (None, "softmax faster at every N") when r never reaches 1.
    """
    if len(ns) != len(ratios):
        raise ValueError(f"ns and ratios must have the same length, got {len(ns)} and {len(ratios)}")
    if not ns:
        return None, "no measurements"
    if ratios[0] >= 1:
        return None, "linear faster at every N"
    for (n0, r0), (n1, r1) in zip(zip(ns, ratios), zip(ns[1:], ratios[1:])):
        if r0 < 1 <= r1:
            log_n = math.log(n0) - math.log(r0) * (math.log(n1) - math.log(n0)) / (math.log(r1) - math.log(r0))
            return math.exp(log_n), "crossed"
    return None, "softmax faster at every N"


def _times(records: list[dict]) -> dict[tuple[int, int, int, str], dict]:
    """{(d, heads, n, name): (median, min, max) seconds}; records without a spread count as min = max."""
    return {(r["d"], r["heads"], r["n"], r["name"]): (r["time_s"], r.get("time_min_s", r["time_s"]),
                                                     r.get("time_max_s", r["time_s"]))
            for r in records if not r.get("skipped")}


def ratio_rows(records: list[dict], pairings) -> list[dict]:
    """One row per (pairing, d, heads, n) where both routes ran: times, measured and model ratio.

    ``ratio`` is median / median; ``ratio_min`` = slowest-linear pairing (softmax min / linear max)
    and ``ratio_max`` = softmax max / linear min bound what any pair of repeats could have shown.
    """
    times = _times(records)
    rows = []
    for slow, fast in pairings:
        for d, heads, n, name in sorted(times):
            if name != slow or (d, heads, n, fast) not in times:
                continue
            (s_med, s_min, s_max), (l_med, l_min, l_max) = times[(d, heads, n, slow)], times[(d, heads, n, fast)]
            rows.append({"pair": f"{slow}/{fast}", "d": d, "heads": heads, "n": n, "softmax_time_s": s_med,
                         "linear_time_s": l_med, "ratio": s_med / l_med, "ratio_min": s_min / l_max,
                         "ratio_max": s_max / l_min, "model_ratio": n / d})
    return rows


def crossovers(rows: list[dict]) -> list[dict]:
    """N* per (pair, heads, d) from the ratio rows: ``n_star`` from the median ratios, and the band
    ``n_star_low`` (from ``ratio_max``: the earliest crossing the repeats allow) to ``n_star_high``
    (from ``ratio_min``); None where that curve does not cross inside the measured N."""
    groups: dict[tuple[str, int, int], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["pair"], row["heads"], row["d"]), []).append(row)
    result = []
    for (pair, heads, d), group in sorted(groups.items()):
        group.sort(key=lambda row: row["n"])
        ns = [row["n"] for row in group]
        n_star, status = crossover_n(ns, [row["ratio"] for row in group])
        low, _ = crossover_n(ns, [row.get("ratio_max", row["ratio"]) for row in group])
        high, _ = crossover_n(ns, [row.get("ratio_min", row["ratio"]) for row in group])
        result.append({"pair": pair, "heads": heads, "d": d, "n_star": n_star, "status": status, "model_n_star": d,
                       "n_star_low": low, "n_star_high": high})
    return result


def scaling(crossover_list: list[dict]) -> list[dict]:
    """Fit N* ≈ c·d^a per (pair, heads) over the d's that crossed; a ≈ 1 means N* ∝ d."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for entry in crossover_list:
        groups.setdefault((entry["pair"], entry["heads"]), []).append(entry)
    result = []
    for (pair, heads), group in sorted(groups.items()):
        crossed = [entry for entry in group if entry["n_star"] is not None]
        fit = {"pair": pair, "heads": heads, "ds": [entry["d"] for entry in crossed], "exponent": None,
               "prefactor": None}
        if len({entry["d"] for entry in crossed}) >= 2:
            exponent, prefactor = fit_power_law([e["d"] for e in crossed], [e["n_star"] for e in crossed])
            fit |= {"exponent": exponent, "prefactor": prefactor}
        fit["note"] = "N* proportional to d iff exponent ~ 1" if fit["exponent"] is not None else (
            "fewer than 2 head dims crossed inside the measured N range: no fit")
        result.append(fit)
    return result
