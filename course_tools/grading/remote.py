"""The grader's side: the student's function as a ``RemoteFunction`` whose calls run in another process.

``AnswerServer`` starts ``python -m course_tools.grading.answers`` (in a ``sandbox.Sandbox``
for a graded batch, a plain child process for ``check()``), sends it the function to load
and waits until it is ready. Grader tests then receive a ``RemoteFunction`` in place of the
student's function: calling it sends the (cloned) arguments, waits for the answer within
the run's time limit and returns it as plain data (``wire``). The answer key and every
comparison stay in the grader's process; the submission's process never sees either.

A student's exception comes back as an exception of the same name (a subclass of the
builtin one where there is one, so hints that recognise it still work); the end of the
time limit raises ``TimeLimit`` and a dead process ``ProcessEnded``, both BaseExceptions so
the grader tests' ``except Exception`` cannot mistake them for the student's own errors. An
answer beyond ``wire``'s limits ends the run as ``ProcessEnded``; the grader failing to read
one (``MemoryError``) raises ``GraderFailed``, also a BaseException.
"""

import builtins
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from course_tools.grading import wire
from course_tools.grading.sandbox import Limits, Sandbox, inherited

SERVER = [sys.executable, "-m", "course_tools.grading.answers"]
LOG_TAIL_CHARS = 400


class StudentRaised(Exception):
    """Base of the exceptions rebuilt from the submission's process (their names are the original ones)."""


class RunStopped(BaseException):
    """The submission's process can answer no more; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TimeLimit(RunStopped):
    """The run's time limit was reached."""


class ProcessEnded(RunStopped):
    """The submission's process ended (or broke the channel) before answering."""


class GraderFailed(BaseException):
    """The grader itself failed while reading an answer (its ``__cause__``, e.g. ``MemoryError``): not the
    student's error, so ``isolation.run_tests`` reports the submission as not graded."""


def rebuild_exception(type_name: str, message: str) -> StudentRaised:
    """An exception named ``type_name`` carrying ``message`` (builtin names keep their builtin base class)."""
    name = type_name if type_name.isidentifier() else "Exception"
    builtin = getattr(builtins, name, None)
    bases = (StudentRaised,)
    if isinstance(builtin, type) and issubclass(builtin, Exception) and builtin.__init__ is Exception.__init__:
        bases = (builtin, StudentRaised)
    return type(name, bases, {"__str__": lambda self: message})(message)


