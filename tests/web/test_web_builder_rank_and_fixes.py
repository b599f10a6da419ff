"""The builder's planner mode: rank by time or cost, and the nearest node counts and global batches that fit when
no layout does (over HTTP, through the service layer)."""

from __future__ import annotations

import re
from typing import Any

from app.services.plan_fixes import batch_candidates, node_candidates
from app.web.pages._builder import BuilderState, parse_state

HX = {"HX-Request": "true"}


def _ranking_rows(html: str) -> list[list[str]]:
    table = re.search(r"Layout ranking table.*?<tbody>(.*?)</tbody>", html, re.S)
    assert table, "no ranking table"
    return [
        re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        for row in re.findall(r"<tr.*?</tr>", table.group(1), re.S)
    ]


def test_rank_by_round_trips_and_is_checked() -> None:
    state = parse_state({"mode": "planner", "rank_by": "cost"})
    assert state.rank_by == "cost" and "rank_by=cost" in state.query()
    assert "rank_by" not in BuilderState(mode="planner").query()  # the default stays out of the address bar
    assert parse_state({"rank_by": "speed"}).errors["rank_by"] == "one of time, cost"


def test_planner_ranks_by_cost_with_a_cost_column(client: Any) -> None:
    by_time = client.get("/plans/new?" + BuilderState(mode="planner", nodes=4).query(), headers=HX)
    by_cost = client.get(
        "/plans/new?" + BuilderState(mode="planner", nodes=4, rank_by="cost").query(), headers=HX
    )
    assert by_time.status_code == by_cost.status_code == 200
    assert "Best layouts by time to train" in by_time.text and "Ranked by time to train." in by_time.text
    assert "Best layouts by cost per run" in by_cost.text and "Ranked by cost per run" in by_cost.text
    assert "Cost per run (USD)" in by_cost.text
    column = 'Cost per run (USD, wall-clock GPU-hours)</th><th scope="col">TP in node'
    assert column in by_cost.text and column not in by_time.text  # by time, no column of dashes
    rows = _ranking_rows(by_cost.text)
    costs = [float(r[7].replace(",", "")) for r in rows if r[7] != "—"]
    assert costs and costs == sorted(costs)
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    # the headline's cost is the recommended (cheapest in the validated region) layout's
    headline = re.search(r"<dt>Cost per run</dt><dd class=\"num\">([\d,]+) USD", by_cost.text)
    assert headline and float(headline.group(1).replace(",", "")) >= costs[0]


def test_the_rank_control_is_labelled(client: Any) -> None:
    page = client.get("/plans/new").text
    assert '<label for="f-rank_by">Planner ranks layouts by</label>' in page
    assert '<select id="f-rank_by" name="rank_by">' in page


def test_candidates_are_bounded_and_on_both_sides() -> None:
    nodes = node_candidates(600)
    assert len(nodes) <= 24 and 512 in nodes and 640 in nodes and 599 in nodes and 601 in nodes
    batches = batch_candidates(250)
    assert len(batches) <= 8 and 256 in batches and 248 in batches


def test_no_layout_fits_suggests_the_nearest_sizes_and_batches(client: Any) -> None:
    state = BuilderState(mode="planner", model="Llama-3-70B", nodes=600, global_batch=256)
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert r.status_code == 200 and 'id="nearest-fix"' in r.text
    block = re.search(r'id="nearest-fix".*?</div>', r.text, re.S)
    assert block
    text = block.group(0)
    assert "divisibility" in text
    below = re.search(r'data-sets="nodes" data-value="(\d+)"', text)
    assert below and int(below.group(1)) < 600
    values = [int(v) for v in re.findall(r'data-sets="nodes" data-value="(\d+)"', text)]
    assert len(values) == 2 and values[0] < 600 < values[1]
    # each suggestion is a builder link that sets its field, and the planner does find a layout there
    link = re.search(r'href="/plans/new\?([^"]+)" data-sets="nodes"', text)
    assert link
    fixed = client.get("/plans/new?" + link.group(1).replace("&amp;", "&"), headers=HX)
    assert "layouts enumerated" in fixed.text and 'id="nearest-fix"' not in fixed.text
    batches = [int(v) for v in re.findall(r'data-sets="global_batch" data-value="(\d+)"', text)]
    for batch in batches:
        again = client.get(
            "/plans/new?" + BuilderState(**{**state.as_dict(), "global_batch": batch}).query(), headers=HX
        )
        assert 'id="nearest-fix"' not in again.text


def test_no_layout_fits_for_memory_says_memory(client: Any) -> None:
    state = BuilderState(mode="planner", model="Llama-3.1-405B", nodes=1)
    r = client.get("/plans/new?" + state.query(), headers=HX)
    block = re.search(r'id="nearest-fix".*?</div>', r.text, re.S)
    assert block and "memory" in block.group(0)
    above = re.findall(r'data-sets="nodes" data-value="(\d+)"', block.group(0))
    assert above and int(above[-1]) > 1


def test_planner_says_when_the_batch_cannot_fill_the_gpus(client: Any) -> None:
    # Llama 3 70B, 256 sequences of 4,096 tokens on 512 nodes: the recommendation idles most of each step
    state = BuilderState(mode="planner", model="llama-3-70b", nodes=512, seq_len=4096, global_batch=256)
    page = client.get("/plans/new?" + state.query(), headers=HX)
    assert page.status_code == 200
    note = re.search(r'<p class="accuracy-note" id="pipeline-note">(.*?)</p>', page.text, re.S)
    assert note and "idles" in note.group(1) and "A larger global batch" in note.group(1)
    fine = client.get("/plans/new?" + BuilderState(mode="planner", nodes=4).query(), headers=HX)
    assert fine.status_code == 200 and 'id="pipeline-note"' not in fine.text
