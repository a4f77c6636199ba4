"""course_tools.exercise_builder: marker transformation, and exercises/ in sync with solutions/."""

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_tools.exercise_builder import MarkerError, build, build_exercise, main, out_of_sync, strip_solutions
from course_tools.grading import load_exercise

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"

SOLVED = '''def f(x):
    """Double x."""
    # BEGIN SOLUTION: return twice "x"
    y = 2 * x
    return y
    # END SOLUTION

print(f)'''


def strip(source: str) -> str:
    return strip_solutions(source, exercise_id="ex99_demo", where="demo.ipynb, cell 2")


def test_region_becomes_stub_at_marker_indentation_with_hint():
    assert strip(SOLVED) == (
        'def f(x):\n    """Double x."""\n    raise NotImplementedError("ex99_demo: return twice \\"x\\"")\n\nprint(f)'
    )


def test_stub_is_valid_python_that_raises_the_hint():
    namespace = {}
    exec(strip(SOLVED), namespace)
    with pytest.raises(NotImplementedError, match=r'^ex99_demo: return twice "x"$'):
        namespace["f"](1)


def test_several_regions_and_top_level_region():
    source = "# BEGIN SOLUTION: a\na = 1\n# END SOLUTION\nb = 2\n  # BEGIN SOLUTION: c\n  c = 3\n  # END SOLUTION"
    assert strip(source) == (
        'raise NotImplementedError("ex99_demo: a")\nb = 2\n  raise NotImplementedError("ex99_demo: c")'
    )


def test_cell_without_markers_is_unchanged():
    assert strip("x = 1\n# a comment about solutions\n") == "x = 1\n# a comment about solutions\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("# BEGIN SOLUTION: a\nx = 1", "line 1 has no END SOLUTION"),
        ("x = 1\n# END SOLUTION", "END SOLUTION on line 2 without a BEGIN SOLUTION"),
        (
            "# BEGIN SOLUTION: a\n# BEGIN SOLUTION: b\n# END SOLUTION\n# END SOLUTION",
            "line 2 inside the region opened on line 1",
        ),
        ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION", "needs a hint"),
        ("# BEGIN SOLUTION:   \nx = 1\n# END SOLUTION", "needs a hint"),
        ("# BEGIN SOLUTION: a\nx = 1\n# END SOLUTION here", "takes no text"),
    ],
    ids=["unclosed", "stray-end", "nested", "no-hint", "empty-hint", "text-after-end"],
)
def test_bad_markers_are_rejected_naming_notebook_and_cell(source, message):
    with pytest.raises(MarkerError, match=message) as error:
        strip(source)
    assert str(error.value).startswith("demo.ipynb, cell 2: ")


def demo_notebook(code: str = SOLVED) -> nbformat.NotebookNode:
    cells = [new_markdown_cell("intro"), new_code_cell(code), new_markdown_cell("answer key")]
    cells[1].outputs = [nbformat.v4.new_output("stream", text="<function f>\n")]
    cells[1].execution_count = 3
    cells[2].metadata["tags"] = ["solution-only"]
    notebook = new_notebook(cells=cells)
    notebook.metadata["course_lib"] = {"exercise": "ex99_demo", "function": "f"}
    return notebook


def test_build_exercise_clears_outputs_drops_solution_only_cells_and_keeps_metadata():
    exercise = build_exercise(demo_notebook(), name="demo.ipynb")
    assert [cell.cell_type for cell in exercise.cells] == ["markdown", "code"]
    assert exercise.cells[1].outputs == [] and exercise.cells[1].execution_count is None
    assert "raise NotImplementedError" in exercise.cells[1].source
    assert exercise.metadata["course_lib"] == {"exercise": "ex99_demo", "function": "f"}


def test_build_exercise_names_the_cell_with_bad_markers():
    with pytest.raises(MarkerError, match=r"^demo.ipynb, cell 2: .*no END SOLUTION"):
        build_exercise(demo_notebook("# BEGIN SOLUTION: a\nx = 1"), name="demo.ipynb")


def test_build_exercise_needs_the_exercise_id():
    notebook = demo_notebook()
    del notebook.metadata["course_lib"]
    with pytest.raises(MarkerError, match="lacks course_lib.exercise"):
        build_exercise(notebook, name="demo.ipynb")


def test_out_of_sync_reports_missing_edited_and_stale_exercises(tmp_path):
    source, dest = tmp_path / "solutions", tmp_path / "exercises"
    source.mkdir()
    nbformat.write(demo_notebook(), source / "ex99_demo.ipynb")
    assert out_of_sync(source, dest) == [f"{dest / 'ex99_demo.ipynb'} is missing"]
    assert build(source, dest) == [dest / "ex99_demo.ipynb"]
    assert out_of_sync(source, dest) == []
    edited = nbformat.read(dest / "ex99_demo.ipynb", as_version=4)
    edited.cells[1].source += "\n# an edit by hand"
    nbformat.write(edited, dest / "ex99_demo.ipynb")
    nbformat.write(edited, dest / "ex98_orphan.ipynb")
    assert out_of_sync(source, dest) == [
        f"{dest / 'ex99_demo.ipynb'} differs from what {source / 'ex99_demo.ipynb'} generates",
        f"{dest / 'ex98_orphan.ipynb'} has no solution in {source}",
    ]
    assert main(["--source", str(source), "--dest", str(dest), "--check"]) == 1
    assert main(["--source", str(source), "--dest", str(dest)]) == 0
    assert out_of_sync(source, dest) == [f"{dest / 'ex98_orphan.ipynb'} has no solution in {source}"]


def test_out_of_sync_reports_an_exercise_committed_with_outputs(tmp_path):
    source, dest = tmp_path / "solutions", tmp_path / "exercises"
    source.mkdir()
    nbformat.write(demo_notebook(), source / "ex99_demo.ipynb")
    build(source, dest)
    executed = nbformat.read(dest / "ex99_demo.ipynb", as_version=4)
    executed.cells[1].outputs = [nbformat.v4.new_output("stream", text="NotImplementedError\n")]
    nbformat.write(executed, dest / "ex99_demo.ipynb")
    assert out_of_sync(source, dest) == [
        f"{dest / 'ex99_demo.ipynb'} has outputs; exercises are committed without them"
    ]


def test_committed_exercises_match_the_solutions():
    problems = out_of_sync(SOLUTIONS, EXERCISES)
    assert problems == [], "exercises/ is out of date; run `make exercises`:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")), ids=lambda path: path.stem)
def test_solution_metadata_names_a_registered_exercise_and_its_function(path):
    meta = nbformat.read(path, as_version=4).metadata["course_lib"]
    assert meta["exercise"] == path.stem
    assert meta["function"] == load_exercise(meta["exercise"]).function_name


def test_a_long_hint_becomes_string_literals_on_lines_of_at_most_100_characters():
    hint = "compute the blackboard S = φ(K)ᵀV and the normaliser z, " * 4 + 'then "divide"'
    source = f"def f(x):\n    # BEGIN SOLUTION: {hint}\n    return x\n    # END SOLUTION"
    stripped = strip(source)
    assert all(len(line) <= 100 for line in stripped.splitlines())
    assert stripped.splitlines()[1] == "    raise NotImplementedError("
    namespace = {}
    exec(stripped, namespace)
    with pytest.raises(NotImplementedError) as error:
        namespace["f"](1)
    assert str(error.value) == f"ex99_demo: {hint.strip()}"
