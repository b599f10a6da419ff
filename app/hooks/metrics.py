"""/metrics in Prometheus text format: request latency histograms by route template, benchmark job counts.

Request latency is labelled by method, route *template* (`/api/v1/plans/{plan_id}`, never the raw path, so
the number of series stays bounded) and status code. Benchmark job counts by status are read from the
database at scrape time (through the read-only engine view: a scrape never takes SQLite's write lock), so
every worker process reports the same, current numbers. /metrics needs the admin scope (Prometheus sends an
admin API token as `authorization: {credentials: cpt_…}`).

One small ASGI middleware of this module fills the request metrics: `RequestMetricsMiddleware` counts the
HTTP requests being served and times each one (/healthz and /metrics included) with `time.perf_counter()`,
takes the exact status code from the response start (500 when the app raised before sending one) and labels
it after routing with `route_template`. It writes to the app's own registry (docs/architecture.md, "Libraries
for metrics and the estimate cache").
"""

from __future__ import annotations

import time

from fastapi import Depends, FastAPI
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from sqlalchemy import func
from sqlmodel import Session, select
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import app as app_pkg
from app.auth.deps import require_scope
from app.db import get_read_engine
from app.models.benchmarks import BenchmarkJob

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
# Seconds; spans a cached catalog read (~1 ms) to a full planner search (seconds).
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UNMATCHED_ROUTE = "<unmatched>"


def route_template(scope: Scope) -> str:
    """The matched route's full path template, or "<unmatched>" (404s must not create a series per URL)."""
    # FastAPI ≥0.16x resolves included routers lazily and records the effective (prefixed) route here;
    # scope["route"] then holds the route as declared, without the router prefixes.
    fastapi_scope = scope.get("fastapi")
    effective = fastapi_scope.get("effective_route_context") if isinstance(fastapi_scope, dict) else None
    for candidate in (getattr(effective, "starlette_route", None), effective, scope.get("route")):
        path = getattr(candidate, "path_format", None) or getattr(candidate, "path", None)
        if isinstance(path, str) and path:
            return path
    return UNMATCHED_ROUTE


class AppMetrics:
    """The collectors of one app instance, in their own registry (tests build many apps in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_seconds = Histogram(
            "clusterplan_http_request_duration_seconds",
            "HTTP request latency by route template",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "clusterplan_http_requests_in_flight", "HTTP requests being served", registry=self.registry
        )
        self.benchmark_jobs = Gauge(
            "clusterplan_benchmark_jobs", "Benchmark jobs by status", ["status"], registry=self.registry
        )
        self.scrape_errors = Counter(
            "clusterplan_metrics_db_errors", "Scrapes whose database query failed", registry=self.registry
        )
        Gauge("clusterplan_build_info", "Version", ["version"], registry=self.registry).labels(
            version=app_pkg.__version__
        ).set(1)

    def refresh_job_counts(self) -> None:
        try:
            with Session(get_read_engine()) as session:
                rows = session.exec(
                    select(BenchmarkJob.status, func.count()).group_by(BenchmarkJob.status)
                ).all()
        except Exception:  # a scrape must still answer when the database is down; the counter shows it
            self.scrape_errors.inc()
            return
        counts = dict.fromkeys(JOB_STATUSES, 0)
        counts.update({str(status): int(n) for status, n in rows})
        for status, n in counts.items():
            self.benchmark_jobs.labels(status=status).set(n)

    def observe_request(self, scope: Scope, status: int, duration_s: float) -> None:
        """One finished request: latency by method, route template and exact status code."""
        self.request_seconds.labels(
            method=scope["method"], route=route_template(scope), status=str(status)
        ).observe(duration_s)


class RequestMetricsMiddleware:
    """Counts the HTTP requests in flight and times each into `clusterplan_http_request_duration_seconds`,
    labelled after routing.

    The route label is read from the scope once the app has answered: the router records the matched route
    in the same scope dict, so no route walk of our own is needed.
    """

    def __init__(self, app: ASGIApp, metrics: AppMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client gets when the app raises before starting a response

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        start = time.perf_counter()
        try:
            with self.metrics.in_flight.track_inprogress():
                await self.app(scope, receive, send_with_status)
        finally:
            self.metrics.observe_request(scope, status, time.perf_counter() - start)


def install(app: FastAPI) -> None:
    metrics = AppMetrics()
    app.state.metrics = metrics
    # every request is counted and timed, /healthz and /metrics included, with exact status codes
    app.add_middleware(RequestMetricsMiddleware, metrics=metrics)

    def prometheus_metrics(_principal: object = Depends(require_scope("admin"))) -> Response:
        metrics.refresh_job_counts()
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route(
        "/metrics",
        prometheus_metrics,
        methods=["GET"],
        include_in_schema=False,
        name="metrics",
    )
