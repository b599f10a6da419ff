"""Saved plans (API create and revise, the builder's save) and the layout search check a calibration profile as
the estimate API does, through app.services.scenario.check_profile_use: another GPU's profile is a 422 naming
the profile field; a profile without a GEMM fit for the run's dtype is saved with a warning."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session

from app.db import get_engine
from app.models.benchmarks import CalibrationProfile
from tests.plans_support import SMALL_SEARCH as SEARCH
from tests.plans_support import small_scenario


def _store(name: str, gpu: str, dtype: str) -> None:
    fit = {"max_flops": 600e12, "half_intensity": 60.0, "dtype": dtype, "source": "test"}
    params = {"gemm": {dtype: fit}, "gemm_primary_dtype": dtype}
    with Session(get_engine()) as session:
        session.add(CalibrationProfile(name=name, version=1, gpu_name=gpu, params=params, report={}))
        session.commit()


def _problem(response: Any, field: str) -> str:
    (err,) = [e for e in response.json()["detail"] if e["loc"][-1] == field]
    return str(err["msg"])


def test_plan_create_and_revise_refuse_another_gpus_profile(client: Any) -> None:
    _store("a100-lab", "A100", "bf16")
    refused = client.post(
        "/api/v1/plans",
        json={"name": "p", "scenario": small_scenario(), "calibration_profile": "a100-lab"},
    )
    assert refused.status_code == 422, refused.text
    msg = _problem(refused, "calibration_profile")
    assert "A100" in msg and "H100" in msg
    plan = client.post("/api/v1/plans", json={"name": "p", "scenario": small_scenario()}).json()
    revised = client.post(f"/api/v1/plans/{plan['id']}/revisions", json={"calibration_profile": "a100-lab"})
    assert revised.status_code == 422, revised.text
    assert "A100" in _problem(revised, "calibration_profile")
    assert client.get(f"/api/v1/plans/{plan['id']}").json()["latest_revision"] == 1


def test_a_plan_with_an_fp8_only_profile_is_saved_with_its_warning(client: Any) -> None:
    _store("h100-fp8", "H100", "fp8")
    r = client.post(
        "/api/v1/plans", json={"name": "w", "scenario": small_scenario(), "calibration_profile": "h100-fp8"}
    )
    assert r.status_code == 201, r.text
    rev = r.json()["current"]
    assert rev["calibration_profile"] == "h100-fp8 v1"
    assert any("no bf16 GEMM fit" in w for w in rev["result"]["warnings"])
    plain = client.post("/api/v1/plans", json={"name": "plain", "scenario": small_scenario()}).json()
    assert "warnings" not in plain["current"]["result"]


def test_the_builder_save_refuses_another_gpus_profile(client: Any) -> None:
    _store("a100-web", "A100", "bf16")
    r = client.post(
        "/plans",
        data={"name": "web", "scenario": json.dumps(small_scenario()), "calibration_profile": "a100-web"},
        follow_redirects=False,
    )
    assert r.status_code == 422 and "measured on A100" in r.text


def test_layout_search_refuses_another_gpus_profile_and_warns_about_a_dtype(client: Any) -> None:
    _store("a100-search", "A100", "bf16")
    _store("h100-fp8-search", "H100", "fp8")
    refused = client.post("/api/v1/layout-search", json={**SEARCH, "profile": "a100-search"})
    assert refused.status_code == 422, refused.text
    assert "A100" in _problem(refused, "profile")
    warned = client.post("/api/v1/layout-search", json={**SEARCH, "profile": "h100-fp8-search"})
    assert warned.status_code == 200, warned.text
    assert any("no bf16 GEMM fit" in w for w in warned.json()["warnings"])
    assert client.post("/api/v1/layout-search", json=SEARCH).json()["warnings"] == []
