"""`make lab` serves the repository root: exercises/ and the notebooks are both reachable.

The test reads the `jupyter lab ...` line of the Makefile's recipe (`make -n lab`), starts that
server without a browser on a free port with a token, and asks its contents API for exercises/
and for notebooks/00_start_here.ipynb. The server is always stopped, whatever happens.
The other tests read or run the Makefile's set-up rules without installing anything: a Python
without ensurepip leaves no half-made venv, root keeps --allow-root, TORCH=cpu picks PyTorch's
CPU index.
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


def make(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=check)


def lab_command(*make_args: str) -> list[str]:
    """The argv of the `jupyter lab` line that `make lab` would run (its arguments after `lab`)."""
    dry_run = make("-n", "lab", *make_args).stdout
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


def test_make_lab_registers_no_second_kernel_and_make_kernel_does():
    lab, kernel = (make("-n", target).stdout for target in ("lab", "kernel"))
    assert "ipykernel install" not in lab, f"make lab must leave the launcher one kernel (python3), but runs:\n{lab}"
    assert "ipykernel install --user --name linear-attention-course" in kernel, f"make -n kernel ran:\n{kernel}"


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
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path),
           "JUPYTER_DATA_DIR": str(tmp_path / "data")}  # no kernels a user registered before
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

        status, body = get(f"{base}/api/kernelspecs?token={token}")
        specs = json.loads(body)
        assert (status, sorted(specs["kernelspecs"]), specs["default"]) == (200, ["python3"], "python3"), (
            f"the launcher must offer the one kernel the notebooks name: {status} {sorted(specs['kernelspecs'])}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


# Debian's python3 without python3-venv: `-m venv` makes bin/python, then stops at ensurepip.
PYTHON_WITHOUT_ENSUREPIP = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  shift 2
  "{python}" -m venv --without-pip "$@" || exit 1
  echo "The virtual environment was not created successfully because ensurepip is not available." >&2
  exit 1
fi
exec "{python}" "$@"
"""


@pytest.mark.parametrize("half_made_before", [False, True], ids=["fresh", "half-made-venv-from-before"])
def test_a_python_without_ensurepip_leaves_no_venv_and_says_what_to_install(tmp_path, half_made_before):
    fake = tmp_path / "python3"
    fake.write_text(PYTHON_WITHOUT_ENSUREPIP.format(python=sys.executable))
    fake.chmod(0o755)
    venv = tmp_path / "venv"
    if half_made_before:  # what an older Makefile left behind: bin/python, no pip
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    result = make("install", f"VENV={venv}", f"PYTHON={fake}", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"make install went on without pip:\n{output}"
    assert "apt install python3-venv" in output, f"make install did not say what to install:\n{output}"
    assert not venv.exists(), f"make install left a half-made venv behind: {sorted(p.name for p in venv.iterdir())}"


def test_root_keeps_allow_root_whatever_lab_args_says():
    argv = lab_command("LAB_ARGS=--port 8890")
    assert "--port" in argv and argv[argv.index("--port") + 1] == "8890", f"LAB_ARGS was dropped: {argv}"
    if os.getuid() == 0:
        assert "--allow-root" in argv, f"as root, make lab must pass --allow-root: {argv}"
    else:
        assert "--allow-root" not in argv, f"--allow-root is for root only: {argv}"


def torch_install_line(tmp_path, *make_args: str) -> str:
    dry_run = make("-n", "install", f"VENV={tmp_path / 'venv'}", *make_args).stdout
    lines = [line for line in dry_run.splitlines() if "import torch" in line]
    assert len(lines) == 1, f"expected one torch install line in `make -n install`, got:\n{dry_run}"
    return lines[0]


def test_torch_cpu_installs_from_pytorchs_cpu_index_and_default_from_the_usual_index(tmp_path):
    cpu = torch_install_line(tmp_path, "TORCH=cpu")
    installs = [shlex.split(part) for part in cpu.split("||")[1:]]
    assert all(argv[-2:] == ["--index-url", "https://download.pytorch.org/whl/cpu"] for argv in installs), cpu
    assert installs[0][-3] == "torch==2.13.0", f"the index must not be quoted into the spec: {cpu}"
    assert "--index-url" not in torch_install_line(tmp_path), "TORCH=default must use pip's usual index"
    assert make("-n", "install", f"VENV={tmp_path / 'venv'}", "TORCH=gpu", check=False).returncode != 0
