"""grading.sandbox: what the bubblewrap command binds and hides, the environment, the user, the output file,
the cgroup of a real run, and a platform that refuses a limit (macOS and RLIMIT_AS)."""

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import reachable

import course_lib
import course_tools
from course_tools.cgroups import TreeGroup, Unavailable
from course_tools.grading import sandbox
from course_tools.grading.isolation import grade
from course_tools.grading.remote import self_study_sandbox
from course_tools.grading.sandbox import NOBODY, Sandbox, bubblewrap

ROOT = Path(__file__).resolve().parents[1]
needs_bubblewrap = pytest.mark.skipif(bubblewrap() is None, reason="bubblewrap is not available here")


def binds(command: list[str]) -> dict[str, str]:
    """{where inside: host path} of every --ro-bind in a bwrap command line."""
    return {command[i + 2]: command[i + 1] for i, word in enumerate(command) if word == "--ro-bind"}


@pytest.fixture
def with_bwrap(monkeypatch):
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: "/usr/bin/bwrap")


def test_the_root_starts_empty_and_only_python_and_the_course_packages_are_bound(tmp_path, with_bwrap):
    command = Sandbox(tmp_path).command(["python"])
    bound = binds(command)
    assert "/" not in bound and str(ROOT) not in bound  # never the clone's root: .git, solutions/, submissions/
    wanted = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, Path(course_lib.__file__).parent,
                                            Path(course_tools.__file__).parent)}
    visible = [Path(dest) for dest in bound] + [Path(p) for p in sandbox.SYSTEM]
    assert all(any(Path(p).is_relative_to(v) for v in visible) for p in wanted), (wanted, bound)
    for secret in (ROOT / ".git", ROOT / "solutions", ROOT / "submissions"):
        assert not any(secret.is_relative_to(dest) for dest in bound), secret
    assert command[-1] == "python" and "--die-with-parent" in command and "--cap-drop" in command


def test_a_hidden_folder_inside_a_bound_one_is_covered_after_the_bind(tmp_path, monkeypatch, with_bwrap):
    """A class folder kept inside the venv (or anything hidden under a bound folder) stays covered, and a
    venv under /tmp is bound after /tmp's own tmpfs, not hidden by it."""
    venv = tmp_path / "clone" / ".venv"
    (venv / "class").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    command = Sandbox(tmp_path / "private", hidden=(venv / "class", tmp_path / "elsewhere")).command(["python"])
    words, venv, inner = " ".join(command), str(venv.resolve()), str((venv / "class").resolve())
    assert words.index(f"--ro-bind {venv} {venv}") < words.index(f"--tmpfs {inner}")
    assert words.index("--tmpfs /tmp ") < words.index(f"--ro-bind {venv} {venv}")  # a clone under /tmp, as CI's
    assert str(tmp_path / "elsewhere") not in words and str((tmp_path / "clone").resolve()) not in binds(command)


def test_the_private_folder_tmp_and_shm_are_capped_tmpfs_and_the_notebook_is_copied_in(tmp_path, with_bwrap):
    limits = sandbox.Limits()
    command = Sandbox(tmp_path, limits=limits).command(["python"], copies=((7, "submission.ipynb"),))
    words = " ".join(command)
    for folder, size in (("/tmp", limits.tmp_bytes), ("/tmp/submission", limits.folder_bytes),
                         ("/dev/shm", limits.shm_bytes)):
        assert f"--size {size} --tmpfs {folder} " in words
    assert "--file 7 /tmp/submission/submission.ipynb" in words and str(tmp_path) not in words  # no host folder


def test_the_environment_is_a_few_variables_never_the_graders(tmp_path, monkeypatch, with_bwrap):
    monkeypatch.setenv("LMS_API_TOKEN", "secret")
    monkeypatch.setenv("COURSE_LIB_GRADING", "1")
    environment = Sandbox(tmp_path).environment()
    assert set(environment) == {"PATH", "HOME", "LANG", "TMPDIR", "MPLBACKEND", "COURSE_DEVICE",
                                "CUDA_VISIBLE_DEVICES", "PYTHONNOUSERSITE", "COURSE_LIB_GRADING"}
    assert environment["HOME"] == "/tmp/submission" and "secret" not in environment.values()


@pytest.mark.parametrize("stays_root", [True, False])
def test_a_root_bwrap_makes_no_user_namespace_and_setpriv_becomes_nobody(tmp_path, monkeypatch, with_bwrap,
                                                                          stays_root):
    """bwrap stays root only where nobody cannot reach a bound folder; else the child becomes nobody first."""
    monkeypatch.setattr(sandbox, "bwrap_stays_root", lambda user: stays_root)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: f"/usr/bin/{name}")
    words = " ".join(Sandbox(tmp_path).command(["python"]))
    assert ("-- /usr/bin/setpriv --reuid 65534 --regid 65534 --clear-groups" in words) == stays_root
    assert ("--unshare-all" in words) == (not stays_root)  # root's bwrap makes none: nobody is the real uid


def test_without_bubblewrap_the_command_is_unchanged_and_the_level_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: None)
    box = Sandbox(tmp_path, hidden=(Path("/nonexistent"),))
    assert box.command(["python", "-c", "1"]) == ["python", "-c", "1"]
    assert box.level.startswith("fallback without bubblewrap") and "network stays open" in box.level


