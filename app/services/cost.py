"""Cost, goodput and storage services: turn request models into core inputs and call the pure core.

The core (app.core.cost/goodput/storage) never sees the database; app.services.prices turns price_row rows into
`PriceQuote`s (with term, date, source and a staleness flag), and this layer the requests into core inputs.
"""

from __future__ import annotations

import contextlib
import math
import uuid
from dataclasses import dataclass, fields, replace
from datetime import date
from typing import Any

from sqlmodel import Session

from app.core import cost as core_cost
from app.core import goodput as core_goodput
from app.core import price_age
from app.core import storage as core_storage
from app.core.errors import Problem, ProblemCollector, SpecError
from app.core.hardware import FabricSpec
from app.core.topology import BillOfMaterials, FatTreeDesign, UnitPrices, bill_of_materials
from app.errors import NotFoundError
from app.schemas import cost as s
from app.services.catalog import Actor
from app.services.prices import _today, canonical_gpu_name, gpu_peak_flops, resolve_options


def cost_assumptions(
    items: list[core_storage.Assumption], today: date | None = None
) -> list[s.CostAssumptionOut]:
    """The assumptions of a result; a dated default of a price-book category (staff ratio, maintenance, PUE …)
    is marked stale past that category's threshold, like a price."""
    from app.catalog import parse_price_date

    today = today or _today()
    out = []
    for a in items:
        stale = False
        category = price_age.DEFAULT_CATEGORIES.get(a.name)
        if category is not None and a.date:
            with contextlib.suppress(ValueError):
                stale = price_age.is_stale(parse_price_date(a.date), today, category)
        out.append(s.CostAssumptionOut(**a.as_dict(), stale=stale))  # type: ignore[arg-type]
    return out


# --- cost per run ----------------------------------------------------------------------------------------


def estimate_for(session: Session | None, scenario: dict[str, Any]) -> tuple[Any, Any]:
    """Run the estimator on a scenario; its problems are reported under `scenario.`."""
    from app.services.estimate import parse_scenario
    from app.services.estimate import run as run_estimate

    try:
        return run_estimate(parse_scenario(scenario), session)
    except SpecError as exc:
        raise SpecError([Problem(f"scenario.{p.field}", p.message) for p in exc.problems]) from None


def _run_from_scenario(
    session: Session | None, req: s.RunCostRequest
) -> tuple[s.RunCostRequest, float | None, list[core_storage.Assumption]]:
    """The request completed from its scenario's estimate (GPU count, GPU-hours, GPU), the run's model FLOPs and
    the estimate's assumptions; the request unchanged without a scenario."""
    if req.scenario is None:
        return req, None, []
    resolved, est = estimate_for(session, req.scenario)
    if not resolved.tokens:
        raise SpecError([Problem("scenario.training.tokens", "required to cost a run")])
    num_gpus = resolved.cluster.num_gpus
    tps = est.step.tokens_per_s
    source = "estimator (app.core.estimate)"
    notes = [
        core_storage.Assumption("step_time_s", est.step.total_s, "s", source, ""),
        core_storage.Assumption("tokens_per_s", tps, "tokens/s", source, ""),
        core_storage.Assumption("mfu", est.step.mfu, "", source, ""),
    ]
    update = {
        "num_gpus": num_gpus,
        "gpu_hours": resolved.tokens / tps * num_gpus / 3600.0,
        "gpu": req.gpu or resolved.cluster.gpu.name,
    }
    return req.model_copy(update=update), est.model_flops_per_token * resolved.tokens, notes


def _flop_inputs_problems(req: s.RunCostRequest) -> tuple[float | None, list[Problem]]:
    """Without GPU-hours the run is costed from its FLOPs: the peak FLOP/s per GPU and what is missing for it."""
    problems: list[Problem] = []
    for name, message in (
        ("params", "give gpu_hours, or params + tokens + mfu"),
        ("tokens", "give gpu_hours, or params + tokens + mfu"),
        ("mfu", "required to turn FLOPs into GPU-hours"),
    ):
        if getattr(req, name) is None:
            problems.append(Problem(name, message))
    if req.peak_tflops is not None:
        return req.peak_tflops * 1e12, problems
    if req.gpu is None:
        problems.append(Problem("gpu", "give gpu or peak_tflops to turn FLOPs into GPU-hours"))
        return None, problems
    try:
        return gpu_peak_flops(req.gpu, req.dtype), problems
    except KeyError:
        problems.append(Problem("dtype", f"{req.gpu} has no {req.dtype} tensor cores"))
        return None, problems


def _options_marked(result: core_cost.RunCost, quotes: list[core_cost.PriceQuote]) -> list[dict[str, object]]:
    """Each option of `result`, saying whether its quote is in the headline price's pool (the one rule)."""
    pooled = {id(q) for q in core_cost.headline_pool(quotes)}
    return [o.to_dict() | {"in_headline": id(o.quote) in pooled} for o in result.options]


