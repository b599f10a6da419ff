"""REST API under /api/v1: one router per resource in app/api/routes/, discovered automatically."""

from __future__ import annotations

from fastapi import APIRouter

from app.discovery import iter_modules


def build_api_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")
    for module in iter_modules("app.api.routes"):
        sub = getattr(module, "router", None)
        if sub is not None:
            router.include_router(sub)
    return router
