"""`clusterplan search [SCENARIO.json] [--model … --gpu … --nodes …] [--sweep] [--json]`: search every layout.

A scenario file gives the model, cluster, training and global batch (its layout's other fields are ignored:
the planner chooses them); flags override or replace it. `--sweep` answers "how many GPUs do I need".

`clusterplan plan` is the command's former name, kept as a deprecated alias: the same command, after one
warning line on stderr (stdout, --json included, is the same as `clusterplan search`'s).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from app.cli.output import days_text, likely_days, likely_wall_clock, to_json
from app.core.goodput import FAIL_SLOW_DEFAULT_TEXT
from app.core.knobs import Knob, knob
from app.core.units import DAY, GiB

HELP = (
    "Search every parallel layout (TP/PP/VP/CP/EP/DP, micro-batch, ZeRO, recompute, SP) for a model on a "
    "cluster; rank by time or cost; --sweep sizes the cluster (8 … 16,384 GPUs)."
)


class SearchInputError(ValueError):
    """Bad command-line input. A ValueError (not app.cli.main.UserError) so it also exits 2 under
    `python -m app.cli.main`, where that module runs as __main__ and its UserError is a different class."""


class DeprecatedPlanAlias(TyperCommand):
    """`clusterplan plan`: listed as deprecated in --help; when run, one warning line on stderr (in place of
    click's own "DeprecationWarning: …" line), then the command as `clusterplan search` runs it."""

    WARNING = "warning: 'clusterplan plan' is deprecated; use 'clusterplan search'"

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context
        typer.echo(self.WARNING, err=True)
        return ctx.invoke(self.callback, **ctx.params) if self.callback is not None else None


def register(root: typer.Typer) -> None:
    root.command("search", help=HELP)(search_command)
    root.command(
        "plan",
        cls=DeprecatedPlanAlias,
        deprecated=True,
        help="The former name of `clusterplan search` (same options and output).",
    )(search_command)


def knob_option(path: str) -> Any:
    """The typer option of the registry's knob at `path` ('cluster.nodes'): its flag, range or allowed values
    (shown as its metavar, checked before the search runs) and help (app.core.knobs)."""
    k = knob(path)
    if k.kind == "bool":
        return typer.Option(k.cli_flag, help=k.help)
    if k.kind == "choice":
        return typer.Option(k.cli_flag, help=k.help, metavar=f"[{k.choices_text}]", callback=_choice_check(k))
    return typer.Option(k.cli_flag, min=k.ge, max=k.le, help=k.help)


def _choice_check(k: Knob) -> Any:
    """The option's callback: a value outside the knob's choices exits 2, naming the field and its values."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in k.choices:
            raise typer.BadParameter(f"{k.path}: {k.choice_error()}, not {value!r}")
        return value

    return check


def _int_list(text: str | None, option: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise SearchInputError(f"{option}: give comma-separated integers, e.g. 8,16,32") from None


def _read_scenario(scenario: Path | None) -> dict[str, Any]:
    """The scenario file's JSON object ({} without a file); one-line errors for a missing or malformed file."""
    if scenario is None:
        return {}
    if not scenario.exists():
        raise SearchInputError(f"file not found: {scenario}")
    try:
        doc = json.loads(scenario.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SearchInputError(f"{scenario} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SearchInputError(f"{scenario}: a scenario is a JSON object")
    return doc


# a scenario's layout fields the search takes over: the precision recipe (the planner searches the rest)
_LAYOUT_FIELDS = (
    "dtype",
    "bf16_first_layers",
    "bf16_last_layers",
    "fp8_param_gather",
    "optimizer_moments_dtype",
    "mtp_layers",
)


def build_request(
    scenario: Path | None,
    model: str | None,
    gpu: str | None,
    nodes: int | None,
    gpus_per_node: int | None,
    fabric: str | None,
    seq_len: int | None,
    global_batch: int | None,
    tokens: float | None,
    framework: str | None,
) -> dict[str, Any]:
    doc = _read_scenario(scenario)
    cluster = dict(doc.get("cluster") or {})
    training = dict(doc.get("training") or {})
    given = doc.get("layout")
    layout: dict[str, Any] = given if isinstance(given, dict) else {}
    req: dict[str, Any] = {"model": model or doc.get("model")}
    for key, value in (("gpu", gpu), ("nodes", nodes), ("gpus_per_node", gpus_per_node), ("fabric", fabric)):
        if value is not None:
            cluster[key] = value
    cluster.setdefault("nodes", 1)
    if seq_len is not None:
        training["seq_len"] = seq_len
    if tokens is not None:
        training["tokens"] = tokens
    req["cluster"] = cluster
    req["training"] = training
    req["global_batch"] = global_batch or layout.get("global_batch")
    if framework or doc.get("framework"):
        req["framework"] = framework or doc.get("framework")
    # the scenario's framework-level settings travel with it (the search request takes the same fields)
    for key in (
        "attention_backend",
        "moe_dispatcher",
        "moe_a2a_overlap",
        "moe_fused_grouped_gemm",
        "ddp_bucket_size",
    ):
        if key in doc:
            req[key] = doc[key]
    req.update({key: layout[key] for key in _LAYOUT_FIELDS if layout.get(key)})
    missing = [
        name
        for name, value in (
            ("--model", req["model"]),
            ("--gpu", cluster.get("gpu")),
            ("--seq-len", training.get("seq_len")),
            ("--global-batch", req["global_batch"]),
        )
        if value is None
    ]
    if missing:
        raise SearchInputError(f"missing {', '.join(missing)} (give a scenario file or these options)")
    return req


def search_command(
    scenario: Annotated[
        Path | None, typer.Argument(dir_okay=False, help="scenario JSON (model, cluster, training, batch)")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="model catalog name")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU catalog name")] = None,
    nodes: Annotated[int | None, knob_option("cluster.nodes")] = None,
    gpus_per_node: Annotated[int | None, knob_option("cluster.gpus_per_node")] = None,
    fabric: Annotated[str | None, typer.Option("--fabric", help="fabric preset, e.g. ib-ndr-8x400")] = None,
    seq_len: Annotated[int | None, knob_option("training.seq_len")] = None,
    global_batch: Annotated[int | None, knob_option("layout.global_batch")] = None,
    tokens: Annotated[float | None, typer.Option("--tokens", help="training tokens (time to train)")] = None,
    framework: Annotated[str | None, typer.Option("--framework", help="megatron-core, nemo, …")] = None,
    dtype: Annotated[str | None, knob_option("layout.dtype")] = None,
    bf16_layers: Annotated[
        str | None,
        typer.Option(
            "--bf16-layers",
            help="with fp8 / fp4: layers kept 16-bit at the start and the end, FIRST,LAST (e.g. 2,10)",
        ),
    ] = None,
    fp8_params: Annotated[bool, knob_option("layout.fp8_param_gather")] = False,
    mtp_layers: Annotated[int | None, knob_option("layout.mtp_layers")] = None,
    optimizer_moments: Annotated[str | None, knob_option("layout.optimizer_moments_dtype")] = None,
    attention_backend: Annotated[str | None, knob_option("attention_backend")] = None,
    moe_dispatcher: Annotated[str | None, knob_option("moe_dispatcher")] = None,
    moe_a2a_overlap: Annotated[bool, knob_option("moe_a2a_overlap")] = False,
    moe_fused_grouped_gemm: Annotated[bool, knob_option("moe_fused_grouped_gemm")] = False,
    ddp_bucket_size: Annotated[int | None, knob_option("ddp_bucket_size")] = None,
    preset: Annotated[str, typer.Option("--preset", help="none | heuristic (seed rule)")] = "none",
    avoid_light_moe: Annotated[
        bool,
        typer.Option(
            "--avoid-light-moe",
            help="MoE: leave out layouts with under 20 ms of GPU work per layer pass (host-bound risk)",
        ),
    ] = False,
    rank_by: Annotated[str, typer.Option("--rank-by", help="time | cost")] = "time",
    price: Annotated[float | None, typer.Option("--price", help="$/GPU-hour (default: price book)")] = None,
    top: Annotated[int, typer.Option("--top", min=1, max=1000, help="layouts to list")] = 10,
    gpu_counts: Annotated[
        str | None, typer.Option("--gpu-counts", help="search several sizes at once, e.g. 32,64,128")
    ] = None,
    sweep: Annotated[bool, typer.Option("--sweep", help="size sweep: best layout per cluster size")] = False,
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="sizes for --sweep (default 8 … 16384)")
    ] = None,
    deadline_days: Annotated[float | None, typer.Option("--deadline-days", help="for --sweep")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the full result as JSON")] = False,
) -> None:
    from app.services import planner as svc
    from app.services.catalog import LOCAL_ADMIN  # no database: the built-in price file

    if preset not in ("none", "heuristic"):
        raise SearchInputError("--preset: choose none or heuristic")
    if rank_by not in ("time", "cost"):
        raise SearchInputError("--rank-by: choose time or cost")
    req = build_request(
        scenario, model, gpu, nodes, gpus_per_node, fabric, seq_len, global_batch, tokens, framework
    )
    req.update(
        _precision_fields(
            {
                "dtype": dtype,
                "bf16_layers": bf16_layers,
                "fp8_param_gather": fp8_params,
                "mtp_layers": mtp_layers,
                "optimizer_moments_dtype": optimizer_moments,
                "attention_backend": attention_backend,
                "ddp_bucket_size": ddp_bucket_size,
                "moe_dispatcher": moe_dispatcher,
                "moe_a2a_overlap": moe_a2a_overlap,
                "moe_fused_grouped_gemm": moe_fused_grouped_gemm,
            }
        )
    )
    req["constraints"] = {"preset": preset}
    if avoid_light_moe:
        req["constraints"]["avoid_light_moe_passes"] = True
    if price is not None:
        req["usd_per_gpu_hour"] = price
    if sweep:
        req["sizes"] = _int_list(sizes, "--sizes")
        req["deadline_days"] = deadline_days
        sized = svc.sizes(req, viewer=LOCAL_ADMIN)
        typer.echo(to_json(sized.model_dump(mode="json"), indent=2) if as_json else render_sizes(sized))
        return
    req["rank_by"] = rank_by
    req["top"] = top
    req["gpu_counts"] = _int_list(gpu_counts, "--gpu-counts")
    result = svc.search(req, viewer=LOCAL_ADMIN)
    typer.echo(to_json(result.model_dump(mode="json"), indent=2) if as_json else render_search(result))


def _precision_fields(values: dict[str, Any]) -> dict[str, Any]:
    """The request fields of the precision and framework options given on the command line (unset ones left out);
    --bf16-layers FIRST,LAST becomes bf16_first_layers and bf16_last_layers."""
    fields = {key: value for key, value in values.items() if key != "bf16_layers" and value}
    if values.get("mtp_layers") is not None:
        fields["mtp_layers"] = values["mtp_layers"]
    bf16_layers = values.get("bf16_layers")
    if bf16_layers:
        parts = [p.strip() for p in bf16_layers.split(",")]
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise SearchInputError("--bf16-layers: give two whole numbers, FIRST,LAST (e.g. 2,10)")
        fields["bf16_first_layers"], fields["bf16_last_layers"] = int(parts[0]), int(parts[1])
    return fields


def _money(usd: float | None) -> str:
    if usd is None:
        return "         -"
    return f"${usd / 1e6:8.2f} M" if usd >= 1e5 else f"${usd / 1e3:8.1f} k"


def _days(seconds: float | None) -> str:
    return f"{days_text(seconds / DAY, 1):>10}" if seconds else "         -"


def _row(p: dict[str, Any], width: int = 48) -> str:
    cost = _money(p.get("cost_usd"))
    return (
        f"{p['rank']:>3}  {p['label']:<{width}} {p['num_gpus']:>6} {p['step_time_s']:9.3f} s "
        f"{p['memory_per_gpu_bytes'] / GiB:7.1f} {p['headroom_bytes'] / GiB:7.1f} {p['mfu'] * 100:5.1f} % "
        f"{_days(p.get('time_to_train_s'))} {_days(p.get('wall_clock_s'))} {cost}"
    )


def _header(width: int) -> str:
    return (
        f"  #  {'layout':<{width}} {'GPUs':>6} {'step':>11} {'mem GiB':>7} {'free GiB':>8}   MFU"
        "     compute  wall clock   cost/run"
    )


def _time_basis(best: dict[str, Any]) -> str | None:
    """What the days and cost columns count, in words, from the best layout's goodput."""
    if not best.get("time_to_train_s"):
        return None
    if not best.get("goodput"):
        return "time to train: compute days (tokens ÷ throughput); the goodput of this cluster is unknown"
    return (
        f"time to train: compute days (tokens ÷ throughput) and wall-clock days at {best['goodput'] * 100:.1f} % "
        f"goodput on {best['num_gpus']:,} GPUs (failures, checkpoint stalls and restarts at Llama 3's interruption "
        "rates, fail-slows across nodes); cost/run on the wall-clock GPU-hours, as the plan headline's"
    )


def _precision(layout: dict[str, Any], mtp_layers: int = 0) -> str:
    """The compute dtype and the precision options every listed layout shares ("fp8, FP8 parameters, bf16 Adam
    moments"), and the model's multi-token-prediction modules."""
    parts = [str(layout.get("dtype", "bf16"))]
    first, last = layout.get("bf16_first_layers") or 0, layout.get("bf16_last_layers") or 0
    if first or last:
        parts.append(f"16-bit layers {first} + {last}")
    if layout.get("fp8_param_gather"):
        parts.append("FP8 parameters")
    if layout.get("optimizer_moments_dtype") == "bf16":
        parts.append("bf16 Adam moments")
    if mtp_layers:
        parts.append(f"{mtp_layers} MTP module(s) on the last stage")
    return ", ".join(parts)


def render_search(out: Any) -> str:
    lines = [
        f"{out.model} on {', '.join(str(n) for n in out.gpu_counts)} × {out.gpu} ({out.fabric}, {out.framework}), "
        f"seq {out.seq_len}, global batch {out.global_batch} sequences, ranked by {out.rank_by}",
        f"layouts: {out.enumerated_layouts:,} enumerated, {out.evaluated_layouts:,} evaluated, "
        f"{out.feasible_layouts:,} fit; search {out.elapsed_s * 1e3:.0f} ms ({out.layouts_per_s:,.0f} layouts/s)",
        "rejected: " + ", ".join(f"{k} {v:,}" for k, v in out.rejections.items() if v),
    ]
    if out.usd_per_gpu_hour:
        lines.append(f"price: ${out.usd_per_gpu_hour:.2f}/GPU-hour ({out.price_source})")
    if out.top:
        lines.append(f"precision: {_precision(out.top[0]['layout'], out.mtp_layers)}")
    if not out.top:
        lines.append("no layout fits: try more GPUs, a smaller micro-batch or the full recompute option")
        return "\n".join(lines)
    width = max(48, *(len(p["label"]) for p in out.top + out.pareto[:8] + out.top_shapes[:8]))
    lines += ["", _header(width)] + [
        _row(p, width)
        + ("  ≈ best" if p.get("close_to_best") and p["rank"] > 1 else "")
        + ("  (outside the validated region)" if p.get("outside_region") else "")
        for p in out.top
    ]
    basis = _time_basis(out.top[0])
    if basis:
        lines.append(basis)
    if out.recommended:
        lines += ["", f"recommended (fastest inside the validated region): rank {out.recommended['rank']}"]
        lines.append(_row(out.recommended, width))
    if out.region_note:
        lines.append(f"  {out.region_note}")
    lines += [f"  warning: {w}" for w in out.warnings]
    h = out.heuristic
    lines += ["", f"seed heuristic (TP ≤ 8 in a node, PP within 4 nodes, DP across): {h['note']}"]
    if h.get("slowdown_pct") is not None:
        within = (
            " (within the ranking resolution)"
            if out.ranking and abs(h["slowdown_pct"]) <= out.ranking["resolution_pct"]
            else ""
        )
        lines.append(
            f"  heuristic costs {h['slowdown_pct']:+.1f} % step time vs the unconstrained best{within}"
        )
    lines += ["", "best layout of each parallel shape (tp, pp, cp, ep):"]
    lines += [_row(p, width) for p in out.top_shapes[:8]]
    lines += ["", f"Pareto front (step time vs free memory vs GPUs): {out.pareto_size} layouts"]
    lines += [_row(p, width) for p in out.pareto[:8]]
    if out.accuracy:
        lo, hi = out.accuracy["step_time_range_s"]
        lines += ["", f"accuracy ({out.accuracy['regime']}): best step time likely {lo:.3f}–{hi:.3f} s"]
        lines.append(f"  {out.accuracy['summary']}")
        if out.accuracy.get("platform_caveat"):
            lines.append(f"  caveat: {out.accuracy['platform_caveat']}")
        if out.accuracy.get("time_to_train_range_s"):
            lines.append(
                f"best time to train likely {likely_days(out.accuracy['time_to_train_range_s'])} of compute"
                + likely_wall_clock(out.accuracy.get("wall_clock_range_s"))
            )
            lines.append(f"  {out.accuracy['time_to_train_summary']}")
    if out.light_moe:
        heavy = out.light_moe["heavy"]
        lines += ["", f"light MoE passes: the best heavier layout is rank {heavy['rank']}, {heavy['label']}"]
        lines.append(f"  {out.light_moe['summary']}")
    if out.moe_dispatcher_hint:
        hint = out.moe_dispatcher_hint
        step = hint["suggested"]["step_time_s"]
        lines += ["", f"MoE dispatcher: {hint['label']} on HybridEP is estimated at {step:.3g} s"]
        lines.append(f"  {hint['summary']}")
    if out.ranking:
        lines += ["", f"ranking: {out.ranking['summary']}"]
    return "\n".join(lines)


def _scaling_basis(points: list[dict[str, Any]]) -> list[str]:
    """What the sweep's scaling column measures, and why a value is above 100 % where one is."""
    fits = [p for p in points if p["feasible"] and p.get("scaling_efficiency") is not None]
    if not fits:
        return []
    base = fits[0]
    lines = [
        f"vs smallest: per-GPU throughput of each size's best layout against that of the smallest size that fits "
        f"({base['num_gpus']:,} GPUs), each size with its own layout (not the network scaling efficiency of "
        "`clusterplan network scaling`, which keeps one layout against a perfect network)"
    ]
    top = max(fits, key=lambda p: p["scaling_efficiency"])
    if top["scaling_efficiency"] > 1.0:
        lines.append(
            f"  above 100 % at {top['num_gpus']:,} GPUs: its best layout ({top['best']['label']}) runs at "
            f"{top['best']['mfu'] * 100:.1f} % MFU, the smallest size's ({base['best']['label']}) at "
            f"{base['best']['mfu'] * 100:.1f} %: the larger cluster shards the model states over more GPUs, "
            "which lets a faster layout fit"
        )
    return lines


# what the sweep's goodput column holds (app.services.plan_costs.cluster_goodput, docs/cost.md)
GOODPUT_LEGEND = (
    "wall clock: compute days ÷ goodput, the share of the run that trains: failures, restarts and checkpoint "
    f"stalls on that many GPUs, and fail-slows: {FAIL_SLOW_DEFAULT_TEXT} (a scenario's "
    "cluster.fail_slow_slowdown replaces it); cost/run is on the wall clock"
)


def render_sizes(out: Any) -> str:
    lines = [
        f"{out.model} on {out.gpu} ({out.fabric}), seq {out.seq_len}, global batch {out.global_batch}, "
        f"{out.tokens:.3g} tokens"
        + (f", ${out.usd_per_gpu_hour:.2f}/GPU-hour" if out.usd_per_gpu_hour else ""),
        "",
    ]
    width = max([48] + [len(p["best"]["label"]) for p in out.points if p["feasible"]])
    lines.append(
        f"  GPUs  {'best layout':<{width}}     compute  wall clock  goodput    cost/run  vs smallest   MFU"
    )
    for p in out.points:
        if not p["feasible"]:
            lines.append(f"{p['num_gpus']:>6}  {p['reason']}")
            continue
        b = p["best"]
        cost = _money(p.get("cost_usd"))
        wall, goodput = p.get("wall_clock_days"), p.get("goodput")
        share = f"{goodput * 100:6.1f} %" if goodput else f"{'-':>8}"
        lines.append(
            f"{p['num_gpus']:>6}  {b['label']:<{width}} {days_text(p['time_to_train_days'], 1):>11} "
            f"{_days(wall * DAY if wall else None)}  {share}  {cost}  "
            f"{p['scaling_efficiency'] * 100:6.1f} % {b['mfu'] * 100:5.1f} %"
        )
    lines += ["", GOODPUT_LEGEND, *_scaling_basis(out.points)]
    lines += [
        f"smallest cluster that fits: {out.min_gpus_that_fit or 'none'}",
        f"knee of the time-to-train curve: {out.knee or '-'} GPUs",
    ]
    if out.usd_per_gpu_hour:
        lines.append(f"cheapest run: {out.cheapest} GPUs ({out.price_source})")
    if out.deadline_s:
        lines.append(
            f"smallest cluster meeting {out.deadline_s / DAY:g} days: {out.smallest_meeting_deadline or 'none'}"
        )
        if out.accuracy:
            lines.append(
                f"  … if the run takes {out.accuracy['time_to_train_ratio_high']:.2f}× the estimate (the time-to-train "
                f"range's high end): {out.smallest_meeting_deadline_at_high or 'none'}"
            )
    return "\n".join(lines)