class AnswerServer:
    """One submission's process and the channel to it; a context manager that kills it on exit.

    ``spec`` is the ``load`` frame (see ``answers``); ``deadline`` (``time.monotonic()``) is the
    hard limit for everything, loading included.
    """

    def __init__(self, spec: dict, sandbox: Sandbox, *, deadline: float):
        self.sandbox, self.deadline, self.notes, self.name = sandbox, deadline, [], "your function"
        to_server, self._to_server = os.pipe()
        self._from_server, from_server = os.pipe()
        try:
            argv = [*SERVER, str(inherited(to_server)), str(inherited(from_server))]  # as the child has them
            self.run = sandbox.start(argv, pass_fds=(to_server, from_server))  # its output: a file only we hold
            self.process = self.run.process
        finally:
            os.close(to_server)
            os.close(from_server)
        try:
            self._send(("load", spec))
            reply = self._receive()
        except wire.WireError as error:
            self.close()
            raise ProcessEnded(f"the process running your function wrote something that is not an answer ({error})")
        except BaseException:  # a time limit, an ended process, the grader's own failure: the tree and its cgroup go
            self.close()
            raise
        if reply[0] == "failed":
            self.close()
            raise ProcessEnded(f"the process running your function could not load it: {reply[1]}")
        if len(reply) != 3 or not isinstance(reply[1], str) or not all(isinstance(n, str) for n in reply[2]):
            self.close()
            raise ProcessEnded("the process running your function sent a malformed 'ready'")
        _, self.name, notes = reply
        self.notes = [*self.run.notes, *notes]  # a limit the platform could not set, then the notebook's own

    def __enter__(self) -> "AnswerServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill the submission's process tree (whatever it is doing) and close the channel."""
        self.run.stop()  # the whole tree, and its cgroup
        for fd in (self._to_server, self._from_server):
            try:
                os.close(fd)
            except OSError:
                pass

    def function(self, handle: int = 0, name: str | None = None) -> "RemoteFunction":
        return RemoteFunction(self, handle, name or self.name)

    def log_tail(self) -> str:
        """The last characters the submission printed (its stdout and stderr)."""
        return self.run.output_tail(LOG_TAIL_CHARS).decode(errors="replace").strip()

    def call(self, handle: int, args: tuple, kwargs: dict) -> object:
        encoded, generators = wire.encode_arguments(args, kwargs)
        question_bytes = self._send(("call", handle, encoded, torch.get_num_threads()))
        reply = self._receive(wire.answer_cap(question_bytes))
        if reply[0] == "raised":
            raise rebuild_exception(str(reply[1]), str(reply[2]))
        if reply[0] == "unsendable":
            raise wire.WireError(f"the answer could not be sent to the grader: {reply[1]}")
        if len(reply) != 4 or len(reply[2]) != len(generators):
            raise wire.WireError("the reply was not an answer frame")
        _, result, states, moved = reply
        for generator, state in zip(generators, states):
            generator.set_state(state)
        if moved:  # the function drew from torch's global generator: so does this process, once
            torch.rand(1)
        return self._functions(result)

    def _functions(self, x: object) -> object:
        if type(x) is dict and wire.CALLABLE in x:
            return self.function(int(x[wire.CALLABLE]), str(x.get("name", "function")))
        if type(x) in (list, tuple):
            return type(x)(self._functions(item) for item in x)
        if type(x) is dict:
            return {key: self._functions(value) for key, value in x.items()}
        return x

    def _send(self, message: tuple) -> int:
        """Send ``message``; the bytes its frame took."""
        payload = wire.pack(message)
        try:
            wire.write_frame(self._to_server, payload)
        except (BrokenPipeError, OSError):
            raise self._ended() from None
        return len(payload)

    def _receive(self, max_bytes: int = wire.SMALL_ANSWER_BYTES) -> tuple:
        """The next reply, at most ``max_bytes``. One that is not plain data fails this call (``WireError``); the
        end of the time limit, of the process or of ``wire``'s limits ends the run, and so does the grader
        failing to read it."""
        try:
            frame = wire.read_frame(self._from_server, deadline=self.deadline, max_bytes=max_bytes)
            reply = wire.unpack(frame, max_bytes)
        except wire.Expired:
            self.close()
            raise TimeLimit("time limit reached") from None
        except wire.Closed:
            raise self._ended() from None
        except wire.Refused as error:  # no honest answering process sends it: no later answer can be trusted
            self.close()
            raise ProcessEnded(f"the process running your function wrote something that is not an answer "
                               f"({error})") from None
        except wire.WireError:
            raise  # read whole, and not plain data: the channel is intact
        except Exception as error:  # noqa: BLE001 - the grader's own failure: kill the process before telling
            self.close()
            raise GraderFailed from error
        if type(reply) is not tuple or not reply or reply[0] not in ("ready", "failed", "raised", "ok", "unsendable"):
            raise wire.WireError("the reply was not an answer frame")
        return reply

    def _ended(self) -> ProcessEnded:
        try:
            code = self.process.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.close()
            code = self.process.returncode
        return ProcessEnded(f"the process running your function stopped (exit code {code})")


class RemoteFunction:
    """Calls the submission's function in its own process; see the module docstring."""

    def __init__(self, server: AnswerServer, handle: int, name: str):
        self.server, self.handle, self.__name__ = server, handle, name

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.server.call(self.handle, args, kwargs)


def private_folder() -> Path:
    """A fresh folder for one submission (removed by the caller)."""
    return Path(tempfile.mkdtemp(prefix="course_grade_"))


def self_study_sandbox(workdir: Path) -> Sandbox:
    """``check()``'s process: rlimits and a private folder, no bubblewrap (self-study is on the honour system)."""
    return Sandbox(workdir, limits=Limits(processes=None), use_bubblewrap=False, use_cgroup=False)
