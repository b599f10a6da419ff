"""MLA's up-projection recompute (Megatron-core --recompute-modules mla_up_proj; DeepSeek-V3, arXiv 2412.19437,
Sec. 3.2.3): only the compressed latents are kept, the per-head Q, K and V are re-derived in the backward, at the
cost of the up-projection GEMMs and RoPE."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.catalog import find_model
from app.core.errors import SpecError
from app.core.estimate import estimate, module_recompute_flops_per_token
from app.core.layout import Layout, RunOptions
from app.core.memory import ACT_BYTES, KeptActivations, layer_activation_bytes
from app.core.model import layer_shape
from app.core.planner import SearchProblem, plan
from tests.core.conftest import make_cluster

DSV3 = "DeepSeek-V3"


def _layout(modules: tuple[str, ...]) -> Layout:
    return Layout(
        tp=1,
        pp=1,
        dp=128,
        ep=16,
        recompute="selective",
        recompute_modules=modules,  # type: ignore[arg-type]
        micro_batch=1,
        global_batch=256,
        dtype="fp8",
    )


def test_the_shape_carries_the_up_projections_deepseek_v3_publishes() -> None:
    shape = layer_shape(find_model(DSV3))
    # DeepSeek-V3 config.json: 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk 128 + 64 rope, v 128
    assert shape.mla_up_params == 1536 * 128 * (128 + 64) + 512 * 128 * (128 + 128)
    assert shape.mla_latent_width == 1536 + 512 + 64
    dense = layer_shape(find_model("Llama-3-8B"))
    assert dense.mla_up_params == dense.mla_latent_width == 0


def test_recompute_drops_the_per_head_qkv_and_keeps_the_latents() -> None:
    shape = layer_shape(find_model(DSV3))
    tokens, tp = 4096.0, 2

    def act(mods: tuple[str, ...]) -> float:
        return float(
            layer_activation_bytes(
                shape, tokens, 4096, KeptActivations(tp, True, "selective", True, True, modules=mods)
            )
        )

    base, up = act(("core_attn",)), act(("mla_up_proj",))
    # Q (q_width) and K, V (kv_width each) are no longer kept; the attention output stays for the projection
    assert base - up == pytest.approx(tokens * ACT_BYTES * (shape.q_width + 2 * shape.kv_width) / tp)
    # the latents are kept either way: the same bytes with and without the module
    no_latents = layer_activation_bytes(
        replace_latents(shape),
        tokens,
        4096,
        KeptActivations(tp, True, "selective", True, True, modules=("core_attn",)),
    )
    assert base - float(no_latents) == pytest.approx(tokens * ACT_BYTES * shape.mla_latent_width / tp)


def replace_latents(shape: Any) -> Any:
    from dataclasses import replace

    return replace(shape, mla_latent_width=0)


def test_recompute_costs_the_up_projections_in_time_and_hardware_flops() -> None:
    model, cluster = find_model(DSV3), make_cluster(nodes=16)
    plain = estimate(model, cluster, _layout(("core_attn",)), 4096)
    up = estimate(model, cluster, _layout(("mla_up_proj",)), 4096)
    assert plain.step.breakdown["recompute"] == 0.0  # fused attention: core_attn re-runs nothing
    # the up-projections are a small share of the layer: some recompute, well under a tenth of the forward
    assert 0 < up.step.breakdown["recompute"] < 0.1 * up.step.breakdown["forward_compute"]
    extra = module_recompute_flops_per_token(model, ("mla_up_proj",))
    assert extra == pytest.approx(model.num_layers * 2.0 * layer_shape(model).mla_up_params)
    assert up.hardware_flops_per_token == pytest.approx(plain.hardware_flops_per_token + extra)
    assert up.model_flops_per_token == plain.model_flops_per_token
    assert up.memory.most_loaded.breakdown["activations"] < plain.memory.most_loaded.breakdown["activations"]


def test_a_model_without_mla_refuses_the_module() -> None:
    cluster = make_cluster(nodes=8)
    layout = Layout(tp=2, dp=32, recompute="selective", recompute_modules=("mla_up_proj",), global_batch=256)
    with pytest.raises(SpecError) as err:
        estimate(find_model("Llama-3-8B"), cluster, layout, 4096)
    assert "['mla_up_proj'] need multi-head latent attention (MLA)" in str(err.value)


def test_api_names_the_field_for_a_model_without_mla(client: Any) -> None:
    body = {
        "model": "Llama-3-8B",
        "cluster": {"gpu": "H100-SXM", "nodes": 1},
        "layout": {
            "tp": 2,
            "recompute": "selective",
            "recompute_modules": ["mla_up_proj"],
            "global_batch": 64,
        },
        "training": {"seq_len": 4096},
    }
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422 and "recompute_modules" in r.text and "MLA" in r.text


def test_the_planner_charges_what_the_estimate_charges() -> None:
    # DeepSeek-V2-Lite: MLA without query compression (q_lora_rank 0), small enough for one node
    model, cluster = find_model("DeepSeek-V2-Lite"), make_cluster(nodes=1)
    assert layer_shape(model).mla_up_params > 0
    run = RunOptions(dtype="bf16", recompute_modules=("mla_up_proj",))
    out = plan(SearchProblem(model, cluster, 4096, 64, run=run), top=200, pareto_limit=0)
    selective = [p for p in out.top if p.layout.recompute == "selective"]
    assert selective and all(p.layout.recompute_modules == ("mla_up_proj",) for p in selective)
    for p in selective[:10]:
        single = estimate(model, cluster, p.layout, 4096)
        assert p.step_time_s == pytest.approx(float(single.step.total_s), rel=1e-9)
        assert p.memory_per_gpu_bytes == pytest.approx(float(single.memory.most_loaded.total_bytes), rel=1e-9)
        assert np.isfinite(p.mfu)
