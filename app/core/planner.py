"""Layout planner: every valid parallel layout of a model on a cluster, evaluated at once, ranked.

The search space is the product of tensor (tp), pipeline (pp), interleaving (vp), context (cp) and expert (ep)
parallelism, micro-batch size, ZeRO stage (0-3), activation recompute (none / selective / full) and sequence
parallelism, with data parallelism dp = GPUs / (tp·pp·cp). The whole product is built as numpy columns; the
consistency rules of `app.core.layout.check_layout` become boolean masks, and each rejected layout is counted
under the first rule it breaks, so `enumerated = feasible + Σ rejections`. The layouts that pass are
evaluated by `app.core.planner_eval.evaluate` (the estimator's formulas on arrays), those that fit in HBM with
the requested headroom are ranked by time to train or by cost per run, and the result carries the top layouts,
the Pareto front (step time vs memory headroom vs GPU count) and the seed article's heuristic (TP inside a
node, at most 8; PP inside a rack of at most 4 nodes; DP across racks) compared with the unconstrained best.

Search-space defaults (each can be changed through `Constraints`):
* tp divides the scale-up domain (NVLink/NVSwitch island, 8 GPUs on a DGX/HGX node): Megatron-LM places TP
  ranks adjacently inside a node (Narayanan et al. 2021, arXiv 2104.04473, Sec. 3.2 "tensor model parallelism
  … within a multi-GPU server");
* cp ∈ {1, 2, 4, 8, 16} (Megatron-core context parallelism splits the sequence in 2·cp chunks);
* vp ≤ 8 interleaved chunks, micro-batch ∈ {1, 2, 4, 8, 16} sequences;
* with flash attention, selective recompute is the same layout as no recompute (FlashAttention recomputes the
  attention scores inside its backward kernel, Dao 2022 arXiv 2205.14135 Sec. 3.1), so it is enumerated only
  when flash attention is off.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from app.core.accuracy import MOE_LIGHT_LAYER_PASS_S, layer_pass_seconds
from app.core.cost import on_wall_clock
from app.core.efficiency import HardwareProfile
from app.core.errors import ProblemCollector
from app.core.estimate import Assumption, EstimateOptions
from app.core.framework import Framework
from app.core.hardware import ClusterSpec
from app.core.layout import (
    MOE_OFFLOAD_MODULES,
    MOE_RECOMPUTE_MODULES,
    OFFLOAD_MODULES,
    RECOMPUTE_MODULES,
    RESHARD_MODES,
    TRAIN_DTYPES,
    Layout,
    RunOptions,
    check_bf16_layers,
    check_module_names,
    check_precision_options,
    framework_reshard,
    layout_label,
    unsupported_dtype,
)
from app.core.model import ModelSpec
from app.core.planner_eval import (
    LAYOUT_ARRAYS,
    RECOMPUTE_CODES,
    Evaluation,
    LayoutArrays,
    evaluate,
    field_code,
)
from app.core.step import STEP_COMPONENTS

RankBy = Literal["time", "cost"]
Preset = Literal["none", "heuristic"]

# The seed article ("keep TP within a single node (max 8 GPUs), keep PP within a rack (max 4 nodes), and scale
# DP across racks"): builders-guide, section "Parallelism strategies".
HEURISTIC_MAX_TP = 8
HEURISTIC_MAX_NODES_PER_PIPELINE = 4

DEFAULT_MAX_CP = 16
DEFAULT_MAX_VP = 8
DEFAULT_MAX_MICRO_BATCH = 16
# Partial activation recompute (Megatron --recompute-method block --recompute-num-layers k): shares of a stage's
# layers tried besides "all" (Korthikanti et al. 2022, arXiv 2205.05198, Sec. 5: recompute only as many layers
# as memory requires).
PARTIAL_RECOMPUTE_SHARES = (0.25, 0.5, 0.75)
# shares of the layers whose activations go to host memory when Constraints.activation_offload is on
OFFLOAD_SHARES = (0.25, 0.5, 0.75)
# shares of the optimizer states kept on the host when Constraints.optimizer_offload is on (ZeRO 0-2)
OPTIMIZER_OFFLOAD_SHARES = (0.5, 1.0)

# Rejection reasons, in the order they are tested (a layout is counted under the first it breaks).
REJECTION_REASONS: tuple[str, ...] = (
    "gpu_count",  # tp·pp·cp does not divide the GPU count
    "tp_vs_model",  # attention heads, kv heads or FFN width not divisible by tp
    "layers_vs_pp",  # layers not divisible by pp·vp
    "interleave_needs_pp",  # vp > 1 with pp = 1
    "global_batch",  # global batch not divisible by dp·micro_batch
    "interleave_microbatches",  # interleaved schedule needs micro-batches to be a multiple of pp
    "cp_vs_seq_len",  # sequence length not divisible by 2·cp
    "ep_vs_model",  # experts not divisible by ep, or ep does not divide dp·cp (tp·cp·dp when folded)
    "sequence_parallel_needs_tp",  # SP with tp = 1
    "moe_tp_needs_sequence_parallel",  # expert parallel with tp > 1 and no SP (Megatron requires SP there)
    "constraints",  # excluded by the request's allowed values
    "heuristic_preset",  # excluded by the seed heuristic (only when the preset is on)
    "out_of_memory",  # most loaded stage above usable HBM minus the requested headroom
    "host_memory",  # offloaded activations / optimizer states above the reference system's host DRAM per GPU
    "offload_modules_need_no_full_recompute",  # fine-grained offloading with full recompute (check_layout)
    "offload_modules_exclude_layer_offload",  # fine-grained and layer offloading together (check_layout)
)


@dataclass(frozen=True)
class Constraints:
    """Optional limits on the search. Allowed-value tuples (None = every valid value)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    vp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    zero: tuple[int, ...] | None = None
    recompute: tuple[str, ...] | None = None
    sequence_parallel: tuple[bool, ...] | None = None
    tp_beyond_scaleup_domain: bool = False  # allow TP groups that span nodes
    max_cp: int = DEFAULT_MAX_CP
    max_vp: int = DEFAULT_MAX_VP
    max_micro_batch: int = DEFAULT_MAX_MICRO_BATCH
    min_headroom_bytes: float = 0.0  # free HBM required beyond the estimator's safety fraction
    partial_recompute: bool = True  # also try full recompute of 1/4, 1/2, 3/4 of each stage's layers
    # also try activation offloading of 1/4, 1/2, 3/4 of the layers (pp = 1, no recompute: Megatron-core's rules)
    activation_offload: bool = False
    # also try keeping 1/2 or all of the optimizer states on the host (Megatron-core HybridDeviceOptimizer; ZeRO 0-2)
    optimizer_offload: bool = False
    # MoE models: leave out layouts whose layer passes carry under MOE_LIGHT_LAYER_PASS_S of GPU work, where published
    # runs took up to 2× their estimate (host dispatch; app.core.accuracy)
    avoid_light_moe_passes: bool = False
    preset: Preset = "none"

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class PlannedLayout:
    rank: int
    layout: Layout
    num_gpus: int
    step_time_s: float
    step_breakdown_s: dict[str, float]
    memory_per_gpu_bytes: float  # most loaded pipeline stage
    headroom_bytes: float  # usable HBM (after the safety fraction) minus the most loaded stage
    tokens_per_s: float
    model_tflops_per_gpu: float
    mfu: float
    num_microbatches: int
    time_to_train_s: float | None  # compute time: tokens ÷ tokens per second
    cost_usd: float | None  # the wall-clock GPU-hours (compute ÷ goodput where given) × the price
    heuristic: bool  # satisfies the seed heuristic preset
    goodput: float | None = None  # the cluster's goodput at this GPU count, where the caller gave it
    wall_clock_s: float | None = None  # time to train on the wall clock: compute ÷ goodput

    def to_dict(self) -> dict[str, Any]:
        lay = self.layout
        return {
            "rank": self.rank,
            "layout": lay.to_dict(),
            "label": layout_label(lay),
            "num_gpus": self.num_gpus,
            "step_time_s": self.step_time_s,
            "step_breakdown_s": dict(self.step_breakdown_s),
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "headroom_bytes": self.headroom_bytes,
            "tokens_per_s": self.tokens_per_s,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "mfu": self.mfu,
            "num_microbatches": self.num_microbatches,
            "time_to_train_s": self.time_to_train_s,
            "cost_usd": self.cost_usd,
            "heuristic": self.heuristic,
            "goodput": self.goodput,
            "wall_clock_s": self.wall_clock_s,
        }


