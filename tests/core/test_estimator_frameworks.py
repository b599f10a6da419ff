"""Framework and hardware conventions the estimator models: power caps, eager cross-entropy, DeepSpeed's ZeRO-3
sub-module collectives and BF16 optimizer."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.catalog import find_gpu, find_model
from app.catalog.fabrics import find_fabric
from app.core.efficiency import NON_CLOCK_POWER_FRACTION, power_capped_clock_fraction
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_2021, MEGATRON_CORE, TORCHTITAN
from app.core.hardware import ClusterSpec
from app.core.layout import Layout
from app.core.memory import bytes_per_param
from app.core.model import padded_vocab_size
from tests.core.conftest import make_cluster


def test_power_cap_clock_follows_the_cube_law_above_the_fixed_power() -> None:
    # 500 W on a 700 W part: ((500 − 175) / (700 − 175))^(1/3) with a quarter of the design power fixed
    assert NON_CLOCK_POWER_FRACTION == 0.25
    assert power_capped_clock_fraction(700.0, 500.0) == pytest.approx((325.0 / 525.0) ** (1 / 3), rel=1e-12)
    assert power_capped_clock_fraction(700.0, 500.0) == pytest.approx(0.8522, abs=1e-4)
    assert power_capped_clock_fraction(700.0, None) == 1.0
    assert power_capped_clock_fraction(700.0, 700.0) == 1.0
    assert power_capped_clock_fraction(700.0, 900.0) == 1.0  # a limit above the design power changes nothing
    assert (
        power_capped_clock_fraction(700.0, 100.0) == 0.0
    )  # below the fixed power nothing is left for clocks


@settings(max_examples=60, deadline=None)
@given(st.floats(200.0, 1200.0), st.floats(0.05, 1.0), st.floats(0.05, 1.0))
def test_power_cap_clock_is_monotonic_in_the_limit(design: float, a: float, b: float) -> None:
    lo, hi = sorted((a * design, b * design))
    assert power_capped_clock_fraction(design, lo) <= power_capped_clock_fraction(design, hi) <= 1.0


def test_power_cap_slows_compute_but_not_memory_bound_work_or_memory() -> None:
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=1)
    layout = Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=1, global_batch=8, recompute="selective")
    free = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=TORCHTITAN))
    capped = estimate(
        model, cluster, layout, 4096, options=EstimateOptions(framework=TORCHTITAN, power_limit_w=500.0)
    )
    clock = power_capped_clock_fraction(700.0, 500.0)
    assert capped.memory.peak_bytes == free.memory.peak_bytes
    assert capped.step.breakdown["optimizer"] == free.step.breakdown["optimizer"]  # HBM-bound Adam update
    ratio = capped.step.breakdown["forward_compute"] / free.step.breakdown["forward_compute"]
    # GEMMs and attention slow by 1/clock, element-wise kernels keep their speed
    assert 1.0 < ratio < 1.0 / clock + 1e-9
    assert capped.step.tokens_per_s < free.step.tokens_per_s
    assert any(a.name == "SM clock under the power limit" and a.value < 1 for a in capped.assumptions)


def test_torchtitan_keeps_twelve_bytes_per_logit_for_its_eager_cross_entropy() -> None:
    model = find_model("Llama-3.1-8B")
    layout = Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=2, global_batch=16, recompute="selective")
    est = estimate(model, make_cluster(nodes=1), layout, 8192, options=EstimateOptions(framework=TORCHTITAN))
    tokens = 2 * 8192
    vocab = padded_vocab_size(model.vocab_size, 1)
    assert est.memory.most_loaded.breakdown["logits"] == pytest.approx(12.0 * tokens * vocab)
    megatron = estimate(
        model, make_cluster(nodes=1), layout, 8192, options=EstimateOptions(framework=MEGATRON_CORE)
    )
    assert megatron.memory.most_loaded.breakdown["logits"] == pytest.approx(6.0 * tokens * vocab)


def test_megatron_fp16_keeps_fp16_gradients_and_an_fp32_main_gradient() -> None:
    # Megatron-LM's distributed-optimizer table: fp16 param + fp16 grads 20 and 4 + 16/d; bf16 param + fp32
    # grads 18 and 6 + 12/d
    fp16 = MEGATRON_CORE.for_dtype("fp16")
    assert bytes_per_param(0, 1, fp16) == pytest.approx(20.0)
    assert bytes_per_param(1, 8, fp16) == pytest.approx(4 + 16 / 8)
    assert bytes_per_param(0, 1, MEGATRON_CORE.for_dtype("bf16")) == pytest.approx(18.0)
    assert bytes_per_param(1, 8, MEGATRON_CORE.for_dtype("bf16")) == pytest.approx(6 + 12 / 8)
    assert fp16.grad_reduce_bytes == 2.0 and fp16.for_dtype("fp16") == fp16
    assert MEGATRON_2021.for_dtype("fp16").grad_reduce_bytes == 2.0
    # frameworks with their own 16-bit conventions keep them
    assert DEEPSPEED.for_dtype("fp16").optimizer_bytes == DEEPSPEED.optimizer_bytes
    assert TORCHTITAN.for_dtype("fp16") == TORCHTITAN


def test_deepspeed_bf16_uses_the_bf16_optimizer_bytes() -> None:
    # fp16 ZeRO optimizer: 2 (weights) + 2 (16-bit grads) + (4 master + 8 Adam + 4 fp32 partition grads) / d
    assert bytes_per_param(1, 8, DEEPSPEED.for_dtype("fp16")) == pytest.approx(4 + 16 / 8)
    # BF16_Optimizer: + an unsharded fp32 gradient-accumulation buffer, no fp32 partition gradient
    assert bytes_per_param(1, 8, DEEPSPEED.for_dtype("bf16")) == pytest.approx(8 + 12 / 8)
    assert DEEPSPEED.for_dtype("bf16").for_dtype("bf16") == DEEPSPEED.for_dtype("bf16")
    assert MEGATRON_CORE.for_dtype("bf16") == MEGATRON_CORE


def _zero3_comm(fw_per_layer: int, nodes: int) -> float:
    model = find_model("GPT-3-175B")
    cluster = make_cluster("A100-80GB-SXM", nodes, "ib-hdr-8x200")
    dp = nodes * 8
    layout = Layout(tp=1, pp=1, dp=dp, zero=3, micro_batch=1, global_batch=dp, recompute="full")
    fw = DEEPSPEED.with_(zero3_collectives_per_layer=fw_per_layer)
    est = estimate(model, cluster, layout, 2048, options=EstimateOptions(framework=fw))
    return est.step.breakdown["zero3_comm"]


def test_deepspeed_zero3_sub_module_collectives_pay_latency_that_grows_with_the_ring() -> None:
    # one message per pass: bandwidth-bound, about the same time at any data-parallel size
    assert DEEPSPEED.zero3_collectives_per_layer == 6
    one_small, one_large = _zero3_comm(0, 48), _zero3_comm(0, 192)
    six_small, six_large = _zero3_comm(6, 48), _zero3_comm(6, 192)
    assert six_small > one_small and six_large > one_large
    # per-collective ring latency grows with the ranks: the split costs more on the larger ring
    assert six_large - one_large > six_small - one_small > 0


def test_splitting_allocator_fragments_more_than_expandable_segments() -> None:
    from app.core.framework import MEGATRON_2021, SPLITTING_ALLOCATOR_FRAGMENTATION

    assert SPLITTING_ALLOCATOR_FRAGMENTATION == 0.15  # GMLake's mean fragmentation removed by VM stitching
    assert MEGATRON_CORE.fragmentation_fraction == pytest.approx(0.05)
    assert DEEPSPEED.fragmentation_fraction == pytest.approx(0.20)
    assert MEGATRON_2021.fragmentation_fraction == pytest.approx(0.20)
    model = find_model("GPT-3-175B")
    cluster = make_cluster("A100-80GB-SXM", 16, "ib-hdr-8x200")
    layout = Layout(tp=8, pp=8, dp=2, zero=1, micro_batch=1, global_batch=64, recompute="full")
    for fw in (MEGATRON_CORE, DEEPSPEED):
        stage = estimate(
            model, cluster, layout, 2048, options=EstimateOptions(framework=fw)
        ).memory.most_loaded
        assert stage.breakdown["fragmentation"] == pytest.approx(
            stage.allocated_bytes * fw.fragmentation_fraction
        )
        assert stage.reserved_bytes == pytest.approx(stage.allocated_bytes * (1 + fw.fragmentation_fraction))


def test_nvidia_smi_sees_cuda_context_and_nccl_buffers_the_allocator_does_not() -> None:
    model = find_model("Llama-3.1-8B")
    layout = Layout(tp=2, pp=1, dp=4, zero=1, micro_batch=1, global_batch=8, recompute="selective")
    stage = estimate(model, make_cluster(nodes=1), layout, 4096).memory.most_loaded
    outside = stage.breakdown["cuda_context"] + stage.breakdown["nccl_buffers"]
    assert MEGATRON_CORE.nccl_buffer_bytes > 0
    assert stage.breakdown["nccl_buffers"] == pytest.approx(MEGATRON_CORE.nccl_buffer_bytes)
    assert stage.reserved_bytes == pytest.approx(stage.total_bytes - outside)
    assert stage.allocated_bytes == pytest.approx(stage.reserved_bytes - stage.breakdown["fragmentation"])
    assert stage.allocated_bytes < stage.reserved_bytes < stage.total_bytes


@pytest.mark.parametrize("sp", [False, True])
def test_async_tp_backward_hides_only_the_column_parallel_input_gradient_collectives(sp: bool) -> None:
    """Megatron's LinearWithGradAccumulationAndAsyncCommunication: the backward keeps only the all-gathers that
    undo the forward's reduce-scatters (SP) and no collective without SP; the forward and the compute are
    untouched (Korthikanti et al. 2022 Table 4's layer shape: GPT-22B-like width at tp 8, b 4, s 2048)."""
    from app.core.efficiency import training_curves
    from app.core.framework import MEGATRON_2021, MEGATRON_2022
    from app.core.step import StepRun, _coll, group_placement, stage_times

    model = find_model("GPT-3-175B")
    cluster = make_cluster("A100-80GB-SXM", 1, "ib-hdr-8x200")
    layout = Layout(tp=8, pp=1, dp=1, micro_batch=4, global_batch=4, sequence_parallel=sp, recompute="none")
    linear, attn = training_curves(cluster.gpu, "bf16", None, None)
    parts = {}
    for fw in (MEGATRON_2021, MEGATRON_2022):
        out: dict[str, float] = {}
        stage_times(StepRun(model, cluster, layout, 2048, linear, attn, fw), out)
        parts[fw.name] = out
    sync, async_ = parts["megatron-2021"], parts["megatron-2022"]
    assert async_["forward"] == sync["forward"] and async_["backward"] == sync["backward"]
    act = 2.0 * 4 * 2048 * model.hidden_size
    place = group_placement(8, 1, 8)
    if sp:
        ag, rs = (_coll(op, act, place, cluster, None) for op in ("all_gather", "reduce_scatter"))
        assert sync["tp_comm"] == pytest.approx(6 * ag + 4 * rs, rel=1e-9)
        # forward + 2 exposed all-gathers; the hidden 2 reduce-scatters + 2 re-gathers slow the GEMMs beside them
        k = MEGATRON_2022.overlap_slowdown
        assert async_["tp_comm"] == pytest.approx(4 * ag + 2 * rs + k * (2 * ag + 2 * rs), rel=1e-9)
    else:
        ar = _coll("all_reduce", act, place, cluster, None)
        assert sync["tp_comm"] == pytest.approx(4 * ar, rel=1e-9)
        k = MEGATRON_2022.overlap_slowdown
        assert async_["tp_comm"] == pytest.approx(
            2 * ar + k * 2 * ar, rel=1e-9
        )  # the forward's two all-reduces


def test_async_tp_backward_changes_nothing_without_tensor_parallelism() -> None:
    from app.core.framework import MEGATRON_2021, MEGATRON_2022

    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=1)
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, recompute="selective")
    a = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=MEGATRON_2021))
    b = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=MEGATRON_2022))
    assert a.step.total_s == b.step.total_s


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([2, 4, 8]), st.booleans(), st.sampled_from(["none", "selective", "full"]))
def test_async_tp_backward_never_slows_a_step(tp: int, sp: bool, recompute: str) -> None:
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=2)
    layout = Layout(
        tp=tp,
        pp=1,
        dp=16 // tp,
        micro_batch=1,
        global_batch=2 * (16 // tp),
        sequence_parallel=sp,
        recompute=recompute,  # type: ignore[arg-type]
    )
    sync = estimate(
        model,
        cluster,
        layout,
        4096,
        options=EstimateOptions(framework=MEGATRON_CORE.with_(tp_async_backward=False)),
    )
    async_ = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=MEGATRON_CORE))
    assert async_.step.total_s < sync.step.total_s
    assert sum(async_.step.breakdown.values()) == pytest.approx(async_.step.total_s, rel=1e-12)


