"""Authorisation audit: a calibration job fits its `profile_name` on behalf of its creator when an agent completes
it (app.services.jobs.creator_fitter). An account deactivated while its job waited or ran no longer acts: the job
still finishes (its measurements are kept), but no profile version is fitted in the deactivated user's name, and
the refusal is a job event, as for any refused fit. A profile name resolves to its latest version in everyone's
estimates and plans, so a fit made for a removed account would change what every other user's calculations use."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.auth.users import find_user, set_active
from app.db import get_engine
from app.models.benchmarks import JobEvent
from tests.api.test_bench_jobs_api import CALIBRATION, _finish, agent, member, new_node
from tests.auth_support import bearer, issue_token


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    """The real app, called as an administrator (an admin API token on every request), on each database."""
    from app.main import create_app

    token = issue_token("audit-bench-admin@example.com", ["admin"])
    with TestClient(create_app(), headers=bearer(token)) as client:
        yield client


def _messages(job_id: str) -> list[str]:
    with Session(get_engine()) as session:
        events = session.exec(select(JobEvent).where(JobEvent.job_id == uuid.UUID(job_id))).all()
    return [str(e.payload.get("message", "")) for e in events]


def test_a_deactivated_creators_calibration_job_fits_no_profile(api: TestClient) -> None:
    _, token = new_node(api, "audit-leaver-node")
    email = "audit-leaver@example.com"
    leaver = member(email)
    body = {"kind": "calibration", "params": {**CALIBRATION, "profile_name": "leaver-lab"}}
    job_id = api.post("/api/v1/benchmarks", json=body, headers=leaver).json()["id"]
    assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["id"] == job_id

    with Session(get_engine()) as session:  # the account is deactivated while its job runs
        user = find_user(session, email)
        assert user is not None
        set_active(session, user, False)
    _finish(api, token, job_id, 1, "succeeded")

    assert api.get(f"/api/v1/benchmarks/{job_id}").json()["status"] == "succeeded"
    assert api.get("/api/v1/calibration/profiles/leaver-lab").status_code == 404
    assert any(m.startswith("calibration fit refused:") for m in _messages(job_id)), _messages(job_id)


def test_an_active_creators_calibration_job_is_still_fitted(api: TestClient) -> None:
    _, token = new_node(api, "audit-stayer-node")
    stayer = member("audit-stayer@example.com")
    body = {"kind": "calibration", "params": {**CALIBRATION, "profile_name": "stayer-lab"}}
    job_id = api.post("/api/v1/benchmarks", json=body, headers=stayer).json()["id"]
    assert api.post("/api/v1/agent/claim", headers=agent(token)).json()["id"] == job_id
    _finish(api, token, job_id, 1, "succeeded")
    fitted = api.get("/api/v1/calibration/profiles/stayer-lab")
    assert fitted.status_code == 200 and fitted.json()["version"] == 1
