"""The explorer (course_lib.viz): the pure panel functions, then every control of the widget."""

import base64
import math

import numpy as np
import pytest
import torch

from course_lib.viz.explorer import widget_bundle
from course_lib.cost import feature_map_macs, macs_linear, macs_softmax
from course_lib.measure import relative_error
from course_lib.viz import Explorer, explore
from course_lib.viz import explorer as explorer_module
from course_lib.viz.panels import (
    ELU, MODES, PERFORMER, RECURRENT, SOFTMAX, complexity_panel, crossover_n, flow_panel,
    panel_inputs, route_macs, weights_panel,
)

LINEAR_MODES = (ELU, PERFORMER, RECURRENT)


def future(n: int) -> torch.Tensor:
    """[n, n] bool, True strictly above the diagonal: key j > query i."""
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def stage(panel: dict, route: str, prefix: str):
    """The stage of ``route`` whose name starts with ``prefix``."""
    matches = [s for s in panel[route] if s.name.startswith(prefix)]
    names = [s.name for s in panel[route]]
    assert len(matches) == 1, f"expected one {route} stage starting with {prefix!r}, got {names}"
    return matches[0]


# ---- weights panel -------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("mode", MODES)
def test_weights_are_row_stochastic_and_match_the_route(mode, causal):
    panel = weights_panel(mode, 24, 8, 32, causal, seed=3)
    weights = panel["weights"]
    assert weights.shape == (24, 24) and weights.dtype == torch.float64
    assert torch.allclose(weights.sum(-1), torch.ones(24, dtype=torch.float64), atol=1e-12), "rows must sum to 1"
    assert (weights >= 0).all(), "attention weights must be non-negative"
    # the picture is what the mode's own route computes: out = A v
    _, _, v = panel_inputs(24, 8, 3)
    assert torch.allclose(panel["output"], weights @ v, atol=1e-10), "output must equal weights @ v"
    assert math.isclose(panel["rel_error"], relative_error(panel["output"], panel["softmax_output"]), rel_tol=1e-12)
    assert panel["max_abs_diff"] == pytest.approx((weights - panel["softmax"]).abs().max().item(), abs=0)


def test_softmax_mode_has_zero_error_and_linear_modes_do_not():
    exact = weights_panel(SOFTMAX, 32, 8, 16, False, seed=0)
    assert exact["rel_error"] == 0.0 and exact["max_abs_diff"] == 0.0
    for mode in (ELU, PERFORMER):
        assert weights_panel(mode, 32, 8, 16, False, seed=0)["rel_error"] > 0.01, f"{mode} is not softmax"


@pytest.mark.parametrize("mode", MODES)
def test_causal_masks_the_upper_triangle_to_exactly_zero(mode):
    weights = weights_panel(mode, 20, 8, 16, True, seed=1)["weights"]
    assert (weights[future(20)] == 0).all(), "a query must put exactly zero weight on future keys"
    assert (weights[~future(20)] > 0).all(), "every past key keeps a positive weight"
    assert weights[0, 0] == 1.0, "the first token can only attend to itself"


def test_recurrent_mode_is_causal_whatever_the_flag():
    panel = weights_panel(RECURRENT, 16, 4, 8, False, seed=0)
    assert panel["causal"] is True
    assert (panel["weights"][future(16)] == 0).all()
    causal_elu = weights_panel(ELU, 16, 4, 8, True, seed=0)
    assert torch.allclose(panel["weights"], causal_elu["weights"], atol=0), "the ledger attends like causal elu+1"
    assert torch.allclose(panel["output"], causal_elu["output"], atol=1e-12), "recurrent = parallel, causal elu+1"


def test_performer_error_falls_as_m_grows():
    # variance ∝ 1/m, so the error of one draw ∝ 1/√m: 16x more features should about quarter it
    def mean_error(m: int) -> float:
        return float(np.mean([weights_panel(PERFORMER, 48, 8, m, False, seed)["rel_error"] for seed in range(8)]))

    errors = {m: mean_error(m) for m in (16, 64, 256)}
    assert errors[16] > errors[64] > errors[256], f"mean error over 8 seeds should fall with m, got {errors}"
    assert errors[256] < 0.5 * errors[16], f"16x more features should at least halve the error, got {errors}"


def test_m_only_matters_to_performer():
    for mode in (SOFTMAX, ELU, RECURRENT):
        a, b = weights_panel(mode, 16, 8, 8, False, 0), weights_panel(mode, 16, 8, 128, False, 0)
        assert torch.equal(a["weights"], b["weights"]), f"m must not change {mode}"
    a, b = weights_panel(PERFORMER, 16, 8, 8, False, 0), weights_panel(PERFORMER, 16, 8, 128, False, 0)
    assert (a["f"], b["f"]) == (8, 128)
    assert not torch.allclose(a["weights"], b["weights"]), "m must change Performer's matrix"


