"""Planner mode of a planning session: every layout ranked by app.core.planner, rejections explained."""

from __future__ import annotations

import importlib
from typing import Any

from app.catalog import accuracy_table
from app.core.accuracy import ranking_resolution
from app.core.errors import SpecError
from app.core.layout import RunOptions, layout_label
from app.core.units import DAY, GiB
from app.core.validated_region import num_experts_of
from app.services.light_moe import dispatcher_alternative, light_moe_alternative
from app.services.pipeline_hint import pipeline_fill_note
from app.services.plan_costs import goodput_by_size
from app.services.region import accept_for, mark, recommended_entry, region_note


def planner_search(
    resolved: Any,
    options: Any,
    profile: Any,
    constraints: dict[str, Any] | None = None,
    rank_by: str = "time",
    usd_per_gpu_hour: float | None = None,
) -> tuple[dict[str, Any] | None, Any, str]:
    """Rank layouts with the planner; (ranking, best layout, reason when unavailable). `constraints` holds
    fields of the planner's Constraints (None: its defaults); `rank_by` "cost" orders the layouts by cost per run
    at `usd_per_gpu_hour` (by time when there is no price)."""
    try:
        planner = importlib.import_module("app.core.planner")
    except ImportError:
        return None, None, "The planner is not available in this build yet; choose the layout by hand."
    ranking, chosen, reason = _run_planner(
        planner, resolved, options, profile, constraints, rank_by, usd_per_gpu_hour
    )
    return ranking, chosen, reason


REJECTION_TEXT = {
    "gpu_count": "tp·pp·cp does not divide the GPU count",
    "tp_vs_model": "attention heads, kv heads or FFN width not divisible by tp",
    "layers_vs_pp": "layers not divisible by pp·vp",
    "interleave_needs_pp": "interleaving (vp > 1) needs pipeline parallelism",
    "sequence_parallel_needs_tp": "sequence parallelism needs tp > 1",
    "moe_tp_needs_sequence_parallel": "expert parallelism with tp > 1 needs sequence parallelism",
    "global_batch": "global batch not divisible by dp·micro-batch",
    "interleave_microbatches": "interleaved schedule needs micro-batches to be a multiple of pp",
    "cp_vs_seq_len": "sequence length not divisible by 2·cp",
    "ep_vs_model": "experts not divisible by ep, or ep does not divide dp·cp (tp·cp·dp with folding)",
    "constraints": "excluded by the allowed values",
    "heuristic_preset": "excluded by the TP-in-node / PP-in-rack heuristic",
    "out_of_memory": "most loaded stage does not fit in usable HBM",
    "host_memory": "offloaded activations or optimizer states do not fit the host memory per GPU",
    "light_moe_pass": "MoE layer passes under 20 ms of GPU work (host dispatch may set the pace)",
    "zero_stage_not_in_framework": "the framework has no such ZeRO stage (Megatron-LM of 2021: none; of 2022: "
    "the distributed optimizer only)",
    "context_parallel_not_in_framework": "the framework has no context parallelism (Megatron-LM of 2021-22, "
    "Megatron-DeepSpeed)",
    "sequence_parallel_not_in_framework": "the framework has no sequence parallelism (Megatron-LM of 2021, "
    "Megatron-DeepSpeed of 2021-22)",
    "selective_recompute_not_in_framework": "the framework has full activation recomputation only (Megatron-LM of "
    "2021, Megatron-DeepSpeed of 2021-22)",
    "interleave_pp_not_in_framework": "the framework interleaves only with pp > 2 (Megatron-LM of 2021-22)",
    "uneven_pipeline_split_not_in_framework": "the framework splits layers evenly over the stages (Megatron-LM of "
    "2021-22)",
    "pipeline_zero_not_in_framework": "the framework runs ZeRO-2/3 without pipeline parallelism only (DeepSpeed's "
    "pipeline engine)",
    "fp8_params_need_sharding": "FP8 parameters need sharded parameters (zero ≥ 1; zero = 3 for FSDP2 frameworks)",
    "bf16_moments_need_distributed_optimizer": "bf16 Adam moments need the distributed optimizer (zero ≥ 1)",
    "offload_modules_need_no_full_recompute": "fine-grained activation offloading needs no or selective recompute",
    "offload_modules_exclude_layer_offload": "fine-grained activation offloading excludes layer offloading",
}
PLANNER_TOP = 10  # ranked layouts shown (plus the recommended one when it ranks lower)
PARETO_SHOWN = 8


