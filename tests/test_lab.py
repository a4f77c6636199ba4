"""`make lab` serves the repository root: exercises/ and the notebooks are both reachable.

The test reads the `jupyter lab ...` line of the Makefile's recipe (`make -n lab`), starts that
server without a browser on a free port with a token, and asks its contents API for exercises/
and for notebooks/00_start_here.ipynb. The server is always stopped, whatever happens.
"""

import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 20.0


def lab_command() -> list[str]:
    """The argv of the `jupyter lab` line that `make lab` would run (its arguments after `lab`)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry_run = subprocess.run(["make", "-n", "--no-print-directory", "lab"], cwd=ROOT, capture_output=True,
                             text=True, timeout=30, check=True).stdout
    lines = [shlex.split(line) for line in dry_run.splitlines() if " lab " in f" {line} "]
    lab_lines = [argv for argv in lines if len(argv) >= 2 and argv[0].endswith("jupyter") and argv[1] == "lab"]
    assert len(lab_lines) == 1, f"expected one `jupyter lab` line in `make -n lab`, got:\n{dry_run}"
    return lab_lines[0]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_make_lab_recipe_serves_the_repository_root():
    argv = lab_command()
    assert "--ServerApp.root_dir=." in argv, f"make lab must serve the repository root, got {argv}"
    assert argv[-1] == "notebooks/00_start_here.ipynb", f"make lab must open 00_start_here, got {argv}"


def test_lab_server_lists_exercises_and_opens_start_here(tmp_path):
    argv = lab_command()
    jupyter = Path(sys.executable).with_name("jupyter")  # the test's own environment, as $(BIN)/jupyter
    if not jupyter.exists():
        pytest.skip(f"no jupyter next to {sys.executable}")
    port, token = free_port(), secrets.token_hex(16)
    extra = ["--no-browser", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
             f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"]
    if os.getuid() == 0 and "--allow-root" not in argv:
        extra.append("--allow-root")
    # make's line with our flags inserted before the notebook path (the last argument)
    command = [str(jupyter), *argv[1:-1], *extra, argv[-1]]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path)}
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        status = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                status, _ = get(f"{base}/api/status?token={token}")
            except OSError:  # not listening yet
                status = None
            if status == 200:
                break
            time.sleep(0.25)
        log.flush()
        output = (tmp_path / "lab.log").read_text()
        assert status == 200, f"the server did not answer within {START_TIMEOUT_S} s:\n{output[-3000:]}"

        status, body = get(f"{base}/api/contents/exercises?token={token}")
        assert status == 200, f"GET /api/contents/exercises answered {status}: {body[:300]!r}"
        names = {entry["name"] for entry in json.loads(body)["content"]}
        assert "ex01_softmax_attention.ipynb" in names, f"exercises/ as served lists {sorted(names)}"

        status, body = get(f"{base}/api/contents/notebooks/00_start_here.ipynb?content=0&token={token}")
        assert status == 200, f"notebooks/00_start_here.ipynb is not reachable: {status} {body[:300]!r}"
        assert json.loads(body)["type"] == "notebook"
        status, _ = get(f"{base}/lab/tree/notebooks/00_start_here.ipynb?token={token}")
        assert status == 200, f"JupyterLab's page for 00_start_here answered {status}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()
