"""The course as a static book: ``make book`` builds build/book/ from the executed notebooks, offline.

Sphinx with MyST-NB rather than Jupyter Book: Jupyter Book 2 is built on mystmd, a Node.js tool,
while Sphinx and MyST-NB are pure Python from PyPI, render the committed outputs without running a
kernel (``nb_execution_mode = "off"``), and give full-text search in the browser with no server. The
page look is sphinx-book-theme's (Jupyter Book 1's). Nothing is fetched at build or view time: MathJax
is the copy the ``jupyter-server-mathjax`` wheel ships, copied into the site; the Colab and Binder
badges point at local SVGs (``_static``); widget views, which need a kernel or a CDN, are left out,
and the explorer's saved picture stands in. The source is the repository root, narrowed by
``include_patterns`` to this folder, the lessons and the exercises (no solution is published).
"""

import shutil
import sys
from pathlib import Path

import jupyter_server_mathjax
from docutils import nodes

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from course_tools.workshop.headers import BINDER_BADGE, COLAB_BADGE, TAG, repository_url  # noqa: E402

project = "Linear attention: the canteen, the blackboard and the ledger"
author = "The Linear Attention course authors"
copyright = "2026, " + author  # noqa: A001 - Sphinx's name
extensions = ["myst_nb"]
root_doc = "docs/book/index"
include_patterns = ["docs/book/*.md", "notebooks/*.ipynb", "exercises/*.ipynb"]
exclude_patterns = [".venv", ".git", "build", "dist", "**/.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3  # the notebooks link to each other's headings
nb_execution_mode = "off"  # the committed outputs are the book's; nothing runs
nb_ipywidgets_js = {}  # no widget manager from a CDN
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]  # the PNG beside it
suppress_warnings = ["myst.xref_missing", "misc.highlighting_failure"]  # links to pages the book leaves out

html_theme = "sphinx_book_theme"
html_title = "Linear attention"
html_static_path = ["_static"]
html_theme_options = {"repository_url": repository_url(ROOT), "use_repository_button": True,
                      "use_download_button": False, "use_fullscreen_button": False}
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"  # relative to _static
mathjax2_config = {
    "HTML-CSS": {"availableFonts": ["STIX-Web"], "preferredFont": "STIX-Web", "webFont": "STIX-Web",
                 "imageFont": None},  # the fonts the wheel ships (it has no TeX fonts)
    "tex2jax": {"processClass": "math|output_area"},  # MyST-NB marks notebook pages mathjax_ignore
}
MATHJAX = Path(jupyter_server_mathjax.__file__).with_name("static")
LOCAL_BADGES = {COLAB_BADGE: "/docs/book/_static/colab-badge.svg", BINDER_BADGE: "/docs/book/_static/binder-badge.svg"}


def local_badges_and_no_setup_cell(app, doctree) -> None:
    """Badge images from _static; the Colab set-up cell (a course-header code cell) left out of the page."""
    for image in doctree.findall(nodes.image):
        if image["uri"] in LOCAL_BADGES:
            image["uri"] = LOCAL_BADGES[image["uri"]]
    for cell in list(doctree.findall(nodes.container)):
        if cell.get("nb_element") == "cell_code" and TAG in cell.get("cell_metadata", {}).get("tags", []):
            cell.parent.remove(cell)


def copy_mathjax_and_point_to_the_index(app, exception) -> None:
    """MathJax into _static; an index.html at the top that sends a browser (or GitHub Pages) to the book's."""
    if exception is None and app.builder.format == "html":
        shutil.copytree(MATHJAX, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)
        (Path(app.outdir) / "index.html").write_text(
            '<!DOCTYPE html><meta charset="utf-8"><title>Linear attention</title>'
            '<meta http-equiv="refresh" content="0; url=docs/book/index.html">'
            '<a href="docs/book/index.html">The book</a>\n', encoding="utf-8")


def setup(app):
    app.set_html_assets_policy("always")  # MathJax on every page: the side bars carry headings with maths
    app.connect("doctree-read", local_badges_and_no_setup_cell, priority=100)  # before images are collected
    app.connect("build-finished", copy_mathjax_and_point_to_the_index)
