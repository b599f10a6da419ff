"""Network and cost pages of a planning session: collective bandwidth on each fabric preset, and
cloud vs on-prem cost over time with breakeven. Thin: the network and cost services do the work."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError
from sqlmodel import Session

from app.auth.deps import PrincipalDep
from app.core.errors import Problem, SpecError
from app.core.units import GiB, KiB, MiB
from app.deps import SessionDep
from app.errors import NotFoundError
from app.schemas import network as net_schema
from app.services import planning
from app.services.catalog import Actor
from app.services.catalog_public import price_viewer
from app.web.pages import _filters, _panels
from app.web.pages._builder import BuilderState
from app.web.templating import is_htmx, render

router = APIRouter()

NETWORK_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
SIZE_CHOICES = {
    "8 KiB": 8 * KiB,
    "64 KiB": 64 * KiB,
    "1 MiB": MiB,
    "16 MiB": 16 * MiB,
    "256 MiB": 256 * MiB,
    "4 GiB": 4 * GiB,
}


@dataclass
class Form:
    """Query parameters of a tool page, parsed leniently: a bad value keeps the default for the computation, with a
    message, and its text (`raw`) stays in the input, as the builder's (app.web.pages._builder.BuilderState.raw).
    `labels`: each field's label and unit, which the inputs and the problem list both show; `aliases`: the names
    the services give some fields (a problem on one goes to the page's field)."""

    values: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def refuse(self, params: Mapping[str, str], name: str, message: str) -> None:
        """A refused input: its message, and the user's own text kept for the input."""
        self.errors[name] = message
        self.raw[name] = str(params[name])[:200]

    def field_of(self, path: str) -> str:
        """The page's field of a problem's path (onprem.pue → pue; a service's name through `aliases`)."""
        name = path.split(".")[-1]
        return self.aliases.get(name, name)

    def label(self, name: str) -> str:
        return self.labels.get(self.field_of(name), (name, ""))[0]

    def unit(self, name: str) -> str:
        return self.labels.get(name, (name, ""))[1]


def _int(params: Mapping[str, str], form: Form, name: str, lo: int, hi: int) -> None:
    if name not in params:
        return
    try:
        value = int(params[name])
        if not lo <= value <= hi:
            raise ValueError
        form.values[name] = value
    except ValueError:
        form.refuse(params, name, f"a whole number from {lo} to {hi:,}")


def _float(params: Mapping[str, str], form: Form, name: str, lo: float, hi: float) -> None:
    if name not in params:
        return
    try:
        value = float(params[name])
        if not lo <= value <= hi:
            raise ValueError
        form.values[name] = value
    except ValueError:
        form.refuse(params, name, f"a number from {lo:g} to {hi:g}")


def _optional_float(params: Mapping[str, str], form: Form, name: str, lo: float, hi: float) -> None:
    """A figure that overrides a default: blank keeps the default ("" in the form)."""
    form.values.setdefault(name, "")
    if params.get(name, "").strip():
        _float(params, form, name, lo, hi)


def _choice(params: Mapping[str, str], form: Form, name: str, choices: tuple[str, ...]) -> None:
    if name in params:
        if params[name] in choices:
            form.values[name] = params[name]
        else:
            form.refuse(params, name, f"one of {', '.join(choices)}")


def _text(params: Mapping[str, str], form: Form, name: str) -> None:
    if name in params and params[name].strip():
        form.values[name] = params[name].strip()[:200]


def _problems(exc: Exception) -> list[Problem]:
    if isinstance(exc, SpecError):
        return list(exc.problems)
    if isinstance(exc, ValidationError):
        return list(planning.validation_problems(exc, "").problems)
    return [Problem("gpu", str(exc))]


def cluster_links(state: BuilderState) -> dict[str, str]:
    """The Cost and Network pages for a builder's or a saved plan's cluster, by the query names their forms read
    (cost_form, network_form): its GPU, nodes, GPUs per node and fabric (/cost prices that fabric, /network draws
    it first among every preset)."""
    cluster = {
        "gpu": state.gpu,
        "nodes": state.nodes,
        "gpus_per_node": state.gpus_per_node,
        "fabric": state.fabric,
    }
    return {"cost": "/cost?" + urlencode(cluster), "network": "/network?" + urlencode(cluster)}


def fabric_select(form: Form, blank: str) -> list[tuple[str, str]]:
    """A tool page's fabric select: blank first (`blank` says what it means), then the catalog's presets by name,
    each shown by its label (the builder's list); a name the catalog lacks stays selectable, so the page shows what
    was asked beside its error."""
    presets = _panels.fabric_options()
    options = [("", blank), *presets]
    if form["fabric"] and form["fabric"] not in {name for name, _ in presets}:
        options.insert(1, (form["fabric"], form["fabric"]))
    return options


# ---------------------------------------------------------------------------------------------- network


# the network page's fields: label and unit, as its inputs and its problem list show them
NETWORK_FIELDS: dict[str, tuple[str, str]] = {
    "gpu": ("GPU type", ""),
    "nodes": ("Nodes", "nodes"),
    "gpus_per_node": ("GPUs per node", "GPUs"),
    "fabric": ("Fabric", "this cluster's: drawn first, in a thicker line"),
    "op": ("Operation", ""),
    "min_size": ("Smallest message", "bytes"),
    "max_size": ("Largest message", "bytes"),
}


def network_form(params: Mapping[str, str]) -> Form:
    form = Form(
        {
            "gpu": "H100-SXM",
            "nodes": 16,
            "gpus_per_node": 8,
            "fabric": "",  # blank: no preset singled out
            "op": "all_reduce",
            "min_size": "64 KiB",
            "max_size": "4 GiB",
        },
        labels=NETWORK_FIELDS,
    )
    _text(params, form, "gpu")
    _int(params, form, "nodes", 1, 100_000)
    _int(params, form, "gpus_per_node", 1, 576)
    _fabric(params, form)
    _choice(params, form, "op", NETWORK_OPS)
    _choice(params, form, "min_size", tuple(SIZE_CHOICES))
    _choice(params, form, "max_size", tuple(SIZE_CHOICES))
    _check_size_order(form)
    return form


def _fabric(params: Mapping[str, str], form: Form) -> None:
    """The cluster's fabric: a preset's name or alias (`ndr` is ib-ndr-8x400), kept as the preset's name; an unknown
    one is refused with the closest names, and stays selected beside its error."""
    from app.catalog.fabrics import find_preset

    _text(params, form, "fabric")
    if not form["fabric"]:
        return
    try:
        form.values["fabric"] = find_preset(form["fabric"]).name
    except NotFoundError as exc:
        form.refuse(params, "fabric", str(exc))


def _check_size_order(form: Form) -> None:
    """A smallest message larger than the largest: both inputs refused, each naming the other by its label (the
    values stay selected)."""
    lo, hi = form["min_size"], form["max_size"]
    if {"min_size", "max_size"} & form.errors.keys() or SIZE_CHOICES[lo] <= SIZE_CHOICES[hi]:
        return  # a refused size is already named; the other is compared with no default
    form.errors["min_size"] = f"{lo} is larger than “{form.label('max_size')}” ({hi})"
    form.errors["max_size"] = f"{hi} is smaller than “{form.label('min_size')}” ({lo})"


def network_view(session: Session, form: Form) -> dict[str, Any]:
    """busbw vs message size for the chosen collective on every fabric preset (nccl-tests convention); the
    cluster's own fabric, when the form names one, first and in a thicker line."""
    from app.services import network as net

    chosen = "" if "fabric" in form.errors else form["fabric"]
    fabrics = sorted((f.name for f in net.list_fabrics()), key=lambda name: name != chosen)
    lo, hi = SIZE_CHOICES[form["min_size"]], SIZE_CHOICES[form["max_size"]]
    problems = [Problem(k, v) for k, v in form.errors.items()]
    if not problems and form["nodes"] * form["gpus_per_node"] < 2:
        problems.append(
            Problem("gpus_per_node", "a collective needs at least 2 GPUs (nodes × GPUs per node)")
        )
    series: dict[str, list[Any]] = {}
    for name in fabrics:
        if problems:
            break
        try:
            req = net_schema.CollectiveIn.model_validate(
                {
                    "op": form["op"],
                    "sweep": {"min_bytes": lo, "max_bytes": hi, "factor": 4},
                    "cluster": {
                        "gpu": form["gpu"],
                        "nodes": form["nodes"],
                        "gpus_per_node": form["gpus_per_node"],
                        "fabric": name,
                    },
                }
            )
            series[name] = net.run_collective(req, session).results
        except (SpecError, ValidationError, NotFoundError) as exc:
            problems = _problems(exc)
    if problems or not series:
        return {"problems": problems, "fabrics": net.list_fabrics()}
    sizes = [r.message_bytes for r in next(iter(series.values()))]
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"{name} (chosen)" if name == chosen else name,
            "x": [r.message_bytes for r in rows],
            "y": [r.busbw_gbps for r in rows],
            "marker": {"symbol": _panels._SYMBOLS[i % len(_panels._SYMBOLS)], "size": 7},
            "line": {"dash": _panels._DASHES[i % len(_panels._DASHES)], "width": 4 if name == chosen else 2},
            "hovertemplate": "%{x:.3s}B: %{y:.1f} GB/s<extra>" + name + "</extra>",
        }
        for i, (name, rows) in enumerate(series.items())
    ]
    figure = {
        "data": traces,
        "layout": {
            "xaxis": {"title": {"text": "Message size (bytes)"}, "type": "log", "automargin": True},
            "yaxis": {"title": {"text": "Bus bandwidth (GB/s)"}, "rangemode": "tozero", "automargin": True},
            "legend": {"orientation": "h", "y": -0.22, "yanchor": "top"},
        },
    }
    table = [
        {
            "size": size,
            "busbw": {name: rows[i].busbw_gbps for name, rows in series.items()},
            "time_us": {name: rows[i].time_us for name, rows in series.items()},
        }
        for i, size in enumerate(sizes)
    ]
    largest = {name: rows[-1] for name, rows in series.items()}
    return {
        "problems": [],
        "figure": figure,
        "table": table,
        "names": list(series),
        "largest": largest,
        # what published measurements of these kinds of collective measured against their estimates
        "accuracy": list(
            dict.fromkeys(r.accuracy.summary for rows in series.values() for r in rows if r.accuracy)
        ),
        "fabrics": net.list_fabrics(),
        "ranks": next(iter(series.values()))[0].ranks,
        "chosen": chosen,
        "chosen_label": dict(_panels.fabric_options()).get(chosen, ""),
    }


