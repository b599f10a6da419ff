"""Response bodies of the layout search and the cluster-size sweep (their requests: app.schemas.search)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PlanOut(BaseModel):
    model: str
    mtp_layers: int = Field(
        default=0,
        description="the model's multi-token-prediction modules (model.mtp_layers), on the last stage",
    )
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
        description="the fastest fitting layout inside the validated region (layouts of kinds published runs "
        "measured, app/catalog/validated_region.json), wherever it ranks (`rank`; it may be below `top`): the "
        "default recommendation; `best` may be faster and outside it (each ranked layout carries `validated` "
        "and `outside_region`, the reasons)",
    )
    region_note: str = Field(
        default="",
        description="when the fastest layout is outside the validated region: why, and what is recommended",
    )
    light_moe: dict[str, Any] | None = Field(
        default=None,
        description="MoE models whose recommended layout carries under 20 ms of GPU work per layer pass (the "
        "`moe-light` bands): `light` (that layout) and `heavy` (the best-ranked fitting layout with heavier passes "
        "inside the validated region), each with "
        "`label`, `layout`, `rank`, `step_time_s`, `layer_pass_ms`, `regime`, `ratio_median` (measured ÷ estimated step "
        "time of the median published run of its kind), `typical_step_time_s` (the estimate × that median) and, "
        "with a token budget, `typical_time_to_train_s` (compute time × that median); "
        "`heavy_expected_faster` and a `summary` sentence. The ranking stays the estimate's "
        "(app.services.light_moe)",
    )
    moe_dispatcher_hint: dict[str, Any] | None = Field(
        default=None,
        description="MoE models whose recommended layout carries light MoE layer passes on a dispatcher other than "
        "HybridEP, in a framework that offers it (megatron-core, nemo): `label`, and for `current` and `suggested` "
        "(HybridEP) the `dispatcher`, that layout's `step_time_s` and `layer_pass_ms` on it, the `regime` of its "
        "band, the band's `runs`, `ratio_median` (measured ÷ estimated step time of the median published run) and "
        "`typical_step_time_s` (the estimate × that median); and a `summary` sentence (app.services.light_moe)",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="what to doubt about the calibration profile used (measured on CPU, no GEMM fit for the "
        "run's dtype, a network fitted on another fabric); a profile of another GPU is refused (422 on profile). "
        "Also when the recommended layout idles a fifth or more of each step in the pipeline bubble: the global "
        "batch is too small for the GPUs",
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
    points: list[dict[str, Any]] = Field(
        description="one per size searched (app.core.sizing.SizePoint), with: gpu_hours (compute GPU-hours at the "
        "estimated speed, no failures); goodput, wall_clock_days and wall_clock_gpu_hours (the compute ones ÷ the "
        "goodput of that many GPUs: failures, checkpoints, restarts, fail-slows); cost_usd (USD per run: wall_clock_gpu_hours × "
        "usd_per_gpu_hour, the basis of every cost per run; null where the wall clock or the price is unknown; "
        "before 2026-12 it charged the compute GPU-hours) and compute_cost_usd (USD: gpu_hours × usd_per_gpu_hour, "
        "the cost of the compute alone)",
    )
    min_gpus_that_fit: int | None
    smallest_meeting_deadline: int | None
    cheapest: int | None = Field(
        description="GPU count with the lowest cost_usd (wall-clock GPU-hours × price), the fewer GPUs among equals"
    )
    knee: int | None
    elapsed_s: float
    assumptions: list[dict[str, Any]]
    accuracy: dict[str, Any] | None = Field(
        default=None,
        description="the accuracy band of this kind of run (app.core.accuracy): measured / estimated step time, "
        "and the time-to-train range it gives once whole published runs widen it (time_to_train_ratio_low/high)",
    )
    smallest_meeting_deadline_at_high: int | None = Field(
        default=None,
        description="smallest GPU count that still meets the deadline if the run takes the time-to-train range's "
        "high end (time_to_train_ratio_high × the estimated time; each point carries time_to_train_likely_high_days)",
    )
