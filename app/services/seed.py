"""Seed the built-in catalog (app/catalog data files) into the database, idempotently.

Built-in rows are inserted when missing, refreshed in place when their file entry changed, and removed when the
entry left the files. Users' rows (builtin=False) are never read, changed or removed here: a user row that took a
name first keeps it, and the built-in entry of that name is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, select

import app.catalog as catalog
from app.models.base import utcnow
from app.models.catalog import PRICE_COLUMNS, GPUEntry, InterconnectEntry, ModelEntry, PriceRow


@dataclass
class SeedReport:
    """What one seeding pass did, per table: rows inserted, updated, deleted, left alone (user rows won)."""

    inserted: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def count(self, bucket: dict[str, int], table: str) -> None:
        bucket[table] = bucket.get(table, 0) + 1

    @property
    def changed(self) -> bool:
        return any(self.inserted.values()) or any(self.updated.values()) or any(self.deleted.values())


def _gpu_row(entry: catalog.CatalogEntry) -> dict[str, Any]:
    return {
        "vendor": entry.spec.vendor,
        "spec": _json_ready(entry.spec.to_dict()),
        "source": entry.source[:2000],
        "source_date": entry.date[:20],
    }


def _interconnect_row(entry: catalog.CatalogEntry) -> dict[str, Any]:
    return {
        "kind": entry.spec.kind,
        "spec": _json_ready(entry.spec.to_dict()),
        "source": entry.source[:2000],
        "source_date": entry.date[:20],
    }


def _model_row(entry: catalog.CatalogEntry) -> dict[str, Any]:
    return {
        "family": entry.spec.family[:50],
        "spec": _json_ready(entry.spec.to_dict()),
        "source": entry.source[:2000],
    }


def _json_ready(value: Any) -> Any:
    """Tuples become lists so a stored spec compares equal to what the JSON column gives back."""
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


def _seed_named(
    session: Session,
    table: type[SQLModel],
    wanted: dict[str, dict[str, Any]],
    report: SeedReport,
) -> None:
    """Upsert built-in rows of a name-keyed table (GPUs, interconnects, models)."""
    label = str(getattr(table, "__tablename__", table.__name__))
    existing: dict[str, Any] = {row.name: row for row in session.exec(select(table)).all()}  # type: ignore[attr-defined]
    for name, values in wanted.items():
        row = existing.get(name)
        if row is None:
            session.add(table(name=name, builtin=True, **values))
            report.count(report.inserted, label)
        elif not row.builtin:
            report.count(report.skipped, label)
        elif any(getattr(row, key) != value for key, value in values.items()):
            for key, value in values.items():
                setattr(row, key, value)
            row.updated_at = utcnow()
            session.add(row)
            report.count(report.updated, label)
    for name, row in existing.items():
        if row.builtin and name not in wanted:
            session.delete(row)
            report.count(report.deleted, label)


def _price_values(row: dict[str, Any]) -> dict[str, Any]:
    values = {key: row[key] for key in PRICE_COLUMNS}
    values["item"] = values["item"][:200]
    values["notes"] = values["notes"][:2000]
    if row["date"] != row["price_date"].isoformat():
        # keep the date exactly as the source gave it when it is not a full calendar date
        values["notes"] = f"[date as published: {row['date']}] {values['notes']}".strip()[:2000]
    return values


def _seed_prices(session: Session, report: SeedReport) -> None:
    """Upsert built-in price rows by seed key. Rows whose source gives no price (discount fractions, staffing
    ratios) stay in the file for reference but cannot be a price row."""
    wanted = {
        row["seed_key"]: _price_values(row) for row in catalog.price_rows() if row["price_usd"] is not None
    }
    existing = {
        row.seed_key: row
        for row in session.exec(select(PriceRow).where(PriceRow.builtin == True)).all()  # noqa: E712
    }
    for key, values in wanted.items():
        row = existing.get(key)
        if row is None:
            session.add(PriceRow(builtin=True, seed_key=key, **values))
            report.count(report.inserted, "price_row")
        elif any(getattr(row, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(row, k, v)
            row.updated_at = utcnow()
            session.add(row)
            report.count(report.updated, "price_row")
    for key, row in existing.items():
        if key not in wanted:
            session.delete(row)
            report.count(report.deleted, "price_row")


SEEDERS: tuple[tuple[type[SQLModel], Callable[[catalog.CatalogEntry], dict[str, Any]], str], ...] = (
    (GPUEntry, _gpu_row, "gpu"),
    (InterconnectEntry, _interconnect_row, "interconnect"),
    (ModelEntry, _model_row, "model"),
)


def seed_catalog(engine: Engine | None = None) -> SeedReport:
    """Insert or refresh the built-in catalog rows; safe to run at every start.

    Two servers starting together on one PostgreSQL database may both try to insert the same rows; the loser's
    transaction fails on the unique names / seed keys, and its second pass finds the rows already there.
    """
    from app.db import get_engine

    engine = engine or get_engine()
    for attempt in range(3):
        report = SeedReport()
        try:
            with Session(engine) as session:
                for table, to_row, kind in SEEDERS:
                    wanted = {name: to_row(entry) for name, entry in catalog.entries(kind).items()}
                    _seed_named(session, table, wanted, report)
                _seed_prices(session, report)
                session.commit()
            return report
        except IntegrityError:
            if attempt == 2:
                raise
    return report
