"""Every exercise as handed out can be graded: its stub, taken from its own notebook, scores 0 of the full
marks and the grader says the function is not written yet (the quiz, in a copy without the key: that
the instructor grades it), instead of crashing.

This file ships in the student copy (``make release``), whose ``make test`` runs it with the lesson
notebooks; in the repository it runs with the rest of the suite.
"""
import json
from pathlib import Path

import pytest

from course_tools.grading import grade

HEADER_TAG = "course-header"  # the generated badge and Colab cells (course_tools.workshop, not in the copy)

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((ROOT / "exercises").glob("ex*.ipynb"))


def stub(path: Path):
    """The function the exercise asks for, as its notebook defines it (the cells up to its definition run)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    name = notebook["metadata"]["course_lib"]["function"]
    namespace: dict = {}
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or HEADER_TAG in cell["metadata"].get("tags", []):
            continue
        exec(compile(source, f"{path.name}", "exec"), namespace)  # imports, then the stub's definition
        if name in namespace:
            return notebook["metadata"]["course_lib"]["exercise"], namespace[name]
    raise AssertionError(f"{path.name} never defines {name}")


@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_the_handed_out_stub_is_graded_not_crashed(path):
    exercise_id, function = stub(path)
    result = grade(exercise_id, function, timeout=60.0)
    assert result.max_score > 0 and result.score == 0, f"{exercise_id}: {result.score}/{result.max_score}"
    feedback = [test.feedback for test in result.tests]
    if exercise_id == "ex08_interview_quiz" and not (ROOT / "solutions" / "quiz_bank_key.py").exists():
        expected = "is not in this copy: your instructor grades the quiz"  # the key stays with the instructor
    else:
        expected = "NotImplementedError"
    assert any(expected in line for line in feedback), feedback[:3]


def test_there_are_exercises_to_grade():
    assert len(EXERCISES) >= 11
