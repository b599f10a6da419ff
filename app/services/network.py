"""Network service: lookups (catalog / DB / calibration) and calls into the network core (its request and response
bodies: app.schemas.network).

Shared by the API routes (app/api/routes/network.py) and the CLI (app/cli/commands/network.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlmodel import Session

from app.catalog import accuracy_table
from app.catalog.fabrics import PRESET_SERVER_GPUS, fabric_for_node, fabric_on_node, find_fabric, presets
from app.core.accuracy import applied_collective, collective_band
from app.core.errors import Problem, ProblemCollector, SpecError
from app.core.hardware import ClusterSpec, FabricSpec, GPUSpec, scaleup_domain_for
from app.core.network import (
    ALGORITHMS,
    COLLECTIVE_OPS,
    EXTRA_OPS,
    PROTOCOLS,
    CollectiveEstimate,
    NetworkParams,
    Placement,
    collective_time,
    default_network_params,
    normalise_op,
)
from app.core.scaling import RequiredAssumption, ScalingResult, ScalingRun, required_assumption, scaling_curve
from app.core.topology import BillOfMaterials, FatTreeDesign, UnitPrices, bill_of_materials, resolve_tiers
from app.core.units import GB, GBIT, US
from app.errors import NotFoundError
from app.schemas.network import (
    BomIn,
    CandidateOut,
    ClaimIn,
    ClaimVerdictOut,
    CollectiveAccuracyOut,
    CollectiveIn,
    CollectiveOut,
    CollectiveResponse,
    FabricOut,
    FabricOverrides,
    PricesIn,
    RequiredOut,
    ScalingIn,
    ScalingResponse,
    SweepIn,
)
from app.schemas.scenario import ClusterIn
from app.services.catalog import Actor

# --------------------------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------------------------


def parse(model: type[BaseModel], data: Any) -> Any:
    """Validate a request document; pydantic errors become one SpecError with every field path."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SpecError(
            [
                Problem(".".join(str(x) for x in e.get("loc", ())) or "body", str(e.get("msg")))
                for e in exc.errors()
            ]
        ) from None


def resolve_gpu(value: str | dict[str, Any], session: Session | None, p: ProblemCollector) -> GPUSpec | None:
    if isinstance(value, str):
        try:
            if session is not None:
                from app.services.catalog import get_gpu

                return get_gpu(session, value)
            from app.catalog import find_gpu

            return find_gpu(value)
        except NotFoundError as exc:
            p.add("cluster.gpu", str(exc))
            return None
    try:
        return GPUSpec.from_dict(dict(value))
    except (TypeError, ValueError) as exc:
        p.add("cluster.gpu", str(exc))
        return None


def resolve_fabric(
    value: str | dict[str, Any] | None,
    p: ProblemCollector,
    where: str = "cluster.fabric",
    gpus_per_node: int = PRESET_SERVER_GPUS,
    gpu_name: str = "",
) -> FabricSpec:
    """A preset placed on a node of `gpus_per_node` GPUs, or the GPU's reference fabric when none is named
    (app.catalog.fabrics.fabric_on_node); or an inline fabric: its fields over its `preset`'s (so placed) or over
    the defaults, a stated `nics_per_node` as given."""
    if value is None or isinstance(value, str):
        try:
            return fabric_on_node(value, gpu_name, gpus_per_node)
        except NotFoundError as exc:
            p.add(where, str(exc))
            return FabricSpec()
    data = dict(value)
    base_name = data.pop("preset", None)
    try:
        base = (
            fabric_for_node(find_fabric(base_name), gpus_per_node) if base_name else FabricSpec(name="custom")
        )
    except NotFoundError as exc:
        p.add(f"{where}.preset", str(exc))
        base = FabricSpec()
    if "oversubscription" in data:
        data["oversubscription"] = tuple(data["oversubscription"])
    for unit_key, si_key, scale in (
        ("nic_gbps", "nic_bandwidth_bytes_per_s", GBIT),
        ("hop_latency_us", "hop_latency_s", US),
        ("base_latency_us", "base_latency_s", US),
    ):
        if unit_key in data:
            data[si_key] = float(data.pop(unit_key)) * scale
    known = {f for f in FabricSpec.__dataclass_fields__}
    unknown = sorted(set(data) - known)
    if unknown:
        p.add(where, f"unknown field(s) {', '.join(unknown)}")
        return base
    try:
        fabric = replace(base, **data)
    except (TypeError, ValueError) as exc:
        p.add(where, str(exc))
        return base
    _check_routing(fabric, p, where)
    return fabric


