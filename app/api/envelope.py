"""The paging dependency of every collection endpoint (offset and limit query parameters)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query

from app.schemas.envelope import Paging


def paging(
    offset: Annotated[int, Query(ge=0, le=2**53, description="rows to skip")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="rows to return")] = 100,
) -> Paging:
    return Paging(offset=offset, limit=limit)


PagingDep = Annotated[Paging, Depends(paging)]


# the answers of a route whose request may name a calibration profile (app.auth.deps.check_profiles_in)
PROFILE_AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "a calibration profile named without credentials (profiles need plans:read)"},
    403: {"description": "a calibration profile named by a credential without plans:read"},
}
