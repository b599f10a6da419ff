"""The planner's request documents: the layout search (PlanRequest) and the cluster-size sweep (SizesRequest).

Both describe one training job the same way (model, cluster, batch, run-wide precision and kernels, framework,
constraints, price): SearchRequestBase holds those fields once, and `run_options` hands the run-wide ones to the
planner as one app.core.layout.RunOptions record. app.services.planner re-exports these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.layout import RunOptions
from app.core.planner import Constraints
from app.core.units import GiB
from app.schemas.fields import CatalogRef, JsonObject, SafeStr
from app.schemas.scenario import (
    FRAMEWORK_NAME_MAX,
    MAX_BATCH_TOKENS,
    AttentionBackendChoice,
    Bf16FirstLayers,
    Bf16LastLayers,
    ClusterIn,
    DdpBucketSize,
    DtypeChoice,
    Fp8ParamGather,
    MoeDispatcher,
    MtpLayers,
    OptimizerMomentsDtype,
    RecomputeChoice,
    TrainingIn,
    knob_field,
    knob_range,
)

# values one constraint list may hold: every power of two up to MAX_PARALLEL is 21 of them, so 1024 leaves room for
# any hand-picked set while keeping the filter's work per layout small
MAX_ALLOWED_VALUES = 1024
# requests carry no NaN or Infinity (app.schemas.fields), unknown fields refused
PLANNER_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
ParallelSize = Annotated[int, knob_range("layout.tp")]  # as the scenario's layout (app.core.knobs)


class ConstraintsIn(BaseModel):
    model_config = PLANNER_CONFIG

    tp: list[ParallelSize] | None = Field(
        default=None,
        max_length=MAX_ALLOWED_VALUES,
        description="allowed tensor-parallel sizes (default: all valid)",
    )
    pp: list[ParallelSize] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed pipeline stages"
    )
    vp: list[Annotated[int, knob_range("layout.vp")]] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed interleaved chunks per stage"
    )
    cp: list[ParallelSize] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed context-parallel sizes"
    )
    ep: list[ParallelSize] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed expert-parallel sizes (MoE)"
    )
    micro_batch: list[Annotated[int, knob_range("layout.micro_batch")]] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed micro-batch sizes (sequences)"
    )
    # ZeRO stages 0 to 3 (3: weights sharded); another number is refused rather than silently matching nothing
    zero: list[Annotated[int, knob_range("layout.zero")]] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed ZeRO stages (0-3)"
    )
    recompute: list[RecomputeChoice] | None = Field(default=None, max_length=MAX_ALLOWED_VALUES)
    sequence_parallel: list[bool] | None = Field(default=None, max_length=MAX_ALLOWED_VALUES)
    tp_beyond_scaleup_domain: bool = Field(default=False, description="let TP groups span nodes")
    # upper bounds keep one request's search within a few seconds of CPU
    max_cp: int = Field(default=16, ge=1, le=64)
    max_vp: int = Field(default=8, ge=1, le=32)
    max_micro_batch: int = Field(default=16, ge=1, le=64)
    min_headroom_gib: float = Field(default=0.0, ge=0, description="free HBM per GPU required (GiB)")
    partial_recompute: bool = Field(
        default=True, description="also try full recompute of 1/4, 1/2 and 3/4 of each stage's layers"
    )
    activation_offload: bool = Field(
        default=False,
        description="also try offloading the activations of 1/4, 1/2 and 3/4 of the layers to host memory "
        "(Megatron-core --cpu-offloading-num-layers; pp = 1 and no recompute only)",
    )
    optimizer_offload: bool = Field(
        default=False,
        description="also try keeping 1/2 or all of the optimizer states on the host, updated by a CPU AdamW "
        "(Megatron-core --optimizer-cpu-offload; ZeRO 0-2 only)",
    )
    avoid_light_moe_passes: bool = Field(
        default=False,
        description="MoE models: leave out layouts with under 20 ms of GPU work per layer pass, where published "
        "runs took up to 2× their estimate because host dispatch set the pace (docs/validation.md)",
    )
    preset: Literal["none", "heuristic"] = Field(
        default="none",
        description="'heuristic': the seed rule (TP inside a node ≤ 8, PP inside ≤ 4 nodes, DP across racks)",
    )

    def to_core(self) -> Constraints:
        def tup(v: list[Any] | None) -> tuple[Any, ...] | None:
            return tuple(v) if v is not None else None

        return Constraints(
            tp=tup(self.tp),
            pp=tup(self.pp),
            vp=tup(self.vp),
            cp=tup(self.cp),
            ep=tup(self.ep),
            micro_batch=tup(self.micro_batch),
            zero=tup(self.zero),
            recompute=tup(self.recompute),
            sequence_parallel=tup(self.sequence_parallel),
            tp_beyond_scaleup_domain=self.tp_beyond_scaleup_domain,
            max_cp=self.max_cp,
            max_vp=self.max_vp,
            max_micro_batch=self.max_micro_batch,
            min_headroom_bytes=self.min_headroom_gib * GiB,
            partial_recompute=self.partial_recompute,
            activation_offload=self.activation_offload,
            optimizer_offload=self.optimizer_offload,
            avoid_light_moe_passes=self.avoid_light_moe_passes,
            preset=self.preset,
        )


class SearchRequestBase(BaseModel):
    """What the layout search and the size sweep share: the job (model, cluster, training, global batch), the
    options every layout searched shares (dtype, 16-bit end layers, FP8 parameters, Adam moments, flash attention;
    the deprecated mtp_layers goes onto the model), the framework and its kernels, the hardware profile, the search constraints and the price."""

    model_config = PLANNER_CONFIG

    model: CatalogRef | JsonObject = Field(description="model catalog name or an inline ModelSpec object")
    cluster: ClusterIn
    training: TrainingIn
    global_batch: int | None = knob_field("layout.global_batch", default=None)
    global_batch_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BATCH_TOKENS,
        description="tokens per optimizer step (alternative to global_batch)",
    )
    dtype: DtypeChoice = "bf16"
    bf16_first_layers: Bf16FirstLayers = 0
    bf16_last_layers: Bf16LastLayers = 0
    fp8_param_gather: Fp8ParamGather = False
    optimizer_moments_dtype: OptimizerMomentsDtype = "fp32"
    mtp_layers: MtpLayers = None
    flash_attention: bool = True
    framework: SafeStr = Field(default="megatron-core", max_length=FRAMEWORK_NAME_MAX)
    moe_dispatcher: MoeDispatcher = Field(
        default="alltoall", description="MoE token dispatcher (see the scenario schema); MoE models only"
    )
    moe_a2a_overlap: bool = Field(
        default=False, description="hide the EP all-to-alls behind the paired micro-batch (MoE models only)"
    )
    moe_fused_grouped_gemm: bool = knob_field("moe_fused_grouped_gemm", default=False)
    ddp_bucket_size: DdpBucketSize = None
    attention_backend: AttentionBackendChoice = knob_field("attention_backend", default="auto")
    profile: SafeStr | None = Field(
        default=None, max_length=200, description="calibrated hardware profile (name, 'name@version' or id)"
    )
    constraints: ConstraintsIn = Field(default_factory=ConstraintsIn)
    usd_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        description="price for cost per run; default: the price book's headline price for the GPU (median of "
        "the non-stale on-demand quotes)",
    )

    def run_options(self) -> RunOptions:
        """The run-wide options of every layout searched (app.core.layout.RunOptions)."""
        return RunOptions.of(self)


class PlanRequest(SearchRequestBase):
    """Search every layout for one model on one cluster (or on several cluster sizes)."""

    gpu_counts: list[Annotated[int, Field(ge=1, le=1_048_576)]] | None = Field(
        default=None,
        max_length=16,
        description="search several cluster sizes at once (default: the cluster's GPUs)",
    )
    rank_by: Literal["time", "cost"] = "time"
    top: int = Field(default=10, ge=1, le=1000)


class SizesRequest(SearchRequestBase):
    """Sweep cluster sizes: best layout, time to train, cost per run and scaling efficiency per size."""

    cluster: ClusterIn = Field(description="GPU, GPUs per node and fabric; nodes is ignored (sizes decide)")
    sizes: list[Annotated[int, Field(ge=1, le=1_048_576)]] | None = Field(
        default=None, max_length=24, description="GPU counts (default 8, 16, … 16,384)"
    )
    deadline_days: float | None = Field(default=None, gt=0, description="finish within this many days")
