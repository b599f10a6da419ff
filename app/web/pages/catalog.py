"""Catalog pages: GPUs, models (with search), interconnects and the price book (add/edit/delete own rows).

Every page renders in full on a direct load; htmx requests get only the named block of the same template, so each
partial URL is also a working page. Forms work without JavaScript (POST, then 303 back to the page).
"""

from __future__ import annotations

import uuid
from datetime import date
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from app.auth.deps import (
    WriteDep,
    resolve_principal,
)
from app.core import price_age
from app.core.errors import Problem, SpecError
from app.deps import SessionDep
from app.errors import NotFoundError
from app.models.catalog import PRICE_COLUMNS, PriceRow
from app.schemas.catalog import PriceCreate, PriceUpdate
from app.schemas.fields import json_value_problems, parse_json_text
from app.services import catalog as catalog_service
from app.services.catalog_public import (
    actor_of,
    gpu_public,
    interconnect_public,
    model_public,
    price_public,
    price_viewer,
)
from app.web.templating import is_htmx, render

router = APIRouter()
# a name or alias, as the API's catalog paths (app.api.routes.catalog.NamePath)
NamePath = Annotated[str, Path(max_length=200)]


def fmt(value: Any, digits: int = 4) -> str:
    """Numbers for tables: thousands separators, no float noise, an em dash for missing values."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def _csrf(request: Request) -> str:
    principal = getattr(request.state, "principal", None)
    return str(getattr(principal, "csrf_token", "") or "")


def _base_context(request: Request, title: str, section: str) -> dict[str, Any]:
    return {"title": title, "section": section, "fmt": fmt, "csrf_token": _csrf(request)}


def _missing(request: Request, kind: str, exc: NotFoundError, back: str) -> HTMLResponse:
    context = _base_context(request, f"No such {kind}", back)
    context |= {"kind": kind, "name": exc.name, "suggestions": exc.suggestions, "back": back}
    return render(request, "catalog_missing.html", context, status_code=404)


# --- GPUs ----------------------------------------------------------------------------------------------------


@router.get("/catalog", response_class=HTMLResponse)
def catalog_index() -> Response:
    return RedirectResponse("/catalog/gpus", status_code=307)


@router.get("/catalog/gpus", response_class=HTMLResponse)
def gpus_page(request: Request, session: SessionDep) -> HTMLResponse:
    gpus = [gpu_public(row) for row in catalog_service.list_gpus(session)]
    context = _base_context(request, "GPUs", "gpus") | {"gpus": gpus}
    return render(request, "catalog_gpus.html", context, block="table")


@router.get("/catalog/gpus/{name}", response_class=HTMLResponse)
def gpu_page(name: NamePath, request: Request, session: SessionDep) -> HTMLResponse:
    try:
        gpu = gpu_public(catalog_service.get_gpu_entry(session, name))
    except NotFoundError as exc:
        return _missing(request, "GPU", exc, "gpus")
    prices, _ = catalog_service.list_price_rows(
        session,
        catalog_service.PriceFilters(gpu=gpu.name),
        viewer=price_viewer(resolve_principal(request)),
        limit=50,
    )
    context = _base_context(request, gpu.name, "gpus") | {
        "gpu": gpu,
        "prices": [price_public(p) for p in prices],
    }
    return render(request, "catalog_gpu_detail.html", context)


# --- accuracy ------------------------------------------------------------------------------------------------


@router.get("/catalog/accuracy", response_class=HTMLResponse)
def accuracy_page(request: Request) -> HTMLResponse:
    """The validation scorecard: each headline accuracy figure, its data's role, its target and whether it is met."""
    from app.catalog import scorecard_table

    table = scorecard_table()
    sections: dict[str, list[dict[str, Any]]] = {}
    for figure in table["figures"]:
        sections.setdefault(figure["section"], []).append(figure)
    context = _base_context(request, "Accuracy", "accuracy") | {
        "sections": sections,
        "summary": table["summary"],
    }
    return render(request, "catalog_accuracy.html", context)


# --- interconnects -------------------------------------------------------------------------------------------


@router.get("/catalog/interconnects", response_class=HTMLResponse)
def interconnects_page(request: Request, session: SessionDep) -> HTMLResponse:
    links = [interconnect_public(row) for row in catalog_service.list_interconnects(session)]
    context = _base_context(request, "Interconnects", "interconnects") | {
        "scale_up": [i for i in links if i.kind == "scale_up"],
        "scale_out": [i for i in links if i.kind == "scale_out"],
    }
    return render(request, "catalog_interconnects.html", context)


# --- models --------------------------------------------------------------------------------------------------


@router.get("/catalog/models", response_class=HTMLResponse)
def models_page(
    request: Request,
    session: SessionDep,
    q: Annotated[str, Query(max_length=100)] = "",
) -> HTMLResponse:
    models = [model_public(row) for row in catalog_service.list_models(session, q or None)]
    context = _base_context(request, "Models", "models") | {"models": models, "q": q}
    return render(request, "catalog_models.html", context, block="table")


