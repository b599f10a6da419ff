"""Hugging Face config.json import: real published configs as fixtures, published parameter counts, errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import app.catalog as catalog
from app.core.errors import SpecError
from app.core.hf_config import model_from_hf_config
from app.core.model import param_counts
from tests.paths import DATA_DIR

HF_DIR = DATA_DIR / "hf"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_DIR / f"{name}.json").read_text())
    return data


# fixture → (catalog entry it must equal, published total parameters, published active parameters or None)
FIXTURES = {
    "Llama-3.1-8B": ("Llama-3.1-8B", 8.030e9, None),
    "Mistral-7B-v0.1": ("Mistral-7B", 7.242e9, None),
    "Mixtral-8x7B-v0.1": ("Mixtral-8x7B", 46.70e9, 12.9e9),
    "Qwen2.5-7B": ("Qwen2.5-7B", 7.61e9, None),
    "Qwen3-8B": ("Qwen3-8B", 8.2e9, None),
    "Qwen3-30B-A3B": ("Qwen3-30B-A3B", 30.5e9, 3.3e9),
    "DeepSeek-V3": ("DeepSeek-V3", 671e9, 37e9),
    "gpt2": ("GPT-2", 124.44e6, None),
    "gpt-neox-20b": ("GPT-NeoX-20B", 20.55e9, None),
    # the model card's 5.1B active leaves out the input embedding: checked in test_catalog_data
    "gpt-oss-120b": ("GPT-OSS-120B", 116.8e9, None),
}


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_import_matches_the_catalog_entry(fixture: str) -> None:
    catalog_name, _, _ = FIXTURES[fixture]
    imported = model_from_hf_config(load(fixture), catalog_name)
    expected = catalog.find_model(catalog_name)
    skip = {"source", "family"}
    assert {k: v for k, v in imported.to_dict().items() if k not in skip} == {
        k: v for k, v in expected.to_dict().items() if k not in skip
    }
    assert imported.family == load(fixture)["model_type"]


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_import_gives_the_published_parameter_count(fixture: str) -> None:
    _, total, active = FIXTURES[fixture]
    counts = param_counts(model_from_hf_config(load(fixture), fixture))
    assert counts.total == pytest.approx(total, rel=0.01)
    if active is not None:
        # MoE active counts are published to two significant figures
        assert counts.active == pytest.approx(active, rel=0.02)


def test_llama_fields() -> None:
    m = model_from_hf_config(load("Llama-3.1-8B"), "llama")
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads) == (32, 4096, 32, 8)
    assert (m.ffn_hidden_size, m.vocab_size, m.max_seq_len) == (14336, 128256, 131072)
    assert m.activation == "swiglu" and not m.tied_embeddings and m.attention_kind == "gqa"
    assert m.norm == "rmsnorm" and m.position_embedding == "rope" and m.moe is None


def test_moe_fields() -> None:
    mixtral = model_from_hf_config(load("Mixtral-8x7B-v0.1"), "mixtral")
    assert mixtral.moe is not None
    assert (mixtral.moe.num_experts, mixtral.moe.experts_per_token, mixtral.moe.expert_ffn_hidden_size) == (
        8,
        2,
        14336,
    )
    qwen = model_from_hf_config(load("Qwen3-30B-A3B"), "qwen")
    assert qwen.moe is not None and qwen.head_dim == 128
    assert (qwen.moe.num_experts, qwen.moe.experts_per_token, qwen.moe.expert_ffn_hidden_size) == (
        128,
        8,
        768,
    )
    assert qwen.moe.first_dense_layers == 0 and qwen.moe.moe_layer_frequency == 1


def test_deepseek_mla_and_shared_experts() -> None:
    ds = model_from_hf_config(load("DeepSeek-V3"), "ds")
    assert ds.moe is not None and ds.mla is not None
    assert (ds.moe.num_shared_experts, ds.moe.first_dense_layers) == (1, 3)
    assert (ds.mla.q_lora_rank, ds.mla.kv_lora_rank, ds.mla.qk_nope_head_dim, ds.mla.v_head_dim) == (
        1536,
        512,
        128,
        128,
    )
    lite = load("DeepSeek-V3") | {"model_type": "deepseek_v2", "q_lora_rank": None}
    assert model_from_hf_config(lite, "lite").mla.q_lora_rank == 0  # type: ignore[union-attr]


def test_gpt2_and_neox_are_plain_gelu() -> None:
    gpt2 = model_from_hf_config(load("gpt2"), "gpt2")
    assert gpt2.activation == "gelu" and gpt2.tied_embeddings and gpt2.ffn_hidden_size == 4 * 768
    assert gpt2.position_embedding == "learned" and gpt2.norm == "layernorm" and gpt2.attention_bias
    neox = model_from_hf_config(load("gpt-neox-20b"), "neox")
    assert neox.activation == "gelu" and not neox.tied_embeddings and neox.num_kv_heads == 64
    # dropout: GPT-2 trains with resid_pdrop = attn_pdrop = 0.1; NeoX-20B with none
    assert (gpt2.hidden_dropout, gpt2.attention_dropout) == (0.1, 0.1)
    assert (neox.hidden_dropout, neox.attention_dropout) == (0.0, 0.0)
    with pytest.raises(SpecError) as err:
        model_from_hf_config(load("gpt2") | {"attn_pdrop": 1.5}, "x")
    assert err.value.problems[0].field == "attn_pdrop"


def test_qwen2_has_qkv_bias_and_activation_is_read() -> None:
    assert model_from_hf_config(load("Qwen2.5-7B"), "q").attention_bias
    gemma_like = load("Llama-3.1-8B") | {"hidden_act": "gelu_pytorch_tanh"}
    assert model_from_hf_config(gemma_like, "g").activation == "geglu"


def test_name_falls_back_to_name_or_path() -> None:
    config = load("gpt2") | {"_name_or_path": "openai-community/gpt2"}
    assert model_from_hf_config(config, "").name == "gpt2"


def test_missing_fields_are_all_named() -> None:
    config = load("Llama-3.1-8B")
    for key in ("num_hidden_layers", "hidden_size", "vocab_size"):
        del config[key]
    with pytest.raises(SpecError) as err:
        model_from_hf_config(config, "broken")
    fields = {p.field for p in err.value.problems}
    assert fields == {"num_hidden_layers", "hidden_size", "vocab_size"}
    assert all("missing" in p.message for p in err.value.problems)


def test_bad_values_are_named_with_the_reason() -> None:
    config = load("Mixtral-8x7B-v0.1") | {
        "hidden_size": "4096",
        "num_key_value_heads": 7,
        "num_experts_per_tok": 9,
        "tie_word_embeddings": "no",
        "hidden_act": "tanh",
    }
    with pytest.raises(SpecError) as err:
        model_from_hf_config(config, "broken")
    problems = {p.field: p.message for p in err.value.problems}
    assert "integer" in problems["hidden_size"]
    assert "does not divide" in problems["num_key_value_heads"]
    assert "more than the 8 experts" in problems["num_experts_per_tok"]
    assert "true or false" in problems["tie_word_embeddings"]
    assert "tanh" in problems["hidden_act"]


@pytest.mark.parametrize(
    ("config", "field", "text"),
    [
        ({}, "model_type", "missing"),
        ({"model_type": "t5"}, "model_type", "not supported"),
        ({"model_type": "qwen3_moe", "mlp_only_layers": [3, 7]}, "mlp_only_layers", "leading"),
        ({"model_type": "llama", "num_hidden_layers": 0}, "num_hidden_layers", "at least 1"),
        ({"model_type": "llama", "num_hidden_layers": 2.5}, "num_hidden_layers", "integer"),
        ({"model_type": "gpt2", "n_embd": None}, "n_embd", "missing"),
    ],
)
def test_malformed_configs(config: dict[str, Any], field: str, text: str) -> None:
    base: dict[str, Any] = {}
    if config.get("model_type") == "qwen3_moe":
        base = load("Qwen3-30B-A3B")
    elif config.get("model_type") == "gpt2":
        base = load("gpt2")
    elif config.get("model_type") == "llama":
        base = load("Llama-3.1-8B")
    with pytest.raises(SpecError) as err:
        model_from_hf_config(base | config, "x")
    problem = next(p for p in err.value.problems if p.field == field)
    assert text in problem.message


def test_not_an_object() -> None:
    with pytest.raises(SpecError) as err:
        model_from_hf_config([1, 2], "x")  # type: ignore[arg-type]
    assert err.value.problems[0].field == "config"


def test_input_is_not_modified() -> None:
    config = load("DeepSeek-V3")
    before = copy.deepcopy(config)
    model_from_hf_config(config, "ds")
    assert config == before


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(1, 200),
    heads=st.sampled_from([8, 16, 32, 64, 128]),
    group=st.sampled_from([1, 2, 4, 8]),
    head_dim=st.sampled_from([64, 128]),
    ffn=st.integers(1, 100_000),
    vocab=st.integers(1, 300_000),
    tied=st.booleans(),
    model_type=st.sampled_from(["llama", "mistral", "qwen2", "qwen3"]),
)
def test_llama_family_fields_round_trip(
    layers: int, heads: int, group: int, head_dim: int, ffn: int, vocab: int, tied: bool, model_type: str
) -> None:
    kv = max(1, heads // group)
    config = {
        "model_type": model_type,
        "num_hidden_layers": layers,
        "hidden_size": heads * head_dim,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
    }
    m = model_from_hf_config(config, "random")
    assert (m.num_layers, m.num_attention_heads, m.num_kv_heads, m.ffn_hidden_size) == (
        layers,
        heads,
        kv,
        ffn,
    )
    assert (m.vocab_size, m.tied_embeddings, m.activation) == (vocab, tied, "swiglu")
    assert m.effective_head_dim == head_dim
    # untying adds exactly one vocab × hidden output matrix
    untied = model_from_hf_config(config | {"tie_word_embeddings": False}, "u")
    tied_m = model_from_hf_config(config | {"tie_word_embeddings": True}, "t")
    assert param_counts(untied).total - param_counts(tied_m).total == vocab * heads * head_dim


def test_qwen2_moe_shared_expert_and_sparse_step() -> None:
    # Qwen2-MoE keys on a Qwen3-MoE base: one shared expert of its own size, MoE on every second layer
    config = load("Qwen3-30B-A3B") | {
        "model_type": "qwen2_moe",
        "shared_expert_intermediate_size": 5632,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [0, 1],
    }
    m = model_from_hf_config(config, "qwen2-moe")
    assert m.moe is not None and m.attention_bias  # Qwen2 family: QKV bias
    assert (m.moe.num_shared_experts, m.moe.shared_expert_ffn_hidden_size) == (1, 5632)
    assert (m.moe.moe_layer_frequency, m.moe.first_dense_layers) == (2, 2)
