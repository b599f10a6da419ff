"""Uneven pipeline splits: first/last stage layer counts in the layout, estimate, planner, API, builder and CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, NEMO
from app.core.hardware import ClusterSpec
from app.core.layout import (
    Layout,
    RunOptions,
    check_layout,
    even_split_layers,
    stage_layer_counts,
    stage_layers_from_pipeline_layout,
    stage_layers_label,
    uneven_split_layers,
)
from app.core.planner import Constraints, SearchProblem, enumerate_layouts, plan, uneven_end_layers
from app.core.planner_eval import evaluate
from app.core.step import STEP_COMPONENTS
from app.web.pages._builder import (
    BuilderState,
    layout_query,
    parse_state,
    scenario_to_state,
    state_to_scenario,
)
from tests.core.test_planner_vectorised import _layout
from tests.paths import DATA_DIR, ROOT


def _h100(nodes: int) -> ClusterSpec:
    return ClusterSpec(
        gpu=catalog.find_gpu("H100-SXM"), num_nodes=nodes, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )


def _llama405b_split(**changes: Any) -> Layout:
    base = dict(
        tp=8,
        pp=16,
        dp=2,
        first_stage_layers=7,
        last_stage_layers=7,
        global_batch=64,
        sequence_parallel=True,
        recompute="full",
    )
    base.update(changes)
    return Layout(**base)  # type: ignore[arg-type]


def _scenario_405b(**split: Any) -> dict[str, Any]:
    """Llama 3.1 405B on 32 nodes of 8 H100, TP 8 × PP 16, full recompute; `split` sets how the 126 layers split."""
    layout = {"tp": 8, "pp": 16, "global_batch": 64, "sequence_parallel": True, "recompute": "full", **split}
    return {
        "model": "Llama-3.1-405B",
        "cluster": {"gpu": "H100-SXM", "nodes": 32, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
        "layout": layout,
        "training": {"seq_len": 8192},
    }


def test_llama_405b_split_counts_and_label() -> None:
    # Llama 3.1 405B: 126 layers on 16 stages, the embedding and the loss a layer's slot each: 7 + 8·14 + 7
    assert even_split_layers(126, 16) == 7
    counts = stage_layer_counts(126, _llama405b_split())
    assert counts == (7,) + (8,) * 14 + (7,) and sum(counts) == 126
    assert stage_layers_label(counts) == "7 + 8 × 14 + 7"
    assert stage_layers_label(stage_layer_counts(80, Layout(pp=8))) == "10 × 8"
    # only the last stage given: the other 15 share the rest
    assert stage_layer_counts(126, Layout(pp=16, last_stage_layers=6)) == (8,) * 15 + (6,)
    assert even_split_layers(80, 8) is None  # 82 does not divide by 8


def test_megatron_pipeline_layout_string() -> None:
    # DeepSeek-V3 in the Megatron MoE model zoo: 'Et|(tt|)*30L' on pp 8 with 4 virtual stages per rank
    counts = stage_layers_from_pipeline_layout("Et|(tt|)*30L", 8)
    assert counts == (7, 8, 8, 8, 8, 8, 8, 6) and sum(counts) == 61
    assert stage_layers_from_pipeline_layout("Et*3|t*4|t*4|tL", 2) == (7, 5)
    with pytest.raises(ValueError, match="unknown symbols"):
        stage_layers_from_pipeline_layout("Ex|t", 2)
    with pytest.raises(ValueError, match="do not divide"):
        stage_layers_from_pipeline_layout("Et|t|tL", 2)


def test_layout_checks_name_the_field_and_suggest_the_split() -> None:
    model = catalog.find_model("Llama-3.1-405B")
    cluster = _h100(32)
    with pytest.raises(SpecError) as info:
        check_layout(model, cluster, _llama405b_split(first_stage_layers=None, last_stage_layers=None), 8192)
    messages = {p.field: p.message for p in info.value.problems}
    assert "first_stage_layers = last_stage_layers = 7" in messages["layout.pp"]
    cases = [
        (dict(first_stage_layers=6), "layout.pp", "must split evenly over the 14 other stages"),
        (dict(first_stage_layers=0), "layout.first_stage_layers", "integer ≥ 1"),
        (dict(pp=1, dp=32, first_stage_layers=7), "layout.pp", "need pipeline parallelism"),
        (dict(pp=2, dp=16, first_stage_layers=60, last_stage_layers=60), "layout.pp", "must add up to"),
        (dict(recompute_layers=8, first_stage_layers=7), None, None),  # 8 ≤ the deepest stage: fine
        (dict(recompute_layers=9), "layout.recompute_layers", "between 0 and the layers per stage (8)"),
    ]
    for changes, field, text in cases:
        layout = _llama405b_split(**changes)
        if field is None:
            check_layout(model, cluster, layout, 8192)
            continue
        with pytest.raises(SpecError) as bad:
            check_layout(model, cluster, layout, 8192)
        found = {p.field: p.message for p in bad.value.problems}
        assert field in found and text in found[field], found


def test_split_moves_layers_not_work() -> None:
    """Per-stage counts change where the work sits, never the total: forward compute over all stages, parameters
    and FLOPs per token equal the even split's."""
    model = catalog.find_model("Llama-3-70B")  # 80 layers
    cluster = _h100(4)
    even = Layout(tp=8, pp=4, dp=1, global_batch=32, sequence_parallel=True)
    uneven = even.with_(first_stage_layers=19, last_stage_layers=19)  # 19 + 21 + 21 + 19
    a, b = estimate(model, cluster, even, 4096), estimate(model, cluster, uneven, 4096)
    assert stage_layer_counts(80, uneven) == (19, 21, 21, 19)
    fwd_a = sum(s.forward_compute for s in a.step.stages)
    fwd_b = sum(s.forward_compute for s in b.step.stages)
    assert fwd_b == pytest.approx(fwd_a, rel=1e-12)
    assert sum(s.params for s in b.memory.stages) == pytest.approx(sum(s.params for s in a.memory.stages))
    assert b.model_flops_per_token == a.model_flops_per_token
    # a middle stage now sets the pace; the first stage holds two layers fewer
    assert b.step.bottleneck_stage in (1, 2)
    assert b.step.stages[1].total > a.step.stages[1].total
    assert b.memory.stages[0].params < a.memory.stages[0].params
    # Llama 3's LM head (128K vocabulary) costs more than a layer: 21 layers outrun 20 layers + the head
    slowest_even = max(s.total for s in a.step.stages)
    assert a.step.bottleneck_stage == 3 and max(s.total for s in b.step.stages) < slowest_even
    assert b.step.total_s < a.step.total_s
    assert sum(b.step.breakdown.values()) == pytest.approx(b.step.total_s)
    names = {x.name: x.value for x in b.assumptions}
    assert names["transformer layers per pipeline stage"] == "19 + 21 × 2 + 19"


