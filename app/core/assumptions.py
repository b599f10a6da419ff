"""What an estimate lists as its assumptions: one declarative table, in the manner of app.core.cost.DEFAULTS.

Each row of ASSUMPTIONS names one convention, rate, run feature, count or margin an estimate rests on, with its unit,
its source and how its value is read from the estimate's inputs (`AssumptionBasis`). A row may apply to some runs
only (ZeRO-3 layouts, fused attention kernels, FP8 parameters, …). `assumptions` evaluates the table in order; the
order is the one estimates have always listed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.attention import (
    DEFAULT_HEAD_DIM_HALF,
    AttentionKernel,
    head_dim_factors,
    kv_loop_efficiency,
)
from app.core.efficiency import (
    NON_CLOCK_POWER_FRACTION,
    SUSTAINED_FRACTION,
    GemmEfficiency,
    operating_clock_fraction,
)
from app.core.framework import (
    DEEPEP_MNNVL_COMBINE_BYTES_PER_S,
    DEEPEP_MNNVL_DISPATCH_BYTES_PER_S,
    DEEPEP_MNNVL_SOURCE,
    FUSED_GROUPED_EXPERTS_SOURCE,
    Framework,
)
from app.core.hardware import ClusterSpec
from app.core.layout import (
    Layout,
    LayoutColumns,
    stage_bf16_layer_counts,
    stage_layer_counts,
    stage_layers_label,
)
from app.core.model import ModelSpec, attention_keys, layer_shape, param_counts
from app.core.precision import QUANTIZED_DTYPES, cast_bytes_per_element
from app.core.step import (
    DEFAULT_HOST_MEMORY_BYTES_PER_S,
    deepep_mnnvl_applies,
    ep_ranks_in_domain,
    ep_ranks_per_node,
    flash_dropout_overhead,
    last_bucket_params,
)

if TYPE_CHECKING:
    from app.core.estimate import EstimateOptions


@dataclass(frozen=True)
class Assumption:
    name: str
    value: Any
    unit: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "source": self.source}


@dataclass(frozen=True)
class AssumptionBasis:
    """What an estimate's assumptions report: the inputs and the rates the estimate used."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    fw: Framework
    opts: EstimateOptions
    linear: GemmEfficiency
    attn_curve: GemmEfficiency
    kernel: AttentionKernel
    vocab: int
    mf: float
    hf: float
    peak: float
    calibrated: bool
    seq_len: int = 0


Read = Callable[[AssumptionBasis], Any]


def _always(_: AssumptionBasis) -> bool:
    return True


@dataclass(frozen=True)
class AssumptionRow:
    """One assumption: its name and unit, how its value is read, where it comes from (text, or text read from the
    basis), and which runs it applies to."""

    name: str
    unit: str
    value: Read
    source: str | Read
    applies: Callable[[AssumptionBasis], bool] = _always

    def of(self, basis: AssumptionBasis) -> Assumption:
        source = self.source if isinstance(self.source, str) else self.source(basis)
        return Assumption(self.name, self.value(basis), self.unit, source)


# ---------------------------------------------------------------------------------------------------------------
# Values and sources that take more than an expression
# ---------------------------------------------------------------------------------------------------------------


def _last_bucket(b: AssumptionBasis) -> float:
    """The last gradient bucket the step charges, in parameters (app.core.step.last_bucket_params), on a GPU holding
    the model's parameters over tp·pp and its layers over pp."""
    layout = b.layout
    per_gpu = float(param_counts(b.model).total) / max(1, layout.tp * layout.pp)
    layers = b.model.num_layers / max(1, layout.pp)
    return float(last_bucket_params(b.fw, per_gpu, layout.dp * layout.cp, layers))


def _last_bucket_source(b: AssumptionBasis) -> str:
    if b.fw.dp_bucket_params is None:
        return (
            "one layer (FSDP reduces per wrapped block): its reduce-scatter after the backward and the first "
            "all-gather before the next forward cannot hide (app.core.step.data_parallel_times)"
        )
    floor, per_rank = b.fw.dp_bucket_params
    rule = f"max({floor / 1e6:g}M, {per_rank / 1e6:g}M × dp·cp)" if per_rank else f"{floor / 1e6:g}M (set)"
    return (
        f"Megatron-core DDP buckets of {rule} parameters (DistributedDataParallelConfig.bucket_size): the last "
        "fills when the backward ends and the first all-gather opens the next forward, so both stay exposed; "
        "each bucket is one collective paying its own latency"
    )


