"""python -m course_tools.grade: batch grading of submitted notebooks, on copies of the committed ones.

One module-scoped run grades a folder of nine submissions, two at a time (``--jobs 2``: each
notebook in its own sandbox); the tests read its table, CSV and reports. The exercise of each is
the id in its file name; a notebook whose name holds none is not graded, whatever its metadata
says. Where bubblewrap cannot run, the batch runs with ``--unsafe-no-sandbox`` (the command
refuses otherwise, tested below). Files that are not notebooks, and text a submission sends to
the instructor, are tested in ``test_submission_files.py``.
"""

import copy
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import course_tools.grade as grade_command
from course_tools.grade import CONTAINER, find_notebooks, main
from course_tools.grading.notebooks import NotebookGrade
from course_tools.grading.sandbox import bubblewrap

ROOT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT = 10  # seconds; the hanging cell in gina_ex01.ipynb is interrupted after this
SANDBOX = [] if bubblewrap() else ["--unsafe-no-sandbox"]  # without bubblewrap the command refuses to run


def read(folder: str, exercise_id: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / folder / f"{exercise_id}.ipynb", as_version=4)


def function_cell(notebook: nbformat.NotebookNode) -> int:
    name = notebook.metadata["course_lib"]["function"]
    return next(i for i, cell in enumerate(notebook.cells) if f"def {name}(" in cell.source)


def submissions(folder: Path) -> None:
    """Write the test submissions: good, stub, broken, hanging, unidentifiable, identified only by metadata."""
    ex01, ex02 = read("solutions", "ex01_softmax_attention"), read("solutions", "ex02_linear_attention")
    nameless = copy.deepcopy(ex02)
    del nameless.metadata["course_lib"]  # identified by its file name instead
    syntax_error = copy.deepcopy(ex01)
    syntax_error.cells[function_cell(ex01)].source = "def softmax_attention(q, k, v, causal=False)\n    return q"
    deleted = copy.deepcopy(ex01)
    del deleted.cells[function_cell(ex01)]
    hanging = copy.deepcopy(ex01)
    hanging.cells.insert(-1, nbformat.v4.new_code_cell("while True:\n    pass"))
    unknown = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('my notes')")])
    notebooks = {
        "alice_ex01.ipynb": ex01,
        "bob_ex01.ipynb": read("exercises", "ex01_softmax_attention"),
        "carol_ex02_linear_attention.ipynb": nameless,
        "dan_ex02.ipynb": read("exercises", "ex02_linear_attention"),
        "erin_ex01.ipynb": syntax_error,
        "frank_ex01.ipynb": deleted,
        "gina_ex01.ipynb": hanging,
        "hal.ipynb": ex01,  # a correct answer whose name holds no id: its metadata is not trusted
        "notes/readme.ipynb": unknown,
        ".ipynb_checkpoints/alice_ex01-checkpoint.ipynb": ex01,
    }
    for name, notebook in notebooks.items():
        (folder / name).parent.mkdir(exist_ok=True)
        nbformat.write(notebook, folder / name)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, dict[str, str]], Path]:
    folder = tmp_path_factory.mktemp("submissions")
    submissions(folder)
    scores = folder.parent / "scores.csv"
    command = [
        sys.executable,
        "-m",
        "course_tools.grade",
        str(folder),
        "--csv",
        str(scores),
        "--cell-timeout",
        str(CELL_TIMEOUT),
        "--out",
        str(folder.parent / "reports"),
        "--jobs",
        "2",
        *SANDBOX,
    ]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    with scores.open(newline="", encoding="utf-8") as file:
        rows = {row["file"]: row for row in csv.DictReader(file)}  # the path below the folder given
    return run, rows, folder.parent / "reports"


def score(rows: dict, name: str) -> tuple[str, str, str]:
    return rows[name]["exercise"], rows[name]["score"], rows[name]["max"]


def test_every_notebook_gets_a_row_and_checkpoints_are_skipped(graded):
    run, rows, _ = graded
    assert run.returncode == 0, run.stderr
    assert sorted(rows) == [
        "alice_ex01.ipynb", "bob_ex01.ipynb", "carol_ex02_linear_attention.ipynb", "dan_ex02.ipynb",
        "erin_ex01.ipynb", "frank_ex01.ipynb", "gina_ex01.ipynb", "hal.ipynb", "notes/readme.ipynb",
    ]  # fmt: skip
    assert list(next(iter(rows.values()))) == ["file", "exercise", "score", "max", "status", "reason", "review"]
    assert {row["review"] for row in rows.values()} == {""}  # honest work, right or wrong, is not flagged


