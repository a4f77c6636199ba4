"""course_tools.grading: solutions score full marks, stubs and mutants lose points, bad code cannot break it.

Runs the grader for real in worker processes (~2 s each: a fresh Python that
imports torch) for the solutions, stubs and failure paths; the mutant suite uses
the documented in-process path ``grade(..., isolated=False)`` to stay fast.
"""

import resource
import threading
import time
import warnings
from pathlib import Path

import nbformat
import pytest
import torch
from grader_mutants import (
    ALTERNATIVES,
    CHEATS,
    EXACTLY_FAILS,
    MISTAKE_FEEDBACK,
    MODULES,
    MUTANTS,
    SCRIBBLES,
    TRIVIAL,
    TRIVIAL_FEEDBACK,
)
from mutants.misbehaving import (
    Unloadable,
    correct,
    exit_process,
    hang_when_causal,
    loop_forever,
    print_then_answer,
    raise_value_error,
)

from course_lib import attention
from course_tools.grading import (
    GradeResult,
    TestResult,
    check,
    exercise_ids,
    format_report,
    grade,
    grader_test,
    load_exercise,
)

ROOT = Path(__file__).resolve().parents[1]
QUIZ = "ex08_interview_quiz"  # answers are letters, not a function of inputs: tests/test_quiz.py grades it
EXERCISES = [exercise_id for exercise_id in exercise_ids() if exercise_id != QUIZ]


def notebook_function(path: Path) -> object:
    """The graded function of a notebook: exec its code cells up to the one defining it."""
    notebook = nbformat.read(path, as_version=4)
    name = notebook.metadata["course_lib"]["function"]
    namespace = {"__name__": f"notebook_{path.parent.name}_{path.stem}"}  # not importable: pickled by value
    for cell in notebook.cells:
        if cell.cell_type == "code":
            exec(compile(cell.source, f"{path.name}", "exec"), namespace)
            if f"def {name}(" in cell.source:
                return namespace[name]
    raise AssertionError(f"{path} has no cell defining {name}")


def feedback(result: GradeResult) -> dict[str, str]:
    return {test.name: test.feedback for test in result.tests}


def failed(result: GradeResult) -> set[str]:
    return {test.name for test in result.tests if not test.passed}


# --- the committed notebooks ---------------------------------------------------------------


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_solution_scores_full_marks_and_check_prints_the_report(exercise_id, capsys):
    result = check(exercise_id, notebook_function(ROOT / "solutions" / f"{exercise_id}.ipynb"))
    assert (result.score, result.max_score, result.message) == (10, 10, "")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"{exercise_id}: {load_exercise(exercise_id).title}"
    assert printed[1:-1] == [
        f"✓ {t.name} ({t.points}/{t.points}): {t.description}" for t in load_exercise(exercise_id).tests
    ]
    assert printed[-1] == "Score: 10/10"


@pytest.mark.parametrize(
    "exercise_id", [e for e in EXERCISES if "long_sequence" in {test.name for test in load_exercise(e).tests}]
)
def test_long_sequence_runs_in_seconds_and_small_memory_for_the_solution(exercise_id):
    result = grade(exercise_id, notebook_function(ROOT / "solutions" / f"{exercise_id}.ipynb"))
    long = next(test for test in result.tests if test.name == "long_sequence")
    assert long.passed and long.seconds < 15, long
    # ru_maxrss of children is the peak of the largest child reaped so far: an upper bound for this worker.
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    assert peak_gib < 2.5, f"a grading worker peaked at {peak_gib:.2f} GiB"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_exercise_stub_scores_zero_and_shows_the_hint(exercise_id):
    result = grade(exercise_id, notebook_function(ROOT / "exercises" / f"{exercise_id}.ipynb"))
    assert (result.score, result.max_score) == (0, 10)
    for text in feedback(result).values():
        assert f"raised NotImplementedError: {exercise_id}: " in text


# --- mutants: every test is needed, every mistake costs points -----------------------------