@router.get("/network", response_class=HTMLResponse)
def network_page(request: Request, session: SessionDep) -> HTMLResponse:
    form = network_form(dict(request.query_params))
    view = network_view(session, form)
    context = {
        "title": "Network",
        "form": form,
        "view": view,
        "gpus": _panels.choices(session, BuilderState(gpu=form["gpu"])).gpus,
        "fabrics": fabric_select(form, "none singled out: every preset alike"),
        "ops": NETWORK_OPS,
        "sizes": list(SIZE_CHOICES),
    }
    # 422 when an input is refused, as on /cost; htmx swaps only 2xx responses, so its partial goes back as 200
    status = 422 if view["problems"] and not is_htmx(request) else 200
    return render(request, "plan_network.html", context, block="network_results", status_code=status)


# ---------------------------------------------------------------------------------------------- cost


def cost_form(params: Mapping[str, str]) -> Form:
    form = Form(
        {
            "gpu": "H100-SXM",
            "nodes": 16,
            "gpus_per_node": 8,
            "utilisation": 70.0,
            "months": 48,
            "depreciation": "straight_line",
            "fabric": "",  # blank: the GPU's reference fabric, as the API and CLI when none is named
        },
        labels=COST_FIELDS,
        aliases={field: name for name, (_, _, field, _) in ONPREM_OVERRIDES.items()},
    )
    _text(params, form, "gpu")
    _text(params, form, "fabric")
    _int(params, form, "nodes", 1, 100_000)
    _int(params, form, "gpus_per_node", 1, 72)
    _float(params, form, "utilisation", 1.0, 100.0)
    _int(params, form, "months", 1, 240)
    _choice(params, form, "depreciation", ("straight_line", "economic"))
    for name, (lo, hi, _, _) in ONPREM_OVERRIDES.items():
        _optional_float(params, form, name, lo, hi)
    return form


