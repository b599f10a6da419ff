"""Import a Hugging Face `config.json` into a ModelSpec.

Field meanings follow the transformers configuration classes (github.com/huggingface/transformers,
src/transformers/models/<family>/configuration_<family>.py): LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config,
Qwen2MoeConfig, Qwen3Config, Qwen3MoeConfig, DeepseekV2Config, DeepseekV3Config, GPT2Config, GPTNeoXConfig.
Where a key is absent, the default of that family's configuration class applies (for example LlamaConfig
tie_word_embeddings=False, GPT2Config n_inner=None meaning 4 x n_embd).

Every problem found is reported at once as a SpecError whose field paths are the config keys ("num_hidden_layers",
"num_experts_per_tok", ...), so a user sees everything wrong with a file in one go.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.errors import Problem, ProblemCollector, SpecError
from app.core.model import MAX_MTP_LAYERS, Activation, MLASpec, ModelSpec, MoESpec

LLAMA_LIKE = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "deepseek_v2",
        "deepseek_v3",
        "gpt_oss",
    }
)
SUPPORTED_MODEL_TYPES = (*sorted(LLAMA_LIKE), "gpt2", "gpt_neox")

# Families whose MLP is gated (gate_proj * act(up_proj)): the activation name gives the gated variant.
_GATED_ACTIVATIONS: dict[str, Activation] = {
    "silu": "swiglu",
    "swish": "swiglu",
    "gelu": "geglu",
    "gelu_new": "geglu",
    "gelu_fast": "geglu",
    "gelu_pytorch_tanh": "geglu",
}
# Families with a plain two-matrix MLP (GPT-2, GPT-NeoX).
_PLAIN_ACTIVATIONS: dict[str, Activation] = {
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_fast": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "quick_gelu": "gelu",
    "relu": "relu",
}


class _Reader:
    """Reads typed values from the config, recording a problem (instead of raising) for each bad field."""

    def __init__(self, config: Mapping[str, Any], problems: ProblemCollector) -> None:
        self.config = config
        self.problems = problems

    def integer(self, key: str, default: int | None = None, minimum: int = 1, required: bool = True) -> int:
        value = self.config.get(key)
        if value is None:
            if default is not None:
                return default
            if required:
                self.problems.add(key, "missing (required)")
            return 0
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            self.problems.add(key, f"must be an integer, got {value!r}")
            return 0
        if int(value) < minimum:
            self.problems.add(key, f"must be at least {minimum}, got {value!r}")
            return 0
        return int(value)

    def optional_int(self, key: str, minimum: int = 0) -> int:
        """An integer that may be null/absent (→ 0), e.g. DeepSeek-V2-Lite's q_lora_rank."""
        if self.config.get(key) is None:
            return 0
        return self.integer(key, minimum=minimum)

    def fraction(self, *keys: str, default: float = 0.0) -> float:
        """A probability in [0, 1) under the first of `keys` present (configs renamed some keys over time)."""
        for key in keys:
            value = self.config.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                self.problems.add(key, f"must be a number in [0, 1), got {value!r}")
                return default
            return float(value)
        return default

    def boolean(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.problems.add(key, f"must be true or false, got {value!r}")
            return default
        return value

    def string(self, key: str, default: str | None = None) -> str:
        value = self.config.get(key, default)
        if value is None:
            self.problems.add(key, "missing (required)")
            return ""
        if not isinstance(value, str):
            self.problems.add(key, f"must be a string, got {value!r}")
            return ""
        return value


def model_from_hf_config(config: Mapping[str, Any], name: str) -> ModelSpec:
    """Build a ModelSpec from a parsed config.json; raises SpecError naming every missing or bad field."""
    problems = ProblemCollector()
    if not isinstance(config, Mapping):
        raise SpecError([Problem("config", f"must be a JSON object, got {type(config).__name__}")])
    if not name or not str(name).strip():
        name = str(config.get("_name_or_path") or "").strip().rstrip("/").split("/")[-1]
    problems.check(
        bool(name), "name", "give the model a name (none given and the config has no _name_or_path)"
    )

    model_type = config.get("model_type")
    if model_type is None:
        problems.add("model_type", f"missing (required); supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
        problems.raise_if_any()
    if model_type not in SUPPORTED_MODEL_TYPES:
        problems.add(
            "model_type", f"{model_type!r} is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
        problems.raise_if_any()

    read = _Reader(config, problems)
    if model_type == "gpt2":
        fields = _gpt2_fields(read)
    elif model_type == "gpt_neox":
        fields = _gpt_neox_fields(read)
    else:
        fields = _llama_like_fields(read, str(model_type))
    _check_shapes(fields, problems)
    problems.raise_if_any()
    return ModelSpec(
        name=str(name).strip(),
        family=str(model_type),
        source=f"Hugging Face config.json (model_type {model_type})",
        **fields,
    )


def _llama_like_fields(read: _Reader, model_type: str) -> dict[str, Any]:
    heads = read.integer("num_attention_heads")
    act_name = read.string("hidden_act", "silu")
    activation = _GATED_ACTIVATIONS.get(act_name)
    if act_name and activation is None:
        read.problems.add(
            "hidden_act",
            f"{act_name!r} is not a supported gated activation ({', '.join(_GATED_ACTIVATIONS)})",
        )
    fields: dict[str, Any] = {
        "num_layers": read.integer("num_hidden_layers"),
        "hidden_size": read.integer("hidden_size"),
        "num_attention_heads": heads,
        "num_kv_heads": read.integer("num_key_value_heads", default=heads or None),
        "ffn_hidden_size": read.integer("intermediate_size"),
        "vocab_size": read.integer("vocab_size"),
        "activation": activation or "swiglu",
        "tied_embeddings": read.boolean("tie_word_embeddings", False),
        "head_dim": read.optional_int("head_dim"),
        "max_seq_len": read.integer("max_position_embeddings", default=4096),
        "position_embedding": "rope",
        "norm": "rmsnorm",
        # Qwen2 / Qwen2-MoE always put a bias on the q, k and v projections (no config key says so).
        "attention_bias": model_type in ("qwen2", "qwen2_moe") or read.boolean("attention_bias", False),
        "attention_out_bias": model_type not in ("qwen2", "qwen2_moe"),
        "mlp_bias": read.boolean("mlp_bias", False),
        "attention_dropout": read.fraction("attention_dropout"),
        "mtp_layers": _mtp_layers(read),
    }
    if model_type == "mixtral":
        fields["moe"] = MoESpec(
            num_experts=read.integer("num_local_experts", default=8),
            experts_per_token=read.integer("num_experts_per_tok", default=2),
            expert_ffn_hidden_size=fields["ffn_hidden_size"],
        )
    elif model_type == "gpt_oss":
        # gpt-oss (openai/gpt-oss-120b config.json): every layer MoE, gated SwiGLU experts of intermediate_size,
        # biases on the attention projections and the experts (HF GptOssExperts gate_up_proj_bias, down_proj_bias)
        fields["mlp_bias"] = True
        fields["moe"] = MoESpec(
            num_experts=read.integer("num_local_experts"),
            experts_per_token=read.integer("num_experts_per_tok"),
            expert_ffn_hidden_size=fields["ffn_hidden_size"],
        )
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        fields["moe"] = _qwen_moe(read, model_type)
    elif model_type in ("deepseek_v2", "deepseek_v3"):
        fields["moe"] = _deepseek_moe(read)
        fields["mla"] = MLASpec(
            q_lora_rank=read.optional_int("q_lora_rank"),
            kv_lora_rank=read.integer("kv_lora_rank"),
            qk_nope_head_dim=read.integer("qk_nope_head_dim"),
            qk_rope_head_dim=read.integer("qk_rope_head_dim"),
            v_head_dim=read.integer("v_head_dim"),
        )
        if not fields["head_dim"]:
            fields["head_dim"] = fields["mla"].v_head_dim
    fields.update(_sliding_window(read, model_type, fields["num_layers"]))
    return fields


def _mtp_layers(read: _Reader) -> int:
    """Multi-token-prediction modules (ModelSpec.mtp_layers): DeepSeek-V3's config.json `num_nextn_predict_layers`
    (1; the weights ship the module as layer 61), absent = none."""
    count = read.optional_int("num_nextn_predict_layers")
    if count > MAX_MTP_LAYERS:
        read.problems.add("num_nextn_predict_layers", f"must be at most {MAX_MTP_LAYERS}, got {count}")
        return 0
    return count


def _sliding_window(read: _Reader, model_type: str, num_layers: int) -> dict[str, int]:
    """Sliding-window attention: Mistral's `sliding_window` (every layer), gpt-oss's `layer_types`
    ("sliding_attention" / "full_attention" per layer). Qwen configs carry a `sliding_window` they only use when
    `use_sliding_window` is true (its per-layer `max_window_layers` split is not modelled)."""
    window = read.config.get("sliding_window")
    if model_type.startswith("qwen"):
        if read.config.get("use_sliding_window"):
            read.problems.add("use_sliding_window", "Qwen's per-layer sliding window is not supported")
        return {}
    if window in (None, 0):
        return {}
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        read.problems.add("sliding_window", f"must be a positive integer or null, got {window!r}")
        return {}
    types = read.config.get("layer_types")
    if types is None:
        return {"sliding_window": window, "global_attention_every": 0}
    if not isinstance(types, list) or len(types) != num_layers:
        read.problems.add("layer_types", f"must list one attention type per layer ({num_layers})")
        return {}
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    if len(full) == num_layers:
        return {}
    if not full:
        return {"sliding_window": window, "global_attention_every": 0}
    k = full[0] + 1
    if full != list(range(k - 1, num_layers, k)):
        read.problems.add(
            "layer_types", "only a periodic pattern (every k-th layer full attention) is supported"
        )
        return {}
    return {"sliding_window": window, "global_attention_every": k}


def _leading_dense_layers(read: _Reader, key: str) -> int:
    """Qwen-MoE `mlp_only_layers`: only a leading block [0, 1, …, k-1] can be expressed (as first_dense_layers)."""
    layers = read.config.get(key) or []
    if not isinstance(layers, list) or not all(isinstance(i, int) for i in layers):
        read.problems.add(key, f"must be a list of layer indices, got {layers!r}")
        return 0
    if sorted(layers) != list(range(len(layers))):
        read.problems.add(key, f"only a leading run of dense layers [0..k-1] is supported, got {layers!r}")
        return 0
    return len(layers)


def _qwen_moe(read: _Reader, model_type: str) -> MoESpec:
    shared = 0
    shared_size = 0
    if model_type == "qwen2_moe":
        shared_size = read.integer("shared_expert_intermediate_size", default=0, minimum=0)
        shared = 1 if shared_size else 0
    return MoESpec(
        num_experts=read.integer("num_experts"),
        experts_per_token=read.integer("num_experts_per_tok"),
        expert_ffn_hidden_size=read.integer("moe_intermediate_size"),
        num_shared_experts=shared,
        shared_expert_ffn_hidden_size=shared_size,
        first_dense_layers=_leading_dense_layers(read, "mlp_only_layers"),
        moe_layer_frequency=read.integer("decoder_sparse_step", default=1),
    )


def _deepseek_moe(read: _Reader) -> MoESpec | None:
    if read.config.get("n_routed_experts") is None:
        return None  # a dense DeepSeek-V2 variant
    return MoESpec(
        num_experts=read.integer("n_routed_experts"),
        experts_per_token=read.integer("num_experts_per_tok"),
        expert_ffn_hidden_size=read.integer("moe_intermediate_size"),
        num_shared_experts=read.integer("n_shared_experts", default=0, minimum=0),
        first_dense_layers=read.integer("first_k_dense_replace", default=0, minimum=0),
        moe_layer_frequency=read.integer("moe_layer_freq", default=1),
    )


def _plain_activation(read: _Reader, key: str, default: str) -> Activation:
    name = read.string(key, default)
    activation = _PLAIN_ACTIVATIONS.get(name)
    if name and activation is None:
        read.problems.add(key, f"{name!r} is not a supported activation ({', '.join(_PLAIN_ACTIVATIONS)})")
    return activation or "gelu"


def _gpt2_fields(read: _Reader) -> dict[str, Any]:
    hidden = read.integer("n_embd")
    inner = read.config.get("n_inner")
    return {
        "num_layers": read.integer("n_layer"),
        "hidden_size": hidden,
        "num_attention_heads": (heads := read.integer("n_head")),
        "num_kv_heads": heads,
        "ffn_hidden_size": 4 * hidden if inner is None else read.integer("n_inner"),
        "vocab_size": read.integer("vocab_size"),
        "activation": _plain_activation(read, "activation_function", "gelu_new"),
        "tied_embeddings": read.boolean("tie_word_embeddings", True),
        "max_seq_len": read.integer("n_positions", default=1024),
        "position_embedding": "learned",
        "norm": "layernorm",
        "attention_bias": True,
        "mlp_bias": True,
        # GPT2Config defaults: resid_pdrop = attn_pdrop = 0.1
        "hidden_dropout": read.fraction("resid_pdrop", default=0.1),
        "attention_dropout": read.fraction("attn_pdrop", default=0.1),
    }


def _gpt_neox_fields(read: _Reader) -> dict[str, Any]:
    heads = read.integer("num_attention_heads")
    return {
        "num_layers": read.integer("num_hidden_layers"),
        "hidden_size": read.integer("hidden_size"),
        "num_attention_heads": heads,
        "num_kv_heads": heads,
        "ffn_hidden_size": read.integer("intermediate_size"),
        "vocab_size": read.integer("vocab_size"),
        "activation": _plain_activation(read, "hidden_act", "gelu"),
        "tied_embeddings": read.boolean("tie_word_embeddings", False),
        "max_seq_len": read.integer("max_position_embeddings", default=2048),
        "position_embedding": "rope",
        "norm": "layernorm",
        "attention_bias": read.boolean("attention_bias", True),
        "mlp_bias": True,
        # GPTNeoXConfig renamed hidden_dropout_prob / attention_probs_dropout_prob to hidden_dropout / attention_dropout
        "hidden_dropout": read.fraction("hidden_dropout", "hidden_dropout_prob"),
        "attention_dropout": read.fraction("attention_dropout", "attention_probs_dropout_prob"),
    }


def _check_shapes(fields: Mapping[str, Any], problems: ProblemCollector) -> None:
    """Cross-field consistency (only where the individual fields were readable)."""
    heads = fields.get("num_attention_heads") or 0
    kv = fields.get("num_kv_heads") or 0
    hidden = fields.get("hidden_size") or 0
    if heads and kv and heads % kv:
        problems.add("num_key_value_heads", f"{kv} does not divide num_attention_heads {heads}")
    if kv > heads > 0:
        problems.add("num_key_value_heads", f"{kv} is more than num_attention_heads {heads}")
    if heads and hidden and not fields.get("head_dim") and hidden % heads:
        problems.add(
            "num_attention_heads", f"{heads} does not divide hidden_size {hidden} and no head_dim is given"
        )
    moe = fields.get("moe")
    if moe is not None and moe.num_experts and moe.experts_per_token > moe.num_experts:
        problems.add(
            "num_experts_per_tok", f"{moe.experts_per_token} is more than the {moe.num_experts} experts"
        )
    num_layers = fields.get("num_layers") or 0
    if moe is not None and num_layers and moe.first_dense_layers > num_layers:
        problems.add(
            "first_k_dense_replace", f"{moe.first_dense_layers} is more than the {num_layers} layers"
        )
