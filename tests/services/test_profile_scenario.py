"""A calibrated hardware profile named in a scenario replaces the catalog defaults in estimate and plan search."""

from __future__ import annotations

import json

from sqlmodel import Session

from app.db import get_engine
from app.models.benchmarks import CalibrationProfile
from tests.paths import ROOT

EXAMPLE = ROOT / "examples" / "llama3-70b-64xh100.json"


def store_profile(max_tflops: float, name: str = "slow-h100", version: int = 1) -> None:
    """A calibration profile for H100 whose bf16 GEMM curve tops out at `max_tflops`."""
    params = {
        "gemm": {
            "bf16": {
                "max_flops": max_tflops * 1e12,
                "half_intensity": 60.0,
                "dtype": "bf16",
                "source": "test",
            }
        },
        "gemm_primary_dtype": "bf16",
    }
    with Session(get_engine()) as session:
        session.add(CalibrationProfile(name=name, version=version, gpu_name="H100", params=params, report={}))
        session.commit()


def test_profile_changes_estimate_and_unknown_profile_is_422(db_url: str) -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.auth_support import bearer, issue_token

    scenario = json.loads(EXAMPLE.read_text())
    reader = bearer(issue_token("profile-reader@example.com", ["plans:read"], is_admin=False))
    with TestClient(create_app(), headers=reader) as client:  # naming a profile needs plans:read
        default = client.post("/api/v1/estimate", json=scenario)
        assert default.status_code == 200, default.text
        store_profile(200.0)  # a quarter of the H100's measured matmul rate
        slow = client.post("/api/v1/estimate", json={**scenario, "profile": "slow-h100@1"})
        assert slow.status_code == 200, slow.text
        assert slow.json()["step"]["total_s"] > 1.5 * default.json()["step"]["total_s"]

        missing = client.post("/api/v1/estimate", json={**scenario, "profile": "no-such-profile"})
        assert missing.status_code == 422
        assert any(err["loc"][-1] == "profile" for err in missing.json()["detail"])
