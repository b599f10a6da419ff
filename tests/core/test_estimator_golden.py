"""Golden values from the papers the estimator implements (Megatron-LM, Korthikanti 2022, Narayanan 2021)."""

from __future__ import annotations

import pytest

from app.catalog import find_model
from app.core.framework import MEGATRON_CORE
from app.core.memory import KeptActivations, bytes_per_param, layer_activation_bytes
from app.core.model import (
    ModelSpec,
    hardware_flops_per_token,
    layer_shape,
    model_flops_per_token,
    narayanan_flops_per_iteration,
    padded_vocab_size,
    param_counts,
)


def gpt(layers: int, hidden: int, heads: int, vocab: int = 51200, dropout: float = 0.1) -> ModelSpec:
    return ModelSpec(
        name=f"gpt-{layers}x{hidden}",
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=heads,
        ffn_hidden_size=4 * hidden,
        vocab_size=vocab,
        activation="gelu",
        norm="layernorm",
        position_embedding="learned",
        tied_embeddings=True,
        max_seq_len=2048,
        hidden_dropout=dropout,
        attention_dropout=dropout,
    )


def test_megatron_18_bytes_per_parameter_without_sharding() -> None:
    # Megatron-LM distrib_optimizer.md: fp16/bf16 param 2 + fp32 grad 4 + fp32 param 4 + Adam 4 + 4 = 18
    assert bytes_per_param(0, 1) == 18.0
    assert bytes_per_param(0, 64) == 18.0


@pytest.mark.parametrize("d", [1, 2, 8, 64, 1024])
def test_megatron_distributed_optimizer_6_plus_12_over_d(d: int) -> None:
    assert bytes_per_param(1, d) == pytest.approx(6 + 12 / d)


def test_zero_2_and_3_shard_gradients_then_weights() -> None:
    assert bytes_per_param(2, 8, MEGATRON_CORE) == pytest.approx(2 + 4 / 8 + 12 / 8)
    assert bytes_per_param(3, 8, MEGATRON_CORE) == pytest.approx(18 / 8)


# Korthikanti et al. 2022, Table 2 (activation memory per layer), GPT-3 175B shape, t = 8
S, B, H, A, T = 2048, 1, 12288, 96, 8
SBH = S * B * H
KORTHIKANTI_TABLE_2 = [
    ("none", False, 1, SBH * (34 + 5 * A * S / H)),
    ("none", False, T, SBH * (10 + 24 / T + 5 * A * S / (H * T))),
    ("none", True, T, SBH / T * (34 + 5 * A * S / H)),
    ("selective", False, T, SBH * (10 + 24 / T)),
    ("selective", True, T, SBH * 34 / T),
    ("full", False, T, 2 * SBH),
    ("full", True, T, 2 * SBH / T),
]


@pytest.mark.parametrize(("recompute", "sp", "tp", "expected"), KORTHIKANTI_TABLE_2)
def test_korthikanti_activation_table(recompute: str, sp: bool, tp: int, expected: float) -> None:
    shape = layer_shape(gpt(96, H, A))
    got = layer_activation_bytes(shape, S * B, S, KeptActivations(tp, sp, recompute, flash=False))
    assert got == pytest.approx(expected, rel=1e-12)


def test_flash_attention_drops_the_score_term_and_keeps_only_log_sum_exp() -> None:
    shape = layer_shape(gpt(96, H, A))
    flash = layer_activation_bytes(shape, S, S, KeptActivations(T, True, "none", flash=True))
    selective = layer_activation_bytes(shape, S, S, KeptActivations(T, True, "selective", flash=False))
    assert flash - selective == pytest.approx(4.0 * A / T * S)


def test_swiglu_gqa_activation_terms_follow_the_saved_tensors() -> None:
    # Llama-3-70B layer: Q 8192, K/V 1024 each, SwiGLU 2×28672 in, 28672 out; no dropout; tp=1, no SP
    llama = find_model("Llama-3-70B")
    shape = layer_shape(llama)
    h, f, kv = 8192, 28672, 1024
    per_token = 2 * (4 * h) + 2 * (2 * h + 2 * kv) + 2 * (2 * f + f)
    got = layer_activation_bytes(shape, 1, 8192, KeptActivations(1, False, "selective", flash=False))
    assert got == pytest.approx(per_token)


