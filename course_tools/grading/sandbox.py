"""Where a submission's code runs in a graded batch: bubblewrap namespaces, a cgroup and kernel resource limits.

Nothing here is a home-made jail. Isolation comes from bubblewrap (``bwrap``, Debian's
``bubblewrap``: Linux namespaces and mounts), limits from cgroups (``course_tools.cgroups``) and
``setrlimit``, and the end of a run from the kernel: the submission is the only process tree in
its PID namespace and its cgroup, so when the grader SIGKILLs it (a hard wall-clock limit) every
process it started dies with it.

With bubblewrap (``Sandbox.level`` starts with "bubblewrap"):

* the file system starts **empty**: only the system folders (``/usr``; ``/bin``, ``/lib``... as
  the host has them), ``ETC_FILES``, the Python installation (``sys.prefix``, ``sys.base_prefix``)
  and the two course packages (the folders of ``course_lib`` and ``course_tools``: with an
  editable install they sit in the clone, whose root, ``.git``, ``solutions/`` and earlier
  batches stay out) are bound, read-only; a folder in ``hidden`` under one of them is covered;
* the private folder (a copy of the notebook), ``/tmp`` and ``/dev/shm`` are size-capped tmpfs
  mounts, in memory: the submission cannot write to the host's disk;
* no network, no other processes visible (PID namespace), no capabilities; the tree dies with the
  grader (``--die-with-parent``). A root grader's submission runs as ``Sandbox.user`` (nobody):
  the child becomes it before bwrap starts, or, where it cannot reach a folder the sandbox binds
  (a Python below ``/root``), bwrap builds the sandbox as root and ``setpriv`` becomes it before
  Python starts (``bwrap_stays_root``);
* the environment is ``Sandbox.environment``'s few variables, never the grader's;
* its stdout and stderr go to an anonymous file that only the grader holds (``Run.output_tail``).

Per submission, a cgroup (v2 where delegated, v1 where the grader is root) bounds the memory
(swap included) and the tasks of the whole tree; where no cgroup can be made, ``level`` says so and
only the rlimits remain: address space (memory), size of any file written, CPU seconds, open
files, and processes (counted per user). A limit the platform cannot set (``RLIMIT_AS`` on
macOS) is skipped, and a note says which.

Without bubblewrap (not installed, or namespaces disabled) the fallback keeps the rlimits, a
private working folder and ``HOME``/``TMPDIR`` inside it, its own process group killed with
SIGKILL; the weaker guarantee is spelled out in ``level`` and printed in the batch report: other
files stay readable, the network stays open, and a process that leaves the group survives.

Without ``resource`` or POSIX processes (native Windows) ``check()`` still runs: every rlimit is
skipped with its note, the process starts in a new process group with the channel's handles
inherited (``_popen``), and the grader's wall clock (``wire``) ends it with ``Popen.kill``. The
batch command refuses such a platform (no bubblewrap) unless given ``--unsafe-no-sandbox``.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import course_lib
import course_tools
from course_tools.cgroups import TreeGroup, Unavailable
from course_tools.grading.core import BATCH_ENV_VAR

TMP = Path("/tmp")
INSIDE = TMP / "submission"  # the private folder inside the sandbox
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # bound, or linked as on the host
ETC_FILES = ("/etc/ld.so.cache",)  # the dynamic loader's list of library folders (/usr/local/lib...)
NOBODY = (65534, 65534)  # uid and gid of the kernel's overflow user
KEPT_OUTPUT_BYTES = 4096
LIMIT_NAMES = {"RLIMIT_AS": "the memory limit per process", "RLIMIT_FSIZE": "the file size limit",
               "RLIMIT_NPROC": "the process limit", "RLIMIT_NOFILE": "the open files limit",
               "RLIMIT_CORE": "no core dumps", "RLIMIT_CPU": "the CPU time limit",
               "cgroup": "the per-submission memory and task limit"}


@dataclass(frozen=True)
class Limits:
    """A submission's limits: per process (``setrlimit``), per submission (a cgroup) and its tmpfs sizes.

    ``cpu_seconds`` None means the wall-clock limit alone. The per-submission defaults leave room
    for every exercise notebook: graded from solutions/, the largest peaks at 0.65 GiB (ex02, page
    cache included) and 7 tasks on 2 cores (torch's threads grow with the cores)."""

    memory_bytes: int = 4 << 30  # address space per process: torch reserves far more than it touches
    file_bytes: int = 64 << 20
    processes: int | None = 1024  # counted per user, threads included: the bound when no cgroup can be made
    open_files: int = 256
    cpu_seconds: int | None = None
    tree_memory_bytes: int = 3 << 30  # the whole submission: its processes, page cache and tmpfs files, no swap
    tree_tasks: int = 512  # the whole submission's processes and threads (torch starts one per core, or two)
    tmp_bytes: int = 256 << 20
    folder_bytes: int = 256 << 20
    shm_bytes: int = 64 << 20

    def rlimits(self) -> list[tuple[str, int]]:
        """(name, value) of every rlimit to set; a None value (no limit) is left out."""
        return [(name, value) for name, value in (
            ("RLIMIT_AS", self.memory_bytes), ("RLIMIT_FSIZE", self.file_bytes), ("RLIMIT_NPROC", self.processes),
            ("RLIMIT_NOFILE", self.open_files), ("RLIMIT_CORE", 0), ("RLIMIT_CPU", self.cpu_seconds))
            if value is not None]

    def apply(self) -> list[str]:
        """Set the rlimits on this process (call in the child, before exec); returns the names of those the
        platform refuses (macOS: ``RLIMIT_AS``; all of them without ``resource``), which stay unset. A value
        above the hard limit this process already has is lowered to it."""
        resource = _resource()
        if resource is None:
            return [name for name, _ in self.rlimits()]
        skipped = []
        for name, value in self.rlimits():
            try:
                limit = getattr(resource, name)
                hard = resource.getrlimit(limit)[1]
                value = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(limit, (value, value))
            except (AttributeError, ValueError, OSError):
                skipped.append(name)
        if hasattr(signal, "SIGXFSZ"):
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead of killing
        return skipped


@cache
def _resource():
    """The ``resource`` module, or None where there is none (Windows). Imported in the grader, before a fork."""
    try:
        import resource
    except ImportError:
        return None
    return resource


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def bwrap_stays_root(user: tuple[int, int]) -> bool:
    """Whether bwrap itself runs as root, ``setpriv`` becoming ``user`` inside the sandbox: only for a root
    grader when ``user`` cannot reach a folder the sandbox binds (a Python below /root, mode 0700; bwrap
    0.8 resolves even ``--ro-bind-fd`` by path). Otherwise a root grader becomes ``user`` before bwrap
    starts, and bwrap makes a user namespace as it does for anyone: the one way inside Docker, whose
    root lacks ``CAP_SYS_ADMIN``. False for a grader that is not root."""
    if not _as_root():
        return False
    needed = [*bound_folders().values(), *ETC_FILES, *SYSTEM]
    return not all(_reachable(Path(path), user) for path in needed if os.path.lexists(path))


def _reachable(path: Path, user: tuple[int, int]) -> bool:
    """Whether ``user`` (in its own group only) may enter every folder down to ``path`` and read it."""
    def may(folder: Path, bits: int) -> bool:
        info = os.stat(folder)
        shift = 6 if info.st_uid == user[0] else 3 if info.st_gid == user[1] else 0
        return (info.st_mode >> shift) & bits == bits

    return all(may(folder, 1) for folder in path.parents) and may(path, 5 if path.is_dir() else 4)


@cache
def bubblewrap() -> str | None:
    """The ``bwrap`` executable if it is installed and can create namespaces here (as ``NOBODY`` when
    the grader is root), else None."""
    found, stays_root = shutil.which("bwrap"), bwrap_stays_root(NOBODY)
    if found is None or (stays_root and shutil.which("setpriv") is None):
        return None
    probe = [found, *_namespaces(stays_root), "--ro-bind", "/", "/", *_setpriv(stays_root, NOBODY), "true"]
    become = _become(NOBODY) if _as_root() and not stays_root else None
    return found if subprocess.run(probe, capture_output=True, timeout=30, preexec_fn=become).returncode == 0 else None


def _namespaces(stays_root: bool) -> list[str]:
    """bwrap's options for the namespaces and capabilities: a user namespace, as any user's bwrap makes;
    or, for bwrap run as root (``bwrap_stays_root``), none, keeping the capabilities ``setpriv`` needs."""
    if not stays_root:
        return ["--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    return ["--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--cap-drop", "ALL",
            *(arg for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP") for arg in ("--cap-add", cap))]


def _setpriv(stays_root: bool, user: tuple[int, int]) -> list[str]:
    """For bwrap run as root: the command prefix that becomes ``user`` (no groups, no capabilities left)."""
    if not stays_root:
        return []
    uid, gid = user
    return [shutil.which("setpriv"), "--reuid", str(uid), "--regid", str(gid), "--clear-groups",
            "--bounding-set", "-all", "--inh-caps", "-all", "--"]


def _become(user: tuple[int, int]):
    """A root child's last step before it execs bwrap: become ``user``, in no other group."""

    def become() -> None:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])

    return become


def bound_folders() -> dict[str, str]:
    """What the submission's Python needs besides the system folders, ``{where inside: host folder}``:
    the installation and the course packages, each also under its unresolved name; none inside another."""
    wanted = [sys.prefix, sys.base_prefix, *(Path(package.__file__).parent for package in (course_lib, course_tools))]
    binds = {}
    for path in wanted:
        source = os.path.realpath(path)
        binds.update({source: source, os.path.abspath(path): source})
    inside, system = [Path(dest) for dest in binds], [Path(folder) for folder in SYSTEM]
    return {dest: source for dest, source in sorted(binds.items())  # /usr/local/..., /lib/...: there already
            if not any(Path(dest).is_relative_to(outer) for outer in system)
            and not any(Path(dest).is_relative_to(outer) and Path(dest) != outer for outer in inside)}


@cache
def cgroup_support(memory_bytes: int, tasks: int) -> tuple[int | None, str]:
    """(cgroup version, "") when a submission's cgroup can be made here (tried once), else (None, why not)."""
    try:
        group = TreeGroup.create(memory_bytes=memory_bytes, tasks=tasks)
    except Unavailable as why:
        return None, str(why)
    group.remove()
    return group.version, ""


@dataclass
class Run:
    """One started submission: bwrap's process (or the fallback's own), the anonymous file its
    stdout and stderr go to, its cgroup, and notes on limits that could not be set."""

    process: subprocess.Popen
    output: int
    group: TreeGroup | None
    notes: list[str] = field(default_factory=list)
    kept: bytes | None = None  # the output's end, once stopped

    def output_tail(self, size: int) -> bytes:
        """The last ``size`` bytes it printed, read from the file the grader holds (never by a name)."""
        if self.kept is not None:
            return self.kept[-size:]
        start = max(0, os.fstat(self.output).st_size - size)
        if hasattr(os, "pread"):
            return os.pread(self.output, size, start)
        os.lseek(self.output, start, os.SEEK_SET)  # Windows: no pread; the process is dead by now
        return os.read(self.output, size)

    def stop(self) -> None:
        """Kill the whole tree, remove its cgroup and close its output (keeping the end); again does nothing."""
        if self.kept is not None:
            return
        if self.process.poll() is None:
            kill_tree(self.process)
        if self.group is not None:
            self.group.remove()
        self.kept = self.output_tail(KEPT_OUTPUT_BYTES)
        os.close(self.output)


@dataclass(frozen=True)
class Sandbox:
    """How to start a submission's process: ``command`` wraps the argv, ``start`` runs it.

    ``user``: the uid and gid the submission runs as when the grader is root; ``use_cgroup`` False
    leaves out the per-submission cgroup (``check()``'s self-study run)."""

    workdir: Path
    hidden: tuple[Path, ...] = ()
    limits: Limits = Limits()
    use_bubblewrap: bool = True
    use_cgroup: bool = True
    user: tuple[int, int] = NOBODY

    @property
    def bwrap(self) -> str | None:
        return bubblewrap() if self.use_bubblewrap else None

    @property
    def cgroup(self) -> tuple[int | None, str]:
        """(cgroup version, "") when each submission gets a cgroup, else (None, why not)."""
        if not self.use_cgroup:
            return None, "not asked for"
        return cgroup_support(self.limits.tree_memory_bytes, self.limits.tree_tasks)

    @property
    def level(self) -> str:
        """One line saying what this sandbox guarantees."""
        version, why = self.cgroup
        if version:
            tree = (f"per submission (cgroup v{version}): {self.limits.tree_memory_bytes / 2**30:g} GiB of memory "
                    f"without swap, {self.limits.tree_tasks} tasks")
        else:
            tree = f"no per-submission memory or task limit ({why}): the rlimits alone"
        limits = "rlimits per process on memory, file size, CPU, open files and processes (per user)"
        if self.bwrap:
            who = f"uid {self.user[0]} (the grader is root)" if _as_root() else "the grader's user"
            return (f"bubblewrap: only the system, Python and course folders, read-only; the private folder, /tmp "
                    f"and /dev/shm in size-capped memory; {len(self.hidden)} folders hidden; no network; own PID "
                    f"namespace; runs as {who}; {tree}; {limits}; SIGKILL of the whole tree at the time limit")
        return (f"fallback without bubblewrap: {tree}; {limits}, a private working folder, SIGKILL of the "
                "process group at the time limit; other files stay readable, the network stays open, and a "
                "process that leaves the group survives")

    @property
    def folder(self) -> Path:
        """The private folder as the submission sees it."""
        return INSIDE if self.bwrap else self.workdir

    def command(self, argv: list[str], copies: tuple[tuple[int, str], ...] = ()) -> list[str]:
        """``argv`` wrapped in bubblewrap (or unchanged for the fallback); ``copies``: (fd, name) of the
        files bwrap copies into the private folder."""
        if not self.bwrap:
            return argv
        stays_root = bwrap_stays_root(self.user)
        wrapped = [self.bwrap, *_namespaces(stays_root)]
        # /tmp first: a clone under /tmp (as CI makes one) binds its venv and packages into it, not under it
        wrapped += ["--perms", "1777", "--size", str(self.limits.tmp_bytes), "--tmpfs", str(TMP)]
        binds, etc = bound_folders(), [file for file in ETC_FILES if os.path.isfile(file)]
        for folder in sorted({str(parent) for dest in (*binds, *etc) for parent in Path(dest).parents} - {"/"}):
            wrapped += ["--perms", "0755", "--dir", folder]  # bwrap would make them 0700: closed to nobody
        for folder in SYSTEM:
            if os.path.islink(folder):
                wrapped += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                wrapped += ["--ro-bind", folder, folder]
        for dest, source in binds.items():
            wrapped += ["--ro-bind", source, dest]
        wrapped += [arg for file in etc for arg in ("--ro-bind", file, file)]
        visible = [Path(folder) for folder in (*binds, *SYSTEM)]
        for folder in sorted({p.resolve() for p in self.hidden if p.is_dir()}):  # e.g. a class folder in the venv
            if any(folder.is_relative_to(outer) and folder != outer for outer in visible):
                wrapped += ["--tmpfs", str(folder)]
        wrapped += ["--dev", "/dev", "--proc", "/proc"]
        for folder, size in ((INSIDE, self.limits.folder_bytes), (Path("/dev/shm"), self.limits.shm_bytes)):
            wrapped += ["--perms", "1777", "--size", str(size), "--tmpfs", str(folder)]
        for fd, name in copies:
            wrapped += ["--perms", "0644", "--file", str(fd), str(INSIDE / name)]
        return [*wrapped, "--chdir", str(INSIDE), "--", *_setpriv(stays_root, self.user), *argv]

    def environment(self) -> dict[str, str]:
        """The submission's environment: a few variables set here, nothing of the grader's but its PATH
        (fallback only), LANG, ``BATCH_ENV_VAR`` and on Windows ``SYSTEMROOT`` (Python cannot start without it)."""
        folder = str(self.folder)
        path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin" if self.bwrap else os.environ.get(
            "PATH", os.defpath)
        passed = {name: os.environ[name] for name in (BATCH_ENV_VAR, "SYSTEMROOT") if name in os.environ}
        return {"PATH": path, "HOME": folder, "TMPDIR": "/tmp" if self.bwrap else folder,
                "LANG": os.environ.get("LANG", "C.UTF-8"), "MPLBACKEND": "Agg", "COURSE_DEVICE": "cpu",
                "CUDA_VISIBLE_DEVICES": "", "PYTHONNOUSERSITE": "1", **passed}

    def start(self, argv: list[str], *, pass_fds: tuple[int, ...]) -> Run:
        """Run ``argv`` in the sandbox, keeping ``pass_fds`` (the channel) open in it; its stdout and
        stderr go to an anonymous file (capped by the file-size limit). Call ``Run.stop`` when done."""
        group, notes = None, []
        if self.cgroup[0]:
            try:
                group = TreeGroup.create(memory_bytes=self.limits.tree_memory_bytes, tasks=self.limits.tree_tasks)
            except Unavailable as why:
                notes.append(f"no per-submission memory or task limit for this run: {why}")
        files = [path for path in sorted(self.workdir.iterdir()) if path.is_file() and not path.is_symlink()]
        copies = tuple((os.open(path, os.O_RDONLY), path.name) for path in files) if self.bwrap else ()
        joins = [os.open(path, os.O_WRONLY) for path in group.procs_files()] if group else []
        become = _become(self.user) if self.bwrap and _as_root() and not bwrap_stays_root(self.user) else None
        output = _anonymous_file()
        try:
            process, skipped = _popen(self.command(argv, copies), (*pass_fds, *(fd for fd, _ in copies)),
                                      _child_setup(self.limits, joins, become), self.limits,
                                      stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                                      cwd="/" if self.bwrap else self.workdir, env=self.environment())
        except BaseException:
            os.close(output)
            if group is not None:
                group.remove()
            raise
        finally:
            for fd in (*joins, *(fd for fd, _ in copies)):
                os.close(fd)
        for name in skipped:
            notes.append(f"{LIMIT_NAMES.get(name, name)} ({name}) could not be set here: not applied")
            warnings.warn(notes[-1], stacklevel=2)
        return Run(process, output, group, notes)


