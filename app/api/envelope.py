"""The paging dependency of every collection endpoint (offset and limit query parameters)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from app.schemas.envelope import Paging


def paging(
    offset: Annotated[int, Query(ge=0, le=2**53, description="rows to skip")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="rows to return")] = 100,
) -> Paging:
    return Paging(offset=offset, limit=limit)


PagingDep = Annotated[Paging, Depends(paging)]
