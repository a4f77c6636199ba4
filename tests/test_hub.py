"""The workshop hub, for real: ``make test-hub`` builds it (HUB_PREFIX) and runs this file as root.

One hub on 127.0.0.1 (free ports), one instructor from a participants file, three participants
created through the REST API, their three servers started, a course notebook run cell by cell in
one participant's kernel over the server's kernel websocket (its checked outputs compared with the
committed ones, compared as nbval does), then, from inside that kernel: who it runs as, whether it can read another
participant's files, and the cgroup limits it lives under (a child that allocates past the limit
is killed; one under it is not). First-use passwords are tried through the login form. Everything
is torn down (servers, hub, accounts, cgroups) whatever happens; the timings are printed.

Skipped, with the reason, where it cannot run: not root, no ``adduser``, or the hub not built.
"""

import asyncio
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import nbformat
import pytest
import requests
from helpers import free_port, sanitize
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from course_tools.workshop import room

ROOT = Path(__file__).resolve().parents[1]
PREFIX = Path(os.environ.get("HUB_PREFIX", "/srv/linear-attention-course"))
NOTEBOOK = "notebooks/01_the_bottleneck.ipynb"
INSTRUCTOR = "hubtest-lead"
PARTICIPANTS = ("hubtest-alice", "hubtest-bob", "hubtest-carol")
MEM_LIMIT = 2 * 2**30
CPU_LIMIT = 1.0
TIMEOUT_S = 180
TIMINGS: dict[str, float] = {}

pytestmark = pytest.mark.hub


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "the hub test creates Unix accounts: it needs root"
    if shutil.which("adduser") is None or shutil.which("userdel") is None:
        return "adduser/userdel are not installed"
    for needed in ("venv/bin/jupyterhub", "venv/bin/jupyterhub-singleuser", "course/README.md",
                   "proxy/node_modules/.bin/configurable-http-proxy"):
        if not (PREFIX / needed).exists():
            return f"the hub is not built ({PREFIX / needed} is missing): run `make test-hub`"
    stale = stale_packages()
    if stale:
        return f"the hub was built from other code ({stale[0]}): run `make test-hub`, which refreshes it"
    return None


def stale_packages() -> list[str]:
    """The repository's course_lib / course_tools sources that the hub's environment lacks or holds
    in another version (the hub installs them at `make hub-install`)."""
    sites = sorted((PREFIX / "venv/lib").glob("python*/site-packages"))
    if not sites:
        return [f"no site-packages under {PREFIX / 'venv/lib'}"]
    differ = []
    for source in sorted([*(ROOT / "course_lib").rglob("*.py"), *(ROOT / "course_tools").rglob("*.py")]):
        installed = sites[0] / source.relative_to(ROOT)
        if not installed.exists() or installed.read_bytes() != source.read_bytes():
            differ.append(f"{source.relative_to(ROOT)} differs")
    return differ


def remove_accounts() -> list[str]:
    """Delete the test's accounts (with their homes) and cgroups; what could not be removed, one line each."""
    for name in (INSTRUCTOR, *PARTICIPANTS):
        subprocess.run(["userdel", "-r", name], capture_output=True)
    left = [f"account {name}" for name in (INSTRUCTOR, *PARTICIPANTS) if name in {u.pw_name for u in pwd.getpwall()}]
    for controller in ("memory", "cpu"):
        try:
            group = room.room_cgroup(controller)
        except KeyError:
            continue
        for folder in sorted(group.glob("hubtest-*")):
            try:
                folder.rmdir()
            except OSError as error:  # busy: a process of the test's is still inside
                left.append(f"cgroup {folder}: {error}")
        if group.is_dir() and not any(path.is_dir() for path in group.iterdir()):
            group.rmdir()  # a real room's users keep it
    return left


