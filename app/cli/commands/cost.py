"""`clusterplan cost …`: cost per run, TCO, breakeven, goodput, storage tiers, spot, Epoch AI methods.

Every command prints a readable summary, or the API's JSON with --json. Bad input prints one message per
field and exits with status 2.

The command line works on the local database as its operator (app.services.catalog.LOCAL_ADMIN): `cost prices`
lists every row, users' included, and `--price-row` may name any row; the default quotes of `--gpu` and the headline
are the built-in rows only, the price book every anonymous caller is quoted from (no user's row moves them).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from app.cli.output import days_text, to_json
from app.core import price_age
from app.core.errors import Problem, SpecError
from app.core.goodput import FAIL_SLOW_DEFAULT_TEXT
from app.schemas import cost as s

M = TypeVar("M", bound=BaseModel)

JsonOpt = Annotated[bool, typer.Option("--json", help="print the full JSON result")]
# the parallel filesystem's bandwidth, shared by the goodput and storage commands
ParallelFsOpt = Annotated[
    float | None, typer.Option(help="parallel-filesystem aggregate GB/s (default scales with nodes)")
]
StorageNodesOpt = Annotated[
    int | None,
    typer.Option(help="parallel-filesystem storage nodes (with --parallel-fs-gb-per-s-per-storage-node)"),
]
StorageNodeGbpsOpt = Annotated[
    float | None, typer.Option(help="GB/s of one storage node (datasheet or measured)")
]


def parallel_fs_fields(
    aggregate_gb_per_s: float | None, storage_nodes: int | None, gb_per_s_per_storage_node: float | None
) -> dict[str, float | int | None]:
    """The request fields of the parallel filesystem's bandwidth options."""
    return {
        "parallel_fs_gb_per_s": aggregate_gb_per_s,
        "parallel_fs_storage_nodes": storage_nodes,
        "parallel_fs_gb_per_s_per_storage_node": gb_per_s_per_storage_node,
    }


PriceOpt = Annotated[
    list[float] | None, typer.Option("--price", help="inline cloud price, USD per GPU-hour (repeatable)")
]
PriceRowOpt = Annotated[list[str] | None, typer.Option("--price-row", help="price-book row id (repeatable)")]
GpuOpt = Annotated[str | None, typer.Option("--gpu", help="catalog GPU (peak FLOP/s, default price rows)")]
ScenarioOpt = Annotated[
    Path | None,
    typer.Option(
        "--scenario", dir_okay=False, help="estimator scenario file (JSON or YAML): step time, GPUs, size"
    ),
]


def register(root: typer.Typer) -> None:
    app = typer.Typer(
        help="Cost per run, on-prem TCO, breakeven, goodput, storage, spot.", no_args_is_help=True
    )
    app.command("run", help="Cost of one training run under each pricing option.")(run)
    app.command("tco", help="On-prem TCO, $/GPU-hour at a utilisation, breakeven vs cloud.")(tco)
    app.command("breakeven", help="Breakeven months and utilisation of buying vs renting.")(breakeven)
    app.command("goodput", help="Interruptions, checkpoint interval, restarts → goodput, effective MFU.")(
        goodput
    )
    app.command("storage", help="Checkpoint size/write time per tier (p99) and data-loading bandwidth.")(
        storage
    )
    app.command("spot", help="Net savings of spot vs on-demand after preemptions.")(spot)
    app.command("epoch", help="Epoch AI's three cost methods for a training run.")(epoch)
    app.command("presets", help="Failure-rate presets from published runs.")(presets)
    app.command("prices", help="The price book with dates, sources and staleness.")(prices)
    app.command("seed-claims", help="The seed article's cost claims against the model (the docs' table).")(
        seed_claims
    )
    root.add_typer(app, name="cost")


# --- helpers ---------------------------------------------------------------------------------------------


