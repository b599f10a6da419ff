"""Benchmark jobs: submit, claim under a lease, progress, complete, cancel, requeue on lease expiry.

Claiming is atomic on both backends: PostgreSQL takes the oldest queued row with
`SELECT … FOR UPDATE SKIP LOCKED` (concurrent claimers skip each other's rows); SQLite transactions start
with BEGIN IMMEDIATE (app/db.py), so read-then-update claims serialise. A claim bumps `attempt`, which
fences the agent: progress and completion must quote the attempt they hold, so an agent whose lease
expired (and whose job was handed to another node) gets 409 and stops — a job never runs twice at once.

Attempts are kept apart: each claim opens a `JobAttempt` row and starts the job's `partial_rows` and
`log_tail` empty; when an attempt ends (completed, lease lost) its rows, log and outcome are archived in its
`JobAttempt` row. Events carry the attempt they belong to.

Only the job's creator or an administrator may cancel or retry it (`may_manage`); anyone who may read jobs
sees every job. A calibration job that names a `profile_name` fits that profile, when it succeeds, as its
creator (app.services.calibration): a name the creator may not add a version to is refused when the job is
created, not after the run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from app.benchproto.config import CollectiveConfig, validate_collectives, validate_gemm
from app.benchproto.hosts import environment_host_names, environment_without_hosts, redact_hosts
from app.benchproto.kinds import COLLECTIVE_KINDS, GEMM_KINDS, JOB_KINDS
from app.benchproto.schema import summarise, wrong_result_error
from app.benchproto.sizes import size_sweep
from app.core.errors import Problem, SpecError
from app.db import get_engine, is_read_only
from app.errors import NotFoundError
from app.models.base import as_utc, utcnow
from app.models.benchmarks import BenchmarkJob, JobAttempt, JobEvent, Node
from app.schemas.fields import json_value_problems

if TYPE_CHECKING:
    from app.services.calibration import Fitter

TERMINAL = ("succeeded", "failed", "cancelled")
# A job that ended this way may be queued again by its owner (a succeeded one has nothing to redo).
RETRYABLE = ("failed", "cancelled")
LOG_TAIL_CHARS = 4000
MAX_PARTIAL_ROWS = 5000
# Most message sizes one collective sweep may time: 1K to 16G by factor 2 is 25, by √2 is 49. Past that a sweep
# is a typo (a step factor of 1.0000001 from 1K to 1M asks for millions of sizes: a job that would never end).
MAX_SWEEP_SIZES = 64


class ConflictError(Exception):
    """The request contradicts the job's state (lease lost, already finished); HTTP 409."""


class ForbiddenError(Exception):
    """The caller may see the job but is neither its creator nor an administrator; HTTP 403."""


def may_manage(job: BenchmarkJob, user_id: uuid.UUID | None, is_admin: bool) -> bool:
    """Cancel and retry belong to the job's creator and to administrators (jobs without a creator: admins)."""
    return is_admin or (user_id is not None and job.created_by == user_id)


def check_may_manage(job: BenchmarkJob, user_id: uuid.UUID | None, is_admin: bool) -> None:
    if not may_manage(job, user_id, is_admin):
        raise ForbiddenError(
            f"job {job.id} belongs to another user: only its creator or an admin may change it"
        )


def lease_s() -> float:
    """Seconds a claim stays valid without a heartbeat or progress from its agent."""
    return float(os.environ.get("CLUSTERPLAN_BENCH_LEASE_S", "60"))


def max_attempts() -> int:
    """Claims a job may have before a lost lease fails it (a job that kills its node must not loop)."""
    return int(os.environ.get("CLUSTERPLAN_BENCH_MAX_ATTEMPTS", "3"))


