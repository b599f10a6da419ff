"""/api/v1/benchmarks: submit benchmark jobs to nodes, follow them (status, attempts, SSE events), cancel or
retry them. Anyone with plans:read sees every job; only its creator or an admin may cancel or retry it (403
for others: they can see the job, so a 404 would hide nothing)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from sqlmodel import Session

from app.api.envelope import PagingDep
from app.auth.deps import Principal, ReadDep, RunDep, fresh_principal, principal_user_id
from app.db import get_read_engine
from app.deps import ReadSessionDep, SessionDep
from app.models.base import as_utc
from app.models.benchmarks import BenchmarkJob, JobAttempt
from app.schemas.benchmarks import (
    AcceptanceReport,
    AttemptSummary,
    BenchmarkCreate,
    BenchmarkPublic,
    BenchmarkSummary,
    JobKind,
)
from app.schemas.envelope import ListEnvelope
from app.schemas.fields import SafeStr
from app.services import jobs as job_service
from app.services import nodes as node_service
from app.services.calibration import ProfileForbiddenError

router = APIRouter(prefix="/benchmarks", tags=["benchmarks"])

MAX_EVENT_ID = 2**31 - 1  # job_event.id is a 32-bit INTEGER column (PostgreSQL integer)
STREAM_SCOPE = "plans:read"  # ReadDep's: what reading a job's events needs, for as long as the stream is open
SSE_POLL_S = 0.5  # how often the event stream looks for new events: well under a progress flush (0.5 s)


def summary_of(job: BenchmarkJob) -> BenchmarkSummary:
    return BenchmarkSummary(
        id=job.id,
        kind=cast(JobKind, job.kind),  # stored only after the service checked it (app.services.jobs)
        status=job.status,
        progress=job.progress,
        eta_s=job.eta_s,
        attempt=job.attempt,
        target_node_id=job.target_node_id,
        claimed_by=job.claimed_by,
        cancel_requested=job.cancel_requested,
        created_at=as_utc(job.created_at),  # type: ignore[arg-type]
        started_at=as_utc(job.started_at),
        finished_at=as_utc(job.finished_at),
    )


def attempt_of(job: BenchmarkJob, record: JobAttempt, text: Callable[[Any], Any]) -> AttemptSummary:
    running = record.attempt == job.attempt and record.finished_at is None
    return AttemptSummary(
        attempt=record.attempt,
        status=record.status,
        node_id=record.node_id,
        rows=len(job.partial_rows if running else record.partial_rows),
        error=text(record.error),
        started_at=as_utc(record.started_at),  # type: ignore[arg-type]
        finished_at=as_utc(record.finished_at),
    )


def public_of(session: Session, job: BenchmarkJob, show_hosts: bool) -> BenchmarkPublic:
    """The job as `show_hosts` (an administrator) or any other reader may see it: host names in its result
    (job_service.result_for) and its free text (job_service.text_for) are for administrators."""
    attempts = job_service.attempts_of(session, job.id)
    text = job_service.text_for(session, job, show_hosts, attempts)
    return BenchmarkPublic(
        **summary_of(job).model_dump(),
        attempts=[attempt_of(job, a, text) for a in attempts],
        params=job.params,
        log_tail=text(job.log_tail),
        partial_rows=list(job.partial_rows),
        result=job_service.result_for(job.result, show_hosts),
        error=text(job.error),
        lease_expires_at=as_utc(job.lease_expires_at),
    )


@router.post(
    "",
    operation_id="create_benchmark",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=BenchmarkPublic,
    summary="Queue a benchmark job for a node agent",
    responses={
        403: {
            "description": "a calibration job's profile_name belongs to another user (only they or an admin "
            "may add a version)"
        }
    },
)
def create_benchmark(
    body: BenchmarkCreate, session: SessionDep, principal: RunDep, response: Response
) -> BenchmarkPublic:
    target = node_service.get_node(session, body.target_node) if body.target_node else None
    try:
        job = job_service.create_job(
            session, body.kind, body.params, target, principal_user_id(principal), principal.has("admin")
        )
    except ProfileForbiddenError as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from exc
    response.headers["Location"] = f"/api/v1/benchmarks/{job.id}"
    return public_of(session, job, principal.has("admin"))


@router.get(
    "",
    operation_id="list_benchmarks",
    response_model=ListEnvelope[BenchmarkSummary],
    summary="List benchmark jobs, newest first",
)
def list_benchmarks(
    session: SessionDep,
    _principal: ReadDep,
    page: PagingDep,
    status_filter: Annotated[
        Literal["queued", "running", "succeeded", "failed", "cancelled"] | None,
        Query(alias="status", description="only jobs in this state"),
    ] = None,
) -> ListEnvelope[BenchmarkSummary]:
    rows, count = job_service.list_jobs(session, status_filter, page.offset, page.limit)
    return ListEnvelope[BenchmarkSummary](data=[summary_of(j) for j in rows], count=count)


@router.get(
    "/{job_id}",
    operation_id="get_benchmark",
    response_model=BenchmarkPublic,
    summary="A job's status, progress, ETA, log tail, partial rows and result",
)
def get_benchmark(job_id: uuid.UUID, session: SessionDep, principal: ReadDep) -> BenchmarkPublic:
    job_service.requeue_expired(session)
    return public_of(session, job_service.get_job(session, job_id), principal.has("admin"))


@router.get(
    "/{job_id}/acceptance",
    operation_id="get_benchmark_acceptance",
    response_model=AcceptanceReport,
    summary="Node acceptance: the job's GEMM rate, busbw and latency against what the model expects",
)
def get_benchmark_acceptance(
    job_id: uuid.UUID,
    session: SessionDep,
    _principal: ReadDep,
    gpu: Annotated[
        SafeStr | None, Query(max_length=100, description="catalog GPU (default: the job's)")
    ] = None,
    fabric: Annotated[
        SafeStr | None, Query(max_length=100, description="fabric (default: the job's)")
    ] = None,
) -> AcceptanceReport:
    from app.services.calibration import job_acceptance

    job = job_service.get_job(session, job_id)
    return AcceptanceReport.model_validate(job_acceptance(job, gpu, fabric))


def _manage(action: Any, session: Session, job_id: uuid.UUID, principal: Principal) -> BenchmarkPublic:
    """Run cancel/retry as `principal`: 403 when the job is someone else's, 409 when its state forbids it."""
    try:
        job = action(session, job_id, principal_user_id(principal), principal.has("admin"))
    except job_service.ForbiddenError as exc:
        raise HTTPException(status_code=status.HTTP_403_FORBIDDEN, detail=str(exc)) from exc
    except job_service.ConflictError as exc:
        raise HTTPException(status_code=status.HTTP_409_CONFLICT, detail=str(exc)) from exc
    return public_of(session, job, principal.has("admin"))


