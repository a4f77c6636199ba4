"""The submission's side of grading: ``python -m course_tools.grading.answers``, which only produces answers.

Started by ``remote.AnswerServer`` (in a ``sandbox.Sandbox`` for a graded batch) as
``python -m course_tools.grading.answers IN_FD OUT_FD`` (on Windows two handles: ``channel_fd``), it
reads frames (``wire``) from the first and writes frames to the second; its stdout and stderr are a log file.

1. A ``load`` frame names the function: cloudpickled bytes (``check()`` and ``grade()``), or a
   notebook in the private folder, whose code cells run here one by one in an IPython shell
   (each bounded by ``cell_timeout`` via SIGALRM where there is one; the grader's wall clock is the
   hard limit, and on Windows, which has no SIGALRM, the only one).
   Before any of the student's code runs, the exercise's ``FORBIDDEN`` references (the model
   answer it asks for) are replaced by a function that raises ``NotAllowedError``, and the
   grader tests' modules (which compute the answer keys) cannot be imported.
2. It answers ``ready`` with the function's name and the notebook's cell errors.
3. Each ``call`` frame: rebuild the arguments (generators from their state), call the function,
   reply ``ok`` with the result (a returned function stays here, sent as a handle), the new
   states of the generators, and whether torch's global generator moved (the grader then
   draws once from its own, so a test that watches it sees the same as in one process), or
   ``raised`` with the exception's type and message.

There is no answer key and no verdict here: the grader compares in its own process.
"""

import importlib
import importlib.abc
import io
import os
import signal
import sys
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from course_tools.grading.core import BATCH_ENV_VAR

GRADER_TESTS = "course_tools.grading.exercises"


class NotAllowedError(RuntimeError):
    """Raised by a reference implementation the exercise asks the student to write themselves."""


class CellTimeout(BaseException):
    """A notebook cell ran past its time (BaseException, so a student's ``except Exception`` cannot catch it)."""


def forbid(references: tuple[str, ...], exercise_id: str, also: dict | None = None) -> None:
    """Replace every module attribute (and entry of ``also``) bound to one of ``references`` (dotted names)
    by a function that raises ``NotAllowedError``."""
    for reference in references:
        module_name, _, name = reference.rpartition(".")
        original = getattr(importlib.import_module(module_name), name)

        def refuse(*args: object, _name: str = reference, **kwargs: object) -> None:
            raise NotAllowedError(f"{_name} is not allowed in this exercise ({exercise_id}): it is the model "
                                  "answer; write it yourself")

        refuse.__name__ = name
        namespaces = [getattr(module, "__dict__", {}) for module in list(sys.modules.values())] + [also or {}]
        for namespace in namespaces:
            for attribute, value in list(namespace.items()):
                if value is original:
                    namespace[attribute] = refuse


def run_notebook(path: Path, cell_timeout: float) -> tuple[list[str], dict]:
    """Run the notebook's code cells in one IPython shell: ('cell N raised ...' for each that failed, its namespace).

    A cell stopped by ``NotAllowedError`` is not listed: exercise notebooks compare with the
    reference in a "try it" cell, which cannot work while graded (the grader tests say it
    when the graded function itself calls it)."""
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell

    os.environ[BATCH_ENV_VAR] = "1"  # its check() cells skip
    shell = InteractiveShell.instance()
    errors = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells, start=1):
        if cell.cell_type != "code":
            continue
        with _alarm(cell_timeout):
            result = shell.run_cell(cell.source, store_history=False)  # IPython records any exception
        error = result.error_before_exec or result.error_in_exec
        if isinstance(error, CellTimeout):
            errors.append(f"cell {index} ran past {cell_timeout:g} s and was stopped")
        elif error is not None and not isinstance(error, NotAllowedError):  # a "try it" cell's reference call
            errors.append(f"cell {index} raised {type(error).__name__}: {str(error)[:160]}")
    return errors, shell.user_ns


@contextmanager
def _alarm(seconds: float):
    """Raise ``CellTimeout`` in the block after ``seconds``; without SIGALRM (Windows) no limit here: the
    grader's wall clock stops the whole notebook instead."""
    def expire(signum, frame):
        raise CellTimeout

    if not hasattr(signal, "SIGALRM") or not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _NoGraders(importlib.abc.MetaPathFinder):
    """Refuses to import the grader tests (they compute the answer keys) in the submission's process."""

    def find_spec(self, name, path=None, target=None):
        if name.startswith(f"{GRADER_TESTS}."):
            raise ImportError(f"{name} holds the grader's answer keys; submissions cannot import it")
        return None


