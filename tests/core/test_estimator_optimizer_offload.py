"""Optimizer CPU offload (Megatron-core --optimizer-cpu-offload, HybridDeviceOptimizer): the offloaded share of the
master weights and Adam moments leaves HBM for host memory, and the step pays the host path of the optimizer."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.estimate import estimate
from app.core.framework import MEGATRON_CORE
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, check_layout
from app.core.memory import OPTIMIZER_HOST_BYTES
from app.core.step import (
    CPU_ADAMW_BYTES_PER_PARAM,
    DEFAULT_HOST_MEMORY_BYTES_PER_S,
    OFFLOAD_LINK_BYTES_PER_PARAM,
)
from tests.paths import ROOT

GiB = 2**30
EXAMPLE = ROOT / "examples" / "llama3-70b-16xh100-optimizer-offload.json"


def _setup(share: float, gpu: str = "H100-SXM", zero: int = 1) -> tuple:
    model = catalog.find_model("Llama-3-70B")
    per_node = 4 if gpu.startswith("GB") else 8
    cluster = ClusterSpec(
        gpu=catalog.find_gpu(gpu),
        num_nodes=16 // per_node,
        gpus_per_node=per_node,
        fabric=find_fabric("ib-ndr-8x400"),
    )
    layout = Layout(
        tp=8 if per_node == 8 else 4,
        pp=2 if per_node == 8 else 4,
        dp=1,
        zero=zero,
        sequence_parallel=True,
        recompute="full",
        micro_batch=1,
        global_batch=16,
        optimizer_offload=share,
    )
    return model, cluster, layout


def test_offloaded_share_of_master_weights_and_moments_moves_to_the_host() -> None:
    model, cluster, layout = _setup(0.0)
    base = estimate(model, cluster, layout, 8192)
    for share in (0.5, 1.0):
        model, cluster, moved_layout = _setup(share)
        moved = estimate(model, cluster, moved_layout, 8192)
        for before, after in zip(base.memory.stages, moved.memory.stages, strict=True):
            kept = 1 - share
            for key in ("master_weights", "optimizer_states"):
                assert after.breakdown[key] == pytest.approx(kept * before.breakdown[key], rel=1e-12)
            for key in ("weights", "gradients", "activations"):
                assert after.breakdown[key] == pytest.approx(before.breakdown[key], rel=1e-12)
            # fp32 copy + two fp32 moments + pinned fp32 gradient per offloaded parameter; dp = 1: the whole stage
            assert after.host_optimizer_bytes == pytest.approx(share * after.params * 16.0, rel=1e-12)
            assert after.host_bytes == after.host_optimizer_bytes
        assert moved.memory.peak_bytes < base.memory.peak_bytes
        assert moved.memory.host_bytes == max(s.host_bytes for s in moved.memory.stages)
        assert any("optimizer states hold" in note for note in moved.memory.notes)
    assert OPTIMIZER_HOST_BYTES == 16.0


def test_host_path_of_the_optimizer_step_by_hand() -> None:
    model, cluster, layout = _setup(1.0)
    est = estimate(model, cluster, layout, 8192)
    stage = est.memory.stages[
        0
    ]  # the step sizes its optimizer by the embedding stage (dp = 1: all its parameters)
    gpu = cluster.gpu
    assert gpu.host_memory_bandwidth_bytes_per_s == pytest.approx(76.8e9)  # DGX H100: 2 × 8 × DDR5-4800 / 8
    cpu = stage.params * CPU_ADAMW_BYTES_PER_PARAM / (gpu.host_memory_bandwidth_bytes_per_s * 0.7)
    copy = stage.params * OFFLOAD_LINK_BYTES_PER_PARAM / gpu.host_link_bytes_per_s
    assert cpu > copy  # CPU AdamW at host memory bandwidth is the slow part on a DGX H100
    assert est.step.breakdown["optimizer"] == pytest.approx(cpu, rel=1e-9)
    # half offloaded: the GPU's fused Adam over the other half runs beside the host's share
    model, cluster, half = _setup(0.5)
    est_half = estimate(model, cluster, half, 8192)
    gpu_part = (
        0.5 * stage.params * MEGATRON_CORE.adam_step_bytes_per_param / (gpu.hbm_bandwidth_bytes_per_s * 0.7)
    )
    assert est_half.step.breakdown["optimizer"] == pytest.approx(max(gpu_part, 0.5 * cpu), rel=1e-9)
    model, cluster, none = _setup(0.0)
    est_none = estimate(model, cluster, none, 8192)
    assert est_none.step.breakdown["optimizer"] < est_half.step.breakdown["optimizer"]
    assert est_half.step.breakdown["optimizer"] < est.step.breakdown["optimizer"]
    names = {a.name: a.value for a in est.assumptions}
    assert names["optimizer offloading"] == 1.0


def test_grace_hosts_update_faster_and_unknown_hosts_use_the_dgx_h100_figure() -> None:
    h100 = estimate(*_setup(1.0, "H100-SXM"), 8192)
    gb200 = estimate(*_setup(1.0, "GB200"), 8192)
    per_param = lambda e: e.step.breakdown["optimizer"] / e.memory.stages[0].params  # noqa: E731
    # Grace LPDDR5X (256 GB/s per GPU) against a DGX H100's DDR5 (76.8 GB/s per GPU)
    assert per_param(gb200) == pytest.approx(per_param(h100) * 76.8 / 256, rel=1e-9)
    assert catalog.find_gpu("MI300X").host_memory_bandwidth_bytes_per_s == 0.0
    assert DEFAULT_HOST_MEMORY_BYTES_PER_S == 76.8e9
    model, _, layout = _setup(1.0)
    mi = ClusterSpec(gpu=catalog.find_gpu("MI300X"), num_nodes=2, gpus_per_node=8)
    est = estimate(model, mi, layout, 8192)
    text = next(a.source for a in est.assumptions if a.name == "optimizer offloading")
    assert "DGX H100 figure" in text


def test_offload_is_checked() -> None:
    model, cluster, _ = _setup(0.0)
    for bad, field in (
        (dict(optimizer_offload=1.5), "layout.optimizer_offload"),
        (dict(optimizer_offload=-0.1), "layout.optimizer_offload"),
        (dict(optimizer_offload=0.5, zero=3), "layout.optimizer_offload"),
    ):
        layout = Layout(tp=8, pp=2, dp=1, micro_batch=1, global_batch=16, **bad)  # type: ignore[arg-type]
        with pytest.raises(SpecError) as err:
            check_layout(model, cluster, layout, 8192)
        assert field in {p.field for p in err.value.problems}


def test_host_capacity_limits_the_offloaded_optimizer() -> None:
    # all of a 70B model's optimizer on one 8-GPU node: 70.6 B / 8 × 16 B = 131 GiB per GPU, under 256 GiB
    model = catalog.find_model("Llama-3-70B")
    cluster = ClusterSpec(gpu=catalog.find_gpu("H100-SXM"), num_nodes=1, gpus_per_node=8)
    layout = Layout(
        tp=8, dp=1, zero=1, sequence_parallel=True, recompute="full", global_batch=8, optimizer_offload=1.0
    )
    est = estimate(model, cluster, layout, 4096)
    assert 100 * GiB < est.memory.host_bytes < 256 * GiB and est.memory.host_fits
    small_host = ClusterSpec(
        gpu=catalog.find_gpu("V100-SXM2-32GB"),
        num_nodes=8,
        gpus_per_node=8,
        fabric=find_fabric("ib-hdr-8x200"),
    )
    v100 = Layout(
        tp=8, pp=8, dp=1, zero=1, recompute="full", global_batch=64, dtype="fp16", optimizer_offload=1.0
    )
    est = estimate(catalog.find_model("GPT-3-175B"), small_host, v100, 2048)
    # 175 B / 64 GPUs × 16 B = 41 GiB per GPU: inside a DGX-1's 64 GiB per GPU
    assert est.memory.host_bytes < est.memory.host_capacity_bytes
    crowded = Layout(
        tp=8, pp=4, dp=2, zero=0, recompute="full", global_batch=64, dtype="fp16", optimizer_offload=1.0
    )
    est = estimate(catalog.find_model("GPT-3-175B"), small_host, crowded, 2048)
    # ZeRO-0: every replica keeps its stage's whole optimizer: 175 B / 32 × 16 B = 81 GiB > 64 GiB
    assert est.memory.host_bytes > est.memory.host_capacity_bytes
    assert not est.memory.host_fits and not est.memory.fits


def test_planner_offloads_the_optimizer_only_when_asked() -> None:
    from app.core.planner import Constraints, SearchProblem, plan

    model = catalog.find_model("Llama-3-70B")
    cluster = ClusterSpec(
        gpu=catalog.find_gpu("H100-SXM"), num_nodes=2, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )
    fixed = dict(tp=(8,), pp=(1,), zero=(1,), max_cp=1, micro_batch=(1,))
    without = plan(SearchProblem(model, cluster, 8192, 64), constraints=Constraints(**fixed))
    assert without.best is None  # 70B on 16 GPUs with its optimizer on the GPUs does not fit
    moved = plan(
        SearchProblem(model, cluster, 8192, 64), constraints=Constraints(**fixed, optimizer_offload=True)
    )
    assert moved.best is not None and moved.best.layout.optimizer_offload in (0.5, 1.0)
    assert moved.best.step_breakdown_s["optimizer"] > 1.0  # the CPU AdamW step is seconds long


def test_api_estimate_and_plan_take_optimizer_offload(client: TestClient) -> None:
    body = json.loads(EXAMPLE.read_text())
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["memory"]["host_bytes"] > 0 and doc["memory"]["host_fits"]
    assert doc["memory"]["stages"][0]["host_optimizer_bytes"] == doc["memory"]["host_bytes"]
    assert doc["memory"]["stages"][0]["breakdown_bytes"]["optimizer_states"] == 0.0
    for bad in (1.5, -1):
        body["layout"]["optimizer_offload"] = bad
        r = client.post("/api/v1/estimate", json=body)
        assert r.status_code == 422 and "optimizer_offload" in r.text
    body["layout"].update(optimizer_offload=0.5, zero=3)
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422 and "ZeRO-3" in r.text
    plan_body = {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "H100-SXM", "nodes": 2, "gpus_per_node": 8},
        "training": {"seq_len": 8192},
        "global_batch": 64,
        "top": 3,
        "constraints": {"tp": [8], "pp": [1], "zero": [1], "micro_batch": [1], "max_cp": 1},
    }
    plain = client.post("/api/v1/plan", json=plan_body)
    assert plain.status_code == 200 and plain.json()["best"] is None, plain.text
    plan_body["constraints"]["optimizer_offload"] = True
    moved = client.post("/api/v1/plan", json=plan_body)
    assert moved.status_code == 200, moved.text
    assert moved.json()["best"]["layout"]["optimizer_offload"] > 0


def test_cli_estimate_runs_the_optimizer_offload_example(tmp_path) -> None:
    from tests.cli_support import clusterplan

    run = clusterplan("estimate", str(EXAMPLE), tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "offload: 100% of the optimizer states" in run.stdout
    assert "host memory for offloaded optimizer states" in run.stdout


def test_saved_plan_labels_name_what_is_offloaded() -> None:
    from app.core.layout import layout_label

    plain = Layout(tp=8, dp=2, zero=1, sequence_parallel=True, global_batch=64)
    assert "offload" not in layout_label(plain)
    moved = Layout(tp=8, dp=2, zero=1, sequence_parallel=True, global_batch=64, optimizer_offload=0.5)
    assert layout_label(moved).endswith("optimizer offload=0.5")
    layers = Layout(tp=1, dp=8, zero=3, global_batch=64, offload_layers=40)
    assert "offload=40 layers" in layout_label(layers)
    modules = Layout(tp=1, dp=8, zero=3, global_batch=64, offload_modules=("core_attn",))
    assert "offload=(core_attn)" in layout_label(modules)


def test_every_surface_labels_a_layout_with_the_one_function() -> None:
    """The planner's ranking rows, the saved plans and the replays share one label (app.core.layout)."""
    from app.core import layout, planner
    from app.services import planning

    assert planner.layout_label is layout.layout_label
    assert planning.layout_label is layout.layout_label
    lay = Layout(
        tp=4, pp=8, dp=16, vp=6, zero=1, micro_batch=2, sequence_parallel=True, recompute="selective"
    )
    assert layout.layout_label(lay) == "TP4 PP8 VP6 DP16 ZeRO-1 SP recompute=selective mb=2"
