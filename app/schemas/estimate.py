"""Response of POST /api/v1/estimate (and `clusterplan estimate --json`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.core.goodput import FAIL_SLOW_DEFAULT_TEXT


class AssumptionOut(BaseModel):
    name: str
    value: Any
    unit: str
    source: str


class StageMemoryOut(BaseModel):
    stage: int
    breakdown_bytes: dict[str, float] = Field(
        description="components of the peak, bytes; they sum to total_bytes"
    )
    total_bytes: float
    allocated_bytes: float = Field(description="peak allocated by the framework (torch max_memory_allocated)")
    reserved_bytes: float = Field(description="peak reserved by the caching allocator (max_memory_reserved)")
    params: float = Field(description="parameters on this GPU before ZeRO sharding")
    inflight_microbatches: float
    host_bytes: float = Field(
        default=0.0,
        description="what this GPU keeps in host memory at the peak: offloaded activations and optimizer states",
    )
    host_optimizer_bytes: float = Field(
        default=0.0, description="the optimizer states' part of host_bytes (optimizer offloading)"
    )


class MemoryOut(BaseModel):
    stages: list[StageMemoryOut]
    most_loaded_stage: int
    peak_bytes: float
    hbm_bytes: float
    safety_fraction: float
    usable_bytes: float
    margin_bytes: float = Field(description="usable HBM minus the peak; negative means it does not fit")
    host_bytes: float = Field(
        default=0.0,
        description="offloaded activations and optimizer states per GPU in host memory (most loaded stage)",
    )
    host_capacity_bytes: float | None = Field(
        default=None, description="host DRAM per GPU of the catalog's reference system; null when not known"
    )
    host_fits: bool = Field(
        default=True, description="the offloaded activations and optimizer states fit host_capacity_bytes"
    )
    fits: bool = Field(
        description="the most loaded stage fits usable HBM and what it offloads fits host DRAM"
    )
    notes: list[str]


class StepOut(BaseModel):
    breakdown_s: dict[str, float] = Field(description="components of the step, seconds; they sum to total_s")
    total_s: float
    bottleneck_stage: int
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float = Field(description="model FLOPs (no recompute) per second per GPU, 1e12")
    hardware_tflops_per_gpu: float = Field(description="executed FLOPs incl. recompute per second per GPU")
    mfu: float
    hfu: float
    stages: list[dict[str, float]]
    notes: list[str]


class AccuracyOut(BaseModel):
    regime: str = Field(
        description=(
            "kind of run: dense | dense-long-context | moe | moe-light | moe-light-hybridep | moe-long-context, or "
            "a platform caveat's runs in place of dense: dense-blackwell-300b (app.core.accuracy)"
        )
    )
    description: str
    basis: str = Field(description="which published runs the band comes from")
    runs: int
    mape_pct: float = Field(description="mean absolute speed error over those runs, per cent")
    ratio_low: float = Field(description="10th percentile of measured / estimated step time")
    ratio_median: float
    ratio_high: float = Field(description="90th percentile of measured / estimated step time")
    ratio_min: float
    ratio_max: float
    development_runs: int
    development_mape_pct: float | None
    step_time_range_s: list[float] = Field(description="step time × [ratio_low, ratio_high]")
    tokens_per_s_range: list[float] = Field(description="tokens/s ÷ [ratio_high, ratio_low]")
    summary: str
    layer_pass_s: float | None = Field(
        default=None,
        description="GPU work of one layer pass (forward + backward + recompute of one micro-batch through one "
        "layer, with its exposed TP/CP/EP traffic): a MoE estimate under 20 ms is the moe-light regime",
    )
    advice: str | None = Field(
        default=None, description="what tends to help in this regime, where there is advice"
    )
    platform_caveat: str | None = Field(
        default=None,
        description="how published runs of this kind of model on this GPU generation fared against their estimates, "
        "where they were consistently slower or faster than the band says (app.core.accuracy.PLATFORM_CAVEATS)",
    )
    time_to_train_ratio_low: float = Field(
        description="low end of the time-to-train and GPU-hours range: the step band's, or lower where whole "
        "published runs came in lower (app.core.accuracy.totals_band)"
    )
    time_to_train_ratio_high: float = Field(
        description="high end of that range: the step band's, or higher where whole published runs took longer"
    )
    time_to_train_summary: str = Field(description="what the time-to-train range rests on, in words")
    time_to_train_range_s: list[float] | None = Field(
        default=None,
        description="time to train (seconds of compute) × [time_to_train_ratio_low, time_to_train_ratio_high]; "
        "absent without a token budget",
    )
    wall_clock_range_s: list[float] | None = Field(
        default=None,
        description="time to train on the wall clock (wall_clock_time_to_train_s: compute ÷ goodput) × "
        "[time_to_train_ratio_low, time_to_train_ratio_high]; absent without a token budget or a goodput",
    )


class MemoryAccuracyOut(BaseModel):
    runs: int
    basis: str = Field(description="which published peak-memory readings the band comes from")
    mape_pct: float
    ratio_low: float = Field(description="10th percentile of measured / estimated peak memory")
    ratio_high: float = Field(description="90th percentile of measured / estimated peak memory")
    ratio_max: float = Field(description="largest measured / estimated peak memory")
    peak_range_bytes: list[float] = Field(description="most loaded stage's peak × [ratio_low, ratio_high]")
    fits_at_worst: bool = Field(description="the peak × ratio_max still fits in HBM")
    summary: str


class EstimateOut(BaseModel):
    model: str
    mtp_layers: int = Field(
        0,
        description="the model's multi-token-prediction modules (model.mtp_layers), on the last pipeline stage",
    )
    gpu: str
    num_gpus: int
    fabric: str
    framework: str
    layout: dict[str, Any]
    stage_layers: list[int] = Field(
        default_factory=list,
        description="transformer layers on each pipeline stage (all its model chunks); an uneven split gives the "
        "first and last stages their own count",
    )
    seq_len: int
    params: dict[str, int]
    flops_per_token: dict[str, float]
    memory: MemoryOut
    step: StepOut
    time_to_train_s: float | None = Field(
        description="compute time: training.tokens / tokens_per_s, when tokens is given"
    )
    goodput: float | None = Field(
        None,
        description="useful share of wall time on this many GPUs: failures, checkpoint stalls and restarts at "
        "Meta's published Llama 3 interruption rates, and steps slowed by fail-slows across nodes (Greyhound, "
        "USENIX ATC '25) (app.core.goodput); when tokens is given",
    )
    fail_slow_slowdown: float | None = Field(
        None,
        description=f"the fail-slow slowdown inside the goodput (cluster.fail_slow_slowdown, or "
        f"{FAIL_SLOW_DEFAULT_TEXT}: app.core.goodput.fail_slow_slowdown); when tokens is given",
    )
    wall_clock_time_to_train_s: float | None = Field(
        None, description="time_to_train_s / goodput: the time a run takes on the wall clock"
    )
    wall_clock_gpu_hours: float | None = Field(
        None, description="GPUs × wall_clock_time_to_train_s / 3600: the GPU-hours a run is billed"
    )
    memory_accuracy: MemoryAccuracyOut | None = Field(
        None, description="how far published peak-memory readings were from their estimates"
    )
    accuracy: AccuracyOut | None = Field(
        None,
        description="how far published runs of this kind were from their estimates (app/catalog/accuracy.json)",
    )
    assumptions: list[AssumptionOut]
    warnings: list[str] = Field(
        default_factory=list,
        description="about the calibration profile's use: measured on CPU, a dtype it has no GEMM fit for, "
        "a network fitted on another fabric",
    )
