"""Guard against optimism: the planner's best predicted MFU against the best MFU published for the same run kind.

Published runs come from the training-run CSVs (tests/data/training_runs*.csv, read by
app.validation.training_runs). A row counts when its metric is a speed the replay converts to MFU: `mfu_pct`,
`tflops_per_gpu`, `tokens_per_s_per_gpu` or `iter_time_s` (memory, OOM and per-layer rows are left out), and the
replay (`evaluate_row`) evaluates it. Its **measured MFU** is put on the estimator's own FLOP count and peak:

    measured MFU = estimated MFU of the row's layout × measured speed / estimated speed

where the speed ratio is measured / predicted for the rates (mfu_pct, tflops_per_gpu, tokens_per_s_per_gpu: the
replay's error is predicted / measured − 1) and predicted / measured for `iter_time_s`. So a source that quotes its
MFU against another peak or FLOP convention (an FP8 run's "BF16 MFU", Narayanan's eq. 3) is compared like with like.

Rows are grouped by model, GPU (`row_gpu`) and dtype class (16-bit for bf16 / fp16, fp8, fp4). The model is its
shape as the replay reads it (`row_model`: layers, hidden size, FFN size, query heads per KV head, MLA, experts and
top-k, the vocabulary in blocks of 1,024; `model_key`), not its name: the files spell one model several ways
("GPT-3 175B (174.6B)" and "GPT 175B", "GPT-529.6B" and "GPT 530B", "GPT-1008.0B" and "GPT 1T") and give one name
to different shapes (BigScience's "GPT 182B" is 78 layers of 13,824 or 84 of 13,312). Megatron pads a 50,257-token
vocabulary to 51,200, which the blocks of 1,024 absorb; two models of one size but different vocabularies (Llama 2
and Llama 3 70B, MPT-30B and a 32B GPT of the same width) stay apart. For each group the row with the highest measured MFU is the **published
best**; the planner (`app.core.planner.plan`) searches every layout for that row's model, cluster (GPU count,
fabric, power cap), sequence length, global batch, dtype options and framework: the framework the replay priced the
row's own layout with (`RowEstimate.framework`), so the published layout's estimate and the planner's search are
priced alike.

**Threshold.** The question is whether the planner's best beats the published best "by more than the ranking
resolution". That is the number used: `app.core.accuracy.ranking_resolution` for the best row's model and sequence
length (app/catalog/accuracy.json, `ranking`: the 80th percentile of the error in the estimated speed ratio of two
published layouts of one run; ±22.7 % for dense runs, ±67.9 % for MoE, "all kinds" where a kind has no pairs). The
planner's best is flagged when planner MFU / published MFU − 1 exceeds it. The accuracy band (`band_for`) is not
used: it measures a single estimate against its own measurement, and most of that error is shared by every layout of
a run; the claim guarded here is an ordering (the planner's layout ahead of the publisher's), which is what the
ranking resolution measures. Where the table has no resolution at all, a global 10 % relative margin
(FALLBACK_MARGIN_PCT) applies and the group says so.

**Mechanism.** The gap (planner MFU / published MFU) is the product of two factors: the layout gain the estimator
sees (planner MFU / the published layout's estimated MFU) and its error on the published layout itself (estimated /
measured MFU); the second is the point error the accuracy bands describe, the first is the planner's claim. For a
flagged group the report also compares the planner's best layout with the published one (tp, pp, vp, dp, cp, ep,
ZeRO stage, recompute, micro-batch, sequence parallelism: the knobs that differ) and the step-time breakdowns of
the two estimates (the published layout's `est.step.breakdown`, the planner's `step_breakdown_s`): the components
that shrink most.

**Evidence.** A flagged group is **backed** when another published run shows that MFU is reached on that GPU and
dtype class by a model of the same kind (dense or MoE) within EVIDENCE_SIZE_FACTOR of its parameters: the best such
run whose measured MFU the planner's MFU does not beat by more than the same threshold, named with its source. A run
on another GPU counts when that GPU is no stronger in any catalogued respect (`no_stronger_gpu`: the same peak for
the dtype class, no more HBM, HBM bandwidth, scale-up bandwidth or power): an MFU an A100-40GB reached is within
reach of an A100-80GB, whose peak is the same. Where no such run reaches it, a run on a stronger GPU of the same peak
counts at its MFU **carried** to the flagged GPU (`carried_mfu`): × the estimate of that run's own published layout
on the flagged run's GPU (its power cap included) over its estimate on the GPU it ran on, and only where that layout
fits the flagged GPU's memory. The layout is then a measured one and only the hardware difference (clock under a
power cap, HBM bandwidth) is the estimator's, the part its estimates of the flagged GPU's own published layouts
check. A backed gap says the publisher's recipe left speed that others have shown on that hardware (a newer
framework, another layout).

**Point error.** A flagged group with no evidence is the estimate's **point error** when the planner's layout gains no
more than the same threshold on the published layout's own estimate (layout ratio) and that estimate's error on the
published run (estimate ratio: measured over estimated step time) lies inside the likely range of the accuracy band
of its kind (`app.core.accuracy.band_for`: 8 in 10 published runs of that kind measured inside it, and every estimate
quotes it beside its figure). The planner then claims no layout that published recipes lack: it prices the
published layout as optimistically as its own, and the optimism is the regime's, stated with the estimate (light MoE
passes, for one, where host dispatch does not keep up with the GPU: `app.core.accuracy.MOE_LIGHT_LAYER_PASS_S`).
An **unexplained** group is neither backed nor a point error: a claim only the model makes, to be fixed or sourced.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.catalog import accuracy_table
from app.core.accuracy import band_for, estimate_layer_pass_seconds, ranking_resolution
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions
from app.core.hardware import GPUSpec
from app.core.layout import Layout, RunOptions, layout_label
from app.core.model import ModelSpec, param_counts
from app.core.planner import PlannedLayout, SearchProblem, plan
from app.core.validated_region import num_experts_of
from app.errors import NotFoundError
from app.services.region import accept_for, reasons_for
from app.validation.training_runs import (
    TIME_METRICS,
    Row,
    RowEstimate,
    RowSkipped,
    estimate_row,
    evaluate_row,
    load_rows,
    row_gpu,
    row_model,
)

REPOSITORY = Path(__file__).resolve().parents[2]
DEFAULT_FILES = tuple(
    f"tests/data/{name}.csv"
    for name in (
        "training_runs",
        "training_runs_heldout",
        "training_runs_final_check",
        "training_runs_megatron_bridge_2602_01",
        "training_runs_megatron_bridge_2604_2608",
        "training_runs_torchtitan_202412",
        "training_runs_bigscience_chronicles",
        "training_runs_vtrain_multi",
        "training_runs_nvfp4",
        "training_runs_dgxc_weak_scaling",
        "training_runs_mlperf",
        "training_runs_nemo_long_context_2504",
        "training_runs_torchtitan_202506_async_tp",
    )
)


# the speed metrics convertible to MFU (TIME_METRICS less the per-layer time, which times one layer, not a step)
RATE_METRICS = ("tflops_per_gpu", "mfu_pct", "tokens_per_s_per_gpu")
MFU_METRICS = tuple(m for m in TIME_METRICS if m in (*RATE_METRICS, "iter_time_s"))
# the relative margin used where the accuracy table has no ranking resolution
FALLBACK_MARGIN_PCT = 10.0
DTYPE_CLASSES = {"bf16": "16-bit", "fp16": "16-bit", "fp8": "fp8", "fp4": "fp4"}
# the layout knobs compared between the planner's best and the published layout, with the names printed
KNOBS = (
    ("tp", "tp"),
    ("pp", "pp"),
    ("vp", "vp"),
    ("dp", "dp"),
    ("cp", "cp"),
    ("ep", "ep"),
    ("zero", "zero"),
    ("recompute", "recompute"),
    ("recompute_layers", "recompute"),
    ("micro_batch", "micro-batch"),
    ("sequence_parallel", "sp"),
)
SAVINGS_LISTED = 2  # breakdown components named in the mechanism
# a run of a model within this factor of the flagged model's parameters (either way) may back its MFU: the GEMM
# shapes, and with them the reachable MFU, change little over a factor of 2 in size
EVIDENCE_SIZE_FACTOR = 2.0
# vocabularies are compared in blocks of this many tokens (Megatron's padding: 50,257 → 51,200)
VOCAB_BLOCK = 1024


def default_paths() -> list[Path]:
    """DEFAULT_FILES, in the repository this module is in when they are there, else relative to the working
    directory."""
    return [REPOSITORY / p if (REPOSITORY / p).is_file() else Path(p) for p in DEFAULT_FILES]


def model_key(model: ModelSpec) -> str:
    """A model as grouped: its shape ("L96 h12288 ffn49152 v50k", with GQA "… q/kv8", MLA "… mla", MoE
    "… E128x1536 top8"). The head count is left out: a layer's FLOPs do not depend on it, and BigScience's sweeps
    vary only it under one name; the query heads per KV head stay in (GQA shrinks the K and V projections)."""
    text = f"L{model.num_layers} h{model.hidden_size} ffn{model.ffn_hidden_size} v{-(-model.vocab_size // VOCAB_BLOCK)}k"
    if model.num_kv_heads and model.num_kv_heads < model.num_attention_heads:
        text += f" q/kv{model.num_attention_heads // model.num_kv_heads}"
    if model.mla is not None:
        text += " mla"
    moe = model.moe
    if moe is not None:
        text += f" E{moe.num_experts}x{moe.expert_ffn_hidden_size} top{moe.experts_per_token}"
        text += f" shared{moe.num_shared_experts}" if moe.num_shared_experts else ""
    return text


def dtype_class(dtype: str) -> str:
    """The dtype class of a compute dtype: 16-bit (bf16, fp16), fp8 or fp4."""
    return DTYPE_CLASSES.get(dtype, dtype)


def speed_ratio(metric: str, measured: float, predicted: float) -> float:
    """Measured speed / estimated speed of a row: measured / predicted for a rate, predicted / measured for
    `iter_time_s` (a time: the longer, the slower)."""
    if metric in RATE_METRICS:
        return measured / predicted
    if metric == "iter_time_s":
        return predicted / measured
    raise ValueError(f"{metric!r} does not convert to MFU")


@dataclass
class PublishedRun:
    """One replayed row whose measured MFU is known."""

    file: str
    row: Row
    metric: str
    measured_mfu_pct: float
    estimated_mfu_pct: float  # the estimate of the row's own layout
    replayed: RowEstimate
    model: ModelSpec  # the row's model as stated (the replay's may be deepened for an uneven pipeline)

    @property
    def key(self) -> tuple[str, str, str]:
        gpu = row_gpu(self.row).name
        return model_key(self.model), gpu, dtype_class(self.replayed.layout.dtype)


def published_run(row: Row, file: str) -> PublishedRun | None:
    """The row's MFU, measured and estimated; None for a row without a speed metric or one the replay skips."""
    metric = row.get("measured_metric")
    if metric not in MFU_METRICS:
        return None
    result = evaluate_row(row)
    if result.skipped is not None or not result.predicted:
        return None
    replayed = estimate_row(row, metric)
    estimated = 100.0 * float(replayed.estimate.step.mfu)
    measured = estimated * speed_ratio(metric, result.measured, result.predicted)
    return PublishedRun(file, row, metric, measured, estimated, replayed, row_model(row, replayed.rule))


