"""RequestMetricsMiddleware (app/hooks/metrics.py): the in-flight gauge spans the request, the latency lands
under the exact status, and a request whose app raises before answering is recorded as 500 and re-raised."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.hooks.metrics import AppMetrics, RequestMetricsMiddleware


def _scope() -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": "/nowhere", "headers": []}


def _count(metrics: AppMetrics, status: str) -> float:
    samples = metrics.request_seconds.collect()[0].samples
    return sum(s.value for s in samples if s.name.endswith("_count") and s.labels["status"] == status)


async def _noop_receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b""}


def test_gauge_spans_the_request_and_the_status_is_exact() -> None:
    metrics = AppMetrics()
    seen: list[float] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(metrics.in_flight._value.get())
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(RequestMetricsMiddleware(app, metrics)(_scope(), _noop_receive, send))
    assert seen == [1.0]
    assert metrics.in_flight._value.get() == 0.0
    assert _count(metrics, "418") == 1.0
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]


def test_an_app_that_raises_is_recorded_as_500_and_re_raised() -> None:
    metrics = AppMetrics()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("boom")

    async def send(message: dict[str, Any]) -> None:  # pragma: no cover - never called
        raise AssertionError(message)

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(RequestMetricsMiddleware(app, metrics)(_scope(), _noop_receive, send))
    assert _count(metrics, "500") == 1.0
    assert metrics.in_flight._value.get() == 0.0