def test_solutions_score_full_marks(graded):
    _, rows, _ = graded
    assert score(rows, "alice_ex01.ipynb") == ("ex01_softmax_attention", "10", "10")
    assert score(rows, "carol_ex02_linear_attention.ipynb") == ("ex02_linear_attention", "10", "10")  # from its name
    assert rows["alice_ex01.ipynb"]["reason"] == rows["carol_ex02_linear_attention.ipynb"]["reason"] == ""
    assert rows["alice_ex01.ipynb"]["status"] == "graded"


@pytest.mark.parametrize(
    ("name", "exercise_id"), [("bob_ex01.ipynb", "ex01_softmax_attention"), ("dan_ex02.ipynb", "ex02_linear_attention")]
)
def test_exercise_stubs_score_zero(graded, name, exercise_id):
    _, rows, _ = graded
    assert score(rows, name) == (exercise_id, "0", "10")
    assert rows[name]["status"] == "graded"
    assert rows[name]["reason"].startswith("failed shape_and_dtype, values, ")
    assert f"raised NotImplementedError: {exercise_id}: " in rows[name]["reason"]


@pytest.mark.parametrize(("name", "reason"),
                         [("erin_ex01.ipynb", "; cell {} raised SyntaxError"), ("frank_ex01.ipynb", "")])
def test_broken_notebook_scores_zero_with_the_reason(graded, name, reason):
    _, rows, _ = graded
    reason = reason.format(function_cell(read("solutions", "ex01_softmax_attention")) + 1)  # the grader counts from 1
    assert score(rows, name) == ("ex01_softmax_attention", "0", "10")
    assert rows[name]["status"] == "not graded"
    loading = "the process running your function could not load it: LookupError: "
    assert rows[name]["reason"].startswith(f"{loading}the notebook defines no softmax_attention{reason}")


def test_hanging_cell_is_interrupted_and_the_function_still_graded(graded):
    _, rows, _ = graded
    assert score(rows, "gina_ex01.ipynb") == ("ex01_softmax_attention", "10", "10")
    hanging = len(read("solutions", "ex01_softmax_attention").cells)  # inserted before the last: the last's number
    assert rows["gina_ex01.ipynb"]["reason"] == f"cell {hanging} ran past {CELL_TIMEOUT} s and was stopped"


def test_unidentifiable_notebook_scores_zero_without_running(graded):
    _, rows, _ = graded
    assert score(rows, "notes/readme.ipynb") == ("?", "0", "0")
    assert rows["notes/readme.ipynb"]["status"] == "not graded"
    assert rows["notes/readme.ipynb"]["reason"] == ("cannot tell the exercise: no exercise id (ex00 … ex13) in the "
                                                    "file name and no --exercise")


def test_metadata_alone_does_not_name_the_exercise(graded):
    """hal.ipynb is a correct ex01 whose metadata says so: without the id in its name it is not run."""
    _, rows, _ = graded
    assert score(rows, "hal.ipynb") == ("?", "0", "0") and rows["hal.ipynb"]["status"] == "not graded"
    assert rows["hal.ipynb"]["reason"].endswith(
        "no --exercise; its metadata says ex01_softmax_attention, which the grader does not trust")


def test_printed_table_matches_the_csv(graded):
    run, rows, _ = graded
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["file", "exercise", "score", "max", "status", "reason"]
    assert len(lines) == 1 + len(rows)
    for line, row in zip(lines[1:], sorted(rows.values(), key=lambda row: row["file"]), strict=True):
        assert line.split()[:4] == [row["file"], row["exercise"], row["score"], row["max"]]
    assert "sandbox: bubblewrap" in run.stderr or "sandbox: NONE (--unsafe-no-sandbox)" in run.stderr


