"""REST API under /api/v1: one router per resource in app/api/routes/, discovered automatically."""

from __future__ import annotations

from fastapi import APIRouter

from app.discovery import iter_modules


def build_api_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")
    # Routers are matched in inclusion order: the hottest routes declare a lower ROUTER_PRIORITY (default 100)
    # so a request for them does not first scan every other route. Ties keep name order (stable OpenAPI).
    for module in sorted(iter_modules("app.api.routes"), key=lambda m: getattr(m, "ROUTER_PRIORITY", 100)):
        sub = getattr(module, "router", None)
        if sub is not None:
            router.include_router(sub)
    return router
