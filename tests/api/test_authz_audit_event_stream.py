"""Authorisation audit: a benchmark job's event stream (GET /api/v1/benchmarks/{id}/events) outlives the moment it
was authorised, so it must stop serving a caller whose credential no longer holds: a token revoked, an account
deactivated, or an administrator demoted (host names are for administrators) while the stream is open.

The stream is read through httpx's ASGI transport, which hands back the body once the stream ends: a stream that
kept serving the revoked caller would never end (the job is still queued), and the test would time out on it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.auth.tokens import hash_token, revoke_token
from app.auth.users import find_user, set_active
from app.db import get_engine
from app.models.auth import ApiToken
from app.models.benchmarks import BenchmarkJob, Node
from app.services import jobs as job_service
from tests.auth_support import bearer, issue_token, unthrottled_client

STREAM_WAIT_S = 10.0  # the stream polls every 0.5 s: a stream still open after this never ends
MARK = "written-after-the-change"


@pytest.fixture
def api(sqlite_app_url: str) -> Iterator[TestClient]:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    yield unthrottled_client()


def _queued_job(api: TestClient) -> str:
    runner = bearer(issue_token("audit-stream-runner@example.com", ["benchmarks:run"], is_admin=False))
    r = api.post("/api/v1/benchmarks", json={"kind": "gemm"}, headers=runner)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def _cancel(job_id: str) -> None:
    """Leave no queued job behind in the shared database."""
    with Session(get_engine()) as session:
        job_service.cancel_job(session, uuid.UUID(job_id), None, True)


def _log_event(job_id: str, message: str) -> None:
    with Session(get_engine()) as session:
        job = session.get(BenchmarkJob, uuid.UUID(job_id))
        assert job is not None
        job_service.add_event(session, job, "log", message=message)
        session.commit()


def _stream_after(api: TestClient, job_id: str, token: str, change: Callable[[], None]) -> str:
    """The body of the job's event stream opened with `token`, `change` made once the stream is open, then an event
    logged; fails when the stream has not ended STREAM_WAIT_S later."""

    async def run() -> str:
        transport = httpx.ASGITransport(app=api.app, client=("203.0.113.5", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as client:
            request = asyncio.create_task(
                client.get(f"/api/v1/benchmarks/{job_id}/events", headers=bearer(token))
            )
            await asyncio.sleep(1.0)  # the stream is open and has sent the job's first events
            assert not request.done(), (await request).text
            await asyncio.to_thread(change)
            await asyncio.to_thread(_log_event, job_id, MARK)
            try:
                response = await asyncio.wait_for(request, STREAM_WAIT_S)
            except TimeoutError:
                pytest.fail("the event stream kept serving a caller whose credential no longer holds")
            assert response.status_code == 200, response.text
            return response.text

    return asyncio.run(run())


def _revoke(token: str) -> Callable[[], None]:
    def change() -> None:
        with Session(get_engine()) as session:
            row = session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).one()
            revoke_token(session, row)

    return change


def _deactivate(email: str) -> Callable[[], None]:
    def change() -> None:
        with Session(get_engine()) as session:
            user = find_user(session, email)
            assert user is not None
            set_active(session, user, False)

    return change


def test_a_token_revoked_while_its_stream_is_open_gets_no_further_event(api: TestClient) -> None:
    job_id = _queued_job(api)
    token = issue_token("audit-stream-revoked@example.com", ["plans:read"], is_admin=False)
    try:
        body = _stream_after(api, job_id, token, _revoke(token))
    finally:
        _cancel(job_id)
    assert "event: queued" in body and MARK not in body


def test_an_account_deactivated_while_its_stream_is_open_gets_no_further_event(api: TestClient) -> None:
    job_id = _queued_job(api)
    email = f"audit-stream-leaver-{uuid.uuid4().hex[:6]}@example.com"
    token = issue_token(email, ["plans:read"], is_admin=False)
    try:
        body = _stream_after(api, job_id, token, _deactivate(email))
    finally:
        _cancel(job_id)
    assert "event: queued" in body and MARK not in body


def test_an_administrator_demoted_while_the_stream_is_open_no_longer_sees_host_names(api: TestClient) -> None:
    """Host names in a job's text are for administrators: once the account is no longer one, the open stream
    masks them as it does for every other reader (the stream goes on: the caller may still read jobs)."""
    job_id = _queued_job(api)
    host = f"gpu-host-{uuid.uuid4().hex[:6]}.cluster.internal"
    with Session(get_engine()) as session:
        node = Node(
            name=f"audit-node-{uuid.uuid4().hex[:6]}",
            token_prefix="cpn_audit",
            token_hash=uuid.uuid4().hex,
            hostname=host,
        )
        session.add(node)
        session.commit()
        job = session.get(BenchmarkJob, uuid.UUID(job_id))
        assert job is not None
        job.target_node_id = node.id
        session.add(job)
        session.commit()
    email = f"audit-stream-admin-{uuid.uuid4().hex[:6]}@example.com"
    token = issue_token(email, ["admin"], is_admin=True)

    def demote_then_cancel() -> None:
        with Session(get_engine()) as session:
            user = find_user(session, email)
            assert user is not None
            user.is_admin = False
            session.add(user)
            session.commit()
        _log_event(job_id, f"{MARK} on {host}")
        _cancel(job_id)  # a finished job: the stream ends after its last events

    body = _stream_after(api, job_id, token, demote_then_cancel)
    assert f"{MARK} on" in body and host not in body
