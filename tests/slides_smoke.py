"""Real-browser check of one slide deck: headless Chromium opens it from the file system (run by
`make test-browser` after `make slides`), waits for reveal.js and MathJax, advances one slide and
saves a screenshot. The deck's scripts come from the local vendor folder, so this also shows that
it needs no network. Exit status 0 on success, else a message naming the step that failed.

    python tests/slides_smoke.py --deck build/slides/05_the_ledger.slides.html --screenshot docs/slides.png
"""

import sys
from pathlib import Path

from browser_smoke import browser, browser_parser, parse_browser_args, report, save_screenshot, step
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

REPO = Path(__file__).resolve().parents[1]


def smoke(deck: Path, screenshot: Path, chromium: str, chromedriver: str, timeout: float) -> None:
    driver = browser(chromium, chromedriver)
    try:
        driver.get(deck.resolve().as_uri())
        # nbconvert loads reveal.js through RequireJS (no global Reveal): read its state from the page
        step("reveal.js is ready", lambda d: d.execute_script(
            "const r = document.querySelector('.reveal'); return !!r && r.classList.contains('ready')"), driver, timeout)
        total = driver.execute_script("return document.querySelectorAll('.slides > section').length")
        before = driver.execute_script("return location.hash")
        step("MathJax typeset the formulas",
             lambda d: d.execute_script("return document.querySelectorAll('.MathJax_SVG, .MathJax_CHTML, mjx-container').length > 0"),
             driver, timeout)
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
        step("the right arrow moved to the next slide", lambda d: d.execute_script("return location.hash") != before,
             driver, timeout)
        after = driver.execute_script("return location.hash")
        print(f"{total} slides; moved from {before or '#/'} to {after}")
        save_screenshot(driver, screenshot)
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = browser_parser(__doc__.splitlines()[0], timeout=60.0)
    parser.add_argument("--deck", type=Path, default=REPO / "build" / "slides" / "05_the_ledger.slides.html")
    parser.add_argument("--screenshot", type=Path, default=REPO / "docs" / "slides.png")
    args = parse_browser_args(parser, argv)
    if not args.deck.exists():
        parser.error(f"--deck {args.deck} does not exist: run `make slides` first")
    return report("slides smoke test", lambda: smoke(args.deck, args.screenshot.resolve(), args.chromium,
                                                     args.chromedriver, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
