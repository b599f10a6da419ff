"""Kernel-level conventions of the step time: cross-entropy and norm traffic per framework, pipeline transfers
per micro-batch, tile/wave quantisation, the design power of capped parts and the scenario's power limit."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.catalog import find_gpu, find_model
from app.core.efficiency import (
    REFERENCE_SIZE,
    GemmEfficiency,
    measured_matmul_flops,
    operating_clock_fraction,
    power_capped_clock_fraction,
    quantisation_efficiency,
)
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_2021, MEGATRON_CORE, TORCHTITAN, Framework
from app.core.hardware import ClusterSpec
from app.core.layout import Layout
from app.core.model import padded_vocab_size
from app.core.network import Placement
from app.core.step import _coll
from tests.core.conftest import make_cluster


def test_cross_entropy_traffic_is_the_frameworks_kernel_count() -> None:
    # Megatron's unfused vocab-parallel loss: 38 B forward + 14 B backward per logit; eager PyTorch's 40 B
    assert MEGATRON_CORE.ce_bytes_per_logit == 52.0
    assert DEEPSPEED.ce_bytes_per_logit == 52.0
    assert TORCHTITAN.ce_bytes_per_logit == 40.0
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=1)
    layout = Layout(tp=2, pp=1, dp=4, zero=1, micro_batch=1, global_batch=8, sequence_parallel=True)
    seq = 4096
    fw0 = MEGATRON_CORE.with_(ce_bytes_per_logit=0.0)
    with_ce = estimate(model, cluster, layout, seq, options=EstimateOptions(framework=MEGATRON_CORE))
    without = estimate(model, cluster, layout, seq, options=EstimateOptions(framework=fw0))
    vocab = padded_vocab_size(model.vocab_size, 2)
    hbm = cluster.gpu.hbm_bandwidth_bytes_per_s * MEGATRON_CORE.elementwise_efficiency
    per_mb = seq * vocab / 2 * 52.0 / hbm  # one micro-batch's loss on this GPU's vocabulary shard
    m = layout.num_microbatches
    diff = with_ce.step.breakdown["backward_compute"] - without.step.breakdown["backward_compute"]
    assert diff == pytest.approx(m * per_mb, rel=1e-9)
    assert 1e-3 < per_mb < 1e-2  # a few ms per micro-batch at 128k vocabulary on an H100


def test_eager_norms_move_the_fp32_composite_traffic() -> None:
    assert MEGATRON_CORE.norm_bytes_per_element == 4.0  # fused kernel: read and write 16 bit
    assert TORCHTITAN.norm_bytes_per_element == 36.0  # ATen's rms_norm composite with fp32 upcast
    model = find_model("Llama-3.1-8B")
    layout = Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=1, global_batch=8, recompute="none")
    seq = 8192
    a = estimate(model, make_cluster(nodes=1), layout, seq, options=EstimateOptions(framework=TORCHTITAN))
    b = estimate(
        model,
        make_cluster(nodes=1),
        layout,
        seq,
        options=EstimateOptions(framework=TORCHTITAN.with_(norm_bytes_per_element=4.0)),
    )
    hbm = find_gpu("H100-SXM").hbm_bandwidth_bytes_per_s * TORCHTITAN.elementwise_efficiency
    per_layer_fwd = seq * 2 * (36.0 - 4.0) * model.hidden_size / hbm  # two norms per layer
    fwd_diff = a.step.breakdown["forward_compute"] - b.step.breakdown["forward_compute"]
    assert fwd_diff == pytest.approx(model.num_layers * per_layer_fwd, rel=1e-9)
    bwd_diff = a.step.breakdown["backward_compute"] - b.step.breakdown["backward_compute"]
    assert bwd_diff == pytest.approx(2 * fwd_diff, rel=1e-9)  # backward moves about twice as much


def _boundary(fw: Framework, sp: bool) -> tuple[float, float, float, int]:
    """(pp_comm per micro-batch, one send of the whole boundary activation, of 1/tp of it, tp all-gather)."""
    model = find_model("GPT-3-175B")
    cluster = make_cluster("A100-80GB-SXM", 8, "ib-hdr-8x200")
    layout = Layout(
        tp=8, pp=8, dp=1, zero=1, micro_batch=2, global_batch=32, recompute="full", sequence_parallel=sp
    )
    est = estimate(model, cluster, layout, 2048, options=EstimateOptions(framework=fw))
    act = 2.0 * 2 * 2048 * model.hidden_size  # [s, b, h] in 16 bit
    whole = _coll("send_recv", act, Placement(2, 1), cluster, None)  # one stage per node: over the fabric
    part = _coll("send_recv", act / 8, Placement(2, 1), cluster, None)
    gather = _coll("all_gather", act, Placement(8, 8), cluster, None)
    return est.step.breakdown["pp_comm"] / layout.num_microbatches, whole, part, gather


def test_pipeline_boundary_transfers_follow_each_frameworks_p2p_code() -> None:
    assert MEGATRON_CORE.pp_transfers_per_microbatch == 2
    assert DEEPSPEED.pp_transfers_per_microbatch == 4
    # DeepSpeed's PipelineEngine: four blocking transfers of 1/tp of the activation (PartitionedTensor), each
    # received activation and gradient all-gathered over the TP group
    per_mb, whole, part, gather = _boundary(DEEPSPEED, sp=False)
    assert per_mb == pytest.approx(4 * part + 2 * gather, rel=1e-12)
    assert 0 < gather < part < whole
    # Megatron-LM 2021: scatter-gather in two batched exchanges
    per_mb, whole, part, gather = _boundary(MEGATRON_2021, sp=False)
    assert per_mb == pytest.approx(2 * part + 2 * gather, rel=1e-12)
    # Megatron-core sends the whole tensor from every TP rank without SP, the sequence shard with it
    per_mb, whole, part, gather = _boundary(MEGATRON_CORE, sp=False)
    assert per_mb == pytest.approx(2 * whole, rel=1e-12)
    per_mb, whole, part, gather = _boundary(MEGATRON_CORE, sp=True)
    assert per_mb == pytest.approx(2 * part, rel=1e-12)


def test_deepspeed_bf16_accumulates_gradients_in_fp32_after_every_micro_batch() -> None:
    # BF16_Optimizer.update_hp_grads after each micro-batch's backward: cast to fp32 (2 + 4 B) and add into the
    # fp32 buffer (4 + 4 + 4 B) for every parameter the stage holds; fp16 runs and Megatron pay nothing
    assert DEEPSPEED.for_dtype("bf16").grad_accum_bytes_per_param == 18.0
    assert DEEPSPEED.for_dtype("fp16").grad_accum_bytes_per_param == 0.0
    assert MEGATRON_CORE.for_dtype("bf16").grad_accum_bytes_per_param == 0.0
    model = find_model("GPT-3-175B")
    cluster = make_cluster("A100-80GB-SXM", 8, "ib-hdr-8x200")
    layout = Layout(tp=8, pp=8, dp=1, zero=1, micro_batch=2, global_batch=32, dtype="bf16", recompute="full")
    seq = 2048
    with_accum = estimate(model, cluster, layout, seq, options=EstimateOptions(framework=DEEPSPEED))
    # the same framework without the pass: an fp16-style accumulation inside autograd
    without = DEEPSPEED.with_(bf16_optimizer=False, extra_unsharded_bytes=4.0, optimizer_bytes=8.0)
    base = estimate(model, cluster, layout, seq, options=EstimateOptions(framework=without))
    hbm = find_gpu("A100-80GB-SXM").hbm_bandwidth_bytes_per_s * DEEPSPEED.elementwise_efficiency
    # the last stage (the bottleneck: it holds the head and the logits) holds its transformer layers and the
    # (tied, copied) head; the middle stages only layers
    last = with_accum.memory.stages[-1].params
    head = last - with_accum.memory.stages[3].params
    assert head == pytest.approx(padded_vocab_size(model.vocab_size, 8) * model.hidden_size / 8, rel=0.01)
    per_mb = 18.0 * last / hbm
    diff = with_accum.step.breakdown["backward_compute"] - base.step.breakdown["backward_compute"]
    assert diff == pytest.approx(layout.num_microbatches * per_mb, rel=1e-9)
    assert with_accum.step.total_s > base.step.total_s


def test_wave_quantisation_follows_the_tile_and_wave_counts() -> None:
    # 8192² on 132 SMs with 128×256 tiles: 2048 tiles, 16 waves of 132 → 2048 / 2112
    assert quantisation_efficiency(8192, 8192, 132) == pytest.approx(2048 / 2112)
    # 133 tiles on 132 SMs: two waves, the second almost empty
    assert quantisation_efficiency(128 * 133, 256, 132) == pytest.approx(133 / 264)
    # tile padding: a 129-row GEMM pads to 256 rows in its better orientation
    assert quantisation_efficiency(129, 256 * 132, 132) == pytest.approx(129 / 256)
    # unknown SM count: no quantisation
    assert np.all(quantisation_efficiency(np.array([100.0, 5000.0]), 3000.0, 0) == 1.0)
    # batched GEMMs fill the waves together
    assert quantisation_efficiency(128, 256, 132, batch=132) == pytest.approx(1.0)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40_000), st.integers(1, 40_000), st.sampled_from([80, 108, 114, 132, 148, 304]))
def test_wave_quantisation_is_a_share(m: int, n: int, sms: int) -> None:
    q = float(quantisation_efficiency(m, n, sms))
    assert 0.0 < q <= 1.0 + 1e-12


def test_wave_quantised_curve_keeps_the_measured_reference_point() -> None:
    gpu = find_gpu("H100-SXM")
    assert gpu.sm_count == 132
    smooth = GemmEfficiency.for_gpu(gpu, "bf16", sustained=False)
    waves = GemmEfficiency.for_gpu(gpu, "bf16", sustained=False, wave_quantisation=True)
    assert smooth.sm_count == 0 and waves.sm_count == 132
    ref = REFERENCE_SIZE
    measured = measured_matmul_flops(gpu, "bf16", sustained=False)
    assert waves.flops_per_s(ref, ref, ref) == pytest.approx(measured, rel=1e-12)
    assert smooth.flops_per_s(ref, ref, ref) == pytest.approx(measured, rel=1e-12)
    # one tile more than a full wave costs a second wave
    assert waves.flops_per_s(128 * 133, 256, 8192) < 0.6 * smooth.flops_per_s(128 * 133, 256, 8192)


def test_catalog_sm_counts_and_design_power() -> None:
    expected = {"A100-80GB-SXM": 108, "H100-SXM": 132, "H100-PCIe": 114, "B200": 148, "MI300X": 304}
    for name, sms in expected.items():
        assert find_gpu(name).sm_count == sms
    capped = find_gpu("H100-SXM-96GB")
    assert capped.tdp_w == 500 and capped.full_power_w == 700
    assert find_gpu("H100-SXM").full_power_w == find_gpu("H100-SXM").tdp_w == 700


def test_a_part_below_its_design_power_runs_capped_without_a_stated_limit() -> None:
    capped = find_gpu("H100-SXM-96GB")
    assert operating_clock_fraction(capped, None) == pytest.approx(power_capped_clock_fraction(700.0, 500.0))
    assert operating_clock_fraction(capped, 700.0) == 1.0
    assert operating_clock_fraction(find_gpu("H100-SXM"), None) == 1.0
    # a calibrated curve was measured at the part's own limit: only an explicit limit derates it
    assert operating_clock_fraction(capped, None, calibrated=True) == 1.0
    model = find_model("Llama-3.1-8B")
    layout = Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=1, global_batch=8)
    as_sold = estimate(model, make_cluster("H100-SXM-96GB", nodes=1), layout, 4096)
    stated = estimate(
        model,
        make_cluster("H100-SXM-96GB", nodes=1),
        layout,
        4096,
        options=EstimateOptions(power_limit_w=500.0),
    )
    assert as_sold.step.total_s == pytest.approx(stated.step.total_s, rel=1e-12)
    uncapped_die = replace(capped, tdp_w=700.0)
    free = estimate(model, ClusterSpec(gpu=uncapped_die, num_nodes=1, gpus_per_node=8), layout, 4096)
    assert free.step.total_s < as_sold.step.total_s


def _scenario(power: float | None) -> dict[str, Any]:
    cluster: dict[str, Any] = {"gpu": "H100-SXM", "nodes": 1, "gpus_per_node": 8}
    if power is not None:
        cluster["power_limit_w"] = power
    return {
        "model": "Llama-3.1-8B",
        "cluster": cluster,
        "layout": {"tp": 1, "pp": 1, "dp": 8, "zero": 1, "micro_batch": 1, "global_batch": 8},
        "training": {"seq_len": 4096},
    }


def test_scenario_power_limit_reaches_the_estimate(client: Any) -> None:
    free = client.post("/api/v1/estimate", json=_scenario(None))
    capped = client.post("/api/v1/estimate", json=_scenario(500.0))
    assert free.status_code == 200 and capped.status_code == 200, capped.text
    assert capped.json()["step"]["tokens_per_s"] < free.json()["step"]["tokens_per_s"]
    clock = next(a for a in capped.json()["assumptions"] if a["name"] == "SM clock under the power limit")
    assert clock["value"] == pytest.approx(power_capped_clock_fraction(700.0, 500.0), abs=1e-4)
    # a limit above the design power changes nothing
    above = client.post("/api/v1/estimate", json=_scenario(900.0)).json()
    assert above["step"]["total_s"] == pytest.approx(free.json()["step"]["total_s"], rel=1e-12)


def test_scenario_power_limit_too_low_is_422_on_the_field(client: Any) -> None:
    r = client.post("/api/v1/estimate", json=_scenario(150.0))  # below the fixed quarter of 700 W
    assert r.status_code == 422
    locs = {".".join(str(x) for x in d["loc"]) for d in r.json()["detail"]}
    assert any(loc.endswith("cluster.power_limit_w") for loc in locs), locs
    r = client.post("/api/v1/estimate", json=_scenario(-5.0))
    assert r.status_code == 422


def test_flash_dropout_cost_scales_with_the_tensor_to_cuda_core_ratio() -> None:
    from app.core.step import FLASH_DROPOUT_REF_OVERHEAD, flash_dropout_overhead

    # reference: GB200, forward at 80 % and backward at 65 % of the no-dropout throughput
    assert pytest.approx((0.25, 1 / 0.65 - 1)) == FLASH_DROPOUT_REF_OVERHEAD
    assert flash_dropout_overhead(find_gpu("GB200")) == pytest.approx(FLASH_DROPOUT_REF_OVERHEAD)
    fwd, bwd = flash_dropout_overhead(find_gpu("H100-SXM"))
    share = (989 / 67) / (2500 / 80)
    assert (fwd, bwd) == pytest.approx((0.25 * share, (1 / 0.65 - 1) * share))
    assert 0.11 < fwd < 0.13
    # a GPU with strong CUDA cores relative to its tensor cores pays less
    assert flash_dropout_overhead(find_gpu("MI300X"))[0] < fwd


def test_flash_dropout_slows_only_models_with_attention_dropout() -> None:
    cluster = make_cluster(nodes=1)
    layout = Layout(tp=1, pp=1, dp=8, zero=1, micro_batch=1, global_batch=8)
    base = find_model("Llama-3.1-8B")
    assert base.attention_dropout == 0.0
    with_drop = replace(base, attention_dropout=0.1)
    a = estimate(base, cluster, layout, 4096)
    b = estimate(with_drop, cluster, layout, 4096)
    assert b.step.breakdown["forward_compute"] > a.step.breakdown["forward_compute"]
    unfused = replace(layout, flash_attention=False)
    # the unfused path costs dropout as mask traffic over the scores instead
    c = estimate(with_drop, cluster, unfused, 4096)
    d = estimate(base, cluster, unfused, 4096)
    assert c.step.breakdown["forward_compute"] > d.step.breakdown["forward_compute"]


def test_new_conventions_are_listed_as_assumptions() -> None:
    from app.core.step import flash_dropout_overhead

    model = replace(find_model("Llama-3.1-8B"), attention_dropout=0.1)
    layout = Layout(tp=1, pp=2, dp=4, zero=1, micro_batch=1, global_batch=8)
    est = estimate(model, make_cluster(nodes=1), layout, 4096, options=EstimateOptions(framework=DEEPSPEED))
    got = {a.name: a.value for a in est.assumptions}
    assert got["cross-entropy traffic"] == 52.0
    assert got["norm traffic"] == 4.0
    assert got["pipeline transfers per micro-batch"] == 4
    expected = flash_dropout_overhead(find_gpu("H100-SXM"))[1]
    assert got["attention dropout in the fused kernel"] == pytest.approx(expected, abs=1e-4)
