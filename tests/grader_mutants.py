"""Submissions that test the grader, gathered from ``tests/mutants/``: one module per exercise.

``MUTANTS``, ``ALTERNATIVES``, ``TRIVIAL``, ``CHEATS`` and ``SCRIBBLES`` map an exercise id to its module's
``MUTANTS``, ``ALTERNATIVES``, ``TRIVIAL``, ``CHEAT`` and ``SCRIBBLE`` (an exercise whose module defines none
is left out); ``MISTAKE_FEEDBACK``, ``TRIVIAL_FEEDBACK`` and ``EXACTLY_FAILS`` join the modules' lists, and
``MODULES`` maps each id to its module. The modules are found by name (``exNN_<name>.py``, as the grader
registry finds the graders): no list to edit. The submissions that hang, crash or print are
``mutants.misbehaving``'s.
tests/test_grading.py imports this file; ``course_tools.workshop.guide`` loads it by path for the common
mistakes, without tests/ on sys.path, so the package is loaded from beside this file.
"""

import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

from course_tools.grading.registry import EXERCISE_ID


def _package() -> ModuleType:
    """tests/mutants as the package ``mutants``: the one already imported, else loaded from beside this file."""
    if "mutants" not in sys.modules:
        spec = importlib.util.spec_from_file_location("mutants", Path(__file__).parent / "mutants" / "__init__.py")
        sys.modules["mutants"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["mutants"])
    return sys.modules["mutants"]


def _by_exercise(name: str) -> dict:
    """exercise id -> ``name`` of its module, for the modules that define it."""
    return {exercise_id: getattr(module, name) for exercise_id, module in MODULES.items() if hasattr(module, name)}


def _joined(name: str) -> list:
    """The modules' lists called ``name``, one after the other."""
    return [entry for module in MODULES.values() for entry in getattr(module, name, [])]


MODULES: dict[str, ModuleType] = {
    info.name: importlib.import_module(f"mutants.{info.name}")
    for info in pkgutil.iter_modules(_package().__path__)  # sorted by name
    if EXERCISE_ID.fullmatch(info.name)
}
MUTANTS = _by_exercise("MUTANTS")
ALTERNATIVES = _by_exercise("ALTERNATIVES")
TRIVIAL = _by_exercise("TRIVIAL")
CHEATS = _by_exercise("CHEAT")
SCRIBBLES = _by_exercise("SCRIBBLE")
MISTAKE_FEEDBACK = _joined("MISTAKE_FEEDBACK")
TRIVIAL_FEEDBACK = _joined("TRIVIAL_FEEDBACK")
EXACTLY_FAILS = _joined("EXACTLY_FAILS")
