"""Catalog pages in a real browser (chromium via Playwright) against the real server: the model search box filters
through htmx, a price row is added, edited and deleted through the htmx forms, and axe finds no serious or
critical accessibility violations. The pages run under the production Content-Security-Policy, so a console
error here would also catch an inline script or a blocked resource."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest

from tests.conftest import LiveServer, start_live_server
from tests.paths import VENDOR_DIR

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE = VENDOR_DIR / "axe-4.14.1.min.js"


# The module's server: every new page signs in as its administrator (there is no anonymous admin).
SIGNED_IN: dict[str, LiveServer] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-catalog")
    live = start_live_server(f"sqlite:///{tmp / 'catalog.db'}", tmp)
    SIGNED_IN["server"] = live
    yield live
    live.stop()


def _page(browser: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, **kwargs)
    SIGNED_IN["server"].sign_in(context)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on(
        "console",
        lambda msg: (
            errors.append(msg.text)
            if msg.type == "error" and not (msg.location or {}).get("url", "").endswith("/favicon.ico")
            else None
        ),
    )
    return page, errors


def test_model_search_filters_in_place(browser: Any, server: LiveServer) -> None:
    page, errors = _page(browser)
    page.goto(server.url + "/catalog/models")
    rows_before = page.locator("#model-table tbody tr").count()
    page.fill("#model-search", "mixtral")
    # wait for the swapped table (wait_for_function would need eval, which the CSP forbids)
    page.wait_for_selector("#model-table caption:has-text('matching')")
    names = page.locator("#model-table tbody th a").all_inner_texts()
    assert names == ["Mixtral-8x22B", "Mixtral-8x7B"] or sorted(names) == ["Mixtral-8x22B", "Mixtral-8x7B"]
    assert rows_before > 20
    assert "q=mixtral" in page.url  # the filtered view has its own URL
    page.reload()
    assert page.locator("#model-table tbody tr").count() == 2
    assert errors == []
    page.context.close()


def test_price_row_add_edit_delete_with_htmx(browser: Any, server: LiveServer) -> None:
    page, errors = _page(browser)
    page.goto(server.url + "/catalog/prices?mine=1")
    item = f"browser quote {uuid.uuid4().hex[:6]}"
    page.fill("#pf-item", item)
    page.fill("#pf-category", "cloud_gpu")
    page.fill("#pf-price_usd", "2.40")
    page.fill("#pf-gpu_name", "H200")
    page.fill("#pf-price_date", date.today().isoformat())
    page.fill("#pf-source", "quote B-7")
    page.fill("#pf-includes", "GPU-hour with host share")
    page.click("text=Add price row")
    page.wait_for_selector(f"text=Added “{item}”.")
    row = page.locator("#price-table tbody tr", has_text=item)
    assert row.count() == 1 and "H200-SXM" in row.inner_text()

    row.locator("a", has_text="Edit").click()
    page.wait_for_selector("text=Save changes")
    page.fill("#pf-gpu_name", "H2000")  # passes the browser's checks, refused by the server
    page.click("text=Save changes")
    page.wait_for_selector("#pf-gpu_name-error")
    page.fill("#pf-gpu_name", "H200")
    page.fill("#pf-price_usd", "2.10")
    page.click("text=Save changes")
    page.wait_for_selector(f"text=Saved “{item}”.")
    assert "2.1" in page.locator("#price-table tbody tr", has_text=item).inner_text()

    page.on("dialog", lambda dialog: dialog.accept())
    page.locator("#price-table tbody tr", has_text=item).locator("button", has_text="Delete").click()
    page.wait_for_selector(f"text=Deleted “{item}”.")
    assert page.locator("#price-table tbody tr", has_text=item).count() == 0
    assert errors == []
    page.context.close()


def test_axe_no_serious_violations_on_catalog_pages(browser: Any, server: LiveServer) -> None:
    page, _ = _page(browser, bypass_csp=True)  # axe is injected as an inline script
    failures: dict[str, list[str]] = {}
    for path in (
        "/catalog/gpus",
        "/catalog/gpus/H100-SXM",
        "/catalog/models",
        "/catalog/models/DeepSeek-V3",
        "/catalog/interconnects",
        "/catalog/prices",
        "/catalog/accuracy",
        "/catalog/gpus/H100-SMX",
    ):
        page.goto(server.url + path)
        page.wait_for_load_state("load")
        page.add_script_tag(path=str(AXE))
        result = page.evaluate(
            "() => axe.run(document, {resultTypes: ['violations']}).then(r => r.violations"
            ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
            ".map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')))"
        )
        if result:
            failures[path] = result
    page.context.close()
    assert failures == {}
