"""Jobs, nodes and calibration through the real app and database (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.db import get_engine
from app.models.base import utcnow
from app.models.benchmarks import BenchmarkJob, JobAttempt, JobEvent, Node
from tests.auth_support import bearer, issue_token

JOB = {
    "kind": "collectives",
    "params": {"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "4K", "nproc": 2},
}


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    """The real app, called as an administrator (an admin API token on every request)."""
    from app.main import create_app

    token = issue_token("bench-admin@example.com", ["admin"])
    with TestClient(create_app(), headers=bearer(token)) as client:
        yield client


def member(email: str) -> dict[str, str]:
    """A non-admin user's bearer header with the scopes to read and run benchmarks."""
    return bearer(issue_token(email, ["plans:read", "benchmarks:run"], is_admin=False))


def expire_lease(job_id: str) -> None:
    """The agent holding the job went silent: its lease is in the past."""
    with Session(get_engine()) as session:
        job = session.get(BenchmarkJob, uuid.UUID(job_id))
        assert job is not None
        job.lease_expires_at = utcnow() - timedelta(seconds=1)
        session.add(job)
        session.commit()


def new_node(api: TestClient, name: str) -> tuple[str, str]:
    res = api.post("/api/v1/nodes", json={"name": name})
    assert res.status_code == 201, res.text
    return res.json()["id"], res.json()["token"]


def agent(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def row(size: int, time_us: float = 100.0) -> dict:
    return {
        "op": "all_reduce",
        "group": "all",
        "ranks": 2,
        "ranks_per_node": 2,
        "nodes": 1,
        "size_bytes": size,
        "time_us": time_us,
        "algbw_gbps": size / time_us / 1e3,
        "busbw_gbps": size / time_us / 1e3,
        "wrong": 0,
    }


def test_node_tokens_shown_once_stored_hashed_and_revocable(api: TestClient) -> None:
    node_id, token = new_node(api, "gpu-node-1")
    assert token.startswith("cpn_") and len(token) > 40
    with Session(get_engine()) as session:
        node = session.get(Node, uuid.UUID(node_id))
        assert node is not None
        assert node.token_hash == hashlib.sha256(token.encode()).hexdigest()
        assert node.token_prefix == token[:12] and token not in str(node.model_dump())
    listed = api.get("/api/v1/nodes").json()
    assert listed["count"] == 1 and "token" not in listed["data"][0] and listed["data"][0]["online"] is False

    reg = api.post(
        "/api/v1/agent/register",
        headers=agent(token),
        json={"hostname": "h1", "info": {"devices": [{"name": "NVIDIA H100 80GB HBM3"}], "torch": "2.5"}},
    )
    assert reg.status_code == 200 and reg.json()["name"] == "gpu-node-1" and reg.json()["lease_s"] > 0
    one = api.get(f"/api/v1/nodes/{node_id}").json()
    assert one["online"] is True and one["hostname"] == "h1" and one["info"]["torch"] == "2.5"

    bad = api.post("/api/v1/agent/heartbeat", headers=agent("cpn_" + "x" * 43))
    assert bad.status_code == 401 and bad.headers["WWW-Authenticate"].startswith("Bearer")
    assert api.post("/api/v1/agent/heartbeat").status_code == 401
    assert api.post("/api/v1/nodes", json={"name": "gpu-node-1"}).status_code == 422

    assert api.post(f"/api/v1/nodes/{node_id}/revoke").json()["revoked"] is True
    revoked = api.post("/api/v1/agent/heartbeat", headers=agent(token))
    assert revoked.status_code == 401 and "revoked" in revoked.json()["detail"]
    assert api.get("/api/v1/nodes/gpu-node-1").json()["online"] is False


def test_job_lifecycle_progress_results_and_events(api: TestClient) -> None:
    _, token = new_node(api, "n1")
    created = api.post("/api/v1/benchmarks", json=JOB)
    assert created.status_code == 202
    job_id = created.json()["id"]
    assert created.headers["Location"] == f"/api/v1/benchmarks/{job_id}"
    assert created.json()["status"] == "queued"

    claim = api.post("/api/v1/agent/claim", headers=agent(token))
    assert claim.status_code == 200 and claim.json()["id"] == job_id
    assert claim.json()["attempt"] == 1 and claim.json()["status"] == "running"
    assert api.post("/api/v1/agent/claim", headers=agent(token)).status_code == 204

    events = [
        {"event": "start", "total": 3},
        {"event": "row", "row": row(1024), "progress": 0.3333, "eta_s": 2.0},
        {"event": "log", "message": "measuring 2K"},
        {"event": "row", "row": row(2048), "progress": 0.6667, "eta_s": 1.0},
    ]
    prog = api.post(
        f"/api/v1/agent/jobs/{job_id}/progress", headers=agent(token), json={"attempt": 1, "events": events}
    )
    assert prog.status_code == 200 and prog.json() == {**prog.json(), "cancel": False, "progress": 0.6667}
    live = api.get(f"/api/v1/benchmarks/{job_id}").json()
    assert live["status"] == "running" and live["eta_s"] == 1.0
    assert [r["size_bytes"] for r in live["partial_rows"]] == [1024, 2048]
    assert live["log_tail"] == "measuring 2K\n"

    result = {"schema_version": 1, "status": "complete", "rows": [row(1024), row(2048), row(4096)]}
    done = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token),
        json={"attempt": 1, "status": "succeeded", "result": result},
    )
    assert done.status_code == 200 and done.json()["status"] == "succeeded" and done.json()["progress"] == 1.0
    final = api.get(f"/api/v1/benchmarks/{job_id}").json()
    assert len(final["result"]["rows"]) == 3 and final["finished_at"] is not None
    listing = api.get("/api/v1/benchmarks", params={"status": "succeeded"}).json()
    assert listing["count"] == 1 and listing["data"][0]["id"] == job_id

    with api.stream("GET", f"/api/v1/benchmarks/{job_id}/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        body = "".join(stream.iter_text())
    names = [line.split(": ", 1)[1] for line in body.splitlines() if line.startswith("event: ")]
    assert names == ["queued", "claimed", "start", "row", "log", "row", "completed", "end"]
    assert "id: " in body and '"size_bytes":2048' in body
    with api.stream("GET", f"/api/v1/benchmarks/{job_id}/events", headers={"Last-Event-ID": "0"}) as stream:
        assert "event: queued" in "".join(stream.iter_text())


def test_claims_are_atomic_under_concurrency(api: TestClient) -> None:
    """Four agents race for ten jobs: each job is claimed exactly once."""
    from app.services import jobs as job_service

    nodes = [new_node(api, f"racer-{i}")[0] for i in range(4)]
    for _ in range(10):
        assert api.post("/api/v1/benchmarks", json=JOB).status_code == 202
    claimed: list[tuple[str, str]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def race(node_id: str) -> None:
        try:
            while True:
                with Session(get_engine()) as session:
                    node = session.get(Node, uuid.UUID(node_id))
                    assert node is not None
                    job = job_service.claim_job(session, node)
                    if job is None:
                        return
                    with lock:
                        claimed.append((str(job.id), node_id))
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(claimed) == 10 and len({job for job, _ in claimed}) == 10
    with Session(get_engine()) as session:
        jobs = session.exec(select(BenchmarkJob)).all()
        assert all(j.status == "running" and j.attempt == 1 for j in jobs)


def test_expired_lease_requeues_and_fences_the_old_agent(api: TestClient) -> None:
    _, token_a = new_node(api, "crashy")
    _, token_b = new_node(api, "steady")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    assert api.post("/api/v1/agent/claim", headers=agent(token_a)).json()["attempt"] == 1
    with Session(get_engine()) as session:  # agent A went silent: its lease ran out
        job = session.get(BenchmarkJob, uuid.UUID(job_id))
        assert job is not None
        job.lease_expires_at = utcnow() - timedelta(seconds=1)
        session.add(job)
        session.commit()
    assert api.get(f"/api/v1/benchmarks/{job_id}").json()["status"] == "queued"
    second = api.post("/api/v1/agent/claim", headers=agent(token_b)).json()
    assert second["id"] == job_id and second["attempt"] == 2

    stale = api.post(
        f"/api/v1/agent/jobs/{job_id}/progress", headers=agent(token_a), json={"attempt": 1, "events": []}
    )
    assert stale.status_code == 409
    stale_done = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token_a),
        json={"attempt": 1, "status": "succeeded", "result": {"rows": []}},
    )
    assert stale_done.status_code == 409
    ok = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token_b),
        json={"attempt": 2, "status": "succeeded", "result": {"rows": [row(1024)]}},
    )
    assert ok.status_code == 200
    with Session(get_engine()) as session:
        kinds = [
            e.payload["event"]
            for e in session.exec(
                select(JobEvent).where(JobEvent.job_id == uuid.UUID(job_id)).order_by(JobEvent.id)
            ).all()
        ]
    assert kinds == ["queued", "claimed", "requeued", "claimed", "completed"]


