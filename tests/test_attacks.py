"""The attack suite: hostile submissions (tests/attacks.py) graded in one batch beside honest ones.

One module-scoped run of ``python -m course_tools.grade --jobs 2`` grades every attack, two
honest submissions and the exercise stub, with an ``LMS_API_TOKEN`` in the grader's environment,
an earlier batch stored inside this clone and a fake credentials file in a hidden folder. Every
attack must score no more than the stub, leave the honest submissions' scores and files, the
instructor's files and the installation as they were, leave no process behind, leak neither the
token nor the credentials, stay within the per-submission limits it counts, and the batch must end
within its limits. The isolation the attacks meet needs bubblewrap (``make test`` installs it where
it can); without it the tests that need it are skipped, saying so, and the attacks that would
really read the clone, rewrite a classmate's notebook or this checkout (the grader's checks.py, the
quiz key), fill the host's /dev/shm or leave processes behind are left out of the batch: the
fallback sandbox cannot stop them. Likewise the fork bomb and the 4.5 GiB of children run only
where each submission gets a cgroup (root, or a delegated cgroup v2).

A second, small batch runs the grader itself as ``nobody`` (no cgroup can be made then): the
honest notebook still scores, the environment attack sees no token, and the level says that the
rlimits alone bound a submission.
"""

import csv
import hashlib
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
import reachable
from attacks import ANSWER_ZEROS, ATTACKS, COUNTED, MARKER, ZEROS

from course_tools.grading import checks
from course_tools.grading.sandbox import NOBODY, Limits, Sandbox, bound_folders, bubblewrap

ROOT = Path(__file__).resolve().parents[1]
LIMITS = {"--timeout": "30", "--cell-timeout": "10", "--notebook-timeout": "30"}
EX01 = {"exercise": "ex01_softmax_attention", "function": "softmax_attention"}
SECRET = "lms-token-course-attack-5821"  # the grader's LMS_API_TOKEN
CREDENTIALS = "aws_secret_access_key = course-attack-credentials-2718"  # in a hidden folder
CGROUP = Sandbox(Path(os.devnull)).cgroup[0]
needs_bubblewrap = pytest.mark.skipif(bubblewrap() is None, reason="bubblewrap is not available here: the "
                                      "fallback sandbox cannot hide files, the network or detached processes")
HARMFUL_WITHOUT_BUBBLEWRAP = {"classmates.ipynb", "edit_installation.ipynb", "orphans.ipynb", "clone_git.ipynb",
                              "earlier_batch.ipynb", "shm_fill.ipynb"}
HARMFUL_WITHOUT_CGROUP = {"fork_bomb.ipynb", "memory_children.ipynb"}  # 1,500 processes, 4.5 GiB on the host
RUN = {name: cells for name, cells in ATTACKS.items()  # the attacks this batch grades
       if (bubblewrap() is not None or name not in HARMFUL_WITHOUT_BUBBLEWRAP)
       and (CGROUP is not None or name not in HARMFUL_WITHOUT_CGROUP)}


def submitted(attack: str) -> str:
    """The file an attack is handed in as: the grader reads the exercise from the name."""
    return attack.replace(".ipynb", "_ex01.ipynb")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def attack_notebook(cells: list[str], places: dict[str, str]) -> nbformat.NotebookNode:
    sources = [string.Template(source.strip()).safe_substitute(places) for source in cells]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    notebook.metadata["course_lib"] = EX01
    return notebook


def copy_notebook(source: Path, target: Path) -> None:
    nbformat.write(nbformat.read(source, as_version=4), target)


def grade_command(folder: Path, out: Path) -> list[str]:
    unsafe = ["--unsafe-no-sandbox"] if bubblewrap() is None else []  # the attacks that need one are left out
    return [sys.executable, "-m", "course_tools.grade", str(folder), "--csv", str(out / "scores.csv"),
            "--out", str(out / "reports"), "--jobs", "2", *(x for pair in LIMITS.items() for x in pair), *unsafe]


def read_rows(out: Path) -> dict[str, dict[str, str]]:
    """The class CSV's rows by file name, an attack's under the attack's name."""
    names = {submitted(attack): attack for attack in ATTACKS}
    with (out / "scores.csv").open(newline="", encoding="utf-8") as file:
        return {names.get(Path(row["file"]).name, Path(row["file"]).name): row for row in csv.DictReader(file)}


def everything_written(run: subprocess.CompletedProcess, out: Path) -> str:
    """What the batch printed and every file it wrote, as one text."""
    files = [path.read_bytes().decode(errors="replace") for path in sorted(out.rglob("*")) if path.is_file()]
    return "\n".join([run.stdout, run.stderr, *files])


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder, out = tmp_path_factory.mktemp("class"), tmp_path_factory.mktemp("instructor")
    submissions = ROOT / "submissions"  # an earlier batch kept in the clone, as an instructor might
    submissions.mkdir(exist_ok=True)
    earlier = Path(tempfile.mkdtemp(prefix="week1-", dir=submissions))
    (folder / ".aws").mkdir()
    (folder / ".aws" / "credentials").write_text(f"[default]\n{CREDENTIALS}\n")
    places = {"repo": str(ROOT), "earlier": str(earlier), "credentials": str(folder / ".aws" / "credentials")}
    try:
        copy_notebook(ROOT / "solutions" / "ex01_softmax_attention.ipynb", folder / "honest_ex01.ipynb")
        copy_notebook(ROOT / "solutions" / "ex01_softmax_attention.ipynb", earlier / "classmate_ex01.ipynb")
        copy_notebook(ROOT / "solutions" / "ex11_delta_rule.ipynb", folder / "honest_ex11.ipynb")
        copy_notebook(ROOT / "exercises" / "ex01_softmax_attention.ipynb", folder / "stub_ex01.ipynb")
        nbformat.write(attack_notebook(["import torch", ZEROS], {}), folder / "zeros_ex01.ipynb")  # honest, and wrong
        for name, cells in RUN.items():
            nbformat.write(attack_notebook(cells, places), folder / submitted(name))
        protected = [folder / "honest_ex01.ipynb", folder / "honest_ex11.ipynb", Path(checks.__file__),
                     ROOT / "solutions" / "quiz_key.json", earlier / "classmate_ex01.ipynb"]
        before = {path: digest(path) for path in protected}
        started = time.monotonic()
        run = subprocess.run(grade_command(folder, out), capture_output=True, text=True, timeout=900,
                             env={**os.environ, "LMS_API_TOKEN": SECRET})
        seconds = time.monotonic() - started
        written = (out / "scores.csv").read_bytes()
        time.sleep(6)  # an orphan that survived would write the CSV after 4 s
        yield {"run": run, "rows": read_rows(out), "seconds": seconds, "written": written, "out": out,
               "before": before, "all": everything_written(run, out)}
    finally:
        shutil.rmtree(earlier, ignore_errors=True)
        try:
            submissions.rmdir()  # when no other run (or instructor) keeps something there
        except OSError:
            pass


