"""Model architecture specification.

`ModelSpec` holds exactly the architecture fields needed for parameter, FLOP and memory counts.
Activation ("swiglu" / "geglu" / "gelu" / "relu") is always declared, never guessed from the FFN ratio.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, overload

import numpy as np

from app.core.errors import Problem, SpecError
from app.core.num import Num

Activation = Literal["swiglu", "geglu", "gelu", "relu", "squared_relu"]
AttentionKind = Literal["mha", "gqa", "mqa", "mla"]
PositionEmbedding = Literal["rope", "learned", "alibi", "none"]
Norm = Literal["layernorm", "rmsnorm"]

GATED_ACTIVATIONS = frozenset({"swiglu", "geglu"})
MAX_MTP_LAYERS = (
    8  # ModelSpec.mtp_layers: DeepSeek-V3 trains 1; Megatron-core runs any count, 8 bounds the input
)


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
    # with attention_bias, whether the output projection has one too: GPT-2/3, BLOOM and gpt-oss bias all four
    # projections; Qwen2 only q, k and v (HF Qwen2Attention: o_proj bias=False)
    attention_out_bias: bool = True
    mlp_bias: bool = False  # FFN biases: the dense MLP's, or each routed expert's in a MoE model (gpt-oss)
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    # sliding-window (local) attention: each query sees at most `sliding_window` keys (0 = none); with
    # `global_attention_every` = k every k-th layer keeps full attention (gpt-oss alternates: 2; Gemma 3: 6),
    # 0 = every layer is windowed
    sliding_window: int = 0
    global_attention_every: int = 0
    hidden_dropout: float = 0.0  # GPT-2/3-era Megatron runs used 0.1; Llama-era models 0.0
    attention_dropout: float = 0.0
    # multi-token-prediction modules trained with the model (Megatron-core TransformerConfig.mtp_num_layers,
    # `--mtp-num-layers`; HF config.json `num_nextn_predict_layers`): DeepSeek-V3 trains one (arXiv 2412.19437
    # Sec. 2.2). They run on the last pipeline stage after its transformer layers: per module a 2h → h projection,
    # one transformer block (costed as the model's average layer) and a second pass through the shared LM head and
    # loss (app.core.memory mtp_params_per_gpu, mtp_flops_per_token below); 0 = none
    mtp_layers: int = 0
    family: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        value = self.mtp_layers
        if not (
            isinstance(value, int | np.integer)
            and not isinstance(value, bool)
            and 0 <= value <= MAX_MTP_LAYERS
        ):
            raise SpecError(
                [
                    Problem(
                        "model.mtp_layers",
                        f"must be a whole number of multi-token-prediction modules from 0 to {MAX_MTP_LAYERS}, "
                        f"got {value!r}",
                    )
                ]
            )

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
    def windowed_layer_share(self) -> float:
        """Share of the layers with sliding-window attention."""
        if self.sliding_window <= 0:
            return 0.0
        k = self.global_attention_every
        if k <= 0:
            return 1.0
        return (self.num_layers - self.num_layers // k) / self.num_layers

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


# the sizes every model needs as positive integers
MODEL_SIZE_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "ffn_hidden_size",
    "vocab_size",
)


def size_problems(model: ModelSpec, prefix: str = "") -> list[Problem]:
    """A problem for each of the model's sizes that is not a positive integer, its field under `prefix`."""
    return [
        Problem(f"{prefix}{name}", f"must be a positive integer, got {value!r}")
        for name in MODEL_SIZE_FIELDS
        if not isinstance(value := getattr(model, name), int) or value < 1
    ]


# ---------------------------------------------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------------------------------------------

VOCAB_PAD_MULTIPLE = 128  # Megatron-LM --make-vocab-size-divisible-by default (megatron/training/tokenizer)


