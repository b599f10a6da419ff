"""The concurrency limit: bounded work in flight, streams hold no slot, and no database deadlock under load."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from app.hooks.ratelimit import ConcurrencyLimitMiddleware
from tests.paths import ROOT


def test_at_most_limit_requests_in_flight() -> None:
    """20 requests against a limit of 3: exactly 3 inside at once, counted by state, not by elapsed time."""
    inside = 0
    peak = 0
    gate: asyncio.Event | None = None

    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        assert gate is not None
        await gate.wait()  # held until the test has seen the limit reached
        inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    limited = ConcurrencyLimitMiddleware(slow_app, limit=3)

    async def main() -> list[int]:
        nonlocal gate
        gate = asyncio.Event()
        transport = httpx.ASGITransport(app=limited)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            calls = asyncio.gather(*[client.get("/api/v1/x") for _ in range(20)])
            # Loop turns, not time: enough for every request to get in if the limit leaked (or never filled).
            for _ in range(2000):
                await asyncio.sleep(0)
            gate.set()
            responses = await calls
        return [r.status_code for r in responses]

    assert asyncio.run(main()) == [200] * 20
    assert peak == 3


def test_streams_release_their_slot_when_they_start() -> None:
    """Two open event streams must not block a third request when the limit is 1."""
    finish = None

    started: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        started.append(scope["path"])
        if scope["path"] == "/stream":
            assert finish is not None
            await finish.wait()  # a long-lived stream
        await send({"type": "http.response.body", "body": b"done"})

    limited = ConcurrencyLimitMiddleware(app, limit=1)

    async def call(path: str) -> int:
        messages: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            messages.append(message)

        scope = {"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""}
        await limited(scope, receive, send)
        return int(messages[0]["status"])

    async def main() -> int:
        nonlocal finish
        finish = asyncio.Event()
        streams = [asyncio.create_task(call("/stream")) for _ in range(2)]
        while started.count("/stream") < 2:  # poll for state: both streams hold (then release) a slot
            await asyncio.sleep(0)
        status = await asyncio.wait_for(call("/plain"), timeout=10)
        finish.set()
        await asyncio.gather(*streams)
        return status

    assert asyncio.run(main()) == 200


def test_many_concurrent_database_requests_complete(live_server) -> None:  # type: ignore[no-untyped-def]
    """100 clients at once on estimate and plans: each answered, none stuck behind the pool or SQLite's lock."""
    scenario = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    created = httpx.post(
        f"{live_server.url}/api/v1/plans",
        json={"name": "load", "scenario": scenario},
        headers=live_server.headers,
        timeout=60,
    )
    assert created.status_code == 201, created.text
    plan_id = created.json()["id"]

    async def main() -> list[int]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(
            base_url=live_server.url, limits=limits, headers=live_server.headers, timeout=120
        ) as client:
            calls = []
            for i in range(100):
                if i % 2:
                    calls.append(client.post("/api/v1/estimate", json=scenario))
                else:
                    calls.append(client.get(f"/api/v1/plans/{plan_id}"))
            return [r.status_code for r in await asyncio.gather(*calls)]

    assert asyncio.run(main()) == [200] * 100
