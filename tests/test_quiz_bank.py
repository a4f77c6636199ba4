"""Exercise ex08, the graded quiz: questions and numbers drawn from the student's id, graded by the key.

The key's formulas are solutions/quiz_bank_key.py (the instructor's); tests/mutants/ex08_interview_quiz.py
holds the wrong answers, a classmate's among them.
"""

import csv
import itertools
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_tools.grading import grade, load_exercise
from course_tools.grading.core import SUBMITTER
from course_tools.grading.exercises import ex08_interview_quiz as quiz
from course_tools.grading.notebooks import submitter
from course_tools.grading.quiz_bank import BANK, QUESTIONS_PER_STUDENT, questions_for
from course_tools.grading.sandbox import bubblewrap
from mutants.ex08_interview_quiz import KEY, right_answers

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "ex08_interview_quiz"


def failed(result) -> set[str]:
    return {test.name for test in result.tests if not test.passed}


def test_the_key_answers_every_template_of_the_bank_and_the_exercise_grades_ten():
    assert set(KEY) == {t.id for t in BANK} and len(BANK) > QUESTIONS_PER_STUDENT
    assert len(load_exercise(EXERCISE).tests) == QUESTIONS_PER_STUDENT == 10


def test_an_id_always_gets_the_same_ten_questions_whatever_its_case_or_spaces():
    ten = questions_for("Alice ")
    assert ten == questions_for("alice") and [q.number for q in ten] == [f"Q{i}" for i in range(1, 11)]
    assert len({q.template.id for q in ten}) == 10
    assert all(q.values[name] in q.template.choices[name] for q in ten for name in q.template.choices)
    # pinned: a student's questions must never change under them (the hash is SHA-256, not Python's random)
    first = questions_for("practice")[0]
    assert (first.template.id, first.values) == ("score_multiplications", {"n": 900, "d": 192})


def test_the_questions_are_printed_with_how_to_answer_and_where_to_learn():
    text = questions_for("practice")[0].text()
    assert text.startswith("Q1 (answer: an exact integer; see notebook 01). Softmax attention, one head, N = 900")
    assert all(len(line) <= 100 for q in questions_for("practice") for line in q.text().splitlines())


@pytest.mark.parametrize("bad", ["", "   ", None, 7])
def test_an_empty_or_non_string_id_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="student_id must be a non-empty string"):
        questions_for(bad)


def test_a_classmates_answers_score_almost_nothing_for_anyone_else():
    """Across 40 students (780 pairs), B's right answers handed in under A's id: at most 3 of 10 (measured 2)."""
    students = [f"student{i:02d}" for i in range(40)]
    answers = {s: right_answers(s) for s in students}
    scores = []
    for mine, theirs in itertools.combinations(students, 2):
        expected = answers[mine]
        scores.append(sum(math.isclose(answers[theirs].get(k, math.nan), v, rel_tol=1e-3)
                          for k, v in expected.items() if k != "student"))
    assert max(scores) <= 3 and sum(scores) / len(scores) < 0.5, (max(scores), sum(scores) / len(scores))
    # and through the grader, in its own process, for one pair
    result = grade(EXERCISE, lambda: {**right_answers("alice"), "student": "bob"})
    assert result.score <= 3 and "is not the answer for your numbers" in result.tests[0].feedback


def test_right_answers_score_ten_and_each_slip_costs_its_point():
    assert grade(EXERCISE, lambda: right_answers("alice"), isolated=False).score == 10
    for place in range(1, 11):
        wrong = {**right_answers("alice"), f"Q{place}": -1}
        assert failed(grade(EXERCISE, lambda wrong=wrong: wrong, isolated=False)) == {f"q{place}"}


