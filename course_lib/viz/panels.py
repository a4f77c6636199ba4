"""The data behind the explorer's three panels: pure functions, no widgets (notebook 11).

* ``weights_panel``: the n×n matrix a mode attends with (softmax, or the matrix implied by
  a feature map, φ(Q)φ(K)ᵀ row-normalised) and its error against softmax;
* ``flow_panel``: the stages of the n×n route and of the linear route, with shapes and
  multiply counts;
* ``complexity_panel``: multiply-adds and memory of both routes against N, and the crossover.

One cost model throughout (notebook 09, misconception 2): multiply-accumulates (MACs) of the
matrix products (``cost.macs_softmax``, ``cost.macs_linear``) plus, for Performer (FAVOR+),
the projections of the N queries and N keys onto the m random directions, 2·N·m·d MACs
(``cost.feature_map_macs``). The n×n route and the linear route then cost the same at N = d for elu+1
and at N = 2m for FAVOR+ (``crossover_n``).

Inputs are float64 on the CPU, drawn from a seeded ``torch.Generator``, so every number
is reproducible. Self-attention throughout: n = m = N tokens and dv = d. ``scale`` σ sets
the spread of queries and keys, q, k ~ N(0, σ²I): the logits qᵀk/√d then have standard
deviation σ², so a larger σ means a more peaked softmax, and a harder one for Performer
(its estimator's variance grows like exp(‖q‖²/√d + ‖k‖²/√d), notebook 06).
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from course_lib.attention import kernel_weights, linear_attention, softmax_weights
from course_lib.feature_maps import elu_plus_one
from course_lib.cost import feature_map_macs, macs_linear, macs_softmax
from course_lib.measure import relative_error
from course_lib.random_features import PerformerFeatures
from course_lib.validation import check_choice, check_int, check_ints, check_number

MODES = ("softmax", "linear (elu+1)", "Performer", "causal recurrent")
SOFTMAX, ELU, PERFORMER, RECURRENT = MODES
FEATURE_STREAM = 10_000  # ω comes from generator seed + this: N never redraws ω, m never redraws q, k, v
DEFAULT_SCALE = 0.6


def check_settings(mode: str, n: int, d: int, m: int, seed: int, scale: float = DEFAULT_SCALE) -> None:
    """Raise ValueError naming the first bad setting."""
    check_choice("mode", mode, MODES)
    check_ints(n=n, d=d, m=m)
    check_int("seed", seed, at_least=0)
    check_number("scale", scale, above=0, meaning="the spread σ of q and k")


def is_causal(mode: str, causal: bool) -> bool:
    """The causal flag in effect: the recurrent ledger is causal by construction."""
    return bool(causal) or mode == RECURRENT


def feature_count(mode: str, d: int, m: int) -> int:
    """f, features per token of the mode's linear route: m for Performer, else d (elu+1, also softmax's alternative)."""
    return m if mode == PERFORMER else d


def route_macs(mode: str, n: int, d: int, m: int) -> tuple[int, int]:
    """(n×n route, linear route) MACs of ``mode`` for self-attention over n tokens, dv = d.

    n×n: ``macs_softmax(n, n, d, d)`` = 2n²d. Linear: ``macs_linear(n, n, f, d)`` = 2n·f·d plus
    ``feature_map_macs`` (2n·m·d for Performer), so 2n·d² for elu+1 and 4n·m·d for FAVOR+.
    """
    check_settings(mode, n, d, m, seed=0)
    f = feature_count(mode, d, m)
    linear = macs_linear(n, n, f, d) + feature_map_macs(n, d, f, projection=mode == PERFORMER)
    return macs_softmax(n, n, d, d), linear


def crossover_n(mode: str, d: int, m: int) -> float:
    """The N where both routes cost the same MACs: d for elu+1 (and softmax's alternative), 2m for FAVOR+.

    The n×n route costs N²·a and the linear route N·b (``route_macs``), so they meet at N = b / a,
    read off ``route_macs`` at N = 1: 2d² / 2d = d, or 4md / 2d = 2m.
    """
    quadratic_at_one, linear_at_one = route_macs(mode, 1, d, m)
    return linear_at_one / quadratic_at_one


def panel_inputs(n: int, d: int, seed: int, scale: float = DEFAULT_SCALE) -> tuple[torch.Tensor, ...]:
    """q, k ~ N(0, scale²), v ~ N(0, 1), each [n, d] float64, from ``torch.Generator().manual_seed(seed)``."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(n, d, generator=g, dtype=torch.float64) for _ in range(3))
    return q * scale, k * scale, v


def feature_map_for(mode: str, d: int, m: int, seed: int):
    """The mode's φ: PerformerFeatures(d, m) (positive, orthogonal, ω from its own seeded stream) or elu+1."""
    if mode == PERFORMER:
        return PerformerFeatures(d, m, generator=torch.Generator().manual_seed(seed + FEATURE_STREAM))
    return elu_plus_one


def weights_panel(mode: str, n: int, d: int, m: int, causal: bool, seed: int, scale: float = DEFAULT_SCALE) -> dict:
    """The attention matrix of ``mode`` and its distance from softmax attention.

    softmax: A = softmax(QKᵀ/√d). Linear modes: the implied A_ij = φ(q_i)ᵀφ(k_j) / Σ_j' φ(q_i)ᵀφ(k_j')
    (``kernel_weights``), masked to j ≤ i when causal. ``output`` is computed by the mode's own
    route (softmax: weights @ v; linear_attention's fast path, or the recurrent ledger in
    "causal recurrent" mode), so output = weights @ v checks the picture against the route.
    Returns weights and softmax [n, n], output and softmax_output [n, d], rel_error
    (‖out − out_softmax‖ / ‖out_softmax‖), max_abs_diff (max |A − A_softmax|), f, causal.
    """
    check_settings(mode, n, d, m, seed, scale)
    causal = is_causal(mode, causal)
    q, k, v = panel_inputs(n, d, seed, scale)
    reference = softmax_weights(q, k, causal=causal)  # [n, n]
    reference_output = reference @ v  # [n, d]
    if mode == SOFTMAX:
        weights, output = reference, reference_output
    else:
        phi = feature_map_for(mode, d, m, seed)
        weights = kernel_weights(q, k, phi, causal=causal)  # [n, n]
        method = "recurrent" if mode == RECURRENT else "auto"
        output = linear_attention(q, k, v, phi, causal=causal, method=method)  # [n, d]
    return {
        "mode": mode,
        "n": n,
        "d": d,
        "f": feature_count(mode, d, m),
        "causal": causal,
        "seed": seed,
        "scale": scale,
        "weights": weights,
        "softmax": reference,
        "output": output,
        "softmax_output": reference_output,
        "rel_error": relative_error(output, reference_output),
        "max_abs_diff": (weights - reference).abs().max().item(),
    }


@dataclass(frozen=True)
class Stage:
    """One box of the flow: a tensor the route computes.

    ``shape`` in numbers, ``dims`` in symbols ("N×f"); ``macs`` = the multiply-accumulates
    that produce it (summed over all N steps for the ledger); ``counted`` = part of the
    ``macs_softmax`` / ``macs_linear`` matrix-product count (feature maps and normalisers
    are not); ``held`` = an intermediate the route keeps in memory (inputs and the output,
    common to both routes, are not); ``per_step`` = overwritten once per token (the ledger).
    """

    name: str
    dims: str
    shape: tuple[int, ...]
    macs: int
    counted: bool
    held: bool
    per_step: bool = False
    note: str = ""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def quadratic_route(n: int, d: int, dv: int, causal: bool) -> list[Stage]:
    """QKᵀ/√d [N×N] → softmax [N×N] → ·V [N×dv]: n·n·d + n·n·dv MACs (``macs_softmax``)."""
    mask = "j > i set to −∞, still computed" if causal else ""
    return [
        Stage("scores QKᵀ/√d", "N×N", (n, n), n * n * d, counted=True, held=True, note=mask),
        Stage("A = softmax(scores)", "N×N", (n, n), 0, counted=False, held=False, note="N² exps, in place"),
        Stage("out = A·V", "N×dv", (n, dv), n * n * dv, counted=True, held=False),
    ]


def linear_route(n: int, d: int, dv: int, f: int, *, causal: bool, recurrent: bool, projection: bool) -> list[Stage]:
    """φ(Q)(φ(K)ᵀV) / φ(Q)z: n·f·dv + n·f·dv MACs (``macs_linear``), plus the feature map.

    Non-causal: one S = φ(K)ᵀV [f×dv] and z = Σ_j φ(k_j) [f] read by every query.
    Causal, parallel: one prefix S_i [f×dv] and z_i [f] per position, [N×f×dv] and [N×f].
    Recurrent: the ledger S [f×dv], z [f] updated token by token, so memory does not grow with N.
    ``projection``: φ multiplies by ω [f×d] (Performer, n·f·d MACs per input), else elementwise.
    """
    feature_macs = feature_map_macs(n, d, f, projection=projection)
    read = Stage("out = φ(Q)S / φ(Q)z", "N×dv", (n, dv), n * f * dv, counted=True, held=False,
                 note="+ N·f for φ(Q)z")
    if recurrent:
        return [
            Stage("φ(q_t), φ(k_t)", "2×f", (2, f), feature_macs, counted=False, held=True, per_step=True),
            Stage("S ← S + φ(k_t)v_tᵀ", "f×dv", (f, dv), n * f * dv, counted=True, held=True, per_step=True),
            Stage("z ← z + φ(k_t)", "f", (f,), 0, counted=False, held=True, per_step=True),
            read,
        ]
    features = Stage("φ(Q), φ(K)", "2×N×f", (2, n, f), feature_macs, counted=False, held=True)
    if causal:
        summary = Stage("S_i = Σ_{j≤i} φ(k_j)v_jᵀ", "N×f×dv", (n, f, dv), n * f * dv, counted=True, held=True)
        normaliser = Stage("z_i = Σ_{j≤i} φ(k_j)", "N×f", (n, f), 0, counted=False, held=True)
    else:
        summary = Stage("S = φ(K)ᵀV", "f×dv", (f, dv), n * f * dv, counted=True, held=True)
        normaliser = Stage("z = Σ_j φ(k_j)", "f", (f,), 0, counted=False, held=True)
    return [features, summary, normaliser, read]


def held_entries(stages: list[Stage]) -> int:
    """Entries of the intermediates a route keeps in memory at once."""
    return sum(stage.numel for stage in stages if stage.held)


def flow_panel(mode: str, n: int, d: int, m: int, causal: bool) -> dict:
    """Both routes for ``mode``, as stages with shapes and multiply counts.

    ``active`` is the route the mode runs; softmax mode shows elu+1 (f = d) as the
    alternative. ``macs_quadratic`` = macs_softmax(N, N, d, d), ``macs_linear`` =
    macs_linear(N, N, f, d) (the matrix products), ``macs_features`` = ``feature_map_macs``,
    ``macs_linear_total`` = their sum (``route_macs``); ``macs_ratio`` = macs_quadratic /
    macs_linear_total = N / ``crossover_n``: N/d for elu+1, N/(2m) for FAVOR+.
    """
    check_settings(mode, n, d, m, seed=0)
    causal, f, dv = is_causal(mode, causal), feature_count(mode, d, m), d
    quadratic = quadratic_route(n, d, dv, causal)
    linear = linear_route(n, d, dv, f, causal=causal, recurrent=mode == RECURRENT, projection=mode == PERFORMER)
    macs_q, macs_total = route_macs(mode, n, d, m)
    macs_l = macs_linear(n, n, f, dv)
    return {
        "mode": mode,
        "n": n,
        "d": d,
        "dv": dv,
        "f": f,
        "causal": causal,
        "active": "quadratic" if mode == SOFTMAX else "linear",
        "linear_map": "Performer" if mode == PERFORMER else "elu+1",
        "quadratic": quadratic,
        "linear": linear,
        "macs_quadratic": macs_q,
        "macs_linear": macs_l,
        "macs_features": macs_total - macs_l,
        "macs_linear_total": macs_total,
        "macs_ratio": macs_q / macs_total,
        "held_quadratic": held_entries(quadratic),
        "held_linear": held_entries(linear),
    }


def default_ns(n: int, crossover_n: float) -> np.ndarray:
    """A log grid 2..65536 with N and the crossover included (sorted, unique ints)."""
    grid = np.geomspace(2, 65536, 49).round().astype(np.int64)
    return np.unique(np.concatenate([grid, [n, max(1, round(crossover_n))]]))


def complexity_panel(mode: str, n: int, d: int, m: int, causal: bool, *, itemsize: int = 4) -> dict:
    """Multiply-adds (MACs, the course's one cost unit) and memory of both routes against N, one head.

    macs = ``route_macs``: 2N²d for the n×n route, 2N·d² for elu+1 and 4N·m·d for FAVOR+ (its
    feature projections included). bytes = ``itemsize``
    (float32: 4) × the entries each route holds (``flow_panel``'s held stages): N² for the matrix;
    2N·f + f·dv + f for the blackboard; N·f·dv + N·f + 2N·f for the causal prefix sums;
    f·dv + 3f for the ledger. ``crossover_n``: N = d for elu+1, N = 2m for FAVOR+; the n×n route
    costs N / crossover_n times the linear one (``ratio``).
    """
    check_settings(mode, n, d, m, seed=0)
    check_int("itemsize", itemsize, meaning="bytes per entry")
    f = feature_count(mode, d, m)
    crossover = crossover_n(mode, d, m)
    ns = default_ns(n, crossover)
    flows = [flow_panel(mode, int(size), d, m, causal) for size in ns]
    return {
        "mode": mode,
        "n": n,
        "f": f,
        "ns": ns,
        "macs_softmax": np.array([flow["macs_quadratic"] for flow in flows], dtype=np.float64),
        "macs_linear": np.array([flow["macs_linear_total"] for flow in flows], dtype=np.float64),
        "bytes_softmax": np.array([itemsize * flow["held_quadratic"] for flow in flows], dtype=np.float64),
        "bytes_linear": np.array([itemsize * flow["held_linear"] for flow in flows], dtype=np.float64),
        "crossover_n": crossover,
        "crossover_label": "2m" if mode == PERFORMER else "d",
        "ratio": n / crossover,
    }


def all_panels(mode: str, n: int, d: int, m: int, causal: bool, seed: int, scale: float = DEFAULT_SCALE) -> dict:
    """{"weights": ..., "flow": ..., "complexity": ...} for one setting of the controls."""
    return {
        "weights": weights_panel(mode, n, d, m, causal, seed, scale),
        "flow": flow_panel(mode, n, d, m, causal),
        "complexity": complexity_panel(mode, n, d, m, causal),
    }