def _check_routing(fabric: FabricSpec, p: ProblemCollector, where: str) -> None:
    p.check(fabric.routing in ("adaptive", "ecmp"), f"{where}.routing", "must be 'adaptive' or 'ecmp'")
    p.check(
        isinstance(fabric.qps_per_connection, int) and 1 <= fabric.qps_per_connection <= 128,
        f"{where}.qps_per_connection",
        "must be a whole number of queue pairs from 1 to 128",
    )
    p.check(
        fabric.placement in ("contiguous", "scattered"),
        f"{where}.placement",
        "must be 'contiguous' or 'scattered'",
    )


def check_fabric_tiers(
    fabric: FabricSpec, nodes: int, p: ProblemCollector, where: str = "cluster.fabric"
) -> None:
    """A fabric whose stated tier count cannot connect `nodes` is refused (0 tiers: inferred, always fits)."""
    if fabric.tiers <= 0:
        return
    design = FatTreeDesign(
        nodes=nodes,
        rails=max(1, fabric.nics_per_node),
        switch_radix=max(4, fabric.switch_radix - fabric.switch_radix % 2),
        tiers=min(3, fabric.tiers),
        oversubscription=fabric.oversubscription,
    )
    try:
        resolve_tiers(design)
    except SpecError as exc:
        for problem in exc.problems:
            p.add(f"{where}.{problem.field}", problem.message)


def resolve_cluster(
    c: ClusterIn, session: Session | None, p: ProblemCollector, nvls: bool | None = None
) -> ClusterSpec | None:
    gpu = resolve_gpu(c.gpu, session, p)
    gpn = c.gpus_per_node or (gpu.default_gpus_per_node if gpu else PRESET_SERVER_GPUS)
    fabric = resolve_fabric(c.fabric, p, gpus_per_node=gpn, gpu_name=gpu.name if gpu else "")
    if gpu is None:
        return None
    check_fabric_tiers(fabric, c.nodes, p)
    return ClusterSpec(
        gpu=gpu,
        num_nodes=c.nodes,
        gpus_per_node=gpn,
        scaleup_kind=gpu.scaleup_kind,
        scaleup_domain_gpus=scaleup_domain_for(gpu.scaleup_kind, c.nodes * gpn),
        nvls=nvls,
        fabric=fabric,
        name=f"{c.nodes} × {gpn} {gpu.name}",
    )


def resolve_params(
    profile: str | None, overrides: dict[str, Any] | None, session: Session | None, p: ProblemCollector
) -> NetworkParams:
    params = default_network_params()
    if profile:
        if session is None:
            p.add("profile", "calibration profiles need the database")
        else:
            from app.services.calibration import get_hardware_profile

            try:
                hp = get_hardware_profile(session, profile)
                if isinstance(hp.network, NetworkParams):
                    params = hp.network
                elif isinstance(hp.network, dict):
                    params = NetworkParams.from_dict(hp.network)
            except NotFoundError as exc:
                p.add("profile", str(exc))
    if overrides:
        try:
            params = NetworkParams.from_dict(overrides, base=params)
        except (TypeError, ValueError) as exc:
            p.add("params", str(exc))
    return params


# --------------------------------------------------------------------------------------------------------
# Collective
# --------------------------------------------------------------------------------------------------------


def sweep_sizes(sweep: SweepIn) -> list[float]:
    sizes: list[float] = []
    size = sweep.min_bytes
    while size <= sweep.max_bytes * (1 + 1e-9) and len(sizes) < 200:
        sizes.append(float(round(size)))
        size *= sweep.factor
    return sizes


