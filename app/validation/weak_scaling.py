"""Weak-scaling series: how a run's step time grows with the GPU count at a fixed workload per GPU.

Some sources measure one recipe at several GPU counts with the global batch grown in proportion, so that every
data-parallel rank does the same work at each count (NVIDIA's dgxc-benchmarking READMEs, e.g. Nemotron-4 15B on 16
to 2,048 H100 at four sequences per GPU: 2.812 → 2.887 s per step). What grows along such a series is what grows
with scale: the data-parallel collectives over more nodes, and whatever the step model leaves out (stragglers,
jitter across ranks, the fabric at depth). The replay's point errors mostly share one recipe's error; the growth
isolates the scale term, so it is reported on its own (`clusterplan validate training-runs`, the scorecard).

A series is the rows of one file that agree on every column except the GPU count, the data-parallel size, the
global batch, the measured value and the notes, and that keep the sequences per data-parallel rank (global batch /
dp) fixed. Its **growth** is the step time at the largest count over that at the smallest, minus one; for a rate
(TFLOP/s or tokens/s per GPU, MFU) the step time is its reciprocal, since the work per GPU is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.validation.repeats import configuration_key
from app.validation.training_runs import Report, Row

# columns that vary along a weak-scaling series, or describe the measurement rather than the recipe
VARYING = frozenset({"num_gpus", "dp", "global_batch", "measured_value", "notes", "params_B"})
# metrics that are times (the rest that the replay predicts are rates: time per step ∝ 1 / rate)
TIMES = ("iter_time_s", "layer_fwd_plus_bwd_ms")
RATES = ("tflops_per_gpu", "mfu_pct", "tokens_per_s_per_gpu")


@dataclass(frozen=True)
class Series:
    """One recipe at two or more GPU counts, with its measured and predicted step-time growth."""

    rows: tuple[int, ...]  # 1-based data row numbers, by GPU count
    model_name: str
    dtype: str
    metric: str
    gpus: tuple[int, ...]
    measured: tuple[float, ...]
    predicted: tuple[float, ...]

    @staticmethod
    def _growth(metric: str, values: Sequence[float]) -> float:
        first, last = values[0], values[-1]
        ratio = last / first if metric in TIMES else first / last
        return (ratio - 1.0) * 100.0

    @property
    def measured_growth_pct(self) -> float:
        return self._growth(self.metric, self.measured)

    @property
    def predicted_growth_pct(self) -> float:
        return self._growth(self.metric, self.predicted)

    @property
    def growth_error_pp(self) -> float:
        """Predicted minus measured growth, percentage points (negative: the model grows too little)."""
        return self.predicted_growth_pct - self.measured_growth_pct

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": list(self.rows),
            "model_name": self.model_name,
            "dtype": self.dtype,
            "metric": self.metric,
            "gpus": list(self.gpus),
            "measured": list(self.measured),
            "predicted": list(self.predicted),
            "measured_growth_pct": round(self.measured_growth_pct, 2),
            "predicted_growth_pct": round(self.predicted_growth_pct, 2),
            "growth_error_pp": round(self.growth_error_pp, 2),
        }


def _recipe(row: Row) -> tuple[tuple[Any, ...], int] | None:
    """The recipe a row measured (with its sequences per data-parallel rank) and its GPU count; None where a
    column it needs is not a number (such a row belongs to no series)."""
    try:
        per_rank = int(row.get("global_batch")) / int(row.get("dp"))
        gpus = int(row.get("num_gpus"))
    except (ValueError, ZeroDivisionError):
        return None
    return (configuration_key(row, VARYING), per_rank), gpus


def weak_scaling_series(rows: Sequence[Row], report: Report) -> list[Series]:
    """Series of two or more GPU counts among rows the replay predicted (`report` is `replay(rows)`), largest
    growth error first."""
    grouped: dict[tuple[Any, ...], list[tuple[int, Row, float, float]]] = {}
    for row, result in zip(rows, report.rows, strict=True):
        metric = row.get("measured_metric")
        if metric not in TIMES + RATES or result.skipped is not None or not result.predicted:
            continue
        recipe = _recipe(row)
        if recipe is not None:
            key, gpus = recipe
            grouped.setdefault(key, []).append((gpus, row, result.measured, float(result.predicted)))
    series = []
    for members in grouped.values():
        members.sort(key=lambda m: m[0])
        if len({m[0] for m in members}) < 2:
            continue
        first = members[0][1]
        series.append(
            Series(
                rows=tuple(m[1].index for m in members),
                model_name=first.get("model_name"),
                dtype=first.get("dtype"),
                metric=first.get("measured_metric"),
                gpus=tuple(m[0] for m in members),
                measured=tuple(m[2] for m in members),
                predicted=tuple(m[3] for m in members),
            )
        )
    return sorted(series, key=lambda s: -abs(s.growth_error_pp))


def summary(series: Sequence[Series]) -> dict[str, Any]:
    """Count, mean measured and predicted growth, and the mean and largest |growth error| (percentage points)."""
    if not series:
        return {"n": 0}
    errors = [abs(s.growth_error_pp) for s in series]
    return {
        "n": len(series),
        "measured_growth_pct": round(sum(s.measured_growth_pct for s in series) / len(series), 2),
        "predicted_growth_pct": round(sum(s.predicted_growth_pct for s in series) / len(series), 2),
        "mean_abs_growth_error_pp": round(sum(errors) / len(errors), 2),
        "max_abs_growth_error_pp": round(max(errors), 2),
    }


def render_series(series: Sequence[Series]) -> str:
    """Text section for the replay's report ('' when the file has no weak-scaling series)."""
    if not series:
        return ""
    s = summary(series)
    lines = [
        "",
        f"weak-scaling series: {s['n']} (one recipe at several GPU counts, same work per data-parallel rank); "
        f"step-time growth from the smallest to the largest count: measured {s['measured_growth_pct']:+.1f} %, "
        f"predicted {s['predicted_growth_pct']:+.1f} % on average; |predicted − measured| "
        f"{s['mean_abs_growth_error_pp']:.1f} pp on average, {s['max_abs_growth_error_pp']:.1f} pp at most",
    ]
    for x in series:
        lines.append(
            f"  rows {x.rows[0]}–{x.rows[-1]} {x.model_name} {x.dtype} at {x.gpus[0]:,}–{x.gpus[-1]:,} GPUs: "
            f"measured {x.measured_growth_pct:+.1f} %, predicted {x.predicted_growth_pct:+.1f} % "
            f"({x.growth_error_pp:+.1f} pp)"
        )
    return "\n".join(lines)
