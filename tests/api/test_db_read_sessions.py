"""Every route that writes nothing reads through the read-only engine view.

On SQLite the read-write session starts with BEGIN IMMEDIATE and holds the write lock until the request ends;
a planner search on it stopped every plan save for its whole duration (10 planner clients: saves fell from
112/s to 2.7/s). So:
- the walk: every unsafe-method route (POST/PUT/PATCH/DELETE) of the app whose dependency tree opens the
  read-write session (`app.deps.request_session`) must need a credential that may write (a write scope,
  a user account, a node token) or be a sign-in route listed below; a public or read-scope calculation on the
  read-write session fails here, whoever adds it;
- the lock: with another connection holding SQLite's write lock and no busy wait, the public calculations
  still answer (anonymously: routes behind a token are left to the walk, so the check does not depend on how
  the auth layer looks tokens up).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.auth.deps import route_requirement
from app.db import get_engine
from app.deps import read_session, request_session
from tests.auth_support import app_with
from tests.conftest import configure_app_database
from tests.paths import ROOT

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WRITE_SCOPES = frozenset({"plans:write", "benchmarks:run", "admin"})
# Public routes that do write (and why): the sign-in throttle and the session version.
PUBLIC_WRITES = {
    ("POST", "/api/v1/auth/login"): "records failed attempts (login throttle)",
    ("POST", "/api/v1/auth/logout"): "bumps the user's session version",
}
# Computations: each must read through the read-only view (or open no session at all).
CALCULATIONS = {
    ("POST", "/api/v1/estimate"),
    ("POST", "/api/v1/plan"),
    ("POST", "/api/v1/plan/sizes"),
    ("POST", "/api/v1/cost/run"),
    ("POST", "/api/v1/cost/tco"),
    ("POST", "/api/v1/cost/breakeven"),
    ("POST", "/api/v1/cost/epoch"),
    ("POST", "/api/v1/cost/spot"),
    ("POST", "/api/v1/goodput"),
    ("POST", "/api/v1/storage"),
    ("POST", "/api/v1/network/collective"),
    ("POST", "/api/v1/network/scaling"),
    ("POST", "/api/v1/network/bom"),
}


def _calls(dependant: Any) -> Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)


def session_kind(route: APIRoute) -> str:
    calls = set(_calls(route.dependant))
    if request_session in calls:
        return "read-write"
    return "read-only" if read_session in calls else "none"


def unsafe_operations() -> list[tuple[str, str, APIRoute]]:
    operations = []
    for context in iter_route_contexts(app_with().routes):
        route = context.original_route
        if isinstance(route, APIRoute):
            operations.extend(
                (m, str(context.path), route) for m in sorted(context.methods or []) if m in UNSAFE
            )
    return operations


def may_write(route: APIRoute) -> bool:
    requirement = route_requirement(route.dependant)
    return bool(requirement.scopes & WRITE_SCOPES) or requirement.user or requirement.node


def test_only_routes_that_may_write_open_the_read_write_session() -> None:
    operations = unsafe_operations()
    assert len(operations) > 40  # the walk found the app's routes
    offenders = [
        f"{method} {path}"
        for method, path, route in operations
        if session_kind(route) == "read-write"
        and not may_write(route)
        and (method, path) not in PUBLIC_WRITES
    ]
    assert offenders == [], "use ReadSessionDep (app/deps.py) for routes that store nothing"


def test_every_calculation_reads_through_the_read_only_view() -> None:
    kinds = {(method, path): session_kind(route) for method, path, route in unsafe_operations()}
    assert set(kinds) >= CALCULATIONS
    assert {op: kinds[op] for op in CALCULATIONS if kinds[op] == "read-write"} == {}
    assert kinds[("POST", "/api/v1/plan")] == "read-only"
    assert kinds[("POST", "/api/v1/cost/run")] == "read-only"


@pytest.fixture
def write_lock_held(sqlite_app_url: str) -> Iterator[None]:
    """Another connection holds SQLite's write lock; the app's connections give up at once instead of waiting."""
    configure_app_database(sqlite_app_url)
    engine = get_engine()
    engine.dispose()

    @event.listens_for(engine, "connect")
    def _no_busy_wait(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA busy_timeout = 0")

    holder = sqlite3.connect(sqlite_app_url.split("///", 1)[1], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()
        event.remove(engine, "connect", _no_busy_wait)
        engine.dispose()


def _scenario() -> dict[str, Any]:
    return json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())


def _bodies() -> dict[str, dict[str, Any]]:
    scenario = _scenario()
    varied = dict(
        scenario, layout=dict(scenario["layout"], global_batch=scenario["layout"]["global_batch"] * 2)
    )
    option = {"usd_per_gpu_hour": 6.88}
    return {
        "/api/v1/estimate": varied,  # a batch no other test asks for: a cache miss that reads the catalog
        "/api/v1/cost/run": {"scenario": scenario, "options": [option]},
        "/api/v1/cost/tco": {
            "onprem": {"nodes": 16},
            "gpu": "H100",
            "network_bom": {"fabric": "ib-ndr-8x400"},
            "options": [option],
        },
        "/api/v1/goodput": {"num_gpus": 64, "preset": "llama3-405b"},
        "/api/v1/storage": {"scenario": scenario},
        "/api/v1/network/bom": {"nodes": 16, "fabric": "ib-ndr-8x400"},
        "/api/v1/network/collective": {
            "op": "allreduce",
            "message_bytes": 2**30,
            "cluster": {"gpu": "H100", "nodes": 2},
        },
        "/api/v1/network/scaling": {"scenario": scenario, "gpu_counts": [64, 128]},
    }


def test_calculations_answer_while_the_write_lock_is_held(write_lock_held: None) -> None:
    begins: list[str] = []

    def _record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.upper().startswith("BEGIN"):
            begins.append(statement.upper())

    event.listen(get_engine(), "before_cursor_execute", _record)
    try:
        client = TestClient(app_with(), client=("203.0.113.71", 5000))
        answers = {path: client.post(path, json=body) for path, body in _bodies().items()}
    finally:
        event.remove(get_engine(), "before_cursor_execute", _record)
    assert {path: (r.status_code, r.text[:200]) for path, r in answers.items() if r.status_code != 200} == {}
    assert "BEGIN IMMEDIATE" not in begins