def run_cost(session: Session | None, req: s.RunCostRequest, *, viewer: Actor) -> s.RunCostResponse:
    """The run's cost under each option: the request's, or `viewer`'s default price rows for the GPU."""
    req, total_flop, extra = _run_from_scenario(session, req)
    problems: list[Problem] = []
    peak: float | None = None
    if req.num_gpus is None:
        problems.append(Problem("num_gpus", "give num_gpus or a scenario"))
    if req.gpu_hours is None:
        peak, missing = _flop_inputs_problems(req)
        problems += missing
    if not req.options and req.gpu is None:
        problems.append(Problem("options", "give price options or a gpu to take price-book rows for"))
    if problems:
        raise SpecError(problems)
    assert req.num_gpus is not None
    if req.gpu_hours is None:
        assert req.params is not None and req.tokens is not None
        total_flop = core_cost.training_flop(req.params, req.tokens, req.active_params)
    quotes = resolve_options(session, req.options, req.gpu, req.pricing_models, viewer=viewer)
    if not quotes:
        raise SpecError([Problem("gpu", f"no cloud price rows for {req.gpu}; give options")])
    inputs = core_cost.RunInputs(
        num_gpus=req.num_gpus,
        gpu_hours=req.gpu_hours,
        total_flop=total_flop if req.gpu_hours is None else None,
        peak_flops_per_gpu=peak,
        mfu=req.mfu,
        goodput=req.goodput,
    )
    try:
        result = core_cost.run_cost(inputs, quotes)
    except SpecError as exc:  # the request gives tokens (or a scenario's tokens), not FLOPs
        tokens = "scenario.training.tokens" if req.scenario is not None else "tokens"
        renamed = {"total_flop": tokens, "gpu_hours": tokens if req.scenario is not None else "gpu_hours"}
        raise SpecError([Problem(renamed.get(p.field, p.field), p.message) for p in exc.problems]) from None
    data = result.to_dict()
    data["total_flop"] = total_flop
    data["options"] = _options_marked(result, quotes)
    headline = core_cost.headline_price(quotes)
    data["headline"] = headline.to_dict() if headline is not None else None
    assumptions = list(result.assumptions) + extra
    if peak is not None:
        assumptions.append(
            core_storage.Assumption(
                "peak_flops_per_gpu", peak, "FLOP/s", f"catalog {req.gpu} {req.dtype} dense", ""
            )
        )
    data["assumptions"] = cost_assumptions(assumptions)
    return s.RunCostResponse.model_validate(data)


# --- TCO and breakeven -----------------------------------------------------------------------------------


def onprem_inputs(body: s.OnPremIn, gpu: str | None = None) -> core_cost.OnPremInputs:
    """The request's on-prem figures; the server price and node power it leaves out come from the GPU's server
    row (app/catalog/onprem_servers.csv). With no GPU, or none with a row, they must be given: never a default
    server of another GPU."""
    given = {k: v for k, v in body.model_dump().items() if v is not None}
    known = {f.name for f in fields(core_cost.OnPremInputs)}
    inputs = core_cost.OnPremInputs(**{k: v for k, v in given.items() if k in known})
    missing = [
        f"onprem.{name}"
        for name in ("server_capex_usd_per_node", "node_power_kw")
        if getattr(inputs, name) is None
    ]
    if not missing:
        return inputs
    if gpu is None:
        raise SpecError(
            [
                Problem(
                    "gpu", f"give a GPU (its on-prem server row prices the nodes) or {' and '.join(missing)}"
                )
            ]
        )
    from app.catalog.onprem import ONPREM_SERVERS_FILE, server_quote

    name = canonical_gpu_name(gpu)
    quote = server_quote(name)
    if quote is None:
        raise SpecError(
            [
                Problem(
                    "gpu",
                    f"no on-prem server row for {name} in {ONPREM_SERVERS_FILE.name}; "
                    f"give {' and '.join(missing)}",
                )
            ]
        )
    return core_cost.with_server(inputs, quote)


def _option_rows(quotes: list[core_cost.PriceQuote]) -> list[s.PriceOptionOut]:
    pooled = {id(q) for q in core_cost.headline_pool(quotes)}
    return [
        s.PriceOptionOut(
            label=q.label,
            price_id=q.price_id,
            pricing_model=q.pricing_model,
            term=q.term,
            commitment_months=q.commitment_months,
            billing="",
            usd_per_gpu_hour=q.usd_per_gpu_hour,
            price_date=q.date,
            price_source=q.source,
            stale=q.stale,
            in_headline=id(q) in pooled,
            total_usd=0.0,
            breakdown={},
            billed_gpu_hours=0.0,
            billed_hours=0.0,
            commitment_exceeds_run=False,
        )
        for q in quotes
    ]