def test_seed_draws_new_inputs_and_is_reproducible():
    first, again, other = (weights_panel(ELU, 16, 8, 8, False, seed) for seed in (5, 5, 6))
    assert torch.equal(first["weights"], again["weights"]) and first["rel_error"] == again["rel_error"]
    assert not torch.allclose(first["softmax"], other["softmax"]), "a new seed must draw new inputs"


def test_scale_sharpens_softmax():
    flat, sharp = (weights_panel(SOFTMAX, 64, 16, 8, False, 0, scale) for scale in (0.3, 1.5))
    assert flat["weights"].max() < sharp["weights"].max(), "a larger spread of q, k makes softmax more peaked"
    assert flat["weights"].max() < 3 / 64, "σ = 0.3 gives logits of std 0.09: nearly uniform rows"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "cosine"}, "mode must be one of"),
        ({"n": 0}, "n must be a positive int"),
        ({"d": 2.5}, "d must be a positive int"),
        ({"m": True}, "m must be a positive int"),
        ({"seed": -1}, "seed must be an int >= 0"),
        ({"scale": 0.0}, "scale must be a finite number > 0"),
    ],
    ids=lambda value: str(value),
)
def test_bad_settings_name_the_argument(kwargs, message):
    settings = {"mode": ELU, "n": 8, "d": 4, "m": 8, "causal": False, "seed": 0, "scale": 0.6, **kwargs}
    with pytest.raises(ValueError, match=message):
        weights_panel(**settings)


# ---- flow panel ----------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("mode", MODES)
def test_flow_counts_equal_the_macs_formulas(mode, causal):
    n, d, m = 40, 12, 24
    flow = flow_panel(mode, n, d, m, causal)
    f = m if mode == PERFORMER else d
    assert flow["f"] == f
    assert flow["macs_quadratic"] == macs_softmax(n, n, d, d) == sum(s.macs for s in flow["quadratic"] if s.counted)
    assert flow["macs_linear"] == macs_linear(n, n, f, d) == sum(s.macs for s in flow["linear"] if s.counted)
    projection_macs = 2 * n * m * d if mode == PERFORMER else 0
    assert flow["macs_features"] == projection_macs == feature_map_macs(n, d, f, projection=mode == PERFORMER)
    assert flow["macs_linear_total"] == flow["macs_linear"] + projection_macs == sum(s.macs for s in flow["linear"])
    break_even = 2 * m if mode == PERFORMER else d
    assert flow["macs_ratio"] == pytest.approx(n / break_even), "the n×n route costs N/d (elu+1) or N/2m times"
    assert stage(flow, "quadratic", "scores").shape == (n, n)
    assert stage(flow, "linear", "out").shape == (n, d)
    projection = stage(flow, "linear", "φ").macs
    assert projection == (2 * n * m * d if mode == PERFORMER else 0), "Performer's φ multiplies by ω [m×d]"


def test_mode_switches_the_active_route_and_the_feature_map():
    assert flow_panel(SOFTMAX, 32, 8, 64, False)["active"] == "quadratic"
    for mode in LINEAR_MODES:
        assert flow_panel(mode, 32, 8, 64, False)["active"] == "linear"
    assert flow_panel(SOFTMAX, 32, 8, 64, False)["linear_map"] == "elu+1"
    assert flow_panel(PERFORMER, 32, 8, 64, False)["linear_map"] == "Performer"


def test_causal_turns_the_summary_into_per_position_prefixes():
    n, d = 32, 8
    full, causal = flow_panel(ELU, n, d, 16, False), flow_panel(ELU, n, d, 16, True)
    assert stage(full, "linear", "z").shape == (d,) and stage(full, "linear", "S").shape == (d, d)
    assert stage(causal, "linear", "z").shape == (n, d), "causal parallel: one z_i per position"
    assert stage(causal, "linear", "S").shape == (n, d, d), "causal parallel: one S_i per position"
    assert causal["held_linear"] > full["held_linear"]


def test_recurrent_ledger_is_updated_per_step_in_constant_memory():
    d = 8
    small, large = flow_panel(RECURRENT, 16, d, 16, False), flow_panel(RECURRENT, 256, d, 16, False)
    for name, shape in (("S", (d, d)), ("z", (d,))):
        ledger = stage(small, "linear", name)
        assert ledger.shape == shape and ledger.per_step, f"the ledger's {name} is one {shape} updated per token"
    assert small["held_linear"] == large["held_linear"] == d * d + 3 * d, "the ledger never grows a page"
    assert small["held_quadratic"] == 16 * 16 and large["held_quadratic"] == 256 * 256


