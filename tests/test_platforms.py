"""check() on a platform without ``resource`` and without POSIX signals (native Windows, simulated here).

A fresh interpreter hides ``resource`` and deletes ``signal.SIGALRM``, ``signal.setitimer``,
``signal.SIGKILL`` and ``os.killpg`` (``Popen.kill`` becomes ``terminate``, as on Windows) before anything
of the course is imported, then grades ex01: a correct answer scores full marks, and an endless loop
is stopped by the grader's own clock."""

import subprocess
import sys
import textwrap

import pytest

from course_tools.grading import sandbox
from course_tools.grading.remote import self_study_sandbox

NO_POSIX = """\
import importlib.abc, os, signal, subprocess, sys

class NoResource(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "resource":
            raise ImportError("no module named 'resource' (hidden: a platform without it)")
        return None

sys.meta_path.insert(0, NoResource())
sys.modules.pop("resource", None)
for name in ("SIGALRM", "setitimer", "SIGKILL"):
    delattr(signal, name)
del os.killpg
subprocess.Popen.kill = subprocess.Popen.terminate  # POSIX's kill() sends signal.SIGKILL; Windows' is terminate()
"""

SOFTMAX_ATTENTION = """\
import math
import torch
from course_tools.grading import check

def softmax_attention(q, k, v, causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n, m)
    if causal:
        n, m = scores.shape[-2:]
        future = torch.ones(n, m, dtype=torch.bool, device=q.device).triu(1)  # j > i
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (..., n, dv)
"""


def run_without_posix(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "no_posix.py"
    script.write_text(NO_POSIX + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)


def test_check_imports_and_grades_without_resource_or_sigalrm(tmp_path):
    done = run_without_posix(tmp_path, SOFTMAX_ATTENTION + 'check("ex01_softmax_attention", softmax_attention)\n')
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].endswith("Score: 10/10"), done.stdout + done.stderr[-2000:]
    assert "could not be set here" in done.stderr  # the limits it could not set are named, not silently dropped


def test_the_time_limit_stops_an_endless_loop_without_signals(tmp_path):
    body = """\
    from course_tools.grading import check

    def forever(q, k, v, causal=False):
        while True:
            pass

    check("ex01_softmax_attention", forever, timeout=20)
    """
    done = run_without_posix(tmp_path, body)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "time limit of 20 s reached" in done.stdout, done.stdout + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "Score: 0/10", done.stdout


def test_without_resource_every_limit_is_skipped_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "_resource", lambda: None)
    with pytest.warns(UserWarning, match=r"the memory limit per process \(RLIMIT_AS\) could not be set here"):
        run = self_study_sandbox(tmp_path).start([sys.executable, "-c", "print('ran')"], pass_fds=())
    run.process.wait()
    run.stop()
    assert run.output_tail(100).strip() == b"ran"
    named = " ".join(run.notes)
    assert all(name in named for name in ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")), run.notes