def _json_safe(value: object) -> object:
    """Curves may hold None (no breakeven) and inf (zero utilisation); JSON has neither inf nor NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):  # a finite float (nearly every point of a curve) is kept without a call
        return [v if type(v) is float and math.isfinite(v) else _json_safe(v) for v in value]
    return value


def network_from_bom(
    session: Session | None, req: s.TcoRequest, viewer: Actor
) -> tuple[core_cost.OnPremInputs, list[core_storage.Assumption], s.NetworkLineOut]:
    """On-prem inputs with the network capex priced: from the request (network_capex_usd or network_share),
    from an explicit network BOM request, else from the fat-tree BOM of the fabric (the request's, or the GPU's
    reference fabric) at the dated unit prices of app/catalog/network_prices.csv. A fabric whose class has no
    price row falls back to the share by fabric tiers, with the tiers inferred from the node count."""
    inputs = onprem_inputs(req.onprem, req.gpu)
    given = req.onprem.model_fields_set
    if req.onprem.network_capex_usd is not None:
        return inputs, [], _network_line(inputs, "given", note="network_capex_usd from the request")
    if req.network_bom is not None:
        return _explicit_bom(session, req, inputs, viewer)
    fabric_name, fabric = _tco_fabric(req)
    if req.onprem.network_share is not None:
        return inputs, [], _network_line(inputs, "share", fabric_name, note="network_share from the request")
    from app.catalog.network_prices import price_class, unit_prices_for

    prices = unit_prices_for(fabric)
    klass = price_class(fabric)
    if inputs.nodes == 1 and "fabric_tiers" not in given:
        note = "one node: no scale-out fabric (its GPUs talk over the node's own NVLink / Infinity Fabric)"
        inputs = replace(inputs, network_capex_usd=0.0)
        extra = [core_storage.Assumption("network_capex_usd", 0.0, "USD", note, "")]
        line = _network_line(inputs, "bom", fabric_name, klass, note=note)
        return (
            inputs,
            extra,
            line.model_copy(update={"tiers": 0, "switches": 0, "transceivers": 0, "cables": 0}),
        )
    if prices is None:
        return _share_fallback(req, inputs, fabric_name, fabric)
    bom = _fabric_bom(req, inputs, fabric, prices)
    assert bom.cost is not None
    from app.catalog.network_prices import network_prices_date

    note = _bom_note(bom, fabric_name)
    inputs = replace(inputs, network_capex_usd=bom.cost.total_usd)
    extra = [
        core_storage.Assumption(
            "network_capex_usd", bom.cost.total_usd, "USD", note, network_prices_date(fabric)
        )
    ]
    return inputs, extra, _bom_line(inputs, bom, fabric_name, klass, note)


def _share_fallback(
    req: s.TcoRequest, inputs: core_cost.OnPremInputs, fabric_name: str, fabric: FabricSpec
) -> tuple[core_cost.OnPremInputs, list[core_storage.Assumption], s.NetworkLineOut]:
    """The network capex of a fabric whose price class lacks a row for a BOM item: the share of server + network
    capex by fabric tiers, the tiers as given (refused when too few) or the fewest that connect the nodes. The
    line names the class and the missing items (`no_price_row`, `missing_price_items`); no other class's rows
    are used."""
    from app.catalog.network_prices import missing_items, network_price_rows, price_class
    from app.core.topology import fabric_tiers

    given = req.onprem.model_fields_set
    needed = fabric_tiers(replace(fabric, tiers=0), inputs.nodes)
    if "fabric_tiers" in given and inputs.fabric_tiers < needed:
        raise SpecError(
            [
                Problem(
                    "onprem.fabric_tiers",
                    f"{inputs.fabric_tiers} tier(s) of {fabric.switch_radix}-port switches cannot connect "
                    f"{inputs.nodes} nodes × {fabric.nics_per_node} NICs; {needed} are needed (or omit it)",
                )
            ]
        )
    tiers = inputs.fabric_tiers if "fabric_tiers" in given else needed
    inputs = replace(inputs, fabric_tiers=tiers)
    klass, missing = price_class(fabric), list(missing_items(fabric))
    rows = network_price_rows().get(klass, {})
    what = f"{klass} {', '.join(missing)}" if rows else klass
    found = f"; its {', '.join(rows)} row(s) alone cannot price a bill of materials" if rows else ""
    note = (
        f"no network price row for {what} ({fabric_name}) in network_prices.csv{found}: network capex is "
        f"{core_cost.NETWORK_SHARE_BY_TIERS[tiers]:.1%} of server + network capex for a {tiers}-tier fabric"
        + ("" if "fabric_tiers" in given else f" (tiers inferred from {inputs.nodes} nodes)")
    )
    extra = [core_storage.Assumption("network_fallback", klass, "", note, "")]
    line = _network_line(inputs, "share", fabric_name, klass, note=note)
    update = {
        "tiers_inferred": "fabric_tiers" not in given,
        "no_price_row": klass,
        "missing_price_items": missing,
    }
    return inputs, extra, line.model_copy(update=update)


def _tco_fabric(req: s.TcoRequest) -> tuple[str, FabricSpec]:
    from app.catalog.fabrics import find_fabric, reference_fabric_name

    name = req.fabric
    if name is None:
        name = reference_fabric_name(canonical_gpu_name(req.gpu) if req.gpu else "")
    try:
        return name, find_fabric(name)
    except NotFoundError as exc:
        raise SpecError([Problem("fabric", str(exc))]) from None


def _fabric_bom(
    req: s.TcoRequest, inputs: core_cost.OnPremInputs, fabric: FabricSpec, prices: UnitPrices
) -> BillOfMaterials:
    """The fabric's fat-tree for the cluster: one NIC per rail, the fabric placed on the node as the step model
    places it (app.catalog.fabrics.fabric_for_node: NICs per GPU kept, a 72-GPU NVL72 rack has 72 NICs); tiers as
    given in onprem.fabric_tiers (refused when too few), else the fabric's, else the fewest that connect the nodes."""
    from app.catalog.fabrics import fabric_for_node

    rails = fabric_for_node(fabric, inputs.gpus_per_node).nics_per_node
    tiers = (
        req.onprem.fabric_tiers if "fabric_tiers" in req.onprem.model_fields_set else (fabric.tiers or None)
    )
    design = FatTreeDesign(
        nodes=inputs.nodes,
        rails=rails,
        switch_radix=fabric.switch_radix,
        tiers=tiers,
        oversubscription=fabric.oversubscription,
        rail_optimized=fabric.topology == "rail_optimized",
    )
    try:
        return bill_of_materials(design, prices, gpus_per_node=inputs.gpus_per_node)
    except SpecError as exc:
        problems = [
            Problem("onprem.fabric_tiers" if p.field == "tiers" else f"onprem.{p.field}", p.message)
            for p in exc.problems
        ]
        raise SpecError(problems) from None