def test_405b_on_pp16_fits_where_the_even_split_cannot_run() -> None:
    model = catalog.find_model("Llama-3.1-405B")
    est = estimate(model, _h100(32), _llama405b_split(dp=2, micro_batch=1), 8192)
    per_stage = [s.params for s in est.memory.stages]
    # the end stages hold 7 layers and the embedding or the LM head, the middle ones 8 layers
    assert per_stage[0] < per_stage[1] and per_stage[-1] < per_stage[1]
    assert est.memory.fits
    assert est.step.bottleneck_stage not in (0, 15)


@pytest.mark.parametrize(
    "name,nodes,seq,gb,fw,dtype",
    [
        ("Llama-3.1-405B", 64, 8192, 512, NEMO, "bf16"),
        ("Qwen3-30B-A3B", 10, 4096, 320, NEMO, "bf16"),  # MoE, 48 layers: pp 5 and 10 need the split
        ("Mixtral-8x7B", 17, 4096, 272, DEEPSPEED, "fp16"),  # 32 layers on 17 stages: 1 + 2·15 + 1
    ],
)
def test_vectorised_planner_equals_the_estimate_on_uneven_rows(name, nodes, seq, gb, fw, dtype) -> None:
    model = catalog.find_model(name)
    cluster = _h100(nodes)
    space = enumerate_layouts(model, cluster, seq, gb, Constraints(optimizer_offload=True), True)
    uneven = np.nonzero(space.rows.end_layers > 0)[0]
    assert uneven.size > 20
    rows = space.rows.take(np.random.default_rng(3).choice(uneven, size=30, replace=False))
    opts = EstimateOptions(framework=fw)
    ev = evaluate(model, cluster, rows, seq, gb, RunOptions(dtype), options=opts)
    for j in range(len(rows)):
        layout = _layout(rows, j, gb, dtype, True)
        assert layout.first_stage_layers is not None
        est = estimate(model, cluster, layout, seq, options=opts)  # raises if the split were invalid
        pairs = [
            (ev.peak_bytes[j], est.memory.peak_bytes),
            (ev.host_bytes[j], est.memory.host_bytes),
            (ev.step_time_s[j], est.step.total_s),
            (ev.hardware_flops_per_token[j], est.hardware_flops_per_token),
            *((ev.step[k][j], est.step.breakdown[k]) for k in STEP_COMPONENTS),
        ]
        for got, want in pairs:
            assert math.isclose(float(got), want, rel_tol=1e-9, abs_tol=1e-12), layout


