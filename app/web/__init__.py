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
    warm_up()
    return router


def warm_up() -> None:
    """Do before the first request what the first page request of each process would otherwise wait for: compile
    every template (the builder's first GET spent 0.1-0.35 s compiling its four) and read the catalog files the
    pages look GPUs, models and fabric presets up in. Run after the page modules are imported, which registers the
    templates' filters; a later call costs one file stat per template."""
    from app.catalog import gpu_entries, interconnect_entries, model_entries
    from app.catalog.fabrics import presets
    from app.web.templating import templates

    for name in templates.env.list_templates(extensions=["html"]):
        templates.env.get_template(name)
    gpu_entries(), model_entries(), interconnect_entries(), presets()
