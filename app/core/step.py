"""Step time of a training iteration, per pipeline stage, split into a breakdown that sums to the total.

Structure (Calculon: Isaev et al., "Calculon: a Methodology and Tool for High-Level Codesign of Systems and
Large Language Models", SC'23, doi:10.1145/3581784.3607102, Sec. 3; Narayanan et al. 2021 Sec. 2-3):

* compute per layer and micro-batch = GEMMs at the achievable throughput of the GEMM efficiency curve
  (app.core.efficiency) + attention (flash: one fused kernel at the measured speed of the kernel the framework
  runs on the GPU, app.core.attention; backward = 2.5× forward FLOPs, Dao 2023 arXiv 2307.08691 Sec. 3.1;
  unfused: batched GEMMs on the curve plus
  the softmax/dropout traffic over the s² scores) + memory-bound element-wise
  kernels (norms, activations, bias/dropout/residual, RoPE, softmax) at a share of HBM bandwidth;
* backward = 2× forward GEMM FLOPs (data and weight gradients); recompute re-runs the forward (full) or the
  core attention (selective, Korthikanti et al. 2022 Sec. 5);
* tensor-parallel all-reduce (or all-gather + reduce-scatter with SP) 2× per layer forward and 2× backward
  (Shoeybi et al. 2019 Sec. 3; Korthikanti 2022 Sec. 4.2.2), exposed unless overlapped; Megatron's
  asynchronous column-parallel backward hides the input-gradient collectives behind the gradient GEMMs;
* context-parallel ring exchange of K/V (Liu et al. 2023 Ring Attention, arXiv 2310.01889) hidden behind the
  attention kernel where it can be; MoE all-to-all dispatch/combine 2× forward, 2× backward;
* pipeline: m micro-batches on the bottleneck stage plus the bubble (p − 1)/v micro-batch times
  (Narayanan et al. 2021 Sec. 2.2), point-to-point sends of the stage boundary activations: the SP shard, or
  without SP the whole tensor (Megatron-core) or 1/tp of it re-gathered over TP on receipt (Megatron-LM 2021-22
  scatter-gather, DeepSpeed's partitioned pipe tensors; Framework.pp_scatter_gather);
* data parallel: gradient all-reduce (ZeRO-0) or reduce-scatter + parameter all-gather (ZeRO ≥ 1),
  overlapped with the last backward / first forward where the framework does it; ZeRO-3 gathers weights
  every micro-batch (Rajbhandari et al. 2020 Sec. 7);
* optimizer step: memory-bound Adam update over this GPU's shard;
* communication hidden behind compute still costs: NCCL kernels hold SMs and HBM bandwidth, slowing the compute
  beside them by 18.9 % on average (Lee et al. 2025, arXiv 2507.03114), scaled down for collectives bound by the
  NICs (`overlap_slowdown`, `overlapped`);
* MoE layers: expert GEMMs per local expert (over etp under MoE parallel folding) and, where the framework calls
  them one by one, each call's fixed time (Framework.expert_gemm_host_s), token permutation traffic, the
  all-to-all on each rank's sequence-parallel shard; sliding-window layers see at most the window's keys.

All collective times come from app.core.network.collective_time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast, overload

import numpy as np

from app.core.attention import (
    DEFAULT_HEAD_DIM_HALF,
    FLASH_BACKWARD_FLOP_RATIO,
    LEGACY_SHARES,
    AttentionKernel,
    fused_attention_kernel,
    head_dim_factors,
    kv_loop_efficiency,
)
from app.core.efficiency import GemmEfficiency, HardwareProfile, measured_matmul_flops
from app.core.framework import (
    DEEPEP_MNNVL_COMBINE_BYTES_PER_S,
    DEEPEP_MNNVL_DISPATCH_BYTES_PER_S,
    DEEPEP_NVLINK_DOMAIN_GPUS,
    MEGATRON_CORE,
    Framework,
)
from app.core.hardware import ClusterSpec, GPUSpec
from app.core.layout import Layout, LayoutColumns, stage_bf16_layer_counts, stage_layer_counts
from app.core.memory import (
    ACT_BYTES,
    LayerActivations,
    MemoryRun,
    embedding_params_per_gpu,
    layer_activations,
    mtp_params_per_gpu,
    transformer_params_per_gpu,
)
from app.core.model import (
    LayerShape,
    ModelSpec,
    attention_keys,
    layer_shape,
    num_moe_layers,
    padded_vocab_size,
)
from app.core.network import NetworkParams, Placement, collective_time
from app.core.num import Flag, Num, any_true, maximum, minimum, where
from app.core.precision import cast_bytes_per_element

# Fused (flash) attention keeps the score tiles on chip, so it is not bound by the GEMM curve's HBM roofline: its
# forward and backward rates are shares of the sustained 16-bit GEMM rate, by kernel and architecture
# (app.core.attention.fused_attention_kernel: published micro-benchmarks of FlashAttention-2 and cuDNN), and below
# head dim 128 they fall as app.core.attention.head_dim_factors says (measured per architecture for cuDNN).
# Attention dropout inside a fused kernel draws a Philox random number per score on the CUDA cores while the
# matmuls run on the tensor cores, so its cost relative to the kernel grows with the ratio of 16-bit tensor peak to
# fp32 CUDA-core peak. Published figures: on GB200 (ratio 2500/80 = 31) FA4 and cuDNN with dropout run the forward
# at 75-85 % and the backward at 60-70 % of their no-dropout throughput (Dao-AILab/flash-attention PR #2597,
# p = 0.125, hdim 64/128), i.e. +25 % and +54 % time at the midpoints; on GB10 (SM121, ratio ~2) head dim 128
# shows at most a few per cent (PR #2439). Overhead = reference × ratio / 31.2, capped at the reference.
FLASH_DROPOUT_REF_RATIO = 2500.0 / 80.0
FLASH_DROPOUT_REF_OVERHEAD = (1.0 / 0.8 - 1.0, 1.0 / 0.65 - 1.0)  # (forward, backward) extra time share
# Bytes per token of the memory-bound kernels, forward (backward moves about twice as much, Korthikanti 2022
# Table 4 shows the backward of these ops at ~2× the forward):
#   each norm reads and writes h 16-bit values (4h B), two per layer;
#   each bias-dropout-residual-add reads the branch output and the residual and writes the sum (6h B), and with
#   dropout also writes and re-reads a 1-byte mask (2h B); two per layer;
#   the activation function reads its input and writes its output (2 B per FFN element; unfused eager
#   PyTorch doubles it: separate kernels for gate, activation and product);
#   RoPE reads and writes Q and K (4 B per element).
NORM_BYTES, RESIDUAL_BYTES, DROPOUT_MASK_BYTES = 4.0, 6.0, 2.0
# Unfused attention (no flash): fused scale-mask-softmax reads and writes the 16-bit scores (4 B per score),
# dropout adds a 1-byte mask and a 16-bit copy (5 B); the backward kernels move about 1.5× that.
SOFTMAX_BYTES_PER_SCORE, ATTN_DROPOUT_BYTES_PER_SCORE, SOFTMAX_BACKWARD_RATIO = 4.0, 5.0, 1.5
# fp32 softmax cross-entropy over the vocabulary shard, lower bound of a fully fused loss: read 16-bit logits,
# write and re-read fp32 probabilities, write the 16-bit gradient (2 + 4 + 4 + 4 B per logit). The frameworks'
# own (unfused) loss kernels move more: Framework.ce_bytes_per_logit, which the step time uses.
CE_BYTES_PER_LOGIT = 14.0
# Optimizer offloading (Megatron-core HybridDeviceOptimizer, --overlap-cpu-optimizer-d2h-h2d as its README
# recommends): each offloaded parameter's fp32 gradient goes to the host, a CPU AdamW updates it and the fp32 weight
# comes back, the three pipelined parameter by parameter (one CPU optimizer per parameter, a D2H event per
# parameter, an H2D copy in each step's post-hook). Link bytes per parameter each way: 4. The CPU step is PyTorch's
# AdamW with fused=True, as megatron/core/optimizer/__init__.py builds it ("this flag is used to improve the
# performance of the cpu optimizer"): one pass per parameter that reads the fp32 weight, gradient and both moments
# and writes the weight and moments, 28 B, bound by host memory bandwidth
OFFLOAD_LINK_BYTES_PER_PARAM = 4.0
CPU_ADAMW_BYTES_PER_PARAM = 28.0
# host DRAM bandwidth per GPU assumed where the catalog has none: the DGX H100 figure (app/catalog/gpus.yaml)
DEFAULT_HOST_MEMORY_BYTES_PER_S = 76.8e9
STEP_COMPONENTS = (
    "forward_compute",
    "backward_compute",
    "recompute",
    "tp_comm",
    "cp_comm",
    "ep_comm",
    "pp_comm",
    "offload",
    "pipeline_bubble",
    "dp_comm",
    "zero3_comm",
    "optimizer",
    "overhead",
)
STAGE_PARTS = STEP_COMPONENTS[:8]  # the StageTime fields, per micro-batch on one stage


# ---------------------------------------------------------------------------------------------------------------
# Per-layer compute
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerTimes:
    """Seconds for one transformer layer and one micro-batch on one GPU (numpy arrays when given arrays)."""

    forward: Num
    backward: Num
    recompute_full: Num  # forward re-run (compute only; its TP collectives are added separately)
    recompute_selective: Num  # core-attention re-run
    attention_fwd: Num  # core attention kernel(s) forward, for hiding CP communication
    linear_fwd: Num = 0.0  # GEMMs of the forward
    elementwise_fwd: Num = 0.0  # memory-bound kernels of the forward
    # backward GEMMs (data + weight gradient) of the column-parallel linears (QKV, FFN in): the window that
    # hides their input-gradient collectives (see Framework.tp_async_backward)
    column_bwd: Num = 0.0
    # forward pieces Megatron-core's selective recompute modules re-run (Layout.recompute_modules)
    norm_fwd: Num = 0.0  # the two norms
    ffn_fwd: Num = 0.0  # dense MLP or routed experts + router: GEMMs, activation, MoE token permutation
    act_fwd: Num = 0.0  # the (expert) activation function
    shared_fwd: Num = 0.0  # shared experts' GEMMs
    mla_up_fwd: Num = 0.0  # MLA's up-projection GEMMs and RoPE


def _gemm(curve: GemmEfficiency, m: Num, n: Num, k: Num, batch: Num = 1.0) -> Num:
    """Seconds for `batch` GEMMs (m, n, k); zero-sized GEMMs take no time. Accepts numpy arrays."""
    flops = 2.0 * np.asarray(m, dtype=float) * n * k * batch
    rate = curve.flops_per_s(np.maximum(m, 1.0), np.maximum(n, 1.0), np.maximum(k, 1.0), batch)
    return flops / rate


def _linear(curve: GemmEfficiency, m: Num, n: Num, k: Num, batch: Num = 1.0) -> tuple[Num, Num]:
    """(forward, backward) seconds of a linear layer Y[m×n] = X[m×k]·W[k×n]: backward is the data-gradient GEMM
    dX = dY·Wᵀ (m, k, n) plus the weight-gradient GEMM dW = Xᵀ·dY (k, n, m), each with its own output shape for
    tile and wave quantisation (same FLOPs as the forward each, Narayanan et al. 2021 Sec. 3.5)."""
    return _gemm(curve, m, n, k, batch), _gemm(curve, m, k, n, batch) + _gemm(curve, k, n, m, batch)


@dataclass(frozen=True)
class LayerSplit:
    """How one layer's work is split: tokens per micro-batch on a rank, the sequence length, the tensor, sequence,
    context and expert parallel sizes (numbers, or one column per layout), and whether attention is fused."""

    tokens: Num
    seq_len: Num
    tp: Num
    sp: Num
    cp: Num
    ep: Num
    flash: bool


@dataclass(frozen=True)
class LayerRates:
    """The rates every layer of a run is timed at: the GEMM curves of the linear layers and of attention (and of
    16-bit GEMMs), HBM bandwidth, the framework's kernels, the quantization casts, fused-attention dropout and the
    attention kernel's training shares."""

    linear: GemmEfficiency
    attn_curve: GemmEfficiency
    hbm_bytes_per_s: float
    fw: Framework = MEGATRON_CORE
    causal: bool = True
    cast_bytes: float = 0.0
    dropout_overhead: tuple[float, float] = (0.0, 0.0)
    attention_shares: tuple[float, float] = LEGACY_SHARES
    attention_loop_scale: tuple[float, float] = (1.0, 1.0)  # AttentionKernel.loop_scale
    attention_head_dim_half: tuple[float, float] = (DEFAULT_HEAD_DIM_HALF, DEFAULT_HEAD_DIM_HALF)

    def sixteen_bit(self) -> LayerRates:
        """The rates of a layer an fp8 / fp4 run keeps 16-bit: its GEMMs on the 16-bit curve, no casts."""
        return replace(self, linear=self.attn_curve, cast_bytes=0.0)


