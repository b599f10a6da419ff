"""/api/v1/plans end to end through the app: CRUD, revisions, paging, compare, export, errors."""

from __future__ import annotations

import csv
import io
import re
import uuid
from datetime import datetime
from typing import Any

import pytest

import app as app_pkg
from app.schemas.plans import PlanExport
from tests.plans_support import small_scenario


def _create(client: Any, name: str = "api plan", **layout: Any) -> dict[str, Any]:
    r = client.post(
        "/api/v1/plans", json={"name": name, "notes": "first", "scenario": small_scenario(**layout)}
    )
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/api/v1/plans/{r.json()['id']}"
    return dict(r.json())


def _utc(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    assert value.utcoffset() is not None and value.utcoffset().total_seconds() == 0, text  # type: ignore[union-attr]
    return value


def test_create_stores_the_estimate_the_estimate_endpoint_returns(client: Any) -> None:
    plan = _create(client)
    uuid.UUID(plan["id"])
    _utc(plan["created_at"])
    rev = plan["current"]
    assert rev["revision"] == 1 and plan["latest_revision"] == 1
    assert rev["app_version"] == app_pkg.__version__
    assert rev["formula_version"] == app_pkg.FORMULA_VERSION
    assert rev["price_book_date"] >= "2025-01-01"  # the seeded price book's newest row
    assert rev["calibration_profile"] == "published defaults"
    # the wall clock: compute time over the goodput of this cluster (failures, checkpoints, restarts)
    summary = plan["summary"]
    assert 0.5 < summary["goodput"] < 1
    assert summary["wall_clock_days"] == pytest.approx(
        summary["time_to_train_days"] / summary["goodput"], rel=1e-3
    )
    assert summary["wall_clock_gpu_hours"] == pytest.approx(
        summary["gpu_hours"] / summary["goodput"], rel=1e-3
    )
    # ... and the time-to-train range (the step band widened by whole published runs) on the wall clock and the
    # bill, the budget's basis, as on the compute time
    ratio_low = summary["time_to_train_days_likely_low"] / summary["time_to_train_days"]
    ratio_high = summary["time_to_train_days_likely_high"] / summary["time_to_train_days"]
    assert ratio_low < 1 < ratio_high
    for key in ("wall_clock_days", "wall_clock_gpu_hours", "cost_per_run_usd"):
        assert summary[f"{key}_likely_low"] == pytest.approx(summary[key] * ratio_low, rel=1e-3)
        assert summary[f"{key}_likely_high"] == pytest.approx(summary[key] * ratio_high, rel=1e-3)

    direct = client.post("/api/v1/estimate", json=small_scenario()).json()
    summary = rev["result"]["summary"]
    assert summary["step_time_s"] == pytest.approx(direct["step"]["total_s"], rel=1e-5)
    assert summary["mfu"] == pytest.approx(direct["step"]["mfu"], abs=1e-4)
    assert summary["peak_memory_gib"] == pytest.approx(direct["memory"]["peak_bytes"] / 2**30, rel=1e-4)
    assert summary["num_gpus"] == 16 and summary["fits"] is True
    # time to train = tokens / throughput
    assert summary["time_to_train_days"] == pytest.approx(
        1e12 / direct["step"]["tokens_per_s"] / 86400, rel=1e-3
    )
    # the step breakdown stored for the chart sums to its total
    step = rev["result"]["step"]
    assert sum(step["breakdown_s"].values()) == pytest.approx(step["total_s"], rel=1e-9)
    for stage in rev["result"]["memory"]["stages"]:
        assert sum(stage["components"].values()) == pytest.approx(stage["total_bytes"], rel=1e-9)


def test_update_is_a_new_revision_and_old_ones_stay(client: Any) -> None:
    plan = _create(client)
    pid = plan["id"]
    r = client.put(f"/api/v1/plans/{pid}", json={"scenario": small_scenario(tp=4, dp=4)})
    assert r.status_code == 200, r.text
    assert r.json()["latest_revision"] == 2
    r = client.post(f"/api/v1/plans/{pid}/revisions", json={"name": "renamed"})
    assert r.status_code == 201 and r.json()["current"]["revision"] == 3
    assert r.json()["name"] == "renamed" and r.json()["notes"] == "first"

    first = client.get(f"/api/v1/plans/{pid}/revisions/1").json()
    second = client.get(f"/api/v1/plans/{pid}/revisions/2").json()
    third = client.get(f"/api/v1/plans/{pid}/revisions/3").json()
    assert first == plan["current"]
    assert first["scenario"]["layout"]["tp"] == 2 and second["scenario"]["layout"]["tp"] == 4
    assert third["scenario"] == second["scenario"] and third["result"] == second["result"]
    # TP4 splits weights over more GPUs: less weight memory per GPU than TP2
    w1 = first["result"]["memory"]["stages"][0]["components"]
    w2 = second["result"]["memory"]["stages"][0]["components"]
    weight_key = next(k for k in w1 if "weight" in k.lower() and "master" not in k.lower())
    assert w2[weight_key] < w1[weight_key]

    listing = client.get(f"/api/v1/plans/{pid}/revisions").json()
    assert listing["count"] == 3 and [r["revision"] for r in listing["data"]] == [3, 2, 1]
    assert (
        client.get(f"/api/v1/plans/{pid}/revisions", params={"limit": 1, "offset": 1}).json()["data"][0][
            "revision"
        ]
        == 2
    )


def test_list_envelope_and_paging(client: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    ids = [_create(client, f"list {tag} {i}")["id"] for i in range(3)]
    r = client.get("/api/v1/plans", params={"q": tag, "limit": 2})
    body = r.json()
    assert set(body) == {"data", "count"} and body["count"] == 3 and len(body["data"]) == 2
    rest = client.get("/api/v1/plans", params={"q": tag, "limit": 2, "offset": 2}).json()["data"]
    assert sorted(p["id"] for p in body["data"] + rest) == sorted(ids)
    assert body["data"][0]["summary"]["num_gpus"] == 16
    assert client.get("/api/v1/plans", params={"limit": 0}).status_code == 422


def test_compare_flags_differences(client: Any) -> None:
    a = _create(client, "compare a")
    b = _create(client, "compare b", tp=4, dp=4)
    r = client.get("/api/v1/plans/compare", params={"ids": [a["id"], b["id"]]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["name"] for c in body["plans"]] == ["compare a", "compare b"]
    rows = {(row["section"], row["key"]): row for row in body["rows"]}
    assert rows[("Inputs", "layout.tp")]["values"] == [2, 4] and rows[("Inputs", "layout.tp")]["differs"]
    assert rows[("Inputs", "model")]["differs"] is False
    assert rows[("Results", "step_time_s")]["differs"] is True
    assert rows[("Results", "step_time_s")]["unit"] == "s"
    assert body["differences"] == sum(1 for row in body["rows"] if row["differs"])
    assert client.get("/api/v1/plans/compare", params={"ids": [a["id"]]}).status_code == 422
    five = [a["id"], b["id"], a["id"], b["id"], a["id"]]
    assert client.get("/api/v1/plans/compare", params={"ids": five}).status_code == 422


def test_compare_gives_changes_against_the_first_plan(client: Any) -> None:
    a = _create(client, "delta a")
    b = _create(client, "delta b", tp=4, dp=4)
    ids = {"ids": [a["id"], b["id"]]}
    body = client.get("/api/v1/plans/compare", params=ids).json()
    assert body["same_within_pct"] == 0.5
    rows = {(row["section"], row["key"]): row for row in body["rows"]}
    step = rows[("Results", "step_time_s")]
    first, second = step["values"]
    assert step["deltas"][0] is None and step["deltas"][1] == pytest.approx(second - first)
    assert step["percents"][1] == pytest.approx(100 * (second - first) / first)
    assert rows[("Inputs", "layout.tp")]["deltas"] == [None, 2] and rows[("Inputs", "layout.tp")][
        "percents"
    ] == [None, 100]
    assert rows[("Inputs", "model")]["deltas"] == [None, None]
    # a threshold above the step time's move makes it the same; the layout input still differs (inputs are exact)
    wide = abs(step["percents"][1]) + 1
    loose = client.get("/api/v1/plans/compare", params={**ids, "same_within_pct": wide}).json()
    loose_rows = {(row["section"], row["key"]): row for row in loose["rows"]}
    assert loose_rows[("Results", "step_time_s")]["differs"] is False
    assert loose_rows[("Inputs", "layout.tp")]["differs"] is True
    assert loose["differences"] < body["differences"]
    for bad in (-1, 101, "nan"):
        r = client.get("/api/v1/plans/compare", params={**ids, "same_within_pct": bad})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "same_within_pct"


def test_export_json_and_csv_carry_provenance(client: Any) -> None:
    plan = _create(client, "export me")
    pid = plan["id"]
    client.put(f"/api/v1/plans/{pid}", json={"notes": "second"})
    doc = client.get(f"/api/v1/plans/{pid}/export.json").json()
    assert doc["format"] == "clusterplan-plan" and doc["plan"]["revision"] == 2
    PlanExport.model_validate(doc)  # the documented response schema
    for key in ("app_version", "formula_version", "price_book_date", "calibration_profile"):
        assert doc[key] == plan["current"][key]
    assert doc["scenario"] == plan["current"]["scenario"]
    old = client.get(f"/api/v1/plans/{pid}/export.json", params={"revision": 1}).json()
    assert old["plan"]["notes"] == "first"

    r = client.get(f"/api/v1/plans/{pid}/export.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert f"plan-{pid}-r2.csv" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    by_key = {(row["section"], row["key"]): row for row in rows}
    assert by_key[("provenance", "formula_version")]["value"] == app_pkg.FORMULA_VERSION
    assert by_key[("provenance", "price_book_date")]["value"] == plan["current"]["price_book_date"]
    assert by_key[("input", "layout.tp")]["value"] == "2"
    assert float(by_key[("result", "step_time_s")]["value"]) == pytest.approx(
        plan["current"]["result"]["summary"]["step_time_s"]
    )
    step_rows = [row for row in rows if row["section"] == "step_time"]
    assert sum(float(row["value"]) for row in step_rows) == pytest.approx(
        plan["current"]["result"]["step"]["total_s"], rel=1e-9
    )
    assert any(row["section"] == "assumption" and row["source"] for row in rows)


def test_duplicate_delete_and_errors(client: Any) -> None:
    plan = _create(client, "to copy")
    r = client.post(f"/api/v1/plans/{plan['id']}/duplicate", json={"name": "the copy"})
    assert r.status_code == 201 and r.json()["name"] == "the copy" and r.json()["id"] != plan["id"]
    assert client.delete(f"/api/v1/plans/{plan['id']}").status_code == 204
    missing = client.get(f"/api/v1/plans/{plan['id']}")
    assert missing.status_code == 404 and missing.json()["kind"] == "plan"
    assert client.delete(f"/api/v1/plans/{plan['id']}").status_code == 404
    assert client.get("/api/v1/plans/not-a-uuid").status_code == 422
    assert client.get(f"/api/v1/plans/{r.json()['id']}/revisions/9").status_code == 404

    bad = client.post("/api/v1/plans", json={"name": "", "scenario": small_scenario()})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "name"
    inconsistent = small_scenario(tp=3, dp=8)
    inconsistent["cluster"]["nodes"] = 3
    r = client.post("/api/v1/plans", json={"name": "bad tp", "scenario": inconsistent})
    assert r.status_code == 422
    assert ["body", "scenario", "layout", "tp"] in [d["loc"] for d in r.json()["detail"]]
    unknown = small_scenario()
    unknown["model"] = "llama-3-8c"
    r = client.post("/api/v1/plans", json={"name": "typo", "scenario": unknown})
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", "scenario", "model"] and "Llama-3-8B" in detail["msg"]


def test_calibration_profile_changes_the_numbers_and_travels_with_the_plan(client: Any) -> None:
    from sqlmodel import Session

    from app.db import get_engine
    from app.models.benchmarks import CalibrationProfile

    name = f"slow-gemm-{uuid.uuid4().hex[:6]}"
    with Session(get_engine()) as session:
        # a measured GEMM curve far below the H100's published 989 TFLOP/s dense BF16
        params = {"gemm": {"bf16": {"max_flops": 300e12, "half_intensity": 100.0, "dtype": "bf16"}}}
        session.add(CalibrationProfile(name=name, version=1, gpu_name="H100-SXM", params=params))
        session.commit()
    default = _create(client, "uncalibrated")
    r = client.post(
        "/api/v1/plans",
        json={"name": "calibrated", "scenario": small_scenario(), "calibration_profile": name},
    )
    assert r.status_code == 201, r.text
    calibrated = r.json()
    assert calibrated["current"]["calibration_profile"] == f"{name} v1"
    slow, fast = calibrated["current"]["result"]["summary"], default["current"]["result"]["summary"]
    assert slow["step_time_s"] > fast["step_time_s"] and slow["mfu"] < 300 / 989
    # a revision without a profile keeps the plan's; the export says which profile produced the numbers
    pid = calibrated["id"]
    again = client.put(f"/api/v1/plans/{pid}", json={"scenario": small_scenario(micro_batch=2)}).json()
    assert again["current"]["calibration_profile"] == f"{name} v1"
    assert client.get(f"/api/v1/plans/{pid}/export.json").json()["calibration_profile"] == f"{name} v1"
    back = client.put(f"/api/v1/plans/{pid}", json={"calibration_profile": "published defaults"}).json()
    assert (
        back["current"]["result"]["summary"]["step_time_s"]
        < again["current"]["result"]["summary"]["step_time_s"]
    )
    bad = client.post(
        "/api/v1/plans",
        json={"name": "x", "scenario": small_scenario(), "calibration_profile": "no-such-profile"},
    )
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "calibration_profile"]
    page = client.get(f"/plans/new?profile={name}+v1", headers={"HX-Request": "true"})
    assert f'name="calibration_profile" form="save-form" value="{name} v1"' in page.text


def test_compare_two_revisions_of_one_plan(client: Any) -> None:
    plan = _create(client, "revisions compared")
    pid = plan["id"]
    client.put(f"/api/v1/plans/{pid}", json={"scenario": small_scenario(micro_batch=2)})
    r = client.get("/api/v1/plans/compare", params={"ids": [pid, pid], "revs": [1, 2]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["revision"] for c in body["plans"]] == [1, 2]
    changed = {row["key"] for row in body["rows"] if row["differs"] and row["section"] == "Inputs"}
    assert changed == {"layout.micro_batch"}
    latest = client.get("/api/v1/plans/compare", params={"ids": [pid, pid], "revs": [1, 0]}).json()
    assert [c["revision"] for c in latest["plans"]] == [1, 2]
    assert client.get("/api/v1/plans/compare", params={"ids": [pid, pid], "revs": [1, 9]}).status_code == 404
    assert client.get("/api/v1/plans/compare", params={"ids": [pid, pid], "revs": [-1, 1]}).status_code == 422
    page = client.get(f"/plans/{pid}")
    link = re.search(r'href="(/plans/compare\?[^"]*revs=1[^"]*)">Changes from revision 1<', page.text)
    assert link
    diff = client.get(link.group(1).replace("&amp;", "&"))
    assert diff.status_code == 200 and "Micro-batch" in diff.text and "≠ differs" in diff.text


def test_compare_says_whether_two_layouts_differ_by_more_than_the_ranking_resolution(client: Any) -> None:
    from app.catalog import accuracy_table
    from app.core.accuracy import ranking_resolution_of

    a = _create(client, "resolution a")
    b = _create(client, "resolution b", tp=4, dp=4)
    body = client.get("/api/v1/plans/compare", params={"ids": [a["id"], b["id"]]}).json()
    speeds = [p["current"]["result"]["summary"]["tokens_per_s"] for p in (a, b)]
    regime = a["current"]["result"]["summary"]["accuracy_regime"]
    resolution = ranking_resolution_of(accuracy_table(), regime)
    assert resolution is not None
    gap = (max(speeds) / min(speeds) - 1) * 100
    note = body["ranking_note"]
    assert f"{gap:.1f} % ahead" in note and f"±{resolution.resolution_pct:.0f} %" in note
    within = gap <= resolution.resolution_pct
    assert ("cannot tell these layouts apart" in note) is within
    # two revisions of one layout are not a layout comparison: no note
    same = client.get("/api/v1/plans/compare", params={"ids": [a["id"], a["id"]]}).json()
    assert same["ranking_note"] is None
