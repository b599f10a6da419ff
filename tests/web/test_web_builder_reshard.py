"""The builder's ZeRO-3 re-sharding input: parsed, sent under ZeRO-3 only, restored from a saved scenario, and
shown in the estimate."""

from __future__ import annotations

from typing import Any

from app.web.pages._builder import BuilderState, parse_state, scenario_to_state, state_to_scenario

HX = {"HX-Request": "true"}


def test_reshard_round_trips_and_is_checked() -> None:
    state = parse_state({"zero": "3", "reshard_after": "step"})
    assert state.reshard_after == "step" and "reshard_after=step" in state.query()
    assert "reshard_after" not in BuilderState().query()  # the default stays out of the address bar
    assert parse_state({"reshard_after": "never"}).errors["reshard_after"] == "one of forward, backward, step"


def test_reshard_is_sent_under_zero3_only_and_comes_back() -> None:
    held = BuilderState(zero=3, reshard_after="backward")
    scenario = state_to_scenario(held)
    assert scenario["layout"]["reshard_after"] == "backward"
    assert scenario_to_state(scenario).reshard_after == "backward"
    # switching to ZeRO-1 does not carry a setting only ZeRO-3 accepts
    assert "reshard_after" not in state_to_scenario(BuilderState(zero=1, reshard_after="backward"))["layout"]


def test_the_estimate_names_the_kept_parameters(client: Any) -> None:
    state = BuilderState(model="Llama-3-8B", nodes=1, tp=1, pp=1, sp=False, zero=3, reshard_after="backward")
    page = client.get("/plans/new?" + state.query(), headers=HX).text
    assert "ZeRO-3 parameters re-sharded after" in page
    form = client.get("/plans/new").text
    assert 'name="reshard_after"' in form and "step (kept across micro-batches)" in form
