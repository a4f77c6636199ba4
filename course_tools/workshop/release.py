"""``make release``: the student copy — what participants get — as a folder and a zip.

It holds the files git tracks under ``INCLUDED`` (notebooks, exercises, ``course_lib`` and the
parts of ``course_tools`` they call, the committed benchmark results the notebooks read, the
learner's pages of ``docs/``, the install files, the copy's own test and the nbval sanitizer that
``pyproject.toml`` names) and nothing of ``solutions/``: no solution notebook, no quiz key, no
``# BEGIN SOLUTION`` region. Its README and Makefile are its own (``student_copy/``): the README
carries the course map rendered for the copy, the Makefile only the learner's targets (set-up from
the same ``make/course.mk`` as the repository's, and ``make test``, which runs inside the copy).

``build`` refuses to finish while ``leaks`` finds anything of ``solutions/`` in the copy or
``dead_links`` finds a relative link (Markdown pages, notebooks' Markdown cells) to a file the copy
lacks. Without ``solutions/quiz_key.json`` the quiz records answers instead of checking them, as in
a graded workshop (``course_lib.quiz.key``).
"""

import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

from course_tools.workshop import course_map

TEMPLATES = Path(__file__).with_name("student_copy")  # the copy's README.md and Makefile
LEARNER_DOCS = ("docs/troubleshooting.md", "docs/map.md", "docs/exercises.md", "docs/explorer.png")
INCLUDED = ("pyproject.toml", "environment.yml", "LICENSE", "CITATION.cff", "make", "course_lib", "notebooks",
            "exercises", *LEARNER_DOCS,  # course_lib carries the committed results (course_lib/results)
            # what the notebooks and exercises call of course_tools (tests/test_packages.py walks it):
            # check() and its grader tests (and the cgroups its sandbox uses), the benchmark notebook 08
            # runs live, the recall study whose protocol, tables and plots notebook 12 shows, the pre-flight check
            "course_tools/__init__.py", "course_tools/grading", "course_tools/cgroups.py", "course_tools/bench",
            "course_tools/recall",
            "course_tools/doctor.py", "course_tools/progress.py",  # check() records the learner's scores there
            "tests/nbval_sanitize.cfg",  # pyproject's addopts name it: pytest over the notebooks needs it
            "tests/test_student_copy.py")  # the copy's make test: every exercise as handed out is graded
SOLUTION_MARK = "# BEGIN SOLUTION"
LINK = re.compile(r"\]\(([^)\s]+)\)")  # a Markdown link's target


def tracked_files(root: Path) -> list[Path]:
    """The files git tracks under ``INCLUDED`` (so no virtualenv, caches or outputs come along)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *INCLUDED], cwd=root, capture_output=True, check=True)
    return [Path(name) for name in listed.stdout.decode().split("\0") if name]


def leaks(folder: Path, root: Path) -> list[str]:
    """Everything of ``root/solutions`` that the copy in ``folder`` contains, one line each."""
    solutions = {path.read_bytes(): path.name for path in (root / "solutions").iterdir() if path.is_file()}
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data, where = path.read_bytes(), path.relative_to(folder)
        if "solutions" in where.parts:
            found.append(f"{where}: a file under solutions/")
        elif data in solutions:
            found.append(f"{where}: the same bytes as solutions/{solutions[data]}")
        elif SOLUTION_MARK.encode() in data and path.suffix == ".ipynb":
            found.append(f"{where}: holds a '{SOLUTION_MARK}' region")
    return found


def _markdown(path: Path) -> str:
    """A Markdown page's text, or a notebook's Markdown cells."""
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")


def dead_links(folder: Path) -> list[str]:
    """Every relative link in ``folder``'s Markdown pages and notebooks to a file ``folder`` lacks, one line each."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix in (".md", ".ipynb") and p.is_file()):
        for target in LINK.findall(_markdown(path)):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            if not (path.parent / unquote(target.split("#", 1)[0])).exists():
                found.append(f"{path.relative_to(folder)}: {target}")
    return found


def build(root: Path, out: Path) -> tuple[Path, Path]:
    """Write the student copy to the folder ``out`` (replaced) and ``out``.zip; ValueError if anything leaks
    or a link leads nowhere."""
    if out.exists():
        shutil.rmtree(out)
    for name in tracked_files(root):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    readme = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(readme.replace("{map}", course_map.render(root)), encoding="utf-8")
    shutil.copy2(TEMPLATES / "Makefile", out / "Makefile")
    found = leaks(out, root)
    if found:
        raise ValueError("the student copy would leak solutions:\n" + "\n".join(found))
    found = dead_links(out)
    if found:
        raise ValueError("the student copy has links to files it lacks:\n" + "\n".join(found))
    archive = Path(shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name))
    return out, archive
