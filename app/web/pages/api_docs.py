"""API documentation (Swagger UI on /docs, ReDoc on /redoc) served from vendored files, with no CDN and no inline
script."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.web.templating import render

router = APIRouter()

# static/vendor/swagger-ui-<version>/ holds swagger-ui-dist's bundle and stylesheet (static/vendor/VERSIONS.md).
SWAGGER_UI_VERSION = "5.32.0"
# static/vendor/redoc-<version>/ holds ReDoc's standalone bundle (static/vendor/VERSIONS.md)
REDOC_VERSION = "2.5.2"


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    context = {"swagger_ui_version": SWAGGER_UI_VERSION, "openapi_url": request.app.openapi_url}
    return render(request, "api_docs.html", context)


@router.get("/redoc", response_class=HTMLResponse)
def api_reference(request: Request) -> HTMLResponse:
    context = {"redoc_version": REDOC_VERSION, "openapi_url": request.app.openapi_url}
    return render(request, "api_redoc.html", context)