def test_reports_hold_every_test_a_feedback_file_per_notebook_and_a_summary(graded):
    _, _, reports = graded
    with (reports / "tests.csv").open(newline="", encoding="utf-8") as file:
        tests = list(csv.DictReader(file))
    alice = [t for t in tests if t["file"] == "alice_ex01.ipynb"]
    assert len(alice) == 6 and {t["passed"] for t in alice} == {"true"}
    assert sum(int(t["points"]) for t in tests if t["file"] == "bob_ex01.ipynb") == 0
    assert (reports / "feedback" / "alice_ex01.md").read_text().count("| ✓ ") == 6
    assert "**Score: 0/10** (graded)" in (reports / "feedback" / "bob_ex01.md").read_text()
    assert (reports / "feedback" / "notes__readme.md").exists()
    summary = (reports / "summary.md").read_text()
    assert "## ex01_softmax_attention" in summary and "| values | 2/5 |" in summary
    assert summary.splitlines()[2].startswith("Sandbox: ") and "## Needs review" not in summary
    assert (reports / "scores.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_paths_are_usage_errors(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a notebook")
    with pytest.raises(ValueError, match="PATH must be a notebook"):
        find_notebooks([tmp_path / "notes.txt"])
    for argv in ([str(tmp_path / "notes.txt")], [str(tmp_path)]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    assert "no notebooks found in" in capsys.readouterr().err


def test_jobs_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path), "--jobs", "0"])
    assert exit_.value.code == 2 and "--jobs must be a positive int, got 0" in capsys.readouterr().err


def test_summary_groups_mistakes_without_blanking_the_numbers_of_the_hint():
    """"elu(x) + 1" stays as written; only the numbers two students measured differently become "…"."""
    from course_tools.grading import GradeResult, TestResult
    from course_tools.grading.class_report import summary_markdown
    from course_tools.grading.notebooks import NotebookGrade

    def graded_with(feedback: str, name: str) -> NotebookGrade:
        tests = [TestResult("values", 0, 3, False, feedback, 0.1)]
        return NotebookGrade(Path(f"{name}.ipynb"), "ex02_linear_attention", GradeResult("ex02_linear_attention", tests),
                             "graded", "")

    hint = "expected out_i = φ(q_i)ᵀ(φ(K)ᵀV) / (φ(q_i)ᵀ Σ_j φ(k_j)) with φ(x) = elu(x) + 1"
    grades = [graded_with(f"output differs from the reference: max |error| {e} at index (2, 1); {hint}", name)
              for e, name in ((0.37, "ann"), (0.52, "bob"))]
    grades.append(graded_with("output differs from the reference: max |error| 0.81 at index (2, 1)", "cy"))
    summary = summary_markdown(grades)
    assert f"2/3: {hint}" in summary and "elu(x) + 1" in summary and "#" not in summary.split("| values |")[1]
    assert "1/3: output differs from the reference: max \\|error\\| 0.81 at index (2, 1)" in summary


# --- the exercise comes from the instructor or the file name ----------------------------------


