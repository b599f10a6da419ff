"""Jinja2 environment and the render helper that serves full pages or htmx partials from one template.

A request with `HX-Request` (and not a history restore) gets only the named block; every other request
gets the full page. Responses carry `Vary: HX-Request` so caches keep the two apart.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

import app as app_pkg
from app.core.goodput import FAIL_SLOW_SLOWDOWN
from app.resources import TEMPLATES_DIR

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
templates.env.globals["app_version"] = app_pkg.__version__
templates.env.globals["formula_version"] = app_pkg.FORMULA_VERSION
templates.env.globals["fail_slow_default"] = FAIL_SLOW_SLOWDOWN  # the builder's fail-slow input states it


def is_htmx(request: Request) -> bool:
    return (
        request.headers.get("HX-Request") == "true"
        and request.headers.get("HX-History-Restore-Request") != "true"
    )


def render(
    request: Request,
    template: str,
    context: dict[str, Any],
    block: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    ctx = {"request": request, **context}
    if block and is_htmx(request):
        tmpl = templates.env.get_template(template)
        html = "".join(tmpl.blocks[block](tmpl.new_context(ctx)))
        response = HTMLResponse(html, status_code=status_code)
    else:
        response = templates.TemplateResponse(request, template, ctx, status_code=status_code)
    response.headers["Vary"] = "HX-Request"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response