def read_runs(paths: Iterable[Path | str]) -> list[PublishedRun]:
    """Every row of the files with a known MFU. A missing or malformed file raises (OSError, ValueError)."""
    runs: list[PublishedRun] = []
    for path in paths:
        name = Path(path).name
        runs += [r for r in (published_run(row, name) for row in load_rows(path)) if r is not None]
    return runs


def group_runs(runs: Iterable[PublishedRun]) -> dict[tuple[str, str, str], list[PublishedRun]]:
    """The runs by (model, GPU, dtype class), in the order first seen."""
    groups: dict[tuple[str, str, str], list[PublishedRun]] = {}
    for run in runs:
        groups.setdefault(run.key, []).append(run)
    return groups


@dataclass
class GroupResult:
    model: str  # model_key
    gpu: str
    dtype_class: str
    runs: int
    model_names: list[str]  # the names the group's rows give
    file: str
    row: int
    source: str
    model_name: str
    num_gpus: int
    seq_len: int
    global_batch: int
    published_layout: str
    published_mfu_pct: float
    published_estimated_mfu_pct: float
    planner_layout: str | None = None
    planner_mfu_pct: float | None = None
    gap_pts: float | None = None
    gap_ratio: float | None = None
    layout_ratio: float | None = None  # planner MFU / the published layout's estimated MFU
    estimate_ratio: float | None = None  # the published layout's estimated MFU / its measured MFU
    threshold_pct: float | None = None
    threshold_basis: str | None = None
    flagged: bool = False
    differs: list[str] = field(default_factory=list)
    savings_s: list[tuple[str, float]] = field(default_factory=list)
    mechanism: str | None = None
    evidence: str | None = None  # the published run backing the planner's MFU (flagged groups only)
    # a flagged gap with no evidence that is the estimate's own error on the published layout (point_error_for)
    point_error: str | None = None
    # the planner's recommendation: its fastest layout inside the validated region (app.core.validated_region),
    # the headline the builder, API and CLI show; the best itself when that is inside
    # why the planner's best is outside the region (empty: inside)
    outside_region: list[str] = field(default_factory=list)
    recommended_layout: str | None = None
    recommended_mfu_pct: float | None = None
    recommended_flagged: bool = False  # the recommendation too beats the published best beyond the threshold
    recommended_evidence: str | None = None  # backing of a flagged recommendation
    recommended_point_error: str | None = None  # a flagged recommendation's gap that is the point error
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["savings_s"] = [[name, seconds] for name, seconds in self.savings_s]
        return out