@overload
def padded_vocab_size(vocab_size: int, tp: int = 1, multiple: int = VOCAB_PAD_MULTIPLE) -> int: ...
@overload
def padded_vocab_size(vocab_size: int, tp: Num, multiple: int = VOCAB_PAD_MULTIPLE) -> Num: ...
def padded_vocab_size(vocab_size: int, tp: Num = 1, multiple: int = VOCAB_PAD_MULTIPLE) -> Num:
    """Vocabulary padded to a multiple of `multiple`·tp, as Megatron-LM does (`_vocab_size_with_padding`).

    Works on numpy arrays of `tp` too, one value per layout (a ceil-divide: exact for whole numbers in float64).
    """
    step = multiple * tp
    return -(-vocab_size // step) * step


@dataclass(frozen=True)
class LayerShape:
    """The plain numbers the memory and time formulas need for one transformer layer.

    Widths are full (before tensor parallelism). For gated FFNs (SwiGLU/GeGLU) `ffn_in_width` is 2·ffn
    (gate and up projections), `ffn_out_width` is ffn. MoE layers use the expert FFN width.
    """

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    q_width: int  # heads·head_dim (query and attention-output width)
    kv_width: int  # kv_heads·head_dim (each of K and V)
    qk_head_dim: int  # head dim used in QKᵀ (MLA: nope + rope)
    v_head_dim: int
    attn_params: int  # QKV + output projection weights (+ biases), MLA down/up projections
    norm_params: int  # the two norms in the layer
    ffn_in_width: int
    ffn_out_width: int
    dense_ffn_params: int
    expert_ffn_params: int  # one routed expert (0 for dense models)
    shared_ffn_params: int  # all shared experts together
    router_params: int
    num_experts: int
    experts_per_token: int
    expert_in_width: int
    expert_out_width: int
    shared_in_width: int
    shared_out_width: int
    hidden_dropout: bool
    attention_dropout: bool
    rotary: bool = False
    sliding_window: int = 0  # keys a windowed layer's query sees at most (0 = full attention)
    windowed_share: float = 0.0  # share of the layers that are windowed
    # MLA only (0 otherwise): the up-projection weights (query and key/value, from the compressed latents to the
    # heads), and the width of what they read per token: the two latents and the shared rotary key
    mla_up_params: int = 0
    mla_latent_width: int = 0
    # the routed experts carry biases (a MoE model with mlp_bias: gpt-oss), which some frameworks add outside the
    # expert GEMMs (Framework.expert_bias_bytes)
    expert_bias: bool = False


def attention_keys(seq_len: Any, causal: bool, window: int = 0) -> Any:
    """Keys per query, averaged over the sequence: s (bidirectional), (s + 1)/2 (causal); with a sliding window
    of w keys a causal query i sees min(i + 1, w), whose mean over s queries is w − w(w − 1)/(2s) for s ≥ w
    (Beltagy et al. 2020, Longformer, arXiv 2004.05150, Sec. 3: O(s·w) attention)."""
    s = np.asarray(seq_len, dtype=float)
    if window <= 0:
        out = (s + 1) / 2 if causal else s
    elif causal:
        w = float(window)
        out = np.where(s >= w, w - w * (w - 1) / (2 * s), (s + 1) / 2)
    else:
        out = np.minimum(s, float(window))
    return float(out) if np.ndim(out) == 0 else out


def _norm_params(model: ModelSpec) -> int:
    return (2 if model.norm == "layernorm" else 1) * model.hidden_size


def attention_params(model: ModelSpec) -> int:
    """Weights (and biases) of one attention block: QKV + output projection, or MLA's low-rank projections.

    MLA counts follow DeepSeek-V2 (arXiv 2405.04434) Sec. 2.1.2 / the HF `DeepseekV2Attention` module.
    """
    h = model.hidden_size
    if model.mla is not None:
        mla = model.mla
        qk_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        n = model.num_attention_heads
        q = h * n * qk_dim if mla.q_lora_rank == 0 else h * mla.q_lora_rank + mla.q_lora_rank * n * qk_dim
        q_norm = mla.q_lora_rank if mla.q_lora_rank else 0
        kv_down = h * (mla.kv_lora_rank + mla.qk_rope_head_dim)
        kv_up = mla.kv_lora_rank * n * (mla.qk_nope_head_dim + mla.v_head_dim)
        out = n * mla.v_head_dim * h
        return q + q_norm + kv_down + mla.kv_lora_rank + kv_up + out
    d = model.effective_head_dim
    q_width = model.num_attention_heads * d
    kv_width = model.num_kv_heads * d
    weights = h * (q_width + 2 * kv_width) + q_width * h
    biases = (q_width + 2 * kv_width + (h if model.attention_out_bias else 0)) if model.attention_bias else 0
    return weights + biases


def ffn_params(model: ModelSpec, ffn_hidden: int) -> int:
    """One FFN: gated (3 matrices, SwiGLU per Shazeer 2020 arXiv 2002.05202) or plain (2 matrices)."""
    h = model.hidden_size
    mats = 3 if model.gated_ffn else 2
    biases = ((2 if model.gated_ffn else 1) * ffn_hidden + h) if model.mlp_bias else 0
    return mats * h * ffn_hidden + biases


def num_moe_layers(model: ModelSpec) -> int:
    if model.moe is None:
        return 0
    moe = model.moe
    candidates = max(0, model.num_layers - moe.first_dense_layers)
    return -(-candidates // max(1, moe.moe_layer_frequency))


def mla_up_projection(model: ModelSpec) -> tuple[int, int]:
    """(up-projection weights, latent width read per token) of an MLA layer; (0, 0) without MLA. The query's
    up-projection reads the compressed query (q_lora_rank; without query compression there is none), the key/value
    one the compressed key/value (kv_lora_rank); the rotary key (qk_rope_head_dim) is computed from the input
    directly (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1.2-2.1.3)."""
    mla = model.mla
    if mla is None:
        return 0, 0
    n = model.num_attention_heads
    q_up = mla.q_lora_rank * n * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    kv_up = mla.kv_lora_rank * n * (mla.qk_nope_head_dim + mla.v_head_dim)
    return q_up + kv_up, mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim


def layer_shape(model: ModelSpec) -> LayerShape:
    h = model.hidden_size
    d = model.effective_head_dim
    mla_up, mla_latents = mla_up_projection(model)
    gated = 2 if model.gated_ffn else 1
    if model.mla is not None:
        qk_dim = model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim
        v_dim = model.mla.v_head_dim
        q_width = model.num_attention_heads * qk_dim
        kv_width = model.num_attention_heads * max(qk_dim, v_dim)
    else:
        qk_dim = v_dim = d
        q_width = model.num_attention_heads * d
        kv_width = model.num_kv_heads * d
    moe = model.moe
    expert_ffn = moe.expert_ffn_hidden_size if moe else 0
    shared_ffn = (moe.shared_expert_ffn_hidden_size or expert_ffn) if moe else 0
    n_shared = moe.num_shared_experts if moe else 0
    return LayerShape(
        hidden=h,
        heads=model.num_attention_heads,
        kv_heads=model.num_kv_heads,
        head_dim=d,
        q_width=q_width,
        kv_width=kv_width,
        qk_head_dim=qk_dim,
        v_head_dim=v_dim,
        attn_params=attention_params(model),
        norm_params=2 * _norm_params(model),  # the pre-attention and pre-FFN norms
        ffn_in_width=gated * model.ffn_hidden_size,
        ffn_out_width=model.ffn_hidden_size,
        dense_ffn_params=ffn_params(model, model.ffn_hidden_size),
        expert_ffn_params=ffn_params(model, expert_ffn) if moe else 0,
        shared_ffn_params=n_shared * ffn_params(model, shared_ffn) if moe else 0,
        router_params=h * moe.num_experts if moe else 0,
        num_experts=moe.num_experts if moe else 0,
        experts_per_token=moe.experts_per_token if moe else 0,
        expert_in_width=gated * expert_ffn,
        expert_out_width=expert_ffn,
        shared_in_width=gated * shared_ffn * n_shared,
        shared_out_width=shared_ffn * n_shared,
        hidden_dropout=model.hidden_dropout > 0,
        attention_dropout=model.attention_dropout > 0,
        rotary=model.position_embedding == "rope",
        sliding_window=model.sliding_window,
        windowed_share=model.windowed_layer_share,
        mla_up_params=mla_up,
        mla_latent_width=mla_latents,
        expert_bias=bool(model.mlp_bias and moe is not None),
    )


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts (unpadded vocabulary unless built with `vocab_size`)."""

    embedding: int  # input token embedding
    position_embedding: int  # learned absolute positions only
    output: int  # LM head (0 when tied)
    final_norm: int
    attention: int  # all layers
    dense_ffn: int  # all dense-FFN layers
    moe_ffn_total: int  # all routed + shared experts + routers in MoE layers
    moe_ffn_active: int  # routed top-k + shared experts + routers per token
    norms: int  # per-layer norms, all layers

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.position_embedding
            + self.output
            + self.final_norm
            + self.attention
            + self.dense_ffn
            + self.moe_ffn_total
            + self.norms
        )

    @property
    def active(self) -> int:
        """Parameters touched per token (MoE: top-k routed experts only)."""
        return self.total - self.moe_ffn_total + self.moe_ffn_active

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding - self.position_embedding - self.output


def param_counts(model: ModelSpec, vocab_size: int | None = None) -> ParamCounts:
    shape = layer_shape(model)
    vocab = model.vocab_size if vocab_size is None else vocab_size
    h = model.hidden_size
    n_moe = num_moe_layers(model)
    n_dense = model.num_layers - n_moe
    moe_total_layer = moe_active_layer = 0
    if model.moe is not None:
        base = shape.shared_ffn_params + shape.router_params
        moe_total_layer = base + shape.num_experts * shape.expert_ffn_params
        moe_active_layer = base + shape.experts_per_token * shape.expert_ffn_params
    return ParamCounts(
        embedding=vocab * h,
        position_embedding=model.max_seq_len * h if model.position_embedding == "learned" else 0,
        output=0 if model.tied_embeddings else vocab * h,
        final_norm=_norm_params(model),
        attention=model.num_layers * shape.attn_params,
        dense_ffn=n_dense * shape.dense_ffn_params,
        moe_ffn_total=n_moe * moe_total_layer,
        moe_ffn_active=n_moe * moe_active_layer,
        norms=model.num_layers * shape.norm_params,
    )


# ---------------------------------------------------------------------------------------------------------------
# FLOPs per token
# ---------------------------------------------------------------------------------------------------------------

AttentionCounting = Literal["full", "causal"]


@dataclass(frozen=True)
class FlopsPerToken:
    """Forward FLOPs per token, split so that every published convention can be rebuilt from the parts.

    A multiply-add is 2 FLOPs. `attention` is QKᵀ plus attention·V over the sequence.
    """

    matmul: float  # all linear layers of the transformer stack (active experts only)
    attention: float
    logits: float  # LM head

    @property
    def forward(self) -> float:
        return self.matmul + self.attention + self.logits


def forward_flops_per_token(
    model: ModelSpec, seq_len: int, attention: AttentionCounting = "full", vocab_size: int | None = None
) -> FlopsPerToken:
    """Forward FLOPs per token.

    Linear layers: 2 FLOPs per weight (Kaplan et al. 2020, arXiv 2001.08361, Sec. 2.1). Attention: 2·s·d for
    QKᵀ and 2·s·d for A·V per head ("full", the Megatron/Narayanan 2021 eq. 3 and NeMo convention) or the
    exact causal count with (s+1)/2 keys per query on average ("causal", as PaLM App. B / FlashAttention count).
    """
    shape = layer_shape(model)
    vocab = model.vocab_size if vocab_size is None else vocab_size
    counts = param_counts(model, vocab)
    h = model.hidden_size
    attn_weights = model.num_layers * shape.attn_params
    n_moe = num_moe_layers(model)
    linear_weights = (
        attn_weights + (model.num_layers - n_moe) * shape.dense_ffn_params + counts.moe_ffn_active
    )
    keys = seq_len if attention == "full" else (seq_len + 1) / 2
    if model.sliding_window > 0:
        # windowed layers: at most w keys per query ("full" counting: min(s, w); causal: attention_keys)
        win = (
            min(seq_len, model.sliding_window)
            if attention == "full"
            else attention_keys(seq_len, True, model.sliding_window)
        )
        share = model.windowed_layer_share
        keys = (1 - share) * keys + share * win
    per_layer_attn = 2.0 * keys * shape.heads * (shape.qk_head_dim + shape.v_head_dim)
    return FlopsPerToken(
        matmul=2.0 * linear_weights,
        attention=model.num_layers * per_layer_attn,
        logits=2.0 * vocab * h,
    )


def model_flops_per_token(
    model: ModelSpec, seq_len: int, attention: AttentionCounting = "full", vocab_size: int | None = None
) -> float:
    """Training model FLOPs per token: forward + backward (= 2× forward), no recompute.

    For a dense GPT this is Korthikanti et al. 2022 (arXiv 2205.05198) eq. 7 divided by B·s:
    72·l·h²(1 + s/6h + V/12lh); it is "6N + 12·l·s·h" (Kaplan 2020 + the attention term).
    """
    return 3.0 * forward_flops_per_token(model, seq_len, attention, vocab_size).forward


def hardware_flops_per_token(
    model: ModelSpec,
    seq_len: int,
    recompute: str = "none",
    recompute_fraction: float = 1.0,
    attention: AttentionCounting = "full",
    vocab_size: int | None = None,
) -> float:
    """FLOPs the GPUs actually execute per token, including the recompute forward.

    full recompute re-runs every layer's forward (not the LM head): Narayanan et al. 2021 (arXiv 2104.04473)
    eq. 3, 96·B·s·l·h²(1 + s/6h + V/16lh). Selective recompute re-runs only QKᵀ, softmax and A·V
    (Korthikanti et al. 2022 Sec. 4.2). `recompute_fraction` is the share of layers recomputed.
    """
    fwd = forward_flops_per_token(model, seq_len, attention, vocab_size)
    base = 3.0 * fwd.forward
    if recompute == "full":
        return base + recompute_fraction * (fwd.matmul + fwd.attention)
    if recompute == "selective":
        return base + recompute_fraction * fwd.attention
    return base


def mtp_flops_per_token(
    model: ModelSpec,
    seq_len: int,
    recompute: str = "none",
    attention: AttentionCounting = "full",
    vocab_size: int | None = None,
) -> tuple[float, float]:
    """(model, hardware) training FLOPs per token of the model's multi-token-prediction modules (ModelSpec.mtp_layers).

    Model FLOPs follow Megatron-core's count, which the published MoE runs report (megatron/training/training.py
    num_floating_point_operations: 3·2·k·(3h + 2h²) for the two input norms, the final norm and the 2h → h
    projection, and 3·2·h·V·k for the extra pass through the LM head; the MTP transformer block is not counted).
    Hardware FLOPs add the block, costed as the model's average layer, forward and backward, and its forward again
    under full recompute."""
    mtp_layers = model.mtp_layers
    if not mtp_layers:
        return 0.0, 0.0
    h = model.hidden_size
    vocab = model.vocab_size if vocab_size is None else vocab_size
    model_flops = 3 * 2 * mtp_layers * (3 * h + 2 * h * h) + 3 * 2 * h * vocab * mtp_layers
    fwd = forward_flops_per_token(model, seq_len, attention, vocab)
    block_fwd = (fwd.matmul + fwd.attention) / model.num_layers
    block = mtp_layers * block_fwd * (4.0 if recompute == "full" else 3.0)
    return model_flops, model_flops + block


def narayanan_flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 eq. 3: F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) (with full recompute)."""
    return (
        96.0
        * batch
        * seq_len
        * layers
        * hidden**2
        * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))
    )