def test_a_job_that_keeps_losing_its_lease_fails(api: TestClient) -> None:
    _, token = new_node(api, "flaky")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    for attempt in (1, 2, 3):
        assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["attempt"] == attempt
        with Session(get_engine()) as session:
            job = session.get(BenchmarkJob, uuid.UUID(job_id))
            assert job is not None
            job.lease_expires_at = utcnow() - timedelta(seconds=1)
            session.add(job)
            session.commit()
    final = api.get(f"/api/v1/benchmarks/{job_id}").json()
    assert final["status"] == "failed" and "3 attempts" in final["error"]
    assert api.post("/api/v1/agent/claim", headers=agent(token)).status_code == 204


def test_cancel_queued_and_running_jobs(api: TestClient) -> None:
    _, token = new_node(api, "n-cancel")
    queued = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    res = api.post(f"/api/v1/benchmarks/{queued}/cancel")
    assert res.status_code == 202 and res.json()["status"] == "cancelled"
    assert api.post(f"/api/v1/benchmarks/{queued}/cancel").status_code == 409

    running = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["id"] == running
    assert api.post(f"/api/v1/benchmarks/{running}/cancel").json()["cancel_requested"] is True
    held = {"jobs": [{"id": running, "attempt": 1}]}
    beat = api.post("/api/v1/agent/heartbeat", headers=agent(token), json=held).json()
    assert beat["cancel"] == [running]
    reply = api.post(
        f"/api/v1/agent/jobs/{running}/progress",
        headers=agent(token),
        json={"attempt": 1, "events": [{"event": "row", "row": row(1024), "progress": 0.5}]},
    )
    assert reply.json()["cancel"] is True
    done = api.post(
        f"/api/v1/agent/jobs/{running}/complete",
        headers=agent(token),
        json={"attempt": 1, "status": "cancelled", "result": {"status": "interrupted", "rows": [row(1024)]}},
    )
    body = done.json()
    assert (
        body["status"] == "cancelled"
        and body["result"]["status"] == "interrupted"
        and len(body["partial_rows"]) == 1
    )


