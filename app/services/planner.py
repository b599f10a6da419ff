"""Planner service: request documents in, layout search and cluster-size sweep out (API, CLI and pages share it)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlmodel import Session

from app.catalog import accuracy_table
from app.core.accuracy import band_for, totals_band
from app.core.errors import Problem, ProblemCollector, SpecError
from app.core.model import param_counts
from app.core.planner import PlanResult, SearchProblem, plan
from app.core.sizing import DEFAULT_SIZES, SizingResult, cheapest_size, size_sweep
from app.core.validated_region import num_experts_of
from app.schemas.scenario import MAX_BATCH, LayoutIn, Scenario
from app.schemas.search import (
    MAX_ALLOWED_VALUES,
    PLANNER_CONFIG,
    ConstraintsIn,
    PlanRequest,
    SearchRequestBase,
    SizesRequest,
)
from app.schemas.search_results import PlanOut, SizesOut
from app.services.catalog import Actor
from app.services.estimate import platform_caveat_text, time_to_train_payload
from app.services.light_moe import dispatcher_alternative, light_moe_alternative, planned_layer_pass
from app.services.pipeline_hint import pipeline_fill_note
from app.services.plan_costs import cluster_goodput, goodput_by_size, wall_clock_cost_usd
from app.services.plan_ranking import ranking_payload
from app.services.region import accept_for, mark, reasons_for, recommended_entry, region_note
from app.services.scenario import ResolvedScenario, resolve_scenario

__all__ = [  # the request models live in app.schemas.search; API routes and callers import them from here
    "MAX_ALLOWED_VALUES",
    "PLANNER_CONFIG",
    "ConstraintsIn",
    "PlanOut",
    "PlanRequest",
    "SearchRequestBase",
    "SizesOut",
    "SizesRequest",
    "parse",
    "plan_out",
    "planned_layer_pass",
    "price_for",
    "run_plan",
    "run_sizes",
    "search",
    "sizes",
]


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


def _resolve(req: SearchRequestBase, session: Session | None) -> tuple[ResolvedScenario, int]:
    """The request's scenario resolved (model, cluster, framework, profile) and its global batch in sequences."""
    training, global_batch, global_batch_tokens = req.training, req.global_batch, req.global_batch_tokens
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
        model=req.model,
        cluster=req.cluster,
        layout=LayoutIn(global_batch=seqs, mtp_layers=req.mtp_layers),
        training=training,
        framework=req.framework,
        profile=req.profile,
        moe_dispatcher=req.moe_dispatcher,
        moe_a2a_overlap=req.moe_a2a_overlap,
        moe_fused_grouped_gemm=req.moe_fused_grouped_gemm,
        ddp_bucket_size=req.ddp_bucket_size,
        attention_backend=req.attention_backend,
    )
    return resolve_scenario(scenario, session), seqs


def _problem(
    req: SearchRequestBase, resolved: ResolvedScenario, seqs: int, goodput: dict[int, float] | None = None
) -> SearchProblem:
    """The run a plan or size-sweep request searches: its resolved scenario, batch and run-wide options, and the
    goodput of each cluster size where the caller wants wall-clock times (`goodput_by_size`)."""
    return SearchProblem(
        resolved.model,
        resolved.cluster,
        resolved.seq_len,
        seqs,
        run=req.run_options(),
        options=resolved.estimate_options(),
        profile=resolved.profile,
        goodput=goodput,
    )


def price_for(gpu_name: str, session: Session | None = None, *, viewer: Actor) -> tuple[float | None, str]:
    """The headline cloud $/GPU-hour for this GPU and its statement, under the one rule of app.core.cost
    (median of the non-stale on-demand quotes); with a session, from the built-in rows and `viewer`'s own."""
    from app.services.prices import headline_for_gpu

    try:
        headline = headline_for_gpu(session, gpu_name, viewer=viewer)
    except LookupError:  # a GPU the built-in catalog does not know (a user's entry) has no price rows
        headline = None
    if headline is None:
        return None, "no on-demand price for this GPU in the price book; give usd_per_gpu_hour"
    return headline.usd_per_gpu_hour, f"price book: {headline.statement}"


