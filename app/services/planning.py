"""Evaluate a planning scenario into the JSON result a plan revision stores and the planning page shows.

One function, `evaluate`, turns the scenario dict (the shared Scenario schema) into:
- `result["summary"]`: headline figures (compared across plans, exported),
- `result["estimate"]`: the estimator's full result (`Estimate.to_dict()`),
- `result["assumptions"]`: every constant used, with its source.
Provenance (app and formula versions, price-book date, calibration profile) travels beside it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError
from sqlmodel import Session, func, select

import app as app_pkg
from app.core.errors import Problem, SpecError
from app.core.units import DAY, GiB
from app.errors import NotFoundError
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

    text = ref.strip()
    name, version = text, None
    head, sep, tail = text.rpartition(" v")
    if sep and tail.isdigit():
        name, version = head, int(tail)
    try:
        row = get_profile(session, name, version)
    except NotFoundError as exc:
        raise SpecError([Problem(field, str(exc))]) from None
    return hardware_profile(row.params, row.name, row.version), profile_label(row.name, row.version)


def _options(resolved: Any) -> Any:
    from app.core.estimate import EstimateOptions

    framework = getattr(resolved, "framework", None)
    return EstimateOptions(framework=framework) if framework is not None else EstimateOptions()


def evaluate(
    session: Session,
    scenario: dict[str, Any],
    field_prefix: str = "",
    search: bool = False,
    scaling: bool = True,
    profile_ref: str | None = None,
) -> Evaluation:
    """Validate, resolve against the catalog (DB, so users' own rows count), estimate, and add the
    scaling sweep, goodput and cost that the planning page shows. `profile_ref` names a calibration
    profile ("name", "name v3" or an id) whose fitted GEMM and network curves replace the defaults."""
    try:
        from app.core.estimate import estimate
    except ImportError:  # the estimator is a separate component; without it plans still save their inputs
        return Evaluation(
            scenario=scenario,
            result={"status": "unavailable", "message": "the estimator is not installed", "summary": {}},
            price_book_date=price_book_date(session),
        )
    normalised, resolved = _parse_and_resolve(session, scenario, field_prefix)
    profile, profile_label = load_profile(session, profile_ref)
    if profile is not None:
        resolved = _Profiled(resolved, profile)
    book_date = price_book_date(session)
    unavailable: dict[str, str] = {}
    ranking = None
    if search:
        ranking, best_layout, reason = _planner_search(resolved)
        if best_layout is None and ranking is not None:
            reasons = sorted(ranking["rejections"], key=lambda r: r["key"] != "out_of_memory")
            top = "; ".join(f"{r['count']:,} {r['reason']}" for r in reasons[:3])
            where = f"{field_prefix}.layout" if field_prefix else "layout"
            raise SpecError([Problem(where, f"{reason} {ranking['note']} Rejected: {top}.")])
        if best_layout is not None:
            resolved = _with_layout(resolved, best_layout)
            normalised = {**normalised, "layout": _layout_dict(best_layout, normalised.get("layout"))}
        else:
            unavailable["ranking"] = reason
    else:
        unavailable["ranking"] = (
            "Choose “Let the planner choose” to rank every layout for this model and cluster."
        )
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
    result: dict[str, Any] = {
        "status": "ok",
        "summary": summary,
        "memory": memory_payload(est.memory),
        "step": step_payload(est.step),
        "estimate": estimate_dict,
        "assumptions": list(estimate_dict.get("assumptions", [])),
        "unavailable": unavailable,
    }
    if ranking is not None:
        result["ranking"] = ranking
    if scaling:
        result["scaling"] = scaling_sweep(session, resolved, est)
    goodput_block = goodput_payload(resolved, est, summary)
    if goodput_block is None:
        unavailable["goodput"] = "The goodput model could not be evaluated for these inputs."
    else:
        result["goodput"] = goodput_block
        summary["goodput"] = goodput_block["goodput"]
    cost_block = cost_payload(session, resolved, summary)
    if isinstance(cost_block, str):
        unavailable["cost"] = cost_block
    else:
        result["cost_panel"] = cost_block
        summary["cost_per_run_usd"] = cost_block["cost_per_run_usd"]
        result["assumptions"] += cost_block.pop("assumptions", [])
    if goodput_block is not None:
        result["assumptions"] += goodput_block.pop("assumptions", [])
    if not (session.new or session.dirty or session.deleted):
        session.rollback()  # end the read: on SQLite it holds the write lock
    return Evaluation(
        scenario=normalised,
        result=result,
        price_book_date=book_date,
        calibration_profile=profile_label,
        objects={"resolved": resolved, "estimate": est},
    )


def _layout_dict(layout: Any, previous: Any) -> dict[str, Any]:
    data = layout.to_dict()
    if isinstance(previous, dict):
        return {k: data[k] for k in data if k in previous or k in _LAYOUT_KEYS}
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


# ---------------------------------------------------------------------------------------------- planner


def _planner_search(resolved: Any) -> tuple[dict[str, Any] | None, Any, str]:
    """Rank layouts with the planner; (ranking, best layout, reason when unavailable)."""
    try:
        planner = importlib.import_module("app.core.planner")
    except ImportError:
        return None, None, "The planner is not available in this build yet; choose the layout by hand."
    return _run_planner(planner, resolved)


REJECTION_TEXT = {
    "gpu_count": "tp·pp·cp does not divide the GPU count",
    "tp_vs_model": "attention heads, kv heads or FFN width not divisible by tp",
    "layers_vs_pp": "layers not divisible by pp·vp",
    "interleave_needs_pp": "interleaving (vp > 1) needs pipeline parallelism",
    "sequence_parallel_needs_tp": "sequence parallelism needs tp > 1",
    "global_batch": "global batch not divisible by dp·micro-batch",
    "interleave_microbatches": "interleaved schedule needs micro-batches to be a multiple of pp",
    "cp_vs_seq_len": "sequence length not divisible by 2·cp",
    "ep_vs_model": "experts not divisible by ep, or ep does not divide dp·cp",
    "constraints": "excluded by the allowed values",
    "heuristic_preset": "excluded by the TP-in-node / PP-in-rack heuristic",
    "out_of_memory": "most loaded stage does not fit in usable HBM",
}
PLANNER_TOP = 10


def _run_planner(planner: Any, resolved: Any) -> tuple[dict[str, Any] | None, Any, str]:
    """Search every layout for this model, cluster and global batch; rank by time to train."""
    layout = resolved.layout
    try:
        res = planner.plan(
            resolved.model,
            resolved.cluster,
            resolved.seq_len,
            layout.global_batch,
            tokens=resolved.tokens or None,
            dtype=layout.dtype,
            flash_attention=layout.flash_attention,
            options=_options(resolved),
            profile=_profile(resolved),
            top=PLANNER_TOP,
        )
    except SpecError as exc:
        return None, None, "The planner rejected these inputs: " + str(exc)
    rows = [
        {
            "rank": p.rank,
            "layout": layout_label(p.layout),
            "layout_fields": p.layout.to_dict(),
            "step_time_s": p.step_time_s,
            "mfu": p.mfu,
            "peak_memory_gib": p.memory_per_gpu_bytes / GiB,
            "headroom_gib": p.headroom_bytes / GiB,
            "time_to_train_days": p.time_to_train_s / DAY if p.time_to_train_s else None,
            "heuristic": bool(p.heuristic),
        }
        for p in res.top
    ]
    rejections = [
        {"reason": REJECTION_TEXT.get(k, k), "key": k, "count": int(v)}
        for k, v in sorted(res.rejections.items(), key=lambda kv: -kv[1])
        if v
    ]
    note = (
        f"{res.enumerated_layouts:,} layouts enumerated, {res.evaluated_layouts:,} evaluated, "
        f"{res.feasible_layouts:,} fit in memory; searched in {1000 * res.elapsed_s:.0f} ms."
    )
    heuristic = res.heuristic.to_dict() if getattr(res, "heuristic", None) is not None else {}
    ranking = {
        "rows": rows,
        "rejections": rejections,
        "note": note,
        "heuristic_note": str(heuristic.get("note", "")),
        "feasible": res.feasible_layouts,
    }
    if res.best is None:
        return ranking, None, "No layout of this model fits on this cluster with this global batch."
    return ranking, res.best.layout, ""


# ---------------------------------------------------------------------------------------------- scaling

SCALING_FABRICS = ("ib-ndr-8x400", "roce-8x400", "ethernet-tcp-100")
SCALING_STEPS = (-2, -1, 0, 1, 2, 3)  # powers of two around the chosen node count
MAX_SCALING_NODES = 1_000_000


def scaling_for(
    session: Session, scenario: dict[str, Any], profile_ref: str | None = None
) -> dict[str, Any] | None:
    """The scaling panel alone for a concrete scenario (the builder loads it after the main results)."""
    _normalised, resolved = _parse_and_resolve(session, scenario, "")
    profile, _label = load_profile(session, profile_ref)
    if profile is not None:
        resolved = _Profiled(resolved, profile)
    if not (session.new or session.dirty or session.deleted):
        session.rollback()
    return scaling_sweep(session, resolved, None)


def scaling_sweep(session: Session, resolved: Any, base: Any) -> dict[str, Any] | None:
    """Scaling efficiency and time to train vs GPU count on the chosen fabric and two others, from the
    network model's scaling curve (app.core.scaling: weak scaling, the model-parallel shape kept)."""
    from app.catalog.fabrics import find_fabric
    from app.core.estimate import estimate
    from app.core.scaling import scaling_curve

    cluster, layout = resolved.cluster, resolved.layout
    names = [cluster.fabric.name or SCALING_FABRICS[0]]
    names += [f for f in SCALING_FABRICS if f not in names][: 3 - len(names)]
    fabrics = {}
    for name in names:
        try:
            fabrics[name] = cluster.fabric if name == cluster.fabric.name else find_fabric(name)
        except LookupError:
            continue
    mp = layout.tp * layout.pp * layout.cp
    counts = sorted(
        {
            cluster.num_nodes * 2**k * cluster.gpus_per_node
            for k in SCALING_STEPS
            if 1 <= cluster.num_nodes * 2**k <= MAX_SCALING_NODES
        }
    )
    counts = [n for n in counts if n % mp == 0]
    if not counts:
        return None
    options = _options(resolved)

    calibrated = _profile(resolved)

    def estimator(model: Any, c: Any, lay: Any, seq_len: int, profile: Any = None) -> Any:
        return estimate(model, c, lay, seq_len, profile or calibrated, options=options)

    try:
        curve = scaling_curve(
            resolved.model,
            cluster,
            layout,
            resolved.seq_len,
            counts,
            fabrics,
            tokens=resolved.tokens or None,
            mode="weak",
            estimator=estimator,
        )
    except SpecError:
        return None
    points: list[dict[str, Any]] = []
    skipped = 0
    for series in curve.series:
        for p in series.points:
            if p.error is not None:
                skipped += 1
                continue
            points.append(
                {
                    "fabric": series.fabric_name,
                    "gpus": p.num_gpus,
                    "nodes": p.nodes,
                    "global_batch": p.global_batch,
                    "tokens_per_s": p.tokens_per_s,
                    "efficiency": p.scaling_efficiency,
                    "network_efficiency": p.network_efficiency,
                    "days": p.time_to_train_days,
                    "fits": p.fits_memory,
                }
            )
    if not points:
        return None
    note = "; ".join(curve.assumptions) + "."
    if skipped:
        note += f" {skipped} size/fabric points could not be estimated and are left out."
    if any(not p["fits"] for p in points):
        note += " Some points do not fit in memory (shown anyway)."
    return {"fabrics": [s.fabric_name for s in curve.series], "points": points, "note": note}


# ---------------------------------------------------------------------------------------------- goodput & cost

FAILURE_PRESET = "llama3-405b"  # Meta's published interruption rates (Llama 3 paper, Sec. 3.3.4)


def goodput_payload(resolved: Any, est: Any, summary: dict[str, Any]) -> dict[str, Any] | None:
    try:
        from app.schemas.cost import CheckpointIn, GoodputRequest
        from app.services import cost as cost_service
    except ImportError:
        return None
    cluster = resolved.cluster
    try:
        res = cost_service.goodput(
            GoodputRequest.model_validate(
                {
                    "num_gpus": cluster.num_gpus,
                    "gpus_per_node": min(cluster.gpus_per_node, 72),
                    "preset": FAILURE_PRESET,
                    "checkpoint": CheckpointIn.model_validate({"params": float(est.params_total)}),
                    "mfu": min(max(float(est.step.mfu), 1e-6), 1.0),
                    "run_days": summary.get("time_to_train_days") or None,
                }
            )
        )
    except (SpecError, ValidationError, ValueError):
        return None
    rows = [
        {"name": "Goodput (useful share of wall time)", "value": f"{100 * res.goodput:.1f}", "unit": "%"},
        {"name": "Checkpoint interval (Daly)", "value": f"{res.interval_s / 60:.1f}", "unit": "min"},
        {"name": "Checkpoint stall", "value": f"{res.checkpoint_stall_s:.1f}", "unit": "s"},
        {"name": "Restart after a failure", "value": f"{res.restart_s / 60:.1f}", "unit": "min"},
        {"name": "Job mean time between interruptions", "value": f"{res.job_mtbf_hours:.2f}", "unit": "h"},
        {"name": "Interruptions per day", "value": f"{res.interruptions_per_day:.2f}", "unit": "per day"},
    ]
    if res.effective_mfu is not None:
        rows.append(
            {"name": "Effective MFU after failures", "value": f"{100 * res.effective_mfu:.1f}", "unit": "%"}
        )
    if res.run:
        rows.append(
            {
                "name": "Interruptions during the run",
                "value": f"{res.run['interruptions']:.0f}",
                "unit": "count",
            }
        )
        rows.append(
            {"name": "Checkpoints during the run", "value": f"{res.run['checkpoints']:.0f}", "unit": "count"}
        )
        days = summary.get("time_to_train_days") or 0.0
        lost = days / res.goodput - days if res.goodput > 0 else None
        if lost is not None:
            rows.append(
                {"name": "Wall time lost to checkpoints and failures", "value": f"{lost:.1f}", "unit": "days"}
            )
    return {
        "goodput": round(float(res.goodput), 4),
        "breakdown": {k: float(v) for k, v in res.breakdown.items()},
        "rows": rows,
        "summary": f"goodput {100 * res.goodput:.1f} % with failure rates of the {FAILURE_PRESET} run",
        "assumptions": [a.model_dump() for a in res.assumptions],
    }


def cost_payload(session: Session, resolved: Any, summary: dict[str, Any]) -> dict[str, Any] | str:
    """Cost per run on each cloud price-book option for this GPU, and cloud vs on-prem over time."""
    try:
        from app.schemas.cost import OnPremIn, RunCostRequest, TcoRequest
        from app.services import cost as cost_service
    except ImportError:
        return "The cost model is not available in this build."
    cluster = resolved.cluster
    gpu_hours = summary.get("gpu_hours")
    if not gpu_hours:
        return "No time to train, so no cost."
    try:
        run = cost_service.run_cost(
            session,
            RunCostRequest.model_validate(
                {
                    "num_gpus": cluster.num_gpus,
                    "gpu_hours": float(gpu_hours),
                    "gpu": cluster.gpu.name,
                    "goodput": float(summary.get("goodput") or 1.0),
                }
            ),
        )
    except (SpecError, ValidationError, LookupError) as exc:
        return f"No cloud prices for {cluster.gpu.name} in the price book ({exc})."
    curve = None
    breakeven = ""
    try:
        tco = cost_service.tco(
            session,
            TcoRequest.model_validate(
                {
                    "onprem": OnPremIn.model_validate(
                        {"nodes": cluster.num_nodes, "gpus_per_node": min(cluster.gpus_per_node, 72)}
                    ),
                    "gpu": cluster.gpu.name,
                    "months": 60,
                }
            ),
        )
        curve = tco.curves.get("cumulative_usd_vs_month")
        parts = [
            f"{b.label}: {b.breakeven_months:.0f} months"
            for b in tco.breakevens
            if b.breakeven_months is not None
        ]
        breakeven = (
            f"On-prem at {tco.utilisation:.0%} utilisation costs {tco.usd_per_gpu_hour:.2f} USD per GPU-hour"
            + (
                f"; it breaks even against {'; '.join(parts[:4])}."
                if parts
                else "; it never breaks even against these options."
            )
        )
    except (SpecError, ValidationError, LookupError):
        curve = None
    rows: list[dict[str, Any]] = [
        {
            "option": o.label,
            "usd_per_gpu_hour": o.usd_per_gpu_hour,
            "cost_per_run_usd": o.total_usd,
            "date": o.price_date,
            "stale": o.stale,
        }
        for o in run.options
    ]
    if not rows:
        return f"No cloud prices for {cluster.gpu.name} in the price book."
    cheapest = min(rows, key=lambda r: r["cost_per_run_usd"])
    traces = []
    if curve:
        months = curve["x"]
        for label, ys in curve["series"].items():
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": label,
                    "x": months,
                    "y": [round(float(y), 2) for y in ys],
                    "line": {
                        "dash": "solid" if label == "on-prem" else "dash",
                        "width": 3 if label == "on-prem" else 1.5,
                    },
                    "hovertemplate": "month %{x}: %{y:,.0f} USD<extra>" + label + "</extra>",
                }
            )
    figure = {
        "data": traces
        or [
            {
                "type": "bar",
                "x": [r["option"] for r in rows],
                "y": [r["cost_per_run_usd"] for r in rows],
                "name": "cost per run",
            }
        ],
        "layout": {
            "xaxis": {"title": {"text": "Months" if traces else "Option"}, "automargin": True},
            "yaxis": {
                "title": {"text": "Cumulative cost (USD)" if traces else "Cost per run (USD)"},
                "automargin": True,
            },
            "legend": {"orientation": "h", "y": -0.22, "yanchor": "top"},
        },
    }
    return {
        "figure": figure,
        "rows": rows,
        "breakeven": breakeven,
        "cost_per_run_usd": round(float(cheapest["cost_per_run_usd"]), 2),
        "summary": f"cheapest cloud option {cheapest['option']}: {cheapest['cost_per_run_usd']:,.0f} USD per run",
        "assumptions": [a.model_dump() for a in run.assumptions],
    }


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
    "layout.tp": ("Tensor parallel (tp)", "GPUs"),
    "layout.pp": ("Pipeline stages (pp)", "stages"),
    "layout.vp": ("Interleaved chunks (vp)", "per stage"),
    "layout.dp": ("Data parallel (dp)", "replicas"),
    "layout.cp": ("Context parallel (cp)", "GPUs"),
    "layout.ep": ("Expert parallel (ep)", "GPUs"),
    "layout.zero": ("ZeRO stage", ""),
    "layout.sequence_parallel": ("Sequence parallel", ""),
    "layout.recompute": ("Activation recompute", ""),
    "layout.dtype": ("Compute precision", ""),
    "layout.flash_attention": ("Flash attention", ""),
    "layout.optimizer": ("Optimizer", ""),
    "framework": ("Framework conventions", ""),
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