def _pipeline_split_source(b: AssumptionBasis) -> str:
    if b.layout.uneven_pipeline:
        return (
            "uneven split: the rest shared evenly by the stages between (Megatron-core "
            "--decoder-first/last-pipeline-num-layers); the first stage also holds the embedding, the last the "
            "LM head and loss; the slowest stage sets the 1F1B pace"
        )
    return (
        "even split: L / pp on every stage; the first also holds the embedding, the last the LM head and loss"
    )


def _key_loop(b: AssumptionBasis) -> tuple[float, float, float]:
    """(keys per query, forward share, backward share) of the fused kernel's loop over keys."""
    keys = attention_keys(b.seq_len, b.opts.causal)
    fwd, bwd = kv_loop_efficiency(keys, b.layout.cp, b.kernel.loop_scale)
    return keys, float(fwd), float(bwd)


def _key_loop_source(b: AssumptionBasis) -> str:
    keys, _, bwd = _key_loop(b)
    return (
        f"backward × {bwd:.3f}; {keys:,.0f} keys per query in {b.layout.cp} ring step(s): a per-query-tile cost "
        "and the causal diagonal, fitted on cuDNN 9.19's H200 sequence sweep (NVIDIA/cudnn-frontend), scaled "
        "by the kernel's rate over HBM bandwidth (app.core.attention.kv_loop_efficiency); sliding-window layers "
        "see fewer keys"
    )


def _head_dim(b: AssumptionBasis) -> tuple[int, float, float]:
    """(head dim, forward factor, backward factor) of the fused kernel at the model's head dimension."""
    d = layer_shape(b.model).qk_head_dim
    fwd, bwd = head_dim_factors(float(d), b.kernel.head_dim_half)
    return d, float(fwd), float(bwd)


def _head_dim_source(b: AssumptionBasis) -> str:
    d, _, bwd = _head_dim(b)
    measured = b.kernel.head_dim_half != (DEFAULT_HEAD_DIM_HALF, DEFAULT_HEAD_DIM_HALF)
    basis = (
        f"{b.kernel.kernel} on this architecture measured at head dim 64 against 128 (cuDNN 9.19, "
        "NVIDIA/cudnn-frontend training benchmarks)"
        if measured
        else "no measurement of this kernel at head dim 64: 0.85 of head dim 128 assumed"
    )
    return f"backward × {bwd:.3f}; head dim {d}: {basis} (app.core.attention.head_dim_factors)"


def _clock_source(b: AssumptionBasis) -> str:
    gpu = b.cluster.gpu
    return (
        f"limit {b.opts.power_limit_w or gpu.tdp_w:g} W of {gpu.full_power_w:g} W design power; "
        f"clock-dependent power ∝ f³, {NON_CLOCK_POWER_FRACTION:g} of it fixed (app.core.efficiency)"
    )


def _optimizer_offload_source(b: AssumptionBasis) -> str:
    gpu = b.cluster.gpu
    bandwidth = gpu.host_memory_bandwidth_bytes_per_s or DEFAULT_HOST_MEMORY_BYTES_PER_S
    catalog = "" if gpu.host_memory_bandwidth_bytes_per_s else ", DGX H100 figure: none in the catalog"
    return (
        "fp32 master + Adam moments + pinned gradient (16 B per parameter) in host memory; gradient to the host "
        "and weight back (4 B each way over the host link) pipelined with a CPU AdamW bound by host memory "
        f"bandwidth ({bandwidth / 1e9:g} GB/s per GPU{catalog}; assumes several CPU threads per rank, torchrun's "
        "default OMP_NUM_THREADS=1 is slower) (Megatron-core HybridDeviceOptimizer, "
        "app.core.step.optimizer_step_time)"
    )