@router.get("/catalog/models/{name}", response_class=HTMLResponse)
def model_page(name: NamePath, request: Request, session: SessionDep) -> HTMLResponse:
    try:
        model = model_public(catalog_service.get_model_entry(session, name))
    except NotFoundError as exc:
        return _missing(request, "model", exc, "models")
    context = _base_context(request, model.name, "models") | {"model": model, "spec": model.spec}
    return render(request, "catalog_model_detail.html", context)


@router.post("/catalog/models", response_class=HTMLResponse)
async def import_model(request: Request, session: SessionDep, principal: WriteDep) -> Response:
    """Add a model by pasting a Hugging Face config.json."""
    form = await request.form()
    name = str(form.get("name") or "").strip()
    text = str(form.get("hf_config") or "")
    problems: list[Problem] = []
    row = None
    try:
        config = parse_json_text(text)
    except ValueError as exc:
        problems.append(Problem("hf_config", str(exc)))
    else:
        problems = _config_problems(config)
    if not problems:
        try:
            row = catalog_service.add_model_from_hf(
                session, config, name, owner_id=actor_of(principal).user_id
            )
        except SpecError as exc:
            problems = list(exc.problems)
    if row is not None and not is_htmx(request):
        return RedirectResponse(f"/catalog/models/{quote(row.name, safe='')}", status_code=303)
    models = [model_public(r) for r in catalog_service.list_models(session)]
    context = _base_context(request, "Models", "models") | {
        "models": models,
        "q": "",
        "import_errors": problems,
        "import_form": {"name": name, "hf_config": text},
        "imported": row.name if row is not None else None,
    }
    status = 200 if (row is not None or is_htmx(request)) else 422
    return render(request, "catalog_models.html", context, block="importer", status_code=status)


def _config_problems(config: Any) -> list[Problem]:
    """A pasted config.json must be an object without NaN, Infinity, NUL or integers beyond 64 bits."""
    if not isinstance(config, dict):
        return [Problem("hf_config", "must be a JSON object")]
    return [
        Problem(".".join(["hf_config", *map(str, path)]), reason)
        for path, reason in json_value_problems(config)
    ]


# --- price book ----------------------------------------------------------------------------------------------


def _price_filters(params: dict[str, str]) -> dict[str, str]:
    keys = ("category", "vendor", "gpu", "pricing_model", "mine")
    return {k: params[k].strip() for k in keys if params.get(k, "").strip()}


def _price_book_context(
    request: Request,
    session: SessionDep,
    filters: dict[str, str],
    form: dict[str, Any] | None = None,
    errors: list[Problem] | None = None,
    editing: PriceRow | None = None,
    message: str = "",
) -> dict[str, Any]:
    principal = resolve_principal(request)
    actor, viewer = actor_of(principal), price_viewer(principal)
    wanted = catalog_service.PriceFilters(
        category=filters.get("category"),
        vendor=filters.get("vendor"),
        gpu=filters.get("gpu"),
        pricing_model=filters.get("pricing_model"),
        builtin=False if filters.get("mine") else None,
    )
    rows, total = catalog_service.list_price_rows(
        session, wanted, viewer=viewer, owner_id=actor.user_id if filters.get("mine") else None
    )
    editable = {r.id for r in rows if _may_change(r, actor)}
    today = date.today()
    if form is None:
        form = _form_from_row(editing) if editing is not None else {"confidence": "user", "price_date": today}
    return _base_context(request, "Price book", "prices") | {
        "prices": [price_public(r, today) for r in rows],
        "count": total,
        "filters": filters,
        "query": urlencode(filters),
        "categories": catalog_service.price_categories(session, viewer=viewer),
        "gpu_names": list(catalog_service.gpu_names(session)),
        "stale_days": {c: price_age.stale_after_days(c) for c in sorted(price_age.STALE_AFTER_MONTHS)},
        "form": form,
        "errors": {p.field: p.message for p in errors or []},
        "editing": editing,
        "message": message,
        "editable": editable,
    }


def _may_change(row: PriceRow, actor: catalog_service.Actor) -> bool:
    try:
        catalog_service.check_may_change(row, "price row", row.item, actor)
    except PermissionError:
        return False
    return True


def _form_from_row(row: PriceRow) -> dict[str, Any]:
    return {key: getattr(row, key) for key in PRICE_COLUMNS}


async def _read_price_form(request: Request) -> dict[str, Any]:
    form = await request.form()
    values: dict[str, Any] = {}
    for key in PRICE_COLUMNS:
        raw = form.get(key)
        text = raw.strip() if isinstance(raw, str) else ""
        if key in ("usd_per_gpu_hour", "gpu_name", "gpus_per_unit") and not text:
            values[key] = None
        else:
            values[key] = text
    return values


def _validate(values: dict[str, Any], model: type[PriceCreate] | type[PriceUpdate]) -> dict[str, Any]:
    """Pydantic does the typing (numbers, dates); its errors become field-level problems."""
    try:
        return model.model_validate(values).model_dump(exclude_unset=model is PriceUpdate)
    except ValidationError as exc:
        problems = [
            Problem(".".join(str(p) for p in err["loc"]) or "form", err["msg"].removeprefix("Value error, "))
            for err in exc.errors()
        ]
        raise SpecError(problems) from None