def new_result(key: tuple[str, str, str], best: PublishedRun, runs: Sequence[PublishedRun]) -> GroupResult:
    est = best.replayed.estimate
    return GroupResult(
        model=key[0],
        gpu=key[1],
        dtype_class=key[2],
        runs=len(runs),
        model_names=sorted({r.row.get("model_name") for r in runs}),
        file=best.file,
        row=best.row.index,
        source=best.row.get("source"),
        model_name=best.row.get("model_name"),
        num_gpus=best.replayed.layout.num_gpus,
        seq_len=est.seq_len,
        global_batch=best.replayed.layout.global_batch,
        published_layout=layout_label(best.replayed.layout),
        published_mfu_pct=best.measured_mfu_pct,
        published_estimated_mfu_pct=best.estimated_mfu_pct,
    )


def plan_best(run: PublishedRun) -> tuple[PlannedLayout | None, PlannedLayout | None]:
    """The planner's best layout for the run's model, cluster, sequence length, global batch and options, and its
    recommendation: its fastest layout inside the validated region (None: none fits there)."""
    replayed = run.replayed
    layout = replayed.layout
    planned = plan(
        SearchProblem(
            run.model,
            replayed.cluster,
            replayed.estimate.seq_len,
            layout.global_batch,
            run=RunOptions.of(layout),
            options=EstimateOptions(framework=replayed.framework, power_limit_w=replayed.power_limit_w),
        ),
        top=1,
        pareto_limit=0,
    )
    accept = accept_for(replayed.estimate.seq_len, replayed.cluster.gpus_per_node, num_experts_of(run.model))
    return planned.best, planned.recommend(accept)


