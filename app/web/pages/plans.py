"""Planning session pages: the plan builder, saved plans, a plan's revisions and sharing, compare.

Every page renders in full on a direct load; htmx requests get only the named block of the same template.
The pages apply the same sharing rules as the API (app.services.plan_access): a plan the caller may not read
is the 404 page, a change they may not make is a 403 page saying why.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import Field, ValidationError
from sqlmodel import Session

from app.auth.deps import Principal, PrincipalDep, ReadDep, WriteDep, current_principal, may_use_profiles
from app.core.errors import Problem, SpecError
from app.deps import SameWithinPct, SessionDep
from app.errors import NotFoundError
from app.schemas.fields import parse_json_text
from app.schemas.plans import (
    PlanCreate,
    PlanDuplicate,
    PlanPublic,
    PlanRevise,
    PlanSharingUpdate,
    RevisionForm,
)
from app.services import planning
from app.services import plans as plan_service
from app.services.catalog import Actor
from app.services.catalog_public import price_viewer
from app.services.plan_access import OwnerFilter, PlanActor
from app.web.pages import _builder, _panels, tools
from app.web.pages._compare import display_rows, picker_plans
from app.web.templating import render

router = APIRouter()
MAX_OFFSET = 2**53  # rows to skip: as the API's paging (app.api.envelope), beyond any table
MAX_REVISION = 2**31 - 1  # plan_revision.revision is a 32-bit INTEGER column (PostgreSQL integer)
COMPARE_CHOICES = 200  # the compare page offers up to 200 plans to tick; the service says "2 to 4"


def _actor(principal: Principal) -> PlanActor:
    return PlanActor.of(principal)


def _csrf(request: Request) -> str:
    principal = getattr(request.state, "principal", None)
    return str(getattr(principal, "csrf_token", "") or "")


def _not_found(request: Request, kind: str, name: str) -> HTMLResponse:
    return render(
        request,
        "plan_missing.html",
        {"title": f"No such {kind}", "kind": kind, "name": name},
        status_code=404,
    )


def _forbidden(request: Request, exc: PermissionError) -> HTMLResponse:
    return render(
        request,
        "plan_missing.html",
        {"title": "Not allowed", "reason": str(exc), "kind": "", "name": ""},
        status_code=403,
    )


# ---------------------------------------------------------------------------------------------- builder


@router.get("/plans/new", response_class=HTMLResponse)
def builder(
    request: Request, session: SessionDep, principal: Annotated[Principal, Depends(current_principal)]
) -> HTMLResponse:
    """The planning session: inputs on the left, results updated in place on the right."""
    params = dict(request.query_params)
    editing = params.pop("plan", None)
    editing_plan = _plan_to_edit(session, editing, principal) if editing else None
    return _builder_page(request, session, principal, _builder.parse_state(params), editing_plan)


def _builder_page(
    request: Request,
    session: Session,
    principal: Principal,
    state: _builder.BuilderState,
    editing_plan: PlanPublic | None,
    refused: RevisionForm | None = None,
    problems: list[Problem] | None = None,
) -> HTMLResponse:
    """The builder for `state`; after a refused save (`refused`: what was posted, `problems`: why), the whole page
    again with the save form's name and notes kept and a 422."""
    profiles_allowed = may_use_profiles(principal)  # anonymous: no profile choices, a named one is refused
    view = _panels.build_view(
        session, state, profiles_allowed, viewer=_prices_viewer(session, principal, editing_plan)
    )
    context: dict[str, Any] = {
        "title": f"Edit {editing_plan.name}" if editing_plan else "New plan",
        "state": state,
        "view": view,
        "choices": _panels.choices(session, state, profiles_allowed),
        # each input's label, unit, range or options, and hint (app.core.knobs)
        "knobs": _builder.BUILDER_KNOBS | _builder.BUILDER_CHOICES,
        "labels": _builder.BUILDER_LABELS,  # the other inputs' labels
        "generic_knobs": _builder.GENERIC_NAMES,
        "planner_chooses": _builder.PLANNER_CHOOSES,
        "editing": editing_plan,
        # appended to the deferred panels' queries (the sizing panel prices as these results do) and to every
        # "Use …" link, so that following one keeps revising the plan
        "editing_query": _editing_query(editing_plan),
        "csrf_token": _csrf(request),
        "cluster_links": tools.cluster_links(state),
        "typed_query": state.typed_query(),  # sent with a save: a refused one reopens these inputs
        "refused": refused,
        "save_problems": problems or [],
        "save_labels": SAVE_LABELS,
    }
    if refused is not None:
        return render(request, "plan_new.html", context, status_code=422)
    return render(request, "plan_new.html", context, block="results")