def build(model: type[M], data: dict[str, Any]) -> M:
    """Validate like the API does; field errors become a SpecError (one line per field, exit 2)."""
    try:
        return model.model_validate({k: v for k, v in data.items() if v is not None})
    except ValidationError as exc:
        raise SpecError(
            [Problem(".".join(str(p) for p in e["loc"]) or "input", e["msg"]) for e in exc.errors()]
        ) from None


def _options(
    prices: list[float] | None, rows: list[str] | None, commitment: float | None, per_instance: int | None
):  # type: ignore[no-untyped-def]
    opts: list[dict[str, Any]] = []
    for p in prices or []:
        opts.append(
            {"usd_per_gpu_hour": p, "commitment_months": commitment, "gpus_per_instance": per_instance}
        )
    for r in rows or []:
        opts.append({"price_row_id": r, "commitment_months": commitment, "gpus_per_instance": per_instance})
    return [{k: v for k, v in o.items() if v is not None} for o in opts]


def _scenario(path: Path | None) -> dict[str, Any] | None:
    """Read a scenario document (JSON or YAML) for the estimator."""
    if path is None:
        return None
    if not path.exists():
        raise FileNotFoundError(f"file not found: {path}")
    import yaml

    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not a JSON/YAML scenario ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a scenario is a JSON/YAML object")
    return data


def _needs_db(rows: list[str] | None, prices: list[float] | None, gpu: str | None) -> bool:
    return bool(rows) or (not prices and gpu is not None)


def _prepare_db() -> None:
    from app.startup import prepare_database

    prepare_database()


def _echo_json(model: BaseModel) -> None:
    typer.echo(to_json(model.model_dump(mode="json"), indent=2))


def usd(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if abs(x) >= 1e6:
        return f"${x / 1e6:,.2f}M"
    return f"${x:,.0f}" if abs(x) >= 100 else f"${x:,.2f}"


def _months(x: float | None) -> str:
    return "never" if x is None else f"{x:.1f} months"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f}"


def _pct(x: float | None) -> str:
    return "never (>100 %)" if x is None else f"{x:.0%}"


# --- commands --------------------------------------------------------------------------------------------


def run(
    gpus: Annotated[
        int | None, typer.Option("--gpus", help="GPUs used by the run (else from --scenario)")
    ] = None,
    scenario: ScenarioOpt = None,
    gpu_hours: Annotated[float | None, typer.Option(help="productive GPU-hours (else from FLOPs)")] = None,
    params: Annotated[float | None, typer.Option(help="total parameters, e.g. 70e9")] = None,
    active_params: Annotated[float | None, typer.Option(help="MoE active parameters per token")] = None,
    tokens: Annotated[float | None, typer.Option(help="training tokens, e.g. 2e12")] = None,
    mfu: Annotated[float | None, typer.Option(help="model FLOPs utilisation, 0-1")] = None,
    goodput: Annotated[float, typer.Option(help="useful / billed time, 0-1")] = 1.0,
    gpu: GpuOpt = None,
    dtype: Annotated[str, typer.Option(help="bf16 | fp16 | fp8 | fp4")] = "bf16",
    peak_tflops: Annotated[float | None, typer.Option(help="dense peak TFLOP/s per GPU")] = None,
    price: PriceOpt = None,
    price_row: PriceRowOpt = None,
    commitment_months: Annotated[
        float | None, typer.Option(help="minimum billed term of the options")
    ] = None,
    gpus_per_instance: Annotated[int | None, typer.Option(help="GPUs per rented instance")] = None,
    json_out: JsonOpt = False,
) -> None:
    from app.services import cost as svc
    from app.services.catalog import LOCAL_ADMIN

    req = build(
        s.RunCostRequest,
        {
            "num_gpus": gpus,
            "scenario": _scenario(scenario),
            "gpu_hours": gpu_hours,
            "params": params,
            "active_params": active_params,
            "tokens": tokens,
            "mfu": mfu,
            "goodput": goodput,
            "gpu": gpu,
            "dtype": dtype,
            "peak_tflops": peak_tflops,
            "options": _options(price, price_row, commitment_months, gpus_per_instance),
        },
    )
    if _needs_db(price_row, price, gpu):
        _prepare_db()
    result = svc.run_cost(None, req, viewer=LOCAL_ADMIN)
    if json_out:
        _echo_json(result)
        return
    typer.echo(
        f"productive GPU-hours {result.productive_gpu_hours:,.0f}   billed {result.billed_gpu_hours:,.0f}   "
        f"wall clock {days_text(result.wall_clock_hours / 24, digits=1)}"
    )
    for o in result.options:
        flag = " [stale price]" if o.stale else ""
        typer.echo(f"  {o.label}: {usd(o.total_usd)} at ${o.usd_per_gpu_hour:.2f}/GPU-h{flag}; {o.billing}")
        for k, v in o.breakdown.items():
            if v:
                typer.echo(f"      {k:<18} {usd(v)}")
    typer.echo(f"cheapest: {result.cheapest}")
    if result.headline is not None:
        typer.echo(f"headline: {result.headline['statement']}")