def _moments_source(b: AssumptionBasis) -> str:
    return (
        "bf16 first and second moments (Megatron-core --use-precision-aware-optimizer --exp-avg-dtype bf16 "
        "--exp-avg-sq-dtype bf16, Transformer Engine FusedAdam; Megatron-Bridge's DeepSeek-V3 recipe); "
        f"fp32 master weights at {b.fw.master_bytes:g} B per parameter (with bf16 weights only their low 16 "
        "bits, Megatron-core store_param_remainders); the optimizer step reads and writes "
        f"{b.fw.adam_step_bytes_per_param:g} B per parameter"
    )


def _bf16_layers_source(b: AssumptionBasis) -> str:
    layout = b.layout
    by_stage = "|".join(str(n) for n in stage_bf16_layer_counts(b.model.num_layers, layout))
    return (
        f"first {layout.bf16_first_layers}, last {layout.bf16_last_layers} (Megatron-core "
        "--first-last-layers-bf16 --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16): 16-bit "
        f"GEMMs, no casts, 16-bit saved inputs; per stage {by_stage}. Megatron-Bridge's FP8 current-"
        "scaling recipe keeps 1 + 1, NVIDIA's NVFP4 recipe about 15 % of the layers (arXiv 2509.25149)"
    )


def _moe_ep(b: AssumptionBasis) -> bool:
    return b.model.moe is not None and b.layout.ep > 1


def _deepep_mnnvl(b: AssumptionBasis) -> bool:
    """Whether the EP all-to-all runs on DeepEP over a multi-node NVLink domain (app.core.step.deepep_mnnvl_floor)."""
    if not _moe_ep(b):
        return False
    ep_node = ep_ranks_per_node(LayoutColumns.of(b.layout), b.cluster.gpus_per_node)
    return bool(deepep_mnnvl_applies(b.fw, b.cluster, ep_ranks_in_domain(b.cluster, b.layout.ep, ep_node)))


# ---------------------------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------------------------

CONVENTIONS: tuple[AssumptionRow, ...] = (
    AssumptionRow(
        "framework", "", lambda b: b.fw.name, "app.core.framework presets (sources in that module)"
    ),
    AssumptionRow(
        "bytes per parameter (weights+grads+master+Adam)",
        "B",
        lambda b: b.fw.weight_bytes + b.fw.grad_bytes + b.fw.master_bytes + b.fw.optimizer_bytes,
        "Megatron-LM distrib_optimizer.md: 18 B/param, 6 + 12/d with the distributed optimizer",
    ),
    AssumptionRow(
        "ZeRO stage", "", lambda b: b.layout.zero, "Rajbhandari et al. 2020 (arXiv 1910.02054) Sec. 5"
    ),
    AssumptionRow(
        "transformer layers per pipeline stage",
        "layers",
        lambda b: stage_layers_label(stage_layer_counts(b.model.num_layers, b.layout)),
        _pipeline_split_source,
    ),
    AssumptionRow(
        "activations",
        "",
        lambda b: b.layout.recompute,
        "Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4, generalised per saved tensor",
    ),
    AssumptionRow(
        "vocabulary (padded)", "tokens", lambda b: b.vocab, "Megatron pads to a multiple of 128·tp"
    ),
    AssumptionRow(
        "ZeRO-3 parameters re-sharded after",
        "",
        lambda b: b.layout.reshard_after,
        "forward: 2 all-gathers + 1 reduce-scatter per micro-batch; backward: 1 + 1 per micro-batch, the "
        "stage's weights held; step: 1 + 1 per step, weights and gradients held (PyTorch FSDP2 "
        "reshard_after_forward; torchtitan pipeline schedules; app.core.layout.RESHARD_MODES)",
        applies=lambda b: b.layout.zero >= 3,
    ),
)

