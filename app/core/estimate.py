"""One estimate: memory per pipeline stage and step time for a model × cluster × layout × sequence length."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from app.core.attention import AttentionKernel, kv_loop_efficiency
from app.core.efficiency import (
    FP4_GEMM_SHARE,
    NON_CLOCK_POWER_FRACTION,
    SUSTAINED_FRACTION,
    GemmEfficiency,
    HardwareProfile,
    fp4_rate_assumed,
    operating_clock_fraction,
    training_curves,
)
from app.core.errors import Problem, SpecError
from app.core.framework import MEGATRON_CORE, Framework
from app.core.hardware import ClusterSpec
from app.core.layout import (
    Layout,
    check_layout,
    stage_bf16_layer_counts,
    stage_layer_counts,
    stage_layers_label,
)
from app.core.memory import DEFAULT_SAFETY_FRACTION, MemoryEstimate, MemoryRun, memory_estimate
from app.core.model import (
    AttentionCounting,
    ModelSpec,
    attention_keys,
    forward_flops_per_token,
    hardware_flops_per_token,
    layer_shape,
    model_flops_per_token,
    mtp_flops_per_token,
    num_moe_layers,
    padded_vocab_size,
    param_counts,
)
from app.core.precision import QUANTIZED_DTYPES, cast_bytes_per_element
from app.core.step import (
    DEFAULT_HOST_MEMORY_BYTES_PER_S,
    StepEstimate,
    attention_kernel,
    flash_dropout_overhead,
    step_estimate,
)


def module_recompute_flops_per_token(model: ModelSpec, modules: tuple[str, ...]) -> float:
    """Matmul FLOPs per token that Megatron-core's selective recompute modules re-run: the dense MLPs (mlp), the
    routed experts and router (moe) and the shared experts (moe, shared_experts), 2 FLOPs per weight per token."""
    shape = layer_shape(model)
    h = model.hidden_size
    n_moe = num_moe_layers(model)
    flops = 0.0
    if "mlp" in modules:
        flops += (model.num_layers - n_moe) * 2.0 * h * (shape.ffn_in_width + shape.ffn_out_width)
    if "moe" in modules:
        routed = (
            shape.experts_per_token * (shape.expert_in_width + shape.expert_out_width) + shape.num_experts
        )
        flops += n_moe * 2.0 * h * routed
    if "moe" in modules or "shared_experts" in modules:
        flops += n_moe * 2.0 * h * (shape.shared_in_width + shape.shared_out_width)
    return flops


def recomputed_layer_share(num_layers: int, stage_layers: Any, recompute_layers: int | None) -> float:
    """Share of all layers whose forward full recompute re-runs: every layer, or Megatron's
    --recompute-num-layers of each stage's `stage_layers` (all of a stage that holds fewer)."""
    if recompute_layers is None:
        return 1.0
    return sum(min(recompute_layers, n) for n in stage_layers) / num_layers


def flops_per_token(
    model: ModelSpec,
    seq_len: int,
    recompute: str,
    recomputed_share: float,
    run: MemoryRun,
    flop_counting: AttentionCounting,
    vocab: int,
) -> tuple[float, float]:
    """(model, hardware) FLOPs per token of one layout: the model's (with its multi-token-prediction modules), and
    what the GPUs run, with the forward passes recompute re-runs (`recomputed_share` of the layers under full)."""
    mf = model_flops_per_token(model, seq_len, flop_counting, vocab)
    rec_mode = recompute
    if rec_mode == "selective" and run.flash:
        rec_mode = "none"  # flash attention already recomputes attention scores inside its backward kernel
    hf = hardware_flops_per_token(model, seq_len, rec_mode, recomputed_share, flop_counting, vocab)
    if recompute == "selective" and run.fw.selective_policy == "op":
        # op-level selective checkpointing re-runs every second matmul of the forward (app.core.memory)
        hf = hardware_flops_per_token(model, seq_len, "none", 1.0, flop_counting, vocab)
        hf += 0.5 * forward_flops_per_token(model, seq_len, flop_counting, vocab).matmul
    elif recompute == "selective":
        hf += module_recompute_flops_per_token(model, run.selective_modules)
    mtp_mf, mtp_hf = mtp_flops_per_token(model, seq_len, recompute, flop_counting, vocab)
    return mf + mtp_mf, hf + mtp_hf


