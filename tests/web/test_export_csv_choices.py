"""The CSV export of a saved plan carries the builder choices the revision was saved with (planner mode, rank by,
scaling mode, deadline, budget, planner constraints), with their units, as the JSON export does."""

from __future__ import annotations

import csv
import io
from typing import Any

from app.web.pages._builder import SAVED_CHOICES, BuilderState
from tests.plans_support import save_form, small_scenario

HX = {"HX-Request": "true"}

CHOSEN = BuilderState(
    mode="planner",
    rank_by="cost",
    scaling_mode="weak",
    deadline_days=45.0,
    budget_usd=750_000.0,
    plan_offload=True,
    plan_optimizer_offload=False,
    plan_avoid_light_moe=True,
)


def _save(client: Any) -> str:
    built = client.get("/plans/new?" + CHOSEN.query(), headers=HX)
    assert built.status_code == 200, built.text
    r = client.post("/plans", data=save_form(built.text, "exported choices"), follow_redirects=False)
    assert r.status_code == 303, r.text
    return str(r.headers["location"]).rsplit("/", 1)[1]


def test_csv_export_lists_every_saved_builder_choice_with_its_unit(client: Any) -> None:
    plan_id = _save(client)
    stored = client.get(f"/api/v1/plans/{plan_id}").json()["current"]["builder_choices"]
    assert set(stored) == set(SAVED_CHOICES)

    r = client.get(f"/api/v1/plans/{plan_id}/export.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = [row for row in csv.DictReader(io.StringIO(r.text)) if row["section"] == "builder_choice"]
    by_key = {row["key"]: row for row in rows}
    assert set(by_key) == set(SAVED_CHOICES)
    assert by_key["mode"]["value"] == "planner"
    assert by_key["rank_by"]["value"] == "cost"
    assert by_key["scaling_mode"]["value"] == "weak"
    assert float(by_key["deadline_days"]["value"]) == 45.0 and by_key["deadline_days"]["unit"] == "days"
    assert float(by_key["budget_usd"]["value"]) == 750_000.0 and by_key["budget_usd"]["unit"] == "USD"
    assert by_key["plan_offload"]["value"] == "True"
    assert by_key["plan_optimizer_offload"]["value"] == "False"
    assert by_key["plan_avoid_light_moe"]["value"] == "True"


def test_csv_export_of_an_api_saved_plan_has_no_builder_choice_rows(client: Any) -> None:
    r = client.post("/api/v1/plans", json={"name": "api plan", "scenario": small_scenario()})
    assert r.status_code == 201, r.text
    body = client.get(f"/api/v1/plans/{r.json()['id']}/export.csv").text
    sections = {row["section"] for row in csv.DictReader(io.StringIO(body))}
    assert "builder_choice" not in sections and "input" in sections
