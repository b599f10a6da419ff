"""Map core validation errors to HTTP 422 with FastAPI's field-level error shape."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.core.errors import SpecError


class NotFoundError(LookupError):
    """A named thing (GPU, model, plan…) does not exist; carries close matches for the message."""

    def __init__(self, kind: str, name: str, suggestions: list[str] | None = None) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = suggestions or []
        hint = f"; did you mean: {', '.join(self.suggestions)}" if self.suggestions else ""
        super().__init__(f"unknown {kind} {name!r}{hint}")


def spec_error_body(exc: SpecError) -> dict[str, object]:
    return {
        "detail": [
            {"loc": ["body", *p.field.split(".")], "msg": p.message, "type": "value_error"}
            for p in exc.problems
        ]
    }


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SpecError)
    async def _spec_error(_request: Request, exc: SpecError) -> JSONResponse:
        return JSONResponse(status_code=422, content=spec_error_body(exc))

    @app.exception_handler(NotFoundError)
    async def _not_found(_request: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse(
            status_code=404,
            content={"detail": str(exc), "kind": exc.kind, "name": exc.name, "suggestions": exc.suggestions},
        )
