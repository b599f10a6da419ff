"""Replay whole published pre-training runs: total GPU-hours, reported vs what the planner's headline predicts.

For every row of a training-totals CSV (tests/data/training_totals.csv) the planner (app.core.planner.plan) searches
every layout for the row's model, GPU type and count, sequence length and global batch under the row's source rule
(framework, fabric: the training-run replay's rules, app.validation.training_runs). Its best layout's throughput
gives the compute GPU-hours, tokens / tokens-per-second × GPUs; the goodput model for that cluster
(app.services.plan_costs.plan_goodput: failures, checkpoint stalls, restarts and fail-slows) turns them into wall-clock
GPU-hours. Where the source states the layout that was run (`layout_stated`, "tp=8 pp=16 cp=1 dp=128"), the
estimator gives its GPU-hours the same way (app.validation.training_runs.estimate_row; knobs the row leaves blank
take that replay's documented defaults).

The error compares like with like: a reported figure that excludes failures and restarts (`includes_overheads`
"no", e.g. one derived from a stated throughput) is compared with the compute GPU-hours, any other with the
wall-clock ones. Error = predicted / reported − 1: negative means the planner promises fewer GPU-hours than the run
took (optimistic).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.catalog import accuracy_table
from app.core.accuracy import band_for, layer_pass_seconds, ratio_stats, totals_band
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions
from app.core.layout import RunOptions, layout_label
from app.core.model import param_counts
from app.core.planner import SearchProblem, plan
from app.core.validated_region import num_experts_of
from app.services.plan_costs import plan_goodput
from app.services.region import accept_for
from app.validation.training_runs import (
    SHAPE_COLUMNS,
    Row,
    RowSkipped,
    dtype_from_cell,
    estimate_row,
    framework_from_row_text,
    row_cluster,
    row_gpu,
    row_model,
    rule_for_row,
    twin_by_name,
)

COLUMNS = (
    "source",
    "model_name",
    "params_B",
    "active_params_B",
    "tokens_T",
    "gpu",
    "num_gpus",
    "seq_len",
    "global_batch_tokens",
    "reported_gpu_hours",
    "reported_mfu_pct",
    "layout_stated",
    "dtype",
    "includes_overheads",
    "notes",
)
OVERHEADS = ("yes", "no", "unknown")
# GPU counts a run is evaluated at when its source does not state one: powers of two from 256 to 4,096, the span of
# the stated counts of this file's runs of 7B-405B dense models (BLOOM 384, LLaMA-65B 2,048; Llama 3.1 405B's
# 16,384 is the one above). Such a row gives a range of GPU-hours, one per count, and is compared as a range: it is
# optimistic only if every count predicts more than OPTIMISTIC_PCT too few hours. It never enters the MAPE.
UNSTATED_COUNTS = (256, 512, 1024, 2048, 4096)
# a prediction this far below the reported GPU-hours counts as optimistic ("more than 10 % low", docs/validation.md)
OPTIMISTIC_PCT = 10.0
# layout_stated keys → the training-runs column each fills ("ep" goes into the notes, as training_runs.csv writes it)
LAYOUT_KEYS = {
    "tp": "tp",
    "pp": "pp",
    "cp": "cp",
    "dp": "dp",
    "vp": "interleave_v",
    "mb": "micro_batch",
    "zero": "zero_stage",
    "recompute": "recompute",
    "sp": "sequence_parallel",
    "ep": "",
}
_LAYOUT_TOKEN = re.compile(r"^([a-z]+)=([a-z0-9]+)$")


def load_rows(path: Path | str) -> list[Row]:
    """The CSV's data rows (1-based); ValueError when a required column is missing or the file is not a CSV."""
    with open(path, newline="", encoding="utf-8") as fh:
        try:
            reader = csv.DictReader(fh)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(
                    f"{path}: missing columns {', '.join(missing)}; expected the columns of training_totals.csv"
                )
            # a short row leaves None in its last cells, a long one puts the extras under None: both read as blank
            return [Row(i + 1, {k: v or "" for k, v in r.items() if k}) for i, r in enumerate(reader)]
        except csv.Error as exc:
            raise ValueError(f"{path}: not a readable CSV ({exc})") from None