def test_counts_are_exact_and_the_rest_within_a_relative_1e_3():
    answers = right_answers("practice")
    count = next(q for q in questions_for("practice") if q.template.exact)
    real = next(q for q in questions_for("practice") if not q.template.exact)
    off_by_one = {**answers, count.number: answers[count.number] + 1}
    near = {**answers, real.number: answers[real.number] * (1 + 5e-4)}
    far = {**answers, real.number: answers[real.number] * (1 + 2e-3)}
    assert failed(grade(EXERCISE, lambda: off_by_one, isolated=False)) == {count.number.lower()}
    assert grade(EXERCISE, lambda: near, isolated=False).score == 10
    assert failed(grade(EXERCISE, lambda: far, isolated=False)) == {real.number.lower()}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda a: "not a dict", "quiz_answers() must return a dict like"),
        (lambda a: {k: v for k, v in a.items() if k != "student"}, "quiz_answers() must say whose answers they are"),
        (lambda a: {**a, "student": "  "}, "quiz_answers() must say whose answers they are"),
        (lambda a: {k: v for k, v in a.items() if k != "Q1"}, "quiz_answers() has no answer for Q1"),
        (lambda a: {**a, "Q1": "B"}, "Q1: the answer must be a number, got 'B'"),
        (lambda a: {**a, "Q1": float("nan")}, "Q1: the answer must be a finite number"),
        (lambda a: {**a, "Q1": True}, "Q1: the answer must be a number, got bool"),
    ],
    ids=["not-a-dict", "no-student", "blank-student", "missing-question", "a-letter", "nan", "bool"],
)
def test_malformed_answers_are_feedback_naming_the_problem(change, says):
    answers = change(right_answers("practice"))
    result = grade(EXERCISE, lambda: answers, isolated=False)
    assert result.score < 10 and any(says in t.feedback for t in result.tests if not t.passed), result.tests[0]


def test_in_a_batch_the_id_is_the_submitters_and_answers_for_another_score_nothing():
    token = SUBMITTER.set("Bob")
    try:
        own = grade(EXERCISE, lambda: right_answers("bob"), isolated=False)
        copied = grade(EXERCISE, lambda: right_answers("alice"), isolated=False)
    finally:
        SUBMITTER.reset(token)
    assert own.score == 10 and copied.score == 0
    assert "these answers are for student 'alice', but this is 'Bob''s submission" in copied.tests[0].feedback


@pytest.mark.parametrize(
    ("name", "owner"),
    [("alice_ex08.ipynb", "alice"), ("alice-ex08-quiz.ipynb", "alice"), ("alice/ex08_interview_quiz.ipynb", "alice"),
     ("alice.ipynb", "alice"), ("ex08_interview_quiz.ipynb", None), ("class/bob_ex08.ipynb", "bob")],
)
def test_the_submitter_is_read_from_the_file_or_folder_name(name, owner):
    assert submitter(name) == owner


def test_without_the_key_the_quiz_says_the_instructor_grades_it(monkeypatch, tmp_path):
    monkeypatch.setattr(quiz, "KEY_PATH", tmp_path / "absent.py")
    result = grade(EXERCISE, lambda: right_answers("practice"), isolated=False)
    assert result.score == 0 and all("your instructor grades the quiz" in t.feedback for t in result.tests)


def test_the_grade_command_grades_each_notebook_for_the_id_in_its_name(tmp_path):
    """The solution (STUDENT_ID "practice") scores 10 as practice's, 0 as alice's; the stub scores 0."""
    shutil.copy(ROOT / "solutions" / f"{EXERCISE}.ipynb", tmp_path / "practice_ex08.ipynb")
    shutil.copy(ROOT / "solutions" / f"{EXERCISE}.ipynb", tmp_path / "alice_ex08.ipynb")
    shutil.copy(ROOT / "exercises" / f"{EXERCISE}.ipynb", tmp_path / "bob_ex08.ipynb")
    scores = tmp_path / "scores.csv"
    command = [sys.executable, "-m", "course_tools.grade", str(tmp_path), "--csv", str(scores), "--jobs", "2",
               *([] if bubblewrap() else ["--unsafe-no-sandbox"])]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    with scores.open(newline="", encoding="utf-8") as file:
        rows = {Path(row["file"]).name: row for row in csv.DictReader(file)}
    assert (rows["practice_ex08.ipynb"]["score"], rows["practice_ex08.ipynb"]["reason"]) == ("10", "")
    assert rows["alice_ex08.ipynb"]["score"] == "0" and rows["bob_ex08.ipynb"]["score"] == "0"
    assert rows["bob_ex08.ipynb"]["reason"].startswith("failed q1, q2, q3, q4, q5, q6, q7, q8, q9, q10")


def test_quiz_mutants_together_fail_every_grader_test():
    """Every slip fails exactly its question; notebook 10's letters and a classmate's answers fail all ten."""
    from grader_mutants import MUTANTS

    caught = set()
    for mutant in MUTANTS[EXERCISE]:
        result = grade(EXERCISE, mutant.fn, isolated=False)
        assert failed(result) == mutant.targets, mutant.name
        caught |= failed(result)
    assert caught == {test.name for test in load_exercise(EXERCISE).tests}
    names = {mutant.name for mutant in MUTANTS[EXERCISE]}
    assert {"ex08_lesson_letters", "ex08_classmates_answers"} <= names
    assert len(names) == len(BANK) + 2  # one slip per template of the bank
