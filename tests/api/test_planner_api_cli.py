"""POST /api/v1/plan, POST /api/v1/plan/sizes and `clusterplan plan` through the real app and CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.catalog import accuracy_table
from tests.cli_support import invoke

BODY = {
    "model": "Llama-2-70B",
    "cluster": {"gpu": "H100-SXM", "nodes": 8, "fabric": "ib-ndr-8x400"},
    "training": {"seq_len": 4096, "tokens": 2e12},
    "global_batch": 512,
    "top": 5,
}


def test_plan_endpoint_returns_best_top_and_counts(client: Any) -> None:
    r = client.post("/api/v1/plan", json=BODY)
    assert r.status_code == 200, r.text
    d = r.json()
    for key in ("evaluated_layouts", "feasible_layouts", "elapsed_s", "best", "top", "pareto", "rejections"):
        assert key in d
    assert d["evaluated_layouts"] > d["feasible_layouts"] > 0
    assert d["enumerated_layouts"] == d["feasible_layouts"] + sum(d["rejections"].values())
    best = d["best"]
    assert best["layout"]["tp"] * best["layout"]["pp"] * best["layout"]["dp"] * best["layout"]["cp"] == 64
    assert 0 < best["mfu"] < 1 and best["step_time_s"] > 0 and best["memory_per_gpu_bytes"] < 80 * 2**30
    assert len(d["top"]) == 5 and d["top"][0] == best
    assert d["usd_per_gpu_hour"] > 0 and "price book" in d["price_source"]
    # the same layout through the estimate endpoint gives the same step time
    scenario = {
        "model": "Llama-2-70B",
        "cluster": BODY["cluster"],
        "layout": best["layout"],
        "training": BODY["training"],
    }
    e = client.post("/api/v1/estimate", json=scenario)
    assert e.status_code == 200, e.text
    assert abs(e.json()["step"]["total_s"] - best["step_time_s"]) <= 1e-9 * best["step_time_s"]
    # ... and the same wall-clock time to train (the goodput of 64 GPUs; the planning figures divide by it to 4
    # decimals, app.services.plan_costs.goodput_share), on which the cost per run is counted
    assert best["goodput"] == pytest.approx(e.json()["goodput"], abs=5e-5) and 0.5 < best["goodput"] < 1.0
    assert best["wall_clock_s"] == pytest.approx(e.json()["wall_clock_time_to_train_s"], rel=1e-4)
    assert best["wall_clock_s"] == pytest.approx(best["time_to_train_s"] / best["goodput"], rel=1e-12)
    assert best["cost_usd"] == pytest.approx(
        best["wall_clock_s"] / 3600 * 64 * d["usd_per_gpu_hour"], rel=1e-12
    )
    acc = d["accuracy"]  # the best layout's time-to-train range, on both clocks
    ratios = [acc["time_to_train_ratio_low"], acc["time_to_train_ratio_high"]]
    assert acc["wall_clock_range_s"] == pytest.approx([best["wall_clock_s"] * r for r in ratios], rel=1e-12)


def test_plan_endpoint_field_errors(client: Any) -> None:
    bad = dict(BODY, global_batch=None, training={"seq_len": 0})
    r = client.post("/api/v1/plan", json=bad)
    assert r.status_code == 422
    assert "seq_len" in r.text
    r = client.post("/api/v1/plan", json=dict(BODY, model="Llama-9-1T"))
    assert r.status_code in (404, 422) and "Llama-9-1T" in r.text
    r = client.post("/api/v1/plan", json=dict(BODY, global_batch=None))
    assert r.status_code == 422 and "global_batch" in r.text


def test_sizes_endpoint(client: Any) -> None:
    body = dict(BODY, sizes=[16, 32, 64, 128], deadline_days=400, usd_per_gpu_hour=2.5)
    body.pop("top")
    r = client.post("/api/v1/plan/sizes", json=body)
    assert r.status_code == 200, r.text
    d = r.json()
    assert [p["num_gpus"] for p in d["points"]] == [16, 32, 64, 128]
    assert d["min_gpus_that_fit"] == 32 and not d["points"][0]["feasible"]
    assert d["smallest_meeting_deadline"] in (64, 128)
    assert d["cheapest"] in (32, 64, 128) and d["price_source"] == "request"
    # the accuracy band: each point's time to train at the time-to-train range's high end (the step band widened by
    # whole published runs), and the smallest cluster that still meets the deadline there (never smaller than the
    # one that meets it at the estimate)
    high = d["accuracy"]["time_to_train_ratio_high"]
    assert d["accuracy"]["regime"] == "dense" and high >= d["accuracy"]["ratio_high"] >= 1.0
    assert high == pytest.approx(
        max(d["accuracy"]["ratio_high"], accuracy_table()["whole_runs"]["ratio_high"])
    )
    for p in d["points"]:
        if p["time_to_train_days"]:
            assert p["time_to_train_likely_high_days"] == pytest.approx(p["time_to_train_days"] * high)
    meets = [p["num_gpus"] for p in d["points"] if p["feasible"] and p["time_to_train_days"] * high <= 400]
    assert d["smallest_meeting_deadline_at_high"] == (meets[0] if meets else None)
    assert d["smallest_meeting_deadline_at_high"] is None or (
        d["smallest_meeting_deadline_at_high"] >= d["smallest_meeting_deadline"]
    )


def test_openapi_has_stable_operation_ids(client: Any) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    assert spec["paths"]["/api/v1/plan"]["post"]["operationId"] == "plan_search"
    assert spec["paths"]["/api/v1/plan/sizes"]["post"]["operationId"] == "plan_sizes"


def test_cli_plan_json_and_text(tmp_path: Path) -> None:
    args = ["plan", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--nodes", "2", "--seq-len", "8192"]
    res = invoke([*args, "--global-batch", "128", "--tokens", "1e11", "--top", "3", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)  # the deprecation warning is on stderr
    assert len(d["top"]) == 3 and d["best"]["num_gpus"] == 16 and d["elapsed_s"] > 0
    # the best layout's time to train at both ends of the time-to-train range (the step band widened by whole runs)
    acc = d["accuracy"]
    assert (
        acc["time_to_train_ratio_high"] >= acc["ratio_high"]
        and acc["time_to_train_ratio_low"] <= acc["ratio_low"]
    )
    assert acc["time_to_train_range_s"] == pytest.approx(
        [
            d["best"]["time_to_train_s"] * acc["time_to_train_ratio_low"],
            d["best"]["time_to_train_s"] * acc["time_to_train_ratio_high"],
        ]
    )
    res = invoke([*args, "--global-batch", "128", "--preset", "heuristic"])
    assert res.exit_code == 0, res.output
    assert "layouts/s" in res.output and "heuristic" in res.output
    assert "accuracy (dense): best step time likely" in res.output
    assert "best time to train likely" not in res.output  # no token budget, no time to train
    res = invoke([*args, "--global-batch", "128", "--tokens", "1e11"])
    assert "best time to train likely" in res.output and "whole published pre-training runs" in res.output
    # compute and wall-clock days side by side, the goodput they differ by in words
    best_line = next(line for line in res.output.splitlines() if line.startswith("  1  "))
    compute, wall = (float(x) for x in re.findall(r"([\d.]+) days", best_line)[:2])
    goodput = float(re.search(r"wall-clock days at ([\d.]+) % goodput on 16 GPUs", res.output).group(1))
    assert wall == pytest.approx(compute / (goodput / 100), abs=0.051) and wall >= compute
    assert re.search(
        r"best time to train likely .* of compute, [\d.]+ days to [\d.]+ days on the wall clock", res.output
    )
    scenario = tmp_path / "s.json"
    scenario.write_text(
        json.dumps(
            {
                "model": "Llama-3-8B",
                "cluster": {"gpu": "H100-SXM", "nodes": 1},
                "layout": {"global_batch": 64},
                "training": {"seq_len": 4096, "tokens": 1e10},
            }
        )
    )
    res = invoke(
        ["plan", str(scenario), "--sweep", "--sizes", "8,16,32", "--price", "2", "--deadline-days", "30"]
    )
    assert res.exit_code == 0, res.output
    assert "cheapest run" in res.output and "smallest cluster that fits: 8" in res.output
    assert (
        "smallest cluster meeting 30 days" in res.output
        and "the time-to-train range's high end" in res.output
    )
    # each size's goodput beside its wall clock, and what it holds: one node has no fail-slows, two nodes do
    lines = res.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("GPUs  best layout"))
    assert "wall clock  goodput" in lines[head]
    rows = lines[head + 1 : head + 4]
    shares = {int(line.split()[0]): float(line.split(" %")[0].split()[-1]) for line in rows}
    assert shares[8] > 99.0 and shares[16] < 80.0 and shares[32] < 80.0
    assert (
        "wall clock: compute days ÷ goodput" in res.output and "fail-slows: 1.34 across nodes" in res.output
    )


def test_cli_bad_input_exits_2_without_traceback() -> None:
    cmd = [sys.executable, "-m", "app.cli.main", "plan", "--model", "Llama-3-8B", "--gpu", "H100-SXM"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--seq-len" in proc.stderr
    proc = subprocess.run(
        [*cmd, "--seq-len", "4096", "--global-batch", "64", "--rank-by", "speed"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--rank-by" in proc.stderr


def test_price_book_rows_from_the_database_feed_the_cost_ranking(db_url: str) -> None:
    """A user's price rows in the DB (SQLite and PostgreSQL) count towards that user's default $/GPU-hour."""
    from datetime import date, timedelta

    from sqlmodel import Session

    from app.db import get_engine
    from app.models import PriceRow
    from app.services.catalog import PUBLIC, Actor
    from app.services.planner import price_for, search
    from tests.auth_support import ensure_user

    buyer = Actor(ensure_user("planner-quotes@example.test").id)
    file_price, file_source = price_for("H100-SXM", viewer=PUBLIC)
    file_count = int(file_source.split("median of ")[1].split(" ")[0])
    with Session(get_engine()) as session:
        for i in range(file_count + 1):  # enough expensive rows to move the median above every built-in quote
            session.add(
                PriceRow(
                    category="cloud_gpu",
                    item=f"planner test instance {i}",
                    vendor="TestCloud",
                    region="test-1",
                    pricing_model="on-demand",
                    unit="instance-hour",
                    price_usd=8000.0,
                    usd_per_gpu_hour=1000.0,
                    gpu_name="H100-SXM",
                    gpus_per_unit=8,
                    price_date=date.today() - timedelta(days=10),  # on-demand and fresh: in the headline pool
                    source="https://example.test/prices",
                    builtin=False,
                    owner_id=buyer.user_id,
                )
            )
        session.commit()
        price, source = price_for("H100-SXM", session, viewer=buyer)
        assert price == 1000.0 and f"median of {2 * file_count + 1} " in source
        assert price_for("H100-SXM", session, viewer=PUBLIC)[0] == file_price  # nobody else's headline moves
        out = search(dict(BODY, rank_by="cost"), session, viewer=buyer)
        assert out.usd_per_gpu_hour == 1000.0
        assert out.best["cost_usd"] == pytest.approx(out.best["wall_clock_s"] / 3600 * 64 * 1000.0)
    assert file_price < 1000.0


def test_sizes_honour_flash_attention(client: Any) -> None:
    """The size sweep searches with the request's attention: unfused attention is never faster."""
    body = dict(BODY, sizes=[64])
    body.pop("top")
    fused = client.post("/api/v1/plan/sizes", json=body)
    unfused = client.post("/api/v1/plan/sizes", json=dict(body, flash_attention=False))
    assert fused.status_code == 200 and unfused.status_code == 200, unfused.text
    on, off = fused.json()["points"][0], unfused.json()["points"][0]
    assert on["feasible"] and off["feasible"]
    assert off["tokens_per_s"] < on["tokens_per_s"]


def test_cli_sweep_labels_its_scaling_baseline_and_explains_values_above_100() -> None:
    """The sweep's scaling column compares each size's best layout with the smallest size's best, not the network
    scaling efficiency's ideal: the column and a line under the table say so, and a value above 100 % is
    explained by the two layouts' MFU."""
    args = ["search", "--model", "Llama-3-70B", "--gpu", "H100-SXM", "--nodes", "4", "--seq-len", "8192"]
    res = invoke([*args, "--global-batch", "512", "--tokens", "1e12", "--sweep", "--sizes", "32,64,128"])
    assert res.exit_code == 0, res.output
    assert "vs smallest" in res.output.splitlines()[2]
    assert "against that of the smallest size that fits (32 GPUs)" in res.output
    rows = {
        int(m[0]): float(m[1])
        for m in re.findall(r"^\s+(\d+)\s.*?\s([\d.]+) %\s+[\d.]+ %$", res.output, re.M)
    }
    assert rows[32] == 100.0 and max(rows.values()) > 100.0  # the 128-GPU best layout runs at a higher MFU
    top = max(rows, key=rows.__getitem__)
    assert f"above 100 % at {top} GPUs" in res.output and "lets a faster layout fit" in res.output
