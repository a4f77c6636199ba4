"""The pointers in a quiz explanation, as links: HTML for the widget, markdown for a notebook, text elsewhere.

An explanation ends with pointers such as ``See notebooks/05_the_ledger.ipynb (section "From the
masked matrix to the recursion")``. ``pointers`` finds them; ``to_html`` and ``to_markdown`` turn the
notebook path into a link to the notebook and every quoted section into a link to that section's
heading. In a clone, hrefs are relative to ``notebooks/`` (where notebook 10 shows the quiz); installed
without a clone (``clone.CLONE`` is None), they point to the notebooks in the repository named by the
distribution's ``Repository`` Project-URL, and with no such URL the pointers stay plain text. ``base``
overrides both.
"""

import functools
import html
import json
import os
import re
from dataclasses import dataclass

from course_lib.quiz.clone import CLONE, repository_url

NOTEBOOKS = None if CLONE is None else CLONE / "notebooks"


def default_base() -> str | None:
    """Where hrefs start by default: ``""`` in a clone, else the repository's notebooks on the web, else None."""
    if NOTEBOOKS is not None:
        return ""
    url = repository_url()
    return None if url is None else f"{url.rstrip('/')}/blob/main/notebooks/"


# notebooks/NAME.ipynb, then optionally ' (section "A")' or ' (sections "A", "B" and "C", steps 1 to 4)'
POINTER = re.compile(r'notebooks/(?P<notebook>[\w.-]+\.ipynb)(?P<where> \(sections? (?:"[^"]*"|[^")])*\))?')
QUOTED = re.compile(r'"([^"]+)"')


@dataclass(frozen=True)
class Link:
    """One piece of an explanation: ``text`` as written, ``href`` (None for plain text)."""

    text: str
    href: str | None = None


@functools.lru_cache(maxsize=None)
def headings(notebook: str) -> tuple[str, ...]:
    """The markdown headings of ``notebooks/<notebook>`` (none if the notebook is not there)."""
    path = None if NOTEBOOKS is None else NOTEBOOKS / notebook
    if path is None or not path.is_file():
        return ()
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return tuple(h for s in sources for h in re.findall(r"^#+\s+(.+?)\s*$", s, flags=re.M))


def _plain(text: str) -> str:
    """A heading as the reader sees it, to compare: marks dropped (``*not*`` -> ``not``), quotes alike."""
    return re.sub(r"[*`$]", "", text).replace('"', "'").strip()


def heading(section: str, notebook: str) -> str | None:
    """The heading of ``notebooks/<notebook>`` that ``section`` names (None if there is none).

    The same text first (marks and quotes aside); else the one heading that shares the longest
    beginning with it, at least 12 characters (the key writes "Var ∝ 1/m" for the heading's LaTeX).
    """
    found = headings(notebook)
    exact = next((h for h in found if _plain(h) == _plain(section)), None)
    if exact is not None or not found:
        return exact
    shared = [len(os.path.commonprefix([_plain(h), _plain(section)])) for h in found]
    best = max(shared)
    return found[shared.index(best)] if best >= 12 and shared.count(best) == 1 else None


def anchor(section: str, notebook: str | None = None) -> str:
    """The heading id JupyterLab gives ``section``: its text, spaces turned into hyphens.

    With ``notebook``, the section is first matched to that notebook's heading (the key may drop the
    heading's ``$…$`` or ``*…*`` marks), so the id is the heading's own.
    """
    section = (heading(section, notebook) if notebook else None) or section
    return re.sub(r"[*`]", "", section).strip().replace(" ", "-")


def pointers(explanation: str) -> list[tuple[str, list[str]]]:
    """Every ``(notebook file, [sections])`` an explanation points to, in order."""
    return [(m["notebook"], QUOTED.findall(m["where"] or "")) for m in POINTER.finditer(explanation)]


def split(explanation: str, base: str | None = None) -> list[Link]:
    """The explanation cut into plain pieces and linked pieces (notebook paths and quoted sections).

    ``base`` (default ``default_base()``) starts every href; None leaves the whole explanation plain.
    """
    base = default_base() if base is None else base
    if base is None:
        return [Link(explanation)] if explanation else []
    pieces, at = [], 0
    for match in POINTER.finditer(explanation):
        notebook = match["notebook"]
        path_text = explanation[match.start():match.end("notebook")]  # "notebooks/NAME.ipynb"
        pieces += [Link(explanation[at:match.start()]), Link(path_text, f"{base}{notebook}")]
        where, inner = match["where"] or "", 0
        for quoted in QUOTED.finditer(where):
            pieces.append(Link(where[inner:quoted.start()]))
            pieces.append(Link(quoted.group(0), f"{base}{notebook}#{anchor(quoted[1], notebook)}"))
            inner = quoted.end()
        pieces.append(Link(where[inner:]))
        at = match.end()
    pieces.append(Link(explanation[at:]))
    return [piece for piece in pieces if piece.text]


def to_html(explanation: str, base: str | None = None) -> str:
    """The explanation as HTML (escaped), each pointer an ``<a>`` that opens in a new tab."""
    return "".join(
        html.escape(p.text) if p.href is None
        else f'<a href="{html.escape(p.href)}" target="_blank">{html.escape(p.text)}</a>'
        for p in split(explanation, base)
    )


def to_markdown(explanation: str, base: str | None = None) -> str:
    """The explanation as markdown, each pointer a ``[text](href)`` link."""
    def link(piece: Link) -> str:
        text = piece.text.replace("]", r"\]")
        href = piece.href.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
        return f"[{text}]({href})"

    return "".join(p.text if p.href is None else link(p) for p in split(explanation, base))
