"""Saved plans: create, revise (immutable, contiguous revision numbers), list, get, duplicate, delete,
share, compare and export.

Every function takes the caller as a `PlanActor` and applies app.services.plan_access: a plan the caller may
not read is a NotFoundError (its existence is not revealed); one they may read but not change is a
PlanChangeForbidden.

A plan's figures rest on its owner's prices (`priced_as`): the built-in rows of the price book and the owner's own
(app.services.catalog.quoted_for), whoever saves the revision, so an administrator revising another user's plan
neither brings in the administrator's rows nor drops the owner's; readers see the stored figures. A duplicate is
a new save by its new owner: evaluated again at their prices, it carries nothing priced from the source owner's
rows.

Revision numbers stay unique and contiguous under concurrent writers because the plan row is locked
for the short write: `SELECT … FOR UPDATE` on PostgreSQL; on SQLite every transaction starts with
`BEGIN IMMEDIATE` (app/db.py), which takes the database write lock. The (plan_id, revision) unique
constraint is the backstop. A plan and its first revision are written in one transaction, so a server
killed mid-write leaves either both or neither.
"""

from __future__ import annotations

import csv
import io
import json
import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, or_
from sqlmodel import Session, col, delete, select

import app as app_pkg
from app.auth.users import find_user, normalise_email
from app.catalog import accuracy_table
from app.core.accuracy import ranking_resolution_of
from app.core.errors import Problem, SpecError
from app.db import READONLY_OPTION, write_turn
from app.errors import NotFoundError
from app.models.auth import UserAccount
from app.models.base import as_utc, utcnow
from app.models.plans import Plan, PlanInvite, PlanRevision, PlanShare
from app.schemas.plans import (
    ComparisonColumn,
    ComparisonPublic,
    ComparisonRow,
    PlanCreate,
    PlanDuplicate,
    PlanPublic,
    PlanRevise,
    PlanSharingPublic,
    PlanSharingUpdate,
    PlanSummary,
    RevisionPublic,
    RevisionSummary,
)
from app.schemas.scenario import Scenario
from app.services import planning
from app.services.catalog import Actor
from app.services.csv_safe import safe_row
from app.services.plan_access import (
    NoAccountError,
    OwnerFilter,
    PlanActor,
    PlanChangeForbidden,
    may_change,
    may_read,
    owner_clause,
    readable_clause,
)

# Code running on the server itself (tests, maintenance scripts): an administrator without an account.
SERVER_ACTOR = PlanActor(user_id=None, is_admin=True)

EXPORT_FORMAT = "clusterplan-plan"
EXPORT_FORMAT_VERSION = 1
MIN_COMPARE, MAX_COMPARE = 2, 4
# Results that move by at most this many per cent are shown as the same: far inside the estimator's accuracy
# band and ranking resolution (±23 % dense, docs/validation.md), so such a move cannot change a decision.
SAME_WITHIN_PCT = 0.5
MAX_OFFSET = 2**53  # larger offsets select nothing anyway, and do not fit a database integer


# ---------------------------------------------------------------------------------------------- helpers


def _parse_id(plan_id: uuid.UUID | str) -> uuid.UUID:
    if isinstance(plan_id, uuid.UUID):
        return plan_id
    try:
        return uuid.UUID(str(plan_id))
    except ValueError:
        raise NotFoundError("plan", str(plan_id)) from None


def scenario_dict(scenario: Scenario) -> dict[str, Any]:
    return scenario.model_dump(mode="json", exclude_none=True)


def _end_read(session: Session) -> None:
    """Close the read transaction (on SQLite it holds the write lock) before slow work or waiting."""
    if not (session.new or session.dirty or session.deleted):
        session.rollback()


def _begin_read(session: Session) -> None:
    """Start the session's next transaction read-only (on SQLite a deferred BEGIN, app/db.py), so the checks
    and the scenario's evaluation that precede a save never hold SQLite's write lock while they compute; the
    write itself then begins its own BEGIN IMMEDIATE transaction after `_end_read`."""
    _end_read(session)
    if not session.in_transaction():
        session.connection(execution_options={READONLY_OPTION: True})