@dataclass(frozen=True)
class Assumption:
    name: str
    value: Any
    unit: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "source": self.source}


@dataclass(frozen=True)
class EstimateOptions:
    """Conventions that are not part of the layout: framework behaviour and how FLOPs are counted."""

    framework: Framework = MEGATRON_CORE
    flop_counting: AttentionCounting = "full"  # attention FLOPs in model/hardware FLOPs (Megatron: full s²)
    causal: bool = True  # causal language model: flash attention skips the masked half
    safety_fraction: float = DEFAULT_SAFETY_FRACTION
    # operating power limit per GPU (nvidia-smi -pl); None → the part's own limit (`tdp_w`), derated only where
    # that is below the die's design power (`full_power_w`)
    power_limit_w: float | None = None


@dataclass(frozen=True)
class Estimate:
    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    seq_len: int
    memory: MemoryEstimate
    step: StepEstimate
    params_total: int
    params_active: int
    model_flops_per_token: float
    hardware_flops_per_token: float
    assumptions: list[Assumption] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.name,
            "mtp_layers": self.model.mtp_layers,
            "gpu": self.cluster.gpu.name,
            "num_gpus": self.cluster.num_gpus,
            "layout": self.layout.to_dict(),
            "seq_len": self.seq_len,
            "params": {"total": self.params_total, "active": self.params_active},
            "flops_per_token": {
                "model": self.model_flops_per_token,
                "hardware": self.hardware_flops_per_token,
            },
            "memory": self.memory.to_dict(),
            "step": self.step.to_dict(),
            "assumptions": [a.to_dict() for a in self.assumptions],
        }


def framework_conventions(
    framework: Framework, dtype: str, fp8_params: bool = False, moments_dtype: str = "fp32"
) -> Framework:
    """The framework's conventions for a compute dtype (Framework.for_dtype), FP8 parameters and an Adam-moment dtype
    (Framework.with_precision)."""
    return framework.for_dtype(dtype).with_precision(dtype, fp8_params, moments_dtype)


def framework_for(framework: Framework, layout: Layout) -> Framework:
    """The framework's conventions for this layout: its compute dtype (Framework.for_dtype) and precision options
    (Framework.with_precision). Raises SpecError naming the field when the framework cannot run FP8 parameters at
    this ZeRO stage or bf16 Adam moments at all."""
    fw = framework.for_dtype(layout.dtype)
    problems = []
    if layout.fp8_param_gather:
        refusal = fw.fp8_param_gather_refusal(layout.zero)
        if refusal is not None:
            problems.append(Problem("layout.fp8_param_gather", refusal))
    if layout.optimizer_moments_dtype == "bf16":
        refusal = fw.precision_aware_refusal()
        if refusal is not None:
            problems.append(Problem("layout.optimizer_moments_dtype", refusal))
    if problems:
        raise SpecError(problems)
    return framework_conventions(
        framework, layout.dtype, layout.fp8_param_gather, layout.optimizer_moments_dtype
    )


@dataclass(frozen=True)
class _Basis:
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


def _convention_assumptions(basis: _Basis) -> list[Assumption]:
    """The framework, sharding, pipeline split, activations and vocabulary the estimate assumes."""
    model, layout, fw, vocab = basis.model, basis.layout, basis.fw, basis.vocab
    return [
        Assumption("framework", fw.name, "", "app.core.framework presets (sources in that module)"),
        Assumption(
            "bytes per parameter (weights+grads+master+Adam)",
            fw.weight_bytes + fw.grad_bytes + fw.master_bytes + fw.optimizer_bytes,
            "B",
            "Megatron-LM distrib_optimizer.md: 18 B/param, 6 + 12/d with the distributed optimizer",
        ),
        Assumption("ZeRO stage", layout.zero, "", "Rajbhandari et al. 2020 (arXiv 1910.02054) Sec. 5"),
        Assumption(
            "transformer layers per pipeline stage",
            stage_layers_label(stage_layer_counts(model.num_layers, layout)),
            "layers",
            "uneven split: the rest shared evenly by the stages between (Megatron-core "
            "--decoder-first/last-pipeline-num-layers); the first stage also holds the embedding, the last the "
            "LM head and loss; the slowest stage sets the 1F1B pace"
            if layout.uneven_pipeline
            else "even split: L / pp on every stage; the first also holds the embedding, the last the LM head and "
            "loss",
        ),
        Assumption(
            "activations",
            layout.recompute,
            "",
            "Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4, generalised per saved tensor",
        ),
        Assumption("vocabulary (padded)", vocab, "tokens", "Megatron pads to a multiple of 128·tp"),
        *_reshard_assumption(layout),
    ]


