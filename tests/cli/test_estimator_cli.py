"""`clusterplan estimate` and `clusterplan validate training-runs` as a user runs them (real subprocess)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from app.validation.training_runs import TIME_METRICS, load_rows, replay
from tests.cli_support import clusterplan
from tests.paths import DATA_DIR, ROOT

RUNS = DATA_DIR / "training_runs.csv"


@pytest.mark.slow
def test_estimate_text_and_json(tmp_path: Path) -> None:
    path = str(ROOT / "examples" / "mixtral-8x7b-64xh100.json")
    text = clusterplan("estimate", path, tmp_path=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "Mixtral-8x7B on 64 × H100-SXM" in text.stdout
    assert "46.70 B total, 12.88 B active" in text.stdout
    assert "ep_comm" in text.stdout and "fits" in text.stdout
    out = clusterplan("estimate", path, "--json", tmp_path=tmp_path)
    doc = json.loads(out.stdout)
    assert doc["layout"]["ep"] == 8
    assert doc["step"]["breakdown_s"]["ep_comm"] > 0
    assert sum(doc["step"]["breakdown_s"].values()) == pytest.approx(doc["step"]["total_s"])


@pytest.mark.slow
def test_estimate_bad_input_is_one_message_and_exit_2(tmp_path: Path) -> None:
    scenario = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    scenario["layout"].update({"tp": 3, "global_batch": 7})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(scenario))
    out = clusterplan("estimate", str(bad), tmp_path=tmp_path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "layout.tp" in out.stderr and "layout.global_batch" in out.stderr
    missing = clusterplan("estimate", str(tmp_path / "nope.json"), tmp_path=tmp_path)
    assert missing.returncode == 2 and "not found" in missing.stderr
    notjson = tmp_path / "x.json"
    notjson.write_text("{")
    out = clusterplan("estimate", str(notjson), tmp_path=tmp_path)
    assert out.returncode == 2 and "not valid JSON" in out.stderr


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = clusterplan("validate", "training-runs", str(RUNS), "--json", tmp_path=tmp_path_factory.mktemp("v"))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_validation_document_shape(report: dict) -> None:
    assert set(report) == {"rows", "summary"}
    summary = report["summary"]
    assert set(summary) == {"time", "memory", "oom", "skipped"}
    assert set(summary["time"]) == {"n", "mape_pct", "max_abs_pct"}
    assert set(summary["oom"]) == {"n", "correct", "wrong"}
    for row in report["rows"]:
        assert set(row) == {"source", "model_name", "metric", "measured", "predicted", "error_pct"}
    n_rows = sum(1 for _ in csv.DictReader(io.StringIO(RUNS.read_text())))
    assert len(report["rows"]) + len(summary["skipped"]) == n_rows


def test_validation_accuracy_on_published_runs(report: dict) -> None:
    # Regression guard at the accuracy reached (docs/validation_training_runs.md has the per-row table: time 5.74 %,
    # memory 4.5 %). The targets, time MAPE ≤ 5 % and every row within ±10 %, are not met: 9 rows are
    # outside, BigScience's TP-8 runs among them (slow on one node too, see the report's known gaps). Replaying
    # BigScience on the Omni-Path fabric Jean Zay has (4 × 100 Gb/s per node, BLOOM paper Sec. 3.4.1) instead of
    # 4 × HDR 200 gained 0.19 points and brought two of its TP-4 rows within ±10 %. Modelling
    # BigScience's 'type:transformer|embedding' pipeline partition as it ran (5 + 6 × 10 + 5 layers, not every stage
    # at 6 layers plus the LM head) cost 0.37 points: the old rounding up had hidden that source's bias.
    # DeepSpeed's partitioned pipeline sends cost 0.3 points here and gain 5.5 on vTrain's full multi-node set
    # (tests/validation/test_validation_heldout.py); replaying Narayanan's Table 1 with its SC21 artifact's own settings
    # (micro-batch, interleaving, fp16, PyTorch DDP) costs 0.12. Completing the micro-batch and interleaving rows
    # leave blank with the planner's best fitting layout instead of micro_batch=1, vp=1 costs 0.20 (5.54 → 5.74 %):
    # Megatron-LM's README table at micro-batch 4 and PTD-P's GPT-3 rows interleaved come out faster than measured.
    # Pricing each gradient bucket as its own collective (held-out 17.5 → 17.4 %, whole runs 23.1 → 22.2 %, this
    # file's MAPE unchanged) moved the README's GPT-70B on 768 H100 from −8.5 to −11.6 %: a tenth row outside. The
    # published 2.4 TB/s of the torchtitan runs' 96 GB HBM2e (the catalog had the H100 SXM's 3.35) moved their eager
    # 8K run on 8 GPUs from −1.4 to −10.7 %: an eleventh (time MAPE 5.29 → 5.50 %).
    s = report["summary"]
    assert s["time"]["n"] >= 70
    assert s["time"]["mape_pct"] <= 5.8
    outside = [r for r in report["rows"] if r["metric"] in TIME_METRICS and abs(r["error_pct"]) > 10.0]
    assert len(outside) <= 11
    assert s["memory"]["n"] >= 14
    assert s["memory"]["mape_pct"] <= 5.0
    # memory target: ±15 % of nvidia-smi readings (BigScience), ±5 % of allocator-level ones (below)
    smi = [
        abs(r["error_pct"])
        for r in report["rows"]
        if "bigscience" in r["source"] and r["metric"] == "mem_gib_per_gpu"
    ]
    assert len(smi) == 11 and max(smi) <= 15.0
    assert s["oom"]["correct"] >= 5
    # every measured run ran, so it fit; five are still predicted over HBM (three of them one-layer timing runs
    # replayed as the full model). The text report lists them; the --json document keeps its documented shape.
    over = replay(load_rows(RUNS)).ran_but_predicted_oom()
    assert over["n"] >= 85 and len(over["rows"]) <= 5
    assert s["skipped"] == []
    by_metric: dict[str, list[float]] = {}
    for row in report["rows"]:
        if row["error_pct"] is not None:
            by_metric.setdefault(row["metric"], []).append(abs(row["error_pct"]))
    # Korthikanti's iteration times (Selene, Megatron-LM) are the cleanest anchor: each within 10 %
    korth = [
        abs(r["error_pct"])
        for r in report["rows"]
        if "Korthikanti" in r["source"] and r["metric"] == "iter_time_s"
    ]
    assert len(korth) == 9 and max(korth) <= 10.0
    # allocator-level memory readings (torchtitan's logged peak): the ±5 % target holds
    titan_mem = [
        abs(r["error_pct"])
        for r in report["rows"]
        if "torchtitan" in r["source"] and r["metric"] == "mem_gib_per_gpu"
    ]
    assert len(titan_mem) == 3 and max(titan_mem) <= 5.0
    # DeepSpeed ZeRO-3 at a fixed batch on 384, 768 and 1,536 GPUs (Narayanan et al. 2021 Table 2): throughput
    # halves with each doubling, which only the per-collective latency reproduces
    zero3 = [
        r for r in report["rows"] if "Table 2" in r["source"] and r["model_name"].startswith("GPT-3 175B")
    ][:3]  # the ZeRO-3 rows come first in the table, the PTD-P rows after them
    assert [r["measured"] for r in zero3] == [144, 88, 44]
    assert max(abs(r["error_pct"]) for r in zero3) <= 5.0


def test_unusable_rows_are_listed_with_a_reason(tmp_path: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(RUNS.read_text())))
    fieldnames = list(rows[0])
    broken = [dict(rows[0]), dict(rows[0]), dict(rows[0]), dict(rows[0])]
    broken[0]["measured_metric"] = "joules"
    broken[1]["measured_value"] = "n/a"
    broken[2]["gpu"] = "TPU v9"
    broken[3]["tp"] = "5"
    path = tmp_path / "runs.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(broken)
    out = clusterplan("validate", "training-runs", str(path), "--json", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    skipped = json.loads(out.stdout)["summary"]["skipped"]
    assert [s["row"] for s in skipped] == [1, 2, 3, 4]
    reasons = " | ".join(s["reason"] for s in skipped)
    assert "unknown metric" in reasons and "not a number" in reasons and "unknown gpu" in reasons
    assert "heads (24) not divisible by tp (5)" in reasons
    table = clusterplan("validate", "training-runs", str(path), tmp_path=tmp_path)
    assert "skipped" in table.stdout
    # the evaluated rows also get the fit check: runs that ran, predicted over HBM
    assert re.search(r"ran, predicted OOM: \d+ of \d+ measured runs", table.stdout)


def test_wrong_columns_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    out = clusterplan("validate", "training-runs", str(path), tmp_path=tmp_path)
    assert out.returncode == 2 and "missing columns" in out.stderr and "Traceback" not in out.stderr


def test_plot_is_written(tmp_path: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(RUNS.read_text())))
    picked = [r for r in rows if r["measured_metric"] in ("iter_time_s", "mem_gib_per_gpu")][:4]
    path = tmp_path / "few.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(picked)
    png = tmp_path / "plot.png"
    out = clusterplan("validate", "training-runs", str(path), "--plot", str(png), tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "time-like metrics: n=" in out.stdout


def test_korthikanti_layer_times_with_the_asynchronous_tp_backward(report: dict) -> None:
    # Korthikanti et al. 2022 Table 4 (one GPT-22B layer, tp 8, b 4): with the column-parallel input-gradient
    # collectives hidden behind the gradient GEMMs every configuration is within ±5 % (was +4 … +8.5 %)
    rows = [r for r in report["rows"] if r["metric"] == "layer_fwd_plus_bwd_ms"]
    assert len(rows) == 5
    assert all(abs(r["error_pct"]) <= 5.0 for r in rows)
