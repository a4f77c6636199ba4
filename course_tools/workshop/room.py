"""A workshop room on one server, the parts that need no JupyterHub: who takes part, the room's
settings, each participant's private copy of the course, and the per-user memory and CPU limits.

``course_tools.workshop.hub`` plugs these into JupyterHub (``make hub``); they live here so that
``make test`` checks them on any machine. The limits are written by hand because no kept spawner
enforces them without systemd or Docker (``LocalProcessSpawner`` ignores ``mem_limit`` and
``cpu_limit``; ``jupyterhub-systemdspawner``, The Littlest JupyterHub's choice, needs systemd as
PID 1): each single-user server, and every kernel it starts, joins its own cgroup (v1 ``memory``
and ``cpu`` controllers), nested under the hub's own cgroup so the room never escapes the limits
the hub itself runs under (``course_tools.cgroups``, shared with the grader's sandbox).
"""

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from course_tools.cgroups import ROOT as CGROUP_ROOT
from course_tools.cgroups import join, limit_memory_v1, own_cgroup, v1_folder  # noqa: F401 - join: the hub's

COURSE_DIR = "linear-attention-course"  # the folder in each participant's home
CGROUP_GROUP = "linear-attention-course"  # every user's cgroup sits under this one
CPU_PERIOD_US = 100_000
UNIX_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")  # what useradd accepts everywhere
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", re.IGNORECASE)
SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class Participant:
    name: str
    admin: bool = False


def read_participants(path: Path) -> tuple[Participant, ...]:
    """One participant per line (``name`` or ``name admin``); blank lines and ``#`` comments skipped.

    ValueError names the file, the line and what was expected."""
    found: dict[str, Participant] = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}, line {number}"
        if len(words) > 2 or (len(words) == 2 and words[1] != "admin"):
            raise ValueError(f"{where}: expected 'name' or 'name admin', got {raw.strip()!r}")
        name = words[0]
        if not UNIX_NAME.fullmatch(name):
            raise ValueError(f"{where}: {name!r} is not a Unix user name (lower-case letters, digits, '_' or "
                             "'-', starting with a letter or '_', at most 32 characters)")
        if name in found:
            raise ValueError(f"{where}: {name!r} is listed twice")
        found[name] = Participant(name, admin=len(words) == 2)
    if not found:
        raise ValueError(f"{path}: lists no participants (one user name per line)")
    return tuple(found.values())


def parse_size(text: str, *, name: str) -> int:
    """'4G', '512M', '1.5GiB' or a byte count -> bytes; ValueError naming ``name`` otherwise."""
    match = SIZE.fullmatch(text.strip())
    if not match or float(match[1]) <= 0:
        raise ValueError(f"{name} must be a positive size such as 4G or 512M, got {text!r}")
    return int(float(match[1]) * SIZE_UNITS[match[2].upper()])