def _core_attention_times(
    shape: LayerShape, split: LayerSplit, rates: LayerRates, mem_bw: Num
) -> tuple[Num, Num, Num, Num]:
    """Core attention of one layer on one rank: (forward, backward) kernel time on the fused kernel's rates or the
    unfused GEMM curve, and the unfused softmax traffic (forward, backward; 0 when fused)."""
    tokens, seq_len, tp, cp, flash = split.tokens, split.seq_len, split.tp, split.cp, split.flash
    attn_curve, causal, attention_shares = rates.attn_curve, rates.causal, rates.attention_shares
    dropout_overhead = rates.dropout_overhead
    # core attention: queries on this GPU = tokens (= b·s/cp), keys = the full sequence
    heads = shape.heads / tp
    batch_seqs = tokens / (seq_len / cp)  # micro-batch size
    q_len = seq_len / cp
    keys = (seq_len + 1) / 2 if (flash and causal) else seq_len  # unfused kernels compute the masked half too
    if flash and shape.sliding_window > 0:
        # fused kernels skip the key blocks outside a sliding window (FlashAttention's window_size); unfused
        # attention computes the whole score matrix and masks it
        windowed = attention_keys(seq_len, causal, shape.sliding_window)
        keys = (1 - shape.windowed_share) * keys + shape.windowed_share * windowed
    dims = shape.qk_head_dim + shape.v_head_dim
    attn_flops = 2.0 * tokens * keys * heads * dims
    rate = attn_curve.flops_per_s(q_len, keys, shape.qk_head_dim, batch_seqs * heads)
    softmax_fwd: Num
    softmax_bwd: Num
    if flash:
        # the fused kernel's forward and backward rates (app.core.attention: kernel by framework and GPU) at the
        # model's head dimension
        head_fwd, head_bwd = head_dim_factors(shape.qk_head_dim, rates.attention_head_dim_half)
        # the kernel's speed over its loop of keys per query, in cp ring steps (app.core.attention)
        loop_fwd, loop_bwd = kv_loop_efficiency(keys, cp, rates.attention_loop_scale)
        rate_fwd = attention_shares[0] * attn_curve.max_flops * head_fwd * loop_fwd
        rate_bwd = attention_shares[1] * attn_curve.max_flops * head_bwd * loop_bwd
        t_core_fwd = attn_flops / rate_fwd
        t_core_bwd = FLASH_BACKWARD_FLOP_RATIO * attn_flops / rate_bwd
        if shape.attention_dropout:
            t_core_fwd = t_core_fwd * (1.0 + dropout_overhead[0])
            t_core_bwd = t_core_bwd * (1.0 + dropout_overhead[1])
        softmax_fwd = softmax_bwd = 0.0
    else:
        t_core_fwd = attn_flops / rate
        t_core_bwd = 2.0 * t_core_fwd
        scores = batch_seqs * heads * q_len * seq_len
        per_score_fwd = SOFTMAX_BYTES_PER_SCORE + (
            ATTN_DROPOUT_BYTES_PER_SCORE if shape.attention_dropout else 0.0
        )
        softmax_fwd = scores * per_score_fwd / mem_bw
        softmax_bwd = SOFTMAX_BACKWARD_RATIO * softmax_fwd
    return t_core_fwd, t_core_bwd, softmax_fwd, softmax_bwd


@dataclass(frozen=True)
class _Projections:
    """A layer's attention projections on one rank: forward and backward seconds, the QKV (or MLA) GEMM's
    backward alone, the output width of QKV plus the output projection's input, and MLA's up-projections'
    share of the forward."""

    forward: Num
    backward: Num
    qkv_bwd: Num
    width: Num
    mla_up_fwd: Num


def _attention_projections(linear: GemmEfficiency, shape: LayerShape, tokens: Num, tp: Num) -> _Projections:
    """The output projection (attention output width → h) and the QKV (or MLA) projections as one GEMM over the
    remaining attention weights; MLA's up-projections take their share of that GEMM's weights (and so of its
    FLOPs)."""
    h = shape.hidden
    proj_k = shape.heads * shape.v_head_dim / tp
    qkv_n = np.maximum(shape.attn_params / (h * tp) - proj_k, 1.0)
    f1, b1 = _linear(linear, tokens, qkv_n, h)
    f2, b2 = _linear(linear, tokens, h, proj_k)
    return _Projections(f1 + f2, b1 + b2, b1, qkv_n + proj_k, f1 * shape.mla_up_params / (qkv_n * h * tp))


def _expert_bias_times(
    shape: LayerShape, fw: Framework, moe_tokens: Num, e_tp: Num, mem_bw: Num
) -> tuple[Num, Num]:
    """(forward, backward) seconds of the expert biases a framework adds outside the GEMMs
    (Framework.expert_bias_bytes): per routed token copy, bytes per element of fc1's output (its 1/e_tp slice) and
    of fc2's (the hidden width); none for experts without biases."""
    if not shape.expert_bias:
        return 0.0, 0.0
    (fc1_fwd, fc1_bwd), (fc2_fwd, fc2_bwd) = fw.expert_bias_bytes
    copies = moe_tokens * shape.experts_per_token
    fc1_width = shape.expert_in_width / e_tp
    forward = copies * (fc1_fwd * fc1_width + fc2_fwd * shape.hidden) / mem_bw
    backward = copies * (fc1_bwd * fc1_width + fc2_bwd * shape.hidden) / mem_bw
    return forward, backward


