"""The builder pages show their usual profile problem for a profile reference whose version is not a version (a
non-ASCII digit such as "²", or one past the database's integer) instead of failing with a 500."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

BAD = [
    ("x v²", "unknown calibration profile &#39;x v²&#39;"),
    ("x v99999999999999999999999", "profile version must be from 1 to 2147483647"),
    ("x v9223372036854775808", "profile version must be from 1 to 2147483647"),
]


@pytest.mark.parametrize(("profile", "reason"), BAD)
def test_the_builder_reports_a_bad_profile_version_on_its_field(
    client: TestClient, profile: str, reason: str
) -> None:
    r = client.get("/plans/new", params={"profile": profile})
    assert r.status_code == 200, r.text[-2000:]
    assert "These inputs need attention" in r.text and reason in r.text


@pytest.mark.parametrize("profile", [profile for profile, _ in BAD])
def test_the_scaling_panel_asks_to_fix_the_inputs(client: TestClient, profile: str) -> None:
    r = client.get("/plans/new/scaling", params={"profile": profile}, headers={"HX-Request": "true"})
    assert r.status_code == 200, r.text[-2000:]
    assert "Fix the inputs to see the scaling curve" in r.text