def _prices_viewer(session: Session, principal: Principal, editing_plan: PlanPublic | None) -> Actor:
    """Whose prices the builder's results use: the caller's, or while revising a plan its owner's, as the saved
    revision will (app.services.plans.priced_as)."""
    if editing_plan is not None:
        return plan_service.plan_prices_viewer(session, editing_plan.id)
    return price_viewer(principal)


def _editing_query(editing_plan: PlanPublic | None) -> str:
    """What a deferred panel's query adds for the plan the builder revises ('' for a new plan)."""
    return f"&plan={editing_plan.id}" if editing_plan is not None else ""


def _editing_plan_of(request: Request, session: Session, principal: Principal) -> PlanPublic | None:
    """The plan a deferred panel's query names (`plan`), when the caller may change it; else None."""
    editing = request.query_params.get("plan")
    return _plan_to_edit(session, editing, principal) if editing else None


def _plan_to_edit(session: Session, plan_id: str, principal: Principal) -> PlanPublic | None:
    """The plan the builder saves a revision of: only one the caller may change (else a new plan)."""
    if not principal.has("plans:read"):
        return None
    try:
        plan = plan_service.get_plan(session, plan_id, _actor(principal))
    except NotFoundError:
        return None
    return plan if plan.may_change else None


def _deferred_panel(
    request: Request,
    session: Session,
    principal: Principal,
    panel: tuple[str, str, Callable[[Session, _builder.BuilderState, bool], Any]],
    page: tuple[str, str],
    editing_plan: PlanPublic | None = None,
) -> HTMLResponse:
    """A panel the builder loads after its main results, for the builder's query: `panel` (title, context key,
    its view from the session, the builder's state and whether the caller may use calibration profiles) in the
    block of `page` (template, block); a full page on a direct load, whose link back to the builder keeps
    revising `editing_plan`."""
    title, key, build = panel
    state = _builder.parse_state(dict(request.query_params))
    context = {
        "title": title,
        key: build(session, state, may_use_profiles(principal)),
        "builder_query": state.query() + _editing_query(editing_plan),
        "editing_query": _editing_query(editing_plan),
    }
    return render(request, page[0], context, block=page[1])


@router.get("/plans/new/scaling", response_class=HTMLResponse)
def builder_scaling(request: Request, session: SessionDep, principal: PrincipalDep) -> HTMLResponse:
    """The scaling panel of the builder, computed after the main results (a full page on a direct load)."""
    panel = ("Scaling", "view", _panels.scaling_view)
    editing_plan = _editing_plan_of(request, session, principal)
    return _deferred_panel(request, session, principal, panel, ("plan_scaling.html", "scaling"), editing_plan)


@router.get("/plans/new/alternative", response_class=HTMLResponse)
def builder_alternative(request: Request, session: SessionDep, principal: PrincipalDep) -> HTMLResponse:
    """What fits, for a builder layout that does not: the planner's fastest layout that does, searched after the
    main results (a full page on a direct load)."""
    panel = ("What fits", "alternative", _panels.alternative_view)
    editing_plan = _editing_plan_of(request, session, principal)
    return _deferred_panel(
        request, session, principal, panel, ("plan_alternative.html", "alternative"), editing_plan
    )


