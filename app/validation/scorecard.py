"""One table of every headline accuracy figure, each beside the role of its data and its target.

A change to the estimator, the planner or the network model moves figures in nine training-run files, the
whole-run totals, the optimism guard and three collective files; `clusterplan validate scorecard` replays them all
(about 15 s) and prints one line per figure: the development set beside the files nothing was chosen on, so that a
gain on the first is never read without the second. `--json` writes the figures; `--against FILE` reads such a
file back and adds the change per figure, with "better" or "worse" where it moved by more than rounding.

The targets are those of docs/validation.md's summary table (the collective ones as docs/validation_collectives.md
states them for the development rows); the peak-memory target, which that table gives as "met", is the figure the
held-out work began from (4.5 %). A figure without a target is reported, not judged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.cli.errors import UserError

REPOSITORY = Path(__file__).resolve().parents[2]
DATA = "tests/data"
DEVELOPMENT = "development"  # the rows the constants were chosen on
HELD_OUT = "held out"  # rows nothing was chosen on
ALL_RUNS = "all runs"  # every training-run file, the development set included
MIXED = "mixed"  # a file that holds, or shares its source with, development rows
# figures are quoted, and judged against their targets, to this many decimals
QUOTED_DECIMALS = 1
# a change smaller than this (in the figure's unit) is rounding, neither better nor worse
MOVE_EPSILON = 0.05


@dataclass(frozen=True)
class Figure:
    """One headline figure. `limit` is its target (at most, or `at_least`); `n` the rows behind it."""

    key: str
    label: str
    role: str
    value: float | None
    n: int | None = None
    unit: str = "%"
    limit: float | None = None
    at_least: bool = False
    section: str = ""
    n_unit: str = "rows"  # what `n` counts: published rows, whole runs, or groups of runs

    @property
    def target_text(self) -> str:
        """ "≤ 15", "≥ 6", or "" without a target."""
        return "" if self.limit is None else ("≥ " if self.at_least else "≤ ") + f"{self.limit:g}"

    @property
    def status(self) -> str:
        """ "met", "not met" (also where a target has no value to judge), or "" where the figure has no target."""
        if self.limit is None:
            return ""
        if self.value is None:
            return "not met"  # no rows left to judge: a target cannot be met by nothing
        shown = round(self.value, QUOTED_DECIMALS)  # judged as quoted: 4.51 % is "4.5 %", within "≤ 4.5"
        ok = shown >= self.limit if self.at_least else shown <= self.limit
        return "met" if ok else "not met"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "section": self.section,
            "role": self.role,
            "value": None if self.value is None else round(self.value, 3),
            "n": self.n,
            "n_unit": self.n_unit,
            "unit": self.unit,
            "target": self.target_text or None,
            "status": self.status,
        }


def data_path(name: str) -> Path:
    """A file of tests/data in the repository this module is in, else relative to the working directory."""
    path = REPOSITORY / DATA / name
    return path if path.is_file() else Path(DATA) / name


def _run_figures() -> list[Figure]:
    """The training-run replays: development, held-out (all rows and the dense ones), final check, the rest."""
    from app.validation.training_runs import load_rows, replay

    figures: list[Figure] = []
    dev_report = replay(load_rows(data_path("training_runs.csv")))
    dev = dev_report.summary()
    outside = [
        r for r in dev_report.rows if _is_time(r) and r.error_pct is not None and abs(r.error_pct) > 10.0
    ]
    figures += [
        Figure(
            "dev.time",
            "step time MAPE",
            DEVELOPMENT,
            dev["time"]["mape_pct"],
            dev["time"]["n"],
            limit=5.0,
        ),
        Figure(
            "dev.outside10",
            "step time rows outside ±10 %",
            DEVELOPMENT,
            float(len(outside)),
            dev["time"]["n"],
            unit="rows",
            limit=0.0,
        ),
        Figure(
            "dev.memory",
            "peak memory MAPE",
            DEVELOPMENT,
            dev["memory"]["mape_pct"],
            dev["memory"]["n"],
            limit=4.5,
        ),
        Figure(
            "dev.oom",
            "out-of-memory outcomes right",
            DEVELOPMENT,
            float(dev["oom"]["correct"]),
            dev["oom"]["n"],
            unit="rows",
            limit=float(dev["oom"]["n"]),
            at_least=True,
        ),
    ]
    held = replay(load_rows(data_path("training_runs_heldout.csv")))
    summary = held.summary()
    dense = [
        abs(r.error_pct)
        for r in held.rows
        if _is_time(r) and r.error_pct is not None and str(r.detail.get("regime")).startswith("dense")
    ]
    figures += [
        Figure(
            "heldout.time",
            "held-out file: step time MAPE",
            HELD_OUT,
            summary["time"]["mape_pct"],
            summary["time"]["n"],
            limit=15.0,
        ),
        Figure(
            "heldout.dense",
            "held-out file, dense rows: step time MAPE",
            HELD_OUT,
            _mean(dense),
            len(dense),
            limit=10.0,
        ),
        Figure(
            "heldout.memory",
            "held-out file: peak memory MAPE",
            HELD_OUT,
            summary["memory"]["mape_pct"],
            summary["memory"]["n"],
        ),
    ]
    for key, name, label, role, limit in REPLAYED:
        s = replay(load_rows(data_path(name))).summary()["time"]
        figures.append(Figure(key, label, role, s["mape_pct"], s["n"], limit=limit))
    return figures


def _is_time(row: Any) -> bool:
    from app.validation.training_runs import TIME_METRICS

    return row.skipped is None and row.error_pct is not None and row.metric in TIME_METRICS


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# NVIDIA's dgxc-benchmarking recipes, most at several GPU counts with the work per GPU fixed (app.validation.
# weak_scaling): one replay gives their point errors and their growth with the GPU count
WEAK_SCALING_FILE = "training_runs_dgxc_weak_scaling.csv"
# (key, file, label, role, target MAPE or None) of the training-run files replayed whole; the roles as
# docs/validation.md's summary table gives them: vTrain's file holds 10 development rows, BigScience's sweep comes
# from the tables 26 development rows were taken from, torchtitan's December 2024 rows from the tables of 6 of them
# (3 runs, time and memory), and the NVFP4 file chose its one constant (FP4_GEMM_SHARE)
REPLAYED: tuple[tuple[str, str, str, str, float | None], ...] = (
    ("final.time", "training_runs_final_check.csv", "final check (all MoE): step time MAPE", HELD_OUT, 20.0),
    (
        "mbridge2602.time",
        "training_runs_megatron_bridge_2602_01.csv",
        "Megatron-Bridge 26.02.01: MAPE",
        HELD_OUT,
        None,
    ),
    (
        "mbridge2604.time",
        "training_runs_megatron_bridge_2604_2608.csv",
        "Megatron-Bridge 26.04-26.08: MAPE",
        HELD_OUT,
        None,
    ),
    (
        "vtrain.time",
        "training_runs_vtrain_multi.csv",
        "vTrain multi-node (10 development rows): MAPE",
        MIXED,
        None,
    ),
    (
        "bigscience.time",
        "training_runs_bigscience_chronicles.csv",
        "BigScience sweep (dev rows' tables): MAPE",
        MIXED,
        None,
    ),
    (
        "nvfp4.time",
        "training_runs_nvfp4.csv",
        "NVFP4 runs (its one constant chosen here): MAPE",
        DEVELOPMENT,
        None,
    ),
    (
        "torchtitan2412.time",
        "training_runs_torchtitan_202412.csv",
        "torchtitan's Dec 2024 tables (3 development runs' source): MAPE",
        MIXED,
        None,
    ),
    (
        "mlperf.time",
        "training_runs_mlperf.csv",
        "MLPerf Training submissions (8 to 11,616 GPUs): MAPE",
        HELD_OUT,
        None,
    ),
    (
        "nemo2504lc.time",
        "training_runs_nemo_long_context_2504.csv",
        "NeMo 25.04 long context on B200 (8K-1M tokens): MAPE",
        HELD_OUT,
        None,
    ),
    (
        "torchtitan2506.time",
        "training_runs_torchtitan_202506_async_tp.csv",
        "torchtitan's June 2025 async-TP tables (500 W H100): MAPE",
        HELD_OUT,
        None,
    ),
)
# the accuracy bands' basis: the unseen files `validate accuracy` builds app/catalog/accuracy.json from (Makefile,
# docs/validation.md), so that each band figure is the band estimates quote (tests/validation/test_scorecard.py)
BAND_FILES = (
    "training_runs_heldout.csv",
    "training_runs_final_check.csv",
    "training_runs_nemo_long_context_2504.csv",
    "training_runs_torchtitan_202506_async_tp.csv",
)
# (regime, target MAPE) of the bands the scorecard quotes
BANDS: tuple[tuple[str, float | None], ...] = (
    ("dense", None),
    ("dense-long-context", None),
    ("moe", None),
    ("moe-light", 20.0),
    ("moe-light-hybridep", None),
    ("moe-long-context", None),
)


def _band_figures() -> list[Figure]:
    from app.core.accuracy import ratio_stats
    from app.validation.accuracy import regime_ratios

    by_regime = regime_ratios([data_path(name) for name in BAND_FILES])
    figures = []
    for regime, limit in BANDS:
        stats = ratio_stats(by_regime.get(regime, []))
        figures.append(
            Figure(
                f"band.{regime}",
                f"band {regime}: speed MAPE",
                HELD_OUT,
                stats.get("mape_pct"),
                stats["runs"],
                limit=limit,
            )
        )
    return figures


def _whole_run_figures() -> list[Figure]:
    """Published GPU-hours of whole pre-training runs against the planner's headline (training_totals.csv)."""
    from app.validation.training_totals import load_rows, replay

    s = replay(load_rows(data_path("training_totals.csv"))).summary()
    n = s["n"]
    return [
        replace(f, n_unit="runs")
        for f in [
            Figure(
                "runs.best",
                "whole runs, planner's best: GPU-hours MAPE",
                HELD_OUT,
                s["mape_pct"],
                n,
                limit=15.0,
            ),
            Figure(
                "runs.optimistic",
                "whole runs predicted > 10 % low",
                HELD_OUT,
                float(s["optimistic"]),
                n,
                unit="runs",
                limit=math.floor(n / 3) if n else None,
            ),
            Figure(
                "runs.mean", "whole runs: mean error (negative: optimistic)", HELD_OUT, s["mean_error_pct"], n
            ),
            Figure(
                "runs.recommended",
                "whole runs, recommended layout: MAPE",
                HELD_OUT,
                s["recommended_mape_pct"],
                n,
            ),
            Figure(
                "runs.stated",
                "whole runs, stated layout: MAPE",
                HELD_OUT,
                s["stated_mape_pct"],
                s["stated_n"],
            ),
            Figure(
                "runs.range",
                "whole runs inside the quoted range (leave one out)",
                HELD_OUT,
                float(s["in_totals_range_loo"]),
                n,
                unit="runs",
            ),
        ]
    ]


