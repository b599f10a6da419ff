"""The last gradient bucket of a step: Megatron-core reduces the gradients in buckets of max(40M, 1M × dp·cp)
parameters; the last one fills when the backward ends and the first all-gather opens the next forward, so neither
hides. FSDP's unit (one layer) plays that part for the FSDP presets and for ZeRO-3."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.catalog import find_model
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_CORE, TORCHTITAN, Framework
from app.core.layout import Layout
from app.core.step import last_bucket_params
from tests.core.conftest import make_cluster


def test_megatron_bucket_is_its_default_size_capped_at_the_stage() -> None:
    # megatron/core/distributed: bucket_size = max(40000000, 1000000 * dp_size) parameters
    assert MEGATRON_CORE.dp_bucket_params == (40e6, 1e6)
    assert last_bucket_params(MEGATRON_CORE, 2e9, 8, 32) == pytest.approx(40e6)
    assert last_bucket_params(MEGATRON_CORE, 2e9, 288, 32) == pytest.approx(288e6)
    assert last_bucket_params(MEGATRON_CORE, 2e9, 4096, 32) == pytest.approx(2e9)  # all of them, no more
    # FSDP reduces per wrapped block: one layer's parameters
    assert TORCHTITAN.dp_bucket_params is None
    assert last_bucket_params(TORCHTITAN, 2e9, 4096, 32) == pytest.approx(2e9 / 32)


def _dp_comm(fw: Framework, nodes: int, zero: int = 1) -> float:
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=nodes)
    dp = nodes * 8 // 4
    # the same work per GPU at every size: 2 micro-batches of four sequences per data-parallel rank, a backward
    # long enough to hide the whole reduction
    layout = Layout(tp=4, pp=1, dp=dp, zero=zero, micro_batch=4, global_batch=8 * dp, sequence_parallel=True)
    est = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=fw))
    return float(est.step.breakdown["dp_comm"])


def test_the_exposed_reduction_grows_with_the_data_parallel_size() -> None:
    """At a fixed per-GPU work the bucket grows with dp (40M parameters up to dp 40, then 1M per rank), so the
    exposed data-parallel time does too; a bucket held at 40M parameters exposes the same at dp 32 and less at
    dp 512."""
    small, large = _dp_comm(MEGATRON_CORE, 16), _dp_comm(MEGATRON_CORE, 256)
    assert large > small * 1.5
    fixed = MEGATRON_CORE.with_(dp_bucket_params=(40e6, 0.0))
    assert _dp_comm(fixed, 16) == pytest.approx(small, rel=1e-9)
    assert _dp_comm(fixed, 256) < large


def test_small_buckets_turn_latency_bound_at_scale() -> None:
    """Each bucket is its own collective and pays its own latency. Megatron-core grows the bucket with dp "to
    ensure that chunks used in NCCL ring-reduce implementations are large enough to remain bandwidth-bound rather
    than latency-bound" (megatron/core/distributed/distributed_data_parallel.py): 1M-parameter buckets over 512
    ranks (2,000 ring reduce-scatters of 511 steps per step) no longer hide behind the backward."""
    tiny = MEGATRON_CORE.with_(dp_bucket_params=(1e6, 0.0))
    assert _dp_comm(tiny, 256) > 10 * _dp_comm(MEGATRON_CORE, 256)
    # the latency of the 511-step ring grows with the ranks: the penalty is larger at dp 512 than at dp 32
    penalty = {nodes: _dp_comm(tiny, nodes) / _dp_comm(MEGATRON_CORE, nodes) for nodes in (16, 256)}
    assert penalty[256] > penalty[16]


def test_without_overlap_the_whole_reduction_is_exposed_either_way() -> None:
    """DeepSpeed's ZeRO-1 hides nothing (dp_overlap 0): the step pays every bucket's collective, so smaller buckets
    cost their extra latencies, a little for 40M-parameter buckets against one layer's (62M), much for 1M."""
    with_unit = _dp_comm(DEEPSPEED, 64)
    megatron_bucket = _dp_comm(DEEPSPEED.with_(dp_bucket_params=(40e6, 0.0)), 64)
    tiny_bucket = _dp_comm(DEEPSPEED.with_(dp_bucket_params=(1e6, 0.0)), 64)
    assert with_unit < megatron_bucket < 1.25 * with_unit
    assert tiny_bucket > 5 * with_unit


def test_zero3_charges_the_step_s_first_gather_and_last_reduce_scatter() -> None:
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=32)
    layout = Layout(tp=1, pp=1, dp=256, zero=3, micro_batch=1, global_batch=512, recompute="selective")
    est = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=TORCHTITAN))
    # one layer's gather (2 B) and reduce-scatter (4 B, fp32) over 256 ranks cannot hide: a floor under the
    # exposed ZeRO-3 time of about 6 B × 8e9 / 32 layers over the per-GPU network share
    per_gpu_bw = 50e9  # one 400 Gb/s NIC per GPU
    floor = 0.5 * 6 * 8.0e9 / 32 / per_gpu_bw
    assert est.step.breakdown["zero3_comm"] > floor


