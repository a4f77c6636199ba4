"""What a benchmark run prints: its metadata and the ratio, decode, engine and target tables.

The machine record, ``table`` and the JSON file are ``course_lib.records``' (shared with the recall sweep).
"""

import torch

from course_lib.records import machine_metadata, table
from course_tools.bench.targets import floor_share

MIB = 2**20


def run_metadata(device: torch.device, *, quick: bool, suites: list[str], memory_method: str, peers: str) -> dict:
    """The benchmark's ``machine_metadata`` with its dtype, suites, memory method and optional peers."""
    return machine_metadata(device, quick=quick) | {"dtype": "float32", "suites": suites,
                                                    "memory_method": memory_method, "peers": {"fla": peers}}


def crossover_text(result: dict) -> str:
    """Ratio tables (softmax route / linear route next to the model's N/d), N*, roof fractions, skips."""
    ratio_rows = [[r["pair"], r["d"], r["heads"], r["n"], r["softmax_time_s"] * 1e3, r["linear_time_s"] * 1e3,
                   r["ratio"], spread_text(r), r["model_ratio"]] for r in result["ratios"]]
    star_rows = [[c["pair"], c["heads"], c["d"], c["n_star"], band_text(c), c["model_n_star"], c["status"]]
                 for c in result["crossovers"]]
    fit_rows = [[f["pair"], f["heads"], f["exponent"], f["note"]] for f in result["scaling"]]
    linear = [r for r in result["records"] if r["route"] == "linear" and not r.get("skipped")]
    roof_rows = [[r["name"], r["d"], r["heads"], r["n"], r["time_s"] * 1e3, r["gflop_per_s"], r["roof"]["gflop_per_s"],
                  r["roof"]["fraction"], r["shaped_roof"]["fraction"], r["peak_bytes"] / MIB] for r in linear]
    memory_rows = [[r["name"], r["d"], r["heads"], r["n"], r["peak_bytes"] / MIB]
                   for r in result["records"] if r["route"] == "softmax" and not r.get("skipped")]
    sweep = result["chunk_sweep"]
    best = {d: min((r for r in sweep["records"] if r["d"] == d), key=lambda r: r["time_s"])["time_s"]
            for d in {r["d"] for r in sweep["records"]}}
    chunk_rows = [[r["d"], r["chunk"], r["time_s"] * 1e3, r["time_s"] / best[r["d"]],
                   "auto" if sweep["auto"][str(r["d"])] == r["chunk"] else ""] for r in sweep["records"]]
    skips = sorted({(r["name"], r["skipped"]) for r in result["records"] if r.get("skipped")})
    return "\n\n".join([
        "time ratio softmax route / linear route (> 1: linear faster), median of the repeats [min-max over\n"
        f"pairs of repeats, {result['settings'].get('repeats', 1)} repeats], model = FLOP ratio N/d\n"
        + table(["pair", "d", "H", "N", "softmax ms", "linear ms", "ratio", "[min-max]", "model N/d"], ratio_rows),
        "crossover N* (median ratio crosses 1, log-interpolated; band from the max and min ratios);\n"
        "the FLOP model puts it at N* = d\n"
        + table(["pair", "H", "d", "N*", "band", "model N*", "status"], star_rows),
        "N* against d: fitted exponent a in N* ~ d^a\n" + table(["pair", "H", "exponent", "note"], fit_rows),
        "linear routes: fraction of the same-FLOP matmul roof (roof time / kernel time); roof = square\n"
        "batched matmuls (the machine at its best), shaped = [N, d] @ [d, r·d] (linear attention's own shapes)\n"
        + table(["kernel", "d", "H", "N", "ms", "GF/s", "roof GF/s", "roof frac", "shaped frac", "peak MiB"],
                roof_rows),
        f"causal linear attention against the chunk size C (N={sweep['n']}, H={sweep['heads']}); "
        "time / best C of that d\n" + table(["d", "C", "ms", "/ best", ""], chunk_rows),
        "softmax routes: peak memory\n" + table(["kernel", "d", "H", "N", "peak MiB"], memory_rows),
        "skipped:\n" + "\n".join(f"  {name}: {reason}" for name, reason in skips) if skips else "skipped: none",
    ])


def spread_text(row: dict) -> str:
    """"[min-max]" of a ratio row (3 significant digits)."""
    return f"[{row.get('ratio_min', row['ratio']):.3g}-{row.get('ratio_max', row['ratio']):.3g}]"


def band_text(entry: dict) -> str:
    """"[low, high]" of a crossover band; "-" for an end that did not cross inside the measured range."""
    low, high = (entry.get(key) for key in ("n_star_low", "n_star_high"))
    return "[" + ", ".join("-" if x is None else f"{x:.0f}" for x in (low, high)) + "]"


def decode_text(result: dict) -> str:
    """Per-token latency, first against last window, quartiles, bytes held, and where the cache loses."""
    window = result["settings"]["window"]
    names = [n for n in ("kv_cache", "ledger", "plain_ledger") if n in result]
    rows = [[name, r["median_first_s"] * 1e6, r["median_last_s"] * 1e6, r["last_over_first"],
             f"{r['q25_s'] * 1e6:.3g}-{r['q75_s'] * 1e6:.3g}" if "q25_s" in r else "-", r["bytes_first"],
             r["bytes_last"], r["bytes_preallocated"]] for name, r in ((n, result[n]) for n in names)]
    ratio = result["kv_cache"]["median_last_s"] / result["ledger"]["median_last_s"]
    crossing = [[name, c["t_star"], "[" + ", ".join("-" if x is None else f"{x:.0f}"
                                                    for x in (c["t_star_low"], c["t_star_high"])) + "]", c["status"]]
                for name, c in result.get("crossovers", {}).items()]
    return (f"decode {result['settings']['tokens']} tokens (medians of the first/last {window} steps)\n"
            + table(["decoder", "first us", "last us", "last/first", "IQR us", "bytes first", "bytes last",
                     "prealloc"], rows)
            + f"\nlast-window latency kv_cache / ledger: {ratio:.3g}"
            + ("\n\nthe KV cache is slower than a ledger from token t* (first bin from which it stays slower; "
               "band: the ledger's quartiles)\n"
               + table(["ledger", "t*", "band", "status"], crossing) if crossing else ""))


