"""Grade a folder of submitted notebooks: ``python -m course_lib.grade PATH... [--csv FILE] [--timeout S] [--jobs N]``.

Each PATH is a notebook or a folder searched recursively for ``*.ipynb``. Every
notebook is executed in a fresh kernel (its ``check()`` cells skip), then its
exercise function is graded; the scores are printed as a table and, with
``--csv``, written as ``file,exercise,score,max_score,notes``. ``--jobs N`` grades N
notebooks at a time (threads that wait on each notebook's own kernel and grading
processes); the table keeps the notebooks' order.
"""

import argparse
import csv
import sys
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable
from pathlib import Path

from course_lib.grading.notebooks import NotebookGrade, grade_notebook

COLUMNS = ("file", "exercise", "score", "max_score", "notes")


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


def rows(grades: list[NotebookGrade]) -> list[dict[str, str]]:
    """One row per notebook, the columns of ``COLUMNS``."""
    return [
        {
            "file": str(g.path),
            "exercise": g.exercise,
            "score": str(g.score),
            "max_score": str(g.max_score),
            "notes": g.notes,
        }
        for g in grades
    ]


def format_table(table: list[dict[str, str]]) -> str:
    """Aligned text columns; notes last and unpadded."""
    header = {"file": "file", "exercise": "exercise", "score": "score", "max_score": "max", "notes": "notes"}
    widths = {key: max(len(row[key]) for row in [header, *table]) for key in COLUMNS[:-1]}
    lines = []
    for row in [header, *table]:
        cells = [
            row[key].ljust(widths[key]) if key in ("file", "exercise") else row[key].rjust(widths[key])
            for key in widths
        ]
        lines.append("  ".join(cells + [row["notes"]]).rstrip())
    return "\n".join(lines)


def write_csv(table: list[dict[str, str]], path: Path) -> None:
    """The table as CSV with a header line."""
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(table)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m course_lib.grade", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="notebooks or folders of notebooks")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write the scores to this CSV file")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds to grade one function (60)")
    parser.add_argument(
        "--cell-timeout", type=float, default=120.0, metavar="S", help="seconds per notebook cell (120)"
    )
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="notebooks graded at a time (1)")
    args = parser.parse_args(argv)
    if not args.timeout > 0 or not args.cell_timeout > 0:
        parser.error("--timeout and --cell-timeout must be > 0 seconds")
    if args.jobs < 1:
        parser.error(f"--jobs must be a positive int, got {args.jobs}")
    try:
        notebooks = find_notebooks(args.paths)
    except ValueError as error:
        parser.error(str(error))
    if not notebooks:
        parser.error(f"no notebooks found in {', '.join(map(str, args.paths))}")
    def grade_one(path: Path) -> NotebookGrade:
        print(f"grading {path} ...", file=sys.stderr, flush=True)
        return grade_notebook(path, timeout=args.timeout, cell_timeout=args.cell_timeout)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        grades = list(pool.map(grade_one, notebooks))  # in the notebooks' order
    table = rows(grades)
    print(format_table(table))
    if args.csv:
        write_csv(table, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
