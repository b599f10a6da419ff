"""Goodput and cost panels of a planning session, from the cost and goodput services."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlmodel import Session

from app.core.errors import SpecError
from app.core.model import param_counts

if TYPE_CHECKING:
    from app.services.catalog import Actor

FAILURE_PRESET = "llama3-405b"  # Meta's published interruption rates (Llama 3 paper, Sec. 3.3.4)


def plan_goodput(
    num_gpus: int,
    gpus_per_node: int,
    params_total: float,
    mfu: float,
    run_days: float | None = None,
    fail_slow: float | None = None,
) -> Any:
    """Goodput of a training job (app.services.cost.goodput): the failure rates of FAILURE_PRESET on this many
    GPUs, checkpoints of a model of `params_total` parameters, and fail-slows (`fail_slow`, the scenario's
    cluster.fail_slow_slowdown; None: the goodput model's default for the node count). Raises SpecError,
    ValidationError or ValueError."""
    from app.schemas.cost import CheckpointIn, GoodputRequest
    from app.services import cost as cost_service

    return cost_service.goodput(
        GoodputRequest.model_validate(
            {
                "num_gpus": num_gpus,
                "gpus_per_node": min(gpus_per_node, 72),
                "preset": FAILURE_PRESET,
                "checkpoint": CheckpointIn.model_validate({"params": float(params_total)}),
                "mfu": min(max(float(mfu), 1e-6), 1.0),
                "run_days": run_days,
                "fail_slow_slowdown": fail_slow,
            }
        )
    )


def goodput_share(res: Any) -> float:
    """The goodput of a plan_goodput result as every planning figure uses it (4 decimals): the headline's wall-clock
    days, GPU-hours and cost, each size of the sweep and each ranked layout divide by this one number."""
    return round(float(res.goodput), 4)


def cluster_goodput(
    num_gpus: int, gpus_per_node: int, params_total: float, fail_slow: float | None = None
) -> float | None:
    """The goodput share (goodput_share) of `num_gpus` GPUs training a model of `params_total` parameters. It
    depends on the failure rates and the checkpoint only, not on the run's speed or length (those only size
    plan_goodput's summary), so one evaluation serves every layout of one cluster. None where it cannot be
    evaluated."""
    try:
        return goodput_share(plan_goodput(num_gpus, gpus_per_node, params_total, 1.0, fail_slow=fail_slow))
    except (SpecError, ValidationError, ValueError):
        return None


def goodput_by_size(resolved: Any, counts: Sequence[int]) -> dict[int, float]:
    """The goodput share (cluster_goodput) of each of `counts` GPUs of this scenario's cluster, the sizes it cannot
    be evaluated for left out: what turns a ranked layout's compute time into the wall-clock time and cost of the
    plan headline (the planner's SearchProblem.goodput)."""
    params_total = param_counts(resolved.model).total
    gpn = resolved.cluster.gpus_per_node
    slow = resolved.fail_slow_slowdown
    shares = {int(n): cluster_goodput(int(n), gpn, params_total, slow) for n in counts}
    return {n: share for n, share in shares.items() if share}


def wall_clock_cost_usd(num_gpus: int, gpu_hours: float, goodput: float, usd_per_gpu_hour: float) -> float:
    """Cost per run at one price per GPU-hour on the wall clock, the basis of every cost on the planning pages:
    app.core.cost.run_cost's billed GPU-hours (the compute GPU-hours ÷ the goodput: failures, checkpoints,
    restarts, fail-slows) × the price, GPUs rented one by one (no instance rounding). Raises SpecError on bad inputs."""
    from app.core.cost import PriceQuote, RunInputs, run_cost

    quote = PriceQuote("price", usd_per_gpu_hour, gpus_per_instance=1)
    inputs = RunInputs(num_gpus=num_gpus, gpu_hours=gpu_hours, goodput=goodput)
    return run_cost(inputs, [quote]).options[0].total_usd


def goodput_payload(resolved: Any, est: Any, summary: dict[str, Any]) -> dict[str, Any] | None:
    cluster = resolved.cluster
    try:
        res = plan_goodput(
            cluster.num_gpus,
            cluster.gpus_per_node,
            est.params_total,
            est.step.mfu,
            summary.get("time_to_train_days") or None,
            resolved.fail_slow_slowdown,
        )
    except ImportError:
        return None
    except (SpecError, ValidationError, ValueError):
        return None
    rows = [
        {"name": "Goodput (useful share of wall time)", "value": f"{100 * res.goodput:.1f}", "unit": "%"},
        {"name": "Checkpoint interval (Daly)", "value": f"{res.interval_s / 60:.1f}", "unit": "min"},
        {"name": "Checkpoint stall", "value": f"{res.checkpoint_stall_s:.1f}", "unit": "s"},
        {"name": "Restart after a failure", "value": f"{res.restart_s / 60:.1f}", "unit": "min"},
        {"name": "Job mean time between interruptions", "value": f"{res.job_mtbf_hours:.2f}", "unit": "h"},
        {"name": "Interruptions per day", "value": f"{res.interruptions_per_day:.2f}", "unit": "per day"},
        {
            "name": "Steps slowed by fail-slows (Greyhound)",
            "value": f"{res.fail_slow_slowdown:.2f}",
            "unit": "x",
        },
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
                {
                    "name": "Wall time lost to checkpoints, failures and fail-slows",
                    "value": f"{lost:.1f}",
                    "unit": "days",
                }
            )
    return {
        "goodput": goodput_share(res),
        "breakdown": {k: float(v) for k, v in res.breakdown.items()},
        "rows": rows,
        "summary": f"goodput {100 * res.goodput:.1f} % with failure rates of the {FAILURE_PRESET} run"
        + (
            f" and steps {res.fail_slow_slowdown:.2f}x slower from fail-slows"
            if res.fail_slow_slowdown > 1
            else ""
        ),
        "assumptions": [a.model_dump() for a in res.assumptions],
    }


@dataclass(frozen=True)
class CostInputs:
    """What the cost panel reads of a scenario, and all of it (app.services.cost_panel_cache keys on it whole)."""

    gpu: str
    num_gpus: int
    num_nodes: int
    gpus_per_node: int
    gpu_hours: float
    goodput: float


def cost_inputs(resolved: Any, summary: dict[str, Any]) -> CostInputs | None:
    """The cost panel's inputs from a resolved scenario and its summary; None without a time to train."""
    cluster = resolved.cluster
    gpu_hours = summary.get("gpu_hours")
    if not gpu_hours:
        return None
    return CostInputs(
        gpu=cluster.gpu.name,
        num_gpus=cluster.num_gpus,
        num_nodes=cluster.num_nodes,
        gpus_per_node=cluster.gpus_per_node,
        gpu_hours=float(gpu_hours),
        goodput=float(summary.get("goodput") or 1.0),
    )


def cost_payload(
    session: Session, resolved: Any, summary: dict[str, Any], viewer: Actor
) -> dict[str, Any] | str:
    """Cost per run on each cloud price-book option for this GPU (the built-in rows and `viewer`'s own), and
    cloud vs on-prem over time; the same inputs at the same viewer's unchanged prices are answered from
    app.services.cost_panel_cache."""
    from app.services import cost_panel_cache

    inputs = cost_inputs(resolved, summary)
    if inputs is None:
        return "No time to train, so no cost."
    return cost_panel_cache.cached(
        session, inputs.gpu, inputs, viewer, lambda: uncached_cost_payload(session, inputs, viewer)
    )


def uncached_cost_payload(session: Session, inputs: CostInputs, viewer: Actor) -> dict[str, Any] | str:
    """The cost panel computed (cost_payload without its cache), from `inputs` alone and `viewer`'s prices."""
    try:
        from app.schemas.cost import RunCostRequest
        from app.services import cost as cost_service
    except ImportError:
        return "The cost model is not available in this build."
    try:
        run = cost_service.run_cost(
            session,
            RunCostRequest.model_validate(
                {
                    "num_gpus": inputs.num_gpus,
                    "gpu_hours": inputs.gpu_hours,
                    "gpu": inputs.gpu,
                    "goodput": inputs.goodput,
                }
            ),
            viewer=viewer,
        )
    except (SpecError, ValidationError, LookupError) as exc:
        return f"No cloud prices for {inputs.gpu} in the price book ({exc})."
    curve, breakeven = _tco_curve(session, inputs, viewer)
    rows: list[dict[str, Any]] = [
        {
            "option": o.label,
            "usd_per_gpu_hour": o.usd_per_gpu_hour,
            "cost_per_run_usd": o.total_usd,
            "billing": o.billing,
            "date": o.price_date,
            "stale": o.stale,
            "in_headline": o.in_headline,
        }
        for o in run.options
    ]
    if not rows:
        return f"No cloud prices for {inputs.gpu} in the price book."
    if run.headline is None:
        return f"No on-demand cloud price for {inputs.gpu} in the price book, so no headline cost."
    (headline,) = [o for o in run.options if o.price_id == run.headline["price_id"]][:1]
    return {
        "figure": _cost_figure(rows, curve),
        "rows": rows,
        "breakeven": breakeven,
        "cost_per_run_usd": round(float(headline.total_usd), 2),
        "headline": run.headline["statement"],
        "summary": f"{headline.total_usd:,.0f} USD per run at the headline price, "
        f"{run.headline['statement']}",
        "assumptions": [a.model_dump() for a in run.assumptions],
    }


# the cloud vs on-prem chart's horizon: 5 years, the servers' default lifetime (app.core.cost DEFAULTS)
TCO_MONTHS = 60


def _tco_curve(session: Session, inputs: CostInputs, viewer: Actor) -> tuple[dict[str, Any] | None, str]:
    """Cloud vs on-prem: the cumulative cost curves and the breakeven sentence ("" and None when the TCO cannot
    be evaluated, e.g. no on-prem server row for the GPU)."""
    from app.schemas.cost import OnPremIn, TcoRequest
    from app.services import cost as cost_service

    try:
        tco = cost_service.tco(
            session,
            TcoRequest.model_validate(
                {
                    "onprem": OnPremIn.model_validate(
                        {"nodes": inputs.num_nodes, "gpus_per_node": min(inputs.gpus_per_node, 72)}
                    ),
                    "gpu": inputs.gpu,
                    "months": TCO_MONTHS,
                }
            ),
            viewer=viewer,
        )
    except (SpecError, ValidationError, LookupError):
        return None, ""
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
    curve: dict[str, Any] | None = tco.curves.get("cumulative_usd_vs_month")
    return curve, breakeven


def _cost_figure(rows: list[dict[str, Any]], curve: dict[str, Any] | None) -> dict[str, Any]:
    """The cumulative cost of each option and on-prem over the months, or without a TCO curve the cost per run
    of each option as bars."""
    months = curve["x"] if curve else []
    series: dict[str, list[float]] = curve["series"] if curve else {}
    traces = []
    for label, ys in series.items():
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
    return {
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
