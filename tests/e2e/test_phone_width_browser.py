"""A 390 px wide phone: no page is wider than the window (the header menu wraps in rows, a wide table scrolls inside
its own box), in a real browser (chromium via Playwright) against the real server, with saved plans in the list."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, start_live_server
from tests.plans_support import small_scenario

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
PAGES = ("/", "/plans", "/plans/new", "/cost", "/network", "/cost?utilisation=150&months=-5", "/catalog/gpus")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-phone")
    live = start_live_server(f"sqlite:///{tmp / 'phone.db'}", tmp)
    for i in range(2):  # the plan list's table (about 980 px wide) needs rows
        body = {"name": f"A plan with a fairly long name {i}", "scenario": small_scenario()}
        assert (
            httpx.post(f"{live.url}/api/v1/plans", json=body, headers=live.headers, timeout=60).status_code
            == 201
        )
    yield live
    live.stop()


def _width(browser: Any, server: LiveServer, path: str, viewport: dict[str, int]) -> tuple[int, int]:
    """The page's scroll width and the widest table's own width."""
    context = browser.new_context(viewport=viewport)
    server.sign_in(context)
    page = context.new_page()
    page.goto(server.url + path)
    page.wait_for_load_state("networkidle")
    width = page.evaluate("document.documentElement.scrollWidth")
    table = page.evaluate(
        "Math.max(0, ...Array.from(document.querySelectorAll('main table'), t => t.scrollWidth))"
    )
    context.close()
    return int(width), int(table)


@pytest.mark.parametrize("path", PAGES)
def test_no_page_is_wider_than_a_phone(browser: Any, server: LiveServer, path: str) -> None:
    width, _ = _width(browser, server, path, PHONE)
    assert width <= PHONE["width"], f"{path} is {width} px wide"


def test_a_wide_table_scrolls_inside_its_own_box(browser: Any, server: LiveServer) -> None:
    width, table = _width(browser, server, "/plans", PHONE)
    assert table > PHONE["width"] >= width  # the table is wider than the window, the page is not
