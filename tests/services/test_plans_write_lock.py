"""A plan save evaluates its scenario before it takes SQLite's write lock, never while holding it.

The evaluation is the slow part of a save (tens to hundreds of ms of CPU). Holding the write lock through it
made every other writer queue behind it; here another connection must be able to take the lock (BEGIN
IMMEDIATE with no busy wait) while the evaluation runs, on both the create and the revise path.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from app.services import planning
from tests.plans_support import small_scenario


@pytest.fixture
def lock_probe(sqlite_app_url: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Wrap planning.evaluate: during each call, try to take the write lock from a second connection."""
    outcomes: list[str] = []
    real = planning.evaluate
    path = sqlite_app_url.split("///", 1)[1]

    def probing(*args: Any, **kwargs: Any) -> Any:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            outcomes.append("free")
        except sqlite3.OperationalError as exc:
            outcomes.append(str(exc))
        finally:
            other.close()
        return real(*args, **kwargs)

    monkeypatch.setattr(planning, "evaluate", probing)
    return outcomes


def test_create_and_revise_evaluate_outside_the_write_lock(client: Any, lock_probe: list[str]) -> None:
    created = client.post("/api/v1/plans", json={"name": "lock probe", "scenario": small_scenario()})
    assert created.status_code == 201, created.text
    revised = client.post(
        f"/api/v1/plans/{created.json()['id']}/revisions", json={"scenario": small_scenario(micro_batch=2)}
    )
    assert revised.status_code == 201, revised.text
    assert revised.json()["current"]["revision"] == 2
    assert lock_probe == ["free", "free"]


def test_write_turn_rolls_back_and_passes_the_turn_on_an_error(sqlite_app_url: str) -> None:
    from sqlmodel import Session

    from app import db
    from app.models.plans import Plan

    engine = db.make_engine(sqlite_app_url)
    try:
        with Session(engine) as session:
            with pytest.raises(RuntimeError), db.write_turn(session):
                session.add(Plan(name="never stored"))
                session.flush()  # BEGIN IMMEDIATE: the write lock is held inside the turn
                raise RuntimeError("boom")
            assert not session.in_transaction()  # rolled back before the turn passed on
            assert db._SQLITE_WRITERS.acquire(blocking=False)  # and the turn is free again
            db._SQLITE_WRITERS.release()
            other = sqlite3.connect(sqlite_app_url.split("///", 1)[1], timeout=0, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")  # SQLite's own lock is free too
            other.execute("ROLLBACK")
            other.close()
    finally:
        engine.dispose()
