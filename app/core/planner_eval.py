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
from typing import cast

import numpy as np

from app.core.efficiency import GemmEfficiency, HardwareProfile, training_curves
from app.core.estimate import EstimateOptions, flops_per_token, framework_conventions, recomputed_layer_share
from app.core.framework import Framework
from app.core.hardware import ClusterSpec
from app.core.layout import (
    RECOMPUTE_MODES,
    Layout,
    LayoutColumns,
    RunOptions,
    framework_reshard,
    stage_bf16_layer_counts,
)
from app.core.memory import (
    LayerActivations,
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
from app.core.num import Flag, Num
from app.core.precision import SOURCE_BYTES
from app.core.step import (
    STAGE_PARTS,
    STEP_COMPONENTS,
    LayerRates,
    LayerSplit,
    LayerStepTimes,
    LayerTimesView,
    _gemm,
    _linear,
    attention_kernel,
    data_parallel_times,
    gradient_params,
    layer_rates,
    layer_step_times,
    layer_times,
    pipeline_bubble,
    stage_time_parts,
    stage_total,
)

RECOMPUTE_CODES: tuple[str, ...] = RECOMPUTE_MODES  # a layout column holds the index of its mode
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

    def take(self, index: np.ndarray) -> LayoutArrays:
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
    collective_calls: int = 0  # collective_time evaluations the rows took (CollectiveTable.calls)

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

    def __call__(self, op: str, size: Num, ranks: Num, per_node: Num, key: np.ndarray) -> np.ndarray:
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


def _col(value: Num) -> np.ndarray:
    """A LayoutColumns field of the rows: _Rows.of makes every one a float64 array."""
    return cast(np.ndarray, value)


def field_code(*columns: float | np.ndarray) -> np.ndarray:
    """One int64 code per row for a tuple of columns of small non-negative whole numbers (mixed radix)."""
    code = np.zeros(np.asarray(columns[0]).shape, dtype=np.int64)
    for col in columns:
        whole = np.asarray(col, dtype=np.int64)
        code = code * (int(whole.max(initial=0)) + 1) + whole
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


def evaluate(
    model: ModelSpec,
    cluster: ClusterSpec,
    rows: LayoutArrays,
    seq_len: int,
    global_batch: int,
    run: RunOptions | None = None,
    *,
    options: EstimateOptions | None = None,
    profile: HardwareProfile | None = None,
) -> Evaluation:
    """Memory of the most loaded stage and the step-time breakdown of every row (dp·tp·pp·cp = cluster GPUs).

    `run`: what every row shares (RunOptions). Its 16-bit layers make every stage evaluated, since the stages between
    differ by the 16-bit layers they hold; the caller keeps the rows to the ZeRO stages that allow FP8 parameters and
    bf16 moments, and to no or selective recompute without layer offloading under fine-grained offloading.
    """
    opts = options or EstimateOptions()
    r = run or RunOptions()
    fw: Framework = framework_for(opts, r.dtype, r.fp8_param_gather, r.optimizer_moments_dtype)
    coll = CollectiveTable(cluster, profile.network if profile is not None else None)
    memory_run = MemoryRun(model, seq_len, fw, r.flash_attention, r.recompute_modules, r.offload_modules)
    ctx = _Context(model, cluster, seq_len, opts, profile, r, fw, memory_run, coll)
    lr = _Rows.of(model, rows, global_batch, fw)
    acts = layer_activations(memory_run, lr.cols)
    b16 = _Sixteen.of(ctx, lr, acts)
    peak, first_bytes, last_bytes, host_bytes = _peak_memory(ctx, lr, acts, b16)
    step = _step_times(ctx, lr, acts, b16)
    total = np.zeros(lr.n)
    for key in STEP_COMPONENTS:
        total = total + step[key]
    fl = _flops(ctx, lr)
    return Evaluation(
        peak_bytes=peak,
        first_stage_bytes=first_bytes,
        last_stage_bytes=last_bytes,
        usable_bytes=float(cluster.gpu.hbm_bytes) * (1 - opts.safety_fraction),
        step=step,
        step_time_s=total,
        num_microbatches=lr.num_microbatches,
        model_flops_per_token=fl[:, 0],
        hardware_flops_per_token=fl[:, 1],
        peak_flops_per_gpu=float(cluster.gpu.peak(r.dtype)),
        host_bytes=np.asarray(host_bytes, dtype=float),
        host_capacity_bytes=float(cluster.gpu.host_memory_bytes),
        collective_calls=coll.calls,
    )


@dataclass(frozen=True)
class _Context:
    """What every row of one evaluation shares."""

    model: ModelSpec
    cluster: ClusterSpec
    seq_len: int
    options: EstimateOptions
    profile: HardwareProfile | None
    run: RunOptions
    fw: Framework  # the framework's conventions for the run's precision (framework_for)
    memory: MemoryRun
    coll: CollectiveTable


@dataclass(frozen=True)
class _Rows:
    """The rows as the formulas read them (LayoutColumns), with their pipeline split: an uneven split
    (Layout.first_stage_layers = last_stage_layers = end_layers) gives the end stages `end_l` layers and the stages
    between `mid_l`; an even split gives every stage L / p."""

    n: int
    cols: LayoutColumns  # float64 columns (whole numbers, exact)
    pp: np.ndarray  # the pipeline stages and model chunks, int64, for the planner's own per-stage tables
    vp: np.ndarray
    num_microbatches: np.ndarray  # int64, as Layout.num_microbatches
    end_col: np.ndarray  # LayoutArrays.end_layers
    uneven: np.ndarray  # an uneven split with stages between (pp > 2)
    end_l: np.ndarray
    mid_l: np.ndarray
    layers_per_gpu: np.ndarray  # L / p

    @classmethod
    def of(cls, model: ModelSpec, rows: LayoutArrays, global_batch: int, fw: Framework) -> _Rows:
        """The LayoutColumns of `rows` (num_microbatches, expert_dp and reshard as Layout computes them)."""
        n = len(rows)
        tp, pp, dp, cp, ep = (getattr(rows, k).astype(np.int64) for k in ("tp", "pp", "dp", "cp", "ep"))
        mb, zero = rows.micro_batch.astype(np.int64), rows.zero.astype(np.int64)
        etp_col = rows.etp.astype(np.int64)
        folded = etp_col > 0  # MoE parallel folding (app.core.layout); otherwise expert tensor parallel = tp
        e_tp = np.where(folded, etp_col, tp)
        num_microbatches = np.maximum(1, global_batch // np.maximum(1, dp * mb))
        values = {
            "tp": tp,
            "pp": pp,
            "vp": rows.vp,
            "dp": dp,
            "cp": cp,
            "ep": ep,
            "etp": e_tp,
            "folded": folded,
            "zero": zero,
            "sp": rows.sp,
            "recompute": rows.recompute,
            "micro_batch": mb,
            "num_microbatches": num_microbatches,
            "recompute_layers": rows.recompute_layers,
            "offload_layers": rows.offload_layers,
            "optimizer_offload": rows.optimizer_offload,
            "expert_dp": np.maximum(1, tp * (dp * cp) // (e_tp * ep)),  # Layout.expert_dp
            "reshard": framework_reshard(fw.pipeline_reshard, pp, zero),
        }
        cols = LayoutColumns(**{k: np.asarray(v, dtype=np.float64) for k, v in values.items()})
        layers_per_gpu = model.num_layers / pp
        end_col = rows.end_layers if rows.end_layers is not None else np.zeros(n, dtype=np.int64)
        uneven = (end_col.astype(np.int64) > 0) & (pp > 2)
        end_l = np.where(uneven, end_col, layers_per_gpu).astype(float)
        mid = np.where(uneven, (model.num_layers - 2 * end_col) / np.maximum(1, pp - 2), layers_per_gpu)
        return cls(
            n,
            cols,
            pp,
            rows.vp.astype(np.int64),
            num_microbatches,
            end_col,
            uneven,
            end_l,
            mid.astype(float),
            layers_per_gpu,
        )


@dataclass(frozen=True)
class _Sixteen:
    """The layers an fp8 / fp4 run keeps 16-bit, per stage of every row (app.core.layout.stage_bf16_layer_counts),
    and the activations of such a layer; `on` False (no 16-bit layers) leaves a single zero column."""

    on: bool
    by_stage: np.ndarray  # rows × max pp
    acts: LayerActivations
    first: np.ndarray | None  # stage 0's count per row (None when off)
    last: np.ndarray | None  # the last stage's

    @classmethod
    def of(cls, ctx: _Context, lr: _Rows, acts: LayerActivations) -> _Sixteen:
        """The 16-bit layer counts of the run's `bf16_layers` over the rows."""
        bf16_layers = ctx.run.bf16_layers
        if not (bf16_layers[0] or bf16_layers[1]):
            return cls(False, np.zeros((lr.n, 1)), acts, None, None)
        cols = lr.cols
        by_stage = _bf16_stage_table(
            ctx.model.num_layers, lr.pp, lr.vp, lr.end_col, lr.uneven, bf16_layers, ctx.run.dtype
        )
        acts16 = layer_activations(ctx.memory, cols, SOURCE_BYTES)
        return cls(True, by_stage, acts16, by_stage[:, 0], by_stage[np.arange(lr.n), lr.pp - 1])

    def stage(self, index: int) -> np.ndarray | None:
        """The 16-bit layers of stage `index` of every row (None when off)."""
        return self.by_stage[:, index] if self.on else None


def _peak_memory(
    ctx: _Context, lr: _Rows, acts: LayerActivations, b16: _Sixteen
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(most loaded stage, stage 0, last stage, offloaded bytes of the most loaded stage) per row, in bytes: stage 0
    or the last (see the module docstring); with 16-bit layers every stage between, with an uneven split the second
    (it holds the most layer-activations of the stages between)."""
    n, pp = lr.n, lr.pp

    def stage(
        index: int | np.ndarray,
        first: int | np.ndarray,
        last: int | np.ndarray,
        layers: np.ndarray,
        bf16: np.ndarray | None,
    ) -> StageTerms:
        """The memory of one stage of every row (app.core.memory.stage_terms)."""
        sixteen = None if bf16 is None else (bf16, b16.acts)
        return stage_terms(ctx.memory, lr.cols, acts, index, first, last, layers, sixteen)

    first_t = stage(np.zeros(n, dtype=np.int64), 1, (pp == 1).astype(np.int64), lr.end_l, b16.first)
    last_t = stage(pp - 1, 0, 1, lr.end_l, b16.last)
    first_bytes = cast(np.ndarray, first_t.total_bytes)  # every row: an array
    last_bytes = np.where(pp > 1, last_t.total_bytes, first_bytes)
    peak = np.maximum(first_bytes, last_bytes)
    host_bytes = np.where(pp > 1, np.maximum(first_t.host_bytes, last_t.host_bytes), first_t.host_bytes)
    if b16.on:
        for s_mid in range(1, b16.by_stage.shape[1] - 1):
            mid_stage = stage(np.full(n, s_mid), 0, 0, lr.mid_l, b16.by_stage[:, s_mid])
            peak = np.where(s_mid < pp - 1, np.maximum(peak, mid_stage.total_bytes), peak)
    if lr.uneven.any():
        second = stage(np.ones(n, dtype=np.int64), 0, 0, lr.mid_l, b16.stage(1))
        peak = np.where(lr.uneven, np.maximum(peak, second.total_bytes), peak)
        host_bytes = np.where(lr.uneven, np.maximum(host_bytes, second.host_bytes), host_bytes)
    return peak, first_bytes, last_bytes, host_bytes


class _RowCollectives:
    """`app.core.step.Collective` over the rows: a collective's time per row, looked up once per distinct group of
    the fields that determine its message and ranks (`group`: which parallel dimension communicates)."""

    def __init__(self, coll: CollectiveTable, cols: LayoutColumns) -> None:
        tp, mb, cp, pp, ep = cols.tp, cols.micro_batch, cols.cp, cols.pp, cols.ep
        self.coll = coll
        self.keys = {
            "tp": field_code(tp, mb, cp),
            "ep": field_code(tp, mb, cp, ep, cols.sp, cols.etp, cols.folded),
            "pp": field_code(tp, mb, cp, pp, cols.sp),
            "dp": field_code(tp, pp, cp, ep, cols.etp),  # the ZeRO stage only masks which collectives run
        }

    def __call__(self, op: str, size: Num, ranks: Num, node: Num, group: str) -> np.ndarray:
        return self.coll(op, size, ranks, node, self.keys[group])


def _layer_step_times(
    ctx: _Context, lr: _Rows, acts: LayerActivations, b16: _Sixteen, row_coll: _RowCollectives
) -> LayerStepTimes:
    """Per-layer compute and communication of every row: one array call of the estimator's own `layer_times` over
    the distinct (tokens per micro-batch, tp, sp, cp, ep, etp) groups, read per row (app.core.step.layer_step_times)."""
    model, cluster, cols, fw = ctx.model, ctx.cluster, lr.cols, ctx.fw
    h = model.hidden_size
    linear, attn_curve = curves_for(cluster, ctx.run.dtype, ctx.profile, ctx.options)
    tokens = cols.micro_batch * ctx.seq_len / cols.cp
    first, inverse = unique_first_inverse(
        field_code(cols.micro_batch, cols.cp, cols.tp, cols.sp, cols.ep, cols.etp)
    )
    inverse = inverse.reshape(-1)
    g_tok, g_tp = _col(tokens)[first], _col(cols.tp)[first]
    sp = _col(cols.sp).astype(bool)
    split = LayerSplit(
        g_tok,
        ctx.seq_len,
        g_tp,
        sp[first],
        _col(cols.cp)[first],
        _col(cols.ep)[first],
        ctx.run.flash_attention,
    )
    kernel = attention_kernel(fw, cluster.gpu, ctx.profile)
    rates = layer_rates(linear, attn_curve, cluster.gpu, fw, ctx.options.causal, ctx.run.dtype, kernel)
    shape, n_moe, g_etp = layer_shape(model), num_moe_layers(model), _col(cols.etp)[first]

    def group_times(r: LayerRates) -> LayerTimesView:
        dense = layer_times(shape, split, False, r)
        moe_t = layer_times(shape, split, True, r, g_etp) if n_moe else dense
        return LayerTimesView(dense, moe_t, n_moe / model.num_layers, inverse, len(first))

    view = group_times(rates)
    # a layer kept 16-bit: its GEMMs on the 16-bit curve, no casts
    view16 = group_times(rates.sixteen_bit()) if b16.on else view
    g_vocab = padded_vocab_size(model.vocab_size, g_tp)  # type: ignore[arg-type]
    logits_fwd = np.asarray(_gemm(attn_curve, g_tok, g_vocab / g_tp, h), dtype=float)[inverse]
    proj_fwd, proj_bwd = (
        np.asarray(t, dtype=float)[inverse] for t in _linear(linear, g_tok, h / g_tp, 2 * h)
    )
    head = (logits_fwd, proj_fwd, proj_bwd)
    return layer_step_times(ctx.memory, cols, (view, view16), head, cluster, row_coll, acts)


def _step_times(ctx: _Context, lr: _Rows, acts: LayerActivations, b16: _Sixteen) -> dict[str, np.ndarray]:
    """Seconds per step of every row by STEP_COMPONENTS: the bottleneck stage's micro-batches, the pipeline bubble,
    data parallelism, ZeRO-3 and the optimizer (app.core.step.data_parallel_times) and the framework's overhead."""
    cols, n = lr.cols, lr.n
    row_coll = _RowCollectives(ctx.coll, cols)
    lt = _layer_step_times(ctx, lr, acts, b16, row_coll)
    picked, mean_stage = _bf16_bottleneck(ctx, lr, lt, b16) if b16.on else _even_bottleneck(ctx, lr, lt)
    bottleneck = (picked["forward_compute"], picked["backward_compute"], picked["recompute"])
    bubble = pipeline_bubble(cols.pp, cols.vp, mean_stage)
    # the candidates for the stage holding the most parameters are stage 0, a stage between and the last
    # (app.core.step.gradient_params)
    pp, single = lr.pp, (lr.pp == 1).astype(np.float64)
    candidates: list[tuple[Num, Num, Num, Flag]] = [
        (lr.end_l, 1, single, True),
        (lr.mid_l, 0, 0, pp > 2),
        (lr.end_l, 0, 1, pp > 1),
    ]
    params = gradient_params(ctx.model, cols, candidates, lr.uneven | (ctx.model.mtp_layers > 0))
    # a term no row has comes back as a number: one value per row (adding 0.0 changes no bit)
    dp_comm, zero3, optimizer = (
        np.zeros(n) + t
        for t in data_parallel_times(
            cols, params, bottleneck, lr.layers_per_gpu, ctx.cluster, ctx.fw, row_coll
        )
    )
    step = {key: cols.num_microbatches * picked[key] for key in STAGE_PARTS}
    step.update(
        {
            "pipeline_bubble": bubble,
            "dp_comm": dp_comm,
            "zero3_comm": zero3,
            "optimizer": optimizer,
            "overhead": np.full(n, float(ctx.fw.step_overhead_s)),
        }
    )
    return step


def _stage_parts(
    ctx: _Context,
    lr: _Rows,
    lt: LayerStepTimes,
    stage: tuple[np.ndarray, float | np.ndarray, int | np.ndarray, int | np.ndarray],
) -> dict[str, np.ndarray]:
    """One micro-batch on a stage of every row (app.core.step.stage_time_parts); `stage`: (layers, 16-bit layers,
    first, last), first / last 0/1 marking the stage with the embedding / the LM head."""
    layers, bf16, first, last = stage
    parts = stage_time_parts(ctx.memory, lr.cols, lt, ctx.cluster, layers, bf16, first, last)
    return {k: np.zeros(lr.n) + v for k, v in parts.items()}


def _even_bottleneck(
    ctx: _Context, lr: _Rows, lt: LayerStepTimes
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the bottleneck stage's parts, the mean stage's seconds per micro-batch) without 16-bit layers: stage 0, one
    stage between (they are equal) and the last. The bottleneck is the first of equals in stage order, as
    app.core.step.step_estimate picks it."""
    pp = lr.pp
    single = (pp == 1).astype(np.int64)
    last_parts = _stage_parts(ctx, lr, lt, (lr.end_l, 0.0, single, 1))
    mid_parts = _stage_parts(ctx, lr, lt, (lr.mid_l, 0.0, 0, 0))
    first_parts = _stage_parts(ctx, lr, lt, (lr.end_l, 0.0, 1, 0))
    last_total, mid_total, first_total = (
        stage_total(last_parts),
        stage_total(mid_parts),
        stage_total(first_parts),
    )
    use_first = (pp > 1) & (first_total >= mid_total) & (first_total >= last_total)
    use_mid = (pp > 2) & ~use_first & (mid_total >= last_total)
    picked = {
        key: np.where(use_first, first_parts[key], np.where(use_mid, mid_parts[key], last_parts[key]))
        for key in STAGE_PARTS
    }
    # the stages between are equal: their sum as a product (the estimate adds the stages one by one, which can
    # differ from it in the last bit)
    mean_stage = np.where(pp > 1, (first_total + (pp - 2) * mid_total + last_total) / pp, last_total)
    return picked, mean_stage


def _bf16_bottleneck(
    ctx: _Context, lr: _Rows, lt: LayerStepTimes, b16: _Sixteen
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the bottleneck stage's parts, the mean stage's seconds per micro-batch) with 16-bit layers: every stage, since
    the stages between differ by the 16-bit layers they hold. The bottleneck is the first of equals in stage order
    (app.core.step.step_estimate): stage 0, then each stage between, then the last."""
    pp = lr.pp
    first_parts = _stage_parts(ctx, lr, lt, (lr.end_l, cast(np.ndarray, b16.first), 1, 0))  # b16.on: set
    last_parts = _stage_parts(
        ctx, lr, lt, (lr.end_l, cast(np.ndarray, b16.last), (pp == 1).astype(np.int64), 1)
    )
    best = {k: v.copy() for k, v in first_parts.items()}
    best_total = stage_total(first_parts)
    total_all = np.where(pp > 1, best_total, 0.0)
    for s_mid in range(1, b16.by_stage.shape[1] - 1):
        inside = s_mid < pp - 1
        parts_s = _stage_parts(ctx, lr, lt, (lr.mid_l, b16.by_stage[:, s_mid], 0, 0))
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
    return best, (total_all + last_total) / pp


def _flops(ctx: _Context, lr: _Rows) -> np.ndarray:
    """(model, hardware) FLOPs per token of every row (app.core.estimate.flops_per_token), once per distinct (tp:
    vocabulary padding, recompute mode, layers each stage recomputes, pipeline split)."""
    model, cols = ctx.model, lr.cols

    def flops(tp_: float, rec_: float, rl_: float, pp_: float, end_: float) -> tuple[float, float]:
        """(model, hardware) FLOPs per token of one group; the recomputed share from its stages' layer counts."""
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
        return flops_per_token(
            model, ctx.seq_len, mode, rec_share, ctx.memory, ctx.options.flop_counting, vocab_
        )

    end_flops = np.where(lr.uneven, lr.end_col, 0).astype(np.int64)
    keys = [_col(c) for c in (cols.tp, cols.recompute, cols.recompute_layers, cols.pp)] + [end_flops]
    return _group_apply(field_code(*keys), keys, flops, 2)
