"""What crosses between the grader and a submission's process: plain data in length-prefixed frames.

A frame is an 8-byte big-endian length and a ``torch.save`` payload. The grader reads every
frame with ``torch.load(weights_only=True)``, which rebuilds tensors and Python's plain
containers and refuses any other class, and then ``plain`` checks what came out: exact
``torch.Tensor`` objects (no subclass, dense, on the CPU), numbers, strings, None and lists,
tuples and dicts of them. So an answer can be wrong, but it cannot run code in the grader,
pretend to be a verdict, or be a tensor whose ``-`` returns zeros.

Two things that are not data travel as markers: a ``torch.Generator`` argument goes as its
state and comes back advanced, and a function returned by the student (ex10's bundle of
three) stays in the submission's process, named by a handle the grader calls through.
"""

import io
import os
import select
import struct
import time

import torch

MAX_FRAME_BYTES = 1 << 30  # an answer larger than 1 GiB is refused, not read
HEADER = struct.Struct(">Q")
GENERATOR = "__course_generator__"
CALLABLE = "__course_callable__"
PLAIN_SCALARS = (bool, int, float, str, type(None))


class WireError(Exception):
    """A frame that could not be read or holds something other than plain data; the message says why."""


class Expired(WireError):
    """The other side sent nothing before the deadline."""


class Closed(WireError):
    """The other side closed the channel (its process ended)."""


def pack(obj: object) -> bytes:
    """``obj`` as a frame payload (``torch.save``)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def unpack(payload: bytes) -> object:
    """A frame payload back as plain data; ``WireError`` naming what was refused."""
    try:
        obj = torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except Exception as error:  # noqa: BLE001 - whatever the payload is, it is not plain data
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise WireError(f"the answer is not plain data ({first_line[:200]})") from None
    return plain(obj)


def plain(obj: object, depth: int = 0) -> object:
    """``obj`` if it is plain data (module docstring), else ``WireError`` naming the first offender."""
    if depth > 20:
        raise WireError("the answer is nested more than 20 levels deep")
    if type(obj) is torch.Tensor:
        if obj.layout != torch.strided or obj.is_quantized:
            raise WireError(f"a tensor with layout {obj.layout} is not a plain dense tensor")
        return obj.detach()
    if isinstance(obj, PLAIN_SCALARS) and type(obj) in PLAIN_SCALARS:
        return obj
    if type(obj) in (list, tuple):
        return type(obj)(plain(item, depth + 1) for item in obj)
    if type(obj) is dict:
        if not all(type(key) in (str, int) for key in obj):
            raise WireError("a dict in the answer has keys that are not str or int")
        return {key: plain(value, depth + 1) for key, value in obj.items()}
    raise WireError(f"the answer holds a {type(obj).__name__}, not a plain tensor, number, string or container")


def write_frame(fd: int, payload: bytes) -> None:
    """Write one frame to ``fd`` (blocking)."""
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int, *, deadline: float | None = None, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """One frame from ``fd``; ``Expired`` past ``deadline`` (``time.monotonic()``), ``Closed`` at end of file."""
    (length,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if length > max_bytes:
        raise WireError(f"the answer announced {length:,} bytes, more than the {max_bytes:,} allowed")
    return _read_exactly(fd, length, deadline)


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise Expired("no answer before the time limit")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise Closed("the channel closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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