def _positive(environ: dict, name: str, default: int | float, kind: type) -> int | float:
    text = environ.get(name, str(default))
    try:
        value = kind(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{name} must be a positive {kind.__name__}, got {text!r}")
    return value


@dataclass(frozen=True)
class RoomSettings:
    """Everything ``make hub`` passes to the hub's configuration (environment variables, so the
    same ``jupyterhub_config.py`` serves the Makefile, the test and a systemd unit)."""

    prefix: Path  # venv/ (the participants' Python), course/ (the student copy), proxy/ (npm's proxy)
    state: Path  # the hub's database, cookie secret, first-use passwords and log (root only)
    participants: tuple[Participant, ...]
    ip: str = "127.0.0.1"
    port: int = 8000  # the public port; the hub's API takes port + 1 and the proxy's API port + 2
    mem_limit: int = 4 * 2**30  # bytes per participant: their server and all their kernels together
    cpu_limit: float = 1.0  # cores per participant
    idle_timeout: int = 3600  # seconds without activity before the culler stops a server
    api_token: str | None = None  # registers a 'workshop-admin' service holding this token (tests, scripts)

    @classmethod
    def from_env(cls, environ: dict) -> "RoomSettings":
        """Read ``WORKSHOP_*``; ValueError names the variable and what it expects."""
        missing = [name for name in ("WORKSHOP_PREFIX", "WORKSHOP_STATE", "WORKSHOP_PARTICIPANTS")
                   if not environ.get(name)]
        if missing:
            raise ValueError(f"set {', '.join(missing)} (make hub sets them; see docs/setup.md, 'One shared server')")
        participants_file = Path(environ["WORKSHOP_PARTICIPANTS"])
        if not participants_file.is_file():
            raise ValueError(f"WORKSHOP_PARTICIPANTS must be a file of user names, got {str(participants_file)!r}")
        return cls(
            prefix=Path(environ["WORKSHOP_PREFIX"]),
            state=Path(environ["WORKSHOP_STATE"]),
            participants=read_participants(participants_file),
            ip=environ.get("WORKSHOP_IP", cls.ip),
            port=_positive(environ, "WORKSHOP_PORT", cls.port, int),
            mem_limit=parse_size(environ.get("WORKSHOP_MEM_LIMIT", str(cls.mem_limit)), name="WORKSHOP_MEM_LIMIT"),
            cpu_limit=_positive(environ, "WORKSHOP_CPU_LIMIT", cls.cpu_limit, float),
            idle_timeout=_positive(environ, "WORKSHOP_IDLE_TIMEOUT", cls.idle_timeout, int),
            api_token=environ.get("WORKSHOP_API_TOKEN") or None,
        )


def close_home(home: str | Path) -> None:
    """Nobody but the owner (and root) may list, read or enter ``home``: mode 0700."""
    Path(home).chmod(0o700)


def give_course_copy(home: str | Path, course: str | Path, uid: int, gid: int) -> Path:
    """Close ``home`` and, once, copy ``course`` into ``home/COURSE_DIR`` owned by ``uid:gid``;
    later starts keep the participant's work. Returns the copy's folder."""
    close_home(home)
    target = Path(home) / COURSE_DIR
    if not target.exists():
        shutil.copytree(course, target)
        for folder, dirs, files in os.walk(target):
            for entry in [folder, *(os.path.join(folder, name) for name in dirs + files)]:
                os.chown(entry, uid, gid, follow_symlinks=False)
    return target


def room_cgroup(controller: str, *, root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> Path:
    """The room's cgroup of ``controller`` (each user's is a folder in it), under this process's own
    (``proc_cgroup``: the text of /proc/self/cgroup, read when None); KeyError as ``own_cgroup``."""
    return v1_folder(controller, CGROUP_GROUP, root=root, proc_cgroup=proc_cgroup)


class LimitsUnavailable(RuntimeError):
    """This machine gives the hub no writable cgroup v1 memory and cpu controllers."""


def prepare_limits(user: str, *, memory_bytes: int, cpus: float, root: Path = CGROUP_ROOT,
                   proc_cgroup: str | None = None) -> tuple[Path, ...]:
    """Create ``user``'s memory and cpu cgroups (nested under the hub's own) with the limits set;
    returns the folders a process joins by writing its pid to their ``cgroup.procs`` (``join``).

    Memory: ``memory.limit_in_bytes`` and, where swap accounting exists, the same for memory plus
    swap (no swapping past the limit); the kernel's OOM killer then stops the largest process in the
    group, which is the participant's own. CPU: a CFS quota of ``cpus`` periods. Raises
    LimitsUnavailable with the reason when the machine does not allow it."""
    try:
        folders = tuple(room_cgroup(controller, root=root, proc_cgroup=proc_cgroup) / user
                        for controller in ("memory", "cpu"))
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        memory, cpu = folders
        limit_memory_v1(memory, memory_bytes)
        (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(round(cpus * CPU_PERIOD_US)))
    except KeyError as missing:
        raise LimitsUnavailable(f"no cgroup v1 {missing} controller in /proc/self/cgroup") from None
    except OSError as error:
        raise LimitsUnavailable(f"cannot set cgroup limits: {error}") from None
    return folders
