"""Input at the edges that once answered 500 or a nonsense 200: values nested hundreds of levels deep (past
Pydantic's serializer at 255 and Python's parser near 1,000), a one-GPU collective page, a spot target no input
can reach, a negative revision. Each is a 422 naming the field (or a null with the reason), and nothing is stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlmodel import Session, select

from app.db import get_engine
from app.models.benchmarks import BenchmarkJob
from app.schemas.fields import MAX_JSON_DEPTH
from tests.auth_support import bearer, issue_token, remote_client
from tests.plans_support import small_scenario


def nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_text(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [40, 260, 700])
def test_deeply_nested_free_form_values_are_a_422_on_the_field(db_url: str, depth: int) -> None:
    anonymous = remote_client()
    scenario = json.dumps(small_scenario())
    inline = scenario.replace('"llama-3-8b"', '{"name": "m", "x": ' + nested_text(depth) + "}")
    assert inline != scenario
    refused = anonymous.post("/api/v1/estimate", content=inline, headers={"content-type": "application/json"})
    assert refused.status_code == 422, refused.text[:300]
    assert "nested" in refused.text or "depth" in refused.text
    runner = bearer(issue_token("deep-runner@example.com", ["plans:read", "benchmarks:run"], is_admin=False))
    with Session(get_engine()) as session:
        before = len(session.exec(select(BenchmarkJob)).all())
    body = '{"kind": "gemm", "params": {"sizes": [1024], "device": "cpu", "x": ' + nested_text(depth) + "}}"
    job = remote_client().post(
        "/api/v1/benchmarks", content=body, headers={**runner, "content-type": "application/json"}
    )
    assert job.status_code == 422 and "params" in job.text
    with Session(get_engine()) as session:
        assert len(session.exec(select(BenchmarkJob)).all()) == before  # nothing half-written


def test_the_depth_limit_leaves_real_documents_alone(db_url: str) -> None:
    runner = bearer(
        issue_token("shallow-runner@example.com", ["plans:read", "benchmarks:run"], is_admin=False)
    )
    params = {"sizes": [1024], "device": "cpu", "x": nest(MAX_JSON_DEPTH - 3)}
    job = remote_client().post("/api/v1/benchmarks", json={"kind": "gemm", "params": params}, headers=runner)
    assert job.status_code == 202, job.text


def test_deep_pasted_json_on_pages_is_a_problem_not_a_500(db_url: str) -> None:
    anonymous = remote_client()
    deep = "[" * 3000 + "]" * 3000
    page = anonymous.get("/plans/new", params={"hf_config": deep})
    assert page.status_code in (200, 422) and "nested more than" in page.text
    for path in ("/plans/new/scaling", "/plans/new/sizes", "/plans/new/alternative"):  # each panel answers
        assert anonymous.get(path, params={"hf_config": deep}).status_code in (200, 422), path


def test_a_collective_page_for_one_gpu_says_why(db_url: str) -> None:
    page = remote_client().get("/network", params={"nodes": 1, "gpus_per_node": 1, "op": "all_reduce"})
    assert page.status_code == 422 and "at least 2 GPUs" in page.text
    refused = remote_client().get("/network", params={"nodes": 0})
    assert refused.status_code == 422


def test_an_unreachable_spot_target_is_null_with_the_reason(db_url: str) -> None:
    body = {"on_demand_usd_per_hour": 10, "spot_discount": 0.6, "target_net_savings": 0.7}
    inv = remote_client().post("/api/v1/cost/spot", json=body).json()["inversion"]
    assert inv["lost_hours_per_preemption"] is None and inv["preemptions_per_day"] is None
    assert inv["spot_discount"] == pytest.approx(0.725, abs=0.001)  # a deeper discount does reach it
    assert any("saves at most 60%" in r for r in inv["unreachable"])
    body = {**body, "preemptions_per_day": 30, "checkpoint_interval_s": 7200, "target_net_savings": 0.3}
    inv = remote_client().post("/api/v1/cost/spot", json=body).json()["inversion"]
    assert inv["spot_discount"] is None and inv["unreachable"]
    assert inv["lost_hours_per_preemption"] > 0 and inv["preemptions_per_day"] > 0


def test_a_negative_revision_on_the_compare_page_is_a_422(db_url: str) -> None:
    writer = bearer(issue_token("compare-writer@example.com", ["plans:write"], is_admin=False))
    client = remote_client()
    ids = [
        client.post(
            "/api/v1/plans", json={"name": f"p{i}", "scenario": small_scenario()}, headers=writer
        ).json()["id"]
        for i in range(2)
    ]
    page = client.get("/plans/compare", params={"ids": ids, "revs": [1, -1]}, headers=writer)
    api = client.get("/api/v1/plans/compare", params={"ids": ids, "revs": [1, -1]}, headers=writer)
    assert page.status_code == api.status_code == 422 and "revision numbers" in page.text
