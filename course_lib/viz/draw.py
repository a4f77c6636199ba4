"""Drawing the explorer's panels with matplotlib: one figure, no pyplot state (notebook 11).

``new_figure`` lays out the axes once; ``render`` clears and redraws them from the
dicts of ``course_lib.viz.panels``; ``to_png`` rasterises for a widget or a static view.
"""

import io
import math

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from course_lib.viz.panels import Stage

ACTIVE, IDLE = "#1f77b4", "#9a9a9a"
# font sizes in points; the figure is drawn at 80 dpi into a widget up to 1,200 px wide
TITLE, LABEL, TICK, BOX, LEGEND = 12, 11, 10, 9, 9
SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_of_ten(value: float, _position) -> str:
    """'10⁴' in plain unicode: log axes' default labels go through mathtext, a third of each redraw."""
    return "10" + str(round(math.log10(value))).translate(SUPERSCRIPTS) if value > 0 else ""
SOFTMAX_COLOUR, LINEAR_COLOUR = "#d62728", "#1f77b4"


def new_figure() -> tuple[Figure, dict]:
    """A 15×6.4 inch figure: weights + colour bar | flow | (MACs over memory). Returns (figure, axes by name)."""
    fig = Figure(figsize=(15, 6.4))  # fixed margins: a layout engine would double the time of each redraw
    # columns: weights, colour bar, gap, flow, gap (the cost panels' labels), MACs over bytes
    grid = fig.add_gridspec(2, 6, width_ratios=[0.85, 0.04, 0.2, 2.1, 0.17, 0.95], left=0.05, right=0.99,
                            bottom=0.09, top=0.84, wspace=0.05, hspace=0.4)
    axes = {
        "weights": fig.add_subplot(grid[:, 0]),
        "colorbar": fig.add_subplot(grid[:, 1]),
        "flow": fig.add_subplot(grid[:, 3]),
        "macs": fig.add_subplot(grid[0, 5]),
        "bytes": fig.add_subplot(grid[1, 5]),
    }
    return fig, axes


def draw_weights(ax, panel: dict, cax=None) -> None:
    """Heat map of the n×n weights with its colour bar in ``cax``; the title holds the error against softmax."""
    top = panel["softmax"].quantile(0.99).item()  # one colour scale per setting, set by softmax, robust to a few peaks
    image = ax.imshow(panel["weights"].numpy(), cmap="magma", vmin=0.0, vmax=top, interpolation="nearest",
                      aspect="auto")  # fills the column, so the colour bar beside it has the same height
    kind = "softmax(QKᵀ/√d)" if panel["mode"] == "softmax" else "φ(Q)φ(K)ᵀ, row-normalised"
    mask = ", causal" if panel["causal"] else ""
    ax.set_title(
        f"{panel['mode']}: {kind}{mask}\nN={panel['n']}, f={panel['f']}, σ={panel['scale']:g}\n"
        f"output rel. error {panel['rel_error']:.3f}, max|ΔA| {panel['max_abs_diff']:.3f}",
        fontsize=TITLE - 1,
    )
    ax.set_xlabel("key j (window)", fontsize=LABEL)
    ax.set_ylabel("query i (student)", fontsize=LABEL)
    ax.tick_params(labelsize=TICK)
    if cax is not None:
        bar = ax.figure.colorbar(image, cax=cax, extend="max")  # weights above softmax's 99th percentile saturate
        cax.set_xlabel("A_ij", fontsize=LABEL)
        bar.ax.tick_params(labelsize=TICK)


def _box_text(stage: Stage) -> str:
    steps = "\n(per step)" if stage.per_step else ""
    shape = "×".join(str(size) for size in stage.shape)
    note = f"\n({stage.note})" if stage.note else ""
    name = stage.name.replace(" = ", " =\n", 1) if len(stage.name) > 16 else stage.name  # narrow boxes
    return f"{name}\n{stage.dims} = {shape}{steps}\n{stage.macs:,} MACs{note}"


