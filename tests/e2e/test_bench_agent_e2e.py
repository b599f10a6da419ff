"""A real server and real agent processes: submit, claim, run, progress, results, calibration; an agent
killed mid-run (its job returns to the queue when the lease expires and finishes once, on another agent);
a revoked token gets 401 and backs off.

Every check waits for a state (polling with a generous deadline), never for an amount of time: the node's
online window is pinned far above the test's length, so "online" cannot flip while the test looks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, LiveServer, start_live_server
from tests.paths import FAULT_INJECTION_DIR

pytestmark = pytest.mark.slow

AGENT_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
# Short lease and heartbeat so a killed agent's job is requeued quickly; an online window (1 h) far longer
# than any test, so a node seen once stays "online" however slowly a loaded machine runs the test.
SERVER_ENV = {
    "CLUSTERPLAN_BENCH_LEASE_S": "4",
    "CLUSTERPLAN_AGENT_HEARTBEAT_S": "1",
    "CLUSTERPLAN_NODE_ONLINE_S": "3600",
}


def admin_api(server: LiveServer) -> httpx.Client:
    """An API client of `server` acting as its administrator (there is no anonymous admin)."""
    return httpx.Client(base_url=server.url + "/api/v1", headers=server.headers, timeout=30)


def start_agent(
    server: LiveServer, token: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    stamp = time.monotonic_ns()
    log = (tmp_path / f"agent-{stamp}.log").open("w")
    token_file = tmp_path / f"token-{stamp}"  # not on the command line, where ps would show it
    token_file.write_text(token + "\n")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "agent",
            "--server",
            server.url,
            "--token-file",
            str(token_file),
            "--poll-interval",
            "0.5",
            "--work-dir",
            str(tmp_path),
            *extra,
        ],
        cwd=ROOT,
        env=env or AGENT_ENV,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for(fetch: Any, predicate: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fetch()
        if predicate(value):
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out; last value: {str(value)[:1500]}")


@pytest.mark.torch
def test_agent_runs_a_calibration_job_end_to_end(tmp_path: Path) -> None:
    server = start_live_server(f"sqlite:///{tmp_path / 'e2e.db'}", tmp_path, SERVER_ENV)
    agent = None
    try:
        api = admin_api(server)
        node = api.post("/nodes", json={"name": "cpu-node"}).json()
        params = {
            "profile_name": "cpu-lab",
            "override_acceptance": True,  # CPU measurements declared as H100: they fail acceptance
            "gpu": "H100-SXM",
            "fabric": "ib-ndr-8x400",
            "gemm": {
                "sizes": [64, 128, 192],
                "dtypes": ["fp32"],
                "device": "cpu",
                "iters": 5,
                "warmup_iters": 1,
            },
            "collectives": {
                "ops": ["all_reduce", "all_gather"],
                "min_bytes": "1K",
                "max_bytes": "16K",
                "step_factor": 4,
                "iters": 3,
                "warmup_iters": 1,
                "device": "cpu",
            },
            "nproc": 2,
        }
        created = api.post("/benchmarks", json={"kind": "calibration", "params": params})
        assert created.status_code == 202
        job_path = created.headers["Location"].removeprefix("/api/v1")
        agent = start_agent(server, node["token"], tmp_path, "--max-jobs", "1")
        job = wait_for(lambda: api.get(job_path).json(), lambda j: j["status"] in ("succeeded", "failed"))
        assert job["status"] == "succeeded", job["error"] or job["log_tail"]
        assert job["attempt"] == 1 and job["progress"] == 1.0
        assert [(a["attempt"], a["status"], a["node_id"]) for a in job["attempts"]] == [
            (1, "succeeded", node["id"])
        ]
        rows = job["result"]["rows"]
        assert sum("best_tflops" in r for r in rows) == 3 and sum("busbw_gbps" in r for r in rows) == 6
        assert all(r["wrong"] == 0 for r in rows if "wrong" in r)
        assert job["result"]["environment"]["torch"].startswith("2.")
        assert agent.wait(timeout=30) == 0

        with api.stream("GET", f"{job_path}/events") as stream:
            body = "".join(stream.iter_text())
        names = [line[7:] for line in body.splitlines() if line.startswith("event: ")]
        assert names[:3] == ["queued", "claimed", "start"] and names[-2:] == ["completed", "end"]
        assert names.count("row") == 9

        nodes = api.get("/nodes").json()["data"]  # the agent has exited; its last heartbeat is in the window
        assert nodes[0]["online"] is True and nodes[0]["last_heartbeat_at"] is not None
        assert nodes[0]["info"]["torch"].startswith("2.")
        profile = api.get("/calibration/profiles/cpu-lab").json()
        assert profile["version"] == 1 and profile["source_job_id"] == job["id"]
        assert profile["gemm_error_after_pct"] < profile["gemm_error_before_pct"]
        assert profile["collectives_error_after_pct"] < profile["collectives_error_before_pct"]
        assert any("CPU" in note for note in profile["report"]["notes"])
    finally:
        if agent is not None and agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
        server.stop()


@pytest.mark.torch
@pytest.mark.parametrize("restart", ["another node", "same node"])
def test_killed_agent_job_is_requeued_and_finishes_once(tmp_path: Path, restart: str) -> None:
    """The agent dies mid-run; a new agent starts on another node, or on the same node with the same token
    (whose heartbeats must not keep the dead run's lease alive)."""
    server = start_live_server(f"sqlite:///{tmp_path / 'crash.db'}", tmp_path, SERVER_ENV)
    agents: list[subprocess.Popen[str]] = []
    try:
        api = admin_api(server)
        first = api.post("/nodes", json={"name": "doomed"}).json()
        second = first if restart == "same node" else api.post("/nodes", json={"name": "survivor"}).json()
        # Long enough (≈ 5–30 s here) that the first progress post arrives well before the end.
        params = {
            "sizes": [256] * 32,
            "dtypes": ["fp32"],
            "device": "cpu",
            "iters": 400,
            "warmup_iters": 2,
            "flush_cache": False,
        }
        job_id = api.post("/benchmarks", json={"kind": "gemm", "params": params}).json()["id"]
        agents.append(start_agent(server, first["token"], tmp_path))
        wait_for(lambda: api.get(f"/benchmarks/{job_id}").json(), lambda j: len(j["partial_rows"]) >= 1)
        os.killpg(agents[0].pid, signal.SIGKILL)  # the agent dies mid-run (its job child follows it)
        agents[0].wait(timeout=10)
        mid = api.get(f"/benchmarks/{job_id}").json()
        assert mid["status"] == "running" and mid["progress"] < 1.0

        agents.append(start_agent(server, second["token"], tmp_path, "--max-jobs", "1"))
        job = wait_for(lambda: api.get(f"/benchmarks/{job_id}").json(), lambda j: j["status"] == "succeeded")
        assert job["attempt"] == 2 and len(job["result"]["rows"]) == 32 and len(job["partial_rows"]) == 32
        assert job["claimed_by"] == second["id"]
        first_try, second_try = job["attempts"]
        assert (first_try["status"], first_try["node_id"]) == ("lost", first["id"]) and first_try["rows"] >= 1
        assert (second_try["status"], second_try["node_id"], second_try["rows"]) == (
            "succeeded",
            second["id"],
            32,
        )
        with api.stream("GET", f"/benchmarks/{job_id}/events") as stream:
            body = "".join(stream.iter_text())
        names = [line[7:] for line in body.splitlines() if line.startswith("event: ")]
        assert names.count("claimed") == 2 and names.count("requeued") == 1 and names.count("completed") == 1
        assert names.index("requeued") < len(names) - names[::-1].index("claimed") - 1
    finally:
        for proc in agents:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        server.stop()


def test_revoked_token_gets_401_and_backs_off(tmp_path: Path, live_server: LiveServer) -> None:
    api = admin_api(live_server)
    node = api.post("/nodes", json={"name": f"revoked-{uuid.uuid4().hex[:8]}"}).json()
    assert api.post(f"/nodes/{node['id']}/revoke").json()["revoked"] is True
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "agent",
            "--server",
            live_server.url,
            "--token",
            node["token"],
            "--max-auth-failures",
            "3",
        ],
        cwd=ROOT,
        env=AGENT_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3
    assert "unknown or revoked node token" in proc.stderr
    assert "backing off 1.0 s" in proc.stderr and "backing off 2.0 s" in proc.stderr
    assert "giving up after 3" in proc.stderr
    assert time.monotonic() - started >= 3.0  # a lower bound (1 s + 2 s of back-off): load only adds to it


