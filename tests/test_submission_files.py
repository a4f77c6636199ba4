"""What a submission can hand the grader besides a notebook, and what its text can do to the instructor.

Two module-scoped batches of ``python -m course_tools.grade``. ``files``: things named like
notebooks that are not regular files (a symbolic link to the model solution, a FIFO, a link to
``/dev/zero``, a socket, a link to a folder, and a PATH on the command line that is a link):
each must become a "not graded" row without being read, with the batch quick and the grader's
memory small. ``texts``: notebooks that run, sending text to the instructor: two paths that
flattened to one feedback name, metadata naming another exercise, a cell that answers the
grader itself with its own notes (one starting ``=HYPERLINK(``, one of 20,000 characters, 200 in
all; and one of 100 MB, which the channel refuses whole), and an answer that loads
``course_lib/attention.py`` under another name. Where bubblewrap cannot run, both batches pass
``--unsafe-no-sandbox``. The functions behind them are tested directly below the batches.
"""

import csv
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course_tools.grading.class_report import feedback_names, markdown_text, spreadsheet_safe
from course_tools.grading.notebooks import MAX_NOTE_CHARS, NotAFile, capped, capped_notes, read_file
from course_tools.grading.sandbox import bubblewrap

ROOT = Path(__file__).resolve().parents[1]
SANDBOX = [] if bubblewrap() else ["--unsafe-no-sandbox"]
MEASURED = """
import resource, subprocess, sys
run = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stdout.write(run.stdout)
sys.stderr.write(run.stderr)
sys.exit(run.returncode)
"""  # the grader's peak resident memory (KiB) on the first line, then its own output
FORGED = """
import os, sys
from course_tools.grading import answers
notes = ['=HYPERLINK("http://evil.example/","full marks")', "x" * NOTE, *(f"+note {i}" for i in range(198))]
answers.serve(softmax_attention, notes, (int(sys.argv[1]), int(sys.argv[2])))  # the grader's calls, answered here
os._exit(0)
"""  # NOTE: 20,000 characters (the channel carries it), or 100 MB (the channel refuses the frame)
BORROWED = """
import importlib.util, pathlib, course_lib
spec = importlib.util.spec_from_file_location("mine", pathlib.Path(course_lib.__file__).parent / "attention.py")
mine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mine)

def softmax_attention(q, k, v, causal=False):
    return mine.softmax_attention(q, k, v, causal=causal)
"""


def solution(exercise_id: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / f"{exercise_id}.ipynb", as_version=4)


def grade(paths: list[Path], out: Path, *, measured: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "course_tools.grade", *map(str, paths), "--csv", str(out / "scores.csv"),
               "--out", str(out / "reports"), "--jobs", "2", "--cell-timeout", "20", *SANDBOX]
    if measured:
        command = [sys.executable, "-c", MEASURED, *command]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def rows(out: Path, name: str = "scores.csv") -> dict[str, dict[str, str]]:
    with (out / name).open(newline="", encoding="utf-8") as file:
        return {row["file"]: row for row in csv.DictReader(file)}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder, out, outside = (tmp_path_factory.mktemp(name, numbered=False)
                            for name in ("files", "files_out", "elsewhere"))
    (folder / "copied_ex01.ipynb").symlink_to(ROOT / "solutions" / "ex01_softmax_attention.ipynb")
    (folder / "zero_ex01.ipynb").symlink_to("/dev/zero")
    (folder / "linked").symlink_to(ROOT / "solutions", target_is_directory=True)
    os.mkfifo(folder / "fifo_ex01.ipynb")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "socket_ex01.ipynb"))
    (outside / "given_ex01.ipynb").symlink_to(ROOT / "solutions" / "ex01_softmax_attention.ipynb")
    started = time.monotonic()
    run = grade([folder, outside / "given_ex01.ipynb"], out, measured=True)
    seconds = time.monotonic() - started
    server.close()
    peak_kib = int(run.stdout.splitlines()[0]) if run.stdout else -1
    return {"run": run, "seconds": seconds, "peak_mib": peak_kib / 1024, "rows": rows(out), "out": out}


def test_files_that_are_not_regular_files_are_rows_never_read(files):
    run = files["run"]
    assert run.returncode == 0, run.stderr[-3000:]
    said = {name: row["reason"] for name, row in files["rows"].items()}
    assert said == {
        "files/copied_ex01.ipynb": "not a regular file: a symbolic link, never read",  # was 10/10: the model solution
        "files/fifo_ex01.ipynb": "not a regular file: a FIFO (named pipe), never read",  # was a batch that hung
        "files/linked": "not a regular file: a symbolic link, never read",  # was every solution, graded as mine
        "files/socket_ex01.ipynb": "not a regular file: a socket, never read",
        "files/zero_ex01.ipynb": "not a regular file: a symbolic link, never read",  # was a grader growing by GBs
        "elsewhere/given_ex01.ipynb": "not a regular file: a symbolic link, never read",  # a PATH that is a link
    }
    assert {(row["status"], row["score"]) for row in files["rows"].values()} == {("not graded", "0")}


