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

from types import GenericAlias
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.core.goodput import FAIL_SLOW_DEFAULT_TEXT
from app.core.knobs import (
    MAX_BATCH,
    MAX_LAYERS,
    MAX_PARALLEL,
    MAX_VIRTUAL_STAGES,
    Section,
    default_of,
    generic_knobs,
    knob,
)
from app.schemas.fields import CatalogRef, JsonObject, SafeStr

# Upper bounds (app.core.knobs declares each with its reason); MAX_BATCH_TOKENS and MAX_TOKENS belong to the
# requests' token fields.
MAX_BATCH_TOKENS = 2**40  # tokens per step: 1.1T, 65,000x Llama 3 405B's 16M-token batch
MAX_TOKENS = 1e18  # training.tokens: ~50,000x Llama 3's 15.6T-token run; as the cost requests' `tokens`
FRAMEWORK_NAME_MAX = 100  # framework names: the longest, 'torchtitan-fsdp2-compile', has 24 characters
# scenario documents: no NaN/Infinity (JSON has none), unknown fields refused
SCENARIO_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
__all__ = ["MAX_BATCH", "MAX_LAYERS", "MAX_PARALLEL", "MAX_VIRTUAL_STAGES"]


def knob_field(path: str, **default: Any) -> Any:
    """The pydantic Field of the registry's knob at `path` ('layout.tp'): its range (a list knob: its length) and
    its description (the OpenAPI schema's), with `default=` or `default_factory=` where the field has one."""
    k = knob(path)
    if k.kind == "counts":  # its range bounds each number (knob_type), its length the list
        return Field(max_length=k.max_items, description=k.help, **default)
    return Field(ge=k.ge, gt=k.gt, le=k.le, max_length=k.max_items, description=k.help, **default)


def knob_type(path: str) -> Any:
    """The type of the registry's choice or list knob at `path`: a Literal of its choices (the OpenAPI schema's
    enum, and a 422 naming the field and the allowed values), or a list of them; a counts knob's: a list of whole
    numbers in its range."""
    k = knob(path)
    if k.kind == "counts":
        return GenericAlias(list, (Annotated[int, knob_range(path)],))
    choice = cast(Any, Literal)[k.choices]
    return GenericAlias(list, (choice,)) if k.kind == "list" else choice


def knob_range(path: str) -> Any:
    """The range alone of the registry's knob at `path`, for a list of its values (the search constraints)."""
    k = knob(path)
    return Field(ge=k.ge, gt=k.gt, le=k.le)


def with_generic_knobs(base: type[BaseModel], section: Section) -> type[BaseModel]:
    """`base` with a field for every knob of `section` the registry marks generic (app.core.knobs): the schema
    field of such a knob is made from its record alone."""
    extra: dict[str, Any] = {}
    for k in generic_knobs(section):
        kind: Any = {"int": int, "float": float, "bool": bool}[k.kind]
        extra[k.name] = (kind | None if k.optional else kind, knob_field(k.path, default=default_of(k)))
    return create_model(base.__name__, __base__=base, __module__=base.__module__, **extra)


# the choice and list knobs' types: mypy sees the estimator's own (app.core.layout), the schema builds them from the
# registry
if TYPE_CHECKING:
    from app.core.layout import MomentsDtype as MomentsChoice
    from app.core.layout import Optimizer as OptimizerChoice
    from app.core.layout import RecomputeMode as RecomputeChoice
    from app.core.layout import ReshardAfter as ReshardChoice
    from app.core.layout import TrainDtype as DtypeChoice

    RecomputeModules: TypeAlias = list[str]
    StageLayers: TypeAlias = list[int]
    OffloadModules: TypeAlias = list[str]
    MoeDispatcher: TypeAlias = str
    AttentionBackendChoice: TypeAlias = str
else:  # Literals of the registry's choices (app.core.knobs): the OpenAPI schema's enums
    RecomputeChoice = knob_type("layout.recompute")
    RecomputeModules = knob_type("layout.recompute_modules")
    StageLayers = knob_type("layout.stage_layers")
    DtypeChoice = knob_type("layout.dtype")
    OptimizerChoice = knob_type("layout.optimizer")
    OffloadModules = knob_type("layout.offload_modules")
    ReshardChoice = knob_type("layout.reshard_after")
    MomentsChoice = knob_type("layout.optimizer_moments_dtype")
    MoeDispatcher = knob_type("moe_dispatcher")
    AttentionBackendChoice = knob_type("attention_backend")


class ClusterIn(BaseModel):
    model_config = SCENARIO_CONFIG

    gpu: CatalogRef | JsonObject = Field(
        description="GPU catalog name or alias (e.g. 'H100-SXM', 'A100-80GB'), or an inline GPUSpec object"
    )
    nodes: int = knob_field("cluster.nodes")
    gpus_per_node: int | None = knob_field("cluster.gpus_per_node", default=None)
    fabric: CatalogRef | JsonObject | None = Field(
        default=None,
        description="scale-out fabric preset name (e.g. 'ib-ndr-8x400', 'roce-8x400') or inline FabricSpec "
        "fields; default: the GPU's reference fabric (app.catalog.fabrics.REFERENCE_FABRIC_BY_GPU, e.g. 8 × NDR "
        "400 Gb/s InfiniBand for H100)",
    )
    power_limit_w: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="operating power limit per GPU in watts (nvidia-smi -pl); below the GPU's design power it "
        "lowers the SM clock and so GEMM and attention throughput; default: the GPU's own limit (tdp_w)",
    )
    fail_slow_slowdown: float | None = Field(
        default=None,
        ge=1,
        le=10,
        description="how many times slower than estimated the steps of a run across nodes go on average, from "
        "fail-slows (slow GPUs, congested links): part of the goodput behind wall-clock days, GPU-hours and cost; "
        f"default: {FAIL_SLOW_DEFAULT_TEXT}; 1 counts failures alone",
    )