def test_every_registered_exercise_has_a_mutants_module_and_every_module_an_exercise():
    """A new grader needs tests/mutants/<its id>.py (CONTRIBUTING.md, recipe 3): no grader test unproven."""
    registered = set(exercise_ids())
    missing, stray = sorted(registered - set(MODULES)), sorted(set(MODULES) - registered)
    assert not missing, f"no tests/mutants/<id>.py for the registered exercises {missing}: add their MUTANTS"
    assert not stray, f"tests/mutants/ has modules for no registered exercise: {stray} (rename them to a grader's id)"
    without = sorted(exercise_id for exercise_id, module in MODULES.items() if not getattr(module, "MUTANTS", None))
    assert not without, f"these tests/mutants/ modules define no MUTANTS: {without}"


@pytest.fixture(scope="module")
def mutant_results() -> dict[str, GradeResult]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The use of `x.T`")  # the .T mutants, on purpose
        return {m.name: grade(ex, m.fn, isolated=False) for ex, mutants in MUTANTS.items() for m in mutants}


@pytest.fixture(scope="module")
def trivial_results() -> dict[str, GradeResult]:
    return {fn.__name__: grade(ex, fn, isolated=False) for ex, fns in TRIVIAL.items() for fn in fns}


@pytest.mark.parametrize(
    ("exercise_id", "mutant"), [pytest.param(ex, m, id=m.name) for ex, ms in MUTANTS.items() for m in ms]
)
def test_mutant_loses_points_on_the_tests_it_targets(exercise_id, mutant, mutant_results):
    result = mutant_results[mutant.name]
    assert result.score < result.max_score
    assert mutant.targets <= failed(result), f"{mutant.name} passed {sorted(mutant.targets - failed(result))}"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_mutants_together_fail_every_grader_test(exercise_id, mutant_results):
    assert set(MUTANTS) == set(exercise_ids())
    caught = set().union(*(failed(mutant_results[m.name]) for m in MUTANTS[exercise_id]))
    assert caught == {test.name for test in load_exercise(exercise_id).tests}


def test_every_mutant_names_its_mistake_in_one_short_line():
    """The instructor guide lists each exercise's mutants as its common mistakes, one line each."""
    for exercise_id, mutants in MUTANTS.items():
        for mutant in mutants:
            mistake = mutant.mistake
            assert isinstance(mistake, str) and mistake.strip(), mutant.name
            assert mistake[0].islower() and not mistake.endswith("."), f"{mutant.name}: {mistake!r}"
            assert len(mistake) <= 90 and "\n" not in mistake, f"{mutant.name}: {mistake!r}"
        mistakes = [mutant.mistake for mutant in mutants]
        assert len(set(mistakes)) == len(mistakes), f"{exercise_id} repeats a mistake"


@pytest.mark.parametrize(
    ("mutant", "blame"),
    [
        ("ex01_transpose_with_T", "the batch dims are mishandled: use k.transpose(-2, -1), not k.T"),
        ("ex01_no_sqrt_d", "the answer is wrong even without batch dims: fix the `values` test first"),
    ],
)
def test_batch_dims_feedback_says_whether_the_batch_or_the_formula_is_wrong(mutant, blame, mutant_results):
    assert feedback(mutant_results[mutant])["batch_dims"].endswith(blame)


@pytest.mark.parametrize(("mutant", "test", "says"), MISTAKE_FEEDBACK, ids=[f"{m}-{t}" for m, t, _ in MISTAKE_FEEDBACK])
def test_feedback_names_the_mistake(mutant, test, says, mutant_results):
    assert says in feedback(mutant_results[mutant])[test]


@pytest.mark.parametrize(("mutant", "tests"), EXACTLY_FAILS, ids=[m for m, _ in EXACTLY_FAILS])
def test_mistake_costs_exactly_these_tests(mutant, tests, mutant_results):
    assert failed(mutant_results[mutant]) == tests


@pytest.mark.parametrize(
    ("exercise_id", "fn"), [pytest.param(ex, fn, id=fn.__name__) for ex, fns in ALTERNATIVES.items() for fn in fns]
)
def test_correct_answers_unlike_the_solution_score_full_marks(exercise_id, fn):
    result = grade(exercise_id, fn, isolated=False)
    assert result.score == result.max_score, {test.name: test.feedback for test in result.tests if not test.passed}


@pytest.mark.parametrize(
    ("exercise_id", "fn"), [pytest.param(ex, fn, id=fn.__name__) for ex, fns in TRIVIAL.items() for fn in fns]
)
def test_zeros_a_copied_input_or_random_numbers_score_nothing(exercise_id, fn, trivial_results):
    """A property (shape, no leak, a constant) holds for answers that compute nothing: its points need both."""
    assert trivial_results[fn.__name__].score == 0, feedback(trivial_results[fn.__name__])


