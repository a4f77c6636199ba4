"""Grade a folder of submitted notebooks: ``python -m course_tools.grade PATH... [--csv FILE] [--out DIR] [--jobs N]``.

Each PATH is a notebook or a folder walked for ``*.ipynb`` without following symbolic links;
anything so named that is not a regular file (a link, a FIFO, a device, a socket) gets a "not
graded" row, never a read. The exercise is ``--exercise`` or the id in the file name
(``alice_ex01.ipynb``); the notebook's metadata is only compared. Every notebook runs alone in
a bubblewrap sandbox (``grading.sandbox``) holding only a copy of itself; its ``check()`` cells
skip. Its function then only answers the grader tests' calls; the tests and the answer key run
in this process. Without a working bubblewrap the command refuses to run (exit status 2) unless
given ``--unsafe-no-sandbox``. ``--jobs N`` runs N sandboxes at a time; the table keeps the
notebooks' order, and a notebook whose grading fails is its own "not graded" row. The CSV and the
reports (``grading.class_report``) are written after every sandbox is dead, atomically.
"""

import argparse
import getpass
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from course_tools.grading.class_report import score_rows, write_reports
from course_tools.grading.notebooks import NotebookGrade, clean, exercise_named, grade_notebook, grader_failed
from course_tools.grading.sandbox import Sandbox, bubblewrap

COLUMNS = ("file", "exercise", "score", "max", "status", "reason")  # the printed table; the CSV adds review
ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"  # with the quiz key: never visible to a submission
CONTAINER = "docker/grader.Dockerfile"
REFUSAL = """\
python -m course_tools.grade: refusing to run the submissions without a sandbox: {why}.
A submitted notebook is code. Outside bubblewrap it runs as you: it can read the quiz key,
solutions/ and the other submissions, edit this grader, reach the network, and rewrite the CSV
after the batch has ended. To get a sandbox:
  * Debian or Ubuntu: sudo apt install bubblewrap   (Fedora: sudo dnf install bubblewrap)
  * or grade inside the container: docker build -f {container} -t course-grader .
    (the docker run line, and the options bubblewrap needs inside Docker, are in that file)
Only for notebooks you trust: run again with --unsafe-no-sandbox."""
WARNING = """\
################################################################################
# WARNING: --unsafe-no-sandbox: the submissions run WITHOUT a sandbox.
# Each notebook's code runs as {user}, with only kernel limits, a private working
# folder and a kill of its process group. It can read every file {user} can
# (solutions/, the quiz key, the other submissions), change them and this grader,
# reach the network, and leave processes that rewrite the reports after the batch.
# Use it only for notebooks you trust.
################################################################################"""


@dataclass(frozen=True)
class Submission:
    """A file to grade: ``path`` as found (never resolved), ``below`` the folder given (no symbolic
    link under it is followed), ``name`` how the reports call it (its path below the folders given)."""

    path: Path
    below: Path
    name: str


def _walk(folder: Path) -> Iterable[Path]:
    """Everything named ``*.ipynb`` in ``folder`` that is not a folder, every symbolic link to a folder,
    and every folder that cannot be listed; links are not followed, checkpoints are skipped."""
    unreadable: list[Path] = []
    for root, folders, files in os.walk(folder, onerror=lambda error: unreadable.append(Path(error.filename))):
        folders[:] = [name for name in folders if name != ".ipynb_checkpoints"]
        yield from (Path(root) / name for name in folders if os.path.islink(Path(root) / name))
        yield from (Path(root) / name for name in files if name.endswith(".ipynb"))
    yield from (path for path in unreadable if path != folder)


def find_notebooks(paths: Iterable[Path]) -> list[Submission]:
    """What ``paths`` name, sorted by name: see ``_walk`` for a folder; a PATH that is itself a symbolic
    link is kept as it is (and refused when read), a file must be named ``*.ipynb``."""
    paths = list(paths)
    folders = [p if p.is_dir() and not p.is_symlink() else p.parent for p in paths]
    base = Path(os.path.commonpath([os.path.abspath(folder) for folder in folders])) if paths else Path()
    found: dict[str, Submission] = {}
    for path, folder in zip(paths, folders, strict=True):
        if path.is_symlink() or (path.suffix == ".ipynb" and os.path.lexists(path) and not path.is_dir()):
            entries = [path]
        elif path.is_dir():
            entries = list(_walk(path))
        else:
            raise ValueError(f"PATH must be a notebook (.ipynb) or a folder, got {path}")
        for entry in entries:
            name = Path(os.path.relpath(os.path.abspath(entry), base)).as_posix()
            found.setdefault(os.path.abspath(entry), Submission(entry, folder, name))
    return sorted(found.values(), key=lambda submission: submission.name)


