"""The README is the learner's page: short, its map and total time generated from the lessons' metadata,
its badges built from pyproject's one repository URL, and every relative link in it and in the other
Markdown pages (CONTRIBUTING.md, docs/) leading to a file that exists."""
import re
import tomllib
from pathlib import Path
from urllib.parse import unquote

import pytest

from course_tools.workshop import course_map, lessons

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted([README, ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(path: Path) -> list[str]:
    """The Markdown links of ``path`` that point into the repository (no URL, no bare #anchor)."""
    return [target for target in LINK.findall(path.read_text(encoding="utf-8"))
            if "://" not in target and not target.startswith(("#", "mailto:"))]


def broken_links(path: Path) -> list[str]:
    return [target for target in relative_links(path)
            if not (path.parent / unquote(target.split("#", 1)[0])).exists()]


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_leads_to_a_file(path):
    assert not broken_links(path), f"{path.name}: dead links {broken_links(path)}"


def test_the_link_check_finds_a_dead_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[there](here.md) [ok](page.md#top) [web](https://example.org) [anchor](#a)")
    assert broken_links(page) == ["here.md"]


def test_the_readme_map_is_the_generated_one():
    text = README.read_text(encoding="utf-8")
    assert course_map.render(ROOT) in text, "the README's course map is stale: run make guide"


def test_the_total_time_is_the_sum_of_the_metadata():
    known = lessons.load_lessons(ROOT)
    minutes = lessons.exercise_minutes(ROOT)
    teaching, practice = course_map.total_minutes(known, minutes)
    assert teaching == sum(l.teaching_minutes for s, l in known.items() if s not in course_map.OPTIONAL)
    assert practice == sum(minutes.values()), "every exercise counted once"
    assert f"**About {course_map.hours(teaching + practice)}**" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("minutes, said", [(736, "12.5 hours"), (100, "1.5 hours"), (20, "0.5 hours"), (14, "0 hours")])
def test_hours_round_to_the_half_hour(minutes, said):
    assert course_map.hours(minutes) == said


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="NOTES.md has no course map markers"):
        course_map.replace_block("# no map here", "block", where="NOTES.md")


def test_the_readme_is_a_learners_page():
    text = README.read_text(encoding="utf-8")
    for heading in ("## Who it is for", "## How long it takes", "## Two ways to take it", "## Set-up: two commands"):
        assert heading in text
    assert len(text.splitlines()) <= 150, "detail belongs in CONTRIBUTING.md and docs/"
    shown = [LINK.sub("]", line) for line in text.splitlines() if line.startswith("|")]  # as rendered: no targets
    long_rows = [row[:60] for row in shown if len(row) > 160]
    assert len(shown) > 15 and not long_rows, f"map rows longer than 160 characters as shown: {long_rows}"


def test_the_badges_point_at_the_one_repository_url():
    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    owner_repo = url.removeprefix("https://github.com/")
    text = README.read_text(encoding="utf-8")
    badges = re.findall(r"\]\((https://(?:colab\.research\.google\.com/github|mybinder\.org/v2/gh)/[^)]+)\)", text)
    assert len(badges) == 2 and all(owner_repo in badge for badge in badges), badges
