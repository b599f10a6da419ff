"""MLPerf Training submissions (tests/data/training_runs_mlperf.csv): the published rates the estimator is checked
against at 8 to 11,616 GPUs, and what docs/validation.md says about them."""

from __future__ import annotations

import statistics

import pytest

from app.validation.training_runs import Report, Row, load_rows, replay
from tests.paths import DATA_DIR
from tests.replay_support import one_replayed

FILE = DATA_DIR / "training_runs_mlperf.csv"


@pytest.fixture(scope="module")
def replayed() -> tuple[list[Row], Report]:
    rows = load_rows(FILE)
    return rows, replay(rows)


def _by_system(rows: list[Row], report: Report, text: str) -> tuple[float, float]:
    """(measured, predicted) of the one row whose source names the result directory `text`."""
    return one_replayed(rows, report, lambda row, _r: f"/{text}/" in row.get("source"), text)


def test_every_submission_replays_as_a_training_rate(replayed: tuple[list[Row], Report]) -> None:
    rows, report = replayed
    assert len(rows) == 70
    assert all(r.skipped is None and r.error_pct is not None for r in report.rows)
    assert {r.metric for r in report.rows} == {"tokens_per_s_per_gpu"}
    # every row names its repository, commit and result logs
    assert all("mlcommons/" in row.get("source") or "training_results_v" in row.get("source") for row in rows)
    assert all("commit" in row.get("source") and "result_" in row.get("source") for row in rows)


def test_the_per_gpu_drop_from_512_to_10752_h100_is_estimated(replayed: tuple[list[Row], Report]) -> None:
    """MLPerf v3.1, one recipe (GPT-3 175B, TP4 PP8 VP12) on Eos: 739.6 tokens/s per GPU on 512 H100 and 533.7 on
    10,752, 28 % less, from the pipeline bubble of fewer micro-batches per replica and the wider data-parallel
    reduction. The estimate must lose the same share, to within 2 %."""
    rows, report = replayed
    small = _by_system(rows, report, "eos_n64_ngc23.09_nemo")
    large = _by_system(rows, report, "eos-dfw_n1344_ngc23.09_nemo")
    assert small[0] == pytest.approx(739.6) and large[0] == pytest.approx(533.7)
    measured_drop, predicted_drop = large[0] / small[0], large[1] / small[1]
    assert measured_drop == pytest.approx(0.7216, abs=1e-3)
    assert predicted_drop == pytest.approx(measured_drop, rel=0.02)


def test_the_documented_blackwell_gap_holds(replayed: tuple[list[Row], Report]) -> None:
    """docs/validation.md: every Llama 3.1 405B run on Blackwell (GB200, GB300, B200) took longer than estimated
    (+8 to +20 % in speed), the Hopper runs of the same recipe within -6 to -3 %."""
    rows, report = replayed
    blackwell, hopper = [], []
    for row, r in zip(rows, report.rows, strict=True):
        if "405B" not in row.get("model_name"):
            continue
        (hopper if row.get("gpu").startswith(("H100", "H200")) else blackwell).append(r.error_pct)
    assert len(blackwell) == 13 and len(hopper) == 7
    assert min(blackwell) >= 8.0 and max(blackwell) <= 20.0
    assert min(hopper) >= -6.5 and max(hopper) <= -2.5
    assert statistics.mean(abs(e) for e in blackwell) == pytest.approx(16.1, abs=0.1)