def test_narayanan_eq3_equals_hardware_flops_with_full_recompute() -> None:
    # GPT-3 175B without biases so every weight is a matmul weight, as eq. 3 assumes
    m = gpt(96, 12288, 96)
    per_token = hardware_flops_per_token(m, 2048, recompute="full", vocab_size=51200)
    eq3 = narayanan_flops_per_iteration(1536, 2048, 96, 12288, 51200)
    assert per_token * 1536 * 2048 == pytest.approx(eq3, rel=1e-3)  # biases are the 0.01 % difference


def test_korthikanti_eq7_model_flops_reproduce_the_reported_mfu() -> None:
    # Table 5: GPT-3 175B on 64 A100 with SP + selective recompute, 13.75 s/iteration, MFU 51.4 %
    m = gpt(96, 12288, 96)
    flops = model_flops_per_token(m, 2048, vocab_size=51200) * 64 * 2048
    mfu = flops / 13.75 / 64 / 312e12
    assert mfu == pytest.approx(0.514, abs=0.003)
    eq7 = 72 * 64 * 96 * 2048 * 12288**2 * (1 + 2048 / (6 * 12288) + 51200 / (12 * 12288 * 96))
    assert flops == pytest.approx(eq7, rel=1e-3)


def test_nemo_model_flops_convention_for_llama2_7b() -> None:
    # NeMo 24.07 table: 16,847 tokens/s/GPU ↔ 776 TFLOP/s/GPU → 46.06 GFLOP per token (full s² attention)
    m = find_model("Llama-2-7B")
    per_token = model_flops_per_token(m, 4096)
    assert per_token == pytest.approx(776e12 / 16847, rel=0.01)


def test_causal_counting_halves_attention_flops() -> None:
    m = gpt(24, 2048, 16)
    full = model_flops_per_token(m, 8192, "full")
    causal = model_flops_per_token(m, 8192, "causal")
    attention_full = 3 * 2 * 2 * 8192 * 2048 * 24
    assert full - causal == pytest.approx(attention_full * (1 - (8192 + 1) / 2 / 8192))


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("Llama-2-7B", 6.74, 6.74),
        ("Llama-3-70B", 70.55, 70.55),
        ("Llama-3.1-405B", 405.9, 405.9),
        ("Mixtral-8x7B", 46.70, 12.88),
    ],
)
def test_parameter_counts_match_published_sizes(name: str, total_b: float, active_b: float) -> None:
    counts = param_counts(find_model(name))
    assert counts.total / 1e9 == pytest.approx(total_b, rel=0.005)
    assert counts.active / 1e9 == pytest.approx(active_b, rel=0.005)


def test_gpt3_175b_parameters_12_l_h2_plus_embeddings() -> None:
    m = gpt(96, 12288, 96, vocab=50257)
    counts = param_counts(m)
    assert counts.total / 1e9 == pytest.approx(174.6, rel=0.003)


@pytest.mark.parametrize(
    ("vocab", "tp", "padded"), [(50257, 1, 50304), (50257, 8, 51200), (32000, 4, 32256), (128256, 8, 129024)]
)
def test_vocabulary_padding_to_128_tp(vocab: int, tp: int, padded: int) -> None:
    assert padded_vocab_size(vocab, tp) == padded


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        (
            "DeepSeek-V3",
            671.0,
            37.5,
        ),  # MLA + 256 routed experts (top-8) + 1 shared, 3 dense layers; MTP excluded
        ("Qwen3-30B-A3B", 30.5, 3.3),
        ("Mixtral-8x22B", 140.6, 39.2),
    ],
)
def test_moe_total_and_active_parameters(name: str, total_b: float, active_b: float) -> None:
    counts = param_counts(find_model(name))
    assert counts.total / 1e9 == pytest.approx(total_b, rel=0.01)
    assert counts.active / 1e9 == pytest.approx(active_b, rel=0.02)


def test_zero3_working_set_is_two_layers_or_the_live_parameter_cap() -> None:
    from app.core.memory import zero3_working_bytes

    fsdp = MEGATRON_CORE
    assert zero3_working_bytes(1e9, fsdp) == pytest.approx(2e9 * (2 + 4))
    capped = fsdp.with_(zero3_live_params=1e9)  # DeepSpeed stage3_max_live_parameters default
    assert zero3_working_bytes(5e9, capped) == pytest.approx(1e9 * 2)
    assert zero3_working_bytes(1e8, capped) == pytest.approx(2e8 * 2)
