"""``make release``: the student copy — what participants get — as a folder and a zip.

It holds the files git tracks under ``INCLUDED`` (notebooks, exercises, ``course_lib`` and the
parts of ``course_tools`` they call, the committed benchmark results the notebooks read, the README, the install files and the nbval
sanitizer that ``pyproject.toml`` names) and nothing
of ``solutions/``: no solution notebook, no quiz key, no ``# BEGIN SOLUTION`` region.
``leaks(folder, root)`` lists anything of ``solutions/`` found in a copy; ``build`` refuses to
finish while there is any. Without ``solutions/quiz_key.json`` the quiz records answers instead
of checking them, as in a graded workshop (``course_lib.quiz.key``).
"""

import shutil
import subprocess
from pathlib import Path

INCLUDED = ("README.md", "pyproject.toml", "environment.yml", "Makefile", "course_lib", "notebooks",
            "exercises", "docs",  # course_lib carries the committed results (course_lib/results)
            # what the notebooks and exercises call of course_tools (tests/test_packages.py walks it):
            # check() and its grader tests (and the cgroups its sandbox uses), the benchmark notebook 08
            # runs live, the pre-flight check
            "course_tools/__init__.py", "course_tools/grading", "course_tools/cgroups.py", "course_tools/bench",
            "course_tools/doctor.py", "course_tools/progress.py",  # check() records the learner's scores there
            "tests/nbval_sanitize.cfg")  # pyproject's addopts name it: pytest over the notebooks needs it
SOLUTION_MARK = "# BEGIN SOLUTION"


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


def build(root: Path, out: Path) -> tuple[Path, Path]:
    """Write the student copy to the folder ``out`` (replaced) and ``out``.zip; ValueError if anything leaks."""
    if out.exists():
        shutil.rmtree(out)
    for name in tracked_files(root):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    found = leaks(out, root)
    if found:
        raise ValueError("the student copy would leak solutions:\n" + "\n".join(found))
    archive = Path(shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name))
    return out, archive
