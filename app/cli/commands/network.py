"""`clusterplan network collective|scaling|bom|fabrics|seed-claims`: the network model from the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.output import days_cell, to_json
from app.schemas import network as net_schema


class UserError(ValueError):
    """Bad command-line input; a ValueError so `clusterplan` prints it and exits 2 even under `python -m`."""


network_app = typer.Typer(
    help="Collective times, scaling efficiency, fat-tree bill of materials.", no_args_is_help=True
)


def register(root: typer.Typer) -> None:
    root.add_typer(network_app, name="network")


def _size(text: str) -> float:
    """'64MiB', '1G', '32k', '4096' → bytes (K/M/G are powers of 2 as in nccl-tests; KB/MB/GB powers of 10)."""
    units = {
        "": 1,
        "b": 1,
        "k": 2**10,
        "kib": 2**10,
        "m": 2**20,
        "mib": 2**20,
        "g": 2**30,
        "gib": 2**30,
        "t": 2**40,
        "tib": 2**40,
        "kb": 10**3,
        "mb": 10**6,
        "gb": 10**9,
        "tb": 10**12,
    }
    raw = text.strip().lower().replace(" ", "")
    num = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = raw[len(num) :]
    if unit not in units:
        raise UserError(f"bad size {text!r}: use a number with an optional unit such as 64MiB, 1G, 32k, 8GB")
    try:
        return float(num) * units[unit]
    except ValueError:
        raise UserError(
            f"bad size {text!r}: use a number with an optional unit such as 64MiB, 1G, 32k"
        ) from None


def _human(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


@network_app.command(
    "collective", help="Time, algbw and busbw of a collective (nccl-tests style sweep with -b/-e/-f)."
)
def collective(
    op: Annotated[
        str,
        typer.Argument(help="all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | send_recv"),
    ],
    gpu: Annotated[str, typer.Option(help="GPU catalog name")] = "H100-SXM",
    nodes: Annotated[int, typer.Option(min=1, help="nodes in the cluster")] = 1,
    gpus_per_node: Annotated[
        int | None, typer.Option(min=1, help="GPUs per node (default: the GPU's usual 8)")
    ] = None,
    fabric: Annotated[
        str | None,
        typer.Option(
            help="fabric preset (see `clusterplan network fabrics`); default: the GPU's reference fabric"
        ),
    ] = None,
    ranks: Annotated[int | None, typer.Option(min=1, help="communicator size (default: all GPUs)")] = None,
    ranks_per_node: Annotated[int | None, typer.Option(min=1, help="ranks per node")] = None,
    size: Annotated[str | None, typer.Option("--size", "-s", help="one message size, e.g. 64MiB")] = None,
    begin: Annotated[str, typer.Option("-b", help="sweep start size")] = "32K",
    end: Annotated[str, typer.Option("-e", help="sweep end size")] = "16G",
    factor: Annotated[float, typer.Option("-f", help="sweep multiplication factor")] = 2.0,
    algorithm: Annotated[
        str | None, typer.Option(help="force ring|tree|nvls|nvls_tree|sharp|hierarchical")
    ] = None,
    protocol: Annotated[str | None, typer.Option(help="force LL|LL128|Simple")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    from app.services import network as svc

    body: dict[str, Any] = {
        "op": op,
        "cluster": {"gpu": gpu, "nodes": nodes, "gpus_per_node": gpus_per_node, "fabric": fabric},
        "ranks": ranks,
        "ranks_per_node": ranks_per_node,
        "algorithm": algorithm,
        "protocol": protocol,
    }
    if size is not None:
        body["message_bytes"] = _size(size)
    else:
        body["sweep"] = {"min_bytes": _size(begin), "max_bytes": _size(end), "factor": factor}
    out = svc.run_collective(svc.parse(net_schema.CollectiveIn, body))
    if as_json:
        typer.echo(to_json(out.model_dump(mode="json"), indent=2))
        return
    first = out.results[0]
    typer.echo(
        f"{first.op} over {first.ranks} ranks ({first.ranks_per_node} per node, {first.nodes} scale-up domain(s)) "
        f"on {out.cluster}, fabric {out.fabric}; parameters {out.params}"
    )
    typer.echo(
        f"{'size':>12} {'time (us)':>12} {'likely (us)':>17} {'algbw GB/s':>11} {'busbw GB/s':>11}  "
        "algorithm/protocol  bottleneck"
    )
    for r in out.results:
        likely = f"{r.accuracy.time_range_us[0]:.1f}-{r.accuracy.time_range_us[1]:.1f}" if r.accuracy else "-"
        typer.echo(
            f"{_human(r.message_bytes):>12} {r.time_us:12.1f} {likely:>17} {r.algbw_gbps or 0:11.2f} "
            f"{r.busbw_gbps or 0:11.2f}  {r.algorithm + '/' + r.protocol:18s}  {r.bottleneck}"
        )
    for a in out.assumptions:
        typer.echo(f"  - {a}")
    for text in dict.fromkeys(r.accuracy.summary for r in out.results if r.accuracy):
        typer.echo(f"  likely: {text}")


@network_app.command("fabrics", help="List the fabric presets with their sources.")
def fabrics(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    from app.services import network as svc

    rows = svc.list_fabrics()
    if as_json:
        typer.echo(to_json([r.model_dump() for r in rows], indent=2))
        return
    for f in rows:
        sharp = ", SHARP" if f.sharp else ""
        tiers = f"{f.tiers} tiers" if f.tiers else "tiers inferred"
        routing = f.routing if f.routing == "adaptive" else f"{f.routing} ({f.qps_per_connection} QP/conn)"
        placement = "" if f.placement == "contiguous" else f", {f.placement} jobs"
        typer.echo(
            f"{f.name:26s} {f.transport:12s} {f.nics_per_node:2d} × {f.nic_gbps:g} Gb/s  {f.topology}, {tiers}, "
            f"radix {f.switch_radix}{sharp}, {routing} routing{placement}; "
            f"latency {f.base_latency_us:g} µs + {f.hop_latency_us:g} µs/hop"
        )


@network_app.command("bom", help="Fat-tree bill of materials and network capex for N nodes.")
def bom(
    nodes: Annotated[int, typer.Argument(min=1, help="number of nodes")],
    fabric: Annotated[str | None, typer.Option(help="preset supplying rails/radix/tiers")] = None,
    rails: Annotated[int | None, typer.Option(min=1, help="NICs per node")] = None,
    radix: Annotated[int | None, typer.Option(min=4, help="switch ports")] = None,
    tiers: Annotated[int | None, typer.Option(min=1, max=3, help="1, 2 or 3")] = None,
    oversubscription: Annotated[str | None, typer.Option(help="per tier, e.g. '2' or '2,1'")] = None,
    gpus_per_node: Annotated[int, typer.Option(min=1)] = 8,
    switch_usd: Annotated[float | None, typer.Option(help="unit price override")] = None,
    transceiver_usd: Annotated[float | None, typer.Option(help="unit price override")] = None,
    cable_usd: Annotated[float | None, typer.Option(help="unit price override")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    from app.services import network as svc
    from app.services.catalog import LOCAL_ADMIN

    over = None
    if oversubscription:
        try:
            over = [float(x) for x in oversubscription.split(",")]
        except ValueError:
            raise UserError(
                f"bad --oversubscription {oversubscription!r}: use numbers like 2 or 2,1"
            ) from None
    body = {
        "nodes": nodes,
        "fabric": fabric,
        "rails": rails,
        "switch_radix": radix,
        "tiers": tiers,
        "oversubscription": over,
        "gpus_per_node": gpus_per_node,
        "prices": {"switch_usd": switch_usd, "transceiver_usd": transceiver_usd, "cable_usd": cable_usd},
    }
    result = svc.run_bom(
        svc.parse(net_schema.BomIn, body), viewer=LOCAL_ADMIN
    )  # no database: built-in prices
    if as_json:
        typer.echo(to_json(result.to_dict(), indent=2))
        return
    d = result.design
    kind = "non-blocking" if result.non_blocking else f"oversubscribed ({1 / result.bisection_fraction:g}:1)"
    typer.echo(
        f"{d.nodes} nodes × {d.rails} rails = {result.endpoints} endpoints; {d.tiers}-tier {kind} "
        f"{'rail-optimised ' if d.rail_optimized else ''}fat-tree of {d.switch_radix}-port switches "
        f"(max {result.max_endpoints} endpoints)"
    )
    for t in result.tiers:
        typer.echo(
            f"  {t.name:6s} {t.switches:5d} switches  ({t.down_ports_per_switch} down / {t.up_ports_per_switch} up)"
        )
    typer.echo(
        f"  switches {result.switches}, cables {sum(result.cables.values())} {result.cables}, transceivers {result.transceivers}"
    )
    if result.cost:
        c = result.cost
        typer.echo(f"  network capex ${c.total_usd:,.0f} (${c.per_node_usd:,.0f} per node)")
        for k, v in c.breakdown_usd.items():
            typer.echo(
                f"    {k:12s} ${v:,.0f}   [{c.prices.source.get(k[:-1] + '_usd', c.prices.source.get(k + '_usd', ''))}]"
            )
    for a in result.assumptions:
        typer.echo(f"  - {a}")


def _load(path: Path) -> Any:
    if not path.exists():
        raise UserError(f"file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None


@network_app.command(
    "scaling", help="Scaling efficiency and time-to-train vs GPU count for a scenario, per fabric."
)
def scaling(
    scenario: Annotated[Path, typer.Argument(dir_okay=False, help="scenario JSON file")],
    gpus: Annotated[str, typer.Option(help="comma-separated GPU counts, e.g. 32,64,128")] = "8,16,32,64,128",
    fabrics: Annotated[str, typer.Option(help="comma-separated fabric presets")] = "ib-ndr-8x400,roce-8x400",
    mode: Annotated[str, typer.Option(help="weak | strong")] = "weak",
    congestion_derate: Annotated[
        float | None, typer.Option(help="apply to every fabric (stated assumption)")
    ] = None,
    claim: Annotated[
        list[str] | None,
        typer.Option(
            help="a claimed figure to judge, FABRIC@GPUS=EFFICIENCY (e.g. roce-8x400@128=71%), or a throughput "
            "ratio against another fabric, FABRIC@GPUS=RATIO/OTHER (e.g. roce-8x400@128=0.42/ib-ndr-8x400); "
            "repeatable; each fabric must be one of --fabrics"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    from app.services import network as svc

    try:
        counts = [int(x) for x in gpus.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"bad --gpus {gpus!r}: use integers like 32,64,128") from None
    body = {
        "scenario": _load(scenario),
        "gpu_counts": counts,
        "fabrics": [f.strip() for f in fabrics.split(",") if f.strip()],
        "mode": mode,
        "overrides": {"congestion_derate": congestion_derate} if congestion_derate else None,
        "claims": [parse_claim(text) for text in claim or []],
    }
    out = svc.run_scaling(svc.parse(net_schema.ScalingIn, body))
    if as_json:
        typer.echo(to_json(out.model_dump(mode="json"), indent=2))
        return
    typer.echo(render_scaling(out))


CLAIM_FORM = re.compile(r"^\s*([^@=/\s]+)@(\d+)=([0-9.]+)(%?)(?:/([^@=/\s]+))?\s*$")


def parse_claim(text: str) -> dict[str, Any]:
    """--claim FABRIC@GPUS=EFFICIENCY[%][/OTHER] as the scaling endpoint's claim; UserError when malformed."""
    match = CLAIM_FORM.match(text)
    if match is None:
        raise UserError(
            f"bad --claim {text!r}: use FABRIC@GPUS=EFFICIENCY, e.g. roce-8x400@128=71% or "
            "roce-8x400@128=0.42/ib-ndr-8x400"
        )
    fabric, count, value, percent, other = match.groups()
    try:
        efficiency = float(value) / (100.0 if percent else 1.0)
    except ValueError:
        raise UserError(f"bad --claim {text!r}: {value!r} is not a number") from None
    claim: dict[str, Any] = {"fabric": fabric, "gpus": int(count), "efficiency": efficiency}
    if other:
        claim["relative_to"] = other
    return claim


