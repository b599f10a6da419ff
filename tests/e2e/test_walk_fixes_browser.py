"""What a planning meeting tripped over at a laptop's width (1280 × 800), in a real browser (Debian's chromium via
Playwright) against the real server: a legend under its chart covered the x axis's title; the memory (one column a
stage) and scaling (three columns a fabric) tables, squeezed beside their charts, hid most of their columns; the
sharing choices ran together on one line; the header's session and theme controls moved between pages; "Delete plan"
deleted every revision at one click; a checkbox of the benchmark form sat on a line of its own above its text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.web.pages._builder import BuilderState
from tests.conftest import LiveServer, start_live_server
from tests.e2e.browser_support import wait_until
from tests.e2e.test_phone_width_browser import _legends
from tests.plans_support import small_scenario

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LAPTOP = {"width": 1280, "height": 800}
# every chart drawn and no htmx request in flight or still to start (the scaling panel loads after the results)
SETTLED = (
    "document.readyState === 'complete' && "
    "Array.from(document.querySelectorAll('.chart[data-figure]')).every(el => el.hasAttribute('data-drawn')) && "
    "document.querySelectorAll('.htmx-request, [hx-trigger=\"load\"]').length === 0"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-walk")
    live = start_live_server(f"sqlite:///{tmp / 'walk.db'}", tmp)
    yield live
    live.stop()


def _plan(server: LiveServer, name: str) -> str:
    body = {"name": name, "scenario": small_scenario()}
    r = httpx.post(f"{server.url}/api/v1/plans", json=body, headers=server.headers, timeout=60)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _open(browser: Any, server: LiveServer, path: str) -> Any:
    context = browser.new_context(viewport=LAPTOP)
    server.sign_in(context)
    page = context.new_page()
    page.goto(server.url + path)
    wait_until(page, SETTLED)
    return page


def _box(page: Any, selector: str) -> dict[str, float]:
    return dict(page.locator(selector).first.bounding_box())


@pytest.mark.parametrize("path", ["/network", "/cost", "/plans/new"])
def test_a_legend_under_its_chart_clears_the_x_axis(browser: Any, server: LiveServer, path: str) -> None:
    page = _open(browser, server, path)
    legends = {chart: found for chart, found in _legends(page).items() if found and found["below"]}
    page.context.close()
    assert legends
    for chart, found in legends.items():
        assert found["legend"][2] >= found["axis"], f"{path} {chart}: legend over the axis title {found}"
        assert found["legend"][2] - found["axis"] <= 24, f"{path} {chart}: legend far below its axis {found}"


def test_wide_tables_sit_whole_under_their_charts(browser: Any, server: LiveServer) -> None:
    page = _open(browser, server, "/plans/new?" + BuilderState(pp=4).query())
    for chart in ("chart-memory", "chart-scaling"):
        box = page.locator(f"#{chart} ~ .chart-table")
        scroll, client = box.evaluate("t => [t.scrollWidth, t.clientWidth]")
        assert scroll <= client + 1, f"{chart}: its table is cut to {client} of {scroll} px"
        assert box.bounding_box()["y"] >= _box(page, f"#{chart}")["y"] + _box(page, f"#{chart}")["height"] - 1
    page.context.close()
    page = _open(browser, server, "/network")
    chart, table = _box(page, "#chart-busbw"), _box(page, "#chart-busbw ~ .chart-table")
    assert table["y"] >= chart["y"] + chart["height"] - 1 and table["width"] >= chart["width"] - 1
    page.context.close()


def test_the_sharing_choices_stand_one_to_a_line(browser: Any, server: LiveServer) -> None:
    page = _open(browser, server, f"/plans/{_plan(server, 'sharing layout')}")
    radios = [_box(page, f'.sharing-form input[value="{v}"]') for v in ("private", "users", "everyone")]
    emails = _box(page, "#share-users")
    page.context.close()
    assert len({round(r["x"]) for r in radios}) == 1, radios  # one column of choices
    assert radios[0]["y"] < radios[1]["y"] < emails["y"] < radios[2]["y"], (radios, emails)
    assert emails["x"] > radios[1]["x"]  # the addresses belong to "These users:"


def test_the_header_controls_keep_their_place_on_every_page(browser: Any, server: LiveServer) -> None:
    seen = {}
    for path in ("/", "/plans", "/plans/new", "/catalog/gpus", "/benchmarks"):
        page = _open(browser, server, path)
        out, theme = _box(page, ".signout-form button"), _box(page, "#theme-toggle")
        seen[path] = tuple(round(v) for v in (out["x"], out["y"], theme["x"], theme["y"], out["height"]))
        page.context.close()
    assert len(set(seen.values())) == 1, seen
    x_out, y_out, x_theme, y_theme, _ = seen["/"]
    assert y_out == y_theme and x_out < x_theme  # side by side, Theme at the right


def test_deleting_a_plan_asks_first(browser: Any, server: LiveServer) -> None:
    plan_id = _plan(server, "delete me")
    page = _open(browser, server, f"/plans/{plan_id}")
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="Delete plan").click()
    page.wait_for_timeout(300)
    assert asked == ["Delete “delete me” and its revision? This cannot be undone."]
    api = f"{server.url}/api/v1/plans/{plan_id}"
    assert page.url.endswith(plan_id) and httpx.get(api, headers=server.headers).status_code == 200
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete plan").click()
    page.wait_for_url(f"{server.url}/plans")
    page.context.close()
    assert httpx.get(api, headers=server.headers).status_code == 404


def test_the_benchmark_checkboxes_sit_on_their_text_line(browser: Any, server: LiveServer) -> None:
    page = _open(browser, server, "/benchmarks")
    box, text = page.evaluate(
        """() => { const box = document.getElementById("l-override");
          const range = document.createRange(); range.selectNodeContents(box.parentElement);
          range.setStartAfter(box);  // the words after the checkbox
          const r = box.getBoundingClientRect(), t = range.getClientRects()[0];
          return [[r.left, r.right, (r.top + r.bottom) / 2], [t.left, (t.top + t.bottom) / 2]]; }"""
    )
    page.context.close()
    assert box[1] <= text[0] and abs(box[2] - text[1]) <= 6, (box, text)  # before its words, on their line


def test_the_cost_card_spans_the_headline(browser: Any, server: LiveServer) -> None:
    """The cost per run states its basis (the wall-clock GPU-hours, the headline price and the quotes it is the
    median of): in a card a fifth of the headline wide it ran to a column of fifteen lines; it spans the headline."""
    page = _open(browser, server, "/plans/new")
    card, headline = _box(page, "#cost-card"), _box(page, ".headline")
    step = _box(page, ".headline > div:nth-child(2)")  # the step-time card, for a card's height in this row
    page.context.close()
    assert card["width"] >= headline["width"] * 0.95, (card, headline)
    assert card["height"] <= 2 * step["height"], (card, step)
