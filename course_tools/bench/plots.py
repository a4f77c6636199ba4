"""The suite's figures: crossover time, peak memory, decode. ``*_figure`` returns a figure (notebook 08
shows them); ``crossover_plots`` / ``decode_plot`` save PNGs next to the JSON (same stem) for the CLI.

Every figure takes a ``label`` (``course_lib.records.device_label(meta)``) for its title: a number without its
device is not a measurement. Time curves are medians with a band from the fastest to the slowest repeat.
"""

from pathlib import Path

import matplotlib.pyplot as plt

# name -> (colour, marker, linestyle, filled): course_lib solid, plain-torch dotted in the same colour,
# sdpa_causal hollow and dashed so that sdpa stays visible where their memory curves coincide
STYLES = {
    "softmax": ("tab:gray", "o", "-", True),
    "sdpa": ("tab:blue", "o", "-", True),
    "sdpa_causal": ("tab:cyan", "s", "--", False),
    "linear": ("tab:red", "^", "-", True),
    "plain_linear": ("tab:red", "^", ":", False),
    "linear_causal_auto": ("tab:green", "v", "-", True),
    "plain_linear_causal": ("tab:green", "v", ":", False),
    "linear_causal_chunked": ("tab:olive", "D", "-", True),
    "linear_causal_recurrent": ("tab:purple", "x", "-", True),
    "fla_naive_chunk": ("tab:brown", "P", "-", True),
    "kv_cache": ("tab:blue", "o", "-", True),
    "ledger": ("tab:green", "v", "-", True),
    "plain_ledger": ("tab:green", "v", ":", False),
}


def _style(name: str) -> dict:
    colour, marker, linestyle, filled = STYLES.get(name, ("black", ".", "-", True))
    return {"color": colour, "marker": marker, "linestyle": linestyle, "markersize": 5 if filled else 8,
            "markerfacecolor": colour if filled else "none", "label": name}


def _by_d(records: list[dict], heads: int) -> dict[int, dict[str, list[dict]]]:
    """{d: {contender: [record, ...] sorted by n}} for measured records with ``heads`` heads."""
    curves: dict[int, dict[str, list[dict]]] = {}
    for r in records:
        if r["heads"] == heads and not r.get("skipped"):
            curves.setdefault(r["d"], {}).setdefault(r["name"], []).append(r)
    for by_name in curves.values():
        for points in by_name.values():
            points.sort(key=lambda r: r["n"])
    return curves


def _crossover_box(ax, crossover: dict, d: int, heads: int) -> None:
    """Dashed verticals at each crossed N*, coloured like the linear contender, and a legible list."""
    lines = []
    for c in crossover["crossovers"]:
        if c["d"] != d or c["heads"] != heads or c["n_star"] is None:
            continue
        colour = STYLES.get(c["pair"].split("/")[1], ("black",))[0]
        ax.axvline(c["n_star"], linestyle="--", linewidth=1, color=colour)
        low, high = c.get("n_star_low"), c.get("n_star_high")
        band = "" if low is None or high is None else f" [{low:.0f}-{high:.0f}]"
        lines.append(f"{c['pair']}: {c['n_star']:.0f}{band}")
    if lines:
        ax.text(0.98, 0.02, "N* (median [band])\n" + "\n".join(lines), transform=ax.transAxes, fontsize=8,
                ha="right", va="bottom", bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "gray"})


def _panels(crossover: dict, key, ylabel: str, *, bands: bool, mark_crossovers: bool, label: str | None,
            what: str) -> plt.Figure:
    heads = max(crossover["settings"]["heads"])
    curves = _by_d(crossover["records"], heads)
    fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 5), squeeze=False)
    for ax, (d, by_name) in zip(axes[0], sorted(curves.items())):
        for name, points in sorted(by_name.items()):
            ns = [r["n"] for r in points]
            ax.loglog(ns, [key(r) for r in points], **_style(name))
            if bands:
                low = [r.get("time_min_s", r["time_s"]) for r in points]
                high = [r.get("time_max_s", r["time_s"]) for r in points]
                ax.fill_between(ns, low, high, color=_style(name)["color"], alpha=0.18, linewidth=0)
        if mark_crossovers:
            _crossover_box(ax, crossover, d, heads)
        ax.set(title=f"d={d}, H={heads}", xlabel="N", ylabel=ylabel)
        ax.grid(True, which="major", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(len(names), 5), fontsize=8)
    fig.suptitle(what + (f" — {label}" if label else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def time_figure(crossover: dict, label: str | None = None) -> plt.Figure:
    """Seconds per call against N (log-log), one panel per d: medians, min-max bands, crossovers N*."""
    return _panels(crossover, lambda r: r["time_s"], "seconds per call", bands=True, mark_crossovers=True,
                   label=label, what="time per call (median, band: fastest-slowest repeat)")


def memory_figure(crossover: dict, label: str | None = None) -> plt.Figure:
    """Peak extra bytes of one call against N (log-log), one panel per d."""
    return _panels(crossover, lambda r: max(r["peak_bytes"], 1), "peak bytes", bands=False,
                   mark_crossovers=False, label=label, what="peak extra memory of one call")


def decode_figure(decode: dict, label: str | None = None) -> plt.Figure:
    """Per-token latency against t (with the cache's fit and the crossovers t*), and bytes held against t."""
    fig, (latency, held) = plt.subplots(1, 2, figsize=(11, 4.5))
    names = [name for name in ("kv_cache", "ledger", "plain_ledger") if name in decode]
    for name in names:
        r, style = decode[name], _style(name)
        style["markevery"] = max(1, len(r["curve_t"]) // 12)
        latency.plot(r["curve_t"], [s * 1e6 for s in r["curve_s"]], **style)
        held.plot(r["curve_t"], r["curve_bytes"], **style)
    lines = []
    for name, c in decode.get("crossovers", {}).items():
        if c["t_star"] is not None:
            latency.axvline(c["t_star"], linestyle="--", linewidth=1, color=STYLES[name][0])
            band = ", ".join("-" if x is None else f"{x:.0f}" for x in (c["t_star_low"], c["t_star_high"]))
            lines.append(f"{name}: t* = {c['t_star']:.0f} [{band}]")
    if lines:
        latency.text(0.02, 0.98, "cache slower than ledger from\n" + "\n".join(lines), transform=latency.transAxes,
                     fontsize=8, va="top", bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "gray"})
    latency.set(xlabel="token t", ylabel="latency per token (us, median per bin)", title="decode latency")
    same = {decode[n]["bytes_first"] for n in names if n != "kv_cache"}
    note = " (the ledgers coincide)" if len(same) == 1 and len(names) > 2 else ""
    held.set(xlabel="token t", ylabel="bytes held", title="memory held" + note, yscale="log")
    latency.legend(fontsize=8, loc="lower right")
    fig.suptitle("decoding one token at a time" + (f" — {label}" if label else ""), fontsize=10)
    fig.tight_layout()
    return fig


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def crossover_plots(crossover: dict, stem: Path, label: str | None = None) -> list[Path]:
    """Save ``<stem>_time.png`` and ``<stem>_memory.png``."""
    return [_save(time_figure(crossover, label), stem.with_name(stem.name + "_time.png")),
            _save(memory_figure(crossover, label), stem.with_name(stem.name + "_memory.png"))]


def decode_plot(decode: dict, stem: Path, label: str | None = None) -> Path:
    """Save ``<stem>_decode.png``."""
    return _save(decode_figure(decode, label), stem.with_name(stem.name + "_decode.png"))
