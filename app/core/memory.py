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
first stage (theoretical_memory_usage.py).

The formula functions take plain numbers and also work on numpy arrays (no branching on values); branching is
only on group-level fields (recompute mode, flash attention) so a vectorised planner can group by them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from app.core.framework import MEGATRON_CORE, Framework
from app.core.layout import Layout, stage_bf16_layer_counts, stage_layer_counts
from app.core.model import LayerShape, ModelSpec, layer_shape, num_moe_layers, padded_vocab_size
from app.core.precision import QUANTIZED_DTYPES, SOURCE_BYTES
from app.core.units import GiB

# 16-bit activations (also under FP8 training, where Transformer Engine keeps bf16 tensors between layers and only
# the GEMM inputs saved for the weight gradient drop to 1 B: Framework.gemm_input_bytes)
ACT_BYTES = 2.0
MASK_BYTES = 1.0  # dropout masks are stored as bytes (Korthikanti et al. 2022 Sec. 4.1)
LSE_BYTES = 4.0  # flash attention saves one fp32 log-sum-exp per query and head (Dao 2022, arXiv 2205.14135)
DEFAULT_SAFETY_FRACTION = 0.05  # headroom kept free of HBM for allocator spikes; shown in every result


def _sel(cond: Any, if_true: Any, if_false: Any) -> Any:
    """Arithmetic select that works for Python scalars and numpy arrays alike."""
    return (
        np.where(cond, if_true, if_false) if isinstance(cond, np.ndarray) else (if_true if cond else if_false)
    )


# ---------------------------------------------------------------------------------------------------------------
# Parameters per GPU
# ---------------------------------------------------------------------------------------------------------------


def transformer_params_per_gpu(
    shape: LayerShape, dense_layers: Any, moe_layers: Any, tp: Any, ep: Any, etp: Any = None
) -> tuple[Any, Any]:
    """(non-expert, expert) parameters per GPU for the transformer layers it holds.

    Attention and FFN matrices are split over tp (Shoeybi et al. 2019, arXiv 1909.08053); norms and the MoE
    router are replicated; routed experts are split over ep and, inside each expert, over tp (over etp under
    MoE parallel folding, app.core.layout).
    """
    attn = shape.attn_params / tp + shape.norm_params
    dense_layer = attn + shape.dense_ffn_params / tp
    moe_layer = attn + shape.router_params + shape.shared_ffn_params / tp
    experts = shape.num_experts / ep * shape.expert_ffn_params / (tp if etp is None else etp)
    return dense_layers * dense_layer + moe_layers * moe_layer, moe_layers * experts


def embedding_params_per_gpu(model: ModelSpec, tp: Any, pp: Any, first: Any, last: Any) -> Any:
    """Word embedding on the first stage, LM head on the last (a tied head is a second copy when pp > 1,
    Megatron `setup_embeddings_and_output_layer`). Vocabulary padded to 128·tp."""
    vocab = padded_vocab_size(model.vocab_size, tp)
    emb = vocab * model.hidden_size / tp
    pos = model.max_seq_len * model.hidden_size if model.position_embedding == "learned" else 0
    norm = (2 if model.norm == "layernorm" else 1) * model.hidden_size
    # with pp = 1 a tied head reuses the embedding already counted on the (only) stage
    head_copy = 1 if not model.tied_embeddings else (np.asarray(pp) > 1) * 1
    return first * (emb + pos) + last * (emb * head_copy * _head_not_shared(first, last, model) + norm)


def mtp_params_per_gpu(
    model: ModelSpec, shape: LayerShape, mtp_layers: int, tp: Any, ep: Any, pp: Any, etp: Any = None
) -> tuple[Any, Any]:
    """(non-expert, expert) parameters per GPU of `mtp_layers` multi-token-prediction modules on the last pipeline
    stage (Layout.mtp_layers). A module (DeepSeek-V3, arXiv 2412.19437 Sec. 2.2; Megatron-core
    MultiTokenPredictionLayer) normalises the hidden state and the next token's embedding, projects the two (2h → h,
    split over tp), runs one transformer block (costed as the model's average layer) and a final norm; it shares the
    embedding and the LM head with the model, so with pp > 1 an untied model's last stage also holds an embedding
    copy (Megatron-core GPTModel builds the embedding on the stage that runs MTP)."""
    if not mtp_layers:
        return 0.0, 0.0
    moe_frac = num_moe_layers(model) / model.num_layers
    block_d, block_e = transformer_params_per_gpu(shape, 1 - moe_frac, moe_frac, tp, ep, etp)
    h = model.hidden_size
    module = block_d + 2 * h * h / tp + 3 * h
    embedding = (
        0.0
        if model.tied_embeddings
        else (np.asarray(pp) > 1) * padded_vocab_size(model.vocab_size, tp) * h / tp
    )
    return mtp_layers * module + embedding, mtp_layers * block_e