def _bom_note(bom: BillOfMaterials, fabric_name: str) -> str:
    tiers = len(bom.tiers)
    inferred = any("inferred" in a for a in bom.assumptions)
    return (
        f"fat-tree BOM of {fabric_name}: {tiers} tier(s){' inferred from the node count' if inferred else ''}, "
        f"{bom.switches} switches, {bom.transceivers} transceivers, {sum(bom.cables.values())} cables "
        f"for {bom.endpoints} NIC ports"
    )


def _bom_line(
    inputs: core_cost.OnPremInputs, bom: BillOfMaterials, fabric_name: str, klass: str, note: str
) -> s.NetworkLineOut:
    assert bom.cost is not None
    line = _network_line(inputs, "bom", fabric_name, klass, note=note)
    return line.model_copy(
        update={
            "tiers": len(bom.tiers),
            "tiers_inferred": any("inferred" in a for a in bom.assumptions),
            "switches": bom.switches,
            "transceivers": bom.transceivers,
            "cables": sum(bom.cables.values()),
            "breakdown_usd": dict(bom.cost.breakdown_usd),
            "sources": dict(bom.cost.prices.source),
        }
    )


def _network_line(
    inputs: core_cost.OnPremInputs, method: str, fabric: str = "", klass: str = "", note: str = ""
) -> s.NetworkLineOut:
    capex = core_cost.capex_breakdown(inputs)
    network = capex["network"]
    servers_and_network = capex["servers"] + network
    return s.NetworkLineOut(
        method=method,  # type: ignore[arg-type]
        fabric=fabric,
        price_class=klass,
        total_usd=network,
        per_gpu_usd=network / inputs.gpus,
        share_of_capex=network / servers_and_network if servers_and_network else 0.0,
        tiers=None if method == "bom" or inputs.network_share is not None else inputs.fabric_tiers,
        note=note,
    )


def _explicit_bom(
    session: Session | None, req: s.TcoRequest, inputs: core_cost.OnPremInputs, viewer: Actor
) -> tuple[core_cost.OnPremInputs, list[core_storage.Assumption], s.NetworkLineOut]:
    """The network capex from a network BOM request (as POST /network/bom)."""
    assert req.network_bom is not None
    from pydantic import ValidationError

    from app.schemas.network import BomIn
    from app.services.network import run_bom

    body = {"nodes": req.onprem.nodes, "gpus_per_node": req.onprem.gpus_per_node} | req.network_bom
    try:
        bom_in = BomIn.model_validate(body)
    except ValidationError as exc:
        raise SpecError(
            [Problem("network_bom." + ".".join(str(x) for x in e["loc"]), e["msg"]) for e in exc.errors()]
        ) from None
    try:
        bom = run_bom(bom_in, session, viewer=viewer)
    except SpecError as exc:
        raise SpecError([Problem(f"network_bom.{p.field}", p.message) for p in exc.problems]) from None
    if bom.cost is None:
        raise SpecError([Problem("network_bom", "the BOM has no cost (give unit prices)")])
    note = (
        f"network BOM: {bom.switches} switches, {bom.transceivers} transceivers, "
        f"{sum(bom.cables.values())} cables; unit prices: "
        + "; ".join(f"{k}: {v}" for k, v in bom.cost.prices.source.items())
    )
    inputs = replace(inputs, network_capex_usd=bom.cost.total_usd)
    fabric = str(req.network_bom.get("fabric") or "")
    return (
        inputs,
        [core_storage.Assumption("network_capex_usd", bom.cost.total_usd, "USD", note, "")],
        _bom_line(inputs, bom, fabric, "", note),
    )


def tco(session: Session | None, req: s.TcoRequest, *, viewer: Actor) -> s.TcoResponse:
    """On-prem TCO against the request's cloud options, or `viewer`'s default price rows for the GPU."""
    quotes = resolve_options(session, req.options, req.gpu, req.pricing_models, viewer=viewer)
    inputs, extra, network = network_from_bom(session, req, viewer)
    result = core_cost.tco(inputs, req.utilisation, quotes, req.months)
    data = result.to_dict()
    data["assumptions"] = cost_assumptions(result.assumptions + extra)
    data["curves"] = _json_safe(data["curves"])
    data["cloud_options"] = _option_rows(quotes)
    data["network"] = network
    return s.TcoResponse.model_validate(data)