def test_planner_searches_the_split_and_hands_back_a_valid_layout() -> None:
    model = catalog.find_model("Llama-3.1-405B")
    # 126 layers: the even split allows pp 1, 2, 3, 6, 7, 9 … of which a power-of-two cluster offers only 1 and 2
    assert uneven_end_layers(126, np.array([16, 8, 3, 4]), np.array([1, 1, 1, 1])).tolist() == [7, 15, 0, 31]
    result = plan(SearchProblem(model, _h100(128), 8192, 512), constraints=Constraints(pp=(16,), tp=(8,)))
    assert result.best is not None
    best = result.best.layout
    assert best.pp == 16 and best.first_stage_layers == 7 and best.last_stage_layers == 7
    est = estimate(model, _h100(128), best, 8192)
    assert est.step.total_s == pytest.approx(result.best.step_time_s, rel=1e-9)


def test_api_estimate_and_422(client: Any) -> None:
    body = _scenario_405b(first_stage_layers=7, last_stage_layers=7)
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["stage_layers"] == [7] + [8] * 14 + [7]
    assert out["layout"]["first_stage_layers"] == 7
    body["layout"]["first_stage_layers"] = 6
    bad = client.post("/api/v1/estimate", json=body)
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"][-2:] == ["layout", "pp"] and "split evenly" in bad.text
    body["layout"]["first_stage_layers"] = 0
    zero = client.post("/api/v1/estimate", json=body)
    assert zero.status_code == 422 and "first_stage_layers" in zero.text


def test_builder_round_trip_and_planner_hand_back(client: Any) -> None:
    state = BuilderState(
        model="Llama-3.1-405B",
        nodes=32,
        tp=8,
        pp=16,
        recompute="full",
        first_stage_layers=7,
        last_stage_layers=7,
    )
    query = state.query()
    assert "first_stage_layers=7" in query and "last_stage_layers=7" in query
    assert "first_stage_layers" not in BuilderState().query()  # an even split leaves the address alone
    back = parse_state(dict(pair.split("=", 1) for pair in query.split("&")))
    assert (back.first_stage_layers, back.last_stage_layers) == (7, 7)
    scenario = state_to_scenario(state)
    assert scenario["layout"]["first_stage_layers"] == 7
    assert scenario_to_state(scenario).last_stage_layers == 7
    assert "first_stage_layers=7" in layout_query(BuilderState(), {**scenario["layout"], "dtype": "bf16"})
    assert "first_stage_layers" in parse_state({"first_stage_layers": "-1"}).errors
    page = client.get("/plans/new?" + query)
    assert page.status_code == 200
    assert 'id="f-first_stage_layers"' in page.text and "7 + 8 × 14 + 7" in page.text


