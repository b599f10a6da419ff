"""The list envelope every collection endpoint returns: {"data": [...], "count": N}."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from fastapi import Depends, Query
from pydantic import BaseModel

T = TypeVar("T")


class ListEnvelope(BaseModel, Generic[T]):
    data: list[T]
    count: int  # total matching rows, independent of paging


class Paging(BaseModel):
    offset: int = 0
    limit: int = 100


def paging(
    offset: Annotated[int, Query(ge=0, le=2**53, description="rows to skip")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="rows to return")] = 100,
) -> Paging:
    return Paging(offset=offset, limit=limit)


PagingDep = Annotated[Paging, Depends(paging)]
