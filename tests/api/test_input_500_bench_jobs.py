"""Malformed benchmark input is a 422 naming the field, never a 500, and writes nothing: job params of the wrong
type, a non-ASCII Last-Event-ID, and agent reports whose progress, eta_s or result rows are not what they say."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlmodel import Session, select

from app.db import get_engine
from app.models.benchmarks import BenchmarkJob, JobEvent
from tests.auth_support import bearer, issue_token

JOB = {
    "kind": "collectives",
    "params": {"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "4K", "nproc": 2},
}


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    """The real app on a fresh database (SQLite and PostgreSQL), called as an administrator."""
    from app.main import create_app

    with TestClient(create_app(), headers=bearer(issue_token("input-500@example.com", ["admin"]))) as client:
        yield client


def count(model: Any) -> int:
    with Session(get_engine()) as session:
        return int(session.exec(select(func.count()).select_from(model)).one())


def fields(response: Any) -> set[str]:
    return {".".join(str(part) for part in d["loc"][1:]) for d in response.json()["detail"]}


@pytest.mark.parametrize(
    ("kind", "params", "field"),
    [
        ("gemm", {"gemm": [1, 2]}, "params.gemm"),
        ("gemm", {"gemm": None}, "params.gemm"),
        ("calibration", {"gemm": [1, 2]}, "params.gemm"),
        ("collectives", {"collectives": "x"}, "params.collectives"),
        ("calibration", {"collectives": "x"}, "params.collectives"),
        ("collectives", {"ops": [1]}, "params.ops"),
        ("calibration", {"ops": [1]}, "params.ops"),
        ("calibration", {"collectives": {"ops": [1]}}, "params.collectives.ops"),
    ],
)
def test_params_of_the_wrong_type_are_422_on_their_field(
    client: TestClient, kind: str, params: dict[str, Any], field: str
) -> None:
    before = count(BenchmarkJob)
    r = client.post("/api/v1/benchmarks", json={"kind": kind, "params": params})
    assert r.status_code == 422, r.text
    assert field in fields(r)
    assert count(BenchmarkJob) == before


def test_a_sweep_of_millions_of_sizes_is_refused(client: TestClient) -> None:
    before = count(BenchmarkJob)
    params = {**JOB["params"], "max_bytes": "1M", "step_factor": 1.0000001}
    r = client.post("/api/v1/benchmarks", json={"kind": "collectives", "params": params})
    assert r.status_code == 422, r.text
    assert "params.stepfactor" in fields(r) and "64 message sizes" in r.text
    assert count(BenchmarkJob) == before


def new_node(api: TestClient, name: str) -> str:
    res = api.post("/api/v1/nodes", json={"name": name})
    assert res.status_code == 201, res.text
    return str(res.json()["token"])


def claimed_job(api: TestClient) -> tuple[str, dict[str, str]]:
    """A queued job claimed by a new node: (job id, the node's agent headers)."""
    agent = bearer(new_node(api, "input-500-node"))
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    claim = api.post("/api/v1/agent/claim", headers=agent)
    assert claim.status_code == 200 and claim.json()["id"] == job_id
    return job_id, agent


def stored(job_id: str) -> tuple[BenchmarkJob, int]:
    """The job's row and how many events it has."""
    with Session(get_engine()) as session:
        job = session.get(BenchmarkJob, uuid.UUID(job_id))
        assert job is not None
        events = session.exec(select(func.count()).where(JobEvent.job_id == job.id)).one()
        return job, int(events)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"event": "progress", "progress": "abc"}, "events.1.progress"),
        ({"event": "progress", "progress": [1]}, "events.1.progress"),
        ({"event": "progress", "eta_s": "x"}, "events.1.eta_s"),
    ],
)
def test_progress_that_is_not_a_number_is_422_and_stores_nothing(
    api: TestClient, event: dict[str, Any], field: str
) -> None:
    job_id, agent = claimed_job(api)
    job, events = stored(job_id)
    report = {"attempt": 1, "events": [{"event": "log", "message": "first"}, event]}
    r = api.post(f"/api/v1/agent/jobs/{job_id}/progress", headers=agent, json=report)
    assert r.status_code == 422, r.text
    assert fields(r) == {field}
    after, events_after = stored(job_id)
    assert (after.progress, after.eta_s, after.log_tail, events_after) == (0.0, None, "", events)
    assert after.lease_expires_at == job.lease_expires_at


def test_an_event_may_carry_any_key(api: TestClient) -> None:
    job_id, agent = claimed_job(api)
    report = {"attempt": 1, "events": [{"event": "log", "message": "hi", "job": 1, "session": "s"}]}
    r = api.post(f"/api/v1/agent/jobs/{job_id}/progress", headers=agent, json=report)
    assert r.status_code == 200, r.text
    with Session(get_engine()) as session:
        logged = session.exec(select(JobEvent).where(JobEvent.job_id == uuid.UUID(job_id))).all()
    assert {"event": "log", "message": "hi", "job": 1, "session": "s"} in [e.payload for e in logged]


@pytest.mark.parametrize("rows", [5, "abc", [1, 2], [{"best_tflops": 1.0}]])
def test_result_rows_that_are_not_rows_are_422_and_leave_the_job_running(api: TestClient, rows: Any) -> None:
    job_id, agent = claimed_job(api)
    _, events = stored(job_id)
    done = {"attempt": 1, "status": "failed", "result": {"rows": rows}}
    r = api.post(f"/api/v1/agent/jobs/{job_id}/complete", headers=agent, json=done)
    assert r.status_code == 422, r.text
    assert fields(r) == {"result.rows"}
    job, events_after = stored(job_id)
    assert (job.status, job.result, job.partial_rows, events_after) == ("running", None, [], events)


def finished_job(api: TestClient) -> str:
    job_id = api.post("/api/v1/benchmarks", json=JOB).json()["id"]
    assert api.post(f"/api/v1/benchmarks/{job_id}/cancel").json()["status"] == "cancelled"
    return str(job_id)


def event_names(api: TestClient, job_id: str, last_event_id: bytes) -> list[str]:
    """The events the job's stream sends after `last_event_id`, sent as raw bytes through httpx's ASGI transport:
    TestClient re-encodes header values as UTF-8, so b"\xb2" would reach the app as "Â²", not "²"."""

    async def get() -> str:
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            headers = {**api.headers, "Last-Event-ID": last_event_id}
            response = await client.get(f"/api/v1/benchmarks/{job_id}/events", headers=headers)
            assert response.status_code == 200, response.text
            return response.text

    body = asyncio.run(get())
    return [line.split(": ", 1)[1] for line in body.splitlines() if line.startswith("event: ")]


def test_a_last_event_id_that_is_not_ascii_digits_is_ignored(api: TestClient) -> None:
    job_id = finished_job(api)
    assert event_names(api, job_id, b"\xb2") == ["queued", "cancelled", "end"]
    assert event_names(api, job_id, b"1") == ["cancelled", "end"]
    assert event_names(api, job_id, b"9" * 18) == ["end"]  # past every event id: clamped, nothing to replay
