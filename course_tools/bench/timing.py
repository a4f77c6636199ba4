"""Time, peak memory and the matmul share of one call, on the CPU or CUDA.

Time: ``course_lib.measure.time_call`` (torch.utils.benchmark: warm-up, median of
blocks, the process's thread count, synchronised on CUDA), or one call timed alone when it
is long enough; ``interleaved_times`` takes turns between several calls.

Peak memory, the most bytes held at once during one call above what was held before it:

* CUDA: ``torch.cuda.reset_peak_memory_stats``, then ``max_memory_allocated`` minus the
  allocation at the start of the call.
* CPU: ``torch.profiler`` with ``profile_memory=True`` records one "[memory]" event per
  allocation (+bytes) and per free (−bytes) with its start time; sorted by time, the
  largest running sum is the peak. The events come from the profiler's Kineto results
  (``prof.profiler.kineto_results.events()``): in torch 2.13 the higher-level
  ``prof.events()`` files most allocations under the op that made them and so loses the
  order of allocation against free. Only allocations through torch's CPU allocator are seen
  (tensor storage), not Python objects.

Matmul share (``matmul_share``): the self time of the matrix product ops (``MATMUL_OPS``: CPU
time, or on CUDA the device time of their kernels) in one call under ``torch.profiler``, against
the call's time measured without it (``measure.time_call``). Dividing by the profiled call's own
time overstates the share outside: the profiler slows the other ops far more than its few
microseconds per op. On the 2-core CPU the causal call at N = 8192 took 58 ms profiled against
28 ms plain, most of the gap in one op — dividing a 1 MB block into fresh output pages took
1.5 ms under the profiler and 0.05 ms without — so the old ratio read 0.62 where the matmuls
in fact left ~0.3 of the plain call. Both call times are recorded.
"""

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from course_lib.measure import time_call
from course_lib.validation import check_int

CPU_MEMORY_METHOD = (
    "torch.profiler(profile_memory=True): max running sum of the time-ordered [memory] "
    "alloc/free events (kineto_results.events()) during one call"
)
CUDA_MEMORY_METHOD = "torch.cuda.max_memory_allocated() after reset_peak_memory_stats(), minus the bytes allocated before"


def memory_method(device: torch.device) -> str:
    """How ``peak_memory`` measures on ``device``, for the JSON record."""
    return CUDA_MEMORY_METHOD if device.type == "cuda" else CPU_MEMORY_METHOD


def running_peak(events: list[tuple[int, int]]) -> int:
    """Largest running sum of (time, ±bytes) events taken in time order; 0 if nothing is held."""
    held = peak = 0
    for _, nbytes in sorted(events, key=lambda event: event[0]):
        held += nbytes
        peak = max(peak, held)
    return peak


