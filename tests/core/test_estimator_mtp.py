"""Multi-token prediction (ModelSpec.mtp_layers, Megatron-core --mtp-num-layers): the modules' parameters,
activations, compute and collectives on the last pipeline stage, Megatron's FLOP count for them, the pipeline
layout's 'm', the deprecated layout.mtp_layers applied to the model, the catalog and the HF import, and the planner
equal to the scalar estimate."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app.catalog import find_gpu, find_model
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import NEMO
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, RunOptions, mtp_layers_in_pipeline_layout
from app.core.memory import mtp_params_per_gpu
from app.core.model import forward_flops_per_token, layer_shape, mtp_flops_per_token
from tests.core.conftest import make_cluster

DSV3 = find_model("DeepSeek-V3")  # the catalog's model trains one MTP module
PLAIN = replace(DSV3, mtp_layers=0)
# Megatron-Bridge's DeepSeek-V3 on 256 GB200: pp 4, vp 4, ep 64, its stated split of the 61 layers
LAYOUT = Layout(
    tp=1, pp=4, vp=4, dp=64, ep=64, zero=1, micro_batch=1, global_batch=4096, dtype="fp8",
    stage_layers=(16, 16, 16, 13),
)  # fmt: skip


def _run(layout: Layout, model: Any = DSV3) -> Any:
    return estimate(
        model,
        make_cluster("GB200", 64, gpus_per_node=4),
        layout,
        4096,
        options=EstimateOptions(framework=NEMO),
    )


def test_mtp_loads_only_the_last_stage_with_a_block_a_projection_and_a_second_head_pass() -> None:
    plain, mtp = _run(LAYOUT, PLAIN), _run(LAYOUT)
    for s_plain, s_mtp in zip(plain.step.stages[:-1], mtp.step.stages[:-1], strict=True):
        assert s_mtp.total == pytest.approx(s_plain.total)
    for m_plain, m_mtp in zip(plain.memory.stages[:-1], mtp.memory.stages[:-1], strict=True):
        assert m_mtp.total_bytes == pytest.approx(m_plain.total_bytes)
    last_plain, last_mtp = plain.step.stages[-1], mtp.step.stages[-1]
    # an average layer of 13 plus the projection and the head again: more than one layer's worth of forward
    per_layer_fwd = (last_plain.forward_compute) / 13
    assert last_mtp.forward_compute - last_plain.forward_compute > per_layer_fwd
    assert last_mtp.ep_comm == pytest.approx(last_plain.ep_comm * 14 / 13)
    # the module's parameters (one average DeepSeek-V3 layer ≈ 11 B, 1/64 of its experts here) and the embedding copy
    dense, expert = mtp_params_per_gpu(DSV3, layer_shape(DSV3), 1, 64, 4)
    assert mtp.memory.stages[-1].params - plain.memory.stages[-1].params == pytest.approx(dense + expert)
    assert dense > DSV3.vocab_size * DSV3.hidden_size  # the last stage also holds an embedding copy
    assert mtp.memory.stages[-1].breakdown["activations"] > plain.memory.stages[-1].breakdown["activations"]
    # the module costs the last stage more than two of its layers (Megatron-Bridge gives it 3 layers fewer), and the
    # step grows with it through the pipeline bubble at least
    compute_plain = last_plain.forward_compute + last_plain.backward_compute
    compute_mtp = last_mtp.forward_compute + last_mtp.backward_compute
    assert compute_mtp - compute_plain > 2 * compute_plain / 14
    assert mtp.step.total_s > plain.step.total_s


def test_mtp_flops_follow_megatrons_count_and_the_hardware_runs_the_block_too() -> None:
    h, v = DSV3.hidden_size, DSV3.vocab_size
    model_f, hardware_f = mtp_flops_per_token(DSV3, 4096)
    # megatron/training/training.py num_floating_point_operations: norms and projection, and the extra logits
    assert model_f == pytest.approx(3 * 2 * (3 * h + 2 * h * h) + 3 * 2 * h * v)
    fwd = forward_flops_per_token(DSV3, 4096)
    assert hardware_f - model_f == pytest.approx(3 * (fwd.matmul + fwd.attention) / DSV3.num_layers)
    plain, mtp = _run(LAYOUT, PLAIN), _run(LAYOUT)
    assert mtp.model_flops_per_token - plain.model_flops_per_token == pytest.approx(model_f, rel=1e-9)
    assert mtp.hardware_flops_per_token - plain.hardware_flops_per_token == pytest.approx(
        hardware_f, rel=1e-9
    )
    assert mtp_flops_per_token(PLAIN, 4096) == (0.0, 0.0)
    assert mtp_params_per_gpu(PLAIN, layer_shape(PLAIN), 1, 64, 4) == (0.0, 0.0)


def test_the_pipeline_layouts_m_sets_the_modules_and_must_sit_on_the_last_rank() -> None:
    assert mtp_layers_in_pipeline_layout("Et*4|(t*4|)*14tmL", 4) == 1
    assert mtp_layers_in_pipeline_layout("Et|(tt|)*30L", 8) == 0
    with pytest.raises(ValueError, match="last pipeline rank"):
        mtp_layers_in_pipeline_layout("Etm|(t*4|)*14tL", 4)


@pytest.mark.parametrize("bad", [9, -1, True, 1.5])
def test_the_model_checks_its_mtp_layers(bad: Any) -> None:
    with pytest.raises(SpecError) as err:
        replace(DSV3, mtp_layers=bad)
    assert [p.field for p in err.value.problems] == ["model.mtp_layers"]
    assert (
        "mtp_layers" not in Layout.__dataclass_fields__
        and "mtp_layers" not in RunOptions.__dataclass_fields__
    )


def test_the_catalog_and_the_hf_import_carry_the_modules() -> None:
    from app.core.hf_config import model_from_hf_config

    assert DSV3.mtp_layers == 1
    assert all(find_model(n).mtp_layers == 0 for n in ("Mixtral-8x7B", "Qwen3-30B-A3B", "DeepSeek-V2-Lite"))
    config = {
        "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
        "num_key_value_heads": 128, "intermediate_size": 18432, "vocab_size": 129280, "hidden_act": "silu",
        "max_position_embeddings": 163840, "n_routed_experts": 256, "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "num_nextn_predict_layers": 1,
    }  # fmt: skip
    assert model_from_hf_config(config, "dsv3").mtp_layers == 1
    assert model_from_hf_config({**config, "num_nextn_predict_layers": 0}, "dsv3").mtp_layers == 0
    with pytest.raises(SpecError) as err:
        model_from_hf_config({**config, "num_nextn_predict_layers": 9}, "dsv3")
    assert [p.field for p in err.value.problems] == ["num_nextn_predict_layers"]


def test_the_api_reads_mtp_from_the_layout_string_and_refuses_a_mismatch(client: Any) -> None:
    scenario = {
        "model": "DeepSeek-V3",
        "cluster": {"gpu": "GB200", "nodes": 64, "gpus_per_node": 4},
        "layout": {"tp": 1, "pp": 4, "vp": 4, "dp": 64, "ep": 64, "global_batch": 4096, "dtype": "fp8",
                   "pipeline_layout": "Et*4|(t*4|)*14tmL"},
        "training": {"seq_len": 4096},
        "framework": "nemo",
    }  # fmt: skip
    out = client.post("/api/v1/estimate", json=scenario)
    assert out.status_code == 200, out.text
    assert out.json()["mtp_layers"] == 1 and "mtp_layers" not in out.json()["layout"]
    scenario["layout"]["mtp_layers"] = 2
    bad = client.post("/api/v1/estimate", json=scenario)
    assert bad.status_code == 422 and "places 1 MTP layers" in bad.text
    # a layout string without 'm' trains none, as Megatron-core runs it
    scenario["layout"] = {**scenario["layout"], "pipeline_layout": "Et*4|(t*4|)*14tL", "mtp_layers": None}
    none = client.post("/api/v1/estimate", json=scenario)
    assert none.status_code == 200, none.text
    assert none.json()["mtp_layers"] == 0


def test_the_deprecated_layout_field_goes_onto_the_model(client: Any) -> None:
    mixtral = find_model("Mixtral-8x7B")
    scenario = {
        "model": "Mixtral-8x7B",
        "cluster": {"gpu": "H100-SXM", "nodes": 4},
        "layout": {
            "tp": 2,
            "pp": 2,
            "ep": 4,
            "sequence_parallel": True,
            "global_batch": 256,
            "mtp_layers": 1,
        },
        "training": {"seq_len": 4096},
    }
    old = client.post("/api/v1/estimate", json=scenario)
    assert old.status_code == 200, old.text
    inline = {**mixtral.to_dict(), "mtp_layers": 1}
    new = client.post("/api/v1/estimate", json={**scenario, "model": inline, "layout": {
        k: v for k, v in scenario["layout"].items() if k != "mtp_layers"}})  # fmt: skip
    assert new.status_code == 200, new.text
    assert old.json()["mtp_layers"] == new.json()["mtp_layers"] == 1
    assert old.json()["step"] == new.json()["step"] and old.json()["memory"] == new.json()["memory"]
    # the same count beside the model's is accepted; a different one is a 422 on the deprecated field
    same = client.post("/api/v1/estimate", json={**scenario, "model": inline})
    assert same.status_code == 200, same.text
    clash = client.post("/api/v1/estimate", json={**scenario, "model": {**inline, "mtp_layers": 2}})
    assert clash.status_code == 422
    fields = {".".join(str(x) for x in d["loc"][1:]) for d in clash.json()["detail"]}
    assert "layout.mtp_layers" in fields, clash.text
    bad = client.post("/api/v1/estimate", json={**scenario, "model": {**inline, "mtp_layers": 9}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][1:] == ["model", "mtp_layers"]


@pytest.mark.parametrize(
    ("name", "gpu_name", "nodes", "gpn", "dtype", "fp8_params", "moments"),
    [
        ("Mixtral-8x7B", "H100-SXM", 4, 8, "bf16", False, "fp32"),
        # DeepSeek-V3's shape (MLA, 3 dense layers, 256 experts) with every precision option of its recipe
        ("DeepSeek-V3", "GB200", 16, 4, "fp8", True, "bf16"),
    ],
)
def test_the_planner_matches_the_scalar_estimate_with_mtp(
    name: str, gpu_name: str, nodes: int, gpn: int, dtype: str, fp8_params: bool, moments: str
) -> None:
    from app.core.planner import Constraints, SearchProblem, enumerate_layouts, plan
    from app.core.planner_eval import evaluate
    from app.core.step import STEP_COMPONENTS
    from tests.core.test_planner_vectorised import _close, _layout

    model = find_model(name)
    cluster = ClusterSpec(
        gpu=find_gpu(gpu_name), num_nodes=nodes, gpus_per_node=gpn, fabric=find_fabric("ib-ndr-8x400")
    )
    space = enumerate_layouts(model, cluster, 4096, 128, Constraints(max_micro_batch=2), True)
    sharded = space.rows.take(np.nonzero(space.rows.zero >= 1)[0])
    rng = np.random.default_rng(7)
    deep = np.nonzero(sharded.pp >= 2)[0]
    pick = np.concatenate(
        [rng.choice(deep, size=min(30, deep.size), replace=False), rng.choice(len(sharded), 10)]
    )
    rows = sharded.take(pick)
    model = replace(model, mtp_layers=1)
    opts = EstimateOptions(framework=NEMO)
    run = RunOptions(dtype, fp8_param_gather=fp8_params, optimizer_moments_dtype=moments)
    ev = evaluate(model, cluster, rows, 4096, 128, run, options=opts)
    for j in range(len(rows)):
        layout = replace(
            _layout(rows, j, 128, dtype, True),
            fp8_param_gather=fp8_params,
            optimizer_moments_dtype=moments,  # type: ignore[arg-type]
        )
        est = estimate(model, cluster, layout, 4096, options=opts)
        assert _close(float(ev.peak_bytes[j]), est.memory.peak_bytes), (layout, "peak")
        for key in STEP_COMPONENTS:
            assert _close(float(ev.step[key][j]), est.step.breakdown[key]), (layout, key)
        assert _close(float(ev.model_flops_per_token[j]), est.model_flops_per_token), layout
    if name == "Mixtral-8x7B":
        res = plan(SearchProblem(model, cluster, 4096, 128, options=opts), top=3)
        assert res.best is not None
        again = estimate(model, cluster, res.best.layout, 4096, options=opts)
        assert again.step.total_s == pytest.approx(res.best.step_time_s, rel=1e-9)


def test_a_planned_scenario_keeps_the_deprecated_layout_field() -> None:
    from app.services.planning import _layout_dict

    best = Layout(tp=2, pp=2, dp=8, global_batch=256)
    kept = _layout_dict(best, {"tp": 1, "global_batch": 256, "mtp_layers": 1})
    assert kept["mtp_layers"] == 1 and kept["tp"] == 2
    assert "mtp_layers" not in _layout_dict(best, {"tp": 1, "global_batch": 256})