def test_hidden_communication_slows_the_compute_beside_it() -> None:
    """Lee et al. 2025 (arXiv 2507.03114): compute overlapped with collectives runs 18.9 % slower on average."""
    from app.core.step import overlapped

    assert overlapped(1.0, 0.0, 0.189) == pytest.approx(1.0)  # nothing to hide behind: all exposed
    assert overlapped(1.0, 5.0, 0.189) == pytest.approx(0.189)  # all hidden, each second costs 0.189 s
    assert overlapped(2.0, 1.0, 0.189) == pytest.approx(1.0 + 0.189)  # one second exposed, one hidden
    assert overlapped(1.0, -1.0, 0.189) == pytest.approx(1.0)


def test_network_bound_collectives_contend_less_than_nvlink_ones() -> None:
    """A collective across nodes moves the GPU's NIC share of bytes per second, far below NVLink's, so it takes
    that share of the HBM traffic an intra-node collective takes, but holds its SMs all the same: DeepSeek-V3's
    20 of 132 SMs for cross-node communication (Framework.comm_sm_share)."""
    from app.core.framework import MEGATRON_CORE
    from app.core.step import overlap_slowdown

    cluster = make_cluster(nodes=1)
    intra = overlap_slowdown(MEGATRON_CORE, cluster, 8, 8)
    inter = overlap_slowdown(MEGATRON_CORE, cluster, 64, 8)
    assert intra == pytest.approx(MEGATRON_CORE.overlap_slowdown)
    fabric = cluster.fabric
    nic = fabric.nic_bandwidth_bytes_per_s * fabric.nics_per_node / cluster.gpus_per_node
    assert MEGATRON_CORE.overlap_slowdown * nic / cluster.scaleup_bw < MEGATRON_CORE.comm_sm_share
    assert inter == pytest.approx(20 / 132)
    assert 0 < inter < intra
    # a fabric as fast per GPU as NVLink contends as much as NVLink does
    fast = replace(cluster, fabric=replace(fabric, nic_bandwidth_bytes_per_s=cluster.scaleup_bw))
    assert overlap_slowdown(MEGATRON_CORE, fast, 64, 8) == pytest.approx(intra)


