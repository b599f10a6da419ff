"""Calibration profiles are users' measurements: listing them or naming one in a public calculation (estimate,
network model) needs plans:read, as GET /api/v1/calibration/profiles does. Anonymous callers get 401 with a
message that names no profile; a credential without plans:read gets 403; readers keep the "did you mean"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.api.routes.estimate import cache
from app.cli.commands.network import SEED_SCENARIO
from tests.auth_support import bearer, issue_token, remote_client
from tests.paths import ROOT
from tests.services.test_profile_scenario import store_profile

EXAMPLE = ROOT / "examples" / "llama3-70b-64xh100.json"
COLLECTIVE = {"op": "allreduce", "message_bytes": 2**20, "cluster": {"gpu": "H100", "nodes": 2}}


@pytest.fixture(scope="module")
def profiled(sqlite_app_url: str) -> Iterator[None]:
    """The shared database with one stored profile, 'secret-lab' v1."""
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    store_profile(300.0, name="secret-lab")
    yield
    cache.clear()


def _scenario(profile: str | None) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return {**body, "profile": profile} if profile else body


def test_anonymous_estimates_name_no_profile(profiled: None) -> None:
    anonymous = remote_client()
    for ref in ("secret-lab", "secret-la", "secret-lab@1"):
        refused = anonymous.post("/api/v1/estimate", json=_scenario(ref))
        assert refused.status_code == 401, ref
        assert "sign in or send an API token with scope plans:read" in refused.json()["detail"]
        assert "secret-lab" not in refused.text  # no suggestion, no echo of what exists
    assert (
        anonymous.post("/api/v1/estimate", json=_scenario(None)).status_code == 200
    )  # the defaults stay public


def test_a_credential_without_plans_read_gets_403_and_readers_keep_suggestions(profiled: None) -> None:
    runner = bearer(issue_token("runner-only@example.com", ["benchmarks:run"], is_admin=False))
    refused = remote_client().post("/api/v1/estimate", json=_scenario("secret-lab"), headers=runner)
    assert refused.status_code == 403 and "lacks the plans:read scope" in refused.json()["detail"]

    reader = remote_client()
    reader.headers.update(bearer(issue_token("profile-reader@example.com", ["plans:read"], is_admin=False)))
    assert reader.post("/api/v1/estimate", json=_scenario("secret-lab")).status_code == 200
    typo = reader.post("/api/v1/estimate", json=_scenario("secret-la"))
    assert typo.status_code == 422
    assert any("did you mean: secret-lab" in err["msg"] for err in typo.json()["detail"])


def test_the_network_model_names_profiles_for_readers_only(profiled: None) -> None:
    anonymous = remote_client()
    scaling = {"scenario": SEED_SCENARIO, "gpu_counts": [64, 128], "profile": "secret-lab"}
    for path, body in (
        ("/api/v1/network/collective", {**COLLECTIVE, "profile": "secret-lab"}),
        ("/api/v1/network/scaling", scaling),
    ):
        refused = anonymous.post(path, json=body)
        assert refused.status_code == 401, (path, refused.text)
        assert "secret-lab" not in refused.text
    assert anonymous.post("/api/v1/network/collective", json=COLLECTIVE).status_code == 200
    reader = bearer(issue_token("network-reader@example.com", ["plans:read"], is_admin=False))
    allowed = remote_client().post(
        "/api/v1/network/collective", json={**COLLECTIVE, "profile": "secret-lab"}, headers=reader
    )
    assert allowed.status_code == 200, allowed.text


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/api/v1/cost/run", {}),
        ("/api/v1/goodput", {"preset": "llama3-405b"}),
        ("/api/v1/storage", {}),
        ("/api/v1/network/scaling", {"gpu_counts": [64, 128]}),
    ],
)
def test_a_profile_inside_an_embedded_scenario_is_checked_too(
    profiled: None, path: str, extra: dict[str, Any]
) -> None:
    """The cost, goodput, storage and scaling calculations take a whole estimator scenario: a profile named inside
    it is a user's measurement like a top-level one (401 anonymous, no suggestion; 403 without plans:read)."""
    anonymous = remote_client()
    for ref in ("secret-lab", "secret-la"):
        refused = anonymous.post(path, json={"scenario": _scenario(ref), **extra})
        assert refused.status_code == 401, (path, ref, refused.text)
        assert "secret-lab" not in refused.text
    runner = bearer(issue_token("embedded-runner@example.com", ["benchmarks:run"], is_admin=False))
    refused = remote_client().post(path, json={"scenario": _scenario("secret-lab"), **extra}, headers=runner)
    assert refused.status_code == 403, refused.text
    assert anonymous.post(path, json={"scenario": _scenario(None), **extra}).status_code == 200
    reader = bearer(issue_token("embedded-reader@example.com", ["plans:read"], is_admin=False))
    allowed = remote_client().post(path, json={"scenario": _scenario("secret-lab"), **extra}, headers=reader)
    assert allowed.status_code == 200, allowed.text
