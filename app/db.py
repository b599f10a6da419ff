"""Database engine and sessions. SQLite by default, PostgreSQL (psycopg 3) via CLUSTERPLAN_DATABASE_URL.

Two views of one engine (one connection pool):

- `get_engine()`: the read-write engine. On SQLite every transaction starts with `BEGIN IMMEDIATE`, which takes
  the write lock up front, so read-then-write transactions (e.g. "next revision number = latest + 1") serialise
  instead of failing with SQLITE_BUSY when two of them try to upgrade their read locks at once.
- `get_read_engine()`: the same pool with the execution option `clusterplan_readonly=True`; on SQLite its
  transactions start with a plain (deferred) `BEGIN`, so readers never queue behind the write lock (in WAL mode
  they read a consistent snapshot while a writer works). Used for GET/HEAD requests and for every POST that
  computes without storing (app/deps.py `ReadSessionDep`).
- `get_health_engine()`: a separate one-connection engine for /healthz with short timeouts, so the liveness
  probe answers (503 if the database is down) within the container's health-check timeout even when the main
  pool is exhausted or SQLite's write lock is held.

The pool is sized above the concurrency limit in app/hooks/ratelimit.py, so a request admitted by that limit
never waits for a connection held by a request that is itself waiting to be admitted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from app.settings import get_settings

# Connections kept open, and extra ones opened under bursts (closed again when returned). The sum (50) is well
# above MAX_CONCURRENT_REQUESTS in app/hooks/ratelimit.py plus the auth hook's and metrics' own short sessions
# (docs/constants.md#database-pool).
POOL_SIZE = 20
MAX_OVERFLOW = 30
POOL_TIMEOUT_S = 30
READONLY_OPTION = "clusterplan_readonly"
# /healthz: seconds to get a connection and to run `SELECT 1`. The Dockerfile's HEALTHCHECK allows 5 s
# (--timeout=5s, urlopen timeout 4 s); 2 s leaves room for the HTTP round trip on a loaded machine
# (docs/constants.md#health-timeout).
HEALTH_TIMEOUT_S = 2
# One writer at a time per process on SQLite, queued on a lock rather than on SQLite's busy handler: its
# retries sleep up to 100 ms each (sqlite3_busy_timeout's schedule, sqlite3 source `sqliteDefaultBusyCallback`),
# so a newcomer overtakes a long waiter and, with 10 concurrent savers, the p99 save grew to ~5 s while the
# median stayed ~0.5 s (docs/performance.md).
_SQLITE_WRITERS = threading.Lock()


def normalise_url(url: str) -> str:
    """Accept plain postgresql:// URLs and use the psycopg 3 driver for them."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    memory = False
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        memory = not path or path == ":memory:"
        if not memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    if not memory:  # an in-memory SQLite database lives in one connection (SingletonThreadPool): no sizing
        kwargs.update(pool_size=POOL_SIZE, max_overflow=MAX_OVERFLOW, pool_timeout=POOL_TIMEOUT_S)
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            # pysqlite's implicit transactions are turned off; SQLAlchemy's "begin" hook below issues BEGIN.
            dbapi_conn.isolation_level = None
            # WAL: readers never block the writer; foreign keys are off by default in SQLite.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            if conn.get_execution_options().get(READONLY_OPTION):
                # Deferred: takes a read snapshot at the first SELECT and never waits for the write lock.
                conn.exec_driver_sql("BEGIN")
            else:
                # BEGIN IMMEDIATE takes the write lock up front so read-then-write transactions serialise.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def make_health_engine(url: str) -> Engine:
    """One pooled connection (plus one spare) with short connect, pool and statement timeouts."""
    url = normalise_url(url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("sqlite"):
        # `SELECT 1` takes no lock; the timeout bounds opening the file.
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": HEALTH_TIMEOUT_S}
        if url.split("///", 1)[-1] in ("", ":memory:"):
            return create_engine(url, **kwargs)
    elif url.startswith("postgresql"):
        kwargs["connect_args"] = {
            "connect_timeout": HEALTH_TIMEOUT_S,
            "options": f"-c statement_timeout={HEALTH_TIMEOUT_S * 1000}",
        }
    return create_engine(url, pool_size=1, max_overflow=1, pool_timeout=HEALTH_TIMEOUT_S, **kwargs)


@lru_cache(maxsize=8)
def _health_engine_for(url: str) -> Engine:
    return make_health_engine(url)


def get_health_engine() -> Engine:
    """The /healthz engine for the configured database (its own small pool, never the requests' pool)."""
    return _health_engine_for(get_settings().resolved_database_url)


def read_view(engine: Engine) -> Engine:
    """The same engine and pool, with transactions marked read-only (deferred BEGIN on SQLite)."""
    return engine.execution_options(**{READONLY_OPTION: True})


@lru_cache
def get_engine() -> Engine:
    return make_engine(get_settings().resolved_database_url)


def get_read_engine() -> Engine:
    """The read-only view of `get_engine()` (cached with it, so both always share one pool)."""
    return _read_view_of(get_engine())


@lru_cache(maxsize=8)
def _read_view_of(engine: Engine) -> Engine:
    return read_view(engine)


def is_read_only(session: Session) -> bool:
    bind = session.get_bind()
    return bool(bind.get_execution_options().get(READONLY_OPTION))


def get_session() -> Iterator[Session]:
    """A read-write session (scripts, CLI, background work); requests use app.deps.SessionDep."""
    with Session(get_engine()) as session:
        yield session


def get_read_session() -> Iterator[Session]:
    with Session(get_read_engine()) as session:
        yield session


@contextmanager
def write_turn(session: Session) -> Iterator[None]:
    """Wrap a short write transaction (from its first statement to its commit): on SQLite, writers of this
    process take turns on a lock before `BEGIN IMMEDIATE`; elsewhere it does nothing. On an error the
    transaction is rolled back before the turn passes on."""
    if session.get_bind().dialect.name != "sqlite":
        yield
        return
    with _SQLITE_WRITERS:
        try:
            yield
        except BaseException:
            session.rollback()
            raise
