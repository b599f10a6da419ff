"""/api/v1 catalog: GPUs, interconnects, model architectures and the price book.

Reads are public. Adding models and price rows, and editing or deleting one's own, needs plans:write. A user's price
rows are theirs: the price routes show each caller the rows app.services.catalog.price_visibility lets them see (the
built-in rows; their own; every row to an administrator), and another user's row is a 404 like a missing one. Specs are
returned in SI base units (`spec`) next to the display units the pages use (TFLOP/s, GiB, GB/s, µs).
"""

from __future__ import annotations

import csv
import io
import uuid
from datetime import date
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Path, Query, Response, status
from fastapi.responses import PlainTextResponse

from app.api.envelope import PagingDep
from app.auth.deps import PrincipalDep, WriteDep
from app.core.errors import Problem, SpecError
from app.deps import SessionDep
from app.schemas.catalog import (
    GPUPublic,
    InterconnectPublic,
    ModelCreate,
    ModelPublic,
    PriceCreate,
    PricePublic,
    PriceUpdate,
    Scorecard,
)
from app.schemas.envelope import ListEnvelope
from app.services import catalog as catalog_service
from app.services.catalog_public import (
    actor_of,
    gpu_public,
    interconnect_public,
    model_public,
    price_public,
    price_viewer,
)
from app.services.csv_safe import safe_record

router = APIRouter()


NamePath = Annotated[str, Path(min_length=1, max_length=200, description="name or alias (case-insensitive)")]


def _forbidden(exc: PermissionError) -> HTTPException:
    return HTTPException(status_code=status.HTTP_403_FORBIDDEN, detail=str(exc))


# --- GPUs ----------------------------------------------------------------------------------------------------


@router.get(
    "/gpus",
    tags=["gpus"],
    operation_id="list_gpus",
    response_model=ListEnvelope[GPUPublic],
    summary="List accelerators",
)
def list_gpus(session: SessionDep, page: PagingDep) -> ListEnvelope[GPUPublic]:
    rows = catalog_service.list_gpus(session)
    data = [gpu_public(r) for r in rows[page.offset : page.offset + page.limit]]
    return ListEnvelope(data=data, count=len(rows))


@router.get(
    "/gpus/{name}", tags=["gpus"], operation_id="get_gpu", response_model=GPUPublic, summary="One accelerator"
)
def get_gpu(name: NamePath, session: SessionDep) -> GPUPublic:
    return gpu_public(catalog_service.get_gpu_entry(session, name))


# --- accuracy ------------------------------------------------------------------------------------------------


@router.get(
    "/accuracy/scorecard",
    tags=["accuracy"],
    operation_id="get_scorecard",
    response_model=Scorecard,
    summary="Every headline accuracy figure, its data's role and target",
)
def get_scorecard() -> Scorecard:
    """The validation scorecard as committed with the model (`clusterplan validate scorecard --write`): each figure's
    value against published measurements, whether its rows were development or held out, and its target."""
    from app.catalog import scorecard_table

    return Scorecard.model_validate(scorecard_table())


# --- interconnects -------------------------------------------------------------------------------------------


@router.get(
    "/interconnects",
    tags=["interconnects"],
    operation_id="list_interconnects",
    response_model=ListEnvelope[InterconnectPublic],
    summary="List link and NIC technologies",
)
def list_interconnects(
    session: SessionDep,
    page: PagingDep,
    kind: Annotated[
        Literal["scale_up", "scale_out"] | None, Query(description="scale_up or scale_out")
    ] = None,
) -> ListEnvelope[InterconnectPublic]:
    rows = [r for r in catalog_service.list_interconnects(session) if kind is None or r.kind == kind]
    data = [interconnect_public(r) for r in rows[page.offset : page.offset + page.limit]]
    return ListEnvelope(data=data, count=len(rows))


@router.get(
    "/interconnects/{name}",
    tags=["interconnects"],
    operation_id="get_interconnect",
    response_model=InterconnectPublic,
    summary="One link or NIC technology",
)
def get_interconnect(name: NamePath, session: SessionDep) -> InterconnectPublic:
    return interconnect_public(catalog_service.get_interconnect_entry(session, name))


# --- models --------------------------------------------------------------------------------------------------


@router.get(
    "/models",
    tags=["models"],
    operation_id="list_models",
    response_model=ListEnvelope[ModelPublic],
    summary="List model architectures",
)
def list_models(
    session: SessionDep,
    page: PagingDep,
    q: Annotated[str | None, Query(max_length=100, description="search name, family or alias")] = None,
    family: Annotated[str | None, Query(max_length=50)] = None,
) -> ListEnvelope[ModelPublic]:
    rows = catalog_service.list_models(session, q, family)
    data = [model_public(r) for r in rows[page.offset : page.offset + page.limit]]
    return ListEnvelope(data=data, count=len(rows))


@router.get(
    "/models/{name}",
    tags=["models"],
    operation_id="get_model",
    response_model=ModelPublic,
    summary="One model",
)
def get_model(name: NamePath, session: SessionDep) -> ModelPublic:
    return model_public(catalog_service.get_model_entry(session, name))


