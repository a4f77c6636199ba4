"""The shape every notebook promises its reader: short cells, readable lines, lessons that end with a
summary, an interview check with hidden answers and the exercise, and links that lead somewhere."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(
    p for folder in ("notebooks", "solutions", "exercises") for p in (ROOT / folder).glob("*.ipynb")
)
NOT_LESSONS = {  # notebooks without the lesson ending, and why
    "00_start_here": "the map of the course",
    "03b_kernel_numerics": "optional reading: a summary, no interview check of its own",
    "10_interview_quiz": "the interview questions themselves",
    "11_explorer": "the explorer's manual",
}
LESSONS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if p.stem not in NOT_LESSONS)
MAX_CELL_LINES = 20
MAX_LINE = 100
LINK = re.compile(r"\]\(([^)\s]+?\.ipynb)(#[^)\s]*)?\)")


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_code_cells_are_short_and_lines_readable(path):
    problems = []
    for index, cell in enumerate(cells(path)):
        if cell["cell_type"] != "code":
            continue
        lines = source(cell).splitlines()
        if len(lines) > MAX_CELL_LINES:
            problems.append(f"c{index}: {len(lines)} lines (at most {MAX_CELL_LINES})")
        problems += [
            f"c{index}: a line of {len(line)} characters (at most {MAX_LINE}): {line[:40]}..."
            for line in lines
            if len(line) > MAX_LINE
        ]
    assert not problems, "\n".join(problems)


def anchors(path: Path) -> set[str]:
    """JupyterLab's heading anchors: the heading text with spaces turned into hyphens."""
    found = set()
    for cell in cells(path):
        if cell["cell_type"] == "markdown":
            for heading in re.findall(r"^#+\s+(.+?)\s*$", source(cell), flags=re.M):
                found.add(heading.replace(" ", "-"))
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_links_lead_to_existing_notebooks_and_sections(path):
    broken = []
    for index, cell in enumerate(cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        for target, anchor in LINK.findall(source(cell)):
            if "://" in target:
                continue
            linked = (path.parent / target).resolve()
            if not linked.exists():
                broken.append(f"c{index}: {target} does not exist")
            elif anchor and anchor[1:] not in anchors(linked):
                broken.append(f"c{index}: {target} has no section {anchor}")
    assert not broken, "\n".join(broken)


def printed(cell: dict) -> list[str]:
    """The texts a code cell's committed outputs show: streams, results and displayed text."""
    texts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            texts.append("".join(output["text"]))
        texts += ["".join(value) for kind, value in output.get("data", {}).items() if kind.startswith("text/")]
    return texts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_each_cell_prints_one_block_and_says_what_it_checked(path):
    """A cell's prints are one block (``make notebooks`` merges them), and no check prints a bare
    True or False: the reader is told what was compared, and how closely."""
    problems = []
    for index, cell in enumerate(cells(path)):
        outputs = cell.get("outputs", [])
        problems += [
            f"c{index}: its {first['name']} is split into several blocks (re-run with `make notebooks`)"
            for first, second in zip(outputs, outputs[1:])
            if first["output_type"] == second["output_type"] == "stream" and first["name"] == second["name"]
        ]
        problems += [f"c{index}: prints a bare {text.strip()}" for text in printed(cell)
                     if text.strip() in ("True", "False")]
    assert not problems, "\n".join(problems)


EXECUTED = [p for p in NOTEBOOKS if p.parent.name != "exercises"]  # exercises are handed out blank


@pytest.mark.parametrize("path", EXECUTED, ids=ids(EXECUTED))
def test_every_code_cell_was_run_in_order_before_it_was_committed(path):
    """Lessons and solutions are committed executed, top to bottom in one kernel: a reader on GitHub
    sees every output, and a cell added later (a generated header) is not left without its run."""
    counts = [cell.get("execution_count") for cell in cells(path) if cell["cell_type"] == "code"]
    never = [index for index, count in enumerate(counts) if count is None]
    assert not never, f"code cells {never} were never run: re-run the notebook with `make notebooks`"
    assert counts == sorted(counts) and len(set(counts)) == len(counts), f"run out of order: {counts}"


# The course's two sources are "the article" and "the interview reference"; "seed" means a random seed.
SOURCE_AS_SEED = re.compile(r"\bseeds?\s+[12]\b|\bthe seeds\b|\bseed's\b|\bseeds'|\bseed section\b", re.I)
LEARNER_TEXTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "course_lib").rglob("*.py")])


