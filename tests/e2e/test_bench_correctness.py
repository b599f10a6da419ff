"""Correctness gates: wrong elements fail the row, the run (exit 1, as nccl-tests), the job and calibration.

Corruption is injected by tests/fault_injection/sitecustomize.py into real runs (torchrun + gloo ranks, CPU
GEMM, the agent's job process): rank 0's first 10 output elements of every collective, and of every GEMM
product, are multiplied by 1.005 (a 0.5 % error) — what the former rtol = atol = 1e-2 check let through.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.bench.tolerance import gemm_tolerance_terms, reduction_tolerance, unit_roundoff
from app.benchproto.schema import finish
from tests.paths import FAULT_INJECTION_DIR, ROOT

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

INJECTOR = FAULT_INJECTION_DIR
CLEAN_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
CORRUPT_ENV = {
    **CLEAN_ENV,
    "PYTHONPATH": os.pathsep.join([str(INJECTOR), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    "CLUSTERPLAN_TEST_CORRUPT_FACTOR": "1.005",
    "CLUSTERPLAN_TEST_CORRUPT_ELEMENTS": "10",
}


GEMM = ["-m", "app.cli.main", "bench", "gemm", "--device", "cpu", "--iters", "2", "--warmup-iters", "1"]
COLLECTIVES = ["-m", "app.cli.main", "bench", "collectives", "--iters", "2", "--warmup-iters", "1"]


def run(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_reductions_of_small_integers_are_exact_so_the_tolerance_is_zero() -> None:
    # float32 (the default check dtype): all_reduce sums n(n+1)/2 ≤ 2^24 up to n = 5792 ranks
    assert reduction_tolerance("float32", 5792, 5792 * 5793 / 2, 5792 * 5793 / 2) == 0.0
    assert reduction_tolerance("float32", 5793, 5793 * 5794 / 2, 5793 * 5794 / 2) > 0.0
    # bfloat16 (8 significand bits): exact up to 22 ranks (253 ≤ 256); beyond, the γ_n·Σ|x| bound
    assert reduction_tolerance("bfloat16", 22, 253, 253) == 0.0
    beyond = reduction_tolerance("bfloat16", 23, 276, 276)
    assert beyond == pytest.approx(23 * 2**-8 / (1 - 23 * 2**-8) * 276)
    assert reduction_tolerance("int32", 1024, 524800, 524800) == 0.0
    assert unit_roundoff("float16") == 2**-11 and unit_roundoff("bfloat16") == 2**-8


def test_the_former_tolerance_let_a_half_percent_corruption_through() -> None:
    exact = torch.tensor([3.0])  # 2-rank all_reduce of 1 and 2
    corrupt = exact * 1.005
    assert torch.isclose(corrupt, exact, rtol=1e-2, atol=1e-2).all()  # the former check: not wrong
    assert (corrupt - exact).abs().item() > reduction_tolerance("float32", 2, 3, 3)  # now: wrong


def test_gemm_check_is_exact_until_the_accumulator_runs_out_of_bits() -> None:
    assert gemm_tolerance_terms("bf16", 16384) == (0.0, 0.0)  # fp32 accumulation of |partial sums| ≤ k
    assert gemm_tolerance_terms("fp8", 2**14) == (0.0, 0.0)
    on_sums, on_result = gemm_tolerance_terms("fp8", 2**15)  # ~14-bit FP8 accumulation (DeepSeek-V3 §3.3.2)
    assert on_sums == pytest.approx(2**15 * 2**-14 / (1 - 2**15 * 2**-14)) or math.isinf(on_sums)
    assert on_result == 2**-8  # the product is written in bf16


def test_a_clean_gemm_run_checks_every_shape_and_passes() -> None:
    res = run(
        [*GEMM, "--dtype", "fp32,bf16,fp16", "--shapes", "96 80 300", "--json"],
        CLEAN_ENV,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert [r["wrong"] for r in doc["rows"]] == [0, 0, 0]
    assert doc["status"] == "complete" and doc["summary"]["wrong"] == 0


def test_corrupt_gemm_fails_the_run_with_exit_1_and_keeps_the_rows(tmp_path: Path) -> None:
    out = tmp_path / "gemm.json"
    res = run(
        [*GEMM, "--dtype", "fp32,bf16", "--shapes", "64 64 128", "--out", str(out)],
        CORRUPT_ENV,
    )
    assert res.returncode == 1, res.stderr[-2000:]
    assert "error: 20 wrong element(s) in 2 row(s)" in res.stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and [r["wrong"] for r in doc["rows"]] == [10, 10]
    assert "#wrong" in res.stdout


def test_corrupt_collectives_fail_every_op_and_exit_1() -> None:
    ops = "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast"
    res = run(
        [*COLLECTIVES, "--op", ops, "--nproc", "2", "--minbytes", "1K", "--maxbytes", "1K", "--json"],
        CORRUPT_ENV,
    )
    assert res.returncode == 1, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert {r["op"]: r["wrong"] for r in doc["rows"]} == {op: 10 for op in ops.split(",")}
    assert doc["status"] == "failed" and doc["summary"]["wrong"] == 50
    assert "50 wrong element(s) in 5 row(s)" in res.stderr


def test_a_job_with_wrong_results_exits_1_with_the_reason_and_its_rows(tmp_path: Path) -> None:
    params = {
        "gemm": {"sizes": [64], "dtypes": ["fp32"], "device": "cpu", "iters": 2, "warmup_iters": 1},
        "collectives": {"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "1K", "iters": 2},
        "nproc": 2,
    }
    out = tmp_path / "job.json"
    res = run(
        ["-m", "app.bench.job", "--kind", "calibration", "--params", json.dumps(params), "--out", str(out)],
        CORRUPT_ENV,
    )
    assert res.returncode == 1, res.stderr[-2000:]
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith('{"event"')]
    errors = [e["message"] for e in events if e["event"] == "error"]
    assert errors == ["20 wrong element(s) in 2 row(s)" + errors[0].split("row(s)", 1)[1]]
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and sorted(r["wrong"] for r in doc["rows"]) == [10, 10]


def _row(wrong: int) -> dict[str, Any]:
    return {"op": "all_reduce", "group": "all", "ranks": 2, "size_bytes": 1024, "time_us": 10.0} | {
        "algbw_gbps": 0.1,
        "busbw_gbps": 0.1,
        "wrong": wrong,
    }


def test_a_document_closes_failed_only_when_an_element_was_wrong() -> None:
    assert finish({"rows": [_row(0)]})["status"] == "complete"
    failed = finish({"rows": [_row(0), _row(3)]})
    assert failed["status"] == "failed" and failed["error"].startswith("3 wrong element(s) in 1 row(s)")
    assert finish({"rows": [_row(3)]}, "interrupted")["status"] == "interrupted"


def test_calibration_refuses_rows_with_wrong_elements() -> None:
    from app.calibration.profile import build_profile
    from app.catalog import find_gpu
    from app.catalog.fabrics import find_fabric

    with pytest.raises(ValueError, match="1 row"):
        build_profile({"rows": [_row(0), _row(2)]}, find_gpu("H100-SXM"), find_fabric("ib-ndr-8x400"))