def tco(
    nodes: Annotated[int, typer.Option(help="nodes bought")] = 1,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node")] = 8,
    server_capex: Annotated[float | None, typer.Option(help="USD per node")] = None,
    network_capex: Annotated[float | None, typer.Option(help="USD for the whole fabric (BOM)")] = None,
    network_share: Annotated[float | None, typer.Option(help="network share of server+network capex")] = None,
    fabric_tiers: Annotated[
        int | None, typer.Option(help="1, 2 or 3 switch tiers (default: inferred from the nodes)")
    ] = None,
    fabric: Annotated[
        str | None,
        typer.Option(help="fabric preset priced by the network BOM (default: the GPU's, e.g. ib-ndr-8x400)"),
    ] = None,
    storage_capex: Annotated[float | None, typer.Option(help="USD")] = None,
    depreciation: Annotated[str, typer.Option(help="straight_line | economic")] = "straight_line",
    lifetime_years: Annotated[float | None, typer.Option(help="straight-line lifetime")] = None,
    residual: Annotated[
        float | None,
        typer.Option(help="resale value at end of life, share of capex (default 10^(-0.14·years))"),
    ] = None,
    cost_of_capital: Annotated[float | None, typer.Option(help="per year, e.g. 0.08")] = None,
    node_power_kw: Annotated[float | None, typer.Option(help="node max power, kW")] = None,
    pue: Annotated[float | None, typer.Option(help="power usage effectiveness")] = None,
    usd_per_kwh: Annotated[float | None, typer.Option(help="electricity price")] = None,
    colo_usd_per_kw_month: Annotated[float | None, typer.Option(help="colocation price")] = None,
    maintenance: Annotated[float | None, typer.Option(help="maintenance, share of capex per year")] = None,
    gpus_per_fte: Annotated[float | None, typer.Option(help="GPUs one operations engineer runs")] = None,
    usd_per_fte_year: Annotated[float | None, typer.Option(help="fully loaded staff cost")] = None,
    software_usd_per_gpu_year: Annotated[float | None, typer.Option(help="licences per GPU-year")] = None,
    utilisation: Annotated[float, typer.Option(help="share of hours running jobs, 0-1")] = 0.9,
    gpu: GpuOpt = None,
    price: PriceOpt = None,
    price_row: PriceRowOpt = None,
    json_out: JsonOpt = False,
) -> None:
    _tco(dict(locals()), only_breakeven=False)


@functools.wraps(tco)
def breakeven(**kwargs: Any) -> None:
    _tco(kwargs, only_breakeven=True)


