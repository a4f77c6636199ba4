"""Shared test helpers: a free port; the sanitizer nbval compares outputs through."""

import re
import socket
from pathlib import Path


def free_port(*, also_free_after: int = 0) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, and the ``also_free_after`` ports after it too."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if all(_bindable(port + k) for k in range(1, also_free_after + 1)):
            return port


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


SANITIZE_FILE = Path(__file__).with_name("nbval_sanitize.cfg")


def sanitize(text: str) -> str:
    """What nbval compares of a checked cell's output: ``text`` through tests/nbval_sanitize.cfg, in order."""
    from nbval.plugin import get_sanitize_patterns

    for regex, replace in get_sanitize_patterns(SANITIZE_FILE.read_text()):
        text = re.sub(regex, replace, text)
    return text