def threshold_for(run: PublishedRun) -> tuple[float, str]:
    """The relative margin (per cent) beyond which the planner's best beats the published best, and its basis."""
    resolution = ranking_resolution(accuracy_table(), run.replayed.model, run.replayed.estimate.seq_len)
    if resolution is None:
        return FALLBACK_MARGIN_PCT, "global 10 % margin (no ranking resolution)"
    return resolution.resolution_pct, f"ranking resolution, {resolution.pairs} pairs {resolution.basis}"


def differing_knobs(published: Layout, planned: Layout) -> list[str]:
    """The knobs (KNOBS) whose values differ between two layouts, each named once."""
    names: list[str] = []
    for attr, name in KNOBS:
        if getattr(published, attr) != getattr(planned, attr) and name not in names:
            names.append(name)
    return names


def savings(published: dict[str, float], planned: dict[str, float]) -> list[tuple[str, float]]:
    """Step-time components that shrink from the published layout's estimate to the planner's best, largest
    saving first (seconds per step)."""
    shrunk = [(k, float(published[k]) - float(planned.get(k, 0.0))) for k in published]
    return sorted(((k, s) for k, s in shrunk if s > 0), key=lambda item: -item[1])


def mechanism_text(result: GroupResult) -> str:
    """ "planner: TP1 … at 70.0 % vs published 47.6 % (×1.47 = ×1.35 layout × ×1.09 estimate of the published
    layout, 52.0 %); differs in tp, zero; biggest saving: recompute −1.2 s, tp_comm −0.4 s"."""
    differs = ", ".join(result.differs) if result.differs else "nothing (same layout)"
    saved = ", ".join(f"{k} −{s:.3g} s" for k, s in result.savings_s[:SAVINGS_LISTED]) or "none"
    return (
        f"planner: {result.planner_layout} at {result.planner_mfu_pct:.1f} % vs published "
        f"{result.published_mfu_pct:.1f} % (×{result.gap_ratio:.2f} = ×{result.layout_ratio:.2f} layout × "
        f"×{result.estimate_ratio:.2f} estimate of the published layout, {result.published_estimated_mfu_pct:.1f} %); "
        f"differs in {differs}; biggest saving: {saved}"
    )


