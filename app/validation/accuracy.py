"""Build the accuracy bands (app/catalog/accuracy.json) by replaying published training runs.

Each time-like row (iteration time, TFLOP/s, MFU, tokens/s, layer time) of the given CSVs is replayed
(app.validation.training_runs) and turned into measured / estimated step time; the rows are grouped by the
regime of app.core.accuracy. A regime's band comes from the runs outside the development set ("unseen"); with
fewer than MIN_UNSEEN_RUNS of those it also takes the development set's runs and says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.core.accuracy import (
    BAND_PERCENTILES,
    LONG_CONTEXT_TOKENS,
    MIN_UNSEEN_RUNS,
    REGIMES,
    ratio_from_speed_error,
    ratio_stats,
)
from app.validation.training_runs import MEMORY_METRICS, TIME_METRICS, load_rows, replay, speed_error

MEMORY = "memory"  # key of the peak-memory ratios beside the regimes


def _ratios(paths: Sequence[Path]) -> tuple[dict[str, list[float]], list[dict[str, Any]]]:
    """measured ÷ estimated step time per regime, and measured ÷ estimated peak memory under "memory"."""
    by_regime: dict[str, list[float]] = {regime: [] for regime in (*REGIMES, MEMORY)}
    sources = []
    for path in paths:
        report = replay(load_rows(path))
        used = memory = 0
        for r in report.rows:
            if r.skipped is not None or r.error_pct is None:
                continue
            if r.metric in TIME_METRICS:
                by_regime[r.detail["regime"]].append(ratio_from_speed_error(speed_error(r)))
                used += 1
            elif r.metric in MEMORY_METRICS and r.predicted:
                by_regime[MEMORY].append(r.measured / r.predicted)
                memory += 1
        sources.append({"file": Path(path).name, "time_rows": used, "memory_rows": memory})
    return by_regime, sources


def _record(unseen: list[float], development: list[float]) -> dict[str, Any]:
    pooled = len(unseen) < MIN_UNSEEN_RUNS
    record = ratio_stats(unseen + (development if pooled else []))
    if record["runs"]:
        record["basis"] = (
            "pooled with the development set, too few outside it" if pooled else "outside the development set"
        )
        record["unseen"] = ratio_stats(unseen)
        record["development"] = ratio_stats(development)
    return record


def build_table(development: Sequence[Path], unseen: Sequence[Path]) -> dict[str, Any]:
    """The accuracy table: per regime, the spread of measured/estimated step time over replayed runs."""
    dev, dev_sources = _ratios(development)
    new, new_sources = _ratios(unseen)
    regimes: dict[str, Any] = {}
    for regime in REGIMES:
        record = _record(new[regime], dev[regime])
        if record["runs"]:
            regimes[regime] = record
    return {
        "about": (
            "measured / estimated step time of replayed published training runs, by kind of run, and measured / "
            "estimated peak memory per GPU; "
            "built by `clusterplan validate accuracy` (app.validation.accuracy)"
        ),
        "long_context_tokens": LONG_CONTEXT_TOKENS,
        "percentiles": list(BAND_PERCENTILES),
        "sources": {"development": dev_sources, "unseen": new_sources},
        "regimes": regimes,
        "memory": _record(new[MEMORY], dev[MEMORY]),
    }


def dumps(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=2, ensure_ascii=False) + "\n"


def render(table: dict[str, Any]) -> str:
    lo, hi = table["percentiles"]
    lines = [
        f"{'regime':<20} {'runs':>5} {'MAPE':>7} {f'p{lo:g}':>7} {'median':>7} {f'p{hi:g}':>7} "
        f"{'min':>6} {'max':>6}  basis (development set: runs, MAPE)"
    ]
    for regime, rec in table["regimes"].items():
        dev = rec["development"]
        dev_txt = f"{dev['runs']}, {dev['mape_pct']:.1f} %" if dev.get("runs") else "none"
        lines.append(
            f"{regime:<20} {rec['runs']:>5} {rec['mape_pct']:>6.1f}% {rec['ratio_low']:>7.2f} "
            f"{rec['ratio_median']:>7.2f} {rec['ratio_high']:>7.2f} {rec['ratio_min']:>6.2f} "
            f"{rec['ratio_max']:>6.2f}  {rec['basis']} ({dev_txt})"
        )
    mem = table.get("memory") or {}
    if mem.get("runs"):
        lines.append(
            f"{'memory':<20} {mem['runs']:>5} {mem['mape_pct']:>6.1f}% {mem['ratio_low']:>7.2f} "
            f"{mem['ratio_median']:>7.2f} {mem['ratio_high']:>7.2f} {mem['ratio_min']:>6.2f} "
            f"{mem['ratio_max']:>6.2f}  {mem['basis']}"
        )
    lines.append("ratio = measured / estimated (step time; peak memory per GPU on the memory line)")
    return "\n".join(lines)
