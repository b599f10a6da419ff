"""Megatron-core's selective recompute modules (--recompute-modules): what each drops from memory, what it costs
in time and hardware FLOPs, how rows and scenarios name them, and the 422s for modules that cannot apply."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from app.catalog import find_model
from app.core.errors import SpecError
from app.core.estimate import estimate, module_recompute_flops_per_token
from app.core.layout import RECOMPUTE_MODULES, Layout
from app.core.memory import ACT_BYTES, KeptActivations, layer_activation_bytes
from app.core.model import layer_shape
from app.validation.training_runs import recompute_modules_from_notes
from tests.core.conftest import make_cluster

MOE_MODULES = ("moe", "moe_act", "shared_experts")


def _moe_layout(modules: tuple[str, ...], recompute: str = "selective") -> Layout:
    return Layout(
        tp=2,
        dp=32,
        ep=8,
        sequence_parallel=True,
        recompute=recompute,
        recompute_modules=modules,  # type: ignore[arg-type]
        micro_batch=1,
        global_batch=256,
    )


def test_each_module_drops_what_it_reruns_and_never_adds_memory() -> None:
    dense, moe = layer_shape(find_model("Llama-3-8B")), layer_shape(find_model("Mixtral-8x7B"))
    tokens, tp = 4096.0, 2

    def act(shape: Any, is_moe: bool, mods: tuple[str, ...]) -> float:
        return float(
            layer_activation_bytes(
                shape, tokens, 4096, KeptActivations(tp, False, "selective", True, is_moe, modules=mods)
            )
        )

    base = act(dense, False, ("core_attn",))
    h = dense.hidden
    # mlp: the FFN input and both FFN intermediates (tp-sharded) are no longer kept
    assert base - act(dense, False, ("mlp",)) == pytest.approx(
        tokens * ACT_BYTES * (h + (dense.ffn_in_width + dense.ffn_out_width) / tp)
    )
    # layernorm: the two norm outputs (QKV input and FFN input)
    assert base - act(dense, False, ("layernorm",)) == pytest.approx(tokens * ACT_BYTES * 2 * h)
    # moe_act: the experts' activation outputs, top-k copies per token
    moe_base = act(moe, True, ("core_attn",))
    assert moe_base - act(moe, True, ("moe_act",)) == pytest.approx(
        tokens * ACT_BYTES * moe.experts_per_token * moe.expert_out_width / tp
    )
    # every subset of modules keeps no more than the default, and adding a module never adds memory
    for shape, is_moe in ((dense, False), (moe, True)):
        names = [m for m in RECOMPUTE_MODULES if is_moe or m not in MOE_MODULES]
        for r in range(1, 3):
            for mods in itertools.combinations(names, r):
                assert act(shape, is_moe, mods) <= act(shape, is_moe, ()) + 1e-6
                for extra in names:
                    assert act(shape, is_moe, (*mods, extra)) <= act(shape, is_moe, mods) + 1e-6


def test_modules_cost_time_and_hardware_flops() -> None:
    model, cluster = find_model("Mixtral-8x7B"), make_cluster(nodes=8)
    plain = estimate(model, cluster, _moe_layout(()), 4096)
    act_only = estimate(model, cluster, _moe_layout(("moe_act", "layernorm")), 4096)
    whole = estimate(model, cluster, _moe_layout(("moe",)), 4096)
    # flash attention: core_attn alone re-runs nothing; elementwise modules cost little, the whole MoE layer a lot
    assert plain.step.breakdown["recompute"] == 0.0
    assert 0 < act_only.step.breakdown["recompute"] < whole.step.breakdown["recompute"]
    assert whole.step.breakdown["ep_comm"] == pytest.approx(plain.step.breakdown["ep_comm"] * 3 / 2)
    assert act_only.hardware_flops_per_token == pytest.approx(plain.hardware_flops_per_token)
    extra = module_recompute_flops_per_token(model, ("moe",))
    assert whole.hardware_flops_per_token == pytest.approx(plain.hardware_flops_per_token + extra)
    # and the memory goes the other way
    assert (
        whole.memory.most_loaded.breakdown["activations"]
        < act_only.memory.most_loaded.breakdown["activations"]
        < plain.memory.most_loaded.breakdown["activations"]
    )


def test_modules_that_cannot_apply_are_named() -> None:
    cluster = make_cluster(nodes=8)
    with pytest.raises(SpecError) as err:
        estimate(find_model("Mixtral-8x7B"), cluster, _moe_layout(("moe_act",), recompute="full"), 4096)
    assert "recompute modules apply to recompute='selective' only" in str(err.value)
    dense = Layout(tp=2, dp=32, recompute="selective", recompute_modules=("moe", "mlp"), global_batch=256)
    with pytest.raises(SpecError) as err:
        estimate(find_model("Llama-3-8B"), cluster, dense, 4096)
    assert "['moe'] need a mixture-of-experts model" in str(err.value)
    with pytest.raises(SpecError) as err:
        estimate(find_model("Llama-3-8B"), cluster, dense.with_(recompute_modules=("up_proj",)), 4096)
    assert "unknown modules ['up_proj']" in str(err.value)


def test_scenario_api_takes_modules_and_rejects_unknown_ones(client: Any) -> None:
    body = {
        "model": "Mixtral-8x7B",
        "cluster": {"gpu": "H100-SXM", "nodes": 8},
        "layout": {
            "tp": 2,
            "ep": 8,
            "sequence_parallel": True,
            "recompute": "selective",
            "recompute_modules": ["moe_act", "layernorm"],
            "global_batch": 256,
        },
        "training": {"seq_len": 4096},
    }
    ok = client.post("/api/v1/estimate", json=body)
    assert ok.status_code == 200, ok.text
    assert ok.json()["layout"]["recompute_modules"] == ["moe_act", "layernorm"]
    assert ok.json()["step"]["breakdown_s"]["recompute"] > 0
    body["layout"]["recompute_modules"] = ["attention"]
    bad = client.post("/api/v1/estimate", json=body)
    assert bad.status_code == 422 and "recompute_modules" in bad.text


def test_modules_read_from_a_rows_notes() -> None:
    assert recompute_modules_from_notes(
        "DeepEP. Recompute selective (--recompute-modules layernorm moe). MBS"
    ) == (
        "layernorm",
        "moe",
    )
    assert recompute_modules_from_notes("Recompute selective (moe_act, layernorm). HybridEP") == (
        "moe_act",
        "layernorm",
    )
    # mid-2025 Megatron-LM called MLA's up-projection module "up_proj"
    assert recompute_modules_from_notes(
        "Recompute selective: --recompute-modules mlp up_proj (Sec.1). 256"
    ) == (
        "mlp",
        "mla_up_proj",
    )
    assert recompute_modules_from_notes("recompute_modules mla_up_proj, moe_act") == (
        "mla_up_proj",
        "moe_act",
    )
    assert recompute_modules_from_notes("selective recompute, nothing else said") == ()


def test_builder_field_round_trips_and_names_bad_modules(client: Any) -> None:
    from app.web.pages._builder import BuilderState, parse_state, scenario_to_state, state_to_scenario

    state = parse_state({"recompute": "selective", "recompute_modules": "layernorm, mlp layernorm"})
    assert not state.errors and state.recompute_modules == "layernorm,mlp"
    scenario = state_to_scenario(state)
    assert scenario["layout"]["recompute_modules"] == ["layernorm", "mlp"]
    assert scenario_to_state(scenario).recompute_modules == "layernorm,mlp"  # a saved plan keeps them
    bad = parse_state({"recompute_modules": "attention"})
    assert "unknown attention" in bad.errors["recompute_modules"]
    # the page: the field is there, and dropping the MLP activations shows in the memory table
    html = client.get(f"/plans/new?{BuilderState().query()}").text
    assert 'id="f-recompute_modules"' in html
    hx = {"HX-Request": "true"}
    plain = client.get(f"/plans/new?{BuilderState().query()}", headers=hx).text
    lean = client.get(
        f"/plans/new?{BuilderState(recompute_modules='mlp,layernorm').query()}", headers=hx
    ).text

    def activations(page: str) -> float:
        row = page.split(">Activations</th>", 1)[1].split("</tr>", 1)[0]
        return float(row.split('class="num">', 1)[1].split("<", 1)[0].replace(",", ""))

    assert activations(lean) < activations(plain)
    wrong = client.get(f"/plans/new?{BuilderState(recompute_modules='moe').query()}", headers=hx).text
    assert "need a mixture-of-experts model" in wrong


def test_schema_offers_exactly_the_modelled_modules() -> None:
    from typing import get_args

    from app.schemas.scenario import LayoutIn

    (item,) = get_args(LayoutIn.model_fields["recompute_modules"].annotation)
    assert set(get_args(item)) == set(RECOMPUTE_MODULES)
