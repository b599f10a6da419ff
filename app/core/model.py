"""Model architecture specification.

`ModelSpec` holds exactly the architecture fields needed for parameter, FLOP and memory counts.
Activation ("swiglu" / "geglu" / "gelu" / "relu") is always declared, never guessed from the FFN ratio.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

Activation = Literal["swiglu", "geglu", "gelu", "relu", "squared_relu"]
AttentionKind = Literal["mha", "gqa", "mqa", "mla"]
PositionEmbedding = Literal["rope", "learned", "alibi", "none"]
Norm = Literal["layernorm", "rmsnorm"]

GATED_ACTIVATIONS = frozenset({"swiglu", "geglu"})


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts feed-forward blocks (Mixtral, DeepSeek, Qwen-MoE)."""

    num_experts: int
    experts_per_token: int  # top-k routed experts
    expert_ffn_hidden_size: int
    num_shared_experts: int = 0
    shared_expert_ffn_hidden_size: int = 0  # 0 → same as expert_ffn_hidden_size
    first_dense_layers: int = 0  # leading layers that use a dense FFN (DeepSeek-V3: 3)
    moe_layer_frequency: int = 1  # every k-th layer (after the dense ones) is MoE


@dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2/V3, arXiv 2405.04434)."""

    q_lora_rank: int  # 0 → no query compression
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class ModelSpec:
    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    ffn_hidden_size: int  # dense FFN inner size (for gated activations: the size of each of gate/up)
    vocab_size: int
    activation: Activation
    tied_embeddings: bool = False
    head_dim: int = 0  # 0 → hidden_size // num_attention_heads
    max_seq_len: int = 4096
    position_embedding: PositionEmbedding = "rope"
    norm: Norm = "rmsnorm"
    attention_bias: bool = False  # QKV bias (Qwen2) or all linear biases (GPT-2 style)
    mlp_bias: bool = False
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    family: str = ""
    source: str = ""

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads

    @property
    def effective_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def attention_kind(self) -> AttentionKind:
        if self.mla is not None:
            return "mla"
        if self.num_kv_heads == self.num_attention_heads:
            return "mha"
        if self.num_kv_heads == 1:
            return "mqa"
        return "gqa"

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def gated_ffn(self) -> bool:
        return self.activation in GATED_ACTIVATIONS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        """Build from a plain dict (catalog row or API body); nested moe/mla may be dicts."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown model fields: {sorted(unknown)}")
        kwargs = dict(data)
        if isinstance(kwargs.get("moe"), dict):
            kwargs["moe"] = MoESpec(**kwargs["moe"])
        if isinstance(kwargs.get("mla"), dict):
            kwargs["mla"] = MLASpec(**kwargs["mla"])
        return cls(**kwargs)
