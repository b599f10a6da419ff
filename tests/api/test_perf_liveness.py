"""Liveness first: /healthz answers while every concurrency slot is held, and one caller cannot run more than
its share of CPU-heavy requests (planner searches, size sweeps) at once.

No timing: requests are held inside the app on events, the test polls the app's own counters
(`app.state.concurrency_slots`, `app.state.inflight_cap`) until they show the state it wants, then asserts.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from app.hooks.ratelimit import MAX_CONCURRENT_REQUESTS
from app.services import planner as planner_svc
from app.services import planning
from tests.auth_support import app_with, bearer, issue_token
from tests.conftest import configure_app_database
from tests.paths import ROOT

# Event-loop turns the polls below wait before giving up (a bound against hanging, not a time window).
MAX_POLLS = 20_000
EXAMPLE = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
PLAN_BODY = {
    "model": EXAMPLE["model"],
    "cluster": EXAMPLE["cluster"],
    "training": EXAMPLE["training"],
    "global_batch": EXAMPLE["layout"]["global_batch"],
}


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(MAX_POLLS):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never reached: {what}")


def client_for(app: Any, address: str = "203.0.113.9") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 4000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=None)


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


def test_healthz_answers_while_every_slot_is_held(sqlite_app_url: str) -> None:
    configure_app_database(sqlite_app_url)
    app = app_with()
    release = asyncio.Event()

    async def blocked() -> dict[str, str]:
        await release.wait()
        return {"status": "released"}

    app.add_api_route("/api/v1/test-hold", blocked, methods=["GET"])
    slots = app.state.concurrency_slots

    async def main() -> tuple[list[int], int, int, int]:
        async with client_for(app) as client:
            holders = [asyncio.create_task(client.get("/api/v1/test-hold")) for _ in range(slots.limit)]
            queued = asyncio.create_task(client.get("/api/v1/gpus"))
            await until(
                lambda: slots.held == slots.limit and slots.waiting == 1, "all slots held, one queued"
            )
            probe = asyncio.create_task(client.get("/healthz"))
            # Either the probe answers, or it queues behind the held slots (then the test fails, not hangs).
            await until(lambda: probe.done() or slots.waiting > 1, "the probe answered or queued")
            still_queued = slots.waiting  # the ordinary request is still waiting for a slot
            assert probe.done(), "/healthz waited for a concurrency slot"
            health = probe.result()
            release.set()
            statuses = [r.status_code for r in await asyncio.gather(*holders)]
            return statuses, health.status_code, still_queued, (await queued).status_code

    statuses, health, still_queued, queued = run(main)
    assert slots.limit == MAX_CONCURRENT_REQUESTS
    assert health == 200
    assert still_queued == 1
    assert statuses == [200] * MAX_CONCURRENT_REQUESTS and queued == 200
    assert slots.held == 0 and slots.waiting == 0


def test_a_callers_third_search_is_refused_while_two_run(
    sqlite_app_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_app_database(sqlite_app_url)
    reader = issue_token("cap-reader@example.com", ["plans:read"], is_admin=False)
    other = issue_token("cap-other@example.com", ["plans:read"], is_admin=False)
    app = app_with(cpu_requests_per_caller=2)
    cap = app.state.inflight_cap
    release = threading.Event()  # the searches run in the thread pool
    entered: list[int] = []

    def held_search(data: Any, session: Any = None, **kwargs: Any) -> Any:
        entered.append(1)
        release.wait()
        return real_search(data, session, **kwargs)

    real_search = planner_svc.search
    monkeypatch.setattr(planner_svc, "search", held_search)

    async def main() -> tuple[list[int], httpx.Response, int, int, int]:
        async with client_for(app) as client:
            mine = [
                asyncio.create_task(client.post("/api/v1/plan", json=PLAN_BODY, headers=bearer(reader)))
                for _ in range(2)
            ]
            await until(lambda: len(entered) == 2, "two searches running")
            third = asyncio.create_task(client.post("/api/v1/plan", json=PLAN_BODY, headers=bearer(reader)))
            await until(lambda: third.done() or len(entered) > 2, "the third refused or running")
            assert third.done(), "a third search of the same caller ran"
            refused = third.result()
            # Another caller at the same address is not refused: the cap is per caller.
            theirs = asyncio.create_task(client.post("/api/v1/plan", json=PLAN_BODY, headers=bearer(other)))
            await until(lambda: len(entered) == 3, "the other caller's search running")
            release.set()
            done = [r.status_code for r in await asyncio.gather(*mine, theirs)]
            after = await client.post("/api/v1/plan/sizes", json=sizes_body(), headers=bearer(reader))
            return done, refused, after.status_code, cap.total(), len(done)

    done, refused, after, left, _ = run(main)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert "in flight" in refused.json()["detail"]
    assert done == [200, 200, 200]
    assert after == 200  # slots are given back when the searches end
    assert left == 0


def sizes_body() -> dict[str, Any]:
    return {**PLAN_BODY, "sizes": [64, 128]}


def test_the_builders_planner_mode_is_capped_too(
    sqlite_app_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /plans/new?mode=planner runs a search for anonymous visitors: keyed by their address."""
    configure_app_database(sqlite_app_url)
    app = app_with(cpu_requests_per_caller=1)
    cap = app.state.inflight_cap
    release = threading.Event()
    real_evaluate = planning.evaluate
    entered: list[int] = []

    def held_evaluate(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("search"):
            entered.append(1)
            release.wait()
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(planning, "evaluate", held_evaluate)

    async def main() -> tuple[int, int, int]:
        async with client_for(app) as client:
            first = asyncio.create_task(client.get("/plans/new?mode=planner"))
            await until(lambda: len(entered) == 1, "one builder search running")
            pending = asyncio.create_task(client.get("/plans/new?mode=planner"))
            await until(lambda: pending.done() or len(entered) > 1, "the second refused or running")
            assert pending.done(), "a second builder search of the same visitor ran"
            second = pending.result()
            manual = await client.get("/plans/new")  # by-hand mode runs no search: never capped
            release.set()
            return (await first).status_code, second.status_code, manual.status_code

    first, second, manual = run(main)
    assert (second, manual) == (429, 200)
    assert first == 200
    assert cap.total() == 0