@pytest.mark.parametrize(("answer", "test", "says"), TRIVIAL_FEEDBACK, ids=[f"{a}-{t}" for a, t, _ in TRIVIAL_FEEDBACK])
def test_feedback_says_why_a_trivial_answer_earns_nothing(answer, test, says, trivial_results):
    assert says in feedback(trivial_results[answer])[test]


def test_every_exercise_with_inputs_has_its_trivial_answers():
    assert set(TRIVIAL) == set(EXERCISES), f"no TRIVIAL in tests/mutants/ for {sorted(set(EXERCISES) - set(TRIVIAL))}"
    assert all(len(fns) == 3 for fns in TRIVIAL.values())


def test_the_causal_crossover_compares_with_the_unmasked_half_of_softmax():
    from course_tools.grading.exercises.ex10_crossover import crossover_key

    assert [crossover_key(d, d, d, chunk=c) for d, c in ((64, 64), (32, 16), (16, 128))] == [256, 96, 288]  # 2(d + C)
    assert [crossover_key(d, d, d) for d in (16, 64)] == [16, 64]  # non-causal elu+1: N* = d


def test_the_ex09_reference_is_the_course_performer_output():
    """The grader's batched 60 000-redraw key draws the panels PerformerFeatures draws and computes its output."""
    from course_tools.grading.exercises import ex09_estimator_bias as ex09
    from course_lib.random_features import PerformerFeatures

    q, k, v = ex09.problem()
    for kind in ex09.KINDS:
        omegas = ex09.draw_omegas(3, 6, 4, torch.Generator().manual_seed(0), kind)  # [3, 6, 4]
        for omega, out in zip(omegas, ex09.performer_outputs(q, k, v, omegas), strict=True):
            features = PerformerFeatures(4, 6, orthogonal=kind == "orthogonal", generator=torch.Generator())
            features.omega = omega
            torch.testing.assert_close(out, attention.linear_attention(q, k, v, features), rtol=1e-12, atol=1e-12)
        same = ex09.draw_omegas(1, 6, 4, torch.Generator().manual_seed(5), kind)[0]
        drawn = PerformerFeatures(4, 6, orthogonal=kind == "orthogonal", generator=torch.Generator().manual_seed(5))
        if kind == "iid":  # the same stream: the same panel
            torch.testing.assert_close(same, drawn.omega)
        else:  # one batched QR per panel: the same construction, checked on its properties
            unit = same[:4] / same[:4].norm(dim=-1, keepdim=True)
            torch.testing.assert_close(unit @ unit.T, torch.eye(4, dtype=torch.float64))


def test_property_tests_take_seconds_and_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    for exercise_id, fns in ALTERNATIVES.items():
        result = grade(exercise_id, fns[0], isolated=False)
        assert sum(test.seconds for test in result.tests) < 20, result.tests  # ~0.1 s idle; far more on a busy CPU
    assert torch.equal(torch.get_rng_state(), state)


# --- inputs cannot be used to cheat ---------------------------------------------------------


@pytest.mark.parametrize(("exercise_id", "cheat"), CHEATS.items())
def test_zeroing_an_input_in_place_does_not_earn_full_marks(exercise_id, cheat):
    result = grade(exercise_id, cheat, isolated=False)
    assert result.score < result.max_score and "values" in failed(result)


@pytest.mark.parametrize(("exercise_id", "scribble"), SCRIBBLES.items())
def test_scribbling_on_inputs_after_computing_keeps_full_marks(exercise_id, scribble):
    assert grade(exercise_id, scribble, isolated=False).score == 10


# --- bad student code becomes feedback --------------------------------------------------------


def test_endless_loop_scores_zero_at_the_time_limit_after_threaded_torch():
    torch.randn(512, 512) @ torch.randn(512, 512)  # torch's thread pool is now running in this process
    start = time.monotonic()
    # 10 s: the limit counts the child's start, and on a loaded 2-core machine importing torch alone took over 5 s
    result = grade("ex01_softmax_attention", loop_forever, timeout=10)
    assert time.monotonic() - start < 10 + 5
    assert (result.score, result.message, result.ran) == (0, "time limit of 10 s reached", True)  # a test ran
    texts = list(feedback(result).values())
    assert texts[0].startswith("time limit of 10 s reached while running this test")
    assert set(texts[1:]) == {"not run: time limit of 10 s reached while running test shape_and_dtype"}


