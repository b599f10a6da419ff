"""ClusterPlan as app.asgi builds it, with the API routers matched in order of their module's ROUTER_PRIORITY
(lower first, default 100; ties keep name order) — the ordering proposed for app/api/__init__.py.

FastAPI matches included routers in turn and scans every route ahead of the match, so a hot route behind
~70 others pays for all of them on every request. Serve it like the app to measure the difference:

    python -m benchmarks.load.run --app benchmarks.load.priority_app:app
"""

from __future__ import annotations

from fastapi.routing import _IncludedRouter

from app.asgi import app
from app.discovery import iter_modules

DEFAULT_PRIORITY = 100


def _reorder() -> None:
    priority = {
        id(module.router): getattr(module, "ROUTER_PRIORITY", DEFAULT_PRIORITY)
        for module in iter_modules("app.api.routes")
        if getattr(module, "router", None) is not None
    }
    inner = app
    while not hasattr(inner, "router"):
        inner = inner.app
    for top in inner.router.routes:
        if not isinstance(top, _IncludedRouter):
            continue
        subs = top.original_router.routes
        if any(isinstance(r, _IncludedRouter) and id(r.original_router) in priority for r in subs):
            subs.sort(
                key=lambda r: (
                    priority.get(id(r.original_router), DEFAULT_PRIORITY)
                    if isinstance(r, _IncludedRouter)
                    else DEFAULT_PRIORITY
                )
            )


_reorder()

__all__ = ["app"]
