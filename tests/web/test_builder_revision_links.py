"""While the builder revises a saved plan, every link that puts a layout or a size into it keeps revising that plan:
"Use layout N" in the ranking and the Pareto front, the fixes' node and batch links, the sizing panel's "Use this
size" and the "What fits" panel's "Use this layout" all carry `plan=`, and following one reopens the builder on the
plan (title and hidden input), so "Save" writes a revision rather than a new plan. A new plan's links name none."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.web.pages._builder import BuilderState
from tests.auth_support import bearer, issue_token, unthrottled_client
from tests.plans_support import small_scenario

HX = {"HX-Request": "true"}
USE_LINK = re.compile(r'<a href="(/plans/new\?[^"]*)"[^>]*>(Use [^<]*|\d+ nodes|[\d,]+ sequences)</a>')


@pytest.fixture(name="owner")
def owner_headers(db_url: str) -> dict[str, str]:
    return bearer(issue_token("reviser@example.com", ["plans:write"], is_admin=False))


@pytest.fixture(name="client")
def app_client(db_url: str) -> TestClient:
    return unthrottled_client()


def _links(page: str) -> dict[str, str]:
    return {text: html.unescape(href) for href, text in USE_LINK.findall(page)}


def _panel(client: TestClient, page: str, path: str, headers: dict[str, str]) -> str:
    found = re.search(rf'hx-get="({re.escape(path)}\?[^"]*)"', page)
    assert found, f"the results load no {path} panel"
    response = client.get(html.unescape(found.group(1)), headers=headers | HX)
    assert response.status_code == 200, response.text
    return response.text


def _plan(client: TestClient, owner: dict[str, str]) -> dict[str, Any]:
    created = client.post(
        "/api/v1/plans", json={"name": "reviewed plan", "scenario": small_scenario()}, headers=owner
    )
    assert created.status_code == 201, created.text
    return dict(created.json())


def test_ranking_and_size_links_keep_revising_the_plan(client: TestClient, owner: dict[str, str]) -> None:
    plan = _plan(client, owner)
    state = BuilderState(mode="planner", deadline_days=60.0).query()
    page = client.get(f"/plans/new?{state}&plan={plan['id']}", headers=owner | HX).text
    links = _links(page) | _links(_panel(client, page, "/plans/new/sizes", owner))
    assert "Use layout 1" in links and "Use this size" in links, sorted(links)
    for text, href in links.items():
        assert f"plan={plan['id']}" in href, f"{text!r} leaves the revision: {href}"
    reopened = client.get(links["Use layout 2"], headers=owner).text
    assert f'<input type="hidden" name="plan" value="{plan["id"]}">' in reopened
    assert "Edit reviewed plan" in reopened


def test_the_what_fits_link_keeps_revising_the_plan(client: TestClient, owner: dict[str, str]) -> None:
    plan = _plan(client, owner)
    too_big = BuilderState(
        tp=1, zero=0, recompute="none", micro_batch=8
    ).query()  # an 8B model that does not fit
    page = client.get(f"/plans/new?{too_big}&plan={plan['id']}", headers=owner | HX).text
    links = _links(_panel(client, page, "/plans/new/alternative", owner))
    assert f"plan={plan['id']}" in links["Use this layout"]


def test_a_new_plans_links_name_no_plan(client: TestClient, owner: dict[str, str]) -> None:
    state = BuilderState(mode="planner", deadline_days=60.0).query()
    page = client.get(f"/plans/new?{state}", headers=owner | HX).text
    links = _links(page) | _links(_panel(client, page, "/plans/new/sizes", owner))
    assert links and not any("plan=" in href for href in links.values())
