"""Real-browser smoke test of the explorer: JupyterLab + headless Chromium (run by `make test-browser`).

Starts JupyterLab on a free port with a throwaway token, settings and workspace; opens the explorer
notebook in Chromium (through chromedriver, Debian's `chromium` and `chromium-driver` packages); runs
every cell (JupyterLab's "Run All Cells" command); waits for the explorer widget; moves the N slider with the keyboard; checks
that the slider's readout and the drawn figure changed and that no cell raised; saves a screenshot.
Exit status 0 on success; otherwise a message naming the step that failed (and a screenshot of that
moment next to the requested one, suffixed ``.failed.png``).

    python tests/browser_smoke.py --notebook notebooks/11_explorer.ipynb --screenshot docs/explorer.png
"""

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[1]


class SmokeFailure(RuntimeError):
    """A step of the smoke test did not happen in time."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_lab(port: int, token: str, scratch: Path) -> subprocess.Popen:
    """JupyterLab serving the repository, with settings and workspaces in ``scratch`` (no user state)."""
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(scratch / "config"), JUPYTERLAB_SETTINGS_DIR=str(scratch / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"), COURSE_DEVICE="cpu")
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO}", "--LabApp.expose_app_in_browser=True"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    settings = {  # no news pop-up in the screenshot; never save the notebook back into the repository
        "apputils-extension/notification": '{"fetchNews": "false", "checkForUpdates": false}',
        "docmanager-extension/plugin": '{"autosave": false}',
    }
    for name, content in settings.items():
        path = scratch / "settings" / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    log = open(scratch / "lab.log", "w")
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_for_lab(port: int, token: str, lab: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lab.poll() is not None:
            raise SmokeFailure(f"JupyterLab exited with status {lab.returncode} while starting")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise SmokeFailure(f"JupyterLab did not answer on port {port} within {timeout:.0f} s")


def browser(chromium: str, chromedriver: str) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1300",
                 "--disable-gpu"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


def step(name: str, condition, driver: webdriver.Chrome, timeout: float):
    """Wait for ``condition``; on timeout raise a SmokeFailure naming ``name``."""
    print(f"... {name}", flush=True)
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(condition)
    except TimeoutException:
        raise SmokeFailure(f"step '{name}' did not complete within {timeout:.0f} s") from None


def kernel_ready(driver: webdriver.Chrome) -> bool:
    """The current notebook's session is ready and its kernel connected and idle (as JupyterLab sees it)."""
    return driver.execute_script(
        "const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        "const c = w && w.sessionContext; const k = c && c.session && c.session.kernel;"
        "return !!(c && c.isReady && k && k.connectionStatus === 'connected' && k.status === 'idle');")


def run_all_cells(driver: webdriver.Chrome) -> None:
    """JupyterLab's own "Run All Cells" command (the app is exposed by ``--LabApp.expose_app_in_browser``)."""
    print("... run all cells", flush=True)
    driver.execute_script(
        "const app = window.jupyterapp;"
        "app.shell.activateById(app.shell.currentWidget.id);"
        "app.commands.execute('notebook:run-all-cells');"  # not awaited: the steps below wait
    )


def figure_sources(driver: webdriver.Chrome) -> list[str]:
    """The data URLs of the images drawn inside the explorer's output."""
    return driver.execute_script(  # one call: the images are replaced while the explorer redraws
        "return Array.from(document.querySelectorAll('.course-explorer img')).map(image => image.src);")


def readout_text(driver: webdriver.Chrome) -> str:
    """The N slider's readout, e.g. "64"."""
    return driver.execute_script(
        "const r = document.querySelector('.course-explorer .explorer-n .widget-readout'); return r ? r.textContent : '';")


def smoke(notebook: str, screenshot: Path, chromium: str, chromedriver: str, timeout: float) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="browser_smoke_"))
    port, token = free_port(), secrets.token_hex(16)
    lab = start_lab(port, token, scratch)
    driver = None
    try:
        wait_for_lab(port, token, lab, timeout)
        driver = browser(chromium, chromedriver)
        driver.get(f"http://127.0.0.1:{port}/lab/workspaces/smoke/tree/{notebook}?reset&token={token}")
        step("the notebook opens", ec.presence_of_element_located((By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")),
             driver, timeout)
        step("the kernel is connected and idle", kernel_ready, driver, timeout)
        run_all_cells(driver)
        box = step("the explorer widget renders", ec.visibility_of_element_located(
            (By.CSS_SELECTOR, ".course-explorer")), driver, timeout)
        step("every cell has run", lambda d: d.find_elements(
            By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator[data-status='idle']") and not d.find_elements(
            By.XPATH, "//div[contains(@class,'jp-InputPrompt') and contains(normalize-space(),'[*]')]"), driver, timeout)
        errors = driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")
        if errors:
            raise SmokeFailure(f"a cell raised: {errors[0].text[:500]}")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", box)
        slider = box.find_element(By.CSS_SELECTOR, ".explorer-n")
        before_value, before_figures = readout_text(driver), figure_sources(driver)
        handle = slider.find_element(By.CSS_SELECTOR, ".noUi-handle")
        handle.click()
        for _ in range(4):
            handle.send_keys(Keys.ARROW_RIGHT)
        step("the N readout moves", lambda d: readout_text(d) != before_value, driver, timeout)
        step("the explorer redraws", lambda d: figure_sources(d) != before_figures, driver, timeout)
        time.sleep(1.0)  # let the new figure finish painting
        print(f"N slider moved: {before_value} -> {readout_text(driver)}")
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(screenshot))
        print(f"wrote {screenshot}")
    except Exception:
        if driver is not None:
            driver.save_screenshot(str(screenshot.with_suffix(".failed.png")))
            print(f"screenshot of the failure: {screenshot.with_suffix('.failed.png')}", file=sys.stderr)
        print(f"JupyterLab log: {scratch / 'lab.log'}", file=sys.stderr)
        raise
    finally:
        if driver is not None:
            driver.quit()
        lab.terminate()
        try:
            lab.wait(timeout=15)
        except subprocess.TimeoutExpired:
            lab.kill()


def save_screenshot(driver: webdriver.Chrome, path: Path) -> None:
    """The browser's window as a PNG at ``path`` (its folder made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))


def browser_parser(description: str, *, timeout: float) -> argparse.ArgumentParser:
    """The options every browser check shares: where Chromium and chromedriver are, and the step timeout."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    parser.add_argument("--chromedriver", default=shutil.which("chromedriver"))
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds allowed for each step")
    return parser


def parse_browser_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if not args.chromium or not args.chromedriver:
        parser.error("needs Chromium and chromedriver on PATH (Debian: apt-get install chromium chromium-driver)")
    return args


def report(name: str, check) -> int:
    """Run ``check()``; print whether the check called ``name`` passed; its exit status."""
    try:
        check()
    except SmokeFailure as failure:
        print(f"{name} FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"{name} passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = browser_parser(__doc__.splitlines()[0], timeout=180.0)
    parser.add_argument("--notebook", default="notebooks/11_explorer.ipynb", help="path relative to the repository")
    parser.add_argument("--screenshot", type=Path, default=REPO / "docs" / "explorer.png")
    args = parse_browser_args(parser, argv)
    if not (REPO / args.notebook).exists():
        parser.error(f"--notebook {args.notebook} does not exist under {REPO}")
    return report("browser smoke test", lambda: smoke(args.notebook, args.screenshot.resolve(), args.chromium,
                                                      args.chromedriver, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
