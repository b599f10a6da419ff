"""Sliding-window attention: gpt-oss alternates 128-token windows with full attention; Mistral 7B v0.1 windows
every layer at 4,096 tokens. Fused kernels skip the key blocks outside the window."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.catalog import find_gpu, find_model
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.estimate import estimate
from app.core.hardware import ClusterSpec
from app.core.hf_config import model_from_hf_config
from app.core.layout import Layout
from app.core.model import attention_keys, forward_flops_per_token
from tests.paths import DATA_DIR

HF = DATA_DIR / "hf"


def test_mean_keys_per_query_under_a_causal_window() -> None:
    # s queries, window w: query i sees min(i + 1, w) keys
    for s, w in ((4096, 128), (8192, 4096), (100, 7)):
        exact = sum(min(i + 1, w) for i in range(s)) / s
        assert attention_keys(s, True, w) == pytest.approx(exact, rel=1e-12)
    assert attention_keys(64, True, 128) == pytest.approx(65 / 2)  # shorter than the window: plain causal
    assert attention_keys(4096, True) == pytest.approx(4097 / 2)
    assert attention_keys(4096, False, 128) == 128


def test_gpt_oss_layer_types_become_a_window_on_every_second_layer() -> None:
    model = model_from_hf_config(json.loads((HF / "gpt-oss-120b.json").read_text()), "gpt-oss-120b")
    assert (model.sliding_window, model.global_attention_every, model.windowed_layer_share) == (128, 2, 0.5)
    assert model.moe is not None and (model.moe.num_experts, model.moe.experts_per_token) == (128, 4)
    assert model.attention_bias and model.effective_head_dim == 64


def test_attention_flops_count_the_window() -> None:
    model = find_model("GPT-OSS-120B")
    full = replace(model, sliding_window=0)
    s = 8192
    fw, ff = forward_flops_per_token(model, s, "causal"), forward_flops_per_token(full, s, "causal")
    per_key = ff.attention / ((s + 1) / 2)
    expected = per_key * (0.5 * (s + 1) / 2 + 0.5 * attention_keys(s, True, 128))
    assert fw.attention == pytest.approx(expected, rel=1e-12)
    assert fw.matmul == ff.matmul and fw.logits == ff.logits


def test_windowed_layers_train_faster_at_long_context_and_the_same_below_the_window() -> None:
    cluster = ClusterSpec(
        gpu=find_gpu("H100-SXM"), num_nodes=1, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )
    model = find_model("Mistral-7B")  # window 4096 on every layer
    full = replace(model, sliding_window=0)
    layout = Layout(tp=1, pp=1, dp=8, zero=1, micro_batch=1, global_batch=8, recompute="full")
    long_w, long_f = (estimate(m, cluster, layout, 32768) for m in (model, full))
    assert long_w.step.total_s < 0.8 * long_f.step.total_s
    short_w, short_f = (estimate(m, cluster, layout, 4096) for m in (model, full))
    assert short_w.step.total_s == pytest.approx(short_f.step.total_s, rel=1e-12)


def test_unsupported_window_patterns_are_named() -> None:
    config = json.loads((HF / "gpt-oss-120b.json").read_text())
    config["layer_types"] = ["full_attention"] * 3 + ["sliding_attention"] * 33
    with pytest.raises(SpecError) as err:
        model_from_hf_config(config, "odd")
    assert [p.field for p in err.value.problems] == ["layer_types"]
    qwen = json.loads((HF / "Qwen2.5-7B.json").read_text())
    qwen["use_sliding_window"] = True
    with pytest.raises(SpecError) as err:
        model_from_hf_config(qwen, "qwen-swa")
    assert [p.field for p in err.value.problems] == ["use_sliding_window"]
