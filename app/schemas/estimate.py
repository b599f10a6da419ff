"""Response of POST /api/v1/estimate (and `clusterplan estimate --json`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


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


class MemoryOut(BaseModel):
    stages: list[StageMemoryOut]
    most_loaded_stage: int
    peak_bytes: float
    hbm_bytes: float
    safety_fraction: float
    usable_bytes: float
    margin_bytes: float = Field(description="usable HBM minus the peak; negative means it does not fit")
    fits: bool
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


class EstimateOut(BaseModel):
    model: str
    gpu: str
    num_gpus: int
    fabric: str
    framework: str
    layout: dict[str, Any]
    seq_len: int
    params: dict[str, int]
    flops_per_token: dict[str, float]
    memory: MemoryOut
    step: StepOut
    time_to_train_s: float | None = Field(description="training.tokens / tokens_per_s, when tokens is given")
    assumptions: list[AssumptionOut]
