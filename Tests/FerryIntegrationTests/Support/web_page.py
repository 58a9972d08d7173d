"""Drives the daemon's web page in headless Chromium (Selenium with chromedriver).

Usage: web_page.py PAGE_URL FILE_URL FOLDER SCREENSHOT FOREIGN_PAGE_URL

PAGE_URL is the address `ferry web` prints (with the token). The script checks the page
refuses a visit without the token, adds FILE_URL to be saved in FOLDER, waits for its
progress to advance, saves SCREENSHOT, pauses and resumes it and waits for it to complete;
adds it again and cancels that one; from a page of another origin (FOREIGN_PAGE_URL) tries
the API the way a hostile site would; back on the page, sees both tasks still listed and
clears them. It prints one JSON object of what it saw; any failure exits non-zero with the
reason.
Every wait is for a state, with a generous bound only to end a hung run.
"""

import json
import sys
from urllib.parse import urlsplit

from selenium.webdriver.common.by import By

from browser import chromium, fail, wait_for


def main():
    page, file_url, folder, screenshot, foreign = sys.argv[1:6]
    parts = urlsplit(page)
    origin = parts.scheme + "://" + parts.netloc
    token = page.split("token=", 1)[1]

    driver = chromium(browser_log=True)
    seen = {}
    try:
        # Without the token: refused, and no page.
        driver.get(origin + "/")
        body = driver.find_element(By.TAG_NAME, "body").text
        if "unauthorized" not in body or driver.find_elements(By.ID, "add"):
            fail("the page without its token was served: " + body[:200])
        seen["withoutToken"] = json.loads(body)["error"]["status"]

        driver.get(page)
        wait_for("the empty list", lambda: driver.find_element(By.ID, "empty").is_displayed())
        # The token leaves the address bar at once; a reload still shows the page.
        if "token" in driver.current_url:
            fail("the token stayed in the page's address: " + driver.current_url)
        driver.refresh()
        wait_for("the empty list after a reload", lambda: driver.find_element(By.ID, "empty").is_displayed())
        driver.find_element(By.ID, "url").send_keys(file_url)
        field = driver.find_element(By.ID, "folder")
        field.clear()
        field.send_keys(folder)
        driver.find_element(By.ID, "filename").send_keys("from-the-page.bin")
        driver.find_element(By.ID, "add-button").click()
        row = wait_for("the new row", lambda: driver.find_elements(By.CSS_SELECTOR, "#tasks tbody tr"))[0]
        seen["task"] = int(row.get_attribute("data-id"))

        def received():
            return int(row.get_attribute("data-received") or "0")

        wait_for("the transfer to run", lambda: row.get_attribute("data-state") == "running" and received() > 0)
        first = received()
        wait_for("progress to advance", lambda: received() > first)
        wait_for("a rate and an ETA", lambda: row.find_element(By.CSS_SELECTOR, "td.rate").text
                 and row.find_element(By.CSS_SELECTOR, "td.eta").text)
        seen["rate"] = row.find_element(By.CSS_SELECTOR, "td.rate").text
        seen["eta"] = row.find_element(By.CSS_SELECTOR, "td.eta").text
        seen["progress"] = row.find_element(By.CSS_SELECTOR, "td.progress").text
        driver.save_screenshot(screenshot)

        row.find_element(By.CSS_SELECTOR, "button.pause").click()
        wait_for("paused", lambda: row.get_attribute("data-state") == "paused")
        seen["pausedAt"] = received()
        if seen["pausedAt"] >= int(row.find_element(By.TAG_NAME, "progress").get_attribute("max") or "0"):
            fail("the transfer had finished before it was paused")
        row.find_element(By.CSS_SELECTOR, "button.resume").click()
        wait_for("resumed", lambda: row.get_attribute("data-state") in ("queued", "running", "completed"))
        wait_for("completed", lambda: row.get_attribute("data-state") == "completed")
        seen["completedBytes"] = received()

        # A second one, cancelled from the page.
        driver.find_element(By.ID, "url").send_keys(file_url)
        driver.find_element(By.ID, "filename").send_keys("cancelled.bin")
        driver.find_element(By.ID, "add-button").click()
        second = wait_for("the second row", lambda: [r for r in driver.find_elements(By.CSS_SELECTOR, "#tasks tbody tr")
                                                     if r.get_attribute("data-id") != str(seen["task"])])[0]
        seen["cancelledTask"] = int(second.get_attribute("data-id"))
        wait_for("a cancel button", lambda: second.find_elements(By.CSS_SELECTOR, "button.cancel"))
        second.find_element(By.CSS_SELECTOR, "button.cancel").click()
        wait_for("cancelled", lambda: second.get_attribute("data-state") == "canceled")

        # The page's own script and style ran under its policy: nothing was blocked.
        blocked = [entry["message"] for entry in driver.get_log("browser") if "Content Security Policy" in entry["message"]]
        if blocked:
            fail("the page's policy blocked something: " + "; ".join(blocked))

        # A hostile page of another origin, even knowing the token, gets nothing done: a
        # read with the token needs a preflight, which is refused; a "simple" POST (no
        # preflight, no way to read the answer) carries its Origin and is refused.
        driver.get(foreign)
        seen["foreignRead"] = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch(arguments[0] + "/v1/tasks", { headers: { "Authorization": "Bearer " + arguments[1] } })
              .then((response) => done("answered " + response.status), (error) => done("blocked: " + error));
        """, origin, token)
        seen["foreignPost"] = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch(arguments[0] + "/v1/clean", { method: "POST", mode: "no-cors", body: "{}" })
              .then(() => done("sent"), (error) => done("blocked: " + error));
        """, origin)

        # Back on the page: the hostile POST cleaned nothing; our own button does.
        driver.get(page)
        wait_for("both rows", lambda: len(driver.find_elements(By.CSS_SELECTOR, "#tasks tbody tr")) == 2)
        seen["statesAfterForeignPost"] = sorted(r.get_attribute("data-state")
                                                for r in driver.find_elements(By.CSS_SELECTOR, "#tasks tbody tr"))
        driver.find_element(By.ID, "clean").click()
        wait_for("the cleared list", lambda: driver.find_element(By.ID, "empty").is_displayed())
        seen["afterClear"] = driver.find_element(By.ID, "message").text
    finally:
        driver.quit()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
