"""Ranking resolution: how well the estimator orders two layouts of one run, measured on published layout
comparisons, and how the planner (API, CLI, builder) says which ranked layouts it cannot tell apart."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from app.catalog import accuracy_table, find_model
from app.core.accuracy import RANKING_PERCENTILE, RankingResolution, comparison_stats, ranking_resolution
from app.validation.accuracy import COMPARISON_KEY, LAYOUT_COLUMNS, build_table
from app.validation.training_runs import load_rows, replay, speed_error
from app.web.pages._builder import BuilderState
from tests.cli_support import clusterplan
from tests.paths import DATA_DIR, ROOT

DATA = DATA_DIR
HX = {"HX-Request": "true"}
# one B200 node training Qwen3-30B-A3B at 4K × 256, whose fastest layout has light MoE layer passes: as an API
# request and as the CLI's arguments
QWEN3_30B_ON_B200: dict[str, Any] = {
    "model": "Qwen3-30B-A3B",
    "cluster": {"gpu": "B200", "nodes": 1},
    "training": {"seq_len": 4096},
    "global_batch": 256,
    "top": 3,
}
QWEN3_30B_ON_B200_ARGS = (
    *("--model", "Qwen3-30B-A3B", "--gpu", "B200", "--nodes", "1"),
    *("--seq-len", "4096", "--global-batch", "256", "--top", "3"),
)


def test_comparison_statistics_by_hand() -> None:
    # folded ratios 1.0, 1.1, 1.2, 1.3, 1.5: errors 0, 10, 20, 30, 50 %
    stats = comparison_stats([1.0, 1.1, 1.2, 1.3, 1.5])
    assert stats["pairs"] == 5
    assert stats["median_pct"] == pytest.approx(20.0)
    # the 80th percentile of [0, 10, 20, 30, 50] by linear interpolation: 30 + 0.2 · 20
    assert RANKING_PERCENTILE == 80.0
    assert stats["resolution_pct"] == pytest.approx(34.0)
    assert stats["max_pct"] == pytest.approx(50.0)
    # a ratio below 1 is not a folded comparison error; non-finite ones are dropped
    assert comparison_stats([0.9, float("nan")])["pairs"] == 0


def test_resolution_flags_layouts_within_it_of_the_best() -> None:
    res = RankingResolution(
        pairs=40, basis="outside the development set", median_pct=5, resolution_pct=10, max_pct=30
    )
    assert res.close_to(100.0, 110.0) and not res.close_to(100.0, 110.1)
    applied = res.applied(100.0, [100.0, 104.0, 109.9, 112.0])
    assert applied["flags"] == [True, True, True, False]
    assert applied["close_to_best"] == 3
    assert "The first 3 layouts are within it of the best" in applied["summary"]
    assert "All 2 listed layouts" in res.applied(100.0, [100.0, 101.0])["summary"]
    assert "ahead of the next by more than that" in res.applied(100.0, [100.0, 150.0])["summary"]


def _pairs_by_hand(path: Path) -> list[float]:
    """Every layout comparison of one CSV, straight from the definition: same source, model, GPU, sequence, dtype,
    GPU count, global batch and metric; any layout column different."""
    rows = load_rows(path)
    results = {r.row: r for r in replay(rows).rows if r.skipped is None and r.error_pct is not None}
    runs = [
        (row, results[row.index])
        for row in rows
        if row.index in results and results[row.index].metric != "oom"
    ]
    runs = [(row, r) for row, r in runs if r.metric != "mem_gib_per_gpu"]
    out = []
    for i, (row_a, a) in enumerate(runs):
        for row_b, b in runs[i + 1 :]:
            same = all(row_a.get(c) == row_b.get(c) for c in COMPARISON_KEY) and a.metric == b.metric
            if same and any(row_a.get(c) != row_b.get(c) for c in LAYOUT_COLUMNS):
                ra, rb = 1 + speed_error(a) / 100, 1 + speed_error(b) / 100
                out.append(max(ra / rb, rb / ra))
    return out


def test_the_table_counts_the_comparisons_the_definition_gives(tmp_path: Path) -> None:
    # Korthikanti's Table 5 (five layouts of three models on one system) and two runs of another source
    source = DATA / "training_runs.csv"
    with open(source, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fields = reader.fieldnames or []
        rows = [
            r
            for r in reader
            if r["source"].startswith("Korthikanti") and r["measured_metric"] == "iter_time_s"
        ]
    assert len(rows) >= 6
    small = tmp_path / "korthikanti.csv"
    with open(small, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    expected = _pairs_by_hand(small)
    assert expected, "Korthikanti's rows hold layout comparisons"
    table = build_table([], [small])
    record = table["ranking"]["regimes"]["dense"]
    assert record["pairs"] == len(expected)
    assert record["median_pct"] == pytest.approx(comparison_stats(expected)["median_pct"])
    assert table["sources"]["unseen"][0]["layout_pairs"] == len(expected)
    # the same file as a comparisons-only input adds its pairs and no band runs
    only = build_table([], [], [small])
    assert only["ranking"]["all"]["pairs"] == len(expected) and not only["regimes"]


def test_committed_resolution_per_kind_of_run() -> None:
    table = accuracy_table()
    dense = ranking_resolution(table, find_model("Llama-3.1-8B"), 4096)
    moe = ranking_resolution(table, find_model("Mixtral-8x7B"), 4096)
    long_context = ranking_resolution(table, find_model("Llama-3.1-8B"), 131072)
    assert dense is not None and moe is not None and long_context is not None
    assert dense.pairs > 1000 and dense.basis == "outside the development set"
    assert moe.resolution_pct > dense.resolution_pct  # MoE comparisons are the least certain
    # no long-context layout comparison is published: the resolution over all kinds stands in
    assert long_context == RankingResolution.from_record(table["ranking"]["all"])
    assert ranking_resolution({}, find_model("Llama-3.1-8B"), 4096) is None


def _plan_request() -> dict[str, Any]:
    body = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    return {
        "model": body["model"],
        "cluster": body["cluster"],
        "training": body["training"],
        "global_batch": body["layout"]["global_batch"],
        "top": 12,
    }


def test_planner_api_marks_the_layouts_it_cannot_tell_apart(client: Any) -> None:
    r = client.post("/api/v1/plan", json=_plan_request())
    assert r.status_code == 200, r.text
    out = r.json()
    ranking, top = out["ranking"], out["top"]
    record = accuracy_table()["ranking"]["regimes"]["dense"]
    assert ranking["resolution_pct"] == record["resolution_pct"] and ranking["metric"] == "step_time_s"
    best = top[0]["step_time_s"]
    for entry in top:
        within = entry["step_time_s"] <= best * (1 + record["resolution_pct"] / 100)
        assert entry["close_to_best"] is within
    assert ranking["close_to_best"] == sum(e["close_to_best"] for e in top)
    assert top[0]["close_to_best"] is True and "Ranking resolution" in ranking["summary"]


def test_ranked_by_cost_the_resolution_applies_to_the_cost(client: Any) -> None:
    request = {**_plan_request(), "rank_by": "cost", "usd_per_gpu_hour": 3.0, "gpu_counts": [32, 64, 128]}
    request["training"] = {**request["training"], "tokens": 1e11}
    r = client.post("/api/v1/plan", json=request)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["ranking"]["metric"] == "cost_usd"
    cheapest = out["top"][0]["cost_usd"]
    res = out["ranking"]["resolution_pct"]
    for entry in out["top"]:
        assert entry["close_to_best"] is (entry["cost_usd"] <= cheapest * (1 + res / 100))


def test_cli_and_builder_say_which_layouts_are_within_the_resolution(client: Any, tmp_path: Path) -> None:
    run = clusterplan(
        "plan",
        "--model",
        "Llama-3-70B",
        "--gpu",
        "H100-SXM",
        "--nodes",
        "8",
        "--seq-len",
        "8192",
        "--global-batch",
        "512",
        "--top",
        "5",
        tmp_path=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "ranking: Ranking resolution ±" in run.stdout
    assert "≈ best" in run.stdout  # the planner's top layouts of this run are within a few per cent
    state = BuilderState(mode="planner", nodes=4)
    html = client.get(f"/plans/new?{state.query()}", headers=HX).text
    assert 'id="ranking-resolution"' in html and "Ranking resolution" in html
    assert 'class="close-to-best"' in html


def test_resolution_is_finite_and_ordered_in_the_committed_table() -> None:
    ranking = accuracy_table()["ranking"]
    assert ranking["percentile"] == RANKING_PERCENTILE
    for record in [*ranking["regimes"].values(), ranking["all"]]:
        assert record["pairs"] > 0
        assert 0 <= record["median_pct"] <= record["resolution_pct"] <= record["max_pct"]
        assert all(math.isfinite(record[k]) for k in ("median_pct", "resolution_pct", "max_pct"))


def test_planner_can_leave_out_light_moe_passes() -> None:
    from app.catalog import find_gpu
    from app.catalog.fabrics import find_fabric
    from app.core.accuracy import MOE_LIGHT_LAYER_PASS_S, layer_pass_seconds
    from app.core.hardware import ClusterSpec
    from app.core.planner import Constraints, SearchProblem, plan

    model = find_model("Qwen3-30B-A3B")
    cluster = ClusterSpec(
        gpu=find_gpu("B200"), num_nodes=1, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )

    def pass_s(p: Any) -> float:
        return layer_pass_seconds(
            p.step_breakdown_s, model.num_layers / p.layout.pp, p.layout.num_microbatches
        )

    free = plan(SearchProblem(model, cluster, 4096, 256), top=20)
    assert (
        free.best is not None and pass_s(free.best) < MOE_LIGHT_LAYER_PASS_S
    )  # the fastest estimate is light
    heavy = plan(
        SearchProblem(model, cluster, 4096, 256), top=20, constraints=Constraints(avoid_light_moe_passes=True)
    )
    assert heavy.best is not None and all(pass_s(p) >= MOE_LIGHT_LAYER_PASS_S for p in heavy.top)
    left_out = heavy.rejections["light_moe_pass"]
    assert left_out > 0 and heavy.feasible_layouts == free.feasible_layouts - left_out
    assert heavy.enumerated_layouts == heavy.feasible_layouts + sum(heavy.rejections.values())
    assert heavy.best.step_time_s >= free.best.step_time_s
    # a dense model has no MoE passes to leave out
    dense = find_model("Llama-3.1-8B")
    a = plan(SearchProblem(dense, cluster, 4096, 256), top=1)
    b = plan(
        SearchProblem(dense, cluster, 4096, 256), top=1, constraints=Constraints(avoid_light_moe_passes=True)
    )
    assert a.feasible_layouts == b.feasible_layouts and "light_moe_pass" not in b.rejections


def test_api_cli_and_builder_pass_the_light_moe_constraint(client: Any, tmp_path: Path) -> None:
    from app.web.pages._builder import parse_state, planner_constraints

    request = {**QWEN3_30B_ON_B200, "constraints": {"avoid_light_moe_passes": True}}
    out = client.post("/api/v1/plan", json=request).json()
    assert out["rejections"]["light_moe_pass"] > 0 and out["accuracy"]["regime"] == "moe"
    run = clusterplan("plan", *QWEN3_30B_ON_B200_ARGS, "--avoid-light-moe", tmp_path=tmp_path)
    assert run.returncode == 0 and "light_moe_pass" in run.stdout and "accuracy (moe):" in run.stdout
    state = parse_state(
        {"mode": "planner", "model": "Qwen3-30B-A3B", "gpu": "B200", "plan_avoid_light_moe": "1"}
    )
    assert state.plan_avoid_light_moe and "plan_avoid_light_moe=1" in state.query()
    assert planner_constraints(state) == {"avoid_light_moe_passes": True}
    html = client.get("/plans/new?" + state.query(), headers=HX).text
    assert "MoE layer passes under 20 ms of GPU work" in html  # the rejection reason in the ranking panel
    page = client.get("/plans/new?" + state.query()).text
    assert "checked" in page.split('id="f-plan_avoid_light_moe"')[1][:120]


def test_best_heavy_moe_is_the_constrained_search_best() -> None:
    from app.catalog import find_gpu
    from app.catalog.fabrics import find_fabric
    from app.core.hardware import ClusterSpec
    from app.core.planner import Constraints, SearchProblem, plan

    model = find_model("Qwen3-30B-A3B")
    cluster = ClusterSpec(
        gpu=find_gpu("B200"), num_nodes=1, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )
    free = plan(SearchProblem(model, cluster, 4096, 256), top=5)
    heavy = free.best_heavy_moe(model)
    constrained = plan(
        SearchProblem(model, cluster, 4096, 256), top=1, constraints=Constraints(avoid_light_moe_passes=True)
    )
    # the same layout the search that leaves light passes out finds best, at its rank in the free search
    assert heavy is not None and constrained.best is not None
    assert heavy.layout == constrained.best.layout
    assert heavy.step_time_s == pytest.approx(constrained.best.step_time_s)
    assert heavy.rank > 1 and free.best is not None and heavy.step_time_s >= free.best.step_time_s
    # an acceptance test narrows it further; one that takes nothing leaves no layout
    assert free.best_heavy_moe(model, lambda rows: rows.tp == 1).layout.tp == 1  # type: ignore[union-attr]
    assert free.best_heavy_moe(model, lambda rows: rows.tp < 0) is None
    # a dense model has no MoE passes
    dense = find_model("Llama-3.1-8B")
    assert plan(SearchProblem(dense, cluster, 4096, 256), top=1).best_heavy_moe(dense) is None


def test_a_light_best_is_shown_beside_the_best_heavier_layout(client: Any, tmp_path: Path) -> None:
    request = QWEN3_30B_ON_B200
    out = client.post("/api/v1/plan", json=request).json()
    alt = out["light_moe"]
    table = accuracy_table()["regimes"]
    light, heavy = alt["light"], alt["heavy"]
    assert (
        light["label"] == out["recommended"]["label"]
        and light["layer_pass_ms"] < 20 <= heavy["layer_pass_ms"]
    )
    assert (light["regime"], heavy["regime"]) == ("moe-light", "moe")
    # each estimate scaled by the median published run of its kind, nothing else
    for side in (light, heavy):
        assert side["ratio_median"] == table[side["regime"]]["ratio_median"]
        assert side["typical_step_time_s"] == pytest.approx(side["step_time_s"] * side["ratio_median"])
    assert alt["heavy_expected_faster"] == (heavy["typical_step_time_s"] < light["typical_step_time_s"])
    assert light["typical_time_to_train_s"] is None  # no token budget in this request
    with_tokens = client.post(
        "/api/v1/plan", json={**request, "training": {"seq_len": 4096, "tokens": 1e11}}
    ).json()["light_moe"]
    for side in (with_tokens["light"], with_tokens["heavy"]):
        ranked = next(p for p in out["top"] if p["label"] == side["label"]) if side["rank"] <= 3 else None
        assert side["typical_time_to_train_s"] > 0
        if ranked is not None:
            assert side["typical_time_to_train_s"] == pytest.approx(
                1e11 / ranked["tokens_per_s"] * side["ratio_median"], rel=1e-6
            )
    assert "days of compute" in with_tokens["summary"]
    assert heavy["label"] in alt["summary"] and f"rank {heavy['rank']}" in alt["summary"]
    # the ranking itself stays the estimate's
    assert out["top"][0]["step_time_s"] <= heavy["step_time_s"]
    # a heavy best, or a dense model, has nothing to add
    heavy_only = client.post(
        "/api/v1/plan", json={**request, "constraints": {"avoid_light_moe_passes": True}}
    ).json()
    assert heavy_only["light_moe"] is None
    dense = client.post("/api/v1/plan", json={**request, "model": "Llama-3.1-8B"}).json()
    assert dense["light_moe"] is None
    # at long context light and heavy MoE layouts share one band (moe-long-context): no comparison to make
    from dataclasses import replace

    from app.services.catalog import PUBLIC
    from app.services.light_moe import light_moe_alternative
    from app.services.planner import run_plan
    from app.services.region import accept_for

    _, resolved, _, result = run_plan(request, None, viewer=PUBLIC)
    accept = accept_for(resolved.seq_len, resolved.cluster.gpus_per_node, 128)
    assert light_moe_alternative(resolved, result, result.best, accept) is not None
    assert light_moe_alternative(replace(resolved, seq_len=32768), result, result.best, accept) is None
    run = clusterplan("search", *QWEN3_30B_ON_B200_ARGS, tmp_path=tmp_path)
    assert (
        run.returncode == 0
        and f"light MoE passes: the best heavier layout is rank {heavy['rank']}" in run.stdout
    )
    state = BuilderState(mode="planner", model="Qwen3-30B-A3B", gpu="B200", nodes=1, global_batch=256)
    html = client.get("/plans/new?" + state.query(), headers=HX).text
    assert 'id="light-moe-note"' in html and heavy["label"] in html
    # the note links the heavier layout into the by-hand inputs
    note = html.split('id="light-moe-note"')[1].split("</p>")[0]
    link = note.split('href="')[1].split('"')[0].replace("&amp;", "&")
    assert "Use the heavier layout" in note and "mode=manual" in link
    assert (
        f"micro_batch={heavy['layout']['micro_batch']}" in link and f"zero={heavy['layout']['zero']}" in link
    )


def test_a_light_best_on_alltoall_names_the_same_layout_on_hybridep(client: Any, tmp_path: Path) -> None:
    out = client.post("/api/v1/plan", json=QWEN3_30B_ON_B200).json()
    hint = out["moe_dispatcher_hint"]
    table = accuracy_table()["regimes"]
    cur, sug = hint["current"], hint["suggested"]
    assert hint["label"] == out["recommended"]["label"]
    assert (cur["dispatcher"], sug["dispatcher"]) == ("alltoall", "hybridep")
    assert (cur["regime"], sug["regime"]) == ("moe-light", "moe-light-hybridep")
    assert cur["step_time_s"] == pytest.approx(out["recommended"]["step_time_s"])
    for side in (cur, sug):
        assert side["ratio_median"] == table[side["regime"]]["ratio_median"]
        assert side["runs"] == table[side["regime"]]["runs"]
        assert side["typical_step_time_s"] == pytest.approx(side["step_time_s"] * side["ratio_median"])
    # the suggested side is the same layout estimated by hand on HybridEP: one estimate, not a second formula
    layout = out["recommended"]["layout"]
    by_hand = client.post(
        "/api/v1/estimate",
        json={
            "model": "Qwen3-30B-A3B",
            "cluster": {"gpu": "B200", "nodes": 1},
            "training": {"seq_len": 4096},
            "moe_dispatcher": "hybridep",
            "layout": {k: layout[k] for k in ("tp", "pp", "cp", "ep", "zero", "micro_batch", "recompute")}
            | {"global_batch": 256, "sequence_parallel": layout["sequence_parallel"]},
        },
    )
    assert by_hand.status_code == 200, by_hand.text
    assert sug["step_time_s"] == pytest.approx(by_hand.json()["step"]["total_s"], rel=1e-9)
    assert f"{sug['ratio_median']:.2f}×" in hint["summary"] and hint["label"] in hint["summary"]
    # on HybridEP already, with a dense model, or with heavy passes there is nothing to add
    on_hybridep = client.post("/api/v1/plan", json={**QWEN3_30B_ON_B200, "moe_dispatcher": "hybridep"}).json()
    assert on_hybridep["moe_dispatcher_hint"] is None
    dense = client.post("/api/v1/plan", json={**QWEN3_30B_ON_B200, "model": "Llama-3.1-8B"}).json()
    assert dense["moe_dispatcher_hint"] is None
    heavy = client.post(
        "/api/v1/plan", json={**QWEN3_30B_ON_B200, "constraints": {"avoid_light_moe_passes": True}}
    ).json()
    assert heavy["moe_dispatcher_hint"] is None
    # a framework without Megatron-core's flex dispatcher gets no hint
    titan = client.post("/api/v1/plan", json={**QWEN3_30B_ON_B200, "framework": "torchtitan-fsdp2"})
    assert titan.status_code == 200 and titan.json()["accuracy"]["regime"] == "moe-light"
    assert titan.json()["moe_dispatcher_hint"] is None
    run = clusterplan("search", *QWEN3_30B_ON_B200_ARGS, tmp_path=tmp_path)
    assert run.returncode == 0 and f"MoE dispatcher: {hint['label']} on HybridEP" in run.stdout
    state = BuilderState(mode="planner", model="Qwen3-30B-A3B", gpu="B200", nodes=1, global_batch=256)
    html = client.get("/plans/new?" + state.query(), headers=HX).text
    note = html.split('id="moe-dispatcher-note"')[1].split("</p>")[0]
    link = note.split('href="')[1].split('"')[0].replace("&amp;", "&")
    assert "Search with HybridEP" in note and "moe_dispatcher=hybridep" in link and "mode=planner" in link
