"""grading.sandbox: the bubblewrap command line hides what it must and keeps the Python it runs on."""

import sys
from pathlib import Path

from course_tools.grading import sandbox
from course_tools.grading.sandbox import Sandbox


def test_an_installation_under_tmp_stays_visible_and_its_solutions_stay_hidden(tmp_path, monkeypatch):
    """A clean clone under /tmp (as CI makes one): /tmp is emptied, the venv bound back, solutions/ hidden again."""
    repo = tmp_path / "clone"
    (repo / ".venv").mkdir(parents=True)
    (repo / "solutions").mkdir()
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(sys, "prefix", str(repo / ".venv"))
    command = Sandbox(tmp_path / "private", hidden=(repo / "solutions",)).command(["python"])
    words = " ".join(command)
    venv, solutions = str((repo / ".venv").resolve()), str((repo / "solutions").resolve())
    assert words.index("--tmpfs /tmp ") < words.index(f"--ro-bind {venv} {venv}")
    assert words.rindex(f"--tmpfs {solutions}") > words.index(f"--ro-bind {venv} {venv}")
    assert command[-1] == "python" and "--unshare-all" in command and "--die-with-parent" in command


def test_without_bubblewrap_the_command_is_unchanged_and_the_level_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: None)
    box = Sandbox(tmp_path, hidden=(Path("/nonexistent"),))
    assert box.command(["python", "-c", "1"]) == ["python", "-c", "1"]
    assert box.level.startswith("fallback without bubblewrap") and "network stays open" in box.level
