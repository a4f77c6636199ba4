"""Grade a submitted notebook: run it in its own sandbox, then judge its function from outside.

The exercise comes from the instructor (``--exercise``) or from the id in the file name
(``alice_ex01.ipynb``), never from the notebook: its ``course_lib`` metadata is only compared,
and a mismatch is reported. The file is read as a file and as nothing else: every part of its
path below the folder given is opened without following a symbolic link, the file itself without
blocking (a FIFO cannot hang the batch), ``fstat`` on what was opened must say "regular file",
and at most ``MAX_NOTEBOOK_BYTES`` are read. The notebook is then copied alone into a fresh
private folder; ``answers`` runs its code cells there inside a ``sandbox.Sandbox`` (``check()``
cells skip) and then only answers calls. The grader tests run in this process
(``isolation.run_tests``), so nothing the notebook prints, patches or writes can change a
verdict, and the process tree is dead before the grade is returned. Every text the submission
can put into its grade (cell errors, messages, test feedback) is cleaned of terminal codes and
capped, per text and in number, before it is kept.
"""

import dataclasses
import errno
import os
import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_tools.grading.core import MAX_FEEDBACK_CHARS, SUBMITTER, shorten
from course_tools.grading.isolation import not_run, run_tests
from course_tools.grading.registry import Exercise, exercise_ids, load_exercise
from course_tools.grading.remote import private_folder
from course_tools.grading.results import GradeResult
from course_tools.grading.review import review
from course_tools.grading.sandbox import Limits, Sandbox