# page field → (min, max, OnPremIn field, scale from the page's unit to the field's)
ONPREM_OVERRIDES: dict[str, tuple[float, float, str, float]] = {
    "server_usd": (0.0, 1e9, "server_capex_usd_per_node", 1.0),
    "node_kw": (0.0, 1000.0, "node_power_kw", 1.0),
    "pue": (1.0, 5.0, "pue", 1.0),
    "usd_per_kwh": (0.0, 10.0, "usd_per_kwh", 1.0),
    "colo_usd_per_kw_month": (0.0, 1e5, "colo_usd_per_kw_month", 1.0),
    "maintenance_pct": (0.0, 100.0, "maintenance_fraction_per_year", 0.01),
    "gpus_per_fte": (1.0, 1e6, "gpus_per_fte", 1.0),
    "usd_per_fte_year": (0.0, 1e8, "usd_per_fte_year", 1.0),
    "residual_pct": (0.0, 100.0, "residual_fraction", 0.01),
}


# the cost page's fields: label and unit, as its inputs and its problem list show them
COST_FIELDS: dict[str, tuple[str, str]] = {
    "gpu": ("GPU type", ""),
    "nodes": ("Nodes", "nodes"),
    "gpus_per_node": ("GPUs per node", "GPUs"),
    "fabric": ("Fabric", "priced by its network bill of materials"),
    "utilisation": ("Utilisation", "% of hours busy"),
    "months": ("Horizon", "months"),
    "depreciation": ("Depreciation", ""),
    "server_usd": ("Server price", "USD per node"),
    "node_kw": ("Node power", "kW at maximum"),
    "pue": ("PUE", "facility / IT power"),
    "usd_per_kwh": ("Electricity", "USD per kWh"),
    "colo_usd_per_kw_month": ("Colocation", "USD per kW-month"),
    "maintenance_pct": ("Maintenance", "% of hardware capex per year"),
    "gpus_per_fte": ("Staff ratio", "GPUs per engineer"),
    "usd_per_fte_year": ("Staff cost", "USD per engineer-year"),
    "residual_pct": ("Resale value at end of life", "% of capex"),
}


