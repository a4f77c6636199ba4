"""The interactive explorer: ipywidgets controls over the three panels (notebook 11).

``explore()`` builds an ``Explorer`` and displays it. Every control change recomputes
``viz.panels.all_panels`` and redraws the figure into an Image widget (PNG bytes, so it
works with any matplotlib backend).

What is displayed (``static``): by default one output whose bundle holds the live widget
(``application/vnd.jupyter.widget-view+json``) and, as fallbacks, a PNG snapshot of the starting
settings (``image/png``) and a line of text. A front end shows the richest of these it can render:
JupyterLab with ipywidgets shows only the widget, while GitHub and nbconvert (no widget manager)
show only the PNG, so the committed notebook still has a picture and JupyterLab never shows the
figure twice. ``static=True`` displays only the snapshot, ``static=False`` only the widget (no
fallback picture). When ``static`` is None the environment variable COURSE_EXPLORER ("both",
"static" or "widgets") decides; the default is "both" (the widget with its PNG fallback).
"""

import base64
import os

import ipywidgets as widgets
from IPython.display import Image, display

from course_lib.validation import check_choice
from course_lib.viz import draw
from course_lib.viz.panels import DEFAULT_SCALE, ELU, MODES, RECURRENT, all_panels, check_settings

# (min, max, step) of each slider; a float step makes a FloatSlider
LIMITS = {"n": (8, 256, 8), "d": (2, 64, 2), "m": (4, 256, 4), "seed": (0, 99, 1), "scale": (0.2, 1.5, 0.05)}
LABELS = {"n": "N", "d": "d", "m": "m", "seed": "seed", "scale": "σ(q,k)"}
DISPLAY_CHOICES = {"both": None, "static": True, "widgets": False}


class Explorer:
    """Controls (``.controls``: mode, n, d, m, causal, seed, scale), the figure, and the panel data last drawn.

    ``explorer.controls["n"].value = 64`` redraws; ``explorer.panels["weights"]["weights"]`` is then
    [64, 64]. ``.widget`` is the box to display (DOM class "course-explorer", each control
    "explorer-<name>", the image "explorer-figure", the summary line "explorer-summary").
    """

    def __init__(self, *, mode: str = ELU, n: int = 128, d: int = 16, m: int = 64,
                 causal: bool = False, seed: int = 0, scale: float = DEFAULT_SCALE):
        check_settings(mode, n, d, m, seed, scale)
        numbers = {"n": n, "d": d, "m": m, "seed": seed, "scale": scale}
        for name, value in numbers.items():
            low, high, _ = LIMITS[name]
            if not low <= value <= high:
                raise ValueError(f"{name} must be between {low} and {high} (the slider's range), got {value}")
        self.controls = {
            "mode": widgets.ToggleButtons(
                options=MODES, value=mode, description="mode", style={"button_width": "auto"}  # no cut labels
            ),
            **{name: self._slider(name, value) for name, value in numbers.items()},
            "causal": widgets.Checkbox(value=bool(causal), description="causal"),
        }
        for name, control in self.controls.items():
            control.add_class(f"explorer-{name}")
            control.observe(self._on_change, names="value")
        self.image = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="1200px"))
        self.image.add_class("explorer-figure")
        self.summary = widgets.HTML()
        self.summary.add_class("explorer-summary")
        rows = [("n", "d", "m"), ("seed", "scale", "causal")]
        boxes = [widgets.HBox([self.controls[name] for name in row]) for row in rows]
        self.widget = widgets.VBox([self.controls["mode"], *boxes, self.summary, self.image])
        self.widget.add_class("course-explorer")
        self.figure, self._axes = draw.new_figure()
        self.panels: dict = {}
        self.update()

    @staticmethod
    def _slider(name: str, value: float) -> widgets.IntSlider | widgets.FloatSlider:
        low, high, step = LIMITS[name]
        kind = widgets.FloatSlider if isinstance(step, float) else widgets.IntSlider
        return kind(value=value, min=low, max=high, step=step, description=LABELS[name], continuous_update=False)

    def settings(self) -> dict:
        """The controls' values: mode, n, d, m, seed, scale, causal."""
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, _change) -> None:
        self.update()

    def update(self) -> None:
        """Recompute the panels from the controls and redraw the figure and the summary."""
        settings = self.settings()
        self.controls["causal"].disabled = settings["mode"] == RECURRENT  # the ledger is causal by construction
        self.panels = all_panels(**settings)
        draw.render(self.figure, self._axes, self.panels)
        self.image.value = draw.to_png(self.figure)
        weights, flow = self.panels["weights"], self.panels["flow"]
        self.summary.value = (
            f"<b>{weights['mode']}</b>: N={weights['n']}, f={weights['f']}, causal={weights['causal']}; "
            f"output error vs softmax {weights['rel_error']:.3f}; "
            f"n×n route {flow['macs_quadratic']:,} MACs vs linear route {flow['macs_linear']:,} "
            f"(N/f = {flow['macs_ratio']:.3g})"
        )

    def png(self) -> bytes:
        """The current figure as PNG bytes."""
        return draw.to_png(self.figure)


def resolve_static(static: bool | None) -> bool | None:
    """``static`` if given, else COURSE_EXPLORER (both | static | widgets, default both): True, False or None = both."""
    if static is not None:
        return bool(static)
    choice = os.environ.get("COURSE_EXPLORER", "both").strip().lower()
    return DISPLAY_CHOICES[check_choice("COURSE_EXPLORER", choice, tuple(DISPLAY_CHOICES))]


def widget_bundle(explorer: Explorer) -> dict:
    """The widget's MIME bundle with the current figure added as an ``image/png`` fallback.

    Keys: ``application/vnd.jupyter.widget-view+json`` (the live widget), ``image/png`` (base64,
    what a viewer without widgets shows) and ``text/plain``. Display it with
    ``display(bundle, raw=True)``: one output, one picture whichever front end renders it.
    """
    bundle = dict(explorer.widget._repr_mimebundle_())
    bundle["image/png"] = base64.b64encode(explorer.png()).decode("ascii")
    bundle["text/plain"] = "course_lib explorer (run the notebook in JupyterLab to move the controls)"
    return bundle


def explore(*, static: bool | None = None, show: bool = True, **settings) -> Explorer:
    """Build the explorer (settings: mode, n, d, m, causal, seed, scale) and display it; returns the ``Explorer``.

    static=None: one output holding the widget with a PNG snapshot of the starting settings as its
    fallback (``widget_bundle``, see the module docstring); True: the snapshot only; False: the
    widget only. show=False displays nothing.
    """
    explorer = Explorer(**settings)
    if show:
        static = resolve_static(static)
        if static is None:
            display(widget_bundle(explorer), raw=True)
        elif static:
            display(Image(data=explorer.png(), format="png"))
        else:
            display(explorer.widget)
    return explorer
