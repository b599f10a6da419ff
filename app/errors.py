"""Map core validation errors to HTTP 422 with FastAPI's field-level error shape."""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
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


# how deep a 422 echoes a value the request sent; deeper parts become ECHO_CUT (a request may nest a value
# hundreds of levels deep, past what the encoders below can recurse through)
ECHO_DEPTH = 8
ECHO_CUT = "…"


def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` with every non-finite float as its name ('nan', 'inf', '-inf'): JSON has no such numbers, and a 422
    that echoes a NaN the request sent (Python's JSON parser accepts the NaN literal) must still serialise. Parts
    nested deeper than ECHO_DEPTH are cut to ECHO_CUT."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (dict, list, tuple)) and depth >= ECHO_DEPTH:
        return ECHO_CUT
    if isinstance(value, dict):
        return {k: json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    return value


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own shape ({"detail": [{"loc", "msg", "type", "input", "ctx"}]}), made JSON-safe
        # cut first, then encode: jsonable_encoder recurses through whatever the request nested
        return JSONResponse(status_code=422, content={"detail": jsonable_encoder(json_safe(exc.errors()))})

    @app.exception_handler(SpecError)
    async def _spec_error(_request: Request, exc: SpecError) -> JSONResponse:
        return JSONResponse(status_code=422, content=spec_error_body(exc))

    @app.exception_handler(NotFoundError)
    async def _not_found(_request: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse(
            status_code=404,
            content={"detail": str(exc), "kind": exc.kind, "name": exc.name, "suggestions": exc.suggestions},
        )
