"""The console at /ui: its files and headers (in-process), and a real headless Chromium driving
it against a real `knowmind serve` — sign-in, admin, upload, recall with the explain view, graph,
answer, erasure — failing on any JavaScript error. Skips only where no Chromium is installed."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from knowmind.answer.methods import METHOD_NAMES
from knowmind.api.controllers.ui import CONSOLE_CSP
from knowmind.contract.limits import MemoryType
from knowmind.recall.registry import STAGE_NAMES
from tests.browser import (
    chromium,
    low_contrast,
    require_browser,
    screenshot,
    severe_logs,
    wait_for,
)
from tests.test_server_process import free_port, knowmind, stop, wait_ready

UI_DIR = Path(__file__).resolve().parent.parent / "knowmind" / "ui"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


async def test_console_page_and_files_carry_a_strict_policy(client):
    root = await client.get("/", follow_redirects=False)
    assert (root.status_code, root.headers["location"]) == (302, "/ui")
    page = await client.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CONSOLE_CSP
    assert "script-src 'self'" in CONSOLE_CSP and "unsafe-inline" not in CONSOLE_CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.text
    assert "<script>" not in html and " style=" not in html  # nothing inline: CSP would block it
    for asset in re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', html):
        served = await client.get(asset)
        assert served.status_code == 200, asset
        assert served.headers["content-security-policy"] == CONSOLE_CSP
    script = await client.get("/ui/static/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    for bad in ("nope.js", "..%2Fapp.py", "__init__.py", ".hidden.js"):
        assert (await client.get(f"/ui/static/{bad}")).status_code == 404, bad


def test_console_scripts_never_write_html():
    """Data reaches the page as text only: no innerHTML/outerHTML/insertAdjacentHTML/eval."""
    for script in UI_DIR.glob("*.js"):
        source = script.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in source, f"{script.name} uses {sink}"


def test_console_choices_match_the_api():
    """The type filter, stage switches and answer methods offer exactly what the API takes."""
    html = (UI_DIR / "index.html").read_text()
    script = (UI_DIR / "app.js").read_text()
    types = re.search(r'<select id="f-type">(.*?)</select>', html).group(1)
    assert re.findall(r"<option>(\w+)</option>", types) == list(get_args(MemoryType))
    methods = re.search(r'<select id="a-method">(.*?)</select>', html).group(1)
    assert sorted(re.findall(r"<option>(\w+)</option>", methods)) == sorted(METHOD_NAMES)
    stages = re.search(r"const STAGES = \[(.*?)\];", script).group(1)
    assert sorted(re.findall(r'"(\w+)"', stages)) == sorted(STAGE_NAMES)


def test_every_text_is_in_both_languages():
    texts = (UI_DIR / "i18n.js").read_text()
    english, german = texts.split("\n  de: {", 1)
    keys = lambda part: set(re.findall(r"^\s{4}(\w+):", part, re.M))  # noqa: E731
    assert keys(english) == keys(german) and len(keys(english)) > 50
    used = set(re.findall(r'data-i18n="(\w+)"', (UI_DIR / "index.html").read_text()))
    used |= set(re.findall(r'\bt\("(\w+)"\)', (UI_DIR / "app.js").read_text()))
    assert used <= keys(english), used - keys(english)


# ---- the real browser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[dict[str, str]]:
    require_browser()
    data_dir = tmp_path_factory.mktemp("console") / "km"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    logs = data_dir.parent / "logs"
    server = knowmind(
        data_dir, "serve", port=port, env_extra={"KNOWMIND_RERANKER": "none"}, log_to=logs
    )
    try:
        wait_ready(base, server, timeout_s=180)
        yield {
            "base": base,
            "admin": (data_dir / "admin_token").read_text().strip(),
            "logs": str(logs),
        }
    finally:
        stop(server)


def _click(driver: Any, css: str, text: str | None = None) -> None:
    """Click the element; again when the page re-rendered it between finding and clicking."""
    from selenium.common.exceptions import StaleElementReferenceException

    for attempt in range(5):
        element = wait_for(driver, css, text)
        try:
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
            element.click()
            return
        except StaleElementReferenceException:
            if attempt == 4:
                raise
            time.sleep(0.3)


def _type(driver: Any, css: str, value: str) -> None:
    element = wait_for(driver, css)
    element.clear()
    element.send_keys(value)


def _wait_until(condition, what: str, timeout_s: float = 120) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_console_end_to_end_in_chromium(served):
    base, admin = served["base"], served["admin"]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    with chromium() as driver:
        driver.get(f"{base}/ui")
        wait_for(driver, "#signin-form")
        assert driver.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en"
        screenshot(driver, "signin")
        assert not low_contrast(driver), low_contrast(driver)

        # Admin: sign in, create a tenant, issue a token, sign in with it.
        _type(driver, "#token", admin)
        _click(driver, "#kind-admin")
        driver.find_element(By.CSS_SELECTOR, "#token").send_keys(Keys.ENTER)
        wait_for(driver, "#who", "server admin")
        assert admin not in driver.current_url
        assert driver.execute_script("return sessionStorage.getItem('km.token')") == admin
        _type(driver, "#t-name", "console-acme")
        _click(driver, "#tenant-form button[type=submit]")
        _click(driver, "button[data-tenant='console-acme']")
        token = wait_for(driver, "#issued-token").get_attribute("value")
        assert token and token != admin
        masked = "arguments[0].value = arguments[1]"  # no token-like string in a committed image
        issued = driver.find_element(By.ID, "issued-token")
        driver.execute_script(masked, issued, "kmt_… (masked in this screenshot)")
        screenshot(driver, "admin")
        assert not low_contrast(driver), low_contrast(driver)
        driver.execute_script(masked, issued, token)
        _click(driver, "nav button[data-view=operations]")
        wait_for(driver, "#ops-health", "job_worker")
        _click(driver, "nav button[data-view=admin]")
        _click(driver, "#use-token")
        wait_for(driver, "#who", "tenant token")
        auth = {"Authorization": f"Bearer {token}"}

        # Data the graph and the XSS check need, through the API (as another client would).
        for content, organisation in (
            ("Anna Meier leitet die IT der Muster GmbH.", "Muster GmbH"),
            ("Anna Meier berät nebenbei die Beispiel AG.", "Beispiel AG"),
        ):
            relation = {
                "predicate": "WORKS_FOR",
                "subject": "Anna Meier",
                "subject_class": "Person",
                "object": organisation,
                "object_class": "Organization",
            }
            linked = httpx.post(
                f"{base}/v1/memories?wait=true",
                headers=auth,
                json={"content": content, "relations": [relation]},
            )
            assert linked.status_code == 201, linked.text
        hostile = httpx.post(
            f"{base}/v1/memories", headers=auth, json={"title": HOSTILE, "content": HOSTILE}
        )
        assert hostile.status_code == 201

        # Upload a document; the list shows it; its full view shows entities.
        _click(driver, "nav button[data-view=memories]")
        _type(driver, "#d-title", "Nordlicht")
        _type(
            driver,
            "#d-content",
            "# Projekt Nordlicht\n\nDas Projekt Nordlicht der Muster GmbH startet im Mai. "
            "Anna Meier leitet es vom Standort Hamburg aus.",
        )
        _click(driver, "#upload-form button[type=submit]")
        wait_for(driver, "#upload-result", "created")
        wait_for(driver, "#memory-list", "Nordlicht")
        wait_for(driver, "#memory-list", HOSTILE)  # the title is shown as text
        screenshot(driver, "memories")
        assert not low_contrast(driver), low_contrast(driver)
        Select(driver.find_element(By.ID, "f-type")).select_by_visible_text("reference")
        _click(driver, "#filter-form button[type=submit]")
        wait_for(driver, "#memory-list", "1 shown of loaded 4")
        assert "Beispiel" not in driver.find_element(By.ID, "memory-list").text
        Select(driver.find_element(By.ID, "f-type")).select_by_value("")
        _click(driver, "#filter-form button[type=submit]")
        _wait_until(
            lambda: httpx.get(f"{base}/v1/entities?q=Muster", headers=auth).json()["results"],
            "entities",
        )
        document_id = _wait_until(
            lambda: next(
                (
                    m["id"]
                    for m in httpx.get(f"{base}/v1/memories", headers=auth).json()["items"]
                    if m["title"] == "Nordlicht"
                    and httpx.get(f"{base}/v1/nodes/{m['id']}/relations", headers=auth).json()[
                        "relations"
                    ]
                ),
                None,
            ),
            "the document's extraction",
        )
        _click(driver, "#memory-list button.link", "Nordlicht")
        wait_for(driver, "#memory-content", "Projekt Nordlicht")
        wait_for(driver, "#memory-entities", "Muster GmbH")
        screenshot(driver, "memory")
        assert not low_contrast(driver), low_contrast(driver)

        # The hostile memory: shown as text, never executed.
        _click(driver, "button[data-view=memories]")
        _click(driver, "#memory-list button.link", "<img")
        shown = wait_for(driver, "#memory-content", "onerror").text
        assert shown == HOSTILE
        assert driver.execute_script("return window.__pwned === undefined")
        assert not driver.find_elements(By.CSS_SELECTOR, "#memory-detail img, main script")

        # Recall with the explain view (reached with the keyboard), two settings side by side.
        wait_for(driver, "nav button[data-view=recall]").send_keys(Keys.ENTER)
        wait_for(driver, "#r-query")
        _type(driver, "#r-query", "Wer leitet das Projekt Nordlicht?")
        _click(driver, "#r-compare")
        _click(driver, "#st-b-vector")  # a second setting without the vector stage
        _click(driver, "#recall-form button[type=submit]")
        panels = _wait_until(
            lambda: driver.find_elements(By.CSS_SELECTOR, ".recall-panel"), "recall panels"
        )
        assert len(panels) == 2
        first, second = panels[0].text, panels[1].text
        assert "Nordlicht" in first and "bm25:" in first and "vector:" in first
        assert "vector:" not in second.split("Timings")[0]  # stage off: no rank column for it
        assert "total" in first and "Fusion weights" in first
        bars = driver.find_elements(By.CSS_SELECTOR, ".recall-panel .bar")
        assert bars and all(b.size["width"] > 0 for b in bars)
        driver.execute_script("document.getElementById('stages-a').scrollIntoView()")
        screenshot(driver, "recall")
        assert not low_contrast(driver), low_contrast(driver)

        # Graph: find an entity, expand a node with the keyboard, click through to a memory.
        _click(driver, "nav button[data-view=graph]")
        _type(driver, "#g-q", "Muster")
        _click(driver, "#entity-form button[type=submit]")
        _click(driver, "#entity-hits button", "Muster GmbH")
        _wait_until(
            lambda: len(driver.find_elements(By.CSS_SELECTOR, "#graph g.node")) >= 3, "neighbours"
        )
        before = len(driver.find_elements(By.CSS_SELECTOR, "#graph g.node"))
        person = driver.find_element(By.CSS_SELECTOR, "#graph g.node[aria-label^='Anna Meier']")
        driver.execute_script("arguments[0].focus()", person)
        person.send_keys(Keys.ENTER)
        wait_for(driver, "#node-panel h2", "Anna Meier")
        _wait_until(
            lambda: len(driver.find_elements(By.CSS_SELECTOR, "#graph g.node")) > before,
            "the expanded node's neighbours",
        )
        driver.execute_script("document.getElementById('graph').scrollIntoView()")
        screenshot(driver, "graph")
        assert not low_contrast(driver), low_contrast(driver)
        all_nodes = len(driver.find_elements(By.CSS_SELECTOR, "#graph g.node"))
        Select(driver.find_element(By.ID, "g-rel")).select_by_value("WORKS_FOR")
        kept = driver.find_elements(By.CSS_SELECTOR, "#graph g.node.memory")
        assert not kept and len(driver.find_elements(By.CSS_SELECTOR, "#graph g.node")) < all_nodes
        Select(driver.find_element(By.ID, "g-rel")).select_by_value("")
        # Time travel: before any memory existed, the neighbourhood has no memory in it.
        driver.execute_script("document.getElementById('g-asof').value = '2001-01-01T00:00'")
        _click(driver, "#entity-hits button", "Muster GmbH")
        wait_for(driver, "#node-panel h2", "Muster GmbH")
        _wait_until(
            lambda: (
                not driver.find_elements(By.CSS_SELECTOR, "#graph g.node.memory")
                and driver.find_elements(By.CSS_SELECTOR, "#graph g.node[aria-label^='Anna']")
            ),
            "the graph as of 2001",
        )
        driver.execute_script("document.getElementById('g-asof').value = ''")
        _click(driver, "#graph g.node[aria-label^='Anna Meier']")
        wait_for(driver, "#node-panel li button", "berät")
        _click(driver, "#node-panel li button", "berät")
        wait_for(driver, "#memory-content", "Beispiel AG")

        # Supersede that fact: the new memory is linked.
        _type(driver, "#s-content", "Anna Meier berät inzwischen die Beispiel AG nicht mehr.")
        _type(driver, "#s-reason", "Mandat beendet")
        _click(driver, "#memory-detail form button[type=submit]")
        _click(driver, "#memory-detail form .note button")
        wait_for(driver, "#memory-content", "nicht mehr")

        # An answer with citations linked to passages (one small call of the embedded model).
        _click(driver, "nav button[data-view=answer]")
        _type(driver, "#a-q", "Wer leitet das Projekt Nordlicht?")
        _click(driver, "#answer-form button[type=submit]")
        wait_for(driver, "#answer-out .passages li", timeout_s=180)
        for link in driver.find_elements(By.CSS_SELECTOR, "#answer-out a[href^='#passage-']"):
            assert driver.find_elements(By.ID, link.get_attribute("href").split("#", 1)[1])
        screenshot(driver, "answer")
        assert not low_contrast(driver), low_contrast(driver)

        _click(driver, "nav button[data-view=operations]")
        wait_for(driver, "#ops-stats", "memories")
        screenshot(driver, "operations")
        assert not low_contrast(driver), low_contrast(driver)

        # Erase the document with the receipt shown; German texts after a language switch.
        Select(driver.find_element(By.ID, "lang")).select_by_value("de")
        assert driver.find_element(By.TAG_NAME, "html").get_attribute("lang") == "de"
        _click(driver, "nav button[data-view=memories]", "Erinnerungen")
        _click(driver, "#memory-list button.link", "Nordlicht")
        _click(driver, "#erase")
        _click(driver, "#erase", "Bestätigen")
        wait_for(driver, "#receipt", "Löschbeleg")
        assert httpx.get(f"{base}/v1/memories/{document_id}", headers=auth).status_code == 404

        errors = severe_logs(driver)
        assert not errors, errors

        _click(driver, "#signout")
        wait_for(driver, "#signin-form")
        assert driver.execute_script("return sessionStorage.length") == 0
    # Neither token nor memory content reached the server's log (stderr; stdout has the banner,
    # which shows a generated admin token once, by design).
    logged = (Path(served["logs"]) / "stderr").read_text()
    assert '"route": "/v1/recall"' in logged  # the log is the server's request log
    for secret in (admin, token, "Nordlicht", "onerror"):
        assert secret not in logged, secret


@pytest.mark.slow
def test_the_browser_check_sees_errors_and_the_policy_blocks_inline_script(served):
    """The checks the walk relies on (errors, contrast) work; the CSP stops injected script."""
    with chromium() as driver:
        driver.get(f"{served['base']}/ui")
        wait_for(driver, "#signin-form")
        driver.execute_script(
            "const s = document.createElement('script');"
            "s.textContent = 'window.__inline = 1'; document.body.append(s);"
            "setTimeout(() => { throw new Error('boom from the test'); });"
        )
        time.sleep(0.5)
        assert driver.execute_script("return window.__inline === undefined")
        errors = " ".join(severe_logs(driver))
        assert "boom from the test" in errors
        assert "Content Security Policy" in errors
        assert not low_contrast(driver)
        driver.execute_script(
            "const d = document.createElement('p'); d.textContent = 'pale';"
            "d.style.color = '#aaaaaa'; document.body.append(d);"
        )
        assert [found for found in low_contrast(driver) if found.startswith("P.")]
