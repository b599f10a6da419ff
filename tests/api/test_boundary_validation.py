"""Bad input is a 422 naming the field and the reason, never a 500: each defect once found, on SQLite and PostgreSQL.

Every test runs against the real app on a migrated, seeded database of each backend (`db_url`), authenticated
with an administrator's API token; the estimate is also tried anonymously, as anyone may call it.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.auth_support import bearer, issue_token

ADMIN = "boundary-admin@example.com"
NUL = "a\x00b"


@pytest.fixture
def admin(db_url: str) -> TestClient:
    client = TestClient(create_app(), headers=bearer(issue_token(ADMIN, ["admin"], is_admin=True)))
    return client


def scenario(**layout: Any) -> dict[str, Any]:
    return {
        "model": "Llama-3-8B",
        "cluster": {"gpu": "H100-SXM", "nodes": 1},
        "layout": {"global_batch": 64, **layout},
        "training": {"seq_len": 4096},
    }


def model_body(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "num_layers": 2,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "ffn_hidden_size": 512,
        "vocab_size": 1000,
        "activation": "swiglu",
    }


def price_body(**overrides: Any) -> dict[str, Any]:
    return {
        "category": "cloud_gpu",
        "item": "boundary test",
        "price_usd": 2.5,
        "price_date": "2025-01-01",
        "source": "test",
        "includes": "GPU only",
    } | overrides


def detail(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 422, (response.status_code, response.text)
    return list(response.json()["detail"])


def locs(response: Any) -> list[list[str | int]]:
    return [error["loc"] for error in detail(response)]


def openapi_paths(client: TestClient) -> dict[str, dict[str, Any]]:
    paths: dict[str, dict[str, Any]] = client.get("/api/v1/openapi.json").json()["paths"]
    return paths


def test_nul_in_any_path_parameter_is_a_422_naming_it(admin: TestClient) -> None:
    """On PostgreSQL a NUL reaching a query was a 500 (21 routes, 11 of them anonymous)."""
    anonymous = TestClient(admin.app)
    checked = 0
    for template, operations in openapi_paths(admin).items():
        if "{" not in template:
            continue
        names = [part[1:-1] for part in template.split("/") if part.startswith("{")]
        path = template
        for name in names:
            path = path.replace(f"{{{name}}}", quote(NUL))
        for method in operations:
            for client in (admin, anonymous):
                response = client.request(method.upper(), path, json={} if method != "get" else None)
                assert locs(response)[0] == ["path", names[0]], (method, template)
                checked += 1
    assert checked >= 40


def test_nul_in_query_and_bodies_is_a_422_naming_it(admin: TestClient) -> None:
    assert locs(admin.get("/api/v1/models", params={"q": NUL})) == [["query", "q"]]
    assert locs(admin.get("/api/v1/prices", params={"vendor": NUL})) == [["query", "vendor"]]
    assert locs(admin.get("/catalog/models", params={"q": NUL})) == [["query", "q"]]
    login = TestClient(admin.app).post("/api/v1/auth/login", json={"email": f"{NUL}@x.org", "password": "pw"})
    assert locs(login) == [["body", "email"]]
    form = TestClient(admin.app).post("/login", data={"email": f"{NUL}@x.org", "password": "pw"})
    assert locs(form) == [["body", "email"]]
    assert locs(admin.post("/api/v1/nodes", json={"name": NUL})) == [["body", "name"]]
    message = detail(admin.post("/api/v1/prices", json=price_body(item=NUL)))[0]["msg"]
    assert "U+0000" in message


def test_control_characters_in_one_line_text_but_not_in_free_text(admin: TestClient) -> None:
    assert locs(admin.post("/api/v1/prices", json=price_body(item="a\x01b"))) == [["body", "item"]]
    assert locs(admin.post("/api/v1/prices", json=price_body(vendor="tab\there"))) == [["body", "vendor"]]
    notes = "line one\r\n\tline two"
    created = admin.post("/api/v1/prices", json=price_body(notes=notes))
    assert created.status_code == 201, created.text
    assert admin.get(created.headers["location"]).json()["notes"] == notes


@pytest.mark.parametrize(
    ("layout", "field"),
    [
        ({"global_batch": 2**62}, "global_batch"),
        ({"global_batch": 2**24 + 1}, "global_batch"),
        ({"micro_batch": 2**63}, "micro_batch"),
        ({"tp": 2**40}, "tp"),
        ({"pp": 2**21}, "pp"),
        ({"dp": 2**64}, "dp"),
        ({"cp": 2**21}, "cp"),
        ({"ep": 2**21}, "ep"),
        ({"stage_layers": [2**40]}, "stage_layers"),
    ],
)
def test_layout_integers_have_upper_bounds(db_url: str, layout: dict[str, Any], field: str) -> None:
    response = TestClient(create_app()).post("/api/v1/estimate", json=scenario(**layout))  # anonymous
    assert locs(response)[0][:3] == ["body", "layout", field]


def test_non_finite_numbers_are_refused_everywhere(admin: TestClient) -> None:
    for token in (b"NaN", b"Infinity", b"-Infinity", b"1e999"):
        body = b'{"kind": "gemm", "params": {"iters": 3, "sizes": [1, ' + token + b"]}}"
        response = admin.post(
            "/api/v1/benchmarks", content=body, headers={"content-type": "application/json"}
        )
        assert locs(response) == [["body", "params", "sizes", 1]], token
        assert "finite" in detail(response)[0]["msg"]
    tokens = scenario() | {"training": {"seq_len": 4096, "tokens": "Infinity"}}
    assert locs(admin.post("/api/v1/estimate", json=tokens))[0] == ["body", "training", "tokens"]
    huge = admin.post("/api/v1/benchmarks", json={"kind": "gemm", "params": {"iters": 2**64}})
    assert locs(huge) == [["body", "params", "iters"]]
    no_type = admin.post("/api/v1/estimate", content=b'{"model": NaN}')  # FastAPI reads it as JSON too
    assert locs(no_type) == [["body", "model"]]


def test_price_patch_with_null_is_a_422_or_clears_a_nullable_column(admin: TestClient) -> None:
    created = admin.post("/api/v1/prices", json=price_body(gpu_name="H100", gpus_per_unit=8, vendor="v"))
    assert created.status_code == 201, created.text
    url = created.headers["location"]
    for field in ("region", "vendor", "confidence", "item", "price_usd", "price_date", "notes"):
        assert locs(admin.patch(url, json={field: None})) == [["body", field]], field
    cleared = admin.patch(url, json={"gpu_name": None, "gpus_per_unit": None, "vendor": ""})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["gpu_name"] is None and cleared.json()["gpus_per_unit"] is None
    assert cleared.json()["vendor"] == ""


@pytest.mark.parametrize("version", ["99999999999999999999999", str(2**63), str(2**31)])
def test_calibration_version_beyond_its_column_is_a_422(admin: TestClient, version: str) -> None:
    response = admin.get("/api/v1/calibration/profiles/anything", params={"version": version})
    assert locs(response) == [["query", "version"]]


@pytest.mark.parametrize("name", ["two\nlines", "a/b", "50%", "tab\tname", " padded", "x" * 101, "ok?"])
def test_model_names_outside_the_safe_charset_are_refused(admin: TestClient, name: str) -> None:
    assert locs(admin.post("/api/v1/models", json=model_body(name)))[0][-1] == "name"


def test_a_model_name_with_spaces_and_punctuation_round_trips(admin: TestClient) -> None:
    name = f"My model (v1.5)+lora: {uuid.uuid4().hex[:6]}"
    created = admin.post("/api/v1/models", json=model_body(name))
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"/api/v1/models/{quote(name, safe='')}"
    assert admin.get(created.headers["location"]).json()["name"] == name
    assert admin.delete(created.headers["location"]).status_code == 204
    assert admin.get(created.headers["location"]).status_code == 404


def test_a_hugging_face_import_name_is_checked_too(admin: TestClient) -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "hidden_act": "silu",
    }
    response = admin.post("/api/v1/models", json={"name": "org/model", "hf_config": config})
    assert locs(response) == [["body", "name"]]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/plan", {"global_batch": 2**62}, "global_batch"),
        ("/api/v1/plan/sizes", {"global_batch": 2**62}, "global_batch"),
        ("/api/v1/plan", {"global_batch_tokens": 2**40}, "global_batch_tokens"),  # 2^28 sequences of 4,096
        ("/api/v1/plan/sizes", {"global_batch_tokens": 2**62}, "global_batch_tokens"),
    ],
)
def test_planner_batches_have_upper_bounds(
    admin: TestClient, path: str, body: dict[str, Any], field: str
) -> None:
    request = {
        "model": "Llama-3-8B",
        "cluster": {"gpu": "H100-SXM", "nodes": 1},
        "training": {"seq_len": 4096},
    }
    assert locs(admin.post(path, json=request | body)) == [["body", field]]


def test_plan_revision_beyond_its_column_is_a_422(admin: TestClient) -> None:
    created = admin.post("/api/v1/plans", json={"name": "boundary", "scenario": scenario()})
    assert created.status_code == 201, created.text
    plan_id = created.json()["id"]
    for url in (f"/api/v1/plans/{plan_id}/export.csv", f"/plans/{plan_id}"):
        assert locs(admin.get(url, params={"revision": 2**40})) == [["query", "revision"]], url