def _reshard_assumption(layout: Layout) -> list[Assumption]:
    """When ZeRO-3 frees its gathered parameters (Layout.reshard_after), for a ZeRO-3 layout."""
    if layout.zero < 3:
        return []
    return [
        Assumption(
            "ZeRO-3 parameters re-sharded after",
            layout.reshard_after,
            "",
            "forward: 2 all-gathers + 1 reduce-scatter per micro-batch; backward: 1 + 1 per micro-batch, the "
            "stage's weights held; step: 1 + 1 per step, weights and gradients held (PyTorch FSDP2 "
            "reshard_after_forward; torchtitan pipeline schedules; app.core.layout.RESHARD_MODES)",
        )
    ]


def _key_loop_assumption(basis: _Basis) -> list[Assumption]:
    """The share of the long-sequence attention rates (the two throughputs above) this run's kernels reach over
    their loop of keys, for a fused kernel."""
    if not basis.layout.flash_attention or not basis.seq_len:
        return []
    cp = basis.layout.cp
    keys = attention_keys(basis.seq_len, basis.opts.causal)
    fwd, bwd = kv_loop_efficiency(keys, cp, basis.kernel.loop_scale)
    return [
        Assumption(
            "attention key loop (forward)",
            round(float(fwd), 3),
            "× the throughput above",
            f"backward × {float(bwd):.3f}; {keys:,.0f} keys per query in {cp} ring step(s): a per-query-tile cost "
            "and the causal diagonal, fitted on cuDNN 9.19's H200 sequence sweep (NVIDIA/cudnn-frontend), scaled "
            "by the kernel's rate over HBM bandwidth (app.core.attention.kv_loop_efficiency); sliding-window layers "
            "see fewer keys",
        )
    ]


def _rate_assumptions(basis: _Basis) -> list[Assumption]:
    """The kernel rates: GEMM and attention throughput, clock, element-wise, loss and norm traffic."""
    cluster, fw, opts, linear, attn_curve, kernel, calibrated = (
        basis.cluster,
        basis.fw,
        basis.opts,
        basis.linear,
        basis.attn_curve,
        basis.kernel,
        basis.calibrated,
    )
    return [
        Assumption(
            "GEMM throughput (large shapes)",
            round(linear.max_flops / 1e12, 1),
            "TFLOP/s",
            f"{linear.source}; curve I/(I+{linear.half_intensity:g}) (app.core.efficiency)",
        ),
        Assumption(
            "flash attention throughput (forward)",
            round(kernel.forward_share * attn_curve.max_flops / 1e12, 1),
            "TFLOP/s",
            f"{fw.attention_backend} runs {kernel.kernel}; {kernel.basis} (app.core.attention)",
        ),
        Assumption(
            "flash attention throughput (backward)",
            round(kernel.backward_share * attn_curve.max_flops / 1e12, 1),
            "TFLOP/s",
            "over 2.5× the forward FLOPs (Dao 2023, Sec. 3.1); same source",
        ),
        *_key_loop_assumption(basis),
        Assumption(
            "sustained share of measured matmul",
            SUSTAINED_FRACTION,
            "",
            "power/thermal throttling under long training runs (app.core.efficiency)",
        ),
        Assumption(
            "SM clock under the power limit",
            round(operating_clock_fraction(cluster.gpu, opts.power_limit_w, calibrated), 4),
            "share of full-power clock",
            f"limit {opts.power_limit_w or cluster.gpu.tdp_w:g} W of {cluster.gpu.full_power_w:g} W design power; "
            f"clock-dependent power ∝ f³, {NON_CLOCK_POWER_FRACTION:g} of it fixed (app.core.efficiency)",
        ),
        Assumption(
            "element-wise kernels",
            fw.elementwise_efficiency,
            "share of HBM bandwidth",
            "memory-bound kernels reach 60–80 % of HBM bandwidth (STREAM-like, NVIDIA Nsight guides)",
        ),
        Assumption(
            "cross-entropy traffic",
            fw.ce_bytes_per_logit,
            "B per logit",
            f"{fw.name} loss kernels over the fp32 logits, forward + backward (Framework.ce_bytes_per_logit)",
        ),
        Assumption(
            "norm traffic",
            fw.norm_bytes_per_element,
            "B per element (forward)",
            "fused norm kernel 4 B; eager fp32 composite 36 B (Framework.norm_bytes_per_element)",
        ),
    ]


