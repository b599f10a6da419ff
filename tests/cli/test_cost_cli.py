"""`clusterplan cost …` and `clusterplan validate costs` as a user runs them (real subprocess, real exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.validation.costs import load_cases, parse_cases, replay
from tests.cli_support import clusterplan, run_main
from tests.paths import DATA_DIR

CASES = DATA_DIR / "cost_cases.jsonl"


def test_validate_costs_json_shape_and_all_public_cases_pass(tmp_path: Path) -> None:
    out = clusterplan("validate", "costs", str(CASES), "--json", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"rows", "summary"}
    assert report["summary"]["n"] >= 8
    assert report["summary"] == {"n": len(report["rows"]), "passed": len(report["rows"]), "failed": 0}
    for row in report["rows"]:
        assert set(row) == {"case", "expected", "predicted", "error_pct", "tolerance_pct", "ok"}
        assert abs(row["error_pct"]) <= row["tolerance_pct"]


def test_public_cases_carry_sources_and_cover_the_required_figures() -> None:
    cases = load_cases(CASES)
    names = " ".join(c.case for c in cases)
    for needle in (
        "daly",
        "young",
        "llama3",
        "gpt4-epoch",
        "opt-175b",
        "bloom",
        "seed-breakeven",
        "seed-checkpoint",
    ):
        assert needle in names
    assert all(c.source for c in cases)
    assert len({c.case for c in cases}) == len(cases)


def test_a_case_outside_tolerance_fails_and_strict_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "# a comment line\n"
        + json.dumps(
            {
                "case": "young-wrong",
                "method": "young_interval",
                "inputs": {"checkpoint_s": 300, "mtbf_s": 86400},
                "expected": 3600,
                "tolerance_pct": 5,
                "source": "deliberately wrong",
            }
        )
        + "\n"
    )
    report = replay(load_cases(bad))
    (row,) = report.to_dict()["rows"]  # type: ignore[misc]
    assert (
        row["predicted"] == pytest.approx(7200) and row["error_pct"] == pytest.approx(100) and not row["ok"]
    )
    out = clusterplan("validate", "costs", str(bad), "--strict", tmp_path=tmp_path)
    assert out.returncode == 1
    assert "0 passed, 1 failed" in out.stdout


def test_malformed_case_files_name_the_line() -> None:
    with pytest.raises(ValueError, match="line 2: missing tolerance_pct, source"):
        parse_cases(
            [
                '{"case":"a","method":"young_interval","inputs":{},"expected":1,"tolerance_pct":1,"source":"x"}',
                '{"case":"b","method":"young_interval","inputs":{},"expected":1}',
            ]
        )
    with pytest.raises(ValueError, match="unknown method 'magic'"):
        parse_cases(['{"case":"a","method":"magic","inputs":{},"expected":1,"tolerance_pct":1,"source":"x"}'])
    with pytest.raises(ValueError, match="line 1: not JSON"):
        parse_cases(["{nope"])


def test_cost_commands_print_results_and_reject_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(
        [
            "cost",
            "spot",
            "--on-demand",
            "55.04",
            "--lost-hours",
            "1.5",
            "--restart-s",
            "0",
            "--target",
            "0.22",
        ],
        capsys,
    )
    assert code == 0
    assert "net savings 52.9%" in out and "4.87 h per preemption" in out
    code, _, err = run_main(["cost", "tco", "--utilisation", "1.5"], capsys)
    assert code == 2 and "utilisation" in err and "Traceback" not in err
    code, _, err = run_main(["cost", "run", "--gpus", "8", "--gpu-hours", "-5", "--price", "2"], capsys)
    assert code == 2 and "gpu_hours" in err
    code, out, _ = run_main(
        [
            "cost",
            "run",
            "--gpus",
            "1024",
            "--params",
            "70e9",
            "--tokens",
            "2e12",
            "--mfu",
            "0.4",
            "--peak-tflops",
            "989.4",
            "--price",
            "6.88",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    data = json.loads(out)
    assert data["options"][0]["total_usd"] == pytest.approx(8.4e23 / (989.4e12 * 0.4) / 3600 * 6.88)


def test_unknown_price_row_from_the_cli(tmp_path: Path) -> None:
    unknown = clusterplan(
        "cost",
        "run",
        "--gpus",
        "8",
        "--gpu-hours",
        "5",
        "--price-row",
        "00000000-0000-0000-0000-000000000000",
        tmp_path=tmp_path,
    )
    assert unknown.returncode == 2 and "options.0.price_row_id" in unknown.stderr


def test_goodput_from_a_yaml_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "job.yaml"
    scenario.write_text(
        "model: Llama-3-70B\n"
        "cluster: {gpu: H100-SXM, nodes: 8, gpus_per_node: 8, fabric: ib-ndr-8x400}\n"
        "layout: {tp: 4, pp: 2, dp: 8, micro_batch: 1, global_batch: 512, zero: 1, sequence_parallel: true,"
        " recompute: selective}\n"
        "training: {seq_len: 8192, tokens: 1.5e12}\n"
    )
    code, out, _ = run_main(
        ["cost", "goodput", "--scenario", str(scenario), "--preset", "llama3-405b", "--async", "--json"],
        capsys,
    )
    assert code == 0
    g = json.loads(out)
    assert g["num_gpus"] == 64 and g["checkpoint_stall_s"] == g["async_stall_s"] < g["sync_stall_s"]
    code, _, err = run_main(["cost", "goodput", "--scenario", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and "file not found" in err


def test_cli_tco_uses_each_gpus_server_row_and_refuses_a_gpu_without_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["cost", "tco", "--nodes", "16", "--network-share", "0", "--price", "4", "--json"]
    code, out, _ = run_main([*base, "--gpu", "A100-40GB-SXM"], capsys)
    assert code == 0 and json.loads(out)["capex"]["servers"] == pytest.approx(16 * 199_000)
    code, out, _ = run_main([*base, "--gpu", "GB200", "--gpus-per-node", "4"], capsys)
    assert code == 0 and json.loads(out)["capex"]["servers"] == pytest.approx(16 * 4 * 3.0e6 / 72)
    code, out, _ = run_main(
        [*base, "--gpu", "GB200", "--gpus-per-node", "4", "--server-capex", "1e5"], capsys
    )
    assert code == 0 and json.loads(out)["capex"]["servers"] == pytest.approx(1.6e6)
    code, _, err = run_main([*base, "--gpu", "L40S"], capsys)
    assert code == 2 and "no on-prem server row for L40S" in err and "Traceback" not in err
    code, _, err = run_main(base, capsys)
    assert code == 2 and "server_capex_usd_per_node" in err


def test_cli_spot_takes_fleet_billing_while_waiting(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["cost", "spot", "--on-demand", "10", "--restart-s", "0", "--reacquire-wait-s", "3600", "--json"]
    code, out, _ = run_main([*args, "--billed-while-waiting", "0.5"], capsys)
    assert code == 0 and json.loads(out)["breakdown_per_day"]["waiting"] == pytest.approx(1.2)
    code, out, _ = run_main([*args, "--checkpoint-on-notice"], capsys)
    assert code == 0 and json.loads(out)["lost_hours_per_preemption"] == 0
    code, _, err = run_main(
        [
            "cost",
            "run",
            "--gpus",
            "1024",
            "--params",
            "70e9",
            "--tokens",
            "1e18",
            "--mfu",
            "0.4",
            "--gpu",
            "H100",
            "--price",
            "2",
        ],
        capsys,
    )
    assert code == 2 and "years of wall time" in err and "Traceback" not in err


def test_a_deeply_nested_input_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON file nested past the parser's depth (about 1,000 levels) is refused like any bad input."""
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 990 + "1" + "}" * 990, encoding="utf-8")
    code, out, err = run_main(["cost", "run", "--scenario", str(deep)], capsys)
    assert code == 2 and "nested too deeply" in err and "Traceback" not in err and out == ""


def test_an_unreachable_spot_target_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(
        ["cost", "spot", "--on-demand", "10", "--discount", "0.6", "--target", "0.7"], capsys
    )
    assert code == 0 and "lose - h per preemption" in out and "not reachable" in out


def test_goodput_text_names_where_its_fail_slow_slowdown_comes_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The text output says whose fail-slow figure the goodput took: the published default across nodes, or the
    caller's own value."""
    base = ["cost", "goodput", "--gpus", "1024", "--params", "70e9", "--preset", "llama3-405b"]
    code, out, _ = run_main(base, capsys)
    line = next(x for x in out.splitlines() if x.startswith("goodput "))
    assert code == 0 and "1.34x slower from fail-slows: Greyhound" in line
    code, out, _ = run_main([*base, "--fail-slow", "1.2"], capsys)
    line = next(x for x in out.splitlines() if x.startswith("goodput "))
    assert code == 0 and "1.20x slower from fail-slows: user input" in line
    code, out, _ = run_main([*base, "--gpus", "8"], capsys)  # one node: none, and no line part for it
    line = next(x for x in out.splitlines() if x.startswith("goodput "))
    assert code == 0 and "fail-slows" not in line