def layer_times(
    shape: LayerShape, split: LayerSplit, moe: bool, rates: LayerRates, etp: Num | None = None
) -> LayerTimes:
    """Forward and backward time of one transformer layer (dense or MoE) on one rank: its GEMMs on the efficiency
    curves, attention on the fused kernel's rate (or unfused), and the element-wise, norm and cast traffic on HBM."""
    tokens, tp, sp, ep = split.tokens, split.tp, split.sp, split.ep
    linear, hbm_bytes_per_s, fw, cast_bytes = rates.linear, rates.hbm_bytes_per_s, rates.fw, rates.cast_bytes
    h = shape.hidden
    proj = _attention_projections(linear, shape, tokens, tp)
    attn_n, b1, t_mla_up = proj.width, proj.qkv_bwd, proj.mla_up_fwd
    t_attn_proj, t_attn_proj_bwd = proj.forward, proj.backward
    if moe:
        e = shape.num_experts
        # expert GEMMs: with etp unset every TP rank runs its 1/tp slice of the experts over all the micro-batch's
        # tokens; under MoE parallel folding an etp group gathers its ranks' sequence-parallel shards, so each
        # GPU's experts see tokens·etp/tp tokens at 1/etp of their width (the same FLOPs, other GEMM shapes)
        if etp is None:
            e_tp, moe_tokens = tp, tokens
        else:
            sp_on = np.asarray(sp) if isinstance(sp, np.ndarray) else bool(sp)
            e_tp = etp
            moe_tokens = tokens * np.where(sp_on, etp / tp, 1.0)
        per_expert_tokens = moe_tokens * shape.experts_per_token * ep / e
        local = e / ep
        parts = [
            _linear(linear, per_expert_tokens, shape.expert_in_width / e_tp, h, local),
            _linear(linear, per_expert_tokens, h, shape.expert_out_width / e_tp, local),
            _linear(linear, tokens, shape.shared_in_width / tp, h),
            _linear(linear, tokens, h, shape.shared_out_width / tp),
            _linear(linear, tokens, e, h),  # router
        ]
        ffn_elems = (
            moe_tokens * shape.experts_per_token * (shape.expert_in_width + shape.expert_out_width) / e_tp
        )
    else:
        parts = [
            _linear(linear, tokens, shape.ffn_in_width / tp, h),
            _linear(linear, tokens, h, shape.ffn_out_width / tp),
        ]
        ffn_elems = tokens * (shape.ffn_in_width + shape.ffn_out_width) / tp
    t_ffn = sum(p[0] for p in parts)
    t_shared = (parts[2][0] + parts[3][0]) if moe else 0.0
    column_bwd = b1 + parts[0][1] + (parts[2][1] if moe else 0.0)
    t_ffn_bwd = sum(p[1] for p in parts)
    # one call per local expert and GEMM where the framework runs no grouped kernel (Framework.expert_gemm_host_s):
    # fc1 and fc2 forward, their data and weight gradients backward
    t_calls = fw.expert_gemm_host_s * local if moe else 0.0
    t_linear = t_attn_proj + t_ffn
    t_linear_bwd = t_attn_proj_bwd + t_ffn_bwd

    mem_bw = hbm_bytes_per_s * fw.elementwise_efficiency
    t_core_fwd, t_core_bwd, softmax_fwd, softmax_bwd = _core_attention_times(shape, split, rates, mem_bw)
    # element-wise traffic per token (bytes): norms, bias-dropout-residual, activation, RoPE
    sp_div = 1 + (tp - 1) * (np.asarray(sp) if isinstance(sp, np.ndarray) else bool(sp))
    dropout = DROPOUT_MASK_BYTES if shape.hidden_dropout else 0.0
    hidden_traffic = 2 * (RESIDUAL_BYTES + dropout) * h / sp_div
    act_traffic = 2.0 * ffn_elems / tokens + (2.0 * ffn_elems / tokens if not fw.fused_elementwise else 0.0)
    rope_traffic = 4.0 * (shape.q_width + shape.kv_width) / tp if shape.rotary else 0.0
    unfused = 1.0 if fw.fused_elementwise else 2.0
    elem_fwd = tokens * (hidden_traffic + act_traffic + rope_traffic) / mem_bw * unfused
    t_act = tokens * act_traffic / mem_bw * unfused
    # the two norms at the framework's own bytes per element (fused kernel 4 B; eager composite more)
    t_norm = tokens * 2 * fw.norm_bytes_per_element * h / sp_div / mem_bw
    elem_fwd += t_norm
    t_perm: Num = 0.0
    if moe:
        # token permutation around the experts (Megatron moe_utils.permute / unpermute: index_select of the
        # top-k copies of each token into expert order, then the probability-weighted scatter back): read and write
        # top-k 16-bit hidden vectors per token in each, plus the fp32 router scores (softmax, top-k) over e experts
        perm = 2 * 2 * ACT_BYTES * shape.experts_per_token * h
        router = 3 * 4.0 * shape.num_experts
        t_perm = (moe_tokens * perm + tokens * router) / mem_bw
        elem_fwd += t_perm
    t_bias, t_bias_bwd = _expert_bias_times(shape, fw, moe_tokens, e_tp, mem_bw) if moe else (0.0, 0.0)
    elem_fwd, elem_bwd = elem_fwd + t_bias, 2.0 * elem_fwd + t_bias_bwd
    if cast_bytes:
        # Transformer Engine quantizes every GEMM input in forward and every output gradient in backward, writing
        # a row-wise and a transposed copy: `cast_bytes` per element (FP8 2 + 1 + 1 = 4 B, NVFP4 2 + 2 × 0.5625
        # = 3.125 B; app.core.precision)
        ffn_in = shape.expert_in_width if moe else shape.ffn_in_width
        ffn_out = shape.expert_out_width if moe else shape.ffn_out_width
        mult = shape.experts_per_token if moe else 1
        fwd_inputs = 2 * h + shape.q_width / tp + mult * ffn_out / tp
        bwd_grads = attn_n + h + mult * (ffn_in / tp + h)
        elem_fwd += tokens * cast_bytes * fwd_inputs / mem_bw
        elem_bwd += tokens * cast_bytes * bwd_grads / mem_bw

    forward = t_linear + t_core_fwd + softmax_fwd + elem_fwd + 2.0 * t_calls
    backward = t_linear_bwd + t_core_bwd + softmax_bwd + elem_bwd + 4.0 * t_calls
    return LayerTimes(
        forward=forward,
        backward=backward,
        recompute_full=forward,
        recompute_selective=t_core_fwd + softmax_fwd,
        attention_fwd=t_core_fwd + softmax_fwd,
        linear_fwd=t_linear,
        elementwise_fwd=elem_fwd,
        column_bwd=column_bwd,
        norm_fwd=t_norm,
        ffn_fwd=t_ffn - t_shared + t_act + t_perm + t_bias + 2.0 * t_calls,
        act_fwd=t_act,
        shared_fwd=t_shared,
        mla_up_fwd=t_mla_up + (tokens * rope_traffic / mem_bw * unfused if shape.mla_up_params else 0.0),
    )


def attention_kernel(fw: Framework, gpu: GPUSpec, profile: HardwareProfile | None = None) -> AttentionKernel:
    """The fused attention kernel `fw` runs on `gpu`, with its rates relative to the sustained 16-bit GEMM curve; a
    calibration profile (app.core.efficiency.HardwareProfile) that measured the kernel supplies its speed."""
    calibrated = getattr(profile, "attention", None) or None
    label = f"{getattr(profile, 'name', '')} v{getattr(profile, 'version', '')}" if calibrated else ""
    gemm = getattr(profile, "gemm", None)
    own = float(gemm.max_flops) if gemm is not None and gemm.dtype in ("bf16", "fp16") else 0.0
    return fused_attention_kernel(
        fw.attention_backend, gpu, measured_matmul_flops(gpu, "bf16", sustained=False), calibrated, label, own
    )


def layer_rates(
    linear: GemmEfficiency,
    attn_curve: GemmEfficiency,
    gpu: GPUSpec,
    fw: Framework,
    causal: bool,
    dtype: str,
    kernel: AttentionKernel,
) -> LayerRates:
    """The LayerRates of a run on `gpu` in `dtype` with the fused attention kernel `kernel` (the scalar estimate's
    and the planner's one construction)."""
    return LayerRates(
        linear,
        attn_curve,
        gpu.hbm_bandwidth_bytes_per_s,
        fw,
        causal,
        cast_bytes_per_element(dtype),
        flash_dropout_overhead(gpu),
        kernel.shares,
        kernel.loop_scale,
        kernel.head_dim_half,
    )


def flash_dropout_overhead(gpu: GPUSpec) -> tuple[float, float]:
    """(forward, backward) extra time share of a fused attention kernel with dropout on this GPU: the reference
    GB200 figures scaled by the GPU's tensor-to-CUDA-core peak ratio (FLASH_DROPOUT_REF_*)."""
    fp32 = gpu.peak_flops.get("fp32", 0.0)
    if fp32 <= 0:
        return FLASH_DROPOUT_REF_OVERHEAD
    share = min(1.0, gpu.peak("bf16") / fp32 / FLASH_DROPOUT_REF_RATIO)
    return (FLASH_DROPOUT_REF_OVERHEAD[0] * share, FLASH_DROPOUT_REF_OVERHEAD[1] * share)


# ---------------------------------------------------------------------------------------------------------------
# Communication helpers
# ---------------------------------------------------------------------------------------------------------------


def zero3_collectives_per_pass(fw: Framework, layers_per_gpu: Num) -> Num:
    """Collectives one ZeRO-3 pass (forward gather, backward gather or gradient reduce-scatter) issues."""
    if fw.zero3_collectives_per_layer <= 0:
        return 1.0
    return np.maximum(1.0, fw.zero3_collectives_per_layer * np.asarray(layers_per_gpu, dtype=float))


def group_placement(ranks: int, stride: int, gpus_per_node: int) -> Placement:
    """Placement of a communicator whose consecutive ranks are `stride` global ranks apart."""
    return Placement(ranks=ranks, ranks_per_node=ranks_per_node(ranks, stride, gpus_per_node))


