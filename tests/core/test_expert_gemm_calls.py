"""Expert GEMMs called one by one: the host time of Transformer Engine's per-expert GEMM loop in a MoE layer pass."""

from __future__ import annotations

import pytest

from app import catalog
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import AUTOMODEL, EXPERT_GEMM_HOST_S, MEGATRON_CORE, NEMO, TORCHTITAN
from app.core.layout import Layout
from app.core.planner import SearchProblem, plan
from tests.core.conftest import make_cluster

GRAPHED = MEGATRON_CORE.with_(expert_gemm_host_s=0.0)


def test_the_constant_is_the_published_measurement() -> None:
    # TransformerEngine PR #3134: 8 experts x 128 tokens through the multi-stream cuBLASLt path, 0.267 ms
    total = 8 * EXPERT_GEMM_HOST_S
    assert total == pytest.approx(0.267e-3, rel=1e-12)
    assert MEGATRON_CORE.expert_gemm_host_s == NEMO.expert_gemm_host_s == EXPERT_GEMM_HOST_S
    # single-launch grouped kernels: torch._grouped_mm (torchtitan), grouped_gemm's gmm (NeMo Automodel)
    assert TORCHTITAN.expert_gemm_host_s == AUTOMODEL.expert_gemm_host_s == 0.0


def _qwen(fw, ep: int):
    model = catalog.find_model("Qwen3-235B-A22B")
    layout = Layout(tp=1, pp=1, dp=256, ep=ep, micro_batch=1, global_batch=512, recompute="none", zero=1)
    return estimate(model, make_cluster(nodes=32), layout, 4096, options=EstimateOptions(framework=fw))


def test_each_local_expert_pays_two_forward_and_four_backward_calls() -> None:
    # Qwen3-235B-A22B: 94 layers, every one MoE, 128 experts; EP 8 leaves 16 on each rank; 2 micro-batches
    model = catalog.find_model("Qwen3-235B-A22B")
    assert model.num_layers == 94 and model.moe is not None and model.moe.num_experts == 128
    calls, graphed = _qwen(MEGATRON_CORE, 8), _qwen(GRAPHED, 8)
    passes = 94 * 2
    forward = calls.step.breakdown["forward_compute"] - graphed.step.breakdown["forward_compute"]
    backward = calls.step.breakdown["backward_compute"] - graphed.step.breakdown["backward_compute"]
    assert forward == pytest.approx(passes * 2 * 16 * EXPERT_GEMM_HOST_S, rel=1e-9)
    assert backward == pytest.approx(passes * 4 * 16 * EXPERT_GEMM_HOST_S, rel=1e-9)
    # communication is unchanged; the data-parallel reduction hides behind the longer backward, never more exposed
    for key in ("ep_comm", "optimizer"):
        assert calls.step.breakdown[key] == pytest.approx(graphed.step.breakdown[key], rel=1e-9)
    assert calls.step.breakdown["dp_comm"] <= graphed.step.breakdown["dp_comm"]


def test_the_cost_falls_with_the_experts_each_rank_holds() -> None:
    def compute(fw, ep: int) -> float:
        step = _qwen(fw, ep).step.breakdown
        return step["forward_compute"] + step["backward_compute"]

    extra = {ep: compute(MEGATRON_CORE, ep) - compute(GRAPHED, ep) for ep in (8, 32, 128)}
    # 16, 4 and 1 local experts
    assert extra[8] == pytest.approx(4 * extra[32], rel=1e-6)
    assert extra[32] == pytest.approx(4 * extra[128], rel=1e-6)
    dense = catalog.find_model("Llama-3-8B")
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64)
    one = estimate(
        dense, make_cluster(nodes=1), layout, 4096, options=EstimateOptions(framework=MEGATRON_CORE)
    )
    two = estimate(dense, make_cluster(nodes=1), layout, 4096, options=EstimateOptions(framework=GRAPHED))
    assert one.step.total_s == two.step.total_s  # dense layers have no experts to call


def test_the_planner_stops_holding_every_expert_on_each_rank() -> None:
    # Qwen3-30B-A3B on 8 B200: without the calls the cheapest layout keeps all 128 experts on every rank (no
    # expert parallelism), which no published recipe runs; with them it spreads the experts as NVIDIA's recipe
    # does (EP 8) and raises the micro-batch so that each call carries more tokens
    model = catalog.find_model("Qwen3-30B-A3B")
    cluster = make_cluster("B200", nodes=1)

    def best(fw):
        result = plan(SearchProblem(model, cluster, 4096, 512, options=EstimateOptions(framework=fw)), top=1)
        assert result.best is not None
        return result.best.layout

    assert best(GRAPHED).ep == 1
    chosen = best(MEGATRON_CORE)
    assert model.moe is not None and model.moe.num_experts // chosen.ep <= 32
    assert chosen.micro_batch >= 2
