"""Per-GPU memory of a training job, for every pipeline stage.

Model states follow Megatron-LM's accounting (docs/source/api-guide/distrib_optimizer.md and
megatron/training/theoretical_memory_usage.py): 16-bit weights (2 B) + fp32 gradient buffer (4 B) + fp32 master
weights (4 B) + Adam moments (8 B) = 18 B/param, or 6 + 12/d with the distributed optimizer (ZeRO-1) over d
data-parallel ranks; ZeRO-2 also shards gradients and ZeRO-3 weights (Rajbhandari et al. 2020, arXiv 1910.02054,
Sec. 5). FP8 is a compute dtype: weights stay 16-bit, master weights and moments fp32.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
arXiv 2205.05198) Sec. 4, written per saved tensor so they generalise beyond GPT-3 (GQA/MQA widths, gated
FFNs, FFN ≠ 4h, MoE top-k, flash attention, context parallelism, optional dropout masks). For a GPT layer with
MHA, GELU, ffn = 4h and dropout the terms reduce to the paper's Table 2: sbh(34 + 5as/h) without parallelism,
sbh(10 + 24/t + 5as/ht) with TP, sbh/t·(34 + 5as/h) with TP+SP, sbh(34/t) with TP+SP+selective, and 2sbh
(2sbh/t with SP) per layer for full recompute.

In-flight micro-batches: stage i of a 1F1B pipeline holds min(p − i, m) micro-batches (Narayanan et al. 2021,
arXiv 2104.04473, Sec. 2.2.1); the interleaved schedule with v chunks holds 2(p − i − 1) + (v − 1)p + 1 chunk
activations on stage i (Megatron-LM schedules.py warm-up count), i.e. p·(1 + (p−1)/(p·v)) layers-worth on the
first stage (theoretical_memory_usage.py); with g micro-batches per pipeline round
(--microbatch-group-size-per-virtual-pipeline-stage) the (v − 1)p term is (v − 1)g.

The formula functions take plain numbers and also work on numpy arrays (no branching on values); branching is
only on group-level fields (recompute mode, flash attention) so a vectorised planner can group by them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, cast

import numpy as np

from app.core.framework import MEGATRON_CORE, Framework
from app.core.layout import Layout, LayoutColumns, stage_bf16_layer_counts, stage_layer_counts
from app.core.model import LayerShape, ModelSpec, layer_shape, num_moe_layers, padded_vocab_size
from app.core.num import Flag, Num, any_true, is_rows, maximum, minimum, where
from app.core.precision import QUANTIZED_DTYPES, SOURCE_BYTES
from app.core.units import GiB

# 16-bit activations (also under FP8 training, where Transformer Engine keeps bf16 tensors between layers and only
# the GEMM inputs saved for the weight gradient drop to 1 B: Framework.gemm_input_bytes)
ACT_BYTES = 2.0
MASK_BYTES = 1.0  # dropout masks are stored as bytes (Korthikanti et al. 2022 Sec. 4.1)
LSE_BYTES = 4.0  # flash attention saves one fp32 log-sum-exp per query and head (Dao 2022, arXiv 2205.14135)
DEFAULT_SAFETY_FRACTION = 0.05  # headroom kept free of HBM for allocator spikes; shown in every result


# ---------------------------------------------------------------------------------------------------------------
# Parameters per GPU
# ---------------------------------------------------------------------------------------------------------------


def transformer_params_per_gpu(
    shape: LayerShape, dense_layers: Num, moe_layers: Num, tp: Num, ep: Num, etp: Num | None = None
) -> tuple[Num, Num]:
    """(non-expert, expert) parameters per GPU for the transformer layers it holds.

    Attention and FFN matrices are split over tp (Shoeybi et al. 2019, arXiv 1909.08053); norms and the MoE
    router are replicated; routed experts are split over ep and, inside each expert, over tp (over etp under
    MoE parallel folding, app.core.layout).
    """
    dense_layer, moe_layer, experts = layer_params(shape, tp, ep, etp)
    return dense_layers * dense_layer + moe_layers * moe_layer, moe_layers * experts


def layer_params(shape: LayerShape, tp: Num, ep: Num, etp: Num | None = None) -> tuple[Num, Num, Num]:
    """Parameters per GPU of one dense layer, of one MoE layer's non-expert part and of its routed experts
    (transformer_params_per_gpu)."""
    attn = shape.attn_params / tp + shape.norm_params
    dense_layer = attn + shape.dense_ffn_params / tp
    moe_layer = attn + shape.router_params + shape.shared_ffn_params / tp
    experts = shape.num_experts / ep * shape.expert_ffn_params / (tp if etp is None else etp)
    return dense_layer, moe_layer, experts


def embedding_params_per_gpu(model: ModelSpec, tp: Num, pp: Num, first: Flag | Num, last: Flag | Num) -> Num:
    """Word embedding on the first stage, LM head on the last (a tied head is a second copy when pp > 1,
    Megatron `setup_embeddings_and_output_layer`). Vocabulary padded to 128·tp."""
    vocab = padded_vocab_size(model.vocab_size, cast(int, tp))  # an array of tp pads per row
    emb = vocab * model.hidden_size / tp
    pos = model.max_seq_len * model.hidden_size if model.position_embedding == "learned" else 0
    norm = (2 if model.norm == "layernorm" else 1) * model.hidden_size
    # with pp = 1 a tied head reuses the embedding already counted on the (only) stage
    head_copy = 1 if not model.tied_embeddings else (np.asarray(pp) > 1) * 1
    # cast: numpy's stubs widen float64 times a bool or int array to a generic floating array
    return cast(
        Num, first * (emb + pos) + last * (emb * head_copy * _head_not_shared(first, last, model) + norm)
    )


def mtp_params_per_gpu(
    model: ModelSpec, shape: LayerShape, tp: Num, ep: Num, pp: Num, etp: Num | None = None
) -> tuple[Num, Num]:
    """(non-expert, expert) parameters per GPU of the model's multi-token-prediction modules on the last pipeline
    stage (ModelSpec.mtp_layers). A module (DeepSeek-V3, arXiv 2412.19437 Sec. 2.2; Megatron-core
    MultiTokenPredictionLayer) normalises the hidden state and the next token's embedding, projects the two (2h → h,
    split over tp), runs one transformer block (costed as the model's average layer) and a final norm; it shares the
    embedding and the LM head with the model, so with pp > 1 an untied model's last stage also holds an embedding
    copy (Megatron-core GPTModel builds the embedding on the stage that runs MTP)."""
    mtp_layers = model.mtp_layers
    if not mtp_layers:
        return 0.0, 0.0
    moe_frac = num_moe_layers(model) / model.num_layers
    block_d, block_e = transformer_params_per_gpu(shape, 1 - moe_frac, moe_frac, tp, ep, etp)
    h = model.hidden_size
    module = block_d + 2 * h * h / tp + 3 * h
    embedding = (
        0.0
        if model.tied_embeddings
        else (np.asarray(pp) > 1) * padded_vocab_size(model.vocab_size, cast(int, tp)) * h / tp
    )
    return cast(
        Num, mtp_layers * module + embedding
    ), mtp_layers * block_e  # cast: as embedding_params_per_gpu


def _head_not_shared(first: Flag | Num, last: Flag | Num, model: ModelSpec) -> Num:
    # with pp = 1 and tied embeddings the head reuses the embedding already counted on the (only) stage
    if not model.tied_embeddings:
        return 1
    return cast(  # numpy's stubs type 1 − a product of bool / int arrays as an integer array
        Num,
        1 - first * last
        if isinstance(first, np.ndarray) or isinstance(last, np.ndarray)
        else int(not (first and last)),
    )


def state_bytes(params: Num, shard: Num, zero: Num, fw: Framework) -> dict[str, Num]:
    """Weights, gradients, master weights and optimizer states for `params` sharded over `shard` ranks."""

    def div(stage: int) -> Num:
        return cast(  # numpy's stubs widen float64 times a bool array to a generic floating dtype
            Num,
            1 + (shard - 1) * (np.asarray(zero) >= stage)
            if isinstance(zero, np.ndarray)
            else (shard if zero >= stage else 1),
        )

    # FSDP's sharded parameter is the fp32 master: no separate 16-bit shard (Framework.zero3_sharded_16bit_copy)
    weight_bytes: Num = fw.weight_bytes
    if not fw.zero3_sharded_16bit_copy:
        kept = (np.asarray(zero) < 3) if isinstance(zero, np.ndarray) else float(zero < 3)
        weight_bytes = cast(Num, fw.weight_bytes * kept)  # cast: as in div
    return {
        "weights": params * weight_bytes / div(3),
        "gradients": params * fw.grad_bytes / div(2) + params * fw.extra_unsharded_bytes,
        "master_weights": params * fw.master_bytes / div(1),
        "optimizer_states": params * fw.optimizer_bytes / div(1),
    }


# Host bytes per offloaded parameter under optimizer offloading: HybridDeviceOptimizer keeps an fp32 copy of the
# parameter (param_update_in_fp32), the CPU AdamW's two fp32 moments and a pinned fp32 gradient buffer
# (megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py: _get_sub_optimizer_param_groups, cpu_copy_map_grad)
OPTIMIZER_HOST_BYTES = 16.0


def optimizer_shard_params(dense_params: Num, expert_params: Num, layout: Layout) -> Num:
    """Parameters whose optimizer states this GPU holds: its share of the dense and expert parameters under the
    distributed optimizer (zero ≥ 1 shards over dp·cp, the experts over their own data-parallel group)."""
    if layout.zero >= 1:
        return dense_params / (layout.dp * layout.cp) + expert_params / layout.expert_dp
    return dense_params + expert_params


def bytes_per_param(zero: int, dp: int, fw: Framework = MEGATRON_CORE) -> float:
    """Model-state bytes per parameter: 18 (no sharding), 6 + 12/d (distributed optimizer), …"""
    return float(sum(state_bytes(1.0, dp, zero, fw).values()))


def zero3_working_bytes(layer_params: Num, fw: Framework, reshard: Num = 0) -> Num:
    """Gathered (unsharded) weights and gradients ZeRO-3 holds at once, for layers of `layer_params` per GPU.

    FSDP (Zhao et al. 2023, arXiv 2304.11277, Sec. 3.2): one unit = one transformer block, the current and the
    prefetched one, with the current unit's unsharded gradient. DeepSpeed ZeRO-3 caps live parameters
    (stage3_max_live_parameters); its gradients go through the reduce bucket (Framework.comm_buffer_bytes).
    `reshard` (Layout.reshard_after's index): parameters kept gathered are counted in zero3_held_bytes instead, and
    so are the gradients kept for the whole step.
    """
    if fw.zero3_live_params > 0:
        return np.minimum(2 * layer_params, fw.zero3_live_params) * fw.weight_bytes
    weights = where(reshard == 0, fw.weight_bytes, 0.0)
    grads = where(reshard == 2, 0.0, fw.grad_bytes)
    return 2 * layer_params * (weights + grads)


def zero3_held_bytes(params: Num, fw: Framework, reshard: Num) -> tuple[Num, Num]:
    """(weights, gradients) bytes ZeRO-3 keeps unsharded across a stage of `params` per GPU (Layout.reshard_after):
    the working weights from the forward to the backward ("backward") or the whole step ("step"), and under "step"
    the gradients accumulated unsharded at the reduction's precision (FSDP2 accumulates in its reduce dtype when
    the gradient sync is deferred, Framework.grad_reduce_bytes)."""
    weights = where(reshard >= 1, params * fw.weight_bytes, 0.0)
    grads = where(reshard == 2, params * fw.grad_reduce_bytes, 0.0)
    return weights, grads


# ---------------------------------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeptActivations:
    """How a layer keeps its activations for the backward: its tensor-parallel size and sequence parallelism
    (numbers, or one column per layout), the recompute mode ("none" | "selective": the Megatron-core `modules`
    recomputed, core attention by default, or with the torchtitan framework its op-level policy | "full": only
    the layer input kept), fused attention, whether the layer is a MoE layer, and the framework's conventions."""

    tp: Num
    sp: Num
    recompute: str
    flash: bool
    moe: bool = False
    fw: Framework = MEGATRON_CORE
    modules: tuple[str, ...] = ("core_attn",)


def layer_activation_bytes(shape: LayerShape, tokens: Num, seq_len: Num, kept: KeptActivations) -> Num:
    """Bytes one transformer layer keeps for backward, per micro-batch, per GPU (Korthikanti 2022 Sec. 4).

    tokens = micro_batch · seq_len / cp on this GPU; seq_len is the full key length attention sees; `kept`: how
    the layer keeps them (KeptActivations).
    """
    tp, sp, recompute, flash, moe, fw = kept.tp, kept.sp, kept.recompute, kept.flash, kept.moe, kept.fw
    modules = kept.modules
    sp_div = 1 + (tp - 1) * (np.asarray(sp) if isinstance(sp, np.ndarray) else bool(sp))
    h = shape.hidden
    if recompute == "full":
        return ACT_BYTES * h * tokens / sp_div
    if recompute == "selective" and fw.selective_policy == "op":
        # torchtitan op-level selective checkpointing (torchtitan/models/llama3/parallelize, _save_list):
        # keeps the layer input and the attention residual, the attention kernel's output (+ log-sum-exp)
        # and every second matmul output; norms, activations and the other matmuls are recomputed
        ffn_mm = (
            shape.experts_per_token * (shape.expert_in_width + shape.expert_out_width)
            if moe
            else shape.ffn_in_width
        )
        mm_outputs = shape.q_width + 2 * shape.kv_width + h + ffn_mm + h
        per_token = (
            ACT_BYTES * (2 * h / sp_div + (shape.q_width + 0.5 * mm_outputs) / tp)
            + LSE_BYTES * shape.heads / tp
        )
        return per_token * tokens
    masks = MASK_BYTES * h * 2 if shape.hidden_dropout else 0.0
    mods = set(modules) if recompute == "selective" else set()
    # SP-shardable: LN1 input, QKV input, LN2 input, FFN input (each 2h), dropout masks after attn and MLP.
    # Megatron-core's recompute modules drop what they re-run: layernorm the two norm outputs (the QKV input and,
    # in a dense layer, the FFN input; a MoE layer keeps its permuted expert inputs), mlp a dense layer's FFN input
    # and intermediates, moe a MoE layer's expert inputs, intermediates and router logits, moe_act the experts'
    # activation outputs, shared_experts the shared experts' intermediates
    # GEMM inputs kept for the weight gradient: 2 B, or the FP8 copy under Transformer Engine (1 B)
    gemm_b = fw.gemm_input_bytes
    ffn_input = gemm_b * h * (shape.experts_per_token if moe else 1)
    whole_ffn = ("moe" if moe else "mlp") in mods
    qkv_input = 0.0 if "layernorm" in mods else gemm_b * h
    if whole_ffn or ("layernorm" in mods and not moe):
        ffn_input = 0.0
    replicated = ACT_BYTES * h * 2 + qkv_input + ffn_input + masks
    # MLA keeps the inputs of its up-projections too: the normed latents and the rotary key, whole on every TP rank
    # (Megatron-core builds MLA's down-projections duplicated, not tensor-parallel), so they count with the layer's
    # other per-token inputs
    replicated += gemm_b * shape.mla_latent_width
    # TP-sharded: Q, K, V, attention output (input of the output projection), FFN intermediates (the activation
    # function's input, 16 bit, and its output, the input of the second FFN GEMM). Recomputing MLA's
    # up-projections (mla_up_proj) drops the per-head Q, K and V, which the backward re-derives from the latents
    attn = ACT_BYTES * (2 * shape.q_width + 2 * shape.kv_width)
    if shape.mla_latent_width and "mla_up_proj" in mods:
        attn = ACT_BYTES * shape.q_width
    if gemm_b != ACT_BYTES:
        # the output projection keeps its own FP8 copy of the attention output; a fused attention kernel still
        # keeps the 16-bit output for its backward (O enters dO·O), the unfused path does not
        attn += gemm_b * shape.q_width if flash else (gemm_b - ACT_BYTES) * shape.q_width
    if moe:
        ffn = 0.0
        if not whole_ffn:
            expert_out = 0.0 if "moe_act" in mods else gemm_b * shape.expert_out_width
            ffn = shape.experts_per_token * (ACT_BYTES * shape.expert_in_width + expert_out)
            ffn += 4.0 * shape.num_experts  # fp32 router logits
        if not whole_ffn and "shared_experts" not in mods:
            ffn += ACT_BYTES * shape.shared_in_width + gemm_b * shape.shared_out_width
    else:
        ffn = 0.0 if whole_ffn else ACT_BYTES * shape.ffn_in_width + gemm_b * shape.ffn_out_width
    sharded = (attn + ffn) / tp
    if flash:
        scores = LSE_BYTES * shape.heads / tp
    elif "core_attn" in mods:
        scores = 0.0
    else:
        per_score = ACT_BYTES + ((MASK_BYTES + ACT_BYTES) if shape.attention_dropout else 0.0)
        scores = per_score * shape.heads * seq_len / tp
    per_token = (replicated / sp_div + sharded + scores) * fw.eager_activation_factor
    return per_token * tokens


def offloaded_activation_bytes(
    shape: LayerShape,
    tokens: Num,
    tp: Num,
    sp: Num,
    moe: bool,
    fw: Framework,
    offload_modules: tuple[str, ...],
    recompute_modules: tuple[str, ...] = (),
) -> Num:
    """Bytes of one layer's saved activations, per micro-batch and GPU, that Megatron-core's fine-grained
    activation offloading moves to host memory (`--fine-grained-activation-offloading --offload-modules ...`;
    docs "Fine-grained Activation Offloading": each listed module offloads its input in forward and reloads it
    before its backward).

    attn_norm / mlp_norm: the residual-stream input of the attention / MLP norm (2h, sequence-parallel shard);
    core_attn: Q, K and V; attn_proj: the output projection's saved input (the attention output: 16 bit, or its
    1-byte copy under FP8); expert_fc1: the permuted tokens entering the experts' first GEMM (top-k copies, at the
    GEMM-input width); moe_act: the experts' activation input (top-k × expert FFN-in width, 16 bit). The MoE
    modules apply to MoE layers only, and not when selective recompute re-runs the whole MoE layer (`moe`): its
    expert inputs are then not kept at all.
    """
    if not offload_modules:
        return 0.0
    mods = set(offload_modules)
    if "moe" in recompute_modules:
        mods -= {"expert_fc1", "moe_act"}
    sp_div = 1 + (tp - 1) * (np.asarray(sp) if isinstance(sp, np.ndarray) else bool(sp))
    h = shape.hidden
    gemm_b = fw.gemm_input_bytes
    replicated = ACT_BYTES * h * (("attn_norm" in mods) + ("mlp_norm" in mods))
    if moe and "expert_fc1" in mods:
        replicated += gemm_b * h * shape.experts_per_token  # each rank's own (sequence-parallel) tokens
    sharded = 0.0
    if "core_attn" in mods:
        sharded += ACT_BYTES * (shape.q_width + 2 * shape.kv_width)
    if "attn_proj" in mods:
        sharded += gemm_b * shape.q_width
    if moe and "moe_act" in mods:
        sharded += ACT_BYTES * shape.experts_per_token * shape.expert_in_width
    return (replicated / sp_div + sharded / tp) * tokens


def inflight_layer_microbatches(
    layers_per_gpu: Num, pp: Num, vp: Num, m: Num, stage: Num, group: Num = 0
) -> Num:
    """Layer-activations (layer × micro-batch) stored at the peak on pipeline stage `stage` (0-based).

    1F1B: min(p − i, m) micro-batches of all L/p layers. Interleaved (v > 1): min(2(p−i−1) + (v−1)g + 1, m·v)
    model chunks of L/(p·v) layers each, g the micro-batches per pipeline round (`group`; 0 = p, Megatron-core's
    default; check_layout keeps g ≥ p): the warm-up count of megatron/core/pipeline_parallel/schedules.py
    get_pp_rank_microbatches, `(p − rank − 1)·2 + (num_model_chunks − 1)·microbatch_group_size_per_vp_stage`,
    plus the chunk whose backward comes next.
    """
    plain = minimum(pp - stage, m) * layers_per_gpu
    g = maximum(pp, group)
    chunks = minimum(2 * (pp - stage - 1) + (vp - 1) * g + 1, m * vp)
    interleaved = chunks * layers_per_gpu / vp
    # an end stage whose layers do not divide by vp (the embedding and the loss taking a layer's slot each:
    # Megatron-core --account-for-embedding/loss-in-pipeline-split; Llama 3 paper, arXiv 2407.21783, Sec. 3.3.2,
    # "the first model chunk on the first stage has only the embedding, and the last model chunk on the last stage
    # has only output projection and loss calculation") has chunks of ⌈l/v⌉ layers but for the short one, its first
    # chunk on the first stage and its last on the last. The warm-up runs the chunks in turn, g micro-batches each
    # (get_pp_rank_microbatches), so the short chunk's share of the held chunks is counted, not averaged
    depth = np.ceil(np.asarray(layers_per_gpu / vp) - 1e-9)
    short = depth * vp - layers_per_gpu
    round_chunks = np.floor(chunks / (g * vp))
    rest = chunks - round_chunks * g * vp
    short_chunk = where(stage == 0, 0, vp - 1)
    short_held = round_chunks * g + minimum(maximum(rest - short_chunk * g, 0), g)
    exact = where(chunks >= m * vp, m * layers_per_gpu, depth * chunks - short * short_held)
    end = (stage == 0) | (stage == pp - 1)
    interleaved = where(end & (short > 0), exact, interleaved)
    out = where(vp > 1, interleaved, plain)
    return out if isinstance(out, np.ndarray) and out.ndim else float(out)


# ---------------------------------------------------------------------------------------------------------------
# Per-stage result
# ---------------------------------------------------------------------------------------------------------------

MEMORY_KEYS = (
    "weights",
    "gradients",
    "master_weights",
    "optimizer_states",
    "activations",
    "logits",
    "workspace",
    "comm_buffers",
    "fragmentation",
    "cuda_context",
    "nccl_buffers",
)


@dataclass(frozen=True)
class StageMemory:
    """Peak memory of one GPU in pipeline stage `stage`; `breakdown` (bytes) sums to `total_bytes`."""

    stage: int
    breakdown: dict[str, float]
    params: float  # parameters held by this GPU (before ZeRO sharding)
    inflight_microbatches: float
    # what this GPU keeps in host memory at the peak (offloaded activations and optimizer states; not part of the
    # HBM total), and the optimizer's part of it
    host_bytes: float = 0.0
    host_optimizer_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return float(sum(self.breakdown.values()))

    @property
    def outside_allocator_bytes(self) -> float:
        """CUDA context and NCCL buffers: visible to nvidia-smi, not to PyTorch's allocator statistics."""
        return self.breakdown["cuda_context"] + self.breakdown.get("nccl_buffers", 0.0)

    @property
    def allocated_bytes(self) -> float:
        """Peak allocated by the framework (what torch.cuda.max_memory_allocated reports)."""
        return self.total_bytes - self.outside_allocator_bytes - self.breakdown["fragmentation"]

    @property
    def reserved_bytes(self) -> float:
        """Peak reserved by the caching allocator (torch.cuda.max_memory_reserved); the total is what
        nvidia-smi shows."""
        return self.total_bytes - self.outside_allocator_bytes

    def to_dict(self) -> dict[str, Any]:  # Any: JSON values
        return {
            "stage": self.stage,
            "breakdown_bytes": dict(self.breakdown),
            "total_bytes": self.total_bytes,
            "allocated_bytes": self.allocated_bytes,
            "reserved_bytes": self.reserved_bytes,
            "params": self.params,
            "inflight_microbatches": self.inflight_microbatches,
            "host_bytes": self.host_bytes,
            "host_optimizer_bytes": self.host_optimizer_bytes,
        }


@dataclass(frozen=True)
class MemoryEstimate:
    stages: list[StageMemory]
    hbm_bytes: float
    safety_fraction: float = DEFAULT_SAFETY_FRACTION
    notes: list[str] = field(default_factory=list)
    # host DRAM per GPU of the reference system (GPUSpec.host_memory_bytes); 0 = unknown, not checked
    host_capacity_bytes: float = 0.0

    @property
    def most_loaded(self) -> StageMemory:
        return max(self.stages, key=lambda s: s.total_bytes)

    @property
    def peak_bytes(self) -> float:
        return self.most_loaded.total_bytes

    @property
    def usable_bytes(self) -> float:
        return self.hbm_bytes * (1 - self.safety_fraction)

    @property
    def margin_bytes(self) -> float:
        """Usable HBM (after the safety margin) minus the most loaded stage's peak; negative → does not fit."""
        return self.usable_bytes - self.peak_bytes

    @property
    def host_bytes(self) -> float:
        """Offloaded activations and optimizer states per GPU in host memory, most loaded stage."""
        return max(s.host_bytes for s in self.stages)

    @property
    def host_fits(self) -> bool:
        """What is offloaded (activations, optimizer states) fits the host DRAM per GPU (true when nothing is
        offloaded or the capacity is not known)."""
        return not (self.host_capacity_bytes and self.host_bytes > self.host_capacity_bytes)

    @property
    def fits(self) -> bool:
        return self.margin_bytes >= 0 and self.host_fits

    def to_dict(self) -> dict[str, Any]:  # Any: JSON values
        return {
            "stages": [s.to_dict() for s in self.stages],
            "most_loaded_stage": self.most_loaded.stage,
            "peak_bytes": self.peak_bytes,
            "hbm_bytes": self.hbm_bytes,
            "safety_fraction": self.safety_fraction,
            "usable_bytes": self.usable_bytes,
            "margin_bytes": self.margin_bytes,
            "host_bytes": self.host_bytes,
            "host_capacity_bytes": self.host_capacity_bytes or None,
            "host_fits": self.host_fits,
            "fits": self.fits,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class MemoryRun:
    """What every row of a memory evaluation shares: the model, the sequence, the framework conventions and the
    run-wide layout options (Megatron-core's recompute and offload module lists); the multi-token-prediction
    modules are the model's (ModelSpec.mtp_layers)."""

    model: ModelSpec
    seq_len: int
    fw: Framework
    flash: bool
    recompute_modules: tuple[str, ...] = ()
    offload_modules: tuple[str, ...] = ()

    @classmethod
    def of(cls, model: ModelSpec, layout: Layout, seq_len: int, fw: Framework) -> MemoryRun:
        return cls(
            model,
            seq_len,
            fw,
            layout.flash_attention,
            layout.recompute_modules,
            layout.offload_modules,
        )

    @cached_property
    def shape(self) -> LayerShape:
        return layer_shape(self.model)

    @property
    def selective_modules(self) -> tuple[str, ...]:
        """What recompute="selective" re-runs (Layout.selective_modules)."""
        return self.recompute_modules or ("core_attn",)


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one transformer layer keeps per micro-batch and GPU, by what the rows' recompute modes need:
    a dense and a MoE layer without recompute, the layer input full recompute keeps, a dense and a MoE layer under
    the row's own mode, and what fine-grained offloading moves to the host from a dense and a MoE layer."""

    dense_none: Num
    moe_none: Num
    full_kept: Num
    dense_mode: Num
    moe_mode: Num
    moved_dense: Num
    moved_moe: Num
    # (dense layer, MoE layer's non-expert part, its routed experts) parameters per GPU (layer_params)
    layer_params: tuple[Num, Num, Num]
    # transient buffers of the layer in flight: all-gathered SP input and the largest intermediate + its gradient
    workspace_rest: Num


def _by_mode(recompute: Num, branches: dict[int, Callable[[], Num]]) -> Num:
    """The value of each row's recompute mode (index into RECOMPUTE_MODES); `branches` maps a mode to a thunk,
    called only for the modes present; a mode without one gives 0."""
    if not is_rows(recompute):
        thunk = branches.get(int(recompute))
        return thunk() if thunk is not None else 0.0
    out: Num = 0.0
    for code, thunk in branches.items():
        chosen = recompute == code
        if chosen.any():
            out = np.where(chosen, thunk(), out)
    return out


def layer_activations(
    run: MemoryRun, cols: LayoutColumns, gemm_input_bytes: float | None = None
) -> LayerActivations:
    """Per-layer saved activations of every row (layer_activation_bytes); `gemm_input_bytes` overrides the
    framework's saved GEMM-input bytes (a layer kept 16-bit under fp8 / fp4)."""
    fw = run.fw if gemm_input_bytes is None else replace(run.fw, gemm_input_bytes=gemm_input_bytes)
    shape = run.shape
    with_moe = num_moe_layers(run.model) > 0
    tokens = cols.micro_batch * run.seq_len / cols.cp
    rec = cols.recompute

    def act(mode: str, moe: bool, mods: tuple[str, ...] = ("core_attn",)) -> Num:
        if moe and not with_moe:
            return 0.0
        return layer_activation_bytes(
            shape, tokens, run.seq_len, KeptActivations(cols.tp, cols.sp, mode, run.flash, moe, fw, mods)
        )

    dense_none, moe_none = act("none", False), act("none", True)
    sel = run.selective_modules
    full_kept = _by_mode(rec, {2: lambda: act("full", False)})
    dense_mode = _by_mode(rec, {0: lambda: dense_none, 1: lambda: act("selective", False, sel)})
    moe_mode = _by_mode(rec, {0: lambda: moe_none, 1: lambda: act("selective", True, sel)})
    moved_dense: Num = 0.0
    moved_moe: Num = 0.0
    if run.offload_modules:
        # Layout.selective_modules: the recompute modules apply to selective rows only
        def moved(moe: bool) -> Num:
            if moe and not with_moe:
                return 0.0
            args = (shape, tokens, cols.tp, cols.sp, moe, fw, run.offload_modules)
            return _by_mode(
                rec,
                {
                    0: lambda: offloaded_activation_bytes(*args),
                    1: lambda: offloaded_activation_bytes(*args, sel),
                    2: lambda: offloaded_activation_bytes(*args),
                },
            )

        moved_dense, moved_moe = moved(False), moved(True)
    widest = max(shape.ffn_in_width, shape.expert_in_width * max(1, shape.experts_per_token), shape.q_width)
    return LayerActivations(
        dense_none,
        moe_none,
        full_kept,
        dense_mode,
        moe_mode,
        moved_dense,
        moved_moe,
        layer_params(shape, cols.tp, cols.ep, cols.etp),
        ACT_BYTES * tokens * (2 * widest / cols.tp + 2 * run.model.hidden_size),
    )


def _saved_per_layer(
    acts: LayerActivations, cols: LayoutColumns, dense_layers: Num, moe_layers: Num, layers: Num
) -> tuple[Num, Num]:
    """Activations one layer of the stage keeps per micro-batch (mean over its dense and MoE layers) and, under full
    recompute, the working set of the layer being recomputed (it holds its full activations during its backward)."""
    rec, rl = cols.recompute, cols.recompute_layers

    def full() -> tuple[Num, Num]:
        mean_full = (acts.dense_none * dense_layers + acts.moe_none * moe_layers) / layers
        # Megatron --recompute-num-layers: the share of the stage's layers recomputed (0 = all)
        share = where(rl > 0, minimum(1.0, rl / layers), 1.0)
        return share * acts.full_kept + (1 - share) * mean_full, mean_full

    def other() -> tuple[Num, Num]:
        return (acts.dense_mode * dense_layers + acts.moe_mode * moe_layers) / layers, 0.0

    if not is_rows(rec):
        return full() if rec == 2 else other()
    kept, working = other()
    if np.any(rec == 2):
        full_kept, full_working = full()
        kept, working = np.where(rec == 2, full_kept, kept), np.where(rec == 2, full_working, working)
    return kept, working


@dataclass(frozen=True)
class StageTerms:
    """One pipeline stage's memory for every row: `breakdown` (MEMORY_KEYS, bytes), the parameters held, the
    in-flight micro-batches per layer, and the host bytes (offloaded activations and optimizer states)."""

    breakdown: dict[str, Num]
    params: Num
    inflight_microbatches: Num
    host_bytes: Num
    host_optimizer_bytes: Num

    @property
    def total_bytes(self) -> Num:
        total: Num = 0
        for key in MEMORY_KEYS:
            total = total + self.breakdown[key]
        return total


def stage_terms(
    run: MemoryRun,
    cols: LayoutColumns,
    acts: LayerActivations,
    stage: Num,
    first: Num,
    last: Num,
    layers: Num,
    bf16: tuple[Num, LayerActivations] | None = None,
) -> StageTerms:
    """Peak per-GPU memory of pipeline stage `stage` (0-based; `first` / `last` 0/1 mark the end stages) holding
    `layers` transformer layers, for one layout or every row. `bf16`: (the stage's layers kept 16-bit, their
    activations) under fp8 / fp4 (Layout.bf16_first_layers / bf16_last_layers)."""
    model, fw = run.model, run.fw
    # MoE layers in proportion to the stage's layers
    moe_layers = num_moe_layers(model) / model.num_layers * layers
    split = (layers, layers - moe_layers, moe_layers)
    dense_params, expert_params = _stage_params(run, cols, acts, (first, last), split)
    breakdown, host_optimizer = _stage_states(run, cols, dense_params, expert_params)
    per_layer, working, moved = _stage_saved_per_layer(run, cols, acts, split, bf16)
    inflight = inflight_layer_microbatches(
        layers, cols.pp, cols.vp, cols.num_microbatches, stage, cols.microbatch_group
    )
    activations, host = _held_activations(cols, (per_layer, moved, inflight), layers)
    activations, logits = _end_stage_activations(
        run, cols, activations, (per_layer, inflight), (first, last), layers
    )
    params = dense_params + expert_params
    # transient buffers of the layer in flight: all-gathered SP input and the largest intermediate + its gradient
    workspace = working + acts.workspace_rest
    comm = _comm_buffers(fw, cols, params / maximum(1.0, layers))
    if any_true((cols.zero >= 3) & (cols.reshard >= 1)):
        held_w, held_g = zero3_held_bytes(params, fw, where(cols.zero >= 3, cols.reshard, 0))
        breakdown["weights"] = breakdown["weights"] + held_w
        breakdown["gradients"] = breakdown["gradients"] + held_g
    breakdown["activations"] = activations
    breakdown["logits"] = logits
    breakdown["workspace"] = workspace
    breakdown["comm_buffers"] = comm
    allocated: Num = 0
    for value in breakdown.values():
        allocated = allocated + value
    breakdown["fragmentation"] = allocated * fw.fragmentation_fraction
    breakdown["cuda_context"] = fw.cuda_context_bytes
    breakdown["nccl_buffers"] = fw.nccl_buffer_bytes
    return StageTerms(
        breakdown={k: breakdown[k] for k in MEMORY_KEYS},
        params=params,
        inflight_microbatches=inflight / layers,
        host_bytes=host + host_optimizer,
        host_optimizer_bytes=host_optimizer,
    )


def _stage_params(
    run: MemoryRun,
    cols: LayoutColumns,
    acts: LayerActivations,
    ends: tuple[Num, Num],
    split: tuple[Num, Num, Num],
) -> tuple[Num, Num]:
    """(dense, expert) parameters a GPU of the stage holds: its layers (transformer_params_per_gpu, with the
    per-layer counts computed once per row), the embedding / LM head of an end stage (`ends`: first, last) and the
    MTP modules of the last. `split`: the stage's (layers, dense layers, MoE layers)."""
    model = run.model
    first, last = ends
    _, dense_layers, moe_layers = split
    tp, pp, ep = cols.tp, cols.pp, cols.ep
    dense_layer, moe_layer, experts = acts.layer_params
    dense_params = dense_layers * dense_layer + moe_layers * moe_layer
    expert_params = moe_layers * experts
    # terms that only an end stage holds are skipped where no row is one (adding nothing changes no bit)
    at_last = any_true(last)
    if any_true(first) or at_last:
        dense_params = dense_params + embedding_params_per_gpu(model, tp, pp, first, last)
    if model.mtp_layers and at_last:
        mtp_dense, mtp_expert = mtp_params_per_gpu(model, run.shape, tp, ep, pp, cols.etp)
        dense_params = dense_params + where(last, mtp_dense, 0.0)
        expert_params = expert_params + where(last, mtp_expert, 0.0)
    return dense_params, expert_params


def _stage_states(
    run: MemoryRun, cols: LayoutColumns, dense_params: Num, expert_params: Num
) -> tuple[dict[str, Num], Num]:
    """(weights, gradients, master weights and optimizer states in HBM, bytes of optimizer states on the host): the
    dense parameters sharded over dp·cp, the experts' over the expert data-parallel ranks (state_bytes), the
    offloaded share of the fp32 master weights and Adam moments (optimizer offloading) moved to the host."""
    fw, zero, dp, cp = run.fw, cols.zero, cols.dp, cols.cp
    states = state_bytes(dense_params, dp * cp, zero, fw)
    breakdown: dict[str, Num] = dict(states)
    if num_moe_layers(run.model):
        # the experts' states (zero for a dense model: adding them would change no bit)
        expert_states = state_bytes(expert_params, cols.expert_dp, zero, fw)
        breakdown = {k: states[k] + expert_states[k] for k in states}
    f = cols.optimizer_offload
    host_optimizer: Num = 0.0
    if any_true(f > 0):
        breakdown["master_weights"] = breakdown["master_weights"] * (1 - f)
        breakdown["optimizer_states"] = breakdown["optimizer_states"] * (1 - f)
        # the optimizer shard this GPU holds (optimizer_shard_params)
        shard_params = where(
            zero >= 1, dense_params / (dp * cp) + expert_params / cols.expert_dp, dense_params + expert_params
        )
        host_optimizer = f * shard_params * OPTIMIZER_HOST_BYTES
    return breakdown, host_optimizer


def _stage_saved_per_layer(
    run: MemoryRun,
    cols: LayoutColumns,
    acts: LayerActivations,
    split: tuple[Num, Num, Num],
    bf16: tuple[Num, LayerActivations] | None,
) -> tuple[Num, Num, Num]:
    """(activations a layer of the stage saves per micro-batch in HBM, its working set, the inputs fine-grained
    offloading moves to the host per layer): the mean over the stage's dense and MoE layers, with its 16-bit layers
    (`bf16`: count, their activations) saving 16-bit GEMM inputs."""
    layers, dense_layers, moe_layers = split
    per_layer, working = _saved_per_layer(acts, cols, dense_layers, moe_layers, layers)
    if bf16 is not None:
        count, acts16 = bf16
        per_layer16, working16 = _saved_per_layer(acts16, cols, dense_layers, moe_layers, layers)
        blended = ((layers - count) * per_layer + count * per_layer16) / layers
        per_layer = where(count > 0, blended, per_layer)
        working = where(count > 0, maximum(working, working16), working)
    moved: Num = 0.0
    if run.offload_modules:
        moved = (acts.moved_dense * dense_layers + acts.moved_moe * moe_layers) / layers
        per_layer = per_layer - moved
    return per_layer, working, moved


def _held_activations(cols: LayoutColumns, saved: tuple[Num, Num, Num], layers: Num) -> tuple[Num, Num]:
    """(the layers' activations in HBM at the peak, the bytes offloaded to the host): `saved` is (per layer and
    micro-batch in HBM, per layer moved by fine-grained offloading, layer-micro-batches in flight)."""
    per_layer, moved, inflight = saved
    activations = per_layer * inflight
    offloaded = cols.offload_layers
    # host memory: the offloaded layers' activations at the end of the forward pass, and the offloaded modules'
    # inputs of every layer and micro-batch in flight
    host = moved * inflight
    if any_true(offloaded > 0):
        host = per_layer * inflight * offloaded / layers + host
        # activation offloading (pp = 1): at the end of the forward pass HBM holds the layers not offloaded and the
        # one whose copy to the host is still running; the backward reloads one layer ahead into the memory the
        # layers after it have freed (Transformer Engine cpu_offload.py, AsyncDoubleBufferGroupOffloadHandler)
        resident = minimum(layers, layers - offloaded + 1)
        activations = where(offloaded > 0, activations * resident / layers, activations)
    # fine-grained offloading: the offloaded inputs of the layer whose copy is in flight stay in HBM until it ends
    return activations + moved, host


def _end_stage_activations(
    run: MemoryRun,
    cols: LayoutColumns,
    activations: Num,
    saved: tuple[Num, Num],
    ends: tuple[Num, Num],
    layers: Num,
) -> tuple[Num, Num]:
    """(`activations` with what an end stage adds, the logits of one micro-batch): the first stage's embedding
    dropout mask; the last stage's final-norm and LM-head inputs, logits and MTP modules. `saved`: (per layer and
    micro-batch, layer-micro-batches in flight)."""
    model, shape = run.model, run.shape
    per_layer, inflight = saved
    first, last = ends
    tp, h = cols.tp, model.hidden_size
    tokens = cols.micro_batch * run.seq_len / cols.cp
    sp_div = where(cols.sp, tp, 1)
    if shape.hidden_dropout and any_true(first):
        # the embedding dropout mask
        activations = activations + where(first, MASK_BYTES * h * tokens / sp_div * inflight / layers, 0.0)
    logits: Num = 0.0
    if any_true(last):
        # final norm input + LM-head input (kept) and the logits of one micro-batch (transient)
        activations = activations + where(last, 2 * ACT_BYTES * h * tokens / sp_div, 0.0)
        vocab = padded_vocab_size(model.vocab_size, cast(int, tp))  # an array of tp pads per row
        logits = where(last, run.fw.logits_bytes_per_element * tokens * vocab / tp, 0.0)
        # multi-token prediction: each module's block keeps an average layer's activations for the micro-batches in
        # flight on this stage, and its projection input (the two normalised h-wide halves) and head input
        mtp_act = model.mtp_layers * (per_layer * inflight / layers + 3 * ACT_BYTES * h * tokens / sp_div)
        activations = activations + where(last, mtp_act, 0.0)
    return activations, logits


def _comm_buffers(fw: Framework, cols: LayoutColumns, params_per_layer: Num) -> Num:
    """The framework's communication buffers, with ZeRO-3's gathered working parameters (zero3_working_bytes)."""
    comm = fw.comm_buffer_bytes
    return where(cols.zero >= 3, comm + zero3_working_bytes(params_per_layer, fw, cols.reshard), comm)


def stage_memory(
    model: ModelSpec, layout: Layout, seq_len: int, stage: int, fw: Framework = MEGATRON_CORE
) -> StageMemory:
    """Peak per-GPU memory of pipeline stage `stage`."""
    run = MemoryRun.of(model, layout, seq_len, fw)
    cols = LayoutColumns.of(layout)
    return _stage_memory(run, cols, layer_activations(run, cols), layout, stage)


def _stage_memory(
    run: MemoryRun, cols: LayoutColumns, acts: LayerActivations, layout: Layout, stage: int
) -> StageMemory:
    """One stage of one layout, from the row-polymorphic `stage_terms`."""
    layers = float(stage_layer_counts(run.model.num_layers, layout)[stage])
    bf16_count = float(stage_bf16_layer_counts(run.model.num_layers, layout)[stage])
    bf16 = (bf16_count, layer_activations(run, cols, SOURCE_BYTES)) if bf16_count else None
    first, last = int(stage == 0), int(stage == layout.pp - 1)
    t = stage_terms(run, cols, acts, stage, first, last, layers, bf16)
    return StageMemory(
        stage=stage,
        breakdown={k: float(v) for k, v in t.breakdown.items()},
        params=float(t.params),
        inflight_microbatches=float(t.inflight_microbatches),
        host_bytes=float(t.host_bytes),
        host_optimizer_bytes=float(t.host_optimizer_bytes),
    )


def memory_estimate(
    model: ModelSpec,
    layout: Layout,
    seq_len: int,
    hbm_bytes: float,
    fw: Framework = MEGATRON_CORE,
    safety_fraction: float = DEFAULT_SAFETY_FRACTION,
    host_capacity_bytes: float = 0.0,
) -> MemoryEstimate:
    run = MemoryRun.of(model, layout, seq_len, fw)
    cols = LayoutColumns.of(layout)
    acts = layer_activations(run, cols)
    stages = [_stage_memory(run, cols, acts, layout, i) for i in range(layout.pp)]
    notes = []
    moments = layout.optimizer_moments_dtype
    if layout.fp8_param_gather:
        notes.append(
            f"FP8 parameters: working weights {fw.weight_bytes:g} B per parameter, gathered in FP8; master weights "
            f"fp32, Adam moments {moments}, gradients {fw.grad_bytes:g} B; saved GEMM inputs "
            f"{fw.gemm_input_bytes:g} B per element"
        )
    elif layout.dtype in QUANTIZED_DTYPES:
        name = "FP8" if layout.dtype == "fp8" else "NVFP4"
        notes.append(
            f"{name} is a compute dtype: weights stay 16-bit, master weights fp32, Adam moments {moments}; "
            f"only the saved GEMM inputs shrink ({fw.gemm_input_bytes:g} B per element)"
        )
    if moments == "bf16":
        notes.append(
            f"Adam moments in bf16 (precision-aware optimizer): {fw.optimizer_bytes:g} B per parameter, sharded "
            f"over the data-parallel ranks; fp32 master weights at {fw.master_bytes:g} B per parameter"
        )
    est = MemoryEstimate(stages, float(hbm_bytes), safety_fraction, notes, float(host_capacity_bytes))
    if est.host_bytes > 0:
        top = max(stages, key=lambda st: st.host_bytes)
        parts = {
            "activations": top.host_bytes - top.host_optimizer_bytes,
            "optimizer states": top.host_optimizer_bytes,
        }
        held_parts = [(name, b) for name, b in parts.items() if b > 0]
        what = (
            held_parts[0][0]
            if len(held_parts) == 1
            else " and ".join(f"{name} ({b / GiB:.1f} GiB)" for name, b in held_parts)
        )
        held = f"offloaded {what} hold {est.host_bytes / GiB:.1f} GiB of host memory per GPU"
        if host_capacity_bytes:
            verdict = "fits" if est.host_fits else "does NOT fit"
            held += f"; {verdict} in the reference system's {host_capacity_bytes / GiB:.0f} GiB per GPU"
        notes.append(held)
    return est
