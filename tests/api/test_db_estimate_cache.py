"""The estimate route's response cache: hits are byte-identical to misses and to FastAPI's own encoding, and
scenarios that name a calibration profile or a user's model are never served from it (both backends)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session

import app.catalog as catalog
from app.api.routes.estimate import cache
from app.core.model import ModelSpec
from app.db import get_engine
from app.main import create_app
from app.schemas.estimate import EstimateOut
from app.services import catalog as catalog_svc
from app.services import estimate as svc
from tests.auth_support import bearer, issue_token
from tests.paths import ROOT
from tests.services.test_profile_scenario import store_profile

EXAMPLE = ROOT / "examples" / "llama3-70b-64xh100.json"


def _scenario(**layout: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(EXAMPLE.read_text())
    body["layout"].update(layout)
    return body


@pytest.fixture
def api(db_url: str) -> Iterator[TestClient]:
    cache.clear()
    with TestClient(create_app()) as client:
        yield client
    cache.clear()


def test_hit_is_byte_identical_to_miss_and_to_fastapis_encoding(api: TestClient) -> None:
    body = _scenario(global_batch=256)
    first = api.post("/api/v1/estimate", json=body)
    assert first.status_code == 200, first.text
    assert (cache.misses, cache.hits, len(cache)) == (1, 0, 1)
    reordered = {key: body[key] for key in reversed(list(body))}  # same scenario, keys in another order
    second = api.post("/api/v1/estimate", json=reordered)
    assert (cache.misses, cache.hits, len(cache)) == (1, 1, 1)
    assert second.content == first.content
    assert second.headers["content-type"] == first.headers["content-type"] == "application/json"
    assert second.headers["content-length"] == first.headers["content-length"]

    # A plain FastAPI route with response_model=EstimateOut encodes the same result to the same bytes.
    with Session(get_engine()) as session:
        out = svc.estimate_scenario(body, session)
    plain = FastAPI()

    @plain.post("/e", response_model=EstimateOut)
    def _e() -> EstimateOut:
        return out

    assert TestClient(plain).post("/e").content == first.content
    assert json.loads(first.content)["layout"]["global_batch"] == 256


def test_different_scenarios_get_their_own_answers(api: TestClient) -> None:
    a = api.post("/api/v1/estimate", json=_scenario(global_batch=128)).json()
    b = api.post("/api/v1/estimate", json=_scenario(global_batch=512)).json()
    a_again = api.post("/api/v1/estimate", json=_scenario(global_batch=128)).json()
    assert a == a_again and a != b
    assert b["step"]["total_s"] > 3.5 * a["step"]["total_s"]  # 4× the sequences per step
    assert cache.hits == 1 and len(cache) == 2


def test_user_model_scenarios_are_never_cached(api: TestClient) -> None:
    base = catalog.find_model("Llama-3-70B")
    body = _scenario()
    body["model"] = "team-70b"
    params = []
    for layers in (80, 40):
        with Session(get_engine()) as session:
            if layers == 40:
                catalog_svc.delete_model(session, "team-70b")
            catalog_svc.add_model(
                session, ModelSpec.from_dict(base.to_dict() | {"name": "team-70b", "num_layers": layers})
            )
        for _ in range(2):
            response = api.post("/api/v1/estimate", json=body)
            assert response.status_code == 200, response.text
            params.append(response.json()["params"]["total"])
    assert params[0] == params[1] and params[2] == params[3]
    assert params[2] < 0.6 * params[0]  # the changed row is seen at once: half the layers
    assert len(cache) == 0 and cache.hits == 0


def test_profile_scenarios_are_never_cached(api: TestClient) -> None:
    def store(version: int, max_tflops: float) -> None:
        store_profile(max_tflops, name="cache-h100", version=version)

    body = {**_scenario(), "profile": "cache-h100"}  # the latest version
    # naming a profile needs plans:read
    reader = bearer(issue_token("cache-reader@example.com", ["plans:read"], is_admin=False))
    store(1, 200.0)
    slow = [api.post("/api/v1/estimate", json=body, headers=reader) for _ in range(2)]
    assert all(r.status_code == 200 for r in slow), slow[0].text
    store(2, 600.0)
    faster = api.post("/api/v1/estimate", json=body, headers=reader)
    assert faster.status_code == 200, faster.text
    assert slow[0].content == slow[1].content
    assert faster.json()["step"]["total_s"] < 0.8 * slow[0].json()["step"]["total_s"]
    assert len(cache) == 0 and cache.hits == 0


def test_errors_are_not_cached(api: TestClient) -> None:
    bad = _scenario(tp=3, pp=1, cp=1, dp=None)
    for _ in range(2):
        response = api.post("/api/v1/estimate", json=bad)
        assert response.status_code == 422
    unknown = {**_scenario(), "model": "no-such-model-xyz"}
    missing = api.post("/api/v1/estimate", json=unknown)
    assert missing.status_code == 422
    assert any(err["loc"][-1] == "model" for err in missing.json()["detail"])
    assert len(cache) == 0


def test_a_burst_of_identical_cold_requests_computes_once(db_url: str) -> None:
    import asyncio

    import httpx

    cache.clear()
    body = _scenario(global_batch=1024)

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=create_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return list(
                await asyncio.gather(*[client.post("/api/v1/estimate", json=body) for _ in range(20)])
            )

    responses = asyncio.run(burst())
    assert all(r.status_code == 200 for r in responses), responses[0].text
    assert len({r.content for r in responses}) == 1
    assert len(cache) == 1 and cache.hits == 19  # one computation; the other 19 waited for its answer
    cache.clear()