def _optimism_figures() -> list[Figure]:
    """The optimism guard: groups where the planner's best beats the best published run with no named cause."""
    from app.validation.optimism import default_paths, read_runs, report

    s = report(read_runs(default_paths())).summary()
    return [
        replace(f, n_unit="groups")
        for f in [
            Figure(
                "optimism.flagged",
                "optimism guard: groups flagged",
                ALL_RUNS,
                float(s["flagged"]),
                s["n"],
                unit="groups",
            ),
            Figure(
                "optimism.point_error",
                "optimism guard: flagged, the estimate's own error",
                ALL_RUNS,
                float(s["point_error"]),
                s["n"],
                unit="groups",
            ),
            Figure(
                "optimism.unexplained",
                "optimism guard: flagged with no mechanism",
                ALL_RUNS,
                float(s["unexplained"]),
                s["n"],
                unit="groups",
                limit=0.0,
            ),
        ]
    ]


def _weak_scaling_figures() -> list[Figure]:
    """NVIDIA's benchmark recipes: their step-time MAPE, and how the step time grows along their weak-scaling
    series, measured against predicted (percentage points)."""
    from app.validation.training_runs import load_rows, replay
    from app.validation.weak_scaling import summary, weak_scaling_series

    rows = load_rows(data_path(WEAK_SCALING_FILE))
    report = replay(rows)
    time = report.summary()["time"]
    series = weak_scaling_series(rows, report)
    s = summary(series)
    signed = [x.growth_error_pp for x in series]
    return [
        Figure(
            "weak.time",
            "NVIDIA benchmark recipes (H100 and GB200): MAPE",
            HELD_OUT,
            time["mape_pct"],
            time["n"],
        )
    ] + [
        replace(f, n_unit="series")
        for f in [
            Figure(
                "weak.growth",
                "weak scaling: |growth predicted − measured|",
                HELD_OUT,
                s.get("mean_abs_growth_error_pp"),
                s["n"],
                unit="pp",
            ),
            Figure(
                "weak.growth.signed",
                "weak scaling: mean growth error (− too little)",
                HELD_OUT,
                _mean(signed),
                s["n"],
                unit="pp",
            ),
        ]
    ]


