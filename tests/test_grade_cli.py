"""python -m course_tools.grade: batch grading of submitted notebooks, on copies of the committed ones.

One module-scoped run grades a folder of eight submissions, two at a time (``--jobs 2``: each
notebook in its own sandbox); the tests read its table, CSV and reports.
"""

import copy
import csv
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools.grade import find_notebooks, main

ROOT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT = 10  # seconds; the hanging cell in gina.ipynb is interrupted after this


def read(folder: str, exercise_id: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / folder / f"{exercise_id}.ipynb", as_version=4)


def function_cell(notebook: nbformat.NotebookNode) -> int:
    name = notebook.metadata["course_lib"]["function"]
    return next(i for i, cell in enumerate(notebook.cells) if f"def {name}(" in cell.source)


def submissions(folder: Path) -> None:
    """Write the test submissions: good, stub, broken, hanging, unidentifiable."""
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
        "bob.ipynb": read("exercises", "ex01_softmax_attention"),
        "carol_ex02_linear_attention.ipynb": nameless,
        "dan.ipynb": read("exercises", "ex02_linear_attention"),
        "erin.ipynb": syntax_error,
        "frank.ipynb": deleted,
        "gina.ipynb": hanging,
        "notes/readme.ipynb": unknown,
        ".ipynb_checkpoints/alice_ex01-checkpoint.ipynb": ex01,
    }
    for name, notebook in notebooks.items():
        (folder / name).parent.mkdir(exist_ok=True)
        nbformat.write(notebook, folder / name)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, dict[str, str]]]:
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
    ]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    with scores.open(newline="", encoding="utf-8") as file:
        rows = {Path(row["file"]).relative_to(folder).as_posix(): row for row in csv.DictReader(file)}
    return run, rows


def score(rows: dict, name: str) -> tuple[str, str, str]:
    return rows[name]["exercise"], rows[name]["score"], rows[name]["max"]


def test_every_notebook_gets_a_row_and_checkpoints_are_skipped(graded):
    run, rows = graded
    assert run.returncode == 0, run.stderr
    assert sorted(rows) == [
        "alice_ex01.ipynb", "bob.ipynb", "carol_ex02_linear_attention.ipynb", "dan.ipynb",
        "erin.ipynb", "frank.ipynb", "gina.ipynb", "notes/readme.ipynb",
    ]  # fmt: skip
    assert list(next(iter(rows.values()))) == ["file", "exercise", "score", "max", "status", "reason"]


def test_solutions_score_full_marks(graded):
    _, rows = graded
    assert score(rows, "alice_ex01.ipynb") == ("ex01_softmax_attention", "10", "10")
    assert score(rows, "carol_ex02_linear_attention.ipynb") == ("ex02_linear_attention", "10", "10")  # from its name
    assert rows["alice_ex01.ipynb"]["reason"] == rows["carol_ex02_linear_attention.ipynb"]["reason"] == ""
    assert rows["alice_ex01.ipynb"]["status"] == "graded"


@pytest.mark.parametrize(
    ("name", "exercise_id"), [("bob.ipynb", "ex01_softmax_attention"), ("dan.ipynb", "ex02_linear_attention")]
)
def test_exercise_stubs_score_zero(graded, name, exercise_id):
    _, rows = graded
    assert score(rows, name) == (exercise_id, "0", "10")
    assert rows[name]["status"] == "graded"
    assert rows[name]["reason"].startswith("failed shape_and_dtype, values, ")
    assert f"raised NotImplementedError: {exercise_id}: " in rows[name]["reason"]


@pytest.mark.parametrize(("name", "reason"), [("erin.ipynb", "; cell 4 raised SyntaxError"), ("frank.ipynb", "")])
def test_broken_notebook_scores_zero_with_the_reason(graded, name, reason):
    _, rows = graded
    assert score(rows, name) == ("ex01_softmax_attention", "0", "10")
    assert rows[name]["status"] == "not graded"
    loading = "the process running your function could not load it: LookupError: "
    assert rows[name]["reason"].startswith(f"{loading}the notebook defines no softmax_attention{reason}")


def test_hanging_cell_is_interrupted_and_the_function_still_graded(graded):
    _, rows = graded
    assert score(rows, "gina.ipynb") == ("ex01_softmax_attention", "10", "10")
    assert rows["gina.ipynb"]["reason"] == f"cell 8 ran past {CELL_TIMEOUT} s and was stopped"


def test_unidentifiable_notebook_scores_zero_without_running(graded):
    _, rows = graded
    assert score(rows, "notes/readme.ipynb") == ("?", "0", "0")
    assert rows["notes/readme.ipynb"]["status"] == "not graded"
    assert rows["notes/readme.ipynb"]["reason"].startswith("cannot tell the exercise: no course_lib metadata")


def test_printed_table_matches_the_csv(graded):
    run, rows = graded
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["file", "exercise", "score", "max", "status", "reason"]
    assert len(lines) == 1 + len(rows)
    for line, row in zip(lines[1:], sorted(rows.values(), key=lambda row: row["file"]), strict=True):
        assert line.split()[:4] == [row["file"], row["exercise"], row["score"], row["max"]]
    assert "sandbox: bubblewrap" in run.stderr or "sandbox: fallback without bubblewrap" in run.stderr


def test_reports_hold_every_test_a_feedback_file_per_notebook_and_a_summary(graded):
    run, rows = graded
    reports = Path(rows["alice_ex01.ipynb"]["file"]).parents[1] / "reports"  # beside the submissions folder
    with (reports / "tests.csv").open(newline="", encoding="utf-8") as file:
        tests = list(csv.DictReader(file))
    alice = [t for t in tests if t["file"].endswith("alice_ex01.ipynb")]
    assert len(alice) == 6 and {t["passed"] for t in alice} == {"true"}
    assert sum(int(t["points"]) for t in tests if t["file"].endswith("bob.ipynb")) == 0
    assert (reports / "feedback" / "alice_ex01.md").read_text().count("| ✓ ") == 6
    assert "**Score: 0/10** (graded)" in (reports / "feedback" / "bob.md").read_text()
    summary = (reports / "summary.md").read_text()
    assert "## ex01_softmax_attention" in summary and "| values | 2/5 |" in summary
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
