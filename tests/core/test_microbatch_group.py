"""Micro-batches per pipeline round (Layout.microbatch_group, Megatron-core
--microbatch-group-size-per-virtual-pipeline-stage): the interleaved warm-up, and so the activations in flight, of
megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches, `(p − rank − 1)·2 + (v − 1)·g` chunk
forwards before the first backward; the ranges forward_backward_pipelining_with_interleaving accepts."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from app.core.errors import SpecError
from app.core.memory import inflight_layer_microbatches
from app.services.estimate import estimate_scenario

# Llama-3-70B (80 layers) on 64 H100: tp 4, pp 4, vp 2, dp 4; global batch 64 → m = 16 micro-batches per step
SCENARIO: dict[str, Any] = {
    "model": "Llama-3-70B",
    "cluster": {"gpu": "H100-SXM", "nodes": 8, "gpus_per_node": 8},
    "layout": {
        "tp": 4,
        "pp": 4,
        "vp": 2,
        "micro_batch": 1,
        "global_batch": 64,
        "zero": 1,
        "sequence_parallel": True,
        "recompute": "selective",
    },
    "training": {"seq_len": 4096},
}


def _with(**layout: Any) -> dict[str, Any]:
    scenario = copy.deepcopy(SCENARIO)
    scenario["layout"].update(layout)
    return scenario


def test_the_first_stage_holds_megatrons_warm_up_plus_one() -> None:
    layers = 20.0  # 80 layers over pp = 4, two chunks of 10 on each stage
    # pp 4, vp 2, rank 0: warm-up (4 − 0 − 1)·2 + (2 − 1)·g, then the chunk whose backward comes next
    assert inflight_layer_microbatches(layers, 4, 2, 16, 0) == 11 * 10  # g = pp = 4 (Megatron-core's default)
    assert inflight_layer_microbatches(layers, 4, 2, 16, 0, 4) == 11 * 10
    assert inflight_layer_microbatches(layers, 4, 2, 16, 0, 8) == 15 * 10
    assert inflight_layer_microbatches(layers, 4, 2, 16, 3, 8) == 9 * 10  # the last stage: (v − 1)·g + 1
    # never more than every chunk of every micro-batch: pp 4, vp 4, g = m = 8 → min(31, 32)
    assert inflight_layer_microbatches(40.0, 4, 4, 8, 0, 8) == 31 * 10
    # 1F1B (vp = 1) does not interleave: the group has no effect
    assert inflight_layer_microbatches(layers, 4, 1, 16, 0, 8) == inflight_layer_microbatches(
        layers, 4, 1, 16, 0
    )


def test_rows_and_single_layouts_share_the_formula() -> None:
    """The planner's columns (one row per layout) and the estimate's numbers give the same counts."""
    pp, vp, m, stage, group = (
        np.array(v) for v in ([4, 4, 8, 8], [2, 3, 2, 4], [16, 16, 32, 64], [0, 1, 0, 2], [0, 8, 16, 0])
    )
    rows = inflight_layer_microbatches(80.0 / pp, pp, vp, m, stage, group)
    single = [
        inflight_layer_microbatches(80.0 / int(p), int(p), int(v), int(n), int(s), int(g))
        for p, v, n, s, g in zip(pp, vp, m, stage, group, strict=True)
    ]
    assert rows.tolist() == single


def test_a_larger_group_keeps_more_activations_and_nothing_else_changes() -> None:
    base = estimate_scenario(SCENARIO)
    same = estimate_scenario(_with(microbatch_group=4))  # g = pp: Megatron-core's default
    assert same.memory.model_dump() == base.memory.model_dump() and same.step == base.step
    wide = estimate_scenario(_with(microbatch_group=8))
    acts = [s.breakdown_bytes["activations"] for s in base.memory.stages]
    wider = [s.breakdown_bytes["activations"] for s in wide.memory.stages]
    # stage i holds 2(p − i − 1) + (v − 1)·g + 1 chunks: 11, 9, 7, 5 at g = 4; 15, 13, 11, 9 at g = 8: every stage
    # gains (v − 1)·4 = 4 chunks' activations, of 10 layers each; the same layers on every stage hold the same per chunk
    per_chunk = acts[0] / 11
    for stage, (before, after) in enumerate(zip(acts, wider, strict=True)):
        assert after - before == pytest.approx(4 * per_chunk, rel=1e-12), stage
    assert wider[0] / acts[0] == pytest.approx(15 / 11, rel=1e-12)
    assert wide.step.total_s == base.step.total_s  # the bubble model does not take the group
    assert wide.layout["microbatch_group"] == 8 and base.layout["microbatch_group"] is None


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        ({"vp": 1, "microbatch_group": 4}, "only the interleaved schedule"),
        ({"microbatch_group": 3}, "must lie from pp (4) to the micro-batches per step (16), got 3"),
        ({"microbatch_group": 17}, "must lie from pp (4) to the micro-batches per step (16), got 17"),
        (
            {"microbatch_group": 7},
            "the last round would run 2 micro-batches (16 = 2·7 + 2), fewer than pp (4)",
        ),
    ],
)
def test_groups_megatron_refuses_are_refused(layout: dict[str, Any], reason: str) -> None:
    with pytest.raises(SpecError) as err:
        estimate_scenario(_with(**layout))
    assert [(p.field, reason in p.message) for p in err.value.problems] == [("layout.microbatch_group", True)]


def test_a_last_round_of_at_least_pp_is_accepted() -> None:
    estimate_scenario(_with(microbatch_group=6))  # 16 = 2·6 + 4: the last round runs pp = 4 micro-batches


def test_the_api_refuses_a_group_below_one(client: Any) -> None:
    response = client.post("/api/v1/estimate", json=_with(microbatch_group=0))
    assert response.status_code == 422 and "microbatch_group" in response.text
    assert client.post("/api/v1/estimate", json=_with(microbatch_group=8)).status_code == 200
