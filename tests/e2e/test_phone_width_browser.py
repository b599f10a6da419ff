"""A 390 px wide phone: no page is wider than the window (the header menu wraps in rows, a wide table scrolls inside
its own box) and every chart's legend lies inside the window and its chart, whole, under the x axis's labels and
title, and a price's date in a table stays on one line, in a real browser (chromium via Playwright) against the real
server, with saved plans in the list."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, start_live_server
from tests.plans_support import small_scenario

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
PAGES = (
    "/",
    "/plans",
    "/plans/new",
    "/cost",
    "/network",
    "/cost?utilisation=150&months=-5",
    "/catalog/gpus",
    "/catalog/gpus/H100-SXM",  # a facts list whose source runs to one long line
    "/catalog/models/Llama-3-70B",
    "/benchmarks",
    # the rest of a planning meeting's walk: a saved plan, two compared, the catalog, the account and the API docs
    "/plans/{first}",
    "/plans/compare?ids={first}&ids={second}",
    "/catalog/models",
    "/catalog/interconnects",
    "/catalog/prices",
    "/catalog/accuracy",
    "/tokens",
    "/account/password",
    "/docs",
)


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


def _saved(server: LiveServer) -> dict[str, str]:
    """The two saved plans' ids, for the paths that name them."""
    listed = httpx.get(f"{server.url}/api/v1/plans", headers=server.headers, timeout=60).json()["data"]
    return {"first": listed[0]["id"], "second": listed[1]["id"]}


@pytest.mark.parametrize("path", PAGES)
def test_no_page_is_wider_than_a_phone(browser: Any, server: LiveServer, path: str) -> None:
    width, _ = _width(browser, server, path.format(**_saved(server)) if "{" in path else path, PHONE)
    assert width <= PHONE["width"], f"{path} is {width} px wide"


def test_a_wide_table_scrolls_inside_its_own_box(browser: Any, server: LiveServer) -> None:
    width, table = _width(browser, server, "/plans", PHONE)
    assert table > PHONE["width"] >= width  # the table is wider than the window, the page is not


# Each table cell that holds a date alone: its text and the number of lines it takes (a range's client rects)
DATE_CELLS = """() => Array.from(document.querySelectorAll("main td"))
  .filter((c) => /^\\d{4}-\\d{2}-\\d{2}$/.test(c.textContent.trim()))
  .map((c) => {
    const r = document.createRange();
    r.selectNodeContents(c);
    return [c.textContent.trim(), r.getClientRects().length];
  })"""


@pytest.mark.parametrize("path", ["/catalog/gpus/H100-SXM", "/catalog/prices"])
def test_a_price_date_stays_on_one_line_on_a_phone(browser: Any, server: LiveServer, path: str) -> None:
    context = browser.new_context(viewport=PHONE)
    server.sign_in(context)
    page = context.new_page()
    page.goto(server.url + path)
    cells = page.evaluate(DATE_CELLS)
    context.close()
    assert cells and all(lines == 1 for _, lines in cells), (
        f"{path}: {cells}"
    )  # "2026-/11-09" broke at a hyphen


# Each drawn chart's legend: its box and its chart's (px, in the page), the legend's full and shown heights, the
# plot area's height (Plotly's own figures for what it drew), whether it lies below the plot and the lowest x axis
# tick label or title (px, in the page); null for a chart without a legend.
LEGENDS = """() => Array.from(document.querySelectorAll(".chart[data-drawn]"), (c) => {
  const legend = c.querySelector(".legend");
  const full = c._fullLayout;
  if (!legend || !full || !full.showlegend) { return [c.id, null]; }
  const box = (r) => [r.left, r.right, r.top, r.bottom].map(Math.round);
  const axes = Array.from(c.querySelectorAll(".xtitle, .x2title, .xtick text, .x2tick text"),
    (t) => t.getBoundingClientRect().bottom);
  return [c.id, {legend: box(legend.getBoundingClientRect()), chart: box(c.getBoundingClientRect()),
    height: full.legend._height, shown: full.legend._effHeight, plot: full._size.h,
    below: full.legend.orientation === "h" && full.legend.y < 0, axis: Math.round(Math.max(0, ...axes))}];
})"""


def _legends(page: Any) -> dict[str, Any]:
    """The legends once the charts have settled (a chart grows for its legend after its first drawing)."""
    last: Any = None
    for _ in range(100):
        now = page.evaluate(LEGENDS)
        if now and now == last:
            return dict(now)
        last = now
        page.wait_for_timeout(100)
    raise AssertionError(f"the charts did not settle: {last}")


@pytest.mark.parametrize("path", ["/cost", "/network?nodes=2&fabric=roce-8x400", "/plans/new"])
def test_every_legend_stays_inside_a_phone_and_its_chart(browser: Any, server: LiveServer, path: str) -> None:
    context = browser.new_context(viewport=PHONE)
    server.sign_in(context)
    page = context.new_page()
    page.goto(server.url + path)
    page.wait_for_load_state("networkidle")
    legends = {chart: found for chart, found in _legends(page).items() if found}
    context.close()
    expected = {"/cost": {"chart-tco", "chart-util"}, "/plans/new": {"chart-cost", "chart-scaling"}}
    assert expected.get(path, {"chart-busbw"}) <= set(legends)
    for chart, found in legends.items():
        left, right, top, bottom = found["legend"]
        c_left, c_right, c_top, c_bottom = found["chart"]
        assert left >= 0 and right <= PHONE["width"], f"{path} {chart}: legend {found}"
        assert c_left - 1 <= left and right <= c_right + 1, (
            f"{path} {chart}: legend wider than its chart {found}"
        )
        assert c_top - 1 <= top and bottom <= c_bottom + 1, f"{path} {chart}: legend out of its chart {found}"
        assert found["shown"] >= found["height"] - 1, f"{path} {chart}: legend scrolls {found}"
        assert found["plot"] >= 190, f"{path} {chart}: the plot is squeezed {found}"  # charts.js keeps 200
        # a legend under the plot starts under the x axis's labels and title (it covered "Message size (bytes)")
        assert not found["below"] or top >= found["axis"], f"{path} {chart}: legend over the axis {found}"
