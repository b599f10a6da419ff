"""The scenario schema: one JSON document describing a training job, shared by API, CLI and web pages.

```json
{
  "model": "Llama-3-70B",                       // catalog name, or an inline ModelSpec object
  "cluster": {"gpu": "H100-SXM", "nodes": 8, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
  "layout": {"tp": 4, "pp": 2, "dp": 8, "micro_batch": 1, "global_batch": 512, "zero": 1,
             "sequence_parallel": true, "recompute": "selective"},
  "training": {"seq_len": 8192, "tokens": 1.5e12},
  "framework": "megatron-core"
}
```
See docs/scenario.md for every field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.model import MAX_MTP_LAYERS
from app.schemas.fields import CatalogRef, JsonObject, SafeStr

# Upper bounds: generous beyond any real run, small enough that every product the estimator forms stays exact in
# 64-bit arithmetic and every value fits the database.
MAX_PARALLEL = (
    2**20
)  # tp, pp, dp, cp, ep, etp: 1,048,576 GPUs, ~10x the largest cluster built (xAI Colossus, 2025)
MAX_VIRTUAL_STAGES = 10_000  # vp: each model chunk holds at least one layer (ModelSpec num_layers ≤ 10,000)
MAX_BATCH = 2**24  # micro_batch, global_batch: 16.7M sequences; Llama 3 405B trained with 16M tokens = 2,048
MAX_BATCH_TOKENS = 2**40  # tokens per step: 1.1T, 65,000x Llama 3 405B's 16M-token batch
MAX_LAYERS = 100_000  # layer counts, as the other layer fields here
MAX_TOKENS = 1e18  # training.tokens: ~50,000x Llama 3's 15.6T-token run; as the cost requests' `tokens`
FRAMEWORK_NAME_MAX = 100  # framework names: the longest, 'torchtitan-fsdp2-compile', has 24 characters
# scenario documents: no NaN/Infinity (JSON has none), unknown fields refused
SCENARIO_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


class ClusterIn(BaseModel):
    model_config = SCENARIO_CONFIG

    gpu: CatalogRef | JsonObject = Field(
        description="GPU catalog name or alias (e.g. 'H100-SXM', 'A100-80GB'), or an inline GPUSpec object"
    )
    nodes: int = Field(ge=1, le=100_000, description="number of nodes (servers)")
    gpus_per_node: int | None = Field(
        default=None, ge=1, le=576, description="GPUs per node; default: the GPU's usual server (8)"
    )
    fabric: CatalogRef | JsonObject | None = Field(
        default=None,
        description="scale-out fabric preset name (e.g. 'ib-ndr-8x400', 'roce-8x400') or inline FabricSpec "
        "fields; default: 8 × NDR 400 Gb/s InfiniBand, rail-optimised",
    )
    power_limit_w: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="operating power limit per GPU in watts (nvidia-smi -pl); below the GPU's design power it "
        "lowers the SM clock and so GEMM and attention throughput; default: the GPU's own limit (tdp_w)",
    )


# layers an fp8 / fp4 run keeps 16-bit (app.core.layout.Layout), as the scenario, plan and sizes requests take them
Bf16FirstLayers = Annotated[
    int,
    Field(
        ge=0,
        le=100_000,
        description="with dtype fp8 or fp4: transformer layers at the start of the network kept 16-bit (Megatron-core "
        "--first-last-layers-bf16 --num-layers-at-start-in-bf16); 0 = none",
    ),
]
Bf16LastLayers = Annotated[
    int,
    Field(
        ge=0,
        le=100_000,
        description="with dtype fp8 or fp4: transformer layers at the end kept 16-bit (--num-layers-at-end-in-bf16; "
        "Megatron-Bridge's FP8 current-scaling recipe keeps 1 + 1, NVIDIA's NVFP4 recipe about 15 % of the layers, "
        "most at the end); 0 = none",
    ),
]
# the Adam moments' dtype (app.core.layout.Layout.optimizer_moments_dtype), as the scenario, plan and sizes
# requests take it
OptimizerMomentsDtype = Annotated[
    Literal["fp32", "bf16"],
    Field(
        description="Adam first and second moments: fp32, or bf16 with Megatron-core's precision-aware optimizer "
        "(--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16; needs the distributed "
        "optimizer, zero ≥ 1): 4 B per parameter instead of 8",
    ),
]
# multi-token-prediction modules, as the scenario, plan and sizes requests still take them beside the model's own
# field (app.core.model.ModelSpec.mtp_layers); app.services.scenario applies the value to the model
MtpLayers = Annotated[
    int | None,
    Field(
        ge=0,
        le=MAX_MTP_LAYERS,
        description="deprecated: set the model's mtp_layers. Multi-token-prediction modules trained on the last "
        "pipeline stage (Megatron-core --mtp-num-layers; DeepSeek-V3: 1), applied to the model; unset = the "
        "model's own; a model with a different non-zero mtp_layers is a 422",
    ),
]
# FP8 parameters (app.core.layout.Layout.fp8_param_gather), as the scenario, plan and sizes requests take them
Fp8ParamGather = Annotated[
    bool,
    Field(
        description="with dtype fp8: working weights kept and all-gathered as FP8 tensors, 1 B per parameter "
        "(Megatron-core --fp8-param-gather, NeMo fp8_params, Megatron-Bridge's FP8 presets: zero ≥ 1; torchao's "
        "FSDP2 float8 all-gather: zero = 3); master weights, Adam moments and gradients unchanged",
    ),
]


class LayoutIn(BaseModel):
    model_config = SCENARIO_CONFIG

    tp: int = Field(
        default=1, ge=1, le=MAX_PARALLEL, description="tensor parallel size (inside the scale-up domain)"
    )
    pp: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="pipeline parallel stages")
    vp: int = Field(
        default=1,
        ge=1,
        le=MAX_VIRTUAL_STAGES,
        description="interleaved model chunks per stage (1 = plain 1F1B)",
    )
    dp: int | None = Field(
        default=None, ge=1, le=MAX_PARALLEL, description="data parallel size; default: GPUs / (tp·pp·cp)"
    )
    cp: int = Field(
        default=1, ge=1, le=MAX_PARALLEL, description="context parallel size (sequence split for attention)"
    )
    ep: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="expert parallel size (MoE models)")
    etp: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PARALLEL,
        description="expert tensor parallel size under MoE parallel folding (Megatron-core "
        "--expert-tensor-parallel-size); unset = tp, with ep carved out of dp·cp",
    )
    zero: int = Field(
        default=1,
        ge=0,
        le=3,
        description="0 none, 1 distributed optimizer, 2 + gradients, 3 + weights (FSDP)",
    )
    sequence_parallel: bool = Field(default=False, description="Megatron sequence parallelism (needs tp > 1)")
    recompute: Literal["none", "selective", "full"] = "none"
    recompute_layers: int | None = Field(
        default=None,
        ge=0,
        le=MAX_LAYERS,
        description="with recompute='full': layers per stage recomputed (None = all)",
    )
    recompute_modules: list[Literal["core_attn", "layernorm", "mlp", "moe", "moe_act", "shared_experts"]] = (
        Field(
            default_factory=list,
            max_length=6,
            description="with recompute='selective': Megatron-core's --recompute-modules (default core_attn); "
            "layernorm, mlp (dense layers), moe, moe_act, shared_experts (MoE layers)",
        )
    )
    micro_batch: int = Field(default=1, ge=1, le=MAX_BATCH, description="sequences per micro-batch")
    global_batch: int = Field(ge=1, le=MAX_BATCH, description="sequences per optimizer step")
    dtype: Literal["bf16", "fp16", "fp8", "fp4"] = "bf16"
    flash_attention: bool = True
    optimizer: Literal["adamw", "adam"] = "adamw"
    offload_modules: list[
        Literal["attn_norm", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"]
    ] = Field(
        default_factory=list,
        max_length=6,
        description="Megatron-core fine-grained activation offloading (--offload-modules): modules whose input "
        "activations go to host memory in every layer; expert_fc1 and moe_act for MoE models; not with "
        "recompute='full' or offload_layers",
    )
    offload_layers: int = Field(
        default=0,
        ge=0,
        le=100_000,
        description="layers whose saved activations are offloaded to host memory during the forward pass "
        "(Megatron-core --cpu-offloading-num-layers; needs pp = 1 and recompute = 'none'); 0 = none",
    )
    optimizer_offload: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="share of each GPU's optimizer states (fp32 master weights and Adam moments) kept and updated "
        "on the host by a CPU AdamW (Megatron-core --optimizer-cpu-offload --optimizer-offload-fraction); "
        "ZeRO 0-2; 0 = none",
    )
    first_stage_layers: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="transformer layers on the first pipeline stage (Megatron-core "
        "--decoder-first-pipeline-num-layers); the layers left over split evenly over the stages between; unset = "
        "an even split. One layer fewer than the middle stages gives the embedding a layer's slot",
    )
    last_stage_layers: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="transformer layers on the last pipeline stage (Megatron-core "
        "--decoder-last-pipeline-num-layers); one fewer than the middle stages gives the LM head and loss a "
        "layer's slot (e.g. Llama-3.1-405B, 126 layers on pp = 16: first 7, last 7, 8 on each other stage)",
    )
    stage_layers: list[Annotated[int, Field(le=MAX_LAYERS)]] = Field(
        default_factory=list,
        max_length=1024,
        description="transformer layers of every pipeline stage, first to last (pp numbers adding up to the "
        "model's layers), for splits whose middle stages differ too; empty = derived; not with "
        "first_stage_layers / last_stage_layers",
    )
    bf16_first_layers: Bf16FirstLayers = 0
    bf16_last_layers: Bf16LastLayers = 0
    fp8_param_gather: Fp8ParamGather = False
    optimizer_moments_dtype: OptimizerMomentsDtype = "fp32"
    mtp_layers: MtpLayers = None
    reshard_after: Literal["forward", "backward", "step"] = Field(
        default="forward",
        description="zero = 3 only: when FSDP frees the gathered parameters. forward: after each forward, "
        "gathered again for the backward (FSDP2 reshard_after_forward=True, DeepSpeed ZeRO-3); backward: kept "
        "from the forward to the backward of each micro-batch (reshard_after_forward=False; Llama 3); step: "
        "parameters and gradients kept unsharded across the step's micro-batches, one all-gather and one "
        "reduce-scatter per step (torchtitan's pipeline schedules)",
    )
    pipeline_layout: SafeStr | None = Field(
        default=None,
        max_length=2000,
        description="Megatron-core --pipeline-model-parallel-layout, e.g. DeepSeek-V3's 'Et|(tt|)*30L': '|' "
        "separates virtual stages (pp·vp of them), E the embedding, t a transformer layer, m an MTP layer, L the "
        "loss, (…)*N repeats; read as first_stage_layers / last_stage_layers, or as stage_layers when the stages "
        "between differ; not with those fields",
    )


class TrainingIn(BaseModel):
    model_config = SCENARIO_CONFIG

    seq_len: int = Field(ge=1, le=10_000_000, description="tokens per sequence")
    tokens: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TOKENS,
        description="training tokens in total (for time to train); optional",
    )


MoeDispatcher = Literal["alltoall", "deepep", "hybridep"]
AttentionBackendChoice = Literal["auto", "flash-attention-2", "transformer-engine"]
ATTENTION_BACKEND_HELP = (
    "fused attention kernel: auto (the framework's: Transformer Engine for megatron-core, nemo and "
    "nemo-automodel-fsdp2, FlashAttention-2 for the others), flash-attention-2 (the flash-attn package or PyTorch "
    "SDPA's flash backend) or transformer-engine (cuDNN attention on compute capability 9.0 and later, "
    "FlashAttention-2 below); kernel speeds per GPU architecture from published micro-benchmarks"
)


class Scenario(BaseModel):
    model_config = SCENARIO_CONFIG

    model: CatalogRef | JsonObject = Field(
        description="model catalog name (e.g. 'Llama-3-70B') or an inline ModelSpec object"
    )
    cluster: ClusterIn
    layout: LayoutIn
    training: TrainingIn
    profile: SafeStr | None = Field(
        default=None,
        max_length=200,
        description="calibrated hardware profile (name, 'name@version' or id) whose GEMM curve and "
        "collective α/β replace the catalog defaults; omitted → catalog defaults",
    )
    framework: SafeStr = Field(
        default="megatron-core",
        max_length=FRAMEWORK_NAME_MAX,
        description="framework conventions: megatron-core, nemo, megatron-2021, megatron-deepspeed, "
        "torchtitan-fsdp2, torchtitan-fsdp2-compile, llm-foundry, nemo-automodel-fsdp2",
    )
    moe_dispatcher: MoeDispatcher = Field(
        default="alltoall",
        description="MoE token dispatcher: alltoall (Megatron-core's default NCCL all-to-all: every top-k copy "
        "of a token crosses the network) or deepep / hybridep (Megatron-core's flex dispatcher: one copy per "
        "destination node, fanned out over NVLink); MoE models only",
    )
    moe_a2a_overlap: bool = Field(
        default=False,
        description="hide the expert-parallel all-to-alls behind the paired micro-batch's compute "
        "(Megatron-core --overlap-moe-expert-parallel-comm); MoE models only, no effect at ep = 1",
    )
    attention_backend: AttentionBackendChoice = Field(default="auto", description=ATTENTION_BACKEND_HELP)
