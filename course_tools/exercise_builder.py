"""Generate the student notebooks in ``exercises/`` from the solution notebooks in ``solutions/``.

In a solution's code cells, each solution region sits between marker lines::

    # BEGIN SOLUTION: <hint for the student>
    ...solution lines...
    # END SOLUTION

and becomes ``raise NotImplementedError("<exercise id>: <hint>")`` at the
marker's indentation (a message too long for one line of ``MAX_LINE`` characters
is split into adjacent string literals, one per line). Cells tagged ``solution-only`` are dropped; outputs and
execution counts are cleared. The exercise id is the notebook metadata
``course_lib.exercise``. Run ``python -m course_tools.exercise_builder`` (``make
exercises``) from the repository root; ``--check`` only reports what is out of date.
"""

import argparse
import copy
import json
import re
import sys
from pathlib import Path

import nbformat

from course_tools.workshop import headers

SOLUTION_ONLY_TAG = "solution-only"
BEGIN = re.compile(r"^(?P<indent>[ \t]*)#\s*BEGIN SOLUTION\b(?P<rest>.*)$")
END = re.compile(r"^[ \t]*#\s*END SOLUTION\b(?P<rest>.*)$")
MAX_LINE = 100  # the course's longest code line


def stub(indent: str, message: str, *, width: int = MAX_LINE) -> list[str]:
    """The lines of ``raise NotImplementedError(message)`` at ``indent``, each at most ``width`` characters.

    One line when it fits; else the message is cut at spaces into string literals
    on lines of their own, which Python joins back into the same message.
    """
    line = f"{indent}raise NotImplementedError({json.dumps(message, ensure_ascii=False)})"
    if len(line) <= width:
        return [line]
    inner = indent + "    "
    room = max(20, width - len(inner) - 2)  # the quotes
    pieces, current = [], ""
    for word in re.split(r"(?<= )", message):  # words keep their trailing space
        if current and len(json.dumps(current + word, ensure_ascii=False)) - 2 > room:
            pieces.append(current)
            current = ""
        current += word
    pieces.append(current)
    literals = [f"{inner}{json.dumps(piece, ensure_ascii=False)}" for piece in pieces]
    return [f"{indent}raise NotImplementedError(", *literals, f"{indent})"]


class MarkerError(ValueError):
    """Unbalanced, nested or malformed solution markers; the message names notebook and cell."""


def strip_solutions(source: str, *, exercise_id: str, where: str) -> str:
    """Replace every BEGIN/END SOLUTION region of one cell's ``source`` by a NotImplementedError stub.

    ``where`` (e.g. "solutions/ex01.ipynb, cell 4") starts every error message.
    """
    lines, out = source.split("\n"), []
    region: tuple[int, str] | None = None  # (line number, indent) of the open BEGIN
    for number, line in enumerate(lines, start=1):
        begin, end = BEGIN.match(line), END.match(line)
        if begin:
            if region is not None:
                raise MarkerError(
                    f"{where}: BEGIN SOLUTION on line {number} inside the region opened on line {region[0]}"
                )
            hint = begin["rest"].strip()
            if not hint.startswith(":") or not hint[1:].strip():
                raise MarkerError(f"{where}: BEGIN SOLUTION on line {number} needs a hint: '# BEGIN SOLUTION: <hint>'")
            out += stub(begin["indent"], f"{exercise_id}: {hint[1:].strip()}")
            region = (number, begin["indent"])
        elif end:
            if region is None:
                raise MarkerError(f"{where}: END SOLUTION on line {number} without a BEGIN SOLUTION")
            if end["rest"].strip():
                raise MarkerError(f"{where}: END SOLUTION on line {number} takes no text, got {end['rest'].strip()!r}")
            region = None
        elif region is None:
            out.append(line)
    if region is not None:
        raise MarkerError(f"{where}: BEGIN SOLUTION on line {region[0]} has no END SOLUTION")
    return "\n".join(out)


def build_exercise(solution: nbformat.NotebookNode, *, name: str) -> nbformat.NotebookNode:
    """The student version of a solution notebook (``name`` labels error messages)."""
    exercise_id = solution.metadata.get("course_lib", {}).get("exercise")
    if not exercise_id:
        raise MarkerError(f"{name}: notebook metadata lacks course_lib.exercise (the exercise id)")
    exercise = copy.deepcopy(solution)
    exercise.cells = []
    for index, cell in enumerate(solution.cells, start=1):
        if SOLUTION_ONLY_TAG in cell.metadata.get("tags", []):
            continue
        cell = copy.deepcopy(cell)
        cell.metadata.pop("execution", None)  # nbclient's timestamps
        if headers.TAG in cell.metadata.get("tags", []):  # its badges open the exercise, not the solution
            cell.source = headers.moved(cell.source, "solutions", "exercises")
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source, exercise_id=exercise_id, where=f"{name}, cell {index}")
            cell.outputs, cell.execution_count = [], None
        exercise.cells.append(cell)
    return exercise


def out_of_sync(source: Path, dest: Path) -> list[str]:
    """What ``build`` would change: missing, stale or differing notebooks in ``dest``.

    Compares cell types and sources, the ``course_lib`` metadata, and that no
    exercise cell carries outputs.
    """
    problems = []
    solutions = sorted(source.glob("*.ipynb"))
    for path in solutions:
        target = dest / path.name
        if not target.exists():
            problems.append(f"{target} is missing")
            continue
        expected = build_exercise(nbformat.read(path, as_version=4), name=str(path))
        actual = nbformat.read(target, as_version=4)
        if _summary(actual) != _summary(expected):
            problems.append(f"{target} differs from what {path} generates")
        elif any(cell.get("outputs") or cell.get("execution_count") for cell in actual.cells):
            problems.append(f"{target} has outputs; exercises are committed without them")
    names = {path.name for path in solutions}
    problems += [
        f"{path} has no solution in {source}" for path in sorted(dest.glob("*.ipynb")) if path.name not in names
    ]
    return problems


def _summary(notebook: nbformat.NotebookNode) -> tuple:
    cells = tuple((cell.cell_type, cell.source) for cell in notebook.cells)
    return cells, notebook.metadata.get("course_lib")


def build(source: Path, dest: Path) -> list[Path]:
    """Write ``dest/<name>.ipynb`` for every ``source/<name>.ipynb``; returns the paths written."""
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(source.glob("*.ipynb")):
        exercise = build_exercise(nbformat.read(path, as_version=4), name=str(path))
        nbformat.write(exercise, dest / path.name)
        written.append(dest / path.name)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: build (default) or ``--check`` the exercises."""
    parser = argparse.ArgumentParser(prog="python -m course_tools.exercise_builder", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source", type=Path, default=Path("solutions"), help="solution notebooks (default: solutions)"
    )
    parser.add_argument("--dest", type=Path, default=Path("exercises"), help="exercise notebooks (default: exercises)")
    parser.add_argument("--check", action="store_true", help="only report what is out of date; exit 1 if anything is")
    args = parser.parse_args(argv)
    if not args.source.is_dir():
        parser.error(f"--source must be a folder of solution notebooks, got {args.source}")
    try:
        if args.check:
            problems = out_of_sync(args.source, args.dest)
            print("\n".join(problems) or f"{args.dest} is up to date with {args.source}")
            return 1 if problems else 0
        for path in build(args.source, args.dest):
            print(f"wrote {path}")
    except MarkerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
