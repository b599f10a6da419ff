"""Database layer under concurrency: pool sized above the in-flight cap; on SQLite, read sessions start with a
deferred BEGIN (no write lock), write sessions with BEGIN IMMEDIATE; requests pick the view by HTTP method."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select
from starlette.requests import Request

from app.db import MAX_OVERFLOW, POOL_SIZE, get_engine, is_read_only, make_engine, read_view
from app.deps import read_session, request_session
from app.hooks.ratelimit import MAX_CONCURRENT_REQUESTS
from app.models.catalog import GPUEntry


def _begins(engine: Any) -> list[str]:
    seen: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.upper().startswith("BEGIN"):
            seen.append(statement.upper())

    return seen


def _no_busy_wait(engine: Any) -> None:
    """Fail at once instead of waiting 30 s when a lock is taken (after the engine's own connect hook)."""

    @event.listens_for(engine, "connect")
    def _busy_timeout(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA busy_timeout = 0")


def test_sqlite_reads_begin_deferred_and_writes_immediate(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'begin.db'}")
    begins = _begins(engine)
    with Session(read_view(engine)) as session:
        session.exec(text("SELECT 1")).all()  # type: ignore[call-overload]
    with Session(engine) as session:
        session.exec(text("SELECT 1")).all()  # type: ignore[call-overload]
    assert begins == ["BEGIN", "BEGIN IMMEDIATE"]
    engine.dispose()


def test_sqlite_reader_does_not_wait_for_a_writer_holding_the_lock(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'lock.db'}")
    _no_busy_wait(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    writer = engine.connect()
    writer.exec_driver_sql("INSERT INTO t VALUES (2)")  # BEGIN IMMEDIATE: holds the write lock, uncommitted
    try:
        with read_view(engine).connect() as reader:  # deferred BEGIN: reads the last committed snapshot
            assert reader.exec_driver_sql("SELECT x FROM t").scalars().all() == [1]
        with pytest.raises(OperationalError, match="locked"), engine.connect() as other_writer:
            other_writer.exec_driver_sql("SELECT x FROM t")  # BEGIN IMMEDIATE cannot get the lock
    finally:
        writer.rollback()
        writer.close()
        engine.dispose()


def test_pool_is_larger_than_the_in_flight_cap(db_url: str) -> None:
    pool: Any = get_engine().pool
    if db_url.startswith("sqlite"):
        assert pool.size() == POOL_SIZE
    assert pool.size() + MAX_OVERFLOW > MAX_CONCURRENT_REQUESTS + 10
    assert POOL_SIZE > MAX_CONCURRENT_REQUESTS


def _request(method: str) -> Request:
    return Request({"type": "http", "method": method, "path": "/", "headers": [], "query_string": b""})


async def _session_for(dependency: Any, *args: Any) -> tuple[bool, int, bool]:
    gen = dependency(*args)
    session = await gen.__anext__()
    read_only = is_read_only(session)
    count = len(session.exec(select(GPUEntry)).all())
    with pytest.raises(StopAsyncIteration):
        await gen.__anext__()
    return read_only, count, session.in_transaction()


@pytest.mark.parametrize(
    ("method", "read_only"), [("GET", True), ("HEAD", True), ("POST", False), ("DELETE", False)]
)
def test_request_session_picks_the_view_by_method(db_url: str, method: str, read_only: bool) -> None:
    got_read_only, gpus, still_open = asyncio.run(_session_for(request_session, _request(method)))
    assert got_read_only is read_only
    assert gpus >= 10  # the seeded catalog is readable through either view, on both databases
    assert not still_open  # closed by the dependency's own cleanup


def test_read_session_is_read_only_for_any_method(db_url: str) -> None:
    got_read_only, gpus, still_open = asyncio.run(_session_for(read_session))
    assert got_read_only and gpus >= 10 and not still_open
