"""PNG figures next to the JSON (same stem): crossover time, peak memory, decode."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)


def _by_d(records: list[dict], heads: int) -> dict[int, dict[str, list[tuple[int, dict]]]]:
    """{d: {contender: [(n, record), ...]}} for measured records with ``heads`` heads."""
    curves: dict[int, dict[str, list[tuple[int, dict]]]] = {}
    for r in records:
        if r["heads"] == heads and not r.get("skipped"):
            curves.setdefault(r["d"], {}).setdefault(r["name"], []).append((r["n"], r))
    return curves


def _panels(crossover: dict, key, ylabel: str, path: Path, *, mark_crossovers: bool) -> Path:
    heads = max(crossover["settings"]["heads"])
    curves = _by_d(crossover["records"], heads)
    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
    for ax, (d, by_name) in zip(axes[0], sorted(curves.items())):
        for name, points in sorted(by_name.items()):
            points.sort(key=lambda point: point[0])
            ax.loglog([n for n, _ in points], [key(r) for _, r in points], marker="o", label=name)
        if mark_crossovers:
            for c in crossover["crossovers"]:
                if c["d"] == d and c["heads"] == heads and c["n_star"] is not None:
                    ax.axvline(c["n_star"], linestyle="--", color="gray")
                    ax.annotate(f"N*={c['n_star']:.0f}\n{c['pair']}", (c["n_star"], ax.get_ylim()[0]), fontsize=6)
        ax.set(title=f"d={d}, H={heads}", xlabel="N", ylabel=ylabel)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def crossover_plots(crossover: dict, stem: Path) -> list[Path]:
    """Time against N (log-log, crossovers marked) and peak memory against N, one panel per d."""
    return [
        _panels(crossover, lambda r: r["time_s"], "seconds per call", stem.with_name(stem.name + "_time.png"),
                mark_crossovers=True),
        _panels(crossover, lambda r: max(r["peak_bytes"], 1), "peak bytes", stem.with_name(stem.name + "_memory.png"),
                mark_crossovers=False),
    ]


def decode_plot(decode: dict, stem: Path) -> Path:
    """Per-token latency against t, and bytes held against t, KV cache and ledger."""
    fig, (latency, held) = plt.subplots(1, 2, figsize=(10, 4))
    for name in ("kv_cache", "ledger"):
        r = decode[name]
        latency.plot(r["curve_t"], [s * 1e6 for s in r["curve_s"]], label=name)
        held.plot(r["curve_t"], r["curve_bytes"], label=name)
    latency.set(xlabel="token t", ylabel="latency per token (us)", title="decode latency")
    held.set(xlabel="token t", ylabel="bytes held", title="memory held", yscale="log")
    latency.legend()
    fig.tight_layout()
    path = stem.with_name(stem.name + "_decode.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
