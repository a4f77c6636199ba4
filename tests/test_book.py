"""The book (docs/book, `make book`): built here from the committed notebooks, then read back.

Every lesson and exercise is a page and no solution is; nothing a page loads comes from another
machine (scripts, styles, images, frames, fonts in the CSS, URLs in inline scripts); maths is MathJax
from the site itself, the explorer shows its saved picture, the badges are local, the search index
knows "ledger", and the glossary sets Chinese terms beside English ones. tests/book_smoke.py then
searches the built site in Chromium (`make test-browser`).
"""

import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("myst_nb", reason="the book's extras are not installed: pip install -e '.[book]'")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted(ROOT.glob("notebooks/*.ipynb")), *sorted(ROOT.glob("exercises/*.ipynb"))]
LOADS = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src", "video": "src",
         "embed": "src", "link": "href"}  # what a browser fetches by itself (a link's href only for these rels)
FETCHED_RELS = {"stylesheet", "preload", "icon", "shortcut", "modulepreload", "prefetch", "manifest"}
OFF_MACHINE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)
CJK = re.compile(r"[\u4e00-\u9fff]")


class Loads(HTMLParser):
    """The URLs a page makes the browser fetch, and the text of its inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "link" and not FETCHED_RELS & set((attrs.get("rel") or "").lower().split()):
            return
        if tag in LOADS and attrs.get(LOADS[tag]):
            self.urls.append(attrs[LOADS[tag]])
        self._in_script = tag == "script" and not attrs.get("src")

    def handle_endtag(self, tag):
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data):
        if self._in_script:
            self.inline.append(data)


def loads(page: Path) -> Loads:
    parser = Loads()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    start = time.perf_counter()
    built = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-c", "docs/book", "-q", ".", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    print(f"book built in {time.perf_counter() - start:.1f} s")
    return out


def test_the_table_of_contents_lists_every_lesson_and_exercise_and_no_solution():
    index = (ROOT / "docs" / "book" / "index.md").read_text(encoding="utf-8")
    listed = re.findall(r"^/((?:notebooks|exercises)/[\w]+)$", index, re.M)
    assert listed == [str(p.relative_to(ROOT).with_suffix("")) for p in PAGES], "docs/book/index.md's toctree"
    assert "solutions/" not in index


def test_every_lesson_and_exercise_is_a_page_and_no_solution_is(book):
    missing = [p.name for p in PAGES if not (book / p.relative_to(ROOT).with_suffix(".html")).is_file()]
    assert not missing, missing
    assert not (book / "solutions").exists()
    assert not [p for p in book.rglob("*.html") if "# BEGIN SOLUTION" in p.read_text(encoding="utf-8")]
    assert (book / "index.html").read_text(encoding="utf-8").count("docs/book/index.html") >= 1


def test_no_page_loads_anything_from_another_machine(book):
    pages = sorted(book.rglob("*.html"))
    assert len(pages) > len(PAGES)
    for page in pages:
        found = loads(page)
        remote = [url for url in found.urls if OFF_MACHINE.match(url.strip())]
        assert not remote, f"{page.relative_to(book)} loads {remote[:3]}"
        scripted = [m.group() for text in found.inline for m in re.finditer(r"https?://[^\s\"'`)]+", text)]
        assert not scripted, f"{page.relative_to(book)} has an inline script that reaches {scripted[:3]}"
    for style in book.rglob("*.css"):
        remote = re.findall(r"url\(\s*['\"]?((?:https?:)?//[^)'\"]+)", style.read_text(encoding="utf-8"))
        assert not remote, f"{style.relative_to(book)} fetches {remote[:3]}"
    assert OFF_MACHINE.match("https://cdn.example/x.js") and OFF_MACHINE.match("//cdn.example/x.js")


def test_maths_comes_from_the_site_and_every_page_with_maths_loads_it(book):
    page = book / "notebooks" / "02_blackboard_associativity.html"
    mathjax = [url for url in loads(page).urls if "MathJax.js" in url]
    assert mathjax and (page.parent / mathjax[0].split("?")[0]).resolve().is_file()
    assert page.read_text(encoding="utf-8").count('class="math') > 50


def test_plots_badges_and_the_explorers_saved_picture_are_local_files(book):
    page = book / "notebooks" / "11_explorer.html"
    images = [url for url in loads(page).urls if url.endswith((".png", ".svg"))]
    assert any(url.endswith("colab-badge.svg") for url in images) and any(url.endswith("binder-badge.svg") for url in images)
    assert sum(url.endswith(".png") for url in images) >= 1  # the explorer's snapshot, not a widget
    assert all((page.parent / url).resolve().is_file() for url in images)
    assert "application/vnd.jupyter.widget-view+json" not in page.read_text(encoding="utf-8")
    assert "COLAB_RELEASE_TAG" not in page.read_text(encoding="utf-8")  # the Colab set-up cell is left out


def test_the_search_index_knows_the_ledger(book):
    index = (book / "searchindex.js").read_text(encoding="utf-8")
    assert '"ledger"' in index and "05_the_ledger" in index


def test_the_glossary_sets_the_articles_chinese_terms_beside_english_ones(book):
    source = (ROOT / "docs" / "book" / "glossary.md").read_text(encoding="utf-8")
    terms = re.findall(r"^([^\s`#].*?) \((.+)\)$", source, re.M)
    assert len(terms) >= 35, len(terms)
    assert all(CJK.search(chinese) or chinese.startswith("KV") for _, chinese in terms)
    assert all(re.search(r"[a-z]", english) for english, _ in terms)
    page = (book / "docs" / "book" / "glossary.html").read_text(encoding="utf-8")
    assert 'id="term-ledger' in page and "账本" in page and "黑板" in page
