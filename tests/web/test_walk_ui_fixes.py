"""Small things a walkthrough found, over the real app's HTML: a price's date never breaks at its hyphens, the
builder's cost table says which rows the headline price rests on and which are stale, the compare picker tells
plans of one name apart, every page loads csrf.js at most once, and the log-scaled scaling chart labels decades
only."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.routing import APIRoute, iter_route_contexts

from app.web.pages import _panels
from app.web.pages._builder import BuilderState
from tests.auth_support import bearer, issue_token, unthrottled_client
from tests.paths import ROOT
from tests.plans_support import small_scenario
from tests.price_support import private_quote

HX = {"HX-Request": "true"}
DATE = r"\d{4}-\d{2}-\d{2}"
COST_SECTION = re.compile(r'<section class="panel" aria-labelledby="cost-title">.*?</section>', re.S)


def _price_row(client: Any, days_old: int, usd: float) -> str:
    """A user's on-demand H100 quote, `days_old` days old at `usd` per GPU-hour; its item's name."""
    body = private_quote(
        item=f"walk quote {uuid.uuid4().hex[:8]}",
        vendor="WalkCloud",
        price_usd=usd,
        usd_per_gpu_hour=usd,
        price_date=(date.today() - timedelta(days=days_old)).isoformat(),
        source="walkthrough quote",
    )
    r = client.post("/api/v1/prices", json=body)
    assert r.status_code == 201, r.text
    return str(body["item"])


def _date_cells(page: str) -> list[str]:
    """Each table cell whose text is a date, as its opening tag and content."""
    return re.findall(rf"<td[^>]*>(?:<span[^>]*>)?{DATE}(?:</span>)?", page)


def test_a_price_date_never_breaks_at_its_hyphens(client: Any) -> None:
    _price_row(client, 3, 0.11)
    gpu = client.get("/catalog/gpus/H100-SXM").text
    cells = _date_cells(gpu)
    assert cells and all('<td class="nowrap">' in c for c in cells), cells
    book = client.get("/catalog/prices?gpu=H100-SXM").text
    cells = _date_cells(book)
    assert cells and all('<td class="nowrap">' in c for c in cells), cells
    builder = COST_SECTION.search(client.get("/plans/new?" + BuilderState().query(), headers=HX).text)
    assert builder
    cells = _date_cells(builder.group(0))
    assert cells and all('<span class="nowrap">' in c for c in cells), cells
    css = client.get("/static/css/app.css").text
    assert ".nowrap { white-space: nowrap; }" in css


def _option_row(panel: str, item: str) -> str:
    row = re.search(rf'<tr><th scope="row">[^<]*{re.escape(item)}.*?</tr>', panel, re.S)
    assert row, f"no row for {item}"
    return row.group(0)


def test_the_builder_cost_table_marks_the_headline_pool_and_stale_rows(client: Any) -> None:
    fresh = _price_row(client, 3, 0.12)  # the cheapest options: both among the rows shown
    stale = _price_row(client, 400, 0.13)
    page = client.get("/plans/new?" + BuilderState().query(), headers=HX).text
    panel = COST_SECTION.search(page)
    assert panel
    fresh_row, stale_row = _option_row(panel.group(0), fresh), _option_row(panel.group(0), stale)
    assert "in headline</span>" in fresh_row and "stale</span>" not in fresh_row
    assert "stale</span>" in stale_row and "in headline</span>" not in stale_row
    pooled = re.search(r"the headline price is the median of the (\d+) quotes marked “in headline”", page)
    assert pooled and int(pooled.group(1)) >= 2  # the built-in fresh on-demand quotes and this one
    # the same rule as the cost API's headline: its pool is the options it marks
    run = client.post("/api/v1/cost/run", json={"num_gpus": 16, "gpu_hours": 1000, "gpu": "H100-SXM"}).json()
    marked = [o for o in run["options"] if o["in_headline"]]
    assert len(marked) == run["headline"]["quotes"] == int(pooled.group(1))
    assert all(o["term"] == "on_demand" and not o["stale"] for o in marked)
    assert run["headline"]["price_id"] in {o["price_id"] for o in marked}
    tco = client.post("/api/v1/cost/tco", json={"onprem": {"nodes": 2}, "gpu": "H100-SXM"})
    assert tco.status_code == 200, tco.text
    in_tco = {o["price_id"] for o in tco.json()["cloud_options"] if o["in_headline"]}
    assert in_tco == {o["price_id"] for o in marked}  # the TCO's options, marked by the same rule


def _picker(page: str) -> dict[str, str]:
    """The compare picker's entries: each plan id and the text beside its box."""
    fieldset = re.search(r"<fieldset>.*?</fieldset>", page, re.S)
    assert fieldset
    entries = re.findall(r'name="ids" value="([^"]+)"[^>]*>(.*?)</label>', fieldset.group(0), re.S)
    return {pid: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text)).strip() for pid, text in entries}


