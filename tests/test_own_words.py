"""The course's code is its own: no notebook and no ``course_lib`` file repeats the interview
reference's implementation.

The interview reference, one of the course's two source documents, ends with a short Python
function. The course teaches its ideas and its contract in its own code (notebook 05b), so this
test fails where six consecutive lines of that function reappear in a notebook (``notebooks/``,
``exercises/``, ``solutions/``) or in a file of ``course_lib/``. Lines are compared twice:

* **as written**, whitespace-normalised (indentation, runs of spaces, quote style), with blank
  and comment-only lines and trailing comments left out;
* **shape only**: every name that is not a keyword or a builtin becomes ``_`` and every string
  or number literal ``0``, so a copy with renamed variables and reworded messages is caught too;
* **near copy**: in shape only, six lines of any twelve consecutive ones that line up, in order,
  with the reference in runs of two or more (``difflib``), so a renamed copy with a few lines
  inserted, merged or dropped is caught as well. Ordinary code lines up in single lines at most
  (``return _``, ``raise ValueError(0)``), which do not count.

The reference's text never enters the repository: it is read at run time from
``../shared/seeds/001_*.txt`` beside the checkout, and the test skips, saying so, where that file
is absent (a fresh clone). The last tests show that the check fails on a copy, built at run time
from the reference itself.
"""

import builtins
import difflib
import io
import json
import keyword
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT.parent / "shared" / "seeds"
REFERENCE_GLOB = "001_*.txt"  # the interview reference
WINDOW = 6  # this many consecutive (non-blank, non-comment) lines make a copy
CODE_START = re.compile(r"^(from\s+\S+\s+import\s|import\s|def\s|class\s)")
PROSE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK text ends the code block
KEEP = set(keyword.kwlist) | set(dir(builtins))


def reference_code() -> list[str]:
    """The Python block of the interview reference, read at run time; skips where it is absent."""
    found = sorted(SOURCES.glob(REFERENCE_GLOB))
    if not found:
        pytest.skip(f"the interview reference is not beside this checkout ({SOURCES}/{REFERENCE_GLOB}"
                    " is absent, as in a fresh clone): its code cannot be compared")
    lines = found[0].read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if CODE_START.match(line)), None)
    if start is None:
        pytest.skip(f"{found[0].name} holds no Python block (no line starts with import/def/class)")
    end = next((i for i in range(start, len(lines)) if PROSE.search(lines[i])), len(lines))
    return lines[start:end]


def without_comment(line: str) -> str:
    """The line up to a ``#`` that is outside quotes."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[:i]
    return line


def as_written(line: str) -> str:
    """Whitespace-normalised: no indentation, single spaces, one quote style, no comment."""
    line = without_comment(line).replace("'", '"')
    line = re.sub(r"\s*([()\[\]{},:=+\-*/<>!%])\s*", r"\1", line)  # spacing around operators
    return " ".join(line.split())


def shape_only(line: str) -> str:
    """The line's token shape: names that are not keywords or builtins -> _, literals -> 0."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(without_comment(line).strip()).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return as_written(line)
    out = []
    for token in tokens:
        if token.type == tokenize.NAME:
            out.append(token.string if token.string in KEEP else "_")
        elif token.type in (tokenize.STRING, tokenize.NUMBER):
            out.append("0")
        elif token.type == tokenize.OP:
            out.append(token.string)
    return " ".join(out)


def normalised(lines: list[str], form) -> list[tuple[int, str]]:
    """(line number, normalised line) for every line that is not blank or only a comment."""
    kept = [(number, form(line)) for number, line in enumerate(lines, 1)]
    return [(number, text) for number, text in kept if text]


def code_lines(lines: list[str]) -> list[str]:
    """The lines that count: not blank, not only a comment (as they are written)."""
    return [lines[number - 1] for number, _ in normalised(lines, as_written)]


def near_copies(text: str, reference: list[str], window: int = WINDOW) -> list[str]:
    """Where ``window`` of ``2 * window`` consecutive lines line up with ``reference`` (shape only)."""
    ref = [line for _, line in normalised(reference, shape_only)]
    ours = normalised(text.splitlines(), shape_only)
    aligned = [0] * len(ours)
    matcher = difflib.SequenceMatcher(None, [line for _, line in ours], ref, autojunk=False)
    for block in matcher.get_matching_blocks():
        if block.size >= 2:  # single common lines (a return, a raise) are not evidence
            aligned[block.a : block.a + block.size] = [1] * block.size
    starts = [i for i in range(len(ours)) if sum(aligned[i : i + 2 * window]) >= window]
    return [f"line {ours[starts[0]][0]} (near copy: {window} of {2 * window} lines line up with"
            " the reference)"] if starts else []