def parse_layout(text: str) -> dict[str, str]:
    """`tp=8 pp=16 cp=1 dp=128` (also vp, mb, zero, recompute, sp, ep) → {key: value}; ValueError if malformed."""
    stated: dict[str, str] = {}
    for token in text.lower().replace(",", " ").split():
        match = _LAYOUT_TOKEN.match(token)
        if not match or match.group(1) not in LAYOUT_KEYS:
            raise ValueError(f"layout_stated: cannot read {token!r} (write e.g. 'tp=8 pp=16 cp=1 dp=128')")
        stated[match.group(1)] = match.group(2)
    return stated


@dataclass
class TotalsResult:
    row: int
    source: str
    model_name: str
    num_gpus: int | None
    reported_gpu_hours: float | None
    reported_mfu_pct: float | None
    includes_overheads: str
    best_layout: str | None = None
    best_mfu_pct: float | None = None
    best_compute_gpu_hours: float | None = None
    goodput: float | None = None
    best_gpu_hours: float | None = None
    compared_with: str | None = None  # "compute" or "wall-clock"
    error_pct: float | None = None
    implied_mfu_pct: float | None = (
        None  # the MFU at which the planner's best layout would take the reported hours
    )
    # the accuracy band the planner quotes beside its best layout (app.core.accuracy.band_for: the regime's 10th to
    # 90th percentile of measured / estimated step time on published runs outside the development set), applied
    # to the predicted GPU-hours, and whether the reported figure lies inside it
    band_regime: str | None = None
    band_ratio_low: float | None = None
    band_ratio_high: float | None = None
    likely_low_gpu_hours: float | None = None
    likely_high_gpu_hours: float | None = None
    in_band: bool | None = None
    # the recommendation: the fastest ranked layout inside the validated region (app.core.validated_region)
    recommended_layout: str | None = None
    recommended_gpu_hours: float | None = None
    recommended_error_pct: float | None = None
    stated_layout: str | None = None
    stated_mfu_pct: float | None = None
    stated_fits: bool | None = None
    stated_gpu_hours: float | None = None
    stated_error_pct: float | None = None
    stated_defaults: list[str] = field(default_factory=list)
    # a row without a stated GPU count: the counts of UNSTATED_COUNTS a layout fits at, and the GPU-hours and the
    # error at each (compute or wall-clock as `compared_with` says)
    range_counts: list[int] = field(default_factory=list)
    range_gpu_hours: list[float] = field(default_factory=list)
    range_error_pct: list[float] = field(default_factory=list)
    skipped: str | None = None

    @property
    def reported_over_predicted(self) -> float | None:
        """Reported ÷ predicted GPU-hours of the planner's best layout (None where either is missing)."""
        if self.reported_gpu_hours and self.best_gpu_hours:
            return self.reported_gpu_hours / self.best_gpu_hours
        return None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RunInputs:
    """What a row states about its run, checked."""

    num_gpus: int
    seq_len: int
    global_batch: int  # sequences
    tokens: float
    reported_gpu_hours: float
    layout: dict[str, str]
    # the goodput model's fail-slow slowdown for the wall-clock hours (None: its default for the node count)
    fail_slow: float | None = None


