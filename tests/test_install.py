"""A plain (non-editable) ``pip install`` of the repository, the kind Colab's ``pip install git+URL`` makes,
used from outside any clone: the committed results must come with it as package data.

The test copies the tracked files (what ``git+URL`` fetches), installs them into a fresh venv, deletes the
copy, and runs from an empty folder the loading cells of notebooks 08 and 12 (tagged ``loads-results``)
after each notebook's import cell. It takes a minute or two (a full dependency install); pip's cache
keeps a rerun short.
"""

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from course_tools.workshop.lessons import HEADER_TAG

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # the Makefile's TORCH_SPEC: a local CPU wheel on the course's machines
LOADING_NOTEBOOKS = {  # notebook -> a line its loading cells print
    "notebooks/08_when_it_pays.ipynb": "committed CPU run:",
    "notebooks/12_what_the_ledger_remembers.ipynb": "runs on",
}


def loading_script(notebook: Path) -> str:
    """The notebook's first lesson code cell (its imports) and every cell tagged ``loads-results``, as one script.

    The generated header cells come first and are left out (their Colab cell does nothing here)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code" and HEADER_TAG not in cell["metadata"].get("tags", [])]
    tagged = [cell for cell in code if "loads-results" in cell["metadata"].get("tags", [])]
    assert tagged, f"{notebook.name} has no cell tagged loads-results"
    return "\n\n".join("".join(cell["source"]) for cell in [code[0], *tagged])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the repository installed from a copy of its tracked files; the copy is removed."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git clone (the tracked files are what pip installs)")
    work = tmp_path_factory.mktemp("plain_install")
    source = work / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    venv.create(work / "venv", with_pip=True)
    python = work / "venv" / "bin" / "python"
    for args in ([TORCH], [str(source)]):
        done = subprocess.run([python, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        assert done.returncode == 0, f"pip install {args[0]} failed:\n{done.stderr[-3000:]}"
    shutil.rmtree(source)
    return python


def test_the_plain_install_is_not_the_clone(installed, tmp_path):
    where = subprocess.run([installed, "-c", "import course_lib, course_lib.records as r; print(course_lib.__file__);"
                            "print(r.RESULTS_DIR)"], cwd=tmp_path, capture_output=True, text=True, check=True)
    package, results = where.stdout.split()
    assert "site-packages" in package and not package.startswith(str(ROOT)), package
    assert (Path(results) / "bench_cpu.json").is_file() and (Path(results) / "recall_cpu.json").is_file()


@pytest.mark.parametrize("notebook", list(LOADING_NOTEBOOKS))
def test_the_loading_cells_run_from_a_plain_install(installed, tmp_path, notebook):
    script = tmp_path / "loading_cells.py"
    script.write_text(loading_script(ROOT / notebook), encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": ""}
    done = subprocess.run([installed, script.name], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, f"{notebook}'s loading cells failed:\n{done.stderr[-3000:]}"
    assert LOADING_NOTEBOOKS[notebook] in done.stdout, done.stdout


def test_the_loading_script_is_the_tagged_cells(tmp_path):
    notebook = {"cells": [{"cell_type": "code", "metadata": {"tags": [HEADER_TAG]}, "source": ["# Colab set-up"]},
                          {"cell_type": "markdown", "metadata": {}, "source": ["# t"]},
                          {"cell_type": "code", "metadata": {}, "source": ["import math"]},
                          {"cell_type": "code", "metadata": {}, "source": ["x = 1"]},
                          {"cell_type": "code", "metadata": {"tags": ["loads-results"]}, "source": ["print(math.pi)"]}]}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(notebook))
    assert loading_script(path) == "import math\n\nprint(math.pi)"
    notebook["cells"][4]["metadata"] = {}
    path.write_text(json.dumps(notebook))
    with pytest.raises(AssertionError, match="no cell tagged"):
        loading_script(path)
