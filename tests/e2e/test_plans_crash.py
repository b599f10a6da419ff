"""A server killed (SIGKILL) in the middle of plan writes leaves no half-written plan: every plan has
revisions 1..latest_revision with no gap, and every write the server acknowledged is there."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from app.db import make_engine
from app.models.plans import Plan, PlanRevision
from tests.auth_support import bearer, issue_token
from tests.conftest import start_live_server
from tests.plans_support import small_scenario

WRITERS = 6


def _owner_headers() -> dict[str, str]:
    """One plan owner's token in the test database (every write needs a credential)."""
    return bearer(issue_token("crash-owner@example.com", ["plans:write"], is_admin=False))


@pytest.mark.slow
def test_kill_mid_write_leaves_whole_plans(db_url: str, tmp_path: Path) -> None:
    headers = _owner_headers()
    server = start_live_server(db_url, tmp_path)
    acknowledged: list[tuple[str, int]] = []  # (plan id, revision) the server answered 2xx for
    stop = threading.Event()
    try:
        first = httpx.post(
            server.url + "/api/v1/plans",
            json={"name": "crash", "scenario": small_scenario()},
            headers=headers,
            timeout=30,
        )
        assert first.status_code == 201, first.text
        plan_id = first.json()["id"]
        acknowledged.append((plan_id, 1))

        def writer(i: int) -> None:
            with httpx.Client(timeout=10, headers=headers) as http:
                n = 0
                while not stop.is_set():
                    n += 1
                    try:
                        if n % 3 == 0:  # new plans too: plan row and revision 1 in one transaction
                            r = http.post(
                                server.url + "/api/v1/plans",
                                json={"name": f"crash {i}.{n}", "scenario": small_scenario(tp=4, dp=4)},
                            )
                        else:
                            r = http.post(
                                f"{server.url}/api/v1/plans/{plan_id}/revisions",
                                json={"notes": f"{i}.{n}", "scenario": small_scenario(micro_batch=1 + n % 2)},
                            )
                    except httpx.HTTPError:
                        return  # the server is gone
                    if r.status_code in (200, 201):
                        body = r.json()
                        acknowledged.append((body["id"], body["current"]["revision"]))

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        # Poll for state: kill once 15 writes are acknowledged (or every writer gave up). The 300 s guard
        # only stops a hung run; it never decides the result on a slow machine.
        guard = time.monotonic() + 300
        while len(acknowledged) < 15 and any(t.is_alive() for t in threads) and time.monotonic() < guard:
            time.sleep(0.05)
        server.process.kill()  # SIGKILL: no shutdown handlers, requests cut mid-flight
        server.process.wait(timeout=10)
        stop.set()
        for t in threads:
            t.join(timeout=15)
    finally:
        stop.set()
        server.stop()

    assert len(acknowledged) >= 15
    engine = make_engine(db_url)
    try:
        with Session(engine) as session:
            plans = session.exec(select(Plan)).all()
            for plan in plans:
                numbers = sorted(
                    session.exec(select(PlanRevision.revision).where(PlanRevision.plan_id == plan.id)).all()
                )
                assert numbers == list(range(1, plan.latest_revision + 1)), plan.name
            orphans = session.exec(
                select(func.count())
                .select_from(PlanRevision)
                .where(
                    PlanRevision.plan_id.not_in(select(Plan.id))  # type: ignore[attr-defined]
                )
            ).one()
            assert orphans == 0
            stored = {(str(r.plan_id), r.revision) for r in session.exec(select(PlanRevision)).all()}
    finally:
        engine.dispose()
    assert set(acknowledged) <= stored  # nothing the server confirmed was lost


@pytest.mark.slow
def test_fifty_http_clients_saving_revisions_lose_nothing(db_url: str, tmp_path: Path) -> None:
    """50 clients at once, each its own HTTP connection to the real server, revising one plan."""
    headers = _owner_headers()
    server = start_live_server(db_url, tmp_path, {"CLUSTERPLAN_RATE_LIMIT_PER_MINUTE": "100000"})
    try:
        created = httpx.post(
            server.url + "/api/v1/plans",
            json={"name": "fifty", "scenario": small_scenario()},
            headers=headers,
            timeout=30,
        )
        assert created.status_code == 201, created.text
        plan_id = created.json()["id"]
        barrier = threading.Barrier(50)
        answers: list[int] = []

        def client(i: int) -> None:
            body: dict[str, object] = {"notes": f"client {i}"}
            if i % 2:
                body["scenario"] = small_scenario(micro_batch=1 + i % 4)
            with httpx.Client(timeout=120, headers=headers) as http:
                barrier.wait()
                r = http.post(f"{server.url}/api/v1/plans/{plan_id}/revisions", json=body)
            assert r.status_code == 201, r.text
            answers.append(r.json()["current"]["revision"])

        threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert sorted(answers) == list(range(2, 52))
        listing = httpx.get(
            f"{server.url}/api/v1/plans/{plan_id}/revisions",
            params={"limit": 100},
            headers=headers,
            timeout=30,
        )
        data = listing.json()["data"]
        assert [r["revision"] for r in data] == list(range(51, 0, -1))
        notes = {
            httpx.get(
                f"{server.url}/api/v1/plans/{plan_id}/revisions/{n}", headers=headers, timeout=30
            ).json()["notes"]
            for n in range(2, 52)
        }
        assert notes == {f"client {i}" for i in range(50)}
    finally:
        server.stop()
