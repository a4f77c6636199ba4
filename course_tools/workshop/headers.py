"""The two cells every notebook starts with, generated: badges and time, then Colab's set-up.

The first cell (Markdown) holds an *Open in Colab* and a *Binder* badge for this very notebook, both
built from the one repository URL in ``pyproject.toml`` (``[project.urls] Repository``), and the
notebook's time and what to read before it, from the lesson metadata (``lessons``) or, for an exercise
or a solution, from its ``course_lib`` block. The second (code) installs the course from the repository
and turns on Colab's widget manager when it runs on Colab (Colab sets ``COLAB_RELEASE_TAG``), and does
nothing anywhere else. Both are tagged ``course-header``: ``apply`` replaces them in place (run it again
and nothing changes), the teaching-minutes rule and the slides skip them, and ``stale`` (the test
suite) lists every notebook whose header is not what the metadata says.
"""

import json
import tomllib
from pathlib import Path
from urllib.parse import quote

import nbformat

from course_tools.workshop.lessons import HEADER_TAG, load_lessons

TAG = HEADER_TAG
FOLDERS = ("notebooks", "exercises", "solutions")
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"
COLAB_SETUP = '''# On Colab: install the course and turn on its widgets. Anywhere else this cell does nothing.
import os
import subprocess
import sys

REPOSITORY = "{url}"
if os.environ.get("COLAB_RELEASE_TAG"):
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"git+{REPOSITORY}"], check=True)
    from google.colab import output

    output.enable_custom_widget_manager()'''


def repository_url(root: Path) -> str:
    """``[project.urls] Repository`` of ``root/pyproject.toml`` (a GitHub URL), without a trailing slash."""
    url = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]["Repository"]
    if not url.startswith("https://github.com/"):
        raise ValueError(f"pyproject.toml's Repository must be a https://github.com/OWNER/NAME URL, got {url!r}")
    return url.rstrip("/")


def badges(url: str, relative: str) -> str:
    """Markdown for the two badges that open ``relative`` (a path in the repository) on Colab and Binder."""
    owner_name = url.removeprefix("https://github.com/")
    colab = f"https://colab.research.google.com/github/{owner_name}/blob/main/{relative}"
    binder = f"https://mybinder.org/v2/gh/{owner_name}/main?labpath={quote(relative, safe='')}"
    return f"[![Open in Colab]({COLAB_BADGE})]({colab}) [![Launch Binder]({BINDER_BADGE})]({binder})"


def _lesson_link(stem: str, titles: dict[str, str], prefix: str) -> str:
    number = stem.partition("_")[0]
    return f"[{number} · {titles.get(stem, stem)}]({prefix}{stem}.ipynb)"


def time_line(path: Path, root: Path) -> str:
    """"**Time:** … · **Before this:** …" for a lesson, "**Time:** … · **After:** …" for an exercise or solution."""
    lessons = load_lessons(root)
    titles = {stem: lesson.title for stem, lesson in lessons.items()}
    if path.parent.name == "notebooks":
        lesson = lessons[path.stem]
        before = [_lesson_link(stem, titles, "") for stem in lesson.meta.get("prerequisites", [])]
        extra = f" (+ exercises, {lesson.exercise_minutes} min)" if lesson.exercise_minutes else ""
        return f"**Time:** {lesson.teaching_minutes} min{extra} · **Before this:** {', '.join(before) or 'nothing'}"
    meta = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("course_lib", {})
    after = [_lesson_link(stem, titles, "../notebooks/") for stem in meta.get("lessons", [])]
    return f"**Time:** {meta.get('minutes', '?')} min · **After:** {', '.join(after) or 'any lesson'}"


def header_cells(path: Path, root: Path) -> list[nbformat.NotebookNode]:
    """The two header cells of the notebook at ``path`` (inside ``root``), tagged and skipped in slides."""
    url = repository_url(root)
    relative = path.resolve().relative_to(root.resolve()).as_posix()
    metadata = {"tags": [TAG], "slideshow": {"slide_type": "skip"}}
    text = badges(url, relative) + "\n\n" + time_line(path, root)
    setup = COLAB_SETUP.replace("{url}", url)
    return [nbformat.v4.new_markdown_cell(text, metadata=dict(metadata)),
            nbformat.v4.new_code_cell(setup, metadata=json.loads(json.dumps(metadata)))]


def with_header(notebook: nbformat.NotebookNode, path: Path, root: Path) -> nbformat.NotebookNode:
    """``notebook`` with its ``course-header`` cells (if any) replaced by fresh ones at the top."""
    body = [cell for cell in notebook.cells if TAG not in cell.metadata.get("tags", [])]
    fresh = header_cells(path, root)
    for new, old in zip(fresh, [cell for cell in notebook.cells if TAG in cell.metadata.get("tags", [])]):
        new.id = old.get("id", new.id)  # keep the cell ids, so a rerun changes nothing
    notebook.cells = fresh + body
    return notebook


def moved(source: str, old_folder: str, new_folder: str) -> str:
    """A header cell's ``source`` for the same notebook in ``new_folder`` (its badges open that copy):
    the exercise builder carries a solution's header over to the exercise this way."""
    return source.replace(f"/{old_folder}/", f"/{new_folder}/").replace(f"={old_folder}%2F", f"={new_folder}%2F")


def notebook_paths(root: Path) -> list[Path]:
    return [path for folder in FOLDERS for path in sorted((root / folder).glob("*.ipynb"))]


def _cells(notebook: nbformat.NotebookNode) -> list[tuple]:
    return [(cell.cell_type, cell.source, cell.metadata.get("tags")) for cell in notebook.cells]


def stale(root: Path) -> list[Path]:
    """The notebooks whose header cells differ from (or lack) what ``apply`` would write."""
    found = []
    for path in notebook_paths(root):
        notebook = nbformat.read(path, as_version=4)
        if _cells(notebook) != _cells(with_header(nbformat.read(path, as_version=4), path, root)):
            found.append(path)
    return found


def apply(root: Path) -> list[Path]:
    """Write the header cells into every stale notebook; the paths written."""
    written = stale(root)
    for path in written:
        nbformat.write(with_header(nbformat.read(path, as_version=4), path, root), path)
    return written
