"""Annotated dependency aliases shared by API and web routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Query, Request
from sqlmodel import Session

from app.db import get_engine, get_read_engine
from app.settings import Settings, get_settings

READ_METHODS = frozenset({"GET", "HEAD"})


async def request_session(request: Request) -> AsyncIterator[Session]:
    """One session per request: the read-only engine view for GET/HEAD, the read-write engine otherwise.

    GET and HEAD change nothing, so on SQLite their transactions start with a deferred BEGIN and never wait
    for the write lock (app/db.py); every other method keeps BEGIN IMMEDIATE. The dependency is async, so
    creating the session and closing it afterwards run on the event loop rather than needing a free thread
    of the pool that runs sync routes: closing only returns the connection to the pool (a rollback of a
    transaction left open, if any), and the request no longer holds a connection while waiting for a thread.
    """
    engine = get_read_engine() if request.method in READ_METHODS else get_engine()
    session = Session(engine)
    try:
        yield session
    finally:
        session.close()


async def read_session() -> AsyncIterator[Session]:
    """A session on the read-only engine view whatever the method: for POST routes that compute and store
    nothing (e.g. /api/v1/estimate), so on SQLite they never take the write lock."""
    session = Session(get_read_engine())
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(request_session)]
ReadSessionDep = Annotated[Session, Depends(read_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
# The plan comparison's threshold for results, on the API and the compare page (default
# app.services.plans.SAME_WITHIN_PCT).
SameWithinPct = Annotated[
    float,
    Query(
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="results moving by at most this many per cent count as the same",
    ),
]
