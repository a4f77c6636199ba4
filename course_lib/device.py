"""Pick the device a notebook runs on: cuda, then mps, then cpu, overridable; ``one_thread`` for loops of small ops;
``seeded_qkv``, the same random inputs on every device."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

DEVICE_ENV_VAR = "COURSE_DEVICE"


def _available(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    if device.type == "mps":
        return torch.backends.mps.is_available()
    return device.type == "cpu"


def get_device(override: str | None = None) -> torch.device:
    """Return the device to compute on.

    Order: ``override`` argument, then the ``COURSE_DEVICE`` environment variable
    (e.g. ``cpu``, ``cuda:1``), then the first available of cuda → mps → cpu.
    An explicit choice that is not available raises ``ValueError`` instead of
    silently falling back.
    """
    choice = override if override is not None else os.environ.get(DEVICE_ENV_VAR, "").strip()
    if choice:
        source = "override" if override is not None else DEVICE_ENV_VAR
        try:
            device = torch.device(choice)
        except RuntimeError as error:
            raise ValueError(f"{source} must name a torch device such as 'cpu' or 'cuda', got {choice!r}") from error
        if not _available(device):
            raise ValueError(f"{source} asks for device {choice!r}, which is not available on this machine")
        return device
    for candidate in ("cuda", "mps"):
        if _available(torch.device(candidate)):
            return torch.device(candidate)
    return torch.device("cpu")


def float64_device(device: torch.device) -> torch.device:
    """``device`` if it computes in float64, else the CPU.

    The course checks formulas in float64; Apple's MPS has no float64, so on a Mac the
    exactness cells run on the CPU while float32 work (timings) still uses MPS.
    """
    return torch.device("cpu") if device.type == "mps" else device


def describe_device(device: torch.device) -> str:
    """One line naming the device, e.g. 'cpu (1 thread)', 'cpu (2 threads)' or 'cuda:0 (NVIDIA H200)'."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        threads = torch.get_num_threads()
        return f"cpu ({threads} thread{'' if threads == 1 else 's'})"
    return str(device)


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one CPU thread inside the block; the previous thread count is restored after.

    For a Python loop of small tensor ops (a student's loop over chunks in a grader test,
    the delta rule's recurrence, training a tiny model): with several threads every op
    meets at an OpenMP barrier, and on a busy machine one descheduled thread stalls them
    all (measured here: 0.3 s became 50 s on 2 busy cores; a tiny model's 30 training
    steps 5 s became 44 s). On one thread such a loop is fastest anyway.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def seeded_qkv(
    *batch: int, n: int, d: int, m: int | None = None, dv: int | None = None, seed: int = 0,
    dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu", scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard-normal q [*batch, n, d] and k [*batch, m, d] (times ``scale``) and v [*batch, m, dv]
    (m = n and dv = d unless given), drawn in that order from a CPU generator seeded with ``seed``,
    then moved to ``device``: the same numbers on every device. Tests, graders and the benchmark use it."""
    g = torch.Generator().manual_seed(seed)
    m, dv = n if m is None else m, d if dv is None else dv
    q, k, v = (torch.randn(*batch, rows, cols, generator=g, dtype=dtype) for rows, cols in ((n, d), (m, d), (m, dv)))
    return (q * scale).to(device), (k * scale).to(device), v.to(device)
