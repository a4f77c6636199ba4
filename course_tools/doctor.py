"""``python -m course_tools.doctor``: the pre-flight check a participant runs before a workshop.

Participants run it from the student copy too, which carries it (``workshop.release.INCLUDED``)
but not the rest of the instructor's kit.

It prints the device, the versions of what the course needs against the ranges it declares
(``pyproject.toml``, read back through ``importlib.metadata``), the Jupyter kernels, and a
smoke run of a few seconds (a causal forward and backward pass checked against the oracle, a
figure drawn off-screen); then, for each problem, what to do about it. Exit status 1 when there
is anything to fix.
"""

import importlib.metadata
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

SMOKE_BUDGET_S = 5.0


@dataclass(frozen=True)
class Finding:
    ok: bool
    line: str
    fix: str = ""  # what to do when not ok
    advice: str = ""  # worth doing even when ok


def versions() -> list[Finding]:
    """One finding per runtime requirement of course_lib: installed, and inside its range."""
    floor = SpecifierSet(importlib.metadata.metadata("course_lib")["Requires-Python"])
    found = [Finding(floor.contains(platform.python_version()), f"python {platform.python_version()} (needs {floor})",
                     f"install a Python {floor} and run `make lab` with it (PYTHON=python3.11)")]
    for text in importlib.metadata.requires("course_lib") or []:
        requirement = Requirement(text)
        if requirement.marker is not None:  # optional extras (peers, browser)
            continue
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            found.append(Finding(False, f"{requirement.name}: missing", f"run `make install` (needs {requirement})"))
            continue
        inside = requirement.specifier.contains(installed, prereleases=True)
        found.append(Finding(inside, f"{requirement.name} {installed} (needs {requirement.specifier})",
                             f"upgrade it: pip install '{requirement}'"))
    return found


def device() -> Finding:
    from course_lib.device import describe_device, get_device

    chosen = get_device()
    return Finding(True, f"device: {describe_device(chosen)} (override with COURSE_DEVICE=cpu|cuda|mps)")


def kernels() -> Finding:
    """The notebooks name ``python3``: it must exist, and be this Python's (a JupyterLab run from it)."""
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager().find_kernel_specs()
    names = ", ".join(sorted(specs)) or "none"
    ours = "python3" in specs and Path(specs["python3"]).resolve().is_relative_to(Path(sys.prefix).resolve())
    advice = "" if ours or "python3" not in specs else (
        f"the python3 kernel is another Python's ({specs['python3']}): start JupyterLab from this environment "
        "(`make lab`), or register it for another Jupyter with `make kernel`"
    )
    return Finding("python3" in specs, f"Jupyter kernels: {names}", "install ipykernel: `make install`", advice)


def smoke() -> Finding:
    """A causal forward and backward pass against the explicit oracle, and a figure, within the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from course_lib import kernel_attention, linear_attention
    from course_lib.device import float64_device, get_device, seeded_qkv

    started = time.perf_counter()
    exact = float64_device(get_device())
    q, k, v = (x.requires_grad_() for x in seeded_qkv(2, n=64, d=16, device=exact))  # [2, 64, 16] float64
    out = linear_attention(q, k, v, causal=True)
    gap = (out - kernel_attention(q, k, v, causal=True)).abs().max().item()
    out.sum().backward()
    grads = all(x.grad is not None and bool(torch.isfinite(x.grad).all()) for x in (q, k, v))
    figure = plt.figure()
    plt.plot(out[0, :, 0].detach().cpu())
    plt.close(figure)
    seconds = time.perf_counter() - started
    ok = gap < 1e-10 and grads and seconds < SMOKE_BUDGET_S
    return Finding(ok, f"smoke run: causal linear attention = oracle to {gap:.1e}, gradients finite: {grads}, "
                       f"a figure drawn; {seconds:.1f} s (budget {SMOKE_BUDGET_S:g} s)",
                   "the smoke run failed or was slow: close other programs, or ask the instructor")


def run() -> int:
    findings = versions() + [device(), kernels(), smoke()]
    for finding in findings:
        print(f"{'ok ' if finding.ok else 'FIX'} {finding.line}")
    fixes = [finding.fix for finding in findings if not finding.ok]
    advice = [finding.advice for finding in findings if finding.advice]
    if fixes:
        print("\nwhat to fix:\n" + "\n".join(f"- {fix}" for fix in fixes))
    if advice:
        print("\nsuggested:\n" + "\n".join(f"- {fix}" for fix in advice))
    if not fixes:
        print("\nall good: you are ready for the workshop")
    return 1 if fixes else 0


if __name__ == "__main__":
    sys.exit(run())
