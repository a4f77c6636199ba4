"""The grading worker: ``python -m course_lib.grading.worker``, started by ``grade()``.

Reads one cloudpickled ``(exercise_id, fn)`` from stdin, runs the exercise's tests
on ``fn`` and writes one JSON line per finished test to the original stdout. fd 1
is pointed at stderr first, so nothing the student prints can corrupt that channel.
A problem before the first test (unpickling, unknown exercise) is one line
``{"error": "..."}`` and exit status 1.
"""

import json
import os
import sys
from dataclasses import asdict
from typing import IO


def _emit(channel: IO[str], record: dict) -> None:
    channel.write(json.dumps(record) + "\n")
    channel.flush()


def main() -> int:
    """Run the tests named by the payload on stdin; see the module docstring."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # student prints (Python or C level) now go to stderr
    try:
        import cloudpickle

        from course_lib.grading.core import run_test
        from course_lib.grading.registry import load_exercise

        exercise_id, fn = cloudpickle.loads(sys.stdin.buffer.read())
        exercise = load_exercise(exercise_id)
    except Exception as error:  # noqa: BLE001 - reported to the parent, which owns the message
        _emit(channel, {"error": f"the grading process could not load the function: {type(error).__name__}: {error}"})
        return 1
    for test in exercise.tests:
        _emit(channel, asdict(run_test(test, fn)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