def test_cli_estimate_prints_the_stage_layers(tmp_path: Path) -> None:
    scenario = _scenario_405b(first_stage_layers=7, last_stage_layers=7)
    path = tmp_path / "split.json"
    env_db = {"CLUSTERPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}

    def estimate_cli() -> subprocess.CompletedProcess[str]:
        path.write_text(json.dumps(scenario))
        return subprocess.run(
            [sys.executable, "-m", "app.cli.main", "estimate", str(path)],
            cwd=ROOT,
            env={**os.environ, **env_db},
            capture_output=True,
            text=True,
            timeout=180,
        )

    run = estimate_cli()
    assert run.returncode == 0, run.stderr
    assert "stage layers: 7 + 8 × 14 + 7" in run.stdout
    scenario["layout"]["last_stage_layers"] = 9
    bad = estimate_cli()
    assert bad.returncode != 0 and "layout.pp" in bad.stderr and "Traceback" not in bad.stderr


def test_validation_models_the_partition_each_source_ran() -> None:
    from app.validation.training_runs import evaluate_row, load_rows

    rows = {r.index: r for r in load_rows(DATA_DIR / "training_runs.csv")}
    bloom = evaluate_row(rows[46])  # 70 layers on 12 stages, DeepSpeed 'type:transformer|embedding'
    assert any("first stage 5, last stage 5" in d for d in bloom.detail["defaults"])
    final = {r.index: r for r in load_rows(DATA_DIR / "training_runs_final_check.csv")}
    deepseek = evaluate_row(final[13])  # the notes state 'Et|(tt|)*30L'
    assert any("first stage 7, last stage 6" in d for d in deepseek.detail["defaults"])


def test_scenario_takes_a_megatron_pipeline_layout(client: Any) -> None:
    body = _scenario_405b(pipeline_layout="Et*7|(t*8|)*14t*7L")
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["stage_layers"] == [7] + [8] * 14 + [7]
    assert r.json()["layout"]["first_stage_layers"] == 7

    def problem(layout: dict[str, Any]) -> str:
        bad = client.post("/api/v1/estimate", json={**body, "layout": {**body["layout"], **layout}})
        assert bad.status_code == 422, bad.text
        found = {".".join(str(x) for x in d["loc"][1:]): d["msg"] for d in bad.json()["detail"]}
        assert "layout.pipeline_layout" in found, found
        return found["layout.pipeline_layout"]

    # middle stages that differ too: every stage's layers (stage_layers)
    layout = {**body["layout"], "pipeline_layout": "Et*6|t*9|(t*8|)*13t*7L"}
    uneven = client.post("/api/v1/estimate", json={**body, "layout": layout})
    assert uneven.status_code == 200, uneven.text
    assert uneven.json()["stage_layers"] == [6, 9] + [8] * 13 + [7]
    assert uneven.json()["layout"]["stage_layers"] == [6, 9] + [8] * 13 + [7]
    assert "every stage needs at least one" in problem({"pipeline_layout": "E|(t*9|)*14t*0L"})
    assert "pp·vp = 16·2" in problem({"vp": 2, "global_batch": 64})
    assert "the model has 126" in problem({"pipeline_layout": "Et*7|(t*8|)*14t*6L"})
    assert "not both" in problem({"first_stage_layers": 7})
    assert "unknown symbols" in problem({"pipeline_layout": "Ex|t"})
    assert "expands beyond" in problem({"pipeline_layout": "(t|)*1000000000"})


def test_every_stage_given_explicitly() -> None:
    model = catalog.find_model("Llama-3.1-405B")
    counts = (6, 9) + (8,) * 13 + (7,)
    layout = _llama405b_split(first_stage_layers=None, last_stage_layers=None, stage_layers=counts)
    assert stage_layer_counts(126, layout) == counts
    est = estimate(model, _h100(32), layout, 8192)
    # the 9-layer stage sets the pace; the 6-layer first stage holds the fewest parameters
    assert est.step.bottleneck_stage == 1
    assert min(range(16), key=lambda i: est.memory.stages[i].params) == 0
    names = {a.name: a.value for a in est.assumptions}
    assert names["transformer layers per pipeline stage"] == "6 + 9 + 8 × 13 + 7"
    assert Layout.from_dict({**layout.to_dict(), "stage_layers": list(counts)}) == layout
    cases = [
        (dict(stage_layers=counts[:-1]), "15 stages given but pp = 16"),
        (dict(stage_layers=(7, *counts[1:])), "the stages hold 127 layers, the model has 126"),
        (dict(stage_layers=(0, *counts[1:])), "whole number of layers ≥ 1"),
        (dict(stage_layers=counts, first_stage_layers=6), "not both"),
    ]
    for changes, text in cases:
        with pytest.raises(SpecError) as bad:
            check_layout(model, _h100(32), layout.with_(**changes), 8192)
        found = " | ".join(p.message for p in bad.value.problems if p.field == "layout.stage_layers")
        assert text in found, bad.value.problems


def test_builder_stage_layers_field(client: Any) -> None:
    counts = "6,9," + ",".join(["8"] * 13) + ",7"
    params = {"model": "Llama-3.1-405B", "nodes": "32", "tp": "8", "pp": "16", "recompute": "full"}
    state = parse_state({**params, "stage_layers": counts.replace(",", " ")})
    assert state.stage_layers == counts and not state.errors
    scenario = state_to_scenario(state)
    assert scenario["layout"]["stage_layers"][:2] == [6, 9]
    assert scenario_to_state(scenario).stage_layers == counts
    for bad in ("6,x", "0,126", "9" * 5000):
        assert "stage_layers" in parse_state({"stage_layers": bad}).errors
    page = client.get("/plans/new?" + state.query())
    assert page.status_code == 200 and "PP16" in page.text and "6 + 9 + 8 × 13 + 7" in page.text


def test_uneven_split_suggestion_is_the_most_even_that_fits() -> None:
    # symmetric when the embedding and the loss, counted as a layer each, make the stages equal
    assert uneven_split_layers(126, 8) == (15, 15)
    # DeepSeek-V3's 61 layers on 8 stages: six stages of 8 and ends of 7 and 6 (8 and 7 with the embedding and the
    # loss), the heaviest stage no heavier than any other split's
    assert uneven_split_layers(61, 8) == (7, 6)
    assert uneven_split_layers(61, 16) == (3, 2)
    assert uneven_split_layers(61, 2) is None  # two stages: only the symmetric accounting split is offered


def test_layout_errors_say_what_would_fit() -> None:
    cluster = ClusterSpec(gpu=catalog.find_gpu("H100-SXM"), num_nodes=8, gpus_per_node=8)
    deepseek = catalog.find_model("DeepSeek-V3")
    with pytest.raises(SpecError) as uneven:
        check_layout(deepseek, cluster, Layout(tp=8, pp=8, dp=1, global_batch=8), 4096)
    assert "first_stage_layers = 7, last_stage_layers = 6" in str(uneven.value)
    split = Layout(tp=8, pp=8, dp=1, global_batch=8, first_stage_layers=7, last_stage_layers=6)
    check_layout(deepseek, cluster, split, 4096)  # the suggestion fits
    llama = catalog.find_model("Llama-3-70B")
    with pytest.raises(SpecError) as interleaved:
        check_layout(llama, cluster, Layout(tp=8, pp=8, vp=3, dp=1, global_batch=8), 4096)
    assert "with pp = 8, vp may be 1, 2, 5, 10" in str(interleaved.value)
