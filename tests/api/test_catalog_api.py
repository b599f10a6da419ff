"""/api/v1 catalog endpoints through the real app and database: envelopes, aliases, 404 suggestions, writes."""

from __future__ import annotations

import json
import uuid
from datetime import date, timedelta
from typing import Any

import pytest

import app.catalog as catalog
from tests.paths import DATA_DIR

HF_DIR = DATA_DIR / "hf"


@pytest.mark.parametrize(
    ("path", "minimum"),
    [("/api/v1/gpus", 11), ("/api/v1/models", 20), ("/api/v1/interconnects", 15), ("/api/v1/prices", 70)],
)
def test_list_envelopes(client: Any, path: str, minimum: int) -> None:
    r = client.get(path, params={"limit": 1000})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"data", "count"}
    assert body["count"] >= minimum and len(body["data"]) == body["count"]


def test_paging_keeps_the_total(client: Any) -> None:
    full = client.get("/api/v1/models", params={"limit": 1000}).json()
    page = client.get("/api/v1/models", params={"offset": 3, "limit": 5}).json()
    assert page["count"] == full["count"]
    assert [m["name"] for m in page["data"]] == [m["name"] for m in full["data"][3:8]]
    assert client.get("/api/v1/models", params={"limit": 0}).status_code == 422


def test_gpu_in_display_and_si_units(client: Any) -> None:
    r = client.get("/api/v1/gpus/A100-80 (SXM, Selene)")
    assert r.status_code == 200
    gpu = r.json()
    assert gpu["name"] == "A100-80GB-SXM" and gpu["builtin"]
    assert gpu["peak_tflops"]["bf16"] == pytest.approx(312)
    assert gpu["spec"]["peak_flops"]["bf16"] == pytest.approx(312e12)
    assert gpu["hbm_gib"] == pytest.approx(80) and gpu["spec"]["hbm_bytes"] == 80 * 2**30
    assert gpu["scaleup_bandwidth_gb_per_s"] == pytest.approx(300)
    assert gpu["source"] and gpu["date"] == "2020-11-16"


def test_model_and_interconnect_detail(client: Any) -> None:
    model = client.get("/api/v1/models/deepseek-v3").json()
    assert model["name"] == "DeepSeek-V3" and model["is_moe"] and model["attention"] == "mla"
    assert model["published_params"] == pytest.approx(671e9)
    assert model["spec"]["moe"]["num_experts"] == 256
    link = client.get("/api/v1/interconnects/IB XDR").json()
    assert link["name"] == "InfiniBand-XDR" and link["bandwidth_gb_per_s"] == pytest.approx(100)
    only_up = client.get("/api/v1/interconnects", params={"kind": "scale_up"}).json()
    assert only_up["count"] >= 7 and all(i["kind"] == "scale_up" for i in only_up["data"])


@pytest.mark.parametrize(
    ("path", "kind", "suggestion"),
    [
        ("/api/v1/gpus/H100-SMX", "gpu", "H100-SXM"),
        ("/api/v1/models/Llama-3.1-80B", "model", "Llama-3.1-8B"),
        ("/api/v1/interconnects/InfiniBand-NDX", "interconnect", "InfiniBand-NDR"),
    ],
)
def test_unknown_names_are_404_with_close_matches(client: Any, path: str, kind: str, suggestion: str) -> None:
    r = client.get(path)
    assert r.status_code == 404
    body = r.json()
    assert body["kind"] == kind and suggestion in body["suggestions"]
    assert "did you mean" in body["detail"]


