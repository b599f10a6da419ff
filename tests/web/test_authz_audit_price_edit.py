"""Authorisation audit: the price book's edit form (GET /catalog/prices/{id}/edit) applies the price-visibility rule
(app.services.catalog.price_visibility through price_viewer): a user's row is read by its owner through a browser
session or a token with plans:read only. A token of the owner without plans:read (benchmarks:run) sees the built-in
rows only, as on GET /api/v1/prices/{id} (404) and the price book page; the edit form must not hand it the row."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.auth_support import bearer, issue_token, unthrottled_client
from tests.price_support import private_quote

OWNER = "audit-price-owner@example.com"


@pytest.fixture
def web(sqlite_app_url: str) -> Iterator[TestClient]:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    yield unthrottled_client()


def test_the_edit_form_shows_a_users_row_only_to_credentials_that_may_read_it(web: TestClient) -> None:
    writer = bearer(issue_token(OWNER, ["plans:write", "benchmarks:run"], is_admin=False))
    runner = bearer(issue_token(OWNER, ["benchmarks:run"], is_admin=False))  # the owner's, without plans:read
    row = web.post("/api/v1/prices", json=private_quote(), headers=writer).json()
    secret = row["source"] + "|" + row["item"]

    assert web.get(f"/api/v1/prices/{row['id']}", headers=runner).status_code == 404
    assert row["item"] not in web.get("/catalog/prices?mine=1", headers=runner).text

    refused = web.get(f"/catalog/prices/{row['id']}/edit", headers=runner)
    assert refused.status_code == 404, refused.text[:300]
    assert row["item"] not in refused.text and secret not in refused.text

    allowed = web.get(f"/catalog/prices/{row['id']}/edit", headers=writer)
    assert allowed.status_code == 200 and row["item"] in allowed.text
