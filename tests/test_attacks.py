"""The attack suite: hostile submissions (tests/attacks.py) graded in one batch beside honest ones.

One module-scoped run of ``python -m course_tools.grade --jobs 2`` grades every attack, two
honest submissions and the exercise stub. Every attack must score no more than the stub,
leave the honest submissions' scores and files, the instructor's files and the installation
as they were, leave no process behind, and the batch must end within its limits. The
isolation the attacks meet needs bubblewrap (``make test`` installs it where it can); without
it the tests that need it are skipped, saying so, and the attacks that would really rewrite a
classmate's notebook or this checkout (the grader's checks.py, the quiz key) or leave processes
behind are left out of the batch: the fallback sandbox cannot stop them.
"""

import csv
import hashlib
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from attacks import ANSWER_ZEROS, ATTACKS, MARKER, ZEROS

from course_tools.grading import checks
from course_tools.grading.sandbox import bubblewrap

ROOT = Path(__file__).resolve().parents[1]
LIMITS = {"--timeout": "30", "--cell-timeout": "10", "--notebook-timeout": "30"}
EX01 = {"exercise": "ex01_softmax_attention", "function": "softmax_attention"}
needs_bubblewrap = pytest.mark.skipif(bubblewrap() is None, reason="bubblewrap is not available here: the "
                                      "fallback sandbox cannot hide files, the network or detached processes")
HARMFUL_WITHOUT_BUBBLEWRAP = {"classmates.ipynb", "edit_installation.ipynb", "orphans.ipynb"}
RUN = {name: cells for name, cells in ATTACKS.items()
       if bubblewrap() is not None or name not in HARMFUL_WITHOUT_BUBBLEWRAP}  # the attacks this batch grades


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def attack_notebook(cells: list[str]) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source.strip()) for source in cells])
    notebook.metadata["course_lib"] = EX01
    return notebook


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder, out = tmp_path_factory.mktemp("class"), tmp_path_factory.mktemp("instructor")
    nbformat.write(nbformat.read(ROOT / "solutions" / "ex01_softmax_attention.ipynb", as_version=4),
                   folder / "honest_ex01.ipynb")
    nbformat.write(nbformat.read(ROOT / "solutions" / "ex11_delta_rule.ipynb", as_version=4),
                   folder / "honest_ex11.ipynb")
    nbformat.write(nbformat.read(ROOT / "exercises" / "ex01_softmax_attention.ipynb", as_version=4),
                   folder / "stub_ex01.ipynb")
    nbformat.write(attack_notebook(["import torch", ZEROS]), folder / "zeros_ex01.ipynb")  # honest, and wrong
    for name, cells in RUN.items():
        nbformat.write(attack_notebook(cells), folder / name)
    protected = [folder / "honest_ex01.ipynb", folder / "honest_ex11.ipynb", Path(checks.__file__),
                 ROOT / "solutions" / "quiz_key.json"]
    before = {path: digest(path) for path in protected}
    command = [sys.executable, "-m", "course_tools.grade", str(folder), "--csv", str(out / "scores.csv"),
               "--out", str(out / "reports"), "--jobs", "2", *(x for pair in LIMITS.items() for x in pair)]
    started = time.monotonic()
    run = subprocess.run(command, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    written = (out / "scores.csv").read_bytes()
    time.sleep(6)  # an orphan that survived would write the CSV after 4 s
    with (out / "scores.csv").open(newline="", encoding="utf-8") as file:
        rows = {Path(row["file"]).name: row for row in csv.DictReader(file)}
    return {"run": run, "rows": rows, "seconds": seconds, "written": written, "out": out, "before": before}


def test_the_batch_finished_and_graded_every_notebook(batch):
    assert batch["run"].returncode == 0, batch["run"].stderr[-2000:]
    assert set(batch["rows"]) == {*RUN, "honest_ex01.ipynb", "honest_ex11.ipynb", "stub_ex01.ipynb",
                                  "zeros_ex01.ipynb"}


@pytest.mark.parametrize("attack", sorted(RUN))
def test_no_attack_scores_more_than_its_honest_equivalent(batch, attack):
    rows = batch["rows"]
    assert (rows["stub_ex01.ipynb"]["score"], rows["zeros_ex01.ipynb"]["score"]) == ("0", "0")  # zeros compute nothing
    honest = rows["zeros_ex01.ipynb" if attack in ANSWER_ZEROS else "stub_ex01.ipynb"]
    assert int(rows[attack]["score"]) <= int(honest["score"]), rows[attack]
    assert rows[attack]["max"] == "10", rows[attack]  # every attack is graded against the full maximum


@pytest.mark.parametrize(("attack", "says"), [
    ("model_answer.ipynb", "is not allowed in this exercise"),
    ("fused_attention.ipynb", "is not allowed in this exercise"),
    ("tensor_subclass.ipynb", "not plain data"),
    ("endless.ipynb", "time limit of 30 s reached before your function was ready"),
    ("memory_hog.ipynb", "MemoryError"),
])
def test_the_reason_names_what_stopped_the_attack(batch, attack, says):
    with (batch["out"] / "reports" / "tests.csv").open(newline="", encoding="utf-8") as file:
        feedback = " ".join(row["feedback"] for row in csv.DictReader(file) if row["file"].endswith(attack))
    assert says in batch["rows"][attack]["reason"] + feedback


def test_honest_submissions_keep_full_marks(batch):
    rows = batch["rows"]
    assert (rows["honest_ex01.ipynb"]["score"], rows["honest_ex11.ipynb"]["score"]) == ("10", "10"), (
        rows["honest_ex01.ipynb"], rows["honest_ex11.ipynb"])


@needs_bubblewrap
def test_nobody_reads_or_rewrites_a_classmate_or_the_instructors_files(batch):
    changed = [str(path) for path, before in batch["before"].items() if digest(path) != before]
    assert not changed, f"changed by a submission: {changed}"
    assert batch["written"] == (batch["out"] / "scores.csv").read_bytes(), "the CSV changed after the batch"


@needs_bubblewrap
def test_no_process_outlives_the_batch(batch):
    survivors = subprocess.run(["pgrep", "-af", MARKER], capture_output=True, text=True).stdout
    assert survivors.strip() == "", survivors


@needs_bubblewrap
def test_the_network_is_unreachable(batch):
    assert "the network was reachable" not in batch["rows"]["network.ipynb"]["reason"]


def test_nothing_printed_or_written_carries_terminal_escape_codes(batch):
    assert "\x1b" not in batch["run"].stdout and "\x07" not in batch["run"].stdout
    assert b"\x1b" not in batch["written"]
    assert "owned" in batch["rows"]["escape_codes.ipynb"]["reason"]  # the text stays, the codes go


def test_the_batch_ends_within_its_limits(batch):
    """20 notebooks, 2 at a time: the endless one is cut at 30 s, the rest take seconds each."""
    assert batch["seconds"] < 300, batch["seconds"]
