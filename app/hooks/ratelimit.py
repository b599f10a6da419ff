"""Rate limits: an in-process token bucket per caller for /api, and a stricter one for sign-in.

Keys: an API token (by its hash) or a signed-in session (by user id) gets its own bucket; everything else is
keyed by client address. The local user of a loopback-only server (the first-run path) is not limited.
Sign-in attempts are limited per client address here and per e-mail address in the login routes, whatever
the caller. Over the limit: 429 with Retry-After (whole seconds). Buckets live in this process: with
several uvicorn workers each worker counts on its own (the effective limit is workers × the setting).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth import sessions

LOGIN_PATHS = frozenset({"/api/v1/auth/login", "/login"})
MAX_BUCKETS = 100_000
# Every client address also has a wider bucket, so rotating made-up tokens buys no extra requests.
PER_ADDRESS_FACTOR = 5


@dataclass
class _Bucket:
    tokens: float
    updated: float


class TokenBucketLimiter:
    """`per_minute` requests per key per minute, bursts up to `per_minute`; thread-safe."""

    def __init__(self, per_minute: int, clock: Any = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate_per_s = per_minute / 60.0
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def acquire(self, key: str) -> float:
        """Take one token; 0.0 when allowed, else the seconds until a token is available."""
        if not self.enabled:
            return 0.0
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= MAX_BUCKETS:
                    self._prune(now)
                bucket = self._buckets[key] = _Bucket(tokens=self.capacity, updated=now)
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.updated) * self.rate_per_s)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate_per_s

    def _prune(self, now: float) -> None:
        """Forget buckets that have refilled completely (they behave exactly like new ones)."""
        full_after_s = self.capacity / self.rate_per_s
        for key in [k for k, b in self._buckets.items() if now - b.updated >= full_after_s]:
            del self._buckets[key]
        if len(self._buckets) >= MAX_BUCKETS:  # under a flood of distinct keys: start over
            self._buckets.clear()


def too_many_requests(retry_after_s: float, what: str) -> JSONResponse:
    seconds = max(1, math.ceil(retry_after_s))
    return JSONResponse(
        {"detail": f"too many {what}; retry in {seconds} s"},
        status_code=429,
        headers={"Retry-After": str(seconds)},
    )


def caller_key(conn: HTTPConnection, secret_key: str) -> str:
    authorization = conn.headers.get("authorization", "")
    if authorization:
        return "token:" + hashlib.sha256(authorization.encode()).hexdigest()[:32]
    session = sessions.read_session(conn, secret_key)
    if session is not None:
        return f"user:{session.user_id}"
    return f"ip:{conn.client.host if conn.client else '-'}"


class RateLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        api: TokenBucketLimiter,
        per_address: TokenBucketLimiter,
        login: TokenBucketLimiter,
        settings: Any,
    ) -> None:
        self.app = app
        self.api = api
        self.per_address = per_address
        self.login = login
        self.settings = settings

    def _local_user(self, conn: HTTPConnection) -> bool:
        return (
            self.settings.allow_anonymous_loopback
            and sessions.is_loopback_address(self.settings.host)
            and sessions.is_direct_loopback(conn)
            and "authorization" not in conn.headers
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        conn = HTTPConnection(scope)
        if path in LOGIN_PATHS and scope.get("method") == "POST":
            wait = self.login.acquire(f"ip:{conn.client.host if conn.client else '-'}")
            if wait > 0:
                await too_many_requests(wait, "sign-in attempts")(scope, receive, send)
                return
        elif path.startswith("/api/") and not self._local_user(conn):
            wait = self.api.acquire(caller_key(conn, self.settings.secret_key))
            if wait == 0:
                wait = self.per_address.acquire(f"ip:{conn.client.host if conn.client else '-'}")
            if wait > 0:
                await too_many_requests(wait, "requests")(scope, receive, send)
                return
        await self.app(scope, receive, send)


# Requests being worked on at once (the rest wait their turn on the event loop, costing nothing). Kept below
# the database pool (5 + 10 overflow) and far below the 40 threads that run sync routes: otherwise, under load,
# every thread can end up waiting for a connection or SQLite's write lock held by requests that need a thread
# to finish — a deadlock that lasts until the 30 s pool/busy timeout (see docs/performance.md).
MAX_CONCURRENT_REQUESTS = 12


class ConcurrencyLimitMiddleware:
    """At most `limit` requests between arrival and the start of their response; static files bypass it.

    The slot is released when the response starts, so long-lived streams (server-sent events) hold none.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_CONCURRENT_REQUESTS) -> None:
        self.app = app
        self.limit = limit
        self._slots: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.limit <= 0 or scope.get("path", "").startswith("/static/"):
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        slots = self._slots
        await slots.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                slots.release()

        async def send_releasing(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            await self.app(scope, receive, send_releasing)
        finally:
            release()


def install(app: FastAPI) -> None:
    settings = app.state.settings
    api = TokenBucketLimiter(settings.rate_limit_per_minute)
    per_address = TokenBucketLimiter(settings.rate_limit_per_minute * PER_ADDRESS_FACTOR)
    login = TokenBucketLimiter(settings.login_rate_limit_per_minute)
    # The login routes also limit per e-mail address with this limiter (keys "email:…").
    app.state.login_limiter = login
    app.state.api_limiter = api
    # Appended = inside the logging and metrics middleware, so 429s are logged and counted.
    app.user_middleware.append(
        Middleware(RateLimitMiddleware, api=api, per_address=per_address, login=login, settings=settings)
    )
    # Then the concurrency limit: time spent waiting for a slot still shows in request logs and metrics.
    app.user_middleware.append(Middleware(ConcurrencyLimitMiddleware, limit=MAX_CONCURRENT_REQUESTS))
