"""Where the course's clone is, if this ``course_lib`` runs from one, and the repository's address.

The quiz key (``solutions/quiz_key.json``) and the notebooks its explanations point to sit beside
the package only in a clone with an editable install. A plain ``pip install`` (Colab, a student's
own environment) copies ``course_lib`` alone into site-packages, so walking up from this file finds
no clone there: ``CLONE`` is then None and the quiz records answers, its links pointing to the
repository on the web instead.
"""

import importlib.metadata
from pathlib import Path

DISTRIBUTION = "course_lib"


def clone_root(start: Path = Path(__file__)) -> Path | None:
    """The clone holding ``start`` (the folder two levels above ``course_lib/quiz``), or None.

    A clone is recognised by its ``pyproject.toml`` naming the ``course_lib`` project.
    """
    root = start.resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or f'name = "{DISTRIBUTION}"' not in pyproject.read_text(encoding="utf-8"):
        return None
    return root


def repository_url() -> str | None:
    """The ``Repository`` Project-URL of the installed ``course_lib`` distribution, or None."""
    try:
        urls = importlib.metadata.metadata(DISTRIBUTION).get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    found = (url.split(",", 1) for url in urls if "," in url)
    return next((address.strip() for label, address in found if label.strip() == "Repository"), None)


CLONE = clone_root()