def validate_params(kind: str, params: dict[str, Any], gpus: int | None = None) -> None:
    """Check a job's parameters on the server, before any node sees them (same rules as the CLI). Both the API
    and the web launch form queue jobs through here (create_job), so a value JSON cannot hold (NaN, Infinity,
    an integer outside 64 bits) is refused here for both, before anything else is judged."""
    if kind not in JOB_KINDS:
        raise SpecError([Problem("kind", f"unknown job kind {kind!r}; choose from {', '.join(JOB_KINDS)}")])
    problems = [Problem(_params_field(path), reason) for path, reason in json_value_problems(params)]
    if problems:
        raise SpecError(problems)
    known_gpus = 1024 if gpus is None else gpus
    if kind == "check":
        problems += _check_target_problems(params)
    if kind in COLLECTIVE_KINDS:
        problems += _runner_problems(_check_collectives, params, known_gpus)
    if kind in GEMM_KINDS and params.get("attention"):
        problems += _attention_problems(params["attention"], known_gpus)
    if kind in GEMM_KINDS:
        problems += _runner_problems(_check_gemm, params, known_gpus)
    if problems:
        raise SpecError(problems)


def _params_field(path: tuple[str | int, ...]) -> str:
    return ".".join(["params", *map(str, path)])


def _runner_problems(
    check: Callable[[dict[str, Any], int], None], params: dict[str, Any], known_gpus: int
) -> list[Problem]:
    """Run one of the runner's checks on `params`: its problems on params.<field>, and what the runner's
    parsing refuses (a number that is not one, an unknown model) on params."""
    try:
        check(params, known_gpus)
    except SpecError as exc:
        return [Problem(f"params.{p.field}", p.message) for p in exc.problems]
    except (TypeError, ValueError, LookupError, OverflowError) as exc:
        return [Problem("params", str(exc))]
    return []


def _section(params: dict[str, Any], key: str) -> tuple[dict[str, Any], str]:
    """The settings a job nests under `key` (a calibration job nests "gemm" and "collectives"), or its params
    themselves where it nests none, with the field prefix of those settings; SpecError on `key` when the nested
    value is not an object."""
    if key not in params:
        return params, ""
    section = params[key]
    if not isinstance(section, dict):
        raise SpecError([Problem(key, f"must be an object of {key} settings")])
    return section, f"{key}."


def _check_ops(section: dict[str, Any], prefix: str) -> None:
    """The collectives to time: one name, comma-separated names, or a list of names (CollectiveConfig)."""
    key = "op" if "op" in section and "ops" not in section else "ops"
    ops = section.get(key, "")
    if not (isinstance(ops, str) or (isinstance(ops, list) and all(isinstance(op, str) for op in ops))):
        raise SpecError([Problem(f"{prefix}{key}", "must be a collective name or a list of names")])


def _check_collectives(params: dict[str, Any], known_gpus: int) -> None:
    section, prefix = _section(params, "collectives")
    _check_ops(section, prefix)
    cfg = CollectiveConfig.from_dict(section)
    validate_collectives(cfg, int(params.get("nproc", 2)), known_gpus)
    _check_sweep_length(cfg)


def _check_sweep_length(cfg: CollectiveConfig) -> None:
    """At most MAX_SWEEP_SIZES message sizes (app.benchproto.sizes.size_sweep, which the runner sweeps)."""
    if len(size_sweep(cfg.min_bytes, cfg.max_bytes, cfg.step_factor, cfg.step_bytes)) <= MAX_SWEEP_SIZES:
        return
    step = "stepbytes" if cfg.step_bytes else "stepfactor"
    reason = (
        f"the sweep from {cfg.min_bytes} to {cfg.max_bytes} bytes would time more than {MAX_SWEEP_SIZES} "
        f"message sizes; use a larger {step} or a narrower range"
    )
    raise SpecError([Problem(step, reason)])


def _check_gemm(params: dict[str, Any], known_gpus: int) -> None:
    from app.benchproto.kinds import gemm_config_from_params

    section, _ = _section(params, "gemm")
    validate_gemm(gemm_config_from_params(section), known_gpus, fp8_supported=True)


