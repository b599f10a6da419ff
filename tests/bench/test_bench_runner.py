"""The real runner: torchrun + gloo on CPU (2 and 4 processes), GEMM on CPU, interrupts, CLI errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core.network import busbw_factor
from tests.cli_support import clusterplan, run_main
from tests.paths import ROOT

pytestmark = pytest.mark.torch

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@pytest.mark.slow
def test_collectives_cli_json_two_ranks() -> None:
    res = clusterplan(
        "bench",
        "collectives",
        "--op",
        "all_reduce,all_to_all,send_recv",
        "--nproc",
        "2",
        "--minbytes",
        "1K",
        "--maxbytes",
        "16K",
        "--stepfactor",
        "4",
        "--iters",
        "3",
        "--warmup-iters",
        "1",
        "--json",
        env=ENV,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1 and doc["benchmark_version"] and doc["status"] == "complete"
    assert doc["argv"][:3] == ["clusterplan", "bench", "collectives"]
    env = doc["environment"]
    assert (
        env["torch"].startswith("2.")
        and env["backend"] == "gloo"
        and env["world_size"] == 2
        and env["hostnames"]
    )
    rows = doc["rows"]
    assert [(r["op"], r["size_bytes"]) for r in rows] == [
        (op, s) for op in ("all_reduce", "all_to_all", "send_recv") for s in (1024, 4096, 16384)
    ]
    for r in rows:
        assert r["wrong"] == 0 and r["time_us"] > 0
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * busbw_factor(r["op"], 2))
        assert r["time_us_min"] <= r["time_us"] <= r["time_us_max"]
    assert doc["summary"]["wrong"] == 0


@pytest.mark.slow
def test_intra_inter_and_all_groups_on_four_ranks(tmp_path: Path) -> None:
    """4 gloo ranks split into 2 pretend nodes of 2: every op measured on intra, inter and all groups."""
    from app.bench.launch import run_torchrun
    from app.benchproto.config import CollectiveConfig

    events: list[dict] = []
    cfg = CollectiveConfig(
        ops=("all",), min_bytes=4096, max_bytes=4096, iters=2, warmup_iters=1, groups="each", ranks_per_node=2
    )
    code, doc = run_torchrun(cfg, 4, str(tmp_path / "out.json"), on_event=events.append)
    assert code == 0 and doc is not None
    seen = {(r["op"], r["group"], r["ranks"], r["nodes"]) for r in doc["rows"]}
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"):
        assert {(op, "intra", 2, 1), (op, "inter", 2, 2), (op, "all", 4, 2)} <= seen
    assert all(r["wrong"] == 0 for r in doc["rows"])
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and kinds.count("row") == 18
    assert events[-2]["progress"] == 1.0


@pytest.mark.slow
def test_sigterm_keeps_partial_results(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "bench",
            "collectives",
            "--op",
            "all_reduce",
            "--nproc",
            "2",
            "--minbytes",
            "1K",
            "--maxbytes",
            "1G",
            "--stepfactor",
            "2",
            "--iters",
            "5",
            "--warmup-iters",
            "1",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if out.exists() and len(json.loads(out.read_text())["rows"]) >= 2:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted", stderr[-2000:]
    assert 2 <= len(doc["rows"]) < 21
    assert doc["rows"][0]["size_bytes"] == 1024
    assert proc.returncode == 130


def test_gemm_sweep_on_cpu() -> None:
    from app.bench.gemm import run_gemm
    from app.bench.progress import ProgressSink
    from app.benchproto.config import GemmConfig, GemmShape

    events: list[str] = []

    class Sink(ProgressSink):
        def emit(self, event: str, **payload: object) -> dict:
            events.append(event)
            return super().emit(event, **payload)

    cfg = GemmConfig(
        shapes=(GemmShape(64, 128, 256), GemmShape(192, 192, 192)),
        dtypes=("fp32", "bf16"),
        device="cpu",
        iters=5,
        warmup_iters=1,
    )
    doc = run_gemm(cfg, Sink(None))
    assert doc["kind"] == "gemm" and doc["benchmark_version"] and doc["status"] == "complete"
    assert [(r["m"], r["n"], r["k"], r["dtype"]) for r in doc["rows"]] == [
        (64, 128, 256, "fp32"),
        (192, 192, 192, "fp32"),
        (64, 128, 256, "bf16"),
        (192, 192, 192, "bf16"),
    ]
    for r in doc["rows"]:
        assert r["flops"] == 2 * r["m"] * r["n"] * r["k"] and r["iters"] == 5
        assert r["best_tflops"] >= r["median_tflops"] > 0 and r["best_tflops"] >= r["mean_tflops"] > 0
        assert r["time_us_best"] <= r["time_us_median"]
    assert set(doc["summary"]["max_tflops"]) == {"fp32", "bf16"}
    assert events == ["start", "row", "row", "row", "row", "done"]


def test_gemm_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(
        [
            "bench",
            "gemm",
            "--device",
            "cpu",
            "--dtype",
            "fp32",
            "--shapes",
            "96 64 32",
            "--iters",
            "3",
            "--warmup-iters",
            "0",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["rows"][0]["m"] == 96 and doc["config"]["flush_cache"] is True
    code, out, err = run_main(
        [
            "bench",
            "gemm",
            "--device",
            "cpu",
            "--dtype",
            "all",
            "--shapes",
            "32",
            "--iters",
            "2",
            "--warmup-iters",
            "0",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    assert [r["dtype"] for r in json.loads(out)["rows"]] == ["fp32", "bf16", "fp16"]  # no tf32/fp8 on CPU


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["collectives", "--op", "allgatherz"], "unknown collective 'allgatherz'"),
        (["collectives", "--minbytes", "1M", "--maxbytes", "1K"], "smaller than minbytes"),
        (["collectives", "--backend", "nccl"], "no CUDA GPU is visible"),
        (["collectives", "--device", "cuda", "--nproc", "4"], "no CUDA GPU is visible"),
        (["gemm", "--device", "cuda"], "no CUDA GPU is visible"),
        (["gemm", "--device", "cpu", "--dtype", "tf32", "--shapes", "8"], "tf32"),
        (["import", "tests/data/bench/mamf.txt", "--format", "nccl-tests"], "no nccl-tests result lines"),
    ],
)
def test_bad_input_is_one_clear_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(["bench", *args], capsys)
    assert code == 2, out + err
    assert message in err and "Traceback" not in err


@pytest.mark.slow
def test_every_node_of_a_multi_node_cli_run_exits_0(tmp_path: Path) -> None:
    """Two pretend nodes on this host meet at a c10d store; only node 0 has the results, both succeed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--op", "all_reduce", "--nproc", "1", "--nnodes", "2", "--minbytes", "1K", "--maxbytes", "1K"]
    args += [
        "--iters",
        "2",
        "--warmup-iters",
        "1",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "two",
    ]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli.main",
                "bench",
                "collectives",
                *args,
                "--out",
                str(tmp_path / f"{i}.json"),
            ],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-1500:] for _, err in outputs]
    written = sorted(f.name for f in tmp_path.glob("*.json"))
    assert len(written) == 1
    doc = json.loads((tmp_path / written[0]).read_text())
    assert doc["status"] == "complete" and doc["rows"][0]["ranks"] == 2 and doc["rows"][0]["wrong"] == 0
    assert sum("node 0 (global rank 0) prints" in out for out, _ in outputs) == 1


