"""benchmarks/gpu_check.sh on CPU (--cpu): every step runs and leaves its JSON; wrong results stop it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import FAULT_INJECTION_DIR, ROOT

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
ENV = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def run(out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), str(out), "--cpu"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_cpu_dry_run_writes_every_report(tmp_path: Path) -> None:
    res = run(tmp_path, ENV)
    assert res.returncode == 0, res.stderr[-3000:]
    docs = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert set(docs) == {
        "gemm_fp32",
        "attention",
        "collectives",
        "acceptance_gemm_fp32",
        "acceptance_collectives",
        "profile_gemm_fp32",
        "profile_collectives",
    }
    assert all(r["wrong"] == 0 for r in docs["gemm_fp32"]["rows"] + docs["collectives"]["rows"])
    assert docs["attention"]["rows"] and docs["collectives"]["environment"]["world_size"] == 2
    assert docs["acceptance_gemm_fp32"]["verdict"] == "fail"  # a CPU is not an H100
    profile = docs["profile_gemm_fp32"]
    assert profile["version"] == 1 and profile["report"]["acceptance"]["overridden"] is True
    assert docs["profile_collectives"]["params"]["network"]


def test_wrong_results_stop_the_check(tmp_path: Path) -> None:
    injector = FAULT_INJECTION_DIR
    env = {
        **ENV,
        "PYTHONPATH": os.pathsep.join([str(injector), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "CLUSTERPLAN_TEST_CORRUPT_FACTOR": "1.005",
    }
    res = run(tmp_path, env)
    assert res.returncode == 1 and "wrong element(s)" in res.stderr
    assert json.loads((tmp_path / "gemm_fp32.json").read_text())["status"] == "failed"
    assert not (tmp_path / "attention.json").exists()  # nothing after the failed step ran