RATES: tuple[AssumptionRow, ...] = (
    AssumptionRow(
        "GEMM throughput (large shapes)",
        "TFLOP/s",
        lambda b: round(b.linear.max_flops / 1e12, 1),
        lambda b: f"{b.linear.source}; curve I/(I+{b.linear.half_intensity:g}) (app.core.efficiency)",
    ),
    AssumptionRow(
        "flash attention throughput (forward)",
        "TFLOP/s",
        lambda b: round(b.kernel.forward_share * b.attn_curve.max_flops / 1e12, 1),
        lambda b: f"{b.fw.attention_backend} runs {b.kernel.kernel}; {b.kernel.basis} (app.core.attention)",
    ),
    AssumptionRow(
        "flash attention throughput (backward)",
        "TFLOP/s",
        lambda b: round(b.kernel.backward_share * b.attn_curve.max_flops / 1e12, 1),
        "over 2.5× the forward FLOPs (Dao 2023, Sec. 3.1); same source",
    ),
    AssumptionRow(
        "attention key loop (forward)",
        "× the throughput above",
        lambda b: round(_key_loop(b)[1], 3),
        _key_loop_source,
        applies=lambda b: b.layout.flash_attention and bool(b.seq_len),
    ),
    AssumptionRow(
        "attention head dimension (forward)",
        "× the throughput above",
        lambda b: round(_head_dim(b)[1], 3),
        _head_dim_source,
        applies=lambda b: b.layout.flash_attention and layer_shape(b.model).qk_head_dim < 128,
    ),
    AssumptionRow(
        "sustained share of measured matmul",
        "",
        lambda b: SUSTAINED_FRACTION,
        "power/thermal throttling under long training runs (app.core.efficiency)",
    ),
    AssumptionRow(
        "SM clock under the power limit",
        "share of full-power clock",
        lambda b: round(operating_clock_fraction(b.cluster.gpu, b.opts.power_limit_w, b.calibrated), 4),
        _clock_source,
    ),
    AssumptionRow(
        "element-wise kernels",
        "share of HBM bandwidth",
        lambda b: b.fw.elementwise_efficiency,
        "memory-bound kernels reach 60–80 % of HBM bandwidth (STREAM-like, NVIDIA Nsight guides)",
    ),
    AssumptionRow(
        "cross-entropy traffic",
        "B per logit",
        lambda b: b.fw.ce_bytes_per_logit,
        lambda b: (
            f"{b.fw.name} loss kernels over the fp32 logits, forward + backward (Framework.ce_bytes_per_logit)"
        ),
    ),
    AssumptionRow(
        "norm traffic",
        "B per element (forward)",
        lambda b: b.fw.norm_bytes_per_element,
        "fused norm kernel 4 B; eager fp32 composite 36 B (Framework.norm_bytes_per_element)",
    ),
)