def seed_for_source(text: str) -> list[str]:
    return [text[max(0, m.start() - 40): m.end() + 20].replace("\n", " ") for m in SOURCE_AS_SEED.finditer(text)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebooks_name_the_sources_not_seeds(path):
    notebook = json.loads(path.read_text())
    found = [f"c{index}: ...{hit}..." for index, cell in enumerate(notebook["cells"])
             for text in [source(cell), *printed(cell)] for hit in seed_for_source(text)]
    found += [f"metadata: ...{hit}..." for hit in seed_for_source(json.dumps(notebook["metadata"]))]
    assert not found, "say 'the article' or 'the interview reference':\n" + "\n".join(found)


def test_readme_docs_and_package_name_the_sources_not_seeds():
    found = [f"{p.relative_to(ROOT)}: ...{hit}..." for p in LEARNER_TEXTS for hit in seed_for_source(p.read_text())]
    assert not found, "say 'the article' or 'the interview reference':\n" + "\n".join(found)


def headed(cell: dict, title: str) -> bool:
    return cell["cell_type"] == "markdown" and source(cell).lstrip().startswith(f"## {title}")


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_lesson_ends_with_summary_interview_check_and_exercise(path):
    tail = cells(path)[-6:]
    titles = [i for i, c in enumerate(tail) if headed(c, "Summary")]
    assert titles, f"{path.name}: no '## Summary' cell among the last cells"
    summary, check, answers, exercise = tail[titles[-1]: titles[-1] + 4]
    bullets = re.findall(r"^\s*[*-] ", source(summary), flags=re.M)
    assert 3 <= len(bullets) <= 6, f"{path.name}: the summary has {len(bullets)} bullets (3 to 6)"
    assert headed(check, "Interview check"), f"{path.name}: '## Interview check' must follow it"
    assert "interview-answers" in answers.get("metadata", {}).get("tags", []), (
        f"{path.name}: the cell after the interview check must be tagged 'interview-answers'"
    )
    assert "<details>" in source(answers), f"{path.name}: the answers must be inside <details>"
    assert headed(exercise, "Exercise"), f"{path.name}: '## Exercise' must come last"


def test_the_style_checks_catch_what_they_should(tmp_path):
    """A long cell, a long line and a dead link are each reported (the checks can fail)."""
    notebook = tmp_path / "bad.ipynb"
    long_cell = {"cell_type": "code", "source": "x = 1\n" * 21, "metadata": {}, "outputs": []}
    long_line = {"cell_type": "code", "source": "y = '" + "a" * 100 + "'", "metadata": {}}
    dead_link = {"cell_type": "markdown", "source": "[x](missing.ipynb)", "metadata": {}}
    notebook.write_text(json.dumps({"cells": [long_cell, long_line, dead_link]}))
    with pytest.raises(AssertionError) as too_long:
        test_code_cells_are_short_and_lines_readable(notebook)
    assert "c0: 21 lines" in str(too_long.value) and "c1: a line of 106" in str(too_long.value)
    with pytest.raises(AssertionError, match="missing.ipynb does not exist"):
        test_notebook_links_lead_to_existing_notebooks_and_sections(notebook)
    with pytest.raises(AssertionError, match="no '## Summary'"):
        test_lesson_ends_with_summary_interview_check_and_exercise(notebook)
    split = {"output_type": "stream", "name": "stdout", "text": "a\n"}
    bare = {"output_type": "execute_result", "data": {"text/plain": "True"}, "metadata": {}}
    printing = {"cell_type": "code", "source": "print(1)", "metadata": {}, "outputs": [split, split, bare]}
    seeded = {"cell_type": "markdown", "source": "As seed 1 says, and the seed's demo", "metadata": {}}
    notebook.write_text(json.dumps({"cells": [printing, seeded], "metadata": {}}))
    with pytest.raises(AssertionError) as printed_badly:
        test_each_cell_prints_one_block_and_says_what_it_checked(notebook)
    assert "c0: its stdout is split" in str(printed_badly.value) and "c0: prints a bare True" in str(printed_badly.value)
    with pytest.raises(AssertionError, match="c1: ...As seed 1"):
        test_notebooks_name_the_sources_not_seeds(notebook)
    with pytest.raises(AssertionError, match=r"code cells \[0\] were never run"):
        test_every_code_cell_was_run_in_order_before_it_was_committed(notebook)
    run = {"cell_type": "code", "source": "x", "metadata": {}, "outputs": []}
    notebook.write_text(json.dumps({"cells": [{**run, "execution_count": 2}, {**run, "execution_count": 1}]}))
    with pytest.raises(AssertionError, match=r"run out of order: \[2, 1\]"):
        test_every_code_cell_was_run_in_order_before_it_was_committed(notebook)
    assert seed_for_source("random seeds 0 to 15; mean over random seeds; seed=3") == []