def _head_not_shared(first: Any, last: Any, model: ModelSpec) -> Any:
    # with pp = 1 and tied embeddings the head reuses the embedding already counted on the (only) stage
    if not model.tied_embeddings:
        return 1
    return (
        1 - first * last
        if isinstance(first, np.ndarray) or isinstance(last, np.ndarray)
        else int(not (first and last))
    )


def state_bytes(params: Any, shard: Any, zero: Any, fw: Framework) -> dict[str, Any]:
    """Weights, gradients, master weights and optimizer states for `params` sharded over `shard` ranks."""

    def div(stage: int) -> Any:
        return (
            1 + (shard - 1) * (np.asarray(zero) >= stage)
            if isinstance(zero, np.ndarray)
            else (shard if zero >= stage else 1)
        )

    # FSDP's sharded parameter is the fp32 master: no separate 16-bit shard (Framework.zero3_sharded_16bit_copy)
    weight_bytes: Any = fw.weight_bytes
    if not fw.zero3_sharded_16bit_copy:
        kept = (np.asarray(zero) < 3) if isinstance(zero, np.ndarray) else float(zero < 3)
        weight_bytes = fw.weight_bytes * kept
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


def optimizer_shard_params(dense_params: Any, expert_params: Any, layout: Layout) -> Any:
    """Parameters whose optimizer states this GPU holds: its share of the dense and expert parameters under the
    distributed optimizer (zero ≥ 1 shards over dp·cp, the experts over their own data-parallel group)."""
    if layout.zero >= 1:
        return dense_params / (layout.dp * layout.cp) + expert_params / layout.expert_dp
    return dense_params + expert_params


def bytes_per_param(zero: int, dp: int, fw: Framework = MEGATRON_CORE) -> float:
    """Model-state bytes per parameter: 18 (no sharding), 6 + 12/d (distributed optimizer), …"""
    return float(sum(state_bytes(1.0, dp, zero, fw).values()))


def zero3_working_bytes(layer_params: Any, fw: Framework) -> Any:
    """Gathered (unsharded) weights and gradients ZeRO-3 holds at once, for layers of `layer_params` per GPU.

    FSDP (Zhao et al. 2023, arXiv 2304.11277, Sec. 3.2): one unit = one transformer block, the current and the
    prefetched one, with the current unit's unsharded gradient. DeepSpeed ZeRO-3 caps live parameters
    (stage3_max_live_parameters); its gradients go through the reduce bucket (Framework.comm_buffer_bytes).
    """
    if fw.zero3_live_params > 0:
        return np.minimum(2 * layer_params, fw.zero3_live_params) * fw.weight_bytes
    return 2 * layer_params * (fw.weight_bytes + fw.grad_bytes)


# ---------------------------------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------------------------------


def layer_activation_bytes(
    shape: LayerShape,
    tokens: Any,
    seq_len: Any,
    tp: Any,
    sp: Any,
    recompute: str,
    flash: bool,
    moe: bool = False,
    fw: Framework = MEGATRON_CORE,
    modules: tuple[str, ...] = ("core_attn",),
) -> Any:
    """Bytes one transformer layer keeps for backward, per micro-batch, per GPU (Korthikanti 2022 Sec. 4).

    tokens = micro_batch · seq_len / cp on this GPU; seq_len is the full key length attention sees.
    recompute: "none" | "selective" (the Megatron-core `modules` recomputed, core attention by default; with the
    torchtitan framework, its op-level policy) | "full" (only the layer input kept).
    """
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
        kept = (
            ACT_BYTES * (2 * h / sp_div + (shape.q_width + 0.5 * mm_outputs) / tp)
            + LSE_BYTES * shape.heads / tp
        )
        return kept * tokens
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
    # TP-sharded: Q, K, V, attention output (input of the output projection), FFN intermediates (the activation
    # function's input, 16 bit, and its output, the input of the second FFN GEMM)
    attn = ACT_BYTES * (2 * shape.q_width + 2 * shape.kv_width)
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
    tokens: Any,
    tp: Any,
    sp: Any,
    moe: bool,
    fw: Framework,
    offload_modules: tuple[str, ...],
    recompute_modules: tuple[str, ...] = (),
) -> Any:
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


