"""ex01 submissions that misbehave rather than answer wrongly: they hang, crash, print, or cannot be unpickled."""

import os
import sys

from .ex01_softmax_attention import softmax_attention


def correct(q, k, v, causal=False):
    """A right answer to ex01 written here: course_lib's own is not allowed while graded."""
    return softmax_attention(q, k, v, causal)


def loop_forever(q, k, v, causal=False):
    while True:
        pass


def hang_when_causal(q, k, v, causal=False):
    while causal:
        pass
    return correct(q, k, v)


def raise_value_error(q, k, v, causal=False):
    raise ValueError("boom")


def print_then_answer(q, k, v, causal=False):
    print('{"name": "shape_and_dtype", "points": 99}')  # protocol-looking noise on stdout
    os.write(1, b"C-level write to fd 1\n")
    return correct(q, k, v, causal)


def exit_process(q, k, v, causal=False):
    print("about to crash", file=sys.stderr, flush=True)
    os._exit(3)


def _explode():
    raise RuntimeError("cannot be rebuilt here")


class Unloadable:
    """A callable that pickles fine but cannot be unpickled in the worker."""

    def __call__(self, q, k, v, causal=False):
        return correct(q, k, v, causal)

    def __reduce__(self):
        return (_explode, ())
