"""Helpers to drive the console in a real headless Chromium through Selenium: find the browser,
start it with its console log captured (at desktop or phone size), wait for elements, collect
JavaScript errors, check contrast and accessibility (axe-core, vendored in tests/vendor), and
save small screenshots."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver",)
DESKTOP = (1280, 800)
PHONE = (390, 844)
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"


def find_browser() -> tuple[str, str] | None:
    """The Chromium binary and its driver, or None when either is missing."""
    browser = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    driver = next((p for p in map(shutil.which, DRIVER_NAMES) if p), None)
    return (browser, driver) if browser and driver else None


def require_browser() -> tuple[str, str]:
    found = find_browser()
    if found is None:
        pytest.skip(
            "no Chromium with chromedriver installed (apt-get install chromium chromium-driver)"
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (the dev extra has it)")
    return found


@contextmanager
def chromium(width: int = 1280, height: int = 800) -> Iterator[Any]:
    """A headless Chromium session whose browser log (JavaScript errors) can be read."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container: the sandbox cannot start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    mobile = width < 600  # a phone: its viewport, touch and the meta viewport honoured
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)  # the page's size
    try:
        yield driver
    finally:
        driver.quit()


def severe_logs(driver: Any) -> list[str]:
    """Browser log entries of level SEVERE: uncaught errors, CSP violations, failed loads."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait_for(driver: Any, css: str, text: str | None = None, timeout_s: float = 60) -> Any:
    """The first visible element matching ``css`` (whose text contains ``text``, when given)."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d: Any) -> Any:
        for element in d.find_elements(By.CSS_SELECTOR, css):
            if element.is_displayed() and (text is None or text in element.text):
                return element
        return False

    wait = WebDriverWait(driver, timeout_s, ignored_exceptions=[StaleElementReferenceException])
    try:
        return wait.until(found)
    except TimeoutException:
        alert = driver.find_element(By.ID, "error").text
        screenshot(driver, "failure")
        raise AssertionError(
            f"no visible {css!r}"
            + (f" with {text!r}" if text else "")
            + f"; the page says {alert!r}; browser errors: {severe_logs(driver)}"
        ) from None


def screenshot(driver: Any, name: str) -> None:
    """With ``KNOWMIND_CONSOLE_SCREENSHOTS=DIR`` set, save the page as ``DIR/name.png``: the
    viewport, reduced to a palette of 48 colours so the committed images stay small."""
    folder = os.environ.get("KNOWMIND_CONSOLE_SCREENSHOTS")
    if not folder:
        return
    from io import BytesIO

    from PIL import Image

    Path(folder).mkdir(parents=True, exist_ok=True)
    image = Image.open(BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    small = image.quantize(colors=48, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(Path(folder) / f"{name}.png", optimize=True)


def accessibility_violations(driver: Any) -> list[str]:
    """axe-core's serious and critical violations of the page as it is (WCAG 2.1 A and AA)."""
    if not driver.execute_script("return Boolean(window.axe)"):
        driver.execute_script(AXE.read_text())  # Selenium injects it: the page's CSP allows no
        # script of another origin, and knowmind does not serve it
    found = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a',"
        " 'wcag21aa', 'best-practice']}, resultTypes: ['violations']})"
        ".then((r) => done(r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))"
        ".map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' '))"
        ".join(', ')}`)), (e) => done([`axe failed: ${e}`]));"
    )
    return list(found)


def horizontal_overflow(driver: Any) -> int:
    """How many pixels the page is wider than the window (0: nothing to scroll sideways)."""
    return int(
        driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    )


_CONTRAST_JS = """
const lum = (c) => {
  const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map((v) => {
    const s = Number(v) / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const opaque = (c) => !/rgba\\(.*,\\s*0\\)$/.test(c) && c !== 'transparent';
const background = (node) => {
  for (let n = node; n; n = n.parentElement) {
    const c = getComputedStyle(n).backgroundColor;
    if (opaque(c)) return c;
  }
  return 'rgb(255, 255, 255)';
};
const low = [];
for (const node of document.querySelectorAll('body *')) {
  if (node.closest('svg') || node.disabled || node.closest('fieldset:disabled')) continue;
  const own = [...node.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim());
  if (!own || !node.getClientRects().length) continue;
  const a = lum(getComputedStyle(node).color), b = lum(background(node));
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  if (ratio < 4.5) low.push(`${node.tagName}.${node.className}: ${ratio.toFixed(2)}`);
}
return low;
"""


def low_contrast(driver: Any) -> list[str]:
    """Visible text whose colour has less than 4.5:1 contrast with its background (WCAG AA)."""
    return list(driver.execute_script(_CONTRAST_JS))
