"""The list envelope every collection endpoint returns ({"data": [...], "count": N}) and its paging."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class ListEnvelope(BaseModel, Generic[T]):
    data: list[T]
    count: int  # total matching rows, independent of paging


class Paging(BaseModel):
    offset: int = 0
    limit: int = 100