def hidden_folders(paths: Iterable[Path], outputs: Iterable[Path | None]) -> tuple[Path, ...]:
    """What no submission may read: the submitted folders, solutions/, the output folders, the home folder."""
    folders = {p if p.is_dir() else p.parent for p in paths} | {SOLUTIONS, Path.home()}
    folders |= {p if p.suffix == "" else p.parent for p in outputs if p is not None}
    return tuple(sorted(p.resolve() for p in folders))


def sandbox_problem() -> str | None:
    """Why bubblewrap cannot sandbox a submission on this machine, or None when it can."""
    if bubblewrap():
        return None
    found = shutil.which("bwrap")
    if found is None:
        return "bubblewrap is not installed (no bwrap on PATH)"
    probe = subprocess.run([found, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                           capture_output=True, text=True, timeout=30)
    said = clean(probe.stderr.strip())[:300] or f"exit status {probe.returncode}"
    return (f"{found} cannot create its namespaces here ({said}); in a container it needs the options "
            f"{CONTAINER} names, on a host a kernel that allows unprivileged user namespaces")


def format_table(table: list[dict[str, str]]) -> str:
    """Aligned text columns, reason last and unpadded; everything cleaned of terminal escape codes."""
    header = dict(zip(COLUMNS, COLUMNS))
    rows = [{key: clean(row[key]) for key in COLUMNS} for row in [header, *table]]
    widths = {key: max(len(row[key]) for row in rows) for key in COLUMNS[:-1]}
    lines = []
    for row in rows:
        cells = [row[key].ljust(widths[key]) if key in ("file", "exercise", "status") else row[key].rjust(widths[key])
                 for key in widths]
        lines.append("  ".join(cells + [row["reason"]]).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m course_tools.grade", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="notebooks or folders of notebooks")
    parser.add_argument("--exercise", metavar="ID", help="grade every notebook as this exercise (ex01 or "
                        "ex01_softmax_attention); without it, each file name must hold its exercise's id")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="the class CSV: one row per notebook")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="also write scores.csv, tests.csv, summary.md, scores.png and feedback/*.md here")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds for the tests (60)")
    parser.add_argument("--cell-timeout", type=float, default=120.0, metavar="S", help="seconds per notebook cell (120)")
    parser.add_argument("--notebook-timeout", type=float, default=300.0, metavar="S",
                        help="seconds to run all of a notebook's cells (300)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="sandboxes at a time (1)")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="run the submissions without bubblewrap: they can read and change your files; "
                        "only for notebooks you trust")
    args = parser.parse_args(argv)
    if not min(args.timeout, args.cell_timeout, args.notebook_timeout) > 0:
        parser.error("--timeout, --cell-timeout and --notebook-timeout must be > 0 seconds")
    if args.jobs < 1:
        parser.error(f"--jobs must be a positive int, got {args.jobs}")
    try:
        exercise = exercise_named(args.exercise) if args.exercise else None
        notebooks = find_notebooks(args.paths)
    except ValueError as error:
        parser.error(str(error))
    if not notebooks:
        parser.error(f"no notebooks found in {', '.join(map(str, args.paths))}")
    if args.unsafe_no_sandbox:
        print(WARNING.format(user=getpass.getuser()), file=sys.stderr)
    elif why := sandbox_problem():
        print(REFUSAL.format(why=why, container=CONTAINER), file=sys.stderr)
        return 2
    hidden = hidden_folders(args.paths, (args.csv, args.out))
    level = Sandbox(Path(os.devnull), hidden, use_bubblewrap=not args.unsafe_no_sandbox).level
    level = f"NONE (--unsafe-no-sandbox): {level}" if args.unsafe_no_sandbox else level
    print(f"sandbox: {level}", file=sys.stderr)

    def grade_one(submission: Submission) -> NotebookGrade:
        print(f"grading {clean(submission.name)} ...", file=sys.stderr, flush=True)
        try:
            return grade_notebook(submission.path, exercise=exercise, name=submission.name, below=submission.below,
                                  timeout=args.timeout, cell_timeout=args.cell_timeout,
                                  notebook_timeout=args.notebook_timeout, hidden=hidden,
                                  use_bubblewrap=not args.unsafe_no_sandbox)
        except Exception as error:  # noqa: BLE001 - one notebook's failure is its row, never the end of the batch
            return grader_failed(submission.path, submission.name, exercise, error)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        grades = list(pool.map(grade_one, notebooks))  # in the notebooks' order; every sandbox is dead after
    print(format_table(score_rows(grades)))
    for grade in grades:
        if grade.review:
            print(f"needs review: {clean(grade.shown)}: {'; '.join(grade.review)}", file=sys.stderr)
    for path in write_reports(grades, csv_path=args.csv, out=args.out, sandbox=level):
        print(f"wrote {path}", file=sys.stderr)
    flagged = sum(bool(g.review) for g in grades)
    print(f"{len(grades)} notebooks, {sum(g.status == 'graded' for g in grades)} graded, {flagged} need review; "
          f"sandbox: {'NONE (--unsafe-no-sandbox)' if args.unsafe_no_sandbox else 'bubblewrap'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
