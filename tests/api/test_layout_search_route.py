"""POST /api/v1/layout-search and /api/v1/layout-search/sizes, and their deprecated aliases /api/v1/plan and
/api/v1/plan/sizes: the same handlers, the same answers and the same checks; only the aliases say they are
deprecated (OpenAPI, `Deprecation` and `Link` headers)."""

from __future__ import annotations

from typing import Any

import pytest

from app.hooks.inflight import is_heavy
from tests.auth_support import bearer, issue_token, remote_client
from tests.plans_support import SMALL_SEARCH as SEARCH
from tests.plans_support import without_timing

SIZES = {
    "model": "Llama-3-8B",
    "cluster": {"gpu": "H100-SXM", "nodes": 1},
    "training": {"seq_len": 4096, "tokens": 1e10},
    "global_batch": 64,
    "sizes": [8, 16],
}
# (new path, deprecated alias, request body)
PAIRS = [
    ("/api/v1/layout-search", "/api/v1/plan", SEARCH),
    ("/api/v1/layout-search/sizes", "/api/v1/plan/sizes", SIZES),
]


@pytest.mark.parametrize(("new", "old", "body"), PAIRS, ids=["search", "sizes"])
def test_the_new_path_answers_as_the_old_one(client: Any, new: str, old: str, body: dict[str, Any]) -> None:
    fresh = client.post(new, json=body)
    alias = client.post(old, json=body)
    assert fresh.status_code == alias.status_code == 200, (fresh.text, alias.text)
    assert "elapsed_s" in fresh.json()
    assert without_timing(fresh.json()) == without_timing(alias.json())


@pytest.mark.parametrize(("new", "old", "body"), PAIRS, ids=["search", "sizes"])
def test_only_the_alias_says_it_is_deprecated_and_names_its_successor(
    client: Any, new: str, old: str, body: dict[str, Any]
) -> None:
    alias = client.post(old, json=body)
    assert alias.status_code == 200, alias.text
    assert alias.headers["Deprecation"] == "true"
    assert alias.headers["Link"] == f'<{new}>; rel="successor-version"'
    fresh = client.post(new, json=body)
    assert fresh.status_code == 200, fresh.text
    assert "Deprecation" not in fresh.headers and "Link" not in fresh.headers


def test_openapi_marks_the_aliases_deprecated_with_the_same_models(client: Any) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    for new, old, _ in PAIRS:
        fresh, alias = paths[new]["post"], paths[old]["post"]
        assert alias["deprecated"] is True and "deprecated" not in fresh
        assert new in alias["description"]
        assert fresh["requestBody"] == alias["requestBody"]
        assert fresh["responses"] == alias["responses"]
        assert fresh["tags"] == alias["tags"] == ["layout-search"]
    assert paths["/api/v1/layout-search"]["post"]["operationId"] == "layout_search"
    assert paths["/api/v1/layout-search/sizes"]["post"]["operationId"] == "layout_search_sizes"


@pytest.mark.parametrize("path", [p for new, old, _ in PAIRS for p in (new, old)])
def test_callers_without_plans_read_are_refused_on_both(sqlite_app_url: str, path: str) -> None:
    body = SEARCH if path.endswith(("search", "plan")) else SIZES
    client = remote_client()
    anonymous = client.post(path, json=body)
    assert anonymous.status_code == 401, anonymous.text
    no_scope = bearer(issue_token("layout-search-bench@example.com", ["benchmarks:run"], is_admin=False))
    assert client.post(path, json=body, headers=no_scope).status_code == 403
    reader = bearer(issue_token("layout-search-reader@example.com", ["plans:read"], is_admin=False))
    assert client.post(path, json=body, headers=reader).status_code == 200


@pytest.mark.parametrize("path", [p for new, old, _ in PAIRS for p in (new, old)])
def test_both_paths_count_against_the_per_caller_cap(path: str) -> None:
    assert is_heavy({"type": "http", "method": "POST", "path": path, "query_string": b""})