def test_overlap_contention_costs_time_only_where_communication_is_hidden() -> None:
    """With the slowdown at zero the step is faster by exactly the charged contention; a layout with no hidden
    communication (one GPU) does not change."""
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=1)
    layout = Layout(tp=8, pp=1, dp=1, zero=1, micro_batch=1, global_batch=8, sequence_parallel=True)
    with_k = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=MEGATRON_CORE))
    no_k = estimate(
        model,
        cluster,
        layout,
        4096,
        options=EstimateOptions(framework=MEGATRON_CORE.with_(overlap_slowdown=0.0)),
    )
    assert with_k.step.total_s > no_k.step.total_s
    assert with_k.step.breakdown["forward_compute"] == no_k.step.breakdown["forward_compute"]
    single = Layout(tp=1, pp=1, dp=1, zero=0, micro_batch=1, global_batch=1, recompute="full")
    one = ClusterSpec(
        gpu=find_gpu("H100-SXM"), num_nodes=1, gpus_per_node=1, fabric=find_fabric("ib-ndr-8x400")
    )
    a = estimate(model, one, single, 4096, options=EstimateOptions(framework=MEGATRON_CORE))
    b = estimate(
        model, one, single, 4096, options=EstimateOptions(framework=MEGATRON_CORE.with_(overlap_slowdown=0.0))
    )
    assert a.step.total_s == pytest.approx(b.step.total_s, rel=1e-12)


