"""Saved plans keep the builder's choices: planner mode, rank by, scaling mode, deadline, budget, the planner
constraints and the attention kernel survive save → reopen → edit → save a revision."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from app.web.pages._builder import SAVED_CHOICES, BuilderState, choices_from, parse_state, scenario_to_state
from tests.plans_support import save_form, saved_field, small_scenario

HX = {"HX-Request": "true"}

CHOSEN = BuilderState(
    mode="planner",
    rank_by="cost",
    scaling_mode="weak",
    deadline_days=45.0,
    budget_usd=750_000.0,
    plan_offload=True,
    plan_optimizer_offload=True,
    plan_avoid_light_moe=True,
    attention_backend="flash-attention-2",
)
EXPECTED = {
    "mode": "planner",
    "rank_by": "cost",
    "scaling_mode": "weak",
    "deadline_days": 45.0,
    "budget_usd": 750_000.0,
    "plan_offload": True,
    "plan_optimizer_offload": True,
    "plan_avoid_light_moe": True,
    "attention_backend": "flash-attention-2",
}


def _edit_state(page: str) -> tuple[str, BuilderState]:
    edit = re.search(r'href="/plans/new\?([^"]+)"', page)
    assert edit, "no edit link on the saved plan's page"
    query = html.unescape(edit.group(1))
    params = dict(pair.split("=", 1) for pair in query.split("&"))
    return query, parse_state({k: v for k, v in params.items() if k != "plan"})


def _values(state: BuilderState) -> dict[str, Any]:
    return {name: getattr(state, name) for name in EXPECTED}


def test_saved_plan_keeps_the_builder_choices_through_reopen_and_edit(client: Any) -> None:
    built = client.get("/plans/new?" + CHOSEN.query(), headers=HX)
    assert built.status_code == 200, built.text
    r = client.post("/plans", data=save_form(built.text, "ranked by cost"), follow_redirects=False)
    assert r.status_code == 303, r.text
    plan_url = r.headers["location"]
    plan_id = plan_url.rsplit("/", 1)[1]

    # stored with the revision, as the builder had them
    current = client.get(f"/api/v1/plans/{plan_id}").json()["current"]
    assert set(current["builder_choices"]) == set(SAVED_CHOICES)
    assert {k: current["builder_choices"][k] for k in SAVED_CHOICES} == {
        k: EXPECTED[k] for k in SAVED_CHOICES
    }
    assert current["scenario"]["attention_backend"] == "flash-attention-2"  # the kernel is in the scenario

    # the saved page says how the layout was chosen and ranked, where the ranking would be
    page = client.get(plan_url)
    assert page.status_code == 200
    assert "ranked by cost" in page.text
    ranking = page.text.split('id="rank-title"', 1)[1].split("</section>", 1)[0]
    assert "Saved from the planner, ranked by cost per run" in ranking
    assert "Saved with a fixed layout" not in ranking
    choices = page.text.split('id="builder-choices">', 1)[1].split("</p>", 1)[0]
    for words in ("finish within 45 days", "750,000 USD", "weak scaling", "offload activations"):
        assert words in choices

    # "edit in builder" reopens every choice, and the builder shows them
    query, reopened = _edit_state(page.text)
    assert f"plan={plan_id}" in query and not reopened.errors
    assert _values(reopened) == EXPECTED
    builder = client.get("/plans/new?" + query)
    assert builder.status_code == 200 and f'action="/plans/{plan_id}/revise"' in builder.text
    assert 'value="cost" selected' in builder.text.split('id="f-rank_by"', 1)[1][:400]
    assert 'value="weak" selected' in builder.text.split('id="f-scaling_mode"', 1)[1][:400]
    assert 'value="flash-attention-2" selected' in builder.text.split('id="f-attention_backend"', 1)[1][:600]
    for flag in ("plan_offload", "plan_optimizer_offload", "plan_avoid_light_moe"):
        assert "checked" in builder.text.split(f'id="f-{flag}"', 1)[1].split(">", 1)[0]
    assert json.loads(saved_field(builder.text, "builder")) == current["builder_choices"]

    # saving the edit as a revision keeps them, and so does a duplicate
    r = client.post(f"/plans/{plan_id}/revise", data=save_form(builder.text, "ranked by cost"))
    assert r.status_code == 200  # followed to the plan's page
    assert "Revision 2" in r.text and "ranked by cost" in r.text
    assert _values(_edit_state(r.text)[1]) == EXPECTED
    r = client.post(f"/plans/{plan_id}/duplicate", follow_redirects=False)
    copy = client.get(r.headers["location"])
    assert "ranked by cost" in copy.text and _values(_edit_state(copy.text)[1]) == EXPECTED

    # an API revision with a new scenario was not made in the builder: its choices go with the old scenario
    r = client.post(f"/api/v1/plans/{plan_id}/revisions", json={"scenario": small_scenario()})
    assert r.status_code in (200, 201), r.text
    assert r.json()["current"]["builder_choices"] == {}
    page = client.get(plan_url)
    assert "Saved with a fixed layout, so no layout ranking was computed." in page.text
    assert 'id="builder-choices"' not in page.text
    assert _edit_state(page.text)[1].mode == "manual"


def test_a_time_ranked_manual_plan_reopens_as_it_was(client: Any) -> None:
    state = BuilderState(deadline_days=12.5, scaling_mode="weak")
    built = client.get("/plans/new?" + state.query(), headers=HX)
    scaling = re.search(r'hx-get="/plans/new/scaling\?([^"]+)"', built.text)
    # the builder's scaling panel follows the choice
    assert scaling and "scaling_mode=weak" in scaling.group(1)
    r = client.post("/plans", data=save_form(built.text, "by hand"), follow_redirects=False)
    assert r.status_code == 303, r.text
    page = client.get(r.headers["location"])
    assert "Saved with a fixed layout" in page.text and "ranked by" not in page.text
    reopened = _edit_state(page.text)[1]
    assert (reopened.mode, reopened.rank_by, reopened.deadline_days, reopened.scaling_mode) == (
        "manual",
        "time",
        12.5,
        "weak",
    )


def test_posted_choices_are_checked_as_the_builders_inputs() -> None:
    assert choices_from({"mode": "anything", "rank_by": "cost", "budget_usd": -5, "deadline_days": "x"}) == {
        "rank_by": "cost"
    }
    assert choices_from(["mode", "planner"]) == {} and choices_from(None) == {}
    assert choices_from({"plan_offload": True, "unknown": 1}) == {"plan_offload": True}
    assert scenario_to_state(small_scenario(), {"rank_by": "cost", "mode": "planner"}).rank_by == "cost"


def test_a_damaged_builder_field_saves_the_plan_without_choices(client: Any) -> None:
    r = client.post(
        "/plans",
        data={"name": "no choices", "scenario": json.dumps(small_scenario()), "builder": "[" * 1500},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    plan_id = r.headers["location"].rsplit("/", 1)[1]
    assert client.get(f"/api/v1/plans/{plan_id}").json()["current"]["builder_choices"] == {}


def test_compare_shows_the_builder_choices_of_each_plan(client: Any) -> None:
    """Two plans saved from the builder, one ranked by cost with a deadline and one by hand: the comparison has a
    "Builder choices" section whose differing rows are flagged."""
    ids = []
    for state, name in ((CHOSEN, "by cost"), (BuilderState(deadline_days=12.5), "by hand")):
        built = client.get("/plans/new?" + state.query(), headers=HX)
        r = client.post("/plans", data=save_form(built.text, name), follow_redirects=False)
        assert r.status_code == 303, r.text
        ids.append(r.headers["location"].rsplit("/", 1)[1])
    doc = client.get("/api/v1/plans/compare", params={"ids": ids}).json()
    rows = {r["key"]: r for r in doc["rows"] if r["section"] == "Builder choices"}
    assert rows["rank_by"]["values"] == ["cost", "time"] and rows["rank_by"]["differs"]
    assert rows["rank_by"]["label"] == "Layouts ranked by"
    assert rows["deadline_days"]["values"] == [45.0, 12.5] and rows["deadline_days"]["unit"] == "days"
    assert rows["mode"]["values"] == ["planner", "manual"]
    page = client.get("/plans/compare?" + "&".join(f"ids={i}" for i in ids)).text
    assert "Builder choices" in page and "Layouts ranked by" in page