def run_plan(
    data: Any, session: Session | None = None, *, viewer: Actor
) -> tuple[PlanRequest, ResolvedScenario, str, PlanResult]:
    """The planner's search; without usd_per_gpu_hour it ranks by `viewer`'s headline price (price_for)."""
    req: PlanRequest = parse(PlanRequest, data)
    resolved, seqs = _resolve(req, session)
    price, price_source = (
        (req.usd_per_gpu_hour, "request")
        if req.usd_per_gpu_hour
        else price_for(resolved.cluster.gpu.name, session, viewer=viewer)
    )
    counts = req.gpu_counts or [resolved.cluster.num_gpus]
    result = plan(
        _problem(req, resolved, seqs, goodput_by_size(resolved, counts)),
        tokens=resolved.tokens or None,
        gpu_counts=req.gpu_counts,
        constraints=req.constraints.to_core(),
        rank_by=req.rank_by,
        usd_per_gpu_hour=price,
        top=req.top,
    )
    return req, resolved, price_source, result


def plan_out(resolved: ResolvedScenario, price_source: str, result: PlanResult) -> PlanOut:
    d = result.to_dict()
    best = d.get("best")
    gpus_per_node = resolved.cluster.gpus_per_node
    experts = num_experts_of(resolved.model)
    mark(d["top"], resolved.seq_len, gpus_per_node, "layout", experts)
    accept = accept_for(resolved.seq_len, gpus_per_node, experts)
    chosen = result.recommend(accept)
    recommended = recommended_entry(d["top"], chosen.to_dict() if chosen else None)
    region = region_note(d["top"], recommended, "label", "step_time_s")
    if best is not None:
        best["outside_region"] = reasons_for(best["layout"], resolved.seq_len, gpus_per_node, experts)
        best["validated"] = not best["outside_region"]
    layer_pass = planned_layer_pass(resolved.model, best)
    band = band_for(
        accuracy_table(),
        resolved.model,
        resolved.seq_len,
        layer_pass,
        resolved.framework.moe_dispatcher,
        resolved.cluster.gpu.compute_capability,
    )
    ranking = ranking_payload(resolved.model, resolved.seq_len, d["rank_by"], d["top"])
    if ranking is not None and best is not None:
        best["close_to_best"] = True  # the best is the first of `top`
    return PlanOut(
        mtp_layers=resolved.model.mtp_layers,
        fabric=resolved.cluster.fabric.name or "custom",
        framework=resolved.framework.name,
        price_source=price_source,
        accuracy=_search_accuracy(band, best),
        ranking=ranking,
        recommended=recommended,
        region_note=region,
        light_moe=light_moe_alternative(resolved, result, chosen or result.best, accept),
        moe_dispatcher_hint=dispatcher_alternative(resolved, chosen or result.best),
        warnings=[*resolved.warnings, *filter(None, [pipeline_fill_note(chosen, result.global_batch)])],
        **d,
    )


def _search_accuracy(band: Any, best: dict[str, Any] | None) -> dict[str, Any] | None:
    """The best layout's accuracy band with the time-to-train range (app.core.accuracy.totals_band), where the
    search had a token budget the best layout's time to train at both ends of it, and the platform caveat."""
    if band is None or best is None:
        return None
    return {
        **band.applied(best["step_time_s"], best["tokens_per_s"]),
        **time_to_train_payload(band, best.get("time_to_train_s"), best.get("wall_clock_s")),
        **({"platform_caveat": caveat} if (caveat := platform_caveat_text(band)) else {}),
    }


def search(data: Any, session: Session | None = None, *, viewer: Actor) -> PlanOut:
    _, resolved, price_source, result = run_plan(data, session, viewer=viewer)
    return plan_out(resolved, price_source, result)