def _tco(a: dict[str, Any], only_breakeven: bool) -> None:
    from app.services import cost as svc
    from app.services.catalog import LOCAL_ADMIN

    nodes, gpus_per_node, server_capex = a["nodes"], a["gpus_per_node"], a["server_capex"]
    network_capex, network_share, fabric_tiers = a["network_capex"], a["network_share"], a["fabric_tiers"]
    storage_capex, depreciation, lifetime_years = a["storage_capex"], a["depreciation"], a["lifetime_years"]
    cost_of_capital, node_power_kw, pue, usd_per_kwh = (
        a["cost_of_capital"],
        a["node_power_kw"],
        a["pue"],
        a["usd_per_kwh"],
    )
    colo_usd_per_kw_month, maintenance, gpus_per_fte = (
        a["colo_usd_per_kw_month"],
        a["maintenance"],
        a["gpus_per_fte"],
    )
    usd_per_fte_year, software_usd_per_gpu_year = a["usd_per_fte_year"], a["software_usd_per_gpu_year"]
    utilisation, gpu, price, price_row, json_out = (
        a["utilisation"],
        a["gpu"],
        a["price"],
        a["price_row"],
        a["json_out"],
    )
    onprem = {
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "server_capex_usd_per_node": server_capex,
        "network_capex_usd": network_capex,
        "network_share": network_share,
        "fabric_tiers": fabric_tiers,
        "storage_capex_usd": storage_capex,
        "depreciation": depreciation,
        "lifetime_years": lifetime_years,
        "residual_fraction": a["residual"],
        "cost_of_capital": cost_of_capital,
        "node_power_kw": node_power_kw,
        "pue": pue,
        "usd_per_kwh": usd_per_kwh,
        "colo_usd_per_kw_month": colo_usd_per_kw_month,
        "maintenance_fraction_per_year": maintenance,
        "gpus_per_fte": gpus_per_fte,
        "usd_per_fte_year": usd_per_fte_year,
        "software_usd_per_gpu_year": software_usd_per_gpu_year,
    }
    req = build(
        s.TcoRequest,
        {
            "onprem": {k: v for k, v in onprem.items() if v is not None},
            "utilisation": utilisation,
            "gpu": gpu,
            "fabric": a["fabric"],
            "options": _options(price, price_row, None, None),
        },
    )
    if _needs_db(price_row, price, gpu):
        _prepare_db()
    if only_breakeven:
        be = svc.breakeven(None, req, viewer=LOCAL_ADMIN)
        if json_out:
            _echo_json(be)
            return
        typer.echo(
            f"capex {usd(be.capex_total_usd)}, running {usd(be.monthly_running_usd)}/month, "
            f"on-prem ${be.usd_per_gpu_hour:.2f}/GPU-h at {be.utilisation:.0%} utilisation"
        )
        if be.network is not None:
            typer.echo(network_line_text(be.network))
        for b in be.breakevens:
            typer.echo(_breakeven_line(b))
        return
    result = svc.tco(None, req, viewer=LOCAL_ADMIN)
    if json_out:
        _echo_json(result)
        return
    typer.echo(
        f"capex {usd(result.capex_total_usd)}: " + ", ".join(f"{k} {usd(v)}" for k, v in result.capex.items())
    )
    typer.echo(f"per year {usd(result.annual_total_usd)} at {result.utilisation:.0%} utilisation:")
    for k, v in result.annual.items():
        typer.echo(f"    {k:<16} {usd(v)}")
    if result.network is not None:
        typer.echo(network_line_text(result.network))
    typer.echo(f"on-prem ${result.usd_per_gpu_hour:.2f}/GPU-hour")
    for b in result.breakevens:
        typer.echo(_breakeven_line(b))


def network_line_text(n: s.NetworkLineOut) -> str:
    """The network capex line: per GPU, share of server + network capex, and where it comes from."""
    head = f"network {usd(n.per_gpu_usd)}/GPU ({n.share_of_capex:.1%} of server + network capex): "
    if n.method == "bom":
        tiers = f"{n.tiers} tier(s){' inferred' if n.tiers_inferred else ''}"
        return (
            head
            + f"BOM of {n.fabric or 'the fabric'}, {tiers}, {n.switches} switches, {n.transceivers} transceivers"
        )
    return head + n.note


