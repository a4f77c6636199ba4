"""Execute notebooks in place on the CPU, one print block per cell: ``make notebooks`` runs this.

Why not ``jupyter nbconvert --execute --inplace``: on a busy machine a cell's prints arrive as several
stream messages and are saved as several output blocks. nbclient can merge them (``coalesce_streams``),
but that option cannot be set from nbconvert's command line, and nbconvert's ``--coalesce-streams``
runs its merge *before* execution, on the old outputs.
"""
import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", coalesce_streams=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(env={**os.environ, "COURSE_DEVICE": "cpu"})
    nbformat.write(notebook, path)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"executing {name}", flush=True)
        execute(Path(name))
