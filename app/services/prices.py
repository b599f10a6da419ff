"""Price-book service: price_row rows as core quotes (term, unit, date, source, staleness), the default cloud rows
for a GPU, the headline price rule, and the price-book listing. The cost services build on it.

Every read is for a viewer (app.services.catalog.Actor) and sees what app.services.catalog.price_visibility lets it
see; the default quotes and the headline take the built-in rows and the viewer's own (catalog.quoted_for)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import date
from typing import Any

from sqlmodel import Session, col, select

from app.core import cost as core_cost
from app.core import price_age, price_terms
from app.core.errors import Problem, SpecError
from app.errors import NotFoundError
from app.models.catalog import PriceRow
from app.schemas import cost as s
from app.services.catalog import Actor, get_price_row, price_visibility, quoted_for
from app.services.catalog import is_stale as catalog_is_stale


def _today() -> date:
    return date.today()


@contextlib.contextmanager
def _session_or_new(session: Session | None) -> Iterator[Session]:
    if session is not None:
        yield session
        return
    from app.db import get_engine

    with Session(get_engine()) as new_session:
        yield new_session


def row_term(row: PriceRow, field_name: str = "price_row_id") -> price_terms.PriceTerm:
    """The billing term of a price-book row; a row whose pricing model names none is refused, named."""
    try:
        return price_terms.parse_term(row.pricing_model)
    except ValueError as exc:
        raise SpecError([Problem(field_name, f"price row {row.id} ({row.item}): {exc}")]) from None


def row_usd_per_gpu_hour(row: PriceRow) -> float | None:
    """The row's price per GPU-hour: as given, or its per-instance-hour price shared by the instance's GPUs."""
    if row.usd_per_gpu_hour is not None:
        return float(row.usd_per_gpu_hour)
    try:
        unit = price_terms.parse_unit(row.unit)
        return price_terms.usd_per_gpu_hour(float(row.price_usd), unit, row.gpus_per_unit)
    except ValueError:
        return None


def quote_from_row(
    row: PriceRow,
    today: date | None = None,
    option: s.PriceOptionIn | None = None,
    field_name: str = "price_row_id",
) -> core_cost.PriceQuote:
    """A price-book row as a quote; the option may override the label, term and instance shape."""
    today = today or _today()
    price = row_usd_per_gpu_hour(row)
    if price is None:
        raise SpecError([Problem(field_name, f"price row {row.id} ({row.item}) has no price per GPU-hour")])
    term = row_term(row, field_name)
    label = f"{row.vendor} {row.item} {row.pricing_model} ({row.price_date.isoformat()})"
    return core_cost.PriceQuote(
        label=(option.label if option and option.label else label),
        usd_per_gpu_hour=price,
        pricing_model=row.pricing_model,
        commitment_months=option.commitment_months
        if option and option.commitment_months is not None
        else term.commitment_months,
        term=term.kind,
        gpus_per_instance=(
            option.gpus_per_instance if option and option.gpus_per_instance else row.gpus_per_unit or 1
        ),
        date=row.price_date.isoformat(),
        source=row.source,
        price_id=str(row.id),
        stale=price_age.is_stale(row.price_date, today, "cloud_gpu"),
    )


def quote_from_inline(
    option: s.PriceOptionIn, index: int, field_prefix: str = "options"
) -> core_cost.PriceQuote:
    assert option.usd_per_gpu_hour is not None
    try:
        term = price_terms.parse_term(option.pricing_model)
    except ValueError as exc:
        raise SpecError([Problem(f"{field_prefix}.{index}.pricing_model", str(exc))]) from None
    months = option.commitment_months if option.commitment_months is not None else term.commitment_months
    return core_cost.PriceQuote(
        label=option.label or f"option {index + 1} ({option.pricing_model})",
        usd_per_gpu_hour=option.usd_per_gpu_hour,
        pricing_model=option.pricing_model,
        commitment_months=months,
        term=term.kind,
        gpus_per_instance=option.gpus_per_instance or 8,
        date="",
        source="user input",
    )


def canonical_gpu_name(name: str) -> str:
    from app.catalog import find_gpu

    return find_gpu(name).name


def gpu_peak_flops(name: str, dtype: str) -> float:
    from app.catalog import find_gpu

    return find_gpu(name).peak(dtype)


def _default_cloud_clause(gpu: str, viewer: Actor) -> tuple[Any, ...]:
    """The WHERE clause of the cloud rows a default quote for `gpu` may rest on: the GPU's cloud_gpu rows among
    the built-in ones and `viewer`'s own (catalog.quoted_for)."""
    return (
        PriceRow.category == "cloud_gpu",
        PriceRow.gpu_name == canonical_gpu_name(gpu),
        price_visibility(quoted_for(viewer)),
    )


def default_cloud_rows(
    session: Session, gpu: str, pricing_models: list[str] | None = None, *, viewer: Actor
) -> list[PriceRow]:
    """Cloud price-book rows for a catalog GPU with a price per GPU-hour, given or from an instance-hour price:
    the built-in rows and `viewer`'s own (catalog.quoted_for), never another user's."""
    rows = session.exec(select(PriceRow).where(*_default_cloud_clause(gpu, viewer))).all()
    rows = [r for r in rows if row_usd_per_gpu_hour(r) is not None]
    if pricing_models:
        wanted = [p.lower() for p in pricing_models]
        rows = [r for r in rows if any(w in r.pricing_model.lower() for w in wanted)]
    return sorted(rows, key=lambda r: (r.vendor, r.pricing_model, r.price_date))