@dataclass(frozen=True)
class HeuristicComparison:
    """The seed heuristic's best layout against the best of the whole search."""

    heuristic_best: PlannedLayout | None
    unconstrained_best: PlannedLayout | None
    slowdown_pct: float | None  # heuristic step time over the unconstrained one, minus 1, in %
    extra_cost_usd: float | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "heuristic_best": self.heuristic_best.to_dict() if self.heuristic_best else None,
            "unconstrained_best": self.unconstrained_best.to_dict() if self.unconstrained_best else None,
            "slowdown_pct": self.slowdown_pct,
            "extra_cost_usd": self.extra_cost_usd,
            "note": self.note,
        }


@dataclass(frozen=True)
class PlanResult:
    model: str
    gpu: str
    gpu_counts: tuple[int, ...]
    seq_len: int
    global_batch: int
    tokens: float | None
    rank_by: str
    usd_per_gpu_hour: float | None
    enumerated_layouts: int
    evaluated_layouts: int
    feasible_layouts: int
    rejections: dict[str, int]
    elapsed_s: float
    best: PlannedLayout | None
    top: list[PlannedLayout]
    pareto: list[PlannedLayout]
    pareto_size: int
    top_shapes: list[PlannedLayout]  # the best layout of each distinct (tp, pp, cp, ep) shape, fastest first
    heuristic: HeuristicComparison
    constraints: Constraints
    collective_calls: int
    assumptions: list[Assumption] = field(default_factory=list)
    # the ranking and the fitting rows, kept for `recommend`
    ranking: _Ranking | None = field(default=None, repr=False, compare=False)
    fitting: np.ndarray | None = field(default=None, repr=False, compare=False)

    def recommend(self, accept: Callable[[LayoutArrays], np.ndarray]) -> PlannedLayout | None:
        """The best-ranked fitting layout `accept` takes (a test of the enumerated layouts' columns, a boolean per
        layout: the services pass the validated region's, app.core.validated_region.inside), with its rank among
        all, wherever it ranks: not only among the `top`. None where it takes no fitting layout."""
        if self.ranking is None or self.fitting is None:
            return None
        return self.ranking.best_accepted(self.fitting, accept(self.ranking.joined.rows))

    def best_heavy_moe(
        self, model: ModelSpec, accept: Callable[[LayoutArrays], np.ndarray] | None = None
    ) -> PlannedLayout | None:
        """The best-ranked fitting layout of MoE `model` (the one searched) whose layer passes carry at least
        MOE_LIGHT_LAYER_PASS_S of GPU work and that `accept` takes (as in `recommend`), at its rank among all;
        None for a dense model or where none fits."""
        if self.ranking is None or self.fitting is None or model.moe is None:
            return None
        joined = self.ranking.joined
        heavy = heavy_moe_passes(model, joined)
        return self.ranking.best_accepted(self.fitting, heavy & accept(joined.rows) if accept else heavy)

    @property
    def layouts_per_s(self) -> float:
        return self.evaluated_layouts / self.elapsed_s if self.elapsed_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "gpu_counts": list(self.gpu_counts),
            "seq_len": self.seq_len,
            "global_batch": self.global_batch,
            "tokens": self.tokens,
            "rank_by": self.rank_by,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "enumerated_layouts": self.enumerated_layouts,
            "evaluated_layouts": self.evaluated_layouts,
            "feasible_layouts": self.feasible_layouts,
            "rejections": dict(self.rejections),
            "elapsed_s": self.elapsed_s,
            "layouts_per_s": self.layouts_per_s,
            "best": self.best.to_dict() if self.best else None,
            "top": [p.to_dict() for p in self.top],
            "pareto": [p.to_dict() for p in self.pareto],
            "pareto_size": self.pareto_size,
            "top_shapes": [p.to_dict() for p in self.top_shapes],
            "heuristic": self.heuristic.to_dict(),
            "constraints": self.constraints.to_dict(),
            "collective_calls": self.collective_calls,
            "assumptions": [a.to_dict() for a in self.assumptions],
        }