def inherited(fd: int) -> int:
    """The number a child started by ``Sandbox.start`` is told for ``fd`` in ``pass_fds``: the fd itself
    (POSIX keeps its number), or its Windows handle (``answers.channel_fd`` turns it back into an fd)."""
    if os.name != "nt":
        return fd
    import msvcrt

    return msvcrt.get_osfhandle(fd)


def _popen(command: list[str], pass_fds: tuple[int, ...], setup, limits: Limits,
           **options) -> tuple[subprocess.Popen, list[str]]:
    """Start ``command`` in a process group of its own with ``pass_fds`` open in it; returns the process and
    the names of the limits it could not set.

    POSIX: a new session, ``setup`` (``_child_setup``) run before exec, reporting on a pipe. Windows
    (no fork, no rlimits): ``CREATE_NEW_PROCESS_GROUP``, only ``pass_fds``' handles inherited
    (``handle_list``), and every rlimit skipped."""
    if os.name == "nt":
        import msvcrt

        handles = [msvcrt.get_osfhandle(fd) for fd in pass_fds]
        for handle in handles:
            os.set_handle_inheritable(handle, True)
        startup = subprocess.STARTUPINFO(lpAttributeList={"handle_list": handles})
        process = subprocess.Popen(command, startupinfo=startup, creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,
                                   **options)
        return process, [name for name, _ in limits.rlimits()]
    _resource()  # imported here, never for the first time in the forked child
    report, reported = os.pipe()
    try:
        process = subprocess.Popen(command, pass_fds=pass_fds, start_new_session=True,
                                   preexec_fn=lambda: setup(reported), **options)
    except BaseException:
        os.close(report)
        raise
    finally:
        os.close(reported)
    with os.fdopen(report, "rb") as child:  # the child's end closes when it execs
        return process, child.read().decode().split()


