"""Where a submission's code runs in a graded batch: bubblewrap namespaces plus kernel resource limits.

Nothing here is a home-made jail. Isolation comes from bubblewrap (``bwrap``, Debian's
``bubblewrap``: Linux namespaces and bind mounts), limits from ``setrlimit``, and the end of a
run from the kernel: the submission is the only process tree in its PID namespace, so when the
grader SIGKILLs it (a hard wall-clock limit) every process it started dies with it.

With bubblewrap (``Sandbox.level`` starts with "bubblewrap"):

* the file system is the host's, **read-only**; the submission's private folder (holding only
  its own notebook) is the one writable place besides an empty, size-capped ``/tmp``;
* the folders in ``hidden`` (the other submissions, ``solutions/`` with the quiz key, the
  instructor's output folder, the home folder) are covered by empty ones, so they cannot be
  read; the Python installation the grader runs on stays visible (read-only) even under them;
* no network (a fresh network namespace has only a loopback), no other processes visible
  (PID namespace), no capabilities; the tree dies with the grader (``--die-with-parent``);
* ``setrlimit``: address space (memory), size of any file written (so printing cannot fill a
  disk), CPU seconds, open files, and processes — the kernel ignores the process limit for
  root, so where the grader runs as root the PID namespace and the kill bound the damage in time.

Without bubblewrap (not installed, or namespaces disabled) the fallback keeps the rlimits, a
private working folder and ``HOME``/``TMPDIR`` inside it, its own process group killed with
SIGKILL; the weaker guarantee is spelled out in ``level`` and printed in the batch report: other
files stay readable, the network stays open, and a process that leaves the group survives.
"""

import os
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TMP = Path("/tmp")
INSIDE = TMP / "submission"  # the private folder inside the sandbox (under its own /tmp: / is read-only)


@dataclass(frozen=True)
class Limits:
    """Per-submission kernel limits (``setrlimit``); ``cpu_seconds`` None means the wall-clock limit alone."""

    memory_bytes: int = 4 << 30
    file_bytes: int = 64 << 20
    processes: int | None = 1024  # counted per user, threads included: a bound on fork bombs, no tighter
    open_files: int = 256
    cpu_seconds: int | None = None
    tmp_bytes: int = 256 << 20

    def apply(self) -> None:
        """Set the limits on this process (call in the child, before exec)."""
        for limit, value in ((resource.RLIMIT_AS, self.memory_bytes), (resource.RLIMIT_FSIZE, self.file_bytes),
                             (resource.RLIMIT_NPROC, self.processes), (resource.RLIMIT_NOFILE, self.open_files),
                             (resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, self.cpu_seconds)):
            if value is not None:
                resource.setrlimit(limit, (value, value))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead of killing


@cache
def bubblewrap() -> str | None:
    """The ``bwrap`` executable if it is installed and can create namespaces here, else None."""
    found = shutil.which("bwrap")
    if found is None:
        return None
    probe = subprocess.run([found, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                           capture_output=True, timeout=30)
    return found if probe.returncode == 0 else None


@dataclass(frozen=True)
class Sandbox:
    """How to start a submission's process: ``command`` wraps the argv, ``start`` runs it."""

    workdir: Path
    hidden: tuple[Path, ...] = ()
    limits: Limits = Limits()
    use_bubblewrap: bool = True

    @property
    def bwrap(self) -> str | None:
        return bubblewrap() if self.use_bubblewrap else None

    @property
    def level(self) -> str:
        """One line saying what this sandbox guarantees."""
        limits = "rlimits on memory, file size, CPU, open files and processes (not for root)"
        if self.bwrap:
            return (f"bubblewrap: read-only file system, private folder, {len(self.hidden)} folders hidden, "
                    f"no network, own PID namespace; {limits}; SIGKILL of the whole tree at the time limit")
        return (f"fallback without bubblewrap: {limits}, a private working folder, SIGKILL of the process "
                "group at the time limit; other files stay readable, the network stays open, and a process "
                "that leaves the group survives")

    @property
    def folder(self) -> Path:
        """The private folder as the submission sees it."""
        return INSIDE if self.bwrap else self.workdir

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` wrapped in bubblewrap (or unchanged for the fallback)."""
        if not self.bwrap:
            return argv
        keep = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, Path(__file__).parents[2])}
        wrapped = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
                   "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # Sorted, a folder comes after every folder that contains it: a hidden folder inside a kept
        # installation that an outer hidden folder covered (solutions/ of a clone under /tmp) is
        # covered again after the installation is bound back.
        hidden = sorted({TMP} | {p.resolve() for p in self.hidden if p.exists()})  # /tmp: empty and size-capped
        for folder in hidden:
            wrapped += ["--size", str(self.limits.tmp_bytes)] if folder == TMP else []
            wrapped += ["--tmpfs", str(folder)]
            wrapped += [arg for kept in sorted(keep) if kept.is_relative_to(folder)
                        for arg in ("--ro-bind", str(kept), str(kept))]
        wrapped += ["--bind", str(self.workdir), str(INSIDE), "--chdir", str(INSIDE), "--"]
        return wrapped + argv

    def environment(self) -> dict[str, str]:
        """The submission's environment: the grader's, with home and temp inside its own folder."""
        folder = str(self.folder)
        return {**os.environ, "HOME": folder, "TMPDIR": "/tmp" if self.bwrap else folder,
                "MPLBACKEND": "Agg", "COURSE_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": "", "PYTHONNOUSERSITE": "1"}

    def start(self, argv: list[str], *, pass_fds: tuple[int, ...], log: Path) -> subprocess.Popen:
        """Run ``argv`` in the sandbox, keeping ``pass_fds`` (the channel) open in it; its stdout and
        stderr go to ``log`` (capped by the file-size limit)."""
        with log.open("wb") as output:
            return subprocess.Popen(self.command(argv), stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                                    pass_fds=pass_fds, cwd=self.workdir, env=self.environment(),
                                    start_new_session=True, preexec_fn=self.limits.apply)


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the process group of ``process`` (with bubblewrap, its PID namespace goes with it) and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