def onprem_overrides(form: Form) -> dict[str, float]:
    """The on-prem figures the user typed, in the request's units; blank ones are left to the defaults."""
    return {
        field: form[name] * scale
        for name, (_, _, field, scale) in ONPREM_OVERRIDES.items()
        if form[name] != ""
    }


def cost_view(session: Session, form: Form, viewer: Actor) -> dict[str, Any]:
    """Cumulative cost of cloud options (`viewer`'s price rows for the GPU) vs owning the cluster, breakeven by
    option, $/GPU-hour vs utilisation."""
    from app.schemas.cost import TcoRequest
    from app.services import cost as cost_service

    problems = [Problem(k, v) for k, v in form.errors.items()]
    if problems:
        return {"problems": problems}
    body: dict[str, Any] = {
        "onprem": {
            "nodes": form["nodes"],
            "gpus_per_node": form["gpus_per_node"],
            "depreciation": form["depreciation"],
        }
        | onprem_overrides(form),
        "utilisation": form["utilisation"] / 100.0,
        "gpu": form["gpu"],
        "months": form["months"],
    }
    if form["fabric"]:
        body["fabric"] = form["fabric"]  # the service checks the name (422 naming `fabric` through the API)
    try:
        tco = cost_service.tco(session, TcoRequest.model_validate(body), viewer=viewer)
    except (SpecError, ValidationError, NotFoundError, LookupError) as exc:
        problems = _problems(exc)
        for p in problems:  # a problem with one of the page's own fields is also shown beside that field
            if form.field_of(p.field) in form.values:
                form.errors.setdefault(form.field_of(p.field), p.message)
        return {"problems": problems}
    breakevens = sorted(tco.breakevens, key=lambda b: b.usd_per_gpu_hour)
    shown = {b.label for b in breakevens[:6]} | {"on-prem", "on-prem net of resale"}
    cumulative = tco.curves.get("cumulative_usd_vs_month") or {"x": [], "series": {}}
    per_hour = tco.curves.get("usd_per_gpu_hour_vs_utilisation") or {"x": [], "series": {}}

    def traces(curve: dict[str, Any], hover: str, xscale: float = 1.0) -> list[dict[str, Any]]:
        out = []
        for label, ys in curve["series"].items():
            if label not in shown:
                continue
            out.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": label,
                    # the whole label: on a narrow chart the legend's text is broken into lines (charts.js)
                    "hovertemplate": hover + "<extra>" + label + "</extra>",
                    "x": [x * xscale for x in curve["x"]],
                    "y": [None if y is None else round(float(y), 3) for y in ys],
                    "line": {
                        "dash": "solid" if label == "on-prem" else "dash",
                        "width": 3 if label == "on-prem" else 1.5,
                    },
                }
            )
        return out

    legend = {"orientation": "h", "y": -0.22, "yanchor": "top"}
    cumulative_fig = {
        "data": traces(cumulative, "month %{x}: %{y:,.0f} USD"),
        "layout": {
            "xaxis": {"title": {"text": "Months"}, "automargin": True},
            "yaxis": {"title": {"text": "Cumulative cost (USD)"}, "automargin": True},
            "legend": legend,
        },
    }
    per_hour_fig = {
        "data": traces(per_hour, "%{x:.0f} % utilisation: %{y:,.2f} USD per GPU-hour", 100.0),
        "layout": {
            "xaxis": {"title": {"text": "Utilisation (%)"}, "automargin": True},
            "yaxis": {"title": {"text": "Cost per GPU-hour used (USD)"}, "type": "log", "automargin": True},
            "legend": legend,
        },
    }
    options = {o.label: o for o in tco.cloud_options}
    rows = [
        {
            "label": b.label,
            "usd_per_gpu_hour": b.usd_per_gpu_hour,
            "breakeven_months": b.breakeven_months,
            "breakeven_utilisation": b.breakeven_utilisation,
            "onprem_cheaper": b.onprem_cheaper_at_utilisation,
            "committed": b.committed,
            "date": options[b.label].price_date if b.label in options else "",
            "stale": options[b.label].stale if b.label in options else False,
        }
        for b in breakevens
    ]
    per_hour_rows = [
        {"utilisation": 100 * u, "onprem": per_hour["series"].get("on-prem", [None] * len(per_hour["x"]))[i]}
        for i, u in enumerate(per_hour["x"])
    ]
    return {
        "problems": [],
        "tco": tco,
        "rows": rows,
        "cumulative": cumulative_fig,
        "per_hour": per_hour_fig,
        "per_hour_rows": per_hour_rows,
        "assumptions": [a.model_dump() for a in tco.assumptions],
        "server": next((a for a in tco.assumptions if a.name == "server_capex_usd_per_node"), None),
    }


@router.get("/cost", response_class=HTMLResponse)
def cost_page(request: Request, session: SessionDep, principal: PrincipalDep) -> HTMLResponse:
    form = cost_form(dict(request.query_params))
    view = cost_view(session, form, price_viewer(principal))
    context = {
        "title": "Cost",
        "form": form,
        "view": view,
        "gpus": _panels.choices(session, BuilderState(gpu=form["gpu"])).gpus,
        "fabrics": fabric_select(form, "the GPU's reference fabric"),
    }
    # 422 when an input is refused; htmx swaps only 2xx responses, so its partial goes back as 200
    status = 422 if view["problems"] and not is_htmx(request) else 200
    return render(request, "plan_cost.html", context, block="cost_results", status_code=status)


_ = _filters  # the planning filters (num, label, …) are registered by importing the module
