"""The error body every 401, 403, 413 and 429 answer of the API carries (documented in the OpenAPI schema)."""

from __future__ import annotations

from pydantic import BaseModel


class HTTPError(BaseModel):
    detail: str
