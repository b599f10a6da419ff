"""FastAPI application factory."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import text

import app as app_pkg
from app.api import build_api_router
from app.db import get_health_engine
from app.errors import install_error_handlers
from app.resources import STATIC_DIR
from app.settings import Settings, get_settings
from app.web import build_web_router
from app.web.static_files import CachedStaticFiles


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    application = FastAPI(
        title="ClusterPlan",
        version=app_pkg.__version__,
        description="Cluster capacity and cost planning for LLM training.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # served by app/web/pages/api_docs.py from vendored files
        redoc_url=None,
    )
    application.state.settings = settings
    install_error_handlers(application)

    @application.get("/healthz", tags=["health"], operation_id="healthz")
    def healthz() -> JSONResponse:
        """Liveness and database check: never waits for a concurrency slot (app/hooks/ratelimit.py) nor for the
        requests' connection pool, and gives up on the database after a few seconds (app/db.py)."""
        try:
            with get_health_engine().connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:  # the point of the endpoint is to report any database failure
            return JSONResponse({"status": "error", "database": str(exc)[:200]}, status_code=503)
        return JSONResponse({"status": "ok", "database": "ok", "version": app_pkg.__version__})

    application.include_router(build_api_router())
    application.include_router(build_web_router())
    application.mount("/static", CachedStaticFiles(directory=str(STATIC_DIR)), name="static")
    for hook in _startup_hooks():
        hook(application)
    return application


def _startup_hooks() -> list[Any]:
    """Optional installers (middleware, metrics, security) contributed by modules in app.hooks."""
    from app.discovery import iter_modules

    hooks = []
    for module in iter_modules("app.hooks"):
        install = getattr(module, "install", None)
        if install is not None:
            hooks.append(install)
    return hooks
