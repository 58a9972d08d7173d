"""Opens the daemon's web page over a store of many tasks in headless Chromium (Selenium with
chromedriver) and walks its pages.

Usage: web_page_large.py PAGE_URL PAGE_SIZE

PAGE_URL is the address `ferry web` prints (with the token). The script loads the page and
waits for its first page of rows and the totals; reads how long after the navigation began
the first page was shown (the page's own clock, performance.now()); goes to the next page and
back. It prints one JSON object of what it saw; any failure exits non-zero with the reason.
Every wait is for a state, with a generous bound only to end a hung run.
"""

import json
import sys

from selenium.webdriver.common.by import By

from browser import chromium, wait_for


def main():
    page, size = sys.argv[1], int(sys.argv[2])
    driver = chromium()
    seen = {}
    try:
        driver.get(page)

        def ids():
            return [int(r.get_attribute("data-id")) for r in driver.find_elements(By.CSS_SELECTOR, "#tasks tbody tr")]

        # The moment the first page is in the table, on the page's clock (0 = the navigation's start).
        shown = wait_for("the first page", lambda: driver.execute_script("""
            if (document.querySelectorAll('#tasks tbody tr').length === 0) return null;
            return performance.now() / 1000;""") or None, every=0.02)
        seen["shownAfterSeconds"] = shown
        wait_for("a full page", lambda: len(ids()) == size)
        seen["firstPage"] = ids()
        seen["summary"] = wait_for("the totals", lambda: driver.find_element(By.ID, "summary").text)
        driver.find_element(By.ID, "next").click()
        seen["secondPage"] = wait_for("the next page", lambda: (lambda now: now if now and now != seen["firstPage"]
                                                                 else None)(ids()))
        driver.find_element(By.ID, "previous").click()
        seen["backToFirst"] = wait_for("the first page again", lambda: ids() == seen["firstPage"] and ids())
    finally:
        driver.quit()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