def _attention_problems(attention: Any, known_gpus: int) -> list[Problem]:
    from app.benchproto.config import AttentionConfig, validate_attention

    try:
        validate_attention(
            AttentionConfig.from_params(attention if isinstance(attention, dict) else {}), known_gpus
        )
    except SpecError as exc:
        return [Problem(f"params.attention.{p.field}", p.message) for p in exc.problems]
    except (TypeError, ValueError) as exc:
        return [Problem("params.attention", str(exc))]
    return []


def _check_target_problems(params: dict[str, Any]) -> list[Problem]:
    """A node acceptance check is judged against a catalog GPU (required) and fabric (optional)."""
    from app.catalog import find_gpu
    from app.catalog.fabrics import find_fabric

    problems = []
    if not params.get("gpu"):
        problems.append(
            Problem("params.gpu", "a check job needs the catalog GPU the node is expected to have")
        )
    for key, find in (("gpu", find_gpu), ("fabric", find_fabric)):
        if params.get(key):
            try:
                find(str(params[key]))
            except (LookupError, ValueError) as exc:
                problems.append(Problem(f"params.{key}", str(exc)))
    return problems


def result_for(result: dict[str, Any] | None, show_hosts: bool) -> dict[str, Any] | None:
    """A job's result as a reader may see it: the hosts it ran on (environment_without_hosts) are for
    administrators, as a node's host is (the node's name is for every reader)."""
    env = (result or {}).get("environment")
    if show_hosts or not isinstance(env, dict):
        return result
    return {**(result or {}), "environment": environment_without_hosts(env)}


def host_names_of(session: Session, job: BenchmarkJob, attempts: list[JobAttempt]) -> set[str]:
    """Every host name the server knows for the job: its result's environment and the hosts of the nodes it was
    sent to or claimed by (in any of its `attempts`)."""
    env = (job.result or {}).get("environment")
    names = environment_host_names(env) if isinstance(env, dict) else set()
    node_ids = {job.claimed_by, job.target_node_id} | {a.node_id for a in attempts}
    for node_id in node_ids - {None}:
        node = session.get(Node, node_id)
        if node is not None and node.hostname:
            names.add(node.hostname)
    return names


def text_for(
    session: Session, job: BenchmarkJob, show_hosts: bool, attempts: list[JobAttempt] | None = None
) -> Callable[[Any], Any]:
    """How a reader sees the job's free text (log, errors, events): as written for administrators; for anyone
    else with the host names the server knows for the job, and those NCCL and torch elastic lines give, hidden
    (app.benchproto.hosts.redact_hosts). `attempts`: the job's, where the caller has read them already."""
    if show_hosts:
        return lambda value: value
    names = host_names_of(session, job, attempts_of(session, job.id) if attempts is None else attempts)
    return lambda value: redact_hosts(value, names)


def add_event(session: Session, job: BenchmarkJob, event: str, /, **payload: Any) -> None:
    """Record an event of the job's current attempt (0 before the first claim). The payload may use any key (an
    agent's event naming "job" or "session" is stored as sent)."""
    session.add(JobEvent(job_id=job.id, attempt=job.attempt, payload={"event": event, **payload}))


def attempts_of(session: Session, job_id: uuid.UUID) -> list[JobAttempt]:
    return list(
        session.exec(select(JobAttempt).where(JobAttempt.job_id == job_id).order_by(col(JobAttempt.attempt)))
    )


def current_attempt(session: Session, job: BenchmarkJob) -> JobAttempt | None:
    return session.exec(
        select(JobAttempt).where(JobAttempt.job_id == job.id, JobAttempt.attempt == job.attempt)
    ).first()


