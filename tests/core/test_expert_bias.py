"""Expert biases added outside the expert GEMMs: the element-wise traffic gpt-oss's biased experts cost a layer pass
in frameworks whose grouped GEMMs take no bias (Framework.expert_bias_bytes)."""

from __future__ import annotations

import pytest

from app import catalog
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import (
    AUTOMODEL,
    DEEPSPEED,
    EXPERT_BIAS_BYTES_AUTOMODEL,
    EXPERT_BIAS_BYTES_MEGATRON,
    MEGATRON_CORE,
    NEMO,
    NO_EXPERT_BIAS_BYTES,
    TORCHTITAN,
)
from app.core.hf_config import model_from_hf_config
from app.core.layout import Layout
from app.core.model import layer_shape
from tests.core.conftest import make_cluster


def test_the_byte_counts_follow_the_code_paths() -> None:
    # Megatron-core: fc1's bias inside Transformer Engine's GEMM, fc2's by _apply_bias in the 16-bit dtype
    assert EXPERT_BIAS_BYTES_MEGATRON == ((0.0, 0.0), (12.0, 12.0))
    assert MEGATRON_CORE.expert_bias_bytes == NEMO.expert_bias_bytes == EXPERT_BIAS_BYTES_MEGATRON
    # NeMo Automodel: both biases outside grouped_gemm, fc2's against DeepEP's fp32 top-k weights
    assert AUTOMODEL.expert_bias_bytes == EXPERT_BIAS_BYTES_AUTOMODEL == ((8.0, 2.0), (28.0, 36.0))
    assert TORCHTITAN.expert_bias_bytes == ((8.0, 2.0), (8.0, 2.0))
    assert DEEPSPEED.expert_bias_bytes == NO_EXPERT_BIAS_BYTES  # nn.Linear experts: addmm adds the bias


def test_only_biased_experts_pay() -> None:
    assert layer_shape(catalog.find_model("GPT-OSS-120B")).expert_bias
    assert layer_shape(catalog.find_model("GPT-OSS-20B")).expert_bias
    assert not layer_shape(catalog.find_model("Qwen3-30B-A3B")).expert_bias
    # a dense model's MLP biases are not expert biases (GPT-3 style: addmm adds them)
    gpt3 = catalog.find_model("GPT-3-2.7B")
    assert gpt3.mlp_bias and not layer_shape(gpt3).expert_bias


def test_a_gpt_oss_config_reads_the_expert_biases() -> None:
    config = {
        "model_type": "gpt_oss",
        "num_hidden_layers": 24,
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 2880,
        "vocab_size": 201088,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "attention_bias": True,
    }
    model = model_from_hf_config(config, name="gpt-oss-20b")
    assert model.mlp_bias and layer_shape(model).expert_bias


def _gpt_oss(fw) -> dict[str, float]:
    model = catalog.find_model("GPT-OSS-20B")
    layout = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch=2, global_batch=16, recompute="none", zero=1)
    est = estimate(model, make_cluster("H100", nodes=1), layout, 4096, options=EstimateOptions(framework=fw))
    return est.step.breakdown


@pytest.mark.parametrize("fw", [MEGATRON_CORE, AUTOMODEL])
def test_the_traffic_is_charged_per_routed_token_copy(fw) -> None:
    # GPT-OSS-20B: 24 layers, all MoE, top-4, hidden 2880, expert FFN 2880 (fc1 output 5760 wide); one micro-batch
    # of 2 x 4096 tokens per rank and 1 micro-batch per step: 8192 x 4 copies through each layer
    biased, unbiased = _gpt_oss(fw), _gpt_oss(fw.with_(expert_bias_bytes=NO_EXPERT_BIAS_BYTES))
    gpu = catalog.find_gpu("H100")
    bandwidth = gpu.hbm_bandwidth_bytes_per_s * fw.elementwise_efficiency
    (fc1_fwd, fc1_bwd), (fc2_fwd, fc2_bwd) = fw.expert_bias_bytes
    copies = 24 * 8192 * 4
    forward = copies * (fc1_fwd * 5760 + fc2_fwd * 2880) / bandwidth
    backward = copies * (fc1_bwd * 5760 + fc2_bwd * 2880) / bandwidth
    assert biased["forward_compute"] - unbiased["forward_compute"] == pytest.approx(forward, rel=1e-9)
    assert biased["backward_compute"] - unbiased["backward_compute"] == pytest.approx(backward, rel=1e-9)
    assert forward > 0 and backward > 0


def test_automodel_pays_more_than_megatron_core() -> None:
    def extra(fw) -> float:
        biased, unbiased = _gpt_oss(fw), _gpt_oss(fw.with_(expert_bias_bytes=NO_EXPERT_BIAS_BYTES))
        keys = ("forward_compute", "backward_compute")
        return sum(biased[k] - unbiased[k] for k in keys)

    # per copy: Megatron 24 B x 2880; Automodel 10 B x 5760 + 64 B x 2880
    assert extra(AUTOMODEL) / extra(MEGATRON_CORE) == pytest.approx(
        (10 * 5760 + 64 * 2880) / (24 * 2880), rel=1e-6
    )


def test_an_estimate_states_the_charge_with_its_unit() -> None:
    layout = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch=2, global_batch=16, zero=1)

    def bias_rows(name: str) -> list:
        model = catalog.find_model(name)
        est = estimate(
            model, make_cluster("H100", nodes=1), layout, 4096, options=EstimateOptions(framework=AUTOMODEL)
        )
        return [a for a in est.assumptions if a.name.startswith("expert-bias traffic")]

    (row,) = bias_rows("GPT-OSS-20B")
    assert row.value == "10 / 64" and row.unit == "B per element" and "_apply_bias" in row.source
    assert bias_rows("Qwen3-30B-A3B") == []  # experts without biases pay nothing and say nothing
