"""Every cost on the planning pages charges the wall-clock GPU-hours (the compute ones over the goodput): the
builder's headline, its size table and its ranking show the same cost for the same cluster, and the sizes API says
which figure is which (cost_usd on the wall clock, compute_cost_usd of the compute alone)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.web.pages._builder import BuilderState

HX = {"HX-Request": "true"}
# the reported case: 512 nodes of H100-SXM, a deadline so that the size table appears
STATE = BuilderState(
    model="Llama-3-70B",
    nodes=512,
    tokens_b=15_000.0,
    seq_len=8192,
    global_batch=2048,
    deadline_days=30.0,
    mode="planner",
)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _size_cost(client: Any, gpus: str) -> tuple[float, float, float]:
    """The size table's compute GPU-hours, wall-clock GPU-hours and cost (USD) of the row with this many GPUs (as
    the page writes it)."""
    r = client.get("/plans/new/sizes?" + STATE.query(), headers=HX)
    assert r.status_code == 200
    assert "Cost (USD, wall-clock GPU-hours)" in r.text and "Compute GPU-hours" in r.text
    assert "Wall-clock GPU-hours" in r.text
    cells = r'<td class="num">([\d,]+)</td>' * 3
    row = re.search(rf'<th scope="row" class="num">{gpus}</th>.*?{cells}', r.text, re.S)
    assert row, r.text[:2000]
    return _number(row.group(1)), _number(row.group(2)), _number(row.group(3))


def test_the_size_table_costs_the_headline_cluster_as_the_headline_does(client: Any) -> None:
    page = client.get("/plans/new?" + STATE.query(), headers=HX).text
    headline = re.search(r"<dt>Cost per run</dt><dd class=\"num\">([\d,]+) USD", page)
    assert headline, page[:2000]
    compute_hours, wall_hours, cost = _size_cost(client, "4,096")
    assert cost == _number(headline.group(1))
    card = re.search(r'id="gpu-hours-card">(.*?)</div>', page, re.S)
    assert card
    compute = re.search(r"([\d,]+) GPU·h of compute", card.group(1))
    wall = re.search(r'id="wall-clock-gpu-hours">([\d,]+) GPU·h on the wall clock', card.group(1))
    assert compute and wall and _number(wall.group(1)) > _number(compute.group(1)) == compute_hours
    # the cost says which hours it charges, and they are the wall-clock ones of the card
    charged = re.search(r'id="cost-hours">for the ([\d,]+) wall-clock GPU-hours', page)
    assert charged and charged.group(1) == wall.group(1)
    assert wall_hours == _number(wall.group(1))  # the size row's wall-clock GPU-hours are the card's


def test_the_ranking_costs_the_recommended_layout_as_the_headline(client: Any) -> None:
    from dataclasses import replace

    page = client.get("/plans/new?" + replace(STATE, rank_by="cost").query(), headers=HX).text
    headline = re.search(r"<dt>Cost per run</dt><dd class=\"num\">([\d,]+) USD", page)
    assert headline
    recommended = re.search(
        r'<tr[^>]*><td class="num">\d+</td><td>[^<]*<span class="badge badge-ok">recommended</span>.*?</tr>',
        page,
        re.S,
    )
    assert recommended, page[:3000]
    cells = re.findall(r'<td class="num">([\d,.—]+)</td>', recommended.group(0))
    assert _number(cells[-1]) == _number(headline.group(1))


def test_sizes_api_cost_is_on_the_wall_clock_and_compute_cost_is_kept(client: Any) -> None:
    body = {
        "model": "Llama-2-70B",
        "cluster": {"gpu": "H100-SXM", "nodes": 8, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 4096, "tokens": 2e12},
        "global_batch": 512,
        "sizes": [32, 64, 128],
        "usd_per_gpu_hour": 2.5,
    }
    r = client.post("/api/v1/plan/sizes", json=body)
    assert r.status_code == 200, r.text
    d = r.json()
    points = [p for p in d["points"] if p["feasible"]]
    assert points
    for p in points:
        assert p["compute_cost_usd"] == pytest.approx(p["gpu_hours"] * 2.5)
        assert p["cost_usd"] == pytest.approx(p["wall_clock_gpu_hours"] * 2.5, rel=1e-6)
        assert p["cost_usd"] > p["compute_cost_usd"]
    assert d["cheapest"] == min(points, key=lambda p: p["cost_usd"])["num_gpus"]
    schema = client.app.openapi()["components"]["schemas"]["SizesOut"]["properties"]
    assert "compute_cost_usd" in schema["points"]["description"]