def _archive_attempt(session: Session, job: BenchmarkJob, outcome: str) -> None:
    """Copy the current attempt's rows, log and outcome into its JobAttempt row (the job's own fields are
    overwritten by the next attempt)."""
    record = current_attempt(session, job)
    if record is None:
        if job.attempt < 1:
            return
        record = JobAttempt(job_id=job.id, attempt=job.attempt, node_id=job.claimed_by)
    record.status = outcome
    record.partial_rows = list(job.partial_rows)
    record.log_tail = job.log_tail
    record.error = job.error
    record.finished_at = utcnow()
    session.add(record)


def create_job(
    session: Session,
    kind: str,
    params: dict[str, Any],
    target_node: Node | None = None,
    created_by: uuid.UUID | None = None,
    is_admin: bool = False,
) -> BenchmarkJob:
    """Queue a job for `created_by` (an admin when `is_admin`). A calibration job naming `profile_name` is
    refused at once (app.services.calibration.ProfileForbiddenError) when its creator may not add a version to
    that profile, rather than after the run."""
    from app.services.nodes import node_gpu_count

    validate_params(kind, params, node_gpu_count(target_node) if target_node else None)
    check_profile_name(session, kind, params, created_by, is_admin)
    job = BenchmarkJob(
        kind=kind,
        params=params,
        target_node_id=target_node.id if target_node else None,
        created_by=created_by,
    )
    session.add(job)
    session.flush()
    add_event(session, job, "queued", kind=kind)
    session.commit()
    session.refresh(job)
    return job


def check_profile_name(
    session: Session, kind: str, params: dict[str, Any], user_id: uuid.UUID | None, is_admin: bool
) -> None:
    """A calibration job fits `params.profile_name` when it succeeds: refuse a name its creator may not
    version (ProfileForbiddenError)."""
    name = str(params.get("profile_name") or "").strip()
    if kind != "calibration" or not name:
        return
    from app.services.calibration import Fitter, check_may_version

    check_may_version(session, name, Fitter(user_id, is_admin))


def creator_fitter(session: Session, job: BenchmarkJob) -> Fitter:
    """The job's creator as a profile fitter (app.services.calibration.Fitter): an admin only while their
    account is an active administrator; a job without a creator, or whose creator's account is gone or was
    deactivated since, fits as nobody (the fit is refused: a deactivated account no longer acts)."""
    from app.models.auth import UserAccount
    from app.services.calibration import Fitter

    creator = session.get(UserAccount, job.created_by) if job.created_by else None
    if creator is None or not creator.is_active:
        return Fitter(None, False)
    return Fitter(creator.id, creator.is_admin)


def _fit_finished_calibration(session: Session, job: BenchmarkJob) -> None:
    """Fit the succeeded calibration job's `profile_name` as its creator; a refusal or a failed fit is logged
    as a job event instead."""
    from app.services.calibration import ProfileForbiddenError, fit_profile_from_job

    name = str(job.params["profile_name"])
    try:
        fit_profile_from_job(
            session,
            job,
            name,
            job.params.get("gpu"),
            job.params.get("fabric"),
            fitter=creator_fitter(session, job),
        )
    except (ProfileForbiddenError, SpecError, ValueError) as exc:
        outcome = "refused" if isinstance(exc, ProfileForbiddenError) else "failed"
        add_event(session, job, "log", message=f"calibration fit {outcome}: {exc}")
        session.commit()


def get_job(session: Session, job_id: str | uuid.UUID) -> BenchmarkJob:
    try:
        job = session.get(BenchmarkJob, uuid.UUID(str(job_id)))
    except ValueError:
        job = None
    if job is None:
        raise NotFoundError("benchmark job", str(job_id))
    return job


def _expired_query(now: Any) -> Any:
    return select(BenchmarkJob).where(
        BenchmarkJob.status == "running", col(BenchmarkJob.lease_expires_at) < now
    )


