"""Activation offloading to host memory (Megatron-core --cpu-offloading-num-layers) and FP8 saved inputs."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app import catalog
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import NEMO
from app.core.layout import Layout, RunOptions, check_layout
from app.core.memory import KeptActivations, layer_activation_bytes
from app.core.model import layer_shape
from app.core.step import overlapped
from app.validation.training_runs import Row, row_layout, row_model, rule_for_row
from tests.core.conftest import make_cluster
from tests.paths import ROOT

GiB = 2**30


def _llama70b(offload: int, gpu: str = "GB200", dtype: str = "fp8") -> tuple:
    model = catalog.find_model("Llama-3-70B")
    layout = Layout(
        tp=1, pp=1, dp=64, zero=3, micro_batch=2, global_batch=128, dtype=dtype, offload_layers=offload
    )  # type: ignore[arg-type]
    cluster = make_cluster(
        gpu,
        16 if gpu.startswith("GB") else 8,
        gpus_per_node=4 if gpu.startswith("GB") else 8,
        gpu_scaleup=True,
    )
    return (
        model,
        cluster,
        layout,
        estimate(model, cluster, layout, 8192, options=EstimateOptions(framework=NEMO)),
    )


def test_offloaded_layers_leave_hbm_except_the_one_in_flight() -> None:
    model, _, _, base = _llama70b(0)
    *_, off = _llama70b(40)
    fw = NEMO.for_dtype("fp8")
    per_layer = layer_activation_bytes(
        layer_shape(model), 2 * 8192, 8192, KeptActivations(1, False, "none", True, False, fw)
    )
    # 80 layers resident without offloading, 80 − 40 + 1 with it
    act_base = base.memory.most_loaded.breakdown["activations"]
    act_off = off.memory.most_loaded.breakdown["activations"]
    assert act_base - act_off == pytest.approx(39 * per_layer, rel=1e-9)
    assert off.memory.most_loaded.total_bytes < base.memory.most_loaded.total_bytes - 100 * GiB


def test_offload_copies_hide_behind_compute_and_expose_only_the_excess() -> None:
    model, cluster, layout, est = _llama70b(40)
    fw = NEMO.for_dtype("fp8")
    per_layer = float(
        layer_activation_bytes(
            layer_shape(model), 2 * 8192, 8192, KeptActivations(1, False, "none", True, False, fw)
        )
    )
    copy = per_layer / cluster.gpu.host_link_bytes_per_s
    stage = est.step.stages[0]
    fwd, bwd = (
        stage.forward_compute / 80,
        stage.backward_compute / 80,
    )  # logits are on the last stage too: bound
    expected_max = 40 * (overlapped(copy, 0.9 * fwd, 0.0) + overlapped(copy, 0.9 * bwd, 0.0))
    assert 0 < stage.offload <= expected_max
    assert est.step.breakdown["offload"] == pytest.approx(stage.offload * layout.num_microbatches)
    assert sum(est.step.breakdown.values()) == pytest.approx(est.step.total_s)
    # the same offload over PCIe Gen5 (64 GB/s) instead of NVLink-C2C (225 GB/s) exposes more
    *_, pcie = _llama70b(40, gpu="B200")
    assert pcie.step.breakdown["offload"] > est.step.breakdown["offload"]
    *_, none = _llama70b(0)
    assert none.step.breakdown["offload"] == 0.0


def test_offload_is_checked_like_megatron_core() -> None:
    model = catalog.find_model("Llama-3-70B")
    cluster = make_cluster("H100-SXM", 8, gpu_scaleup=True)
    ok = Layout(tp=8, pp=1, dp=8, micro_batch=1, global_batch=64, offload_layers=79)
    check_layout(model, cluster, ok, 8192)
    bad = [
        Layout(tp=8, pp=2, dp=4, micro_batch=1, global_batch=64, offload_layers=10),
        Layout(tp=8, pp=1, dp=8, micro_batch=1, global_batch=64, offload_layers=10, recompute="full"),
        Layout(tp=8, pp=1, dp=8, micro_batch=1, global_batch=64, offload_layers=80),
    ]
    for layout in bad:
        with pytest.raises(SpecError) as info:
            check_layout(model, cluster, layout, 8192)
        assert "layout.offload_layers" in str(info.value)


def _body(**layout: object) -> dict:
    return {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "GB200", "nodes": 16, "gpus_per_node": 4},
        "layout": {"tp": 1, "zero": 3, "micro_batch": 2, "global_batch": 128, "dtype": "fp8", **layout},
        "training": {"seq_len": 8192},
        "framework": "nemo",
    }


def test_api_takes_offload_layers_and_rejects_it_with_pipelines(client: TestClient) -> None:
    plain = client.post("/api/v1/estimate", json=_body())
    off = client.post("/api/v1/estimate", json=_body(offload_layers=40))
    assert plain.status_code == 200 and off.status_code == 200, off.text
    peak = lambda r: r.json()["memory"]["peak_bytes"]  # noqa: E731
    assert peak(off) < peak(plain)
    assert off.json()["step"]["breakdown_s"]["offload"] > 0
    names = [a["name"] for a in off.json()["assumptions"]]
    assert "activation offloading" in names
    r = client.post("/api/v1/estimate", json=_body(offload_layers=40, pp=2))
    assert r.status_code == 422 and "offload_layers" in r.text and "pp = 1" in r.text
    r = client.post("/api/v1/estimate", json=_body(offload_layers=-1))
    assert r.status_code == 422 and "offload_layers" in r.text


def _row(notes: str, pp: str = "1", recompute: str = "") -> Row:
    cells = {
        "source": "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md",
        "model_name": "LLAMA3-70B",
        "layers": "80",
        "hidden": "8192",
        "heads": "64",
        "kv_heads": "8",
        "ffn_hidden": "28672",
        "vocab": "128256",
        "seq_len": "8192",
        "gpu": "GB200 (DGX-GB200)",
        "num_gpus": "64",
        "tp": "1",
        "pp": pp,
        "dp": str(64 // int(pp)),
        "cp": "1",
        "zero_stage": "3",
        "recompute": recompute,
        "sequence_parallel": "",
        "micro_batch": "2",
        "global_batch": "256",
        "interleave_v": "1",
        "dtype": "fp8",
        "measured_metric": "tokens_per_s_per_gpu",
        "measured_value": "4040",
        "notes": notes,
    }
    return Row(1, cells)


def test_replay_reads_the_recipe_offload_and_drops_one_megatron_would_refuse() -> None:
    def layout_of(row: Row) -> tuple[Layout, list[str]]:
        rule = rule_for_row(row)
        return row_layout(row, row_model(row, rule), rule, 64)

    layout, _ = layout_of(_row("Recipe: use_megatron_fsdp=True, cpu_offloading_num_layers=40."))
    assert layout.offload_layers == 40
    layout, _ = layout_of(_row("run with --cpu-offloading-num-layers 12"))
    assert layout.offload_layers == 12
    layout, _ = layout_of(_row("no offloading stated"))
    assert layout.offload_layers == 0
    layout, defaults = layout_of(_row("cpu_offloading_num_layers=40", pp="2"))
    assert layout.offload_layers == 0 and any("offloading" in d for d in defaults)


def test_cli_estimate_runs_the_offload_example(tmp_path) -> None:
    import json

    from tests.cli_support import clusterplan

    example = ROOT / "examples" / "llama3-70b-64xgb200-fsdp-offload.json"
    run = clusterplan("estimate", str(example), "--json", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    flags = {a["name"]: a["value"] for a in doc["assumptions"]}
    assert flags["activation offloading"] == 50
    assert flags["saved GEMM inputs"] == 1.0
    assert doc["step"]["breakdown_s"]["offload"] > 0


def test_planner_offloads_only_when_asked_and_finds_fsdp_layouts_that_fit() -> None:
    from app.core.planner import Constraints, SearchProblem, plan

    model = catalog.find_model("Llama-3-70B")
    cluster = make_cluster("GB200", 4, gpus_per_node=4, gpu_scaleup=True)
    only_fsdp = dict(pp=(1,), tp=(1,), zero=(3,), recompute=("none",), micro_batch=(2,), max_cp=1)
    opts = EstimateOptions(framework=NEMO)
    without = plan(
        SearchProblem(model, cluster, 8192, 256, run=RunOptions(dtype="fp8"), options=opts),
        constraints=Constraints(**only_fsdp),
    )
    assert without.best is None  # 80 layers of activations at micro-batch 2 do not fit in 186 GiB
    with_offload = plan(
        SearchProblem(model, cluster, 8192, 256, run=RunOptions(dtype="fp8"), options=opts),
        constraints=Constraints(**only_fsdp, activation_offload=True),
    )
    best = with_offload.best
    assert best is not None and best.layout.offload_layers in (40, 60)
    assert best.step_breakdown_s["offload"] >= 0 and best.headroom_bytes >= 0


def test_api_plan_takes_activation_offload(client: TestClient) -> None:
    body = {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "GB200", "nodes": 16, "gpus_per_node": 4},
        "training": {"seq_len": 8192},
        "global_batch": 256,
        "dtype": "fp8",
        "framework": "nemo",
        "top": 3,
        "constraints": {
            "pp": [1],
            "tp": [1],
            "zero": [3],
            "recompute": ["none"],
            "micro_batch": [2],
            "max_cp": 1,
        },
    }
    plain = client.post("/api/v1/plan", json=body)
    assert plain.status_code == 200 and plain.json()["best"] is None, plain.text
    body["constraints"]["activation_offload"] = True
    offload = client.post("/api/v1/plan", json=body)
    assert offload.status_code == 200, offload.text
    assert offload.json()["best"]["layout"]["offload_layers"] > 0


def _qwen235(modules: tuple[str, ...] = (), **extra: object) -> tuple:
    model = catalog.find_model("Qwen3-235B-A22B")
    cluster = make_cluster("GB200", 64, gpus_per_node=4, gpu_scaleup=True)
    layout = Layout(
        tp=1,
        pp=2,
        dp=128,
        ep=64,
        etp=1,
        micro_batch=3,
        global_batch=3072,
        recompute="selective",
        recompute_modules=("moe_act", "layernorm"),
        dtype="fp8",
        offload_modules=modules,
        **extra,  # type: ignore[arg-type]
    )
    return model, cluster, layout


def test_fine_grained_offload_moves_the_named_module_inputs_by_hand() -> None:
    from app.core.framework import MEGATRON_CORE
    from app.core.memory import offloaded_activation_bytes

    shape = layer_shape(catalog.find_model("Qwen3-235B-A22B"))
    fw = MEGATRON_CORE.for_dtype("fp8")
    tokens = 3 * 4096
    moved = offloaded_activation_bytes(shape, tokens, 1, False, True, fw, ("expert_fc1", "moe_act"))
    # expert_fc1: top-k 1-byte FP8 copies of each token; moe_act: the top-k 16-bit activation inputs (gate + up)
    k, h = shape.experts_per_token, shape.hidden
    assert moved == pytest.approx((1.0 * k * h + 2.0 * k * shape.expert_in_width) * tokens)
    # dense layers have no expert modules; a recomputed MoE layer keeps no expert inputs to move
    assert offloaded_activation_bytes(shape, tokens, 1, False, False, fw, ("expert_fc1", "moe_act")) == 0
    assert offloaded_activation_bytes(shape, tokens, 1, False, True, fw, ("expert_fc1",), ("moe",)) == 0
    # norms: the residual-stream inputs, sequence-parallel shards under SP
    assert offloaded_activation_bytes(
        shape, tokens, 4, True, True, fw, ("attn_norm", "mlp_norm")
    ) == pytest.approx(2 * 2.0 * h * tokens / 4)


def test_fine_grained_offload_frees_all_but_one_layer_of_moved_activations() -> None:
    model, cluster, layout = _qwen235()
    base = estimate(model, cluster, layout, 4096)
    *_, off_layout = _qwen235(("expert_fc1", "moe_act"))
    off = estimate(model, cluster, off_layout, 4096)
    saved = base.memory.stages[0].breakdown["activations"] - off.memory.stages[0].breakdown["activations"]
    assert saved > 40 * GiB
    assert off.step.breakdown["offload"] >= 0 and sum(off.step.breakdown.values()) == pytest.approx(
        off.step.total_s
    )
    # over PCIe the same copies expose more time than over NVLink-C2C
    pcie = estimate(model, make_cluster("B200", 32, gpu_scaleup=True), off_layout, 4096)
    assert pcie.step.breakdown["offload"] > off.step.breakdown["offload"]


def test_fine_grained_offload_rules() -> None:
    model, cluster, _ = _qwen235()
    dense = catalog.find_model("Llama-3-70B")
    cases = [
        (model, Layout(tp=1, pp=2, dp=128, ep=64, micro_batch=1, global_batch=256, offload_modules=("qkv",))),
        (
            model,
            Layout(
                tp=1,
                pp=2,
                dp=128,
                ep=64,
                micro_batch=1,
                global_batch=256,
                recompute="full",
                offload_modules=("expert_fc1",),
            ),
        ),
        (
            model,
            Layout(
                tp=1,
                pp=1,
                dp=256,
                ep=64,
                micro_batch=1,
                global_batch=256,
                offload_layers=10,
                offload_modules=("expert_fc1",),
            ),
        ),
        (dense, Layout(tp=4, pp=4, dp=16, micro_batch=1, global_batch=256, offload_modules=("expert_fc1",))),
    ]
    for m, layout in cases:
        with pytest.raises(SpecError) as info:
            check_layout(m, cluster, layout, 4096)
        assert "layout.offload_modules" in str(info.value), layout


def test_api_and_replay_take_offload_modules(client: TestClient) -> None:
    from app.validation.training_runs import offload_modules_from_notes

    body = {
        "model": "Qwen3-235B-A22B",
        "cluster": {"gpu": "GB200", "nodes": 64, "gpus_per_node": 4},
        "layout": {
            "tp": 1,
            "pp": 2,
            "ep": 64,
            "etp": 1,
            "micro_batch": 1,
            "global_batch": 2048,
            "dtype": "fp8",
            "recompute": "selective",
            "recompute_modules": ["moe_act"],
            "offload_modules": ["expert_fc1"],
        },
        "training": {"seq_len": 4096},
    }
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    body["layout"]["offload_modules"] = ["qkv_everything"]
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422 and "offload_modules" in r.text
    assert offload_modules_from_notes(
        "--fine-grained-activation-offloading --offload-modules expert_fc1 moe_act"
    ) == (
        "expert_fc1",
        "moe_act",
    )
    assert offload_modules_from_notes("recompute modules moe_act") == ()


def test_offloaded_activations_must_fit_the_host_memory_per_gpu() -> None:
    from dataclasses import replace

    from app.core.planner import Constraints, SearchProblem, plan

    model, cluster, _, off = _llama70b(40)
    fw = NEMO.for_dtype("fp8")
    per_layer = layer_activation_bytes(
        layer_shape(model), 2 * 8192, 8192, KeptActivations(1, False, "none", True, False, fw)
    )
    # the 40 offloaded layers' activations sit in host memory: 40 × 3.6 GiB of GB200's 240 GiB per GPU
    # (one Grace with 480 GB LPDDR5X per two GPUs)
    assert cluster.gpu.host_memory_bytes == 240 * GiB
    assert off.memory.host_bytes == pytest.approx(40 * per_layer, rel=1e-9)
    assert off.memory.host_fits
    assert any("host memory" in note for note in off.memory.notes)
    *_, none = _llama70b(0)
    assert none.memory.host_bytes == 0 and none.memory.host_fits
    # 70 layers would need 254 GiB of host memory per GPU: HBM has room, the host does not
    *_, many = _llama70b(70)
    assert many.memory.host_bytes > 240 * GiB and many.memory.margin_bytes > 0
    assert not many.memory.host_fits and not many.memory.fits
    # an unknown host capacity (a catalog entry without host_memory_gib) is not checked
    unknown = replace(cluster, gpu=replace(cluster.gpu, host_memory_bytes=0.0))
    layout = many.layout
    est = estimate(model, unknown, layout, 8192, options=EstimateOptions(framework=NEMO))
    assert est.memory.host_fits and est.memory.host_capacity_bytes == 0

    # the planner drops offloaded layouts the host cannot hold and counts them
    small_host = replace(cluster, gpu=replace(cluster.gpu, host_memory_bytes=100 * GiB))
    only_fsdp = dict(pp=(1,), tp=(1,), zero=(3,), recompute=("none",), micro_batch=(2,), max_cp=1)
    res = plan(
        SearchProblem(
            model,
            replace(small_host, num_nodes=16),
            8192,
            256,
            run=RunOptions(dtype="fp8"),
            options=EstimateOptions(framework=NEMO),
        ),
        constraints=Constraints(**only_fsdp, activation_offload=True),
    )
    assert res.rejections["host_memory"] > 0
    assert (
        res.best is None
    )  # 20 offloaded layers still leave too much in HBM; 40 or more need > 100 GiB of host