def scaleout_domains(cluster: ClusterSpec, ranks: Num, ranks_per_node: Num) -> Num:
    """Scale-up domains (NVLink islands) a communicator spans: nodes, or NVL72-style racks of several trays.
    Works on numpy arrays (app.core.planner_eval)."""
    trays_per_domain = max(1, cluster.domain_gpus // max(1, cluster.gpus_per_node))
    per_domain = np.maximum(1, np.asarray(ranks_per_node) * trays_per_domain)
    result = np.maximum(1, -(-np.asarray(ranks) // per_domain))
    return int(result) if np.ndim(result) == 0 else result


def dispatch_dedup_share(experts: int, top_k: int, domains: Num, routing: str = "uniform") -> Num:
    """Copies of a token a deduplicating MoE dispatch (DeepEP, HybridEP) sends to N groups (ranks or scale-out
    domains) holding the experts evenly, over the top-k copies a plain all-to-all sends: E[distinct groups] / k.

    `routing` "uniform": top-k distinct experts drawn uniformly (a balanced router); a group receives none of a
    token's copies with probability P0 = C(E − E/N, k) / C(E, k), so a token reaches N(1 − P0) groups (DeepSeek-V3
    technical report, arXiv 2412.19437, Sec. 3.2.2, for nodes). "contiguous": token t routed to experts t·k …
    t·k + k − 1 (mod E), NeMo Automodel's FakeBalancedGate for benchmarks (nemo_automodel/components/moe/layers.py),
    which keeps a token's experts on as few groups as their size allows. 1 for a single group or top-1 routing.
    Works on numpy arrays.
    """
    n = np.maximum(np.asarray(domains, dtype=float), 1.0)
    if routing == "contiguous":
        share = np.vectorize(lambda g: _contiguous_groups(experts, top_k, int(g)) / max(1, top_k))(n)
    else:
        others = experts - experts / n
        p_none = np.ones_like(n)
        for i in range(max(0, top_k)):
            p_none = p_none * np.maximum(0.0, (others - i) / max(1.0, experts - i))
        share = np.minimum(1.0, (1.0 - p_none) * n / max(1, top_k))
    result = np.where((n <= 1) | (top_k <= 1) | (experts <= 0), 1.0, share)
    return float(result) if np.ndim(result) == 0 else result


@functools.lru_cache(maxsize=256)
def _contiguous_groups(experts: int, top_k: int, groups: int) -> float:
    """Mean distinct groups (expert e on group ⌊e·N / E⌋) among experts t·k … t·k + k − 1 (mod E), over one period
    of t."""
    if experts <= 0 or groups <= 1:
        return 1.0
    period = experts // math.gcd(experts, top_k)
    counts = [
        len({((t * top_k + j) % experts) * groups // experts for j in range(top_k)}) for t in range(period)
    ]
    return sum(counts) / len(counts)


def _coll(
    op: str, size: float, placement: Placement, cluster: ClusterSpec, params: NetworkParams | None
) -> float:
    if placement.ranks <= 1 or size <= 0:
        return 0.0
    if params is None:
        return float(collective_time(op, size, placement, cluster).time_s)
    return float(collective_time(op, size, placement, cluster, params).time_s)


# ---------------------------------------------------------------------------------------------------------------
# Step
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StageTime:
    """One micro-batch (all model chunks) on one pipeline stage; seconds."""

    stage: int
    forward_compute: float
    backward_compute: float
    recompute: float
    tp_comm: float
    cp_comm: float
    ep_comm: float
    pp_comm: float
    offload: float = 0.0  # exposed host-link copies of offloaded activations

    @property
    def total(self) -> float:
        return (
            self.forward_compute
            + self.backward_compute
            + self.recompute
            + self.tp_comm
            + self.cp_comm
            + self.ep_comm
            + self.pp_comm
            + self.offload
        )


@dataclass(frozen=True)
class StepEstimate:
    breakdown: dict[str, float]  # seconds, sums to total_s
    stages: list[StageTime]
    bottleneck_stage: int
    tokens_per_step: float
    model_flops_per_step: float
    hardware_flops_per_step: float
    num_gpus: int
    peak_flops_per_gpu: float
    notes: list[str] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return float(sum(self.breakdown.values()))

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.total_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.num_gpus

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops_per_step / self.total_s / self.num_gpus / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return self.hardware_flops_per_step / self.total_s / self.num_gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.model_tflops_per_gpu * 1e12 / self.peak_flops_per_gpu

    @property
    def hfu(self) -> float:
        return self.hardware_tflops_per_gpu * 1e12 / self.peak_flops_per_gpu

    def to_dict(self) -> dict[str, Any]:  # Any: JSON values
        return {
            "breakdown_s": dict(self.breakdown),
            "total_s": self.total_s,
            "bottleneck_stage": self.bottleneck_stage,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "hardware_tflops_per_gpu": self.hardware_tflops_per_gpu,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "stages": [dict(s.__dict__, total=s.total) for s in self.stages],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class StepRun:
    """One run as the step model reads it: what runs (model, layout, sequence length), where (cluster, measured
    network parameters) and how fast its kernels go (GEMM efficiency curves for the linear layers and attention,
    the framework's conventions, causal masking, the attention kernel; None: the framework's on this GPU)."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    seq_len: int
    linear: GemmEfficiency
    attn_curve: GemmEfficiency
    fw: Framework = MEGATRON_CORE
    network: NetworkParams | None = None
    causal: bool = True
    attention: AttentionKernel | None = None


def stage_times(run: StepRun, per_layer_out: dict[str, float] | None = None) -> list[StageTime]:
    """Per-micro-batch time of every pipeline stage; `per_layer_out`, if given, receives one layer's parts."""
    model, cluster, layout, seq_len = run.model, run.cluster, run.layout, run.seq_len
    linear, attn_curve, fw, network, causal = run.linear, run.attn_curve, run.fw, run.network, run.causal
    attention = run.attention
    shape = layer_shape(model)
    tp, pp, cp, ep = layout.tp, layout.pp, layout.cp, layout.ep
    tokens = layout.micro_batch * seq_len / cp
    n_moe = num_moe_layers(model)
    counts = stage_layer_counts(model.num_layers, layout)
    layers_per_gpu = model.num_layers / pp
    moe_share = n_moe / model.num_layers
    split = LayerSplit(tokens, seq_len, tp, layout.sequence_parallel, cp, ep, layout.flash_attention)
    kernel = attention or attention_kernel(fw, cluster.gpu)
    rates = layer_rates(linear, attn_curve, cluster.gpu, fw, causal, layout.dtype, kernel)
    dense = layer_times(shape, split, False, rates)
    moe_t = layer_times(shape, split, True, rates, layout.expert_tp) if n_moe else dense

    # layers an fp8 / fp4 run keeps 16-bit (Layout.bf16_first_layers / bf16_last_layers): their GEMMs on the 16-bit
    # curve, no quantization casts
    bf16_counts = stage_bf16_layer_counts(model.num_layers, layout)
    dense16, moe16 = dense, moe_t
    if any(bf16_counts):
        dense16 = layer_times(shape, split, False, rates.sixteen_bit())
        moe16 = layer_times(shape, split, True, rates.sixteen_bit(), layout.expert_tp) if n_moe else dense16

    mem_run = MemoryRun.of(model, layout, seq_len, fw)
    cols = LayoutColumns.of(layout)
    views = (LayerTimesView(dense, moe_t, moe_share), LayerTimesView(dense16, moe16, moe_share))
    vocab = padded_vocab_size(model.vocab_size, tp)
    logits_fwd = _gemm(attn_curve, tokens, vocab / tp, shape.hidden)
    proj_fwd, proj_bwd = _linear(linear, tokens, shape.hidden / tp, 2 * shape.hidden)
    coll = scalar_collective(cluster, network)
    lt = layer_step_times(mem_run, cols, views, (logits_fwd, proj_fwd, proj_bwd), cluster, coll)
    if per_layer_out is not None:
        share = recomputed_share(cols, layers_per_gpu)
        tp_layer, cp_layer, ep_layer = comm_at(lt, share)
        cast(dict[str, Num], per_layer_out).update(  # one layout: each value is a Python number
            {
                "forward": lt.forward,
                "backward": lt.backward,
                "recompute": where(cols.recompute == 2, share * lt.recompute_full, lt.recompute_partial),
                "tp_comm": tp_layer,
                "cp_comm": cp_layer,
                "ep_comm": ep_layer,
            }
        )
    out = []
    for stage in range(pp):
        # this stage's layers: L / p, or the end stages' own counts under an uneven split (Layout), and of them 16-bit
        layers, bf16 = float(counts[stage]), float(bf16_counts[stage])
        parts = stage_time_parts(
            mem_run, cols, lt, cluster, layers, bf16, int(stage == 0), int(stage == pp - 1)
        )
        out.append(StageTime(stage=stage, **{k: float(v) for k, v in parts.items()}))
    return out


def optimizer_step_time(opt_params: Num, offload: Num, cluster: ClusterSpec, fw: Framework) -> Num:
    """Seconds of the optimizer step over `opt_params` (the parameters whose optimizer states this GPU holds), a
    share `offload` of them updated on the host. The GPU's fused Adam over the rest runs while the host works; the
    host path is the slowest of its gradient copy, CPU AdamW and weight copy, pipelined per parameter."""
    gpu = cluster.gpu
    on_gpu = (
        (1 - offload)
        * opt_params
        * fw.adam_step_bytes_per_param
        / (gpu.hbm_bandwidth_bytes_per_s * fw.elementwise_efficiency)
    )
    moved = offload * opt_params
    host_bw = (
        gpu.host_memory_bandwidth_bytes_per_s or DEFAULT_HOST_MEMORY_BYTES_PER_S
    ) * fw.elementwise_efficiency
    copy = moved * OFFLOAD_LINK_BYTES_PER_PARAM / gpu.host_link_bytes_per_s
    cpu = moved * CPU_ADAMW_BYTES_PER_PARAM / host_bw
    return np.maximum(on_gpu, np.maximum(copy, cpu))


def overlap_slowdown(fw: Framework, cluster: ClusterSpec, ranks: Num, ranks_per_node: Num) -> Num:
    """Compute slowdown while a collective over `ranks` (`ranks_per_node` of them per node) runs beside it.

    Lee et al. 2025 (arXiv 2507.03114) measure Framework.overlap_slowdown on GPUs joined by NVLink, where the
    NCCL kernels drive the scale-up bandwidth. The HBM traffic a collective takes grows with the bytes per second
    it moves, so a collective that leaves the node, bound by the GPU's share of the NICs, slows the compute by that
    bandwidth's share of the scale-up bandwidth, but never below the SMs its kernels hold for as long as it runs,
    whatever the link speed (Framework.comm_sm_share). Works on numpy arrays (app.core.planner_eval).
    """
    fabric = cluster.fabric
    nic_per_gpu = fabric.nic_bandwidth_bytes_per_s * fabric.nics_per_node / max(1, cluster.gpus_per_node)
    ratio = min(1.0, nic_per_gpu / cluster.scaleup_bw) if cluster.scaleup_bw > 0 else 1.0
    # NVL72-style domains span several nodes (trays): a group inside one domain stays on NVLink
    inter = np.asarray(scaleout_domains(cluster, ranks, ranks_per_node)) > 1
    result = np.where(inter, np.maximum(fw.comm_sm_share, fw.overlap_slowdown * ratio), fw.overlap_slowdown)
    return float(result) if np.ndim(result) == 0 else result


def moe_a2a_overlapped(a2a: Num, forward: Num, backward: Num, expert_fwd: Num, slowdown: Num) -> Num:
    """Critical-path cost of a MoE layer's four all-to-alls (`a2a` seconds each) under Megatron-core's EP A2A
    overlap: each hides behind one compute chunk of the paired micro-batch, the attention or the expert part of
    the layer (`forward`, `backward` seconds; `expert_fwd` its routed and shared experts), forward or backward.
    Works on numpy arrays (app.core.planner_eval)."""
    attn_fwd = np.maximum(forward - expert_fwd, 0.0)
    bwd_ratio = backward / np.maximum(forward, 1e-30)
    windows = (attn_fwd, expert_fwd, attn_fwd * bwd_ratio, expert_fwd * bwd_ratio)
    return sum(overlapped(a2a, w, slowdown) for w in windows)


def overlapped(comm: Num, window: Num, slowdown: Num) -> Num:
    """Critical-path cost of `comm` seconds of communication run beside `window` seconds of compute.

    The part that fits in the window is hidden but slows the compute beside it by `slowdown` (NCCL kernels hold
    SMs and HBM bandwidth; Lee et al. 2025, arXiv 2507.03114: 18.9 % on average, Framework.overlap_slowdown); the
    rest is exposed. Works on floats and on numpy arrays (app.core.planner_eval).
    """
    hidden = np.minimum(comm, np.maximum(window, 0.0))
    result = comm - hidden + slowdown * hidden
    return float(result) if np.ndim(result) == 0 else result


# ---------------------------------------------------------------------------------------------------------------
# Data parallelism: gradient reduction, ZeRO-3 traffic and the optimizer step, for one layout or every row
# ---------------------------------------------------------------------------------------------------------------

# seconds of one collective: (operation, bytes, ranks, ranks per node, group) → seconds, 0 for one rank or no bytes.
# The group ("tp", "ep", "pp", "dp") names what determines the message and the placement, for memoising over rows
Collective = Callable[[str, Num, Num, Num, str], Num]


@overload
def ranks_per_node(ranks: int, stride: int, gpus_per_node: int) -> int: ...
@overload
def ranks_per_node(ranks: Num, stride: Num, gpus_per_node: int) -> Num: ...
def ranks_per_node(ranks: Num, stride: Num, gpus_per_node: int) -> Num:
    """Ranks per node of a communicator whose consecutive ranks are `stride` global ranks apart."""
    return maximum(1, minimum(ranks, gpus_per_node // maximum(1, stride)))


def scalar_collective(cluster: ClusterSpec, network: NetworkParams | None) -> Collective:
    """`Collective` of one layout: `collective_time` (app.core.network) on its placement."""

    def call(op: str, size: Num, ranks: Num, per_node: Num, group: str) -> float:
        return _coll(op, cast(float, size), Placement(int(ranks), int(per_node)), cluster, network)

    return call


def gradient_params(
    model: ModelSpec,
    cols: LayoutColumns,
    stages: Sequence[tuple[Num, Flag | Num, Flag | Num, Flag]],
    compare: Flag,
) -> tuple[Num, Num]:
    """(dense, expert) parameters whose gradients a GPU reduces. An even split without multi-token prediction: the
    first stage's L / p layers and its embedding (and the head when p = 1). Where `compare` holds (an uneven split, or
    MTP modules on the last stage), the stage holding the most of `stages`, each (layers, first, last, present):
    the first of equals in stage order."""
    shape = layer_shape(model)
    tp, pp, ep, etp = cols.tp, cols.pp, cols.ep, cols.etp
    n_moe = num_moe_layers(model)
    layers_per_gpu = model.num_layers / pp
    dense_p, expert_p = transformer_params_per_gpu(
        shape, layers_per_gpu - n_moe / pp, n_moe / pp, tp, ep, etp
    )
    dense_p = dense_p + embedding_params_per_gpu(model, tp, pp, 1, where(pp == 1, 1, 0))
    if not any_true(compare):
        return dense_p, expert_p
    moe_frac = n_moe / model.num_layers
    mtp_d, mtp_e = mtp_params_per_gpu(model, shape, tp, ep, pp, etp)
    best: tuple[Num, Num] | None = None
    for layers, first, last, present in stages:
        d_s, e_s = transformer_params_per_gpu(shape, layers * (1 - moe_frac), layers * moe_frac, tp, ep, etp)
        emb = embedding_params_per_gpu(model, tp, pp, first, last)
        held = (d_s + emb + where(last, mtp_d, 0.0), e_s + where(last, mtp_e, 0.0))
        if best is None:
            best = held
            continue
        more = present & (held[0] + held[1] > best[0] + best[1])
        best = (where(more, held[0], best[0]), where(more, held[1], best[1]))
    assert best is not None
    return where(compare, best[0], dense_p), where(compare, best[1], expert_p)


def last_bucket_params(fw: Framework, params: Num, ranks: Num, layers: Num) -> Num:
    """Parameters in the last gradient bucket of a data-parallel group of `ranks` (dp·cp) holding `params` per
    GPU over `layers` layers: Framework.dp_bucket_params's max(floor, per_rank × ranks), at most all of them, or
    one layer's (an FSDP unit) without such buckets."""
    if fw.dp_bucket_params is None:
        return params / maximum(layers, 1.0)
    floor, per_rank = fw.dp_bucket_params
    return minimum(params, maximum(floor, per_rank * ranks))


def data_parallel_times(
    cols: LayoutColumns,
    params: tuple[Num, Num],
    bottleneck: tuple[Num, Num, Num],
    layers_per_gpu: Num,
    cluster: ClusterSpec,
    fw: Framework,
    coll: Collective,
) -> tuple[Num, Num, Num]:
    """(data-parallel gradient communication, ZeRO-3 communication, optimizer step) seconds per step.

    `params`: the (dense, expert) parameters reduced (gradient_params); `bottleneck`: the bottleneck stage's
    (forward, backward, recompute) seconds per micro-batch, the windows the collectives hide behind. Gradients are
    reduced over the dp·cp ranks (Megatron reduces over the dp × cp group), the experts' over their own
    data-parallel group. ZeRO-0 all-reduces the gradients behind the backward; ZeRO-1/2 reduce-scatter them behind
    the backward and all-gather the updated parameters behind the next forward; ZeRO-3 gathers the weights in
    forward and backward and reduces the gradients every micro-batch, fewer times as Layout.reshard_after keeps
    them."""
    dense_p, expert_p = params
    fwd, bwd, rec = bottleneck
    gpn = cluster.gpus_per_node
    zero, m = cols.zero, cols.num_microbatches
    dp_ranks, exp_ranks = cols.dp * cols.cp, cols.expert_dp
    dp_node = ranks_per_node(dp_ranks, cols.tp, gpn)
    exp_node = ranks_per_node(exp_ranks, cols.etp * cols.ep, gpn)
    grad_bytes = dense_p * fw.grad_reduce_bytes
    exp_grad_bytes = expert_p * fw.grad_reduce_bytes
    z3, z12, z0 = zero >= 3, (zero >= 1) & (zero < 3), zero == 0

    def masked(op: str, size: Num, ranks: Num, node: Num, mask: Flag) -> Num:
        return coll(op, where(mask, size, 0.0), ranks, node, "dp")

    zero3: Num = 0.0
    if any_true(z3):
        # every rank drives its own NIC share (no topology-aware channels): see Framework.zero3_rank_nic
        z3_dp_node = 1 if fw.zero3_rank_nic else dp_node
        z3_exp_node = 1 if fw.zero3_rank_nic else exp_node
        # one message per pass, or k per layer (Framework.zero3_collectives_per_layer), each paying latency
        k = zero3_collectives_per_pass(fw, layers_per_gpu)

        def split(op: str, size: Num, ranks: Num, node: Num) -> Num:
            return k * masked(op, size / k, ranks, node, z3)

        # Layout.reshard_after: re-sharding after the forward gathers the weights again for the backward; kept
        # parameters are gathered once per micro-batch, or once per step with the gradients reduced once per step
        gathers = where(cols.reshard == 0, 2, 1)
        rounds = where(cols.reshard == 2, 1, m)
        ag = split("all_gather", dense_p * fw.param_gather_bytes, dp_ranks, z3_dp_node) + split(
            "all_gather", expert_p * fw.param_gather_bytes, exp_ranks, z3_exp_node
        )
        rs = split("reduce_scatter", grad_bytes, dp_ranks, z3_dp_node) + split(
            "reduce_scatter", exp_grad_bytes, exp_ranks, z3_exp_node
        )
        per_round = gathers * ag + rs
        compute_mb = fwd + bwd + rec
        z3_slow = overlap_slowdown(fw, cluster, dp_ranks, z3_dp_node)
        # the step's first all-gather and last reduce-scatter, one unit (a layer) each, have nothing to hide
        # behind: the forward waits for the first, the optimizer for the last
        ends = (ag + rs) / maximum(layers_per_gpu, 1.0)
        hidden_rounds = rounds * overlapped(
            maximum(per_round - ends / rounds, 0.0), fw.zero3_overlap * compute_mb, z3_slow
        )
        zero3 = where(z3, ends + hidden_rounds, 0.0)
    dp_comm: Num = 0.0
    bwd_last = bwd + rec
    # each group reduces bucket by bucket, one collective each (Megatron-core's _ParamAndGradBucketGroup): the
    # params / bucket collectives, each paying its latency, sum to the whole; the last is exposed. Megatron-core
    # sizes the expert buffers' buckets by the dense data-parallel group too (one ddp_config.bucket_size for both)
    bucket = last_bucket_params(fw, dense_p, dp_ranks, layers_per_gpu)
    exp_bucket = last_bucket_params(fw, expert_p, dp_ranks, layers_per_gpu)

    def bucketed(op: str, per_param: float, mask: Flag, window: Num, slow: Num) -> Num:
        """`op` over the dense and expert groups: the last bucket of each exposed, the rest hidden behind
        `window` (Framework.dp_bucket_params)."""
        last_dense = masked(op, bucket * per_param, dp_ranks, dp_node, mask)
        last_expert = masked(op, exp_bucket * per_param, exp_ranks, exp_node, mask)
        whole = (
            dense_p / maximum(bucket, 1.0) * last_dense + expert_p / maximum(exp_bucket, 1.0) * last_expert
        )
        last = last_dense + last_expert
        return last + overlapped(whole - last, window, slow)

    if any_true(z12):
        dp_slow = overlap_slowdown(fw, cluster, dp_ranks, dp_node)
        sharded = bucketed(
            "reduce_scatter", fw.grad_reduce_bytes, z12, fw.dp_overlap * bwd_last, dp_slow
        ) + bucketed("all_gather", fw.param_gather_bytes, z12, fw.param_gather_overlap * fwd, dp_slow)
        dp_comm = where(z12, sharded, dp_comm)
    if any_true(z0):
        dp_slow = overlap_slowdown(fw, cluster, dp_ranks, dp_node)
        ar = bucketed("all_reduce", fw.grad_reduce_bytes, z0, fw.dp_overlap * bwd_last, dp_slow)
        dp_comm = where(z0, ar, dp_comm)
    # the optimizer updates the shard whose states this GPU holds
    opt_params = dense_p / where(zero >= 1, dp_ranks, 1) + expert_p / maximum(
        1, where(zero >= 1, exp_ranks, 1)
    )
    optimizer = optimizer_step_time(opt_params, cols.optimizer_offload, cluster, fw)
    return dp_comm, zero3, optimizer


@dataclass(frozen=True)
class LayerCommInputs:
    """What one layer's exposed TP, CP and EP communication depends on, for one layout or every row.

    `tokens`: tokens of a micro-batch on one CP rank; `times(attr)`: the layer's time `attr` (LayerTimes), mean over
    dense and MoE layers; `moe_times(attr)`: a MoE layer's ("expert_fwd": its routed and shared experts' forward);
    `moe_again`: 1 where selective recompute re-runs the MoE layer (module "moe"), which dispatches and combines its
    tokens again.
    """

    model: ModelSpec
    cols: LayoutColumns
    tokens: Num
    times: Callable[[str], Num]
    moe_times: Callable[[str], Num]
    moe_again: Num
    cluster: ClusterSpec
    fw: Framework
    coll: Collective


def layer_comm(c: LayerCommInputs, shares: tuple[float, ...]) -> list[tuple[Num, Num, Num]]:
    """Exposed TP, CP and EP seconds of one layer and micro-batch whose forward full recompute re-runs with
    probability `share`, for each of `shares` (the collectives priced once), for one layout or every row."""
    tp_at = _tp_exposed(c)
    ring = _cp_ring(c)
    ep_at = _ep_exposed(c)
    cp = c.cols.cp

    def cp_at(share: float) -> Num:
        return 0.0 if ring is None else where(cp > 1, ring * (1 + share), 0.0)

    return [(tp_at(share), cp_at(share), ep_at(share)) for share in shares]


def _tp_exposed(c: LayerCommInputs) -> Callable[[float], Num]:
    """The exposed tensor-parallel seconds of one layer as a function of the recomputed share: 2 collectives per
    layer forward, 2 backward, 2 more when the forward is recomputed."""
    fw, tp, sp, coll = c.fw, c.cols.tp, c.cols.sp, c.coll
    act_bytes = 2.0 * c.tokens * layer_shape(c.model).hidden
    tp_node = ranks_per_node(tp, 1, c.cluster.gpus_per_node)
    gather: Num = 0.0
    scatter: Num = 0.0
    one_sp: Num = 0.0
    one_ar: Num = 0.0
    if any_true(sp):
        gather = coll("all_gather", act_bytes, tp, tp_node, "tp")
        scatter = coll("reduce_scatter", act_bytes, tp, tp_node, "tp")
        one_sp = 2 * (gather + scatter)
    if any_true(sp == 0):
        one_ar = 2 * coll("all_reduce", act_bytes, tp, tp_node, "tp")
    one = where(sp, one_sp, one_ar)
    # SP keeps only the sharded GEMM inputs; backward all-gathers them again for the weight gradients
    # (Korthikanti et al. 2022 Sec. 4.2.2)
    extra = where(sp, 2 * gather, 0.0)
    hidden: Num = 0.0
    if fw.tp_async_backward:
        # per column-parallel linear (QKV, FFN in), data- and weight-gradient GEMMs take about the same time: the
        # input-gradient all-reduce (reduce-scatter under SP) hides behind the weight-gradient GEMM, the re-gather
        # of the SP-sharded input behind the data-gradient GEMM
        half = 0.5 * c.times("column_bwd")
        sp_hidden = minimum(2 * scatter, half) + minimum(extra, half)
        hidden = where(sp, sp_hidden, minimum(one, half))
    tp_slow = overlap_slowdown(fw, c.cluster, tp, tp_node)

    def tp_at(share: float) -> Num:
        tp_total = one * (2 + share) + extra
        # NCCL-driven hiding (asynchronous backward) slows the GEMMs by overlap_slowdown; userbuffers' overlap
        # (tp_overlap) by the share of SMs its kernels hold (Framework.tp_overlap_slowdown)
        tp_rest = tp_total - hidden
        return (
            tp_rest * (1 - fw.tp_overlap)
            + tp_slow * hidden
            + fw.tp_overlap_slowdown * fw.tp_overlap * tp_rest
        )

    return tp_at


def _cp_ring(c: LayerCommInputs) -> Num | None:
    """Context parallel: the exposed seconds of the ring exchange of K and V (forward) and K, V, dK, dV (backward),
    hidden behind attention; None where no row has cp > 1."""
    tp, cp = c.cols.tp, c.cols.cp
    if not any_true(cp > 1):
        return None
    kv_bytes = 2.0 * 2.0 * c.tokens * layer_shape(c.model).kv_width / tp
    cp_node = ranks_per_node(cp, tp, c.cluster.gpus_per_node)
    hop = c.coll("send_recv", where(cp > 1, kv_bytes, 0.0), 2, cp_node, "tp")
    fwd_ring = (cp - 1) * hop
    attn = c.times("attention_fwd")
    cp_slow = overlap_slowdown(c.fw, c.cluster, cp, cp_node)
    return overlapped(fwd_ring, attn, cp_slow) + overlapped(
        2 * fwd_ring, FLASH_BACKWARD_FLOP_RATIO * attn, cp_slow
    )


def _ep_exposed(c: LayerCommInputs) -> Callable[[float], Num]:
    """The exposed expert-parallel all-to-all seconds (dispatch and combine, forward and backward) of one layer, the
    mean over dense and MoE layers, as a function of the recomputed share."""
    model, fw, cols = c.model, c.fw, c.cols
    tp, ep, sp = cols.tp, cols.ep, cols.sp
    moe_share = num_moe_layers(model) / model.num_layers
    if not (num_moe_layers(model) and any_true(ep > 1)):
        return lambda share: 0.0
    shape = layer_shape(model)
    # Megatron's MoEAlltoAllTokenDispatcher (megatron/core/transformer/moe/token_dispatcher.py) exchanges each
    # rank's own tokens — its sequence-parallel shard (Megatron requires SP when tp > 1 with experts) — top-k
    # copies of each; the gather over the expert tensor-parallel ranks stands in for the MLP's SP all-gather /
    # reduce-scatter already counted in tp_comm. EP ranks sit tp·cp apart (legacy tp-cp-ep-dp order) or
    # adjacent after the etp ranks (MoE parallel folding)
    moe_tokens = where(sp, c.tokens / tp, c.tokens)
    a2a_bytes = 2.0 * moe_tokens * shape.experts_per_token * shape.hidden
    ep_node = ep_ranks_per_node(cols, c.cluster.gpus_per_node)
    sent = where(ep > 1, a2a_bytes, 0.0)
    if fw.moe_dispatch_dedup:
        a2a = _deduplicated_a2a(c, sent, ep_node)
    else:
        a2a = c.coll("all_to_all", sent, ep, ep_node, "ep")
    overlapped_a2a: Num = 0.0
    if fw.moe_a2a_overlap:
        # combined 1F1B pairs the forward of one micro-batch with the backward of another, layer by layer: each
        # of the four all-to-alls runs beside one compute chunk of the other micro-batch (forward dispatch ‖
        # expert backward, forward combine ‖ attention backward, backward dispatch ‖ attention forward,
        # backward combine ‖ expert forward); recompute's extra all-to-alls stay exposed
        ep_slow = overlap_slowdown(fw, c.cluster, ep, ep_node)
        moe_times = c.moe_times
        overlapped_a2a = moe_a2a_overlapped(
            a2a, moe_times("forward"), moe_times("backward"), moe_times("expert_fwd"), ep_slow
        )

    def ep_at(share: float) -> Num:
        again = share + c.moe_again
        if fw.moe_a2a_overlap:
            return where(ep > 1, moe_share * (2 * again * a2a + overlapped_a2a), 0.0)
        return where(ep > 1, moe_share * 2 * (2 + again) * a2a, 0.0)

    return ep_at


def ep_ranks_per_node(cols: LayoutColumns, gpus_per_node: int) -> Num:
    """Ranks of the EP group per node: EP ranks sit tp·cp apart (legacy tp-cp-ep-dp order) or adjacent after the
    etp ranks (MoE parallel folding)."""
    return ranks_per_node(cols.ep, where(cols.folded, cols.etp, cols.tp * cols.cp), gpus_per_node)


def ep_ranks_in_domain(cluster: ClusterSpec, ep: Num, ep_node: Num) -> Num:
    """Ranks of an EP group of `ep` (`ep_node` per node) that share one scale-up domain (scaleout_domains)."""
    return -(-ep // scaleout_domains(cluster, ep, ep_node))


def deepep_mnnvl_applies(fw: Framework, cluster: ClusterSpec, in_domain_ranks: Num) -> Flag:
    """Whether DeepEP's dispatch runs over a multi-node NVLink domain: more than DEEPEP_NVLINK_DOMAIN_GPUS ranks of
    the EP group in one NVLink domain (an NVL72 rack), beyond what DeepEP's own intranode kernels serve."""
    if fw.moe_dispatcher != "deepep" or cluster.domain_gpus <= DEEPEP_NVLINK_DOMAIN_GPUS:
        return False
    return in_domain_ranks > DEEPEP_NVLINK_DOMAIN_GPUS


def deepep_mnnvl_floor(
    fw: Framework, cluster: ClusterSpec, seconds: Num, per_rank: Num, in_domain_ranks: Num
) -> Num:
    """One EP all-to-all (a dispatch or a combine, which pair up) no faster than DeepEP's measured rates over a
    multi-node NVLink domain, the mean of its dispatch's and its combine's per byte
    (DEEPEP_MNNVL_DISPATCH_BYTES_PER_S, DEEPEP_MNNVL_COMBINE_BYTES_PER_S); `seconds` unchanged elsewhere."""
    applies = deepep_mnnvl_applies(fw, cluster, in_domain_ranks)
    if not any_true(applies):
        return seconds
    per_byte = (1.0 / DEEPEP_MNNVL_DISPATCH_BYTES_PER_S + 1.0 / DEEPEP_MNNVL_COMBINE_BYTES_PER_S) / 2.0
    return where(applies, maximum(seconds, per_rank * per_byte), seconds)


def _deduplicated_a2a(c: LayerCommInputs, a2a_bytes: Num, ep_node: Num) -> Num:
    """The all-to-all under a deduplicating dispatcher (DeepEP, HybridEP): a token goes once to each destination
    rank (DeepEP's get_dispatch_layout marks `is_token_in_rank`, and the rank applies it to each of its experts);
    where the EP group spans scale-out domains, one copy per destination domain crosses the network and NVLink then
    fans it out to the ranks (DeepSeek-V3 report Sec. 3.2.2). `a2a_bytes`: the top-k copies a plain all-to-all
    sends."""
    ep = c.cols.ep
    shape = layer_shape(c.model)
    experts, top_k, routing = shape.num_experts, shape.experts_per_token, c.fw.moe_routing
    per_rank = dispatch_dedup_share(experts, top_k, ep, routing) * a2a_bytes
    ranked = c.coll("all_to_all", per_rank, ep, ep_node, "ep")
    domains = scaleout_domains(c.cluster, ep, ep_node)
    in_domain_ranks = ep_ranks_in_domain(c.cluster, ep, ep_node)
    ranked = deepep_mnnvl_floor(c.fw, c.cluster, ranked, per_rank, in_domain_ranks)
    multi = domains > 1
    if not any_true(multi):
        return ranked
    kept = dispatch_dedup_share(experts, top_k, domains, routing)
    in_domain = c.coll("all_to_all", where(multi, per_rank, 0.0), in_domain_ranks, ep_node, "ep")
    in_domain = deepep_mnnvl_floor(c.fw, c.cluster, in_domain, per_rank, in_domain_ranks)
    deduped = c.coll("all_to_all", where(multi, kept * a2a_bytes, 0.0), ep, ep_node, "ep")
    return where(multi, maximum(in_domain, deduped), ranked)


# ---------------------------------------------------------------------------------------------------------------
# One micro-batch on a pipeline stage, for one layout or every row
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerTimesView:
    """A dense and a MoE layer's LayerTimes read per layout, or per row: `rows` maps each row to its group (the
    planner computes layer_times once per distinct group of `groups`)."""

    dense_times: LayerTimes
    moe_times: LayerTimes
    moe_share: float
    rows: np.ndarray | None = None
    groups: int = 1

    def _read(self, value: Num) -> Num:
        if self.rows is None:
            return value
        return np.broadcast_to(np.asarray(value, dtype=float), (self.groups,))[self.rows]

    def dense(self, attr: str) -> Num:
        return self._read(getattr(self.dense_times, attr))

    def moe(self, attr: str) -> Num:
        """A MoE layer's time `attr` ("expert_fwd": its routed and shared experts' forward)."""
        t = self.moe_times
        return self._read(t.ffn_fwd + t.shared_fwd if attr == "expert_fwd" else getattr(t, attr))

    def mix(self, attr: str) -> Num:
        """The mean over the model's dense and MoE layers."""
        value = (1 - self.moe_share) * getattr(self.dense_times, attr) + self.moe_share * getattr(
            self.moe_times, attr
        )
        return float(value) if self.rows is None else self._read(value)


def recomputed_share(cols: LayoutColumns, layers: Num) -> Num:
    """Share of a stage's `layers` whose forward full recompute re-runs (Megatron --recompute-num-layers; 0 without
    full recompute)."""
    rl = cols.recompute_layers
    return where(cols.recompute == 2, where(rl > 0, minimum(1.0, rl / maximum(layers, 1.0)), 1.0), 0.0)


def selective_recompute_time(run: MemoryRun, view: LayerTimesView) -> Num:
    """Seconds a layer re-runs in the backward under selective recompute (0 in the rows without it).

    torchtitan's op-level policy re-runs every second matmul and the pointwise ops. Megatron-core's modules
    (Layout.selective_modules): core_attn the unfused attention (a fused kernel recomputes its scores anyway),
    layernorm the norms, mlp a dense layer's MLP, moe a MoE layer's experts, router and permutation (its all-to-all is
    counted in ep_comm), moe_act the experts' activation, shared_experts the shared experts, mla_up_proj MLA's
    up-projections and RoPE."""
    if run.fw.selective_policy == "op":
        return 0.5 * view.mix("linear_fwd") + view.mix("elementwise_fwd")
    mods = set(run.selective_modules)

    def per_layer(read: Callable[[str], Num], moe: bool) -> Num:
        total: Num = 0.0
        if "core_attn" in mods and not run.flash:
            total = total + read("recompute_selective")
        if "layernorm" in mods:
            total = total + read("norm_fwd")
        if "mla_up_proj" in mods:
            total = total + read("mla_up_fwd")
        if ("moe" if moe else "mlp") in mods:
            total = total + read("ffn_fwd")
        elif moe and "moe_act" in mods:
            total = total + read("act_fwd")
        if moe and ("moe" in mods or "shared_experts" in mods):
            total = total + read("shared_fwd")
        return total

    return (1 - view.moe_share) * per_layer(view.dense, False) + view.moe_share * per_layer(view.moe, True)


@dataclass(frozen=True)
class LayerStepTimes:
    """Seconds per layer and micro-batch shared by every stage of a layout (or of each row): compute of a layer
    (mean over dense and MoE layers) and of one kept 16-bit (`*16`), its full and selective recompute, its TP, CP
    and EP communication with no and with full recompute, the LM head and loss, an MTP module's projection, the
    pipeline send/recv of a micro-batch and one offloaded layer's exposed copies."""

    forward: Num
    backward: Num
    forward16: Num
    backward16: Num
    recompute_full: Num
    recompute_full16: Num
    recompute_partial: Num
    recompute_partial16: Num
    comm_plain: tuple[Num, Num, Num]
    comm_recomputed: tuple[Num, Num, Num]
    logits_fwd: Num
    ce: Num
    proj_fwd: Num
    proj_bwd: Num
    pp_mb: Num
    offload_layer: Num


def pipeline_p2p_time(
    cols: LayoutColumns, tokens: Num, shape: LayerShape, cluster: ClusterSpec, fw: Framework, coll: Collective
) -> Num:
    """Seconds of one micro-batch's pipeline send/recv (all model chunks) on a stage.

    The boundary activation goes 1/tp per rank under SP or scatter-gather; with scatter-gather and no SP an
    all-gather over the TP group follows each received activation and gradient (two per micro-batch and model
    chunk; Framework.pp_scatter_gather)."""
    pp, tp, sp = cols.pp, cols.tp, cols.sp
    if not any_true(pp > 1):
        return 0.0
    gpn = cluster.gpus_per_node
    act_bytes = 2.0 * tokens * shape.hidden
    p2p_bytes = where((sp > 0) | fw.pp_scatter_gather, act_bytes / tp, act_bytes)
    regather: Num = 0.0
    if fw.pp_scatter_gather:
        need = (pp > 1) & (tp > 1) & (sp == 0)
        if any_true(need):
            gather = coll("all_gather", act_bytes, tp, ranks_per_node(tp, 1, gpn), "tp")
            regather = where(need, 2 * gather, 0.0)
    per_node = where(tp * cols.cp * cols.dp < gpn, 2, 1)
    hop = coll("send_recv", where(pp > 1, p2p_bytes, 0.0), 2, per_node, "pp")
    pp_raw = cols.vp * (fw.pp_transfers_per_microbatch * hop + regather)
    pp_slow = overlap_slowdown(fw, cluster, 2, per_node)
    return where(pp > 1, pp_raw * (1 - fw.pp_overlap) + pp_slow * fw.pp_overlap * pp_raw, 0.0)


def layer_step_times(
    run: MemoryRun,
    cols: LayoutColumns,
    views: tuple[LayerTimesView, LayerTimesView],
    head: tuple[Num, Num, Num],
    cluster: ClusterSpec,
    coll: Collective,
    acts: LayerActivations | None = None,
) -> LayerStepTimes:
    """The per-layer terms of `stage_time_parts`. `views`: the layer times, and those of a layer kept 16-bit (the
    same without 16-bit layers); `head`: the LM head's forward and an MTP module's projection forward and backward
    (the LM head stays in 16 bit under FP8 training: Megatron-core's output layer is a plain ColumnParallelLinear,
    and torchtitan's Float8 conversion skips "output"); `acts`: the rows' layer activations, if already computed."""
    model, fw = run.model, run.fw
    view, view16 = views
    shape = run.shape
    tokens = cols.micro_batch * run.seq_len / cols.cp
    selective = cols.recompute == 1
    partial = where(selective, selective_recompute_time(run, view), 0.0) if any_true(selective) else 0.0
    partial16 = partial
    if view16 is not view:
        partial16 = (
            where(selective, selective_recompute_time(run, view16), 0.0) if any_true(selective) else 0.0
        )
    # a recomputed MoE layer (selective module "moe") dispatches and combines its tokens again
    moe_again = where(selective, 1.0 if "moe" in run.selective_modules else 0.0, 0.0)
    comm = LayerCommInputs(model, cols, tokens, view.mix, view.moe, moe_again, cluster, fw, coll)
    # the three are linear in the recomputed share: evaluate the ends and interpolate per stage
    ends = layer_comm(comm, (0.0, 1.0) if any_true(cols.recompute == 2) else (0.0,))
    plain, recomputed = ends[0], ends[-1]
    hbm = cluster.gpu.hbm_bandwidth_bytes_per_s
    vocab = padded_vocab_size(model.vocab_size, cols.tp)
    ce = tokens * vocab / cols.tp * fw.ce_bytes_per_logit / (hbm * fw.elementwise_efficiency)
    fwd_layer, bwd_layer = view.mix("forward"), view.mix("backward")
    offload_layer: Num = 0.0
    off = cols.offload_layers
    if run.offload_modules or any_true(off > 0):
        # activation offloading, on the copy engines beside the compute; only the part of a copy longer than the
        # compute beside it is exposed. Layer offloading (Layout.offload_layers, pp = 1): each offloaded layer's
        # saved activations go to the host while the next layer runs forward and come back while the layer after
        # it runs backward (Transformer Engine cpu_offload.py: offload and reload streams, double-buffered).
        # Fine-grained offloading (Layout.offload_modules): every layer's listed module inputs, beside its compute
        acts = acts or layer_activations(run, cols)
        moe_share = view.moe_share
        n_moe = num_moe_layers(model)
        layer_moved = (1 - moe_share) * acts.dense_none + (moe_share * acts.moe_none if n_moe else 0.0)
        module_moved = (1 - moe_share) * acts.moved_dense + (moe_share * acts.moved_moe if n_moe else 0.0)
        copy = where(off > 0, layer_moved, module_moved) / cluster.gpu.host_link_bytes_per_s
        offload_layer = overlapped(copy, fwd_layer, 0.0) + overlapped(copy, bwd_layer, 0.0)
    logits_fwd, proj_fwd, proj_bwd = head
    return LayerStepTimes(
        forward=fwd_layer,
        backward=bwd_layer,
        forward16=view16.mix("forward"),
        backward16=view16.mix("backward"),
        recompute_full=view.mix("recompute_full"),
        recompute_full16=view16.mix("recompute_full"),
        recompute_partial=partial,
        recompute_partial16=partial16,
        comm_plain=plain,
        comm_recomputed=recomputed,
        logits_fwd=logits_fwd,
        ce=ce,
        proj_fwd=proj_fwd,
        proj_bwd=proj_bwd,
        pp_mb=pipeline_p2p_time(cols, tokens, shape, cluster, fw, coll),
        offload_layer=offload_layer,
    )


def comm_at(lt: LayerStepTimes, share: Num) -> tuple[Num, Num, Num]:
    """TP, CP and EP seconds of a layer whose forward is recomputed with probability `share`."""
    (tp0, cp0, ep0), (tp1, cp1, ep1) = lt.comm_plain, lt.comm_recomputed
    return (
        (1.0 - share) * tp0 + share * tp1,
        (1.0 - share) * cp0 + share * cp1,
        (1.0 - share) * ep0 + share * ep1,
    )


def stage_time_parts(
    run: MemoryRun,
    cols: LayoutColumns,
    lt: LayerStepTimes,
    cluster: ClusterSpec,
    layers: Num,
    bf16: Num,
    first: Num,
    last: Num,
) -> dict[str, Num]:
    """One micro-batch (all model chunks) on a stage of `layers` transformer layers, `bf16` of them kept 16-bit;
    `first` / `last` 0/1 mark the stage holding the embedding / the LM head, loss and MTP modules. Keys: the
    StageTime fields."""
    model, fw = run.model, run.fw
    full = cols.recompute == 2
    quantized = layers - bf16
    share = recomputed_share(cols, layers)
    tp_s, cp_s, ep_s = comm_at(lt, share)
    rec = where(
        full,
        share * (quantized * lt.recompute_full + bf16 * lt.recompute_full16),
        quantized * lt.recompute_partial + bf16 * lt.recompute_partial16,
    )
    fwd = quantized * lt.forward + bf16 * lt.forward16 + where(last, lt.logits_fwd, 0.0)
    bwd = quantized * lt.backward + bf16 * lt.backward16 + where(last, 2 * lt.logits_fwd + lt.ce, 0.0)
    mtp = model.mtp_layers
    if mtp and any_true(last):
        # multi-token prediction (ModelSpec.mtp_layers) on the last stage: per module the 2h → h projection, one block
        # (an average layer: compute, recompute and its TP/CP/EP collectives) and a second LM-head pass with its loss
        block_rec = where(
            full, recomputed_share(cols, model.num_layers / cols.pp) * lt.recompute_full, lt.recompute_partial
        )
        fwd = fwd + where(last, mtp * (lt.forward + lt.proj_fwd + lt.logits_fwd), 0.0)
        bwd = bwd + where(last, mtp * (lt.backward + lt.proj_bwd + 2 * lt.logits_fwd + lt.ce), 0.0)
        rec = rec + where(last, mtp * block_rec, 0.0)
    # a gradient accumulation pass over the stage's parameters after each micro-batch's backward (DeepSpeed's
    # BF16_Optimizer, Framework.grad_accum_bytes_per_param): memory-bound, in the backward's stream
    accum_rate = fw.grad_accum_bytes_per_param / (
        cluster.gpu.hbm_bandwidth_bytes_per_s * fw.elementwise_efficiency
    )
    if accum_rate:
        tp, pp, ep, etp = cols.tp, cols.pp, cols.ep, cols.etp
        moe_share = num_moe_layers(model) / model.num_layers
        dense_t, expert_t = transformer_params_per_gpu(
            run.shape, layers * (1 - moe_share), layers * moe_share, tp, ep, etp
        )
        emb = embedding_params_per_gpu(model, tp, pp, first, last)
        mtp_d, mtp_e = mtp_params_per_gpu(model, run.shape, tp, ep, pp, etp)
        bwd = bwd + accum_rate * (
            dense_t + expert_t + emb + where(last, mtp_d, 0.0) + where(last, mtp_e, 0.0)
        )
    offload: Num = 0.0
    off = cols.offload_layers
    if run.offload_modules or any_true(off > 0):
        offload = where(off > 0, off, layers if run.offload_modules else 0.0) * lt.offload_layer
    blocks = layers + where(last, mtp, 0)
    return {
        "forward_compute": fwd,
        "backward_compute": bwd,
        "recompute": rec,
        "tp_comm": blocks * tp_s,
        "cp_comm": blocks * cp_s,
        "ep_comm": blocks * ep_s,
        "pp_comm": where(cols.pp > 1, lt.pp_mb, 0.0),
        "offload": offload,
    }


def stage_total(parts: Mapping[str, Num]) -> Num:
    """A stage's seconds per micro-batch (StageTime.total, in its order)."""
    total: Num = 0.0
    for key in STAGE_PARTS:
        total = total + parts[key]
    return total


def pipeline_bubble(pp: Num, vp: Num, mean_stage: Num) -> Num:
    """Pipeline fill and drain: (p − 1) / v of a mean stage's micro-batch (Narayanan et al. 2021, arXiv 2104.04473,
    Sec. 2.2.1-2.2.2: the 1F1B bubble is (p − 1)/m of the ideal time, divided by v with v model chunks)."""
    return (pp - 1) / vp * mean_stage


def step_estimate(
    run: StepRun, model_flops_per_token: float, hardware_flops_per_token: float, peak_flops: float
) -> StepEstimate:
    """The step of `run`: its stages' times, the pipeline bubble, data-parallel and optimizer time, and the
    FLOP rates from the model and hardware FLOPs per token at the GPU's `peak_flops`."""
    model, cluster, layout, seq_len, fw, network = (
        run.model,
        run.cluster,
        run.layout,
        run.seq_len,
        run.fw,
        run.network,
    )
    stages = stage_times(run)
    m = layout.num_microbatches
    pp, vp = layout.pp, layout.vp
    bottleneck = max(stages, key=lambda s: s.total)
    mean_stage = sum(s.total for s in stages) / len(stages)
    bubble = (pp - 1) / vp * mean_stage

    cols = LayoutColumns.of(layout)
    counts = stage_layer_counts(model.num_layers, layout)
    # an uneven split, or MTP modules on the last stage: the stage holding the most parameters has the longest
    # gradient reduction
    stage_rows = [(float(n_s), int(i == 0), int(i == pp - 1), True) for i, n_s in enumerate(counts)]
    params = gradient_params(model, cols, stage_rows, len(set(counts)) > 1 or model.mtp_layers > 0)
    bottleneck_mb = (bottleneck.forward_compute, bottleneck.backward_compute, bottleneck.recompute)
    dp_comm, zero3, optimizer = data_parallel_times(
        cols, params, bottleneck_mb, model.num_layers / pp, cluster, fw, scalar_collective(cluster, network)
    )

    b = bottleneck
    breakdown = {
        "forward_compute": m * b.forward_compute,
        "backward_compute": m * b.backward_compute,
        "recompute": m * b.recompute,
        "tp_comm": m * b.tp_comm,
        "cp_comm": m * b.cp_comm,
        "ep_comm": m * b.ep_comm,
        "pp_comm": m * b.pp_comm,
        "offload": m * b.offload,
        "pipeline_bubble": bubble,
        "dp_comm": dp_comm,
        "zero3_comm": zero3,
        "optimizer": optimizer,
        "overhead": fw.step_overhead_s,
    }
    tokens = layout.global_batch * seq_len
    return StepEstimate(
        breakdown={k: float(breakdown[k]) for k in STEP_COMPONENTS},
        stages=stages,
        bottleneck_stage=b.stage,
        tokens_per_step=float(tokens),
        model_flops_per_step=float(tokens * model_flops_per_token),
        hardware_flops_per_step=float(tokens * hardware_flops_per_token),
        num_gpus=layout.num_gpus,
        peak_flops_per_gpu=peak_flops,
    )
