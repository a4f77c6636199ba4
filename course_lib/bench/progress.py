"""A text progress bar on stderr for long sweeps (no dependency)."""

import sys
import time


class Progress:
    """``Progress(total, label)``; call ``advance(note)`` after each item, ``close()`` at the end.

    Draws only on a terminal (or an explicit ``stream``): in a notebook or a CI log a bar redrawn
    with carriage returns would print every frame as a line of its own.
    """

    def __init__(self, total: int, label: str, *, width: int = 30, stream=None):
        self.total, self.label, self.width = max(total, 1), label, width
        self.stream = sys.stderr if stream is None else stream
        self.visible = stream is not None or sys.stderr.isatty()
        self.done, self.start = 0, time.perf_counter()

    def advance(self, note: str = "") -> None:
        self.done += 1
        if not self.visible:
            return
        filled = self.width * self.done // self.total
        elapsed = time.perf_counter() - self.start
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {note:<40.40}")
        self.stream.flush()

    def close(self) -> None:
        if not self.visible:
            return
        self.stream.write("\n")
        self.stream.flush()
