"""What crosses between the grader and a submission's process: plain data in length-prefixed frames.

A frame is an 8-byte big-endian length and a ``torch.save`` payload. The grader reads every
frame with ``torch.load(weights_only=True)``, which rebuilds tensors and Python's plain
containers and refuses any other class, and then ``plain`` checks what came out: exact
``torch.Tensor`` objects (no subclass, dense, on the CPU), numbers, strings, None and lists,
tuples and dicts of them. So an answer can be wrong, but it cannot run code in the grader,
pretend to be a verdict, or be a tensor whose ``-`` returns zeros.

A submission can write any bytes to its end of the channel, and the grader decodes them in its
own process, so decoding is bounded before anything is built:

* an answer's frame holds at most ``answer_cap(question)``: four times the question it answers, at
  least ``SMALL_ANSWER_BYTES`` (4 MiB: every reply but a long test's answer is a few KB) and at most
  ``MAX_FRAME_BYTES`` (320 MiB, 5× the largest honest answer: ex02's ``long_sequence`` returns
  [2**23, 2] float32, 64 MiB, to a question of 192 MiB);
* ``torch.load`` never parses the submission's zip archive. ``zipfile`` reads it, and every entry
  must be stored as ``torch.save`` stores them, uncompressed (so nothing inflates past the frame),
  with sizes that agree and sum to no more than the frame (entries cannot share their data); at
  most ``MAX_ENTRIES`` entries, and at most ``MAX_PICKLE_BYTES`` of pickle (the answer's structure
  without its tensors' data), which bounds the objects unpickling builds. The entries are copied
  into a fresh archive, and ``torch.load`` reads that copy;
* ``plain`` visits at most ``MAX_NODES`` items and the frame's cap in tensor bytes. A reference
  reached again counts again, as every later walk reaches it again, and a view counts its full
  size (a stride-0 view of one number can claim terabytes). ``torch.load`` itself refuses a view
  larger than its storage.

So one answer costs the grader at most about three frames of memory (the frame, the copy, the
tensors) and about a second at worst (a frame at the cap, or a dict whose keys all collide at
the pickle cap; ``tests/test_wire.py`` times them). The limits bound decoding by size, so it
needs no clock and no child process. A frame beyond a limit raises
``Refused`` and ends the run, since no honest answering process sends one; a frame that is merely
not plain data fails its one call.

Two things that are not data travel as markers: a ``torch.Generator`` argument goes as its
state and comes back advanced, and a function returned by the student (ex10's bundle of
three) stays in the submission's process, named by a handle the grader calls through.
"""

import io
import os
import select
import struct
import time
import zipfile

import torch

MAX_FRAME_BYTES = 320 << 20  # 5× ex02's [2**23, 2] float32 answer (64 MiB), the largest a grader test expects
SMALL_ANSWER_BYTES = 4 << 20  # any reply may be this large; "ready" and short tests' answers are a few KB
MAX_ENTRIES = 256  # torch.save writes 6 records and one per storage: honest answers have at most 9
MAX_PICKLE_BYTES = 64 << 10  # honest answers: < 300 bytes; colliding dict keys unpickle in O(n²): ~1 s at this cap
MAX_NODES = 10_000  # items of an answer, counted each time they are reached: honest answers have at most 14
LOCAL_ENTRY, DIRECTORY_ENTRY = b"PK\x03\x04", b"PK\x01\x02"  # the zip signatures starting an entry and its listing
HEADER = struct.Struct(">Q")
GENERATOR = "__course_generator__"
CALLABLE = "__course_callable__"
PLAIN_SCALARS = (bool, int, float, str, type(None))


class WireError(Exception):
    """A frame that could not be read or holds something other than plain data; the message says why."""


class Refused(WireError):
    """A frame beyond the limits the grader decodes (module docstring); the message names the limit."""


class Expired(WireError):
    """The other side sent nothing before the deadline."""


class Closed(WireError):
    """The other side closed the channel (its process ended)."""


