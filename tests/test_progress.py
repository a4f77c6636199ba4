"""The progress view: check() records each run, ``python -m course_tools.progress`` reads it back,
a damaged file is named with what to do, and a file that cannot be written never breaks check()."""
import json
import stat

import pytest

from course_tools import progress
from course_tools.grading import report
from course_tools.grading.results import GradeResult, TestResult


def graded(exercise_id: str, passed: list[bool]) -> GradeResult:
    tests = [TestResult(f"t{i}", 2 if ok else 0, 2, ok, "feedback", 0.0) for i, ok in enumerate(passed)]
    return GradeResult(exercise_id, tests)


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "home" / "progress.json"
    monkeypatch.setenv(progress.ENV_VAR, str(path))
    monkeypatch.setattr(progress, "_warned", set())
    return path


def run_check(monkeypatch, exercise_id: str, passed: list[bool], **options) -> GradeResult:
    monkeypatch.setattr(report, "grade", lambda exercise, fn, timeout: graded(exercise, passed))
    return report.check(exercise_id, lambda q, k, v: v, **options)


def test_check_records_the_score_the_tests_passed_and_the_attempts(progress_file, monkeypatch):
    run_check(monkeypatch, "ex01_softmax_attention", [True, False, False])
    run_check(monkeypatch, "ex01_softmax_attention", [True, True, False])
    entry = json.loads(progress_file.read_text())["exercises"]["ex01_softmax_attention"]
    assert (entry["score"], entry["max_score"], entry["passed"], entry["tests"], entry["attempts"]) == (4, 6, 2, 3, 2)
    assert entry["when"].endswith("+00:00")


def test_a_demo_check_records_nothing(progress_file, monkeypatch):
    run_check(monkeypatch, "ex02_linear_attention", [True], record=False)
    assert not progress_file.exists()


def test_the_view_lists_every_exercise_with_its_last_score_or_not_tried(progress_file, monkeypatch, capsys):
    run_check(monkeypatch, "ex02_linear_attention", [True, True])
    capsys.readouterr()
    assert progress.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[1:-1]}
    assert list(rows) == list(progress.exercise_list(progress.exercises_folder())), "every exercise notebook, in order"
    assert "4/4 on " in rows["ex02_linear_attention"] and "20 min" in rows["ex02_linear_attention"]
    assert "not tried" in rows["ex01_softmax_attention"] and "Softmax attention" in rows["ex01_softmax_attention"]
    assert out[-1] == f"Full marks in 1 of {len(rows)} exercises."


def test_without_the_exercise_notebooks_the_view_lists_what_the_file_holds(progress_file, monkeypatch, capsys, tmp_path):
    run_check(monkeypatch, "ex07_rope", [False])
    capsys.readouterr()
    assert progress.main(["--exercises", str(tmp_path / "nowhere")]) == 0
    out = capsys.readouterr().out
    assert "No exercise notebooks found" in out and "ex07_rope" in out and "0/2 on " in out


@pytest.mark.parametrize("text", ["{not json", '{"version": 9, "exercises": {}}', '{"version": 1, "exercises": [1]}'],
                         ids=["not JSON", "another version", "no record"])
def test_a_damaged_file_is_named_with_what_to_do(progress_file, capsys, text):
    progress_file.parent.mkdir(parents=True)
    progress_file.write_text(text)
    assert progress.main([]) == 1
    message = capsys.readouterr().out
    assert str(progress_file) in message and "delete it to start afresh" in message
    with pytest.raises(progress.ProgressFileError, match="progress file"):
        progress.read_progress(progress_file)


def test_check_keeps_a_damaged_file_as_it_is_and_still_returns_its_result(progress_file, monkeypatch, capsys):
    progress_file.parent.mkdir(parents=True)
    progress_file.write_text("{not json")
    result = run_check(monkeypatch, "ex01_softmax_attention", [True])
    assert result.score == 2 and progress_file.read_text() == "{not json"
    assert "Note: your progress was not saved" in capsys.readouterr().out


def test_an_unwritable_location_does_not_break_check_and_is_said_once(tmp_path, monkeypatch, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    blocker = locked / "a_file"
    blocker.write_text("")  # a folder that is a file cannot be created, even by root
    monkeypatch.setenv(progress.ENV_VAR, str(blocker / "progress.json"))
    monkeypatch.setattr(progress, "_warned", set())
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        results = [run_check(monkeypatch, "ex01_softmax_attention", [True, False]) for _ in range(3)]
    finally:
        locked.chmod(stat.S_IRWXU)
    assert [r.score for r in results] == [2, 2, 2]
    out = capsys.readouterr().out
    assert out.count("Note: your progress was not saved") == 1 and progress.ENV_VAR in out
    assert out.count("Score: 2/4") == 3


def test_an_empty_variable_switches_recording_off(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(progress.ENV_VAR, "")
    monkeypatch.chdir(tmp_path)
    assert progress.progress_path() is None and run_check(monkeypatch, "ex01_softmax_attention", [True]).score == 2
    assert progress.main([]) == 0 and "Recording is off" in capsys.readouterr().out


def test_the_default_file_is_in_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(progress.ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert progress.progress_path() == tmp_path / ".linear_attention_course" / "progress.json"


def test_the_exercises_are_found_from_the_folder_the_learner_is_in(tmp_path):
    course = tmp_path / "course"
    (course / "exercises").mkdir(parents=True)
    (course / "exercises" / "ex01_x.ipynb").write_text("{}")
    (course / "notebooks").mkdir()
    assert progress.exercises_folder(course / "notebooks") == course / "exercises"
    assert progress.exercises_folder(course) == course / "exercises"
    assert progress.exercises_folder(tmp_path) != course / "exercises"