def _shared_with_actor(session: Session, plan: Plan, actor: PlanActor) -> bool:
    if actor.user_id is None or plan.visibility != "users":
        return False
    row = session.exec(
        select(PlanShare.id).where(PlanShare.plan_id == plan.id, PlanShare.user_id == actor.user_id)
    ).first()
    return row is not None


def _check_read(session: Session, plan: Plan | None, plan_id: uuid.UUID, actor: PlanActor) -> Plan:
    if plan is None or not may_read(plan, actor, _shared_with_actor(session, plan, actor)):
        raise NotFoundError("plan", str(plan_id))  # unreadable reads as absent: existence is not revealed
    return plan


def _readable_plan(session: Session, plan_id: uuid.UUID, actor: PlanActor) -> Plan:
    return _check_read(session, session.get(Plan, plan_id), plan_id, actor)


def _check_change(
    session: Session, plan: Plan | None, plan_id: uuid.UUID, actor: PlanActor, action: str
) -> Plan:
    plan = _check_read(session, plan, plan_id, actor)
    if not may_change(plan, actor):
        raise PlanChangeForbidden(plan.id, action)
    return plan


def _lock_plan(session: Session, plan_id: uuid.UUID, actor: PlanActor, action: str) -> Plan:
    """The plan row, locked for the write, after checking the actor may `action` it."""
    plan = session.exec(select(Plan).where(Plan.id == plan_id).with_for_update()).first()
    return _check_change(session, plan, plan_id, actor, action)


def priced_as(owner_id: uuid.UUID | None) -> Actor:
    """Whose prices a plan owned by `owner_id` is costed with: its owner's (none: the built-in rows only)."""
    return Actor(owner_id)


def plan_prices_viewer(session: Session, plan_id: uuid.UUID) -> Actor:
    """`priced_as` for a stored plan (call after checking the caller may change it)."""
    plan = session.get(Plan, plan_id)
    return priced_as(plan.owner_id if plan is not None else None)


def _owner_id_for_new_plan(actor: PlanActor) -> uuid.UUID | None:
    """The new plan's owner; an administrator without an account saves an unowned (admin-only) plan."""
    if actor.user_id is None and not actor.is_admin:
        raise NoAccountError()
    return actor.user_id


