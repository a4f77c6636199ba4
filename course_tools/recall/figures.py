"""The study's three pictures (notebook 12 §5): recall against pairs, against state bytes, against distance."""

from collections import Counter

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

from course_tools.recall.report import mqar_rows

DISTANCE_VARIANTS = ("softmax", "elu+1", "decay", "gla", "gated delta")  # forgetting is what distance shows


def _errorbar(ax, x, rows, **style):
    middle = [r["recall"]["mean"] for r in rows]
    spread = [[m - r["recall"]["low"] for m, r in zip(middle, rows)], [r["recall"]["high"] - m for m, r in zip(middle, rows)]]
    ax.errorbar(x, middle, yerr=spread, capsize=3, **style)


def study_figure(result: dict, label: str) -> plt.Figure:
    """Three panels from a study's result (``study.run_study``): mean test recall with its 95 % interval
    (error bars) against the number of pairs at the most common T; against the state's bytes at that T's
    largest P; and, for ``DISTANCE_VARIANTS``, against the query's distance to its key at the longest T
    and its largest P. One colour per variant in every panel."""
    rows = mqar_rows(result)
    if not rows:
        raise ValueError("result has no setting that counts (softmax below the validity rule everywhere): nothing to plot")
    common_t = Counter(r["seq_len"] for r in rows).most_common(1)[0][0]
    hardest = max(r["num_pairs"] for r in rows if r["seq_len"] == common_t)
    longest = max(r["seq_len"] for r in rows)
    farthest = max(r["num_pairs"] for r in rows if r["seq_len"] == longest)
    figure, (by_pairs, by_bytes, by_distance) = plt.subplots(1, 3, figsize=(16, 4.6))
    variants, ticks = list(dict.fromkeys(r["label"] for r in rows)), {}
    palette = plt.get_cmap("tab20").colors
    colours = dict(zip(variants, palette[::2] + palette[1::2]))  # the ten strong colours first
    for variant in variants:
        colour = colours[variant]
        mine = sorted((r for r in rows if r["label"] == variant and r["seq_len"] == common_t), key=lambda r: r["num_pairs"])
        _errorbar(by_pairs, [r["num_pairs"] for r in mine], mine, marker="o", label=variant, color=colour)
        at_hardest = [r for r in mine if r["num_pairs"] == hardest]
        _errorbar(by_bytes, [r["state_bytes"] for r in at_hardest], at_hardest, marker="o", linestyle="none", color=colour)
        for r in at_hardest:
            by_bytes.annotate(variant, (r["state_bytes"], r["recall"]["mean"]), fontsize=7, xytext=(4, 2),
                              textcoords="offset points")
        if variant in DISTANCE_VARIANTS:
            for r in (r for r in rows if r["label"] == variant and (r["seq_len"], r["num_pairs"]) == (longest, farthest)):
                buckets = r["by_distance"]
                by_distance.plot([(b["from"] * b["to"]) ** 0.5 for b in buckets], [100 * b["recall"] for b in buckets],
                                 marker="o", label=variant, color=colour)
                ticks = {(b["from"] * b["to"]) ** 0.5: f"{b['from']}–{b['to'] - 1}" for b in buckets}
    by_pairs.set(title=f"recall against pairs (T = {common_t})", xlabel="key-value pairs P", ylabel="test recall (%)",
                 xscale="log", ylim=(0, 102))
    by_pairs.set_xticks(sorted({r["num_pairs"] for r in rows if r["seq_len"] == common_t}),
                        labels=[str(p) for p in sorted({r["num_pairs"] for r in rows if r["seq_len"] == common_t})])
    by_pairs.legend(fontsize=7, loc="lower left")
    by_bytes.set(title=f"recall against state size (P = {hardest}, T = {common_t})",
                 xlabel="bytes carried from token to token (log)", xscale="log", ylim=(0, 102))
    by_distance.set(title=f"recall against distance (P = {farthest}, T = {longest}; seeds averaged)",
                    xlabel="tokens from key to query (bucket, log scale)", xscale="log", ylim=(0, 102))
    by_distance.set_xticks(list(ticks), labels=list(ticks.values()))
    for ax in (by_pairs, by_distance):
        ax.xaxis.set_minor_formatter(NullFormatter())
    by_distance.legend(fontsize=7, loc="lower left")
    figure.suptitle(f"MQAR (Zoology's generator) — {label}; error bars: 95 % bootstrap interval over seeds", fontsize=10)
    figure.tight_layout()
    return figure
