"""Planner service: request documents in, layout search and cluster-size sweep out (API, CLI and pages share it)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlmodel import Session

from app.catalog import accuracy_table
from app.core.accuracy import band_for, layer_pass_seconds
from app.core.errors import Problem, ProblemCollector, SpecError
from app.core.planner import Constraints, PlanResult, plan
from app.core.sizing import DEFAULT_SIZES, SizingResult, size_sweep
from app.core.units import GiB
from app.schemas.fields import CatalogRef, JsonObject, SafeStr
from app.schemas.scenario import (
    ATTENTION_BACKEND_HELP,
    FRAMEWORK_NAME_MAX,
    MAX_BATCH,
    MAX_BATCH_TOKENS,
    MAX_PARALLEL,
    MAX_VIRTUAL_STAGES,
    AttentionBackendChoice,
    Bf16FirstLayers,
    Bf16LastLayers,
    ClusterIn,
    Fp8ParamGather,
    LayoutIn,
    MoeDispatcher,
    MtpLayers,
    OptimizerMomentsDtype,
    Scenario,
    TrainingIn,
)
from app.services.plan_ranking import ranking_payload
from app.services.region import REGION_CANDIDATES, mark, reasons_for, region_note
from app.services.scenario import ResolvedScenario, resolve_scenario

# values one constraint list may hold: every power of two up to MAX_PARALLEL is 21 of them, so 1024 leaves room for
# any hand-picked set while keeping the filter's work per layout small
MAX_ALLOWED_VALUES = 1024
# requests carry no NaN or Infinity (app.schemas.fields), unknown fields refused
PLANNER_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
ParallelSize = Annotated[int, Field(ge=1, le=MAX_PARALLEL)]  # as the scenario's layout (app.schemas.scenario)


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
    vp: list[Annotated[int, Field(ge=1, le=MAX_VIRTUAL_STAGES)]] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed interleaved chunks per stage"
    )
    cp: list[ParallelSize] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed context-parallel sizes"
    )
    ep: list[ParallelSize] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed expert-parallel sizes (MoE)"
    )
    micro_batch: list[Annotated[int, Field(ge=1, le=MAX_BATCH)]] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed micro-batch sizes (sequences)"
    )
    # ZeRO stages 0 to 3 (3: weights sharded); another number is refused rather than silently matching nothing
    zero: list[Annotated[int, Field(ge=0, le=3)]] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES, description="allowed ZeRO stages (0-3)"
    )
    recompute: list[Literal["none", "selective", "full"]] | None = Field(
        default=None, max_length=MAX_ALLOWED_VALUES
    )
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


class PlanRequest(BaseModel):
    """Search every layout for one model on one cluster (or on several cluster sizes)."""

    model_config = PLANNER_CONFIG

    model: CatalogRef | JsonObject = Field(description="model catalog name or an inline ModelSpec object")
    cluster: ClusterIn
    training: TrainingIn
    global_batch: int | None = Field(
        default=None, ge=1, le=MAX_BATCH, description="sequences per optimizer step"
    )
    global_batch_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BATCH_TOKENS,
        description="tokens per optimizer step (alternative to global_batch)",
    )
    gpu_counts: list[Annotated[int, Field(ge=1, le=1_048_576)]] | None = Field(
        default=None,
        max_length=16,
        description="search several cluster sizes at once (default: the cluster's GPUs)",
    )
    dtype: Literal["bf16", "fp16", "fp8", "fp4"] = "bf16"
    bf16_first_layers: Bf16FirstLayers = 0
    bf16_last_layers: Bf16LastLayers = 0
    fp8_param_gather: Fp8ParamGather = False
    optimizer_moments_dtype: OptimizerMomentsDtype = "fp32"
    mtp_layers: MtpLayers = 0
    flash_attention: bool = True
    framework: SafeStr = Field(default="megatron-core", max_length=FRAMEWORK_NAME_MAX)
    moe_dispatcher: MoeDispatcher = Field(
        default="alltoall", description="MoE token dispatcher (see the scenario schema); MoE models only"
    )
    moe_a2a_overlap: bool = Field(
        default=False, description="hide the EP all-to-alls behind the paired micro-batch (MoE models only)"
    )
    attention_backend: AttentionBackendChoice = Field(default="auto", description=ATTENTION_BACKEND_HELP)
    profile: SafeStr | None = Field(
        default=None, max_length=200, description="calibrated hardware profile (name, 'name@version' or id)"
    )
    constraints: ConstraintsIn = Field(default_factory=ConstraintsIn)
    rank_by: Literal["time", "cost"] = "time"
    usd_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        description="price for cost per run; default: the price book's headline price for the GPU (median of "
        "the non-stale on-demand quotes)",
    )
    top: int = Field(default=10, ge=1, le=1000)


class SizesRequest(BaseModel):
    """Sweep cluster sizes: best layout, time to train, cost per run and scaling efficiency per size."""

    model_config = PLANNER_CONFIG

    model: CatalogRef | JsonObject
    cluster: ClusterIn = Field(description="GPU, GPUs per node and fabric; nodes is ignored (sizes decide)")
    training: TrainingIn
    global_batch: int | None = Field(default=None, ge=1, le=MAX_BATCH)
    global_batch_tokens: int | None = Field(default=None, ge=1, le=MAX_BATCH_TOKENS)
    sizes: list[Annotated[int, Field(ge=1, le=1_048_576)]] | None = Field(
        default=None, max_length=24, description="GPU counts (default 8, 16, … 16,384)"
    )
    deadline_days: float | None = Field(default=None, gt=0, description="finish within this many days")
    dtype: Literal["bf16", "fp16", "fp8", "fp4"] = "bf16"
    bf16_first_layers: Bf16FirstLayers = 0
    bf16_last_layers: Bf16LastLayers = 0
    fp8_param_gather: Fp8ParamGather = False
    optimizer_moments_dtype: OptimizerMomentsDtype = "fp32"
    mtp_layers: MtpLayers = 0
    flash_attention: bool = True
    framework: SafeStr = Field(default="megatron-core", max_length=FRAMEWORK_NAME_MAX)
    moe_dispatcher: MoeDispatcher = Field(
        default="alltoall", description="MoE token dispatcher (see the scenario schema); MoE models only"
    )
    moe_a2a_overlap: bool = Field(
        default=False, description="hide the EP all-to-alls behind the paired micro-batch (MoE models only)"
    )
    attention_backend: AttentionBackendChoice = Field(default="auto", description=ATTENTION_BACKEND_HELP)
    profile: SafeStr | None = Field(
        default=None, max_length=200, description="calibrated hardware profile (name, 'name@version' or id)"
    )
    constraints: ConstraintsIn = Field(default_factory=ConstraintsIn)
    usd_per_gpu_hour: float | None = Field(default=None, gt=0)


class PlanOut(BaseModel):
    model: str
    gpu: str
    fabric: str
    framework: str
    gpu_counts: list[int]
    seq_len: int
    global_batch: int
    tokens: float | None
    rank_by: str
    usd_per_gpu_hour: float | None
    price_source: str
    enumerated_layouts: int
    evaluated_layouts: int
    feasible_layouts: int
    rejections: dict[str, int]
    elapsed_s: float
    layouts_per_s: float
    best: dict[str, Any] | None
    top: list[dict[str, Any]]
    pareto: list[dict[str, Any]]
    pareto_size: int
    top_shapes: list[dict[str, Any]]
    heuristic: dict[str, Any]
    constraints: dict[str, Any]
    collective_calls: int
    assumptions: list[dict[str, Any]]
    accuracy: dict[str, Any] | None = Field(
        default=None,
        description="how far published runs of this kind were from their estimates, applied to the best layout "
        "(app.core.accuracy)",
    )
    recommended: dict[str, Any] | None = Field(
        default=None,
        description="the fastest ranked layout inside the validated region (layouts of kinds published runs "
        "measured, app/catalog/validated_region.json): the default recommendation; `best` may be faster and "
        "outside it (each ranked layout carries `validated` and `outside_region`, the reasons)",
    )
    region_note: str = Field(
        default="",
        description="when the fastest layout is outside the validated region: why, and what is recommended",
    )
    ranking: dict[str, Any] | None = Field(
        default=None,
        description="the ranking resolution of this kind of run (how far the estimator's speed ratio of two "
        "layouts was from the measured one in published comparisons) and how many of the top layouts are within "
        "it of the best; each entry of `top` carries `close_to_best` (app.core.accuracy.RankingResolution)",
    )


class SizesOut(BaseModel):
    model: str
    gpu: str
    fabric: str
    framework: str
    seq_len: int
    global_batch: int
    tokens: float
    usd_per_gpu_hour: float | None
    price_source: str
    deadline_s: float | None
    points: list[dict[str, Any]]
    min_gpus_that_fit: int | None
    smallest_meeting_deadline: int | None
    cheapest: int | None
    knee: int | None
    elapsed_s: float
    assumptions: list[dict[str, Any]]
    accuracy: dict[str, Any] | None = Field(
        default=None,
        description="the accuracy band of this kind of run (app.core.accuracy): measured / estimated step time",
    )
    smallest_meeting_deadline_at_high: int | None = Field(
        default=None,
        description="smallest GPU count that still meets the deadline if the run takes the band's high end "
        "(ratio_high × the estimated time; each point carries time_to_train_likely_high_days)",
    )


def parse(cls: type[BaseModel], data: Any) -> Any:
    """Validate a request document; pydantic errors become one SpecError naming every field."""
    if isinstance(data, cls):
        return data
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise SpecError(
            [
                Problem(".".join(str(x) for x in e.get("loc", ())) or "request", str(e.get("msg", "invalid")))
                for e in exc.errors()
            ]
        ) from None


def _resolve(
    model: str | dict[str, Any],
    cluster: ClusterIn,
    training: TrainingIn,
    framework: str,
    global_batch: int | None,
    global_batch_tokens: int | None,
    session: Session | None,
    profile: str | None = None,
    moe: tuple[MoeDispatcher, bool] = ("alltoall", False),
    attention_backend: AttentionBackendChoice = "auto",
) -> tuple[ResolvedScenario, int]:
    p = ProblemCollector()
    p.check(
        (global_batch is None) != (global_batch_tokens is None),
        "global_batch",
        "give the global batch either in sequences (global_batch) or in tokens (global_batch_tokens)",
    )
    seqs = global_batch
    if global_batch_tokens is not None:
        seqs = global_batch_tokens // training.seq_len
        p.check(
            global_batch_tokens % training.seq_len == 0 and seqs >= 1,
            "global_batch_tokens",
            f"{global_batch_tokens} tokens is not a whole number of {training.seq_len}-token sequences",
        )
        p.check(
            seqs <= MAX_BATCH,
            "global_batch_tokens",
            f"{global_batch_tokens} tokens are {seqs:,} sequences; at most {MAX_BATCH:,} (layout.global_batch)",
        )
    p.raise_if_any()
    assert seqs is not None
    scenario = Scenario(
        model=model,
        cluster=cluster,
        layout=LayoutIn(global_batch=seqs),
        training=training,
        framework=framework,
        profile=profile,
        moe_dispatcher=moe[0],
        moe_a2a_overlap=moe[1],
        attention_backend=attention_backend,
    )
    return resolve_scenario(scenario, session), seqs


def price_for(gpu_name: str, session: Session | None = None) -> tuple[float | None, str]:
    """The headline cloud $/GPU-hour for this GPU and its statement, under the one rule of app.core.cost
    (median of the non-stale on-demand quotes); users' rows count when a session is given."""
    from app.services.prices import headline_for_gpu

    try:
        headline = headline_for_gpu(session, gpu_name)
    except LookupError:  # a GPU the built-in catalog does not know (a user's entry) has no price rows
        headline = None
    if headline is None:
        return None, "no on-demand price for this GPU in the price book; give usd_per_gpu_hour"
    return headline.usd_per_gpu_hour, f"price book: {headline.statement}"


