"""Rate limits (the `limits` library) for /api and sign-in, and the cap on requests worked on at once.

Rate limits: `settings.rate_limit_per_minute` requests per caller per minute on /api, and five times that per
client address whoever the callers are; `settings.login_rate_limit_per_minute` sign-in posts per address.
Callers are keyed by app/hooks/callers.py: a verified user, else the client address, so made-up tokens share
their sender's address budget. The counting is `limits`' moving window in its in-process memory storage: with several uvicorn workers each worker counts on its own (the effective limit is workers × the
setting). Over a limit: 429 with Retry-After (whole seconds).

Concurrency: at most `MAX_CONCURRENT_REQUESTS` requests between arrival and the start of their response;
/healthz and static files never wait for a slot (docs/architecture.md, "Rate limiting and concurrency").
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.hooks.callers import VerifiedTokens, address_key, caller_key
from app.hooks.inflight import install_cap

LOGIN_PATHS = frozenset({"/api/v1/auth/login", "/login"})
# Every client address also has a wider bucket, so many verified callers behind one address (a NAT, a CI
# farm) are still bounded as a whole.
PER_ADDRESS_FACTOR = 5
# Paths that bypass the concurrency limit: the liveness probe must answer while every slot is busy (the
# Dockerfile's HEALTHCHECK gives it 5 s), and static files are served from memory-mapped files, not the app.
UNLIMITED_PATHS = frozenset({"/healthz"})
UNLIMITED_PREFIXES = ("/static/",)


class RateLimiter:
    """`per_minute` hits per key in any 60 s (moving window); 0 disables. Thread-safe.

    The moving window (limits' `MovingWindowRateLimiter`) keeps the time of each hit of the last minute, so the
    limit is exact over any 60 s: no double burst at a fixed window's edge, and no allowance from the rounding
    of the sliding-window counter, which weights the previous window's count by its overlap and rounds down
    (four hits in one second passed a limit of three when the first fell before a window edge). Memory is one
    entry per hit of the last minute, bounded by the limit per key.
    """

    def __init__(self, per_minute: int, storage: MemoryStorage | None = None, name: str = "api") -> None:
        self.item = RateLimitItemPerMinute(per_minute, namespace=name) if per_minute > 0 else None
        self._strategy = MovingWindowRateLimiter(storage or MemoryStorage())

    @property
    def enabled(self) -> bool:
        return self.item is not None

    def acquire(self, key: str) -> float:
        """Count one hit; 0.0 when allowed, else the seconds until the key may try again."""
        if self.item is None or self._strategy.hit(self.item, key):
            return 0.0
        reset_at = self._strategy.get_window_stats(self.item, key).reset_time
        return max(reset_at - time.time(), 1.0)


def too_many_requests(retry_after_s: float, what: str) -> JSONResponse:
    seconds = max(1, math.ceil(retry_after_s))
    return JSONResponse(
        {"detail": f"too many {what}; retry in {seconds} s"},
        status_code=429,
        headers={"Retry-After": str(seconds)},
    )


class RateLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        api: RateLimiter,
        per_address: RateLimiter,
        login: RateLimiter,
        verified: VerifiedTokens,
        settings: Any,
    ) -> None:
        self.app = app
        self.api = api
        self.per_address = per_address
        self.login = login
        self.verified = verified
        self.settings = settings

    async def _wait(self, conn: HTTPConnection, path: str, method: str) -> tuple[float, str]:
        """Seconds to wait (0: go ahead) and what was counted."""
        if path in LOGIN_PATHS and method == "POST":
            return self.login.acquire(address_key(conn, self.settings)), "sign-in attempts"
        if not path.startswith("/api/"):
            return 0.0, ""
        wait = self.api.acquire(await caller_key(conn, self.settings, self.verified))
        if wait == 0:
            wait = self.per_address.acquire(address_key(conn, self.settings))
        return wait, "requests"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        wait, what = await self._wait(HTTPConnection(scope), scope.get("path", ""), scope.get("method", ""))
        if wait > 0:
            await too_many_requests(wait, what)(scope, receive, send)
            return
        await self.app(scope, receive, send)


# Requests being worked on at once (the rest wait their turn on the event loop, costing nothing). Kept below
# the database pool (app/db.py: 20 + 30 overflow) and far below the 40 threads that run sync routes:
# otherwise, under load, every thread can end up waiting for a connection or SQLite's write lock held by
# requests that need a thread to finish (docs/performance.md; docs/constants.md#concurrency-limit).
MAX_CONCURRENT_REQUESTS = 12


def bypasses_concurrency_limit(path: str) -> bool:
    return path in UNLIMITED_PATHS or path.startswith(UNLIMITED_PREFIXES)


class Slots:
    """The shared state of one app's concurrency limit: a semaphore made on first use (inside the event
    loop), and how many requests hold a slot or wait for one (observable: tests poll it, never sleep)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.waiting = 0
        self._semaphore: asyncio.Semaphore | None = None

    async def acquire(self) -> None:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.limit)
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        self.held += 1

    def release(self) -> None:
        assert self._semaphore is not None
        self.held -= 1
        self._semaphore.release()


class ConcurrencyLimitMiddleware:
    """At most `limit` requests between arrival and the start of their response; see UNLIMITED_PATHS.

    The slot is released when the response starts, so long-lived streams (server-sent events) hold none.
    """

    def __init__(
        self, app: ASGIApp, limit: int = MAX_CONCURRENT_REQUESTS, slots: Slots | None = None
    ) -> None:
        self.app = app
        self.slots = slots or Slots(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or self.slots.limit <= 0 or bypasses_concurrency_limit(path):
            await self.app(scope, receive, send)
            return
        slots = self.slots
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
    storage = MemoryStorage()  # one store; each limiter's namespace keeps its keys apart
    api = RateLimiter(settings.rate_limit_per_minute, storage, "api")
    per_address = RateLimiter(settings.rate_limit_per_minute * PER_ADDRESS_FACTOR, storage, "address")
    login = RateLimiter(settings.login_rate_limit_per_minute, storage, "login")
    verified = VerifiedTokens()
    # The login routes also limit per e-mail address with this limiter (keys "email:…").
    app.state.login_limiter = login
    app.state.api_limiter = api
    app.state.verified_tokens = verified
    # Appended = inside the logging and metrics middleware, so 429s are logged and counted.
    app.user_middleware.append(
        Middleware(
            RateLimitMiddleware,
            api=api,
            per_address=per_address,
            login=login,
            verified=verified,
            settings=settings,
        )
    )
    # Then the per-caller cap on CPU-heavy requests: refused before they queue for a concurrency slot.
    install_cap(app, verified)
    # Then the concurrency limit: time spent waiting for a slot still shows in request logs and metrics.
    slots = app.state.concurrency_slots = Slots(MAX_CONCURRENT_REQUESTS)
    app.user_middleware.append(Middleware(ConcurrencyLimitMiddleware, slots=slots))