def render_scaling(out: Any) -> str:
    lines = [
        f"{out.model} on {out.gpu}, {out.mode} scaling; 'scaling' = per-GPU throughput vs the ideal "
        f"({out.baseline_gpus} GPUs on a perfect network), 'vs base' = vs {out.baseline_gpus} GPUs on the same "
        "fabric, 'network' = share of the step not stalled on communication"
    ]
    lines.append(
        f"{'fabric':26s} {'GPUs':>6} {'step s':>8} {'exposed comm s':>15} {'tokens/s':>11} {'scaling':>8} "
        f"{'vs base':>8} {'network':>8} {'MFU':>6} {'days':>8}"
    )
    for s in out.series:
        for p in s["points"]:
            if p.get("error"):
                lines.append(f"{s['fabric_name']:26s} {p['num_gpus']:6d}  error: {p['error']}")
                continue
            comm = sum(p["exposed_comm_s"].values())
            days = p.get("time_to_train_days")
            lines.append(
                f"{s['fabric_name']:26s} {p['num_gpus']:6d} {p['step_time_s']:8.3f} {comm:15.3f} "
                f"{p['tokens_per_s']:11,.0f} "
                f"{p['scaling_efficiency'] * 100:7.1f}% {p['efficiency_vs_baseline'] * 100:7.1f}% "
                f"{p['network_efficiency'] * 100:7.1f}% "
                f"{p['mfu'] * 100:5.1f}% {days_cell(days):>8}"
            )
    for r in out.required:
        val = "not reachable" if r.value is None else f"{r.value:.4g} {r.unit}"
        what = f"{r.target_efficiency:.0%}"
        if r.relative_to:
            what += f" of {r.relative_to}'s throughput"
        note = f" ({r.note})" if r.note else ""
        lines.append(f"to reach {what} at {r.target_gpus} GPUs on {r.fabric}: {r.knob} = {val}{note}")
    if out.verdicts:
        lines.append(
            "claims (a percentage is a scaling efficiency against a perfect network, or a throughput ratio against "
            "the fabric named):"
        )
    for v in out.verdicts:
        what = f"{v.claimed:.0%}" + (f" of {v.relative_to}'s throughput" if v.relative_to else "")
        lines.append(f"claim {what} at {v.gpus} GPUs on {v.fabric}: {v.verdict.upper()}: {v.reason}")
    lines.extend(f"  - {a}" for a in out.assumptions)
    return "\n".join(lines)


