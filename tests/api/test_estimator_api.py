"""POST /api/v1/estimate and the scenario resolver against the real database (both backends)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from app.core.errors import SpecError
from app.core.units import GiB
from app.services.estimate import estimate_scenario, parse_scenario
from app.services.scenario import resolve_scenario
from tests.paths import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.json"))


def example(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "examples" / name).read_text())


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_estimate_over_http(client: Any, path: Path) -> None:
    body = json.loads(path.read_text())
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    step, memory = out["step"], out["memory"]
    assert sum(step["breakdown_s"].values()) == pytest.approx(step["total_s"], rel=1e-9)
    assert 0.2 < step["mfu"] < 0.75
    assert memory["fits"] is True and memory["margin_bytes"] > 0
    most = memory["stages"][memory["most_loaded_stage"]]
    assert sum(most["breakdown_bytes"].values()) == pytest.approx(most["total_bytes"])
    assert most["total_bytes"] == pytest.approx(memory["peak_bytes"])
    assert out["time_to_train_s"] == pytest.approx(body["training"]["tokens"] / step["tokens_per_s"])
    assert {a["name"] for a in out["assumptions"]} >= {"pipeline bubble", "model FLOPs per token"}


def test_llama3_70b_example_numbers(client: Any) -> None:
    out = client.post("/api/v1/estimate", json=example("llama3-70b-64xh100.json")).json()
    assert out["params"]["total"] / 1e9 == pytest.approx(70.55, rel=0.01)
    # 4 pipeline stages, the first holds the embedding and the most in-flight micro-batches
    assert len(out["memory"]["stages"]) == 4
    assert out["memory"]["most_loaded_stage"] == 0
    assert 40 * GiB < out["memory"]["peak_bytes"] < 80 * GiB
    # bubble (p−1)/(v·m) = 3/(5·64) of the ideal time
    bubble = next(a for a in out["assumptions"] if a["name"] == "pipeline bubble")
    assert bubble["value"] == pytest.approx(3 / (5 * 64))


def test_inconsistent_scenario_is_422_listing_every_problem(client: Any) -> None:
    body = example("llama3-70b-64xh100.json")
    body["layout"].update(
        {"tp": 3, "pp": 3, "dp": 4, "cp": 1, "vp": 1, "global_batch": 100, "micro_batch": 3}
    )
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert len(detail) >= 4
    locs = {".".join(d["loc"]) for d in detail}
    assert "body.layout.tp" in locs and "body.layout.pp" in locs and "body.layout.global_batch" in locs


def test_unknown_gpu_and_model_are_422_with_suggestions(client: Any) -> None:
    body = example("llama3-70b-64xh100.json")
    body["model"] = "Llama-3-700B"
    body["cluster"]["gpu"] = "H1000"
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422
    detail = {".".join(d["loc"]): d["msg"] for d in r.json()["detail"]}
    assert "unknown model" in detail["body.model"]
    assert "unknown gpu" in detail["body.cluster.gpu"]


def test_pydantic_validation_errors_name_the_field(client: Any) -> None:
    body = example("llama3-70b-64xh100.json")
    body["layout"]["recompute"] = "sometimes"
    body["training"]["seq_len"] = 0
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422
    locs = {tuple(d["loc"]) for d in r.json()["detail"]}
    assert ("body", "layout", "recompute") in locs
    assert ("body", "training", "seq_len") in locs


def test_inline_model_and_gpu(client: Any) -> None:
    body = {
        "model": {
            "name": "tiny",
            "num_layers": 4,
            "hidden_size": 1024,
            "num_attention_heads": 8,
            "num_kv_heads": 8,
            "ffn_hidden_size": 4096,
            "vocab_size": 32000,
            "activation": "gelu",
        },
        "cluster": {"gpu": "A100-80GB", "nodes": 1, "gpus_per_node": 8},
        "layout": {"tp": 1, "global_batch": 64},
        "training": {"seq_len": 1024},
    }
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["layout"]["dp"] == 8
    body["model"]["bogus"] = 1
    del body["model"]["vocab_size"]
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422
    locs = {".".join(d["loc"]) for d in r.json()["detail"]}
    assert {"body.model.bogus", "body.model.vocab_size"} <= locs


def test_resolver_reads_the_database_catalog(db_url: str) -> None:
    from app.db import get_engine

    scenario = parse_scenario(example("gpt3-175b-1024xa100.json"))
    with Session(get_engine()) as session:
        resolved = resolve_scenario(scenario, session)
        assert resolved.cluster.num_gpus == 1024
        assert resolved.model.num_layers == 96
        assert resolved.cluster.fabric.name == "ib-hdr-8x200"
        out = estimate_scenario(scenario, session)
    assert out.memory.fits
    assert out.step.total_s > 0


def test_parse_scenario_collects_all_pydantic_errors() -> None:
    with pytest.raises(SpecError) as info:
        parse_scenario({"model": "x", "cluster": {"nodes": 0}, "layout": {}, "training": {}})
    fields = {p.field for p in info.value.problems}
    assert {"cluster.gpu", "cluster.nodes", "layout.global_batch", "training.seq_len"} <= fields


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_get_a_422_naming_the_field(client: Any, literal: str) -> None:
    # Python's JSON parser accepts these literals; the 422 that echoes them must still be valid JSON
    body = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    body["layout"]["optimizer_offload"] = 0.25
    raw = json.dumps(body).replace('"optimizer_offload": 0.25', f'"optimizer_offload": {literal}')
    r = client.post("/api/v1/estimate", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["body", "layout", "optimizer_offload"]
    assert problem["input"] == {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[literal]
    raw = json.dumps(body).replace('"seq_len": ', '"seq_len": NaN, "x": ', 1)
    r = client.post("/api/v1/estimate", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422 and "seq_len" in r.text


@pytest.mark.parametrize(
    ("gpu", "dtype", "reason"),
    [("V100", "bf16", "BF16"), ("A100-80GB", "fp8", "FP8"), ("H100-SXM", "fp4", "FP4")],
)
def test_a_dtype_the_part_cannot_run_is_422_naming_the_dtype(
    client: Any, gpu: str, dtype: str, reason: str
) -> None:
    scenario = {
        "model": "Llama-3-8B",
        "cluster": {"gpu": gpu, "nodes": 1, "gpus_per_node": 8},
        "layout": {"tp": 1, "dp": 8, "recompute": "full", "global_batch": 64, "dtype": dtype},
        "training": {"seq_len": 2048},
    }
    r = client.post("/api/v1/estimate", json=scenario)
    assert r.status_code == 422, r.text
    [problem] = [p for p in r.json()["detail"] if p["loc"][-1] == "dtype"]
    assert f"no {reason} tensor cores" in problem["msg"]
    scenario["layout"]["dtype"] = "fp16"
    assert client.post("/api/v1/estimate", json=scenario).status_code == 200