FEATURES: tuple[AssumptionRow, ...] = (
    AssumptionRow(
        "pipeline transfers per micro-batch",
        "boundary transfers",
        lambda b: b.fw.pp_transfers_per_microbatch if b.layout.pp > 1 else 0,
        "Megatron batched send/recv pairs: 2; DeepSpeed blocking instructions: 4 "
        "(Framework.pp_transfers_per_microbatch)",
    ),
    AssumptionRow(
        "asynchronous tensor-parallel backward",
        "on/off",
        lambda b: 1 if (b.fw.tp_async_backward and b.layout.tp > 1) else 0,
        "column-parallel input-gradient all-reduce (reduce-scatter with SP) and SP input re-gather launched "
        "asynchronously behind the weight-/data-gradient GEMMs (Megatron-LM "
        "LinearWithGradAccumulationAndAsyncCommunication; Framework.tp_async_backward)",
    ),
    AssumptionRow(
        "attention dropout in the fused kernel",
        "extra backward kernel time (forward about half of it)",
        lambda b: (
            round(flash_dropout_overhead(b.cluster.gpu)[1], 4)
            if (b.model.attention_dropout > 0 and b.layout.flash_attention)
            else 0.0
        ),
        "Philox numbers on the CUDA cores: GB200 FA4/cuDNN figures (flash-attention PR #2597) scaled by the "
        "tensor-to-CUDA-core peak ratio (app.core.step.flash_dropout_overhead)",
    ),
    AssumptionRow(
        "gradient accumulation pass per micro-batch",
        "B per parameter",
        lambda b: b.fw.grad_accum_bytes_per_param,
        "DeepSpeed BF16_Optimizer folds the 16-bit gradients into its fp32 buffer after every micro-batch "
        "(update_hp_grads: cast + add); Megatron accumulates inside the weight-gradient GEMM: 0 "
        "(Framework.grad_accum_bytes_per_param)",
    ),
    AssumptionRow(
        "saved GEMM inputs",
        "B per element",
        lambda b: b.fw.gemm_input_bytes,
        "16-bit; Transformer Engine keeps FP8 runs' 1-byte and NVFP4 runs' 4.5-bit quantized copies, torchao "
        "the 16-bit inputs (Framework.fp8_saved_input_bytes, app.core.precision)",
    ),
    AssumptionRow(
        "quantization casts",
        "B per GEMM-input element",
        lambda b: cast_bytes_per_element(b.layout.dtype),
        "read 16 bit, write row-wise and transposed copies: FP8 2 + 1 + 1, NVFP4 2 + 2 × 0.5625 (E2M1 with "
        "an E4M3 scale per 16 elements, arXiv 2509.25149); 0 for 16-bit runs (app.core.precision)",
    ),
    AssumptionRow(
        "activation offloading",
        "layers",
        lambda b: b.layout.offload_layers,
        lambda b: (
            "saved activations of these layers copied to host memory and back over a "
            f"{b.cluster.gpu.host_link_bytes_per_s / 1e9:g} GB/s link, double-buffered behind the next layer's "
            "compute (Megatron-core --cpu-offloading-num-layers, Transformer Engine cpu_offload.py)"
        ),
    ),
    AssumptionRow(
        "optimizer offloading",
        "share of the optimizer states on the host",
        lambda b: b.layout.optimizer_offload,
        _optimizer_offload_source,
    ),
    AssumptionRow(
        "last data-parallel gradient bucket, exposed",
        "parameters",
        _last_bucket,
        _last_bucket_source,
        lambda b: b.layout.dp * b.layout.cp > 1,
    ),
    AssumptionRow(
        "MoE dispatch: one copy per destination rank and node",
        "on/off",
        lambda b: 1 if (b.fw.moe_dispatch_dedup and _moe_ep(b)) else 0,
        "DeepEP / HybridEP send a token once to each rank holding one of its experts (DeepEP "
        "get_dispatch_layout: is_token_in_rank) and once per node over the network, fanning it out over NVLink "
        "(DeepSeek-V3 report Sec. 3.2.2); routing as Framework.moe_routing says (app.core.step.dispatch_dedup_share)",
    ),
    AssumptionRow(
        "DeepEP over a multi-node NVLink domain: dispatch / combine bandwidth, at most",
        "GB/s",
        lambda b: f"{DEEPEP_MNNVL_DISPATCH_BYTES_PER_S / 1e9:g} / {DEEPEP_MNNVL_COMBINE_BYTES_PER_S / 1e9:g}",
        f"{DEEPEP_MNNVL_SOURCE}; DeepEP's own kernels serve NVLink domains of up to 8 GPUs "
        "(app.core.step.deepep_mnnvl_floor)",
        _deepep_mnnvl,
    ),
    AssumptionRow(
        "EP all-to-all hidden behind the paired micro-batch",
        "on/off",
        lambda b: 1 if (b.fw.moe_a2a_overlap and _moe_ep(b)) else 0,
        "Megatron-core --overlap-moe-expert-parallel-comm: each all-to-all beside one attention or expert "
        "chunk of the other micro-batch (app.core.step.moe_a2a_overlapped)",
    ),
    AssumptionRow(
        "expert GEMM call, fixed time",
        "µs",
        lambda b: round(b.fw.expert_gemm_host_s * 1e6, 2),
        "per local expert and layer pass, 2 forward and 4 backward calls: Transformer Engine's GroupedLinear runs "
        "one cuBLASLt GEMM per expert over several streams after reading the token counts on the host, 0.267 ms "
        "for 8 experts (TransformerEngine PR #3134); 0 for a single-launch grouped kernel (torchtitan, DeepGEMM, "
        f"or the fused grouped GEMM: {FUSED_GROUPED_EXPERTS_SOURCE}; Framework.expert_gemm_host_s, "
        "app.core.step.layer_times)",
        lambda b: b.model.moe is not None,
    ),
    AssumptionRow(
        "expert-bias traffic per routed token copy, fc1 / fc2 output (forward + backward)",
        "B per element",
        lambda b: "{:g} / {:g}".format(*(sum(pair) for pair in b.fw.expert_bias_bytes)),
        "the experts' biases added outside the grouped GEMMs, read from each framework's code: Megatron-core "
        "TEGroupedMLP._apply_bias (fc2 only), NeMo Automodel GroupedExpertsDeepEP._apply_bias, torchtitan's "
        "repeat_interleave; 0 where the GEMM adds the bias (Framework.expert_bias_bytes, "
        "app.core.step.layer_times)",
        lambda b: layer_shape(b.model).expert_bias,
    ),
)

