"""What an instructor gets from a batch: the class CSV, a per-test CSV, feedback per student, a summary.

Every file is written atomically (to a temporary name in the same folder, then renamed), and
only after every sandbox of the batch is dead, so a submission cannot race the reports.

Columns of ``scores.csv`` (one row per notebook; imports into a spreadsheet or an LMS gradebook):
``file`` (its path below the folder given), ``exercise`` (its id, "?" when unknown), ``score``,
``max``, ``status`` ("graded", or "not graded" when its tests could not run), ``reason`` (why
not, or what stopped the run, a metadata mismatch; cell errors follow) and ``review`` (why a
person should read its code, ``review.review``; empty when nothing was found). ``tests.csv``
has one row per notebook and test: ``file, exercise, test, points, max_points, passed, feedback``.

Text from a submission is capped before it gets here (``notebooks.capped``). In both CSVs a text
cell that a spreadsheet would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return) gets a leading ``'`` (OWASP's rule for CSV injection); the numbers the
grader writes (``score``, ``max``, ``points``, ``max_points``) are never negative, so stay numbers.
In Markdown, submitted text is shown as text: ``&``, ``<``, ``>``, ``[``, ``]``, ``|`` and the
backslash escaped, newlines as spaces, so it cannot add HTML, links, images or table cells.
"""

import csv
import io
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

from course_tools.grading.notebooks import NotebookGrade, clean

SCORE_COLUMNS = ("file", "exercise", "score", "max", "status", "reason", "review")
TEST_COLUMNS = ("file", "exercise", "test", "points", "max_points", "passed", "feedback")
NUMBER_COLUMNS = ("score", "max", "points", "max_points")  # written by the grader, never negative
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
MARKDOWN = {"\\": "\\\\", "&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "|": "\\|",
            "\n": " ", "\r": " "}
SEPARATOR_LIKE = re.compile(r"^_|_$|_(?=_)|(?<=_)_")  # an underscore that could be read as part of "__"
MAX_NAME_BYTES = 200


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def spreadsheet_safe(text: str) -> str:
    """``text`` as a spreadsheet cell that shows it, never runs it: a leading ``'`` where it starts like a formula."""
    return f"'{text}" if text.startswith(FORMULA_START) else text


def markdown_text(text: str) -> str:
    """``text`` (cleaned) as literal Markdown text on one line: no HTML, link, image or table cell can come of it."""
    return "".join(MARKDOWN.get(char, char) for char in clean(text))


def _csv(columns: tuple[str, ...], rows: list[dict]) -> bytes:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows({key: value if key in NUMBER_COLUMNS else spreadsheet_safe(value) for key, value in row.items()}
                     for row in rows)
    return text.getvalue().encode("utf-8")


def reason(grade: NotebookGrade) -> str:
    """The ``reason`` column: what stopped the run, then the notebook's cell errors."""
    return "; ".join(part for part in [grade.reason, *grade.notes] if part)


def score_rows(grades: list[NotebookGrade]) -> list[dict[str, str]]:
    return [{"file": g.shown, "exercise": g.exercise, "score": str(g.score), "max": str(g.max_score),
             "status": g.status, "reason": reason(g), "review": "; ".join(g.review)} for g in grades]


def test_rows(grades: list[NotebookGrade]) -> list[dict[str, str]]:
    return [{"file": g.shown, "exercise": g.exercise, "test": t.name, "points": str(t.points),
             "max_points": str(t.max_points), "passed": str(t.passed).lower(), "feedback": clean(t.feedback)}
            for g in grades if g.result for t in g.result.tests]


def feedback_markdown(grade: NotebookGrade) -> str:
    """The file handed back to one student: each test, its points and what was wrong."""
    lines = [f"# {markdown_text(grade.shown)}: {grade.exercise}", "",
             f"**Score: {grade.score}/{grade.max_score}** ({grade.status})", ""]
    if grade.result:
        lines += ["| test | points | feedback |", "|---|---|---|"]
        for test in grade.result.tests:
            mark = "✓" if test.passed else "✗"
            lines.append(f"| {mark} {test.name} | {test.points}/{test.max_points} | {markdown_text(test.feedback)} |")
    if reason(grade):
        lines += ["", f"Note: {markdown_text(reason(grade))}"]
    if grade.review:
        lines += ["", f"**Needs review** (a person will read this code): {markdown_text('; '.join(grade.review))}"]
    return "\n".join(lines) + "\n"


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def mistake(feedback: str) -> str:
    """A failure's feedback as a class-level mistake: the hint after the last ';' (its numbers kept)."""
    return clean(feedback).rsplit("; ", 1)[-1]