def test_bad_job_requests(api: TestClient) -> None:
    bad = api.post(
        "/api/v1/benchmarks",
        json={
            "kind": "collectives",
            "params": {"ops": ["all_reduce", "nope"], "min_bytes": "1M", "max_bytes": "1K"},
        },
    )
    assert bad.status_code == 422
    locs = {tuple(d["loc"]) for d in bad.json()["detail"]}
    assert ("body", "params", "op") in locs and ("body", "params", "maxbytes") in locs
    assert api.post("/api/v1/benchmarks", json={"kind": "disk"}).status_code == 422
    unknown_model = api.post("/api/v1/benchmarks", json={"kind": "gemm", "params": {"model": "llama-9"}})
    assert unknown_model.status_code == 422 and "Llama-3-8B" in unknown_model.text
    model_job = api.post(
        "/api/v1/benchmarks", json={"kind": "gemm", "params": {"model": "llama-3-8b", "tp": 2}}
    )
    assert model_job.status_code == 202
    missing = api.post("/api/v1/benchmarks", json={**JOB, "target_node": "no-such-node"})
    assert missing.status_code == 404 and missing.json()["kind"] == "node"
    assert api.get(f"/api/v1/benchmarks/{uuid.uuid4()}").status_code == 404


def test_calibration_profiles_are_versioned(api: TestClient) -> None:
    _, token = new_node(api, "calib")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    api.post("/api/v1/agent/claim", headers=agent(token))
    rows = [row(2**p, 20 + 2**p / 5e4) for p in range(10, 24)]
    rows += [
        {"m": s, "n": s, "k": s, "dtype": "bf16", "median_tflops": 700 * s / (s + 400), "best_tflops": 0.0}
        for s in (512, 1024, 2048, 4096, 8192)
    ]
    api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token),
        json={"attempt": 1, "status": "succeeded", "result": {"status": "complete", "rows": rows}},
    )
    fit = {"job_id": job_id, "name": "lab-h100", "gpu": "H100-SXM"}
    refused = api.post("/api/v1/calibration/profiles", json=fit)  # best_tflops 0: fails acceptance
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "override_acceptance"]
    assert "gemm bf16" in refused.json()["detail"][0]["msg"]
    first = api.post("/api/v1/calibration/profiles", json={**fit, "override_acceptance": True})
    assert first.status_code == 201, first.text
    p1 = first.json()
    assert p1["report"]["acceptance"]["verdict"] == "fail" and p1["report"]["acceptance"]["overridden"]
    assert p1["version"] == 1 and p1["gpu_name"] == "H100-SXM"
    assert p1["collectives_error_after_pct"] < p1["collectives_error_before_pct"]
    assert p1["gemm_error_after_pct"] < 2.0
    assert p1["params"]["network"]["launch_overhead_s"] > 0 and "alpha_beta" in p1["params"]
    again = api.post(
        "/api/v1/calibration/profiles",
        json={"job_id": job_id, "name": "lab-h100", "override_acceptance": True},
    ).json()
    assert again["version"] == 2
    latest = api.get("/api/v1/calibration/profiles/lab-h100").json()
    assert latest["version"] == 2 and latest["report"]["collectives"]["rows"]
    assert api.get("/api/v1/calibration/profiles/lab-h100", params={"version": 1}).json()["id"] == p1["id"]
    assert api.get("/api/v1/calibration/profiles").json()["count"] == 2
    missing = api.get("/api/v1/calibration/profiles/lab-h10")
    assert missing.status_code == 404 and "lab-h100" in missing.json()["suggestions"]
    empty = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    assert api.post("/api/v1/calibration/profiles", json={"job_id": empty, "name": "x"}).status_code == 422

    from app.core.efficiency import HardwareProfile
    from app.services.calibration import get_hardware_profile

    with Session(get_engine()) as session:
        profile = get_hardware_profile(session, "lab-h100")
    assert isinstance(profile, HardwareProfile) and profile.version == "2" and profile.network is not None


def test_only_the_creator_or_an_admin_may_cancel_or_retry(api: TestClient) -> None:
    owner, other = member("owner@example.com"), member("other@example.com")
    job_id = api.post("/api/v1/benchmarks", json=JOB, headers=owner).json()["id"]
    assert api.get(f"/api/v1/benchmarks/{job_id}", headers=other).status_code == 200  # reads stay open

    refused = api.post(f"/api/v1/benchmarks/{job_id}/cancel", headers=other)
    assert refused.status_code == 403 and "creator or an admin" in refused.json()["detail"]
    assert api.get(f"/api/v1/benchmarks/{job_id}").json()["status"] == "queued"
    assert api.post(f"/api/v1/benchmarks/{job_id}/cancel", headers=owner).json()["status"] == "cancelled"

    assert api.post(f"/api/v1/benchmarks/{job_id}/retry", headers=other).status_code == 403
    retried = api.post(f"/api/v1/benchmarks/{job_id}/retry", headers=owner)
    assert retried.status_code == 202 and retried.json()["status"] == "queued"
    assert api.post(f"/api/v1/benchmarks/{job_id}/retry", headers=owner).status_code == 409  # not finished
    assert api.post(f"/api/v1/benchmarks/{job_id}/cancel").json()["status"] == "cancelled"  # an admin may