class Hub:
    """A hub process and the admin service token it was started with."""

    def __init__(self, state: Path):
        self.port = free_port(also_free_after=2)  # the hub's API and the proxy's API take port + 1 and + 2
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(32)
        participants = state / "participants.txt"
        participants.write_text(f"# the workshop's instructor\n{INSTRUCTOR} admin\n")
        env = dict(os.environ, WORKSHOP_PREFIX=str(PREFIX), WORKSHOP_STATE=str(state),
                   WORKSHOP_PARTICIPANTS=str(participants), WORKSHOP_PORT=str(self.port),
                   WORKSHOP_MEM_LIMIT=str(MEM_LIMIT), WORKSHOP_CPU_LIMIT=str(CPU_LIMIT),
                   WORKSHOP_API_TOKEN=self.token)
        self.log = state / "hub.log"
        self.process = subprocess.Popen(
            [str(PREFIX / "venv/bin/jupyterhub"), "-f", str(ROOT / "course_tools/workshop/jupyterhub_config.py")],
            cwd=state, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(method, f"{self.url}/hub/api{path}", timeout=30,
                                headers={"Authorization": f"token {self.token}"}, **kwargs)

    def wait_until(self, ready, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the hub exited while waiting for {what}:\n{self.tail()}"
            if ready():
                return
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def server_api(self, user: str, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(method, f"{self.url}/user/{user}/api{path}", timeout=60,
                                headers={"Authorization": f"token {self.token}"}, **kwargs)


def answered(hub: Hub) -> bool:
    try:
        return hub.api("GET", "/").status_code == 200
    except requests.ConnectionError:
        return False


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    remove_accounts()  # left over from an interrupted run
    state = tmp_path_factory.mktemp("hub-state")
    state.chmod(0o700)
    started = time.perf_counter()
    running = Hub(state)
    try:
        running.wait_until(lambda: answered(running), "the hub's API")
        TIMINGS["hub start"] = time.perf_counter() - started
        yield running
    finally:
        started = time.perf_counter()
        for name in PARTICIPANTS:
            try:
                running.api("DELETE", f"/users/{name}/server")
            except requests.ConnectionError:
                break
        running.process.terminate()
        try:
            running.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            running.process.kill()
        left = remove_accounts()
        TIMINGS["teardown"] = time.perf_counter() - started
        print("\nhub test timings (s): " + ", ".join(f"{what} {seconds:.1f}" for what, seconds in TIMINGS.items()))
        assert not left, "the teardown left behind: " + "; ".join(left)


@pytest.fixture(scope="module")
def servers(hub):
    """The three participants, created through the REST API, with their servers started."""
    created = hub.api("POST", "/users", json={"usernames": list(PARTICIPANTS)})
    assert created.status_code == 201, created.text
    for name in PARTICIPANTS:
        started = time.perf_counter()
        response = hub.api("POST", f"/users/{name}/server")
        assert response.status_code in (201, 202), response.text
        hub.wait_until(lambda: hub.api("GET", f"/users/{name}").json()["servers"].get("", {}).get("ready"),
                       f"{name}'s server")
        TIMINGS[f"spawn {name}"] = time.perf_counter() - started
    return PARTICIPANTS


async def execute(websocket, code: str) -> dict:
    """One execute_request (Jupyter messaging protocol 5.3) -> {'status', 'stdout', 'error'}."""
    msg_id = uuid.uuid4().hex
    await websocket.write_message(json.dumps({
        "channel": "shell", "parent_header": {}, "metadata": {}, "buffers": [],
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "hub-test",
                   "session": "hub-test", "version": "5.3", "date": ""},
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    found = {"status": None, "stdout": "", "error": ""}
    idle = False
    while found["status"] is None or not idle:
        raw = await asyncio.wait_for(websocket.read_message(), TIMEOUT_S)
        assert raw is not None, "the kernel's websocket closed"
        message = json.loads(raw)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream" and content["name"] == "stdout":
            found["stdout"] += content["text"]
        elif kind == "error":
            found["error"] = f"{content['ename']}: {content['evalue']}"
        elif kind == "execute_reply":
            found["status"] = content["status"]
        elif kind == "status" and content["execution_state"] == "idle":
            idle = True
    return found


def run_in_kernel(hub: Hub, user: str, notebook: str, cells: list[str]) -> list[dict]:
    """Open ``notebook`` in a fresh kernel on ``user``'s server (a session, as JupyterLab does) and run ``cells``."""
    session = hub.server_api(user, "POST", "/sessions", json={
        "path": notebook, "type": "notebook", "name": Path(notebook).name, "kernel": {"name": "python3"}})
    assert session.status_code == 201, session.text
    kernel = session.json()["kernel"]["id"]
    url = f"ws://127.0.0.1:{hub.port}/user/{user}/api/kernels/{kernel}/channels"

    async def run() -> list[dict]:
        websocket = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {hub.token}"}))
        try:
            return [await execute(websocket, code) for code in cells]
        finally:
            websocket.close()

    try:
        return asyncio.run(run())
    finally:
        hub.server_api(user, "DELETE", f"/sessions/{session.json()['id']}")


def peak_memory(user: str) -> int | None:
    """The most memory ``user``'s cgroup (server and kernels) has held, in bytes; None without cgroup limits."""
    try:
        return int((room.room_cgroup("memory") / user / "memory.max_usage_in_bytes").read_text())
    except (KeyError, OSError):
        return None


def printed(hub: Hub, user: str, code: str) -> str:
    [result] = run_in_kernel(hub, user, "notebooks/00_start_here.ipynb", [code])
    assert result["status"] == "ok", result["error"]
    return result["stdout"].strip()


def test_the_listed_instructor_gets_an_account_and_is_admin(hub):
    assert hub.api("GET", f"/users/{INSTRUCTOR}").json()["admin"] is True
    assert pwd.getpwnam(INSTRUCTOR).pw_dir == f"/home/{INSTRUCTOR}"
    assert Path(f"/home/{INSTRUCTOR}").stat().st_mode & 0o777 == 0o700


def test_each_participant_has_an_account_and_a_private_copy_of_the_course(servers):
    for name in servers:
        home = Path(pwd.getpwnam(name).pw_dir)
        assert home.stat().st_mode & 0o777 == 0o700, f"{home} must be closed to others"
        copy = home / room.COURSE_DIR
        assert (copy / NOTEBOOK).is_file() and not (copy / "solutions").exists()
        assert copy.stat().st_uid == pwd.getpwnam(name).pw_uid


def test_a_course_notebook_runs_in_a_participants_kernel(hub, servers):
    notebook = nbformat.read(ROOT / NOTEBOOK, as_version=4)
    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    started = time.perf_counter()
    results = run_in_kernel(hub, servers[0], NOTEBOOK, [cell.source for cell in cells])
    TIMINGS[f"{Path(NOTEBOOK).stem} in {servers[0]}'s kernel"] = time.perf_counter() - started
    peak = peak_memory(servers[0])
    if peak is not None:
        print(f"\npeak memory of {servers[0]}'s server and kernel: {peak / 2**20:.0f} MiB")
    checked = 0
    for number, (cell, result) in enumerate(zip(cells, results), start=1):
        assert result["status"] == "ok", f"code cell {number} failed: {result['error']}"
        streams = [out for out in cell.outputs if out.output_type == "stream" and out.name == "stdout"]
        if "# NBVAL_CHECK_OUTPUT" in cell.source and streams and len(streams) == len(cell.outputs):
            expected = "".join(out.text for out in streams)
            assert sanitize(result["stdout"]) == sanitize(expected), f"code cell {number} printed otherwise"
            checked += 1
    assert checked >= 5, f"only {checked} checked outputs compared"


def test_a_participant_runs_as_themselves_and_cannot_read_another_participants_files(hub, servers):
    alice, bob = servers[0], servers[1]
    own = f"/home/{alice}/{room.COURSE_DIR}/README.md"
    other = f"/home/{bob}/{room.COURSE_DIR}/README.md"
    assert Path(other).is_file()  # it is there: root sees it
    code = ("import getpass, os\n"
            f"print(getpass.getuser(), len(open({own!r}).read()) > 0)\n"
            f"for attempt in (lambda: open({other!r}).read(), lambda: os.listdir({os.path.dirname(other)!r})):\n"
            "    try:\n        attempt(); print('read')\n"
            "    except PermissionError:\n        print('PermissionError')\n")
    assert printed(hub, alice, code).split("\n") == [f"{alice} True", "PermissionError", "PermissionError"]


def test_a_participants_kernel_lives_under_the_memory_and_cpu_limits(hub, servers):
    try:
        room.prepare_limits("hubtest-probe", memory_bytes=MEM_LIMIT, cpus=CPU_LIMIT)
    except room.LimitsUnavailable as reason:
        pytest.skip(f"this machine cannot enforce the limits: {reason}")
    alice = servers[0]
    code = ("import subprocess, sys\n"
            "from pathlib import Path\n"
            "from course_tools.workshop.room import CGROUP_ROOT, own_cgroup\n"
            "mine = Path('/proc/self/cgroup').read_text()\n"
            "memory, cpu = (CGROUP_ROOT / c / own_cgroup(c, mine).lstrip('/') for c in ('memory', 'cpu'))\n"
            "print(memory.parts[-2:], cpu.parts[-2:])\n"
            "print((memory / 'memory.limit_in_bytes').read_text().strip())\n"
            "print((cpu / 'cpu.cfs_quota_us').read_text().strip())\n"
            "for gib in (0.5, 3):\n"
            "    grab = f\"b = b'x' * int({gib} * 2**30); print(len(b) > 0)\"\n"
            "    print(gib, subprocess.run([sys.executable, '-c', grab], capture_output=True).returncode)\n")
    lines = printed(hub, alice, code).split("\n")
    group = (room.CGROUP_GROUP, alice)
    assert lines[0] == f"{group} {group}", "the kernel must sit in its participant's own cgroups"
    assert lines[1:3] == [str(MEM_LIMIT), str(int(CPU_LIMIT * room.CPU_PERIOD_US))]
    assert lines[3:] == ["0.5 0", "3 -9"], "under the limit a child runs; past it the OOM killer stops it"


def test_first_use_password_is_set_at_first_login_and_then_required(hub, servers):
    def login(password: str) -> requests.Response:
        browser = requests.Session()
        page = browser.get(f"{hub.url}/hub/login", timeout=30)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)[1]
        return browser.post(f"{hub.url}/hub/login", timeout=30, allow_redirects=False,
                            data={"username": servers[1], "password": password, "_xsrf": xsrf})

    first = login("chosen-at-first-login")
    assert first.status_code == 302, "the first login sets the password"
    assert login("another-password").status_code == 403, "a different password is refused afterwards"
    assert login("chosen-at-first-login").status_code == 302


def test_the_idle_culler_runs_as_a_hub_service(hub):
    services = hub.api("GET", "/services").json()
    assert "idle-culler" in services, services
    pid = services["idle-culler"].get("pid")
    assert pid and Path(f"/proc/{pid}").exists(), f"the culler is not running: {services['idle-culler']}"