def _breakeven_line(b: s.BreakevenOut) -> str:
    head = (
        f"  vs {b.label} (${b.usd_per_gpu_hour:.2f}/GPU-h): breakeven after {_months(b.breakeven_months)}; "
    )
    if b.committed:
        return head + "a reservation, paid in full whatever the use"
    return head + f"buying pays off above {_pct(b.breakeven_utilisation)} utilisation"


def goodput(
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs in the job (else from --scenario)")] = None,
    scenario: ScenarioOpt = None,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node")] = 8,
    preset: Annotated[str | None, typer.Option(help="llama3-405b | opt-175b | bloom-176b")] = None,
    job_mtbf_hours: Annotated[float | None, typer.Option(help="job MTBF (overrides rates)")] = None,
    mtbf_gpu_hours: Annotated[float | None, typer.Option(help="per-GPU MTBF, hours")] = None,
    mtbf_node_hours: Annotated[float | None, typer.Option(help="per-node MTBF, hours")] = None,
    params: Annotated[float | None, typer.Option(help="parameters (checkpoint size)")] = None,
    precision: Annotated[str, typer.Option(help="bf16 | fp16 | fp8 | fp4 | fp32")] = "bf16",
    optimizer: Annotated[str, typer.Option(help="adamw | sgd_momentum | adafactor | none")] = "adamw",
    tier: Annotated[str, typer.Option(help="local_nvme | parallel_fs | object_store")] = "parallel_fs",
    parallel_fs_gb_per_s: ParallelFsOpt = None,
    parallel_fs_storage_nodes: StorageNodesOpt = None,
    parallel_fs_gb_per_s_per_storage_node: StorageNodeGbpsOpt = None,
    async_checkpoint: Annotated[bool, typer.Option("--async", help="asynchronous checkpointing")] = False,
    checkpoint_stall_s: Annotated[float | None, typer.Option(help="pause per checkpoint, s")] = None,
    restart_s: Annotated[float | None, typer.Option(help="restart time, s")] = None,
    interval_s: Annotated[float | None, typer.Option(help="checkpoint interval, s (else optimal)")] = None,
    method: Annotated[str, typer.Option(help="daly | young")] = "daly",
    mfu: Annotated[float | None, typer.Option(help="MFU to report effective MFU")] = None,
    run_days: Annotated[float | None, typer.Option(help="run length, days")] = None,
    fail_slow: Annotated[
        float | None,
        typer.Option(
            "--fail-slow",
            help=f"average slowdown of the steps from fail-slows (else {FAIL_SLOW_DEFAULT_TEXT}; 1: off)",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    from app.services import cost as svc

    req = build(
        s.GoodputRequest,
        {
            "num_gpus": gpus,
            "scenario": _scenario(scenario),
            "gpus_per_node": gpus_per_node,
            "preset": preset,
            "job_mtbf_hours": job_mtbf_hours,
            "mtbf_gpu_hours": mtbf_gpu_hours,
            "mtbf_node_hours": mtbf_node_hours,
            "checkpoint": {"params": params, "precision": precision, "optimizer": optimizer}
            if params
            else None,
            "tier": tier,
            **parallel_fs_fields(
                parallel_fs_gb_per_s, parallel_fs_storage_nodes, parallel_fs_gb_per_s_per_storage_node
            ),
            "async_checkpoint": async_checkpoint,
            "checkpoint_stall_s": checkpoint_stall_s,
            "restart_s": restart_s,
            "interval_s": interval_s,
            "method": method,
            "mfu": mfu,
            "run_days": run_days,
            "fail_slow_slowdown": fail_slow,
        },
    )
    r = svc.goodput(req)
    if json_out:
        _echo_json(r)
        return
    typer.echo(
        f"job MTBF {r.job_mtbf_hours:.2f} h ({r.interruptions_per_day:.2f} interruptions/day on {r.num_gpus} GPUs)"
    )
    typer.echo(
        f"checkpoint stall {r.checkpoint_stall_s:.1f} s, restart {r.restart_s / 60:.1f} min; "
        f"interval {r.interval_s / 60:.1f} min (Young {_minutes(r.young_interval_s)}, Daly {_minutes(r.daly_interval_s)})"
    )
    eff = f", effective MFU {r.effective_mfu:.1%}" if r.effective_mfu is not None else ""
    slow = ""
    if r.fail_slow_slowdown > 1:
        source = next((a.source for a in r.assumptions if a.name == "fail_slow_slowdown"), "")
        slow = f" (steps {r.fail_slow_slowdown:.2f}x slower from fail-slows: {source})"
    typer.echo(f"goodput {r.goodput:.1%}{eff}{slow}")
    for k, v in r.breakdown.items():
        typer.echo(f"    {k:<12} {v:.4f} s per useful s")
    if r.run:
        typer.echo(
            f"over the run: {r.run['interruptions']:.0f} interruptions, {r.run['checkpoints']:.0f} checkpoints, "
            f"{r.run['checkpoint_idle_hours']:.1f} h idle in checkpoint stalls"
        )


def storage(
    params: Annotated[float | None, typer.Option(help="parameters, e.g. 70e9")] = None,
    nodes: Annotated[int | None, typer.Option(help="nodes writing/reading")] = None,
    tokens_per_step: Annotated[float | None, typer.Option(help="global batch in tokens")] = None,
    step_s: Annotated[float | None, typer.Option(help="step time, s")] = None,
    vocab_size: Annotated[int | None, typer.Option(help="tokenizer vocabulary")] = None,
    scenario: ScenarioOpt = None,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node")] = 8,
    precision: Annotated[str, typer.Option(help="bf16 | fp16 | fp8 | fp4 | fp32")] = "bf16",
    optimizer: Annotated[str, typer.Option(help="adamw | sgd_momentum | adafactor | none")] = "adamw",
    format: Annotated[str, typer.Option(help="safetensors | torch_save")] = "safetensors",
    slow_disk_fraction: Annotated[float, typer.Option(help="one slow disk at this share of bandwidth")] = 0.5,
    parallel_fs_gb_per_s: ParallelFsOpt = None,
    parallel_fs_storage_nodes: StorageNodesOpt = None,
    parallel_fs_gb_per_s_per_storage_node: StorageNodeGbpsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from app.services import cost as svc

    req = build(
        s.StorageRequest,
        {
            "scenario": _scenario(scenario),
            "checkpoint": {"params": params, "precision": precision, "optimizer": optimizer, "format": format}
            if params
            else None,
            "num_nodes": nodes,
            "gpus_per_node": gpus_per_node,
            "tokens_per_step": tokens_per_step,
            "step_s": step_s,
            "vocab_size": vocab_size,
            "slow_disk_fraction": slow_disk_fraction,
            **parallel_fs_fields(
                parallel_fs_gb_per_s, parallel_fs_storage_nodes, parallel_fs_gb_per_s_per_storage_node
            ),
        },
    )
    r = svc.storage(req)
    if json_out:
        _echo_json(r)
        return
    typer.echo(f"checkpoint {r.checkpoint_bytes / 1e9:,.1f} GB ({r.bytes_per_param:g} B/param)")
    for t in r.checkpoint_tiers:
        typer.echo(
            f"  {t.tier:<13} write {t.write_s:8.1f} s  p99 {t.p99_write_s:8.1f} s  read {t.read_s:8.1f} s  "
            f"sync stall {t.sync_stall_s:8.1f} s  async stall {t.async_stall_s:6.2f} s"
        )
    typer.echo(
        f"data loading: {r.tokens_per_s:,.0f} tokens/s × {r.bytes_per_token} B = {r.required_bytes_per_s / 1e6:,.1f} MB/s"
    )
    for d in r.data_tiers:
        typer.echo(f"  {d.tier:<13} {d.fraction_of_step:7.2%} of step time{'  WARN' if d.warn else ''}")
    for w in r.warnings:
        typer.echo(f"warning: {w}")


def spot(
    on_demand: Annotated[float, typer.Option(help="on-demand USD per hour (instance or GPU)")],
    discount: Annotated[float, typer.Option(help="spot discount, 0-1")] = 0.6,
    preemptions_per_day: Annotated[float, typer.Option(help="job preemptions per day")] = 2.4,
    lost_hours: Annotated[float | None, typer.Option(help="work lost per preemption, hours")] = None,
    checkpoint_interval_s: Annotated[float, typer.Option(help="checkpoint interval, s")] = 3600.0,
    notice_s: Annotated[float, typer.Option(help="preemption notice, s")] = 120.0,
    checkpoint_stall_s: Annotated[float, typer.Option(help="time to write a checkpoint, s")] = 60.0,
    restart_s: Annotated[float, typer.Option(help="restart time, s")] = 1200.0,
    reacquire_wait_s: Annotated[float, typer.Option(help="wait for capacity, s")] = 0.0,
    billed_while_waiting: Annotated[
        float, typer.Option(help="share of the fleet kept, and billed, while waiting for capacity, 0-1")
    ] = 0.0,
    checkpoint_on_notice: Annotated[
        bool, typer.Option(help="the job checkpoints on the preemption notice (else loses half an interval)")
    ] = False,
    target: Annotated[float | None, typer.Option(help="solve which input gives this net saving")] = None,
    json_out: JsonOpt = False,
) -> None:
    from app.services import cost as svc

    req = build(
        s.SpotRequest,
        {
            "on_demand_usd_per_hour": on_demand,
            "spot_discount": discount,
            "preemptions_per_day": preemptions_per_day,
            "lost_work_hours": lost_hours,
            "checkpoint_interval_s": checkpoint_interval_s,
            "notice_s": notice_s,
            "checkpoint_stall_s": checkpoint_stall_s,
            "restart_s": restart_s,
            "reacquire_wait_s": reacquire_wait_s,
            "billed_while_waiting_fraction": billed_while_waiting,
            "checkpoint_on_notice": checkpoint_on_notice,
            "target_net_savings": target,
        },
    )
    r = svc.spot(req)
    if json_out:
        _echo_json(r)
        return
    typer.echo(
        f"spot ${r.spot_usd_per_hour:.2f}/h, useful {r.useful_fraction:.1%} of billed time → "
        f"{usd(r.cost_per_useful_hour_spot)} per useful hour vs {usd(r.cost_per_useful_hour_on_demand)}: "
        f"net savings {'-' if r.net_savings is None else format(r.net_savings, '.1%')}"
    )
    if r.inversion:
        i = r.inversion
        typer.echo(
            f"to get {i.target_net_savings:.0%}: lose {_num(i.lost_hours_per_preemption)} h per preemption, or "
            f"{_num(i.preemptions_per_day)} preemptions/day, or a "
            f"{'-' if i.spot_discount is None else format(i.spot_discount, '.0%')} discount"
        )
        for reason in i.unreachable:
            typer.echo(f"  not reachable: {reason}")


def epoch(
    chips: Annotated[int, typer.Option(help="accelerators")],
    server_price_per_chip: Annotated[float, typer.Option(help="server price / chips, USD")],
    training_hours: Annotated[
        float | None, typer.Option(help="training duration, hours (else end − start)")
    ] = None,
    years_since_acquisition: Annotated[
        float | None, typer.Option(help="purchase → training start, years (else from the dates)")
    ] = None,
    gpu: Annotated[str | None, typer.Option(help="catalog GPU (its release date)")] = None,
    price_date: Annotated[
        str | None, typer.Option(help="when the server price was quoted, YYYY-MM-DD")
    ] = None,
    acquisition_date: Annotated[str | None, typer.Option(help="hardware bought, YYYY-MM-DD")] = None,
    training_start: Annotated[str | None, typer.Option(help="YYYY-MM-DD")] = None,
    training_end: Annotated[str | None, typer.Option(help="YYYY-MM-DD")] = None,
    publication_date: Annotated[str | None, typer.Option(help="model published, YYYY-MM-DD")] = None,
    chip_tdp_w: Annotated[float | None, typer.Option(help="chip TDP, W (else the GPU's)")] = None,
    server_to_chip_power: Annotated[
        float | None, typer.Option(help="server power per chip / chip TDP (else Epoch's for the GPU)")
    ] = None,
    pue: Annotated[float, typer.Option(help="PUE")] = 1.25,
    usd_per_kwh: Annotated[float, typer.Option(help="electricity price")] = 0.0771,
    cloud_usd_per_chip_hour: Annotated[float | None, typer.Option(help="cloud price per chip-hour")] = None,
    json_out: JsonOpt = False,
) -> None:
    from app.services import cost as svc

    req = build(
        s.EpochRequest,
        {
            "chips": chips,
            "training_hours": training_hours,
            "server_price_per_chip_usd": server_price_per_chip,
            "years_since_acquisition": years_since_acquisition,
            "gpu": gpu,
            "price_date": price_date,
            "acquisition_date": acquisition_date,
            "training_start": training_start,
            "training_end": training_end,
            "publication_date": publication_date,
            "chip_tdp_w": chip_tdp_w,
            "server_to_chip_power": server_to_chip_power,
            "pue": pue,
            "usd_per_kwh": usd_per_kwh,
            "cloud_usd_per_chip_hour": cloud_usd_per_chip_hour,
        },
    )
    r = svc.epoch(req)
    if json_out:
        _echo_json(r)
        return
    typer.echo(f"amortized hardware + energy {usd(r.amortized_hardware_energy_usd)}")
    for k, v in r.amortized_breakdown.items():
        typer.echo(f"    {k:<13} {usd(v)}")
    typer.echo(f"cloud rental {usd(r.cloud_usd)}   acquisition {usd(r.acquisition_usd)}")


def presets(json_out: JsonOpt = False) -> None:
    from app.services import cost as svc

    rows = svc.presets()
    if json_out:
        typer.echo(to_json([r.model_dump(mode="json") for r in rows], indent=2))
        return
    for p in rows:
        typer.echo(
            f"{p.name:<12} {p.num_gpus:>6} GPUs {p.duration_days:>5g} days {p.interruptions:>5g} interruptions "
            f"→ job MTBF {p.job_mtbf_hours:.1f} h   ({p.source})"
        )


def prices(
    category: Annotated[str | None, typer.Option(help="e.g. cloud_gpu")] = None,
    stale_only: Annotated[
        bool, typer.Option("--stale", help=f"only the stale rows ({price_age.stale_rule()})")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    from sqlmodel import Session

    from app.db import get_engine
    from app.services.catalog import LOCAL_ADMIN
    from app.services.prices import price_book

    _prepare_db()
    with Session(get_engine()) as session:
        rows = price_book(session, category, stale_only, viewer=LOCAL_ADMIN)
    if json_out:
        typer.echo(to_json([r.model_dump(mode="json") for r in rows], indent=2))
        return
    for r in rows:
        per = (
            f"${r.usd_per_gpu_hour:.2f}/GPU-h"
            if r.usd_per_gpu_hour is not None
            else f"${r.price_usd:,.2f}/{r.unit}"
        )
        typer.echo(
            f"{r.id}  {r.vendor:<12.12} {r.item:<40.40} {r.pricing_model:<18.18} {per:>16}  {r.price_date}"
            f"{'  STALE' if r.stale else ''}"
        )


def seed_claims() -> None:
    """Print the table docs/cost.md shows under "The seed article's claims, checked" (Markdown)."""
    from app.services.seed_claims import markdown

    typer.echo(markdown(), nl=False)
