"""Evaluate a planning scenario into the JSON result a plan revision stores and the planning page shows.

One function, `evaluate`, turns the scenario dict (the shared Scenario schema) into:
- `result["summary"]`: headline figures (compared across plans, exported),
- `result["estimate"]`: the estimator's full result (`Estimate.to_dict()`),
- `result["assumptions"]`: every constant used, with its source.
Provenance (app and formula versions, price-book date, calibration profile) travels beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlmodel import Session, func, select

import app as app_pkg
from app.core.errors import Problem, SpecError
from app.core.units import DAY, GiB
from app.models.catalog import PriceRow

DEFAULT_PROFILE = "published defaults"


@dataclass
class Evaluation:
    scenario: dict[str, Any]
    result: dict[str, Any]
    app_version: str = app_pkg.__version__
    formula_version: str = app_pkg.FORMULA_VERSION
    price_book_date: str = ""
    calibration_profile: str = DEFAULT_PROFILE
    objects: dict[str, Any] = field(default_factory=dict)  # live core objects for the page (not stored)

    @classmethod
    def from_revision(cls, rev: Any) -> Evaluation:
        """Reuse a saved revision's numbers unchanged, with the provenance they were produced under."""
        return cls(
            scenario=rev.scenario,
            result=rev.result,
            app_version=rev.app_version,
            formula_version=rev.formula_version,
            price_book_date=rev.price_book_date,
            calibration_profile=rev.calibration_profile,
        )


def price_book_date(session: Session) -> str:
    newest = session.exec(select(func.max(PriceRow.price_date))).one()
    return newest.isoformat() if newest else ""


def validation_problems(exc: ValidationError, prefix: str) -> SpecError:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        path = ".".join(p for p in (prefix, loc) if p)
        problems.append(Problem(path or prefix or "scenario", str(err.get("msg", "invalid"))))
    return SpecError(problems)


def _prefixed(exc: SpecError, prefix: str) -> SpecError:
    if not prefix:
        return exc
    return SpecError([Problem(f"{prefix}.{p.field}" if p.field else prefix, p.message) for p in exc.problems])


def evaluate(
    session: Session, scenario: dict[str, Any], field_prefix: str = "", search: bool = False
) -> Evaluation:
    """Validate, resolve against the catalog (DB, so users' own rows count) and estimate."""
    try:
        from app.core.estimate import estimate
        from app.schemas.scenario import Scenario
        from app.services.scenario import resolve_scenario
    except ImportError:  # the estimator is a separate component; without it plans still save their inputs
        return Evaluation(
            scenario=scenario,
            result={"status": "unavailable", "message": "the estimator is not installed", "summary": {}},
            price_book_date=price_book_date(session),
        )

    try:
        parsed = Scenario.model_validate(scenario)
    except ValidationError as exc:
        raise validation_problems(exc, field_prefix) from None
    try:
        resolved = resolve_scenario(parsed, session)
    except SpecError as exc:
        raise _prefixed(exc, field_prefix) from None
    book_date = price_book_date(session)
    if not (session.new or session.dirty or session.deleted):
        session.rollback()  # end the read: on SQLite it holds the write lock
    try:
        est = estimate(resolved.model, resolved.cluster, resolved.layout, resolved.seq_len)
    except SpecError as exc:
        raise _prefixed(exc, field_prefix) from None
    estimate_dict = est.to_dict()
    result: dict[str, Any] = {
        "status": "ok",
        "summary": summarise(resolved, est),
        "memory": memory_payload(est.memory),
        "step": step_payload(est.step),
        "estimate": estimate_dict,
        "assumptions": estimate_dict.get("assumptions", []),
        "unavailable": {},
    }
    return Evaluation(
        scenario=parsed.model_dump(mode="json"),
        result=result,
        price_book_date=book_date,
        calibration_profile=DEFAULT_PROFILE,
        objects={"resolved": resolved, "estimate": est, "scenario": parsed},
    )


def memory_payload(memory: Any) -> dict[str, Any]:
    """Per-stage memory in bytes, in the shape the results panel and the export read."""
    return {
        "hbm_bytes": float(memory.hbm_bytes),
        "usable_bytes": float(getattr(memory, "usable_bytes", memory.hbm_bytes)),
        "most_loaded": memory.most_loaded.stage,
        "fits": bool(memory.fits),
        "margin_bytes": float(memory.margin_bytes),
        "stages": [
            {
                "stage": st.stage,
                "components": {k: float(v) for k, v in st.breakdown.items()},
                "total_bytes": float(st.total_bytes),
            }
            for st in memory.stages
        ],
    }


