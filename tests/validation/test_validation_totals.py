"""`clusterplan validate training-totals`: published whole-run GPU-hours against the planner's headline."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.core.accuracy import BAND_PERCENTILES
from app.validation.training_totals import (
    COLUMNS,
    OPTIMISTIC_PCT,
    UNSTATED_COUNTS,
    TotalsReport,
    load_rows,
    parse_layout,
    render_table,
    replay,
)
from tests.paths import DATA_DIR, ROOT

TOTALS = DATA_DIR / "training_totals.csv"
DOCS = ROOT / "docs" / "validation.md"


def clusterplan(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLUSTERPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def report() -> TotalsReport:
    return replay(load_rows(TOTALS))


def _row(model: str) -> dict[str, str]:
    with open(TOTALS, newline="", encoding="utf-8") as fh:
        return next(r for r in csv.DictReader(fh) if r["model_name"] == model)


def _write(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    path = tmp_path / "totals.csv"
    header = [*COLUMNS, "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in header})
    return path


def test_published_figures_are_the_papers() -> None:
    # Touvron et al. 2023 (Llama 2, arXiv 2307.09288) Table 2 and Table 1
    llama2 = _row("Llama-2-70B")
    assert float(llama2["reported_gpu_hours"]) == 1_720_320
    assert float(llama2["tokens_T"]) == 2.0 and llama2["gpu"].startswith("A100-80GB")
    assert "Table 2" in llama2["source"]
    # LLaMA (arXiv 2302.13971) Table 15; its Sec. 2.4 throughput gives the same total: 1.4T / 380 tok/s/GPU
    llama65 = _row("LLaMA-65B")
    assert float(llama65["reported_gpu_hours"]) == 1_022_362
    assert pytest.approx(1_022_362, rel=0.002) == 1.4e12 / 380 / 3600
    assert llama65["includes_overheads"] == "no"
    # DeepSeek-V3 technical report Table 1 and its 180K GPU-hours per trillion tokens
    dsv3 = _row("DeepSeek-V3")
    assert float(dsv3["reported_gpu_hours"]) == 2_664_000 == pytest.approx(180_000 * 14.8)
    # TinyLlama README: 3,456 A100 GPU-hours on 300B tokens at 24k tokens/s per GPU, 56 % MFU
    tiny = _row("TinyLlama-1.1B")
    assert float(tiny["reported_gpu_hours"]) == 3456 and float(tiny["reported_mfu_pct"]) == 56
    assert pytest.approx(3456, rel=0.005) == 0.3e12 / 24_000 / 3600
    # SmolLM3 (huggingface/smollm text/pretraining): 384 H100 for 24 days; stage1_8T.yaml's dp 192 x micro-batch 3 x
    # 4,096 tokens is the README's 2.36M-token batch, and its 4,720,000 steps of it the 11.2T tokens
    smol = _row("SmolLM3-3B")
    assert float(smol["reported_gpu_hours"]) == 384 * 24 * 24 and smol["includes_overheads"] == "yes"
    assert int(smol["global_batch_tokens"]) == 192 * 3 * 4096 == 2_359_296
    assert pytest.approx(float(smol["tokens_T"]), rel=0.01) == 4_720_000 * 2_359_296 / 1e12
    assert parse_layout(smol["layout_stated"])["dp"] == "192"


def test_every_row_is_sourced_and_well_formed() -> None:
    rows = load_rows(TOTALS)
    assert len(rows) >= 12
    for row in rows:
        assert row.get("source"), row.index
        assert row.get("includes_overheads") in ("yes", "no", "unknown"), row.index
        assert float(row.get("reported_gpu_hours")) > 0
        if row.get("layout_stated"):
            assert parse_layout(row.get("layout_stated"))


def test_a_row_is_evaluated_with_the_sign_convention(report: TotalsReport) -> None:
    llama65 = next(r for r in report.rows if r.model_name == "LLaMA-65B")
    assert llama65.skipped is None
    assert llama65.best_gpu_hours is not None and math.isfinite(llama65.best_gpu_hours)
    assert llama65.best_layout and 0 < (llama65.best_mfu_pct or 0) < 100
    # the reported figure excludes failures, so it is compared with the compute hours
    assert llama65.compared_with == "compute"
    assert llama65.best_gpu_hours == llama65.best_compute_gpu_hours
    assert llama65.error_pct == pytest.approx(100 * (llama65.best_gpu_hours / 1_022_362 - 1))
    # a run whose hours include its failures is compared with the wall-clock hours: goodput below 1 adds hours
    bloom = next(r for r in report.rows if r.model_name == "BLOOM-176B")
    assert bloom.compared_with == "wall-clock" and bloom.goodput is not None and 0.5 < bloom.goodput < 1
    assert bloom.best_gpu_hours == pytest.approx((bloom.best_compute_gpu_hours or 0) / bloom.goodput)
    assert bloom.stated_layout == "tp=4 pp=12 dp=8 zero=1 mb=2 recompute=full"
    assert bloom.stated_gpu_hours is not None and bloom.stated_gpu_hours > 0


@pytest.mark.parametrize("model", ["LLaMA-65B", "StarCoderBase (GPT-BigCode 15.5B)"])
def test_runs_whose_source_names_the_framework_replay_under_it(report: TotalsReport, model: str) -> None:
    """LLaMA (Sec. 2.4) and StarCoder (Sec. 5.6) ran Megatron-LM-2022-style code with flash attention: their
    rule is that preset, and the planner's best is no layout it lacked (ZeRO-2/3, context parallelism)."""
    from app.validation.training_runs import Row, rule_for_row

    rule = rule_for_row(Row(1, {"source": _row(model)["source"], "gpu": "A100-80GB"}))
    assert rule.framework.name == "megatron-2022" and rule.flash_attention
    result = next(r for r in report.rows if r.model_name == model)
    assert result.best_layout and result.skipped is None
    assert not re.search(r"ZeRO-[23]|\bCP\d", result.best_layout)