def test_accelerator_warm_up_runs_until_its_clock_says_so() -> None:
    """An injected clock, 0.5 s further at every look: a 2 s warm-up started at 0 runs at 0.5, 1.0 and 1.5."""
    from app.bench.gemm import accelerator_warm_up, run_gemm
    from app.bench.progress import ProgressSink
    from app.benchproto.config import GemmConfig, GemmShape

    ticks = iter(i * 0.5 for i in range(100))
    assert accelerator_warm_up(GemmShape(32, 32, 32), "fp32", "cpu", 2.0, 1, clock=lambda: next(ticks)) == 3

    import io

    stream = io.StringIO()
    config = GemmConfig(
        shapes=(GemmShape(32, 32, 32),), dtypes=("fp32",), device="cpu", iters=2, warmup_iters=0
    )
    assert config.warm_up_seconds("cpu") == 0.0 and config.warm_up_seconds("cuda:0") == 30.0
    ticks = iter(i * 0.5 for i in range(100))
    warm = GemmConfig(**{**config.__dict__, "warmup_s": 1.0})
    doc = run_gemm(warm, ProgressSink(stream), clock=lambda: next(ticks))
    assert (
        doc["status"] == "complete"
        and "accelerator warm-up on cpu: 1 rounds of 32x32x32 in 1 s" in stream.getvalue()
    )