def group_mistakes(mistakes: list[str]) -> Counter:
    """Mistakes counted by their words: texts that differ only in numbers are one mistake.

    The text shown keeps every number the group agrees on ("elu(x) + 1", "1/sqrt(d)") and
    shows "…" only where its members measured different values (an error of 0.37 and of 0.52).
    """
    groups: dict[str, list[str]] = {}
    for text in mistakes:
        groups.setdefault(NUMBER.sub("#", text), []).append(text)
    shown = Counter()
    for members in groups.values():
        pieces = [NUMBER.split(text) for text in members]  # the words, the same in every member
        numbers = [NUMBER.findall(text) for text in members]  # the numbers, in the same places
        kept = [column[0] if len(set(column)) == 1 else "…" for column in zip(*numbers, strict=True)]
        words = pieces[0]
        text = "".join(word + number for word, number in zip(words, [*kept, ""], strict=True))
        shown[text[:160]] += len(members)
    return shown


def summary_markdown(grades: list[NotebookGrade], sandbox: str = "") -> str:
    """The sandbox the batch ran in; per exercise: score distribution, per-test pass rates and the three
    most common mistakes; then the notebooks that need review."""
    lines = ["# Class summary", "", *([f"Sandbox: {markdown_text(sandbox)}", ""] if sandbox else [])]
    for exercise in sorted({g.exercise for g in grades}):
        group = [g for g in grades if g.exercise == exercise]
        graded = [g for g in group if g.result]
        lines += [f"## {exercise}", "", f"{len(group)} notebooks, {sum(g.status == 'graded' for g in group)} graded; "
                  f"scores: {', '.join(f'{s}' for s in sorted((g.score for g in group), reverse=True))}", ""]
        if not graded:
            continue
        lines += ["| test | passed | most common mistakes |", "|---|---|---|"]
        for index, test in enumerate(graded[0].result.tests):
            results = [g.result.tests[index] for g in graded]
            counts = group_mistakes([mistake(r.feedback) for r in results if not r.passed])
            common = markdown_text("; ".join(f"{n}/{len(results)}: {text}" for text, n in counts.most_common(3)))
            lines.append(f"| {test.name} | {sum(r.passed for r in results)}/{len(results)} | {common} |")
        lines.append("")
    flagged = [g for g in grades if g.review]
    if flagged:
        lines += ["## Needs review", "", f"{len(flagged)} notebooks whose code may reach the model answer around "
                  "the block by name (flagged, not scored):", ""]
        lines += [f"- {markdown_text(g.shown)}: {markdown_text('; '.join(g.review))}" for g in flagged] + [""]
    return "\n".join(lines)


def histogram_png(grades: list[NotebookGrade]) -> bytes:
    """A bar chart of the scores (as a share of the maximum), PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shares = [100 * g.score / g.max_score if g.max_score else 0 for g in grades]
    figure, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist(shares, bins=[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100.001], edgecolor="black")
    ax.set(xlabel="score (% of the maximum)", ylabel="notebooks", title=f"{len(grades)} notebooks")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def feedback_names(names: list[str]) -> list[str]:
    """A file name for each notebook's feedback, from its path below the folder given; all different.

    ``/`` becomes ``__``; an underscore that could be read as part of one (doubled, or at either
    end of a folder's or the file's name) is written ``%5F``, and ``%`` itself ``%25``, so two
    paths give two names (``alice/hw_ex01`` → ``alice__hw_ex01.md``, ``alice_hw/ex01`` →
    ``alice_hw__ex01.md``). A name that still meets an earlier one (cut to 200 bytes, or differing
    only in case, which a case-insensitive file system merges) gets ``-2``, ``-3``, …: no feedback
    file is written twice.
    """
    taken, result = set(), []
    for name in names:
        parts = name.split("/")
        parts[-1] = parts[-1].removesuffix(".ipynb")
        stem = "__".join(SEPARATOR_LIKE.sub("%5F", part.replace("%", "%25")) for part in parts) or "notebook"
        stem = stem.encode()[:MAX_NAME_BYTES].decode(errors="ignore")
        candidate, count = stem, 1
        while candidate.casefold() in taken:
            count += 1
            candidate = f"{stem}-{count}"
        taken.add(candidate.casefold())
        result.append(f"{candidate}.md")
    return result


def write_reports(grades: list[NotebookGrade], *, csv_path: Path | None, out: Path | None,
                  sandbox: str = "") -> list[Path]:
    """Write ``csv_path`` (the class CSV) and, under ``out``, scores.csv, tests.csv, summary.md (naming
    ``sandbox``), scores.png and feedback/<notebook>.md (``feedback_names``); the paths written."""
    written = []
    if csv_path is not None:
        write_atomically(csv_path, _csv(SCORE_COLUMNS, score_rows(grades)))
        written.append(csv_path)
    if out is not None:
        files = {out / "scores.csv": _csv(SCORE_COLUMNS, score_rows(grades)),
                 out / "tests.csv": _csv(TEST_COLUMNS, test_rows(grades)),
                 out / "summary.md": summary_markdown(grades, sandbox).encode(),
                 out / "scores.png": histogram_png(grades)}
        for grade, name in zip(grades, feedback_names([g.shown for g in grades]), strict=True):
            files[out / "feedback" / name] = feedback_markdown(grade).encode()
        for path, data in files.items():
            write_atomically(path, data)
        written += list(files)
    return written