# (key prefix, file, role) of the collective measurements
COLLECTIVE_FILES = (
    ("coll.dev", "network/collectives.csv", DEVELOPMENT),
    ("coll.heldout", "network/collectives_heldout.csv", HELD_OUT),
    ("coll.sweeps", "network/collectives_heldout_sweeps.csv", HELD_OUT),
    ("coll.azure", "network/collectives_heldout_azure.csv", HELD_OUT),
)
# targets of the development set's collective errors (docs/network.md, "Collectives"): (size class, statistic)
COLLECTIVE_TARGETS: Mapping[tuple[str, str], float] = {
    ("all", "p90_abs_pct"): 25.0,
    ("small", "median_abs_pct"): 15.0,
    ("small", "p90_abs_pct"): 35.0,
    ("large", "median_abs_pct"): 5.0,
    ("large", "p90_abs_pct"): 20.0,
}
SIZE_LABELS = {"all": "all sizes", "small": "< 64 MiB", "large": "≥ 64 MiB"}
STAT_LABELS = {"median_abs_pct": "median", "p90_abs_pct": "p90"}


def _collective_figures() -> list[Figure]:
    from app.validation.collectives import validate_file

    figures = []
    for prefix, name, role in COLLECTIVE_FILES:
        summary = validate_file(data_path(name)).to_json()["summary"]
        for size, size_label in SIZE_LABELS.items():
            for stat, stat_label in STAT_LABELS.items():
                key = f"{prefix}.{size}.{stat_label}"
                label = f"collectives {prefix.split('.')[1]}, {size_label}: {stat_label} |error|"
                limit = COLLECTIVE_TARGETS.get((size, stat)) if role == DEVELOPMENT else None
                value, n = summary[size][stat], summary[size]["n"]
                figures.append(Figure(key, label, role, value, n, limit=limit))
    return figures


