"""Browser UI: server-rendered Jinja2 pages with htmx partials. Each module in app/web/pages exports `router`."""

from __future__ import annotations

from fastapi import APIRouter

from app.discovery import iter_modules


def build_web_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    for module in iter_modules("app.web.pages"):
        sub = getattr(module, "router", None)
        if sub is not None:
            router.include_router(sub)
    return router
