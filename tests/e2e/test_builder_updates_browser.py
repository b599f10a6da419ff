"""In a real browser (Debian's chromium via Playwright): a committed choice in the builder (a select) sends its
request at once, not after the 300 ms pause that typing still waits for; htmx keeps no history
snapshots of the page (serialising the page with its drawn charts into localStorage on every update was most of
the time between a response and its results on screen), and Back still restores a page with its charts drawn; the
page below the scaling panel does not move while the panel loads after an update."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LiveServer, start_live_server
from tests.e2e.browser_support import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SETTLED = (
    "(() => { const r = document.getElementById('results'); return !!r && !r.hasAttribute('aria-busy')"
    " && !r.querySelector('[hx-trigger=\"load\"]')"
    " && Array.from(r.querySelectorAll('.chart[data-figure]')).every((c) => c.getAttribute('data-drawn') === 'true'"
    " && !!c.querySelector('.main-svg')); })()"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-updates")
    live = start_live_server(f"sqlite:///{tmp / 'browser.db'}", tmp)
    yield live
    live.stop()


def _watched_page(browser: Any) -> tuple[Any, Any, list[str]]:
    """A new page in its own context, with every page error and console error collected."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    return context, page, errors


COUNT_REQUESTS = """() => { window.__sent = 0;
  document.addEventListener("htmx:beforeRequest", (e) => {
    if (e.detail.elt && e.detail.elt.id === "plan-form") { window.__sent += 1; } }); }"""


def test_a_select_asks_at_once_and_typing_after_a_pause(browser: Any, server: LiveServer) -> None:
    """On the page's fake clock (Playwright's clock API), so no assertion depends on how fast the machine is: with
    the clock paused, a select's change sends its request; typed input sends nothing until 300 ms have run."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console", lambda msg: errors.append(msg.text) if msg.type == "error" else None
    )  # htmx:syntax:error
    page.clock.install()
    page.goto(f"{server.url}/plans/new")
    wait_until(page, SETTLED)
    page.evaluate(COUNT_REQUESTS)

    page.clock.pause_at(page.evaluate("Date.now()") / 1000 + 1)  # seconds
    page.select_option("#f-fabric", "roce-8x400")
    assert page.evaluate("window.__sent") == 1  # sent with no timer run: no debounce on a committed choice
    page.clock.resume()
    page.wait_for_url(re.compile(r"fabric=roce-8x400"), timeout=30000)
    wait_until(page, SETTLED)
    assert page.evaluate("window.__sent") == 1  # once: the select's input event sends nothing of its own

    page.clock.pause_at(page.evaluate("Date.now()") / 1000 + 1)  # seconds
    page.fill("#f-nodes", "4")
    page.clock.run_for(299)
    assert page.evaluate("window.__sent") == 1  # typing waits for a 300 ms pause
    page.clock.run_for(2)
    assert page.evaluate("window.__sent") == 2
    page.clock.resume()
    page.wait_for_url(re.compile(r"nodes=4\b"), timeout=30000)
    wait_until(page, SETTLED)
    assert page.evaluate("window.__sent") == 2
    assert page.evaluate("localStorage.getItem('htmx-history-cache')") is None
    assert errors == []
    context.close()


def test_back_restores_the_previous_results_with_charts_drawn(browser: Any, server: LiveServer) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server.url}/plans/new?mode=planner")
    wait_until(page, SETTLED)
    page.select_option("#f-fabric", "roce-8x400")
    page.wait_for_url(re.compile(r"fabric=roce-8x400"), timeout=30000)
    wait_until(page, SETTLED)

    page.evaluate("document.addEventListener('htmx:historyRestore', () => { window.__restored = true; })")
    page.go_back()
    wait_until(page, "window.__restored === true && location.search === '?mode=planner'")
    wait_until(page, SETTLED)
    assert page.input_value("#f-fabric") == "ib-ndr-8x400"
    assert page.locator("#results .chart[data-figure]").count() >= 3
    # planner mode still takes the layout fields it chooses out of the tab order after the restore
    assert page.evaluate("document.querySelector('#f-tp').closest('.field').inert") is True
    assert errors == []
    context.close()


RECORD_PANEL = """() => { window.__panel = [];
  const note = (when) => { const p = document.getElementById("scaling-panel");
    const below = p.nextElementSibling;
    window.__panel.push([when, p.getAttribute("hx-trigger"), p.getBoundingClientRect().height,
      below.getBoundingClientRect().top - p.getBoundingClientRect().top]); };
  document.addEventListener("htmx:afterSwap", (e) => {
    if (e.detail.target && e.detail.target.id === "results") { note("placeholder"); }
    if (e.detail.target && e.detail.target.id === "scaling-panel") { note("loaded"); } }); }"""


def test_the_page_below_the_scaling_panel_does_not_jump_while_it_loads(
    browser: Any, server: LiveServer
) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{server.url}/plans/new")
    wait_until(page, SETTLED)
    page.evaluate(RECORD_PANEL)
    page.select_option("#f-fabric", "roce-8x400")
    wait_until(page, "window.__panel.length === 2")
    (when, trigger, height, below), (when2, trigger2, height2, below2) = page.evaluate("window.__panel")
    assert (when, trigger, when2, trigger2) == ("placeholder", "load", "loaded", None)
    # the placeholder held the loaded panel's height, so the panels below it stayed where they were
    assert abs(height - height2) < 1 and abs(below - below2) < 1
    context.close()


def test_a_second_change_while_the_first_is_on_its_way_leaves_the_console_clean(
    browser: Any, server: LiveServer
) -> None:
    """The second change waits for the first request (hx-sync queue last) instead of aborting it, which htmx
    reports as an error in the console; the page ends on the second change's results."""
    context, page, errors = _watched_page(browser)
    page.goto(f"{server.url}/plans/new?mode=planner")
    wait_until(page, SETTLED)
    page.select_option("#f-fabric", "roce-8x400")
    page.select_option("#f-fabric", "ethernet-tcp-100")
    page.wait_for_url(re.compile(r"fabric=ethernet-tcp-100"), timeout=30000)
    wait_until(page, SETTLED)
    wait_until(page, "document.querySelector('input[name=scenario]').value.includes('ethernet-tcp-100')")
    assert errors == []
    context.close()


def test_a_layout_that_does_not_fit_loads_what_fits_after_its_results(
    browser: Any, server: LiveServer
) -> None:
    """The results of a layout over its GPUs' memory come back at once; the planner's search for what fits loads
    after them into the placeholder, and its link opens the builder on that layout, which fits."""
    from app.web.pages._builder import BuilderState

    state = BuilderState(
        model="Llama-3-70B", nodes=8, tp=1, pp=1, zero=0, sp=False, recompute="none", global_batch=512
    )
    context, page, errors = _watched_page(browser)
    page.goto(f"{server.url}/plans/new?{state.query()}")
    wait_until(page, SETTLED)
    assert page.locator("#does-not-fit").count() == 1
    what_fits = page.locator("#fit-alternative")
    assert "What fits:" in what_fits.inner_text() and what_fits.get_attribute("hx-get") is None  # loaded
    before = page.url
    what_fits.get_by_role("link", name="Use this layout").click()
    page.wait_for_url(lambda url: url != before, timeout=30000)
    wait_until(page, SETTLED)
    assert page.locator("#does-not-fit").count() == 0 and "✓" in page.locator(".headline").inner_text()
    assert errors == []
    context.close()