def test_starcoders_stated_layout_runs_without_interleaving(report: TotalsReport) -> None:
    # BigCode's Megatron-LM fork interleaved only with --num-layers-per-virtual-pipeline-stage, which Sec. 5.6 does
    # not name: the stated TP4 PP4 runs plain 1F1B, with the distributed optimizer the paper names
    starcoder = next(r for r in report.rows if r.model_name.startswith("StarCoderBase"))
    assert "vp=1" in starcoder.stated_defaults
    assert not any(d.startswith("vp=") and "imputed" in d for d in starcoder.stated_defaults)
    assert starcoder.stated_layout == "tp=4 pp=4 dp=32 mb=1 zero=1"


def test_summary_counts_optimistic_rows(report: TotalsReport) -> None:
    s = report.summary()
    done = [r for r in report.rows if r.skipped is None and r.error_pct is not None]
    ranged = [r for r in report.rows if r.skipped is None and r.range_counts]
    assert s["n"] == len(done) >= 4 and s["range_n"] == len(ranged) >= 9
    assert s["skipped"] == len(report.rows) - len(done) - len(ranged)
    assert s["optimistic"] == sum(1 for r in done if (r.error_pct or 0) < -OPTIMISTIC_PCT)
    assert s["max_abs_pct"] == max(abs(r.error_pct or 0) for r in done)


def test_each_run_is_checked_against_the_band_the_planner_quotes(report: TotalsReport) -> None:
    """The step-time band of the best layout's kind of run, applied to its GPU-hours (GPU-hours scale with step time
    at a fixed count and goodput); and the time-to-train range (that band widened by the other whole runs)."""
    done = [r for r in report.rows if r.skipped is None and r.error_pct is not None]
    for r in done:
        assert r.band_regime is not None and r.band_ratio_low is not None and r.band_ratio_high is not None
        assert r.likely_low_gpu_hours == pytest.approx(r.best_gpu_hours * r.band_ratio_low)
        assert r.likely_high_gpu_hours == pytest.approx(r.best_gpu_hours * r.band_ratio_high)
        assert r.in_band == (r.likely_low_gpu_hours <= r.reported_gpu_hours <= r.likely_high_gpu_hours)
    s = report.summary()
    assert s["band_n"] == len(done) and s["in_band"] == sum(1 for r in done if r.in_band)
    # leave one out, by hand: the range from the other runs' ratios, widened around each run's step band
    ratios = [r.reported_gpu_hours / r.best_gpu_hours for r in done]
    inside = 0
    for i, r in enumerate(done):
        low, high = np.percentile(ratios[:i] + ratios[i + 1 :], BAND_PERCENTILES)
        low, high = min(low, r.band_ratio_low), max(high, r.band_ratio_high)
        inside += low - 1e-4 <= ratios[i] <= high + 1e-4
    assert s["in_totals_range_loo"] == inside
    # widening by whole runs covers at least what the step band alone does
    assert s["in_band"] <= s["in_totals_range_loo"] <= s["band_n"]
    assert "leave one out" in render_table(report)