@pytest.mark.torch
def test_a_job_computing_wrong_results_fails_with_the_reason(tmp_path: Path) -> None:
    """A 0.5 % corruption injected into the job's GEMM and collectives: the job fails, says why, keeps its rows,
    and a profile is not fitted from it."""
    injector = FAULT_INJECTION_DIR
    env = {
        **AGENT_ENV,
        "PYTHONPATH": os.pathsep.join([str(injector), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "CLUSTERPLAN_TEST_CORRUPT_FACTOR": "1.005",
    }
    server = start_live_server(f"sqlite:///{tmp_path / 'wrong.db'}", tmp_path, SERVER_ENV)
    agent = None
    try:
        api = admin_api(server)
        node = api.post("/nodes", json={"name": "bad-hbm"}).json()
        params = {
            "profile_name": "must-not-exist",
            "gemm": {"sizes": [64], "dtypes": ["fp32"], "device": "cpu", "iters": 2, "warmup_iters": 1},
            "collectives": {"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "1K", "iters": 2},
            "nproc": 2,
        }
        job_path = api.post("/benchmarks", json={"kind": "calibration", "params": params}).headers["Location"]
        job_path = job_path.removeprefix("/api/v1")
        agent = start_agent(server, node["token"], tmp_path, "--max-jobs", "1", env=env)
        job = wait_for(lambda: api.get(job_path).json(), lambda j: j["status"] in ("succeeded", "failed"))
        assert job["status"] == "failed"
        assert job["error"].startswith("20 wrong element(s) in 2 row(s)")
        assert sorted(r["wrong"] for r in job["partial_rows"]) == [10, 10]
        assert api.get("/calibration/profiles/must-not-exist").status_code == 404
        fit = api.post("/calibration/profiles", json={"job_id": job["id"], "name": "forced"})
        assert fit.status_code == 422 and "is failed" in fit.text
    finally:
        if agent is not None and agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
        server.stop()