def test_each_claim_starts_an_empty_attempt_and_archives_the_last(api: TestClient) -> None:
    node_a, token_a = new_node(api, "first-node")
    node_b, token_b = new_node(api, "second-node")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    api.post("/api/v1/agent/claim", headers=agent(token_a))
    events = [{"event": "row", "row": row(1024)}, {"event": "log", "message": "attempt one"}]
    api.post(
        f"/api/v1/agent/jobs/{job_id}/progress", headers=agent(token_a), json={"attempt": 1, "events": events}
    )
    expire_lease(job_id)

    second = api.post("/api/v1/agent/claim", headers=agent(token_b)).json()
    assert second["attempt"] == 2 and second["partial_rows"] == [] and second["log_tail"] == ""
    assert [(a["attempt"], a["status"], a["node_id"], a["rows"]) for a in second["attempts"]] == [
        (1, "lost", node_a, 1),
        (2, "running", node_b, 0),
    ]
    stale = api.post(
        f"/api/v1/agent/jobs/{job_id}/progress", headers=agent(token_a), json={"attempt": 1, "events": events}
    )
    assert stale.status_code == 409
    done = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token_b),
        json={"attempt": 2, "status": "succeeded", "result": {"rows": [row(2048), row(4096)]}},
    ).json()
    assert [r["size_bytes"] for r in done["partial_rows"]] == [2048, 4096]
    assert [(a["status"], a["rows"]) for a in done["attempts"]] == [("lost", 1), ("succeeded", 2)]
    with Session(get_engine()) as session:
        archived = session.exec(select(JobAttempt).where(JobAttempt.attempt == 1)).one()
        assert archived.log_tail == "attempt one\n" and archived.partial_rows[0]["size_bytes"] == 1024
        tagged = session.exec(
            select(JobEvent).where(JobEvent.job_id == uuid.UUID(job_id)).order_by(JobEvent.id)
        ).all()
    assert [(e.payload["event"], e.attempt) for e in tagged] == [
        ("queued", 0),
        ("claimed", 1),
        ("row", 1),
        ("log", 1),
        ("requeued", 1),
        ("claimed", 2),
        ("completed", 2),
    ]


def test_a_retried_failed_job_runs_again_from_nothing(api: TestClient) -> None:
    _, token = new_node(api, "retry-node")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    api.post("/api/v1/agent/claim", headers=agent(token))
    failed = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token),
        json={"attempt": 1, "status": "failed", "result": {"rows": [row(1024)]}, "error": "NCCL timeout"},
    ).json()
    assert failed["status"] == "failed" and len(failed["partial_rows"]) == 1
    assert api.post(f"/api/v1/benchmarks/{job_id}/retry").status_code == 202
    again = api.post("/api/v1/agent/claim", headers=agent(token)).json()
    assert again["attempt"] == 2 and again["partial_rows"] == [] and again["error"] == ""
    assert again["result"] is None and again["attempts"][0]["error"] == "NCCL timeout"


def _finish(api: TestClient, token: str, job_id: str, attempt: int, status: str) -> None:
    rows = [row(2**p, 20 + 2**p / 5e4) for p in range(10, 20)]
    res = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token),
        json={"attempt": attempt, "status": status, "result": {"status": "complete", "rows": rows}},
    )
    assert res.status_code == 200, res.text


def _fit(api: TestClient, job_id: str) -> tuple[int, str]:
    res = api.post("/api/v1/calibration/profiles", json={"job_id": job_id, "name": "gate"})
    detail = res.json().get("detail")
    message = (
        " ".join(d["msg"] for d in detail if d["loc"] == ["body", "job_id"]) if res.status_code == 422 else ""
    )
    return res.status_code, message


def test_calibration_refuses_failed_jobs_and_rows_of_several_attempts(api: TestClient) -> None:
    node_a, token = new_node(api, "gate-node")
    failed = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    api.post("/api/v1/agent/claim", headers=agent(token))
    _finish(api, token, failed, 1, "failed")
    status, message = _fit(api, failed)
    assert status == 422 and "is failed: only a succeeded job" in message

    good = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    api.post("/api/v1/agent/claim", headers=agent(token))
    _finish(api, token, good, 1, "succeeded")
    assert _fit(api, good)[0] == 201

    with Session(get_engine()) as session:  # the succeeded attempt claims another node than the result
        record = session.exec(select(JobAttempt).where(JobAttempt.job_id == uuid.UUID(good))).one()
        other = session.exec(select(Node).where(Node.id != uuid.UUID(node_a))).first()
        record.node_id = None if other is None else other.id
        session.add(record)
        legacy = BenchmarkJob(
            kind="collectives", params={}, status="succeeded", attempt=2, result={"rows": []}
        )
        session.add(legacy)
        session.commit()
        legacy_id = str(legacy.id)
    status, message = _fit(api, good)
    assert status == 422 and "one attempt on one node" in message
    status, message = _fit(api, legacy_id)  # from before attempts were archived: rows may mix two runs
    assert status == 422 and "ran 2 attempts" in message


def test_event_stream_ends_a_job_whose_lease_ran_out(api: TestClient) -> None:
    """The SSE poll reads on the read-only view; an expired lease is still settled (written) once."""
    _, token = new_node(api, "silent")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    for _ in range(3):
        api.post("/api/v1/agent/claim", headers=agent(token))
        expire_lease(job_id)
    with api.stream("GET", f"/api/v1/benchmarks/{job_id}/events") as stream:
        body = "".join(stream.iter_text())
    assert body.rstrip().endswith('data: {"status": "failed"}')
    assert '"attempt":3' in body


def test_node_online_window_is_measured_against_an_injected_clock() -> None:
    from app.services import nodes as node_service

    seen = utcnow()
    node = Node(name="n", token_prefix="p", token_hash="h", last_heartbeat_at=seen)
    window = timedelta(seconds=node_service.online_window_s())
    assert node_service.is_online(node, now=seen + window)
    assert not node_service.is_online(node, now=seen + window + timedelta(microseconds=1))
    assert not node_service.is_online(Node(name="m", token_prefix="p", token_hash="g"), now=seen)


