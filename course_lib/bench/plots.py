"""The suite's figures: crossover time, peak memory, decode. ``*_figure`` returns a figure (notebook 08
shows them); ``crossover_plots`` / ``decode_plot`` save PNGs next to the JSON (same stem) for the CLI."""

from pathlib import Path

import matplotlib.pyplot as plt


def _by_d(records: list[dict], heads: int) -> dict[int, dict[str, list[tuple[int, dict]]]]:
    """{d: {contender: [(n, record), ...]}} for measured records with ``heads`` heads."""
    curves: dict[int, dict[str, list[tuple[int, dict]]]] = {}
    for r in records:
        if r["heads"] == heads and not r.get("skipped"):
            curves.setdefault(r["d"], {}).setdefault(r["name"], []).append((r["n"], r))
    return curves


def _panels(crossover: dict, key, ylabel: str, *, mark_crossovers: bool) -> plt.Figure:
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
    return fig


def time_figure(crossover: dict) -> plt.Figure:
    """Seconds per call against N (log-log), one panel per d, crossovers N* marked."""
    return _panels(crossover, lambda r: r["time_s"], "seconds per call", mark_crossovers=True)


def memory_figure(crossover: dict) -> plt.Figure:
    """Peak extra bytes of one call against N (log-log), one panel per d."""
    return _panels(crossover, lambda r: max(r["peak_bytes"], 1), "peak bytes", mark_crossovers=False)


def decode_figure(decode: dict) -> plt.Figure:
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
    return fig


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def crossover_plots(crossover: dict, stem: Path) -> list[Path]:
    """Save ``<stem>_time.png`` and ``<stem>_memory.png``."""
    return [_save(time_figure(crossover), stem.with_name(stem.name + "_time.png")),
            _save(memory_figure(crossover), stem.with_name(stem.name + "_memory.png"))]


def decode_plot(decode: dict, stem: Path) -> Path:
    """Save ``<stem>_decode.png``."""
    return _save(decode_figure(decode), stem.with_name(stem.name + "_decode.png"))
