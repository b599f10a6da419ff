"""Catalog tables: GPUs, interconnects, models and the price book. Seeded from app/catalog, user-extensible."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from sqlmodel import Field, SQLModel

from app.models.base import created_at_field, json_field, timestamp_field, uuid_pk


class GPUEntry(SQLModel, table=True):
    __tablename__ = "gpu"
    id: uuid.UUID = uuid_pk()
    name: str = Field(max_length=100, unique=True, index=True)
    vendor: str = Field(default="", max_length=50)
    spec: dict[str, Any] = json_field()  # GPUSpec.to_dict()
    source: str = Field(default="", max_length=2000)
    source_date: str = Field(default="", max_length=20)
    builtin: bool = True
    created_at: datetime = created_at_field()
    updated_at: datetime | None = timestamp_field()


class InterconnectEntry(SQLModel, table=True):
    __tablename__ = "interconnect"
    id: uuid.UUID = uuid_pk()
    name: str = Field(max_length=100, unique=True, index=True)
    kind: str = Field(max_length=20)  # scale_up | scale_out
    spec: dict[str, Any] = json_field()  # InterconnectSpec.to_dict()
    source: str = Field(default="", max_length=2000)
    source_date: str = Field(default="", max_length=20)
    builtin: bool = True
    created_at: datetime = created_at_field()
    updated_at: datetime | None = timestamp_field()


class ModelEntry(SQLModel, table=True):
    __tablename__ = "model_spec"
    id: uuid.UUID = uuid_pk()
    name: str = Field(max_length=100, unique=True, index=True)
    family: str = Field(default="", max_length=50)
    spec: dict[str, Any] = json_field()  # ModelSpec.to_dict()
    source: str = Field(default="", max_length=2000)
    builtin: bool = True
    # the user who added the model (None for built-in rows and rows added without an account)
    owner_id: uuid.UUID | None = Field(
        default=None, foreign_key="user_account.id", index=True, ondelete="SET NULL"
    )
    created_at: datetime = created_at_field()
    updated_at: datetime | None = timestamp_field()


class PriceRow(SQLModel, table=True):
    __tablename__ = "price_row"
    id: uuid.UUID = uuid_pk()
    category: str = Field(max_length=50, index=True)  # cloud_gpu | server | network | power | storage | …
    item: str = Field(max_length=200)
    vendor: str = Field(default="", max_length=100)
    region: str = Field(default="", max_length=100)
    pricing_model: str = Field(default="", max_length=100)  # on-demand | 1-yr reserved | spot | capex | …
    unit: str = Field(default="", max_length=50)
    price_usd: float
    usd_per_gpu_hour: float | None = None
    gpu_name: str | None = Field(default=None, max_length=100)  # catalog GPU this row prices, when it is one
    gpus_per_unit: int | None = None
    price_date: date
    source: str = Field(max_length=2000)
    confidence: str = Field(default="", max_length=50)
    includes: str = Field(default="", max_length=500)
    notes: str = Field(default="", max_length=2000)
    builtin: bool = True
    # stable key of a seeded row (hash of its source line) so re-seeding never duplicates; None for user rows
    seed_key: str | None = Field(default=None, max_length=64, unique=True)
    # the user who added the row (None for built-in rows and rows added without an account)
    owner_id: uuid.UUID | None = Field(
        default=None, foreign_key="user_account.id", index=True, ondelete="SET NULL"
    )
    created_at: datetime = created_at_field()
    updated_at: datetime | None = timestamp_field()


# the columns a price row is written from: the seeded price book, the API's create and update, the price page's form
PRICE_COLUMNS = (
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
    "source",
    "confidence",
    "includes",
    "notes",
)
