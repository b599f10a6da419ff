"""Build the accuracy bands (app/catalog/accuracy.json) by replaying published training runs.

Each time-like row (iteration time, TFLOP/s, MFU, tokens/s, layer time) of the given CSVs is replayed
(app.validation.training_runs) and turned into measured / estimated step time; the rows are grouped by the
regime of app.core.accuracy. A regime's band comes from the runs outside the development set ("unseen"); with
fewer than MIN_UNSEEN_RUNS of those it also takes the development set's runs and says so.

Beside the bands, the ranking resolution: how well the estimator compares two layouts of one run. Two published
runs are a layout comparison when they share the source, model, GPU, sequence length, dtype, GPU count, global
batch and metric and differ in at least one layout column; the comparison's error is the ratio of their two
measured/estimated ratios (what the estimator got wrong about which is faster, and by how much), folded to ≥ 1.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from app.core.accuracy import (
    BAND_PERCENTILES,
    COLLECTIVE_REGIMES,
    LONG_CONTEXT_TOKENS,
    MIN_UNSEEN_PAIRS,
    MIN_UNSEEN_RUNS,
    RANKING_FAMILY,
    RANKING_PERCENTILE,
    REGIMES,
    PlatformCaveat,
    collective_regime,
    comparison_stats,
    ratio_from_speed_error,
    ratio_stats,
)
from app.core.model import param_counts
from app.validation.training_runs import MEMORY_METRICS, TIME_METRICS, load_rows, replay, speed_error

MEMORY = "memory"  # key of the peak-memory ratios beside the regimes
# the regimes layout comparisons are grouped by (light and heavy MoE passes together)
RANKING_REGIMES = tuple(dict.fromkeys(RANKING_FAMILY.get(r, r) for r in REGIMES))
# what two published runs must share to be a comparison of layouts, and the columns a layout differs in
COMPARISON_KEY = ("source", "model_name", "gpu", "seq_len", "dtype", "num_gpus", "global_batch")
LAYOUT_COLUMNS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "zero_stage",
    "recompute",
    "sequence_parallel",
    "micro_batch",
    "interleave_v",
)


def _ratios(
    paths: Sequence[Path],
) -> tuple[dict[str, list[float]], dict[str, list[float]], list[dict[str, Any]]]:
    """measured ÷ estimated step time per regime, measured ÷ estimated peak memory under "memory", and the
    folded errors of every layout comparison per regime (module docstring)."""
    by_regime: dict[str, list[float]] = {regime: [] for regime in (*REGIMES, MEMORY)}
    comparisons: dict[str, list[float]] = {family: [] for family in RANKING_REGIMES}
    sources = []
    for path in paths:
        rows = load_rows(path)
        by_index = {row.index: row for row in rows}
        report = replay(rows)
        used = memory = 0
        groups: dict[tuple[str, ...], list[tuple[float, tuple[str, ...], str]]] = defaultdict(list)
        for r in report.rows:
            if r.skipped is not None or r.error_pct is None:
                continue
            if r.metric in TIME_METRICS:
                ratio = ratio_from_speed_error(speed_error(r))
                by_regime[r.detail["regime"]].append(ratio)
                used += 1
                row = by_index[r.row]
                key = (*(row.get(c) for c in COMPARISON_KEY), r.metric)
                groups[key].append((ratio, tuple(row.get(c) for c in LAYOUT_COLUMNS), r.detail["regime"]))
            elif r.metric in MEMORY_METRICS and r.predicted:
                by_regime[MEMORY].append(r.measured / r.predicted)
                memory += 1
        pairs = 0
        for runs in groups.values():
            for (a, layout_a, regime), (b, layout_b, _) in combinations(runs, 2):
                if layout_a != layout_b and a > 0 and b > 0:
                    comparisons[RANKING_FAMILY.get(regime, regime)].append(max(a / b, b / a))
                    pairs += 1
        sources.append(
            {"file": Path(path).name, "time_rows": used, "memory_rows": memory, "layout_pairs": pairs}
        )
    return by_regime, comparisons, sources


def platform_ratios(paths: Sequence[Path], caveat: PlatformCaveat, reference: bool = False) -> list[float]:
    """measured ÷ estimated step time of every time-like row of the given training-run CSVs that `caveat` covers
    (the evidence behind it), or with `reference` of the rows of the same kind on the generation it is compared
    with (compute capability in [reference_compute_capability, min_compute_capability))."""
    low, high = caveat.min_compute_capability, float("inf")
    if reference:
        low, high = caveat.reference_compute_capability, caveat.min_compute_capability
    ratios: list[float] = []
    for path in paths:
        for r in replay(load_rows(path)).rows:
            if r.skipped is not None or r.error_pct is None or r.metric not in TIME_METRICS:
                continue
            replayed = r.detail["replayed"]
            model = replayed.model
            if low <= replayed.cluster.gpu.compute_capability < high and caveat.covers_model(
                float(param_counts(model).total), model.moe is not None
            ):
                ratios.append(ratio_from_speed_error(speed_error(r)))
    return ratios


def regime_ratios(paths: Sequence[Path]) -> dict[str, list[float]]:
    """measured ÷ estimated step time of every time-like row of the given training-run CSVs, by regime (and peak
    memory under "memory"): what the accuracy bands are built from."""
    return _ratios(paths)[0]


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


def _regime_records(
    names: Iterable[str], unseen: Mapping[str, list[float]], development: Mapping[str, list[float]]
) -> dict[str, Any]:
    """The band record of each named regime that has runs (`_record`)."""
    records = {name: _record(unseen.get(name, []), development.get(name, [])) for name in names}
    return {name: record for name, record in records.items() if record["runs"]}


def _ranking_record(unseen: list[float], development: list[float]) -> dict[str, Any]:
    pooled = len(unseen) < MIN_UNSEEN_PAIRS and bool(development)
    record = comparison_stats(unseen + (development if pooled else []))
    if record["pairs"]:
        if pooled:
            record["basis"] = "pooled with the development set, too few outside it"
        elif len(unseen) < MIN_UNSEEN_PAIRS:
            record["basis"] = f"outside the development set, only {len(unseen)}"
        else:
            record["basis"] = "outside the development set"
        record["unseen"] = comparison_stats(unseen)
        record["development"] = comparison_stats(development)
    return record


def whole_run_ratios(paths: Sequence[Path]) -> list[float]:
    """Reported ÷ predicted GPU-hours of every whole run with a stated GPU count in the given training-totals
    CSVs (app.validation.training_totals: the planner's best layout, with goodput where the figure includes
    overheads)."""
    from app.validation.training_totals import load_rows as load_totals
    from app.validation.training_totals import replay as replay_totals

    return [
        ratio
        for path in paths
        for r in replay_totals(load_totals(path)).rows
        if r.skipped is None and (ratio := r.reported_over_predicted) is not None
    ]


def _whole_runs_record(paths: Sequence[Path]) -> dict[str, Any]:
    record = ratio_stats(whole_run_ratios(paths))
    record["about"] = (
        "reported ÷ predicted GPU-hours of whole published pre-training runs (the planner's best layout; "
        "app.validation.training_totals), which widen the time-to-train and GPU-hours ranges"
    )
    record["files"] = [p.name for p in paths]
    return record


def collective_ratios(paths: Sequence[Path]) -> dict[str, list[float]]:
    """Measured ÷ estimated time of every scored row of the given collectives CSVs (app.validation.collectives),
    by collective regime (app.core.accuracy.collective_regime)."""
    from app.validation.collectives import validate_file

    by_regime: dict[str, list[float]] = defaultdict(list)
    for path in paths:
        for r in validate_file(path).results:
            by_regime[collective_regime(r.domains, r.case.message_bytes)].append(r.time_ratio)
    return by_regime


def _collectives_record(development: Sequence[Path], unseen: Sequence[Path]) -> dict[str, Any]:
    regimes = _regime_records(COLLECTIVE_REGIMES, collective_ratios(unseen), collective_ratios(development))
    return {
        "about": (
            "measured / estimated time of published collective measurements (nccl-tests style rows; "
            "app.validation.collectives), by where the collective runs and its size"
        ),
        "files": {"development": [p.name for p in development], "unseen": [p.name for p in unseen]},
        "regimes": regimes,
    }


def build_table(
    development: Sequence[Path],
    unseen: Sequence[Path],
    comparisons: Sequence[Path] = (),
    whole_runs: Sequence[Path] = (),
    collectives: Sequence[Path] = (),
    collectives_unseen: Sequence[Path] = (),
) -> dict[str, Any]:
    """The accuracy table: per regime, the spread of measured/estimated step time over replayed runs; the spread
    of measured/estimated peak memory; per regime, the ranking resolution of layout comparisons; the spread of
    reported/predicted GPU-hours of whole runs (`whole_runs`: training-totals CSVs); and per collective regime the
    spread of measured/estimated collective time (`collectives`: the development set's collectives CSVs,
    `collectives_unseen`: held-out ones, the bands' basis).
    `comparisons`: further CSVs outside the development set used for the layout comparisons only (a layout sweep
    of one system would otherwise outweigh every other run in the bands)."""
    dev, dev_pairs, dev_sources = _ratios(development)
    new, new_pairs, new_sources = _ratios(unseen)
    _, sweep_pairs, sweep_sources = _ratios(comparisons)
    for regime, errors in sweep_pairs.items():
        new_pairs[regime].extend(errors)
    ranking: dict[str, Any] = {}
    for regime in RANKING_REGIMES:
        record = _ranking_record(new_pairs[regime], dev_pairs[regime])
        if record["pairs"]:
            ranking[regime] = record
    every = _ranking_record(
        [e for errors in new_pairs.values() for e in errors],
        [e for errors in dev_pairs.values() for e in errors],
    )
    regimes = _regime_records(REGIMES, new, dev)
    return {
        "about": (
            "measured / estimated step time of replayed published training runs, by kind of run, measured / "
            "estimated peak memory per GPU, and measured / estimated collective time of published collective "
            "measurements; built by `clusterplan validate accuracy` (app.validation.accuracy)"
        ),
        "long_context_tokens": LONG_CONTEXT_TOKENS,
        "percentiles": list(BAND_PERCENTILES),
        "sources": {
            "development": dev_sources,
            "unseen": new_sources,
            "comparisons_only": [
                {"file": x["file"], "layout_pairs": x["layout_pairs"]} for x in sweep_sources
            ],
        },
        "regimes": regimes,
        "memory": _record(new[MEMORY], dev[MEMORY]),
        "whole_runs": _whole_runs_record(whole_runs),
        "collectives": _collectives_record(collectives, collectives_unseen),
        "ranking": {
            "about": (
                "layout comparisons: pairs of published runs of one model, system, dtype, GPU count and batch that "
                "differ in layout; the folded ratio of their measured/estimated step times, in per cent"
            ),
            "percentile": RANKING_PERCENTILE,
            "regimes": ranking,
            "all": every,
        },
    }


def dumps(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=2, ensure_ascii=False) + "\n"


def _stats_row(name: str, rec: dict[str, Any], tail: str) -> str:
    """One line of the table: runs, MAPE, the 10th / 50th / 90th percentiles and extremes of a ratio record."""
    return (
        f"{name:<20} {rec['runs']:>5} {rec['mape_pct']:>6.1f}% {rec['ratio_low']:>7.2f} "
        f"{rec['ratio_median']:>7.2f} {rec['ratio_high']:>7.2f} {rec['ratio_min']:>6.2f} "
        f"{rec['ratio_max']:>6.2f}  {tail}"
    )


def render(table: dict[str, Any]) -> str:
    lo, hi = table["percentiles"]
    lines = [
        f"{'regime':<20} {'runs':>5} {'MAPE':>7} {f'p{lo:g}':>7} {'median':>7} {f'p{hi:g}':>7} "
        f"{'min':>6} {'max':>6}  basis (development set: runs, MAPE)"
    ]
    for regime, rec in table["regimes"].items():
        dev = rec["development"]
        dev_txt = f"{dev['runs']}, {dev['mape_pct']:.1f} %" if dev.get("runs") else "none"
        lines.append(_stats_row(regime, rec, f"{rec['basis']} ({dev_txt})"))
    mem = table.get("memory") or {}
    if mem.get("runs"):
        lines.append(_stats_row("memory", mem, mem["basis"]))
    ranking = table.get("ranking") or {}
    records = [*((ranking.get("regimes") or {}).items()), ("all kinds", ranking.get("all") or {})]
    for regime, rank in records:
        if rank.get("pairs"):
            lines.append(
                f"layout comparisons, {regime}: {rank['pairs']} pairs ({rank['basis']}): the estimated speed ratio "
                f"was off by a median {rank['median_pct']:.1f} %, p{ranking['percentile']:g} "
                f"{rank['resolution_pct']:.1f} %, largest {rank['max_pct']:.1f} %"
            )
    whole = table.get("whole_runs") or {}
    if whole.get("runs"):
        files = ", ".join(whole["files"])
        lines.append(_stats_row("whole runs", whole, f"reported / predicted GPU-hours ({files})"))
    for regime, rec in ((table.get("collectives") or {}).get("regimes") or {}).items():
        lines.append(_stats_row(f"collectives {regime}", rec, rec["basis"]))
    lines.append(
        "ratio = measured / estimated (step time; peak memory per GPU on the memory line; GPU-hours on the whole-runs "
        "line; collective time on the collectives lines)"
    )
    return "\n".join(lines)