def _feature_assumptions(basis: _Basis) -> list[Assumption]:
    """What the run's framework and options do: pipeline transfers, overlaps, casts, offloading, MoE dispatch."""
    model, cluster, layout, fw = basis.model, basis.cluster, basis.layout, basis.fw
    return [
        Assumption(
            "pipeline transfers per micro-batch",
            fw.pp_transfers_per_microbatch if layout.pp > 1 else 0,
            "boundary transfers",
            "Megatron batched send/recv pairs: 2; DeepSpeed blocking instructions: 4 "
            "(Framework.pp_transfers_per_microbatch)",
        ),
        Assumption(
            "asynchronous tensor-parallel backward",
            1 if (fw.tp_async_backward and layout.tp > 1) else 0,
            "on/off",
            "column-parallel input-gradient all-reduce (reduce-scatter with SP) and SP input re-gather launched "
            "asynchronously behind the weight-/data-gradient GEMMs (Megatron-LM "
            "LinearWithGradAccumulationAndAsyncCommunication; Framework.tp_async_backward)",
        ),
        Assumption(
            "attention dropout in the fused kernel",
            round(flash_dropout_overhead(cluster.gpu)[1], 4)
            if (model.attention_dropout > 0 and layout.flash_attention)
            else 0.0,
            "extra backward kernel time (forward about half of it)",
            "Philox numbers on the CUDA cores: GB200 FA4/cuDNN figures (flash-attention PR #2597) scaled by the "
            "tensor-to-CUDA-core peak ratio (app.core.step.flash_dropout_overhead)",
        ),
        Assumption(
            "gradient accumulation pass per micro-batch",
            fw.grad_accum_bytes_per_param,
            "B per parameter",
            "DeepSpeed BF16_Optimizer folds the 16-bit gradients into its fp32 buffer after every micro-batch "
            "(update_hp_grads: cast + add); Megatron accumulates inside the weight-gradient GEMM: 0 "
            "(Framework.grad_accum_bytes_per_param)",
        ),
        Assumption(
            "saved GEMM inputs",
            fw.gemm_input_bytes,
            "B per element",
            "16-bit; Transformer Engine keeps FP8 runs' 1-byte and NVFP4 runs' 4.5-bit quantized copies, torchao "
            "the 16-bit inputs (Framework.fp8_saved_input_bytes, app.core.precision)",
        ),
        Assumption(
            "quantization casts",
            cast_bytes_per_element(layout.dtype),
            "B per GEMM-input element",
            "read 16 bit, write row-wise and transposed copies: FP8 2 + 1 + 1, NVFP4 2 + 2 × 0.5625 (E2M1 with "
            "an E4M3 scale per 16 elements, arXiv 2509.25149); 0 for 16-bit runs (app.core.precision)",
        ),
        Assumption(
            "activation offloading",
            layout.offload_layers,
            "layers",
            f"saved activations of these layers copied to host memory and back over a "
            f"{cluster.gpu.host_link_bytes_per_s / 1e9:g} GB/s link, double-buffered behind the next layer's "
            "compute (Megatron-core --cpu-offloading-num-layers, Transformer Engine cpu_offload.py)",
        ),
        Assumption(
            "optimizer offloading",
            layout.optimizer_offload,
            "share of the optimizer states on the host",
            "fp32 master + Adam moments + pinned gradient (16 B per parameter) in host memory; gradient to the host "
            "and weight back (4 B each way over the host link) pipelined with a CPU AdamW bound by host memory "
            f"bandwidth ({(cluster.gpu.host_memory_bandwidth_bytes_per_s or DEFAULT_HOST_MEMORY_BYTES_PER_S) / 1e9:g} "
            "GB/s per GPU"
            + (
                ""
                if cluster.gpu.host_memory_bandwidth_bytes_per_s
                else ", DGX H100 figure: none in the catalog"
            )
            + "; assumes several CPU threads per rank, torchrun's default OMP_NUM_THREADS=1 is slower) "
            "(Megatron-core HybridDeviceOptimizer, app.core.step.optimizer_step_time)",
        ),
        Assumption(
            "MoE dispatch: one copy per destination node",
            1 if (fw.moe_dispatch_dedup and model.moe is not None and layout.ep > 1) else 0,
            "on/off",
            "DeepEP / HybridEP send a token once per node and fan it out over NVLink (DeepSeek-V3 report "
            "Sec. 3.2.2); balanced routing over the EP group's nodes (app.core.step.dispatch_dedup_share)",
        ),
        Assumption(
            "EP all-to-all hidden behind the paired micro-batch",
            1 if (fw.moe_a2a_overlap and model.moe is not None and layout.ep > 1) else 0,
            "on/off",
            "Megatron-core --overlap-moe-expert-parallel-comm: each all-to-all beside one attention or expert "
            "chunk of the other micro-batch (app.core.step.moe_a2a_overlapped)",
        ),
    ]


