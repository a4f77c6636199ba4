"""A command run as root in a mount namespace of its own (``unshare --mount``) where a user can reach given folders.

A folder the user cannot enter (``/root``, mode 0700, holding this machine's Python) is covered
there by an empty tmpfs of mode 0755, and the given folders below it are bound back; nothing
changes outside the namespace. The command then runs as that user (``as_user``) or stays root.
Tests use it to grade as nobody, and to let a root grader's sandbox drop to nobody before bwrap.
"""

import json
import os
import shutil
import stat
import sys
from pathlib import Path

SCRIPT = """
import json, os, subprocess, sys
from pathlib import Path
needed, user, stage, environment, command = json.loads(sys.argv[1])
places = (Path(stage) / str(index) for index in range(1000))
for closed, inside in needed.items():
    kept = {path: next(places) for path in inside}
    for path, place in kept.items():  # each needed folder, bound aside before the tmpfs covers it
        place.mkdir()
        subprocess.run(["mount", "--bind", path, str(place)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", closed], check=True)
    for path, place in kept.items():
        Path(path).mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(place), path], check=True)
if user:
    os.setgroups([])
    os.setgid(user[1])
    os.setuid(user[0])
os.execve(command[0], command, environment)
"""


def available() -> str | None:
    """Why this cannot run here, or None."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        return "needs root, unshare and mount (a mount namespace of its own)"
    return None


def closed_to(uid: int, path: Path) -> Path | None:
    """The outermost folder down to ``path`` that ``uid`` (in no group of the folder's) cannot enter, or None."""
    for folder in [*reversed(path.parents), path]:
        info = folder.stat()
        if info.st_uid != uid and not info.st_mode & stat.S_IXOTH:
            return folder
    return None


def command(folders: list[str], user: tuple[int, int], stage: Path, environment: dict[str, str], then: list[str],
            *, as_user: bool) -> list[str]:
    """``unshare`` running ``then`` with ``folders`` reachable by ``user`` (``stage``: an empty folder for the
    bind mounts' way round), as ``user`` or as root."""
    outermost = [f for f in sorted(set(folders)) if not any(Path(f).is_relative_to(o) and f != o for o in folders)]
    needed: dict[str, list[str]] = {}
    for folder in outermost:
        closed = closed_to(user[0], Path(folder))
        if closed is not None:
            needed.setdefault(str(closed), []).append(folder)
    arguments = [needed, list(user) if as_user else None, str(stage), environment, then]
    return ["unshare", "--mount", "--", sys.executable, "-c", SCRIPT, json.dumps(arguments)]