def copies(text: str, reference: list[str], window: int = WINDOW) -> list[str]:
    """Where ``text`` repeats ``window`` consecutive lines of ``reference``: one note per copy."""
    notes = near_copies(text, reference, window)
    for name, form in (("as written", as_written), ("shape only, names renamed", shape_only)):
        ref = [line for _, line in normalised(reference, form)]
        runs = {tuple(ref[i : i + window]) for i in range(len(ref) - window + 1)}
        ours = normalised(text.splitlines(), form)
        texts = [line for _, line in ours]
        notes += [f"line {ours[i][0]} ({name}): {text.splitlines()[ours[i][0] - 1].strip()[:60]}"
                  for i in range(len(ours) - window + 1) if tuple(texts[i : i + window]) in runs]
    return notes


def notebook_text(path: Path) -> str:
    """Every cell's source, in order, one cell after another."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells)


def course_files() -> list[Path]:
    notebooks = [p for folder in ("notebooks", "exercises", "solutions")
                 for p in sorted((ROOT / folder).glob("*.ipynb"))]
    library = [p for p in sorted((ROOT / "course_lib").rglob("*"))
               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return notebooks + library


def readable(path: Path) -> str | None:
    if path.suffix == ".ipynb":
        return notebook_text(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # a binary file cannot hold a copy of code lines
        return None


def test_no_notebook_or_course_lib_file_repeats_the_interview_reference():
    reference = reference_code()
    assert len(normalised(reference, as_written)) > 2 * WINDOW, "the reference's code block was not found whole"
    found = []
    for path in course_files():
        text = readable(path)
        notes = copies(text, reference) if text is not None else []
        found += [f"{path.relative_to(ROOT)}: {note}" for note in notes]
    assert not found, (f"{WINDOW} consecutive lines of the interview reference's code reappear; write "
                       "the idea in the course's own code:\n" + "\n".join(found))


def test_the_check_finds_a_copy_built_from_the_reference():
    """Six of the reference's lines, re-indented among other code, are flagged; five are not."""
    lines = [line.strip() for line in code_lines(reference_code())[2 : 2 + WINDOW]]
    copied = "import math\n\n\ndef ours(x):\n" + "\n\n".join(f"        {line}" for line in lines) + "\n"
    assert any("as written" in note for note in copies(copied, reference_code())), copied
    shorter = "def ours(x):\n" + "\n".join(f"    {line}" for line in lines[:-1]) + "\n    return x\n"
    assert not copies(shorter, reference_code()), "five lines are not a copy"


def test_the_check_finds_a_copy_with_renamed_variables_and_messages():
    """The same lines with every name renamed and every message reworded are still flagged."""
    lines = code_lines(reference_code())[2 : 2 + WINDOW]
    renamed = {}

    def rename(match: re.Match) -> str:
        name = match.group(0)
        return name if name in KEEP else renamed.setdefault(name, f"renamed_{len(renamed)}")

    disguised = [re.sub(r"(['\"])[^'\"]*\1", "'reworded'", re.sub(r"\b[A-Za-z_]\w*\b", rename, line))
                 for line in lines]
    notes = copies("\n".join(disguised), reference_code())
    assert any("shape only" in note for note in notes), "\n".join(disguised)


def test_ordinary_code_is_not_flagged():
    """Short common lines (a loop, a return, an append) do not add up to a copy."""
    ordinary = "\n".join([
        "def mean(rows):", "    total = 0.0", "    for row in rows:", "        total += sum(row)",
        "    if not rows:", "        raise ValueError('rows must not be empty')",
        "    return total / len(rows)", "output = []", "for i, row in enumerate(rows):",
        "    output.append(row)",
    ])
    assert not copies(ordinary, reference_code())


def test_the_check_finds_a_near_copy_with_lines_inserted():
    """Renamed lines of the reference with a line of our own after every second one are flagged."""
    lines = [re.sub(r"\b[A-Za-z_]\w*\b", lambda m: m.group(0) if m.group(0) in KEEP else "ours", line)
             for line in code_lines(reference_code())[2 : 2 + 2 * WINDOW]]
    mixed = [line for pair in zip(lines[::2], lines[1::2], ["tally[0] += 1"] * WINDOW) for line in pair]
    assert not [note for note in copies("\n".join(mixed), reference_code()) if "near" not in note]
    assert near_copies("\n".join(mixed), reference_code()), "\n".join(mixed)