def step_payload(step: Any) -> dict[str, Any]:
    return {
        "breakdown_s": {k: float(v) for k, v in step.breakdown.items()},
        "total_s": float(step.total_s),
        "tokens_per_s": float(step.tokens_per_s),
        "mfu": float(step.mfu),
    }


def layout_label(layout: Any) -> str:
    parts = [f"TP{layout.tp}", f"PP{layout.pp}"]
    if getattr(layout, "vp", 1) and layout.vp > 1:
        parts.append(f"VP{layout.vp}")
    parts.append(f"DP{layout.dp}")
    if layout.cp > 1:
        parts.append(f"CP{layout.cp}")
    if layout.ep > 1:
        parts.append(f"EP{layout.ep}")
    parts.append(f"ZeRO-{layout.zero}")
    if layout.sequence_parallel:
        parts.append("SP")
    if layout.recompute != "none":
        parts.append(f"recompute={layout.recompute}")
    parts.append(f"mb={layout.micro_batch}")
    return " ".join(parts)


def summarise(resolved: Any, est: Any) -> dict[str, Any]:
    """Headline figures of one scenario: what a plan list shows and a comparison lines up."""
    cluster, layout = resolved.cluster, resolved.layout
    step = est.step
    tokens_per_s = float(step.tokens_per_s)
    seconds = float(resolved.tokens) / tokens_per_s if tokens_per_s > 0 else None
    most = est.memory.most_loaded
    peak_bytes = float(getattr(most, "total_bytes", 0.0))
    return {
        "model": resolved.model.name,
        "gpu": cluster.gpu.name,
        "num_gpus": cluster.num_gpus,
        "fabric": cluster.fabric.name,
        "layout": layout_label(layout),
        "fits": bool(est.memory.fits),
        "peak_memory_gib": round(peak_bytes / GiB, 3),
        "hbm_gib": round(cluster.gpu.hbm_bytes / GiB, 3),
        "step_time_s": round(float(step.total_s), 6),
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": round(float(step.mfu), 4),
        "model_tflops_per_gpu": round(float(step.model_tflops_per_gpu), 2),
        "time_to_train_days": round(seconds / DAY, 3) if seconds is not None else None,
        "gpu_hours": round(seconds * cluster.num_gpus / 3600.0, 1) if seconds is not None else None,
    }


# Labels and units of the figures a comparison and an export show (keys not listed are labelled by key).
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
    "tokens_per_s": ("Throughput", "tokens/s"),
    "mfu": ("MFU", "fraction"),
    "model_tflops_per_gpu": ("Model TFLOP/s per GPU", "TFLOP/s"),
    "time_to_train_days": ("Time to train", "days"),
    "gpu_hours": ("GPU-hours", "GPU·h"),
    "cost_per_run_usd": ("Cost per run", "USD"),
    "goodput": ("Goodput", "fraction"),
    "training.tokens": ("Training tokens", "tokens"),
    "training.seq_len": ("Sequence length", "tokens"),
    "cluster.nodes": ("Nodes", "nodes"),
    "cluster.gpus_per_node": ("GPUs per node", "GPUs"),
    "cluster.gpu": ("GPU type", ""),
    "cluster.fabric": ("Fabric preset", ""),
    "layout.global_batch": ("Global batch", "sequences"),
    "layout.micro_batch": ("Micro-batch", "sequences"),
    "app_version": ("App version", ""),
    "formula_version": ("Formula version", ""),
    "price_book_date": ("Price-book date", ""),
    "calibration_profile": ("Calibration profile", ""),
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
    est = result.get("estimate") or {}
    step = est.get("step") or {}
    for key, value in (step.get("breakdown") or {}).items():
        yield "step_time", key, value, "s"
    memory = est.get("memory") or {}
    for i, stage in enumerate(memory.get("stages") or []):
        if not isinstance(stage, dict):
            continue
        for key, value in stage.items():
            if isinstance(value, dict):
                for sub, v in value.items():
                    yield (
                        f"memory_stage_{i}",
                        f"{key}.{sub}",
                        v,
                        "bytes" if "bytes" in key or "breakdown" in key else "",
                    )
            else:
                yield f"memory_stage_{i}", key, value, "bytes" if key.endswith("bytes") else ""
