"""Accuracy bands: every estimate says how far published runs of its kind were from their estimates.

The committed table (app/catalog/accuracy.json) must be what replaying the published runs gives with the model as
it is now, so a change to the estimator that moves the errors also has to refresh the bands.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.catalog import ACCURACY_FILE, accuracy_table, find_model
from app.core.accuracy import (
    LONG_CONTEXT_TOKENS,
    MIN_UNSEEN_RUNS,
    MOE_LIGHT_LAYER_PASS_S,
    AccuracyBand,
    accuracy_regime,
    applied_memory,
    band_for,
    layer_pass_seconds,
    memory_band,
    ratio_from_speed_error,
    ratio_stats,
    totals_band,
)
from app.validation.accuracy import build_table, dumps
from app.web.pages._builder import BuilderState
from tests.cli_support import clusterplan
from tests.paths import DATA_DIR, ROOT

DATA = DATA_DIR
DEVELOPMENT = [DATA / "training_runs.csv"]
UNSEEN = [
    DATA / "training_runs_heldout.csv",
    DATA / "training_runs_final_check.csv",
    DATA / "training_runs_nemo_long_context_2504.csv",
    DATA / "training_runs_torchtitan_202506_async_tp.csv",
]
COMPARISONS = [DATA / "training_runs_vtrain_multi.csv"]  # layout comparisons only (ranking resolution)
WHOLE_RUNS = [DATA / "training_totals.csv"]  # whole pre-training runs (the time-to-train range)
COLLECTIVES = [DATA / "network" / "collectives.csv"]  # the collective model's development rows
COLLECTIVES_HELDOUT = [
    DATA / "network" / "collectives_heldout.csv",
    DATA / "network" / "collectives_heldout_sweeps.csv",
    DATA / "network" / "collectives_heldout_azure.csv",
]
HX = {"HX-Request": "true"}


def test_committed_table_is_what_the_replay_gives_now() -> None:
    fresh = build_table(DEVELOPMENT, UNSEEN, COMPARISONS, WHOLE_RUNS, COLLECTIVES, COLLECTIVES_HELDOUT)
    committed = json.loads(ACCURACY_FILE.read_text(encoding="utf-8"))
    assert fresh == committed, (
        "app/catalog/accuracy.json is stale: run `clusterplan validate accuracy "
        "tests/data/training_runs_heldout.csv tests/data/training_runs_final_check.csv "
        "tests/data/training_runs_nemo_long_context_2504.csv tests/data/training_runs_torchtitan_202506_async_tp.csv "
        "--development tests/data/training_runs.csv --comparisons tests/data/training_runs_vtrain_multi.csv "
        "--whole-runs tests/data/training_totals.csv --collectives tests/data/network/collectives.csv "
        "--collectives-heldout tests/data/network/collectives_heldout.csv "
        "--collectives-heldout tests/data/network/collectives_heldout_sweeps.csv "
        "--collectives-heldout tests/data/network/collectives_heldout_azure.csv --write`"
    )
    # the collective bands rest on the held-out rows, each regime with enough of them
    collectives = committed["collectives"]
    assert set(collectives["regimes"]) == {
        "scale-up-small",
        "scale-up-large",
        "scale-out-small",
        "scale-out-large",
    }
    assert collectives["files"]["unseen"] == [p.name for p in COLLECTIVES_HELDOUT]
    for name, record in collectives["regimes"].items():
        assert record["basis"] == "outside the development set", name
        assert record["ratio_low"] <= record["ratio_median"] <= record["ratio_high"], name
    # every regime is backed by runs outside the development set, or says it pooled the development set's, and
    # the table says which files
    assert set(committed["regimes"]) == {
        "dense",
        "dense-long-context",
        "moe",
        "moe-light",
        "moe-light-hybridep",
        "moe-long-context",
    }
    for name, record in committed["regimes"].items():
        if record["unseen"]["runs"] >= MIN_UNSEEN_RUNS:
            assert record["basis"] == "outside the development set", name
        else:
            assert record["basis"].startswith("pooled with the development set"), name
        assert record["ratio_min"] <= record["ratio_low"] <= record["ratio_median"]
        assert record["ratio_median"] <= record["ratio_high"] <= record["ratio_max"]
    assert committed["regimes"]["moe-long-context"]["unseen"]["runs"] == 4
    assert [s["file"] for s in committed["sources"]["unseen"]] == [p.name for p in UNSEEN]
    assert dumps(fresh) == ACCURACY_FILE.read_text(encoding="utf-8")


def test_regimes_follow_the_model_and_the_sequence() -> None:
    dense, moe = find_model("Llama-3.1-8B"), find_model("Mixtral-8x7B")
    assert accuracy_regime(dense, 8192) == "dense"
    assert accuracy_regime(dense, LONG_CONTEXT_TOKENS) == "dense"
    assert accuracy_regime(dense, LONG_CONTEXT_TOKENS + 1) == "dense-long-context"
    assert accuracy_regime(moe, 4096) == "moe"
    # a long-context MoE step is attention-bound like a dense one, whatever its layer pass
    assert accuracy_regime(moe, 131072) == "moe-long-context"
    assert accuracy_regime(moe, 131072, MOE_LIGHT_LAYER_PASS_S * 0.5) == "moe-long-context"
    assert accuracy_regime(moe, LONG_CONTEXT_TOKENS) == "moe"
    # MoE estimates split by their GPU work per layer pass (unknown → "moe")
    assert accuracy_regime(moe, 4096, MOE_LIGHT_LAYER_PASS_S * 0.99) == "moe-light"
    # a light pass on HybridEP has its own band; DeepEP's runs scatter like alltoall's and share theirs
    assert accuracy_regime(moe, 4096, MOE_LIGHT_LAYER_PASS_S * 0.99, "hybridep") == "moe-light-hybridep"
    assert accuracy_regime(moe, 4096, MOE_LIGHT_LAYER_PASS_S * 0.99, "deepep") == "moe-light"
    assert accuracy_regime(moe, 4096, MOE_LIGHT_LAYER_PASS_S, "hybridep") == "moe"
    assert accuracy_regime(moe, 131072, MOE_LIGHT_LAYER_PASS_S * 0.5, "hybridep") == "moe-long-context"
    assert accuracy_regime(moe, 4096, MOE_LIGHT_LAYER_PASS_S) == "moe"
    assert accuracy_regime(dense, 4096, 0.001) == "dense"


def test_layer_pass_is_the_layers_gpu_work_per_micro_batch_and_layer() -> None:
    breakdown = {
        "forward_compute": 1.0,
        "backward_compute": 2.0,
        "recompute": 0.5,
        "tp_comm": 0.2,
        "cp_comm": 0.1,
        "ep_comm": 0.2,
        # not work of the layers: bubble, DP traffic, optimizer
        "pipeline_bubble": 9.0,
        "dp_comm": 9.0,
        "optimizer": 9.0,
    }
    # 4.0 s of layer work over 10 layers per stage × 8 micro-batches
    assert layer_pass_seconds(breakdown, 10, 8) == pytest.approx(4.0 / 80)


def test_light_moe_runs_scatter_wider_than_heavy_ones() -> None:
    regimes = accuracy_table()["regimes"]
    light, heavy = regimes["moe-light"], regimes["moe"]
    # host-bound passes: published runs took up to several times their estimate; heavy passes stay near it
    assert light["ratio_high"] > 1.5 > heavy["ratio_high"]
    assert light["mape_pct"] > 2 * heavy["mape_pct"]
    # light passes on HybridEP recipes (CUDA graphs of the router and dispatch) stay near their estimates
    hybridep = regimes["moe-light-hybridep"]
    assert hybridep["runs"] >= MIN_UNSEEN_RUNS and hybridep["ratio_high"] < 1.2 < light["ratio_high"]


def test_ratio_statistics_by_hand() -> None:
    # a run estimated 25 % too fast took 1.25× the estimate; one estimated 20 % too slow, 0.8×
    assert ratio_from_speed_error(25.0) == pytest.approx(1.25)
    assert ratio_from_speed_error(-20.0) == pytest.approx(0.8)
    ratios = [0.8, 0.9, 1.0, 1.1, 1.25, 2.0]
    stats = ratio_stats(ratios)
    assert stats["runs"] == 6
    assert stats["mape_pct"] == pytest.approx((0.2 + 0.1 + 0 + 0.1 + 0.25 + 1.0) / 6 * 100, abs=0.01)
    assert stats["ratio_median"] == pytest.approx(1.05)
    assert stats["ratio_low"] == pytest.approx(float(np.percentile(ratios, 10)), abs=1e-4)
    assert stats["ratio_high"] == pytest.approx(0.5 * 1.25 + 0.5 * 2.0, abs=1e-4)  # p90 of 6 points
    assert (stats["ratio_min"], stats["ratio_max"]) == (0.8, 2.0)
    # non-finite or non-positive ratios (a failed replay) are not counted
    assert ratio_stats([float("nan"), 0.0, -1.0])["runs"] == 0
    assert ratio_stats([float("nan"), 1.1])["runs"] == 1


def test_a_band_turns_into_ranges_around_an_estimate() -> None:
    table = {
        "regimes": {
            "dense": {
                "runs": 10,
                "mape_pct": 8.0,
                "ratio_low": 0.9,
                "ratio_median": 1.0,
                "ratio_high": 1.2,
                "ratio_min": 0.8,
                "ratio_max": 1.5,
                "basis": "outside the development set",
                "development": {"runs": 3, "mape_pct": 4.0},
            }
        }
    }
    dense = find_model("Llama-3.1-8B")
    band = band_for(table, dense, 4096)
    assert isinstance(band, AccuracyBand)
    out = band.applied(10.0, 1000.0)
    assert out["step_time_range_s"] == pytest.approx([9.0, 12.0])
    assert out["tokens_per_s_range"] == pytest.approx([1000 / 1.2, 1000 / 0.9])
    assert (
        "Of 10 published runs" in out["summary"] and "-10 %" in out["summary"] and "+20 %" in out["summary"]
    )
    assert "the median run took as long as estimated" in out["summary"]
    # a regime whose runs mostly took longer (or less) than estimated says where its middle lies
    assert "the median run took 27 % longer than estimated" in replace(band, ratio_median=1.27).summary()
    assert "the median run took 4 % less than estimated" in replace(band, ratio_median=0.96).summary()
    # a regime the table has no runs for gives no band rather than a made-up one
    assert band_for(table, find_model("Mixtral-8x7B"), 4096) is None
    assert band_for({}, dense, 4096) is None


def test_estimate_api_and_cli_report_the_band(client: Any, tmp_path: Path) -> None:
    body = json.loads((ROOT / "examples" / "mixtral-8x7b-64xh100.json").read_text())
    out = client.post("/api/v1/estimate", json=body).json()
    acc, step = out["accuracy"], out["step"]
    layout = out["layout"]
    layers = find_model("Mixtral-8x7B").num_layers / layout["pp"]
    microbatches = layout["global_batch"] // (layout["dp"] * layout["micro_batch"])
    light = layer_pass_seconds(step["breakdown_s"], layers, microbatches) < MOE_LIGHT_LAYER_PASS_S
    regime = "moe-light" if light else "moe"
    record = accuracy_table()["regimes"][regime]
    assert acc["regime"] == regime and acc["runs"] == record["runs"]
    assert acc["step_time_range_s"] == pytest.approx(
        [step["total_s"] * record["ratio_low"], step["total_s"] * record["ratio_high"]]
    )
    assert acc["tokens_per_s_range"] == pytest.approx(
        [step["tokens_per_s"] / record["ratio_high"], step["tokens_per_s"] / record["ratio_low"]]
    )
    run = clusterplan("estimate", str(ROOT / "examples" / "mixtral-8x7b-64xh100.json"), tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    text = run.stdout
    assert f"accuracy ({regime}): step time likely" in text
    assert f"Of {record['runs']} published runs of this kind" in text
    # the time to train takes the step band widened by whole published runs (totals_band), as the builder does
    totals = totals_band(accuracy_table(), record["ratio_low"], record["ratio_high"])
    assert (acc["time_to_train_ratio_low"], acc["time_to_train_ratio_high"]) == pytest.approx(
        (totals.ratio_low, totals.ratio_high)
    )
    assert acc["time_to_train_summary"] == totals.summary()
    compute_s = out["time_to_train_s"]
    assert compute_s and acc["time_to_train_range_s"] == pytest.approx(
        [compute_s * totals.ratio_low, compute_s * totals.ratio_high]
    )
    assert "time to train likely" in text and totals.summary() in text
    # without a token budget there is no time to train, and no range for it
    no_tokens = {**body, "training": {k: v for k, v in body["training"].items() if k != "tokens"}}
    quiet = client.post("/api/v1/estimate", json=no_tokens).json()
    assert quiet["time_to_train_s"] is None and quiet["accuracy"]["time_to_train_range_s"] is None
    assert quiet["accuracy"]["time_to_train_ratio_high"] == pytest.approx(totals.ratio_high)


def test_builder_shows_the_likely_step_time(client: Any) -> None:
    html = client.get(f"/plans/new?{BuilderState(nodes=4).query()}", headers=HX).text
    assert 'class="range"' in html and "likely" in html
    # the time to train and the GPU-hours scale with the step time, so they get the same band
    assert re.search(r"likely [\d.,]+–[\d.,]+ days", html) and re.search(
        r"likely [\d.,]+–[\d.,]+ GPU·h", html
    )
    # on the wall clock and the bill too: the figures a budget is built on
    wall = re.search(
        r"<dt>Wall-clock time</dt><dd[^>]*>([\d.,]+) days <span class=\"range\"[^>]*>likely ([\d.,]+)–", html
    )
    cost = re.search(
        r"<dt>Cost per run</dt><dd[^>]*>([\d.,]+) USD <span class=\"range\" id=\"cost-likely\"", html
    )
    assert wall and cost and float(wall.group(2)) < float(wall.group(1))
    assert 'id="accuracy-note"' in html and "published runs of this kind" in html


def test_accuracy_cli_prints_and_refuses_missing_files(tmp_path: Path) -> None:
    missing = clusterplan("validate", "accuracy", str(tmp_path / "nope.csv"), tmp_path=tmp_path)
    assert missing.returncode == 2 and "file not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    small = tmp_path / "few.csv"
    lines = (DATA / "training_runs_heldout.csv").read_text(encoding="utf-8").splitlines()
    small.write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    result = clusterplan("validate", "accuracy", str(small), "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    table = json.loads(result.stdout)
    # three unseen rows are too few for a band of their own: pooled with (here absent) development runs
    assert all(r["basis"].startswith("pooled with the development set") for r in table["regimes"].values())
    assert json.loads(ACCURACY_FILE.read_text(encoding="utf-8")) != table  # --write was not given


def test_the_validation_report_quotes_the_committed_bands() -> None:
    doc = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    table = accuracy_table()
    for record in [*table["regimes"].values(), table["memory"], table["whole_runs"]]:
        row = (
            f"| {record['runs']} | {record['mape_pct']:.1f} % | {record['ratio_low']:.2f}–"
            f"{record['ratio_high']:.2f} ×"
        )
        assert row in doc, f"docs/validation.md does not quote the band: {row}"
    ranking = table["ranking"]
    for record in [*ranking["regimes"].values(), ranking["all"]]:
        row = f"| {record['median_pct']:.1f} % | ±{record['resolution_pct']:.1f} % | {record['max_pct']:.0f} % |"
        assert row in doc, f"docs/validation.md does not quote the ranking resolution: {row}"


def _search_request(example: str, **extra: Any) -> dict[str, Any]:
    """A layout-search request for an example scenario: its model, cluster, training and global batch."""
    body = json.loads((ROOT / "examples" / example).read_text())
    request = {key: body[key] for key in ("model", "cluster", "training")}
    return {**request, "global_batch": body["layout"]["global_batch"], **extra}


def test_planner_reports_the_band_of_its_best_layout(client: Any) -> None:
    request = _search_request("llama3-70b-64xh100.json")
    r = client.post("/api/v1/plan", json=request)
    assert r.status_code == 200, r.text
    out = r.json()
    record = accuracy_table()["regimes"]["dense"]
    assert out["accuracy"]["regime"] == "dense"
    assert out["accuracy"]["step_time_range_s"] == pytest.approx(
        [out["best"]["step_time_s"] * record["ratio_low"], out["best"]["step_time_s"] * record["ratio_high"]]
    )


def test_memory_band_and_the_worst_case_fit() -> None:
    table = accuracy_table()
    record = table["memory"]
    # 14 development readings and 2 outside it: pooled, and said so
    assert record["runs"] == record["unseen"]["runs"] + record["development"]["runs"]
    assert record["basis"] == "pooled with the development set, too few outside it"
    band = memory_band(table)
    assert band is not None and band.ratio_low <= 1.0 <= band.ratio_high <= band.ratio_max
    gib = 1024**3
    roomy = applied_memory(band, 60 * gib, 80 * gib)
    assert roomy["peak_range_bytes"] == pytest.approx([60 * gib * band.ratio_low, 60 * gib * band.ratio_high])
    assert roomy["fits_at_worst"] is True
    # a peak that fits under the safety margin but not once the largest published miss is added
    edge = 80 * gib / band.ratio_max * 1.01
    assert applied_memory(band, edge, 80 * gib)["fits_at_worst"] is False
    assert memory_band({}) is None


def test_estimate_reports_the_memory_band(client: Any) -> None:
    body = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    out = client.post("/api/v1/estimate", json=body).json()
    mem, record = out["memory_accuracy"], accuracy_table()["memory"]
    assert mem["peak_range_bytes"] == pytest.approx(
        [
            out["memory"]["peak_bytes"] * record["ratio_low"],
            out["memory"]["peak_bytes"] * record["ratio_high"],
        ]
    )
    assert mem["fits_at_worst"] == (
        out["memory"]["peak_bytes"] * record["ratio_max"] <= out["memory"]["hbm_bytes"]
    )
    html = client.get(f"/plans/new?{BuilderState(nodes=4).query()}", headers=HX).text
    assert re.search(r"likely [\d.,]+–[\d.,]+ GiB", html) and "peak-memory readings" in html


def test_time_to_train_and_gpu_hours_take_the_step_band_widened_by_whole_runs() -> None:
    from app.services.estimate import parse_scenario, run
    from app.services.planning import accuracy_view, summarise

    body = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    resolved, est = run(parse_scenario(body))
    summary = summarise(resolved, est)
    fields, notes, ratios = accuracy_view(est, summary)
    table = accuracy_table()
    record, whole = table["regimes"]["dense"], table["whole_runs"]
    # whole published runs took up to 1.4x the planner's prediction, more than the dense step band's high end
    assert whole["runs"] >= MIN_UNSEEN_RUNS and whole["ratio_high"] > record["ratio_high"]
    low, high = min(record["ratio_low"], whole["ratio_low"]), max(record["ratio_high"], whole["ratio_high"])
    for key, digits in (("time_to_train_days", 3), ("gpu_hours", 1)):
        assert fields[f"{key}_likely_low"] == pytest.approx(summary[key] * low, abs=10**-digits)
        assert fields[f"{key}_likely_high"] == pytest.approx(summary[key] * high, abs=10**-digits)
    assert ratios == (pytest.approx(low), pytest.approx(high))
    # the step time keeps its own band
    assert fields["step_time_likely_high_s"] == pytest.approx(
        summary["step_time_s"] * record["ratio_high"], rel=1e-5
    )
    assert set(notes) == {"step", "totals", "memory"}
    assert f"{whole['runs']} whole published pre-training runs" in notes["totals"]
    # and it says how long the typical run took against the prediction (said, not applied)
    typical = (whole["ratio_median"] - 1) * 100
    more = "more" if typical >= 0 else "fewer"
    assert f"the median run took {abs(typical):.0f} % {more} GPU-hours than predicted" in notes["totals"]
    # without a token budget there is no time to train, and so no range for it
    fields, _, _ = accuracy_view(est, {**summary, "time_to_train_days": None, "gpu_hours": None})
    assert "time_to_train_days_likely_low" not in fields and "gpu_hours_likely_high" not in fields


def test_builder_marks_a_layout_that_fits_only_without_the_largest_memory_miss(client: Any) -> None:
    record = accuracy_table()["memory"]
    # Llama-3-8B on 16 H100 at micro-batch 4: 74 GiB of the 76 GiB usable, so it fits, but not once the
    # largest published memory miss (+12 %) is added; at micro-batch 2 it has room for that
    tight = client.get(f"/plans/new?{BuilderState(nodes=2, micro_batch=4).query()}", headers=HX).text
    roomy = client.get(f"/plans/new?{BuilderState(nodes=2, micro_batch=2).query()}", headers=HX).text
    peak = float(re.search(r'class="num">([\d.,]+) GiB</span>', tight).group(1))  # type: ignore[union-attr]
    assert peak <= 76.0 < peak * record["ratio_max"]
    assert 'class="tight"' in tight and "largest published miss would not fit" in tight
    assert 'class="tight"' not in roomy


def test_moe_size_sweep_quotes_each_points_own_band(client: Any) -> None:
    body = {
        "model": "Qwen3-30B-A3B",
        "cluster": {"gpu": "B200", "nodes": 1},
        "training": {"seq_len": 4096, "tokens": 1e11},
        "global_batch": 256,
        "sizes": [8, 64],
        "usd_per_gpu_hour": 4.0,
    }
    r = client.post("/api/v1/plan/sizes", json=body)
    assert r.status_code == 200, r.text
    d = r.json()
    regimes = accuracy_table()["regimes"]
    seen = set()
    for point in d["points"]:
        if not point["feasible"]:
            continue
        best = point["best"]
        layers = find_model("Qwen3-30B-A3B").num_layers / best["layout"]["pp"]
        light = (
            layer_pass_seconds(best["step_breakdown_s"], layers, best["num_microbatches"])
            < MOE_LIGHT_LAYER_PASS_S
        )
        assert point["accuracy_regime"] == ("moe-light" if light else "moe")
        high = regimes[point["accuracy_regime"]]["ratio_high"]
        assert point["time_to_train_likely_high_days"] == pytest.approx(point["time_to_train_days"] * high)
        seen.add(point["accuracy_regime"])
    assert seen
    # the sweep's headline band is the widest of its points'
    assert d["accuracy"]["ratio_high"] == max(regimes[r]["ratio_high"] for r in seen)


def test_a_light_moe_estimate_says_its_layer_pass_and_what_helps(client: Any, tmp_path: Path) -> None:
    path = ROOT / "examples" / "qwen3-30b-a3b-32xh100-deepep.json"
    out = client.post("/api/v1/estimate", json=json.loads(path.read_text())).json()
    acc, layout = out["accuracy"], out["layout"]
    layers = find_model("Qwen3-30B-A3B").num_layers / layout["pp"]
    microbatches = layout["global_batch"] // (layout["dp"] * layout["micro_batch"])
    assert acc["layer_pass_s"] == pytest.approx(
        layer_pass_seconds(out["step"]["breakdown_s"], layers, microbatches)
    )
    assert acc["layer_pass_s"] < MOE_LIGHT_LAYER_PASS_S and acc["regime"] == "moe-light"
    assert "CUDA graphs" in acc["advice"] and f"{acc['layer_pass_s'] * 1e3:.1f} ms" in acc["advice"]
    # the two settings the tuned recipes run, with the medians of the two bands
    regimes = accuracy_table()["regimes"]
    assert "moe_dispatcher: hybridep" in acc["advice"] and "moe_fused_grouped_gemm" in acc["advice"]
    assert f"median {regimes['moe-light-hybridep']['ratio_median']:.2f}×" in acc["advice"]
    assert f"{regimes['moe-light']['ratio_median']:.2f}× on the others" in acc["advice"]
    run = clusterplan("estimate", str(path), tmp_path=tmp_path)
    assert run.returncode == 0 and "eager host dispatch may set the pace" in run.stdout
    # the same light estimate on HybridEP takes that dispatcher's band, narrower, and no host-dispatch advice
    scenario = {**json.loads(path.read_text()), "moe_dispatcher": "hybridep"}
    fused = client.post("/api/v1/estimate", json=scenario).json()["accuracy"]
    assert fused["regime"] == "moe-light-hybridep" and "CUDA graphs" in fused["advice"]
    assert f"{acc['ratio_high']:.1f}×" in fused["advice"]  # what the same pass risks without them
    assert fused["ratio_high"] < acc["ratio_high"]
    # a dense estimate reports its pass time but has no advice to give
    dense = client.post(
        "/api/v1/estimate", json=json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    ).json()
    assert dense["accuracy"]["layer_pass_s"] > 0 and dense["accuracy"]["advice"] is None


@pytest.mark.parametrize("dispatcher", ["deepep", "hybridep"])
def test_planner_band_follows_the_dispatcher(client: Any, dispatcher: str) -> None:
    """The search's band is its best layout's regime under the requested dispatcher (light passes on HybridEP
    take their own band)."""
    request = _search_request(
        "qwen3-30b-a3b-32xh100-deepep.json",
        moe_dispatcher=dispatcher,
        constraints={"max_micro_batch": 1},  # light passes: one sequence of 4K tokens per micro-batch
    )
    r = client.post("/api/v1/plan", json=request)
    assert r.status_code == 200, r.text
    out = r.json()
    best, model = out["best"], find_model("Qwen3-30B-A3B")
    microbatches = best["layout"]["global_batch"] // (best["layout"]["dp"] * best["layout"]["micro_batch"])
    layers = model.num_layers / best["layout"]["pp"]
    layer_pass = layer_pass_seconds(best["step_breakdown_s"], layers, microbatches)
    assert layer_pass < MOE_LIGHT_LAYER_PASS_S
    expected = "moe-light-hybridep" if dispatcher == "hybridep" else "moe-light"
    assert out["accuracy"]["regime"] == expected


def test_totals_band_widens_the_step_band_only_with_enough_whole_runs() -> None:
    whole = {"runs": MIN_UNSEEN_RUNS, "ratio_low": 0.97, "ratio_high": 1.42}
    band = totals_band({"whole_runs": whole}, 0.86, 1.11)
    assert (band.ratio_low, band.ratio_high, band.whole_runs) == (0.86, 1.42, MIN_UNSEEN_RUNS)
    # a step band wider than the whole runs' keeps its own ends
    band = totals_band({"whole_runs": whole}, 0.9, 2.33)
    assert (band.ratio_low, band.ratio_high) == (0.9, 2.33)
    # too few whole runs, or none: the step band alone, and the summary says so
    few = totals_band({"whole_runs": {**whole, "runs": MIN_UNSEEN_RUNS - 1}}, 0.86, 1.11)
    assert (few.ratio_low, few.ratio_high, few.whole_runs) == (0.86, 1.11, 0)
    assert "follow the step-time band" in few.summary() and "whole published" in band.summary()
    assert totals_band({}, 0.86, 1.11).whole_runs == 0


def test_whole_runs_record_is_reported_over_predicted_gpu_hours() -> None:
    from app.validation.accuracy import whole_run_ratios
    from app.validation.training_totals import load_rows as load_totals
    from app.validation.training_totals import replay as replay_totals

    totals = DATA / "training_totals.csv"
    rows = [r for r in replay_totals(load_totals(totals)).rows if r.skipped is None and r.best_gpu_hours]
    ratios = whole_run_ratios([totals])
    assert ratios == pytest.approx([r.reported_gpu_hours / r.best_gpu_hours for r in rows])
    # ratio = 1 / (1 + error): a run predicted 20 % low took 1.25x its prediction
    assert ratios == pytest.approx([1.0 / (1.0 + r.error_pct / 100.0) for r in rows])
    assert accuracy_table()["whole_runs"] == {
        **ratio_stats(ratios),
        "about": accuracy_table()["whole_runs"]["about"],
        "files": ["training_totals.csv"],
    }


def test_collective_regimes_split_at_the_domain_and_64_mib() -> None:
    from app.core.accuracy import (
        COLLECTIVE_LARGE_BYTES,
        applied_collective,
        collective_band,
        collective_regime,
    )
    from app.validation.collectives import LARGE_BYTES

    assert LARGE_BYTES == COLLECTIVE_LARGE_BYTES == 64 * 2**20  # one split for the summaries and the bands
    assert collective_regime(1, COLLECTIVE_LARGE_BYTES - 1) == "scale-up-small"
    assert collective_regime(1, COLLECTIVE_LARGE_BYTES) == "scale-up-large"
    assert collective_regime(2, 8) == "scale-out-small"
    assert collective_regime(512, 2**34) == "scale-out-large"
    table = {
        "collectives": {
            "regimes": {
                "scale-out-large": {
                    **ratio_stats([0.8, 1.0, 1.1, 1.2, 1.3]),
                    "basis": "outside the development set",
                }
            }
        }
    }
    assert collective_band(table, 1, 2**30) is None  # no record for its kind: no band
    band = collective_band(table, 4, 2**30)
    assert band is not None and band.runs == 5
    applied = applied_collective(band, 1e-3)
    assert applied["time_range_s"] == pytest.approx([1e-3 * band.ratio_low, 1e-3 * band.ratio_high])
    assert "collectives across scale-up domains, messages of 64 MiB and more" in applied["summary"]