SECTIONS: tuple[tuple[str, Callable[[], list[Figure]]], ...] = (
    ("training runs: step time and memory", _run_figures),
    ("accuracy bands (the held-out and final-check rows, as estimates quote them)", _band_figures),
    (
        "NVIDIA's benchmark recipes: step time, and its growth with the GPU count at fixed work per GPU",
        _weak_scaling_figures,
    ),
    ("whole pre-training runs: GPU-hours", _whole_run_figures),
    ("optimism guard: the planner's best against the best published MFU", _optimism_figures),
    ("collectives: bus bandwidth", _collective_figures),
)


def build() -> list[Figure]:
    """Every figure of the scorecard, replayed now."""
    return [replace(f, section=title) for title, section in SECTIONS for f in section()]


def to_dict(figures: Sequence[Figure], previous: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """{figures, summary}; with `previous` (--against), each figure also has its `change` since then and
    `change_verdict` ("better", "worse", "" or "new" for a figure the earlier scorecard did not have)."""
    met = [f for f in figures if f.status == "met"]
    judged = [f for f in figures if f.status]
    rows = [f.to_dict() for f in figures]
    if previous is not None:
        for f, row in zip(figures, rows, strict=True):
            delta, verdict = change(f, previous.get(f.key))
            row["change"] = None if delta is None else round(delta, 3)
            row["change_verdict"] = verdict if f.key in previous else "new"
    return {
        "figures": rows,
        "summary": {
            "targets": len(judged),
            "met": len(met),
            "not_met": [f.key for f in judged if f not in met],
        },
    }


def dumps(figures: Sequence[Figure]) -> str:
    """The committed form (app/catalog/scorecard.json): `to_dict`, indented, with a final newline."""
    return json.dumps(to_dict(figures), indent=2, ensure_ascii=False) + "\n"


def read_previous(path: Path) -> dict[str, float | None]:
    """key → value of a scorecard written earlier with --json. Raises UserError for a file that is not one."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        previous = {str(f["key"]): f["value"] for f in document["figures"]}
        for key, value in previous.items():
            # a number or null, as --json writes it (a bool is an int to Python, not a figure)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError(f"{key}: value {value!r} is not a number")
        return previous
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"--against {path}: not a scorecard written by --json ({exc.__class__.__name__})"
        ) from exc


def change(figure: Figure, before: float | None) -> tuple[float | None, str]:
    """(value now − before, "better" / "worse" / "") — lower is better except for figures with an at-least
    target and the counts in HIGHER_IS_BETTER; a signed error (SIGNED) is better the nearer it is to zero."""
    if before is None or figure.value is None:
        return None, ""
    delta = figure.value - before
    if abs(delta) < MOVE_EPSILON:
        return delta, ""
    if figure.key in SIGNED:
        moved = abs(figure.value) - abs(before)
        if abs(moved) < MOVE_EPSILON:
            return delta, ""
        return delta, "better" if moved < 0 else "worse"
    higher_is_better = figure.at_least or figure.key in HIGHER_IS_BETTER
    return delta, "better" if (delta > 0) == higher_is_better else "worse"


# figures where a larger value is the better one (counts of rows predicted or placed right)
HIGHER_IS_BETTER = frozenset({"dev.oom", "runs.range"})
# signed errors (negative: optimistic), best at zero
SIGNED = frozenset({"runs.mean", "weak.growth.signed"})


def _value_text(figure: Figure) -> str:
    if figure.value is None:
        return "—"
    if figure.unit in ("%", "pp"):
        return f"{figure.value:.{QUOTED_DECIMALS}f} {figure.unit}"
    return f"{figure.value:g} {figure.unit}"


def _change_text(figure: Figure, previous: Mapping[str, float | None]) -> str:
    if figure.key not in previous:
        return "new"
    delta, verdict = change(figure, previous[figure.key])
    if delta is None:
        return ""
    return "=" if round(delta, 2) == 0 else f"{delta:+.2f} {verdict}".rstrip()


def render(figures: Sequence[Figure], previous: Mapping[str, float | None] | None = None) -> str:
    """The scorecard as a text table, a block per section; with `previous`, a column of the change since then."""
    head = f"{'figure':56s} {'set':11s} {'value':>10s} {'out of':>10s}  {'target':7s} {'status':7s}"
    lines = [head + ("  change" if previous is not None else "")]
    section = None
    for f in figures:
        if f.section != section:
            section = f.section
            lines.append(f"-- {section}")
        n = "" if f.n is None else f"{f.n} {f.n_unit}"
        line = f"{f.label:56s} {f.role:11s} {_value_text(f):>10s} {n:>10s}  {f.target_text:7s} {f.status:7s}"
        if previous is not None:
            line += "  " + _change_text(f, previous)
        lines.append(line.rstrip())
    summary = to_dict(figures)["summary"]
    lines.append(f"targets met: {summary['met']} of {summary['targets']}")
    if any(f.unit == "pp" for f in figures):
        lines.append(
            "pp: percentage points (estimated step-time growth with the GPU count minus the measured one)"
        )
    return "\n".join(lines)