# layers an fp8 / fp4 run keeps 16-bit (app.core.layout.Layout), as the scenario, plan and sizes requests take them
Bf16FirstLayers = Annotated[int, knob_field("layout.bf16_first_layers")]
Bf16LastLayers = Annotated[int, knob_field("layout.bf16_last_layers")]
# the Adam moments' dtype (app.core.layout.Layout.optimizer_moments_dtype), as the scenario, plan and sizes
# requests take it
OptimizerMomentsDtype = Annotated[MomentsChoice, knob_field("layout.optimizer_moments_dtype")]
# multi-token-prediction modules, as the scenario, plan and sizes requests still take them beside the model's own
# field (app.core.model.ModelSpec.mtp_layers); app.services.scenario applies the value to the model
MtpLayers = Annotated[int | None, knob_field("layout.mtp_layers")]
# the DDP bucket size in parameters (Framework.dp_bucket_params), as the scenario and the searches take it
DdpBucketSize = Annotated[int | None, knob_field("ddp_bucket_size")]
# FP8 parameters (app.core.layout.Layout.fp8_param_gather), as the scenario, plan and sizes requests take them
Fp8ParamGather = Annotated[bool, knob_field("layout.fp8_param_gather")]


class _LayoutFields(BaseModel):
    model_config = SCENARIO_CONFIG

    tp: int = knob_field("layout.tp", default=1)
    pp: int = knob_field("layout.pp", default=1)
    vp: int = knob_field("layout.vp", default=1)
    dp: int | None = knob_field("layout.dp", default=None)
    cp: int = knob_field("layout.cp", default=1)
    ep: int = knob_field("layout.ep", default=1)
    etp: int | None = knob_field("layout.etp", default=None)
    zero: int = knob_field("layout.zero", default=1)
    sequence_parallel: bool = knob_field("layout.sequence_parallel", default=False)
    recompute: RecomputeChoice = knob_field("layout.recompute", default="none")
    recompute_layers: int | None = knob_field("layout.recompute_layers", default=None)
    recompute_modules: RecomputeModules = knob_field("layout.recompute_modules", default_factory=list)
    micro_batch: int = knob_field("layout.micro_batch", default=1)
    global_batch: int = knob_field("layout.global_batch")
    dtype: DtypeChoice = knob_field("layout.dtype", default="bf16")
    flash_attention: bool = knob_field("layout.flash_attention", default=True)
    optimizer: OptimizerChoice = knob_field("layout.optimizer", default="adamw")
    offload_modules: OffloadModules = knob_field("layout.offload_modules", default_factory=list)
    offload_layers: int = knob_field("layout.offload_layers", default=0)
    optimizer_offload: float = knob_field("layout.optimizer_offload", default=0.0)
    first_stage_layers: int | None = knob_field("layout.first_stage_layers", default=None)
    last_stage_layers: int | None = knob_field("layout.last_stage_layers", default=None)
    stage_layers: StageLayers = knob_field("layout.stage_layers", default_factory=list)
    bf16_first_layers: Bf16FirstLayers = 0
    bf16_last_layers: Bf16LastLayers = 0
    fp8_param_gather: Fp8ParamGather = False
    optimizer_moments_dtype: OptimizerMomentsDtype = "fp32"
    mtp_layers: MtpLayers = None
    reshard_after: ReshardChoice = knob_field("layout.reshard_after", default="forward")
    pipeline_layout: SafeStr | None = Field(
        default=None,
        max_length=2000,
        description="Megatron-core --pipeline-model-parallel-layout, e.g. DeepSeek-V3's 'Et|(tt|)*30L': '|' "
        "separates virtual stages (pp·vp of them), E the embedding, t a transformer layer, m an MTP layer, L the "
        "loss, (…)*N repeats; read as first_stage_layers / last_stage_layers, or as stage_layers when the stages "
        "between differ; not with those fields",
    )


if TYPE_CHECKING:
    _LayoutBase = _LayoutFields
else:  # the knobs declared in the registry alone (app.core.knobs, generic=True) join the written fields
    _LayoutBase = with_generic_knobs(_LayoutFields, "layout")


class LayoutIn(_LayoutBase):  # a scenario's layout: the fields above and every generic knob of the registry
    pass


class TrainingIn(BaseModel):
    model_config = SCENARIO_CONFIG

    seq_len: int = knob_field("training.seq_len")
    tokens: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TOKENS,
        description="training tokens in total (for time to train); optional",
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
    moe_dispatcher: MoeDispatcher = knob_field("moe_dispatcher", default="alltoall")
    moe_a2a_overlap: bool = knob_field("moe_a2a_overlap", default=False)
    moe_fused_grouped_gemm: bool = knob_field("moe_fused_grouped_gemm", default=False)
    ddp_bucket_size: DdpBucketSize = None
    attention_backend: AttentionBackendChoice = knob_field("attention_backend", default="auto")