def _book_response(request: Request, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
    # htmx swaps only 2xx responses by default: a form with errors goes back as 200 to the htmx caller,
    # as 422 to a plain form post.
    if is_htmx(request) and status_code == 422:
        status_code = 200
    return render(request, "catalog_prices.html", context, block="book", status_code=status_code)


@router.get("/catalog/prices", response_class=HTMLResponse)
def prices_page(request: Request, session: SessionDep) -> HTMLResponse:
    filters = _price_filters(dict(request.query_params))
    context = _price_book_context(request, session, filters)
    block = "table" if request.headers.get("HX-Target") == "price-table" else "book"
    return render(request, "catalog_prices.html", context, block=block)


@router.post("/catalog/prices", response_class=HTMLResponse)
async def add_price(request: Request, session: SessionDep, principal: WriteDep) -> Response:
    values = await _read_price_form(request)
    filters = _price_filters(dict(request.query_params))
    try:
        row = catalog_service.add_price_row(
            session, _validate(values, PriceCreate), owner_id=actor_of(principal).user_id
        )
    except SpecError as exc:
        context = _price_book_context(request, session, filters, form=values, errors=exc.problems)
        return _book_response(request, context, 422)
    if not is_htmx(request):
        return RedirectResponse(f"/catalog/prices?{urlencode(filters)}#price-{row.id}", status_code=303)
    context = _price_book_context(request, session, filters, message=f"Added “{row.item}”.")
    return _book_response(request, context)


def _editable_row(
    session: SessionDep,
    price_id: uuid.UUID,
    actor: catalog_service.Actor,
    viewer: catalog_service.Actor | None = None,
) -> PriceRow:
    """The row, if `viewer` (default: `actor`) sees it and `actor` may change it: a row the viewer does not see
    (another user's, or the caller's own through a credential without plans:read) is NotFoundError (as a missing
    one), a built-in one ReadOnlyError."""
    row = catalog_service.get_price_row(session, price_id, viewer=actor if viewer is None else viewer)
    catalog_service.check_may_change(row, "price row", row.item, actor)
    return row


@router.get("/catalog/prices/{price_id}/edit", response_class=HTMLResponse)
def edit_price_form(price_id: uuid.UUID, request: Request, session: SessionDep) -> HTMLResponse:
    filters = _price_filters(dict(request.query_params))
    principal = resolve_principal(request)
    try:
        # read as the price book reads (price_viewer: a token without plans:read sees the built-in rows only)
        row = _editable_row(session, price_id, actor_of(principal), price_viewer(principal))
    except NotFoundError as exc:
        return _missing(request, "price row", exc, "prices")
    except PermissionError as exc:
        context = _price_book_context(request, session, filters, message=str(exc))
        return _book_response(request, context, 403)
    return _book_response(request, _price_book_context(request, session, filters, editing=row))


@router.post("/catalog/prices/{price_id}", response_class=HTMLResponse)
async def update_price(
    price_id: uuid.UUID, request: Request, session: SessionDep, principal: WriteDep
) -> Response:
    values = await _read_price_form(request)
    filters = _price_filters(dict(request.query_params))
    actor = actor_of(principal)
    try:
        row = _editable_row(session, price_id, actor)
    except NotFoundError as exc:
        return _missing(request, "price row", exc, "prices")
    except PermissionError as exc:
        return _book_response(request, _price_book_context(request, session, filters, message=str(exc)), 403)
    try:
        catalog_service.update_price_row(session, row.id, _validate(values, PriceCreate), actor)
    except SpecError as exc:
        context = _price_book_context(
            request, session, filters, form=values, errors=exc.problems, editing=row
        )
        return _book_response(request, context, 422)
    if not is_htmx(request):
        return RedirectResponse(f"/catalog/prices?{urlencode(filters)}#price-{row.id}", status_code=303)
    return _book_response(
        request, _price_book_context(request, session, filters, message=f"Saved “{row.item}”.")
    )


@router.post("/catalog/prices/{price_id}/delete", response_class=HTMLResponse)
async def delete_price(
    price_id: uuid.UUID, request: Request, session: SessionDep, principal: WriteDep
) -> Response:
    filters = _price_filters(dict(request.query_params))
    actor = actor_of(principal)
    try:
        row = _editable_row(session, price_id, actor)
        item = row.item
        catalog_service.delete_price_row(session, price_id, actor)
    except NotFoundError as exc:
        return _missing(request, "price row", exc, "prices")
    except PermissionError as exc:
        return _book_response(request, _price_book_context(request, session, filters, message=str(exc)), 403)
    if not is_htmx(request):
        return RedirectResponse(f"/catalog/prices?{urlencode(filters)}", status_code=303)
    return _book_response(
        request, _price_book_context(request, session, filters, message=f"Deleted “{item}”.")
    )