@router.get("/plans/new/sizes", response_class=HTMLResponse)
def builder_sizes(request: Request, session: SessionDep, principal: PrincipalDep) -> HTMLResponse:
    """The builder's sizing panel: the smallest cluster that meets its deadline and budget (a full page on a
    direct load), priced as the builder's results: revising a plan (`plan`, one the caller may change), at its
    owner's prices; a plan the caller may not change is ignored, as the builder ignores it (the caller's own)."""
    editing_plan = _editing_plan_of(request, session, principal)
    viewer = _prices_viewer(session, principal, editing_plan)
    panel = ("Cluster size", "sizing", partial(_panels.sizing_view, viewer=viewer))
    return _deferred_panel(request, session, principal, panel, ("plan_sizes.html", "sizing"), editing_plan)


@router.post("/plans", response_class=HTMLResponse)
def save_new_plan(
    request: Request, session: SessionDep, principal: WriteDep, form: Annotated[RevisionForm, Form()]
) -> Response:
    try:
        body = PlanCreate.model_validate(
            {
                "name": form.name or "Untitled plan",
                "notes": form.notes,
                "scenario": _scenario_field(form.scenario),
                "calibration_profile": form.calibration_profile or None,
            }
        )
        plan = plan_service.create_plan(session, body, _actor(principal), _choices_field(form.builder))
    except SpecError as exc:
        return _builder_refused(request, session, principal, form, exc)
    except ValidationError as exc:
        return _builder_refused(request, session, principal, form, planning.validation_problems(exc, ""))
    except PermissionError as exc:
        return _forbidden(request, exc)
    return _see_other(request, f"/plans/{plan.id}")


@router.post("/plans/{plan_id}/revise", response_class=HTMLResponse)
def save_revision(
    request: Request,
    plan_id: uuid.UUID,
    session: SessionDep,
    principal: WriteDep,
    form: Annotated[RevisionForm, Form()],
) -> Response:
    try:
        change = PlanRevise.model_validate(
            {
                "name": form.name or None,
                "notes": form.notes,
                "scenario": _scenario_field(form.scenario),
                "calibration_profile": form.calibration_profile or planning.DEFAULT_PROFILE,
            }
        )
        plan_service.add_revision(session, plan_id, change, _actor(principal), _choices_field(form.builder))
    except SpecError as exc:
        return _builder_refused(request, session, principal, form, exc, plan_id)
    except ValidationError as exc:
        problems = planning.validation_problems(exc, "")
        return _builder_refused(request, session, principal, form, problems, plan_id)
    except NotFoundError:
        return _not_found(request, "plan", str(plan_id))
    except PermissionError as exc:
        return _forbidden(request, exc)
    return _see_other(request, f"/plans/{plan_id}")


@router.post("/plans/{plan_id}/sharing", response_class=HTMLResponse)
def save_sharing(
    request: Request,
    plan_id: uuid.UUID,
    session: SessionDep,
    principal: WriteDep,
    visibility: Annotated[str, Form(max_length=20)] = "private",
    users: Annotated[str, Form(max_length=20000)] = "",
) -> Response:
    """The sharing form: visibility and the e-mails of named readers (one per line or comma-separated)."""
    emails = [e for e in users.replace(",", "\n").split() if e]
    try:
        update = PlanSharingUpdate.model_validate(
            {"visibility": visibility, "users": emails if visibility == "users" else []}
        )
        plan_service.set_sharing(session, plan_id, update, _actor(principal))
    except SpecError as exc:
        return _save_failed(request, exc)
    except ValidationError as exc:
        return _save_failed(request, planning.validation_problems(exc, ""))
    except NotFoundError:
        return _not_found(request, "plan", str(plan_id))
    except PermissionError as exc:
        return _forbidden(request, exc)
    return _see_other(request, f"/plans/{plan_id}")


def _scenario_field(raw: str) -> dict[str, Any]:
    try:
        scenario = parse_json_text(raw)
    except ValueError:
        raise SpecError([Problem("scenario", "the inputs have problems; fix them before saving")]) from None
    if not isinstance(scenario, dict):
        raise SpecError([Problem("scenario", "the inputs have problems; fix them before saving")])
    return scenario


def _choices_field(raw: str) -> dict[str, Any]:
    """The builder's choices posted beside the scenario (JSON): the ones the builder accepts, else none."""
    try:
        return _builder.choices_from(json.loads(raw)) if raw else {}
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return {}


