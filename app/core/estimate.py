"""One estimate: memory per pipeline stage and step time for a model × cluster × layout × sequence length."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from app.core.assumptions import Assumption, AssumptionBasis, assumptions
from app.core.efficiency import (
    FP4_GEMM_SHARE,
    HardwareProfile,
    fp4_rate_assumed,
    training_curves,
)
from app.core.errors import Problem, SpecError
from app.core.framework import MEGATRON_CORE, Framework
from app.core.hardware import ClusterSpec
from app.core.layout import (
    Layout,
    check_layout,
    stage_layer_counts,
)
from app.core.memory import DEFAULT_SAFETY_FRACTION, MemoryEstimate, MemoryRun, memory_estimate
from app.core.model import (
    AttentionCounting,
    ModelSpec,
    forward_flops_per_token,
    hardware_flops_per_token,
    layer_shape,
    model_flops_per_token,
    mtp_flops_per_token,
    num_moe_layers,
    padded_vocab_size,
    param_counts,
)
from app.core.step import (
    StepEstimate,
    StepRun,
    attention_kernel,
    step_estimate,
)


def module_recompute_flops_per_token(model: ModelSpec, modules: tuple[str, ...]) -> float:
    """Matmul FLOPs per token that Megatron-core's selective recompute modules re-run: the dense MLPs (mlp), the
    routed experts and router (moe), the shared experts (moe, shared_experts) and MLA's up-projections
    (mla_up_proj, every layer), 2 FLOPs per weight per token."""
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
    if "mla_up_proj" in modules:
        flops += model.num_layers * 2.0 * shape.mla_up_params
    return flops


def recomputed_layer_share(
    num_layers: int, stage_layers: Iterable[int], recompute_layers: int | None
) -> float:
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
    step_run = StepRun(model, cluster, layout, seq_len, linear, attn_curve, fw, network, opts.causal, kernel)
    step = step_estimate(step_run, mf, hf, peak)
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
    listed = assumptions(
        AssumptionBasis(
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
        assumptions=listed,
    )