def test_doubling_the_reported_hours_makes_the_prediction_optimistic(tmp_path: Path) -> None:
    row = _row("LLaMA-65B")
    doubled = {**row, "reported_gpu_hours": str(2 * float(row["reported_gpu_hours"]))}
    base, more = replay(load_rows(_write(tmp_path, [row, doubled]))).rows
    assert base.best_gpu_hours == pytest.approx(more.best_gpu_hours)
    assert (more.error_pct or 0) < -45 and (more.error_pct or 0) < (base.error_pct or 0)


def test_rows_that_cannot_be_evaluated_are_skipped_with_the_reason(tmp_path: Path) -> None:
    good = _row("LLaMA-65B")
    no_shape = {**good, "model_name": "Mystery-9B", "layers": "", "hidden": "", "heads": "", "vocab": ""}
    bad_layout = {**good, "layout_stated": "tp=8 pipeline=4"}
    bad_overheads = {**good, "includes_overheads": "maybe"}
    rows = replay(load_rows(_write(tmp_path, [no_shape, bad_layout, bad_overheads]))).rows
    assert all(r.error_pct is None for r in rows)
    assert "not in the catalog and its shape columns are blank: layers, hidden, heads, vocab" in (
        rows[0].skipped or ""
    )
    assert "layout_stated" in (rows[1].skipped or "") and "pipeline=4" in (rows[1].skipped or "")
    assert "includes_overheads" in (rows[2].skipped or "")


def test_a_run_without_its_gpu_count_is_a_range_outside_the_mape(tmp_path: Path) -> None:
    """LLaMA-65B without its 2,048: evaluated at every count of UNSTATED_COUNTS a layout fits, one of them the stated
    count, so the stated row's prediction lies inside the range; it stays out of the MAPE and is optimistic only
    if every count is."""
    good = _row("LLaMA-65B")
    report = replay(load_rows(_write(tmp_path, [good, {**good, "num_gpus": ""}])))
    stated, ranged = report.rows
    assert ranged.skipped is None and ranged.error_pct is None and ranged.best_gpu_hours is None
    assert ranged.range_counts == list(UNSTATED_COUNTS)
    assert len(ranged.range_gpu_hours) == len(ranged.range_error_pct) == len(UNSTATED_COUNTS)
    at_2048 = ranged.range_gpu_hours[UNSTATED_COUNTS.index(2048)]
    assert at_2048 == pytest.approx(stated.best_gpu_hours, rel=1e-9)
    for hours, error in zip(ranged.range_gpu_hours, ranged.range_error_pct, strict=True):
        assert error == pytest.approx(100 * (hours / float(good["reported_gpu_hours"]) - 1))
    s = report.summary()
    assert s["n"] == 1 and s["range_n"] == 1 and s["skipped"] == 0
    assert s["range_optimistic"] == int(max(ranged.range_error_pct) < -OPTIMISTIC_PCT)
    assert "count not stated" in render_table(report)


