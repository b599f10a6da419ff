"""The input guard in front of every route: 422 for what no route may receive, before any handler or query runs.

Refused, each as FastAPI's usual error shape ({"detail": [{"loc", "msg", "type"}]}) naming the parameter:
- a control character (Unicode Cc) in the path or in a query parameter's name or value (no parameter takes one;
  PostgreSQL cannot even compare text with U+0000);
- in a JSON body (also one sent without a content type, which FastAPI reads as JSON): NaN and ±Infinity (the
  NaN / Infinity tokens Python's parser accepts, and numbers like 1e999 that overflow to infinity), integers
  outside 64 bits and U+0000 in any string or key (app.schemas.fields.json_value_problems);
- in a form body: a control character other than tab, newline and carriage return.
Field-level rules (one-line text, catalog names, bounds) stay with the request schemas (app.schemas.fields).
Bodies larger than the server's request limit are passed on unread: the size limit behind this answers 413.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import json_safe
from app.schemas.fields import FREE_TEXT_CONTROLS, control_char_problem, json_value_problems

Location = list[str | int]
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FORM_TYPE = "application/x-www-form-urlencoded"


def _error(loc: Location, msg: str, value: Any) -> dict[str, Any]:
    # FastAPI's own fields; the input as JSON can carry it (a non-finite float by its name, as app.errors does)
    return {"type": "value_error", "loc": loc, "msg": msg, "input": json_safe(value)}


def path_errors(scope: Scope) -> list[dict[str, Any]]:
    """The path parameter (or, when no route matches, the path) holding a control character."""
    path = scope.get("path", "")
    if control_char_problem(path) is None:
        return []
    params = _path_params(scope)
    bad = [(name, control_char_problem(str(value))) for name, value in params.items()]
    named = [_error(["path", name], problem, params[name]) for name, problem in bad if problem]
    return named or [_error(["path"], control_char_problem(path) or "", path)]


def _path_params(scope: Scope) -> dict[str, str]:
    """The path parameters of the documented operation whose template the path fits (none for pages)."""
    path = scope.get("path", "")
    for pattern in _path_patterns(scope.get("app")):
        match = pattern.match(path)
        if match:
            return match.groupdict()
    return {}


def _path_patterns(app: Any) -> list[re.Pattern[str]]:
    openapi = getattr(app, "openapi", None)
    if openapi is None:
        return []
    templates = openapi().get("paths", {})  # the app caches its schema after the first call
    return [_compiled(template) for template in templates if "{" in template]


@functools.cache
def _compiled(template: str) -> re.Pattern[str]:
    return compile_path(template)[0]


def query_errors(scope: Scope) -> list[dict[str, Any]]:
    raw = scope.get("query_string", b"").decode("latin-1")  # as Starlette's QueryParams reads it
    errors = []
    for key, value in parse_qsl(raw, keep_blank_values=True):
        problem = control_char_problem(key) or control_char_problem(value)
        if problem:
            errors.append(_error(["query", key], problem, value))
    return errors


def _content_type(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return str(value.decode("latin-1").split(";")[0].strip().lower())
    return ""


def _is_json(content_type: str) -> bool:
    # FastAPI reads a body without a content type as JSON too (fastapi.routing.get_request_handler)
    return content_type in ("", "application/json") or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


def body_errors(body: bytes, content_type: str) -> list[dict[str, Any]]:
    if not body:
        return []
    if content_type == FORM_TYPE:
        return list(_form_errors(body))
    if not _is_json(content_type):
        return []
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON: the route's own parser answers (422 json_invalid)
        return []
    return [
        _error(["body", *path], reason, _value_at(document, path))
        for path, reason in json_value_problems(document)
    ]


def _value_at(document: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


def _form_errors(body: bytes) -> Iterator[dict[str, Any]]:
    for key, value in parse_qsl(body.decode("latin-1"), keep_blank_values=True):
        problem = control_char_problem(key) or control_char_problem(value, FREE_TEXT_CONTROLS)
        if problem:
            yield _error(["body", key], problem, value)


class BoundaryGuardMiddleware:
    """Answers 422 for control characters in the path or query and for unstorable values in the body."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        errors = path_errors(scope) or query_errors(scope)
        if errors:
            await _reject(errors, scope, receive, send)
            return
        content_type = _content_type(scope)
        if scope.get("method") not in BODY_METHODS or not (
            _is_json(content_type) or content_type == FORM_TYPE
        ):
            await self.app(scope, receive, send)
            return
        chunks, complete = await self._read_body(receive)
        if complete:
            errors = body_errors(b"".join(m.get("body", b"") for m in chunks), content_type)
            if errors:
                await _reject(errors, scope, receive, send)
                return
        await self.app(scope, _replay(chunks, receive), send)

    async def _read_body(self, receive: Receive) -> tuple[list[Message], bool]:
        """The body's messages, up to max_bytes; complete is False when it was longer (left to the size limit)."""
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                return chunks, False
            size += len(message.get("body", b""))
            if self.max_bytes > 0 and size > self.max_bytes:
                return chunks, False
            if not message.get("more_body", False):
                return chunks, True


def _replay(chunks: list[Message], receive: Receive) -> Receive:
    pending = list(chunks)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _reject(errors: list[dict[str, Any]], scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse(status_code=422, content={"detail": errors})(scope, receive, send)


def install(app: FastAPI) -> None:
    settings: Any = app.state.settings
    app.add_middleware(BoundaryGuardMiddleware, max_bytes=settings.max_request_bytes)