def test_finished_tests_keep_their_verdicts_after_a_timeout():
    result = grade("ex01_softmax_attention", hang_when_causal, timeout=8)
    assert [test.passed for test in result.tests[:2]] == [True, True] and result.score == 4
    assert feedback(result)["causal_values"].startswith("time limit of 8 s reached while running this test")
    assert feedback(result)["batch_dims"] == "not run: time limit of 8 s reached while running test causal_values"


def test_exception_in_student_code_is_feedback():
    result = grade("ex01_softmax_attention", raise_value_error)
    assert result.score == 0 and result.message == ""
    assert all(
        "raise_value_error(inputs of shape" in t and "raised ValueError: boom" in t for t in feedback(result).values()
    )


def test_student_prints_cannot_corrupt_the_protocol():
    assert grade("ex01_softmax_attention", print_then_answer).score == 10


def test_a_crash_of_the_students_process_is_a_zero_score_with_a_message():
    result = grade("ex01_softmax_attention", exit_process)
    stopped = "the process running your function stopped (exit code 3)"
    assert result.score == 0
    assert result.message.startswith(f"{stopped} while running test shape_and_dtype")
    assert result.message.endswith("its last output: about to crash")
    assert feedback(result)["shape_and_dtype"] == f"{stopped} while running this test"
    assert feedback(result)["values"] == f"not run: {stopped} while running test shape_and_dtype"


def test_function_its_process_cannot_load_is_a_zero_score_with_a_message():
    result = grade("ex01_softmax_attention", Unloadable())
    message = "the process running your function could not load it: RuntimeError: cannot be rebuilt here"
    assert (result.score, result.message, result.ran) == (0, message, False)
    assert set(feedback(result).values()) == {f"not run: {message}"}


def test_unpicklable_function_is_a_zero_score_with_a_message():
    lock = threading.Lock()

    def locked(q, k, v, causal=False):
        with lock:
            return attention.softmax_attention(q, k, v, causal=causal)

    result = grade("ex01_softmax_attention", locked)
    assert result.score == 0 and result.message.startswith("could not send locked to the grading process: TypeError")
    assert all(text.startswith("not run: could not send locked") for text in feedback(result).values())


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda q, k, v, causal=False: [[0.0]], "expected a torch.Tensor of shape [5, 3] = [..., n, dv], got list"),
        (lambda q, k, v, causal=False: None, "expected a torch.Tensor of shape [5, 3] = [..., n, dv], got NoneType"),
        (lambda q, k, v, causal=False: q, "output has shape [5, 4], expected [5, 3] = [..., n, dv]"),
        (
            lambda q, k, v, causal=False: correct(q, k, v).float(),
            "output has dtype torch.float32, expected torch.float64",
        ),
        (
            lambda q, k, v, causal=False: correct(q, k, v) * torch.nan,
            "output holds 15 NaN/inf entries of 15 (first at index (0, 0))",
        ),
        (lambda q, k, v, causal=False: exit(), "raised SystemExit: None"),
    ],
    ids=["list", "none", "shape", "dtype", "nan", "exit"],
)
def test_garbage_return_is_feedback(fn, message):
    result = grade("ex01_softmax_attention", fn, isolated=False)
    assert result.score < 10 and message in feedback(result)["shape_and_dtype"]


def test_value_error_names_the_worst_entry():
    result = grade(
        "ex01_softmax_attention", lambda q, k, v, causal=False: correct(q, k, v, causal) * 1.5, isolated=False
    )
    assert feedback(result)["values"].startswith("output differs from the reference: max |error| ")
    assert "at index (" in feedback(result)["values"] and "1/sqrt(d)" in feedback(result)["values"]


# --- API contract -----------------------------------------------------------------------------


def test_unknown_exercise_id_raises_naming_the_known_ids():
    with pytest.raises(ValueError, match="unknown exercise id 'ex99'; known exercises: ex00_running_mean, ex01_softmax_attention, "):
        grade("ex99", correct)


