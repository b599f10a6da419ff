"""Adam moments in bf16 (Layout.optimizer_moments_dtype: Megatron-core's precision-aware optimizer,
--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16): half the optimizer states, a lighter
optimizer step, nothing else; only where Megatron-core allows it; the replay, the planner and the builder carry it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app.catalog import find_model
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_CORE, NEMO, TORCHTITAN, Framework
from app.core.layout import Layout, RunOptions
from app.validation.training_runs import BF16_MOMENTS_NOTE, Row, estimate_row, load_rows
from tests.cli_support import invoke
from tests.core.conftest import make_cluster

LAYOUT = Layout(tp=4, pp=4, vp=5, dp=4, sequence_parallel=True, zero=1, micro_batch=1, global_batch=128)


def _run(layout: Layout, fw: Framework = MEGATRON_CORE) -> Any:
    return estimate(
        find_model("Llama-3-70B"), make_cluster(), layout, 8192, options=EstimateOptions(framework=fw)
    )


@pytest.mark.parametrize("fw", [MEGATRON_CORE, NEMO])
def test_bf16_moments_halve_the_optimizer_states_and_lighten_the_step(fw: Framework) -> None:
    plain, bf16 = _run(LAYOUT, fw), _run(replace(LAYOUT, optimizer_moments_dtype="bf16"), fw)
    for s_plain, s_bf16 in zip(plain.memory.stages, bf16.memory.stages, strict=True):
        assert s_bf16.breakdown["optimizer_states"] == pytest.approx(
            s_plain.breakdown["optimizer_states"] / 2
        )
        # bf16 weights: the precision-aware optimizer keeps only the low 16 bits of each fp32 master weight
        assert s_bf16.breakdown["master_weights"] == pytest.approx(s_plain.breakdown["master_weights"] / 2)
        for key in ("weights", "gradients", "activations", "workspace"):
            assert s_bf16.breakdown[key] == pytest.approx(s_plain.breakdown[key]), key
    # the fused Adam step moves 38 B per parameter with fp32 moments and masters, 28 with bf16 moments and remainders
    assert bf16.step.breakdown["optimizer"] == pytest.approx(plain.step.breakdown["optimizer"] * 28 / 38)
    for key in ("forward_compute", "backward_compute", "dp_comm", "tp_comm", "pipeline_bubble"):
        assert bf16.step.breakdown[key] == pytest.approx(plain.step.breakdown[key]), key
    by_name = {a.name: a for a in bf16.assumptions}
    assert by_name["Adam moments"].value == 4.0
    assert by_name["bytes per parameter (weights+grads+master+Adam)"].value == pytest.approx(
        {MEGATRON_CORE.name: 12.0, NEMO.name: 10.0}[fw.name]
    )
    assert any("Adam moments in bf16" in n for n in bf16.memory.notes)


@pytest.mark.parametrize(
    ("dtype", "fp8_params", "master_bytes"),
    [("bf16", False, 2.0), ("fp8", False, 2.0), ("fp8", True, 4.0), ("fp16", False, 4.0)],
)
def test_the_master_weights_keep_their_low_bits_only_beside_bf16_weights(
    dtype: str, fp8_params: bool, master_bytes: float
) -> None:
    layout = replace(LAYOUT, dtype=dtype, optimizer_moments_dtype="bf16", fp8_param_gather=fp8_params)
    est = _run(layout)
    by_name = {a.name: a for a in est.assumptions}
    assert f"master weights at {master_bytes:g} B" in by_name["Adam moments"].source
    plain = _run(replace(layout, optimizer_moments_dtype="fp32"))
    ratio = (
        est.memory.stages[0].breakdown["master_weights"] / plain.memory.stages[0].breakdown["master_weights"]
    )
    assert ratio == pytest.approx(master_bytes / 4.0)


@pytest.mark.parametrize(
    ("layout", "fw", "message"),
    [
        (replace(LAYOUT, zero=0), MEGATRON_CORE, "need the distributed optimizer"),
        (LAYOUT, DEEPSPEED, "keeps fp32 Adam moments"),
        (
            replace(LAYOUT, tp=1, pp=1, vp=1, dp=64, sequence_parallel=False, zero=3),
            TORCHTITAN,
            "fp32 Adam moments",
        ),
    ],
)
def test_bf16_moments_are_refused_where_megatron_core_does_not_run_them(
    layout: Layout, fw: Framework, message: str
) -> None:
    with pytest.raises(SpecError) as err:
        _run(replace(layout, optimizer_moments_dtype="bf16"), fw)
    problems = [p for p in err.value.problems if p.field == "layout.optimizer_moments_dtype"]
    assert problems and any(message in p.message for p in problems), err.value.problems


def test_the_api_takes_bf16_moments_and_names_the_field_it_refuses(client: Any) -> None:
    scenario = {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "H100-SXM", "nodes": 8, "gpus_per_node": 8},
        "layout": {"tp": 4, "pp": 4, "vp": 5, "dp": 4, "sequence_parallel": True, "global_batch": 128},
        "training": {"seq_len": 8192},
    }
    plain = client.post("/api/v1/estimate", json=scenario)
    scenario["layout"]["optimizer_moments_dtype"] = "bf16"
    bf16 = client.post("/api/v1/estimate", json=scenario)
    assert plain.status_code == 200 and bf16.status_code == 200, bf16.text
    assert bf16.json()["memory"]["peak_bytes"] < plain.json()["memory"]["peak_bytes"]
    for bad_layout in ({"zero": 0}, {"optimizer_moments_dtype": "fp8"}):
        bad = client.post(
            "/api/v1/estimate", json={**scenario, "layout": {**scenario["layout"], **bad_layout}}
        )
        assert bad.status_code == 422, bad.text
        assert any(d["loc"][-1] == "optimizer_moments_dtype" for d in bad.json()["detail"]), bad.text


@pytest.mark.parametrize(
    ("notes", "expected"),
    [
        (
            "MXFP8 recipe on linear layers, BF16 optimizer states (precision-aware optimizer), FP8 param gather.",
            True,
        ),
        ("--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16", True),
        ("exp_avg_dtype = torch.bfloat16", True),
        # DeepSpeed's BF16_Optimizer keeps fp32 moments beside an fp32 gradient accumulator
        ("BF16 optimizer w/ fp32 grad accumulation (extra 4 B/param, not sharded).", False),
        ("bf16 throughout", False),
    ],
)
def test_the_replay_reads_bf16_moments_from_the_notes(notes: str, expected: bool) -> None:
    assert bool(BF16_MOMENTS_NOTE.search(notes)) is expected


def test_megatron_bridge_deepseek_v3_runs_replay_with_their_recipes_bf16_moments() -> None:
    rows = [
        r for r in load_rows("tests/data/training_runs_heldout.csv") if "DeepSeek-V3" in r.get("model_name")
    ]
    assert len(rows) >= 5
    for row in rows:
        modelled = estimate_row(row, row.get("measured_metric"))
        assert modelled.layout.optimizer_moments_dtype == "bf16"
        assert any("DeepSeek-V3 recipe" in d for d in modelled.defaults)
    # the same notes under another publisher keep fp32 moments
    other = Row(rows[0].index, {**rows[0].data, "source": "somebody's cluster log"})
    assert estimate_row(other, other.get("measured_metric")).layout.optimizer_moments_dtype == "fp32"
    # a DeepSpeed row whose notes name bf16 moments keeps them fp32 and says why
    vtrain = Row(
        1,
        {
            **rows[0].data,
            "source": "VIA-Research/vTrain",
            "model_name": "GPT",
            "notes": "precision-aware optimizer",
        },
    )
    modelled = estimate_row(vtrain, vtrain.get("measured_metric"))
    assert modelled.layout.optimizer_moments_dtype == "fp32"
    assert any("bf16 Adam moments not modelled" in d for d in modelled.defaults)


def test_the_planner_searches_with_bf16_moments_and_matches_the_scalar_estimate() -> None:
    from app.core.planner import Constraints, SearchProblem, enumerate_layouts, plan
    from app.core.planner_eval import evaluate
    from app.core.step import STEP_COMPONENTS
    from tests.core.test_planner_vectorised import _close, _layout

    model, cluster = find_model("Mixtral-8x7B"), make_cluster(nodes=4)
    space = enumerate_layouts(model, cluster, 4096, 128, Constraints(max_micro_batch=2), True)
    idx = np.nonzero(space.rows.zero >= 1)[0]
    rows = space.rows.take(np.random.default_rng(3).choice(idx, size=40, replace=False))
    opts = EstimateOptions(framework=NEMO)
    ev = evaluate(
        model, cluster, rows, 4096, 128, RunOptions("bf16", optimizer_moments_dtype="bf16"), options=opts
    )
    for j in range(len(rows)):
        layout = replace(_layout(rows, j, 128, "bf16", True), optimizer_moments_dtype="bf16")
        est = estimate(model, cluster, layout, 4096, options=opts)
        assert _close(float(ev.peak_bytes[j]), est.memory.peak_bytes), (layout, "peak")
        for key in STEP_COMPONENTS:
            assert _close(float(ev.step[key][j]), est.step.breakdown[key]), (layout, key)
    res = plan(
        SearchProblem(
            model, cluster, 4096, 128, run=RunOptions(optimizer_moments_dtype="bf16"), options=opts
        ),
        top=3,
    )
    assert res.best is not None and all(p.layout.optimizer_moments_dtype == "bf16" for p in res.top)
    assert res.rejections["bf16_moments_need_distributed_optimizer"] > 0
    assert res.enumerated_layouts == res.feasible_layouts + sum(res.rejections.values())
    again = estimate(model, cluster, res.best.layout, 4096, options=opts)
    assert again.step.total_s == pytest.approx(res.best.step_time_s, rel=1e-9)
    with pytest.raises(SpecError) as err:
        plan(
            SearchProblem(
                model,
                cluster,
                4096,
                128,
                run=RunOptions(optimizer_moments_dtype="bf16"),
                options=EstimateOptions(framework=DEEPSPEED),
            )
        )
    assert any(p.field == "optimizer_moments_dtype" for p in err.value.problems)


def test_the_builder_carries_the_moments_dtype_both_ways() -> None:
    from urllib.parse import parse_qsl

    from app.web.pages._builder import BuilderState, parse_state, scenario_to_state, state_to_scenario

    state = BuilderState(optimizer_moments_dtype="bf16", fp8_params=True, dtype="fp8", mtp_layers=1)
    parsed = parse_state(dict(parse_qsl(state.query())))
    assert (parsed.optimizer_moments_dtype, parsed.fp8_params, parsed.mtp_layers) == ("bf16", True, 1)
    scenario = state_to_scenario(parsed)
    assert scenario["layout"]["optimizer_moments_dtype"] == "bf16"
    assert scenario["layout"]["fp8_param_gather"] is True
    assert scenario["layout"]["mtp_layers"] == 1
    back = scenario_to_state(scenario)
    assert (back.optimizer_moments_dtype, back.fp8_params, back.mtp_layers) == ("bf16", True, 1)
    # the defaults stay out of the URL and the scenario
    plain = BuilderState()
    assert "optimizer_moments_dtype" not in plain.query() and "fp8_params" not in plain.query()
    assert "optimizer_moments_dtype" not in state_to_scenario(plain)["layout"]
    assert "mtp_layers" not in plain.query() and "mtp_layers" not in state_to_scenario(plain)["layout"]
    assert parse_state({"optimizer_moments_dtype": "fp8"}).errors["optimizer_moments_dtype"]


def test_the_plan_command_takes_both_precision_options_and_says_so(tmp_path: Any) -> None:
    import json

    args = ["plan", "--model", "Llama-3-70B", "--gpu", "H100-SXM", "--nodes", "8", "--seq-len", "8192"]
    res = invoke(
        [*args, "--global-batch", "128", "--dtype", "fp8", "--fp8-params", "--optimizer-moments", "bf16"]
    )
    assert res.exit_code == 0, res.output
    assert "precision: fp8, FP8 parameters, bf16 Adam moments" in res.output
    assert "fp8_params_need_sharding" in res.output
    # a scenario file's layout carries them too
    scenario = tmp_path / "s.json"
    scenario.write_text(
        json.dumps(
            {
                "model": "Llama-3-70B",
                "cluster": {"gpu": "H100-SXM", "nodes": 8},
                "layout": {"global_batch": 128, "dtype": "bf16", "optimizer_moments_dtype": "bf16"},
                "training": {"seq_len": 8192},
            }
        )
    )
    res = invoke(["plan", str(scenario), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["best"]["layout"]["optimizer_moments_dtype"] == "bf16"
    # bad input: one message naming the field, exit status 2, no traceback
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args, "--global-batch", "128", "--fp8-params"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "fp8_param_gather: FP8 parameters need the fp8 compute dtype" in proc.stderr