def _count_assumptions(basis: _Basis) -> list[Assumption]:
    """The FLOPs counted, the peak MFU is quoted against, the bubble, and the memory margins."""
    cluster, layout, fw, opts, mf, hf, peak = (
        basis.cluster,
        basis.layout,
        basis.fw,
        basis.opts,
        basis.mf,
        basis.hf,
        basis.peak,
    )
    return [
        Assumption(
            "model FLOPs per token",
            mf,
            "FLOP",
            f"3 × forward, attention counted {opts.flop_counting} (Korthikanti 2022 eq. 7 / Megatron 2024)",
        ),
        Assumption(
            "hardware FLOPs per token",
            hf,
            "FLOP",
            "model FLOPs + recompute forward (Narayanan et al. 2021 eq. 3)",
        ),
        Assumption("peak for MFU", peak / 1e12, "TFLOP/s", f"{cluster.gpu.name} dense {layout.dtype} peak"),
        Assumption(
            "pipeline bubble",
            (layout.pp - 1) / (layout.vp * layout.num_microbatches),
            "share of ideal time",
            "(p − 1)/(v·m), Narayanan et al. 2021 Sec. 2.2",
        ),
        Assumption(
            "allocator reserve over peak allocated",
            fw.fragmentation_fraction,
            "share of allocated",
            "caching-allocator fragmentation: 5 % with expandable segments, +15 % for the splitting allocator "
            "(GMLake, Guo et al. ASPLOS 2024, arXiv 2401.08156) (app.core.framework)",
        ),
        Assumption(
            "HBM safety margin",
            opts.safety_fraction,
            "share of HBM",
            "kept free for allocator spikes and NCCL growth",
        ),
        Assumption(
            "collectives",
            "app.core.network.collective_time",
            "",
            "network model (defaults from published nccl-tests measurements unless calibrated)",
        ),
    ]


def _option_assumptions(basis: _Basis) -> list[Assumption]:
    """The assumptions of the precision options a run turns on: FP8 parameters, bf16 moments, 16-bit layers."""
    model, layout, fw = basis.model, basis.layout, basis.fw
    assumptions: list[Assumption] = []
    if layout.fp8_param_gather:
        assumptions.append(
            Assumption(
                "FP8 parameters",
                fw.weight_bytes,
                "B per working weight",
                "working weights kept and all-gathered as FP8 tensors (Megatron-core --fp8-param-gather, NeMo "
                "fp8_params; torchao's FSDP2 float8 all-gather): weights and the parameter all-gather at 1 B per "
                "parameter, fp32 master weights, Adam moments and gradients unchanged; the transposed FP8 weight "
                "copies Transformer Engine caches for the backward are not counted, with or without FP8 parameters",
            )
        )
    if layout.optimizer_moments_dtype == "bf16":
        assumptions.append(
            Assumption(
                "Adam moments",
                fw.optimizer_bytes,
                "B per parameter",
                "bf16 first and second moments (Megatron-core --use-precision-aware-optimizer --exp-avg-dtype bf16 "
                "--exp-avg-sq-dtype bf16, Transformer Engine FusedAdam; Megatron-Bridge's DeepSeek-V3 recipe); "
                f"fp32 master weights at {fw.master_bytes:g} B per parameter (with bf16 weights only their low 16 "
                "bits, Megatron-core store_param_remainders); the optimizer step reads and writes "
                f"{fw.adam_step_bytes_per_param:g} B per parameter",
            )
        )
    if layout.dtype in QUANTIZED_DTYPES:
        bf16_by_stage = "|".join(str(n) for n in stage_bf16_layer_counts(model.num_layers, layout))
        assumptions.append(
            Assumption(
                "layers kept 16-bit",
                layout.bf16_first_layers + layout.bf16_last_layers,
                "layers",
                f"first {layout.bf16_first_layers}, last {layout.bf16_last_layers} (Megatron-core "
                "--first-last-layers-bf16 --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16): 16-bit "
                f"GEMMs, no casts, 16-bit saved inputs; per stage {bf16_by_stage}. Megatron-Bridge's FP8 current-"
                "scaling recipe keeps 1 + 1, NVIDIA's NVFP4 recipe about 15 % of the layers (arXiv 2509.25149)",
            )
        )
    return assumptions


