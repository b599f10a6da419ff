"""FP8 parameters (Layout.fp8_param_gather: Megatron-core --fp8-param-gather, NeMo fp8_params, torchao's FSDP2
float8 all-gather): working weights and the parameter all-gather at 1 B per parameter, everything else unchanged,
and the checks that keep it to the runs that can have it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.catalog import find_gpu, find_model
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_CORE, TORCHTITAN, Framework
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, RunOptions
from app.validation.training_runs import Row, estimate_row, fp8_params_from_notes, load_rows

HELDOUT = "tests/data/training_runs_heldout.csv"


def _run(layout: Layout, fw: Framework = MEGATRON_CORE, nodes: int = 8) -> Any:
    model = find_model("Llama-3-70B")
    cluster = ClusterSpec(
        gpu=find_gpu("H100-SXM"), num_nodes=nodes, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )
    return estimate(model, cluster, layout, 8192, options=EstimateOptions(framework=fw))


MEGATRON_LAYOUT = Layout(
    tp=4, pp=4, vp=5, dp=4, sequence_parallel=True, zero=1, micro_batch=1, global_batch=128, dtype="fp8"
)


def test_fp8_parameters_halve_the_working_weights_and_nothing_else() -> None:
    plain = _run(MEGATRON_LAYOUT)
    fp8 = _run(replace(MEGATRON_LAYOUT, fp8_param_gather=True))
    for s_plain, s_fp8 in zip(plain.memory.stages, fp8.memory.stages, strict=True):
        assert s_fp8.breakdown["weights"] == pytest.approx(s_plain.breakdown["weights"] / 2)
        for key in ("gradients", "master_weights", "optimizer_states", "activations", "logits", "workspace"):
            assert s_fp8.breakdown[key] == pytest.approx(s_plain.breakdown[key]), key
        # 16-bit weights of 70.6 B / 16 model-parallel GPUs: 1 B per parameter saved, plus its fragmentation share
        saved = s_plain.total_bytes - s_fp8.total_bytes
        assert saved == pytest.approx(s_plain.params * (1 + MEGATRON_CORE.fragmentation_fraction), rel=1e-9)
    assert fp8.memory.peak_bytes < plain.memory.peak_bytes
    # the bytes-per-parameter assumption drops from 18 to 17 and the FP8-parameter assumption says what it covers
    by_name = {a.name: a for a in fp8.assumptions}
    assert by_name["bytes per parameter (weights+grads+master+Adam)"].value == pytest.approx(17.0)
    assert by_name["FP8 parameters"].value == 1.0
    assert any("FP8 parameters" in n for n in fp8.memory.notes)
    assert not any(a.name == "FP8 parameters" for a in plain.assumptions)


def test_the_parameter_all_gather_moves_half_the_bytes() -> None:
    # a data-parallel group across nodes with nothing to hide the all-gather behind: the time follows the bytes
    layout = Layout(
        tp=8, pp=1, dp=8, sequence_parallel=True, zero=1, micro_batch=1, global_batch=8, dtype="fp8"
    )
    exposed = MEGATRON_CORE.with_(param_gather_overlap=0.0, dp_overlap=0.0)
    plain, fp8 = _run(layout, exposed), _run(replace(layout, fp8_param_gather=True), exposed)
    assert 0 < fp8.step.breakdown["dp_comm"] < plain.step.breakdown["dp_comm"]
    for key in ("forward_compute", "backward_compute", "tp_comm", "optimizer"):
        assert fp8.step.breakdown[key] == pytest.approx(plain.step.breakdown[key]), key


def test_fsdp_float8_all_gather_halves_the_gathered_units_and_their_traffic() -> None:
    layout = Layout(tp=1, pp=1, dp=64, zero=3, recompute="full", micro_batch=1, global_batch=64, dtype="fp8")
    plain, fp8 = _run(layout, TORCHTITAN), _run(replace(layout, fp8_param_gather=True), TORCHTITAN)
    # FSDP2 keeps no sharded 16-bit copy either way; the gathered units' weights (not their gradients) halve
    assert plain.memory.stages[0].breakdown["weights"] == fp8.memory.stages[0].breakdown["weights"] == 0.0
    params = plain.memory.stages[0].params
    per_layer = params / 80
    saved = plain.memory.stages[0].breakdown["comm_buffers"] - fp8.memory.stages[0].breakdown["comm_buffers"]
    assert saved == pytest.approx(2 * per_layer * (2.0 - 1.0), rel=0.02)
    assert fp8.step.breakdown["zero3_comm"] < plain.step.breakdown["zero3_comm"]


@pytest.mark.parametrize(
    ("layout", "fw", "message"),
    [
        (replace(MEGATRON_LAYOUT, dtype="bf16"), MEGATRON_CORE, "need the fp8 compute dtype"),
        (replace(MEGATRON_LAYOUT, dtype="fp4"), MEGATRON_CORE, "need the fp8 compute dtype"),
        (replace(MEGATRON_LAYOUT, zero=0), MEGATRON_CORE, "zero ≥ 1"),
        (MEGATRON_LAYOUT, DEEPSPEED, "has no FP8 parameters"),
        (MEGATRON_LAYOUT, TORCHTITAN, "FSDP only"),
    ],
)
def test_fp8_parameters_are_refused_where_no_framework_has_them(
    layout: Layout, fw: Framework, message: str
) -> None:
    gpu = "GB300" if layout.dtype == "fp4" else "H100-SXM"
    cluster = ClusterSpec(gpu=find_gpu(gpu), num_nodes=8, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400"))
    with pytest.raises(SpecError) as err:
        estimate(
            find_model("Llama-3-70B"),
            cluster,
            replace(layout, fp8_param_gather=True),
            8192,
            options=EstimateOptions(framework=fw),
        )
    problems = [p for p in err.value.problems if p.field == "layout.fp8_param_gather"]
    assert problems and any(message in p.message for p in problems), err.value.problems


def test_the_api_takes_fp8_parameters_and_names_the_field_it_refuses(client: Any) -> None:
    scenario = {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "H100-SXM", "nodes": 8, "gpus_per_node": 8},
        "layout": {"tp": 4, "pp": 4, "vp": 5, "dp": 4, "sequence_parallel": True, "global_batch": 128,
                   "dtype": "fp8"},
        "training": {"seq_len": 8192},
    }  # fmt: skip
    plain = client.post("/api/v1/estimate", json=scenario)
    scenario["layout"]["fp8_param_gather"] = True
    fp8 = client.post("/api/v1/estimate", json=scenario)
    assert plain.status_code == 200 and fp8.status_code == 200, fp8.text
    assert fp8.json()["memory"]["peak_bytes"] < plain.json()["memory"]["peak_bytes"]
    scenario["layout"]["dtype"] = "bf16"
    bad = client.post("/api/v1/estimate", json=scenario)
    assert bad.status_code == 422
    assert any(d["loc"][-1] == "fp8_param_gather" for d in bad.json()["detail"]), bad.text


@pytest.mark.parametrize(
    ("notes", "expected"),
    [
        ("torch.compile + Float8 linears with FSDP float8 all-gather, precompute_float8_dynamic_scale", True),
        ("BF16 optimizer states (precision-aware optimizer), FP8 param gather.", True),
        ("--fp8-param-gather --use-distributed-optimizer", True),
        ("model.fp8_params=True", True),
        ("fp8_params: false", False),
        ("Float8 linears; rest bf16", False),
    ],
)
def test_the_replay_reads_fp8_parameters_from_the_notes(notes: str, expected: bool) -> None:
    assert fp8_params_from_notes(notes) is expected


def test_torchtitans_float8_all_gather_rows_are_replayed_with_fp8_parameters() -> None:
    rows = load_rows(HELDOUT)
    flagged = [r for r in rows if fp8_params_from_notes(r.get("notes"))]
    assert len(flagged) == 4  # torchtitan's Llama 3.1 8B on 4 and 8 nodes: tokens/s and memory each
    for row in flagged:
        modelled = estimate_row(row, row.get("measured_metric"))
        assert modelled.layout.fp8_param_gather and modelled.layout.zero == 3
        plain = estimate_row(Row(row.index, {**row.data, "notes": ""}), row.get("measured_metric"))
        assert modelled.estimate.memory.peak_bytes < plain.estimate.memory.peak_bytes
    # a framework without FP8 parameters keeps 16-bit ones and says why
    row = flagged[0]
    deepspeed = Row(row.index, {**row.data, "source": "VIA-Research/vTrain", "zero_stage": "1"})
    modelled = estimate_row(deepspeed, deepspeed.get("measured_metric"))
    assert not modelled.layout.fp8_param_gather
    assert any("FP8 parameters in the notes not modelled" in d for d in modelled.defaults)


@pytest.mark.parametrize(
    ("name", "gpu_name", "nodes", "gpn", "fw"),
    [
        ("Llama-3-70B", "H100-SXM", 4, 8, MEGATRON_CORE),
        ("Mixtral-8x7B", "H100-SXM", 4, 8, MEGATRON_CORE),
        ("Llama-3.1-8B", "H100-SXM", 2, 8, TORCHTITAN),
    ],
)
def test_the_vectorised_planner_gives_the_scalar_estimate_with_fp8_parameters(
    name: str, gpu_name: str, nodes: int, gpn: int, fw: Framework
) -> None:
    import numpy as np

    from app.core.planner import Constraints, enumerate_layouts
    from app.core.planner_eval import evaluate
    from app.core.step import STEP_COMPONENTS
    from tests.core.test_planner_vectorised import _close, _layout

    model = find_model(name)
    cluster = ClusterSpec(
        gpu=find_gpu(gpu_name), num_nodes=nodes, gpus_per_node=gpn, fabric=find_fabric("ib-ndr-8x400")
    )
    space = enumerate_layouts(model, cluster, 4096, 128, Constraints(max_micro_batch=2), True)
    allowed = space.rows.zero == 3 if fw.fp8_param_gather == "fsdp" else space.rows.zero >= 1
    rng = np.random.default_rng(5)
    idx = np.nonzero(allowed)[0]
    rows = space.rows.take(rng.choice(idx, size=min(40, idx.size), replace=False))
    opts = EstimateOptions(framework=fw)
    ev = evaluate(model, cluster, rows, 4096, 128, RunOptions("fp8", fp8_param_gather=True), options=opts)
    plain = evaluate(model, cluster, rows, 4096, 128, RunOptions("fp8"), options=opts)
    assert (ev.peak_bytes < plain.peak_bytes).all()
    for j in range(len(rows)):
        layout = replace(_layout(rows, j, 128, "fp8", True, fw), fp8_param_gather=True)
        est = estimate(model, cluster, layout, 4096, options=opts)
        assert _close(float(ev.peak_bytes[j]), est.memory.peak_bytes), (layout, "peak")
        for key in STEP_COMPONENTS:
            assert _close(float(ev.step[key][j]), est.step.breakdown[key]), (layout, key)


def test_the_planner_searches_with_fp8_parameters_and_rejects_the_stages_without_them() -> None:
    from app.core.planner import Constraints, SearchProblem, plan

    model = find_model("Llama-3-70B")
    cluster = ClusterSpec(
        gpu=find_gpu("H100-SXM"), num_nodes=8, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )
    fp8 = plan(
        SearchProblem(model, cluster, 8192, 128, run=RunOptions(dtype="fp8", fp8_param_gather=True)), top=5
    )
    plain = plan(SearchProblem(model, cluster, 8192, 128, run=RunOptions(dtype="fp8")), top=5)
    assert fp8.best is not None and plain.best is not None
    assert fp8.rejections["fp8_params_need_sharding"] > 0
    assert fp8.enumerated_layouts == fp8.feasible_layouts + sum(fp8.rejections.values())
    assert all(p.layout.fp8_param_gather and p.layout.zero >= 1 for p in fp8.top)
    # among the layouts that can keep FP8 parameters, 1-byte weights let more of them fit
    sharded = plan(
        SearchProblem(model, cluster, 8192, 128, run=RunOptions(dtype="fp8")),
        constraints=Constraints(zero=(1, 2, 3)),
        top=5,
    )
    assert fp8.feasible_layouts > sharded.feasible_layouts
    assert fp8.evaluated_layouts == sharded.evaluated_layouts
    again = estimate(model, cluster, fp8.best.layout, 8192)
    assert again.step.total_s == pytest.approx(fp8.best.step_time_s, rel=1e-9)
    with pytest.raises(SpecError) as err:
        plan(SearchProblem(model, cluster, 8192, 128, run=RunOptions(dtype="bf16", fp8_param_gather=True)))
    assert any(p.field == "fp8_param_gather" for p in err.value.problems)
    with pytest.raises(SpecError) as err:
        plan(
            SearchProblem(
                model,
                cluster,
                8192,
                128,
                run=RunOptions(dtype="fp8", fp8_param_gather=True),
                options=EstimateOptions(framework=DEEPSPEED),
            )
        )
    assert any("has no FP8 parameters" in p.message for p in err.value.problems)


def test_plan_endpoint_and_cli_take_fp8_parameters(client: Any) -> None:
    body = {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "H100-SXM", "nodes": 8, "gpus_per_node": 8},
        "training": {"seq_len": 8192, "tokens": 1e12},
        "global_batch": 128,
        "dtype": "fp8",
        "fp8_param_gather": True,
        "top": 3,
    }
    out = client.post("/api/v1/plan", json=body)
    assert out.status_code == 200, out.text
    assert out.json()["best"]["layout"]["fp8_param_gather"] is True
    assert out.json()["rejections"]["fp8_params_need_sharding"] > 0
    bad = client.post("/api/v1/plan", json={**body, "dtype": "bf16"})
    assert bad.status_code == 422 and any(d["loc"][-1] == "fp8_param_gather" for d in bad.json()["detail"])
    sizes = client.post(
        "/api/v1/plan/sizes", json={k: v for k, v in body.items() if k != "top"} | {"sizes": [32, 64]}
    )
    assert sizes.status_code == 200, sizes.text


def test_the_layouts_and_the_frameworks_problems_come_together() -> None:
    layout = replace(MEGATRON_LAYOUT, tp=3, fp8_param_gather=True, optimizer_moments_dtype="bf16")
    with pytest.raises(SpecError) as err:
        _run(layout, DEEPSPEED)
    fields = {p.field for p in err.value.problems}
    assert {"layout.tp", "layout.fp8_param_gather", "layout.optimizer_moments_dtype"} <= fields