@router.post(
    "/{job_id}/cancel",
    operation_id="cancel_benchmark",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=BenchmarkPublic,
    responses={403: {"description": "the job belongs to another user"}},
    summary="Cancel a job: queued jobs stop at once, running ones at the agent's next report",
)
def cancel_benchmark(job_id: uuid.UUID, session: SessionDep, principal: RunDep) -> BenchmarkPublic:
    return _manage(job_service.cancel_job, session, job_id, principal)


@router.post(
    "/{job_id}/retry",
    operation_id="retry_benchmark",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=BenchmarkPublic,
    responses={
        403: {"description": "the job belongs to another user"},
        409: {"description": "the job is not failed or cancelled"},
    },
    summary="Queue a failed or cancelled job again; its next claim starts a new, empty attempt",
)
def retry_benchmark(job_id: uuid.UUID, session: SessionDep, principal: RunDep) -> BenchmarkPublic:
    return _manage(job_service.retry_job, session, job_id, principal)


def _poll(job_id: uuid.UUID, after: int, show_hosts: bool) -> tuple[list[tuple[int, dict[str, Any]]], str]:
    """One look at the job's new events, on a read-only session (requeue_expired writes only when needed), as
    `show_hosts` (an administrator) or any other reader may see them (job_service.text_for)."""
    with Session(get_read_engine()) as session:
        job_service.requeue_expired(session)
        job = job_service.get_job(session, job_id)
        found = job_service.events_after(session, job_id, after)
        if not found:
            return [], job.status
        text = job_service.text_for(session, job, show_hosts)
        return [(int(e.id or 0), {**text(e.payload), "attempt": e.attempt}) for e in found], job.status


def _resume_after(last_event_id: str | None, after: int) -> int:
    """The event id a stream resumes after: Last-Event-ID when it is ASCII digits (str.isdigit also takes "²"),
    clamped to MAX_EVENT_ID; otherwise the header is ignored for `after`."""
    if not (last_event_id and last_event_id.isascii() and last_event_id.isdigit()):
        return after
    return min(int(last_event_id), MAX_EVENT_ID)


@router.get(
    "/{job_id}/events",
    operation_id="stream_benchmark_events",
    summary="Server-sent events: every progress event of the job, replayed from Last-Event-ID, until it ends",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "an SSE stream"}},
)
async def stream_benchmark_events(
    job_id: uuid.UUID,
    request: Request,
    session: ReadSessionDep,
    _principal: ReadDep,
    # an event id this stream sent: 18 digits stay below 2^63, the widest integer SQLite compares
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=18)] = None,
    after: Annotated[int, Query(ge=0, le=MAX_EVENT_ID, description="replay events after this id")] = 0,
) -> StreamingResponse:
    job_service.get_job(session, job_id)  # 404 before the stream starts
    session.close()
    start = _resume_after(last_event_id, after)

    async def stream() -> AsyncIterator[str]:
        cursor = start
        yield "retry: 2000\n\n"
        while True:
            # The stream outlives the request's authorisation: the credential is checked again before each look,
            # so a token revoked, a session signed out or an account deactivated since ends it (the browser's
            # reconnection then gets the 401), and host names follow whether the caller is still an administrator.
            now = await run_in_threadpool(fresh_principal, request)
            if not now.has(STREAM_SCOPE):
                return
            events, state = await run_in_threadpool(_poll, job_id, cursor, now.has("admin"))
            for event_id, payload in events:
                cursor = event_id
                name = str(payload.get("event", "message"))
                yield f"id: {event_id}\nevent: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"
            if state in job_service.TERMINAL and not events:
                yield f"event: end\ndata: {json.dumps({'status': state})}\n\n"
                return
            if await request.is_disconnected():
                return
            await asyncio.sleep(SSE_POLL_S)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