def breakeven(session: Session | None, req: s.TcoRequest, *, viewer: Actor) -> s.BreakevenResponse:
    inputs, extra, network = network_from_bom(session, req, viewer)
    quotes = resolve_options(session, req.options, req.gpu, req.pricing_models, viewer=viewer)
    if not quotes:
        raise SpecError(
            [Problem("options", "give at least one cloud option (or a gpu with price-book rows)")]
        )
    result = core_cost.tco(inputs, req.utilisation, quotes, req.months)
    return s.BreakevenResponse(
        utilisation=req.utilisation,
        capex_total_usd=result.capex_total_usd,
        monthly_running_usd=core_cost.monthly_running_cost(inputs, req.utilisation),
        usd_per_gpu_hour=result.usd_per_gpu_hour,
        breakevens=[s.BreakevenOut(**b.to_dict()) for b in result.breakevens],  # type: ignore[arg-type]
        curves={
            k: _json_safe(v)
            for k, v in result.curves.items()
            if k in ("cumulative_usd_vs_month", "breakeven_months_vs_utilisation")
        },
        assumptions=cost_assumptions(result.assumptions + extra),
        network=network,
    )


EPOCH_DATE_FIELDS = ("price_date", "acquisition_date", "training_start", "training_end", "publication_date")


def epoch(req: s.EpochRequest) -> s.EpochResponse:
    """Epoch AI's three methods; the hardware value decays from acquisition to training start, dated by the
    request's dates or Epoch's lags (app.core.cost.epoch_timeline)."""
    release = req.hardware_release_date
    chip = "H100-SXM" if req.gpu is None else None
    tdp = req.chip_tdp_w
    if req.gpu is not None:
        from app.catalog import find_entry, parse_price_date

        entry = find_entry("gpu", req.gpu)
        chip = entry.name
        release = release or (parse_price_date(entry.date) if entry.date else None)
        tdp = tdp or entry.spec.tdp_w
    ratio = req.server_to_chip_power or core_cost.epoch_server_to_chip_power(chip or "")
    dates = core_cost.EpochDates(release_date=release, **{k: getattr(req, k) for k in EPOCH_DATE_FIELDS})
    timeline = core_cost.epoch_timeline(dates, req.training_hours)
    assert timeline.training_hours is not None
    notes = list(timeline.assumptions)
    years = req.years_since_acquisition
    if years is None:
        years = timeline.years_since_acquisition
        if years is not None:
            notes.append(
                core_storage.Assumption(
                    "years_since_acquisition", years, "years", "training start − acquisition date", ""
                )
            )
        else:
            years = 0.0
            notes.append(
                core_storage.Assumption(
                    "years_since_acquisition",
                    0.0,
                    "years",
                    "no value decay: give price_date (or gpu) and the training or publication dates",
                    "",
                )
            )
    known = {f.name for f in fields(core_cost.EpochInputs)}
    body = {k: v for k, v in req.model_dump().items() if k in known}
    body |= {
        "training_hours": timeline.training_hours,
        "years_since_acquisition": years,
        "chip_tdp_w": tdp or 700.0,
        "server_to_chip_power": ratio,
    }
    if req.gpu is None and (req.chip_tdp_w is None or req.server_to_chip_power is None):
        notes.append(
            core_storage.Assumption(
                "chip", "H100-SXM", "", "no gpu given: H100's 700 W TDP and server/chip power ratio", ""
            )
        )
    result = core_cost.epoch_costs(core_cost.EpochInputs(**body))
    data = result.to_dict()
    data["assumptions"] = cost_assumptions(result.assumptions + notes)
    return s.EpochResponse.model_validate(data)


def spot(req: s.SpotRequest) -> s.SpotResponse:
    body = req.model_dump()
    target = body.pop("target_net_savings")
    lost_h = body.pop("lost_work_hours")
    result = core_goodput.spot_savings(
        core_goodput.SpotInputs(**body, lost_work_s=lost_h * 3600.0 if lost_h is not None else None)
    )
    data = _json_safe(result.to_dict())
    assert isinstance(data, dict)
    data["assumptions"] = cost_assumptions(result.assumptions)
    if target is not None:
        inv = core_goodput.invert_spot_claim(
            target, req.spot_discount, req.preemptions_per_day, result.lost_hours_per_preemption
        )
        data["inversion"] = _json_safe(inv.__dict__)
    return s.SpotResponse.model_validate(data)


# --- goodput ---------------------------------------------------------------------------------------------


def presets() -> list[s.PresetOut]:
    out = []
    for p in core_goodput.PRESETS.values():
        r = p.rates()
        out.append(
            s.PresetOut(
                name=p.name,
                num_gpus=p.num_gpus,
                gpus_per_node=p.gpus_per_node,
                duration_days=p.duration_days,
                interruptions=p.interruptions,
                job_mtbf_hours=p.job_mtbf_s / 3600.0,
                mtbf_gpu_hours=1.0 / r.per_gpu_per_hour if r.per_gpu_per_hour else None,
                mtbf_node_hours=1.0 / r.per_node_per_hour if r.per_node_per_hour else None,
                mtbf_switch_hours=1.0 / r.per_switch_per_hour if r.per_switch_per_hour else None,
                source=p.source,
                date=p.date,
                notes=p.notes,
            )
        )
    return out