def test_bad_arguments_raise():
    with pytest.raises(TypeError, match="fn must be the function to grade, got NoneType"):
        grade("ex01_softmax_attention", None)
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0, got 0"):
        grade("ex01_softmax_attention", correct, timeout=0)
    with pytest.raises(ValueError, match="points must be a positive int, got 0"):
        grader_test(points=0)


def test_check_is_skipped_during_batch_grading(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_LIB_GRADING", "1")
    assert check("ex01_softmax_attention", loop_forever) is None
    assert capsys.readouterr().out == "check() skipped during batch grading\n"


def test_report_marks_failures_and_ends_with_the_score_line():
    tests = [
        TestResult("values", 0, 2, False, "wrong\nvery wrong", 0.1),
        TestResult("batch_dims", 2, 2, True, "ok", 0.2),
    ]
    report = format_report(GradeResult("ex01_softmax_attention", tests, message="time limit of 5 s reached"))
    assert report.splitlines()[1:] == [
        "✗ values (0/2): wrong",
        "    very wrong",
        "✓ batch_dims (2/2): ok",
        "Note: time limit of 5 s reached",
        "Score: 2/4",
    ]


def test_result_round_trips_through_a_dict():
    result = GradeResult("ex01_softmax_attention", [TestResult("values", 2, 2, True, "ok", 0.5)], message="m")
    assert GradeResult.from_dict(result.to_dict()) == result
    unrun = GradeResult("ex01_softmax_attention", [TestResult("values", 0, 2, False, "not run: x", 0.0)], ran=False)
    assert GradeResult.from_dict(unrun.to_dict()) == unrun
    assert repr(result) == "GradeResult('ex01_softmax_attention', score=2/2, message='m')"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_registry_entries(exercise_id):
    exercise = load_exercise(exercise_id)
    assert exercise.max_score == 10 and exercise.title and exercise.function_name
    assert all(test.description and test.points >= 1 for test in exercise.tests)


# --- the model answer is out of bounds while graded ---------------------------------------


def calling(reference: str):
    """A submission that hands every call to ``reference`` (a dotted name), resolved when called."""

    def submission(*args, **kwargs):
        import importlib

        module, _, name = reference.rpartition(".")
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    return submission


@pytest.mark.parametrize("exercise_id", [e for e in EXERCISES if load_exercise(e).forbidden])
def test_calling_the_model_answer_scores_zero_and_the_notebook_says_so(exercise_id):
    exercise = load_exercise(exercise_id)
    result = grade(exercise_id, calling(exercise.forbidden[0]))
    assert result.score == 0, feedback(result)
    assert all("is not allowed in this exercise" in text for text in feedback(result).values())
    stated = "\n".join(cell.source for cell in nbformat.read(ROOT / "exercises" / f"{exercise_id}.ipynb",
                                                               as_version=4).cells if cell.cell_type == "markdown")
    assert "not allowed in this exercise" in stated and all(f"`{name}`" in stated for name in exercise.forbidden)


def test_a_time_limit_too_short_to_start_blames_the_start_not_the_function():
    result = grade("ex01_softmax_attention", correct, timeout=0.5)
    assert result.score == 0
    assert result.message.startswith("time limit of 0.5 s reached before your function was ready (starting Python")
    assert "endless loop" not in result.message and "endless loop" not in " ".join(feedback(result).values())


@pytest.mark.parametrize("name", ["ex01_no_sqrt_d", "ex04_global_rng", "ex09_global_rng", "ex10_no_feature_cost"])
def test_answers_from_another_process_get_the_same_verdicts_as_in_process(name, mutant_results):
    """Generators (ex04, ex09), torch's global generator and returned functions (ex10) cross the channel.

    A mutant that draws from the global generator gets other random numbers in its own process,
    so only its targeted tests are compared; the deterministic ones must agree test by test.
    """
    exercise_id, mutant = next((ex, m) for ex, ms in MUTANTS.items() for m in ms if m.name == name)
    remote = grade(exercise_id, mutant.fn)
    assert mutant.targets <= failed(remote), feedback(remote)
    if "global_rng" not in name:
        assert [(t.name, t.passed) for t in remote.tests] == [(t.name, t.passed) for t in mutant_results[name].tests]