def _draw_row(ax, stages: list[Stage], y: float, colour: str) -> None:
    """Boxes at the centres of equal slots across the axes, arrows from slot edge to slot edge."""
    width = 1 / len(stages)
    for i, stage in enumerate(stages):
        ax.text((i + 0.5) * width, y, _box_text(stage), ha="center", va="center", fontsize=BOX, color=colour,
                bbox={"boxstyle": "round,pad=0.4", "facecolor": "white", "edgecolor": colour})
        if i:
            ax.annotate("", xy=(i * width + 0.012, y), xytext=(i * width - 0.012, y),
                        arrowprops={"arrowstyle": "->", "color": colour})


def draw_flow(ax, panel: dict) -> None:
    """The n×n route on top, the linear route below; the active one in colour, totals in the labels."""
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    n, f, dv = panel["n"], panel["f"], panel["dv"]
    features = f" + φ's projections 2N·m·d" if panel["macs_features"] else ""
    routes = (
        ("quadratic", 0.72, f"n×n route: 2N²d = {panel['macs_quadratic']:,} MACs, "
                            f"holds {panel['held_quadratic']:,} entries"),
        ("linear", 0.25, f"linear route ({panel['linear_map']}, f={f}): 2N·f·dv{features} = "
                         f"{panel['macs_linear_total']:,} MACs, holds {panel['held_linear']:,} entries"),
    )
    for name, y, label in routes:
        colour = ACTIVE if name == panel["active"] else IDLE
        ax.text(0.0, y + 0.2, label, fontsize=LABEL - 0.5, color=colour,
                weight="bold" if colour == ACTIVE else "normal")
        _draw_row(ax, panel[name], y, colour)
    causal = "causal" if panel["causal"] else "non-causal"
    break_even = "2m" if panel["macs_features"] else "d"
    ax.set_title(f"{panel['mode']} ({causal}), N={n}, d=dv={dv}\nthe n×n route costs N/{break_even} = "
                 f"{panel['macs_ratio']:.3g}× the linear one (MACs)", fontsize=TITLE)


def draw_complexity(ax_macs, ax_bytes, panel: dict) -> None:
    """Multiply-adds (top) and memory (bottom) against N, log-log; current N and the crossover (d or 2m) marked."""
    ns = panel["ns"]
    for ax, key, unit in ((ax_macs, "macs", "multiply-adds (MACs)"), (ax_bytes, "bytes", "bytes held (float32)")):
        ax.loglog(ns, panel[f"{key}_softmax"], color=SOFTMAX_COLOUR, label="n×n route")
        ax.loglog(ns, panel[f"{key}_linear"], color=LINEAR_COLOUR, label="linear route")
        ax.axvline(panel["n"], color="black", linewidth=1, label=f"N = {panel['n']}")
        crossover = panel["crossover_n"]
        ax.axvline(crossover, color="grey", linestyle=":",
                   label=f"equal MACs at N = {panel['crossover_label']} = {crossover:g}")
        ax.set_ylabel(unit, fontsize=LABEL)
        ax.xaxis.set_major_locator(LogLocator(base=10, numticks=6))
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_locator(NullLocator())  # fewer tick labels to typeset on every redraw
            axis.set_major_formatter(FuncFormatter(_power_of_ten))
        ax.tick_params(labelsize=TICK)
    ax_macs.set_title(f"cost vs N ({panel['mode']})\nN/{panel['crossover_label']} = {panel['ratio']:.3g}",
                       fontsize=TITLE)
    ax_macs.legend(fontsize=LEGEND, loc="upper left", framealpha=0.9)
    ax_bytes.text(0.02, 0.96, "n×n route as written; a fused kernel (SDPA) holds O(N·d)", transform=ax_bytes.transAxes,
                  fontsize=LEGEND, va="top")
    ax_bytes.set_xlabel("N (tokens)", fontsize=LABEL)


def render(fig: Figure, axes: dict, panels: dict) -> None:
    """Clear every axes and draw the three panels of ``viz.panels.all_panels``."""
    for ax in axes.values():
        ax.clear()
    draw_weights(axes["weights"], panels["weights"], axes.get("colorbar"))
    draw_flow(axes["flow"], panels["flow"])
    draw_complexity(axes["macs"], axes["bytes"], panels["complexity"])


def to_png(fig: Figure, *, dpi: int = 80) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