def feedback(batch: dict, attack: str) -> str:
    """The attack's reason in the class CSV and its per-test feedback."""
    with (batch["out"] / "reports" / "tests.csv").open(newline="", encoding="utf-8") as file:
        tests = " ".join(row["feedback"] for row in csv.DictReader(file) if row["file"].endswith(submitted(attack)))
    return batch["rows"][attack]["reason"] + " " + tests


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
    ("log_symlink.ipynb", "exit code 3"),
])
def test_the_reason_names_what_stopped_the_attack(batch, attack, says):
    assert says in feedback(batch, attack)


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
@pytest.mark.parametrize("attack", ["clone_git.ipynb", "earlier_batch.ipynb"])
def test_the_clone_its_history_and_earlier_batches_are_out_of_sight(batch, attack):
    """git show HEAD:solutions/..., .git/config, the clone's root listing, submissions/ in the clone: nothing read."""
    assert "read nothing" in feedback(batch, attack), feedback(batch, attack)


def test_the_log_never_carries_a_hidden_file(batch):
    assert CREDENTIALS not in batch["all"] and "course-attack-credentials" not in batch["all"]


def test_the_grader_environment_stays_out_and_the_submission_is_not_root(batch):
    said = feedback(batch, "environment.ipynb")
    uid = re.search(r"uid=(\d+)", said)
    assert uid and int(uid[1]) != 0, said
    assert "LMS_API_TOKEN" not in said and SECRET not in batch["all"], said


@pytest.mark.parametrize("attack", sorted(COUNTED))
def test_what_an_attack_got_stays_within_the_per_submission_limits(batch, attack):
    if attack not in RUN:
        pytest.skip(f"{attack} is not graded here: it needs bubblewrap and a cgroup per submission")
    said = feedback(batch, attack)
    got = re.search(rf"{re.escape(COUNTED[attack])} got (\d+)", said)
    assert got, said
    limits, got = Limits(), int(got[1])
    bound = {"fork_bomb.ipynb": limits.tree_tasks, "memory_children.ipynb": limits.tree_memory_bytes // (3 << 29),
             "disk_fill.ipynb": limits.folder_bytes >> 20, "shm_fill.ipynb": limits.shm_bytes >> 20}[attack]
    assert 0 < got <= bound, f"{attack}: {said}"  # above 0: the attack did run
    if attack == "memory_children.ipynb":
        assert got * (3 << 29) < limits.tree_memory_bytes


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
    """28 notebooks, 2 at a time: the endless one is cut at 30 s, the rest take seconds each."""
    assert batch["seconds"] < 300, batch["seconds"]


@pytest.fixture(scope="module")
def batch_as_nobody(tmp_path_factory):
    if reachable.available() or bubblewrap() is None:
        pytest.skip(f"grading as nobody {reachable.available() or 'needs bubblewrap'}")
    home = Path(tempfile.mkdtemp(prefix="course-grade-nobody-"))  # where nobody may read, and write out/
    try:
        home.chmod(0o755)
        folder, out = home / "class", home / "instructor"
        folder.mkdir()
        out.mkdir()
        copy_notebook(ROOT / "solutions" / "ex01_softmax_attention.ipynb", folder / "honest_ex01.ipynb")
        nbformat.write(attack_notebook(ATTACKS["environment.ipynb"], {}), folder / submitted("environment.ipynb"))
        for path in (home, out):
            os.chown(path, *NOBODY)
        folders = [*bound_folders().values(), str(Path(sys.executable).resolve().parent), str(ROOT)]
        environment = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "LMS_API_TOKEN": SECRET}
        command = reachable.command(folders, NOBODY, tmp_path_factory.mktemp("stage"), environment,
                                    grade_command(folder, out), as_user=True)
        run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=home)
        yield {"run": run, "rows": read_rows(out) if (out / "scores.csv").exists() else {},
               "all": everything_written(run, out), "out": out}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_grader_running_as_nobody_grades_without_cgroups_and_says_so(batch_as_nobody):
    run, rows = batch_as_nobody["run"], batch_as_nobody["rows"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert rows["honest_ex01.ipynb"]["score"] == "10", rows
    level = next(line for line in run.stderr.splitlines() if line.startswith("sandbox:"))
    assert "bubblewrap" in level and "the grader's user" in level and "no per-submission memory" in level, level
    said = feedback(batch_as_nobody, "environment.ipynb")
    assert f"uid={NOBODY[0]} " in said, said
    assert SECRET not in batch_as_nobody["all"] and "LMS_API_TOKEN" not in said, said