def run_sizes(
    data: Any, session: Session | None = None, *, viewer: Actor
) -> tuple[ResolvedScenario, str, SizingResult]:
    """The size sweep; without usd_per_gpu_hour it costs each size at `viewer`'s headline price (price_for)."""
    req: SizesRequest = parse(SizesRequest, data)
    resolved, seqs = _resolve(req, session)
    if not resolved.tokens:
        raise SpecError([Problem("training.tokens", "the size sweep needs the training tokens")])
    price, price_source = (
        (req.usd_per_gpu_hour, "request")
        if req.usd_per_gpu_hour
        else price_for(resolved.cluster.gpu.name, session, viewer=viewer)
    )
    result = size_sweep(
        _problem(req, resolved, seqs),
        resolved.tokens,
        sizes=req.sizes or DEFAULT_SIZES,
        usd_per_gpu_hour=price,
        deadline_s=req.deadline_days * 86400.0 if req.deadline_days else None,
        constraints=req.constraints.to_core(),
    )
    return resolved, price_source, result


def _wall_clock_points(resolved: ResolvedScenario, points: list[dict[str, Any]], price: float | None) -> None:
    """Each size's compute GPU-hours, goodput (app.services.plan_costs.cluster_goodput: Meta's Llama 3 interruption
    rates on this many GPUs, Daly checkpoints), days and GPU-hours on the wall clock (the compute ones over the
    goodput, app.services.planning.wall_clock, as the plan's headline) and cost per run on them. The compute-only
    cost moves to `compute_cost_usd`; `cost_usd` is None where the wall clock is unknown."""
    from app.services.planning import wall_clock

    params_total = param_counts(resolved.model).total
    for point in points:
        point["compute_cost_usd"] = point.get("cost_usd")
        point["cost_usd"] = None
        seconds, gpus = point.get("time_to_train_s"), int(point["num_gpus"])
        if not point.get("best") or not seconds:
            continue
        point["gpu_hours"] = seconds * gpus / 3600.0
        goodput = cluster_goodput(
            gpus, resolved.cluster.gpus_per_node, params_total, resolved.fail_slow_slowdown
        )
        if not goodput:
            continue
        point["goodput"] = goodput
        point.update(wall_clock(point))
        if price is not None:
            point["cost_usd"] = wall_clock_cost_usd(gpus, point["gpu_hours"], goodput, price)


def _sizes_accuracy(band: Any) -> dict[str, Any] | None:
    """The widest step-time band of a size sweep, with the time-to-train range it gives (app.core.accuracy
    .totals_band)."""
    if band is None:
        return None
    payload = time_to_train_payload(band)
    payload.pop("time_to_train_range_s")  # each point carries its own (time_to_train_likely_high_days)
    payload.pop("wall_clock_range_s")
    return {**asdict(band), **payload}


def sizes(data: Any, session: Session | None = None, *, viewer: Actor) -> SizesOut:
    resolved, price_source, result = run_sizes(data, session, viewer=viewer)
    d = result.to_dict()
    _wall_clock_points(resolved, d["points"], result.usd_per_gpu_hour)
    if result.usd_per_gpu_hour is not None:  # the cheapest on the wall-clock cost, as every cost of the sweep
        d["cheapest"] = cheapest_size([(p["num_gpus"], p["cost_usd"]) for p in d["points"] if p["feasible"]])
    table = accuracy_table()
    band = None  # the widest band of the sweep's points (MoE points split by their GPU work per layer pass)
    high_of: dict[int, float] = {}
    for point in d["points"]:
        best = point.get("best")
        layer_pass = planned_layer_pass(resolved.model, best)
        point_band = band_for(
            table,
            resolved.model,
            resolved.seq_len,
            layer_pass,
            resolved.framework.moe_dispatcher,
            resolved.cluster.gpu.compute_capability,
        )
        if point_band is None:
            continue
        point["accuracy_regime"] = point_band.regime
        high = totals_band(table, point_band.ratio_low, point_band.ratio_high).ratio_high
        high_of[point["num_gpus"]] = high
        days = point.get("time_to_train_days")
        point["time_to_train_likely_high_days"] = days * high if days else None
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
        accuracy=_sizes_accuracy(band),
        smallest_meeting_deadline_at_high=at_high,
        **d,
    )