def _finite(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else x


def collective_accuracy(est: CollectiveEstimate, calibrated: bool) -> CollectiveAccuracyOut | None:
    """The published-measurement band of an estimate made with the published default parameters
    (app.core.accuracy.collective_band); a calibrated profile's or overridden parameters' estimate is not what the
    band measured."""
    if calibrated or est.time_s <= 0:
        return None
    band = collective_band(accuracy_table(), est.nodes, est.message_bytes)
    if band is None:
        return None
    applied = applied_collective(band, est.time_s)
    applied["time_range_us"] = [t / US for t in applied.pop("time_range_s")]
    return CollectiveAccuracyOut(**applied)


def collective_out(est: CollectiveEstimate, calibrated: bool = False) -> CollectiveOut:
    return CollectiveOut(
        op=est.op,
        message_bytes=est.message_bytes,
        ranks=est.ranks,
        ranks_per_node=est.ranks_per_node,
        nodes=est.nodes,
        time_us=est.time_s / US,
        algbw_gbps=_finite(est.algbw_bytes_per_s / GB),
        busbw_gbps=_finite(est.busbw_bytes_per_s / GB),
        algorithm=est.algorithm,
        protocol=est.protocol,
        tier=est.tier,
        bottleneck=est.bottleneck,
        breakdown_us={k: v / US for k, v in est.breakdown.items()},
        candidates=[
            CandidateOut(algorithm=c.algorithm, protocol=c.protocol, time_us=c.time_s / US)
            for c in est.candidates
        ],
        accuracy=collective_accuracy(est, calibrated),
    )


def run_collective(req: CollectiveIn, session: Session | None = None) -> CollectiveResponse:
    p = ProblemCollector()
    op = normalise_op(req.op)
    p.check(
        op in COLLECTIVE_OPS or op in EXTRA_OPS,
        "op",
        f"unknown collective {req.op!r}; choose one of {', '.join(COLLECTIVE_OPS + EXTRA_OPS)}",
    )
    p.check(
        (req.message_bytes is None) != (req.sweep is None),
        "message_bytes",
        "give exactly one of message_bytes or sweep",
    )
    if req.sweep is not None:
        p.check(req.sweep.min_bytes <= req.sweep.max_bytes, "sweep.max_bytes", "must be ≥ min_bytes")
    if req.algorithm is not None:
        p.check(req.algorithm in ALGORITHMS, "algorithm", f"choose one of {', '.join(ALGORITHMS)}")
    if req.protocol is not None:
        p.check(req.protocol in PROTOCOLS, "protocol", f"choose one of {', '.join(PROTOCOLS)}")
    cluster = resolve_cluster(req.cluster, session, p, req.nvls)
    params = resolve_params(req.profile, req.params, session, p)
    p.raise_if_any()
    assert cluster is not None
    ranks = req.ranks or cluster.num_gpus
    per_node = req.ranks_per_node or min(ranks, cluster.gpus_per_node)
    placement = Placement(ranks, per_node)
    if placement.nodes > cluster.num_nodes:
        raise SpecError(
            [
                Problem(
                    "ranks",
                    f"{ranks} ranks at {per_node} per node need {placement.nodes} nodes; the cluster has {cluster.num_nodes}",
                )
            ]
        )
    sizes = [float(req.message_bytes)] if req.message_bytes is not None else sweep_sizes(req.sweep)  # type: ignore[arg-type]
    results = [
        collective_time(op, s, placement, cluster, params, algorithm=req.algorithm, protocol=req.protocol)
        for s in sizes
    ]
    assumptions = list(results[-1].assumptions) if results else []
    calibrated = params != default_network_params()  # the bands measured the published defaults
    return CollectiveResponse(
        cluster=cluster.name,
        fabric=cluster.fabric.name or "custom",
        params=f"{params.name} v{params.version}",
        results=[collective_out(r, calibrated) for r in results],
        assumptions=assumptions,
    )


# --------------------------------------------------------------------------------------------------------
# Fabrics
# --------------------------------------------------------------------------------------------------------


def fabric_out(name: str) -> FabricOut:
    preset = presets()[name]
    f = preset.spec
    return FabricOut(
        name=name,
        aliases=list(preset.aliases),
        transport=f.transport,
        nics_per_node=f.nics_per_node,
        nic_gbps=f.nic_bandwidth_bytes_per_s / GBIT,
        topology=f.topology,
        tiers=f.tiers,
        oversubscription=list(f.oversubscription),
        switch_radix=f.switch_radix,
        hop_latency_us=f.hop_latency_s / US,
        base_latency_us=f.base_latency_s / US,
        sharp=f.sharp,
        congestion_derate=f.congestion_derate,
        routing=f.routing,
        qps_per_connection=f.qps_per_connection,
        placement=f.placement,
        source=preset.source,
        notes=preset.notes,
    )


def list_fabrics(transport: str | None = None) -> list[FabricOut]:
    out = [fabric_out(n) for n in presets()]
    if transport:
        out = [f for f in out if f.transport == transport.strip().lower()]
    return out


# --------------------------------------------------------------------------------------------------------
# Scaling
# --------------------------------------------------------------------------------------------------------

KNOB_UNITS = {"congestion_derate": "fraction of line rate", "nics_per_node": "NICs", "base_latency_s": "s"}


def _apply_overrides(f: FabricSpec, o: FabricOverrides | None) -> FabricSpec:
    if o is None:
        return f
    changes: dict[str, Any] = {}
    if o.congestion_derate is not None:
        changes["congestion_derate"] = o.congestion_derate
    if o.nics_per_node is not None:
        changes["nics_per_node"] = o.nics_per_node
    if o.base_latency_us is not None:
        changes["base_latency_s"] = o.base_latency_us * US
    if o.hop_latency_us is not None:
        changes["hop_latency_s"] = o.hop_latency_us * US
    return replace(f, **changes)


def _fabric_label(value: str | dict[str, Any], index: int) -> str:
    if isinstance(value, str):
        return value
    return str(value.get("name") or value.get("preset") or f"fabric-{index + 1}")


def _scaling_fabrics(req: ScalingIn, resolved: Any, p: ProblemCollector) -> dict[str, FabricSpec]:
    """The fabrics to compare by label: the request's presets or inline fabrics, or the scenario's own, each
    with the request's overrides."""
    if not req.fabrics:
        label = _fabric_label(resolved.cluster.fabric.name or "scenario", 0)
        return {label: _apply_overrides(resolved.cluster.fabric, req.overrides)}
    return {
        _fabric_label(value, i): _apply_overrides(
            resolve_fabric(value, p, f"fabrics.{i}", resolved.cluster.gpus_per_node), req.overrides
        )
        for i, value in enumerate(req.fabrics)
    }


def _check_scaling_request(
    req: ScalingIn, resolved: Any, fabrics: dict[str, FabricSpec], p: ProblemCollector
) -> None:
    """Every claim names a compared fabric and GPU count; every fabric has the tiers the largest count needs;
    every count holds whole model-parallel groups and whole nodes."""
    for j, claim in enumerate(req.claims):
        p.check(
            claim.fabric in fabrics,
            f"claims.{j}.fabric",
            f"not one of the request's fabrics: {sorted(fabrics)}",
        )
        p.check(claim.gpus in req.gpu_counts, f"claims.{j}.gpus", "must be one of gpu_counts")
        if claim.relative_to is not None:
            p.check(
                claim.relative_to in fabrics,
                f"claims.{j}.relative_to",
                f"not one of the request's fabrics: {sorted(fabrics)}",
            )
    mp = resolved.layout.tp * resolved.layout.pp * resolved.layout.cp
    gpn = resolved.cluster.gpus_per_node
    largest = max(req.gpu_counts, default=gpn)
    for i, fabric in enumerate(fabrics.values()):
        where = f"fabrics.{i}" if req.fabrics else "scenario.cluster.fabric"
        check_fabric_tiers(fabric, max(1, largest // gpn), p, where)
    for n in req.gpu_counts:
        p.check(n % mp == 0, "gpu_counts", f"{n} is not a multiple of tp·pp·cp = {mp}")
        p.check(n <= gpn or n % gpn == 0, "gpu_counts", f"{n} is not a whole number of {gpn}-GPU nodes")


def _solve_claims(
    req: ScalingIn, result: ScalingResult, run: ScalingRun, fabrics: dict[str, FabricSpec]
) -> list[tuple[ClaimIn, list[RequiredAssumption]]]:
    """For each claimed efficiency, the value of each fabric knob that would reproduce it (required_assumption);
    a ratio against a reference that cannot run at that size has none (its verdict says so). A claim at the baseline
    count is solved too: efficiency is against the ideal (a perfect network), not against the baseline."""
    solved: list[tuple[ClaimIn, list[RequiredAssumption]]] = []
    for claim in req.claims:
        reference = None
        if claim.relative_to is not None:
            ref_series = next(s for s in result.series if s.fabric_name == claim.relative_to)
            ref_point = ref_series.at(claim.gpus)
            if ref_point is None or ref_point.error is not None:
                solved.append((claim, []))  # judged as having no figure (app.core.claims)
                continue
            reference = ref_point.tokens_per_s_per_gpu
        knobs = ("congestion_derate", "nics_per_node", "base_latency_s")
        found = [
            required_assumption(
                knob,
                claim.efficiency,
                run,
                result.baseline_gpus,
                claim.gpus,
                fabrics[claim.fabric],
                reference_tokens_per_s_per_gpu=reference,
            )
            for knob in knobs
        ]
        solved.append((claim, found))
    return solved


def _required_out(solved: list[tuple[ClaimIn, list[RequiredAssumption]]]) -> list[RequiredOut]:
    return [
        RequiredOut(
            fabric=claim.fabric,
            relative_to=claim.relative_to,
            knob=r.knob,
            target_gpus=claim.gpus,
            target_efficiency=claim.efficiency,
            value=r.value,
            unit=KNOB_UNITS[r.knob],
            predicted_at_default=r.predicted_at_default,
            note=r.note,
        )
        for claim, found in solved
        for r in found
    ]


def _verdicts_out(
    solved: list[tuple[ClaimIn, list[RequiredAssumption]]],
    tolerance_pct: float,
    fabrics: dict[str, FabricSpec],
) -> list[ClaimVerdictOut]:
    """Each solved claim judged (app.core.claims): reproduced, explained by a named mechanism, or unreproducible."""
    from app.catalog.fabrics import presets
    from app.core.claims import judge_claim

    largest_latency = max(p.spec.base_latency_s for p in presets().values())
    out = []
    for claim, found in solved:
        modelled = found[0].predicted_at_default if found else None
        if modelled is not None and not math.isfinite(modelled):
            modelled = None
        v = judge_claim(
            claim.efficiency,
            modelled,
            found,
            tolerance_pct,
            nics_per_node=fabrics[claim.fabric].nics_per_node,
            largest_catalog_latency_s=largest_latency,
        )
        out.append(
            ClaimVerdictOut(
                fabric=claim.fabric,
                relative_to=claim.relative_to,
                gpus=claim.gpus,
                claimed=claim.efficiency,
                modelled=v.modelled,
                gap_pct=v.gap_pct,
                tolerance_pct=v.tolerance_pct,
                verdict=v.verdict,
                reason=v.reason + _consistency(claim, [c for c, _ in solved], tolerance_pct),
            )
        )
    return out


def _consistency(claim: ClaimIn, claims: list[ClaimIn], tolerance_pct: float) -> str:
    """For a throughput ratio of two fabrics whose efficiencies at that size are claimed too: whether the
    claims agree with each other (a ratio is the quotient of the two efficiencies at one GPU count)."""
    if claim.relative_to is None:
        return ""
    eff = {c.fabric: c.efficiency for c in claims if c.relative_to is None and c.gpus == claim.gpus}
    if claim.fabric not in eff or claim.relative_to not in eff:
        return ""
    implied = eff[claim.fabric] / eff[claim.relative_to]
    if abs(claim.efficiency / implied - 1.0) * 100.0 <= tolerance_pct:
        return ""
    return (
        f"; the efficiencies claimed at {claim.gpus} GPUs imply a ratio of {implied:.0%}, not {claim.efficiency:.0%}: "
        "the claims disagree with each other"
    )


def _claim_tolerance_pct(resolved: Any) -> float:
    """The median error of the estimator's published comparisons of two setups of one run, for the scenario's kind
    of run (app.core.claims; 0 without published comparisons)."""
    from app.catalog import accuracy_table
    from app.core.accuracy import ranking_resolution

    resolution = ranking_resolution(accuracy_table(), resolved.model, resolved.seq_len)
    return resolution.median_pct if resolution is not None else 0.0


def _series_out(result: ScalingResult) -> list[dict[str, Any]]:
    """The curve's series as the API shows them: each fabric in display units, no NaN or infinity."""
    series = result.to_dict()["series"]
    for s in series:
        f = s.pop("fabric")
        s["fabric"] = {
            "transport": f["transport"],
            "nics_per_node": f["nics_per_node"],
            "nic_gbps": f["nic_bandwidth_bytes_per_s"] / GBIT,
            "congestion_derate": f["congestion_derate"],
            "base_latency_us": f["base_latency_s"] / US,
            "routing": f["routing"],
            "placement": f["placement"],
            "tiers": f["tiers"],
        }
        for point in s["points"]:
            for key, value in list(point.items()):
                if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
                    point[key] = None
    return series


def run_scaling(req: ScalingIn, session: Session | None = None) -> ScalingResponse:
    from app.core.efficiency import HardwareProfile
    from app.core.estimate import estimate
    from app.services.scenario import resolve_scenario

    resolved = resolve_scenario(req.scenario, session)
    p = ProblemCollector()
    fabrics = _scaling_fabrics(req, resolved, p)
    _check_scaling_request(req, resolved, fabrics, p)
    params = resolve_params(req.profile, None, session, p)
    p.raise_if_any()
    profile = HardwareProfile(gemm=None, network=params, name=params.name, version=params.version)

    def estimator(model: Any, cluster: Any, layout: Any, seq_len: int, prof: Any = None) -> Any:
        return estimate(model, cluster, layout, seq_len, prof or profile, options=resolved.estimate_options())

    run = ScalingRun(
        resolved.model,
        resolved.cluster,
        resolved.layout,
        resolved.seq_len,
        mode=req.mode,
        estimator=estimator,
    )
    result: ScalingResult = scaling_curve(
        run, req.gpu_counts, fabrics, tokens=resolved.tokens or None, baseline_gpus=req.baseline_gpus
    )
    solved = _solve_claims(req, result, run, fabrics)
    return ScalingResponse(
        model=resolved.model.name,
        gpu=resolved.cluster.gpu.name,
        mode=result.mode,
        baseline_gpus=result.baseline_gpus,
        tokens=result.tokens,
        series=_series_out(result),
        required=_required_out(solved),
        verdicts=_verdicts_out(solved, _claim_tolerance_pct(resolved), fabrics),
        assumptions=[*list(result.assumptions), f"network parameters: {params.name} v{params.version}"],
    )


# --------------------------------------------------------------------------------------------------------
# Bill of materials
# --------------------------------------------------------------------------------------------------------

# Cheah 'H100 Freakonomics' sheet (price row "IB switches+cables per node, 2-tier fabric (128 nodes/1,024
# GPUs)"): $2.621M of cabling for the 2,048 links of a 128-node × 8-rail 2-tier fabric = $1,280 per link;
# with two transceivers at the low end of "$500-1,000 each" (infra-economics.com row) the cable itself is $280.
DEFAULT_CABLE_USD = 280.0
DEFAULT_TRANSCEIVER_USD = 500.0
DEFAULT_SWITCH_USD = 36_000.0  # 64-port 400G InfiniBand switch, FS.com list 2024-08 (price book row)


def _network_rows(session: Session | None, viewer: Actor) -> list[dict[str, Any]]:
    """The price book's network rows: the built-in ones and `viewer`'s own (catalog.quoted_for), or the built-in
    price file without a database."""
    if session is not None:
        from app.services.catalog import list_price_rows, quoted_for

        rows, _ = list_price_rows(session, viewer=quoted_for(viewer))
        return [r.model_dump() for r in rows if "network" in (r.category or "").lower()]
    from app.catalog import price_rows

    return [r for r in price_rows() if "network" in str(r.get("category", "")).lower()]


def unit_prices(req: BomIn, radix: int, session: Session | None, *, viewer: Actor) -> UnitPrices:
    """Explicit prices first, then the price book's network rows (built-in and `viewer`'s own), then documented
    defaults."""
    given = req.prices or PricesIn()
    source: dict[str, str] = {}
    switch = transceiver = None
    if req.price_rows:
        for row in _network_rows(session, viewer):
            item = str(row.get("item", "")).lower()
            unit = str(row.get("unit", "")).lower()
            price = row.get("price_usd")
            if switch is None and unit == "switch" and price and f"{radix}-port" in item:
                switch = float(price)
                source["switch_usd"] = (
                    f"price book: {row.get('item')} ({row.get('date') or row.get('price_date')})"
                )
            m = re.search(r"transceivers?\s*\$([\d,]+)", str(row.get("notes", "")).lower())
            if transceiver is None and m:
                transceiver = float(m.group(1).replace(",", ""))
                source["transceiver_usd"] = f"price book: {row.get('item')} notes (low end)"
    if given.switch_usd is not None:
        switch, source["switch_usd"] = given.switch_usd, "request"
    if given.transceiver_usd is not None:
        transceiver, source["transceiver_usd"] = given.transceiver_usd, "request"
    if switch is None:
        switch = DEFAULT_SWITCH_USD * (radix / 64.0)
        source["switch_usd"] = (
            f"default: $36,000 per 64-port 400G switch (FS.com 2024-08), scaled to {radix} ports"
        )
    if transceiver is None:
        transceiver = DEFAULT_TRANSCEIVER_USD
        source["transceiver_usd"] = "default: $500 (infra-economics.com 2025, low end of $500-1,000)"
    cable = given.cable_usd if given.cable_usd is not None else DEFAULT_CABLE_USD
    source["cable_usd"] = (
        "request"
        if given.cable_usd is not None
        else ("default: $280 = Cheah 2024-08 $1,280 per link (cables incl. optics) − 2 × $500 transceivers")
    )
    nic = given.nic_usd if given.nic_usd is not None else 0.0
    source["nic_usd"] = "request" if given.nic_usd is not None else "NICs counted in the server price"
    return UnitPrices(switch, transceiver, cable, nic, source)


def run_bom(req: BomIn, session: Session | None = None, *, viewer: Actor) -> BillOfMaterials:
    """The fat-tree bill of materials; unit prices from the request, the price book as `viewer` is quoted from it
    (unit_prices), or the defaults."""
    p = ProblemCollector()
    base: FabricSpec | None = None
    if req.fabric:
        base = resolve_fabric(req.fabric, p, "fabric")
    p.raise_if_any()
    rails = req.rails or (base.nics_per_node if base else 8)
    radix = req.switch_radix or (base.switch_radix if base else 64)
    # explicit tiers are checked against the node count; otherwise the fewest that connect the nodes
    tiers = req.tiers or (base.tiers if base and base.tiers else None)
    over = (
        tuple(req.oversubscription) if req.oversubscription else (base.oversubscription if base else (1.0,))
    )
    rail_opt = (
        req.rail_optimized
        if req.rail_optimized is not None
        else (base.topology == "rail_optimized" if base else True)
    )
    design = FatTreeDesign(
        nodes=req.nodes,
        rails=rails,
        switch_radix=radix,
        tiers=tiers,
        oversubscription=over,
        rail_optimized=rail_opt,
        node_links_optical=req.node_links_optical,
    )
    prices = unit_prices(req, radix, session, viewer=viewer)
    return bill_of_materials(design, prices, gpus_per_node=req.gpus_per_node)
