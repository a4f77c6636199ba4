"""``grade()``: run an exercise's tests on a function in a fresh Python process.

The function travels by cloudpickle to ``python -m course_lib.grading.worker``
(a new interpreter, never a fork: forking after torch has started threads can
deadlock). The worker runs on the CPU and reports one JSON line per finished
test; a time limit kills it, and whatever it finished keeps its verdict.
"""

import json
import math
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import cloudpickle

from course_lib.grading.core import GraderTest, run_test
from course_lib.grading.registry import Exercise, load_exercise
from course_lib.grading.results import GradeResult, TestResult

WORKER = "course_lib.grading.worker"


def grade(exercise_id: str, fn: Callable, *, timeout: float = 60.0, isolated: bool = True) -> GradeResult:
    """Run the tests of ``exercise_id`` on ``fn`` and return the points with per-test feedback.

    ``timeout`` (seconds) bounds the whole run, interpreter start included; tests
    not finished by then score 0. Exceptions, wrong answers, hangs and crashes of
    ``fn`` become feedback, never exceptions here. ``isolated=False`` runs the
    tests in this process instead: faster, but with no time limit and no
    protection from ``fn``; it is meant for trusted code such as the course's own
    tests of the grader. Unknown ``exercise_id`` raises ValueError naming the known ones.
    """
    exercise = load_exercise(exercise_id)
    if not callable(fn):
        raise TypeError(f"fn must be the function to grade, got {type(fn).__name__}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0 or math.isinf(timeout):
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    if not isolated:
        return GradeResult(exercise.id, [run_test(test, fn) for test in exercise.tests])
    try:
        payload = _pickle(exercise.id, fn)
    except Exception as error:  # noqa: BLE001 - whatever pickling raises, the student gets a message
        name = getattr(fn, "__name__", "the function")
        return not_run(exercise, f"could not send {name} to the grading process: {type(error).__name__}: {error}")
    return _collect(exercise, *_run_worker(payload, timeout))


def not_run(exercise: Exercise, reason: str) -> GradeResult:
    """A zero score for every test of ``exercise``, each saying ``reason``."""
    return GradeResult(exercise.id, _zeros(exercise.tests, f"not run: {reason}"), message=reason)


def _pickle(exercise_id: str, fn: Callable) -> bytes:
    """cloudpickle (exercise_id, fn); a function from a module the worker may not import goes by value."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    by_value = module is not None and _needs_by_value(module)
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps((exercise_id, fn))
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


def _run_worker(payload: bytes, timeout: float) -> tuple[str, str, int, float | None]:
    """Feed ``payload`` to a fresh worker; (stdout, tail of stderr, exit code, time limit if it was hit)."""
    with tempfile.TemporaryFile() as log:  # stderr (and student prints) on disk: an endless print cannot fill memory
        process = subprocess.Popen(
            [sys.executable, "-m", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "COURSE_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": ""},
            start_new_session=True,  # its own process group, so a kill reaches anything it started
        )
        try:
            out, _ = process.communicate(payload, timeout=timeout)
            expired = None
        except subprocess.TimeoutExpired:
            _kill(process)
            out, _ = process.communicate()  # the lines written before the kill
            expired = timeout
        except BaseException:  # e.g. an interrupted notebook kernel: leave no worker behind
            _kill(process)
            process.wait()
            raise
        log.seek(max(0, log.seek(0, os.SEEK_END) - 400))
        err = log.read().decode(errors="replace")
    return out.decode(errors="replace"), err, process.returncode, expired


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (AttributeError, ProcessLookupError, PermissionError):  # no process groups, or already gone
        process.kill()


def _collect(exercise: Exercise, out: str, err: str, returncode: int, expired: float | None) -> GradeResult:
    """Turn the worker's JSON lines and exit into a ``GradeResult`` covering every test.

    ``expired`` is the time limit in seconds if the worker was killed for reaching it.
    """
    finished: list[TestResult] = []
    error = ""
    for line in out.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        if "error" in record:
            error = str(record["error"])
        elif len(finished) < len(exercise.tests) and record.get("name") == exercise.tests[len(finished)].name:
            finished.append(TestResult.from_dict(record))
    pending = exercise.tests[len(finished) :]
    if not pending:
        return GradeResult(exercise.id, finished)
    if error:  # the worker could not start grading: every test says why
        return GradeResult(exercise.id, finished + _zeros(pending, f"not run: {error}"), message=error)
    current = pending[0].name
    if expired is not None:
        cause = f"time limit of {expired:g} s reached"
        message = cause
        first = f"{cause} while running this test (an endless loop, or far too slow?)"
    else:
        cause = f"the grading process stopped (exit code {returncode})"
        message = f"{cause} while running test {current}; its last output: {err.strip() or '(none)'}"
        first = f"{cause} while running this test"
    rest = _zeros(pending[1:], f"not run: {cause} while running test {current}")
    return GradeResult(exercise.id, finished + _zeros(pending[:1], first) + rest, message=message)


def _zeros(tests: Sequence[GraderTest], feedback: str) -> list[TestResult]:
    return [TestResult(test.name, 0, test.points, False, feedback, 0.0) for test in tests]
