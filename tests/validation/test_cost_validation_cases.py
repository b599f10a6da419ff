"""The published cost cases replayed by `clusterplan validate costs`: the OPT-175B throughput identity and the
cloud what-ifs for Llama 3.1-405B's GPU-hours at dated prices, billed through the run-cost service."""

from __future__ import annotations

import pytest

from app.validation.costs import METHODS, CostCase, evaluate, load_cases, parse_cases, replay
from tests.paths import DATA_DIR

CASES = DATA_DIR / "cost_cases.jsonl"
LLAMA31_405B_GPU_HOURS = 30.84e6  # Llama 3.1 model card, 2024-07-23


def _cases() -> dict[str, CostCase]:
    return {c.case: c for c in load_cases(CASES)}


def test_every_case_is_within_its_tolerance() -> None:
    report = replay(load_cases(CASES))
    assert [r.case for r in report.results if not r.ok] == []
    assert report.passed >= 26


def test_opt_175b_throughput_identity() -> None:
    case = _cases()["opt-175b-throughput-identity-days"]
    result = evaluate(case)
    assert result.predicted == pytest.approx(15.0, rel=1e-3)
    hours = METHODS["run_cost"](**case.inputs)["productive_gpu_hours"]
    assert hours == pytest.approx(6 * 175e9 * 180e9 / 147e12 / 3600)
    assert hours / 809_472 == pytest.approx(0.44, abs=0.005)  # LLaMA Table 15: 34 days on 992 GPUs


def test_llama31_cloud_what_ifs_bill_the_model_card_gpu_hours() -> None:
    cases = [c for name, c in _cases().items() if name.startswith("llama31-405b-cloud-")]
    assert len(cases) == 7
    for case in cases:
        assert case.inputs["gpu_hours"] == LLAMA31_405B_GPU_HOURS
        assert "2024-07-23" in case.source and "$" in case.source
        assert evaluate(case).ok
    reserved = _cases()["llama31-405b-cloud-aws-p5-1yr-reserved-2023-07"]
    # a 1-year reservation bills the year, not the 78 days the run takes on 16,384 GPUs
    assert reserved.expected > 16_384 * 365 * 24 * 7.2 > LLAMA31_405B_GPU_HOURS * 7.2


def test_a_time_only_case_needs_no_price() -> None:
    line = (
        '{"case": "t", "method": "run_cost", "inputs": {"num_gpus": 8, "gpu_hours": 192}, '
        '"output": "wall_clock_days", "expected": 1.0, "tolerance_pct": 0.1, "source": "identity"}'
    )
    (case,) = parse_cases([line])
    assert evaluate(case).ok
