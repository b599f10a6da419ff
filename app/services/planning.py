"""Evaluate a planning scenario into the JSON result a plan revision stores and the planning page shows.

One function, `evaluate`, turns the scenario dict (the shared Scenario schema) into:
- `result["summary"]`: headline figures (compared across plans, exported),
- `result["estimate"]`: the estimator's full result (`Estimate.to_dict()`),
- `result["assumptions"]`: every constant used, with its source.
Provenance (app and formula versions, price-book date, calibration profile) travels beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError
from sqlmodel import Session, func, select

import app as app_pkg
from app.core.cost import on_wall_clock
from app.core.errors import Problem, SpecError
from app.core.layout import layout_label
from app.core.units import DAY, GiB
from app.errors import NotFoundError
from app.models.catalog import PriceRow
from app.services.catalog import Actor, price_visibility, quoted_for
from app.services.estimate import accuracy_payload, memory_accuracy_payload
from app.services.plan_costs import cost_payload, goodput_payload
from app.services.plan_fields import FIELD_INFO, breakdown_rows, describe_field
from app.services.plan_ranking import planner_search
from app.services.plan_scaling import scaling_sweep

DEFAULT_PROFILE = "published defaults"

# Why a result has no layout ranking when the scenario fixed its layout (the builder's planner mode ranks).
RANKING_HINT = "Choose “Let the planner choose” to rank every layout for this model and cluster."
SAVED_RANKING_HINT = (
    "Saved with a fixed layout, so no layout ranking was computed. In the builder, “Let the planner choose” "
    "ranks every layout for this model and cluster."
)


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


def price_book_date(session: Session, viewer: Actor) -> str:
    """The date of the newest price row `viewer`'s figures may rest on (the built-in rows and the viewer's own)."""
    newest = session.exec(
        select(func.max(PriceRow.price_date)).where(price_visibility(quoted_for(viewer)))
    ).one()
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


def _parse_and_resolve(
    session: Session, scenario: dict[str, Any], field_prefix: str
) -> tuple[dict[str, Any], Any]:
    """Validate with the shared Scenario schema and resolve names against the DB catalog."""
    from app.schemas.scenario import Scenario
    from app.services.scenario import resolve_scenario

    try:
        parsed = Scenario.model_validate(scenario)
    except ValidationError as exc:
        raise validation_problems(exc, field_prefix) from None
    try:
        resolved = resolve_scenario(parsed, session)
    except SpecError as exc:
        raise _prefixed(exc, field_prefix) from None
    return parsed.model_dump(mode="json", exclude_none=True), resolved


@dataclass(frozen=True)
class _Profiled:
    """A resolved scenario together with the calibration profile it is evaluated under."""

    inner: Any
    profile: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _with_layout(resolved: Any, layout: Any) -> Any:
    if isinstance(resolved, _Profiled):
        return _Profiled(replace(resolved.inner, layout=layout), resolved.profile)
    return replace(resolved, layout=layout)


def _profile(resolved: Any) -> Any:
    return resolved.profile if isinstance(resolved, _Profiled) else None


def profile_label(name: str, version: int | str) -> str:
    return f"{name} v{version}"


def load_profile(session: Session, ref: str | None, field: str = "calibration_profile") -> tuple[Any, str]:
    """(HardwareProfile or None, label stored with the revision). Accepts "name", "name v3" or an id."""
    if not ref or not ref.strip() or ref.strip() == DEFAULT_PROFILE:
        return None, DEFAULT_PROFILE
    from app.calibration.profile import hardware_profile
    from app.services.calibration import get_profile
    from app.services.scenario import split_profile_ref

    try:
        row = get_profile(session, *split_profile_ref(ref.strip()))
    except (NotFoundError, ValueError) as exc:
        raise SpecError([Problem(field, str(exc))]) from None
    return hardware_profile(row.params, row.name, row.version, row.gpu_name), profile_label(
        row.name, row.version
    )


def with_profile(
    session: Session, resolved: Any, profile_ref: str | None, field: str = "calibration_profile"
) -> tuple[Any, str, list[str]]:
    """The scenario with its calibration profile applied, the profile's label and the warnings about using it:
    a profile measured on another GPU is refused on `field` (app.services.scenario.check_profile_use, the same
    check as the estimate API's)."""
    from app.services.scenario import check_profile_use

    profile, label = load_profile(session, profile_ref, field)
    if profile is None:
        return resolved, label, []
    cluster = resolved.cluster
    warnings = check_profile_use(profile, cluster.gpu, resolved.layout.dtype, cluster.fabric.name, field)
    return _Profiled(resolved, profile), label, warnings


def _options(resolved: Any) -> Any:
    from app.core.estimate import EstimateOptions

    framework = getattr(resolved, "framework", None)
    return EstimateOptions(framework=framework) if framework is not None else EstimateOptions()


@dataclass(frozen=True)
class PlannerSearch:
    """The planner's search in an evaluation: `constraints` (fields of the planner's Constraints, e.g.
    {"activation_offload": True}) shape it; `rank_by` ("time" or "cost") orders its ranking and picks the layout
    it headlines."""

    constraints: dict[str, Any] | None = None
    rank_by: str = "time"


def evaluate(
    session: Session,
    scenario: dict[str, Any],
    field_prefix: str = "",
    search: PlannerSearch | None = None,
    scaling: bool = True,
    profile_ref: str | None = None,
    *,
    viewer: Actor,
) -> Evaluation:
    """Validate, resolve against the catalog (DB, so users' own rows count), estimate, and add the
    scaling sweep, goodput and cost that the planning page shows. `profile_ref` names a calibration
    profile ("name", "name v3" or an id) whose fitted GEMM and network curves replace the defaults. With `search`
    the planner ranks the layouts and the best one is evaluated. Prices are `viewer`'s: the built-in rows of the
    price book and the viewer's own (a saved plan's are its owner's, app.services.plans.priced_as)."""
    try:
        from app.core.estimate import estimate
    except ImportError:  # the estimator is a separate component; without it plans still save their inputs
        return Evaluation(
            scenario=scenario,
            result={"status": "unavailable", "message": "the estimator is not installed", "summary": {}},
            price_book_date=price_book_date(session, viewer),
        )
    normalised, resolved = _parse_and_resolve(session, scenario, field_prefix)
    resolved, profile_label, profile_warnings = with_profile(session, resolved, profile_ref)
    book_date = price_book_date(session, viewer)
    unavailable: dict[str, str] = {}
    ranking = None
    if search is not None:
        ranking, best_layout, reason = _search(session, resolved, field_prefix, search, viewer)
        if best_layout is not None:
            resolved = _with_layout(resolved, best_layout)
            normalised = {**normalised, "layout": _layout_dict(best_layout, normalised.get("layout"))}
        else:
            unavailable["ranking"] = reason
    else:
        unavailable["ranking"] = RANKING_HINT
    try:
        est = estimate(
            resolved.model,
            resolved.cluster,
            resolved.layout,
            resolved.seq_len,
            _profile(resolved),
            options=_options(resolved),
        )
    except SpecError as exc:
        raise _prefixed(exc, field_prefix) from None
    estimate_dict = est.to_dict()
    summary = summarise(resolved, est)
    accuracy_fields, accuracy_notes, totals_ratios = accuracy_view(
        est, summary, resolved.framework.moe_dispatcher
    )
    summary.update(accuracy_fields)
    result: dict[str, Any] = {
        "status": "ok",
        "summary": summary,
        "model": model_card(resolved.model),
        "memory": memory_payload(est.memory),
        "step": step_payload(est.step),
        "estimate": estimate_dict,
        "assumptions": list(estimate_dict.get("assumptions", [])),
        "accuracy": accuracy_notes,
        "unavailable": unavailable,
    }
    if profile_warnings:
        result["warnings"] = profile_warnings
    if ranking is not None:
        result["ranking"] = ranking
    if scaling:
        result["scaling"] = scaling_sweep(resolved, _options(resolved), _profile(resolved))
    _add_goodput_and_cost(session, resolved, est, result, viewer)
    summary.update(likely_totals(summary, totals_ratios, WALL_CLOCK_TOTALS))
    if not (session.new or session.dirty or session.deleted):
        session.rollback()  # end the read: on SQLite it holds the write lock
    return Evaluation(
        scenario=normalised,
        result=result,
        price_book_date=book_date,
        calibration_profile=profile_label,
        objects={"resolved": resolved, "estimate": est},
    )


def _search(
    session: Session, resolved: Any, field_prefix: str, search: PlannerSearch, viewer: Actor
) -> tuple[dict[str, Any] | None, Any, str]:
    """The planner's ranking, its best layout (None: the reason says why) and that reason. No layout that fits
    is a 422 on the layout naming the commonest rejections, out of memory first."""
    price = _price_for_ranking(session, resolved, viewer) if search.rank_by == "cost" else None
    ranking, best_layout, reason = planner_search(
        resolved,
        _options(resolved),
        _profile(resolved),
        search.constraints,
        rank_by=search.rank_by,
        usd_per_gpu_hour=price,
    )
    if best_layout is None and ranking is not None:
        reasons = sorted(ranking["rejections"], key=lambda r: r["key"] != "out_of_memory")
        top = "; ".join(f"{r['count']:,} {r['reason']}" for r in reasons[:3])
        where = f"{field_prefix}.layout" if field_prefix else "layout"
        raise SpecError([Problem(where, f"{reason} {ranking['note']} Rejected: {top}.")])
    return ranking, best_layout, reason


def _add_goodput_and_cost(
    session: Session, resolved: Any, est: Any, result: dict[str, Any], viewer: Actor
) -> None:
    """The goodput and cost panels of `result`, their figures in its summary (wall-clock time, cost per run) and
    their assumptions after the estimate's; a panel that cannot be evaluated says why under "unavailable"."""
    summary, unavailable = result["summary"], result["unavailable"]
    goodput_block = goodput_payload(resolved, est, summary)
    if goodput_block is None:
        unavailable["goodput"] = "The goodput model could not be evaluated for these inputs."
    else:
        result["goodput"] = goodput_block
        summary["goodput"] = goodput_block["goodput"]
        summary.update(wall_clock(summary))
    cost_block = cost_payload(session, resolved, summary, viewer)
    if isinstance(cost_block, str):
        unavailable["cost"] = cost_block
    else:
        result["cost_panel"] = cost_block
        summary["cost_per_run_usd"] = cost_block["cost_per_run_usd"]
        result["assumptions"] += cost_block.pop("assumptions", [])
    if goodput_block is not None:
        result["assumptions"] += goodput_block.pop("assumptions", [])


def _price_for_ranking(session: Session, resolved: Any, viewer: Actor) -> float | None:
    """`viewer`'s headline price per GPU-hour of the scenario's GPU (None: no price, so no cost ranking)."""
    from app.services.planner import price_for

    price, _source = price_for(resolved.cluster.gpu.name, session, viewer=viewer)
    return price


def _layout_dict(layout: Any, previous: Any) -> dict[str, Any]:
    data = layout.to_dict()
    if isinstance(previous, dict):
        kept = {k: data[k] for k in data if k in previous or k in _LAYOUT_KEYS}
        # the deprecated layout.mtp_layers is the model's (app.services.scenario applies it): the scenario keeps it
        return kept | (
            {"mtp_layers": previous["mtp_layers"]} if previous.get("mtp_layers") is not None else {}
        )
    return data


_LAYOUT_KEYS = frozenset(
    {
        "tp",
        "pp",
        "vp",
        "dp",
        "cp",
        "ep",
        "zero",
        "sequence_parallel",
        "recompute",
        "micro_batch",
        "global_batch",
        "dtype",
    }
)


def fitting_alternative(
    session: Session,
    scenario: dict[str, Any],
    profile_ref: str | None = None,
    constraints: dict[str, Any] | None = None,
) -> dict[str, Any] | str:
    """For a scenario whose layout does not fit: the planner's recommendation that does (its fastest layout inside
    the validated region, else its fastest), on the same model, cluster, batch and precision (a ranking row, with
    `layout_fields`), or the reason none was found."""
    _normalised, resolved = _parse_and_resolve(session, scenario, "")
    resolved, _label, _warnings = with_profile(session, resolved, profile_ref)
    if not (session.new or session.dirty or session.deleted):
        session.rollback()
    ranking, best_layout, reason = planner_search(
        resolved, _options(resolved), _profile(resolved), constraints
    )
    if best_layout is None or ranking is None or not ranking["rows"]:
        return reason or "No layout of this model fits on this cluster with this global batch."
    rows = ranking["rows"]
    return dict(next((row for row in rows if row.get("recommended")), rows[0]))


def scaling_for(
    session: Session, scenario: dict[str, Any], profile_ref: str | None = None, mode: str = "strong"
) -> dict[str, Any] | None:
    """The scaling panel alone for a concrete scenario (the builder loads it after the main results)."""
    _normalised, resolved = _parse_and_resolve(session, scenario, "")
    resolved, _label, _warnings = with_profile(session, resolved, profile_ref)
    if not (session.new or session.dirty or session.deleted):
        session.rollback()
    return scaling_sweep(resolved, _options(resolved), _profile(resolved), mode)


def memory_payload(memory: Any) -> dict[str, Any]:
    """Per-stage memory in bytes, in the shape the results panel and the export read."""
    return {
        "hbm_bytes": float(memory.hbm_bytes),
        "usable_bytes": float(getattr(memory, "usable_bytes", memory.hbm_bytes)),
        "most_loaded": memory.most_loaded.stage,
        "fits": bool(memory.fits),
        "margin_bytes": float(memory.margin_bytes),
        "host_bytes": float(getattr(memory, "host_bytes", 0.0)),
        "host_capacity_bytes": float(getattr(memory, "host_capacity_bytes", 0.0)),
        "host_fits": bool(getattr(memory, "host_fits", True)),
        "stages": [
            {
                "stage": st.stage,
                "components": {k: float(v) for k, v in st.breakdown.items()},
                "total_bytes": float(st.total_bytes),
                "host_bytes": float(getattr(st, "host_bytes", 0.0)),
                "host_optimizer_bytes": float(getattr(st, "host_optimizer_bytes", 0.0)),
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
        "notes": [str(n) for n in step.notes],
    }


def model_card(model: Any) -> dict[str, Any]:
    """The model as the estimate read it (a catalog row or a pasted config.json): its name and shape, and its
    parameters counted from that shape (app.core.model.param_counts)."""
    from app.core.model import param_counts

    counts = param_counts(model)
    moe = model.moe
    return {
        "name": model.name,
        "family": model.family,
        "total_params": counts.total,
        "active_params": counts.active,
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "num_kv_heads": model.num_kv_heads,
        "vocab_size": model.vocab_size,
        "num_experts": moe.num_experts if moe else 0,
        "experts_per_token": moe.experts_per_token if moe else 0,
    }


def summarise(resolved: Any, est: Any) -> dict[str, Any]:
    """Headline figures of one scenario: what a plan list shows and a comparison lines up."""
    cluster, layout = resolved.cluster, resolved.layout
    step = est.step
    tokens_per_s = float(step.tokens_per_s)
    seconds = float(resolved.tokens) / tokens_per_s if tokens_per_s > 0 and resolved.tokens > 0 else None
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


def wall_clock(summary: dict[str, Any]) -> dict[str, Any]:
    """Days and GPU-hours on the wall clock: the compute time divided by the goodput (failures, checkpoint stalls
    and restarts for this cluster, app.core.goodput); empty when either is missing."""
    goodput = summary.get("goodput")
    days = summary.get("time_to_train_days")
    if not goodput or days is None or goodput <= 0:
        return {}
    out = {"wall_clock_days": round(on_wall_clock(days, goodput), 3)}
    if summary.get("gpu_hours") is not None:
        out["wall_clock_gpu_hours"] = round(on_wall_clock(summary["gpu_hours"], goodput), 1)
    return out


# the totals that scale with the time to train, and their rounding: the compute ones (in the summary when the
# accuracy band is applied) and those on the wall clock and the bill (after the goodput and cost panels)
COMPUTE_TOTALS = (("time_to_train_days", 3), ("gpu_hours", 1))
WALL_CLOCK_TOTALS = (("wall_clock_days", 3), ("wall_clock_gpu_hours", 1), ("cost_per_run_usd", 2))


def likely_totals(
    summary: dict[str, Any], ratios: tuple[float, float] | None, keys: tuple[tuple[str, int], ...]
) -> dict[str, Any]:
    """`<key>_likely_low` / `_likely_high` for each of `keys` in the summary: the figure × the time-to-train
    range's ratios (app.core.accuracy.totals_band: the step band widened by whole published runs, whose reported
    GPU-hours were compared with the wall-clock prediction where they included failures); empty without ratios."""
    if ratios is None:
        return {}
    out: dict[str, Any] = {}
    for key, digits in keys:
        if summary.get(key) is not None:
            out[f"{key}_likely_low"] = round(summary[key] * ratios[0], digits)
            out[f"{key}_likely_high"] = round(summary[key] * ratios[1], digits)
    return out


def accuracy_view(
    est: Any, summary: dict[str, Any], dispatcher: str = "alltoall"
) -> tuple[dict[str, Any], dict[str, str], tuple[float, float] | None]:
    """The estimate's accuracy bands (app.core.accuracy): headline figures for the summary (step time, and the
    time to train and GPU-hours of compute that scale with it), what they rest on in words, and the time-to-train
    range's ratios (for the wall-clock totals, likely_totals); empty and None when no band applies."""
    fields: dict[str, Any] = {}
    notes: dict[str, str] = {}
    band = accuracy_payload(est, dispatcher)
    ratios = None
    if band is not None:
        lo, hi = band["step_time_range_s"]
        fields.update(
            accuracy_regime=band["regime"],
            step_time_likely_low_s=round(lo, 6),
            step_time_likely_high_s=round(hi, 6),
        )
        ratios = (band["time_to_train_ratio_low"], band["time_to_train_ratio_high"])
        fields.update(likely_totals(summary, ratios, COMPUTE_TOTALS))
        extras = [band.get("advice"), band.get("platform_caveat")]
        notes["step"] = " ".join([band["summary"], *filter(None, extras)])
        notes["totals"] = band["time_to_train_summary"]
    mem = memory_accuracy_payload(est)
    if mem is not None:
        lo, hi = mem["peak_range_bytes"]
        fields.update(
            peak_memory_likely_low_gib=round(lo / GiB, 3),
            peak_memory_likely_high_gib=round(hi / GiB, 3),
            memory_fits_at_worst=mem["fits_at_worst"],
        )
        notes["memory"] = mem["summary"]
    return fields, notes, ratios


__all__ = [
    "DEFAULT_PROFILE",
    "FIELD_INFO",
    "Evaluation",
    "PlannerSearch",
    "breakdown_rows",
    "describe_field",
    "evaluate",
    "layout_label",
    "load_profile",
    "price_book_date",
    "profile_label",
    "scaling_for",
    "summarise",
    "validation_problems",
    "with_profile",
]