def pack(obj: object) -> bytes:
    """``obj`` as a frame payload (``torch.save``)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def answer_cap(question_bytes: int) -> int:
    """The most bytes an answer to a question of ``question_bytes`` may take (module docstring)."""
    return min(MAX_FRAME_BYTES, max(SMALL_ANSWER_BYTES, 4 * question_bytes))


def unpack(payload: bytes, max_bytes: int = MAX_FRAME_BYTES) -> object:
    """A frame payload back as plain data with at most ``max_bytes`` of tensors; ``Refused`` beyond a limit,
    ``WireError`` naming what is not plain data."""
    archive = _checked_copy(payload)
    try:
        obj = torch.load(archive, weights_only=True, map_location="cpu")
    except Exception as error:  # noqa: BLE001 - whatever the payload is, it is not plain data
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise WireError(f"the answer is not plain data ({first_line[:200]})") from None
    return plain(obj, max_bytes)


def _checked_copy(payload: bytes) -> io.BytesIO:
    """The entries of the zip archive ``payload``, checked against the limits, in a fresh archive for ``torch.load``."""
    if not payload.startswith(LOCAL_ENTRY):  # torch.load would read it in its legacy format
        raise Refused("the answer is not a zip archive as torch.save writes it")
    if payload.count(DIRECTORY_ENTRY) > MAX_ENTRIES:  # counted before zipfile builds an object for each
        raise Refused(f"the answer's archive lists more than the {MAX_ENTRIES} entries allowed")
    copy = io.BytesIO()
    try:
        source = zipfile.ZipFile(io.BytesIO(payload))
        _check_entries(source.infolist(), len(payload))
        with zipfile.ZipFile(copy, "w") as target:  # stored, as torch.save writes
            for entry in source.infolist():
                target.writestr(entry.filename, source.read(entry))
    except Refused:
        raise
    except Exception as error:  # noqa: BLE001 - whatever zipfile finds wrong, it is no archive torch.save wrote
        raise Refused(f"the answer is not a zip archive as torch.save writes it ({error})") from None
    copy.seek(0)
    return copy


def _check_entries(entries: list[zipfile.ZipInfo], frame_bytes: int) -> None:
    """``Refused`` for a compressed entry, sizes that disagree or add up past the frame, or too large a pickle."""
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED:
            raise Refused(f"the answer's entry {entry.filename!r} is compressed; torch.save stores entries as they "
                          f"are, so that the {MAX_FRAME_BYTES:,}-byte frame cap bounds what an answer unpacks to")
        if entry.compress_size != entry.file_size:
            raise Refused(f"the answer's entry {entry.filename!r} declares {entry.file_size:,} bytes but stores "
                          f"{entry.compress_size:,}")
        if entry.filename.endswith("data.pkl") and entry.file_size > MAX_PICKLE_BYTES:
            raise Refused(f"the answer's structure (its pickle) takes {entry.file_size:,} bytes, more than the "
                          f"{MAX_PICKLE_BYTES:,} allowed")
    declared = sum(entry.file_size for entry in entries)
    if declared > frame_bytes:
        raise Refused(f"the answer's entries declare {declared:,} bytes, more than the {frame_bytes:,} of its frame")


def plain(obj: object, max_bytes: int = MAX_FRAME_BYTES) -> object:
    """``obj`` if it is plain data within ``MAX_NODES`` items and ``max_bytes`` of tensors (module
    docstring), else ``WireError`` naming the first offender (``Refused`` for a budget)."""
    nodes, tensor_bytes = 0, 0

    def walk(x: object, depth: int) -> object:
        nonlocal nodes, tensor_bytes
        nodes += 1
        if nodes > MAX_NODES:
            raise Refused(f"the answer holds more than {MAX_NODES:,} items (one reached again counts again)")
        if depth > 20:
            raise WireError("the answer is nested more than 20 levels deep")
        if type(x) is torch.Tensor:
            if x.layout != torch.strided or x.is_quantized or x.is_nested or x.device.type != "cpu":
                raise WireError(f"a tensor (layout {x.layout}, device {x.device.type}, nested {x.is_nested}, "
                                f"quantized {x.is_quantized}) is not a plain dense tensor on the CPU")
            tensor_bytes += x.numel() * x.element_size()  # a view's full size, whatever storage it is a view of
            if tensor_bytes > max_bytes:
                raise Refused(f"the answer's tensors hold more than {max_bytes:,} bytes (a view counts its "
                              "full size, one reached again counts again)")
            return x.detach()
        if isinstance(x, PLAIN_SCALARS) and type(x) in PLAIN_SCALARS:
            return x
        if type(x) in (list, tuple):
            return type(x)(walk(item, depth + 1) for item in x)
        if type(x) is dict:
            if not all(type(key) in (str, int) for key in x):
                raise WireError("a dict in the answer has keys that are not str or int")
            return {key: walk(value, depth + 1) for key, value in x.items()}
        raise WireError(f"the answer holds a {type(x).__name__}, not a plain tensor, number, string or container")

    return walk(obj, 0)


def write_frame(fd: int, payload: bytes) -> None:
    """Write one frame to ``fd`` (blocking)."""
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int, *, deadline: float | None = None, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """One frame from ``fd``; ``Expired`` past ``deadline`` (``time.monotonic()``), ``Closed`` at end of file."""
    (length,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if length > max_bytes:
        raise Refused(f"the answer announced {length:,} bytes, more than the {max_bytes:,} allowed")
    return _read_exactly(fd, length, deadline)


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not _readable(fd, wait):
                raise Expired("no answer before the time limit")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise Closed("the channel closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _readable(fd: int, wait: float) -> bool:
    """Whether ``fd`` (a pipe) has bytes or its end within ``wait`` seconds. Windows' ``select`` takes only
    sockets: there the pipe is polled with ``PeekNamedPipe`` every 10 ms."""
    if os.name != "nt":
        return bool(select.select([fd], [], [], wait)[0])
    import _winapi
    import msvcrt

    handle, end = msvcrt.get_osfhandle(fd), time.monotonic() + wait
    while True:
        try:
            if _winapi.PeekNamedPipe(handle, 0)[0]:
                return True
        except OSError:  # the writer closed it: the read sees the end
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def encode_arguments(args: tuple, kwargs: dict) -> tuple[object, list[torch.Generator]]:
    """(args, kwargs) with every ``torch.Generator`` replaced by a marker holding its state; the generators."""
    generators: list[torch.Generator] = []

    def encode(x: object) -> object:
        if isinstance(x, torch.Generator):
            generators.append(x)
            return {GENERATOR: x.get_state()}
        if type(x) in (list, tuple):
            return type(x)(encode(item) for item in x)
        return x

    return (tuple(encode(a) for a in args), {key: encode(value) for key, value in kwargs.items()}), generators


def decode_arguments(encoded: object) -> tuple[tuple, dict, list[torch.Generator]]:
    """The submission's side of ``encode_arguments``: (args, kwargs, the rebuilt generators in order)."""
    generators: list[torch.Generator] = []

    def decode(x: object) -> object:
        if type(x) is dict and set(x) == {GENERATOR}:
            generator = torch.Generator()
            generator.set_state(x[GENERATOR])
            generators.append(generator)
            return generator
        if type(x) in (list, tuple):
            return type(x)(decode(item) for item in x)
        return x

    args, kwargs = encoded
    return tuple(decode(a) for a in args), {key: decode(value) for key, value in kwargs.items()}, generators