def requeue_expired(session: Session) -> int:
    """Jobs whose agent stopped renewing the lease go back to the queue (or to cancelled if asked).

    On a read-only session (GET requests, the SSE poll) it only looks; when something did expire, the
    requeue is written through a short read-write session and the reader's snapshot is ended so that its
    next query sees the result.
    """
    if not is_read_only(session):
        return _requeue(session)
    if session.exec(_expired_query(utcnow())).first() is None:
        return 0
    session.rollback()
    with Session(get_engine()) as writer:
        return _requeue(writer)


def _requeue(session: Session) -> int:
    now = utcnow()
    expired = session.exec(_expired_query(now)).all()
    for job in expired:
        _archive_attempt(session, job, "lost")
        lost_node = job.claimed_by
        if job.cancel_requested:
            job.status = "cancelled"
            job.finished_at = now
        elif job.attempt >= max_attempts():
            job.status = "failed"
            job.finished_at = now
            job.error = (
                f"lease expired on {job.attempt} attempts: the node running it stopped reporting each time"
            )
        else:
            job.status = "queued"
        job.claimed_by = None
        job.lease_expires_at = None
        session.add(job)
        add_event(
            session,
            job,
            "requeued" if job.status == "queued" else "cancelled",
            reason="lease expired",
            node_id=str(lost_node) if lost_node else None,
            attempt=job.attempt,
        )
    if expired:
        session.commit()
    return len(expired)


def list_jobs(
    session: Session, status: str | None = None, offset: int = 0, limit: int = 100
) -> tuple[list[BenchmarkJob], int]:
    requeue_expired(session)
    query = select(BenchmarkJob)
    count_q = select(func.count()).select_from(BenchmarkJob)
    if status:
        query = query.where(BenchmarkJob.status == status)
        count_q = count_q.where(BenchmarkJob.status == status)
    total = int(session.exec(count_q).one())
    rows = session.exec(query.order_by(col(BenchmarkJob.created_at).desc()).offset(offset).limit(limit)).all()
    return list(rows), total