def test_fsdp_shards_only_the_fp32_parameter_under_zero3() -> None:
    """PyTorch FSDP with a bf16 mixed-precision policy keeps the fp32 shard (the master weight) and casts at
    all-gather time: 16 B per parameter over the shard group. DeepSpeed ZeRO-3 and Megatron-core keep a 16-bit
    shard as well: 18 B (Megatron-LM distrib_optimizer.md counts 18 B unsharded)."""
    from app.core.memory import bytes_per_param

    assert bytes_per_param(3, 8, TORCHTITAN) == pytest.approx(16 / 8)
    assert bytes_per_param(3, 8, MEGATRON_CORE) == pytest.approx(18 / 8)
    # below ZeRO-3 FSDP's presets keep their 16-bit working weights whole, like everyone else
    assert bytes_per_param(1, 8, TORCHTITAN) == pytest.approx(2 + 4 + 12 / 8)
    assert bytes_per_param(1, 8, MEGATRON_CORE) == pytest.approx(2 + 4 + 12 / 8)


def test_transformer_engine_fp8_keeps_one_byte_gemm_inputs_for_backward() -> None:
    # Llama-3-8B layer, tp 1, flash attention, no recompute: under FP8 the QKV input, the FFN input and the second
    # FFN GEMM's input drop from 2 B to 1 B per element, and the output projection adds a 1-B copy of the attention
    # output beside the 16-bit one the fused attention keeps: bf16 − fp8 = h + h + ffn − q_width per token
    from app.core.memory import KeptActivations, layer_activation_bytes
    from app.core.model import layer_shape

    shape = layer_shape(find_model("Llama-3-8B"))
    tokens = 8192

    def act(fw: object) -> float:
        return float(
            layer_activation_bytes(shape, tokens, 8192, KeptActivations(1, False, "none", True, False, fw))
        )  # type: ignore[arg-type]

    saved = act(MEGATRON_CORE.for_dtype("bf16")) - act(MEGATRON_CORE.for_dtype("fp8"))
    h, ffn, q = shape.hidden, shape.ffn_out_width, shape.q_width
    assert saved == pytest.approx((h + h + ffn - q) * tokens)
    assert saved == pytest.approx((4096 + 14336) * tokens)
    # torchao's Float8Linear keeps the bf16 inputs and re-casts them in backward: no saving
    assert act(TORCHTITAN.for_dtype("fp8")) == pytest.approx(act(TORCHTITAN.for_dtype("bf16")))
    # the unfused attention path has no second copy of the attention output
    unfused_saved = float(
        layer_activation_bytes(
            shape, tokens, 8192, KeptActivations(1, False, "none", False, False, MEGATRON_CORE)
        )
    ) - float(
        layer_activation_bytes(
            shape,
            tokens,
            8192,
            KeptActivations(1, False, "none", False, False, MEGATRON_CORE.for_dtype("fp8")),
        )
    )
    assert unfused_saved == pytest.approx((h + h + ffn + q) * tokens)