# the save form's fields as its page labels them (a refused save lists its problems by these)
SAVE_LABELS = {
    "name": "Plan name",
    "notes": "Notes",
    "scenario": "Inputs",
    "calibration_profile": "Calibration profile",
}


def _builder_refused(
    request: Request,
    session: Session,
    principal: Principal,
    form: RevisionForm,
    exc: SpecError,
    plan_id: uuid.UUID | None = None,
) -> HTMLResponse:
    """A save the service refused: the builder again with the inputs the form carried (its problems listed by field
    as while editing), the name and notes kept, and why the save failed; nothing is saved."""
    params = dict(parse_qsl(form.inputs, keep_blank_values=True))
    params.pop("plan", None)
    editing = _plan_to_edit(session, str(plan_id), principal) if plan_id else None
    state = _builder.parse_state(params)
    return _builder_page(request, session, principal, state, editing, form, list(exc.problems))


def _save_failed(request: Request, exc: SpecError) -> HTMLResponse:
    return render(
        request,
        "plan_missing.html",
        {"title": "Plan not saved", "problems": exc.problems, "kind": "", "name": ""},
        status_code=422,
    )


def _see_other(request: Request, url: str) -> Response:
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=204, headers={"HX-Location": url})
    return RedirectResponse(url, status_code=303)


# ---------------------------------------------------------------------------------------------- saved plans


