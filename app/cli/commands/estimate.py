"""`clusterplan estimate SCENARIO.json [--json]`: memory per stage and step time for one scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.output import SECONDS_PER_DAY, days_text, likely_days, likely_wall_clock, to_json
from app.core.units import GiB


def register(root: typer.Typer) -> None:
    root.command("estimate", help="Estimate memory per pipeline stage and step time for a scenario file.")(
        estimate_command
    )


def load_json(path: Path) -> object:
    if not path.exists():
        raise FileNotFoundError(f"file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def estimate_command(
    scenario: Annotated[
        Path, typer.Argument(dir_okay=False, help="scenario JSON file (see docs/scenario.md, examples/)")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print the full result as JSON")] = False,
) -> None:
    from app.services.estimate import estimate_scenario

    data = load_json(scenario)
    if isinstance(data, dict) and data.get("profile"):
        # calibration profiles live in the database: open it only for a scenario that names one
        from sqlmodel import Session

        from app.db import get_engine
        from app.startup import prepare_database

        prepare_database()
        with Session(get_engine()) as session:
            out = estimate_scenario(data, session)
    else:
        out = estimate_scenario(data)
    if as_json:
        typer.echo(to_json(out.model_dump(mode="json"), indent=2))
        return
    typer.echo(render_text(out))


def _group_text(lay: dict[str, Any]) -> str:
    """ " (micro-batch group N)" when the layout runs a group other than pp under interleaving."""
    from types import SimpleNamespace

    from app.core.layout import microbatch_group_shown

    group = microbatch_group_shown(SimpleNamespace(**lay))
    return f" (micro-batch group {group})" if group else ""


def render_text(out: object) -> str:
    from app.core.layout import stage_layers_label
    from app.schemas.estimate import EstimateOut

    assert isinstance(out, EstimateOut)
    lay = out.layout
    lines = [
        f"{out.model} on {out.num_gpus} × {out.gpu} ({out.fabric}, {out.framework}), seq {out.seq_len}",
        f"layout: TP{lay['tp']} PP{lay['pp']} VP{lay['vp']}{_group_text(lay)} DP{lay['dp']} CP{lay['cp']} EP{lay['ep']} "
        f"ZeRO-{lay['zero']} SP={'on' if lay['sequence_parallel'] else 'off'} recompute={lay['recompute']}"
        f"{'(' + ','.join(lay['recompute_modules']) + ')' if lay.get('recompute_modules') else ''} "
        f"micro-batch {lay['micro_batch']} global batch {lay['global_batch']} {lay['dtype']}"
        + (f" offload: {lay['offload_layers']} layers' activations" if lay.get("offload_layers") else "")
        + (
            f" offload: {lay['optimizer_offload']:.0%} of the optimizer states"
            if lay.get("optimizer_offload")
            else ""
        )
        + (
            f" stage layers: {stage_layers_label(tuple(out.stage_layers))}"
            if lay.get("first_stage_layers") or lay.get("last_stage_layers")
            else ""
        ),
        f"parameters: {out.params['total'] / 1e9:.2f} B total, {out.params['active'] / 1e9:.2f} B active",
        "",
        "memory per GPU (GiB), most loaded stage "
        f"{out.memory.most_loaded_stage}: {out.memory.peak_bytes / GiB:.2f} of {out.memory.hbm_bytes / GiB:.1f} "
        f"(usable {out.memory.usable_bytes / GiB:.1f}) → {'fits' if out.memory.fits else 'DOES NOT FIT'}, "
        f"margin {out.memory.margin_bytes / GiB:+.2f}",
    ]
    if out.memory_accuracy is not None:
        lo, hi = out.memory_accuracy.peak_range_bytes
        worst = "" if out.memory_accuracy.fits_at_worst else " — the largest published miss would not fit"
        lines.append(f"  likely {lo / GiB:.1f}–{hi / GiB:.1f} GiB{worst}; {out.memory_accuracy.summary}")
    if out.memory.host_bytes:
        cap = out.memory.host_capacity_bytes
        room = (
            f" of the reference system's {cap / GiB:.0f} GiB per GPU (catalog host_memory_gib) → "
            f"{'fits' if out.memory.host_fits else 'DOES NOT FIT'}"
            if cap
            else " (host memory per GPU not in the catalog: not checked)"
        )
        host_stage = max(out.memory.stages, key=lambda st: st.host_bytes)
        what = " and ".join(
            name
            for name, held in (
                ("activations", host_stage.host_bytes - host_stage.host_optimizer_bytes),
                ("optimizer states", host_stage.host_optimizer_bytes),
            )
            if held > 0
        )
        lines.append(f"  host memory for offloaded {what}: {out.memory.host_bytes / GiB:.1f} GiB{room}")
    most = out.memory.stages[out.memory.most_loaded_stage]
    for key, value in most.breakdown_bytes.items():
        lines.append(f"  {key:<18} {value / GiB:10.2f}")
    if len(out.memory.stages) > 1:
        totals = ", ".join(f"{s.total_bytes / GiB:.1f}" for s in out.memory.stages)
        lines.append(f"  per stage: {totals}")
    step = out.step
    lines += ["", f"step time: {step.total_s:.3f} s (bottleneck stage {step.bottleneck_stage})"]
    for key, value in step.breakdown_s.items():
        share = value / step.total_s * 100 if step.total_s else 0.0
        lines.append(f"  {key:<18} {value:10.4f} s {share:6.1f} %")
    lines += [
        "",
        f"tokens/s: {step.tokens_per_s:,.0f} ({step.tokens_per_s_per_gpu:,.0f} per GPU)",
        f"model TFLOP/s per GPU: {step.model_tflops_per_gpu:.1f}  hardware: {step.hardware_tflops_per_gpu:.1f}  "
        f"MFU {step.mfu * 100:.1f} %  HFU {step.hfu * 100:.1f} %",
    ]
    if out.time_to_train_s:
        line = f"time to train: {days_text(out.time_to_train_s / SECONDS_PER_DAY)} of compute"
        if out.wall_clock_time_to_train_s and out.goodput:
            line += (
                f", {days_text(out.wall_clock_time_to_train_s / SECONDS_PER_DAY)} on the wall clock at "
                f"{out.goodput * 100:.1f} % goodput (Llama 3 interruption rates, fail-slows "
                f"{out.fail_slow_slowdown or 1:.2f}x after Greyhound), "
                f"{out.wall_clock_gpu_hours:,.0f} GPU-hours"
            )
        lines.append(line)
    lines += [f"note: {note}" for note in step.notes]
    lines += [f"warning: {w}" for w in out.warnings]
    if out.accuracy is not None:
        lo, hi = out.accuracy.step_time_range_s
        lines += [
            "",
            f"accuracy ({out.accuracy.regime}): step time likely {lo:.3f}–{hi:.3f} s",
            f"  {out.accuracy.summary}",
        ]
        if out.accuracy.advice:
            lines.append(f"  {out.accuracy.advice}")
        if out.accuracy.platform_caveat:
            lines.append(f"  caveat: {out.accuracy.platform_caveat}")
        if out.accuracy.time_to_train_range_s:
            lines += [
                f"time to train likely {likely_days(out.accuracy.time_to_train_range_s)} of compute"
                + likely_wall_clock(out.accuracy.wall_clock_range_s),
                f"  {out.accuracy.time_to_train_summary}",
            ]
    lines += ["", "assumptions:"]
    for a in out.assumptions:
        lines.append(f"  {a.name}: {a.value} {a.unit} [{a.source}]")
    return "\n".join(lines)
