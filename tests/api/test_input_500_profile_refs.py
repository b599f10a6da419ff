"""A calibration profile reference whose version is not a version (a non-ASCII digit such as "²", which
str.isdigit accepts) or is past the database's integer is a 422 on the profile field, never a 500, and saves
no plan (app.services.scenario.profile_version, the one parser of versions)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlmodel import Session, select

from app.db import get_engine
from app.models.plans import Plan
from tests.plans_support import small_scenario

BAD_VERSIONS = ["99999999999999999999999", "9223372036854775808", "²"]


def plans() -> int:
    with Session(get_engine()) as session:
        return int(session.exec(select(func.count()).select_from(Plan)).one())


def problem(response: Any, field: str) -> str:
    (err,) = [e for e in response.json()["detail"] if e["loc"] == ["body", field]]
    return str(err["msg"])


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_a_plan_with_a_bad_profile_version_is_422_and_not_saved(client: TestClient, version: str) -> None:
    before = plans()
    body = {"name": "bad-version", "scenario": small_scenario(), "calibration_profile": f"x v{version}"}
    r = client.post("/api/v1/plans", json=body)
    assert r.status_code == 422, r.text
    assert problem(r, "calibration_profile")
    assert plans() == before


@pytest.mark.parametrize("version", ["2147483648", "9223372036854775808", "99999999999999999999999"])
def test_an_estimate_with_a_version_past_the_column_is_422_naming_the_range(
    client: TestClient, version: str
) -> None:
    r = client.post("/api/v1/estimate", json={**small_scenario(), "profile": f"x@{version}"})
    assert r.status_code == 422, r.text
    assert "from 1 to 2147483647" in problem(r, "profile")
