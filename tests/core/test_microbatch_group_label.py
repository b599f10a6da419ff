"""The micro-batch group (Layout.microbatch_group) in the layout label and the estimate's text: shown only when
it differs from Megatron-core's default (pp micro-batches per chunk in a row) under interleaving, so that two
layouts that run differently never share a label."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.cli.commands.estimate import render_text
from app.core.layout import Layout, layout_label
from app.services.estimate import estimate_scenario
from tests.core.test_microbatch_group import SCENARIO


def _layout(**knobs: Any) -> Layout:
    base: dict[str, Any] = {"tp": 4, "pp": 4, "vp": 2, "dp": 4, "micro_batch": 1, "global_batch": 64}
    return Layout(**{**base, **knobs})


@pytest.mark.parametrize(
    ("knobs", "shown"),
    [
        ({"microbatch_group": 8}, "mbg=8"),
        ({"microbatch_group": 6}, "mbg=6"),
        ({"microbatch_group": 4}, None),  # = pp: the default, not named
        ({"microbatch_group": None}, None),
        ({"vp": 1, "microbatch_group": None}, None),
    ],
)
def test_label_names_a_group_other_than_pp(knobs: dict[str, Any], shown: str | None) -> None:
    label = layout_label(_layout(**knobs))
    if shown is None:
        assert "mbg=" not in label
    else:
        assert f"VP2 {shown} DP4" in label


def test_two_groups_get_two_labels() -> None:
    assert layout_label(_layout(microbatch_group=8)) != layout_label(_layout(microbatch_group=4))


def _text(**layout: Any) -> str:
    scenario = copy.deepcopy(SCENARIO)
    scenario["layout"].update(layout)
    return render_text(estimate_scenario(scenario))


def test_estimate_text_names_the_group() -> None:
    assert "VP2 (micro-batch group 8) DP4" in _text(microbatch_group=8)
    assert "micro-batch group" not in _text(microbatch_group=4)
    assert "micro-batch group" not in _text()