COUNTS: tuple[AssumptionRow, ...] = (
    AssumptionRow(
        "model FLOPs per token",
        "FLOP",
        lambda b: b.mf,
        lambda b: (
            f"3 × forward, attention counted {b.opts.flop_counting} (Korthikanti 2022 eq. 7 / Megatron 2024)"
        ),
    ),
    AssumptionRow(
        "hardware FLOPs per token",
        "FLOP",
        lambda b: b.hf,
        "model FLOPs + recompute forward (Narayanan et al. 2021 eq. 3)",
    ),
    AssumptionRow(
        "peak for MFU",
        "TFLOP/s",
        lambda b: b.peak / 1e12,
        lambda b: f"{b.cluster.gpu.name} dense {b.layout.dtype} peak",
    ),
    AssumptionRow(
        "pipeline bubble",
        "share of ideal time",
        lambda b: (b.layout.pp - 1) / (b.layout.vp * b.layout.num_microbatches),
        "(p − 1)/(v·m), Narayanan et al. 2021 Sec. 2.2",
    ),
    AssumptionRow(
        "allocator reserve over peak allocated",
        "share of allocated",
        lambda b: b.fw.fragmentation_fraction,
        "caching-allocator fragmentation: 5 % with expandable segments, +15 % for the splitting allocator "
        "(GMLake, Guo et al. ASPLOS 2024, arXiv 2401.08156) (app.core.framework)",
    ),
    AssumptionRow(
        "HBM safety margin",
        "share of HBM",
        lambda b: b.opts.safety_fraction,
        "kept free for allocator spikes and NCCL growth",
    ),
    AssumptionRow(
        "collectives",
        "",
        lambda b: "app.core.network.collective_time",
        "network model (defaults from published nccl-tests measurements unless calibrated)",
    ),
)

OPTIONS: tuple[AssumptionRow, ...] = (
    AssumptionRow(
        "FP8 parameters",
        "B per working weight",
        lambda b: b.fw.weight_bytes,
        "working weights kept and all-gathered as FP8 tensors (Megatron-core --fp8-param-gather, NeMo "
        "fp8_params; torchao's FSDP2 float8 all-gather): weights and the parameter all-gather at 1 B per "
        "parameter, fp32 master weights, Adam moments and gradients unchanged; the transposed FP8 weight "
        "copies Transformer Engine caches for the backward are not counted, with or without FP8 parameters",
        applies=lambda b: b.layout.fp8_param_gather,
    ),
    AssumptionRow(
        "Adam moments",
        "B per parameter",
        lambda b: b.fw.optimizer_bytes,
        _moments_source,
        applies=lambda b: b.layout.optimizer_moments_dtype == "bf16",
    ),
    AssumptionRow(
        "layers kept 16-bit",
        "layers",
        lambda b: b.layout.bf16_first_layers + b.layout.bf16_last_layers,
        _bf16_layers_source,
        applies=lambda b: b.layout.dtype in QUANTIZED_DTYPES,
    ),
)

# every convention, rate, run feature, count and margin an estimate rests on, in the order it lists them
ASSUMPTIONS: tuple[AssumptionRow, ...] = (*CONVENTIONS, *RATES, *FEATURES, *COUNTS, *OPTIONS)


def assumptions(basis: AssumptionBasis) -> list[Assumption]:
    """The assumptions an estimate lists: the rows of ASSUMPTIONS that apply to its run."""
    return [row.of(basis) for row in ASSUMPTIONS if row.applies(basis)]