def test_a_fifo_or_dev_zero_neither_hangs_the_batch_nor_fills_the_graders_memory(files):
    assert files["seconds"] < 120, files["seconds"]
    assert 0 < files["peak_mib"] < 1024, files["peak_mib"]  # the grader and its imports; /dev/zero read is GBs


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    folder, out = tmp_path_factory.mktemp("texts", numbered=False), tmp_path_factory.mktemp("texts_out", numbered=False)
    for name in ("alice", "bob", "mallory"):
        (folder / name).mkdir()
    nbformat.write(solution("ex01_softmax_attention"), folder / "alice" / "hw_ex01.ipynb")
    (folder / "bob" / "hw_ex01.ipynb").write_text("{bob's notebook, broken")
    (folder / "mallory" / "alice_hw_ex01.ipynb").write_text("{mallory's notebook, broken")  # once alice's feedback name
    nbformat.write(solution("ex02_linear_attention"), folder / "mallory_ex01.ipynb")  # metadata: ex02, 10/10 once
    for name, note in (("=1+1_forged_ex01.ipynb", "20_000"), ("huge_ex01.ipynb", "(100 << 20)")):
        forged = solution("ex01_softmax_attention")
        forged.cells.append(nbformat.v4.new_code_cell(FORGED.strip().replace("NOTE", note)))
        nbformat.write(forged, folder / name)
    borrowed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BORROWED.strip())])
    nbformat.write(borrowed, folder / "borrowed_ex01.ipynb")
    run = grade([folder], out)
    return {"run": run, "rows": rows(out), "tests": (out / "reports" / "tests.csv").read_text(),
            "reports": out / "reports", "out": out}


def test_the_batch_with_hostile_texts_finished(texts):
    assert texts["run"].returncode == 0, texts["run"].stderr[-3000:]
    assert sorted(texts["rows"]) == ["'=1+1_forged_ex01.ipynb", "alice/hw_ex01.ipynb", "bob/hw_ex01.ipynb",
                                     "borrowed_ex01.ipynb", "huge_ex01.ipynb", "mallory/alice_hw_ex01.ipynb",
                                     "mallory_ex01.ipynb"]


def test_paths_that_once_flattened_to_one_name_get_a_feedback_file_each(texts):
    feedback = texts["reports"] / "feedback"
    alice, mallory = (feedback / "alice__hw_ex01.md").read_text(), (feedback / "mallory__alice_hw_ex01.md").read_text()
    assert alice.startswith("# alice/hw_ex01.ipynb: ex01_softmax_attention") and "**Score: 10/10** (graded)" in alice
    assert mallory.startswith("# mallory/alice_hw_ex01.ipynb: ") and "(not graded)" in mallory
    assert (feedback / "bob__hw_ex01.md").read_text().startswith("# bob/hw_ex01.ipynb: ")
    assert len(list(feedback.iterdir())) == len(texts["rows"])


def test_metadata_naming_another_exercise_is_reported_not_obeyed(texts):
    row = texts["rows"]["mallory_ex01.ipynb"]  # ex02's solution, named ex01: it once scored ex02's 10/10
    assert (row["exercise"], row["score"], row["max"]) == ("ex01_softmax_attention", "0", "10")
    assert row["reason"].startswith("the process running your function could not load it: LookupError: the notebook "
                                    "defines no softmax_attention")
    assert row["reason"].endswith("; metadata says ex02_linear_attention and names the function linear_attention, "
                                  "graded as ex01_softmax_attention (from the file name, function softmax_attention)")


def test_text_that_starts_like_a_formula_is_escaped_in_both_csvs(texts):
    row = texts["rows"]["'=1+1_forged_ex01.ipynb"]  # the file name, escaped too
    assert row["reason"].startswith("'=HYPERLINK(\"http://evil.example/\",\"full marks\"); xxx")
    assert (row["score"], row["max"]) == ("10", "10")  # numbers stay numbers
    for name in ("scores.csv", "tests.csv"):
        with (texts["reports"] / name).open(newline="", encoding="utf-8") as file:
            cells = [cell for line in csv.reader(file) for cell in line]
        assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")], name
    assert "'=1+1_forged_ex01.ipynb" in texts["tests"]


def test_long_notes_and_many_notes_are_capped_and_a_100_mb_note_never_reaches_a_report(texts):
    reason = texts["rows"]["'=1+1_forged_ex01.ipynb"]["reason"]
    assert " …[truncated]; +note 0; " in reason and reason.endswith("; +note 7; … and 190 more")
    assert len(reason) < 12 * MAX_NOTE_CHARS
    assert len(texts["rows"]["huge_ex01.ipynb"]["reason"]) < 2 * MAX_NOTE_CHARS  # once 100 MB, written four times
    for path in [texts["out"] / "scores.csv", *texts["reports"].rglob("*.csv"), *texts["reports"].rglob("*.md")]:
        assert path.stat().st_size < 64 << 10, path