def find_preset(name: str) -> core_goodput.FailurePreset:
    key = name.strip().lower()
    if key in core_goodput.PRESETS:
        return core_goodput.PRESETS[key]
    import difflib

    close = difflib.get_close_matches(key, list(core_goodput.PRESETS), n=3, cutoff=0.3)
    raise SpecError(
        [Problem("preset", f"unknown preset {name!r}; known: {sorted(core_goodput.PRESETS)}; close: {close}")]
    )


def _scenario_inputs(
    req: s.GoodputRequest, session: Session | None, assumptions: list[core_storage.Assumption]
) -> tuple[s.GoodputRequest, float | None]:
    """The request completed from its scenario (GPU count, node size, checkpoint, MFU) and the days of useful
    compute its tokens take, None without tokens or when run_days is given."""
    if req.scenario is None:
        return req, None
    resolved, est = estimate_for(session, req.scenario)
    useful_days = None
    if resolved.tokens and req.run_days is None:
        useful_days = resolved.tokens / est.step.tokens_per_s / 86400.0
    completed = req.model_copy(
        update={
            "num_gpus": req.num_gpus or resolved.cluster.num_gpus,
            "gpus_per_node": resolved.cluster.gpus_per_node,
            "checkpoint": req.checkpoint or s.CheckpointIn.model_validate({"params": est.params_total}),
            "mfu": req.mfu or est.step.mfu,
        }
    )
    assumptions.append(core_storage.Assumption("mfu", est.step.mfu, "", "estimator (app.core.estimate)", ""))
    return completed, useful_days


def _interruption_rates(
    req: s.GoodputRequest,
    num_gpus: int,
    preset: core_goodput.FailurePreset | None,
    assumptions: list[core_storage.Assumption],
) -> dict[str, float]:
    """Interruptions per hour by cause and in total: the job MTBF given, or the preset's per-component rates
    with the MTBFs given replacing theirs."""
    if req.job_mtbf_hours is not None:
        assumptions.append(
            core_storage.Assumption("job_mtbf_hours", req.job_mtbf_hours, "h", "user input", "")
        )
        return {"gpu": 0.0, "node": 0.0, "switch": 0.0, "total": 1.0 / req.job_mtbf_hours}
    if preset is not None:
        rates = preset.rates()
        assumptions.append(
            core_storage.Assumption("failure_rates", preset.name, "", preset.source, preset.date)
        )
    else:
        rates = core_goodput.FailureRates(0.0, 0.0, 0.0, "user input")
    rates = core_goodput.FailureRates(
        per_gpu_per_hour=1.0 / req.mtbf_gpu_hours if req.mtbf_gpu_hours else rates.per_gpu_per_hour,
        per_node_per_hour=1.0 / req.mtbf_node_hours if req.mtbf_node_hours else rates.per_node_per_hour,
        per_switch_per_hour=1.0 / req.mtbf_switch_hours
        if req.mtbf_switch_hours
        else rates.per_switch_per_hour,
    )
    parts = core_goodput.interruption_rate_per_hour(rates, num_gpus, req.gpus_per_node, req.num_switches)
    if parts["total"] <= 0:
        raise SpecError([Problem("mtbf_gpu_hours", "failure rates are all zero")])
    return parts


@dataclass(frozen=True)
class _CheckpointCosts:
    """What the request's checkpoint costs on its storage tier: its size, the synchronous and asynchronous
    stalls, and the read time a restart pays (all None / 0 without a checkpoint)."""

    size_bytes: float | None = None
    sync_stall_s: float | None = None
    async_stall_s: float | None = None
    read_s: float = 0.0


def _checkpoint_costs(
    req: s.GoodputRequest, nodes: int, assumptions: list[core_storage.Assumption]
) -> _CheckpointCosts:
    if req.checkpoint is None:
        return _CheckpointCosts()
    ck = core_storage.checkpoint_size(core_storage.CheckpointSpec(**req.checkpoint.model_dump()))
    tier = storage_tier(
        req.tier,
        req.parallel_fs_gb_per_s,
        req.parallel_fs_storage_nodes,
        req.parallel_fs_gb_per_s_per_storage_node,
    )
    stall = core_storage.checkpoint_stall(ck.total_bytes, tier, nodes, req.gpus_per_node)
    read_s = core_storage.checkpoint_write(ck.total_bytes, tier, nodes, format=req.checkpoint.format).read_s
    assumptions += ck.assumptions
    assumptions.append(
        core_storage.Assumption(f"tier:{tier.name}", tier.write_bw(nodes), "B/s", tier.source, tier.date)
    )
    return _CheckpointCosts(ck.total_bytes, stall.sync_stall_s, stall.async_stall_s, read_s)


def _stall_seconds(
    req: s.GoodputRequest,
    ck: _CheckpointCosts,
    preset: core_goodput.FailurePreset | None,
    assumptions: list[core_storage.Assumption],
) -> float:
    """Seconds the training stalls per checkpoint: given, or the checkpoint's (async or sync), or the preset's."""
    if req.checkpoint_stall_s is not None:
        return req.checkpoint_stall_s
    if ck.sync_stall_s is not None and ck.async_stall_s is not None:
        return ck.async_stall_s if req.async_checkpoint else ck.sync_stall_s
    if preset is not None:
        assumptions.append(
            core_storage.Assumption(
                "checkpoint_stall_s", preset.checkpoint_stall_s, "s", f"preset {preset.name}", ""
            )
        )
        return preset.checkpoint_stall_s
    raise SpecError([Problem("checkpoint", "give checkpoint (model size) or checkpoint_stall_s")])


