"""Labels, units and flat rows of a plan's figures (compare and export), and the short layout label."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.core.knobs import KNOBS

# labels and units: the scenario knobs' from the registry (app.core.knobs), the results' and the builder's own
# choices' here
FIELD_INFO: dict[str, tuple[str, str]] = {
    "model": ("Model", ""),
    "gpu": ("GPU", ""),
    "num_gpus": ("GPUs", "GPUs"),
    "fabric": ("Fabric", ""),
    "layout": ("Layout", ""),
    "fits": ("Fits in memory", ""),
    "peak_memory_gib": ("Peak memory per GPU (most-loaded stage)", "GiB"),
    "hbm_gib": ("HBM per GPU", "GiB"),
    "step_time_s": ("Step time", "s"),
    "accuracy_regime": ("Accuracy band: kind of run", ""),
    "step_time_likely_low_s": ("Likely step time, low (accuracy band)", "s"),
    "step_time_likely_high_s": ("Likely step time, high (accuracy band)", "s"),
    "peak_memory_likely_low_gib": ("Likely peak memory, low (accuracy band)", "GiB"),
    "peak_memory_likely_high_gib": ("Likely peak memory, high (accuracy band)", "GiB"),
    "memory_fits_at_worst": ("Fits after the largest published memory miss", ""),
    "time_to_train_days_likely_low": ("Likely time to train, low (accuracy band)", "days"),
    "time_to_train_days_likely_high": ("Likely time to train, high (accuracy band)", "days"),
    "gpu_hours_likely_low": ("Likely GPU-hours, low (accuracy band)", "GPU·h"),
    "gpu_hours_likely_high": ("Likely GPU-hours, high (accuracy band)", "GPU·h"),
    "wall_clock_days_likely_low": ("Likely wall-clock time to train, low (accuracy band)", "days"),
    "wall_clock_days_likely_high": ("Likely wall-clock time to train, high (accuracy band)", "days"),
    "wall_clock_gpu_hours_likely_low": ("Likely wall-clock GPU-hours, low (accuracy band)", "GPU·h"),
    "wall_clock_gpu_hours_likely_high": ("Likely wall-clock GPU-hours, high (accuracy band)", "GPU·h"),
    "cost_per_run_usd_likely_low": ("Likely cost per run, low (accuracy band)", "USD"),
    "cost_per_run_usd_likely_high": ("Likely cost per run, high (accuracy band)", "USD"),
    "tokens_per_s": ("Throughput", "tokens/s"),
    "mfu": ("MFU", "fraction"),
    "model_tflops_per_gpu": ("Model TFLOP/s per GPU", "TFLOP/s"),
    "time_to_train_days": ("Time to train, compute (no failures)", "days"),
    "gpu_hours": ("GPU-hours, compute (no failures)", "GPU·h"),
    "wall_clock_days": ("Time to train, wall clock (failures, checkpoints, restarts, fail-slows)", "days"),
    "wall_clock_gpu_hours": ("GPU-hours, wall clock (failures, checkpoints, restarts, fail-slows)", "GPU·h"),
    "cost_per_run_usd": ("Cost per run (wall-clock GPU-hours at the headline price)", "USD"),
    "goodput": ("Goodput (useful share of wall time)", "fraction"),
    "training.tokens": ("Training tokens", "tokens"),
    "cluster.gpu": ("GPU type", ""),
    "cluster.fabric": ("Fabric preset", ""),
    # the builder's choices saved with a revision (app.web.pages._builder.SAVED_CHOICES)
    "mode": ("Layout chosen by", ""),
    "rank_by": ("Layouts ranked by", ""),
    "scaling_mode": ("Scaling panel", ""),
    "deadline_days": ("Finish within", "days"),
    "budget_usd": ("Budget", "USD"),
    "plan_offload": ("Planner may offload activations", ""),
    "plan_optimizer_offload": ("Planner may offload optimizer states", ""),
    "plan_avoid_light_moe": ("Planner avoids light MoE layer passes", ""),
    "framework": ("Framework conventions", ""),
    "app_version": ("App version", ""),
    "formula_version": ("Formula version", ""),
    "price_book_date": ("Price-book date", ""),
    "calibration_profile": ("Calibration profile", ""),
    **{k.path: (k.compare_label, k.unit) for k in KNOBS},
}


def describe_field(section: str, key: str) -> tuple[str, str]:
    label, unit = FIELD_INFO.get(key, (key, ""))
    if key.endswith("_bytes"):
        unit = unit or "bytes"
    elif key.endswith("_s"):
        unit = unit or "s"
    return label, unit


def breakdown_rows(result: dict[str, Any]) -> Iterator[tuple[str, str, Any, str]]:
    """(section, key, value, unit) rows of the stored breakdowns, for CSV export."""
    step = result.get("step") or {}
    for key, value in (step.get("breakdown_s") or {}).items():
        yield "step_time", key, value, "s"
    memory = result.get("memory") or {}
    for stage in memory.get("stages") or []:
        section = f"memory_stage_{stage.get('stage')}"
        for key, value in (stage.get("components") or {}).items():
            yield section, key, value, "bytes"
        yield section, "total", stage.get("total_bytes"), "bytes"
    for point in (result.get("scaling") or {}).get("points") or []:
        key = f"{point['fabric']}@{point['gpus']}"
        yield "scaling_efficiency", key, point.get("efficiency"), "fraction"
        yield "scaling_time_to_train", key, point.get("days"), "days"
    for row in (result.get("cost_panel") or {}).get("rows") or []:
        yield "cost_per_run", row["option"], row["cost_per_run_usd"], "USD"
    for key, value in ((result.get("goodput") or {}).get("breakdown") or {}).items():
        yield "goodput_per_useful_second", key, value, "s"