@router.post(
    "/models",
    tags=["models"],
    operation_id="create_model",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelPublic,
    summary="Add a model from an inline spec or a Hugging Face config.json",
)
def create_model(
    body: ModelCreate, session: SessionDep, principal: WriteDep, response: Response
) -> ModelPublic:
    owner = actor_of(principal).user_id
    if body.hf_config is not None:
        try:
            row = catalog_service.add_model_from_hf(session, body.hf_config, body.name or "", owner_id=owner)
        except SpecError as exc:  # point each problem at the config key inside the request body
            raise SpecError(
                [p if p.field == "name" else Problem(f"hf_config.{p.field}", p.message) for p in exc.problems]
            ) from None
    else:
        assert body.spec is not None
        row = catalog_service.add_model(session, body.spec.to_spec(), owner_id=owner)
    response.headers["Location"] = f"/api/v1/models/{quote(row.name, safe='')}"
    return model_public(row)


@router.delete(
    "/models/{name}",
    tags=["models"],
    operation_id="delete_model",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a model you added (built-in models are read-only)",
)
def delete_model(name: NamePath, session: SessionDep, principal: WriteDep) -> Response:
    try:
        catalog_service.delete_model(session, name, actor_of(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- price book ----------------------------------------------------------------------------------------------


@router.get(
    "/prices",
    tags=["prices"],
    operation_id="list_prices",
    response_model=ListEnvelope[PricePublic],
    summary="List price rows (dated, sourced, with what each price includes)",
)
def list_prices(
    session: SessionDep,
    page: PagingDep,
    principal: PrincipalDep,
    category: Annotated[str | None, Query(max_length=50, examples=["cloud_gpu"])] = None,
    vendor: Annotated[str | None, Query(max_length=100, description="substring, case-insensitive")] = None,
    gpu: Annotated[str | None, Query(max_length=100, description="GPU name or alias")] = None,
    pricing_model: Annotated[str | None, Query(max_length=100, description="substring, e.g. spot")] = None,
    builtin: Annotated[
        bool | None, Query(description="only built-in (true) or only user rows (false)")
    ] = None,
) -> ListEnvelope[PricePublic]:
    filters = catalog_service.PriceFilters(category, vendor, gpu, pricing_model, builtin)
    rows, total = catalog_service.list_price_rows(
        session, filters, viewer=price_viewer(principal), offset=page.offset, limit=page.limit
    )
    today = date.today()
    return ListEnvelope(data=[price_public(r, today) for r in rows], count=total)


PRICE_CSV_COLUMNS = (
    "id",
    "category",
    "item",
    "vendor",
    "region",
    "pricing_model",
    "unit",
    "price_usd",
    "usd_per_gpu_hour",
    "gpu_name",
    "gpus_per_unit",
    "price_date",
    "age_days",
    "stale",
    "confidence",
    "includes",
    "source",
    "notes",
    "builtin",
)


@router.get(
    "/prices/export.csv",
    tags=["prices"],
    operation_id="export_prices_csv",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/csv": {}}, "description": "the filtered price book as CSV"}},
    summary="The price book as CSV (same filters as list_prices, no paging)",
)
def export_prices_csv(
    session: SessionDep,
    principal: PrincipalDep,
    category: Annotated[str | None, Query(max_length=50)] = None,
    vendor: Annotated[str | None, Query(max_length=100)] = None,
    gpu: Annotated[str | None, Query(max_length=100)] = None,
    pricing_model: Annotated[str | None, Query(max_length=100)] = None,
    builtin: Annotated[bool | None, Query()] = None,
) -> Response:
    filters = catalog_service.PriceFilters(category, vendor, gpu, pricing_model, builtin)
    rows, _ = catalog_service.list_price_rows(session, filters, viewer=price_viewer(principal))
    today = date.today()
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PRICE_CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(safe_record(price_public(row, today).model_dump(mode="json")))
    return Response(
        buffer.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="clusterplan-prices-{today.isoformat()}.csv"'},
    )


@router.get(
    "/prices/{price_id}",
    tags=["prices"],
    operation_id="get_price",
    response_model=PricePublic,
    summary="One price row",
)
def get_price(price_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> PricePublic:
    return price_public(catalog_service.get_price_row(session, price_id, viewer=price_viewer(principal)))


@router.post(
    "/prices",
    tags=["prices"],
    operation_id="create_price",
    status_code=status.HTTP_201_CREATED,
    response_model=PricePublic,
    summary="Add a price row of your own",
)
def create_price(
    body: PriceCreate, session: SessionDep, principal: WriteDep, response: Response
) -> PricePublic:
    row = catalog_service.add_price_row(session, body.model_dump(), owner_id=actor_of(principal).user_id)
    response.headers["Location"] = f"/api/v1/prices/{row.id}"
    return price_public(row)


@router.patch(
    "/prices/{price_id}",
    tags=["prices"],
    operation_id="update_price",
    response_model=PricePublic,
    summary="Edit a price row you added (built-in rows are read-only)",
)
def update_price(
    price_id: uuid.UUID, body: PriceUpdate, session: SessionDep, principal: WriteDep
) -> PricePublic:
    try:
        row = catalog_service.update_price_row(
            session, price_id, body.model_dump(exclude_unset=True), actor_of(principal)
        )
    except PermissionError as exc:
        raise _forbidden(exc) from None
    return price_public(row)


@router.delete(
    "/prices/{price_id}",
    tags=["prices"],
    operation_id="delete_price",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a price row you added (built-in rows are read-only)",
)
def delete_price(price_id: uuid.UUID, session: SessionDep, principal: WriteDep) -> Response:
    try:
        catalog_service.delete_price_row(session, price_id, actor_of(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None
    return Response(status_code=status.HTTP_204_NO_CONTENT)
