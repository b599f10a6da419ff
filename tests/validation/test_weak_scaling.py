"""Weak-scaling series (app.validation.weak_scaling): one recipe at several GPU counts with the work per
data-parallel rank fixed, and how its step time grows from the smallest count to the largest."""

from __future__ import annotations

import re

import pytest

from app.validation import scorecard
from app.validation.training_runs import Report, Row, RowResult, load_rows, replay
from app.validation.weak_scaling import summary, weak_scaling_series
from tests.cli_support import invoke
from tests.paths import DATA_DIR, ROOT

FILE = DATA_DIR / "training_runs_dgxc_weak_scaling.csv"


def _row(index: int, gpus: int, dp: int, batch: int, metric: str = "iter_time_s") -> Row:
    return Row(
        index,
        {
            "source": "s",
            "model_name": "m",
            "num_gpus": str(gpus),
            "tp": "8",
            "dp": str(dp),
            "global_batch": str(batch),
            "dtype": "bf16",
            "measured_metric": metric,
        },
    )


def _report(measured: list[float], predicted: list[float], metric: str = "iter_time_s") -> Report:
    return Report(
        [
            RowResult(i + 1, "s", "m", metric, m, p, (p / m - 1) * 100)
            for i, (m, p) in enumerate(zip(measured, predicted, strict=True))
        ]
    )


def test_growth_of_step_times_from_the_smallest_count_to_the_largest() -> None:
    # listed out of order: the series is sorted by GPU count
    rows = [_row(1, 32, 4, 16), _row(2, 8, 1, 4), _row(3, 16, 2, 8)]
    (series,) = weak_scaling_series(rows, _report([1.05, 1.00, 1.02], [1.01, 1.00, 1.01]))
    assert series.gpus == (8, 16, 32)
    assert series.rows == (2, 3, 1)
    assert series.measured_growth_pct == pytest.approx(5.0)
    assert series.predicted_growth_pct == pytest.approx(1.0)
    assert series.growth_error_pp == pytest.approx(-4.0)


def test_a_rate_grows_as_the_reciprocal_of_the_step_time() -> None:
    rows = [_row(1, 8, 1, 4, "tflops_per_gpu"), _row(2, 64, 8, 32, "tflops_per_gpu")]
    (series,) = weak_scaling_series(rows, _report([400.0, 380.0], [400.0, 400.0], "tflops_per_gpu"))
    assert series.measured_growth_pct == pytest.approx((400 / 380 - 1) * 100)
    assert series.predicted_growth_pct == pytest.approx(0.0)


def test_strong_scaling_and_other_recipes_make_no_series() -> None:
    # the same global batch over more ranks is strong scaling: less work per rank, not a weak-scaling series
    strong = [_row(1, 8, 1, 64), _row(2, 16, 2, 64)]
    assert weak_scaling_series(strong, _report([2.0, 1.0], [2.0, 1.0])) == []
    other = [_row(1, 8, 1, 4), _row(2, 16, 2, 8)]
    other[1].data["tp"] = "4"
    assert weak_scaling_series(other, _report([1.0, 1.0], [1.0, 1.0])) == []
    assert summary([]) == {"n": 0}


def test_nvidia_weak_scaling_file_as_the_validation_report_quotes_it() -> None:
    rows = load_rows(FILE)
    report = replay(rows)
    series = weak_scaling_series(rows, report)
    s = summary(series)
    assert (len(rows), s["n"]) == (62, 11)
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    match = re.search(
        r"Growth over the \d+ series: measured \*\*([+\d.]+) %\*\*, estimated\s+\*\*([+\d.]+) %\*\* on average, "
        r"\|error\| ([\d.]+) pp",
        text,
    )
    assert match, "docs/validation.md lost the weak-scaling growth figures"
    measured, estimated, error = (float(g) for g in match.groups())
    assert round(s["measured_growth_pct"], 1) == pytest.approx(measured)
    assert round(s["predicted_growth_pct"], 1) == pytest.approx(estimated)
    assert round(s["mean_abs_growth_error_pp"], 1) == pytest.approx(error)
    # every series starts from its smallest count and the model's growth is never negative there
    assert all(x.gpus == tuple(sorted(x.gpus)) for x in series)


def test_scorecard_carries_the_growth_of_the_series() -> None:
    figures = {f.key: f for f in scorecard._weak_scaling_figures()}
    rows = load_rows(FILE)
    s = summary(weak_scaling_series(rows, replay(rows)))
    assert figures["weak.growth"].value == pytest.approx(s["mean_abs_growth_error_pp"], abs=0.01)
    assert figures["weak.growth"].n == 11
    assert figures["weak.growth"].n_unit == "series"
    assert figures["weak.growth.signed"].value is not None and figures["weak.growth.signed"].value < 0
    assert figures["weak.growth"].role == scorecard.HELD_OUT


def test_replay_cli_prints_the_series() -> None:
    result = invoke(["validate", "training-runs", str(FILE)])
    assert result.exit_code == 0, result.output
    assert "weak-scaling series: 11" in result.output
    assert "Llama-3.1-405B fp8 at 576–2,304 GPUs" in result.output
    # a file without such series prints no section
    dev = invoke(["validate", "training-runs", str(DATA_DIR / "training_runs.csv")])
    assert "weak-scaling series" not in dev.output
