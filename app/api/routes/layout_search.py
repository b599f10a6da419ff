"""POST /api/v1/layout-search (layout search) and POST /api/v1/layout-search/sizes ("how many GPUs do I need").

Both compute and store nothing; a search costs up to a second of CPU, so they ask for the `plans:read` scope
(saved plans live under /api/v1/plans), read the catalog through the read-only database view (on SQLite they
never take the write lock, so plan saves go on while searches run), and each caller may have only a few of
them in flight (app/hooks/inflight.py).

The former paths, POST /api/v1/plan and POST /api/v1/plan/sizes, are deprecated aliases served by the same
handlers: OpenAPI marks them deprecated and their responses carry `Deprecation: true` and a `Link` to the
successor path (`successor_headers`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Response

from app.auth.deps import ReadDep
from app.deps import ReadSessionDep
from app.schemas import search_results
from app.services import planner as svc
from app.services.catalog_public import price_viewer

router = APIRouter(tags=["layout-search"])

ERRORS: dict[int | str, dict[str, str]] = {
    404: {"description": "unknown model, GPU or fabric name (with close matches)"},
    422: {"description": "inconsistent request: every problem listed with its field path"},
}


def successor_headers(successor: str) -> Callable[[Response], None]:
    """A dependency for a deprecated alias: its responses say so and name the path that replaces it."""

    def mark_deprecated(response: Response) -> None:
        response.headers["Deprecation"] = "true"
        response.headers["Link"] = f'<{successor}>; rel="successor-version"'

    return mark_deprecated


def deprecated_alias(successor: str) -> dict[str, Any]:
    """Route options for an old path kept as an alias of `successor` (the full path, /api/v1/…)."""
    return {
        "deprecated": True,
        "description": f"Deprecated alias of POST {successor}: same request and response; the response "
        f'carries `Deprecation: true` and `Link: <{successor}>; rel="successor-version"`.',
        "dependencies": [Depends(successor_headers(successor))],
    }


SEARCH: dict[str, Any] = {
    "response_model": search_results.PlanOut,
    "summary": "Search every parallel layout, rank by time to train or cost, Pareto front and rejections",
    "responses": ERRORS,
}
SIZES: dict[str, Any] = {
    "response_model": search_results.SizesOut,
    "summary": "Sweep cluster sizes: time to train, cost per run, scaling efficiency, deadline, cheapest, knee",
    "responses": ERRORS,
}


@router.post("/plan", operation_id="plan_search", **SEARCH, **deprecated_alias("/api/v1/layout-search"))
@router.post("/layout-search", operation_id="layout_search", **SEARCH)
def layout_search(
    body: svc.PlanRequest, session: ReadSessionDep, principal: ReadDep
) -> search_results.PlanOut:
    return svc.search(body, session, viewer=price_viewer(principal))


@router.post(
    "/plan/sizes", operation_id="plan_sizes", **SIZES, **deprecated_alias("/api/v1/layout-search/sizes")
)
@router.post("/layout-search/sizes", operation_id="layout_search_sizes", **SIZES)
def layout_search_sizes(
    body: svc.SizesRequest, session: ReadSessionDep, principal: ReadDep
) -> search_results.SizesOut:
    return svc.sizes(body, session, viewer=price_viewer(principal))
