"""The experts as one fused grouped GEMM (Megatron-core's Transformer Engine op fuser): no call per local expert,
in the estimate, the planner, the API, the CLI and the builder, and read from the Megatron-Bridge recipes that run
it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import catalog
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import EXPERT_GEMM_HOST_S, MEGATRON_CORE, TORCHTITAN
from app.core.layout import Layout
from app.validation.training_runs import estimate_row, load_rows
from app.web.pages._builder import (
    BuilderState,
    parse_state,
    scenario_to_state,
    sizes_request,
    state_to_scenario,
)
from tests.cli_support import clusterplan
from tests.core.conftest import make_cluster
from tests.paths import DATA_DIR

QWEN3_30B = {
    "model": "Qwen3-30B-A3B",
    "cluster": {"gpu": "B200", "nodes": 1},
    "layout": {"tp": 1, "ep": 8, "micro_batch": 2, "global_batch": 64, "recompute": "none"},
    "training": {"seq_len": 4096},
}


def test_the_estimate_drops_exactly_the_expert_calls() -> None:
    """By hand: 128 experts over EP 8 is 16 local experts; each MoE layer pass pays 2 forward and 4 backward calls
    per local expert (app.core.step.layer_times); 48 MoE layers on the one stage, 4 micro-batches."""
    model = catalog.find_model("Qwen3-30B-A3B")
    cluster = make_cluster("B200", 1)
    layout = Layout(tp=1, dp=8, ep=8, micro_batch=2, global_batch=64, recompute="none")
    plain = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=MEGATRON_CORE))
    fused_fw = MEGATRON_CORE.with_fused_grouped_experts()
    fused = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=fused_fw))
    assert fused_fw.expert_gemm_host_s == 0.0 and fused_fw.name == "megatron-core+fused-experts"
    passes = 48 * layout.num_microbatches
    calls = 16 * EXPERT_GEMM_HOST_S * passes
    before, after = plain.step.breakdown, fused.step.breakdown
    assert before["forward_compute"] - after["forward_compute"] == pytest.approx(2 * calls, rel=1e-9)
    assert before["backward_compute"] - after["backward_compute"] == pytest.approx(4 * calls, rel=1e-9)
    # a framework whose experts already run as one kernel is left as it is
    assert TORCHTITAN.with_fused_grouped_experts() is TORCHTITAN


def test_api_planner_cli_take_it_and_refuse_it_where_it_means_nothing(
    client: TestClient, tmp_path: Path
) -> None:
    plain = client.post("/api/v1/estimate", json=QWEN3_30B)
    fused = client.post("/api/v1/estimate", json={**QWEN3_30B, "moe_fused_grouped_gemm": True})
    assert plain.status_code == 200 and fused.status_code == 200, fused.text
    assert fused.json()["step"]["total_s"] < plain.json()["step"]["total_s"]
    dense = client.post(
        "/api/v1/estimate",
        json={
            **QWEN3_30B,
            "model": "Llama-3.1-8B",
            "layout": {"tp": 1, "global_batch": 64},
            "moe_fused_grouped_gemm": True,
        },
    )
    assert dense.status_code == 422 and "moe_fused_grouped_gemm" in dense.text and "dense" in dense.text
    titan = client.post(
        "/api/v1/estimate",
        json={**QWEN3_30B, "framework": "torchtitan-fsdp2", "moe_fused_grouped_gemm": True},
    )
    assert (
        titan.status_code == 422
        and "moe_fused_grouped_gemm" in titan.text
        and "one grouped kernel" in titan.text
    )
    search = {k: v for k, v in QWEN3_30B.items() if k != "layout"} | {"global_batch": 256, "top": 1}
    searched = client.post("/api/v1/plan", json={**search, "moe_fused_grouped_gemm": True})
    assert searched.status_code == 200 and searched.json()["framework"] == "megatron-core+fused-experts"
    run = clusterplan(
        "search",
        *("--model", "Qwen3-30B-A3B", "--gpu", "B200", "--nodes", "1", "--seq-len", "4096"),
        *("--global-batch", "256", "--top", "1", "--moe-fused-grouped-gemm"),
        tmp_path=tmp_path,
    )
    assert run.returncode == 0 and "megatron-core+fused-experts" in run.stdout


def test_the_builder_carries_it() -> None:
    state = parse_state({"model": "Qwen3-30B-A3B", "moe_fused_grouped_gemm": "1"})
    assert state.moe_fused_grouped_gemm and "moe_fused_grouped_gemm=1" in state.query()
    assert "moe_fused_grouped_gemm" not in BuilderState().query()
    assert parse_state({"moe_fused_grouped_gemm": "0"}).moe_fused_grouped_gemm is False
    scenario = state_to_scenario(state)
    assert scenario["moe_fused_grouped_gemm"] is True
    assert scenario_to_state(scenario).moe_fused_grouped_gemm is True
    assert sizes_request(state, scenario)["moe_fused_grouped_gemm"] is True
    assert "moe_fused_grouped_gemm" not in state_to_scenario(BuilderState())


def test_full_iteration_recipes_replay_with_the_fused_experts() -> None:
    """Megatron-Bridge's full-iteration CUDA-graph MoE recipes (26.06.01, 26.08) set the op fuser; the 26.04.01
    recipes, with partial CUDA graphs, keep one call per local expert."""
    rows = {r.index: r for r in load_rows(DATA_DIR / "training_runs_megatron_bridge_2604_2608.csv")}
    full = [i for i, r in rows.items() if "CUDA graphs (full_iteration" in r.get("notes")]
    full = [i for i in full if "known issue" not in rows[i].get("notes")]  # the skipped 26.06.01 regressions
    assert len(full) == 13
    for i in full:
        fw = estimate_row(rows[i], rows[i].get("measured_metric")).framework
        assert fw.expert_gemm_host_s == 0.0 and fw.name.endswith("+fused-experts")
    partial = estimate_row(
        rows[25], rows[25].get("measured_metric")
    ).framework  # Qwen3-30B-A3B, GB200, 26.04.01
    assert partial.expert_gemm_host_s == EXPERT_GEMM_HOST_S
