"""What the browser scripts (web_page.py, web_page_large.py) share: headless Chromium through
chromedriver, a failure reported as one JSON object, and waits for a state."""

import json
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service


def fail(message):
    """Prints {"error": message} and exits non-zero."""
    print(json.dumps({"error": message}))
    sys.exit(1)


def wait_for(what, condition, bound=180, every=0.1):
    """condition's first true value; a row the page replaced while it was read counts as not
    yet. The bound only ends a hung run."""
    end = time.monotonic() + bound
    while time.monotonic() < end:
        try:
            value = condition()
        except StaleElementReferenceException:
            value = None
        if value:
            return value
        time.sleep(every)
    fail("gave up waiting for " + what)


def chromium(browser_log=False):
    """Headless Chromium at 1280 x 640 (its console kept when browser_log)."""
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,640", "--no-first-run", "--disable-extensions"]:
        options.add_argument(argument)
    if browser_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
