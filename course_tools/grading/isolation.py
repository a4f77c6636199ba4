"""``grade()``: run an exercise's tests on a function whose calls run in another process.

One engine serves ``check()``, ``grade()`` and the batch command: the grader tests run in
the calling process and compute the answer key there; the student's function runs in a
separate process (``remote.AnswerServer``) that receives the tests' inputs and returns
plain answers (``wire``). For ``check()`` and ``grade()`` the function travels by cloudpickle
to a fresh interpreter (never a fork: forking after torch has started threads can
deadlock) with resource limits; the batch command adds the bubblewrap sandbox
(``sandbox``). A time limit kills the process tree; finished tests keep their verdicts.
"""

import shutil
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import cloudpickle
import torch

from course_lib.validation import check_number
from course_tools.grading.core import GraderTest, run_test, shorten
from course_tools.grading.registry import Exercise, load_exercise
from course_tools.grading.remote import (
    AnswerServer,
    GraderFailed,
    RunStopped,
    TimeLimit,
    private_folder,
    self_study_sandbox,
)
from course_tools.grading.results import GradeResult, TestResult
from course_tools.grading.sandbox import Sandbox


def grade(exercise_id: str, fn: Callable, *, timeout: float = 60.0, isolated: bool = True) -> GradeResult:
    """Run the tests of ``exercise_id`` on ``fn`` and return the points with per-test feedback.

    ``timeout`` (seconds) bounds the whole run, the start of ``fn``'s process included (a few
    seconds: it imports torch); tests not finished by then score 0. Exceptions, wrong answers,
    hangs and crashes of ``fn`` become feedback, never exceptions here. ``isolated=False`` calls
    ``fn`` in this process instead: faster, but with no time limit and no protection from
    ``fn``; it is meant for trusted code such as the course's own tests of the grader.
    Unknown ``exercise_id`` raises ValueError naming the known ones.
    """
    exercise = load_exercise(exercise_id)
    if not callable(fn):
        raise TypeError(f"fn must be the function to grade, got {type(fn).__name__}")
    check_number("timeout", timeout, above=0, unit="seconds")
    if not isolated:
        return GradeResult(exercise.id, [run_test(test, fn) for test in exercise.tests])
    try:
        payload = _pickle(fn)
    except Exception as error:  # noqa: BLE001 - whatever pickling raises, the student gets a message
        name = getattr(fn, "__name__", "the function")
        return not_run(exercise, f"could not send {name} to the grading process: {type(error).__name__}: {error}")
    spec = {"kind": "pickle", "exercise": exercise.id, "forbidden": list(exercise.forbidden),
            "payload": torch.frombuffer(bytearray(payload), dtype=torch.uint8)}
    folder = private_folder()
    try:
        result, _ = run_tests(exercise, spec, self_study_sandbox(folder), timeout=timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def run_tests(exercise: Exercise, spec: dict, sandbox: Sandbox, *, timeout: float,
              load_timeout: float | None = None) -> tuple[GradeResult, list[str]]:
    """Start the submission's process in ``sandbox``, load ``spec`` there and run every test against it.

    ``timeout`` bounds the tests; with ``load_timeout`` (a notebook that runs its cells first) the
    load has a limit of its own and the tests' clock starts when the function is ready, else
    ``timeout`` bounds both. Returns the result and the notes the submission's process reported
    while loading (a notebook's cell errors). The process tree is dead when this returns.

    A failure of the grader itself on this submission (its process cannot start, ``MemoryError``,
    a bug) is this submission's result, every test 0 and "not graded" with the reason, never an
    exception: ``check()`` reports it and a batch goes on with the next notebook.
    """
    try:
        return _run_tests(exercise, spec, sandbox, timeout=timeout, load_timeout=load_timeout)
    except (Exception, GraderFailed) as error:  # noqa: BLE001 - one submission's failure, not the caller's
        cause = error.__cause__ if isinstance(error, GraderFailed) else error
        what = ": ".join(part for part in (type(cause).__name__, str(cause)) if part)  # MemoryError has no message
        return not_run(exercise, shorten(f"the grader could not grade this submission: {what}")), []


def _run_tests(exercise: Exercise, spec: dict, sandbox: Sandbox, *, timeout: float,
               load_timeout: float | None) -> tuple[GradeResult, list[str]]:
    limit = timeout if load_timeout is None else load_timeout
    try:
        server = AnswerServer(spec, sandbox, deadline=time.monotonic() + limit)
    except RunStopped as stop:
        reason = stop.reason
        if isinstance(stop, TimeLimit):
            reason = (f"time limit of {limit:g} s reached before your function was ready (starting Python "
                      "with torch takes a few seconds; a notebook runs all its cells first)")
        return not_run(exercise, reason), []
    if load_timeout is not None:
        server.deadline = time.monotonic() + timeout
    with server:
        finished: list[TestResult] = []
        for test in exercise.tests:
            try:
                finished.append(run_test(test, server.function()))
            except RunStopped as stop:
                return _stopped(exercise, finished, stop, timeout, server.log_tail()), server.notes
    return GradeResult(exercise.id, finished), server.notes


def _stopped(exercise: Exercise, finished: list[TestResult], stop: RunStopped, timeout: float,
             last_output: str) -> GradeResult:
    """Every test not finished scores 0, the interrupted one saying what stopped the run."""
    pending = exercise.tests[len(finished):]
    current = pending[0].name
    if isinstance(stop, TimeLimit):
        cause = f"time limit of {timeout:g} s reached"
        message, first = cause, f"{cause} while running this test (an endless loop, or far too slow?)"
    else:
        cause = stop.reason
        message = f"{cause} while running test {current}; its last output: {last_output or '(none)'}"
        first = f"{cause} while running this test"
    rest = _zeros(pending[1:], f"not run: {cause} while running test {current}")
    return GradeResult(exercise.id, finished + _zeros(pending[:1], first) + rest, message=message)


def not_run(exercise: Exercise, reason: str) -> GradeResult:
    """A zero score for every test of ``exercise``, each saying ``reason``."""
    return GradeResult(exercise.id, _zeros(exercise.tests, f"not run: {reason}"), message=reason, ran=False)


def _pickle(fn: Callable) -> bytes:
    """cloudpickle ``fn``; a function from a module the answering process may not import goes by value."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    by_value = module is not None and _needs_by_value(module)
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(fn)
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _needs_by_value(module: ModuleType) -> bool:
    """True for a user module (e.g. a test file): not __main__, not course_lib, not installed."""
    name, file = module.__name__, getattr(module, "__file__", None)
    if name == "__main__" or name.partition(".")[0] == "course_lib" or file is None:
        return False
    if name in cloudpickle.list_registry_pickle_by_value():
        return False  # registered by someone else: leave it registered
    roots = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return not any(Path(file).resolve().is_relative_to(root) for root in roots)


def _zeros(tests: Sequence[GraderTest], feedback: str) -> list[TestResult]:
    return [TestResult(test.name, 0, test.points, False, feedback, 0.0) for test in tests]