def _assumptions(basis: _Basis) -> list[Assumption]:
    """The assumptions an estimate lists: every convention, rate, run feature, count and margin it rests on."""
    return [
        *_convention_assumptions(basis),
        *_rate_assumptions(basis),
        *_feature_assumptions(basis),
        *_count_assumptions(basis),
        *_option_assumptions(basis),
    ]


def estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    seq_len: int,
    profile: HardwareProfile | None = None,
    *,
    options: EstimateOptions | None = None,
) -> Estimate:
    """Memory and step time of one training configuration. Raises SpecError listing every inconsistency."""
    opts = options or EstimateOptions()
    problems: list[Problem] = []
    try:
        check_layout(model, cluster, layout, seq_len)
    except SpecError as exc:
        problems = list(exc.problems)
    try:
        fw = framework_for(opts.framework, layout)
    except SpecError as exc:
        problems.extend(exc.problems)
    if problems:
        raise SpecError(problems)  # every problem at once: the layout's and the framework's
    linear, attn_curve = training_curves(cluster.gpu, layout.dtype, profile, opts.power_limit_w)
    kernel = attention_kernel(fw, cluster.gpu, profile)
    calibrated = profile is not None and profile.gemm is not None
    vocab = padded_vocab_size(model.vocab_size, layout.tp)
    counts = param_counts(model)
    rec_share = 1.0
    if layout.recompute == "full":
        per_stage = stage_layer_counts(model.num_layers, layout)
        rec_share = recomputed_layer_share(model.num_layers, per_stage, layout.recompute_layers)
    run = MemoryRun.of(model, layout, seq_len, fw)
    mf, hf = flops_per_token(model, seq_len, layout.recompute, rec_share, run, opts.flop_counting, vocab)
    peak = cluster.gpu.peak(layout.dtype)
    network = profile.network if profile is not None else None
    mem = memory_estimate(
        model,
        layout,
        seq_len,
        cluster.gpu.hbm_bytes,
        fw,
        opts.safety_fraction,
        host_capacity_bytes=cluster.gpu.host_memory_bytes,
    )
    step = step_estimate(
        model, cluster, layout, seq_len, linear, attn_curve, mf, hf, peak, fw, network, opts.causal, kernel
    )
    if layout.dtype == "fp4" and fp4_rate_assumed(cluster.gpu, profile):
        step = replace(
            step,
            notes=[
                *step.notes,
                f"NVFP4 GEMM rate assumed, not measured, for {cluster.gpu.name}: its dense FP4 peak at the share of "
                f"peak measured BF16 GEMMs reach, x {FP4_GEMM_SHARE:g} (see GEMM throughput). Megatron-Bridge's eight "
                "published NVFP4 runs took 0.93-1.13x the step time estimated this way "
                "(docs/constants.md#fp4-gemm-share)",
            ],
        )
    assumptions = _assumptions(
        _Basis(
            model,
            cluster,
            layout,
            fw,
            opts,
            linear,
            attn_curve,
            kernel,
            vocab,
            mf,
            hf,
            peak,
            calibrated,
            seq_len,
        )
    )
    return Estimate(
        model=model,
        cluster=cluster,
        layout=layout,
        seq_len=seq_len,
        memory=mem,
        step=step,
        params_total=counts.total,
        params_active=counts.active,
        model_flops_per_token=mf,
        hardware_flops_per_token=hf,
        assumptions=assumptions,
    )