MAX_NOTEBOOK_BYTES = 20 << 20
MAX_NOTE_CHARS = 300  # one cell error or review finding
MAX_NOTES = 10  # notes kept per notebook; the rest are counted
CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
EXERCISE_NUMBER = re.compile(r"(?<![a-z0-9])ex(\d\d)(?![0-9])", re.IGNORECASE)  # ex01 in alice_ex01.ipynb
KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def clean(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (newlines and tabs kept)."""
    return CONTROL.sub("", text)


def capped(text: str, limit: int = MAX_NOTE_CHARS) -> str:
    """``text`` cleaned and cut to ``limit`` characters, marking the cut (a 100 MB note costs what a short one does)."""
    head = clean(text[: 4 * limit])  # cleaning only shortens: 4× leaves room for escape codes
    if len(text) > 4 * limit:
        head += " …[truncated]"
    return shorten(head, limit)


def capped_notes(notes: Sequence[str], limit: int = MAX_NOTES) -> list[str]:
    """The first ``limit`` of ``notes``, each capped, and how many more there were."""
    kept = [capped(str(note)) for note in notes[:limit]]
    return kept + ([f"… and {len(notes) - limit} more"] if len(notes) > limit else [])


@dataclass
class NotebookGrade:
    """The grade of one submitted notebook.

    ``status``: "graded" (its tests ran; some may have failed), or "not graded" (not a regular
    file, unreadable, exercise unknown, no function, not ready in time) with ``reason``.
    ``result`` is None only when the exercise is unknown, and then the score is 0/0. ``review``:
    why a person should read its code (``review.review``), empty when nothing was found.
    ``name``: the notebook as the reports name it (its path below the folder given).
    """

    path: Path
    exercise: str
    result: GradeResult | None
    status: str
    reason: str
    notes: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    name: str = ""

    @property
    def score(self) -> int:
        return self.result.score if self.result else 0

    @property
    def max_score(self) -> int:
        return self.result.max_score if self.result else 0

    @property
    def shown(self) -> str:
        """How the reports name this notebook."""
        return self.name or str(self.path)


def exercises_in_name(file_name: str) -> list[str]:
    """The exercise ids whose number (``ex01``) stands in ``file_name`` as a word part of its own."""
    numbers = {match.group(1) for match in EXERCISE_NUMBER.finditer(Path(file_name).stem)}
    return [exercise_id for exercise_id in exercise_ids() if exercise_id[2:4] in numbers]


def submitter(name: str) -> str | None:
    """Whose submission ``name`` (its path below the folders given) is: the file name before the exercise
    number (``alice_ex08.ipynb``), or all of it when there is none (``alice.ipynb`` with ``--exercise``), else
    the folder it is in (``alice/ex08_interview_quiz.ipynb``); None when nothing names anyone."""
    path = Path(name)
    match = EXERCISE_NUMBER.search(path.stem)
    owner = (path.stem[: match.start()] if match else path.stem).strip(" _-.")
    if owner:
        return owner
    return path.parent.name or None


def exercise_named(text: str) -> str:
    """The registered id ``text`` names (the id, or its number ``ex01``); ValueError naming the known ones."""
    found = [exercise_id for exercise_id in exercise_ids() if text.lower() in (exercise_id, exercise_id[:4])]
    if len(found) != 1:
        raise ValueError(f"--exercise must be an exercise id or its number, got {text!r}; "
                         f"known exercises: {', '.join(exercise_ids())}")
    return found[0]


def metadata_exercise(notebook: nbformat.NotebookNode | None) -> str | None:
    """The exercise id the notebook's ``course_lib`` metadata claims, if it claims a registered one."""
    meta = course_lib_metadata(notebook)
    return meta["exercise"] if meta.get("exercise") in exercise_ids() else None


def course_lib_metadata(notebook: nbformat.NotebookNode | None) -> dict:
    """The notebook's ``metadata.course_lib`` (what the author claims about it), {} when absent or not a dict."""
    metadata = notebook.get("metadata") if notebook is not None else None
    meta = metadata.get("course_lib") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def code_cells(notebook: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell number, source) of each code cell, numbered as the cell errors number them (from 1, all cells)."""
    cells = notebook.get("cells")
    cells = cells if isinstance(cells, list) else []
    return [(index, str(cell.get("source", ""))) for index, cell in enumerate(cells, start=1)
            if isinstance(cell, dict) and cell.get("cell_type") == "code"]


def identify(file_name: str, given: str | None, notebook: nbformat.NotebookNode | None) -> tuple[Exercise | None, str]:
    """(the exercise, where it came from): the instructor's ``--exercise``, else the id in the file
    name; (None, why not) when neither says. The notebook's metadata is never obeyed."""
    if given:
        return load_exercise(exercise_named(given)), "from --exercise"
    named = exercises_in_name(file_name)
    if len(named) == 1:
        return load_exercise(named[0]), "from the file name"
    ids = exercise_ids()
    why = (f"the file name holds {' and '.join(named)}" if named else
           f"no exercise id ({ids[0][:4]} … {ids[-1][:4]}) in the file name and no --exercise")
    claimed = metadata_exercise(notebook)
    if claimed:
        why += f"; its metadata says {claimed}, which the grader does not trust"
    return None, f"cannot tell the exercise: {why}"


def mismatch(file_name: str, notebook: nbformat.NotebookNode, exercise: Exercise, source: str) -> str:
    """What the notebook's metadata (and, under ``--exercise``, its file name) claims against how it is
    graded; "" when nothing disagrees. Reported in the row's reason, never obeyed."""
    meta, claims, said = course_lib_metadata(notebook), [], []
    named = exercises_in_name(file_name)
    if source == "from --exercise" and named and named != [exercise.id]:
        claims.append(f"the file name says {' and '.join(named)}")
    if meta.get("exercise", exercise.id) != exercise.id:
        said.append(f"says {capped(str(meta['exercise']), 80)}")
    if meta.get("function", exercise.function_name) != exercise.function_name:
        said.append(f"names the function {capped(str(meta['function']), 80)}")
    claims += [f"metadata {' and '.join(said)}"] if said else []
    graded = f"graded as {exercise.id} ({source}, function {exercise.function_name})"
    return f"{' and '.join(claims)}, {graded}" if claims else ""


class NotAFile(Exception):
    """What was found is not a regular file; the message says what it is."""


def read_file(path: Path, below: Path, limit: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of the regular file ``path`` inside the folder ``below``, read as a file and nothing else.

    Each part of the path below ``below`` is opened without following a symbolic link
    (``O_NOFOLLOW``), the file without blocking (``O_NONBLOCK``), and ``fstat`` of the open
    descriptor must say "regular file", so a file swapped after the folder was listed is judged
    as what was opened. ``NotAFile`` says what else it is; ValueError when it holds more than
    ``limit`` bytes (at most ``limit + 1`` are read); OSError when it cannot be read.
    """
    parts = path.relative_to(below).parts
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(below, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            try:
                child = os.open(part, flags if last else flags | os.O_DIRECTORY, dir_fd=fd)
            except OSError as error:  # ELOOP: a link; ENOTDIR: a link where a folder was; ENXIO: a socket
                if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
                    raise
                kind = KINDS.get(stat.S_IFMT(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode), "not a file")
                raise NotAFile(kind if last else f"{kind} in its path ({'/'.join(parts[: index + 1])})") from None
            os.close(fd)
            fd = child
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAFile(KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file"))
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left <= 0:
        raise ValueError(f"the file is larger than {limit >> 20} MB")
    return b"".join(chunks)


def read_notebook(path: Path, below: Path | None = None) -> tuple[bytes | None, nbformat.NotebookNode | None, str]:
    """(the file's bytes, the parsed notebook, "") or what makes it ungradable as the third item."""
    try:
        data = read_file(path, below or path.parent)
        return data, nbformat.reads(data.decode("utf-8"), as_version=4), ""
    except NotAFile as error:
        return None, None, f"not a regular file: {error}, never read"
    except ValueError as error:
        if str(error).startswith("the file is larger"):
            return None, None, str(error)
        return None, None, capped(f"not a readable notebook: {type(error).__name__}: {error}")
    except Exception as error:  # noqa: BLE001 - any unreadable file is a reason in the table
        return None, None, capped(f"not a readable notebook: {type(error).__name__}: {error}")


def not_graded(path: Path, name: str, exercise: Exercise | None, reason: str, review_: list[str] | None = None
               ) -> NotebookGrade:
    """A "not graded" row: 0/max with ``reason`` when the exercise is known, else 0/0."""
    reason = capped(reason, MAX_FEEDBACK_CHARS)
    result = not_run(exercise, reason) if exercise else None
    return NotebookGrade(path, exercise.id if exercise else "?", result, "not graded", reason, [], review_ or [], name)


def grader_failed(path: Path, name: str, given: str | None, error: BaseException) -> NotebookGrade:
    """The row of a notebook whose grading raised (``OSError`` from starting its process, ``MemoryError``, …)."""
    exercise, _ = identify(path.name, given, None)
    return not_graded(path, name, exercise, f"the grader failed on this notebook: {type(error).__name__}: {error}")


def capped_result(result: GradeResult) -> GradeResult:
    """``result`` with its message and every test's feedback capped (the submission can write into both)."""
    tests = [dataclasses.replace(test, feedback=capped(test.feedback, MAX_FEEDBACK_CHARS)) for test in result.tests]
    return GradeResult(result.exercise, tests, capped(result.message, MAX_FEEDBACK_CHARS), result.ran)


def grade_notebook(path: Path, *, exercise: str | None = None, name: str | None = None, below: Path | None = None,
                   timeout: float = 60.0, cell_timeout: float = 120.0, notebook_timeout: float = 300.0,
                   hidden: tuple[Path, ...] = (), use_bubblewrap: bool = True) -> NotebookGrade:
    """Run the notebook at ``path`` in a sandbox and grade its function; never raises for a bad notebook.

    ``exercise``: the instructor's id for it (else the id in its file name); ``name``: how the
    reports call it (default its file name); ``below``: the folder under which no symbolic link is
    followed (default its own folder). ``notebook_timeout`` bounds running its cells (each also
    stopped after ``cell_timeout``), ``timeout`` the tests that follow; ``hidden`` folders cannot be
    read from the sandbox.
    """
    name = name or path.name
    data, notebook, problem = read_notebook(path, below)
    found, source = identify(path.name, exercise, notebook)
    if found is None or problem:
        return not_graded(path, name, found, problem or source)
    differs = mismatch(path.name, notebook, found, source)
    flags = capped_notes(review(code_cells(notebook), found))
    folder = private_folder()
    try:
        (folder / "submission.ipynb").write_bytes(data)
        cpu = int(2 * (notebook_timeout + timeout)) + 10  # CPU seconds over every thread: a backstop to the wall clock
        sandbox = Sandbox(folder, hidden=hidden, limits=Limits(cpu_seconds=cpu), use_bubblewrap=use_bubblewrap)
        spec = {"kind": "notebook", "exercise": found.id, "forbidden": list(found.forbidden),
                "notebook": str(sandbox.folder / "submission.ipynb"), "function": found.function_name,
                "cell_timeout": cell_timeout}
        token = SUBMITTER.set(submitter(name))
        try:
            result, notes = run_tests(found, spec, sandbox, timeout=timeout, load_timeout=notebook_timeout)
        finally:
            SUBMITTER.reset(token)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = capped_result(result)
    status = "graded" if result.ran else "not graded"
    failed = [test.name for test in result.tests if not test.passed]
    why = result.message or (f"failed {', '.join(failed)}" if failed else "")
    reason = "; ".join(part for part in (capped(why, MAX_FEEDBACK_CHARS), differs) if part)
    return NotebookGrade(path, found.id, result, status, reason, capped_notes(notes), flags, name)
