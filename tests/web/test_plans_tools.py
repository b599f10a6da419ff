"""The network and cost pages of a planning session: the same numbers as the network and cost APIs,
full page vs htmx block, field problems."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest

HX = {"HX-Request": "true"}


def _figure(html: str, chart: str) -> dict[str, Any]:
    return dict(json.loads(html.split(f'id="{chart}-data">', 1)[1].split("</script>", 1)[0]))


def test_network_page_matches_the_collective_api(client: Any) -> None:
    page = client.get("/network?nodes=4&op=all_reduce&min_size=1+MiB&max_size=256+MiB")
    assert page.status_code == 200 and "<html" in page.text
    figure = _figure(page.text, "chart-busbw")
    traces = {t["name"]: t for t in figure["data"]}
    assert {"ib-ndr-8x400", "roce-8x400", "ethernet-tcp-100"} <= set(traces)
    api = client.post(
        "/api/v1/network/collective",
        json={
            "op": "all_reduce",
            "sweep": {"min_bytes": 2**20, "max_bytes": 2**28, "factor": 4},
            "cluster": {"gpu": "H100-SXM", "nodes": 4, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
        },
    ).json()
    assert traces["ib-ndr-8x400"]["x"] == [r["message_bytes"] for r in api["results"]]
    assert traces["ib-ndr-8x400"]["y"] == pytest.approx([r["busbw_gbps"] for r in api["results"]])
    # bigger messages amortise latency; 100 Gb/s TCP is far below 8 × 400 Gb/s InfiniBand
    ib = traces["ib-ndr-8x400"]["y"]
    assert ib == sorted(ib)
    assert traces["ethernet-tcp-100"]["y"][-1] < ib[-1] / 4
    assert "GB/s" in page.text and "Fabric presets" in page.text
    # the largest message's likely time range and the bands behind it, as the API gives them
    largest = api["results"][-1]["accuracy"]
    low, high = (f"{t:,.0f}" for t in largest["time_range_us"])
    assert "Likely time (µs)" in page.text and f"{low}–{high}" in page.text
    assert html.escape(largest["summary"]) in page.text

    block = client.get("/network?nodes=4&op=all_gather", headers=HX)
    assert "<html" not in block.text and block.text.lstrip().startswith('<section id="network-results"')
    bad = client.get("/network?nodes=0", headers=HX)
    assert 'role="alert"' in bad.text and 'href="#f-nodes"' in bad.text


def test_cost_page_matches_the_tco_api(client: Any) -> None:
    page = client.get("/cost?nodes=4&utilisation=50&months=36")
    assert page.status_code == 200
    api = client.post(
        "/api/v1/cost/tco",
        json={
            "onprem": {"nodes": 4, "gpus_per_node": 8},
            "utilisation": 0.5,
            "gpu": "H100-SXM",
            "months": 36,
        },
    ).json()
    assert f"{api['usd_per_gpu_hour']:,.2f} USD per GPU-hour" in page.text
    assert f"{api['capex_total_usd']:,.0f} USD" in page.text
    cumulative = {t["name"]: t for t in _figure(page.text, "chart-tco")["data"]}
    onprem = cumulative["on-prem"]["y"]
    assert onprem[0] == pytest.approx(api["capex_total_usd"], rel=1e-6)
    assert len(onprem) == 37 and onprem == sorted(onprem)
    per_hour = {t["name"]: t for t in _figure(page.text, "chart-util")["data"]}["on-prem"]["y"]
    assert per_hour == sorted(per_hour, reverse=True)  # busier clusters spread the capex thinner
    first_option = re.search(
        r"<tbody><tr><th scope=\"row\">([^<]+)", page.text.split('id="chart-tco-data"', 1)[1]
    )
    assert first_option  # breakeven table, cheapest option first
    bad = client.get("/cost?utilisation=150", headers=HX)
    assert 'href="#f-utilisation"' in bad.text


def test_cost_page_prices_the_chosen_gpu_and_takes_onprem_overrides(client: Any) -> None:
    page = client.get("/cost?gpu=GB200&nodes=18&gpus_per_node=4", headers=HX)
    api = client.post(
        "/api/v1/cost/tco",
        json={"onprem": {"nodes": 18, "gpus_per_node": 4}, "utilisation": 0.7, "gpu": "GB200", "months": 48},
    ).json()
    assert api["capex"]["servers"] == pytest.approx(3.0e6)  # one NVL72 rack's worth of 4-GPU trays
    assert f"{api['capex_total_usd']:,.0f} USD" in page.text
    assert 'id="server-basis">GB200: DGX GB200 NVL72' in page.text  # the row the servers are priced from
    typed = "server_usd=200000&node_kw=8&pue=1.2&usd_per_kwh=0.1&colo_usd_per_kw_month=150"
    typed += "&maintenance_pct=5&gpus_per_fte=500&usd_per_fte_year=200000&residual_pct=10"
    mine = client.get(f"/cost?gpu=GB200&nodes=18&gpus_per_node=4&{typed}", headers=HX)
    ours = client.post(
        "/api/v1/cost/tco",
        json={
            "onprem": {
                "nodes": 18,
                "gpus_per_node": 4,
                "server_capex_usd_per_node": 200000,
                "node_power_kw": 8,
                "pue": 1.2,
                "usd_per_kwh": 0.1,
                "colo_usd_per_kw_month": 150,
                "maintenance_fraction_per_year": 0.05,
                "gpus_per_fte": 500,
                "usd_per_fte_year": 200000,
                "residual_fraction": 0.1,
            },
            "utilisation": 0.7,
            "gpu": "GB200",
            "months": 48,
        },
    ).json()
    assert f"{ours['usd_per_gpu_hour']:,.2f} USD per GPU-hour" in mine.text
    assert f"{ours['capex_total_usd']:,.0f} USD" in mine.text
    no_row = client.get("/cost?gpu=L40S", headers=HX)
    assert 'role="alert"' in no_row.text and "no on-prem server row for L40S" in no_row.text
    bad = client.get("/cost?pue=0.5", headers=HX)
    assert 'href="#f-pue"' in bad.text