def load(spec: dict) -> tuple[Callable, list[str]]:
    """The function ``spec`` names, and notes on the way (notebook cell errors)."""
    sys.meta_path.insert(0, _NoGraders())
    forbidden, exercise_id = tuple(spec["forbidden"]), spec["exercise"]
    forbid(forbidden, exercise_id)
    if spec["kind"] == "pickle":
        import cloudpickle

        return cloudpickle.loads(spec["payload"].numpy().tobytes()), []
    notes, namespace = run_notebook(Path(spec["notebook"]), spec["cell_timeout"])
    forbid(forbidden, exercise_id, also=namespace)  # again: a reload in the notebook made new objects
    fn, name = namespace.get(spec["function"]), spec["function"]
    if fn is None or not callable(fn):
        problem = f"the notebook defines no {name}" if fn is None else f"{name} is a {type(fn).__name__}, not a function"
        raise LookupError("; ".join([problem, *notes]))
    return fn, notes


def receive(fd: int) -> object:
    """The grader's next frame. It is trusted, and its questions are as large as its tests make them
    (ex02's q, k, v: 192 MiB), so ``wire.MAX_FRAME_BYTES``, the cap on answers, does not apply."""
    import torch

    from course_tools.grading import wire

    return torch.load(io.BytesIO(wire.read_frame(fd, max_bytes=sys.maxsize)), weights_only=True)


def serve(fn: Callable, notes: list[str], channel: tuple[int, int]) -> None:
    """Answer ``call`` frames until ``bye`` or the end of the channel."""
    import torch

    from course_tools.grading import wire

    handles: list[Callable] = [fn]

    def outgoing(x: object) -> object:  # functions stay here, as handles
        if callable(x) and not isinstance(x, torch.Tensor):
            handles.append(x)
            return {wire.CALLABLE: len(handles) - 1, "name": str(getattr(x, "__name__", "function"))}
        if type(x) in (list, tuple):
            return type(x)(outgoing(item) for item in x)
        if type(x) is dict:
            return {key: outgoing(value) for key, value in x.items()}
        return x

    incoming, out = channel
    send = lambda *message: wire.write_frame(out, wire.pack(message))  # noqa: E731
    send("ready", str(getattr(fn, "__name__", "function")), notes)
    while True:
        try:
            message = receive(incoming)
        except wire.Closed:
            return
        if message[0] == "bye":
            return
        _, handle, encoded, threads = message
        args, kwargs, generators = wire.decode_arguments(encoded)
        torch.set_num_threads(threads)
        global_rng = torch.get_rng_state()  # a test may watch whether the function draws from it
        try:
            result = handles[handle](*args, **kwargs)
        except (Exception, SystemExit, KeyboardInterrupt) as error:  # noqa: BLE001 - the exception is the answer
            send("raised", type(error).__name__, str(error)[:2000])
            continue
        states = [g.get_state() for g in generators]
        moved = not torch.equal(torch.get_rng_state(), global_rng)
        try:
            payload = wire.pack(("ok", outgoing(result), states, moved))
        except Exception as error:  # noqa: BLE001 - e.g. an object torch.save cannot write
            payload = wire.pack(("unsendable", f"{type(error).__name__}: {str(error)[:300]}"))
        wire.write_frame(out, payload)


def channel_fd(number: int, mode: int) -> int:
    """The fd for a channel number the grader sent (``sandbox.inherited``): the number itself, or on
    Windows an fd opened on the inherited handle."""
    if os.name != "nt":
        return number
    import msvcrt

    return msvcrt.open_osfhandle(number, mode)


def main(argv: list[str]) -> int:
    from course_tools.grading import wire

    channel = (channel_fd(int(argv[0]), os.O_RDONLY), channel_fd(int(argv[1]), os.O_WRONLY))
    try:
        _, spec = receive(channel[0])
        fn, notes = load(spec)
    except BaseException as error:  # noqa: BLE001 - reported to the grader, which owns the message
        traceback.print_exc()
        reason = f"{type(error).__name__}: {str(error)[:500]}"
        wire.write_frame(channel[1], wire.pack(("failed", reason)))
        return 1
    serve(fn, notes, channel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
