"""Every notebook starts with its two generated header cells: badges that open this very notebook on Colab
and Binder (from pyproject's one repository URL), its time and prerequisites from the metadata, and a
Colab set-up cell that does nothing elsewhere; writing them twice changes nothing."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools.workshop import headers, lessons

ROOT = Path(__file__).resolve().parents[1]


def test_every_notebook_has_its_current_header():
    assert not headers.stale(ROOT), "stale headers: run python -m course_tools.workshop headers"


@pytest.fixture
def course(tmp_path):
    for folder in ("notebooks", "exercises", "solutions"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_apply_writes_missing_headers_once(course):
    path = course / "notebooks" / "01_the_bottleneck.ipynb"
    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [cell for cell in notebook.cells if headers.TAG not in cell.metadata.get("tags", [])]
    nbformat.write(notebook, path)
    assert headers.stale(course) == [path]
    assert headers.apply(course) == [path]
    before = path.read_bytes()
    assert headers.apply(course) == [] and path.read_bytes() == before, "a second run changes nothing"
    cells = nbformat.read(path, as_version=4).cells
    assert [c.cell_type for c in cells[:2]] == ["markdown", "code"] and cells[2].source.startswith("# 01 ·")


def test_the_header_says_the_time_and_prerequisites_from_the_metadata():
    lesson = lessons.load_lessons(ROOT)["05_the_ledger"]
    text = nbformat.read(ROOT / "notebooks" / "05_the_ledger.ipynb", as_version=4).cells[0].source
    assert f"**Time:** {lesson.teaching_minutes} min (+ exercises, {lesson.exercise_minutes} min)" in text
    for stem in lesson.meta["prerequisites"]:
        assert f"]({stem}.ipynb)" in text
    exercise = nbformat.read(ROOT / "exercises" / "ex06_chunked_causal.ipynb", as_version=4).cells[0].source
    assert "**After:** [05 · " in exercise and "](../notebooks/05_the_ledger.ipynb)" in exercise


def test_the_badges_open_this_notebook_from_the_one_url():
    url = headers.repository_url(ROOT).removeprefix("https://github.com/")
    text = nbformat.read(ROOT / "exercises" / "ex06_chunked_causal.ipynb", as_version=4).cells[0].source
    assert f"colab.research.google.com/github/{url}/blob/main/exercises/ex06_chunked_causal.ipynb)" in text
    assert f"mybinder.org/v2/gh/{url}/main?labpath=exercises%2Fex06_chunked_causal.ipynb)" in text


def test_a_repository_url_that_is_not_github_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project.urls]\nRepository = "https://example.org/x"\n')
    with pytest.raises(ValueError, match="Repository must be a https://github.com/OWNER/NAME URL"):
        headers.repository_url(tmp_path)


def run_setup_cell(tmp_path, colab: bool) -> subprocess.CompletedProcess:
    """The Colab cell of notebook 00, with pip and google.colab replaced by recorders."""
    source = nbformat.read(ROOT / "notebooks" / "00_start_here.ipynb", as_version=4).cells[1].source
    fake = tmp_path / "fake"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text(
        "class output:\n    @staticmethod\n    def enable_custom_widget_manager():\n        print('widgets on')\n")
    script = tmp_path / "cell.py"
    script.write_text("import subprocess\nsubprocess.run = lambda args, check: print('ran', *args[1:])\n" + source)
    env = {k: v for k, v in os.environ.items() if k != "COLAB_RELEASE_TAG"} | {"PYTHONPATH": str(fake)}
    if colab:
        env["COLAB_RELEASE_TAG"] = "release-colab-test"
    return subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, check=True)


def test_the_setup_cell_does_nothing_outside_colab(tmp_path):
    assert run_setup_cell(tmp_path, colab=False).stdout == ""


def test_the_setup_cell_installs_the_course_and_the_widgets_on_colab(tmp_path):
    out = run_setup_cell(tmp_path, colab=True).stdout
    url = headers.repository_url(ROOT)
    assert f"ran -m pip install -q git+{url}" in out and "widgets on" in out


def test_the_header_cells_are_skipped_in_slides_and_carry_no_output():
    for path in headers.notebook_paths(ROOT):
        for cell in json.loads(path.read_text())["cells"][:2]:
            assert headers.TAG in cell["metadata"]["tags"], path
            assert cell["metadata"]["slideshow"]["slide_type"] == "skip", path
            assert not cell.get("outputs"), path