def compare(result: GroupResult, best: PublishedRun, planned: PlannedLayout) -> None:
    """Fill the planner's side of a group, the gap, the flag and (when flagged) the mechanism."""
    result.planner_layout = layout_label(planned.layout)
    result.planner_mfu_pct = 100.0 * float(planned.mfu)
    result.gap_pts = result.planner_mfu_pct - result.published_mfu_pct
    result.gap_ratio = result.planner_mfu_pct / result.published_mfu_pct
    result.layout_ratio = result.planner_mfu_pct / result.published_estimated_mfu_pct
    result.estimate_ratio = result.published_estimated_mfu_pct / result.published_mfu_pct
    result.threshold_pct, result.threshold_basis = threshold_for(best)
    result.flagged = (result.gap_ratio - 1.0) * 100.0 > result.threshold_pct
    result.differs = differing_knobs(best.replayed.layout, planned.layout)
    result.savings_s = savings(best.replayed.estimate.step.breakdown, planned.step_breakdown_s)
    if result.flagged:
        result.mechanism = mechanism_text(result)


def compare_recommended(
    result: GroupResult, best: PublishedRun, planned: PlannedLayout, recommended: PlannedLayout | None
) -> None:
    """Fill the recommendation's side of a group: why the best is outside the region, and whether the
    recommendation (the headline) still beats the published best beyond the threshold."""
    seq_len, gpn = best.replayed.estimate.seq_len, best.replayed.cluster.gpus_per_node
    result.outside_region = reasons_for(planned.layout, seq_len, gpn, num_experts_of(best.model))
    if recommended is None:
        return
    result.recommended_layout = layout_label(recommended.layout)
    result.recommended_mfu_pct = 100.0 * float(recommended.mfu)
    assert result.threshold_pct is not None
    gap = (result.recommended_mfu_pct / result.published_mfu_pct - 1.0) * 100.0
    result.recommended_flagged = gap > result.threshold_pct


def _size(run: PublishedRun) -> float:
    return float(param_counts(run.model).total)


# the peak used to compare two GPUs for each dtype class (the catalog's dense peak of that dtype)
CLASS_PEAK_DTYPE = {"16-bit": "bf16", "fp8": "fp8", "fp4": "fp4"}


def same_peak(other: GPUSpec, gpu: GPUSpec, dtype_cls: str) -> bool:
    """Whether the two GPUs list the same dense peak for the dtype class (within 1 %), so that an MFU on one is a
    rate on the other."""
    peak_key = CLASS_PEAK_DTYPE.get(dtype_cls, dtype_cls)
    peak, other_peak = gpu.peak_flops.get(peak_key, 0.0), other.peak_flops.get(peak_key, 0.0)
    return peak > 0 and abs(other_peak / peak - 1.0) <= 0.01


