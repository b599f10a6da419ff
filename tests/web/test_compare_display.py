"""The compare page as a reader sees it: every row has a label and a unit, shares (MFU, goodput) are in %, results
are rounded for display while the exports keep every digit, wall-clock days lead; and "Compare with…" on a plan's
page (one plan chosen) asks for a second plan instead of failing."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import pytest

from app.web.pages._compare import significant
from tests.plans_support import small_scenario


def _two_plans(client: Any, prefix: str) -> list[str]:
    ids = []
    for name, layout in ((f"{prefix} one", {}), (f"{prefix} two", {"tp": 4, "dp": 4})):
        r = client.post("/api/v1/plans", json={"name": name, "scenario": small_scenario(**layout)})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    return ids


def _row(page: str, label: str) -> list[str]:
    """The unit and the cells (values, Δ, %) of the row with this label."""
    row = re.search(rf'<th scope="row">{re.escape(label)}</th>(.*?)</tr>', page, re.S)
    assert row, f"no row {label!r}"
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)


@pytest.mark.parametrize(
    ("value", "text"),
    [(3.67904, "3.68"), (0.269059, "0.269"), (74.011, "74.0"), (28420.4, "28,420"), (100.0, "100"), (2, "2")],
)
def test_results_are_rounded_to_three_significant_figures(value: float, text: str) -> None:
    assert significant(value) == text


def test_compare_rows_have_labels_units_percent_mfu_and_rounded_values(client: Any) -> None:
    ids = _two_plans(client, "disp")
    page = client.get("/plans/compare?" + urlencode([("ids", i) for i in ids])).text
    assert "wall_clock_days" not in page and "wall_clock_gpu_hours" not in page and "fraction" not in page
    summaries = [client.get(f"/api/v1/plans/{i}").json()["summary"] for i in ids]
    mfu = _row(page, "MFU")
    assert mfu[0] == "%" and mfu[1:3] == [significant(s["mfu"] * 100) for s in summaries]
    step = _row(page, "Step time")
    assert step[0] == "s" and step[1] == significant(summaries[0]["step_time_s"]) and len(step[1]) <= 5
    assert re.fullmatch(r"[+−][\d.]{1,5}", step[3]) and re.fullmatch(r"[+−][\d.]+ %", step[4])
    wall = _row(page, "Time to train, wall clock (failures, checkpoints, restarts, fail-slows)")
    compute = _row(page, "Time to train, compute (no failures)")
    assert wall[0] == compute[0] == "days"
    assert wall[1] == significant(summaries[0]["wall_clock_days"])
    assert page.index("Time to train, wall clock") < page.index("Time to train, compute")  # wall clock leads
    assert _row(page, "GPU-hours, wall clock (failures, checkpoints, restarts, fail-slows)")[0] == "GPU·h"
    assert _row(page, "Fits in memory")[1] == "yes"


def test_exports_keep_the_raw_values(client: Any) -> None:
    ids = _two_plans(client, "raw")
    summary = client.get(f"/api/v1/plans/{ids[0]}").json()["summary"]
    compared = client.get("/api/v1/plans/compare?" + urlencode([("ids", i) for i in ids])).json()
    rows = {r["key"]: r for r in compared["rows"]}
    assert rows["mfu"]["values"][0] == summary["mfu"] and rows["mfu"]["unit"] == "fraction"
    assert rows["step_time_s"]["values"][0] == summary["step_time_s"]
    csv = client.get(f"/api/v1/plans/{ids[0]}/export.csv").text
    assert re.search(rf"result,mfu,{summary['mfu']},fraction", csv)
    assert re.search(rf"result,wall_clock_days,{summary['wall_clock_days']},days", csv)


def test_compare_with_one_plan_asks_for_a_second(client: Any) -> None:
    ids = _two_plans(client, "pick")
    r = client.get(f"/plans/compare?ids={ids[0]}")
    assert r.status_code == 200
    assert "Pick a second plan to compare with pick one" in r.text and "compare takes" not in r.text
    block = re.search(r'id="pick-second".*?</div>', r.text, re.S)
    assert block
    links = re.findall(r'href="/plans/compare\?ids=([\w-]+)&amp;ids=([\w-]+)"', block.group(0))
    assert (ids[0], ids[1]) in links and all(first == ids[0] != second for first, second in links)
    # the link compares the two
    both = client.get(f"/plans/compare?ids={ids[0]}&ids={ids[1]}")
    assert both.status_code == 200 and "Side by side" in both.text and 'class="compare-table"' in both.text
    # "Compare with…" on the plan's page leads there
    assert f'href="/plans/compare?ids={ids[0]}"' in client.get(f"/plans/{ids[0]}").text


def test_compare_with_one_unknown_plan_is_not_found(client: Any) -> None:
    r = client.get("/plans/compare?ids=00000000-0000-4000-8000-000000000000")
    assert r.status_code == 404 and 'id="pick-second"' not in r.text