def test_model_search(client: Any) -> None:
    body = client.get("/api/v1/models", params={"q": "mixtral"}).json()
    assert {m["name"] for m in body["data"]} >= {"Mixtral-8x7B", "Mixtral-8x22B"}
    assert all("mixtral" in (m["name"] + m["family"]).lower() for m in body["data"])
    by_alias = client.get("/api/v1/models", params={"q": "LLAMA2"}).json()
    assert {m["name"] for m in by_alias["data"]} == {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B"}


def test_price_rows_carry_provenance_and_filter(client: Any) -> None:
    body = client.get(
        "/api/v1/prices", params={"category": "cloud_gpu", "gpu": "H100", "pricing_model": "on-demand"}
    ).json()
    assert body["count"] >= 5
    for row in body["data"]:
        assert row["gpu_name"] == "H100-SXM" and "on-demand" in row["pricing_model"].lower()
        # the price book's rows state their confidence; a row another test of the session added need not
        assert row["source"] and row["includes"] and (row["confidence"] or not row["builtin"])
        age = (date.today() - date.fromisoformat(row["price_date"])).days
        assert row["age_days"] == age and row["stale"] == (age > 180)
    old = client.get("/api/v1/prices", params={"category": "onprem_server", "limit": 1000}).json()
    assert any(r["stale"] for r in old["data"])  # 2020-2025 purchase prices are past 180 days


def test_create_models_inline_and_from_hf_config(client: Any) -> None:
    name = f"inline-{uuid.uuid4().hex[:6]}"
    spec = catalog.find_model("Llama-3-8B").to_dict() | {"name": name, "source": "", "family": "custom"}
    r = client.post("/api/v1/models", json=spec)
    assert r.status_code == 201, r.text
    assert r.json()["name"] == name and not r.json()["builtin"]
    assert r.headers["location"] == f"/api/v1/models/{name}"
    assert client.get(f"/api/v1/models/{name}").json()["spec"]["num_kv_heads"] == 8
    # the same name again is refused, naming the field
    again = client.post("/api/v1/models", json={"spec": spec})
    assert again.status_code == 422 and again.json()["detail"][0]["loc"] == ["body", "name"]
    assert client.delete(f"/api/v1/models/{name}").status_code == 204

    hf_name = f"hf-{uuid.uuid4().hex[:6]}"
    config = json.loads((HF_DIR / "Mixtral-8x7B-v0.1.json").read_text())
    r = client.post("/api/v1/models", json={"name": hf_name, "hf_config": config})
    assert r.status_code == 201 and r.json()["is_moe"] and r.json()["family"] == "mixtral"
    assert client.delete(f"/api/v1/models/{hf_name}").status_code == 204
    assert client.get(f"/api/v1/models/{hf_name}").status_code == 404
    assert client.delete("/api/v1/models/Mixtral-8x7B").status_code == 403


def test_bad_model_bodies_name_their_fields(client: Any) -> None:
    broken = json.loads((HF_DIR / "Llama-3.1-8B.json").read_text())
    del broken["num_hidden_layers"]
    broken["hidden_act"] = "tanh"
    r = client.post("/api/v1/models", json={"name": "broken", "hf_config": broken})
    assert r.status_code == 422
    locs = {tuple(d["loc"]) for d in r.json()["detail"]}
    assert locs == {("body", "hf_config", "num_hidden_layers"), ("body", "hf_config", "hidden_act")}
    r = client.post(
        "/api/v1/models", json={"name": "x", "num_layers": 0, "hidden_size": 8, "activation": "tanh"}
    )
    assert r.status_code == 422
    fields = {d["loc"][-1] for d in r.json()["detail"]}
    assert {"num_layers", "activation", "num_attention_heads"} <= fields
    huge = catalog.find_model("GPT-2").to_dict() | {"name": "huge", "num_layers": 10**21}
    r = client.post("/api/v1/models", json=huge)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "num_layers"
    huge_hf = json.loads((HF_DIR / "gpt2.json").read_text()) | {"n_layer": 10**15}
    r = client.post("/api/v1/models", json={"name": "huge", "hf_config": huge_hf})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "hf_config", "num_layers"]
    # beyond 64 bits the request itself is refused, at the key that was sent
    r = client.post("/api/v1/models", json={"name": "huge", "hf_config": huge_hf | {"n_layer": 10**21}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "hf_config", "n_layer"]
    neither = client.post("/api/v1/models", json={"name": "nothing"})
    assert neither.status_code == 422


def _price_body(**overrides: Any) -> dict[str, Any]:
    return {
        "category": "cloud_gpu",
        "item": f"test-row-{uuid.uuid4().hex[:6]}",
        "vendor": "ExampleCloud",
        "pricing_model": "1-yr reserved",
        "unit": "GPU-hour",
        "price_usd": 2.1,
        "usd_per_gpu_hour": 2.1,
        "gpu_name": "h200",
        "gpus_per_unit": 1,
        "price_date": (date.today() - timedelta(days=3)).isoformat(),
        "source": "quote Q-42",
        "includes": "GPU-hour with host share and InfiniBand; excludes storage",
    } | overrides


def test_price_row_lifecycle(client: Any) -> None:
    r = client.post("/api/v1/prices", json=_price_body())
    assert r.status_code == 201, r.text
    row = r.json()
    assert row["gpu_name"] == "H200-SXM" and not row["builtin"] and not row["stale"] and row["age_days"] == 3
    assert r.headers["location"] == f"/api/v1/prices/{row['id']}"
    patched = client.patch(f"/api/v1/prices/{row['id']}", json={"price_usd": 1.9, "notes": "renewed"})
    assert (
        patched.status_code == 200
        and patched.json()["price_usd"] == 1.9
        and patched.json()["notes"] == "renewed"
    )
    assert client.get(f"/api/v1/prices/{row['id']}").json()["price_usd"] == 1.9
    mine = client.get("/api/v1/prices", params={"builtin": False, "limit": 1000}).json()["data"]
    assert row["id"] in {m["id"] for m in mine}
    assert client.delete(f"/api/v1/prices/{row['id']}").status_code == 204
    assert client.get(f"/api/v1/prices/{row['id']}").status_code == 404


def test_builtin_price_rows_are_read_only(client: Any) -> None:
    builtin = client.get("/api/v1/prices", params={"builtin": True, "limit": 1}).json()["data"][0]
    assert client.patch(f"/api/v1/prices/{builtin['id']}", json={"price_usd": 0}).status_code == 403
    assert client.delete(f"/api/v1/prices/{builtin['id']}").status_code == 403
    assert client.get(f"/api/v1/prices/{builtin['id']}").json()["price_usd"] == builtin["price_usd"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"price_usd": -1}, "price_usd"),
        ({"source": ""}, "source"),
        ({"includes": ""}, "includes"),
        ({"price_date": "last week"}, "price_date"),
        ({"gpu_name": "H1000"}, "gpu_name"),
        ({"gpus_per_unit": 0}, "gpus_per_unit"),
        ({"gpus_per_unit": 10**11}, "gpus_per_unit"),  # would overflow the integer column
    ],
)
def test_bad_price_rows_name_the_field(client: Any, overrides: dict[str, Any], field: str) -> None:
    r = client.post("/api/v1/prices", json=_price_body(**overrides))
    assert r.status_code == 422
    assert field in {d["loc"][-1] for d in r.json()["detail"]}


