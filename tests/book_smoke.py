"""Real-browser check of the book (run by `make test-browser` after `make book`): headless Chromium opens
build/book from the file system, types "ledger" into the site's search box, follows the first result,
waits for MathJax on that page and saves a screenshot. Everything the pages load is local, so this also
shows the book needs no network. Exit status 0 on success, else a message naming the step that failed.

    python tests/book_smoke.py --book build/book --screenshot docs/book.png
"""

import sys
from pathlib import Path

from browser_smoke import browser, browser_parser, parse_browser_args, report, save_screenshot, step
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

REPO = Path(__file__).resolve().parents[1]
WORD = "ledger"


def smoke(book: Path, screenshot: Path, chromium: str, chromedriver: str, timeout: float) -> None:
    driver = browser(chromium, chromedriver)
    driver.set_window_size(1280, 900)
    try:
        driver.get((book / "docs" / "book" / "index.html").resolve().as_uri())
        step("the book's front page loaded", lambda d: "Linear attention" in d.title, driver, timeout)
        button = next(b for b in driver.find_elements(By.CSS_SELECTOR, ".search-button__button") if b.is_displayed())
        button.click()  # the theme opens its search dialog
        step("the search box opened", lambda d: any(box.is_displayed() for box in
                                                    d.find_elements(By.CSS_SELECTOR, "input[name='q']")), driver, timeout)
        box = next(box for box in driver.find_elements(By.CSS_SELECTOR, "input[name='q']") if box.is_displayed())
        box.send_keys(WORD, Keys.ENTER)
        step("the search page answered", lambda d: d.current_url.split("?")[0].endswith("search.html"), driver, timeout)
        results = "#search-results li a"
        step(f"the search found pages with {WORD!r}",
             lambda d: len(d.find_elements(By.CSS_SELECTOR, results)) > 0, driver, timeout)
        found = driver.find_elements(By.CSS_SELECTOR, results)
        first, count = found[0], len(found)
        title, target = first.text, first.get_attribute("href")
        first.click()
        step("the first result opened", lambda d: d.current_url.split("?")[0] == target.split("?")[0], driver, timeout)
        step(f"the page says {WORD!r}", lambda d: WORD in d.find_element(By.TAG_NAME, "main").text.lower(),
             driver, timeout)
        math = driver.execute_script("return document.querySelectorAll('.math').length")
        if math:
            step("MathJax typeset the page's formulas", lambda d: d.execute_script(
                "return document.querySelectorAll('.MathJax, .MathJax_Display').length > 0"
                " && !document.querySelector('.MathJax_Error, .merror')"
                " && !document.body.innerText.includes('Math Processing Error')"
                " && window.MathJax.Hub.queue.pending === 0 && !window.MathJax.Hub.queue.running"), driver, timeout)
        print(f"search {WORD!r}: {count} results; the first, {title!r}, opened ({math} formulas on it)")
        save_screenshot(driver, screenshot)
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = browser_parser(__doc__.splitlines()[0], timeout=60.0)
    parser.add_argument("--book", type=Path, default=REPO / "build" / "book")
    parser.add_argument("--screenshot", type=Path, default=REPO / "docs" / "book.png")
    args = parse_browser_args(parser, argv)
    if not (args.book / "docs" / "book" / "index.html").exists():
        parser.error(f"--book {args.book} holds no built book: run `make book` first")
    return report("book smoke test", lambda: smoke(args.book, args.screenshot.resolve(), args.chromium,
                                                   args.chromedriver, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