def claim_job(session: Session, node: Node) -> BenchmarkJob | None:
    """Atomically take the oldest queued job meant for any node or this one; None when there is none."""
    requeue_expired(session)
    query = (
        select(BenchmarkJob)
        .where(BenchmarkJob.status == "queued")
        .where((col(BenchmarkJob.target_node_id).is_(None)) | (BenchmarkJob.target_node_id == node.id))
        .order_by(col(BenchmarkJob.created_at))
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    job = session.exec(query).first()
    if job is None:
        session.rollback()
        return None
    now = utcnow()
    # Conditional update: even without row locks, only one claimer can move this row out of "queued".
    result = session.execute(
        update(BenchmarkJob)
        .where(col(BenchmarkJob.id) == job.id, col(BenchmarkJob.status) == "queued")
        .values(
            status="running",
            claimed_by=node.id,
            attempt=BenchmarkJob.attempt + 1,
            lease_expires_at=now + timedelta(seconds=lease_s()),
            started_at=job.started_at or now,
            progress=0.0,
            eta_s=None,
            # a new attempt starts from nothing: the last one's rows and log live in its JobAttempt row
            partial_rows=[],
            log_tail="",
            result=None,
            error="",
        )
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        session.rollback()
        return None
    session.refresh(job)
    session.add(JobAttempt(job_id=job.id, attempt=job.attempt, node_id=node.id, started_at=now))
    add_event(session, job, "claimed", node_id=str(node.id), node=node.name, attempt=job.attempt)
    node.last_heartbeat_at = now
    session.add(node)
    session.commit()
    session.refresh(job)
    return job


def _held_job(session: Session, job_id: str | uuid.UUID, node: Node, attempt: int) -> BenchmarkJob:
    job = get_job(session, job_id)
    if job.status != "running" or job.claimed_by != node.id or job.attempt != attempt:
        raise ConflictError(
            f"job {job.id} is not held by node {node.name} at attempt {attempt} "
            f"(status {job.status}, attempt {job.attempt}); stop this run"
        )
    return job


def record_progress(
    session: Session, job_id: str | uuid.UUID, node: Node, attempt: int, events: list[dict[str, Any]]
) -> BenchmarkJob:
    """Store the agent's events, update progress / ETA / log tail / partial rows, renew the lease. An event
    whose progress or eta_s is not a number refuses the whole report (SpecError), before anything is stored."""
    _check_events(events)
    job = _held_job(session, job_id, node, attempt)
    rows = list(job.partial_rows)
    log = job.log_tail
    for event in events:
        kind = str(event.get("event", "log"))
        if kind == "row":
            row = event.get("row")
            if isinstance(row, dict) and "skipped_size_bytes" not in row and len(rows) < MAX_PARTIAL_ROWS:
                rows.append(row)
        if "progress" in event and event["progress"] is not None:
            job.progress = max(0.0, min(1.0, float(event["progress"])))
        if "eta_s" in event:
            job.eta_s = None if event["eta_s"] is None else float(event["eta_s"])
        if kind in ("log", "error") and event.get("message"):
            log = (log + str(event["message"]) + "\n")[-LOG_TAIL_CHARS:]
        add_event(session, job, kind, **{k: v for k, v in event.items() if k != "event"})
    job.partial_rows = rows
    job.log_tail = log
    job.lease_expires_at = utcnow() + timedelta(seconds=lease_s())
    node.last_heartbeat_at = utcnow()
    session.add(node)
    session.add(job)
    session.commit()
    session.refresh(job)
    return job


def _check_events(events: list[dict[str, Any]]) -> None:
    """An agent's progress and eta_s are numbers (or null); SpecError on events.<i>.<key> otherwise."""
    problems = [
        Problem(f"events.{i}.{key}", "must be a number or null")
        for i, event in enumerate(events)
        for key in ("progress", "eta_s")
        if not _is_number_or_none(event.get(key))
    ]
    if problems:
        raise SpecError(problems)


def _is_number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _result_summary(result: dict[str, Any] | None) -> dict[str, Any]:
    """The summary of an agent's result document (app.benchproto.schema.summarise); SpecError on result.rows
    when they are not a list of row objects, or hold a row the summary cannot read."""
    rows = (result or {}).get("rows")
    if rows is not None and not (isinstance(rows, list) and all(isinstance(row, dict) for row in rows)):
        raise SpecError([Problem("result.rows", "must be a list of result rows (objects)")])
    try:
        return summarise({"rows": rows or []})
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError([Problem("result.rows", f"holds a row the summary cannot read: {exc!r}")]) from None


def renew_leases(
    session: Session, node: Node, held: list[tuple[uuid.UUID, int]] | None = None
) -> list[uuid.UUID]:
    """Heartbeat: extend the leases of the runs the heartbeating agent holds — (job id, attempt) pairs, the
    attempt being the claim's fencing token — and return those the server wants cancelled.

    A lease belongs to one run, not to the node: an agent restarted on the same node holds none of its
    predecessor's runs, so its heartbeats keep the node online but never keep a dead run "running"; that run
    is requeued (or cancelled, or failed) when its lease lapses."""
    wanted = set(held or [])
    jobs = session.exec(
        select(BenchmarkJob).where(BenchmarkJob.status == "running", BenchmarkJob.claimed_by == node.id)
    ).all()
    mine = [job for job in jobs if (job.id, job.attempt) in wanted]
    until = utcnow() + timedelta(seconds=lease_s())
    for job in mine:
        job.lease_expires_at = until
        session.add(job)
    node.last_heartbeat_at = utcnow()
    session.add(node)
    session.commit()
    return [job.id for job in mine if job.cancel_requested]


def complete_job(
    session: Session,
    job_id: str | uuid.UUID,
    node: Node,
    attempt: int,
    status: str,
    result: dict[str, Any] | None,
    error: str = "",
) -> BenchmarkJob:
    if status not in TERMINAL:
        raise SpecError([Problem("status", f"choose from {', '.join(TERMINAL)}")])
    summary = _result_summary(result)
    job = _held_job(session, job_id, node, attempt)
    if job.cancel_requested and status == "failed":
        status = "cancelled"  # a run stopped on request is cancelled, not failed
    wrong = wrong_result_error(summary)
    if status == "succeeded" and wrong:  # an agent that did not gate its own results (an older one)
        status, error = "failed", wrong
    now = utcnow()
    job.status = status
    job.finished_at = now
    job.lease_expires_at = None
    job.result = result
    job.error = error[:5000]
    if result and result.get("rows") is not None:
        job.partial_rows = list(result["rows"])[:MAX_PARTIAL_ROWS]
    if status == "succeeded":
        job.progress = 1.0
        job.eta_s = 0.0
    if job.kind == "check" and result and result.get("rows"):
        from app.services.calibration import job_acceptance

        job.result = {**result, "acceptance": job_acceptance(job)}  # the node's acceptance history
    session.add(job)
    _archive_attempt(session, job, status)
    add_event(
        session,
        job,
        "completed",
        status=status,
        attempt=attempt,
        node=node.name,
        rows=len(job.partial_rows),
        error=error[:500],
    )
    session.commit()
    session.refresh(job)
    if status == "succeeded" and job.kind == "calibration" and job.params.get("profile_name"):
        _fit_finished_calibration(session, job)
    return job


def cancel_job(
    session: Session, job_id: str | uuid.UUID, user_id: uuid.UUID | None = None, is_admin: bool = True
) -> BenchmarkJob:
    """Queued → cancelled now; running → the agent is told on its next progress or heartbeat."""
    job = get_job(session, job_id)
    check_may_manage(job, user_id, is_admin)
    if job.status in TERMINAL:
        raise ConflictError(f"job {job.id} already {job.status}")
    if job.status == "queued":
        job.status = "cancelled"
        job.finished_at = utcnow()
        add_event(session, job, "cancelled", reason="cancelled before it started")
    else:
        job.cancel_requested = True
        add_event(session, job, "cancel_requested")
    session.add(job)
    session.commit()
    session.refresh(job)
    return job


def retry_job(
    session: Session, job_id: str | uuid.UUID, user_id: uuid.UUID | None = None, is_admin: bool = True
) -> BenchmarkJob:
    """A failed or cancelled job goes back to the queue; its next claim opens a new, empty attempt (the
    earlier attempts stay archived)."""
    job = get_job(session, job_id)
    check_may_manage(job, user_id, is_admin)
    if job.status not in RETRYABLE:
        raise ConflictError(f"job {job.id} is {job.status}; only a failed or cancelled job can be retried")
    job.status = "queued"
    job.cancel_requested = False
    job.finished_at = None
    job.progress = 0.0
    job.eta_s = None
    session.add(job)
    add_event(session, job, "retried", after_attempt=job.attempt)
    session.commit()
    session.refresh(job)
    return job


def check_history(session: Session, node_id: uuid.UUID, limit: int = 100) -> list[BenchmarkJob]:
    """The node's acceptance checks, newest first (a finished job keeps the node that ran it in claimed_by)."""
    query = (
        select(BenchmarkJob)
        .where(BenchmarkJob.kind == "check", BenchmarkJob.claimed_by == node_id)
        .order_by(col(BenchmarkJob.created_at).desc())
        .limit(limit)
    )
    return list(session.exec(query).all())


def events_after(session: Session, job_id: uuid.UUID, after_id: int = 0, limit: int = 500) -> list[JobEvent]:
    return list(
        session.exec(
            select(JobEvent)
            .where(JobEvent.job_id == job_id, col(JobEvent.id) > after_id)
            .order_by(col(JobEvent.id))
            .limit(limit)
        ).all()
    )


def lease_remaining_s(job: BenchmarkJob) -> float | None:
    lease = as_utc(job.lease_expires_at)
    return None if lease is None else (lease - utcnow()).total_seconds()