def test_unknown_price_id_is_404(client: Any) -> None:
    assert client.get(f"/api/v1/prices/{uuid.uuid4()}").status_code == 404
    assert client.patch(f"/api/v1/prices/{uuid.uuid4()}", json={"price_usd": 1}).status_code == 404


def test_writes_need_the_plans_write_scope(client: Any) -> None:
    from tests.auth_support import bearer, issue_token, remote_client

    remote = remote_client()
    assert remote.get("/api/v1/gpus").status_code == 200  # reads are public
    assert remote.post("/api/v1/prices", json=_price_body()).status_code == 401
    read_only = issue_token(f"reader-{uuid.uuid4().hex[:6]}@example.test", ["plans:read"], is_admin=False)
    r = remote.post("/api/v1/prices", json=_price_body(), headers=bearer(read_only))
    assert r.status_code == 403
    writer = issue_token(f"writer-{uuid.uuid4().hex[:6]}@example.test", ["plans:write"], is_admin=False)
    r = remote.post("/api/v1/prices", json=_price_body(), headers=bearer(writer))
    assert r.status_code == 201


def test_openapi_has_stable_operation_ids(client: Any) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    ids = {op.get("operationId") for path in spec["paths"].values() for op in path.values()}
    assert {
        "list_gpus",
        "get_gpu",
        "list_models",
        "get_model",
        "create_model",
        "delete_model",
        "list_interconnects",
        "get_interconnect",
        "list_prices",
        "get_price",
        "create_price",
        "update_price",
        "delete_price",
    } <= ids


def test_users_change_only_their_own_rows(client: Any) -> None:
    from tests.auth_support import bearer, ensure_user, issue_token, remote_client

    remote = remote_client()
    alice_email = f"alice-{uuid.uuid4().hex[:6]}@example.test"
    alice = bearer(issue_token(alice_email, ["plans:write"], is_admin=False))
    bob = bearer(issue_token(f"bob-{uuid.uuid4().hex[:6]}@example.test", ["plans:write"], is_admin=False))
    admin = bearer(issue_token(f"admin-{uuid.uuid4().hex[:6]}@example.test", ["admin"], is_admin=True))

    row = remote.post("/api/v1/prices", json=_price_body(), headers=alice).json()
    assert row["owner_id"] == str(ensure_user(alice_email).id)
    # another user's row is a 404, as a missing one: its id reveals nothing (a readable plan is the 403 case)
    assert (
        remote.patch(f"/api/v1/prices/{row['id']}", json={"price_usd": 0.5}, headers=bob).status_code == 404
    )
    assert remote.delete(f"/api/v1/prices/{row['id']}", headers=bob).status_code == 404
    assert (
        remote.patch(f"/api/v1/prices/{row['id']}", json={"price_usd": 0.5}, headers=alice).status_code == 200
    )
    assert remote.delete(f"/api/v1/prices/{row['id']}", headers=admin).status_code == 204

    name = f"alice-model-{uuid.uuid4().hex[:6]}"
    spec = catalog.find_model("GPT-2").to_dict() | {"name": name}
    assert remote.post("/api/v1/models", json=spec, headers=alice).status_code == 201
    r = remote.delete(f"/api/v1/models/{name}", headers=bob)
    assert r.status_code == 403 and "another user" in r.json()["detail"]
    assert remote.delete(f"/api/v1/models/{name}", headers=alice).status_code == 204


def test_price_book_as_csv(client: Any) -> None:
    import csv
    import io

    r = client.get("/api/v1/prices/export.csv", params={"gpu": "H100", "pricing_model": "spot"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    listed = client.get("/api/v1/prices", params={"gpu": "H100", "pricing_model": "spot"}).json()
    assert len(rows) == listed["count"] >= 2
    assert {row["id"] for row in rows} == {row["id"] for row in listed["data"]}
    assert all(row["gpu_name"] == "H100-SXM" and row["source"] and row["includes"] for row in rows)
