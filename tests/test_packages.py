"""Two packages: ``course_lib`` (what learners import) never imports ``course_tools`` (the instructor's
tools), and the student copy carries ``course_lib`` only."""
import ast
from pathlib import Path

from course_tools.workshop import release

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in the file names, at any depth of the code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def tools_imports(folder: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {name}" for path in sorted(folder.rglob("*.py"))
            for name in sorted(imported_modules(path)) if name.split(".")[0] == "course_tools"]


def test_course_lib_imports_nothing_from_course_tools():
    assert not tools_imports(ROOT / "course_lib"), "\n".join(tools_imports(ROOT / "course_lib"))


def test_the_import_walk_finds_an_import_inside_a_function(tmp_path):
    (tmp_path / "sneaky.py").write_text("def f():\n    from course_tools.workshop import guide\n")
    assert imported_modules(tmp_path / "sneaky.py") == {"course_tools.workshop"}


def test_the_student_copy_leaves_the_tools_out():
    assert "course_lib" in release.INCLUDED
    assert not any(entry.split("/")[0] == "course_tools" for entry in release.INCLUDED)
