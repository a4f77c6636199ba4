"""Two packages: ``course_lib`` (the library learners read) never imports ``course_tools`` (the tools
that grade, measure and run the course), and the student copy carries ``course_lib`` with the parts of
``course_tools`` its notebooks call, and no instructor kit."""
import ast
import json
import re
from pathlib import Path

from course_tools.workshop import release

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(source: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``source`` may name, at any depth of the code
    (for ``from a import b``: ``a`` and ``a.b``, which is a module when ``b`` is one)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def tools_imports(folder: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {name}" for path in sorted(folder.rglob("*.py"))
            for name in sorted(imported_modules(path.read_text(encoding="utf-8"))) if name.split(".")[0] == "course_tools"]


def test_course_lib_imports_nothing_from_course_tools():
    assert not tools_imports(ROOT / "course_lib"), "\n".join(tools_imports(ROOT / "course_lib"))


def test_the_import_walk_finds_an_import_inside_a_function():
    sneaky = "def f():\n    from course_tools.workshop import guide\n"
    assert imported_modules(sneaky) == {"course_tools.workshop", "course_tools.workshop.guide"}


def notebook_imports(path: Path) -> set[str]:
    """The modules a notebook's code cells import (IPython's % and ! lines left out)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = [line for cell in cells if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))]
    return imported_modules("\n".join(lines))


def module_file(name: str) -> Path:
    """The file of module ``name`` under the repository (a package's ``__init__.py``)."""
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def reached_from_notebooks() -> set[str]:
    """Every ``course_lib`` and ``course_tools`` module the notebooks and exercises import, directly or
    through others."""
    learner_notebooks = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "exercises").glob("*.ipynb"))
    todo = {name for path in learner_notebooks for name in notebook_imports(path)}
    reached = set()
    while todo:
        name = todo.pop()
        if name.split(".")[0] not in ("course_lib", "course_tools") or name in reached:
            continue
        if not module_file(name).exists():  # "from package import module": the package is the module named
            continue
        reached.add(name)
        parts = name.split(".")
        todo |= {".".join(parts[:i]) for i in range(1, len(parts))}  # importing a.b.c runs a and a.b
        todo |= imported_modules(module_file(name).read_text(encoding="utf-8"))
    return reached


def tools_reached_from_notebooks() -> set[str]:
    return {name for name in reached_from_notebooks() if name.split(".")[0] == "course_tools"}


def in_student_copy(path: Path) -> bool:
    where = path.relative_to(ROOT).as_posix()
    return any(where == entry or where.startswith(entry + "/") for entry in release.INCLUDED)


def test_the_student_copy_holds_what_its_notebooks_import_and_no_instructor_kit():
    reached = tools_reached_from_notebooks()
    assert {"course_tools.grading", "course_tools.bench.crossover"} <= reached  # check() and notebook 08's sweep
    missing = sorted(name for name in reached if not in_student_copy(module_file(name)))
    assert not missing, f"notebooks import these, the student copy lacks them: {missing}"
    assert "course_lib" in release.INCLUDED
    assert not in_student_copy(ROOT / "course_tools" / "workshop" / "release.py")
    assert not in_student_copy(ROOT / "course_tools" / "exercise_builder.py")


BUDGET = 5600  # issue 24's 5,000 lines of lessons' code, plus issue 27's gated ledger (gates, gated delta, mixers)


def test_course_lib_is_small_and_every_module_in_it_is_used():
    """Issue 24's budget: a learner reads at most BUDGET lines, and no module a notebook does not reach."""
    files = sorted((ROOT / "course_lib").rglob("*.py"))
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
    assert lines <= BUDGET, f"course_lib has {lines} lines (budget {BUDGET:,}): tooling belongs in course_tools"
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for path in files}
    unused = sorted(modules - reached_from_notebooks())
    assert not unused, f"no notebook or exercise reaches these course_lib modules: {unused}"


def test_contributing_names_files_that_exist():
    """CONTRIBUTING.md's recipes name exact files: each must exist (placeholders like exNN_<name> aside)."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:course_lib|course_tools|tests|solutions|notebooks|benchmarks|docs)/[\w/.]+)`", text))
    assert len(named) >= 10
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"CONTRIBUTING.md names files that do not exist: {missing}"