def _emails(session: Session, user_ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    if not user_ids:
        return {}
    rows = session.exec(
        select(UserAccount.id, UserAccount.email).where(col(UserAccount.id).in_(user_ids))
    ).all()
    return {uid: email for uid, email in rows}


def _shared_emails(session: Session, plan_id: uuid.UUID) -> list[str]:
    """Every e-mail the plan is shared with, accounts and invitations alike, sorted."""
    users = session.exec(
        select(UserAccount.email)
        .join(PlanShare, col(PlanShare.user_id) == col(UserAccount.id))
        .where(PlanShare.plan_id == plan_id)
    ).all()
    invited = session.exec(select(PlanInvite.email).where(PlanInvite.plan_id == plan_id)).all()
    return sorted({*users, *invited})


def _revision_row(session: Session, plan_id: uuid.UUID, revision: int | None = None) -> PlanRevision:
    stmt = select(PlanRevision).where(PlanRevision.plan_id == plan_id)
    if revision is None:
        stmt = stmt.order_by(col(PlanRevision.revision).desc()).limit(1)
    else:
        stmt = stmt.where(PlanRevision.revision == revision)
    row = session.exec(stmt).first()
    if row is None:
        if revision is None:
            raise NotFoundError("plan", str(plan_id))
        raise NotFoundError("plan revision", f"{plan_id}@{revision}")
    return row


def revision_public(row: PlanRevision) -> RevisionPublic:
    return RevisionPublic(
        id=row.id,
        plan_id=row.plan_id,
        revision=row.revision,
        name=row.name,
        notes=row.notes,
        scenario=row.scenario,
        result=row.result,
        builder_choices=dict(row.builder_choices or {}),
        app_version=row.app_version,
        formula_version=row.formula_version,
        price_book_date=row.price_book_date,
        calibration_profile=row.calibration_profile,
        author_id=row.author_id,
        created_at=as_utc(row.created_at),  # type: ignore[arg-type]
    )


def _summary_of(result: dict[str, Any]) -> dict[str, Any]:
    summary = result.get("summary")
    return dict(summary) if isinstance(summary, dict) else {}


def plan_summary(plan: Plan, latest: PlanRevision | None, actor: PlanActor, owner: str | None) -> PlanSummary:
    return PlanSummary(
        id=plan.id,
        name=plan.name,
        notes=plan.notes,
        owner=owner,
        visibility=plan.visibility,  # type: ignore[arg-type]  # the column holds one of VISIBILITIES
        may_change=may_change(plan, actor),
        latest_revision=plan.latest_revision,
        created_at=as_utc(plan.created_at),  # type: ignore[arg-type]
        updated_at=as_utc(plan.updated_at),
        summary=_summary_of(latest.result) if latest else {},
    )


def plan_public(session: Session, plan: Plan, latest: PlanRevision, actor: PlanActor) -> PlanPublic:
    """The plan as `actor` sees it: the list of named readers only for those who may change the sharing."""
    owner = _emails(session, {plan.owner_id}).get(plan.owner_id) if plan.owner_id else None
    base = plan_summary(plan, latest, actor, owner)
    shared_with = _shared_emails(session, plan.id) if may_change(plan, actor) else None
    return PlanPublic(**base.model_dump(), shared_with=shared_with, current=revision_public(latest))


def _new_revision(
    plan: Plan,
    number: int,
    name: str,
    notes: str,
    evaluation: planning.Evaluation,
    author_id: uuid.UUID | None,
    builder_choices: dict[str, Any] | None = None,
) -> PlanRevision:
    return PlanRevision(
        plan_id=plan.id,
        revision=number,
        name=name,
        notes=notes,
        scenario=evaluation.scenario,
        result=evaluation.result,
        app_version=evaluation.app_version,
        formula_version=evaluation.formula_version,
        price_book_date=evaluation.price_book_date,
        calibration_profile=evaluation.calibration_profile,
        builder_choices=dict(builder_choices or {}),
        author_id=author_id,
    )


# ---------------------------------------------------------------------------------------------- writes


def _evaluate_as_owner(
    session: Session, scenario: dict[str, Any], profile_ref: str | None, owner_id: uuid.UUID | None
) -> planning.Evaluation:
    """A revision's scenario evaluated as every save evaluates it: at the prices of the plan's owner
    (`priced_as`), under the calibration profile `profile_ref`; problems name `scenario.…` or
    `calibration_profile` (SpecError)."""
    return planning.evaluate(
        session, scenario, field_prefix="scenario", profile_ref=profile_ref, viewer=priced_as(owner_id)
    )


def _write_new_plan(
    session: Session,
    name: str,
    notes: str,
    evaluation: planning.Evaluation,
    actor: PlanActor,
    owner_id: uuid.UUID | None,
    builder_choices: dict[str, Any] | None,
) -> PlanPublic:
    """Write a plan owned by `owner_id` (private) and its revision 1 in one transaction."""
    with write_turn(session):
        plan = Plan(name=name, notes=notes, owner_id=owner_id, latest_revision=1, updated_at=utcnow())
        session.add(plan)
        revision = _new_revision(plan, 1, name, notes, evaluation, actor.user_id, builder_choices)
        session.add(revision)
        session.flush()
        out = plan_public(session, plan, revision, actor)
        session.commit()
    return out


def create_plan(
    session: Session, data: PlanCreate, actor: PlanActor, builder_choices: dict[str, Any] | None = None
) -> PlanPublic:
    """Evaluate the scenario, then write the plan (owned by the actor, private) and revision 1 in one
    transaction. `builder_choices`: the plan builder's choices beyond the scenario, stored with the revision."""
    owner_id = _owner_id_for_new_plan(actor)
    _begin_read(session)
    evaluation = _evaluate_as_owner(session, scenario_dict(data.scenario), data.calibration_profile, owner_id)
    _end_read(session)
    return _write_new_plan(session, data.name, data.notes, evaluation, actor, owner_id, builder_choices)


def add_revision(
    session: Session,
    plan_id: uuid.UUID | str,
    change: PlanRevise,
    actor: PlanActor,
    builder_choices: dict[str, Any] | None = None,
) -> PlanPublic:
    """Save an edit as the next revision. Omitted fields keep the latest revision's values (read under
    the lock, so concurrent editors never overwrite each other's revision numbers). Owner or admin only.
    `builder_choices` (the plan builder's choices beyond the scenario): omitted, the latest revision's are kept
    when the scenario is, and dropped with a new scenario (they were made for the old one)."""
    pid = _parse_id(plan_id)
    _begin_read(session)
    checked = _check_change(session, session.get(Plan, pid), pid, actor, "revise")  # before the evaluation
    evaluation: planning.Evaluation | None = None
    if change.scenario is not None or change.calibration_profile is not None:
        previous_read = _revision_row(session, pid)
        scenario = scenario_dict(change.scenario) if change.scenario is not None else previous_read.scenario
        profile = change.calibration_profile
        if profile is None:
            profile = previous_read.calibration_profile
        evaluation = _evaluate_as_owner(session, scenario, profile, checked.owner_id)
    _end_read(session)
    with write_turn(session):
        plan = _lock_plan(session, pid, actor, "revise")
        previous = _revision_row(session, pid)
        if evaluation is None:
            evaluation = planning.Evaluation.from_revision(previous)
        number = plan.latest_revision + 1
        name = change.name if change.name is not None else previous.name
        notes = change.notes if change.notes is not None else previous.notes
        if builder_choices is None:
            builder_choices = previous.builder_choices if change.scenario is None else {}
        revision = _new_revision(plan, number, name, notes, evaluation, actor.user_id, builder_choices)
        plan.latest_revision = number
        plan.name = name
        plan.notes = notes
        plan.updated_at = utcnow()
        session.add(plan)
        session.add(revision)
        session.flush()
        out = plan_public(session, plan, revision, actor)
        session.commit()
    return out


def duplicate_plan(
    session: Session, plan_id: uuid.UUID | str, data: PlanDuplicate, actor: PlanActor
) -> PlanPublic:
    """A new plan, the actor's own and private, whose revision 1 is the source's latest revision saved again by
    the actor: its name (or `data.name`, default "Copy of …"), notes, scenario, calibration profile and builder
    choices, evaluated as a new save by the actor evaluates them (`_evaluate_as_owner`), so its figures, cost
    options and their labels come from the actor's prices (`priced_as`: the built-in rows and the actor's own),
    never from the source owner's private rows, and its provenance (versions, price-book date) is that of this
    evaluation. Needs read access to the source only.

    A scenario names no price row (a plan is priced with its owner's rows), so the copy is always priced with
    the actor's. A source whose inputs no longer evaluate (a catalog entry or calibration profile removed since,
    or a value now refused) is a SpecError naming the field (`scenario.…`, `calibration_profile`: a 422) and
    nothing is saved: keeping the stored figures would hand the actor prices of rows that are not theirs, and
    changing the inputs would not make a copy; the reader can open the inputs in the builder, fix them and save
    a plan of their own."""
    pid = _parse_id(plan_id)
    _begin_read(session)
    _readable_plan(session, pid, actor)
    owner_id = _owner_id_for_new_plan(actor)
    source = _revision_row(session, pid)
    name = data.name or f"Copy of {source.name}"[:200]
    # read before the evaluation, which ends the read transaction (expiring `source`)
    notes, choices, scenario, profile = (
        source.notes,
        source.builder_choices,
        source.scenario,
        source.calibration_profile,
    )
    try:
        evaluation = _evaluate_as_owner(session, scenario, profile, owner_id)
    except SpecError as exc:
        raise _source_refused(exc) from None
    _end_read(session)
    return _write_new_plan(session, name, notes, evaluation, actor, owner_id, choices)


def _source_refused(exc: SpecError) -> SpecError:
    """`exc` (the source's inputs refused by a duplicate's evaluation), its messages saying so."""
    return SpecError(
        [Problem(p.field, f"the copied plan's inputs no longer evaluate: {p.message}") for p in exc.problems]
    )


def delete_plan(session: Session, plan_id: uuid.UUID | str, actor: PlanActor) -> None:
    """Delete a plan, its revisions and its sharing. Owner or admin only."""
    pid = _parse_id(plan_id)
    plan = _lock_plan(session, pid, actor, "delete")
    session.exec(delete(PlanShare).where(col(PlanShare.plan_id) == pid))  # type: ignore[call-overload]
    session.exec(delete(PlanInvite).where(col(PlanInvite.plan_id) == pid))  # type: ignore[call-overload]
    session.exec(delete(PlanRevision).where(col(PlanRevision.plan_id) == pid))  # type: ignore[call-overload]
    session.delete(plan)
    session.commit()


# ---------------------------------------------------------------------------------------------- sharing


def _share_targets(session: Session, update: PlanSharingUpdate) -> tuple[list[uuid.UUID], list[str]]:
    """The named users' ids and the e-mails that have no account yet (kept as invitations, so the answer
    is the same whether or not an address has an account); a malformed e-mail is a SpecError naming its
    place in `users`."""
    if update.visibility != "users" and update.users:
        raise SpecError([Problem("users", "name users only with visibility 'users'")])
    problems: list[Problem] = []
    ids: list[uuid.UUID] = []
    invites: list[str] = []
    for i, email in enumerate(update.users):
        try:
            address = normalise_email(email)
        except ValueError as exc:
            problems.append(Problem(f"users.{i}", str(exc)))
            continue
        user = find_user(session, address)
        if user is None:
            if address not in invites:
                invites.append(address)
        elif user.id not in ids:
            ids.append(user.id)
    if problems:
        raise SpecError(problems)
    return ids, invites


def sharing_of(session: Session, plan: Plan) -> PlanSharingPublic:
    owner = _emails(session, {plan.owner_id}).get(plan.owner_id) if plan.owner_id else None
    return PlanSharingPublic(
        plan_id=plan.id,
        owner=owner,
        visibility=plan.visibility,  # type: ignore[arg-type]  # the column holds one of VISIBILITIES
        shared_with=_shared_emails(session, plan.id),
    )


def set_sharing(
    session: Session, plan_id: uuid.UUID | str, update: PlanSharingUpdate, actor: PlanActor
) -> PlanSharingPublic:
    """Replace who may read the plan (visibility and named users). Owner or admin only."""
    pid = _parse_id(plan_id)
    _check_change(session, session.get(Plan, pid), pid, actor, "change the sharing of")
    user_ids, invites = _share_targets(session, update)
    plan = _lock_plan(session, pid, actor, "change the sharing of")
    user_ids = [u for u in user_ids if u != plan.owner_id]  # the owner reads it anyway
    session.exec(delete(PlanShare).where(col(PlanShare.plan_id) == pid))  # type: ignore[call-overload]
    session.exec(delete(PlanInvite).where(col(PlanInvite.plan_id) == pid))  # type: ignore[call-overload]
    for user_id in user_ids:
        session.add(PlanShare(plan_id=pid, user_id=user_id))
    for email in invites:
        session.add(PlanInvite(plan_id=pid, email=email))
    plan.visibility = update.visibility
    plan.updated_at = utcnow()
    session.add(plan)
    session.flush()
    out = sharing_of(session, plan)
    session.commit()
    return out


# ---------------------------------------------------------------------------------------------- reads


def get_plan(session: Session, plan_id: uuid.UUID | str, actor: PlanActor) -> PlanPublic:
    pid = _parse_id(plan_id)
    plan = _readable_plan(session, pid, actor)
    return plan_public(session, plan, _revision_row(session, pid), actor)


def get_plan_sharing(session: Session, plan_id: uuid.UUID | str, actor: PlanActor) -> PlanSharingPublic:
    """Who may read the plan; only for those who may change it (others get PlanChangeForbidden)."""
    pid = _parse_id(plan_id)
    return sharing_of(
        session, _check_change(session, session.get(Plan, pid), pid, actor, "see the sharing of")
    )


def get_revision(
    session: Session, plan_id: uuid.UUID | str, revision: int | None, actor: PlanActor
) -> RevisionPublic:
    pid = _parse_id(plan_id)
    _readable_plan(session, pid, actor)
    return revision_public(_revision_row(session, pid, revision))


def list_revisions(
    session: Session, plan_id: uuid.UUID | str, actor: PlanActor, offset: int = 0, limit: int = 100
) -> tuple[list[RevisionSummary], int]:
    pid = _parse_id(plan_id)
    _readable_plan(session, pid, actor)
    offset = min(offset, MAX_OFFSET)
    count = session.exec(
        select(func.count()).select_from(PlanRevision).where(PlanRevision.plan_id == pid)
    ).one()
    rows = session.exec(
        select(PlanRevision)
        .where(PlanRevision.plan_id == pid)
        .order_by(col(PlanRevision.revision).desc())
        .offset(offset)
        .limit(limit)
    ).all()
    return [
        RevisionSummary(
            revision=r.revision,
            name=r.name,
            created_at=as_utc(r.created_at),  # type: ignore[arg-type]
            summary=_summary_of(r.result),
        )
        for r in rows
    ], int(count)


def list_plans(
    session: Session,
    actor: PlanActor,
    offset: int = 0,
    limit: int = 100,
    q: str | None = None,
    owner: OwnerFilter = "all",
) -> tuple[list[PlanSummary], int]:
    """The plans the actor may read (narrowed by `owner`), most recently changed first, with the latest
    revision's headline figures."""
    offset = min(offset, MAX_OFFSET)
    where = [readable_clause(actor), owner_clause(actor, owner)]
    if q:
        pattern = f"%{q.strip().lower()}%"
        where.append(or_(func.lower(Plan.name).like(pattern), func.lower(Plan.notes).like(pattern)))
    count = session.exec(select(func.count()).select_from(Plan).where(*where)).one()
    plans = session.exec(
        select(Plan)
        .where(*where)
        .order_by(col(Plan.updated_at).desc(), col(Plan.created_at).desc(), col(Plan.id))
        .offset(offset)
        .limit(limit)
    ).all()
    latest: dict[uuid.UUID, PlanRevision] = {}
    if plans:
        conditions = [
            (col(PlanRevision.plan_id) == p.id) & (col(PlanRevision.revision) == p.latest_revision)
            for p in plans
        ]
        for rev in session.exec(select(PlanRevision).where(or_(*conditions))).all():
            latest[rev.plan_id] = rev
    owners = _emails(session, {p.owner_id for p in plans if p.owner_id is not None})
    return [
        plan_summary(p, latest.get(p.id), actor, owners.get(p.owner_id) if p.owner_id else None)
        for p in plans
    ], int(count)


# ---------------------------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class _Field:
    key: str
    label: str
    unit: str
    section: str


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for k in value:
            out.update(_flatten(value[k], f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def _values_differ(values: list[Any]) -> bool:
    def norm(v: Any) -> Any:
        if isinstance(v, float):
            return round(v, 9)
        if isinstance(v, list):
            return json.dumps(v, sort_keys=True)
        return v

    return len({json.dumps(norm(v), sort_keys=True, default=str) for v in values}) > 1


def _number(value: Any) -> float | None:
    """A finite int or float as a float; None for anything else (booleans included)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _is_number(value: Any) -> bool:
    return _number(value) is not None


def _changes(values: list[Any]) -> tuple[list[float | None], list[float | None]]:
    """Each value's change against the first plan's: the difference and the percentage (None where either is
    not a number, or the percentage of a change from zero)."""
    first = _number(values[0]) if values else None
    deltas: list[float | None] = [None]
    percents: list[float | None] = [None]
    for value in values[1:]:
        number = _number(value)
        if first is None or number is None:
            deltas.append(None)
            percents.append(None)
            continue
        delta = number - first
        deltas.append(delta)
        percents.append(100.0 * delta / abs(first) if first != 0 else None)
    return deltas, percents


def _result_differs(values: list[Any], percents: list[float | None], same_within_pct: float) -> bool:
    """A result differs when it moves by more than `same_within_pct` against the first plan; numbers without a
    percentage (a change from zero) and other values differ as soon as they are not equal."""
    if not _values_differ(values):
        return False
    numeric = all(_is_number(v) for v in values)
    if not numeric or any(p is None for p in percents[1:]):
        return True
    return any(abs(p) > same_within_pct for p in percents[1:] if p is not None)


def compare_plans(
    session: Session,
    plan_ids: list[uuid.UUID | str],
    revisions: list[int | None] | None,
    actor: PlanActor,
    same_within_pct: float = SAME_WITHIN_PCT,
) -> ComparisonPublic:
    """Side-by-side inputs, headline results and provenance of 2–4 plans, each number's change against the first
    plan, differences flagged: inputs and provenance when not equal, results when they move by more than
    `same_within_pct` per cent (an estimate's own rounding and solver noise are not a difference)."""
    if not MIN_COMPARE <= len(plan_ids) <= MAX_COMPARE:
        raise SpecError(
            [Problem("ids", f"compare takes {MIN_COMPARE} to {MAX_COMPARE} plans, got {len(plan_ids)}")]
        )
    revs = list(revisions or [])
    if any(r is not None and r < 0 for r in revs):
        raise SpecError([Problem("revs", "revision numbers are ≥ 1 (0 = the latest)")])
    if len(revs) > len(plan_ids):
        raise SpecError([Problem("revs", "give at most one revision per plan id")])
    revs += [None] * (len(plan_ids) - len(revs))
    chosen = [get_revision(session, pid, rev, actor) for pid, rev in zip(plan_ids, revs, strict=True)]
    columns = [ComparisonColumn(plan_id=r.plan_id, name=r.name, revision=r.revision) for r in chosen]

    sections: list[tuple[str, list[dict[str, Any]]]] = [
        ("Inputs", [_flatten(r.scenario) for r in chosen]),
        ("Results", [_summary_of(r.result) for r in chosen]),
        # the builder's choices saved with each revision (ranking, deadline, planner constraints); empty for plans
        # saved through the API
        ("Builder choices", [dict(r.builder_choices or {}) for r in chosen]),
        (
            "Provenance",
            [
                {
                    "app_version": r.app_version,
                    "formula_version": r.formula_version,
                    "price_book_date": r.price_book_date,
                    "calibration_profile": r.calibration_profile,
                }
                for r in chosen
            ],
        ),
    ]
    rows: list[ComparisonRow] = []
    for section, flats in sections:
        keys: list[str] = []
        for flat in flats:
            for k in flat:
                if k not in keys:
                    keys.append(k)
        for key in keys:
            label, unit = planning.describe_field(section, key)
            values = [flat.get(key) for flat in flats]
            deltas, percents = _changes(values)
            differs = (
                _result_differs(values, percents, same_within_pct)
                if section == "Results"
                else _values_differ(values)
            )
            rows.append(
                ComparisonRow(
                    key=key,
                    label=label,
                    unit=unit,
                    section=section,
                    values=values,
                    deltas=deltas,
                    percents=percents,
                    differs=differs,
                )
            )
    return ComparisonPublic(
        plans=columns,
        rows=rows,
        same_within_pct=same_within_pct,
        differences=sum(r.differs for r in rows),
        ranking_note=_ranking_note([_summary_of(r.result) for r in chosen]),
    )


def _ranking_note(summaries: list[dict[str, Any]]) -> str | None:
    """For plans of one model on the same GPUs, whether their estimated speeds differ by more than the estimator's
    ranking resolution (app.core.accuracy); None when the plans are not such a comparison."""
    keys = {(s.get("model"), s.get("gpu"), s.get("num_gpus")) for s in summaries}
    raw = [s.get("tokens_per_s") for s in summaries]
    layouts = {s.get("layout") for s in summaries}
    if len(keys) != 1 or len(layouts) < 2 or not all(isinstance(v, (int, float)) and v > 0 for v in raw):
        return None
    speeds = [float(v) for v in raw if v is not None]
    regimes = [s.get("accuracy_regime") for s in summaries]
    # the widest resolution among the plans' kinds (light MoE passes share the MoE comparisons)
    table = accuracy_table()
    resolutions = [r for r in (ranking_resolution_of(table, regime) for regime in regimes) if r is not None]
    if not resolutions:
        return None
    resolution = max(resolutions, key=lambda r: r.resolution_pct)
    model, gpu, num_gpus = keys.pop()
    return resolution.comparison_note(f"{model} on {num_gpus} × {gpu}", max(speeds), min(speeds))


# ---------------------------------------------------------------------------------------------- export


def export_json(
    session: Session, plan_id: uuid.UUID | str, revision: int | None, actor: PlanActor
) -> dict[str, Any]:
    rev = get_revision(session, plan_id, revision, actor)
    return {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_FORMAT_VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "exported_by_app_version": app_pkg.__version__,
        "app_version": rev.app_version,
        "formula_version": rev.formula_version,
        "price_book_date": rev.price_book_date,
        "calibration_profile": rev.calibration_profile,
        "plan": {
            "id": str(rev.plan_id),
            "name": rev.name,
            "notes": rev.notes,
            "revision": rev.revision,
            "created_at": as_utc(rev.created_at).isoformat(),  # type: ignore[union-attr]
        },
        "scenario": rev.scenario,
        "result": rev.result,
        "builder_choices": rev.builder_choices,
    }


CSV_COLUMNS = ("section", "key", "value", "unit", "source")


def export_csv(session: Session, plan_id: uuid.UUID | str, revision: int | None, actor: PlanActor) -> str:
    """One row per figure: provenance, inputs, builder choices, headline results, breakdowns and assumptions.
    Text cells that a spreadsheet would run as a formula are escaped (app.services.csv_safe)."""
    doc = export_json(session, plan_id, revision, actor)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for key in ("app_version", "formula_version", "price_book_date", "calibration_profile", "exported_at"):
        writer.writerow(safe_row(("provenance", key, doc[key], "", "")))
    for key, value in doc["plan"].items():
        writer.writerow(safe_row(("plan", key, value, "", "")))
    for key, value in _flatten(doc["scenario"]).items():
        writer.writerow(safe_row(("input", key, _cell(value), planning.describe_field("Inputs", key)[1], "")))
    # the builder's choices saved with the revision (planner mode, ranking, scaling mode, deadline, budget, planner
    # constraints); none for plans saved through the API
    for key, value in (doc["builder_choices"] or {}).items():
        writer.writerow(
            safe_row(
                ("builder_choice", key, _cell(value), planning.describe_field("Builder choices", key)[1], "")
            )
        )
    result = doc["result"]
    for key, value in _summary_of(result).items():
        writer.writerow(
            safe_row(("result", key, _cell(value), planning.describe_field("Results", key)[1], ""))
        )
    for section, key, value, unit in planning.breakdown_rows(result):
        writer.writerow(safe_row((section, key, _cell(value), unit, "")))
    for item in result.get("assumptions", []) or []:
        if isinstance(item, dict):
            writer.writerow(
                safe_row(
                    (
                        "assumption",
                        item.get("name", ""),
                        _cell(item.get("value")),
                        item.get("unit", ""),
                        item.get("source", ""),
                    )
                )
            )
    return buf.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if value is None:
        return ""
    return value