def test_fp8_moe_layer_keeps_one_byte_expert_gemm_inputs() -> None:
    from app.core.memory import KeptActivations, layer_activation_bytes
    from app.core.model import layer_shape

    shape = layer_shape(find_model("Qwen3-30B-A3B"))
    tokens = 4096
    bf16 = float(
        layer_activation_bytes(
            shape, tokens, 4096, KeptActivations(1, False, "none", True, True, MEGATRON_CORE)
        )
    )
    fp8 = float(
        layer_activation_bytes(
            shape, tokens, 4096, KeptActivations(1, False, "none", True, True, MEGATRON_CORE.for_dtype("fp8"))
        )
    )
    k = shape.experts_per_token
    h, q = shape.hidden, shape.q_width
    # QKV input, k permuted expert inputs and k expert FC2 inputs at 1 B; one extra 1-B attention-output copy
    expected = h + k * h + k * shape.expert_out_width + shape.shared_out_width - q
    assert bf16 - fp8 == pytest.approx(expected * tokens)


def test_fp8_estimate_needs_less_activation_memory_than_bf16_only_under_transformer_engine() -> None:
    model = find_model("Llama-3-70B")
    cluster = make_cluster(nodes=8)
    base = dict(tp=4, pp=4, dp=4, micro_batch=1, global_batch=64, sequence_parallel=True)
    for fw, smaller in ((MEGATRON_CORE, True), (TORCHTITAN, False)):
        acts = {
            dtype: estimate(
                model, cluster, Layout(**base, dtype=dtype), 8192, options=EstimateOptions(framework=fw)
            ).memory.most_loaded.breakdown["activations"]
            for dtype in ("bf16", "fp8")
        }
        assert (acts["fp8"] < 0.95 * acts["bf16"]) is smaller, fw.name
