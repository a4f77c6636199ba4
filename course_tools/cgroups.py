"""Control groups: limits that hold for a whole tree of processes, however many processes it starts.

Linux counts a cgroup's tasks together, and its memory too: what its processes hold, the page
cache they fill and the files they write into a tmpfs. So a limit on the group stops a fork bomb
or three children of 1.5 GiB each, which per-process ``setrlimit`` limits cannot. Two layouts:

* version 1, a hierarchy per controller (``/sys/fs/cgroup/memory``, ``/sys/fs/cgroup/pids``),
  as on the workshop server and this course's CI; only root may create groups in it;
* version 2, one unified hierarchy (``/sys/fs/cgroup`` holds ``cgroup.controllers``); a user may
  create groups where systemd delegates a subtree (``systemd-run --user -p Delegate=yes ...``).

A new group nests under this process's own (``/proc/self/cgroup``), so nothing escapes the limits
this process runs under. ``course_tools.workshop.room`` (a workshop participant's memory and CPU)
and ``grading.sandbox`` (one group per graded submission: memory and tasks) use this module.
"""

import errno
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
GRADING = "course-grading"  # every submission's group sits in this one
_names = itertools.count()


class Unavailable(RuntimeError):
    """This machine gives this process no cgroup it may create groups in; the message says why."""


def own_cgroup(controller: str, proc_cgroup: str) -> str:
    """This process's path in a cgroup v1 ``controller`` (``""``: the v2 hierarchy), read from
    /proc/self/cgroup's text (lines ``id:controllers:path``); KeyError when it is not mounted."""
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise KeyError(controller)


def v1_folder(controller: str, name: str, *, root: Path = ROOT, proc_cgroup: str | None = None) -> Path:
    """The folder of group ``name`` (a relative path) of v1 ``controller``, under this process's own group."""
    if proc_cgroup is None:
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    return root / controller / own_cgroup(controller, proc_cgroup).lstrip("/") / name


def limit_memory_v1(folder: Path, memory_bytes: int) -> None:
    """``memory.limit_in_bytes`` and, where swap accounting exists, the same for memory plus swap
    (no swapping past the limit); past it the kernel's OOM killer stops the group's largest process."""
    (folder / "memory.limit_in_bytes").write_text(str(memory_bytes))
    if (folder / "memory.memsw.limit_in_bytes").exists():
        (folder / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))


def join(folders: tuple[Path, ...]) -> None:
    """Move the calling process into ``folders`` (its children follow); run before dropping root."""
    for folder in folders:
        (folder / "cgroup.procs").write_text("0")


@dataclass(frozen=True)
class TreeGroup:
    """One process tree's group: a memory limit (swap included) and a task limit (processes and threads).

    ``folders``: one per v1 controller (memory, pids), or the one v2 folder. A process joins by
    writing ``0`` to ``procs_files()`` (before it drops root: the files belong to root on v1)."""

    folders: tuple[Path, ...]
    version: int

    @classmethod
    def create(cls, *, memory_bytes: int, tasks: int, root: Path = ROOT,
               proc_cgroup: str | None = None) -> "TreeGroup":
        """A new group under this process's own; ``Unavailable`` with the reason when the machine does not allow it."""
        if proc_cgroup is None:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        leaf = f"{os.getpid()}-{next(_names)}"
        made: list[Path] = []
        try:
            if (root / "cgroup.controllers").exists():
                folder = _v2_parent(root, proc_cgroup) / leaf
                folder.mkdir()
                made.append(folder)
                (folder / "memory.max").write_text(str(memory_bytes))
                if (folder / "memory.swap.max").exists():
                    (folder / "memory.swap.max").write_text("0")
                (folder / "pids.max").write_text(str(tasks))
                return cls((folder,), 2)
            memory, pids = (v1_folder(controller, f"{GRADING}/{leaf}", root=root, proc_cgroup=proc_cgroup)
                            for controller in ("memory", "pids"))
            for folder in (memory, pids):
                folder.parent.mkdir(parents=True, exist_ok=True)
                folder.mkdir()
                made.append(folder)
            limit_memory_v1(memory, memory_bytes)
            (pids / "pids.max").write_text(str(tasks))
            return cls((memory, pids), 1)
        except KeyError as missing:
            raise Unavailable(f"no cgroup v1 {missing} controller in /proc/self/cgroup") from None
        except OSError as error:
            cls(tuple(made), 0).remove()
            raise Unavailable(f"cannot create a cgroup here: {error}") from None

    def procs_files(self) -> tuple[Path, ...]:
        return tuple(folder / "cgroup.procs" for folder in self.folders)

    def pids(self) -> set[int]:
        """The processes in the group (as this process's PID namespace numbers them)."""
        found: set[int] = set()
        for path in self.procs_files():
            try:
                found |= {int(pid) for pid in path.read_text().split()}
            except OSError:
                pass
        return found

    def kill(self, *, seconds: float = 5.0) -> None:
        """SIGKILL every process in the group until none is left (a fork racing the kill included)."""
        for kill_file in (folder / "cgroup.kill" for folder in self.folders if self.version == 2):
            if kill_file.exists():  # Linux 5.14+: the kernel kills the whole group at once
                kill_file.write_text("1")
        end = time.monotonic() + seconds
        while (pids := self.pids()) and time.monotonic() < end:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)

    def remove(self, *, seconds: float = 5.0) -> None:
        """Kill every process in the group, then remove its folders (waiting while the kernel empties them)."""
        self.kill(seconds=seconds)
        end = time.monotonic() + seconds
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY or time.monotonic() > end:
                        break
                    time.sleep(0.001)


def _v2_parent(root: Path, proc_cgroup: str) -> Path:
    """``GRADING`` under this process's own v2 group, with memory and pids delegated to its children.

    A v2 group holding processes cannot pass controllers to children ("no internal processes"),
    so when this process's own group refuses (EBUSY) this process first moves into a leaf of it
    (``grader``), as systemd asks of every process that is delegated a subtree."""
    own = root / own_cgroup("", proc_cgroup).lstrip("/")
    wanted = {"memory", "pids"}
    if not wanted <= set((own / "cgroup.controllers").read_text().split()):
        raise Unavailable(f"cgroup v2 without the memory and pids controllers in {own}")
    for folder in (own, own / GRADING):
        folder.mkdir(exist_ok=True)
        if wanted <= set((folder / "cgroup.subtree_control").read_text().split()):
            continue
        try:
            (folder / "cgroup.subtree_control").write_text("+memory +pids")
        except OSError as error:
            if error.errno != errno.EBUSY or folder != own:
                raise
            (own / "grader").mkdir(exist_ok=True)
            join((own / "grader",))
            (folder / "cgroup.subtree_control").write_text("+memory +pids")
    return own / GRADING
