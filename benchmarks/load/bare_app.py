"""The baseline: a bare FastAPI JSON endpoint, no middleware, no database, served like ClusterPlan.

It parses a JSON body of the same size as an estimate request and returns a small JSON object, so the
comparison isolates what ClusterPlan does beyond FastAPI's own request handling.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

app = FastAPI(title="bare baseline", docs_url=None, redoc_url=None, openapi_url=None)


@app.post("/bare")
def bare(body: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "keys": len(body)}


@app.get("/bare")
def bare_get() -> dict[str, Any]:
    return {"ok": True}