def no_stronger_gpu(other: GPUSpec, gpu: GPUSpec, dtype_cls: str) -> bool:
    """Whether `other` is `gpu` or a GPU no stronger than it in any catalogued respect: the same dense peak for the
    dtype class (within 1 %), and no more HBM, HBM bandwidth, scale-up bandwidth or power (TDP). An MFU reached on
    such a GPU is within reach of `gpu`: MFU is measured against the same peak, and every resource that could raise
    it is at least as large on `gpu`."""
    if other.name == gpu.name:
        return True
    if not same_peak(other, gpu, dtype_cls):
        return False
    return (
        other.hbm_bytes <= gpu.hbm_bytes
        and other.hbm_bandwidth_bytes_per_s <= gpu.hbm_bandwidth_bytes_per_s
        and other.scaleup_bandwidth_bytes_per_s <= gpu.scaleup_bandwidth_bytes_per_s
        and other.tdp_w <= gpu.tdp_w
    )


def evidence_for(
    result: GroupResult, flagged: PublishedRun, runs: Iterable[PublishedRun], mfu_pct: float | None = None
) -> str | None:
    """The best published run backing a flagged group's planner MFU (or `mfu_pct`, the recommendation's) (Evidence
    in the module docstring), as "MFU % by model (file:row, source)"; None when no run does."""
    claimed = result.planner_mfu_pct if mfu_pct is None else mfu_pct
    threshold = result.threshold_pct
    assert claimed is not None and threshold is not None
    size, moe = _size(flagged), flagged.model.moe is not None
    dtype = flagged.key[2]
    gpu = row_gpu(flagged.row)
    alike = [
        r
        for r in runs
        if r.key[2] == dtype
        and same_peak(row_gpu(r.row), gpu, dtype)
        and (r.model.moe is not None) == moe
        and 1 / EVIDENCE_SIZE_FACTOR <= _size(r) / size <= EVIDENCE_SIZE_FACTOR
    ]

    def reaches(mfu: float) -> bool:
        return (claimed / mfu - 1.0) * 100.0 <= threshold

    peers = [r for r in alike if no_stronger_gpu(row_gpu(r.row), gpu, dtype) and reaches(r.measured_mfu_pct)]
    if peers:
        best = max(peers, key=lambda r: r.measured_mfu_pct)
        other = row_gpu(best.row).name
        on = f" on {other}" if other != gpu.name else ""
        return f"{best.measured_mfu_pct:.1f} % by {best.row.get('model_name')}{on} ({_cite(best)})"
    carried = [
        (r, mfu)
        for r in alike
        if not no_stronger_gpu(row_gpu(r.row), gpu, dtype)
        and (mfu := carried_mfu(r, flagged)) is not None
        and reaches(mfu)
    ]
    if not carried:
        return None
    best, mfu = max(carried, key=lambda c: c[1])
    return (
        f"{mfu:.1f} % by {best.row.get('model_name')}, carried from {row_gpu(best.row).name} "
        f"({best.measured_mfu_pct:.1f} % measured × {mfu / best.measured_mfu_pct:.2f}, the estimate of its own "
        f"layout on {gpu.name} over that on {row_gpu(best.row).name}) ({_cite(best)})"
    )


def _cite(run: PublishedRun) -> str:
    return f"{run.file.removesuffix('.csv')}:{run.row.index}, {run.row.get('source')[:60]}"


def carried_mfu(peer: PublishedRun, flagged: PublishedRun) -> float | None:
    """The peer's measured MFU carried to the flagged run's GPU (Evidence in the module docstring): × the estimate of
    the peer's own layout on the flagged run's GPU (its gpu cell, power cap included) over its estimate on the
    peer's GPU, so that the layout is the published one and only the hardware difference is the estimator's. None
    when that layout does not fit the flagged GPU's memory or cannot be estimated there."""
    row = Row(peer.row.index, {**peer.row.data, "gpu": flagged.row.get("gpu")})
    try:
        moved = estimate_row(row, peer.metric).estimate
    except (RowSkipped, SpecError, NotFoundError, ValueError, LookupError):
        return None
    if moved.memory.most_loaded.total_bytes > moved.memory.hbm_bytes:
        return None
    return peer.measured_mfu_pct * float(moved.step.mfu) / float(peer.replayed.estimate.step.mfu)


