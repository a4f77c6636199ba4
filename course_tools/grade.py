"""Grade a folder of submitted notebooks: ``python -m course_tools.grade PATH... [--csv FILE] [--out DIR] [--jobs N]``.

Each PATH is a notebook or a folder searched recursively for ``*.ipynb``. Every notebook
runs alone in a sandbox (``grading.sandbox``: bubblewrap where it works, else a weaker
fallback that the report names) holding only a copy of itself; its ``check()`` cells skip.
Its function then only answers the grader tests' calls; the tests and the answer key run
in this process. ``--jobs N`` runs N sandboxes at a time; the table keeps the notebooks'
order. The CSV and the reports (``grading.class_report``) are written after every sandbox
is dead, atomically.
"""

import argparse
import os
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course_tools.grading.class_report import score_rows, write_reports
from course_tools.grading.notebooks import NotebookGrade, clean, grade_notebook
from course_tools.grading.sandbox import Sandbox

COLUMNS = ("file", "exercise", "score", "max", "status", "reason")
SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"  # with the quiz key: never visible to a submission


def find_notebooks(paths: Iterable[Path]) -> list[Path]:
    """The notebooks named by ``paths`` (folders searched recursively), sorted, checkpoints skipped."""
    found: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found.update(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        elif path.suffix == ".ipynb" and path.is_file():
            found.add(path)
        else:
            raise ValueError(f"PATH must be a notebook (.ipynb) or a folder, got {path}")
    return sorted(found)


def hidden_folders(paths: Iterable[Path], outputs: Iterable[Path | None]) -> tuple[Path, ...]:
    """What no submission may read: the submitted folders, solutions/, the output folders, the home folder."""
    folders = {p if p.is_dir() else p.parent for p in paths} | {SOLUTIONS, Path.home()}
    folders |= {p if p.suffix == "" else p.parent for p in outputs if p is not None}
    return tuple(sorted(p.resolve() for p in folders))


def format_table(table: list[dict[str, str]]) -> str:
    """Aligned text columns, reason last and unpadded; everything cleaned of terminal escape codes."""
    header = dict(zip(COLUMNS, COLUMNS))
    rows = [{key: clean(value) for key, value in row.items()} for row in [header, *table]]
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
    parser.add_argument("--csv", type=Path, metavar="FILE", help="the class CSV: one row per notebook")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="also write scores.csv, tests.csv, summary.md, scores.png and feedback/*.md here")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds for the tests (60)")
    parser.add_argument("--cell-timeout", type=float, default=120.0, metavar="S", help="seconds per notebook cell (120)")
    parser.add_argument("--notebook-timeout", type=float, default=300.0, metavar="S",
                        help="seconds to run all of a notebook's cells (300)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="sandboxes at a time (1)")
    parser.add_argument("--no-bubblewrap", action="store_true", help="use the weaker fallback sandbox")
    args = parser.parse_args(argv)
    if not min(args.timeout, args.cell_timeout, args.notebook_timeout) > 0:
        parser.error("--timeout, --cell-timeout and --notebook-timeout must be > 0 seconds")
    if args.jobs < 1:
        parser.error(f"--jobs must be a positive int, got {args.jobs}")
    try:
        notebooks = find_notebooks(args.paths)
    except ValueError as error:
        parser.error(str(error))
    if not notebooks:
        parser.error(f"no notebooks found in {', '.join(map(str, args.paths))}")
    hidden = hidden_folders(args.paths, (args.csv, args.out))
    print(f"sandbox: {Sandbox(Path(os.devnull), hidden, use_bubblewrap=not args.no_bubblewrap).level}", file=sys.stderr)

    def grade_one(path: Path) -> NotebookGrade:
        print(f"grading {path} ...", file=sys.stderr, flush=True)
        return grade_notebook(path, timeout=args.timeout, cell_timeout=args.cell_timeout,
                              notebook_timeout=args.notebook_timeout, hidden=hidden,
                              use_bubblewrap=not args.no_bubblewrap)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        grades = list(pool.map(grade_one, notebooks))  # in the notebooks' order; every sandbox is dead after
    print(format_table(score_rows(grades)))
    for path in write_reports(grades, csv_path=args.csv, out=args.out):
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