def test_without_a_cgroup_the_level_says_the_rlimits_alone_bound_a_submission(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "cgroup_support", lambda memory, tasks: (None, "cannot create a cgroup here"))
    assert "no per-submission memory or task limit (cannot create a cgroup here)" in Sandbox(tmp_path).level
    monkeypatch.setattr(sandbox, "cgroup_support", lambda memory, tasks: (2, ""))
    assert "per submission (cgroup v2): 3 GiB of memory without swap, 512 tasks" in Sandbox(tmp_path).level


def test_a_cgroup_that_cannot_be_made_for_one_run_is_a_note_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "cgroup_support", lambda memory, tasks: (1, ""))

    def refuse(**limits):
        raise Unavailable("cannot create a cgroup here: [Errno 28] No space left on device")

    monkeypatch.setattr(TreeGroup, "create", refuse)
    run = Sandbox(tmp_path, use_bubblewrap=False).start([sys.executable, "-c", "print('ran')"], pass_fds=())
    run.process.wait()
    run.stop()
    assert run.output_tail(100).strip() == b"ran" and "No space left" in run.notes[0]


@needs_bubblewrap
def test_a_real_run_is_not_root_sees_nothing_of_the_clone_and_its_output_is_never_reopened(tmp_path):
    """The run links its folder's old log name to a hidden file and prints; its output comes from the grader's file."""
    secret = tmp_path / "hidden" / "credentials"
    secret.parent.mkdir()
    secret.write_text("course-sandbox-secret")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "submission.ipynb").write_text("{}")
    code = (f"import json, os; os.symlink({str(secret)!r}, '.course_grading.log'); "
            f"print(json.dumps([os.getuid(), sorted(os.listdir('.')), os.path.exists({str(ROOT / '.git')!r}), "
            f"os.path.exists({str(secret)!r})]))")
    run = Sandbox(tmp_path / "private", hidden=(secret.parent,)).start([sys.executable, "-c", code], pass_fds=())
    run.process.wait()
    run.stop()
    uid, listing, sees_git, sees_secret = json.loads(run.output_tail(1000))
    assert uid != 0 and (os.geteuid() != 0 or uid == NOBODY[0]), uid
    assert listing == [".course_grading.log", "submission.ipynb"] and not sees_git and not sees_secret
    assert b"course-sandbox-secret" not in run.output_tail(4096)
    assert run.group is None or not any(folder.exists() for folder in run.group.folders)  # the cgroup is gone
    assert os.listdir(tmp_path / "private") == ["submission.ipynb"]  # nothing written to the host's folder


# A root grader whose sandbox user reaches every bound folder (run where /root holds only them, open).
BECOME_FIRST = """
import json, sys
from pathlib import Path
from course_tools.grading.sandbox import NOBODY, Sandbox, bwrap_stays_root
folder = Path(sys.argv[1])
run = Sandbox(folder).start([sys.executable, "-c", "import os; print(os.getuid(), os.getgid(), os.getgroups())"],
                            pass_fds=())
command = " ".join(Sandbox(folder).command(["python"]))
run.process.wait()
run.stop()
print(json.dumps([bwrap_stays_root(NOBODY), "--unshare-all" in command, run.output_tail(200).decode()]))
"""


@needs_bubblewrap
def test_a_root_grader_whose_user_reaches_the_python_becomes_it_before_bwrap(tmp_path):
    """As in Docker, where root cannot mount without a user namespace: nobody's own bwrap makes one."""
    if reachable.available() or os.geteuid() != 0:
        pytest.skip(f"a root grader in a mount namespace of its own {reachable.available() or 'needs root'}")
    (tmp_path / "private").mkdir()
    folders = [*sandbox.bound_folders().values(), str(Path(sys.executable).resolve().parent)]
    (tmp_path / "stage").mkdir()
    command = reachable.command(folders, NOBODY, tmp_path / "stage", {"PATH": os.environ["PATH"]},
                                [sys.executable, "-c", BECOME_FIRST, str(tmp_path / "private")], as_user=False)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    stays_root, user_namespace, printed = json.loads(done.stdout.splitlines()[-1])
    assert (stays_root, user_namespace) == (False, True) and printed.split() == ["65534", "65534", "[]"], printed


def test_a_limit_the_platform_refuses_is_skipped_with_a_note_and_check_still_runs(tmp_path, monkeypatch):
    """macOS's setrlimit(RLIMIT_AS) raises (a CPython limitation there): the run goes on without it."""
    real = resource.setrlimit

    def setrlimit(limit, values):
        if limit == resource.RLIMIT_AS:
            raise ValueError("current limit exceeds maximum limit")
        real(limit, values)

    monkeypatch.setattr(resource, "setrlimit", setrlimit)  # the child runs Limits.apply after fork: with this one
    with pytest.warns(UserWarning, match=r"the memory limit per process \(RLIMIT_AS\) could not be set"):
        result = grade("ex01_softmax_attention", zeros_like_attention, timeout=60)
    assert result.ran and len(result.tests) > 0, result.message
    with pytest.warns(UserWarning, match="RLIMIT_AS"):
        run = self_study_sandbox(tmp_path).start([sys.executable, "-c", "print('ran')"], pass_fds=())
    run.process.wait()
    run.stop()
    assert run.output_tail(100).strip() == b"ran" and "RLIMIT_AS" in run.notes[0]


def zeros_like_attention(q, k, v, causal=False):
    import torch

    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