# ---------------------------------------------------------------------------------------------------------------
# Enumeration
# ---------------------------------------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def cluster_for(cluster: ClusterSpec, num_gpus: int) -> ClusterSpec:
    """The same kind of cluster with `num_gpus` GPUs (whole nodes; a partial node below one node)."""
    gpn = cluster.gpus_per_node
    if num_gpus < gpn:
        return replace(
            cluster, num_nodes=1, gpus_per_node=num_gpus, name=f"1 × {num_gpus} {cluster.gpu.name}"
        )
    return replace(cluster, num_nodes=num_gpus // gpn, name=f"{num_gpus // gpn} × {gpn} {cluster.gpu.name}")


@dataclass
class _Space:
    rows: LayoutArrays  # rows that pass every structural rule and the allowed-value constraints
    enumerated: int
    rejections: dict[str, int]


def _with_copies(
    columns: dict[str, np.ndarray], index: np.ndarray, **new: np.ndarray
) -> dict[str, np.ndarray]:
    """Every column with the rows at `index` appended again (variants of existing layouts); a column named in `new`
    gets those values on the appended rows instead of the copies."""
    return {k: np.concatenate([a, new[k] if k in new else a[index]]) for k, a in columns.items()}


# the columns of the (tp, pp, cp, vp, ep, micro-batch) product, in meshgrid order
_SHAPE_COLUMNS = ("tp", "pp", "cp", "vp", "ep", "micro_batch")


def enumerate_layouts(
    model: ModelSpec,
    cluster: ClusterSpec,
    seq_len: int,
    global_batch: int,
    constraints: Constraints,
    flash_attention: bool = True,
    selective_distinct: bool = False,
) -> _Space:
    """Build the full candidate product as columns and keep the layouts `check_layout` would accept.

    `selective_distinct`: selective recompute differs from none even with flash attention (a framework whose
    selective policy is op-level checkpointing, e.g. torchtitan). The structural rules depend on (tp, pp, cp, vp,
    ep, micro-batch) only, so they are tested on that product and a rejected row counts once per (ZeRO, recompute,
    SP) combination; the surviving rows are expanded, then copied into the partial-recompute and offload variants
    the constraints ask for.
    """
    c = constraints
    selective_same = flash_attention and not selective_distinct
    inner = _inner_choices(selective_same)
    inner_size = len(inner[0])
    shapes = _shape_product(model, cluster, global_batch, c)
    counts: dict[str, int] = {}
    alive = np.ones(shapes["tp"].shape[0], dtype=bool)
    for name, bad in _shape_rejections(model, cluster.num_gpus, seq_len, global_batch, shapes):
        hit = alive & bad
        counts[name] = int(hit.sum()) * inner_size
        alive &= ~hit
    total = int(shapes["tp"].shape[0]) * inner_size
    cols = _expand_inner(shapes, np.nonzero(alive)[0], inner)
    cols["allowed"] = _allowed(cols, c, selective_same)
    for variant, wanted in (
        (_partial_recompute_copies, c.partial_recompute),
        (_activation_offload_copies, c.activation_offload),
        (_optimizer_offload_copies, c.optimizer_offload),
    ):
        copies = variant(model, cols) if wanted else None
        if copies is not None:
            index, column, values = copies
            cols = _with_copies(cols, index, **{column: values})
            total += int(index.size)
    return _Space(_checked_rows(model, cols, counts), total, counts)


def _shape_candidates(
    model: ModelSpec, cluster: ClusterSpec, global_batch: int, c: Constraints
) -> tuple[list[int], ...]:
    """The values tried for (tp, pp, cp, vp, ep, micro-batch): tp divides the scale-up domain (or the GPU count with
    `tp_beyond_scaleup_domain`), pp divides the GPU count and is at most the layers, cp and the micro-batch are powers
    of two up to their limits, ep divides the experts."""
    n_gpus = cluster.num_gpus
    if c.tp_beyond_scaleup_domain:
        tp_c = _divisors(n_gpus)
    else:
        tp_c = [d for d in _divisors(cluster.domain_gpus) if d <= n_gpus]
    pp_c = [d for d in _divisors(n_gpus) if d <= model.num_layers]
    cp_c = _powers_of_two(min(c.max_cp, n_gpus))
    vp_c = list(range(1, max(1, c.max_vp) + 1))
    ep_c = _divisors(model.moe.num_experts) if model.moe is not None else [1]
    ep_c = [e for e in ep_c if e <= n_gpus]
    mb_c = _powers_of_two(min(c.max_micro_batch, global_batch))
    return tp_c, pp_c, cp_c, vp_c, ep_c, mb_c


def _shape_product(
    model: ModelSpec, cluster: ClusterSpec, global_batch: int, c: Constraints
) -> dict[str, np.ndarray]:
    """Every (tp, pp, cp, vp, ep, micro-batch) combination as columns, with `etp` (0: the legacy mapping, expert
    tensor parallel = tp) and `dp` (GPUs / (tp·pp·cp), 0 where that does not divide)."""
    grids = np.meshgrid(
        *(np.asarray(v, dtype=np.int64) for v in _shape_candidates(model, cluster, global_batch, c)),
        indexing="ij",
    )
    cols = {k: g.reshape(-1) for k, g in zip(_SHAPE_COLUMNS, grids, strict=True)}
    cols["etp"] = np.zeros(cols["tp"].shape[0], dtype=np.int64)
    if model.moe is not None:
        # MoE parallel folding (app.core.layout): the same shapes with the expert layers at etp = 1, so ep may
        # span the attention's tensor-parallel ranks; identical to the legacy mapping when tp = 1
        fold = np.nonzero((cols["tp"] > 1) & (cols["ep"] > 1))[0]
        cols = _with_copies(cols, fold, etp=np.ones(fold.size, dtype=np.int64))
    n_gpus = cluster.num_gpus
    mp = cols["tp"] * cols["pp"] * cols["cp"]
    cols["dp"] = np.where(n_gpus % mp == 0, n_gpus // mp, 0)
    return cols


def _shape_rejections(
    model: ModelSpec, n_gpus: int, seq_len: int, global_batch: int, cols: dict[str, np.ndarray]
) -> list[tuple[str, np.ndarray]]:
    """(rejection reason, rows that break it) for the structural rules of check_layout, in REJECTION_REASONS order."""
    tp, pp, cp, vp, ep, mb = (cols[k] for k in _SHAPE_COLUMNS)
    dp, etp = cols["dp"], cols["etp"]
    kv_ok = (model.num_kv_heads % tp == 0) | (tp % model.num_kv_heads == 0) if model.mla is None else True
    reasons: list[tuple[str, np.ndarray]] = [
        ("gpu_count", n_gpus % (tp * pp * cp) != 0),
        (
            "tp_vs_model",
            (model.num_attention_heads % tp != 0) | ~np.asarray(kv_ok) | (model.ffn_hidden_size % tp != 0),
        ),
        (
            "layers_vs_pp",
            (model.num_layers % (pp * vp) != 0) & (uneven_end_layers(model.num_layers, pp, vp) == 0),
        ),
        ("interleave_needs_pp", (vp > 1) & (pp == 1)),
        ("global_batch", (dp == 0) | (global_batch % np.maximum(1, dp * mb) != 0)),
        ("interleave_microbatches", (vp > 1) & ((global_batch // np.maximum(1, dp * mb)) % pp != 0)),
        ("cp_vs_seq_len", (cp > 1) & (seq_len % (2 * cp) != 0)),
    ]
    if model.moe is not None:
        ranks = np.where(etp > 0, np.maximum(1, tp * dp * cp), np.maximum(1, dp * cp))
        reasons.append(("ep_vs_model", (model.moe.num_experts % ep != 0) | (ranks % ep != 0) | (dp == 0)))
    return reasons


def _inner_choices(selective_same: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (ZeRO stage, recompute code, SP) combination as three columns; selective recompute is left out where it
    is the same layout as none (`selective_same`, flash attention)."""
    rec_c = [0, 2] if selective_same else [0, 1, 2]
    zi, ri, si = (g.reshape(-1) for g in np.meshgrid([0, 1, 2, 3], rec_c, [0, 1], indexing="ij"))
    return zi, ri, si


def _expand_inner(
    shapes: dict[str, np.ndarray], keep: np.ndarray, inner: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> dict[str, np.ndarray]:
    """The shapes at `keep`, each repeated once per (ZeRO, recompute, SP) combination of `inner`, with the columns of
    the variants (recompute_layers, offload_layers, optimizer_offload) at their plain values."""
    rep = np.repeat(keep, len(inner[0]))
    cols = {k: a[rep] for k, a in shapes.items()}
    for name, values in zip(("zero", "recompute", "sp"), inner, strict=True):
        cols[name] = np.tile(np.asarray(values, dtype=np.int64), keep.size)
    cols["recompute_layers"] = np.zeros(rep.shape[0], dtype=np.int64)
    cols["offload_layers"] = np.zeros(rep.shape[0], dtype=np.int64)
    cols["optimizer_offload"] = np.zeros(rep.shape[0], dtype=float)
    return cols


def _allowed(cols: dict[str, np.ndarray], c: Constraints, selective_same: bool) -> np.ndarray:
    """Rows inside the constraints' allowed values (selective counts as none where they are the same layout)."""
    allowed = np.ones(cols["tp"].shape[0], dtype=bool)
    for name, values in (
        ("tp", c.tp),
        ("pp", c.pp),
        ("vp", c.vp),
        ("cp", c.cp),
        ("ep", c.ep),
        ("micro_batch", c.micro_batch),
        ("zero", c.zero),
    ):
        if values is not None:
            allowed &= np.isin(cols[name], np.asarray(values, dtype=np.int64))
    if c.recompute is not None:
        codes = [RECOMPUTE_CODES.index(r) for r in c.recompute if r in RECOMPUTE_CODES]
        if selective_same and "selective" in c.recompute:
            codes.append(0)  # selective ≡ none under flash attention
        allowed &= np.isin(cols["recompute"], np.asarray(codes, dtype=np.int64))
    if c.sequence_parallel is not None:
        sp_allowed = np.asarray([int(bool(v)) for v in c.sequence_parallel], dtype=np.int64)
        allowed &= np.isin(cols["sp"], sp_allowed)
    return allowed


_Copies = tuple[np.ndarray, str, np.ndarray] | None  # (rows copied, column set on the copies, its values)


def _partial_recompute_copies(model: ModelSpec, cols: dict[str, np.ndarray]) -> _Copies:
    """Partial recompute: copies of the full-recompute rows with k of the stage's L/pp layers recomputed, k from
    PARTIAL_RECOMPUTE_SHARES (an uneven split keeps recompute on every layer: its stages differ in depth)."""
    pp = cols["pp"]
    per_stage = model.num_layers // pp
    base = np.nonzero((cols["recompute"] == 2) & (uneven_end_layers(model.num_layers, pp, cols["vp"]) == 0))[
        0
    ]
    extra_idx, extra_rl = [], []
    for frac in PARTIAL_RECOMPUTE_SHARES:
        k_layers = np.floor(frac * per_stage[base]).astype(np.int64)
        ok = (k_layers >= 1) & (k_layers < per_stage[base])
        extra_idx.append(base[ok])
        extra_rl.append(k_layers[ok])
    e_idx = np.concatenate(extra_idx)
    e_rl = np.concatenate(extra_rl)
    # drop repeats (small stages round two shares to the same k)
    _, uniq = np.unique(e_idx * (model.num_layers + 1) + e_rl, return_index=True)
    return e_idx[uniq], "recompute_layers", e_rl[uniq]


def _activation_offload_copies(model: ModelSpec, cols: dict[str, np.ndarray]) -> _Copies:
    """Activation offloading: copies of the pp = 1, no-recompute rows with k of the L layers offloaded, k from
    OFFLOAD_SHARES (Megatron-core offloads without a pipeline and without recompute)."""
    base = np.nonzero((cols["pp"] == 1) & (cols["recompute"] == 0))[0]
    ks = sorted({int(np.floor(f * model.num_layers)) for f in OFFLOAD_SHARES} - {0})
    ks = [k for k in ks if k < model.num_layers]
    if not base.size or not ks:
        return None
    return np.repeat(base, len(ks)), "offload_layers", np.tile(np.asarray(ks, dtype=np.int64), base.size)


def _optimizer_offload_copies(model: ModelSpec, cols: dict[str, np.ndarray]) -> _Copies:
    """Optimizer offloading: copies of every ZeRO 0-2 row with each OPTIMIZER_OFFLOAD_SHARES share of the optimizer
    states on the host (`model` unused: every variant takes the same arguments)."""
    del model
    base = np.nonzero(cols["zero"] < 3)[0]
    if not base.size:
        return None
    shares = np.asarray(OPTIMIZER_OFFLOAD_SHARES, dtype=float)
    return np.repeat(base, shares.size), "optimizer_offload", np.tile(shares, base.size)


def _checked_rows(model: ModelSpec, cols: dict[str, np.ndarray], counts: dict[str, int]) -> LayoutArrays:
    """The rows that pass the sequence-parallel rules and the constraints, counting the others in `counts`."""
    tp, sp, ep = cols["tp"], cols["sp"], cols["ep"]
    sp_bad = (sp == 1) & (tp == 1)
    counts["sequence_parallel_needs_tp"] = int(sp_bad.sum())
    moe_sp_bad = ~sp_bad & (sp == 0) & (tp > 1) & (ep > 1)
    counts["moe_tp_needs_sequence_parallel"] = int(moe_sp_bad.sum())
    sp_bad = sp_bad | moe_sp_bad
    allowed = cols["allowed"]
    counts["constraints"] = int((~sp_bad & ~allowed).sum())
    idx = np.nonzero(~sp_bad & allowed)[0]
    kept = {k: cols[k][idx] for k in LAYOUT_ARRAYS if k != "end_layers"}
    return LayoutArrays(**kept, end_layers=uneven_end_layers(model.num_layers, kept["pp"], kept["vp"]))


def uneven_end_layers(num_layers: int, pp: np.ndarray, vp: np.ndarray) -> np.ndarray:
    """Layers on each end stage of the uneven split the search tries where L is not a multiple of pp·vp: the
    embedding and the LM head with its loss take one layer's slot each (Megatron-core
    --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split, which needs L + 2 to be a
    multiple of pp·vp), so the end stages hold (L + 2) / p − 1 layers and the stages between (L + 2) / p.
    0 where the split is even or no such split exists (app.core.layout.even_split_layers)."""
    pp = np.asarray(pp, dtype=np.int64)
    vp = np.asarray(vp, dtype=np.int64)
    chunks = np.maximum(1, pp * vp)
    end = (num_layers + 2) // np.maximum(1, pp) - 1
    ok = (pp >= 2) & (num_layers % chunks != 0) & ((num_layers + 2) % chunks == 0) & (end >= 1)
    return np.where(ok, end, 0).astype(np.int64)


def end_layers_of(rows: LayoutArrays, i: int) -> int | None:
    """Layout.first_stage_layers / last_stage_layers of row `i` (None for an even split)."""
    end = rows.end_layers
    return int(end[i]) if end is not None and int(end[i]) > 0 else None


def layout_at(
    rows: LayoutArrays, i: int, global_batch: int, run: RunOptions, pipeline_reshard: str = "forward"
) -> Layout:
    """Row `i` of the enumerated layouts as a Layout, with the options every layout of the search shares; a ZeRO-3
    row re-shards as the framework's pipeline schedule does (Framework.pipeline_reshard, framework_reshard)."""
    recompute = RECOMPUTE_CODES[int(rows.recompute[i])]
    reshard = framework_reshard(pipeline_reshard, int(rows.pp[i]), int(rows.zero[i]))
    return Layout(
        tp=int(rows.tp[i]),
        pp=int(rows.pp[i]),
        dp=int(rows.dp[i]),
        cp=int(rows.cp[i]),
        ep=int(rows.ep[i]),
        etp=int(rows.etp[i]) or None,
        vp=int(rows.vp[i]),
        zero=int(rows.zero[i]),
        sequence_parallel=bool(rows.sp[i]),
        recompute=recompute,  # type: ignore[arg-type]
        micro_batch=int(rows.micro_batch[i]),
        recompute_layers=int(rows.recompute_layers[i]) or None,
        offload_layers=int(rows.offload_layers[i]),
        optimizer_offload=float(rows.optimizer_offload[i]),
        first_stage_layers=end_layers_of(rows, i),
        last_stage_layers=end_layers_of(rows, i),
        global_batch=global_batch,
        reshard_after=RESHARD_MODES[reshard],  # type: ignore[arg-type]
        **run.layout_fields(recompute),
    )


def heuristic_mask(rows: LayoutArrays, gpus_per_node: int) -> np.ndarray:
    """The seed heuristic: TP inside one node (≤ 8 GPUs), one pipeline (tp·pp·cp GPUs) inside ≤ 4 nodes, no CP."""
    tp_ok = (rows.tp <= min(HEURISTIC_MAX_TP, gpus_per_node)) & (gpus_per_node % rows.tp == 0)
    pipe_ok = rows.tp * rows.pp * rows.cp <= HEURISTIC_MAX_NODES_PER_PIPELINE * gpus_per_node
    return np.asarray(tp_ok & pipe_ok & (rows.cp == 1), dtype=bool)


# ---------------------------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _Evaluated:
    """Evaluated layouts, one row each, with what ranking them needs."""

    rows: LayoutArrays
    num_gpus: np.ndarray
    ev_step: dict[str, np.ndarray]
    step_time_s: np.ndarray
    peak_bytes: np.ndarray
    margin_bytes: np.ndarray
    host_fits: np.ndarray
    mf_per_token: np.ndarray
    m: np.ndarray
    peak_flops: float
    heuristic: np.ndarray

    @classmethod
    def of(cls, rows: LayoutArrays, num_gpus: int, ev: Evaluation, heuristic: np.ndarray) -> _Evaluated:
        """The evaluation of the layouts of one cluster size."""
        return cls(
            rows=rows,
            num_gpus=np.full(len(rows), num_gpus, dtype=np.int64),
            ev_step=ev.step,
            step_time_s=ev.step_time_s,
            peak_bytes=ev.peak_bytes,
            margin_bytes=ev.margin_bytes,
            host_fits=ev.host_fits,
            mf_per_token=ev.model_flops_per_token,
            m=ev.num_microbatches,
            peak_flops=ev.peak_flops_per_gpu,
            heuristic=heuristic,
        )

    @classmethod
    def join(cls, parts: list[_Evaluated], peak_flops: float) -> _Evaluated:
        """The evaluations of every cluster size as one (`peak_flops` for none: the GPU's peak in the run's dtype)."""
        if not parts:
            empty = np.zeros(0)
            return cls(
                rows=LayoutArrays(
                    **{k: np.zeros(0, dtype=np.int64) for k in LayoutArrays.__dataclass_fields__}
                ),
                num_gpus=np.zeros(0, dtype=np.int64),
                ev_step={k: np.zeros(0) for k in STEP_COMPONENTS},
                step_time_s=empty,
                peak_bytes=empty,
                margin_bytes=empty,
                host_fits=np.zeros(0, dtype=bool),
                mf_per_token=empty,
                m=np.zeros(0, dtype=np.int64),
                peak_flops=peak_flops,
                heuristic=np.zeros(0, dtype=bool),
            )
        return cls(
            rows=LayoutArrays.concat([p.rows for p in parts]),
            num_gpus=np.concatenate([p.num_gpus for p in parts]),
            ev_step={k: np.concatenate([p.ev_step[k] for p in parts]) for k in STEP_COMPONENTS},
            step_time_s=np.concatenate([p.step_time_s for p in parts]),
            peak_bytes=np.concatenate([p.peak_bytes for p in parts]),
            margin_bytes=np.concatenate([p.margin_bytes for p in parts]),
            host_fits=np.concatenate([p.host_fits for p in parts]),
            mf_per_token=np.concatenate([p.mf_per_token for p in parts]),
            m=np.concatenate([p.m for p in parts]),
            peak_flops=parts[0].peak_flops,
            heuristic=np.concatenate([p.heuristic for p in parts]),
        )


def _check_inputs(
    s: _Search,
    cluster: ClusterSpec,
    counts: Sequence[int],
    rank_by: str,
    prices: tuple[float | None, float | None],
    top: int,
) -> None:
    """Every problem of the request at once; `prices`: (USD per GPU-hour, training tokens)."""
    usd_per_gpu_hour, tokens = prices
    seq_len, global_batch = s.seq_len, s.global_batch
    p = ProblemCollector()
    _check_run(p, s.model, cluster, s.run, s.options.framework)
    p.check(seq_len >= 1, "seq_len", f"must be ≥ 1, got {seq_len}")
    p.check(global_batch >= 1, "global_batch", f"must be ≥ 1 sequence, got {global_batch}")
    p.check(bool(counts), "gpu_counts", "give at least one cluster size")
    gpn = cluster.gpus_per_node
    for n in counts:
        p.check(
            n >= 1 and (n < gpn or n % gpn == 0),
            "gpu_counts",
            f"{n} GPUs is not a whole number of {gpn}-GPU nodes",
        )
    p.check(rank_by in ("time", "cost"), "rank_by", "must be 'time' or 'cost'")
    if rank_by == "cost":
        p.check(
            usd_per_gpu_hour is not None, "usd_per_gpu_hour", "ranking by cost needs a price per GPU-hour"
        )
        p.check(tokens is not None, "tokens", "ranking by cost per run needs the training tokens")
    if usd_per_gpu_hour is not None:
        p.check(usd_per_gpu_hour > 0, "usd_per_gpu_hour", "must be > 0")
    p.check(tokens is None or tokens > 0, "tokens", "must be > 0")
    p.check(top >= 1, "top", "must be ≥ 1")
    p.raise_if_any()


def _check_run(
    p: ProblemCollector, model: ModelSpec, cluster: ClusterSpec, run: RunOptions, framework: Framework
) -> None:
    """The run-wide options, as check_layout checks the same Layout fields."""
    dtype = run.dtype
    check_module_names(
        p, "recompute_modules", run.recompute_modules, RECOMPUTE_MODULES, MOE_RECOMPUTE_MODULES, model
    )
    check_module_names(p, "offload_modules", run.offload_modules, OFFLOAD_MODULES, MOE_OFFLOAD_MODULES, model)
    check_bf16_layers(p, model.num_layers, dtype, *run.bf16_layers)
    check_precision_options(p, dtype, None, run.fp8_param_gather, run.optimizer_moments_dtype)
    if run.fp8_param_gather:
        refusal = framework.fp8_param_gather_refusal(None)
        p.check(refusal is None, "fp8_param_gather", refusal or "")
    if run.optimizer_moments_dtype == "bf16":
        refusal = framework.precision_aware_refusal()
        p.check(refusal is None, "optimizer_moments_dtype", refusal or "")
    p.check(dtype in TRAIN_DTYPES, "dtype", f"must be one of {', '.join(TRAIN_DTYPES)}")
    refused = unsupported_dtype(cluster.gpu, dtype)
    p.check(refused is None, "dtype", refused or "")


def _sharding_rules(
    fw: Framework, fp8_param_gather: bool, moments_dtype: str
) -> list[tuple[str, Callable[[np.ndarray], np.ndarray]]]:
    """(rejection reason, ZeRO stages allowed) for the precision options searched: FP8 parameters gather through
    the distributed optimizer or FSDP in Megatron-core (zero ≥ 1) and through FSDP2 only in torchao (zero = 3,
    Framework.fp8_param_gather); bf16 moments are Megatron-core's precision-aware optimizer, which runs inside the
    distributed optimizer (zero ≥ 1)."""
    rules: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []
    if fp8_param_gather:
        fsdp_only = fw.fp8_param_gather == "fsdp"
        rules.append(("fp8_params_need_sharding", (lambda z: z == 3) if fsdp_only else (lambda z: z >= 1)))
    if moments_dtype == "bf16":
        rules.append(("bf16_moments_need_distributed_optimizer", lambda z: z >= 1))
    return rules


def _framework_rules(fw: Framework) -> list[tuple[str, Callable[[LayoutArrays], np.ndarray]]]:
    """(rejection reason, rows refused) for what the framework cannot run (Framework.zero_stages, context_parallel,
    sequence_parallel, selective_recompute, pipeline_max_zero, interleave_min_pp, uneven_pipeline_split):
    Megatron-LM of 2021-22, Megatron-DeepSpeed."""
    selective = RECOMPUTE_CODES.index("selective")
    lacks: list[tuple[str, bool, Callable[[LayoutArrays], np.ndarray]]] = [
        ("zero_stage", set(fw.zero_stages) != {0, 1, 2, 3}, lambda r: ~np.isin(r.zero, fw.zero_stages)),
        ("context_parallel", not fw.context_parallel, lambda r: r.cp > 1),
        ("sequence_parallel", not fw.sequence_parallel, lambda r: r.sp > 0),
        ("selective_recompute", not fw.selective_recompute, lambda r: r.recompute == selective),
        ("pipeline_zero", fw.pipeline_max_zero < 3, lambda r: (r.pp > 1) & (r.zero > fw.pipeline_max_zero)),
        ("interleave_pp", fw.interleave_min_pp > 2, lambda r: (r.vp > 1) & (r.pp < fw.interleave_min_pp)),
        ("uneven_pipeline_split", not fw.uneven_pipeline_split, lambda r: np.asarray(r.end_layers) > 0),
    ]
    return [(f"{name}_not_in_framework", refused) for name, lacking, refused in lacks if lacking]


def _offload_module_rules(
    offload_modules: Sequence[str],
) -> list[tuple[str, Callable[[LayoutArrays], np.ndarray]]]:
    """(rejection reason, rows refused) under fine-grained activation offloading: it works with no or selective
    recompute (a fully recomputed layer keeps only its input) and not beside layer offloading (check_layout)."""
    if not offload_modules:
        return []
    return [
        (
            "offload_modules_need_no_full_recompute",
            lambda rows: rows.recompute == RECOMPUTE_CODES.index("full"),
        ),
        ("offload_modules_exclude_layer_offload", lambda rows: rows.offload_layers > 0),
    ]


@dataclass(frozen=True)
class SearchProblem:
    """The training run a search lays out: `model` on `cluster`'s GPUs at `seq_len` tokens per sequence and
    `global_batch` sequences per step, with the options every layout shares (`run`, default RunOptions()), the
    framework's conventions and the estimate's settings (`options`, default EstimateOptions()) and a measured
    hardware profile, if any, and the goodput share of each cluster size (`goodput`: the services'
    cluster_goodput; failures, checkpoint stalls, restarts and fail-slows), where the caller wants wall-clock times and costs.
    `plan` and `size_sweep` take it."""

    model: ModelSpec
    cluster: ClusterSpec
    seq_len: int
    global_batch: int
    run: RunOptions | None = None
    options: EstimateOptions | None = None
    profile: HardwareProfile | None = None
    goodput: Mapping[int, float] | None = None


def plan(
    problem: SearchProblem,
    *,
    tokens: float | None = None,
    gpu_counts: Sequence[int] | None = None,
    constraints: Constraints | None = None,
    rank_by: RankBy = "time",
    usd_per_gpu_hour: float | None = None,
    top: int = 10,
    pareto_limit: int = 50,
) -> PlanResult:
    """Search every layout of the problem's model on its cluster (or on each of `gpu_counts` GPUs of that kind).

    `global_batch` is in sequences; `tokens` (optional) gives time to train; `usd_per_gpu_hour` gives cost per
    run. Ranking by "time" orders by time to train (step time when all sizes are equal), "cost" by cost per run.
    The problem's `goodput` (optional): the goodput share of each GPU count (the services' cluster_goodput); with
    it each ranked layout carries its wall-clock time to train and its cost is on the wall-clock GPU-hours
    (app.core.cost.on_wall_clock), as the plan headline's; a count it lacks has no cost (ranked on compute time).
    `run` (default RunOptions()): the options every layout searched shares (app.core.layout.RunOptions). Its
    `bf16_layers` (first, last): layers an fp8 / fp4 run keeps 16-bit. `fp8_param_gather`: FP8 working weights
    (Layout.fp8_param_gather); the ZeRO stages the framework cannot keep them at are rejected
    ("fp8_params_need_sharding"). `optimizer_moments_dtype` "bf16": Megatron-core's precision-aware optimizer; ZeRO 0
    is rejected ("bf16_moments_need_distributed_optimizer"). Multi-token-prediction modules are the model's
    (ModelSpec.mtp_layers). `recompute_modules`: what the selective-recompute layouts re-run
    (Layout.recompute_modules); `offload_modules`: fine-grained activation offloading (Layout.offload_modules), the
    layouts with full recompute or layer offloading rejected ("offload_modules_need_no_full_recompute",
    "offload_modules_exclude_layer_offload").
    """
    model, cluster, seq_len, global_batch = (
        problem.model,
        problem.cluster,
        problem.seq_len,
        problem.global_batch,
    )
    c = constraints or Constraints()
    opts = problem.options or EstimateOptions()
    counts = tuple(sorted({int(n) for n in (gpu_counts or [cluster.num_gpus])}))
    run = problem.run or RunOptions()
    search = _Search(model, seq_len, global_batch, c, run, opts, problem.profile)
    _check_inputs(search, cluster, counts, rank_by, (usd_per_gpu_hour, tokens), top)
    start = time.perf_counter()
    found = _search_sizes(search, cluster, counts)
    joined, rejections = found.joined, found.rejections
    fits, feasible = _feasible(model, joined, c, rejections)
    ranking = _Ranking.of(search, joined, (tokens, usd_per_gpu_hour), rank_by == "cost", problem.goodput)
    top_list = [ranking.planned(i, r + 1) for r, i in enumerate(ranking.ranked(feasible, top))]
    top_shapes = ranking.top_shapes(feasible, top)
    front = pareto_front(joined.step_time_s, joined.margin_bytes, joined.num_gpus, feasible)
    comparison = _compare(ranking.best_of(fits & joined.heuristic), ranking.best_of(fits))
    elapsed = time.perf_counter() - start
    return PlanResult(
        model=model.name,
        gpu=cluster.gpu.name,
        gpu_counts=counts,
        seq_len=seq_len,
        global_batch=global_batch,
        tokens=tokens,
        rank_by=rank_by,
        usd_per_gpu_hour=usd_per_gpu_hour,
        enumerated_layouts=found.enumerated,
        evaluated_layouts=len(joined.rows),
        feasible_layouts=int(feasible.sum()),
        rejections=rejections,
        elapsed_s=elapsed,
        best=top_list[0] if top_list else None,
        top=top_list,
        pareto=ranking.pareto(front, pareto_limit),
        pareto_size=len(front),
        top_shapes=top_shapes,
        heuristic=comparison,
        constraints=c,
        collective_calls=found.calls,
        assumptions=_assumptions(cluster, c, run.flash_attention, opts),
        ranking=ranking,
        fitting=feasible,
    )


@dataclass(frozen=True)
class _Search:
    """What every cluster size of one search shares."""

    model: ModelSpec
    seq_len: int
    global_batch: int
    constraints: Constraints
    run: RunOptions
    options: EstimateOptions
    profile: HardwareProfile | None


@dataclass(frozen=True)
class _Found:
    """Every size's evaluated layouts as one, with the counts of the whole search."""

    joined: _Evaluated
    enumerated: int
    rejections: dict[str, int]
    calls: int  # collective_time evaluations


def _search_sizes(s: _Search, cluster: ClusterSpec, counts: Sequence[int]) -> _Found:
    """Enumerate and evaluate the layouts at each GPU count; rejections counted in REJECTION_REASONS order, then the
    run-wide rules' (_sharding_rules, _offload_module_rules) in the order they first refuse a row."""
    parts: list[_Evaluated] = []
    enumerated, calls = 0, 0
    rejections = {r: 0 for r in REJECTION_REASONS}
    for n in counts:
        cl = cluster_for(cluster, n)
        searched, space_enumerated = _searched_rows(s, cl, rejections)
        enumerated += space_enumerated
        if len(searched) == 0:
            continue
        ev: Evaluation = evaluate(
            s.model, cl, searched, s.seq_len, s.global_batch, s.run, options=s.options, profile=s.profile
        )
        calls += ev.collective_calls
        parts.append(_Evaluated.of(searched, n, ev, heuristic_mask(searched, cl.gpus_per_node)))
    joined = _Evaluated.join(parts, float(cluster.gpu.peak(s.run.dtype)))
    return _Found(joined, enumerated, rejections, calls)


def _searched_rows(s: _Search, cl: ClusterSpec, rejections: dict[str, int]) -> tuple[LayoutArrays, int]:
    """The layouts of one cluster size that pass the structural and run-wide rules, and the number enumerated;
    each rejected layout counted in `rejections`."""
    run = s.run
    # selective recompute differs from none under flash attention when it re-runs more than core attention
    selective_distinct = s.options.framework.selective_policy == "op" or any(
        m != "core_attn" for m in run.recompute_modules
    )
    space = enumerate_layouts(
        s.model, cl, s.seq_len, s.global_batch, s.constraints, run.flash_attention, selective_distinct
    )
    for k, v in space.rejections.items():
        rejections[k] += v
    searched = space.rows
    for key, allowed in _sharding_rules(
        s.options.framework, run.fp8_param_gather, run.optimizer_moments_dtype
    ):
        keep = allowed(searched.zero)
        rejections[key] = rejections.get(key, 0) + int((~keep).sum())
        searched = searched.take(np.nonzero(keep)[0])
    for key, refused in [*_framework_rules(s.options.framework), *_offload_module_rules(run.offload_modules)]:
        keep = ~refused(searched)
        rejections[key] = rejections.get(key, 0) + int((~keep).sum())
        searched = searched.take(np.nonzero(keep)[0])
    return searched, space.enumerated


def heavy_moe_passes(model: ModelSpec, joined: _Evaluated) -> np.ndarray:
    """Per evaluated row: whether each layer pass carries at least MOE_LIGHT_LAYER_PASS_S of GPU work (below it
    published MoE runs took longer than estimated, app.core.accuracy); all False for a dense model."""
    if model.moe is None:
        return np.zeros(len(joined.rows), dtype=bool)
    layers = model.num_layers / joined.rows.pp
    return np.asarray(layer_pass_seconds(joined.ev_step, layers, joined.m) >= MOE_LIGHT_LAYER_PASS_S)


def _feasible(
    model: ModelSpec, joined: _Evaluated, c: Constraints, rejections: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """(rows that fit in HBM with the headroom asked and in host memory, rows feasible: those that fit and follow
    the preset); the rows refused counted in `rejections`. `avoid_light_moe_passes` narrows both."""
    hbm_fits = joined.margin_bytes >= c.min_headroom_bytes
    host_ok, heur = joined.host_fits, joined.heuristic
    fits = hbm_fits & host_ok
    if c.preset == "heuristic":
        rejections["heuristic_preset"] = int((~heur).sum())
        rejections["out_of_memory"] = int((heur & ~hbm_fits).sum())
        rejections["host_memory"] = int((heur & hbm_fits & ~host_ok).sum())
        feasible = fits & heur
    else:
        rejections["out_of_memory"] = int((~hbm_fits).sum())
        rejections["host_memory"] = int((hbm_fits & ~host_ok).sum())
        feasible = fits
    if c.avoid_light_moe_passes and model.moe is not None:
        heavy = heavy_moe_passes(model, joined)
        rejections["light_moe_pass"] = int((feasible & ~heavy).sum())
        feasible = feasible & heavy
        fits = fits & heavy  # the heuristic comparison keeps to the same rule
    return fits, feasible


def _goodput_rows(num_gpus: np.ndarray, goodput: Mapping[int, float] | None) -> np.ndarray | None:
    """The goodput share of each row's GPU count (NaN for a count `goodput` lacks); None without `goodput`."""
    if goodput is None:
        return None
    shares = np.full(num_gpus.shape, np.nan)
    for count, share in goodput.items():
        shares[num_gpus == count] = share
    return shares


@dataclass(frozen=True)
class _Ranking:
    """The evaluated layouts with their ranking score, turned into PlannedLayouts on demand."""

    search: _Search
    joined: _Evaluated
    score: np.ndarray  # cost per run when ranking by cost (with a price and tokens), else step time
    time_to_train: np.ndarray | None
    cost: np.ndarray | None
    goodput: np.ndarray | None = (
        None  # per row, where the caller gave the goodput of its GPU count (else NaN)
    )

    @classmethod
    def of(
        cls,
        s: _Search,
        joined: _Evaluated,
        tokens_price: tuple[float | None, float | None],
        by_cost: bool,
        goodput: Mapping[int, float] | None = None,
    ) -> _Ranking:
        """`tokens_price`: (training tokens, USD per GPU-hour), each optional; `goodput`: per GPU count."""
        tokens, usd_per_gpu_hour = tokens_price
        tokens_per_step = float(s.global_batch * s.seq_len)
        time_to_train = tokens / (tokens_per_step / joined.step_time_s) if tokens else None
        shares = _goodput_rows(joined.num_gpus, goodput)
        billed_share = 1.0 if shares is None else np.nan_to_num(shares, nan=1.0)  # compute time where unknown
        cost = (
            on_wall_clock(time_to_train, billed_share) * joined.num_gpus / 3600.0 * usd_per_gpu_hour
            if usd_per_gpu_hour is not None and time_to_train is not None
            else None
        )
        # time to train = tokens / (tokens per step / step time): the same order as step time, whatever the size
        score = cost if by_cost and cost is not None else joined.step_time_s
        return cls(s, joined, score, time_to_train, cost, shares)

    def planned(self, i: int, rank: int) -> PlannedLayout:
        """Row `i` as the PlannedLayout of rank `rank`."""
        j, s = self.joined, self.search
        lay = layout_at(j.rows, i, s.global_batch, s.run, s.options.framework.pipeline_reshard)
        tokens_per_step = float(s.global_batch * s.seq_len)
        t = float(j.step_time_s[i])
        g = int(j.num_gpus[i])
        mtf = tokens_per_step * float(j.mf_per_token[i]) / t / g / 1e12
        return PlannedLayout(
            rank=rank,
            layout=lay,
            num_gpus=g,
            step_time_s=t,
            step_breakdown_s={k: float(j.ev_step[k][i]) for k in STEP_COMPONENTS},
            memory_per_gpu_bytes=float(j.peak_bytes[i]),
            headroom_bytes=float(j.margin_bytes[i]),
            tokens_per_s=tokens_per_step / t,
            model_tflops_per_gpu=mtf,
            mfu=mtf * 1e12 / j.peak_flops,
            num_microbatches=int(j.m[i]),
            time_to_train_s=float(self.time_to_train[i]) if self.time_to_train is not None else None,
            cost_usd=self._cost(i),
            heuristic=bool(j.heuristic[i]),
            **self._wall_clock(i),
        )

    def _cost(self, i: int) -> float | None:
        """Row `i`'s cost per run; None without a price or tokens, or where the goodput of its GPU count was asked
        for and is unknown (it is ranked on its compute cost then, never shown as a wall-clock one)."""
        if self.cost is None or (self.goodput is not None and np.isnan(self.goodput[i])):
            return None
        return float(self.cost[i])

    def _wall_clock(self, i: int) -> dict[str, float]:
        """Row `i`'s goodput and wall-clock time to train, where both are known."""
        if self.goodput is None or np.isnan(self.goodput[i]):
            return {}
        share = float(self.goodput[i])
        out = {"goodput": share}
        if self.time_to_train is not None:
            out["wall_clock_s"] = float(on_wall_clock(self.time_to_train[i], share))
        return out

    def ranked(self, mask: np.ndarray, k: int) -> list[int]:
        """The `k` best rows of `mask` by score; ties (e.g. ZeRO-1 vs ZeRO-2 at equal time) go to more headroom,
        then fewer GPUs."""
        score, margin, num_gpus = self.score, self.joined.margin_bytes, self.joined.num_gpus
        idx = np.nonzero(mask)[0]
        if idx.size == 0:
            return []
        if idx.size > 4 * k:
            # keep the k best scores and everything tied with the k-th before the full sort
            kth = np.partition(score[idx], k - 1)[k - 1]
            idx = idx[score[idx] <= kth]
        order = np.lexsort((num_gpus[idx], -margin[idx], score[idx]))
        return [int(i) for i in idx[order[:k]]]

    def top_shapes(self, mask: np.ndarray, k: int) -> list[PlannedLayout]:
        """The best layout of each of the `k` best (GPUs, tp, pp, cp, ep) shapes among `mask` (best_per_shape)."""
        j = self.joined
        best = best_per_shape(j.rows, j.num_gpus, self.score, j.margin_bytes, mask, k)
        return [self.planned(i, r + 1) for r, i in enumerate(best)]

    def best_accepted(self, mask: np.ndarray, accepted: np.ndarray) -> PlannedLayout | None:
        """The best-ranked row of `mask` that `accepted` takes, at its rank among all of `mask` (ranked's order:
        score, then more headroom, then fewer GPUs, then enumeration order)."""
        best = self.ranked(mask & accepted, 1)
        if not best:
            return None
        i = best[0]
        score, margin, gpus = self.score, self.joined.margin_bytes, self.joined.num_gpus
        tie_gpus = (gpus < gpus[i]) | ((gpus == gpus[i]) & (np.arange(gpus.shape[0]) < i))
        tie_margin = (margin > margin[i]) | ((margin == margin[i]) & tie_gpus)
        ahead = (score < score[i]) | ((score == score[i]) & tie_margin)
        return self.planned(i, 1 + int(np.count_nonzero(ahead & mask)))

    def best_of(self, mask: np.ndarray) -> PlannedLayout | None:
        """The best row of `mask` at rank 1, or None where the mask is empty."""
        best = self.ranked(mask, 1)
        return self.planned(best[0], 1) if best else None

    def pareto(self, front: list[int], limit: int) -> list[PlannedLayout]:
        """The first `limit` points of the Pareto front, fastest first (more headroom first among equals)."""
        step_time, margin = self.joined.step_time_s, self.joined.margin_bytes
        front_sorted = sorted(front, key=lambda i: (step_time[i], -margin[i]))
        return [self.planned(i, r + 1) for r, i in enumerate(front_sorted[:limit])]


def _compare(heu: PlannedLayout | None, unc: PlannedLayout | None) -> HeuristicComparison:
    """The heuristic's best against the unconstrained best: the slowdown in step time (in time to train where
    their GPU counts differ) and the extra cost per run."""
    if unc is None:
        return HeuristicComparison(None, None, None, None, "no layout fits at all")
    if heu is None:
        return HeuristicComparison(
            None, unc, None, None, "no layout that follows the heuristic fits; the unconstrained best does"
        )
    slowdown = (heu.step_time_s / unc.step_time_s - 1.0) * 100.0 if heu.num_gpus == unc.num_gpus else None
    if heu.num_gpus != unc.num_gpus and heu.time_to_train_s and unc.time_to_train_s:
        slowdown = (heu.time_to_train_s / unc.time_to_train_s - 1.0) * 100.0
    extra = heu.cost_usd - unc.cost_usd if heu.cost_usd is not None and unc.cost_usd is not None else None
    same = heu.layout == unc.layout and heu.num_gpus == unc.num_gpus
    note = (
        "the unconstrained best already follows the heuristic"
        if same
        else f"heuristic best {layout_label(heu.layout)} vs unconstrained {layout_label(unc.layout)}"
    )
    return HeuristicComparison(heu, unc, slowdown, extra, note)


def best_per_shape(
    rows: LayoutArrays, num_gpus: np.ndarray, score: np.ndarray, margin: np.ndarray, mask: np.ndarray, k: int
) -> list[int]:
    """Indices of the best-scoring layout of each distinct (GPUs, tp, pp, cp, ep) shape, the `k` best shapes."""
    idx = np.nonzero(mask)[0]
    if idx.size == 0:
        return []
    order = idx[np.lexsort((-margin[idx], score[idx]))]
    code = field_code(num_gpus[order], rows.tp[order], rows.pp[order], rows.cp[order], rows.ep[order])
    _, first = np.unique(code, return_index=True)
    firsts = np.sort(first)[:k]  # positions in `order` are already in score order
    return [int(i) for i in order[firsts]]


def pareto_front(
    step_time: np.ndarray, headroom: np.ndarray, num_gpus: np.ndarray, mask: np.ndarray
) -> list[int]:
    """Indices not dominated in (lower step time, more headroom, fewer GPUs) among `mask`.

    Per GPU count a 2-D sweep (sort by time, keep each point with more headroom than all faster ones); then
    points of one count that a smaller-or-equal count dominates are dropped. Ties keep one representative.
    """
    candidates: list[int] = []
    for g in np.unique(num_gpus[mask]):
        idx = np.nonzero(mask & (num_gpus == g))[0]
        order = idx[np.lexsort((-headroom[idx], step_time[idx]))]
        heads = headroom[order]
        before = np.concatenate([[-math.inf], np.maximum.accumulate(heads)[:-1]])
        candidates += [int(i) for i in order[heads > before]]
    if not candidates:
        return []
    cand = np.asarray(candidates)
    t, hd, gg = step_time[cand], headroom[cand], num_gpus[cand]
    keep = []
    for j, i in enumerate(cand):
        dominated = (t <= t[j]) & (hd >= hd[j]) & (gg <= gg[j]) & ((t < t[j]) | (hd > hd[j]) | (gg < gg[j]))
        if not dominated.any():
            keep.append(int(i))
    return keep


def _assumptions(
    cluster: ClusterSpec, c: Constraints, flash: bool, opts: EstimateOptions
) -> list[Assumption]:
    """The search space and the rules the search assumed, with their sources."""
    out = [
        Assumption(
            "tensor parallel",
            f"divisors of the {cluster.domain_gpus}-GPU scale-up domain"
            if not c.tp_beyond_scaleup_domain
            else "any divisor of the GPU count",
            "",
            "Narayanan et al. 2021 (arXiv 2104.04473) Sec. 3.2: TP inside a multi-GPU server",
        ),
        Assumption("context parallel", f"1 … {c.max_cp}", "", "Megatron-core context parallelism"),
        Assumption("interleaved chunks", f"1 … {c.max_vp}", "", "Narayanan et al. 2021 Sec. 2.2.2"),
        Assumption("micro-batch", f"1 … {c.max_micro_batch}", "sequences", "powers of two"),
        Assumption(
            "memory fit",
            c.min_headroom_bytes,
            "B beyond the safety fraction",
            f"usable HBM = HBM × (1 − {opts.safety_fraction}) (app.core.memory)",
        ),
        Assumption(
            "heuristic preset",
            f"tp ≤ {HEURISTIC_MAX_TP} inside a node, tp·pp·cp ≤ {HEURISTIC_MAX_NODES_PER_PIPELINE} nodes, cp = 1",
            "",
            "seed article (builders-guide): TP within a node, PP within a rack (max 4 nodes), DP across racks",
        ),
        Assumption("framework", opts.framework.name, "", "app.core.framework presets"),
        Assumption(
            "formulas",
            "app.core.estimate on arrays",
            "",
            "app.core.planner_eval; equal to the scalar estimate (tests/core/test_planner_vectorised.py)",
        ),
    ]
    if flash:
        out.append(
            Assumption(
                "selective recompute",
                "same as none",
                "",
                "flash attention recomputes attention scores in its backward (Dao 2022, arXiv 2205.14135)",
            )
        )
    return out
