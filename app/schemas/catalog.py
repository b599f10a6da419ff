"""Request and response bodies of the catalog: GPUs, interconnects, model architectures and the price book."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.model import MAX_MTP_LAYERS, MLASpec, ModelSpec, MoESpec
from app.schemas.fields import CatalogName, FreeText, JsonObject, SafeStr

# Upper bounds on users' input: far beyond any real model or price, low enough for every integer column and for
# the arithmetic downstream (the API bodies and the HF import share them).
MODEL_LIMITS = {
    "num_layers": 10_000,
    "hidden_size": 1_000_000,
    "num_attention_heads": 100_000,
    "num_kv_heads": 100_000,
    "ffn_hidden_size": 10_000_000,
    "vocab_size": 100_000_000,
    "head_dim": 100_000,
    "max_seq_len": 1_000_000_000,
    "num_experts": 100_000,
}
MAX_GPUS_PER_UNIT = 1_000_000
MAX_PRICE_USD = 1e12
LIMITS = MODEL_LIMITS

# request bodies: unknown fields refused, no NaN or Infinity in a float field
REQUEST_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


# --- response models -----------------------------------------------------------------------------------------


class AttentionKernelPublic(BaseModel):
    kernel: str = Field(description="flash-attention-2 | cudnn")
    forward_tflops: float = Field(
        description="micro-benchmark forward TFLOP/s, long sequence, causal, head dim 128"
    )
    backward_tflops: float = Field(description="micro-benchmark backward TFLOP/s (2.5x the forward FLOPs)")
    training_share: float = Field(description="share of the micro-benchmark speed training reaches")
    used_by: list[str] = Field(description="attention backends that run this kernel on this GPU")
    source: str


class GPUPublic(BaseModel):
    name: str
    vendor: str
    form_factor: str
    builtin: bool
    aliases: list[str]
    peak_tflops: dict[str, float] = Field(description="dense peak TFLOP/s per dtype (10^12 FLOP/s)")
    measured_matmul_tflops: dict[str, float] = Field(description="best measured GEMM TFLOP/s per dtype")
    hbm_gib: float
    hbm_bandwidth_gb_per_s: float
    scaleup_bandwidth_gb_per_s: float = Field(description="per GPU, per direction")
    tdp_w: float
    scaleup_kind: str
    default_gpus_per_node: int
    nvls: bool
    notes: str = ""
    source: str
    date: str
    compute_capability: float = Field(
        default=0.0, description="CUDA compute capability; 0 = not an NVIDIA part"
    )
    attention_kernels: list[AttentionKernelPublic] = Field(
        default_factory=list,
        description="published fused-attention micro-benchmarks of this architecture (app.core.attention)",
    )
    spec: dict[str, Any] = Field(description="GPUSpec in SI base units")


class InterconnectPublic(BaseModel):
    name: str
    kind: str
    technology: str
    generation: str
    builtin: bool
    aliases: list[str]
    bandwidth_gb_per_s: float = Field(description="per GPU (scale-up) or per NIC (scale-out), per direction")
    latency_us: float
    domain_size: int
    supports_nvls: bool
    supports_sharp: bool
    source: str
    date: str
    spec: dict[str, Any] = Field(description="InterconnectSpec in SI base units")


class ModelPublic(BaseModel):
    name: str
    family: str
    builtin: bool
    aliases: list[str]
    attention: str
    is_moe: bool
    params: int = Field(description="parameters counted from the shape (app.core.model.param_counts)")
    active_params: int = Field(
        description="parameters touched per token (MoE: the routed top-k experts only)"
    )
    published_params: float | None = None
    published_active_params: float | None = None
    source: str
    date: str
    spec: dict[str, Any] = Field(description="ModelSpec fields")


class PriceKey(BaseModel):
    """The id of a stored price-book row (the first field of every view of one)."""

    id: uuid.UUID


class PriceItem(BaseModel):
    """What a price is for and what it costs: the fields every view of a price-book row shares (the catalog's
    rows, their create body, the cost service's price book)."""

    category: SafeStr = Field(min_length=1, max_length=50, examples=["cloud_gpu"])
    item: SafeStr = Field(min_length=1, max_length=200)
    vendor: SafeStr = Field("", max_length=100)
    region: SafeStr = Field("", max_length=100)
    pricing_model: SafeStr = Field("", max_length=100, examples=["on-demand"])
    unit: SafeStr = Field("", max_length=50, examples=["GPU-hour"])
    price_usd: float = Field(ge=0, le=MAX_PRICE_USD)
    usd_per_gpu_hour: float | None = Field(None, ge=0, le=MAX_PRICE_USD)
    gpu_name: SafeStr | None = Field(None, max_length=100, description="catalog GPU name or alias")


class PriceUnits(BaseModel):
    gpus_per_unit: int | None = Field(None, ge=1, le=MAX_GPUS_PER_UNIT)


class PriceDated(BaseModel):
    """When a price was quoted, where it comes from and how sure it is: every view of a row carries them."""

    price_date: date
    source: FreeText = Field(min_length=1, max_length=2000)
    confidence: SafeStr = Field("user", max_length=50)


class PriceDetails(BaseModel):
    includes: FreeText = Field(min_length=1, max_length=500, description="what the price covers")
    notes: FreeText = Field("", max_length=2000)


class PriceOrigin(BaseModel):
    builtin: bool
    owner_id: uuid.UUID | None = Field(None, description="the user who added the row (user rows only)")


class PriceAge(BaseModel):
    """How old a row is against its category's threshold: the catalog's rows and the price book report it."""

    stale: bool = Field(
        description="older than its category's threshold (app.core.price_age; GPU cloud prices 6 months)"
    )
    age_days: int


# Pydantic orders a model's fields from its last base to its first, so each class below lists its parts last
# field first: the rows keep the key order clients have always received (id, what, how much, when, ...).
class PriceBase(PriceDetails, PriceDated, PriceUnits, PriceItem):
    """A price-book row as a user gives it (PriceCreate) and as the catalog returns it (PricePublic)."""


class PricePublic(PriceAge, PriceOrigin, PriceBase, PriceKey):
    """A price-book row of the catalog (GET /api/v1/prices)."""


# --- request models ------------------------------------------------------------------------------------------


class MoEIn(BaseModel):
    model_config = REQUEST_CONFIG
    num_experts: int = Field(ge=1, le=LIMITS["num_experts"])
    experts_per_token: int = Field(ge=1, le=LIMITS["num_experts"])
    expert_ffn_hidden_size: int = Field(ge=1, le=LIMITS["ffn_hidden_size"])
    num_shared_experts: int = Field(0, ge=0, le=LIMITS["num_experts"])
    shared_expert_ffn_hidden_size: int = Field(0, ge=0, le=LIMITS["ffn_hidden_size"])
    first_dense_layers: int = Field(0, ge=0, le=LIMITS["num_layers"])
    moe_layer_frequency: int = Field(1, ge=1, le=LIMITS["num_layers"])


class MLAIn(BaseModel):
    model_config = REQUEST_CONFIG
    q_lora_rank: int = Field(0, ge=0, le=LIMITS["hidden_size"])
    kv_lora_rank: int = Field(ge=1, le=LIMITS["hidden_size"])
    qk_nope_head_dim: int = Field(ge=1, le=LIMITS["head_dim"])
    qk_rope_head_dim: int = Field(ge=1, le=LIMITS["head_dim"])
    v_head_dim: int = Field(ge=1, le=LIMITS["head_dim"])


class ModelSpecIn(BaseModel):
    """A model architecture given inline (the fields of app.core.model.ModelSpec)."""

    model_config = REQUEST_CONFIG
    name: CatalogName
    num_layers: int = Field(ge=1, le=LIMITS["num_layers"])
    hidden_size: int = Field(ge=1, le=LIMITS["hidden_size"])
    num_attention_heads: int = Field(ge=1, le=LIMITS["num_attention_heads"])
    num_kv_heads: int | None = Field(
        None, ge=1, le=LIMITS["num_kv_heads"], description="defaults to num_attention_heads (MHA)"
    )
    ffn_hidden_size: int = Field(ge=1, le=LIMITS["ffn_hidden_size"])
    vocab_size: int = Field(ge=1, le=LIMITS["vocab_size"])
    activation: Literal["swiglu", "geglu", "gelu", "relu", "squared_relu"]
    tied_embeddings: bool = False
    head_dim: int = Field(0, ge=0, le=LIMITS["head_dim"])
    max_seq_len: int = Field(4096, ge=1, le=LIMITS["max_seq_len"])
    position_embedding: Literal["rope", "learned", "alibi", "none"] = "rope"
    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    attention_bias: bool = False
    attention_out_bias: bool = Field(
        True,
        description="with attention_bias: the output projection has a bias too (GPT-2 style; Qwen2: false)",
    )
    mlp_bias: bool = False
    moe: MoEIn | None = None
    mla: MLAIn | None = None
    sliding_window: int = Field(
        0, ge=0, le=LIMITS["max_seq_len"], description="sliding-window attention span in tokens (0 = none)"
    )
    global_attention_every: int = Field(
        0,
        ge=0,
        le=LIMITS["num_layers"],
        description="every k-th layer keeps full attention (0 = all windowed)",
    )
    hidden_dropout: float = Field(0.0, ge=0, lt=1)
    attention_dropout: float = Field(0.0, ge=0, lt=1)
    mtp_layers: int = Field(
        0,
        ge=0,
        le=MAX_MTP_LAYERS,
        description="multi-token-prediction modules trained with the model (Megatron-core --mtp-num-layers; "
        "DeepSeek-V3: 1), on the last pipeline stage",
    )
    family: SafeStr = Field("", max_length=50)
    source: FreeText = Field("", max_length=2000)

    def to_spec(self) -> ModelSpec:
        data = self.model_dump()
        data["num_kv_heads"] = self.num_kv_heads or self.num_attention_heads
        data["moe"] = MoESpec(**data["moe"]) if data["moe"] else None
        data["mla"] = MLASpec(**data["mla"]) if data["mla"] else None
        return ModelSpec(**data)


class ModelCreate(BaseModel):
    """Either an inline spec (`spec`, or its fields at the top level) or a Hugging Face `hf_config`."""

    model_config = ConfigDict(allow_inf_nan=False)
    name: CatalogName | None = Field(None, description="name for an imported hf_config")
    hf_config: JsonObject | None = Field(None, description="a Hugging Face config.json, parsed")
    spec: ModelSpecIn | None = None

    @model_validator(mode="before")
    @classmethod
    def _inline_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and "spec" not in data and "hf_config" not in data and "num_layers" in data:
            return {"spec": data}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> ModelCreate:
        if (self.hf_config is None) == (self.spec is None):
            raise ValueError("give exactly one of `spec` (inline architecture) or `hf_config`")
        return self


class PriceCreate(PriceBase):
    model_config = REQUEST_CONFIG


class PriceUpdate(BaseModel):
    """A partial edit: omitted fields keep their value. Null clears the three columns that may be empty
    (usd_per_gpu_hour, gpu_name, gpus_per_unit); the others have no null (send "" to empty a text), so null there
    is a 422."""

    model_config = REQUEST_CONFIG
    # None = not sent (model_dump(exclude_unset=True)); a null sent for these fields is refused
    category: SafeStr = Field(None, min_length=1, max_length=50)  # type: ignore[assignment]
    item: SafeStr = Field(None, min_length=1, max_length=200)  # type: ignore[assignment]
    vendor: SafeStr = Field(None, max_length=100)  # type: ignore[assignment]
    region: SafeStr = Field(None, max_length=100)  # type: ignore[assignment]
    pricing_model: SafeStr = Field(None, max_length=100)  # type: ignore[assignment]
    unit: SafeStr = Field(None, max_length=50)  # type: ignore[assignment]
    price_usd: float = Field(None, ge=0, le=MAX_PRICE_USD)  # type: ignore[assignment]
    usd_per_gpu_hour: float | None = Field(None, ge=0, le=MAX_PRICE_USD)
    gpu_name: SafeStr | None = Field(None, max_length=100)
    gpus_per_unit: int | None = Field(None, ge=1, le=MAX_GPUS_PER_UNIT)
    price_date: date = Field(None)  # type: ignore[assignment]
    source: FreeText = Field(None, min_length=1, max_length=2000)  # type: ignore[assignment]
    confidence: SafeStr = Field(None, max_length=50)  # type: ignore[assignment]
    includes: FreeText = Field(None, min_length=1, max_length=500)  # type: ignore[assignment]
    notes: FreeText = Field(None, max_length=2000)  # type: ignore[assignment]


# --- conversions (SI → display units) ------------------------------------------------------------------------


class ScorecardFigure(BaseModel):
    """One headline accuracy figure (app.validation.scorecard)."""

    key: str
    label: str
    section: str
    role: str = Field(
        description="development (the rows the constants were chosen on), held out, or all runs"
    )
    value: float | None
    n: int | None = Field(
        description="how many published rows, whole runs or groups of runs are behind the figure"
    )
    n_unit: str = Field(default="rows", description="what `n` counts: rows, runs, groups or series")
    unit: str
    target: str | None
    status: str = Field(description="met, not met, or empty where the figure has no target")


class ScorecardSummary(BaseModel):
    targets: int
    met: int
    not_met: list[str]


class Scorecard(BaseModel):
    figures: list[ScorecardFigure]
    summary: ScorecardSummary