def point_error_for(result: GroupResult, best: PublishedRun, mfu_pct: float | None = None) -> str | None:
    """Why a flagged gap with no evidence is not a layout claim (Point error in the module docstring): the planner's
    MFU (or `mfu_pct`, the recommendation's) beats the published layout's own estimate by no more than the ranking
    resolution, and that estimate's error on the published run (`estimate_ratio`, measured over estimated step time)
    lies inside the likely range the accuracy band of its kind quotes with every estimate. None otherwise."""
    claimed = result.planner_mfu_pct if mfu_pct is None else mfu_pct
    assert claimed is not None and result.threshold_pct is not None and result.estimate_ratio is not None
    layout_gain = claimed / result.published_estimated_mfu_pct
    if (layout_gain - 1.0) * 100.0 > result.threshold_pct:
        return None
    replayed = best.replayed
    est = replayed.estimate
    band = band_for(
        accuracy_table(),
        replayed.model,
        est.seq_len,
        estimate_layer_pass_seconds(est),
        replayed.framework.moe_dispatcher,
        replayed.cluster.gpu.compute_capability,
    )
    if band is None or not band.ratio_low <= result.estimate_ratio <= band.ratio_high:
        return None
    return (
        f"the planner's layout gains ×{layout_gain:.2f} on the published layout's estimate, within the "
        f"resolution; the rest, ×{result.estimate_ratio:.2f}, is the estimate's error on the published layout "
        f"itself, inside the likely range every estimate of this kind quotes ({band.ratio_low:.2f}–"
        f"{band.ratio_high:.2f} × the estimated step time, {band.runs} runs: {band.description})"
    )


def evaluate_group(key: tuple[str, str, str], runs: Sequence[PublishedRun]) -> GroupResult:
    best = max(runs, key=lambda r: r.measured_mfu_pct)
    result = new_result(key, best, runs)
    try:
        planned, recommended = plan_best(best)
    except (RowSkipped, SpecError, NotFoundError, ValueError, LookupError) as exc:
        result.skipped = f"the planner cannot search this run: {exc}"
        return result
    if planned is None:
        result.skipped = "no layout of this model fits on this cluster with this global batch"
        return result
    compare(result, best, planned)
    compare_recommended(result, best, planned, recommended)
    return result


@dataclass
class OptimismReport:
    groups: list[GroupResult]

    def summary(self) -> dict[str, Any]:
        gaps = [g.gap_pts for g in self.groups if g.gap_pts is not None]
        return {
            "n": len(gaps),
            "flagged": sum(1 for g in self.groups if g.flagged),
            "backed": sum(1 for g in self.groups if g.flagged and g.evidence),
            "point_error": sum(1 for g in self.groups if g.flagged and not g.evidence and g.point_error),
            "unexplained": sum(1 for g in self.groups if g.flagged and not g.evidence and not g.point_error),
            # the same for the recommendation, the headline (the fastest layout inside the validated region)
            "recommended_flagged": sum(1 for g in self.groups if g.recommended_flagged),
            "recommended_unexplained": sum(
                1
                for g in self.groups
                if g.recommended_flagged and not g.recommended_evidence and not g.recommended_point_error
            ),
            "median_gap_pts": statistics.median(gaps) if gaps else None,
            "skipped": sum(1 for g in self.groups if g.skipped is not None),
            "runs": sum(g.runs for g in self.groups),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [g.to_dict() for g in self.groups], "summary": self.summary()}


def _order(result: GroupResult) -> tuple[bool, float]:
    return result.gap_ratio is None, -(result.gap_ratio or 0.0)


def report(runs: Iterable[PublishedRun]) -> OptimismReport:
    """One result per group, the largest relative gap first, skipped groups last."""
    runs = list(runs)
    groups = []
    for key, members in group_runs(runs).items():
        result = evaluate_group(key, members)
        best = max(members, key=lambda r: r.measured_mfu_pct)
        if result.flagged:
            result.evidence = evidence_for(result, best, runs)
            if result.evidence is None:
                result.point_error = point_error_for(result, best)
        if result.recommended_flagged:
            result.recommended_evidence = evidence_for(result, best, runs, result.recommended_mfu_pct)
            if result.recommended_evidence is None:
                result.recommended_point_error = point_error_for(result, best, result.recommended_mfu_pct)
        groups.append(result)
    return OptimismReport(sorted(groups, key=_order))