def test_json_is_valid_with_the_summary_fields(tmp_path: Path) -> None:
    out = clusterplan("validate", "training-totals", str(TOTALS), "--json", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) == {"rows", "summary"}
    assert {"n", "mape_pct", "max_abs_pct", "optimistic", "skipped"} <= set(doc["summary"])
    assert doc["summary"]["n"] + doc["summary"]["range_n"] + doc["summary"]["skipped"] == len(doc["rows"])
    assert all("skipped" in r and "error_pct" in r for r in doc["rows"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "file not found"),
        ("a,b\n1,2\n", "missing columns"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "input.csv"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    out = clusterplan("validate", "training-totals", str(path), tmp_path=tmp_path)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in out.stderr


def test_the_docs_quote_the_current_summary(report: TotalsReport) -> None:
    """docs/validation.md's whole-run figures are this replay's; regenerate them with
    `clusterplan validate training-totals tests/data/training_totals.csv` after any change to the estimator."""
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    quoted = re.search(
        r"Summary \(`--json`\): n = (\d+), MAPE ([\d.]+) %, max \|error\| ([\d.]+) %, mean error ([+−-][\d.]+) %, "
        r"optimistic \(more than 10 % low\) (\d+) of \d+, skipped (\d+)\.",
        text,
    )
    assert quoted, "docs/validation.md lost its whole-run summary line"
    s = report.summary()
    assert int(quoted.group(1)) == s["n"]
    assert float(quoted.group(2)) == pytest.approx(s["mape_pct"], abs=0.051)
    assert float(quoted.group(3)) == pytest.approx(s["max_abs_pct"], abs=0.051)
    assert float(quoted.group(4).replace("−", "-")) == pytest.approx(s["mean_error_pct"], abs=0.051)
    assert (int(quoted.group(5)), int(quoted.group(6))) == (s["optimistic"], s["skipped"])


def _docs_rows(header: str) -> list[list[str]]:
    """The cells of the docs/validation.md table whose header row starts with `header`."""
    lines = DOCS.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def _pct(text: str) -> float:
    return float(text.replace("*", "").replace("−", "-").replace("%", "").strip())


def test_the_docs_per_run_tables_are_this_replay_s(report: TotalsReport) -> None:
    """Each whole run's quoted GPU-hours and error, and each unstated-count range, are what the replay gives now
    (regenerate with `clusterplan validate training-totals tests/data/training_totals.csv`)."""
    by_hours = {round(r.reported_gpu_hours or 0): r for r in report.rows if r.skipped is None}
    stated = _docs_rows("| run | GPUs | reported GPU-h | planner's best |")
    assert len(stated) >= 12
    for cells in stated:
        r = by_hours[int(cells[2].replace(",", ""))]
        assert int(cells[3].replace(",", "")) == round(r.best_gpu_hours), cells[0]
        assert _pct(cells[4]) == pytest.approx(r.error_pct, abs=0.051), cells[0]
    ranges = _docs_rows("| run | reported GPU-h | planner's best, 256–4,096 GPUs |")
    assert len(ranges) == report.summary()["range_n"]
    for cells in ranges:
        r = by_hours[int(cells[1].replace(",", ""))]
        low, high = (int(x.replace(",", "")) for x in cells[2].split("–"))
        assert (low, high) == (round(min(r.range_gpu_hours)), round(max(r.range_gpu_hours))), cells[0]
        lo_err, hi_err = (_pct(x) for x in cells[3].split("…"))
        assert lo_err == pytest.approx(min(r.range_error_pct), abs=0.051), cells[0]
        assert hi_err == pytest.approx(max(r.range_error_pct), abs=0.051), cells[0]


def test_the_docs_quote_the_figures_without_fail_slows_as_the_replay_gives_them() -> None:
    """docs/validation.md and docs/constants.md state what the whole runs give with failures, checkpoints and
    restarts alone (`--fail-slow 1`) and at the fleet mean of only the jobs a fail-slow hit (1.20x): both are
    this replay's, so the fail-slow term's effect is never quoted from memory."""
    rows = load_rows(TOTALS)
    alone = replay(rows, fail_slow=1.0).summary()
    assert (round(alone["mape_pct"], 1), round(alone["mean_error_pct"], 1), alone["optimistic"]) == (
        21.9,
        -20.5,
        9,
    )
    fleet = replay(rows, fail_slow=1.205).summary()
    assert (round(fleet["mape_pct"], 1), fleet["optimistic"]) == (12.8, 5)
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    assert (
        "Without the fail-slow term (every figure below it as it was before, `--fail-slow 1`): MAPE 21.9 %"
        in text
    )
    constants = " ".join((DOCS.parent / "constants.md").read_text(encoding="utf-8").split())
    assert "whole runs MAPE 12.8 % and 5 of 12 more than 10 % low" in constants
