"""Structured request logs: one JSON object per request on the `clusterplan.request` logger (stderr).

Fields: ts (UTC ISO-8601), level, event="request", request_id, method, route (template), path, status,
duration_ms, client, principal (kind only, never a credential). The request id comes from a well-formed
incoming `X-Request-ID` or is generated, and is echoed in the response's `X-Request-ID` header.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.hooks.metrics import route_template

LOGGER_NAME = "clusterplan.request"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._\-]{1,128}$")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            payload.update(fields)
        else:
            payload["message"] = record.getMessage()
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def request_logger() -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(h, "_clusterplan_json", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler._clusterplan_json = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _REQUEST_ID_RE.match(text) else None
    return None


class RequestLogMiddleware:
    def __init__(self, app: ASGIApp, logger: logging.Logger) -> None:
        self.app = app
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = incoming_request_id(scope) or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        start = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)["x-request-id"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            principal = scope.get("state", {}).get("principal")
            client = scope.get("client")
            fields = {
                "event": "request",
                "request_id": request_id,
                "method": scope.get("method"),
                "route": route_template(scope),
                "path": scope.get("path"),
                "status": status,
                "duration_ms": round((time.perf_counter() - start) * 1000, 3),
                "client": client[0] if client else None,
                "principal": getattr(principal, "kind", None),
                "auth": getattr(principal, "via", None),
            }
            level = logging.ERROR if status >= 500 else logging.INFO
            self.logger.log(level, "request", extra={"fields": fields})


def install(app: FastAPI) -> None:
    app.add_middleware(RequestLogMiddleware, logger=request_logger())
