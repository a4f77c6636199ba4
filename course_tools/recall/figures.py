"""The study's three pictures (notebook 12 §5): recall against pairs, against state bytes, against distance."""

from collections import Counter

import matplotlib.pyplot as plt

from course_tools.recall.report import mqar_rows

DISTANCE_VARIANTS = ("softmax", "elu+1", "decay", "gla", "gated delta")  # forgetting is what distance shows


def _errorbar(ax, x, rows, **style):
    middle = [r["recall"]["mean"] for r in rows]
    spread = [[m - r["recall"]["low"] for m, r in zip(middle, rows)], [r["recall"]["high"] - m for m, r in zip(middle, rows)]]
    ax.errorbar(x, middle, yerr=spread, capsize=3, **style)


def study_figure(result: dict, label: str) -> plt.Figure:
    """Three panels from a study's result (``study.run_study``): mean test recall with its 95 % interval
    (error bars) against the number of pairs at the most common T; against the state's bytes at that T's
    largest P; and, for ``DISTANCE_VARIANTS``, against the query's distance to its key at the longest T."""
    rows = mqar_rows(result)
    if not rows:
        raise ValueError("result has no setting that counts (softmax below the validity rule everywhere): nothing to plot")
    common_t = Counter(r["seq_len"] for r in rows).most_common(1)[0][0]
    hardest = max(r["num_pairs"] for r in rows if r["seq_len"] == common_t)
    longest = max(r["seq_len"] for r in rows)
    figure, (by_pairs, by_bytes, by_distance) = plt.subplots(1, 3, figsize=(16, 4.6))
    for variant in dict.fromkeys(r["label"] for r in rows):
        mine = sorted((r for r in rows if r["label"] == variant and r["seq_len"] == common_t), key=lambda r: r["num_pairs"])
        _errorbar(by_pairs, [r["num_pairs"] for r in mine], mine, marker="o", label=variant)
        at_hardest = [r for r in mine if r["num_pairs"] == hardest]
        _errorbar(by_bytes, [r["state_bytes"] for r in at_hardest], at_hardest, marker="o", linestyle="none")
        for r in at_hardest:
            by_bytes.annotate(variant, (r["state_bytes"], r["recall"]["mean"]), fontsize=7, xytext=(4, 2),
                              textcoords="offset points")
        if variant in DISTANCE_VARIANTS:
            for r in (r for r in rows if r["label"] == variant and r["seq_len"] == longest):
                buckets = r["by_distance"]
                by_distance.plot([(b["from"] * b["to"]) ** 0.5 for b in buckets], [100 * b["recall"] for b in buckets],
                                 marker="o", label=f"{variant}, P = {r['num_pairs']}")
    by_pairs.set(title=f"recall against pairs (T = {common_t})", xlabel="key-value pairs P", ylabel="test recall (%)",
                 xscale="log", ylim=(0, 102))
    by_pairs.set_xticks(sorted({r["num_pairs"] for r in rows if r["seq_len"] == common_t}),
                        labels=[str(p) for p in sorted({r["num_pairs"] for r in rows if r["seq_len"] == common_t})])
    by_pairs.legend(fontsize=7, loc="lower left")
    by_bytes.set(title=f"recall against state size (P = {hardest}, T = {common_t})",
                 xlabel="bytes carried from token to token (log)", xscale="log", ylim=(0, 102))
    by_distance.set(title=f"recall against distance (T = {longest}, mean of seeds)",
                    xlabel="tokens from key to query (bucket centre, log)", xscale="log", ylim=(0, 102))
    by_distance.legend(fontsize=7, loc="lower left")
    figure.suptitle(f"MQAR (Zoology's generator) — {label}; error bars: 95 % bootstrap interval over seeds", fontsize=10)
    figure.tight_layout()
    return figure