def run_plan(
    data: Any, session: Session | None = None
) -> tuple[PlanRequest, ResolvedScenario, str, PlanResult]:
    req: PlanRequest = parse(PlanRequest, data)
    resolved, seqs = _resolve(
        req.model,
        req.cluster,
        req.training,
        req.framework,
        req.global_batch,
        req.global_batch_tokens,
        session,
        profile=req.profile,
        moe=(req.moe_dispatcher, req.moe_a2a_overlap),
        attention_backend=req.attention_backend,
    )
    price, price_source = (
        (req.usd_per_gpu_hour, "request")
        if req.usd_per_gpu_hour
        else price_for(resolved.cluster.gpu.name, session)
    )
    result = plan(
        resolved.model,
        resolved.cluster,
        resolved.seq_len,
        seqs,
        tokens=resolved.tokens or None,
        gpu_counts=req.gpu_counts,
        dtype=req.dtype,
        flash_attention=req.flash_attention,
        constraints=req.constraints.to_core(),
        options=resolved.estimate_options(),
        profile=resolved.profile,
        rank_by=req.rank_by,
        usd_per_gpu_hour=price,
        top=max(req.top, REGION_CANDIDATES),  # trimmed to req.top by plan_out, once the region is applied
        bf16_layers=(req.bf16_first_layers, req.bf16_last_layers),
        fp8_param_gather=req.fp8_param_gather,
        optimizer_moments_dtype=req.optimizer_moments_dtype,
        mtp_layers=req.mtp_layers,
    )
    return req, resolved, price_source, result