def _child_setup(limits: Limits, joins: list[int], become=None):
    """The child's steps before exec: join the cgroup (still as the grader's user), set the rlimits,
    write to ``report`` the names of the limits it skipped (or ``cgroup`` when it could not join),
    and last ``become`` the sandbox's user (a root grader whose bwrap does not stay root)."""

    def setup(report: int) -> None:
        skipped = []
        try:
            for fd in joins:
                os.write(fd, b"0")
        except OSError:
            skipped.append("cgroup")
        skipped += limits.apply()
        os.write(report, " ".join(skipped).encode())
        if become is not None:
            become()

    return setup


def _anonymous_file() -> int:
    """A file with no name (in memory on Linux) for the submission's output: nothing can reach it by a path
    (on Windows, which cannot remove an open file, one that Windows deletes when its last handle closes)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("submission-output")
    if os.name == "nt":
        name = os.path.join(tempfile.mkdtemp(prefix="course_grade_output_"), "output")
        return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_BINARY | os.O_TEMPORARY | os.O_NOINHERIT)
    fd, name = tempfile.mkstemp(prefix="course_grade_output_")
    os.unlink(name)
    return fd


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the process group of ``process`` (with bubblewrap, its PID namespace goes with it) and reap it;
    where there is no ``killpg`` (Windows), ``process`` alone."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