def test_the_instructors_exercise_applies_to_every_notebook(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(grade_command, "sandbox_problem", lambda: None)  # nothing here runs a sandbox
    folder = tmp_path / "ex01"
    folder.mkdir()
    for name in ("unnamed.ipynb", "alice_ex02.ipynb"):
        (folder / name).write_text("{not json")
    assert main([str(folder), "--exercise", "ex01", "--csv", str(tmp_path / "scores.csv")]) == 0
    with (tmp_path / "scores.csv").open(newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    assert [(row["file"], row["exercise"], row["max"]) for row in rows] == [
        ("alice_ex02.ipynb", "ex01_softmax_attention", "10"), ("unnamed.ipynb", "ex01_softmax_attention", "10")]
    with pytest.raises(SystemExit) as exit_:
        main([str(folder), "--exercise", "ex99"])
    assert exit_.value.code == 2 and "known exercises: ex00_running_mean, ex01_softmax_attention, " in capsys.readouterr().err


def test_a_mismatch_is_reported_never_obeyed():
    from course_tools.grading.notebooks import identify, mismatch
    from course_tools.grading.registry import load_exercise

    ex01, ex02 = read("solutions", "ex01_softmax_attention"), read("solutions", "ex02_linear_attention")
    exercise, source = identify("mallory_ex01.ipynb", None, ex02)
    assert (exercise.id, source) == ("ex01_softmax_attention", "from the file name")
    assert mismatch("mallory_ex01.ipynb", ex02, exercise, source) == (
        "metadata says ex02_linear_attention and names the function linear_attention, graded as "
        "ex01_softmax_attention (from the file name, function softmax_attention)")
    assert mismatch("alice_ex01.ipynb", ex01, exercise, source) == ""
    given = load_exercise("ex02_linear_attention")
    assert identify("alice_ex01.ipynb", "ex02", ex01) == (given, "from --exercise")
    assert mismatch("alice_ex01.ipynb", ex01, given, "from --exercise").startswith(
        "the file name says ex01_softmax_attention and metadata says ex01_softmax_attention and names the function "
        "softmax_attention, graded as ex02_linear_attention (from --exercise")
    assert identify("ex01_to_ex02.ipynb", None, ex01)[1] == ("cannot tell the exercise: the file name holds "
        "ex01_softmax_attention and ex02_linear_attention; its metadata says ex01_softmax_attention, which the grader "
        "does not trust")  # fmt: skip


@pytest.mark.parametrize(("name", "found"), [
    ("alice_ex01.ipynb", ["ex01_softmax_attention"]), ("ex07_rope.ipynb", ["ex07_rope"]),
    ("HW-EX03 final.ipynb", ["ex03_positive_random_features"]), ("bob.ipynb", []), ("index01.ipynb", []),
    ("alex011.ipynb", []), ("ex99.ipynb", []),
    ("ex01_then_ex02.ipynb", ["ex01_softmax_attention", "ex02_linear_attention"]),
])
def test_the_exercise_id_in_a_file_name_is_its_number_as_a_word_part(name, found):
    from course_tools.grading.notebooks import exercises_in_name

    assert exercises_in_name(name) == found


# --- safe by default: no bubblewrap, no batch -----------------------------------------------


FAILING_BWRAP = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"


@pytest.mark.parametrize("bwrap", [None, FAILING_BWRAP], ids=["not installed", "no namespaces"])
def test_without_a_working_bubblewrap_the_batch_refuses_and_says_how_to_get_one(tmp_path, bwrap):
    path = tmp_path / "bin"
    path.mkdir()
    if bwrap:
        (path / "bwrap").write_text(bwrap)
        (path / "bwrap").chmod(0o755)
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copy(ROOT / "solutions" / "ex01_softmax_attention.ipynb", folder / "alice_ex01.ipynb")
    command = [sys.executable, "-m", "course_tools.grade", str(folder), "--csv", str(tmp_path / "scores.csv")]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PATH": str(path)})
    assert run.returncode == 2, run.stderr
    why = "No permissions to create new namespace" if bwrap else "bubblewrap is not installed (no bwrap on PATH)"
    assert "refusing to run the submissions without a sandbox: " in run.stderr and why in run.stderr
    assert "apt install bubblewrap" in run.stderr and CONTAINER in run.stderr and "--unsafe-no-sandbox" in run.stderr
    assert not (tmp_path / "scores.csv").exists()


def test_unsafe_no_sandbox_warns_loudly_and_the_summary_says_so(tmp_path, capsys):
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "alice_ex01.ipynb").write_text("{not json")  # nothing runs: the warning is what is tested
    assert main([str(folder), "--out", str(tmp_path / "reports"), "--unsafe-no-sandbox"]) == 0
    err = capsys.readouterr().err
    assert "# WARNING: --unsafe-no-sandbox: the submissions run WITHOUT a sandbox." in err
    assert err.count("#" * 80) == 2 and "sandbox: NONE (--unsafe-no-sandbox)" in err
    assert "Sandbox: NONE (--unsafe-no-sandbox): " in (tmp_path / "reports" / "summary.md").read_text()


def test_the_old_fallback_flag_is_gone_everywhere(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path), "--no-bubblewrap"])
    assert exit_.value.code == 2 and "unrecognized arguments: --no-bubblewrap" in capsys.readouterr().err
    texts = [ROOT / name for name in ("README.md", "Makefile", "CONTRIBUTING.md", "benchmarks/grade_a_class.py")]
    texts += [*(ROOT / "docs").glob("*.md"), *(ROOT / "course_tools").rglob("*.py"), *(ROOT / "tests").glob("*.py")]
    mentions = [str(path) for path in texts if "no-bubblewrap" in path.read_text() and path.name != "test_grade_cli.py"]
    assert not mentions, f"--no-bubblewrap is now --unsafe-no-sandbox: {mentions}"


