"""The gated suite: the gated ledger's chunked forms against their recurrences and fla's references.

At N = ``n`` on seeded q, k, v [B, H, N, d] (``kernels.suite_qkv``), log gates uniform in
(−``max_gate``, 0] (one per key channel [B, H, N, d], GLA, or one per token [B, H, N], Mamba-2) and
β uniform in [0.1, 1), each group timed in turns (``timing.interleaved_times``):

* speedup: ``gated_linear_attention`` with method "recurrent" (the definition) and "chunked", for both
  gate shapes, and ``delta_rule_attention(log_decay=)`` (the gated delta rule) likewise; beside them the
  chunked form called without the API's checks (``gated_chunked``, ``delta_rule_chunked``: plain torch,
  so chunked / form is the validation's share);
* backward: the chunked call alone and forward + backward (``torch.autograd.grad`` through q, k, v and
  the gate, a fixed random output gradient), both gate shapes;
* peers, when fla imports (``kernels.fla_gated_peers``): the chunked scalar gate against
  ``naive_chunk_simple_gla`` and the chunked gated delta rule against ``naive_chunk_gated_delta_rule``.
  fla takes [B, T, H, K]: it is given contiguous copies made once, outside the timed call; its default
  scale is ours for the gated ledger, and the delta rule gets scale 1 and q, k L2-normalised inside the
  timed call, as ``delta_rule_attention`` does. Before timing, each peer's output is compared with ours
  on a small input (``agreement``); one that differs is recorded, not timed.

Each call's peak memory is measured once (``timing.peak_memory``), except the recurrences' (a profiled
Python loop of N steps). A ratio is median / median, with [min–max] over the ratios of the rounds.
"""

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F

from course_lib.delta import delta_rule_attention, delta_rule_chunked
from course_lib.gated import gated_chunked, gated_linear_attention
from course_tools.bench.kernels import fla_gated_peers, suite_qkv
from course_tools.bench.timing import interleaved_times, peak_memory, spread

AGREEMENT_RTOL = 1e-4  # a peer whose output differs from ours by more (relative to the largest entry) is not timed


@dataclass(frozen=True)
class GatedSettings:
    """What the gated suite runs; stored in the JSON."""

    n: int
    min_run_time: float  # seconds per torch.utils.benchmark measurement (a call shorter than this)
    repeats: int = 5
    max_gate: float = 0.1  # log gates uniform in (−max_gate, 0]: GLA's logsigmoid(x)/16 lies about there
    batch: int = 1
    heads: int = 8
    d: int = 64
    seed: int = 0
    dtype: str = "float32"


FULL = GatedSettings(n=4096, min_run_time=0.1)
QUICK = GatedSettings(n=256, min_run_time=0.01, repeats=2)


def gated_inputs(settings: GatedSettings, device: torch.device) -> dict[str, torch.Tensor]:
    """q, k, v [B, H, N, d], log gates per channel [B, H, N, d] and per token [B, H, N], β [B, H, N]."""
    n = settings.n
    q, k, v = suite_qkv(settings, settings.heads, n, settings.d, device)
    generator = torch.Generator().manual_seed(settings.seed + 1)
    draw = lambda *shape: torch.rand(*shape, generator=generator, dtype=q.dtype).to(device)  # noqa: E731
    shape = (settings.batch, settings.heads, n)
    return {"q": q, "k": k, "v": v, "per_channel": -settings.max_gate * draw(*shape, settings.d),
            "scalar": -settings.max_gate * draw(*shape), "beta": 0.1 + 0.9 * draw(*shape)}


def timed(calls: dict, settings: GatedSettings, device: torch.device, *, memory: tuple[str, ...] = ()) -> dict:
    """{name: spread of its times (+ "peak_bytes" for the names in ``memory``)}, the calls timed in turns."""
    seconds = interleaved_times(calls, device, repeats=settings.repeats, min_run_time=settings.min_run_time)
    return {name: spread(values) | ({"peak_bytes": peak_memory(calls[name], device)} if name in memory else {})
            for name, values in seconds.items()}


def ratio(times: dict, slow: str, fast: str) -> dict:
    """{"ratio": median slow / median fast, "ratio_min", "ratio_max" over the rounds' own slow / fast}."""
    per_round = [s / f for s, f in zip(times[slow]["times_s"], times[fast]["times_s"])]
    return {"ratio": times[slow]["time_s"] / times[fast]["time_s"], "ratio_min": min(per_round),
            "ratio_max": max(per_round)}


def _gated_calls(x: dict, gate: str) -> dict:
    g = x[gate]
    state = x["q"].new_zeros(*x["q"].shape[:-2], x["q"].shape[-1], x["v"].shape[-1])
    form_gate = g if gate == "per_channel" else g.unsqueeze(-1)  # the form takes [..., n, dk or 1]
    return {"recurrent": lambda: gated_linear_attention(x["q"], x["k"], x["v"], g, method="recurrent"),
            "chunked": lambda: gated_linear_attention(x["q"], x["k"], x["v"], g),
            "form": lambda: gated_chunked(x["q"], x["k"], x["v"], form_gate, state)}


