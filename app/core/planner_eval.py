"""Vectorised evaluation of many layouts at once: `app.core.estimate.estimate`'s model, driven over arrays.

One row per layout; every field of `app.core.layout.Layout` is an integer numpy array here (LayoutArrays, and
LayoutColumns for the formulas). This module holds no formula of its own: it groups the rows and calls the
row-polymorphic implementations the single estimate also runs (app.core.num):

* memory: `app.core.memory.layer_activations` and `stage_terms`, for the stages that can be the most loaded;
* per-layer compute: `app.core.step.layer_times`, once per distinct (tokens per micro-batch, tp, sp, cp, ep, etp)
  group, read per row through `LayerTimesView`;
* one micro-batch on a stage: `app.core.step.layer_step_times` and `stage_time_parts` (compute, recompute, TP, CP,
  EP and PP communication, activation offload) and `pipeline_bubble`;
* data parallelism: `app.core.step.gradient_params` and `data_parallel_times` (DP/ZeRO collectives, optimizer);
* FLOPs per token: `app.core.estimate.flops_per_token`, once per distinct group;
* every collective goes through `app.core.network.collective_time`, once per distinct (operation, message size,
  ranks, ranks per node): `CollectiveTable`, a few hundred calls for a million layouts.

Most loaded pipeline stage: stage 0 holds the embedding and the most in-flight micro-batches (1F1B and
interleaved warm-up counts are non-increasing in the stage index), so every middle stage is at most stage 0;
the last stage adds the LM head and logits. The peak is therefore max(stage 0, stage p − 1) (and the second
stage of an uneven split, every stage with 16-bit layers), as `MemoryEstimate.most_loaded` finds by looking at
all stages. The bottleneck stage for time is the slowest of stage 0, a stage between and the last, the first of
equals in stage order as `step_estimate` picks it. The stages between an even split are equal, so the mean stage
of the bubble adds them as a product; the estimate adds them one by one, which can differ in the last bit.

`tests/core/test_planner_vectorised.py` checks every output against the scalar `estimate` on random layouts: equal
bits for memory, FLOPs and every step component but the bubble (1e-9).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.efficiency import GemmEfficiency, HardwareProfile, training_curves
from app.core.estimate import EstimateOptions, flops_per_token, framework_conventions, recomputed_layer_share
from app.core.framework import Framework
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, LayoutColumns, RunOptions, framework_reshard, stage_bf16_layer_counts
from app.core.memory import (
    MemoryRun,
    StageTerms,
    layer_activations,
    stage_terms,
)
from app.core.model import (
    ModelSpec,
    layer_shape,
    num_moe_layers,
    padded_vocab_size,
)
from app.core.network import NetworkParams, Placement, collective_time, default_network_params
from app.core.precision import SOURCE_BYTES, cast_bytes_per_element
from app.core.step import (
    STAGE_PARTS,
    STEP_COMPONENTS,
    LayerRates,
    LayerSplit,
    LayerTimesView,
    _gemm,
    _linear,
    attention_kernel,
    data_parallel_times,
    flash_dropout_overhead,
    gradient_params,
    layer_step_times,
    layer_times,
    pipeline_bubble,
    stage_time_parts,
    stage_total,
)

RECOMPUTE_CODES: tuple[str, ...] = ("none", "selective", "full")
LAYOUT_ARRAYS = (
    "tp",
    "pp",
    "vp",
    "dp",
    "cp",
    "ep",
    "etp",
    "zero",
    "sp",
    "recompute",
    "micro_batch",
    "recompute_layers",
    "offload_layers",
    "optimizer_offload",
    "end_layers",
)


@dataclass
class LayoutArrays:
    """Layouts as columns. `recompute` holds indices into RECOMPUTE_CODES; `sp` is 0/1; `recompute_layers` is
    the number of layers per stage recomputed under recompute="full", 0 meaning all (Layout's None);
    `offload_layers` the layers whose activations go to host memory (Layout.offload_layers);
    `optimizer_offload` the share of the optimizer states kept on the host (Layout.optimizer_offload);
    `end_layers` the layers on each end stage of an uneven pipeline split (Layout.first_stage_layers =
    last_stage_layers, the stages between holding one more), 0 meaning an even split."""

    tp: np.ndarray
    pp: np.ndarray
    vp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray  # expert tensor parallel under MoE parallel folding; 0 = legacy (= tp)
    zero: np.ndarray
    sp: np.ndarray
    recompute: np.ndarray
    micro_batch: np.ndarray
    recompute_layers: np.ndarray
    offload_layers: np.ndarray
    optimizer_offload: np.ndarray
    end_layers: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.end_layers is None:
            self.end_layers = np.zeros(self.tp.shape[0], dtype=np.int64)

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    def take(self, index: Any) -> LayoutArrays:
        return LayoutArrays(**{k: getattr(self, k)[index] for k in LAYOUT_ARRAYS})

    @classmethod
    def concat(cls, parts: list[LayoutArrays]) -> LayoutArrays:
        return cls(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in LAYOUT_ARRAYS})


@dataclass
class Evaluation:
    """Per-row results (arrays of the row count). `step` maps STEP_COMPONENTS to seconds per step."""

    peak_bytes: np.ndarray  # most loaded stage, total (what nvidia-smi would show)
    first_stage_bytes: np.ndarray
    last_stage_bytes: np.ndarray
    usable_bytes: float  # HBM × (1 − safety fraction)
    step: dict[str, np.ndarray]
    step_time_s: np.ndarray
    num_microbatches: np.ndarray
    model_flops_per_token: np.ndarray
    hardware_flops_per_token: np.ndarray
    peak_flops_per_gpu: float
    # offloaded activations per GPU in host memory and the host DRAM per GPU (0 = unknown, not checked)
    host_bytes: np.ndarray | None = None
    host_capacity_bytes: float = 0.0

    @property
    def margin_bytes(self) -> np.ndarray:
        return self.usable_bytes - self.peak_bytes

    @property
    def host_fits(self) -> np.ndarray:
        """Rows whose offloaded activations fit the host DRAM per GPU (app.core.memory.MemoryEstimate.host_fits)."""
        if self.host_bytes is None or not self.host_capacity_bytes:
            return np.ones(len(self.peak_bytes), dtype=bool)
        return self.host_bytes <= self.host_capacity_bytes


def curves_for(
    cluster: ClusterSpec, dtype: str, profile: HardwareProfile | None, options: EstimateOptions | None = None
) -> tuple[GemmEfficiency, GemmEfficiency]:
    """Linear-layer and attention GEMM curves as `app.core.estimate.estimate` picks them."""
    return training_curves(cluster.gpu, dtype, profile, (options or EstimateOptions()).power_limit_w)


def framework_for(
    options: EstimateOptions, dtype: str, fp8_params: bool = False, moments_dtype: str = "fp32"
) -> Framework:
    """The framework conventions for this compute dtype, FP8 parameters and Adam-moment dtype
    (app.core.estimate.framework_conventions; the planner keeps such searches to the ZeRO stages that allow them)."""
    return framework_conventions(options.framework, dtype, fp8_params, moments_dtype)


class CollectiveTable:
    """Memoised `collective_time` over distinct (op, bytes, ranks, ranks per node); returns seconds arrays.

    Zero for a single rank or an empty message, as `app.core.step._coll`.
    """

    def __init__(self, cluster: ClusterSpec, params: NetworkParams | None) -> None:
        self.cluster = cluster
        self.params = params or default_network_params()
        self.cache: dict[tuple[str, float, int, int], float] = {}
        self.calls = 0

    def scalar(self, op: str, size: float, ranks: int, per_node: int) -> float:
        if ranks <= 1 or size <= 0:
            return 0.0
        key = (op, size, ranks, per_node)
        hit = self.cache.get(key)
        if hit is None:
            self.calls += 1
            hit = float(
                collective_time(op, size, Placement(ranks, per_node), self.cluster, self.params).time_s
            )
            self.cache[key] = hit
        return hit

    def __call__(self, op: str, size: Any, ranks: Any, per_node: Any, key: np.ndarray) -> np.ndarray:
        """Seconds per row; `key` is an integer code per row that determines (size, ranks, per node).

        Rows with one rank or nothing to send take no time and are not looked up.
        """
        size = np.asarray(size, dtype=float)
        ranks_a = np.broadcast_to(np.asarray(ranks, dtype=np.int64), size.shape)
        per_node_a = np.broadcast_to(np.asarray(per_node, dtype=np.int64), size.shape)
        out = np.zeros(size.shape)
        live = np.nonzero((size > 0) & (ranks_a > 1))[0]
        if live.size == 0:
            return out
        first, inverse = unique_first_inverse(key[live])
        rows = live[first]
        values = np.array(
            [self.scalar(op, float(size[i]), int(ranks_a[i]), int(per_node_a[i])) for i in rows], dtype=float
        )
        out[live] = values[inverse.reshape(-1)]
        return out


# codes below this bound, and below DENSE_CODES_PER_ROW per row, are grouped with a dense table (O(n + codes))
# instead of a sort (O(n log n)): a table much larger than the rows costs more than the sort it saves
DENSE_CODE_LIMIT = 1 << 24
DENSE_CODES_PER_ROW = 16


def unique_first_inverse(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the first row of each distinct code, group number of every row), as
    `np.unique(key, return_index=True, return_inverse=True)[1:]` gives them, in code order."""
    key = np.asarray(key, dtype=np.int64).reshape(-1)
    if key.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    low, high = int(key.min()), int(key.max())
    if low < 0 or high >= min(DENSE_CODE_LIMIT, DENSE_CODES_PER_ROW * key.size + 1024):
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return first, inverse.reshape(-1)
    present = np.zeros(high + 1, dtype=bool)
    present[key] = True
    group = np.cumsum(present) - 1
    first_of = np.empty(high + 1, dtype=np.int64)
    first_of[key[::-1]] = np.arange(key.size - 1, -1, -1, dtype=np.int64)  # the last write is the first row
    return first_of[present], group[key]


def field_code(*columns: np.ndarray) -> np.ndarray:
    """One int64 code per row for a tuple of small non-negative integer columns (mixed radix)."""
    code = np.zeros(np.asarray(columns[0]).shape, dtype=np.int64)
    for col in columns:
        col = np.asarray(col, dtype=np.int64)
        code = code * (int(col.max(initial=0)) + 1) + col
    return code


def _group_apply(
    key: np.ndarray, keys: list[np.ndarray], fn: Callable[..., tuple[float, ...]], width: int
) -> np.ndarray:
    """Call scalar `fn(*values)` once per distinct `key` code; return an (n, width) array gathered to the rows."""
    first, inverse = unique_first_inverse(key)
    table = np.array([fn(*(float(k[i]) for k in keys)) for i in first], dtype=float).reshape(
        len(first), width
    )
    return table[inverse.reshape(-1)]


def _bf16_stage_table(
    num_layers: int,
    pp: np.ndarray,
    vp: np.ndarray,
    end_layers: np.ndarray,
    uneven: np.ndarray,
    bf16_layers: tuple[int, int],
    dtype: str,
) -> np.ndarray:
    """16-bit layers of every stage of every row (rows × max pp; 0 past a row's last stage), from the scalar rule
    (app.core.layout.stage_bf16_layer_counts) over the rows' distinct pipeline shapes."""
    end = np.where(uneven, end_layers, 0).astype(np.int64)
    first, inverse = unique_first_inverse(field_code(pp, vp, end))
    table = np.zeros((first.size, int(pp.max())))
    for g, i in enumerate(first):
        ends = int(end[i]) or None
        shape = Layout(
            pp=int(pp[i]),
            vp=int(vp[i]),
            first_stage_layers=ends,
            last_stage_layers=ends,
            bf16_first_layers=bf16_layers[0],
            bf16_last_layers=bf16_layers[1],
            dtype=dtype,  # type: ignore[arg-type]
        )
        counts = stage_bf16_layer_counts(num_layers, shape)
        table[g, : len(counts)] = counts
    return table[inverse]


def evaluate(  # noqa: C901, PLR0913, PLR0915
    model: ModelSpec,
    cluster: ClusterSpec,
    rows: LayoutArrays,
    seq_len: int,
    global_batch: int,
    run: RunOptions | None = None,
    *,
    options: EstimateOptions | None = None,
    profile: HardwareProfile | None = None,
    collectives: CollectiveTable | None = None,
) -> Evaluation:
    """Memory of the most loaded stage and the step-time breakdown of every row (dp·tp·pp·cp = cluster GPUs).

    `run`: what every row shares (RunOptions). Its 16-bit layers make every stage evaluated, since the stages between
    differ by the 16-bit layers they hold; the caller keeps the rows to the ZeRO stages that allow FP8 parameters and
    bf16 moments, and to no or selective recompute without layer offloading under fine-grained offloading.
    """
    opts = options or EstimateOptions()
    r = run or RunOptions()
    dtype, flash_attention, bf16_layers = r.dtype, r.flash_attention, r.bf16_layers
    mtp_layers = model.mtp_layers
    fw: Framework = framework_for(opts, dtype, r.fp8_param_gather, r.optimizer_moments_dtype)
    net = profile.network if profile is not None else None
    coll = collectives or CollectiveTable(cluster, net)
    linear, attn_curve = curves_for(cluster, dtype, profile, opts)
    shape = layer_shape(model)
    h = model.hidden_size
    hbm_bw = cluster.gpu.hbm_bandwidth_bytes_per_s

    tp = rows.tp.astype(np.int64)
    pp = rows.pp.astype(np.int64)
    vp = rows.vp.astype(np.int64)
    dp = rows.dp.astype(np.int64)
    cp = rows.cp.astype(np.int64)
    ep = rows.ep.astype(np.int64)
    etp_col = rows.etp.astype(np.int64)
    folded = etp_col > 0  # MoE parallel folding (app.core.layout); otherwise expert tensor parallel = tp
    e_tp = np.where(folded, etp_col, tp)
    zero = rows.zero.astype(np.int64)
    sp = rows.sp.astype(np.int64)
    rec = rows.recompute.astype(np.int64)
    mb = rows.micro_batch.astype(np.int64)
    n = len(rows)
    rl = rows.recompute_layers.astype(np.int64)
    off = rows.offload_layers.astype(np.int64)
    opt_off = rows.optimizer_offload.astype(float)
    m = np.maximum(1, global_batch // np.maximum(1, dp * mb))

    n_moe = num_moe_layers(model)
    layers_per_gpu = model.num_layers / pp
    tokens = mb * seq_len / cp
    # uneven pipeline split (Layout.first_stage_layers = last_stage_layers = end_layers): the end stages hold
    # end_l layers, the stages between mid_l; an even split gives every stage L / p
    end_col = rows.end_layers if rows.end_layers is not None else np.zeros(n, dtype=np.int64)
    uneven = (end_col.astype(np.int64) > 0) & (pp > 2)
    end_l = np.where(uneven, end_col, layers_per_gpu).astype(float)
    mid_l = np.where(uneven, (model.num_layers - 2 * end_col) / np.maximum(1, pp - 2), layers_per_gpu).astype(
        float
    )

    # ----------------------------------------------------------------------------------------- memory
    flash = flash_attention
    spb = sp.astype(bool)
    exp_shard = np.maximum(1, tp * (dp * cp) // (e_tp * ep))  # Layout.expert_dp
    cols = LayoutColumns(
        tp=tp,
        pp=pp,
        vp=vp,
        dp=dp,
        cp=cp,
        ep=ep,
        etp=e_tp,
        folded=folded.astype(np.int64),
        zero=zero,
        sp=sp,
        recompute=rec,
        micro_batch=mb,
        num_microbatches=m,
        recompute_layers=rl,
        offload_layers=off,
        optimizer_offload=opt_off,
        expert_dp=exp_shard,
        reshard=framework_reshard(fw.pipeline_reshard, pp, zero),
    )
    run_memory = MemoryRun(model, seq_len, fw, flash, r.recompute_modules, r.offload_modules)
    acts = layer_activations(run_memory, cols)
    # layers an fp8 / fp4 run keeps 16-bit, per stage (app.core.layout.stage_bf16_layer_counts)
    with_bf16 = bool(bf16_layers[0] or bf16_layers[1])
    bf16_by_stage = np.zeros((n, 1))
    acts16 = acts
    if with_bf16:
        bf16_by_stage = _bf16_stage_table(model.num_layers, pp, vp, end_col, uneven, bf16_layers, dtype)
        acts16 = layer_activations(run_memory, cols, SOURCE_BYTES)

    def stage(index: Any, first: Any, last: Any, layers: np.ndarray, bf16: np.ndarray | None) -> StageTerms:
        """The memory of one stage of every row (app.core.memory.stage_terms)."""
        return stage_terms(
            run_memory, cols, acts, index, first, last, layers, None if bf16 is None else (bf16, acts16)
        )

    # the most loaded stage: stage 0 or the last (see the module docstring); with 16-bit layers every stage between,
    # with an uneven split the second (it holds the most layer-activations of the stages between)
    zeros = np.zeros(n, dtype=np.int64)
    ones = np.ones(n, dtype=np.int64)
    rows_at = np.arange(n)
    b_first = bf16_by_stage[:, 0] if with_bf16 else None
    b_last = bf16_by_stage[rows_at, pp - 1] if with_bf16 else None
    first_t = stage(zeros, 1, (pp == 1).astype(np.int64), end_l, b_first)
    last_t = stage(pp - 1, 0, 1, end_l, b_last)
    first_bytes = first_t.total_bytes
    last_bytes = np.where(pp > 1, last_t.total_bytes, first_bytes)
    peak = np.maximum(first_bytes, last_bytes)
    # host memory, most loaded stage
    host_bytes = np.where(pp > 1, np.maximum(first_t.host_bytes, last_t.host_bytes), first_t.host_bytes)
    if with_bf16:
        for s_mid in range(1, bf16_by_stage.shape[1] - 1):
            mid_stage = stage(np.full(n, s_mid), 0, 0, mid_l, bf16_by_stage[:, s_mid])
            peak = np.where(s_mid < pp - 1, np.maximum(peak, mid_stage.total_bytes), peak)
    if uneven.any():
        second = stage(ones, 0, 0, mid_l, bf16_by_stage[:, 1] if with_bf16 else None)
        peak = np.where(uneven, np.maximum(peak, second.total_bytes), peak)
        host_bytes = np.where(uneven, np.maximum(host_bytes, second.host_bytes), host_bytes)

    # ----------------------------------------------------------------------------------------- step time
    # per-layer compute: one array call of the estimator's own `layer_times` over the distinct groups
    first, inverse = unique_first_inverse(field_code(mb, cp, tp, sp, ep, e_tp))
    inverse = inverse.reshape(-1)
    g_tok, g_tp, g_sp, g_cp, g_ep = tokens[first], tp[first], spb[first], cp[first], ep[first]
    g_etp = e_tp[first]
    split = LayerSplit(g_tok, seq_len, g_tp, g_sp, g_cp, g_ep, flash)
    kernel = attention_kernel(fw, cluster.gpu, profile)
    rates = LayerRates(
        linear,
        attn_curve,
        hbm_bw,
        fw,
        opts.causal,
        cast_bytes_per_element(dtype),
        flash_dropout_overhead(cluster.gpu),
        kernel.shares,
        kernel.loop_scale,
    )

    def group_times(r: LayerRates) -> LayerTimesView:
        dense = layer_times(shape, split, False, r)
        moe_t = layer_times(shape, split, True, r, g_etp) if n_moe else dense
        return LayerTimesView(dense, moe_t, n_moe / model.num_layers, inverse, len(first))

    view = group_times(rates)
    # a layer kept 16-bit: its GEMMs on the 16-bit curve, no casts
    view16 = group_times(rates.sixteen_bit()) if with_bf16 else view
    g_vocab = padded_vocab_size(model.vocab_size, g_tp)  # type: ignore[arg-type]
    logits_fwd = np.asarray(_gemm(attn_curve, g_tok, g_vocab / g_tp, h), dtype=float)[inverse]
    proj_fwd, proj_bwd = (
        np.asarray(t, dtype=float)[inverse] for t in _linear(linear, g_tok, h / g_tp, 2 * h)
    )
    group_keys = {
        "tp": field_code(tp, mb, cp),
        "ep": field_code(tp, mb, cp, ep, spb.astype(np.int64), e_tp, folded.astype(np.int64)),
        "pp": field_code(tp, mb, cp, pp, sp),
        "dp": field_code(tp, pp, cp, ep, e_tp),  # the ZeRO stage only masks which collectives run
    }

    def row_coll(op: str, size: Any, ranks: Any, node: Any, group: str) -> np.ndarray:
        return coll(op, size, ranks, node, group_keys[group])

    lt = layer_step_times(
        run_memory, cols, (view, view16), (logits_fwd, proj_fwd, proj_bwd), cluster, row_coll, acts
    )

    def stage_parts(layers: np.ndarray, bf16: Any, first_: Any, last_: Any) -> dict[str, np.ndarray]:
        """One micro-batch on a stage of every row (app.core.step.stage_time_parts)."""
        parts = stage_time_parts(run_memory, cols, lt, cluster, layers, bf16, first_, last_)
        return {k: np.zeros(n) + v for k, v in parts.items()}

    single = (pp == 1).astype(np.int64)
    if not with_bf16:
        last_parts = stage_parts(end_l, 0.0, single, 1)
        mid_parts = stage_parts(mid_l, 0.0, 0, 0)
        first_parts = stage_parts(end_l, 0.0, 1, 0)
        last_total, mid_total, first_total = (
            stage_total(last_parts),
            stage_total(mid_parts),
            stage_total(first_parts),
        )
        # the bottleneck stage, the first of equals in stage order as app.core.step.step_estimate picks it
        use_first = (pp > 1) & (first_total >= mid_total) & (first_total >= last_total)
        use_mid = (pp > 2) & ~use_first & (mid_total >= last_total)

        def pick(key: str) -> np.ndarray:
            return np.where(use_first, first_parts[key], np.where(use_mid, mid_parts[key], last_parts[key]))

        # the stages between are equal: their sum as a product (the estimate adds the stages one by one, which can
        # differ from it in the last bit)
        mean_stage = np.where(pp > 1, (first_total + (pp - 2) * mid_total + last_total) / pp, last_total)
    else:
        # every stage: the stages between differ by the 16-bit layers they hold. The bottleneck is the first of
        # equals in stage order (app.core.step.step_estimate): stage 0, then each stage between, then the last
        first_parts = stage_parts(end_l, b_first, 1, 0)
        last_parts = stage_parts(end_l, b_last, single, 1)
        best = {k: v.copy() for k, v in first_parts.items()}
        best_total = stage_total(first_parts)
        total_all = np.where(pp > 1, best_total, 0.0)
        for s_mid in range(1, bf16_by_stage.shape[1] - 1):
            inside = s_mid < pp - 1
            parts_s = stage_parts(mid_l, bf16_by_stage[:, s_mid], 0, 0)
            total_s = stage_total(parts_s)
            slower = inside & (total_s > best_total)
            for key in best:
                best[key] = np.where(slower, parts_s[key], best[key])
            best_total = np.where(slower, total_s, best_total)
            total_all = total_all + np.where(inside, total_s, 0.0)
        last_total = stage_total(last_parts)
        use_last = (pp == 1) | (last_total > best_total)
        for key in best:
            best[key] = np.where(use_last, last_parts[key], best[key])
        total_all = total_all + last_total
        mean_stage = total_all / pp

        def pick(key: str) -> np.ndarray:
            return best[key]

    b_fwd, b_bwd, b_rec = pick("forward_compute"), pick("backward_compute"), pick("recompute")
    bubble = pipeline_bubble(pp, vp, mean_stage)

    # data parallelism, ZeRO-3 and the optimizer (app.core.step.data_parallel_times); the candidates for the stage
    # holding the most parameters are stage 0, a stage between and the last (app.core.step.gradient_params)
    candidates = [(end_l, 1, single, True), (mid_l, 0, 0, pp > 2), (end_l, 0, 1, pp > 1)]
    params = gradient_params(model, cols, candidates, uneven | (mtp_layers > 0))

    # a term no row has comes back as a number: one value per row (adding 0.0 changes no bit)
    dp_comm, zero3, optimizer = (
        np.zeros(n) + t
        for t in data_parallel_times(
            cols, params, (b_fwd, b_bwd, b_rec), layers_per_gpu, cluster, fw, row_coll
        )
    )

    step = {key: m * pick(key) for key in STAGE_PARTS}
    step.update(
        {
            "pipeline_bubble": bubble,
            "dp_comm": dp_comm,
            "zero3_comm": zero3,
            "optimizer": optimizer,
            "overhead": np.full(n, float(fw.step_overhead_s)),
        }
    )
    total = np.zeros(n)
    for key in STEP_COMPONENTS:
        total = total + step[key]

    # FLOPs per token (app.core.estimate.flops_per_token) depend on tp (vocabulary padding), the recompute mode and
    # the layers each stage recomputes
    def flops(tp_: float, rec_: float, rl_: float, pp_: float, end_: float) -> tuple[float, float]:
        mode = RECOMPUTE_CODES[int(rec_)]
        rec_share = 1.0
        if mode == "full":
            p = int(pp_)
            ends = int(end_) if end_ > 0 and p > 2 else 0
            counts = (
                [ends, *[(model.num_layers - 2 * ends) // (p - 2)] * (p - 2), ends]
                if ends
                else [model.num_layers // p] * p
            )
            rec_share = recomputed_layer_share(model.num_layers, counts, int(rl_) or None)
        vocab_ = padded_vocab_size(model.vocab_size, int(tp_))
        return flops_per_token(model, seq_len, mode, rec_share, run_memory, opts.flop_counting, vocab_)

    end_flops = np.where(uneven, end_col, 0).astype(np.int64)
    fl = _group_apply(field_code(tp, rec, rl, pp, end_flops), [tp, rec, rl, pp, end_flops], flops, 2)
    return Evaluation(
        peak_bytes=peak,
        first_stage_bytes=first_bytes,
        last_stage_bytes=last_bytes,
        usable_bytes=float(cluster.gpu.hbm_bytes) * (1 - opts.safety_fraction),
        step=step,
        step_time_s=total,
        num_microbatches=m,
        model_flops_per_token=fl[:, 0],
        hardware_flops_per_token=fl[:, 1],
        peak_flops_per_gpu=float(cluster.gpu.peak(dtype)),
        host_bytes=np.asarray(host_bytes, dtype=float),
        host_capacity_bytes=float(cluster.gpu.host_memory_bytes),
    )