# ---- the ddp_bucket_size knob: scenario, API, planner, command line and builder ------------------------------------


def _scenario(**extra: Any) -> dict[str, Any]:
    """Llama 3.1 8B on 2,048 H100 at TP4 DP512: Megatron-core's default bucket there is 512M parameters."""
    return {
        "model": "Llama-3.1-8B",
        "cluster": {"gpu": "H100-SXM", "nodes": 256},
        "layout": {
            "tp": 4,
            "dp": 512,
            "zero": 1,
            "sequence_parallel": True,
            "micro_batch": 4,
            "global_batch": 4096,
        },
        "training": {"seq_len": 4096},
        **extra,
    }


def test_api_takes_the_bucket_size_and_refuses_it_where_there_are_no_buckets(client: TestClient) -> None:
    default = client.post("/api/v1/estimate", json=_scenario())
    small = client.post("/api/v1/estimate", json=_scenario(ddp_bucket_size=40_000_000))
    assert default.status_code == 200 and small.status_code == 200, small.text
    dp_default = default.json()["step"]["breakdown_s"]["dp_comm"]
    dp_small = small.json()["step"]["breakdown_s"]["dp_comm"]
    # a 40M bucket is a thirteenth of the default's 512M, but over 512 ranks its 50 collectives pay their
    # latencies; 1M-parameter buckets (2,000 of them) are latency-bound
    assert dp_small > 0 and dp_small != pytest.approx(dp_default, rel=0.05)
    tiny = client.post("/api/v1/estimate", json=_scenario(ddp_bucket_size=1_000_000))
    assert tiny.status_code == 200 and tiny.json()["step"]["breakdown_s"]["dp_comm"] > 5 * dp_default
    assumed = {a["name"]: a for a in small.json()["assumptions"]}
    assert assumed["last data-parallel gradient bucket, exposed"]["value"] == 40_000_000
    r = client.post(
        "/api/v1/estimate", json=_scenario(ddp_bucket_size=40_000_000, framework="torchtitan-fsdp2")
    )
    assert r.status_code == 422 and "ddp_bucket_size" in r.text and "FSDP" in r.text
    r = client.post("/api/v1/estimate", json=_scenario(ddp_bucket_size=1000))
    assert r.status_code == 422 and "ddp_bucket_size" in r.text


def test_the_planner_searches_with_the_bucket_size(client: TestClient) -> None:
    body = {
        "model": "Llama-3.1-8B",
        "cluster": {"gpu": "H100-SXM", "nodes": 256},
        "training": {"seq_len": 4096, "tokens": 1e12},
        "global_batch": 4096,
        "top": 1,
        "constraints": {"zero": [1]},  # the buckets are ZeRO-0/1/2's (ZeRO-3 reduces per layer)
    }
    default = client.post("/api/v1/layout-search", json=body)
    small = client.post("/api/v1/layout-search", json={**body, "ddp_bucket_size": 1_000_000})
    assert default.status_code == 200 and small.status_code == 200, small.text
    # 1M-parameter buckets pay a collective's latency each: every data-parallel layout slows, the best one too
    assert small.json()["best"]["step_time_s"] > default.json()["best"]["step_time_s"]


def test_command_line_flag_and_builder_round_trip() -> None:
    from typer.testing import CliRunner

    from app.cli.main import build_cli
    from app.web.pages._builder import BuilderState, parse_state, scenario_to_state, state_to_scenario

    args = ["search", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--nodes", "4", "--seq-len", "4096"]
    args += ["--global-batch", "64", "--tokens", "1e11"]
    ok = CliRunner().invoke(build_cli(), [*args, "--ddp-bucket-size", "50000000", "--top", "1"])
    assert ok.exit_code == 0, ok.output
    refused = CliRunner().invoke(build_cli(), [*args, "--ddp-bucket-size", "10"])
    assert refused.exit_code == 2
    state = parse_state({"ddp_bucket_size": "50000000"})
    assert state.ddp_bucket_size == 50_000_000 and "ddp_bucket_size=50000000" in state.query()
    assert "ddp_bucket_size" not in BuilderState().query()  # the default stays out of the address
    scenario = state_to_scenario(state)
    assert scenario["ddp_bucket_size"] == 50_000_000
    assert scenario_to_state(scenario).ddp_bucket_size == 50_000_000
    assert "ddp_bucket_size" not in state_to_scenario(BuilderState())