def test_a_result_with_wrong_elements_fails_its_job_and_is_never_fitted(api: TestClient) -> None:
    """An agent that reports success for rows with wrong elements (one without its own gate) is overruled."""
    _, token = new_node(api, "corrupting")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    api.post("/api/v1/agent/claim", headers=agent(token))
    rows = [row(1024), {**row(4096), "wrong": 20}]
    done = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token),
        json={"attempt": 1, "status": "succeeded", "result": {"status": "complete", "rows": rows}},
    ).json()
    assert done["status"] == "failed" and done["error"].startswith("20 wrong element(s) in 1 row(s)")
    assert [r["wrong"] for r in done["partial_rows"]] == [0, 20]  # kept for diagnosis
    status, message = _fit(api, job_id)
    assert status == 422 and "is failed" in message


class Clock:
    """The server's clock, moved by the test (the lease arithmetic reads app.services.jobs.utcnow)."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    from app.services import jobs as job_service

    injected = Clock()
    monkeypatch.setattr(job_service, "utcnow", injected)
    return injected


def _restart_agent_mid_job(api: TestClient, clock: Clock, name: str) -> tuple[str, str]:
    """Agent A claims a job and reports progress, then dies; agent B starts on the same node (same token)
    and heartbeats every 10 s, holding no run, for longer than the lease."""
    _, token = new_node(api, name)
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    register = {"hostname": name, "info": {}}
    lease = api.post("/api/v1/agent/register", headers=agent(token), json=register).json()["lease_s"]
    assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["attempt"] == 1
    progress = {"attempt": 1, "events": [{"event": "row", "row": row(1024), "progress": 0.5}]}
    assert api.post(f"/api/v1/agent/jobs/{job_id}/progress", headers=agent(token), json=progress).is_success
    api.post("/api/v1/agent/register", headers=agent(token), json=register)  # agent B
    for _ in range(int(lease // 10) + 1):
        clock.advance(10)
        beat = api.post("/api/v1/agent/heartbeat", headers=agent(token), json={"jobs": []})
        assert beat.status_code == 200 and beat.json()["cancel"] == []
    return job_id, token


def test_a_restarted_agent_never_renews_the_dead_runs_lease(api: TestClient, clock: Clock) -> None:
    job_id, token = _restart_agent_mid_job(api, clock, "restarted")
    job = api.get(f"/api/v1/benchmarks/{job_id}").json()
    assert job["status"] == "queued"  # the lease lapsed although the node kept heartbeating
    assert [(a["attempt"], a["status"], a["rows"]) for a in job["attempts"]] == [(1, "lost", 1)]
    again = api.post("/api/v1/agent/claim", headers=agent(token)).json()
    assert again["id"] == job_id and again["attempt"] == 2  # agent B runs it afresh
    stale = {"attempt": 1, "events": []}
    assert (
        api.post(f"/api/v1/agent/jobs/{job_id}/progress", headers=agent(token), json=stale).status_code == 409
    )


def test_cancelling_an_orphaned_job_reaches_cancelled(api: TestClient, clock: Clock) -> None:
    _, token = new_node(api, "orphan-cancel")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    api.post("/api/v1/agent/claim", headers=agent(token))  # its agent dies right after the claim
    assert api.post(f"/api/v1/benchmarks/{job_id}/cancel").json()["cancel_requested"] is True
    lease = api.post("/api/v1/agent/register", headers=agent(token), json={"hostname": "h", "info": {}})
    for _ in range(int(lease.json()["lease_s"] // 10) + 1):
        clock.advance(10)
        api.post("/api/v1/agent/heartbeat", headers=agent(token), json={"jobs": []})
    job = api.get(f"/api/v1/benchmarks/{job_id}").json()
    assert job["status"] == "cancelled" and job["finished_at"] is not None


def test_a_live_agents_heartbeat_renews_only_the_run_it_names(api: TestClient, clock: Clock) -> None:
    _, token = new_node(api, "alive")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    lease = api.post("/api/v1/agent/claim", headers=agent(token)).json()
    assert lease["attempt"] == 1
    mine = {"jobs": [{"id": job_id, "attempt": 1}]}
    for _ in range(12):  # two minutes of heartbeats naming the run: it stays running
        clock.advance(10)
        api.post("/api/v1/agent/heartbeat", headers=agent(token), json=mine)
    assert api.get(f"/api/v1/benchmarks/{job_id}").json()["status"] == "running"
    wrong_attempt = {"jobs": [{"id": job_id, "attempt": 2}]}
    for _ in range(7):
        clock.advance(10)
        api.post("/api/v1/agent/heartbeat", headers=agent(token), json=wrong_attempt)
    assert api.get(f"/api/v1/benchmarks/{job_id}").json()["status"] == "queued"


def test_check_jobs_keep_a_verdict_history_per_node(api: TestClient) -> None:
    from tests.bench.test_bench_acceptance import healthy_document

    no_gpu = api.post("/api/v1/benchmarks", json={"kind": "check", "params": {"nproc": 2}})
    assert no_gpu.status_code == 422 and ["body", "params", "gpu"] in [
        d["loc"] for d in no_gpu.json()["detail"]
    ]
    bad_gpu = api.post("/api/v1/benchmarks", json={"kind": "check", "params": {"gpu": "H999"}})
    assert bad_gpu.status_code == 422
    node_id, token = new_node(api, "checked")
    params = {"nproc": 2, "gpu": "H100-SXM", "fabric": "ib-ndr-8x400"}
    for scale in (1.0, 0.5):  # a healthy check, then one at half the GEMM rate and busbw
        job_id = api.post("/api/v1/benchmarks", json={"kind": "check", "params": params}).json()["id"]
        assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["id"] == job_id
        result = {"status": "complete", **healthy_document(scale, scale)}
        done = api.post(
            f"/api/v1/agent/jobs/{job_id}/complete",
            headers=agent(token),
            json={"attempt": 1, "status": "succeeded", "result": result},
        ).json()
        assert done["result"]["acceptance"]["verdict"] == ("pass" if scale == 1.0 else "fail")
    history = api.get(f"/api/v1/nodes/{node_id}/checks").json()
    assert history["count"] == 2
    assert [(c["verdict"], c["gpu"], c["status"]) for c in history["data"]] == [
        ("fail", "H100-SXM", "succeeded"),
        ("pass", "H100-SXM", "succeeded"),
    ]
    assert history["data"][0]["failed"][0].startswith("gemm bf16:") and history["data"][1]["failed"] == []


# --------------------------------------------------------------------------- who owns a calibration profile

CALIBRATION = {
    "gemm": {"sizes": [64], "dtypes": ["fp32"], "device": "cpu", "iters": 2, "warmup_iters": 1},
    "collectives": {"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "1K", "iters": 2},
    "nproc": 2,
}


def user_id_of(api: TestClient, headers: dict[str, str]) -> str:
    return str(api.get("/api/v1/auth/me", headers=headers).json()["user_id"])


def finished_job(api: TestClient, node_token: str, headers: dict[str, str], body: dict = JOB) -> str:
    """A job created by the caller of `headers`, claimed and completed with collective rows that fit."""
    created = api.post("/api/v1/benchmarks", json=body, headers=headers)
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    assert api.post("/api/v1/agent/claim", headers=agent(node_token)).json()["id"] == job_id
    _finish(api, node_token, job_id, 1, "succeeded")
    return job_id


def fit_as(api: TestClient, headers: dict[str, str] | None, job_id: str, name: str):  # type: ignore[no-untyped-def]
    return api.post("/api/v1/calibration/profiles", json={"job_id": job_id, "name": name}, headers=headers)


def test_a_profile_name_belongs_to_whoever_fitted_it_first(api: TestClient) -> None:
    """Bob can neither fit from Alice's job nor add a version to Alice's name (403, nothing stored); Alice and an
    admin may add versions, which stay Alice's; the owner is in the profile's public view."""
    _, token = new_node(api, "owned-node")
    alice, bob = member("alice-profile@example.com"), member("bob-profile@example.com")
    alices_job, bobs_job = finished_job(api, token, alice), finished_job(api, token, bob)

    first = fit_as(api, alice, alices_job, "alice-lab")
    assert first.status_code == 201, first.text
    assert first.json()["owner_id"] == user_id_of(api, alice)

    from_her_job = fit_as(api, bob, alices_job, "bob-lab")
    assert from_her_job.status_code == 403
    assert "belongs to another user: only its creator or an admin" in from_her_job.json()["detail"]
    under_her_name = fit_as(api, bob, bobs_job, "alice-lab")
    assert under_her_name.status_code == 403
    assert "calibration profile 'alice-lab' belongs to another user" in under_her_name.json()["detail"]
    latest = api.get("/api/v1/calibration/profiles/alice-lab", headers=bob).json()
    assert latest["version"] == 1 and latest["owner_id"] == user_id_of(api, alice)

    assert fit_as(api, alice, alices_job, "alice-lab").json()["version"] == 2
    by_admin = fit_as(api, None, bobs_job, "alice-lab")  # the admin of the `api` client, from anyone's job
    assert by_admin.status_code == 201 and by_admin.json()["version"] == 3
    assert by_admin.json()["owner_id"] == user_id_of(api, alice)  # the name stays hers
    bobs_own = fit_as(api, bob, bobs_job, " bob-lab ")
    assert bobs_own.status_code == 201 and bobs_own.json()["owner_id"] == user_id_of(api, bob)


def test_names_without_an_owner_are_versioned_by_admins_only(api: TestClient) -> None:
    """A profile fitted before profiles had owners (owner_id NULL) takes new versions from admins only."""
    from tests.services.test_profile_scenario import store_profile

    store_profile(400.0, name="legacy-lab")
    _, token = new_node(api, "legacy-node")
    bob = member("bob-legacy@example.com")
    bobs_job = finished_job(api, token, bob)
    refused = fit_as(api, bob, bobs_job, "legacy-lab")
    assert refused.status_code == 403 and "only an admin may add a version" in refused.json()["detail"]
    by_admin = fit_as(api, None, bobs_job, "legacy-lab")
    assert (
        by_admin.status_code == 201
        and by_admin.json()["version"] == 2
        and by_admin.json()["owner_id"] is None
    )


def test_a_calibration_job_naming_another_users_profile_is_refused_at_launch(api: TestClient) -> None:
    _, token = new_node(api, "launch-node")
    alice, bob = member("alice-launch@example.com"), member("bob-launch@example.com")
    assert fit_as(api, alice, finished_job(api, token, alice), "alice-launch-lab").status_code == 201
    queued = api.get("/api/v1/benchmarks").json()["count"]

    body = {"kind": "calibration", "params": {**CALIBRATION, "profile_name": "alice-launch-lab"}}
    refused = api.post("/api/v1/benchmarks", json=body, headers=bob)
    assert refused.status_code == 403 and "belongs to another user" in refused.json()["detail"]
    assert api.get("/api/v1/benchmarks").json()["count"] == queued  # nothing was queued
    assert api.post("/api/v1/benchmarks", json=body, headers=alice).status_code == 202
    assert api.post("/api/v1/benchmarks", json=body).status_code == 202  # an admin's
    mine = {"kind": "calibration", "params": {**CALIBRATION, "profile_name": "bob-launch-lab"}}
    assert api.post("/api/v1/benchmarks", json=mine, headers=bob).status_code == 202


def test_the_automatic_fit_runs_as_the_jobs_creator(api: TestClient) -> None:
    """A calibration job fits its profile_name as its creator: Alice's own name is fitted (hers); Bob's job,
    whose new name Alice took while it ran, is not fitted, and the refusal is a job event."""
    _, token = new_node(api, "auto-node")
    alice, bob = member("alice-auto@example.com"), member("bob-auto@example.com")
    hers = {"kind": "calibration", "params": {**CALIBRATION, "profile_name": "auto-lab"}}
    finished_job(api, token, alice, hers)
    fitted = api.get("/api/v1/calibration/profiles/auto-lab").json()
    assert fitted["version"] == 1 and fitted["owner_id"] == user_id_of(api, alice)

    alices_job = api.post("/api/v1/benchmarks", json=JOB, headers=alice).json()["id"]
    his = {"kind": "calibration", "params": {**CALIBRATION, "profile_name": "contested-lab"}}
    bobs_job = api.post("/api/v1/benchmarks", json=his, headers=bob).json()["id"]  # a new name: allowed
    assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["id"] == alices_job  # the oldest
    _finish(api, token, alices_job, 1, "succeeded")
    assert fit_as(api, alice, alices_job, "contested-lab").status_code == 201  # while Bob's job waits
    assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["id"] == bobs_job
    _finish(api, token, bobs_job, 1, "succeeded")
    assert api.get(f"/api/v1/benchmarks/{bobs_job}").json()["status"] == "succeeded"
    contested = api.get("/api/v1/calibration/profiles/contested-lab").json()
    assert contested["version"] == 1 and contested["owner_id"] == user_id_of(api, alice)
    with Session(get_engine()) as session:
        events = session.exec(select(JobEvent).where(JobEvent.job_id == uuid.UUID(bobs_job))).all()
    messages = [str(e.payload.get("message", "")) for e in events]
    assert any(m.startswith("calibration fit refused: calibration profile 'contested-lab'") for m in messages)


def test_the_hosts_a_job_ran_on_are_for_administrators(api: TestClient) -> None:
    """A node's host is shown to administrators only (its name to every reader): the job's result, its page and
    a calibration profile fitted from it carry no host names for other readers."""
    _, token = new_node(api, "rack7")
    runner = member("host-runner@example.com")
    job_id = api.post("/api/v1/benchmarks", json=JOB, headers=runner).json()["id"]
    claim = api.post("/api/v1/agent/claim", headers=agent(token))
    assert claim.status_code == 200
    result = {
        "schema_version": 1,
        "status": "complete",
        "rows": [row(1024)],
        "environment": {
            "hostname": "gpu-secret-host-17.corp.internal",
            "hostnames": ["gpu-secret-host-17.corp.internal"],
            "devices": [{"rank": 0, "host": "gpu-secret-host-17.corp.internal", "name": "H100"}],
            "torch": "2.13.0",
        },
    }
    done = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token),
        json={"attempt": 1, "status": "succeeded", "result": result},
    )
    # the agent's answer is the job as a reader sees it: its earlier attempts may name other nodes' hosts
    assert done.status_code == 200 and "gpu-secret-host-17" not in done.text
    reader = bearer(issue_token("host-reader@example.com", ["plans:read"], is_admin=False))
    for who in (reader, runner):
        seen = api.get(f"/api/v1/benchmarks/{job_id}", headers=who)
        assert seen.status_code == 200 and "gpu-secret-host-17" not in seen.text
        assert seen.json()["result"]["environment"] == {
            "torch": "2.13.0",
            "devices": [{"rank": 0, "name": "H100"}],
            "hosts": 1,
        }
        page = api.get(f"/benchmarks/jobs/{job_id}", headers=who)
        assert page.status_code == 200 and "gpu-secret-host-17" not in page.text and "1 host(s)" in page.text
    assert "gpu-secret-host-17" in api.get(f"/api/v1/benchmarks/{job_id}").text  # an administrator
    assert "gpu-secret-host-17" in api.get(f"/benchmarks/jobs/{job_id}").text


def test_a_profile_records_how_many_hosts_not_which() -> None:
    """Calibration profiles are read by every plans:read holder: they keep the count of hosts, not their names."""
    from app.calibration.profile import build_profile
    from app.catalog import find_gpu
    from app.catalog.fabrics import find_fabric

    env = {
        "hostname": "node-a",
        "hostnames": ["node-a", "node-b"],
        "devices": [{"rank": 0, "host": "node-a"}, {"rank": 1, "host": "node-b"}],
        "nccl": "2.27.7",
    }
    doc = {"rows": [row(2**20, 50.0)], "environment": env}
    params, _ = build_profile(doc, find_gpu("H100-SXM"), find_fabric("ib-ndr-8x400"))
    assert params["environment"]["hosts"] == 2 and params["environment"]["nccl"] == "2.27.7"
    assert "node-a" not in str(params)


def test_host_names_in_logs_errors_and_events_are_for_administrators(api: TestClient) -> None:
    """The agent forwards torchrun's and NCCL's error lines, which name hosts: the node's own host, NCCL's
    `host:pid:tid [rank]` prefix of another node, torch elastic's `host : …` summary. Readers who are not
    administrators get them masked in the log tail, the error, each attempt's error, the event stream and the
    page; administrators read them as written."""
    _, token = new_node(api, "rack9")
    registered = api.post(
        "/api/v1/agent/register",
        headers=agent(token),
        json={"hostname": "gpu-secret-9.corp.internal", "info": {}},
    )
    assert registered.status_code == 200, registered.text
    runner = member("log-runner@example.com")
    job_id = api.post("/api/v1/benchmarks", json=JOB, headers=runner).json()["id"]
    assert api.post("/api/v1/agent/claim", headers=agent(token)).status_code == 200
    lines = [
        "RuntimeError: NCCL error on gpu-secret-9: unhandled system error",
        "other-node-3:4711:4790 [5] NCCL WARN NET/IB : Got completion with error 12",
        "  host      : other-node-4.corp.internal",
    ]
    events = [{"event": "log", "message": m} for m in lines]
    progress = api.post(
        f"/api/v1/agent/jobs/{job_id}/progress", headers=agent(token), json={"attempt": 1, "events": events}
    )
    assert progress.status_code == 200, progress.text
    failed = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token),
        json={
            "attempt": 1,
            "status": "failed",
            "error": "rank 3 on gpu-secret-9.corp.internal exited with 1",
        },
    )
    assert failed.status_code == 200, failed.text
    secrets = ("gpu-secret-9", "other-node-3", "other-node-4")

    reader = bearer(issue_token("log-reader@example.com", ["plans:read"], is_admin=False))
    for who in (reader, runner):
        seen = api.get(f"/api/v1/benchmarks/{job_id}", headers=who).json()
        assert not any(s in json.dumps(seen) for s in secrets), seen
        assert seen["log_tail"].splitlines() == [
            "RuntimeError: NCCL error on <host>: unhandled system error",
            "<host>:4711:4790 [5] NCCL WARN NET/IB : Got completion with error 12",
            "  host      : <host>",
        ]
        assert seen["error"] == "rank 3 on <host> exited with 1" == seen["attempts"][0]["error"]
        with api.stream("GET", f"/api/v1/benchmarks/{job_id}/events", headers=who) as stream:
            body = "".join(stream.iter_text())
        assert "NCCL WARN" in body and not any(s in body for s in secrets)
        page = api.get(f"/benchmarks/jobs/{job_id}", headers=who)
        assert page.status_code == 200 and "NCCL WARN" in page.text
        assert not any(s in page.text for s in secrets)

    admin_view = api.get(f"/api/v1/benchmarks/{job_id}").json()  # an administrator
    assert "gpu-secret-9" in admin_view["error"] and "other-node-3:4711" in admin_view["log_tail"]
    with api.stream("GET", f"/api/v1/benchmarks/{job_id}/events") as stream:
        assert "other-node-4.corp.internal" in "".join(stream.iter_text())
    assert "other-node-3:4711" in api.get(f"/benchmarks/jobs/{job_id}").text


def test_redact_hosts_matches_whole_names_only() -> None:
    """A host name is masked where it stands as a name, not inside a longer word or name."""
    from app.benchproto.hosts import redact_hosts

    names = {"gpu1.corp", "node-7"}
    assert redact_hosts("on gpu1.corp and gpu1, not gpu10 or node-70 or xnode-7", names) == (
        "on <host> and <host>, not gpu10 or node-70 or xnode-7"
    )
    assert redact_hosts({"m": ["node-7:1:2 [0] NCCL INFO", 3]}, set()) == {
        "m": ["<host>:1:2 [0] NCCL INFO", 3]
    }
    assert redact_hosts("hostname: a.b.c\nthe host is fine", set()) == "hostname: <host>\nthe host is fine"


def test_an_agent_claiming_a_retried_job_reads_no_other_nodes_host_names(api: TestClient) -> None:
    """The claim answers the agent with the job, earlier attempts included; their errors and logs name the hosts
    of the nodes that ran them, which are for administrators only (a node is an operator's machine, not one)."""
    _, token_a = new_node(api, "first-rack")
    api.post(
        "/api/v1/agent/register",
        headers=agent(token_a),
        json={"hostname": "gpu-secret-a.corp.internal", "info": {}},
    )
    _, token_b = new_node(api, "second-rack")
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    assert api.post("/api/v1/agent/claim", headers=agent(token_a)).json()["attempt"] == 1
    api.post(
        f"/api/v1/agent/jobs/{job_id}/progress",
        headers=agent(token_a),
        json={
            "attempt": 1,
            "events": [{"event": "log", "message": "NCCL error on gpu-secret-a.corp.internal"}],
        },
    )
    failed = api.post(
        f"/api/v1/agent/jobs/{job_id}/complete",
        headers=agent(token_a),
        json={
            "attempt": 1,
            "status": "failed",
            "error": "rank 0 on gpu-secret-a.corp.internal exited with 1",
        },
    )
    assert failed.status_code == 200, failed.text
    assert api.post(f"/api/v1/benchmarks/{job_id}/retry").status_code == 202
    claimed = api.post("/api/v1/agent/claim", headers=agent(token_b))
    assert claimed.status_code == 200 and claimed.json()["attempt"] == 2
    assert "gpu-secret-a" not in claimed.text
    assert claimed.json()["attempts"][0]["error"] == "rank 0 on <host> exited with 1"
    # an administrator still reads them as written
    assert "gpu-secret-a" in api.get(f"/api/v1/benchmarks/{job_id}").json()["attempts"][0]["error"]