def _restart_seconds(
    req: s.GoodputRequest, read_s: float
) -> tuple[dict[str, float], core_storage.Assumption | None]:
    """The restart's parts and total: given, or detection, rescheduling, the checkpoint read and warm-up (with
    the assumption that says so)."""
    if req.restart_s is not None:
        return {"given": req.restart_s, "total": req.restart_s}, None
    parts = core_goodput.restart_time(read_s)
    source = "detect 2 min + reschedule 5 min + load + warm-up 2 min (estimate)"
    return parts, core_storage.Assumption("restart_s", parts["total"], "s", source, "")


def _run_summary(
    run_days: float | None, result: core_goodput.GoodputResult, stall_s: float, mtbf_s: float
) -> dict[str, float] | None:
    """Checkpoints, idle hours and interruptions over a run of `run_days` on the wall clock."""
    if run_days is None:
        return None
    if run_days > core_cost.MAX_WALL_YEARS * 365.25:
        raise SpecError(
            [
                Problem(
                    "scenario.training.tokens",
                    f"the run would take {run_days / 365.25:,.0f} years of wall time "
                    f"(more than {core_cost.MAX_WALL_YEARS:.0f})",
                )
            ]
        )
    wall_s = run_days * 86400.0
    n_ckpt = wall_s / result.wall_per_useful / result.interval_s
    return {
        "checkpoints": n_ckpt,
        "checkpoint_idle_hours": core_goodput.checkpoint_idle_hours(round(n_ckpt), stall_s),
        "interruptions": wall_s / mtbf_s,
        "wall_days": run_days,
        "useful_days": run_days * result.goodput,
    }


def goodput(req: s.GoodputRequest, session: Session | None = None) -> s.GoodputResponse:
    assumptions: list[core_storage.Assumption] = []
    req, useful_days = _scenario_inputs(req, session, assumptions)
    if req.num_gpus is None:
        raise SpecError([Problem("num_gpus", "give num_gpus or a scenario")])
    num_gpus = req.num_gpus
    preset = find_preset(req.preset) if req.preset else None
    rates_parts = _interruption_rates(req, num_gpus, preset, assumptions)
    mtbf_s = 3600.0 / rates_parts["total"]
    ck = _checkpoint_costs(req, math.ceil(num_gpus / req.gpus_per_node), assumptions)
    stall_s = _stall_seconds(req, ck, preset, assumptions)
    # an asynchronous checkpoint still writes in the background: the next cannot start before it ends
    background_s = 0.0
    if req.async_checkpoint and ck.sync_stall_s is not None and req.checkpoint_stall_s is None:
        background_s = ck.sync_stall_s
    restart_parts, restart_note = _restart_seconds(req, ck.read_s)
    fail_slow = req.fail_slow_slowdown
    if fail_slow is None:
        fail_slow = core_goodput.fail_slow_slowdown(math.ceil(num_gpus / req.gpus_per_node))
    rate_field = "job_mtbf_hours" if req.job_mtbf_hours else "preset" if preset else "mtbf_gpu_hours"
    try:
        result = core_goodput.goodput(
            core_goodput.GoodputInputs(
                mtbf_s=mtbf_s,
                checkpoint_stall_s=stall_s,
                restart_s=restart_parts["total"],
                interval_s=req.interval_s,
                method=req.method,
                mfu=req.mfu,
                min_interval_s=background_s,
                fail_slow=fail_slow,
            )
        )
    except SpecError as exc:  # name the request's failure-rate field, not the core's MTBF in seconds
        raise SpecError(
            [Problem(rate_field if p.field == "mtbf_s" else p.field, p.message) for p in exc.problems]
        ) from None
    assumptions += result.assumptions
    if restart_note is not None:
        assumptions.append(restart_note)
    run_days = req.run_days
    if run_days is None and useful_days is not None:
        run_days = useful_days * result.wall_per_useful
    return s.GoodputResponse(
        num_gpus=num_gpus,
        job_mtbf_hours=mtbf_s / 3600.0,
        interruptions_per_day=86400.0 / mtbf_s,
        interruption_rate_per_hour=rates_parts,
        checkpoint_bytes=ck.size_bytes,
        checkpoint_stall_s=stall_s,
        sync_stall_s=ck.sync_stall_s,
        async_stall_s=ck.async_stall_s,
        restart_s=restart_parts["total"],
        restart_breakdown=restart_parts,
        interval_s=result.interval_s,
        young_interval_s=result.young_interval_s if math.isfinite(result.young_interval_s) else None,
        daly_interval_s=result.daly_interval_s if math.isfinite(result.daly_interval_s) else None,
        goodput=result.goodput,
        effective_mfu=result.effective_mfu,
        fail_slow_slowdown=fail_slow,
        breakdown=result.breakdown,
        run=_run_summary(run_days, result, stall_s, mtbf_s),
        assumptions=cost_assumptions(assumptions),
    )


# --- storage ---------------------------------------------------------------------------------------------


