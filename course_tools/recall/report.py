"""The study's results as rows: what the CLI prints and notebook 12 shows, computed once from the JSON.

Recall and its intervals are in points (percent); a "points lost" gap is softmax's mean test recall
minus the mixer's with ``verdict.gap_interval``'s 95 % interval; on text the gap is the mixer's bits per
byte minus softmax's (positive = worse). Step time is each run's seconds per step over elu + 1's in the
same setting (median over the seeds at the chosen rate).
"""

from statistics import median

from course_lib.records import table
from course_tools.recall.study import ABLATIONS
from course_tools.recall.verdict import gap_interval, mean_interval


def _seeds(cell: dict, field: str) -> list[float]:
    return [result[field] for result in cell["seeds"]]


def _step_ratio(cell: dict, baseline: dict | None) -> float | None:
    if baseline is None:
        return None
    return median(_seeds(cell, "step_seconds")) / median(_seeds(baseline, "step_seconds"))


def mqar_rows(result: dict) -> list[dict]:
    """One row per (variant, setting) that counts: the protocol's numbers, ready to print or plot."""
    rows = []
    for cell in result["cells"]:
        same = {c["label"]: c for c in result["cells"] if (c["num_pairs"], c["seq_len"]) == (cell["num_pairs"], cell["seq_len"])}
        recalls = [100 * r for r in _seeds(cell, "test_recall")]
        softmax = [100 * r for r in _seeds(same["softmax"], "test_recall")]
        rows.append({"label": cell["label"], "num_pairs": cell["num_pairs"], "seq_len": cell["seq_len"],
                     "steps": cell["steps"], "chosen_lr": cell["chosen_lr"], "sweep": cell["sweep"], "seeds": recalls,
                     "recall": mean_interval(recalls),
                     "lost": None if cell["label"] == "softmax" else gap_interval(softmax, recalls),
                     "state_bytes": cell["seeds"][0]["state_bytes"],
                     "step_vs_elu1": _step_ratio(cell, same.get("elu+1")),
                     "tokens_per_second": median(_seeds(cell, "tokens_per_second")),
                     "by_distance": _distance_means(cell)})
    return rows


def _distance_means(cell: dict) -> list[dict]:
    """Per distance bucket: recall averaged over the seeds (each seed's test examples are the same draw)."""
    buckets = {}
    for result in cell["seeds"]:
        for bucket in result["by_distance"]:
            buckets.setdefault((bucket["from"], bucket["to"]), []).append(bucket["recall"])
    return [{"from": low, "to": high, "recall": sum(v) / len(v), "seeds": len(v)} for (low, high), v in sorted(buckets.items())]


def ablation_rows(result: dict) -> list[dict]:
    """Each ablation (``study.ABLATIONS``) in each setting that counts: the full mixer minus the ablated one."""
    rows = []
    for cause, (full, ablated) in ABLATIONS.items():
        for cell in (c for c in result["cells"] if c["label"] == full):
            other = next(c for c in result["cells"] if c["label"] == ablated
                         and (c["num_pairs"], c["seq_len"]) == (cell["num_pairs"], cell["seq_len"]))
            rows.append({"cause": cause, "full": full, "ablated": ablated, "num_pairs": cell["num_pairs"],
                         "seq_len": cell["seq_len"], **gap_interval([100 * r for r in _seeds(cell, "test_recall")],
                                                                    [100 * r for r in _seeds(other, "test_recall")])})
    return rows


def text_rows(result: dict) -> list[dict]:
    """One row per variant of the text study: test bits/byte per seed, its interval, the gap to softmax."""
    cells = {cell["label"]: cell for cell in result["cells"]}
    softmax = _seeds(cells["softmax"], "test_bits_per_byte")
    return [{"label": label, "chosen_lr": cell["chosen_lr"], "sweep": cell["sweep"],
             "seeds": _seeds(cell, "test_bits_per_byte"), "bits_per_byte": mean_interval(_seeds(cell, "test_bits_per_byte")),
             "gap": None if label == "softmax" else gap_interval(_seeds(cell, "test_bits_per_byte"), softmax),
             "accuracy": sum(_seeds(cell, "test_accuracy")) / len(cell["seeds"]),
             "step_vs_elu1": _step_ratio(cell, cells.get("elu+1")), "steps": cell["seeds"][0]["steps"],
             "curve": [sum(c) / len(c) for c in zip(*_seeds(cell, "curve"))]} for label, cell in cells.items()]


def _said(gap: dict, when_reference: str, when_other: str) -> str:
    """A gap's reading in the table's own words: ``when_reference`` if the reference side is higher,
    ``when_other`` if the other side is, else "cannot tell"."""
    return {"reference higher": when_reference, "other higher": when_other}.get(gap["reading"], gap["reading"])


def _interval(row: dict | None, scale: str = ".1f") -> str:
    if row is None:
        return "-"
    middle = row.get("mean", row.get("gap"))
    return f"{middle:{scale}} [{row['low']:{scale}}, {row['high']:{scale}}]"


def mqar_report(result: dict) -> str:
    """The protocol's status per setting, then per setting that counts: every variant's rate, seeds and verdict."""
    lines = [table(["pairs", "T", "status", "steps tried: softmax test recall per seed"],
                   [[s["num_pairs"], s["seq_len"], s["status"],
                     "; ".join(f"{t['steps']}: " + " ".join(f"{100 * r:.1f}" for r in t["softmax_test_recall"])
                               for t in s["tried"])] for s in result["status"]])]
    rows = mqar_rows(result)
    for setting in dict.fromkeys((r["num_pairs"], r["seq_len"], r["steps"]) for r in rows):
        lines.append(f"\nP = {setting[0]}, T = {setting[1]}, {setting[2]} steps (recall in %, 95 % bootstrap intervals)")
        lines.append(table(["variant", "lr", "seeds", "recall", "points lost", "reading", "state bytes",
                            "step / elu+1's", "tokens/s"],
                           [[r["label"], r["chosen_lr"], " ".join(f"{s:.1f}" for s in r["seeds"]), _interval(r["recall"]),
                             _interval(r["lost"]), "-" if r["lost"] is None else _said(r["lost"], "softmax higher", "mixer higher"),
                             r["state_bytes"],
                             r["step_vs_elu1"], round(r["tokens_per_second"])]
                            for r in rows if (r["num_pairs"], r["seq_len"], r["steps"]) == setting]))
    ablations = ablation_rows(result)
    if ablations:
        lines.append("\nAblations (full − ablated, points of recall)")
        lines.append(table(["cause", "full", "ablated", "pairs", "T", "gap", "reading"],
                           [[a["cause"], a["full"], a["ablated"], a["num_pairs"], a["seq_len"], _interval(a),
                             _said(a, "full higher", "ablated higher")] for a in ablations]))
    return "\n".join(lines)


def text_report(result: dict) -> str:
    """The text study's table: test bits/byte (lower is better) per seed, interval, gap to softmax."""
    return table(["variant", "lr", "validation bpb per rate", "test bpb per seed", "bits/byte", "minus softmax's",
                  "reading", "next-byte acc", "step / elu+1's"],
                 [[r["label"], r["chosen_lr"], " ".join(f"{s['validation_bits_per_byte']:.3f}" for s in r["sweep"]),
                   " ".join(f"{s:.3f}" for s in r["seeds"]), _interval(r["bits_per_byte"], ".3f"),
                   _interval(r["gap"], ".3f"), "-" if r["gap"] is None else _said(r["gap"], "worse", "better"),
                   r["accuracy"], r["step_vs_elu1"]] for r in text_rows(result)])