@router.get("/plans", response_class=HTMLResponse)
def plan_list(
    request: Request,
    session: SessionDep,
    principal: ReadDep,
    q: Annotated[str | None, Query(max_length=200)] = None,
    owner: Annotated[OwnerFilter, Query()] = "all",
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> HTMLResponse:
    limit = 50  # rows per page: a screenful of the table
    rows, count = plan_service.list_plans(
        session, _actor(principal), offset=offset, limit=limit, q=q, owner=owner
    )
    context = {
        "title": "Saved plans",
        "plans": rows,
        "count": count,
        "q": q or "",
        "owner": owner,
        "offset": offset,
        "limit": limit,
        "csrf_token": _csrf(request),
    }
    return render(request, "plan_list.html", context, block="plan_table")


@router.get("/plans/compare", response_class=HTMLResponse)
def compare(
    request: Request,
    session: SessionDep,
    principal: ReadDep,
    # plan ids (a UUID has 36 characters); blanks are skipped
    ids: Annotated[
        list[Annotated[str, Field(max_length=100)]] | None, Query(max_length=COMPARE_CHOICES)
    ] = None,
    revs: Annotated[list[Annotated[int, Field(le=MAX_REVISION)]] | None, Query(max_length=4)] = None,
    only_differences: Annotated[bool, Query()] = False,
    same_within_pct: SameWithinPct = plan_service.SAME_WITHIN_PCT,
) -> HTMLResponse:
    chosen = [i for i in (ids or []) if i]
    actor = _actor(principal)
    plans = picker_plans(plan_service.list_plans(session, actor, limit=200)[0], principal.email)
    if len(chosen) == 1:
        return _pick_second(request, session, actor, chosen[0], plans, same_within_pct)
    comparison, problem, missing = _comparison(session, chosen, revs, actor, same_within_pct)
    rows = comparison.rows if comparison else []
    if only_differences:
        rows = [r for r in rows if r.differs]
    context = _compare_context(plans, same_within_pct, ids=chosen, only_differences=only_differences)
    context |= {"comparison": comparison, "rows": display_rows(rows), "problem": problem}
    status_code = 200 if comparison or not chosen else 404 if missing else 422
    return render(request, "plan_compare.html", context, block="comparison", status_code=status_code)


def _compare_context(plans: list[Any], same_within_pct: float, **values: Any) -> dict[str, Any]:
    """The compare page's context with nothing compared yet; `values` replace its entries."""
    context = {
        "title": "Compare plans",
        "comparison": None,
        "rows": [],
        "problem": "",
        "ids": [],
        "only_differences": False,
        "same_within_pct": same_within_pct,
        "plans": plans,
    }
    return context | values


def _comparison(
    session: Session, chosen: list[str], revs: list[int] | None, actor: PlanActor, same_within_pct: float
) -> tuple[Any, str, bool]:
    """The comparison of the chosen plans, or why there is none and whether that is a plan not found."""
    try:
        comparison = plan_service.compare_plans(
            session, list(chosen), [r or None for r in (revs or [])], actor, same_within_pct
        )
    except SpecError as exc:
        return None, "; ".join(p.message for p in exc.problems), False
    except NotFoundError as exc:
        return None, str(exc), True  # absent or not readable: the same answer as the API's 404
    return comparison, "", False


def _pick_second(
    request: Request,
    session: Session,
    actor: PlanActor,
    plan_id: str,
    plans: list[Any],
    same_within_pct: float,
) -> HTMLResponse:
    """One plan chosen ("Compare with…" on its page): ask for a second one among the caller's other plans; a plan
    the caller may not read is the 404 answer, as for a comparison."""
    try:
        first = plan_service.get_revision(session, plan_id, None, actor)
    except NotFoundError as exc:
        context = _compare_context(plans, same_within_pct, ids=[plan_id], problem=str(exc))
        return render(request, "plan_compare.html", context, block="comparison", status_code=404)
    others = [p for p in plans if str(p.id) != str(first.plan_id)]
    context = _compare_context(plans, same_within_pct, ids=[str(first.plan_id)], first=first, others=others)
    return render(request, "plan_compare.html", context, block="comparison")


@router.get("/plans/{plan_id}", response_class=HTMLResponse)
def plan_detail(
    request: Request,
    plan_id: Annotated[str, Path(max_length=100)],  # a UUID (36 characters); anything else is the page's 404
    session: SessionDep,
    principal: ReadDep,
    revision: Annotated[int | None, Query(ge=1, le=MAX_REVISION)] = None,
) -> HTMLResponse:
    actor = _actor(principal)
    try:
        plan = plan_service.get_plan(session, plan_id, actor)
        rev = plan_service.get_revision(session, plan_id, revision, actor)
        revisions, _count = plan_service.list_revisions(session, plan_id, actor, limit=1000)
    except NotFoundError:
        return _not_found(request, "plan", plan_id)
    state = _builder.scenario_to_state(rev.scenario, rev.builder_choices)
    if rev.calibration_profile != planning.DEFAULT_PROFILE:
        state.profile = rev.calibration_profile
    context = {
        "title": plan.name,
        "plan": plan,
        "rev": rev,
        "revisions": revisions,
        "view": _panels.view_from_saved(rev, plan.may_change),
        "saved_choices": _panels.saved_choices_summary(rev.builder_choices),
        "builder_query": state.query(plan=str(plan.id)) if plan.may_change else state.query(),
        "cluster_links": tools.cluster_links(state),
        "can_write": principal.has("plans:write"),
        "csrf_token": _csrf(request),
    }
    return render(request, "plan_detail.html", context, block="revision")


@router.post("/plans/{plan_id}/duplicate", response_class=HTMLResponse)
def duplicate(request: Request, plan_id: uuid.UUID, session: SessionDep, principal: WriteDep) -> Response:
    """A copy of the plan of the caller's own, evaluated at their prices (app.services.plans.duplicate_plan); a
    plan whose inputs no longer evaluate is the 422 page naming the fields, and nothing is saved."""
    try:
        copy = plan_service.duplicate_plan(session, plan_id, PlanDuplicate(), _actor(principal))
    except SpecError as exc:
        return _save_failed(request, exc)
    except NotFoundError:
        return _not_found(request, "plan", str(plan_id))
    except PermissionError as exc:
        return _forbidden(request, exc)
    return _see_other(request, f"/plans/{copy.id}")


@router.post("/plans/{plan_id}/delete", response_class=HTMLResponse)
def delete(request: Request, plan_id: uuid.UUID, session: SessionDep, principal: WriteDep) -> Response:
    try:
        plan_service.delete_plan(session, plan_id, _actor(principal))
    except NotFoundError:
        return _not_found(request, "plan", str(plan_id))
    except PermissionError as exc:
        return _forbidden(request, exc)
    return _see_other(request, "/plans")
