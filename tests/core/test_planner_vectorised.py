"""The vectorised planner gives the scalar estimator's numbers, layout by layout."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_2021, MEGATRON_CORE, NEMO, TORCHTITAN
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, RunOptions
from app.core.planner import Constraints, enumerate_layouts, layout_at
from app.core.planner_eval import evaluate
from app.core.step import STEP_COMPONENTS

REL = 1e-9
MOE_TUNED = NEMO.with_(name="nemo-deepep-a2a-overlap", moe_dispatcher="deepep", moe_a2a_overlap=True)

CASES = [
    # model, gpu, nodes, gpus/node, fabric, seq, global batch, dtype, flash, framework
    ("Llama-2-70B", "H100-SXM", 8, 8, "ib-ndr-8x400", 4096, 512, "bf16", True, MEGATRON_CORE),
    ("GPT-3-175B", "A100-80GB-SXM", 16, 8, "ib-hdr-8x200", 2048, 1536, "fp16", False, MEGATRON_2021),
    ("GPT-22B", "A100-80GB-SXM", 4, 8, "roce-8x400", 2048, 256, "bf16", False, DEEPSPEED),
    ("Llama-3-8B", "H100-SXM", 2, 8, "ethernet-tcp-100", 8192, 128, "fp8", True, NEMO),
    # NVFP4 on Blackwell Ultra: GEMMs at the FP4 rate, NVFP4 casts and 4.5-bit saved inputs
    ("Llama-3-70B", "GB300", 4, 4, "ib-ndr-8x400", 8192, 256, "fp4", True, NEMO),
    ("Mixtral-8x7B", "H100-SXM", 8, 8, "ib-ndr-8x400", 4096, 256, "bf16", True, MEGATRON_CORE),
    ("Llama-3.1-8B", "H100-SXM", 1, 4, "ib-ndr-8x400", 2048, 64, "bf16", True, MEGATRON_CORE),
    ("Llama-3.1-8B", "H100-SXM", 2, 8, "roce-8x400", 8192, 32, "bf16", True, TORCHTITAN),
    # node-deduplicating dispatch (DeepEP) and the EP all-to-all hidden behind the paired micro-batch
    ("Qwen3-30B-A3B", "H100-SXM", 4, 8, "ib-ndr-8x400", 4096, 256, "bf16", True, MOE_TUNED),
    # head dim 64 with sliding windows on Blackwell (cuDNN's measured head-dim factor)
    ("GPT-OSS-120B", "GB200", 4, 4, "ib-ndr-8x400", 4096, 256, "bf16", True, NEMO),
    # fp16 on parts whose 16-bit curve is not BF16's: Gaudi 3 (FP16 matrix peak 459 of BF16's 1677), V100 (no BF16)
    ("Llama-2-13B", "Gaudi3", 2, 8, "roce-8x400", 4096, 256, "fp16", True, MEGATRON_CORE),
    ("GPT-3-13B", "V100-SXM2-32GB", 4, 8, "ib-hdr-8x200", 2048, 512, "fp16", False, DEEPSPEED),
]


def _layout(rows, i: int, global_batch: int, dtype: str, flash: bool, fw=MEGATRON_CORE) -> Layout:
    run = RunOptions(dtype=dtype, flash_attention=flash)  # type: ignore[arg-type]
    return layout_at(rows, i, global_batch, run, fw.pipeline_reshard)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[9].name}" for c in CASES])
def test_vectorised_equals_scalar_estimate_on_random_layouts(case) -> None:
    name, gpu_name, nodes, gpn, fabric, seq, gb, dtype, flash, fw = case
    model = catalog.find_model(name)
    gpu = catalog.find_gpu(gpu_name)
    cluster = ClusterSpec(gpu=gpu, num_nodes=nodes, gpus_per_node=gpn, fabric=find_fabric(fabric))
    space = enumerate_layouts(model, cluster, seq, gb, Constraints(), flash, fw.selective_policy == "op")
    assert len(space.rows) > 50
    rng = np.random.default_rng(20240611)
    pick = rng.choice(len(space.rows), size=min(40, len(space.rows)), replace=False)
    rows = space.rows.take(pick)
    opts = EstimateOptions(framework=fw)
    ev = evaluate(model, cluster, rows, seq, gb, RunOptions(dtype, flash), options=opts)
    seen_recompute, seen_zero = set(), set()
    for j in range(len(rows)):
        layout = _layout(rows, j, gb, dtype, flash, fw)
        est = estimate(model, cluster, layout, seq, options=opts)  # raises if the layout were invalid
        seen_recompute.add(layout.recompute)
        seen_zero.add(layout.zero)
        # memory is one implementation (app.core.memory.stage_terms) evaluated on rows and on one layout: equal bits
        assert float(ev.peak_bytes[j]) == est.memory.peak_bytes, (layout, "peak")
        assert float(ev.first_stage_bytes[j]) == est.memory.stages[0].total_bytes, (layout, "stage 0")
        assert float(ev.last_stage_bytes[j]) == est.memory.stages[-1].total_bytes, (layout, "last")
        assert float(ev.host_bytes[j]) == est.memory.host_bytes, (layout, "host")
        assert (
            _close(float(ev.margin_bytes[j]), est.memory.margin_bytes)
            or abs(float(ev.margin_bytes[j]) - est.memory.margin_bytes) < 1e-6 * est.memory.hbm_bytes
        )
        for key in STEP_COMPONENTS:
            assert _close(float(ev.step[key][j]), est.step.breakdown[key]), (layout, key)
        # one implementation of every per-stage and data-parallel term (app.core.step.stage_time_parts,
        # data_parallel_times): equal bits. The bubble's mean stage differs in the last bit: the planner sums the equal
        # stages between as a product, the estimate one by one
        for key in STEP_COMPONENTS:
            if key != "pipeline_bubble":
                assert float(ev.step[key][j]) == est.step.breakdown[key], (layout, key)
        assert _close(float(ev.step_time_s[j]), est.step.total_s), layout
        assert float(ev.model_flops_per_token[j]) == est.model_flops_per_token  # one flops_per_token
        assert float(ev.hardware_flops_per_token[j]) == est.hardware_flops_per_token
        assert int(ev.num_microbatches[j]) == layout.num_microbatches
    assert len(seen_zero) >= 3 and len(seen_recompute) >= 2
    assert (rows.recompute_layers > 0).any() or (rows.pp == model.num_layers).all()


def test_every_enumerated_layout_passes_check_layout_and_counts_add_up() -> None:
    from app.core.layout import check_layout

    model = catalog.find_model("Mixtral-8x7B")
    cluster = ClusterSpec(gpu=catalog.find_gpu("H100-SXM"), num_nodes=4, gpus_per_node=8)
    space = enumerate_layouts(model, cluster, 4096, 128, Constraints(max_vp=2, max_micro_batch=2), True)
    assert space.enumerated == len(space.rows) + sum(space.rejections.values())
    assert space.rejections["gpu_count"] > 0 and space.rejections["ep_vs_model"] > 0
    for i in range(len(space.rows)):
        check_layout(model, cluster, _layout(space.rows, i, 128, "bf16", True), 4096)
    # exhaustive equality on a slice of the MoE space (ep 1-8, both pipeline schedules, partial recompute)
    small = enumerate_layouts(
        model,
        cluster,
        4096,
        128,
        Constraints(tp=(2,), zero=(1, 3), max_cp=2, max_vp=2, max_micro_batch=1),
        True,
    )
    assert 100 < len(small.rows) < 2000 and len(set(small.rows.ep.tolist())) >= 3
    # both expert mappings: legacy (etp = tp) and MoE parallel folding (etp = 1, ep may span the tp ranks)
    assert set(small.rows.etp.tolist()) == {0, 1}
    assert ((small.rows.etp == 1) & (small.rows.dp * small.rows.cp % small.rows.ep != 0)).any()
    ev = evaluate(model, cluster, small.rows, 4096, 128)
    for i in range(len(small.rows)):
        layout = _layout(small.rows, i, 128, "bf16", True)
        est = estimate(model, cluster, layout, 4096)
        assert _close(float(ev.peak_bytes[i]), est.memory.peak_bytes), layout
        assert _close(float(ev.step_time_s[i]), est.step.total_s), layout


def _assert_offloaded_rows_match(model, cluster, rows, seq: int, dtype: str, opts: EstimateOptions) -> list:
    """The vectorised evaluation of offloading rows equals the scalar estimate: memory, host memory and every step
    component (global batch 64); returns the scalar estimates."""
    ev = evaluate(model, cluster, rows, seq, 64, RunOptions(dtype), options=opts)
    estimates = []
    for j in range(len(rows)):
        layout = _layout(rows, j, 64, dtype, True)
        est = estimate(model, cluster, layout, seq, options=opts)
        assert _close(float(ev.peak_bytes[j]), est.memory.peak_bytes), (layout, "peak")
        assert ev.host_bytes is not None and est.memory.host_bytes > 0
        assert _close(float(ev.host_bytes[j]), est.memory.host_bytes), (layout, "host")
        assert bool(ev.host_fits[j]) == est.memory.host_fits, layout
        for key in STEP_COMPONENTS:
            assert _close(float(ev.step[key][j]), est.step.breakdown[key]), (layout, key)
        assert _close(float(ev.step_time_s[j]), est.step.total_s), layout
        estimates.append(est)
    return estimates


@pytest.mark.parametrize(
    ("name", "gpu_name", "nodes", "gpn", "dtype", "fw"),
    [
        ("Llama-3-70B", "GB200", 4, 4, "fp8", NEMO),
        ("Llama-3-70B", "GB200", 4, 4, "fp4", NEMO),
        ("Mixtral-8x7B", "H100-SXM", 2, 8, "bf16", MEGATRON_CORE),
    ],
)
def test_vectorised_equals_scalar_with_activation_offload(name, gpu_name, nodes, gpn, dtype, fw) -> None:
    model = catalog.find_model(name)
    cluster = ClusterSpec(
        gpu=catalog.find_gpu(gpu_name), num_nodes=nodes, gpus_per_node=gpn, fabric=find_fabric("ib-ndr-8x400")
    )
    constraints = Constraints(activation_offload=True, max_vp=2, max_micro_batch=2)
    space = enumerate_layouts(model, cluster, 8192, 64, constraints, True)
    offloaded = np.nonzero(space.rows.offload_layers > 0)[0]
    assert offloaded.size > 10
    # only where Megatron-core allows it: one pipeline stage, no recompute
    assert (space.rows.pp[offloaded] == 1).all() and (space.rows.recompute[offloaded] == 0).all()
    rng = np.random.default_rng(7)
    pick = rng.choice(offloaded, size=min(30, offloaded.size), replace=False)
    rows = space.rows.take(pick)
    estimates = _assert_offloaded_rows_match(model, cluster, rows, 8192, dtype, EstimateOptions(framework=fw))
    assert any(est.step.breakdown["offload"] > 0 for est in estimates)
    # without the flag the planner offloads nothing
    plain = enumerate_layouts(model, cluster, 8192, 64, Constraints(max_vp=2, max_micro_batch=2), True)
    assert (plain.rows.offload_layers == 0).all()


@pytest.mark.parametrize(
    ("name", "gpu_name", "nodes", "gpn", "dtype", "fw"),
    [
        ("Llama-3-70B", "GB200", 4, 4, "bf16", NEMO),
        ("Mixtral-8x7B", "H100-SXM", 2, 8, "bf16", MEGATRON_CORE),
        ("GPT-22B", "A100-80GB-SXM", 2, 8, "bf16", DEEPSPEED),
    ],
)
def test_vectorised_equals_scalar_with_optimizer_offload(name, gpu_name, nodes, gpn, dtype, fw) -> None:
    model = catalog.find_model(name)
    cluster = ClusterSpec(
        gpu=catalog.find_gpu(gpu_name), num_nodes=nodes, gpus_per_node=gpn, fabric=find_fabric("ib-ndr-8x400")
    )
    constraints = Constraints(optimizer_offload=True, activation_offload=True, max_vp=2, max_micro_batch=2)
    space = enumerate_layouts(model, cluster, 4096, 64, constraints, True)
    moved = np.nonzero(space.rows.optimizer_offload > 0)[0]
    assert moved.size > 10
    # ZeRO 0-2 only (Megatron-core's HybridDeviceOptimizer), at the planner's shares
    assert (space.rows.zero[moved] < 3).all()
    assert set(space.rows.optimizer_offload[moved].tolist()) == {0.5, 1.0}
    rng = np.random.default_rng(11)
    pick = rng.choice(moved, size=min(40, moved.size), replace=False)
    rows = space.rows.take(pick)
    assert (rows.pp > 1).any()  # stages with and without the embedding hold different shards
    _assert_offloaded_rows_match(model, cluster, rows, 4096, dtype, EstimateOptions(framework=fw))
    plain = enumerate_layouts(model, cluster, 4096, 64, Constraints(max_vp=2, max_micro_batch=2), True)
    assert (plain.rows.optimizer_offload == 0).all()


@pytest.mark.parametrize(
    ("name", "gpu_name", "nodes", "gpn", "dtype", "bf16", "fw"),
    [
        # NVIDIA's NVFP4 recipe: ~15 % of the layers 16-bit, most at the end (they spill over several stages)
        ("Llama-3-70B", "GB300", 4, 4, "fp4", (2, 10), NEMO),
        # Megatron-Bridge's FP8 current-scaling default: the first and the last layer
        ("Llama-3.1-8B", "H100-SXM", 2, 8, "fp8", (1, 1), MEGATRON_CORE),
        # an MoE model, end layers only
        ("Mixtral-8x7B", "H100-SXM", 4, 8, "fp8", (0, 6), MEGATRON_CORE),
    ],
)
def test_vectorised_equals_scalar_with_16_bit_layers(name, gpu_name, nodes, gpn, dtype, bf16, fw) -> None:
    model = catalog.find_model(name)
    cluster = ClusterSpec(
        gpu=catalog.find_gpu(gpu_name), num_nodes=nodes, gpus_per_node=gpn, fabric=find_fabric("ib-ndr-8x400")
    )
    space = enumerate_layouts(model, cluster, 4096, 128, Constraints(max_micro_batch=2), True)
    rng = np.random.default_rng(11)
    # rows with several stages between the ends, where the stages differ by their 16-bit layers
    deep = np.nonzero(space.rows.pp >= 4)[0]
    pick = np.concatenate(
        [rng.choice(deep, size=min(30, deep.size), replace=False), rng.choice(len(space.rows), 10)]
    )
    rows = space.rows.take(pick)
    opts = EstimateOptions(framework=fw)
    ev = evaluate(model, cluster, rows, 4096, 128, RunOptions(dtype, bf16_layers=bf16), options=opts)
    plain = evaluate(model, cluster, rows, 4096, 128, RunOptions(dtype), options=opts)
    assert (ev.step_time_s >= plain.step_time_s).all() and (ev.step_time_s > plain.step_time_s).any()
    for j in range(len(rows)):
        layout = replace(
            _layout(rows, j, 128, dtype, True), bf16_first_layers=bf16[0], bf16_last_layers=bf16[1]
        )
        est = estimate(model, cluster, layout, 4096, options=opts)
        assert _close(float(ev.peak_bytes[j]), est.memory.peak_bytes), (layout, "peak")
        for key in STEP_COMPONENTS:
            assert _close(float(ev.step[key][j]), est.step.breakdown[key]), (layout, key)
        assert _close(float(ev.step_time_s[j]), est.step.total_s), layout


def test_the_planner_keeps_the_16_bit_layers_in_every_layout_it_lists() -> None:
    from app.core.planner import SearchProblem, plan

    model = catalog.find_model("Llama-3-70B")
    cluster = ClusterSpec(
        gpu=catalog.find_gpu("GB300"), num_nodes=16, gpus_per_node=4, fabric=find_fabric("ib-ndr-8x400")
    )
    with_ends = plan(
        SearchProblem(model, cluster, 8192, 256, run=RunOptions(dtype="fp4", bf16_layers=(2, 10))), top=5
    )
    plain = plan(SearchProblem(model, cluster, 8192, 256, run=RunOptions(dtype="fp4")), top=5)
    assert with_ends.best is not None and plain.best is not None
    assert (with_ends.best.layout.bf16_first_layers, with_ends.best.layout.bf16_last_layers) == (2, 10)
    assert with_ends.best.step_time_s > plain.best.step_time_s
    # the listed layout re-estimates to the same step time
    again = estimate(model, cluster, with_ends.best.layout, 8192)
    assert _close(again.step.total_s, with_ends.best.step_time_s)


@pytest.mark.parametrize(
    ("name", "recompute_modules", "offload_modules"),
    [
        # a dense model: the norms and the MLP re-run, the norm inputs and Q/K/V offloaded
        ("Llama-3-8B", ("layernorm", "mlp"), ("attn_norm", "core_attn", "mlp_norm")),
        # a MoE model: the experts re-run (their all-to-all again), the expert inputs offloaded
        ("Mixtral-8x7B", ("moe", "layernorm"), ("expert_fc1", "moe_act", "attn_proj")),
    ],
)
def test_vectorised_equals_scalar_with_recompute_and_offload_modules(
    name, recompute_modules, offload_modules
) -> None:
    model = catalog.find_model(name)
    cluster = ClusterSpec(
        gpu=catalog.find_gpu("H100-SXM"), num_nodes=2, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )
    # selective recompute differs from none under flash attention once it re-runs more than core attention
    space = enumerate_layouts(model, cluster, 4096, 64, Constraints(max_vp=2, max_micro_batch=2), True, True)
    usable = np.nonzero((space.rows.recompute != 2) & (space.rows.offload_layers == 0))[0]
    rng = np.random.default_rng(5)
    rows = space.rows.take(rng.choice(usable, size=min(40, usable.size), replace=False))
    assert (rows.recompute == 1).any() and (rows.recompute == 0).any()
    modules = {"recompute_modules": recompute_modules, "offload_modules": offload_modules}
    ev = evaluate(model, cluster, rows, 4096, 64, RunOptions(**modules))
    plain = evaluate(model, cluster, rows, 4096, 64)
    selective = rows.recompute == 1
    # re-running more saves memory on the selective rows; offloading saves it on every row
    assert (
        (ev.peak_bytes < plain.peak_bytes).all() and ev.host_bytes is not None and (ev.host_bytes > 0).all()
    )
    assert (ev.step["recompute"][selective] > plain.step["recompute"][selective]).all()
    for j in range(len(rows)):
        layout = replace(
            _layout(rows, j, 64, "bf16", True),
            recompute_modules=recompute_modules if selective[j] else (),
            offload_modules=offload_modules,
        )
        est = estimate(model, cluster, layout, 4096)
        assert float(ev.peak_bytes[j]) == est.memory.peak_bytes, (layout, "peak")
        assert float(ev.host_bytes[j]) == est.memory.host_bytes, (layout, "host")
        assert float(ev.hardware_flops_per_token[j]) == est.hardware_flops_per_token, layout
        for key in STEP_COMPONENTS:
            assert _close(float(ev.step[key][j]), est.step.breakdown[key]), (layout, key)


def test_the_planner_searches_recompute_and_offload_modules() -> None:
    from app.core.errors import SpecError
    from app.core.planner import SearchProblem, plan

    model = catalog.find_model("Mixtral-8x7B")
    cluster = ClusterSpec(
        gpu=catalog.find_gpu("H100-SXM"), num_nodes=4, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )
    kw = {"constraints": Constraints(max_vp=2, max_micro_batch=2, activation_offload=True), "top": 20}
    plain = plan(SearchProblem(model, cluster, 4096, 128), **kw)
    found = plan(
        SearchProblem(
            model,
            cluster,
            4096,
            128,
            run=RunOptions(recompute_modules=("moe",), offload_modules=("expert_fc1",)),
        ),
        **kw,
    )
    # full recompute and layer offloading do not combine with module offloading: refused with a reason
    assert found.rejections["offload_modules_need_no_full_recompute"] > 0
    assert found.rejections["offload_modules_exclude_layer_offload"] > 0
    assert found.enumerated_layouts == found.feasible_layouts + sum(found.rejections.values())
    assert plain.rejections["offload_modules_need_no_full_recompute"] == 0
    assert found.best is not None and found.best.layout.offload_modules == ("expert_fc1",)
    for listed in found.top:
        # every listed layout carries the modules and re-estimates to its planned step time
        lay = listed.layout
        assert lay.recompute_modules == (("moe",) if lay.recompute == "selective" else ())
        assert _close(estimate(model, cluster, lay, 4096).step.total_s, listed.step_time_s), lay
    with pytest.raises(SpecError) as err:
        plan(
            SearchProblem(
                catalog.find_model("Llama-3-8B"),
                cluster,
                4096,
                128,
                run=RunOptions(recompute_modules=("moe",)),
            )
        )
    assert [p.field for p in err.value.problems] == ["recompute_modules"]
