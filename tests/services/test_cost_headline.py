"""One headline price rule: the median of the non-stale on-demand quotes for the GPU, with the cheapest and the
dearest beside it, used alike by the plan builder, the cost and plan APIs and the CLI."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.core import cost
from app.web.pages._builder import BuilderState

HX = {"HX-Request": "true"}


def _q(label: str, price: float, term: Any = "on_demand", stale: bool = False) -> cost.PriceQuote:
    return cost.PriceQuote(label, price, term=term, stale=stale, date="2026-10-01")


def test_headline_is_the_median_fresh_on_demand_quote() -> None:
    quotes = [
        _q("a", 2.0),
        _q("b", 4.0),
        _q("c", 3.0),
        _q("d", 9.0),
        _q("spot", 1.0, term="spot"),
        _q("3y", 1.5, term="reserved"),
        _q("block", 1.8, term="capacity_block"),
        _q("old", 0.5, stale=True),
    ]
    h = cost.headline_price(quotes)
    assert h is not None
    # four fresh on-demand quotes 2, 3, 4, 9: the lower middle one, a price someone quotes
    assert (h.usd_per_gpu_hour, h.quote.label, h.quotes) == (3.0, "c", 4)
    assert (h.cheapest.label, h.dearest.label) == ("a", "d")
    assert h.statement.startswith("$3.00/GPU-hour, median of 4 non-stale on-demand quotes: c;")
    assert "cheapest $2.00 (a)" in h.statement and "dearest $9.00 (d)" in h.statement


def test_headline_falls_back_to_stale_on_demand_quotes_and_says_so() -> None:
    h = cost.headline_price([_q("old", 5.0, stale=True), _q("older", 7.0, stale=True), _q("s", 1.0, "spot")])
    assert h is not None and h.all_stale and h.usd_per_gpu_hour == 5.0
    assert "all stale" in h.statement
    assert cost.headline_price([_q("s", 1.0, "spot"), _q("r", 2.0, "reserved")]) is None


def test_builder_api_and_cli_cost_a_plan_at_the_same_headline_price(client: Any) -> None:
    run = client.post("/api/v1/cost/run", json={"num_gpus": 64, "gpu_hours": 1000, "gpu": "H100"}).json()
    headline = run["headline"]
    assert headline["quotes"] >= 3
    # the plan search (API and CLI `clusterplan plan`) prices the plan at the same quote
    plan = client.post(
        "/api/v1/plan",
        json={
            "model": "Llama-2-7B",
            "cluster": {"gpu": "H100-SXM", "nodes": 8, "fabric": "ib-ndr-8x400"},
            "training": {"seq_len": 4096, "tokens": 1e10},
            "global_batch": 256,
            "top": 1,
        },
    ).json()
    assert plan["usd_per_gpu_hour"] == headline["usd_per_gpu_hour"]
    assert headline["statement"] in plan["price_source"]
    # the builder's card states the same price, vendor and date
    block = client.get(f"/plans/new?{BuilderState(nodes=8).query()}", headers=HX).text
    basis = re.search(r'<span class="basis" id="cost-basis">at ([^<]+)</span>', block)
    assert basis is not None
    statement = basis.group(1).replace("&#39;", "'").replace("&amp;", "&")
    assert statement.startswith(f"${headline['usd_per_gpu_hour']:.2f}/GPU-hour, median of ")
    assert headline["label"] in statement and headline["price_date"] in statement
    card = re.search(r"<dt>Cost per run</dt><dd class=\"num\">([\d,]+) USD", block)
    assert card is not None
    assert float(card.group(1).replace(",", "")) > 0
    assert headline["cheapest_usd_per_gpu_hour"] <= headline["usd_per_gpu_hour"]
    assert headline["usd_per_gpu_hour"] <= headline["dearest_usd_per_gpu_hour"]


def test_a_quote_left_out_of_the_rule_never_sets_the_headline() -> None:
    quotes = [_q("od", 4.0), _q("cheap spot", 0.1, "spot")]
    h = cost.headline_price(quotes)
    assert h is not None and h.cheapest.label == "od" and h.usd_per_gpu_hour == pytest.approx(4.0)


def test_a_single_quote_says_it_is_thin_evidence() -> None:
    h = cost.headline_price([_q("only", 7.91)])
    assert h is not None and h.quotes == 1
    assert h.statement.startswith("$7.91/GPU-hour, the only non-stale on-demand quote: only;")
    assert "thin evidence" in h.statement and "cheapest" not in h.statement