def planned_layer_pass(model: Any, planned: dict[str, Any] | None) -> float | None:
    """GPU work per layer pass (app.core.accuracy.layer_pass_seconds) of a ranked layout's dict; None without one."""
    if not planned:
        return None
    layers_per_stage = model.num_layers / planned["layout"]["pp"]
    return layer_pass_seconds(planned["step_breakdown_s"], layers_per_stage, planned["num_microbatches"])


def plan_out(resolved: ResolvedScenario, price_source: str, result: PlanResult, top: int = 10) -> PlanOut:
    d = result.to_dict()
    best = d.get("best")
    gpus_per_node = resolved.cluster.gpus_per_node
    index = mark(d["top"], resolved.seq_len, gpus_per_node, "layout")
    recommended = d["top"][index] if index is not None else None
    region = region_note(d["top"], index, "label", "step_time_s")
    d["top"] = d["top"][:top]
    if best is not None:
        best["outside_region"] = reasons_for(best["layout"], resolved.seq_len, gpus_per_node)
        best["validated"] = not best["outside_region"]
    layer_pass = planned_layer_pass(resolved.model, best)
    band = band_for(accuracy_table(), resolved.model, resolved.seq_len, layer_pass)
    ranking = ranking_payload(resolved.model, resolved.seq_len, d["rank_by"], d["top"])
    if ranking is not None and best is not None:
        best["close_to_best"] = True  # the best is the first of `top`
    return PlanOut(
        fabric=resolved.cluster.fabric.name or "custom",
        framework=resolved.framework.name,
        price_source=price_source,
        accuracy=band.applied(best["step_time_s"], best["tokens_per_s"]) if band and best else None,
        ranking=ranking,
        recommended=recommended,
        region_note=region,
        **d,
    )


