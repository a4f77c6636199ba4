"""The engine suite: where a causal call's time goes, how decay scales, what backward costs.

All through the public API, ``linear_attention(q, k, v, causal=True)`` (elu + 1, method "auto"),
on seeded q, k, v [B, H, N, d] fp32 (``kernels.suite_qkv``):

* profile: the share of the call's time outside its matrix products (``timing.matmul_share``:
  matmul time from the profiler, call time without it), the median over ``profile_repeats``
  measurements at N = ``profile_n``; beside it the floor no eager elu + 1 gets under
  (``exp_pass``: one exp per entry of q and k, block by block into a reused buffer, as the
  engine does);
* decay: the call with ``decay=γ`` at the short and the long N of ``decay_ns``, and without
  decay at the long N, timed in turns (``timing.interleaved_times``);
* backward: the forward alone and forward + backward (``torch.autograd.grad`` with a fixed
  random output gradient) at N = ``backward_n``, q, k, v requiring grad. A backward that raises
  is recorded as ``{"error": "not measured: ..."}`` instead of a time.
"""

from dataclasses import asdict, dataclass

import torch

from course_lib.attention import linear_attention
from course_lib.fast_forms import BLOCK_ROWS
from course_lib.measure import time_call
from course_tools.bench.kernels import suite_qkv
from course_tools.bench.timing import interleaved_times, matmul_share, spread


@dataclass(frozen=True)
class EngineSettings:
    """What the engine suite runs; stored in the JSON."""

    profile_n: int
    decay_ns: tuple[int, int]  # (short, long): the decayed time at long over short
    backward_n: int
    min_run_time: float  # seconds per torch.utils.benchmark measurement (one repeat)
    repeats: int = 3
    profile_repeats: int = 3
    decay: float = 0.9
    batch: int = 1
    heads: int = 8
    d: int = 64
    seed: int = 0
    dtype: str = "float32"


FULL = EngineSettings(profile_n=8192, decay_ns=(16384, 65536), backward_n=4096, min_run_time=0.1, repeats=5,
                      profile_repeats=5)
QUICK = EngineSettings(profile_n=1024, decay_ns=(512, 2048), backward_n=512, min_run_time=0.01, repeats=2,
                       profile_repeats=2)


def _qkv(settings: EngineSettings, n: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return suite_qkv(settings, settings.heads, n, settings.d, device)  # [B, H, N, d]


def exp_pass(q: torch.Tensor, k: torch.Tensor, rows: int = BLOCK_ROWS):
    """A call that takes exp of every entry of q and k [..., N, d], ``rows`` rows at a time into one
    reused buffer: the one elementwise pass elu + 1 = exp(min(x, 0)) + max(x, 0) cannot avoid."""
    buffer = torch.empty_like(q[..., :rows, :])  # [..., rows, d]

    def call() -> None:
        for start in range(0, q.shape[-2], rows):
            for x in (q, k):
                block = x[..., start : start + rows, :]
                torch.exp(block, out=buffer[..., : block.shape[-2], :])

    return call


def run_profile(settings: EngineSettings, device: torch.device) -> dict:
    """{"n", "outside_share" (median), "call_s", "profiled_call_s", "matmul_s" (of that measurement),
    "shares" (every measurement), "exp_s" (``exp_pass``) and "exp_share" = exp_s / call_s}."""
    q, k, v = _qkv(settings, settings.profile_n, device)
    call = lambda: linear_attention(q, k, v, causal=True)  # noqa: E731
    call()  # warm-up: thread pools and lazy inits outside the profile
    profiles = sorted((matmul_share(call, device, min_run_time=settings.min_run_time)
                       for _ in range(settings.profile_repeats)),
                      key=lambda profile: profile["outside_share"])
    middle = profiles[(len(profiles) - 1) // 2]
    exp_s = time_call(exp_pass(q, k), min_run_time=settings.min_run_time)
    return {"n": settings.profile_n, **middle, "shares": [profile["outside_share"] for profile in profiles],
            "exp_s": exp_s, "exp_share": exp_s / middle["call_s"]}


def run_decay(settings: EngineSettings, device: torch.device) -> dict:
    """Times of the decayed call at both lengths and of the undecayed one at the long length, and
    their ratios: "long_over_short" (decayed) and "decayed_over_undecayed" (at the long length)."""
    short, long = settings.decay_ns
    q_short, k_short, v_short = _qkv(settings, short, device)
    q, k, v = _qkv(settings, long, device)
    gamma = settings.decay
    calls = {
        "decayed_short": lambda: linear_attention(q_short, k_short, v_short, causal=True, decay=gamma),
        "decayed_long": lambda: linear_attention(q, k, v, causal=True, decay=gamma),
        "undecayed_long": lambda: linear_attention(q, k, v, causal=True),
    }
    times = {name: spread(seconds) for name, seconds in
             interleaved_times(calls, device, repeats=settings.repeats, min_run_time=settings.min_run_time).items()}
    median = {name: timing["time_s"] for name, timing in times.items()}
    return {"ns": [short, long], "gamma": gamma, **times,
            "long_over_short": median["decayed_long"] / median["decayed_short"],
            "decayed_over_undecayed": median["decayed_long"] / median["undecayed_long"]}


def _first_line(error: Exception, limit: int = 200) -> str:
    line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def run_backward(settings: EngineSettings, device: torch.device) -> dict:
    """{"n", "forward", "forward_backward" (spreads), "ratio"} or {"n", "error": "not measured: ..."}."""
    q, k, v = (x.requires_grad_() for x in _qkv(settings, settings.backward_n, device))
    generator = torch.Generator().manual_seed(settings.seed + 1)
    grad = torch.randn(q.shape, generator=generator, dtype=q.dtype).to(device)  # [B, H, N, dv], fixed

    def forward() -> torch.Tensor:
        return linear_attention(q, k, v, causal=True)

    def forward_backward() -> tuple[torch.Tensor, ...]:
        return torch.autograd.grad(forward(), (q, k, v), grad)

    try:
        forward_backward()
    except RuntimeError as error:
        return {"n": settings.backward_n, "error": f"not measured: {_first_line(error)}"}
    seconds = interleaved_times({"forward": forward, "forward_backward": forward_backward}, device,
                                repeats=settings.repeats, min_run_time=settings.min_run_time)
    times = {name: spread(values) for name, values in seconds.items()}
    return {"n": settings.backward_n, **times,
            "ratio": times["forward_backward"]["time_s"] / times["forward"]["time_s"]}


def run_engine(settings: EngineSettings, device: torch.device) -> dict:
    """The three measurements: {"settings", "profile", "decay", "backward"}."""
    return {"settings": asdict(settings), "profile": run_profile(settings, device),
            "decay": run_decay(settings, device), "backward": run_backward(settings, device)}
