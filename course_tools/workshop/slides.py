"""Slides from the same notebooks: one reveal.js deck per notebook, served from a local copy.

``tag(notebook)`` gives every cell that has no ``slideshow`` metadata yet a slide type by one
rule, so the decks follow the lesson's shape: a new **slide** at each ``#``/``##`` heading, a
**subslide** for the cells that matter on a screen — a derivation (display math ``$$``), a plot
(an image output) and a verdict (a cell that says "verdict") — everything else continues the
slide it is on, and the interview answers are **skipped** (the room answers first). An
author's own choice in a cell's metadata is kept.

``build`` converts with nbconvert's ``SlidesExporter`` (the kept library for notebook → reveal.js)
and points reveal.js, RequireJS, MathJax and jQuery at ``vendor/node_modules`` beside the decks, which
``make slides`` fills from npm (``VENDOR``), so a deck opens from the file system with no
network. Long slides scroll (``reveal_scroll``). nbconvert's reveal template also imports mermaid from a
CDN in an inline module script; no notebook of the course draws a mermaid diagram, so ``exporter``
renders through a two-line child template (``WITHOUT_MERMAID``) that empties that block instead of
vendoring a library the decks never use.
"""

import shutil
import subprocess
from pathlib import Path

import jinja2
import nbformat
from nbconvert import SlidesExporter
from traitlets.config import Config

# what nbconvert 7's reveal template loads (it names reveal.js 4, RequireJS, MathJax 2 and jQuery 2 on CDNs)
VENDOR = {"reveal.js": "4.6.0", "requirejs": "2.3.7", "mathjax": "2.7.9", "jquery": "2.2.4"}
ANSWERS_TAG = "interview-answers"
DECK_TEMPLATE = "course_slides.html.j2"
WITHOUT_MERMAID = ("{%- extends 'index.html.j2' -%}\n"  # nbconvert's reveal template, less its CDN import
                   "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}\n")


def slide_type(cell: nbformat.NotebookNode) -> str:
    """The rule: "slide", "subslide", "skip" or "-" (continue) for one cell."""
    text = cell.source.lstrip()
    if ANSWERS_TAG in cell.metadata.get("tags", []):
        return "skip"
    if cell.cell_type == "markdown" and (text.startswith("# ") or text.startswith("## ")):
        return "slide"
    plotted = any("image/png" in output.get("data", {}) for output in cell.get("outputs", []))
    if plotted or (cell.cell_type == "markdown" and ("$$" in text or "verdict" in text.lower())):
        return "subslide"
    return "-"


def tag(notebook: nbformat.NotebookNode) -> int:
    """Give each cell without ``slideshow`` metadata its rule's slide type; returns how many were set."""
    changed = 0
    for index, cell in enumerate(notebook.cells):
        if "slide_type" not in cell.metadata.get("slideshow", {}):
            cell.metadata["slideshow"] = {"slide_type": "slide" if index == 0 else slide_type(cell)}
            changed += 1
    return changed


def exporter() -> SlidesExporter:
    """nbconvert's slides exporter with every script taken from ``vendor/node_modules`` beside the deck, none from a CDN."""
    config = Config()
    config.SlidesExporter.reveal_url_prefix = "vendor/node_modules/reveal.js"
    config.SlidesExporter.reveal_scroll = True
    config.SlidesExporter.reveal_number = "c/t"
    config.HTMLExporter.require_js_url = "vendor/node_modules/requirejs/require.js"
    config.HTMLExporter.jquery_url = "vendor/node_modules/jquery/dist/jquery.min.js"
    config.HTMLExporter.mathjax_url = "vendor/node_modules/mathjax/MathJax.js?config=TeX-AMS_SVG-full,Safe"  # SVG: no web fonts to fetch
    return SlidesExporter(config=config, template_file=DECK_TEMPLATE,
                          extra_loaders=[jinja2.DictLoader({DECK_TEMPLATE: WITHOUT_MERMAID})])


def install_vendor(out: Path) -> None:
    """``npm install`` the packages of ``VENDOR`` into ``out/vendor`` unless they are there."""
    vendor = out / "vendor"
    if all((vendor / "node_modules" / name).is_dir() for name in VENDOR):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise ValueError("the slides need npm (Node.js) to fetch reveal.js, RequireJS, MathJax and jQuery once")
    vendor.mkdir(parents=True, exist_ok=True)
    packages = [f"{name}@{version}" for name, version in VENDOR.items()]
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(vendor), *packages], check=True)


def build(notebooks: list[Path], out: Path) -> list[Path]:
    """Write ``out/<stem>.slides.html`` for each notebook, with the scripts in ``out/vendor``."""
    install_vendor(out)
    slides, written = exporter(), []
    for path in notebooks:
        notebook = nbformat.read(path, as_version=4)
        tag(notebook)  # cells not tagged in the committed notebook still get a slide type
        body, _ = slides.from_notebook_node(notebook, resources={"metadata": {"name": path.stem}})
        target = out / f"{path.stem}.slides.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written