def recommendation_text(g: GroupResult) -> str:
    """The recommendation line of a flagged group: the best itself when inside the region, else the fastest layout
    inside it, whether that too beats the published best beyond the threshold, and its backing."""
    if not g.outside_region:
        return "recommended: the planner's best (inside the validated region)"
    why = "; ".join(g.outside_region)
    if g.recommended_layout is None:
        return f"recommended: no fitting layout inside the validated region ({why})"
    assert g.recommended_mfu_pct is not None
    verdict = "beyond the resolution" if g.recommended_flagged else "within the resolution"
    backing = ""
    if g.recommended_flagged:
        backing = f"; evidence: {g.recommended_evidence or 'none'}"
        if not g.recommended_evidence and g.recommended_point_error:
            backing += f"; point error: {g.recommended_point_error}"
    return (
        f"recommended (the best is outside the validated region: {why}): {g.recommended_layout} at "
        f"{g.recommended_mfu_pct:.1f} % MFU, {g.recommended_mfu_pct - g.published_mfu_pct:+.1f} MFU points over the "
        f"published best, {verdict}{backing}"
    )


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render_table(rep: OptimismReport) -> str:
    lines = [
        f"{'model':<24} {'GPU':<14} {'dtype':<6} {'runs':>4} {'published':>9} {'planner':>8} {'gap':>7} "
        f"{'ratio':>6} {'limit':>6}  {'published best (file:row)':<40} published layout → planner's best"
    ]
    for g in rep.groups:
        head = f"{g.model_name[:24]:<24} {g.gpu[:14]:<14} {g.dtype_class:<6} {g.runs:>4} {g.published_mfu_pct:>8.1f}%"
        where = f"{g.file.removesuffix('.csv')}:{g.row}"
        if g.skipped:
            lines.append(f"{head} skipped: {g.skipped} ({where} {g.published_layout})")
            continue
        flag = "!" if g.flagged else " "
        lines.append(
            f"{head} {_num(g.planner_mfu_pct, '.1f'):>7}% {_num(g.gap_pts, '+.1f'):>7} "
            f"{_num(g.gap_ratio, '.2f'):>6} {_num(g.threshold_pct, '.0f'):>5}%{flag} {where:<40} "
            f"{g.published_layout} → {g.planner_layout}"
        )
        if g.mechanism:
            lines.append(f"{'':<24}   mechanism: {g.mechanism}")
            backing = (
                g.evidence
                or f"none: no run of a model within ×{EVIDENCE_SIZE_FACTOR:g} of its size reaches it"
            )
            lines.append(f"{'':<24}   evidence: {backing}")
            if g.point_error and not g.evidence:
                lines.append(f"{'':<24}   point error: {g.point_error}")
            lines.append(f"{'':<24}   {recommendation_text(g)}")
    s = rep.summary()
    lines += [
        "",
        f"{s['n']} groups (model, GPU, dtype class) from {s['runs']} published runs; {s['flagged']} where the "
        f"planner's best MFU beats the best published one by more than the ranking resolution (marked !), "
        f"{s['backed']} of them backed by another published run on that GPU, one no stronger or carried from one of "
        f"the same peak, {s['point_error']} "
        f"the estimate's point error inside its band (the planner's layout no better than the published one within "
        f"the resolution), {s['unexplained']} unexplained; median "
        f"gap {_num(s['median_gap_pts'], '+.1f')} MFU points; {s['skipped']} skipped.",
        f"The recommendation (the fastest layout inside the validated region, the headline) beats the published "
        f"best by more than the resolution in {s['recommended_flagged']} groups, "
        f"{s['recommended_unexplained']} of them unexplained.",
        "MFU on the estimator's FLOP count and peak: measured MFU = the published layout's estimated MFU × measured "
        "speed / estimated speed.",
    ]
    return "\n".join(lines)
