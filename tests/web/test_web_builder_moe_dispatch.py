"""The builder's MoE inputs (token dispatcher, EP all-to-all overlap): parsed, sent to the scenario and the size
sweep, restored from a saved scenario, refused on a dense model, and the accuracy band they select shown."""

from __future__ import annotations

import re
from typing import Any

from app.web.pages._builder import (
    BuilderState,
    parse_state,
    scenario_to_state,
    sizes_request,
    state_to_scenario,
)

HX = {"HX-Request": "true"}
# a light MoE layout: Qwen3-30B-A3B on 32 H100 at one 4K-token sequence per micro-batch (~7.6 ms per layer pass)
LIGHT = {
    "model": "Qwen3-30B-A3B",
    "nodes": 4,
    "tp": 1,
    "sp": False,
    "ep": 8,
    "micro_batch": 1,
    "global_batch": 256,
}


def test_dispatcher_and_overlap_round_trip_and_are_checked() -> None:
    state = parse_state({"moe_dispatcher": "hybridep", "moe_a2a_overlap": "1"})
    assert (state.moe_dispatcher, state.moe_a2a_overlap) == ("hybridep", True)
    assert "moe_dispatcher=hybridep" in state.query() and "moe_a2a_overlap=1" in state.query()
    default = BuilderState().query()
    assert (
        "moe_dispatcher" not in default and "moe_a2a_overlap" not in default
    )  # defaults stay out of the address
    assert (
        parse_state({"moe_dispatcher": "nccl"}).errors["moe_dispatcher"]
        == "one of alltoall, deepep, hybridep"
    )
    # the form sends a hidden 0 before the checkbox: unchecked stays off
    assert parse_state({"moe_a2a_overlap": "0"}).moe_a2a_overlap is False


def test_the_scenario_and_the_size_sweep_carry_them_and_they_come_back() -> None:
    held = BuilderState(**LIGHT, moe_dispatcher="deepep", moe_a2a_overlap=True)
    scenario = state_to_scenario(held)
    assert scenario["moe_dispatcher"] == "deepep" and scenario["moe_a2a_overlap"] is True
    back = scenario_to_state(scenario)
    assert (back.moe_dispatcher, back.moe_a2a_overlap) == ("deepep", True)
    sweep = sizes_request(held, scenario)
    assert sweep["moe_dispatcher"] == "deepep" and sweep["moe_a2a_overlap"] is True
    planner = state_to_scenario(BuilderState(**LIGHT, mode="planner", moe_dispatcher="hybridep"))
    assert planner["moe_dispatcher"] == "hybridep"
    # the defaults are not sent: a dense model's scenario stays valid
    assert "moe_dispatcher" not in state_to_scenario(BuilderState())


def test_a_dense_model_refuses_the_dispatcher_by_name(client: Any) -> None:
    page = client.get("/plans/new?" + BuilderState(moe_dispatcher="hybridep").query(), headers=HX).text
    assert re.search(r'data-field="moe_dispatcher" data-message="[^"]*dense model', page)


def test_the_band_follows_the_dispatcher(client: Any) -> None:
    notes = {}
    for dispatcher in ("alltoall", "hybridep"):
        state = BuilderState(**LIGHT, moe_dispatcher=dispatcher)
        page = client.get("/plans/new?" + state.query(), headers=HX).text
        match = re.search(r'id="accuracy-note"[^>]*>(.*?)</', page, re.S)
        assert match, dispatcher
        notes[dispatcher] = match.group(1)
    assert "host dispatch may not keep up" in notes["alltoall"]
    assert "on the HybridEP dispatcher" in notes["hybridep"] and "CUDA graphs" in notes["hybridep"]
    form = client.get("/plans/new").text
    assert (
        'name="moe_dispatcher"' in form and ">HybridEP</option>" in form and 'name="moe_a2a_overlap"' in form
    )