def _delta_calls(x: dict) -> dict:
    q, k, v, beta, g = x["q"], x["k"], x["v"], x["beta"], x["scalar"]
    return {"recurrent": lambda: delta_rule_attention(q, k, v, beta, method="recurrent", log_decay=g),
            "chunked": lambda: delta_rule_attention(q, k, v, beta, log_decay=g),
            "form": lambda: delta_rule_chunked(F.normalize(q, dim=-1), F.normalize(k, dim=-1), v, beta, None, g)}


def run_speedup(settings: GatedSettings, device: torch.device) -> dict:
    """{"per_channel" | "scalar" | "gated_delta": times of recurrent, chunked, form and recurrent / chunked}."""
    x = gated_inputs(settings, device)
    groups = {"per_channel": _gated_calls(x, "per_channel"), "scalar": _gated_calls(x, "scalar"),
              "gated_delta": _delta_calls(x)}
    result = {}
    for name, calls in groups.items():
        times = timed(calls, settings, device, memory=("chunked", "form"))
        result[name] = times | ratio(times, "recurrent", "chunked")
    return result


def _backward_calls(x: dict, gate: str, grad: torch.Tensor) -> dict:
    leaves = [x[name].clone().requires_grad_() for name in ("q", "k", "v", gate)]

    def forward() -> torch.Tensor:
        return gated_linear_attention(*leaves)

    return {"forward": forward, "forward_backward": lambda: torch.autograd.grad(forward(), leaves, grad)}


def run_backward(settings: GatedSettings, device: torch.device) -> dict:
    """{"per_channel" | "scalar": times of the chunked forward and of forward + backward, and their ratio}."""
    x = gated_inputs(settings, device)
    grad = torch.randn(x["v"].shape, generator=torch.Generator().manual_seed(settings.seed + 2),
                       dtype=x["v"].dtype).to(device)  # [B, H, N, d], fixed
    result = {}
    for gate in ("per_channel", "scalar"):
        times = timed(_backward_calls(x, gate, grad), settings, device, memory=("forward_backward",))
        result[gate] = times | ratio(times, "forward_backward", "forward")
    return result


def _peer_calls(x: dict, peers: dict) -> dict:
    """{peer: {"course_lib": our call, "fla": fla's}} on the inputs ``x``; fla's layout [B, T, H, ·], contiguous."""
    q, k, v, beta, g = (x[name].transpose(1, 2).contiguous() for name in ("q", "k", "v", "beta", "scalar"))
    simple, delta = peers["simple_gla"], peers["gated_delta"]
    return {
        "simple_gla": {"course_lib": lambda: gated_linear_attention(x["q"], x["k"], x["v"], x["scalar"]),
                       "fla": lambda: simple(q, k, v, g)[0].transpose(1, 2)},
        "gated_delta": {"course_lib": lambda: delta_rule_attention(x["q"], x["k"], x["v"], x["beta"],
                                                                   log_decay=x["scalar"]),
                        "fla": lambda: delta(F.normalize(q, dim=-1), F.normalize(k, dim=-1), v, g, beta,
                                             scale=1.0)[0].transpose(1, 2)},
    }


def agreement(calls: dict) -> float:
    """max |fla − ours| / max |ours| of one pair of calls."""
    ours, theirs = calls["course_lib"](), calls["fla"]()
    return ((theirs - ours).abs().max() / ours.abs().max()).item()


def run_peers(settings: GatedSettings, device: torch.device) -> dict:
    """{"note", "version", and per peer timed: "agreement", the times of "course_lib" and "fla" and their
    "ratio" fla / course_lib (>= 1: ours at least as fast); a peer not timed has "error" instead."""
    peers, note, version = fla_gated_peers()
    result = {"note": note, "version": version}
    if not peers:
        return result
    checks = _peer_calls(gated_inputs(replace(settings, n=100, heads=2, d=16), device), peers)
    for name, calls in _peer_calls(gated_inputs(settings, device), peers).items():
        try:
            gap = agreement(checks[name])
        except Exception as error:  # a third-party reference that fails on this torch or device
            result[name] = {"error": f"fla raised {type(error).__name__}: {error}"}
            continue
        if not gap <= AGREEMENT_RTOL:
            result[name] = {"agreement": gap, "error": f"fla's output differs from ours by {gap:.3g} (relative)"}
            continue
        times = timed(calls, settings, device, memory=("course_lib", "fla"))
        result[name] = {"agreement": gap, **times, **ratio(times, "fla", "course_lib")}
    return result


def run_gated(settings: GatedSettings, device: torch.device) -> dict:
    """The three groups: {"settings", "speedup", "backward", "peers"}."""
    return {"settings": asdict(settings), "speedup": run_speedup(settings, device),
            "backward": run_backward(settings, device), "peers": run_peers(settings, device)}