def test_the_compare_picker_tells_plans_of_one_name_apart(db_url: str) -> None:
    client = unthrottled_client()
    alice = bearer(issue_token("alice-picker@example.com", ["plans:write"], is_admin=False))
    bob = bearer(issue_token("bob-picker@example.com", ["plans:write"], is_admin=False))

    def save(who: dict[str, str]) -> str:
        body = {"name": "Same name", "scenario": small_scenario()}
        r = client.post("/api/v1/plans", json=body, headers=who)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    own, shared, private = save(alice), save(bob), save(bob)
    r = client.put(
        f"/api/v1/plans/{shared}/sharing", json={"visibility": "everyone", "users": []}, headers=bob
    )
    assert r.status_code == 200, r.text
    today = datetime.now(UTC).date().isoformat()
    page = client.get("/plans/compare", headers=alice).text
    entries = _picker(page)
    assert entries[own] == f"Same name (revision 1, updated {today})"  # her own: no e-mail
    assert entries[shared] == f"Same name (revision 1, bob-picker@example.com, updated {today})"
    assert private not in entries and private not in page  # only what she may read is listed
    # "Compare with…" on one plan: the second choice is told apart the same way
    second = client.get(f"/plans/compare?ids={own}", headers=alice).text
    pick = re.search(rf'ids={shared}">Same name</a> <span class="muted">(.*?)</span></li>', second, re.S)
    assert pick and "bob-picker@example.com" in pick.group(1) and today in pick.group(1)
    assert private not in second


CSRF_JS = '<script src="/static/js/csrf.js" defer></script>'


def _html_pages(client: Any) -> list[str]:
    """Every page route without a path parameter (the route walk), and pages that name a row."""
    paths = sorted(
        {
            str(context.path)
            for context in iter_route_contexts(client.app.routes)
            if isinstance(context.original_route, APIRoute)
            and "GET" in (context.methods or ())
            and not str(context.path).startswith(("/api", "/static"))
            and "{" not in str(context.path)
        }
    )
    plan = client.post("/api/v1/plans", json={"name": "walk csrf", "scenario": small_scenario()}).json()
    _price_row(client, 3, 0.14)
    row = client.get("/api/v1/prices?mine=true").json()["data"][0]
    named = ["/catalog/gpus/H100-SXM", "/catalog/models/Llama-3-70B", f"/plans/{plan['id']}"]
    return [*paths, *named, f"/catalog/prices/{row['id']}/edit"]


def test_every_page_loads_csrf_js_once(client: Any) -> None:
    checked = 0
    for path in _html_pages(client):
        r = client.get(path)
        if "text/html" not in r.headers.get("content-type", "") or r.status_code >= 500:
            continue
        once = 1 if 'class="site-header"' in r.text else 0  # a page of base.html's; not the API docs
        assert r.text.count(CSRF_JS) == once, path
        assert r.text.count('<meta name="csrf-token"') == once, path
        checked += once
    assert checked >= 15
    # a page the walk cannot reach without a benchmark job: no template but base.html loads it
    names = [p.relative_to(ROOT) for p in (ROOT / "templates").rglob("*.html") if "csrf.js" in p.read_text()]
    assert names == [Path("templates/base.html")]


def _scaling_points(gpus: list[int]) -> dict[str, Any]:
    points = [
        {"gpus": g, "fabric": f, "efficiency": 0.9, "days": 100 / g, "tokens_per_s": 1e4 * g}
        for f in ("ib", "roce")
        for g in gpus
    ]
    return {"points": points, "fabrics": ["ib", "roce"]}


def test_the_scaling_chart_labels_decades_not_every_digit(client: Any) -> None:
    axes = ("xaxis", "yaxis", "xaxis2", "yaxis2")
    wide = _panels.scaling_panel(_scaling_points([16, 64, 256, 1024, 4096]))  # 2.4 decades
    narrow = _panels.scaling_panel(_scaling_points([8, 16, 32, 64, 128]))  # 1.2 decades
    flat = _panels.scaling_panel(_scaling_points([8, 12, 16]))  # under one decade
    assert wide and narrow and flat
    for name in axes:
        assert wide["figure"]["layout"][name]["dtick"] == 1  # decades only
        assert narrow["figure"]["layout"][name]["dtick"] == "D2"  # 1, 2 and 5: never "D1", every digit
        assert "dtick" not in flat["figure"]["layout"][name]  # Plotly's own ticks, labelled in full
        assert flat["figure"]["layout"][name]["type"] == "log"
        assert wide["figure"]["layout"][name]["minor"]["ticks"] == "outside"  # digits marked, not labelled
    # the builder's own chart carries the setting
    page = client.get("/plans/new/scaling?" + BuilderState().query(), headers=HX).text
    data = re.search(r'<script type="application/json" id="chart-scaling-data">(.*?)</script>', page, re.S)
    assert data
    layout = json.loads(data.group(1))["layout"]
    assert all(layout[name]["type"] == "log" and layout[name].get("dtick") != "D1" for name in axes)
    assert any(layout[name].get("dtick") in (1, "D2") for name in axes)
