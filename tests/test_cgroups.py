"""course_tools.cgroups: a process tree's group in a stand-in for /sys/fs/cgroup (v1 and v2 layouts), and on
this machine's real cgroups where this process may make one (root on v1, a delegated v2)."""

import subprocess
import sys
from pathlib import Path

import pytest

from course_tools import cgroups
from course_tools.cgroups import TreeGroup, Unavailable

V1 = "8:pids:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
V2 = "0::/user.slice/grader.scope\n"


def fake_v1(tmp_path: Path) -> Path:
    root = tmp_path / "cgroup"
    (root / "memory" / "process_api" / "abc").mkdir(parents=True)
    (root / "pids").mkdir()
    return root


def fake_v2(tmp_path: Path, *, delegated: str) -> Path:
    root = tmp_path / "cgroup"
    own = root / "user.slice" / "grader.scope"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text("memory pids\n")
    (own / "cgroup.subtree_control").write_text(delegated)
    (own / cgroups.GRADING).mkdir()
    (own / cgroups.GRADING / "cgroup.subtree_control").write_text(delegated)
    return root


def test_a_v1_group_nests_under_this_process_in_each_controller_with_its_limits(tmp_path):
    root = fake_v1(tmp_path)
    group = TreeGroup.create(memory_bytes=3 << 30, tasks=512, root=root, proc_cgroup=V1)
    memory, pids = group.folders
    assert group.version == 1
    assert memory.parent == root / "memory/process_api/abc" / cgroups.GRADING
    assert pids.parent == root / "pids" / cgroups.GRADING and memory.name == pids.name
    assert (memory / "memory.limit_in_bytes").read_text() == str(3 << 30)
    assert (pids / "pids.max").read_text() == "512"
    assert group.procs_files() == (memory / "cgroup.procs", pids / "cgroup.procs")


def test_a_v2_group_gets_memory_without_swap_and_tasks(tmp_path):
    root = fake_v2(tmp_path, delegated="memory pids\n")
    own = root / "user.slice" / "grader.scope"
    group = TreeGroup.create(memory_bytes=1 << 30, tasks=64, root=root, proc_cgroup=V2)
    (folder,) = group.folders
    assert group.version == 2 and folder.parent == own / cgroups.GRADING
    assert (folder / "memory.max").read_text() == str(1 << 30) and (folder / "pids.max").read_text() == "64"


def test_v2_controllers_are_passed_down_when_not_yet_delegated(tmp_path):
    root = fake_v2(tmp_path, delegated="")
    TreeGroup.create(memory_bytes=1 << 30, tasks=64, root=root, proc_cgroup=V2)
    own = root / "user.slice" / "grader.scope"
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (own / cgroups.GRADING / "cgroup.subtree_control").read_text() == "+memory +pids"


@pytest.mark.parametrize(("proc_cgroup", "says"), [
    ("4:memory:/\n0::/\n", "no cgroup v1 'pids' controller"),
    (V1, "cannot create a cgroup here"),
])
def test_a_group_that_cannot_be_made_says_why(tmp_path, proc_cgroup, says):
    root = fake_v1(tmp_path)
    (root / "pids").rmdir()
    (root / "pids").write_text("not a folder")
    with pytest.raises(Unavailable, match=says):
        TreeGroup.create(memory_bytes=1 << 30, tasks=64, root=root, proc_cgroup=proc_cgroup)


def test_v2_without_the_controllers_is_unavailable(tmp_path):
    root = fake_v2(tmp_path, delegated="")
    (root / "user.slice" / "grader.scope" / "cgroup.controllers").write_text("cpu\n")
    with pytest.raises(Unavailable, match="without the memory and pids controllers"):
        TreeGroup.create(memory_bytes=1 << 30, tasks=64, root=root, proc_cgroup=V2)


def real_group() -> TreeGroup:
    try:
        return TreeGroup.create(memory_bytes=256 << 20, tasks=8)
    except Unavailable as why:
        pytest.skip(f"no cgroup can be made here: {why}")


def test_a_real_group_holds_its_task_limit_and_removing_it_kills_every_process():
    group = real_group()
    joins = " ".join(f"open({str(path)!r}, 'w').write('0');" for path in group.procs_files())
    code = (f"import os, time; {joins}\nfor _ in range(20):\n    try:\n        os.posix_spawn('/bin/sleep', "
            "['sleep', '60'], {})\n    except OSError:\n        break\nprint(len(os.listdir('/proc/self/task')), "
            "flush=True); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        process.stdout.readline()
        assert 1 < len(group.pids()) <= 8  # the python and the sleepers it could start
    finally:
        group.remove()
        process.wait(timeout=10)
    assert process.returncode == -9 and not any(folder.exists() for folder in group.folders)