ARTICLE_ROCE = "roce-ecmp-32-nodes"
ARTICLE_ROCE_SCATTERED = "roce-ecmp-scattered"

SEED_SCENARIO: dict[str, Any] = {
    "model": "Llama-2-70B",
    "cluster": {"gpu": "H100-SXM", "nodes": 4, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
    "layout": {
        "tp": 8,
        "pp": 4,
        "dp": 1,
        "micro_batch": 1,
        "global_batch": 16,
        "zero": 1,
        "sequence_parallel": True,
        "recompute": "selective",
    },
    "training": {"seq_len": 4096, "tokens": 2.0e12},
}


@network_app.command(
    "seed-claims",
    help="The builder's-guide claims (IB 98 % to 128 GPUs; RoCE 82 % at 64, 71 % at 128; 70B in 18 vs 43 days) "
    "against the model, and the fabric assumptions that would reproduce them.",
)
def seed_claims(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    from app.services import network as svc

    body = {
        "scenario": SEED_SCENARIO,
        "gpu_counts": [32, 64, 128, 256],
        # the article's RoCE cluster: 32 nodes on a fat-tree, so two tiers of 64-port switches (4 nodes per
        # leaf); default static ECMP (roce-ecmp-8x400) beside a tuned, adaptively routed RoCE (roce-8x400)
        "fabrics": [
            "ib-ndr-8x400",
            "roce-8x400",
            {"preset": "roce-ecmp-8x400", "tiers": 2, "name": ARTICLE_ROCE},
            {"preset": "roce-ecmp-scattered-8x400", "tiers": 2, "name": ARTICLE_ROCE_SCATTERED},
        ],
        "claims": [
            {"fabric": "ib-ndr-8x400", "gpus": 128, "efficiency": 0.98},
            {"fabric": ARTICLE_ROCE_SCATTERED, "gpus": 64, "efficiency": 0.82},
            {"fabric": ARTICLE_ROCE_SCATTERED, "gpus": 128, "efficiency": 0.71},
            # "18 days on InfiniBand instead of 43 on RoCE": RoCE throughput = 18/43 of InfiniBand's
            {
                "fabric": ARTICLE_ROCE_SCATTERED,
                "gpus": 128,
                "efficiency": round(18 / 43, 4),
                "relative_to": "ib-ndr-8x400",
            },
        ],
    }
    out = svc.run_scaling(svc.parse(net_schema.ScalingIn, body))
    if as_json:
        typer.echo(to_json(out.model_dump(mode="json"), indent=2))
        return
    typer.echo(render_scaling(out))
