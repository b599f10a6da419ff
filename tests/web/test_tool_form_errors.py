"""The Cost and Network pages with refused inputs: each problem is named by its field's label (the one the input
shows), and the inputs keep what the user typed, as the builder does."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.web.pages.tools import COST_FIELDS, NETWORK_FIELDS, ONPREM_OVERRIDES, cost_form, network_form

HX = {"HX-Request": "true"}


def _problems(page: str) -> dict[str, str]:
    """Each problem's link text by the field it points at."""
    block = re.search(r'<div class="problems" role="alert">(.*?)</div>', page, re.S)
    assert block, page[:1500]
    return dict(re.findall(r'<a href="#f-(\w+)">([^<]*)</a>', block.group(1)))


def _input_value(page: str, name: str) -> str:
    match = re.search(rf'<input id="f-{name}"[^>]*value="([^"]*)"', page)
    assert match, f"no input {name}"
    return match.group(1)


def _label(page: str, name: str) -> str:
    match = re.search(rf'<label for="f-{name}">([^<]*?)\s*(?:<span|</label>)', page)
    assert match, f"no label for {name}"
    return match.group(1)


@pytest.mark.parametrize(
    ("url", "typed"),
    [
        (
            "/cost?utilisation=150&months=-5&pue=0.5&usd_per_kwh=abc",
            {"utilisation": "150", "months": "-5", "pue": "0.5", "usd_per_kwh": "abc"},
        ),
        ("/network?nodes=-3&gpus_per_node=1000", {"nodes": "-3", "gpus_per_node": "1000"}),
    ],
)
def test_refused_inputs_keep_the_users_values_and_are_named_by_their_labels(
    client: Any, url: str, typed: dict[str, str]
) -> None:
    r = client.get(url)
    assert r.status_code == 422
    named = _problems(r.text)
    assert set(named) == set(typed)
    for name, value in typed.items():
        assert _input_value(r.text, name) == value  # not the default
        assert named[name] == _label(r.text, name) != name  # the label beside the input, not the key
    assert "Horizon" in named.values() or "/network" in url


def test_htmx_partial_names_fields_by_label(client: Any) -> None:
    r = client.get("/cost?months=0", headers=HX)
    assert r.status_code == 200 and _problems(r.text) == {"months": "Horizon"}


def test_a_service_problem_on_an_override_goes_to_the_pages_field() -> None:
    form = cost_form({})
    assert form.field_of("onprem.server_capex_usd_per_node") == "server_usd"
    assert form.label("onprem.server_capex_usd_per_node") == "Server price"


def test_every_field_of_the_pages_has_a_label() -> None:
    assert set(ONPREM_OVERRIDES) <= set(COST_FIELDS)
    assert set(cost_form({}).values) <= set(COST_FIELDS)
    assert {"gpu", "nodes", "gpus_per_node", "fabric", "op", "min_size", "max_size"} == set(NETWORK_FIELDS)
    assert set(network_form({}).values) == set(NETWORK_FIELDS)