def default_cloud_row_values(session: Session, gpu: str, *, viewer: Actor) -> tuple[tuple[Any, ...], ...]:
    """Every column of every row default_cloud_rows reads for `gpu` and `viewer`, as plain tuples in id order:
    the exact price rows `viewer`'s default quotes rest on, in one light query (no ORM objects), for a cache key
    (app.services.cost_panel_cache). A row added, edited (its values or updated_at) or deleted changes it."""
    columns = tuple(PriceRow.__table__.columns)  # type: ignore[attr-defined]
    query = select(*columns).where(*_default_cloud_clause(gpu, viewer)).order_by(col(PriceRow.id))
    return tuple(tuple(row) for row in session.exec(query).all())


def builtin_cloud_rows(gpu: str) -> list[PriceRow]:
    """The built-in price file's cloud rows for a catalog GPU, as (unsaved) rows, for use without a database."""
    from app import catalog

    canonical = canonical_gpu_name(gpu)
    columns = set(PriceRow.model_fields) - {"id", "created_at", "updated_at", "owner_id"}
    rows = [
        PriceRow(**{k: v for k, v in r.items() if k in columns})
        for r in catalog.price_rows()
        if r["category"] == "cloud_gpu" and r["gpu_name"] == canonical and r["price_usd"] is not None
    ]
    return [r for r in rows if row_usd_per_gpu_hour(r) is not None]


def headline_for_gpu(
    session: Session | None, gpu: str, today: date | None = None, *, viewer: Actor
) -> core_cost.HeadlinePrice | None:
    """The headline price for a catalog GPU under the one rule (app.core.cost.HeadlinePrice): from the built-in
    rows of the price book in the database and `viewer`'s own (default_cloud_rows), or from the built-in price
    file without a database."""
    rows = default_cloud_rows(session, gpu, viewer=viewer) if session is not None else builtin_cloud_rows(gpu)
    return core_cost.headline_price([quote_from_row(r, today) for r in rows])


def _named_row(db: Session, price_row_id: uuid.UUID, viewer: Actor, field_name: str) -> PriceRow | Problem:
    """The cloud GPU row an option names, if `viewer` sees it (another user's row is as unknown as a missing one),
    else the problem on `field_name`."""
    try:
        row = get_price_row(db, price_row_id, viewer=viewer)
    except NotFoundError:
        return Problem(field_name, f"unknown price row {price_row_id}")
    if row.category != "cloud_gpu":
        return Problem(field_name, f"price row {row.id} is not a cloud GPU price")
    return row


def resolve_options(
    session: Session | None,
    options: list[s.PriceOptionIn],
    gpu: str | None = None,
    pricing_models: list[str] | None = None,
    today: date | None = None,
    field_prefix: str = "options",
    *,
    viewer: Actor,
) -> list[core_cost.PriceQuote]:
    """Quotes for the requested options, or without options `viewer`'s default rows for the GPU; a price-row id
    the viewer does not see (unknown, or another user's) → SpecError naming options.N.price_row_id."""
    today = today or _today()
    quotes: list[core_cost.PriceQuote] = []
    problems: list[Problem] = []
    needs_db = any(o.price_row_id is not None for o in options) or (not options and gpu is not None)
    if not needs_db:
        return [quote_from_inline(o, i, field_prefix) for i, o in enumerate(options)]
    with _session_or_new(session) as db:
        if not options and gpu is not None:
            return [
                quote_from_row(r, today) for r in default_cloud_rows(db, gpu, pricing_models, viewer=viewer)
            ]
        for i, option in enumerate(options):
            if option.price_row_id is None:
                quotes.append(quote_from_inline(option, i, field_prefix))
                continue
            row = _named_row(db, option.price_row_id, viewer, f"{field_prefix}.{i}.price_row_id")
            if isinstance(row, Problem):
                problems.append(row)
                continue
            try:
                quote = quote_from_row(row, today, option, f"{field_prefix}.{i}.price_row_id")
            except SpecError as exc:
                problems += exc.problems
                continue
            if option.usd_per_gpu_hour is not None:
                quote = replace(
                    quote, usd_per_gpu_hour=option.usd_per_gpu_hour, source=f"user override of {row.source}"
                )
            quotes.append(quote)
    if problems:
        raise SpecError(problems)
    return quotes


def price_book(
    session: Session,
    category: str | None = None,
    stale_only: bool = False,
    today: date | None = None,
    *,
    viewer: Actor,
) -> list[s.PriceBookRow]:
    """The price rows `viewer` sees, with their age and staleness."""
    today = today or _today()
    query = select(PriceRow).where(price_visibility(viewer))
    if category:
        query = query.where(PriceRow.category == category)
    out = []
    for r in session.exec(query).all():
        stale = catalog_is_stale(r, today)
        if stale_only and not stale:
            continue
        out.append(
            s.PriceBookRow(
                id=r.id,
                category=r.category,
                item=r.item,
                vendor=r.vendor,
                region=r.region,
                pricing_model=r.pricing_model,
                unit=r.unit,
                price_usd=r.price_usd,
                usd_per_gpu_hour=r.usd_per_gpu_hour,
                gpu_name=r.gpu_name,
                price_date=r.price_date,
                source=r.source,
                confidence=r.confidence,
                stale=stale,
                age_days=(today - r.price_date).days,
            )
        )
    return sorted(out, key=lambda p: (p.category, p.vendor, p.item, p.price_date))