def storage_tier(
    name: str,
    parallel_fs_gb_per_s: float | None,
    storage_nodes: int | None = None,
    gb_per_s_per_storage_node: float | None = None,
) -> core_storage.StorageTier:
    """A default tier; the parallel filesystem at the user's aggregate bandwidth, or at the sum of the user's
    storage nodes, when one is given (both at once are refused)."""
    problems = ProblemCollector()
    problems.check(
        (storage_nodes is None) == (gb_per_s_per_storage_node is None),
        "parallel_fs_storage_nodes",
        "give parallel_fs_storage_nodes and parallel_fs_gb_per_s_per_storage_node together",
    )
    problems.check(
        parallel_fs_gb_per_s is None or storage_nodes is None,
        "parallel_fs_gb_per_s",
        "give the aggregate bandwidth or the storage nodes, not both",
    )
    problems.raise_if_any()
    tier = core_storage.DEFAULT_TIERS[name]
    if tier.kind != "parallel_fs":
        return tier
    if parallel_fs_gb_per_s is not None:
        return tier.with_aggregate(parallel_fs_gb_per_s * 1e9)
    if storage_nodes is not None and gb_per_s_per_storage_node is not None:
        return tier.with_storage_nodes(storage_nodes, gb_per_s_per_storage_node * 1e9)
    return tier


def storage(req: s.StorageRequest, session: Session | None = None) -> s.StorageResponse:
    if req.scenario is not None:
        resolved, est = estimate_for(session, req.scenario)
        cluster = resolved.cluster
        checkpoint = req.checkpoint or s.CheckpointIn.model_validate({"params": est.params_total})
        req = req.model_copy(
            update={
                "checkpoint": checkpoint,
                "num_nodes": req.num_nodes or cluster.num_nodes,
                "gpus_per_node": cluster.gpus_per_node,
                "tokens_per_step": req.tokens_per_step or est.step.tokens_per_step,
                "step_s": req.step_s or est.step.total_s,
                "vocab_size": req.vocab_size or resolved.model.vocab_size,
            }
        )
    missing = [
        Problem(name, "required (or give a scenario)")
        for name in ("checkpoint", "num_nodes", "tokens_per_step", "step_s", "vocab_size")
        if getattr(req, name) is None
    ]
    if missing:
        raise SpecError(missing)
    assert req.checkpoint is not None and req.num_nodes is not None
    assert req.tokens_per_step is not None and req.step_s is not None and req.vocab_size is not None
    ck = core_storage.checkpoint_size(core_storage.CheckpointSpec(**req.checkpoint.model_dump()))
    tiers_out = []
    assumptions = list(ck.assumptions)
    for name in core_storage.DEFAULT_TIERS:
        tier = storage_tier(
            name,
            req.parallel_fs_gb_per_s,
            req.parallel_fs_storage_nodes,
            req.parallel_fs_gb_per_s_per_storage_node,
        )
        w = core_storage.checkpoint_write(
            ck.total_bytes,
            tier,
            req.num_nodes,
            format=req.checkpoint.format,
            jitter_sigma=req.jitter_sigma,
            slow_disk_fraction=req.slow_disk_fraction,
        )
        st = core_storage.checkpoint_stall(
            ck.total_bytes,
            tier,
            req.num_nodes,
            req.gpus_per_node,
            slow_disk_fraction=req.slow_disk_fraction,
            jitter_sigma=req.jitter_sigma,
        )
        tiers_out.append(
            s.TierCheckpointOut(
                tier=tier.name,
                bandwidth_bytes_per_s=w.bandwidth_bytes_per_s,
                write_s=w.write_s,
                p99_write_s=w.p99_write_s,
                read_s=w.read_s,
                sync_stall_s=st.sync_stall_s,
                async_stall_s=st.async_stall_s,
                breakdown=w.breakdown,
                source=tier.source,
                date=tier.date,
            )
        )
        assumptions.append(
            core_storage.Assumption(
                f"tier:{tier.name}", tier.write_bytes_per_s_per_node, "B/s per node", tier.source, tier.date
            )
        )
    assumptions.append(
        core_storage.Assumption(
            "d2h_bytes_per_s_per_gpu",
            core_storage.D2H_BYTES_PER_S_PER_GPU,
            "B/s",
            core_storage.D2H_SOURCE,
            "2024",
        )
    )
    assumptions.append(
        core_storage.Assumption(
            "jitter_sigma", req.jitter_sigma, "", "assumption: lognormal spread of per-node write time", ""
        )
    )
    dl = core_storage.data_loading(req.tokens_per_step, req.step_s, req.vocab_size, req.num_nodes)
    assumptions += dl.assumptions
    return s.StorageResponse(
        checkpoint_bytes=ck.total_bytes,
        checkpoint_breakdown=ck.breakdown,
        bytes_per_param=ck.bytes_per_param,
        checkpoint_tiers=tiers_out,
        tokens_per_s=dl.tokens_per_s,
        bytes_per_token=dl.bytes_per_token,
        required_bytes_per_s=dl.required_bytes_per_s,
        data_tiers=[s.TierLoadOut(**t.__dict__) for t in dl.tiers],
        warnings=dl.warnings,
        assumptions=cost_assumptions(assumptions),
    )


def parse_uuid(text: str, field_name: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError as exc:
        raise SpecError([Problem(field_name, f"not a price row id: {text!r}")]) from exc