# ---- complexity panel ----------------------------------------------------------------------


@pytest.mark.parametrize("mode, crossover", [(SOFTMAX, 16), (ELU, 16), (RECURRENT, 16), (PERFORMER, 96)])
def test_crossover_is_at_n_equals_d_or_2m(mode, crossover):
    d, m = 16, 48
    panel = complexity_panel(mode, 100, d, m, False)
    assert panel["crossover_n"] == crossover == crossover_n(mode, d, m), "N = d for elu+1, N = 2m for FAVOR+"
    assert panel["crossover_label"] == ("2m" if mode == PERFORMER else "d")
    quadratic, linear = route_macs(mode, crossover, d, m)
    assert quadratic == linear, "both routes cost the same MACs at the crossover"
    below, above = route_macs(mode, crossover // 2, d, m), route_macs(mode, 2 * crossover, d, m)
    assert below[0] < below[1] and above[0] > above[1], "the n×n route is cheaper below N*, dearer above"
    assert panel["ratio"] == pytest.approx(100 / crossover)
    assert 100 in panel["ns"] and crossover in panel["ns"], "the current N and the crossover are on the grid"


def test_performer_crossover_is_notebook_09s_count():
    # notebook 09 §2: FAVOR+ costs macs_linear(N, N, m, d) + 2·N·d·m (x ωᵀ for q and k): break-even at N = 2m
    d, m = 64, 256
    n = 2 * m
    assert macs_softmax(n, n, d, d) == macs_linear(n, n, m, d) + 2 * n * d * m == route_macs(PERFORMER, n, d, m)[1]
    assert crossover_n(PERFORMER, d, m) == 2 * m and crossover_n(ELU, d, m) == d


def test_curves_are_the_mac_counts_and_the_held_entries():
    d, f = 8, 8
    panel = complexity_panel(ELU, 64, d, 32, False)
    ns = panel["ns"]
    assert (np.diff(ns) > 0).all() and ns[0] >= 1 and ns[-1] >= 10_000
    np.testing.assert_array_equal(panel["macs_linear"], [macs_linear(int(n), int(n), f, d) for n in ns])
    np.testing.assert_array_equal(panel["macs_softmax"], [macs_softmax(int(n), int(n), d, d) for n in ns])
    favor = complexity_panel(PERFORMER, 64, d, 32, False)  # FAVOR+'s curve includes its feature projections
    expected = [macs_linear(int(n), int(n), 32, d) + 2 * int(n) * 32 * d for n in favor["ns"]]
    np.testing.assert_array_equal(favor["macs_linear"], expected)
    at = int(np.flatnonzero(favor["ns"] == favor["crossover_n"])[0])
    assert favor["macs_linear"][at] == favor["macs_softmax"][at], "the curves meet at the marked crossover"
    np.testing.assert_array_equal(panel["bytes_softmax"], 4.0 * ns**2)
    np.testing.assert_array_equal(panel["bytes_linear"], 4.0 * (2 * ns * f + f * d + f))
    ledger = complexity_panel(RECURRENT, 64, d, 32, False)
    assert np.ptp(ledger["bytes_linear"]) == 0, "the ledger's memory does not depend on N"


def test_d_changes_the_costs():
    small, large = flow_panel(ELU, 64, 8, 16, False), flow_panel(ELU, 64, 16, 16, False)
    assert large["macs_quadratic"] == 2 * small["macs_quadratic"], "2N²d: linear in d"
    assert large["macs_linear"] == 4 * small["macs_linear"], "2N·d²: quadratic in d (f = dv = d)"


# ---- the widget ----------------------------------------------------------------------------


@pytest.fixture
def explorer() -> Explorer:
    return Explorer(mode=ELU, n=32, d=8, m=16, seed=0)


def test_controls_are_labelled_and_findable(explorer):
    assert set(explorer.controls) == {"mode", "n", "d", "m", "seed", "scale", "causal"}
    assert explorer.controls["n"].description == "N"
    assert tuple(explorer.controls["mode"].options) == MODES
    assert "course-explorer" in explorer.widget._dom_classes
    for name, control in explorer.controls.items():
        assert f"explorer-{name}" in control._dom_classes
    assert bytes(explorer.image.value[:4]) == b"\x89PNG", "the figure is shown as PNG bytes"
    assert "output error vs softmax" in explorer.summary.value


def test_n_control_resizes_every_panel(explorer):
    explorer.controls["n"].value = 64
    assert explorer.panels["weights"]["weights"].shape == (64, 64)
    assert stage(explorer.panels["flow"], "quadratic", "scores").shape == (64, 64)
    assert explorer.panels["complexity"]["n"] == 64


def test_d_control_changes_costs(explorer):
    before = explorer.panels["flow"]["macs_linear"]
    explorer.controls["d"].value = 16
    flow = explorer.panels["flow"]
    assert flow["macs_linear"] == macs_linear(32, 32, 16, 16) == 4 * before
    assert explorer.panels["complexity"]["crossover_n"] == 16
    assert explorer.panels["weights"]["output"].shape == (32, 16)


def test_m_control_sets_performer_features(explorer):
    explorer.controls["mode"].value = PERFORMER
    explorer.controls["m"].value = 64
    assert explorer.panels["weights"]["f"] == 64 and explorer.panels["flow"]["f"] == 64
    assert explorer.panels["complexity"]["crossover_n"] == 128, "FAVOR+ breaks even at N = 2m"
    error_64 = explorer.panels["weights"]["rel_error"]
    explorer.controls["m"].value = 8
    assert explorer.panels["weights"]["rel_error"] != error_64


def test_causal_control_masks_and_makes_z_per_position(explorer):
    explorer.controls["causal"].value = True
    assert (explorer.panels["weights"]["weights"][future(32)] == 0).all()
    assert stage(explorer.panels["flow"], "linear", "z").shape == (32, 8)
    explorer.controls["causal"].value = False
    assert (explorer.panels["weights"]["weights"][future(32)] > 0).all()
    assert stage(explorer.panels["flow"], "linear", "z").shape == (8,)


def test_seed_control_redraws_inputs(explorer):
    before = explorer.panels["weights"]["softmax"].clone()
    explorer.controls["seed"].value = 7
    assert explorer.panels["weights"]["seed"] == 7
    assert not torch.allclose(explorer.panels["weights"]["softmax"], before)


def test_scale_control_changes_the_spread(explorer):
    before = explorer.panels["weights"]["softmax"].max().item()
    explorer.controls["scale"].value = 1.5
    assert explorer.panels["weights"]["scale"] == 1.5
    assert explorer.panels["weights"]["softmax"].max().item() > before


def test_mode_control_changes_matrix_flow_and_image(explorer):
    linear_weights, linear_image = explorer.panels["weights"]["weights"], explorer.image.value
    explorer.controls["mode"].value = SOFTMAX
    assert explorer.panels["weights"]["rel_error"] == 0.0
    assert not torch.allclose(explorer.panels["weights"]["weights"], linear_weights)
    assert explorer.panels["flow"]["active"] == "quadratic"
    assert bytes(explorer.image.value) != bytes(linear_image), "the figure must be redrawn"
    explorer.controls["mode"].value = RECURRENT
    assert explorer.controls["causal"].disabled and explorer.panels["weights"]["causal"]
    assert stage(explorer.panels["flow"], "linear", "S").per_step


def test_explorer_refuses_settings_outside_the_sliders():
    with pytest.raises(ValueError, match="n must be between 8 and 256"):
        Explorer(n=512)


def test_explore_displays_one_output_with_the_png_as_the_widgets_fallback(monkeypatch):
    shown = []
    monkeypatch.setattr(explorer_module, "display", lambda item, **kwargs: shown.append((item, kwargs)))
    monkeypatch.delenv("COURSE_EXPLORER", raising=False)
    result = explore(n=16, d=4)
    assert isinstance(result, Explorer) and result.panels["weights"]["n"] == 16
    assert len(shown) == 1, "one output: JupyterLab must not show the figure twice"
    bundle, kwargs = shown[0]
    assert kwargs == {"raw": True}
    assert set(bundle) == {"application/vnd.jupyter.widget-view+json", "image/png", "text/plain"}
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == result.widget.model_id
    assert base64.b64decode(bundle["image/png"]) == result.png(), "the fallback is the starting figure"

    for static, name in ((True, "Image"), (False, "VBox")):
        shown.clear()
        explore(static=static, n=16, d=4)
        assert [type(item).__name__ for item, _ in shown] == [name]
    shown.clear()
    monkeypatch.setenv("COURSE_EXPLORER", "static")
    explore(n=16, d=4)
    assert [type(item).__name__ for item, _ in shown] == ["Image"], "COURSE_EXPLORER=static: the snapshot only"
    shown.clear()
    explore(show=False)
    assert shown == []
    monkeypatch.setenv("COURSE_EXPLORER", "sometimes")
    with pytest.raises(ValueError, match="COURSE_EXPLORER must be one of"):
        explore(n=16, d=4)


def test_widget_bundle_is_what_a_notebook_file_stores(explorer):
    # nbformat keeps image/png as base64 text: GitHub and nbconvert render it; JupyterLab picks the widget
    bundle = widget_bundle(explorer)
    assert bytes(base64.b64decode(bundle["image/png"])[:4]) == b"\x89PNG"
    assert "explorer" in bundle["text/plain"]