def engine_text(result: dict) -> str:
    """The causal call's share outside its matmuls, decay's scaling and overhead, backward against forward."""
    profile, decay, backward = result["profile"], result["decay"], result["backward"]
    short, long = decay["ns"]
    lines = [
        f"causal call at N={profile['n']}: {profile['call_s'] * 1e3:.3g} ms ({profile['profiled_call_s'] * 1e3:.3g} ms "
        f"profiled), matmuls {profile['matmul_s'] * 1e3:.3g} ms; share outside the matmuls "
        f"{profile['outside_share']:.3g} (median of {len(profile['shares'])}); one exp over q and k alone "
        f"{profile['exp_s'] * 1e3:.3g} ms (share {profile['exp_share']:.3g}; floor exp / (matmuls + exp) "
        f"{floor_share(profile):.3g})",
        f"decay={decay['gamma']}: {decay['decayed_short']['time_s'] * 1e3:.3g} ms at N={short}, "
        f"{decay['decayed_long']['time_s'] * 1e3:.3g} ms at N={long} (ratio {decay['long_over_short']:.3g}); "
        f"undecayed {decay['undecayed_long']['time_s'] * 1e3:.3g} ms (decayed / undecayed "
        f"{decay['decayed_over_undecayed']:.3g})",
    ]
    if "error" in backward:
        lines.append(f"backward at N={backward['n']}: {backward['error']}")
    else:
        lines.append(f"backward at N={backward['n']}: forward {backward['forward']['time_s'] * 1e3:.3g} ms, "
                     f"forward + backward {backward['forward_backward']['time_s'] * 1e3:.3g} ms "
                     f"(ratio {backward['ratio']:.3g})")
    return "engine (medians; ratios measured in the same run)\n" + "\n".join(lines)


def targets_text(verdicts: list[dict]) -> str:
    """PASS/FAIL lines with the ratio behind each and its details (N, bytes), then the verdicts' notes."""
    fixed = {"target", "value", "limit", "passed", "status", "why", "note"}

    def detail(verdict: dict) -> str:
        extras = [(key, value) for key, value in verdict.items()
                  if key not in fixed and value is not None and not isinstance(value, dict)]
        return ", ".join(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}"
                         for key, value in extras)

    rows = [[v["target"], v["value"], v["limit"], v["status"], detail(v)] for v in verdicts]
    notes = [f"  {v['target']}: {v['note']}" for v in verdicts if v.get("note")]
    return ("targets (B=1, H=8, d=64, fp32)\n" + table(["target", "value", "limit", "status", "detail"], rows)
            + ("\nnotes:\n" + "\n".join(notes) if notes else ""))


def gated_text(result: dict) -> str:
    """Recurrent against chunked (and the form without checks), backward against forward, fla's references."""
    settings, peers = result["settings"], result["peers"]
    ms = lambda timing: timing["time_s"] * 1e3  # noqa: E731
    speed_rows = [[name, ms(g["recurrent"]), ms(g["chunked"]), ms(g["form"]), g["ratio"], spread_text(g),
                   g["chunked"]["peak_bytes"] / MIB] for name, g in result["speedup"].items()]
    backward_rows = [[gate, ms(b["forward"]), ms(b["forward_backward"]), b["ratio"], spread_text(b),
                      b["forward_backward"]["peak_bytes"] / MIB] for gate, b in result["backward"].items()]
    peer_rows = [[name, "-", "-", "-", "-", entry.get("agreement", "-"), entry["error"]] if "error" in entry else
                 [name, ms(entry["course_lib"]), ms(entry["fla"]), entry["ratio"], spread_text(entry),
                  entry["agreement"], f"peak MiB {entry['course_lib']['peak_bytes'] / MIB:.3g} / "
                  f"{entry['fla']['peak_bytes'] / MIB:.3g}"]
                 for name, entry in peers.items() if isinstance(entry, dict)]
    shape = f"N={settings['n']}, B={settings['batch']}, H={settings['heads']}, d={settings['d']}"
    return "\n\n".join([
        f"gated ledger, {shape}: recurrence / chunked (> 1: chunked faster), medians [min-max over the rounds' own "
        f"ratios, {settings['repeats']} repeats]; form = the chunked form without the API's checks\n"
        + table(["gate", "recurrent ms", "chunked ms", "form ms", "ratio", "[min-max]", "chunked peak MiB"],
                speed_rows),
        "chunked forward + backward / forward\n"
        + table(["gate", "forward ms", "fwd+bwd ms", "ratio", "[min-max]", "fwd+bwd peak MiB"], backward_rows),
        f"fla's pure-torch references ({peers['note']}, fla {peers['version']}): fla time / course_lib time "
        "(>= 1: course_lib at least as fast); agreement = max |fla - ours| / max |ours| on a small input\n"
        + (table(["peer", "course_lib ms", "fla ms", "ratio", "[min-max]", "agreement", ""], peer_rows)
           if peer_rows else "  not timed"),
    ])