@pytest.mark.parametrize("error", [OSError(12, "Cannot allocate memory"), MemoryError()],
                         ids=["OSError", "MemoryError"])
def test_a_notebook_whose_grading_raises_is_its_own_row_and_the_batch_finishes(tmp_path, monkeypatch, error):
    monkeypatch.setattr(grade_command, "sandbox_problem", lambda: None)
    folder = tmp_path / "submissions"
    folder.mkdir()
    for name in ("alice_ex01.ipynb", "bob_ex01.ipynb", "carol_ex01.ipynb"):
        (folder / name).write_text("{}")

    def grade_notebook(path: Path, **kwargs) -> NotebookGrade:
        if path.name == "bob_ex01.ipynb":
            raise error  # e.g. Popen could not start the sandbox
        return NotebookGrade(path, "ex01_softmax_attention", None, "graded", "", name=kwargs["name"])

    monkeypatch.setattr(grade_command, "grade_notebook", grade_notebook)
    assert main([str(folder), "--csv", str(tmp_path / "scores.csv"), "--jobs", "2"]) == 0
    with (tmp_path / "scores.csv").open(newline="", encoding="utf-8") as file:
        rows = {row["file"]: row for row in csv.DictReader(file)}
    assert rows["alice_ex01.ipynb"]["status"] == rows["carol_ex01.ipynb"]["status"] == "graded"
    bob = rows["bob_ex01.ipynb"]
    assert (bob["exercise"], bob["score"], bob["max"]) == ("ex01_softmax_attention", "0", "10")
    assert bob["status"] == "not graded"
    assert bob["reason"].startswith(f"the grader failed on this notebook: {type(error).__name__}")


# --- the grader's container ----------------------------------------------------------------------


def instructions(path: Path) -> list[tuple[str, str]]:
    """(instruction, arguments) of a Dockerfile: comments dropped, continued lines joined."""
    logical, current = [], ""
    for line in path.read_text().splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        current += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, rest = current.strip().partition(" ")
            logical.append((keyword.upper(), " ".join(rest.split())))
            current = ""
    return logical


def test_the_container_file_pins_python_installs_bubblewrap_and_the_repository_and_runs_the_grader():
    steps = instructions(ROOT / CONTAINER)
    froms = [arguments for keyword, arguments in steps if keyword == "FROM"]
    assert len(froms) == 1 and re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", froms[0]), froms
    runs = [arguments for keyword, arguments in steps if keyword == "RUN"]
    assert any("apt-get install" in run and re.search(r"\bbubblewrap\b", run) for run in runs), runs
    assert any("download.pytorch.org/whl/cpu" in run and "torch" in run for run in runs), "CPU torch"
    assert any(re.search(r"pip install .*-e \S*\[instructor\]", run) for run in runs), "the repository, editable"
    copied = [arguments.split()[:-1] for keyword, arguments in steps if keyword == "COPY"]
    for sources in copied:
        assert all((ROOT / source).exists() for source in sources if not source.startswith("--")), sources
    assert {"course_lib", "course_tools", "solutions", "pyproject.toml"} <= {s.rstrip("/") for c in copied for s in c}
    entrypoint = [arguments for keyword, arguments in steps if keyword == "ENTRYPOINT"]
    assert entrypoint == ['["python", "-m", "course_tools.grade"]']
    text = (ROOT / CONTAINER).read_text()
    assert "docker run" in text and "seccomp=unconfined" in text and "apparmor=unconfined" in text


def docker_missing() -> str | None:
    """Why this machine cannot build an image, or None when ``docker info`` answers."""
    if shutil.which("docker") is None:
        return "no docker command on PATH"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    return None if info.returncode == 0 else f"docker info failed: {(info.stderr or info.stdout).strip()[:200]}"


def test_the_container_builds_and_its_entrypoint_is_the_grader():
    why = docker_missing()
    if why:
        pytest.skip(f"cannot build {CONTAINER}: {why}")
    tag = "course-grader-test"
    build = subprocess.run(["docker", "build", "-f", CONTAINER, "-t", tag, "."], cwd=ROOT, capture_output=True,
                           text=True, timeout=3600)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run(["docker", "run", "--rm", tag, "--help"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "--unsafe-no-sandbox" in run.stdout, run.stderr[-2000:]
