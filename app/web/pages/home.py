"""Home page and favicon."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.web.templating import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> HTMLResponse:
    return render(request, "home.html", {"title": "ClusterPlan"})


@router.get("/favicon.ico")
def favicon() -> RedirectResponse:
    return RedirectResponse("/static/favicon.svg", status_code=308)