def _positive(row: Row, column: str) -> float:
    try:
        value = float(row.get(column).replace(",", ""))
    except ValueError:
        raise RowSkipped(f"{column} is blank or not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise RowSkipped(f"{column} must be a positive number")
    return value


def check_row(row: Row) -> RunInputs:
    """The row's run, or RowSkipped with the reason it cannot be evaluated."""
    if not row.get("source"):
        raise RowSkipped("no source")
    overheads = row.get("includes_overheads").lower()
    if overheads not in OVERHEADS:
        raise RowSkipped(f"includes_overheads must be yes, no or unknown, not {overheads!r}")
    reported = _positive(row, "reported_gpu_hours")
    tokens = _positive(row, "tokens_T") * 1e12
    missing = [c for c in ("layers", "hidden", "heads", "vocab") if not row.int_or(c, 0)]
    if missing and twin_by_name(row) is None:
        raise RowSkipped(
            f"model {row.get('model_name')!r} is not in the catalog and its shape columns are blank: "
            + ", ".join(missing)
        )
    num_gpus = max(0, row.int_or("num_gpus", 0) or 0)  # 0: not stated, evaluated over UNSTATED_COUNTS
    seq_len = row.int_or("seq_len", 0) or 0
    if seq_len <= 0:
        raise RowSkipped("seq_len not stated")
    batch_tokens = int(_positive(row, "global_batch_tokens"))
    if batch_tokens % seq_len:
        raise RowSkipped(
            f"global_batch_tokens {batch_tokens} is not a whole number of {seq_len}-token sequences"
        )
    layout = parse_layout(row.get("layout_stated"))
    return RunInputs(num_gpus, seq_len, batch_tokens // seq_len, tokens, reported, layout)


def replay_row(row: Row, run: RunInputs, stated: bool) -> Row:
    """The row in the columns of training_runs.csv, so that the training-run replay's readers apply: with the
    stated layout's sizes when `stated`, without them otherwise."""
    data = {column: row.get(column) for column, _ in SHAPE_COLUMNS}
    data.update(
        source=row.get("source"),
        model_name=row.get("model_name"),
        params_B=row.get("params_B"),
        seq_len=str(run.seq_len),
        gpu=row.get("gpu"),
        num_gpus=str(run.num_gpus),
        global_batch=str(run.global_batch),
        dtype=row.get("dtype"),
        notes=row.get("notes"),
    )
    if stated:
        for key, value in run.layout.items():
            if key == "ep":
                data["notes"] = f"{data['notes']} EP={value}"
            else:
                data[LAYOUT_KEYS[key]] = value
    return Row(row.index, data)


def _hours(tokens: float, tokens_per_s: float, num_gpus: int) -> float:
    """Compute GPU-hours from throughput alone (not the planner's time to train, so that goodput is applied here
    once, whatever the planner's headline includes)."""
    return tokens / tokens_per_s * num_gpus / 3600.0


def evaluate_best(row: Row, run: RunInputs, result: TotalsResult) -> tuple[float, float, float]:
    """Fill the planner's best layout; returns its compute GPU-hours, its MFU (fraction) and the model's parameter
    count (for the checkpoints of the goodput model)."""
    searched = replay_row(row, run, stated=False)
    rule = rule_for_row(searched)
    model = row_model(searched, rule)
    cluster = row_cluster(row_gpu(searched), run.num_gpus, rule)
    framework = framework_from_row_text(searched, rule.framework)
    planned = plan(
        SearchProblem(
            model,
            cluster,
            run.seq_len,
            run.global_batch,
            run=RunOptions(
                dtype=dtype_from_cell(row.get("dtype").lower()), flash_attention=rule.flash_attention
            ),
            options=EstimateOptions(framework=framework),
        ),
        tokens=run.tokens,
        top=1,
        pareto_limit=0,
    )
    best = planned.best
    if best is None:
        raise RowSkipped("no layout of this model fits on this cluster with this global batch")
    result.best_layout = layout_label(best.layout)
    result.best_mfu_pct = 100.0 * best.mfu
    layer_pass = layer_pass_seconds(
        best.step_breakdown_s, model.num_layers / best.layout.pp, best.num_microbatches
    )
    band = band_for(
        accuracy_table(),
        model,
        run.seq_len,
        float(layer_pass),
        framework.moe_dispatcher,
        cluster.gpu.compute_capability,
    )
    if band is not None:
        result.band_regime = band.regime
        result.band_ratio_low, result.band_ratio_high = band.ratio_low, band.ratio_high
    compute = _hours(run.tokens, best.tokens_per_s, run.num_gpus)
    result.best_compute_gpu_hours = compute
    inside = planned.recommend(accept_for(run.seq_len, cluster.gpus_per_node, num_experts_of(model)))
    if inside is not None:
        result.recommended_layout = layout_label(inside.layout)
        result.recommended_gpu_hours = _hours(
            run.tokens, inside.tokens_per_s, run.num_gpus
        )  # compute, for now
    return compute, float(best.mfu), float(param_counts(model).total)


def evaluate_stated(row: Row, run: RunInputs, result: TotalsResult) -> None:
    """Fill the stated layout's GPU-hours (with the same goodput as the best layout)."""
    replayed = estimate_row(replay_row(row, run, stated=True))
    est = replayed.estimate
    result.stated_defaults = list(replayed.defaults)
    layout_text = " ".join(f"{k}={v}" for k, v in run.layout.items())
    result.stated_layout = layout_text
    result.stated_mfu_pct = 100.0 * float(est.step.mfu)
    result.stated_fits = bool(est.memory.fits)
    compute = _hours(run.tokens, float(est.step.tokens_per_s), run.num_gpus)
    wall = compute / (result.goodput or 1.0)
    result.stated_gpu_hours = compute if result.compared_with == "compute" else wall
    result.stated_error_pct = 100.0 * (result.stated_gpu_hours / run.reported_gpu_hours - 1.0)


def _wall_clock(
    run: RunInputs, overheads: str, compute: float, mfu: float, params: float, gpn: int
) -> tuple[float, float]:
    """(GPU-hours compared with the reported ones, goodput): compute hours for a throughput-derived figure
    (`includes_overheads` no), wall-clock hours under the goodput model otherwise."""
    days = compute / run.num_gpus / 24.0
    goodput = float(plan_goodput(run.num_gpus, gpn, params, mfu, days, run.fail_slow).goodput)
    return (compute if overheads == "no" else compute / goodput), goodput


def evaluate_range(row: Row, run: RunInputs, result: TotalsResult) -> None:
    """Fill the range of a row without a stated GPU count: the planner's best at each of UNSTATED_COUNTS that a
    layout fits, turned into GPU-hours like a stated row's."""
    overheads = row.get("includes_overheads").lower()
    gpn = row_gpu(row).default_gpus_per_node
    for count in UNSTATED_COUNTS:
        at = replace(run, num_gpus=count)
        scratch = replace(result, num_gpus=count)
        try:
            compute, mfu, params = evaluate_best(row, at, scratch)
        except RowSkipped:
            continue  # no layout fits this count
        hours, _ = _wall_clock(at, overheads, compute, mfu, params, gpn)
        result.range_counts.append(count)
        result.range_gpu_hours.append(hours)
        result.range_error_pct.append(100.0 * (hours / run.reported_gpu_hours - 1.0))
    result.compared_with = "compute" if overheads == "no" else "wall-clock"
    if not result.range_counts:
        counts = ", ".join(f"{c:,}" for c in UNSTATED_COUNTS)
        result.skipped = f"num_gpus not stated, and no layout fits at any of {counts} GPUs"


def evaluate_row(row: Row, fail_slow: float | None = None) -> TotalsResult:
    """One row replayed; `fail_slow` replaces the goodput model's default fail-slow slowdown (a sensitivity run:
    `clusterplan validate training-totals --fail-slow`)."""
    overheads = row.get("includes_overheads").lower()
    result = TotalsResult(
        row.index,
        row.get("source"),
        row.get("model_name"),
        row.int_or("num_gpus", None),
        _float_or_none(row.get("reported_gpu_hours")),
        _float_or_none(row.get("reported_mfu_pct")),
        overheads,
    )
    try:
        run = replace(check_row(row), fail_slow=fail_slow)
        if run.num_gpus == 0:
            evaluate_range(row, run, result)
            return result
        compute, mfu, params = evaluate_best(row, run, result)
        gpus_per_node = row_gpu(row).default_gpus_per_node
        result.best_gpu_hours, result.goodput = _wall_clock(
            run, overheads, compute, mfu, params, gpus_per_node
        )
        result.compared_with = "compute" if overheads == "no" else "wall-clock"
        result.error_pct = 100.0 * (result.best_gpu_hours / run.reported_gpu_hours - 1.0)
        _apply_band(result, run.reported_gpu_hours)
        # the MFU at which this layout's prediction would equal the reported hours
        result.implied_mfu_pct = 100.0 * mfu * result.best_gpu_hours / run.reported_gpu_hours
        if result.recommended_gpu_hours is not None:
            if overheads != "no":  # the same goodput as the best layout's
                result.recommended_gpu_hours /= result.goodput
            result.recommended_error_pct = 100.0 * (
                result.recommended_gpu_hours / run.reported_gpu_hours - 1.0
            )
        if run.layout:
            evaluate_stated(row, run, result)
    except (RowSkipped, SpecError, ValueError, LookupError) as exc:
        result.skipped = str(exc)
    return result


def _apply_band(result: TotalsResult, reported: float) -> None:
    """Turn the band's step-time ratios (evaluate_best) into GPU-hours around the prediction: GPU-hours
    scale with step time at a fixed GPU count and goodput."""
    low, high, hours = result.band_ratio_low, result.band_ratio_high, result.best_gpu_hours
    if low is None or high is None or hours is None:
        return
    result.likely_low_gpu_hours = hours * low
    result.likely_high_gpu_hours = hours * high
    result.in_band = result.likely_low_gpu_hours <= reported <= result.likely_high_gpu_hours


def _float_or_none(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


@dataclass
class TotalsReport:
    rows: list[TotalsResult]

    def summary(self) -> dict[str, Any]:
        errors = [r.error_pct for r in self.rows if r.skipped is None and r.error_pct is not None]
        ranges = [r.range_error_pct for r in self.rows if r.skipped is None and r.range_error_pct]
        stated = [
            r.stated_error_pct for r in self.rows if r.skipped is None and r.stated_error_pct is not None
        ]
        return {
            "n": len(errors),
            "mape_pct": sum(abs(e) for e in errors) / len(errors) if errors else None,
            "max_abs_pct": max((abs(e) for e in errors), default=None),
            "mean_error_pct": sum(errors) / len(errors) if errors else None,
            "optimistic": sum(1 for e in errors if e < -OPTIMISTIC_PCT),
            "skipped": sum(1 for r in self.rows if r.skipped is not None),
            "recommended_mape_pct": _mape(
                [
                    r.recommended_error_pct
                    for r in self.rows
                    if r.skipped is None and r.recommended_error_pct is not None
                ]
            ),
            "recommended_optimistic": sum(
                1
                for r in self.rows
                if r.skipped is None
                and r.recommended_error_pct is not None
                and r.recommended_error_pct < -OPTIMISTIC_PCT
            ),
            "range_n": len(ranges),
            "range_optimistic": sum(1 for e in ranges if max(e) < -OPTIMISTIC_PCT),
            "range_pessimistic": sum(1 for e in ranges if min(e) > OPTIMISTIC_PCT),
            "band_n": sum(1 for r in self.rows if r.skipped is None and r.in_band is not None),
            "in_band": sum(1 for r in self.rows if r.skipped is None and r.in_band),
            "in_totals_range_loo": self.in_totals_range_loo(),
            "stated_n": len(stated),
            "stated_mape_pct": sum(abs(e) for e in stated) / len(stated) if stated else None,
        }

    def in_totals_range_loo(self) -> int:
        """How many reported figures lie inside the time-to-train range the planner quotes (app.core.accuracy
        .totals_band: the step band widened by whole runs) when that range is built from the other whole runs
        only (leave one out): the range's coverage on runs it was not built from."""
        scored = [
            (r, ratio)
            for r in self.rows
            if r.skipped is None
            and r.in_band is not None
            and (ratio := r.reported_over_predicted) is not None
        ]
        ratios = [ratio for _, ratio in scored]
        inside = 0
        for i, (r, _) in enumerate(scored):
            assert r.band_ratio_low is not None and r.band_ratio_high is not None  # set with in_band
            others = ratios[:i] + ratios[i + 1 :]
            band = totals_band({"whole_runs": ratio_stats(others)}, r.band_ratio_low, r.band_ratio_high)
            inside += band.ratio_low <= ratios[i] <= band.ratio_high
        return inside

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "summary": self.summary()}


def _mape(errors: list[float]) -> float | None:
    return sum(abs(e) for e in errors) / len(errors) if errors else None


def replay(rows: list[Row], fail_slow: float | None = None) -> TotalsReport:
    return TotalsReport([evaluate_row(r, fail_slow) for r in rows])


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render_table(report: TotalsReport) -> str:
    lines = [
        f"{'row':>3} {'model':<16} {'GPUs':>6} {'reported h':>12} {'predicted h':>12} {'error':>7}  "
        f"{'MFU best/impl/rep':<18} {'best layout':<44} stated layout (error)"
    ]
    for r in report.rows:
        head = f"{r.row:>3} {r.model_name[:16]:<16} {_num(r.num_gpus, 'd'):>6} {_num(r.reported_gpu_hours, ',.0f'):>12}"
        if r.skipped:
            lines.append(f"{head}  skipped: {r.skipped}")
            continue
        if r.range_counts:
            lines.append(f"{head}  {_range_text(r)}")
            continue
        mfu = f"{_num(r.best_mfu_pct, '.0f')}/{_num(r.implied_mfu_pct, '.0f')}/{_num(r.reported_mfu_pct, '.0f')} %"
        stated = (
            f"{r.stated_layout} ({r.stated_error_pct:+.1f} %, MFU {r.stated_mfu_pct:.0f} %"
            + ("" if r.stated_fits else ", predicted OOM")
            + ")"
            if r.stated_layout and r.stated_error_pct is not None and r.stated_mfu_pct is not None
            else "-"
        )
        lines.append(
            f"{head} {_num(r.best_gpu_hours, ',.0f'):>12} {_num(r.error_pct, '+.1f'):>6}%  {mfu:<18} "
            f"{(r.best_layout or '')[:44]:<44} {stated}"
        )
        if r.likely_low_gpu_hours is not None and r.likely_high_gpu_hours is not None:
            inside = "inside" if r.in_band else "outside"
            lines.append(
                f"{'':>3} {'':<16} {'':>6} {'':>12} {'':>12} {'':>7}  likely {r.likely_low_gpu_hours:,.0f}–"
                f"{r.likely_high_gpu_hours:,.0f} h ({r.band_regime} band): the reported figure is {inside}"
            )
        if r.recommended_layout and r.recommended_layout != r.best_layout:
            lines.append(
                f"{'':>3} {'':<16} {'':>6} {'':>12} {_num(r.recommended_gpu_hours, ',.0f'):>12} "
                f"{_num(r.recommended_error_pct, '+.1f'):>6}%  {'recommended:':<18} {r.recommended_layout}"
            )
    s = report.summary()
    lines += [
        "",
        f"n={s['n']} MAPE {_num(s['mape_pct'], '.1f')} % (mean error {_num(s['mean_error_pct'], '+.1f')} %), "
        f"max |error| {_num(s['max_abs_pct'], '.1f')} %; {s['optimistic']} of {s['n']} predicted more than "
        f"{OPTIMISTIC_PCT:.0f} % low; {s['skipped']} skipped. Error = predicted / reported − 1 (negative: optimistic).",
        f"recommended (fastest inside the validated region): MAPE {_num(s['recommended_mape_pct'], '.1f')} %, "
        f"{s['recommended_optimistic']} predicted more than {OPTIMISTIC_PCT:.0f} % low.",
        f"step-time band applied to GPU-hours: {s['in_band']} of {s['band_n']} reported figures inside it; the "
        f"time-to-train range the planner quotes (that band widened by the other whole runs, leave one out): "
        f"{s['in_totals_range_loo']} of {s['band_n']}.",
        f"GPU count not stated: {s['range_n']} rows evaluated at {', '.join(f'{c:,}' for c in UNSTATED_COUNTS)} "
        f"GPUs (outside the MAPE); {s['range_optimistic']} more than {OPTIMISTIC_PCT:.0f} % low at every count, "
        f"{s['range_pessimistic']} more than {OPTIMISTIC_PCT:.0f} % high at every count.",
    ]
    return "\n".join(lines)


def _range_text(r: TotalsResult) -> str:
    """ "count not stated: 4,800–5,100 h at 256–4,096 GPUs, error −30 … −25 %"."""
    return (
        f"count not stated: {min(r.range_gpu_hours):,.0f}–{max(r.range_gpu_hours):,.0f} h at "
        f"{r.range_counts[0]:,}–{r.range_counts[-1]:,} GPUs, error {min(r.range_error_pct):+.1f} … "
        f"{max(r.range_error_pct):+.1f} %"
    )