def search(data: Any, session: Session | None = None) -> PlanOut:
    req, resolved, price_source, result = run_plan(data, session)
    return plan_out(resolved, price_source, result, req.top)


def run_sizes(data: Any, session: Session | None = None) -> tuple[ResolvedScenario, str, SizingResult]:
    req: SizesRequest = parse(SizesRequest, data)
    resolved, seqs = _resolve(
        req.model,
        req.cluster,
        req.training,
        req.framework,
        req.global_batch,
        req.global_batch_tokens,
        session,
        profile=req.profile,
        moe=(req.moe_dispatcher, req.moe_a2a_overlap),
        attention_backend=req.attention_backend,
    )
    if not resolved.tokens:
        raise SpecError([Problem("training.tokens", "the size sweep needs the training tokens")])
    price, price_source = (
        (req.usd_per_gpu_hour, "request")
        if req.usd_per_gpu_hour
        else price_for(resolved.cluster.gpu.name, session)
    )
    result = size_sweep(
        resolved.model,
        resolved.cluster,
        resolved.seq_len,
        seqs,
        resolved.tokens,
        sizes=req.sizes or DEFAULT_SIZES,
        usd_per_gpu_hour=price,
        deadline_s=req.deadline_days * 86400.0 if req.deadline_days else None,
        dtype=req.dtype,
        constraints=req.constraints.to_core(),
        options=resolved.estimate_options(),
        profile=resolved.profile,
        bf16_layers=(req.bf16_first_layers, req.bf16_last_layers),
        fp8_param_gather=req.fp8_param_gather,
        optimizer_moments_dtype=req.optimizer_moments_dtype,
        mtp_layers=req.mtp_layers,
    )
    return resolved, price_source, result


def sizes(data: Any, session: Session | None = None) -> SizesOut:
    resolved, price_source, result = run_sizes(data, session)
    d = result.to_dict()
    table = accuracy_table()
    band = None  # the widest band of the sweep's points (MoE points split by their GPU work per layer pass)
    high_of: dict[int, float] = {}
    for point in d["points"]:
        best = point.get("best")
        layer_pass = planned_layer_pass(resolved.model, best)
        point_band = band_for(table, resolved.model, resolved.seq_len, layer_pass)
        if point_band is None:
            continue
        point["accuracy_regime"] = point_band.regime
        high_of[point["num_gpus"]] = point_band.ratio_high
        days = point.get("time_to_train_days")
        point["time_to_train_likely_high_days"] = days * point_band.ratio_high if days else None
        if band is None or point_band.ratio_high > band.ratio_high:
            band = point_band
    at_high = None
    if band is not None and result.deadline_s is not None:
        at_high = next(
            (
                p["num_gpus"]
                for p in d["points"]
                if p["feasible"]
                and p["time_to_train_s"]
                and p["time_to_train_s"] * high_of.get(p["num_gpus"], band.ratio_high) <= result.deadline_s
            ),
            None,
        )
    return SizesOut(
        fabric=resolved.cluster.fabric.name or "custom",
        framework=resolved.framework.name,
        price_source=price_source,
        accuracy=asdict(band) if band is not None else None,
        smallest_meeting_deadline_at_high=at_high,
        **d,
    )