@contextlib.contextmanager
def _silenced_stderr_fd() -> Iterator[None]:
    """File descriptor 2 sent to /dev/null: the profiler's C++ logger writes "USDT ... profiler_start /
    profiler_stop" lines straight to it on every use (no setting turns them off in torch 2.13)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _cpu_peak(fn: Callable[[], object]) -> int:
    with _silenced_stderr_fd(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()  # the result is dropped inside the window, so its free is recorded too
    events = prof.profiler.kineto_results.events()
    return running_peak([(event.start_ns(), event.nbytes()) for event in events if event.name() == "[memory]"])


def _cuda_peak(fn: Callable[[], object], device: torch.device) -> int:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    baseline = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - baseline


def peak_memory(fn: Callable[[], object], device: torch.device) -> int:
    """Peak extra bytes allocated during one call of ``fn()`` on ``device`` (CPU or CUDA)."""
    if device.type == "cuda":
        return _cuda_peak(fn, device)
    if device.type != "cpu":
        raise ValueError(f"device must be cpu or cuda to measure memory, got {device}")
    return _cpu_peak(fn)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing to wait for on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once(fn: Callable[[], object], device: torch.device, *, min_run_time: float, single_call: bool) -> float:
    """Seconds per call of ``fn()``: one call timed with ``time.perf_counter`` (``single_call``: a call
    long enough to need no blocking) or ``measure.time_call(fn, min_run_time=...)`` (a median of blocks)."""
    if not single_call:
        return time_call(fn, min_run_time=min_run_time)
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def warm_up_call(fn: Callable[[], object], device: torch.device, *, min_run_time: float) -> bool:
    """One untimed-in-the-result warm-up call; True when it took at least ``min_run_time`` (then
    ``time_once(..., single_call=True)`` is precise enough for it)."""
    return time_once(fn, device, min_run_time=min_run_time, single_call=True) >= min_run_time


def time_repeats(fn: Callable[[], object], device: torch.device, *, repeats: int, min_run_time: float) -> list[float]:
    """Seconds per call of ``fn()``, measured ``repeats`` times (one number per repeat).

    One warm-up call (``warm_up_call``) decides how each repeat is timed (``time_once``): a
    call longer than ``min_run_time`` singly, a shorter one as a median of blocks. The spread
    of the repeats is what re-running the measurement would show.
    """
    check_int("repeats", repeats)
    single = warm_up_call(fn, device, min_run_time=min_run_time)
    return [time_once(fn, device, min_run_time=min_run_time, single_call=single) for _ in range(repeats)]


def spread(seconds: list[float]) -> dict[str, float | list[float]]:
    """{"time_s": median, "time_min_s", "time_max_s", "times_s": the repeats} of repeated timings."""
    if not seconds:
        raise ValueError("seconds must hold at least one timing, got an empty list")
    return {"time_s": statistics.median(seconds), "time_min_s": min(seconds), "time_max_s": max(seconds),
            "times_s": list(seconds)}


def interleaved_times(calls: dict[str, Callable[[], object]], device: torch.device, *, repeats: int,
                      min_run_time: float) -> dict[str, list[float]]:
    """{name: [seconds per call, one per repeat]}: repeat r times every call once before repeat r + 1
    starts, so a burst of load on a shared machine hits every contender, not one."""
    single = {name: warm_up_call(call, device, min_run_time=min_run_time) for name, call in calls.items()}
    seconds = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            seconds[name].append(time_once(call, device, min_run_time=min_run_time, single_call=single[name]))
    return seconds


MATMUL_OPS = frozenset({"aten::mm", "aten::bmm", "aten::addmm", "aten::addmm_", "aten::baddbmm", "aten::baddbmm_",
                        "aten::addbmm", "aten::addbmm_", "aten::mv", "aten::addmv", "aten::addmv_", "aten::dot"})
CALL_LABEL = "course_tools.bench: the profiled call"


def matmul_share(fn: Callable[[], object], device: torch.device, *, min_run_time: float = 0.1) -> dict[str, float]:
    """{"call_s", "profiled_call_s", "matmul_s", "outside_share"}: ``fn()``'s time without the profiler
    (median of blocks of ``min_run_time`` s), its time in one profiled call, the self time of its
    ``MATMUL_OPS`` there (device time on CUDA), and 1 − matmul_s / call_s, at least 0 (module docstring)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    with _silenced_stderr_fd(), profile(activities=activities) as prof:
        with record_function(CALL_LABEL):
            fn()
            synchronize(device)
    events = prof.key_averages()
    profiled_us = sum(event.cpu_time_total for event in events if event.key == CALL_LABEL)
    self_us = (lambda e: e.self_device_time_total) if device.type == "cuda" else (lambda e: e.self_cpu_time_total)
    matmul_s = sum(self_us(event) for event in events if event.key in MATMUL_OPS) * 1e-6
    call_s = time_call(fn, min_run_time=min_run_time)
    return {"call_s": call_s, "profiled_call_s": profiled_us * 1e-6, "matmul_s": matmul_s,
            "outside_share": max(0.0, 1 - matmul_s / call_s)}