def ranking_payload(
    model: Any, seq_len: int, rank_by: str, top: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The ranking resolution applied to ranked layouts (dicts of PlannedLayout): marks each with `close_to_best`
    on the metric the ranking used (cost per run when ranked by cost, step time otherwise)."""
    resolution = ranking_resolution(accuracy_table(), model, seq_len)
    if resolution is None or not top:
        return None
    key = "cost_usd" if rank_by == "cost" and top[0].get("cost_usd") is not None else "step_time_s"
    applied = resolution.applied(top[0][key], [entry[key] for entry in top])
    for entry, close in zip(top, applied.pop("flags"), strict=True):
        entry["close_to_best"] = close
    applied["metric"] = key
    return applied


def _ranked_row(p: Any) -> dict[str, Any]:
    """A ranked layout (app.core.planner.PlannedLayout) as the builder shows it."""
    return {
        "rank": p.rank,
        "layout": layout_label(p.layout),
        "layout_fields": p.layout.to_dict(),
        "step_time_s": p.step_time_s,
        "mfu": p.mfu,
        "peak_memory_gib": p.memory_per_gpu_bytes / GiB,
        "headroom_gib": p.headroom_bytes / GiB,
        "time_to_train_days": p.time_to_train_s / DAY if p.time_to_train_s else None,
        "wall_clock_days": p.wall_clock_s / DAY if p.wall_clock_s else None,
        "goodput": p.goodput,
        "cost_usd": p.cost_usd,
        "heuristic": bool(p.heuristic),
    }


def _by_cost(
    rows: list[dict[str, Any]], rank_by: str, usd_per_gpu_hour: float | None
) -> tuple[list[dict[str, Any]], str]:
    """The ranked rows ordered by their cost per run (the planner's, on the wall-clock GPU-hours as the headline's:
    app.core.cost.on_wall_clock), ranks renumbered, when ranking by cost. Returns the rows and the metric they are
    ranked by ("time" when there is no price; the rows then carry no cost)."""
    if usd_per_gpu_hour is None:  # no price asked for (ranked by time) or none in the book: no cost column
        for row in rows:
            row.pop("cost_usd", None)
        return rows, "time"
    if rank_by != "cost":
        return rows, "time"
    rows = sorted(rows, key=lambda r: (r["cost_usd"] is None, r["cost_usd"] or 0.0, r["rank"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return rows, "cost"


def _recommended_row(chosen: Any, usd_per_gpu_hour: float | None) -> dict[str, Any] | None:
    """The planner's recommendation (the fastest layout inside the validated region) as a ranked row."""
    if chosen is None:
        return None
    rows, _ = _by_cost([_ranked_row(chosen)], "time", usd_per_gpu_hour)
    return rows[0]


def _run_planner(
    planner: Any,
    resolved: Any,
    options: Any,
    profile: Any,
    constraints: dict[str, Any] | None = None,
    rank_by: str = "time",
    usd_per_gpu_hour: float | None = None,
) -> tuple[dict[str, Any] | None, Any, str]:
    """Search every layout for this model, cluster and global batch; rank by time to train."""
    layout = resolved.layout
    try:
        problem = planner.SearchProblem(
            resolved.model,
            resolved.cluster,
            resolved.seq_len,
            layout.global_batch,
            run=RunOptions.of(layout),
            options=options,
            profile=profile,
            goodput=goodput_by_size(resolved, [resolved.cluster.num_gpus]),
        )
        res = planner.plan(
            problem,
            tokens=resolved.tokens or None,
            constraints=planner.Constraints(**constraints) if constraints else None,
            usd_per_gpu_hour=usd_per_gpu_hour,
            top=PLANNER_TOP,
        )
    except SpecError as exc:
        return None, None, "The planner rejected these inputs: " + str(exc)
    rows = [_ranked_row(p) for p in res.top]
    layouts = {id(row): p.layout for row, p in zip(rows, res.top, strict=True)}
    rows, ranked_by = _by_cost(rows, rank_by, usd_per_gpu_hour)
    # the Pareto front: no other layout is faster with as much free memory (one cluster size here)
    pareto = [_ranked_row(p) for p in res.pareto[:PARETO_SHOWN]]
    experts = num_experts_of(resolved.model)
    mark(pareto, resolved.seq_len, resolved.cluster.gpus_per_node, "layout_fields", experts)
    mark(rows, resolved.seq_len, resolved.cluster.gpus_per_node, "layout_fields", experts)
    accept = accept_for(resolved.seq_len, resolved.cluster.gpus_per_node, experts)
    recommended = res.recommend(accept)
    chosen_row = recommended_entry(rows, _recommended_row(recommended, usd_per_gpu_hour))
    region = region_note(rows, chosen_row, "layout", "step_time_s")
    for row in rows:
        row["recommended"] = row is chosen_row
    if chosen_row is not None and not chosen_row.get("recommended"):  # it ranks below the rows kept
        chosen_row["recommended"] = True
        layouts[id(chosen_row)] = recommended.layout
        rows = [*rows, chosen_row]
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
    applied = ranking_payload(resolved.model, resolved.seq_len, ranked_by, rows)
    resolution_note = applied["summary"] if applied else ""
    ranking = {
        "rows": rows,
        "pareto": pareto,
        "pareto_size": len(res.pareto),
        "region_note": region,
        "light_moe": light_moe_alternative(resolved, res, recommended or res.best, accept),
        "moe_dispatcher_hint": dispatcher_alternative(resolved, recommended or res.best),
        "pipeline_note": pipeline_fill_note(recommended, layout.global_batch),
        "rejections": rejections,
        "note": note,
        "resolution_note": resolution_note,
        "heuristic_note": str(heuristic.get("note", "")),
        "feasible": res.feasible_layouts,
        "rank_by": ranked_by,
        "rank_by_note": _rank_note(rank_by, ranked_by),
    }
    if res.best is None:
        return ranking, None, "No layout of this model fits on this cluster with this global batch."
    if chosen_row is not None:
        chosen = layouts[id(chosen_row)]
    elif ranked_by == "cost":
        chosen = layouts[id(rows[0])]
    else:
        chosen = res.best.layout
    return ranking, chosen, ""


def _rank_note(asked: str, ranked_by: str) -> str:
    """What the ranking's order means, in words."""
    if asked == "cost" and ranked_by != "cost":
        return (
            "Ranked by time to train: the price book has no on-demand price for this GPU, so no cost per run."
        )
    if ranked_by == "cost":
        return (
            "Ranked by cost per run (time to train × GPUs × the price book's price per GPU-hour). On one cluster "
            "size it follows time to train; the sizing panel compares costs across sizes."
        )
    return "Ranked by time to train."