def test_the_model_answer_loaded_under_another_name_is_flagged_for_review(texts):
    row = texts["rows"]["borrowed_ex01.ipynb"]
    assert row["score"] == "10"  # the block by name cannot see it: that is why it is flagged
    assert row["review"].startswith("imports importlib.util (cell 1, line 1); uses spec_from_file_location (cell 1, "
                                    "line 2); ")
    assert "imports course_tools.grading.answers" in texts["rows"]["'=1+1_forged_ex01.ipynb"]["review"]
    assert texts["rows"]["alice/hw_ex01.ipynb"]["review"] == ""
    summary = (texts["reports"] / "summary.md").read_text()
    assert "## Needs review" in summary and "- borrowed_ex01.ipynb: imports importlib.util" in summary
    assert "**Needs review** (a person will read this code): imports importlib.util" in (
        texts["reports"] / "feedback" / "borrowed_ex01.md").read_text()
    assert "needs review: borrowed_ex01.ipynb: " in texts["run"].stderr


# --- the functions behind the batches -----------------------------------------------------------


def test_feedback_names_come_from_the_whole_path_and_never_collide():
    names = ["alice/hw_ex01.ipynb", "alice_hw/ex01.ipynb", "alice_hw_ex01.ipynb", "mallory/alice_hw_ex01.ipynb",
             "a_/b.ipynb", "a/_b.ipynb", "a__b.ipynb", "100%.ipynb", "Alice.ipynb", "alice.ipynb",
             "x" * 300 + "1.ipynb", "x" * 300 + "2.ipynb"]
    shown = feedback_names(names)
    assert shown[:8] == ["alice__hw_ex01.md", "alice_hw__ex01.md", "alice_hw_ex01.md", "mallory__alice_hw_ex01.md",
                         "a%5F__b.md", "a__%5Fb.md", "a%5F%5Fb.md", "100%25.md"]
    assert shown[8:10] == ["Alice.md", "alice-2.md"]  # one file on a case-insensitive file system
    assert shown[10] == "x" * 200 + ".md" and shown[11] == "x" * 200 + "-2.md"  # cut to 200 bytes, then told apart
    assert len({name.casefold() for name in shown}) == len(names)


@pytest.mark.parametrize(("text", "safe"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1", "'+1"), ("-2", "'-2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("cell 3 raised =x", "cell 3 raised =x"), ("10", "10"), ("", ""),
])
def test_spreadsheet_cells_that_start_like_a_formula_get_a_quote(text, safe):
    assert spreadsheet_safe(text) == safe


def test_markdown_text_cannot_add_html_links_or_cells():
    text = markdown_text("<img src=x onerror=alert(1)> [click](http://evil) ![i](x) a|b \\| &lt;\nnext")
    assert text == ("&lt;img src=x onerror=alert(1)&gt; \\[click\\](http://evil) !\\[i\\](x) a\\|b \\\\\\| &amp;lt; "
                    "next")


def test_caps_bound_a_note_and_the_number_of_notes():
    started = time.monotonic()
    note = capped("\x1b[31m" + "x" * (100 << 20))
    assert time.monotonic() - started < 1 and len(note) <= MAX_NOTE_CHARS and note.endswith("x …[truncated]")
    assert "\x1b" not in note and capped("short") == "short"
    assert capped_notes([f"n{i}" for i in range(25)])[-2:] == ["n9", "… and 15 more"]


def test_reading_refuses_what_is_not_a_regular_file_and_reads_at_most_the_limit(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a_ex01.ipynb").write_bytes(b"{}")
    (tmp_path / "big_ex01.ipynb").write_bytes(b"x" * 2048)
    os.mkfifo(tmp_path / "fifo_ex01.ipynb")
    assert read_file(tmp_path / "real" / "a_ex01.ipynb", tmp_path) == b"{}"
    with pytest.raises(NotAFile, match="a FIFO"):
        read_file(tmp_path / "fifo_ex01.ipynb", tmp_path)  # O_NONBLOCK: no writer, no wait
    with pytest.raises(ValueError, match="larger than"):
        read_file(tmp_path / "big_ex01.ipynb", tmp_path, limit=1024)
    (tmp_path / "real").rename(tmp_path / "moved")  # a folder swapped for a link after the walk
    (tmp_path / "real").symlink_to(tmp_path / "moved")
    with pytest.raises(NotAFile, match=r"a symbolic link in its path \(real\)"):
        read_file(tmp_path / "real" / "a_ex01.ipynb", tmp_path)
    assert stat.S_ISLNK(os.lstat(tmp_path / "real").st_mode)