def inflight_layer_microbatches(layers_per_gpu: Any, pp: Any, vp: Any, m: Any, stage: Any) -> Any:
    """Layer-activations (layer × micro-batch) stored at the peak on pipeline stage `stage` (0-based).

    1F1B: min(p − i, m) micro-batches of all L/p layers. Interleaved (v > 1): min(2(p−i−1) + (v−1)p + 1, m·v)
    model chunks of L/(p·v) layers each.
    """
    plain = np.minimum(pp - stage, m) * layers_per_gpu
    chunks = np.minimum(2 * (pp - stage - 1) + (vp - 1) * pp + 1, m * vp)
    interleaved = chunks * layers_per_gpu / vp
    out = _sel(np.asarray(vp) > 1, interleaved, plain)
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

    def to_dict(self) -> dict[str, Any]:
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

    def to_dict(self) -> dict[str, Any]:
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


def stage_memory(
    model: ModelSpec, layout: Layout, seq_len: int, stage: int, fw: Framework = MEGATRON_CORE
) -> StageMemory:
    """Peak per-GPU memory of pipeline stage `stage`."""
    shape = layer_shape(model)
    tp, pp, vp, cp, dp, ep = layout.tp, layout.pp, layout.vp, layout.cp, layout.dp, layout.ep
    m = layout.num_microbatches
    first, last = stage == 0, stage == pp - 1
    n_moe = num_moe_layers(model)
    # this stage's layers (an uneven split gives the end stages their own count); MoE layers in proportion
    layers_per_gpu = float(stage_layer_counts(model.num_layers, layout)[stage])
    moe_layers = n_moe / model.num_layers * layers_per_gpu
    dense_layers = layers_per_gpu - moe_layers
    dense_params, expert_params = transformer_params_per_gpu(
        shape, dense_layers, moe_layers, tp, ep, layout.etp
    )
    dense_params += embedding_params_per_gpu(model, tp, pp, int(first), int(last))
    if last and layout.mtp_layers:
        mtp_dense, mtp_expert = mtp_params_per_gpu(model, shape, layout.mtp_layers, tp, ep, pp, layout.etp)
        dense_params += mtp_dense
        expert_params += mtp_expert
    shard = dp * cp
    states = state_bytes(dense_params, shard, layout.zero, fw)
    expert_states = state_bytes(expert_params, layout.expert_dp, layout.zero, fw)
    breakdown: dict[str, float] = {k: float(states[k] + expert_states[k]) for k in states}
    # optimizer offloading: the offloaded share of the fp32 master weights and Adam moments lives on the host
    host_optimizer = 0.0
    if layout.optimizer_offload:
        f = layout.optimizer_offload
        breakdown["master_weights"] *= 1 - f
        breakdown["optimizer_states"] *= 1 - f
        host_optimizer = (
            f * optimizer_shard_params(dense_params, expert_params, layout) * OPTIMIZER_HOST_BYTES
        )

    tokens = layout.micro_batch * seq_len / cp
    flash = layout.flash_attention
    sp = layout.sequence_parallel

    def saved_per_layer(f: Framework) -> tuple[Any, Any]:
        """Activations one layer keeps per micro-batch (mean over dense and MoE layers) and, under full
        recompute, the working set of the layer being recomputed; `f` sets the saved GEMM-input bytes."""
        dense_act = layer_activation_bytes(shape, tokens, seq_len, tp, sp, "none", flash, False, f)
        moe_act = (
            layer_activation_bytes(shape, tokens, seq_len, tp, sp, "none", flash, True, f) if n_moe else 0.0
        )
        mean_full = (dense_act * dense_layers + moe_act * moe_layers) / layers_per_gpu
        if layout.recompute == "full":
            kept = layer_activation_bytes(shape, tokens, seq_len, tp, sp, "full", flash, False, f)
            recomputed_share = (
                1.0 if layout.recompute_layers is None else min(1.0, layout.recompute_layers / layers_per_gpu)
            )
            # the layer being recomputed holds its full activations during its backward
            return recomputed_share * kept + (1 - recomputed_share) * mean_full, mean_full
        mode, mods = layout.recompute, layout.selective_modules
        sel_dense = layer_activation_bytes(shape, tokens, seq_len, tp, sp, mode, flash, False, f, mods)
        sel_moe = (
            layer_activation_bytes(shape, tokens, seq_len, tp, sp, mode, flash, True, f, mods)
            if n_moe
            else 0.0
        )
        return (sel_dense * dense_layers + sel_moe * moe_layers) / layers_per_gpu, 0.0

    per_layer, working = saved_per_layer(fw)
    bf16_layers = float(stage_bf16_layer_counts(model.num_layers, layout)[stage])
    if bf16_layers:
        # layers kept 16-bit under fp8 / fp4 (Layout.bf16_first_layers / bf16_last_layers) save 16-bit GEMM inputs
        per_layer16, working16 = saved_per_layer(replace(fw, gemm_input_bytes=SOURCE_BYTES))
        per_layer = ((layers_per_gpu - bf16_layers) * per_layer + bf16_layers * per_layer16) / layers_per_gpu
        working = max(working, working16)
    moved = 0.0
    if layout.offload_modules:
        off_args = (shape, tokens, tp, sp)
        off_rest = (fw, layout.offload_modules, layout.selective_modules)
        moved = (
            offloaded_activation_bytes(*off_args, False, *off_rest) * dense_layers
            + (offloaded_activation_bytes(*off_args, True, *off_rest) * moe_layers if n_moe else 0.0)
        ) / layers_per_gpu
        per_layer = per_layer - moved
    inflight = inflight_layer_microbatches(layers_per_gpu, pp, vp, m, stage)
    sp_div = tp if sp else 1
    h = model.hidden_size
    activations = per_layer * inflight
    offloaded = layout.offload_layers
    # host memory: the offloaded layers' activations at the end of the forward pass, and the offloaded modules'
    # inputs of every layer and micro-batch in flight
    host = per_layer * inflight * offloaded / layers_per_gpu + moved * inflight
    if offloaded:
        # activation offloading (pp = 1): at the end of the forward pass HBM holds the layers not offloaded and the
        # one whose copy to the host is still running; the backward reloads one layer ahead into the memory the
        # layers after it have freed (Transformer Engine cpu_offload.py, AsyncDoubleBufferGroupOffloadHandler)
        resident = min(layers_per_gpu, layers_per_gpu - offloaded + 1)
        activations = activations * resident / layers_per_gpu
    # fine-grained offloading: the offloaded inputs of the layer whose copy is in flight stay in HBM until it ends
    activations += moved
    if first and shape.hidden_dropout:
        activations += MASK_BYTES * h * tokens / sp_div * inflight / layers_per_gpu  # embedding dropout mask
    logits = 0.0
    if last:
        vocab = padded_vocab_size(model.vocab_size, tp)
        # final norm input + LM-head input (kept) and the logits of one micro-batch (transient)
        activations += 2 * ACT_BYTES * h * tokens / sp_div
        logits = fw.logits_bytes_per_element * tokens * vocab / tp
        # multi-token prediction: each module's block keeps an average layer's activations for the micro-batches
        # in flight on this stage, and its projection input (the two normalised h-wide halves) and head input
        activations += layout.mtp_layers * (
            per_layer * inflight / layers_per_gpu + 3 * ACT_BYTES * h * tokens / sp_div
        )
    # transient buffers of the layer in flight: all-gathered SP input and the largest intermediate + its gradient
    widest = max(shape.ffn_in_width, shape.expert_in_width * max(1, shape.experts_per_token), shape.q_width)
    workspace = working + ACT_BYTES * tokens * (2 * widest / tp + 2 * h)
    comm = fw.comm_buffer_bytes
    if layout.zero >= 3:
        layer_params = (dense_params + expert_params) / max(1.0, layers_per_gpu)
        comm += zero3_working_bytes(layer_params, fw)
    breakdown["activations"] = float(activations)
    breakdown["logits"] = float(logits)
    breakdown["workspace"] = float(workspace)
    breakdown["comm_buffers"] = float(comm)
    allocated = sum(breakdown.values())
    breakdown["fragmentation"] = float(allocated * fw.fragmentation_fraction)
    breakdown["cuda_context"] = float(fw.cuda_context_bytes)
    breakdown["nccl_buffers"] = float(fw.nccl_buffer_bytes)
    return StageMemory(
        stage=stage,
        breakdown={k: breakdown[k] for k in MEMORY_KEYS},
        params=float(dense_params + expert_params),
        inflight_microbatches=float(inflight / layers_per_gpu),
        host_bytes=float(host + host_optimizer),
        host_optimizer_bytes=float(host_optimizer),
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
    stages = [stage_memory(model, layout, seq_len, i, fw) for i in range(layout.pp)]
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
