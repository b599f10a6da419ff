"""A per-caller cap on CPU-heavy requests in flight: planner searches, size sweeps, estimate computations.

One search costs up to a second of a core (app/api/routes/layout_search.py) and the server has a handful of
cores, so a single caller running many at once takes the whole machine: in a measurement before this cap, one
read-only token with 30 parallel searches held every concurrency slot and /healthz took 25.5 s. Each caller
(app/hooks/callers.py: a verified user, else the client address) may have `settings.cpu_requests_per_caller`
(default 2: a browser tab plus one script, or the builder's replaced htmx request still finishing) such requests
in flight; one more is answered 429 with `Retry-After: 1` (about one search's duration) before any work.

The heavy requests are listed in HEAVY_ROUTES and held by `InFlightCapMiddleware`; the estimate route, whose
cache hits cost microseconds, holds a slot only around a computation (`hold`).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from app.hooks.callers import VerifiedTokens, caller_key

# Seconds a refused caller is told to wait: about one planner search (the docstring above).
RETRY_AFTER_S = 1
DETAIL = "too many CPU-heavy requests of yours in flight; retry in 1 s"


def _builder_planner_mode(scope: Scope) -> bool:
    """The plan builder page runs a full planner search when its query has mode=planner."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return "planner" in query.get("mode", [])


def _always(_scope: Scope) -> bool:
    return True


# (method, path) → whether this request runs the planner.
HEAVY_ROUTES: dict[tuple[str, str], Callable[[Scope], bool]] = {
    ("POST", "/api/v1/layout-search"): _always,
    ("POST", "/api/v1/layout-search/sizes"): _always,
    ("POST", "/api/v1/plan"): _always,  # the deprecated aliases of the two above
    ("POST", "/api/v1/plan/sizes"): _always,
    ("GET", "/plans/new"): _builder_planner_mode,
}


class InFlightCap:
    """At most `per_key` holders per key at once; 0 disables. Thread-safe (held on the loop, freed anywhere)."""

    def __init__(self, per_key: int) -> None:
        self.per_key = per_key
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def try_acquire(self, key: str) -> bool:
        if self.per_key <= 0:
            return True
        with self._lock:
            held = self._counts.get(key, 0)
            if held >= self.per_key:
                return False
            self._counts[key] = held + 1
            return True

    def release(self, key: str) -> None:
        if self.per_key <= 0:
            return
        with self._lock:
            left = self._counts.get(key, 0) - 1
            if left > 0:
                self._counts[key] = left
            else:
                self._counts.pop(key, None)

    def in_flight(self, key: str) -> int:
        with self._lock:
            return self._counts.get(key, 0)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())


def refused() -> JSONResponse:
    return JSONResponse({"detail": DETAIL}, status_code=429, headers={"Retry-After": str(RETRY_AFTER_S)})


def is_heavy(scope: Scope) -> bool:
    check = HEAVY_ROUTES.get((scope.get("method", ""), scope.get("path", "")))
    return check is not None and check(scope)


class InFlightCapMiddleware:
    def __init__(self, app: ASGIApp, cap: InFlightCap, verified: VerifiedTokens, settings: Any) -> None:
        self.app = app
        self.cap = cap
        self.verified = verified
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.cap.per_key <= 0 or not is_heavy(scope):
            await self.app(scope, receive, send)
            return
        key = await caller_key(HTTPConnection(scope), self.settings, self.verified)
        if not self.cap.try_acquire(key):
            await refused()(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.cap.release(key)


@asynccontextmanager
async def hold(request: Request) -> AsyncIterator[None]:
    """Hold one of the caller's slots around a computation inside a route; 429 when none is free."""
    cap: InFlightCap | None = getattr(request.app.state, "inflight_cap", None)
    if cap is None:
        yield
        return
    key = await caller_key(request, request.app.state.settings, request.app.state.verified_tokens)
    if not cap.try_acquire(key):
        raise HTTPException(status_code=429, detail=DETAIL, headers={"Retry-After": str(RETRY_AFTER_S)})
    try:
        yield
    finally:
        cap.release(key)


def install_cap(app: FastAPI, verified: VerifiedTokens) -> None:
    """Called by app/hooks/ratelimit.py, between the rate limits and the concurrency limit."""
    settings = app.state.settings
    cap = app.state.inflight_cap = InFlightCap(settings.cpu_requests_per_caller)
    app.user_middleware.append(
        Middleware(InFlightCapMiddleware, cap=cap, verified=verified, settings=settings)
    )
