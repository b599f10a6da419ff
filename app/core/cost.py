"""Cost: cost per training run, on-prem TCO, breakeven against cloud options, Epoch AI's three methods.

Pure functions over frozen dataclasses. Money in US dollars, time in hours where the price is per hour
(GPU-hour prices are the industry unit) and in seconds elsewhere. Every default is an `Assumption` with
its source and date; every result carries a breakdown that sums to its total.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any, Literal

from app.core.errors import Problem, ProblemCollector, SpecError
from app.core.price_terms import TermKind, parse_term
from app.core.storage import Assumption

HOURS_PER_YEAR = 24 * 365.25  # Epoch AI's convention (training-cost-trends, HOURS_PER_YEAR)
HOURS_PER_MONTH = HOURS_PER_YEAR / 12
MAX_WALL_YEARS = (
    100.0  # a run longer than this is an input mistake (tokens 1e18 …), refused rather than costed
)

Depreciation = Literal["straight_line", "economic"]


# --- prices --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceQuote:
    """One way to pay for GPU time, with its provenance."""

    label: str
    usd_per_gpu_hour: float
    pricing_model: str = "on-demand"
    commitment_months: float = 0.0  # minimum billed term (1-yr reserved → 12); 0 → pay as you go
    term: TermKind = "on_demand"  # parsed from the pricing model (app.core.price_terms)
    gpus_per_instance: int = 8
    date: str = ""
    source: str = ""
    price_id: str = ""
    stale: bool = False

    def assumption(self) -> Assumption:
        return Assumption(
            f"price:{self.label}",
            self.usd_per_gpu_hour,
            "USD/GPU-hour",
            self.source or "user input",
            self.date,
        )


def commitment_months_for(pricing_model: str) -> float:
    """Minimum term implied by a price book's pricing model text ("1-yr reserved" → 12, "PAYG / 1y / 3y" → 0);
    ValueError when the text names no known term (app.core.price_terms.parse_term)."""
    return parse_term(pricing_model).commitment_months


@dataclass(frozen=True)
class HeadlinePrice:
    """The one price a plan is costed at, and the spread around it.

    Rule: the median of the non-stale on-demand quotes for the GPU (all on-demand quotes when every one is
    stale), the lower middle quote when their number is even so that the headline is a price someone quotes;
    the cheapest and dearest of the same quotes beside it. Spot, reserved and capacity-block quotes are left
    out: they bill differently (see each option's billing)."""

    quote: PriceQuote
    cheapest: PriceQuote
    dearest: PriceQuote
    quotes: int
    all_stale: bool

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.quote.usd_per_gpu_hour

    @property
    def statement(self) -> str:
        if self.quotes == 1:
            kind = "stale on-demand quote" if self.all_stale else "non-stale on-demand quote"
            return (
                f"${self.usd_per_gpu_hour:.2f}/GPU-hour, the only {kind}: {self.quote.label}; one quote is thin "
                "evidence: compare with other providers or add your own price"
            )
        pool = "on-demand quotes, all stale" if self.all_stale else "non-stale on-demand quotes"
        return (
            f"${self.usd_per_gpu_hour:.2f}/GPU-hour, median of {self.quotes} {pool}: {self.quote.label}; "
            f"cheapest ${self.cheapest.usd_per_gpu_hour:.2f} ({self.cheapest.label}), "
            f"dearest ${self.dearest.usd_per_gpu_hour:.2f} ({self.dearest.label})"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "label": self.quote.label,
            "price_id": self.quote.price_id,
            "price_date": self.quote.date,
            "quotes": self.quotes,
            "all_stale": self.all_stale,
            "cheapest_usd_per_gpu_hour": self.cheapest.usd_per_gpu_hour,
            "cheapest_label": self.cheapest.label,
            "dearest_usd_per_gpu_hour": self.dearest.usd_per_gpu_hour,
            "dearest_label": self.dearest.label,
            "statement": self.statement,
        }


def headline_pool(quotes: list[PriceQuote]) -> list[PriceQuote]:
    """The quotes the headline price is the median of (rule in HeadlinePrice), cheapest first: the non-stale
    on-demand ones, or every on-demand one when all are stale; empty when none is on-demand."""
    on_demand = [q for q in quotes if q.term == "on_demand"]
    fresh = [q for q in on_demand if not q.stale]
    return sorted(fresh or on_demand, key=lambda q: (q.usd_per_gpu_hour, q.date, q.label))


def headline_price(quotes: list[PriceQuote]) -> HeadlinePrice | None:
    """The headline price of a set of quotes (rule in HeadlinePrice); None when none is on-demand."""
    pool = headline_pool(quotes)
    if not pool:
        return None
    return HeadlinePrice(
        quote=pool[(len(pool) - 1) // 2],
        cheapest=pool[0],
        dearest=pool[-1],
        quotes=len(pool),
        all_stale=all(q.stale for q in pool),
    )


# --- cost per training run -----------------------------------------------------------------------------


def training_flop(params: float, tokens: float, active_params: float | None = None) -> float:
    """Training compute C ≈ 6·N·D (Kaplan et al. 2020, arXiv 2001.08361 §2.1: 2N forward + 4N backward per
    token). For MoE, N is the active parameters per token (Fedus et al. 2021, Switch Transformer §2)."""
    n = active_params if active_params is not None else params
    return 6.0 * n * tokens


@dataclass(frozen=True)
class RunInputs:
    num_gpus: int
    gpu_hours: float | None = None  # productive GPU-hours (no failures); or derive from FLOPs below
    total_flop: float | None = None
    peak_flops_per_gpu: float | None = None  # dense peak FLOP/s of the compute dtype
    mfu: float | None = None
    goodput: float = 1.0  # useful / billed time (failures, checkpoints, restarts, fail-slows)


@dataclass(frozen=True)
class RunOptionCost:
    quote: PriceQuote
    total_usd: float
    breakdown: dict[str, float]  # productive / goodput_loss / instance_rounding / unused_commitment
    billed_gpu_hours: float
    billed_hours: float  # wall-clock hours paid for (≥ run length under a commitment)
    commitment_exceeds_run: bool

    @property
    def billing(self) -> str:
        """How this option is billed, in words: by the hour, or a committed term and what of it goes unused."""
        if self.quote.commitment_months <= 0:
            spot = ", preemptible" if self.quote.term == "spot" else ""
            block = "prepaid block, " if self.quote.term == "capacity_block" else ""
            return f"{block}hourly{spot}"
        term = f"{self.quote.commitment_months:g}-month commitment"
        unused = self.breakdown["unused_commitment"]
        if unused <= 0:
            return f"{term}, used in full by the run"
        return f"{term} billed in full: ${unused:,.0f} of it unused after the run"

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.quote.label,
            "price_id": self.quote.price_id,
            "pricing_model": self.quote.pricing_model,
            "term": self.quote.term,
            "commitment_months": self.quote.commitment_months,
            "billing": self.billing,
            "usd_per_gpu_hour": self.quote.usd_per_gpu_hour,
            "price_date": self.quote.date,
            "price_source": self.quote.source,
            "stale": self.quote.stale,
            "total_usd": self.total_usd,
            "breakdown": self.breakdown,
            "billed_gpu_hours": self.billed_gpu_hours,
            "billed_hours": self.billed_hours,
            "commitment_exceeds_run": self.commitment_exceeds_run,
        }


@dataclass(frozen=True)
class RunCost:
    productive_gpu_hours: float
    billed_gpu_hours: float
    wall_clock_hours: float
    total_flop: float | None
    options: list[RunOptionCost]
    cheapest: str | None
    assumptions: list[Assumption]

    def to_dict(self) -> dict[str, object]:
        return {
            "productive_gpu_hours": self.productive_gpu_hours,
            "billed_gpu_hours": self.billed_gpu_hours,
            "wall_clock_hours": self.wall_clock_hours,
            "total_flop": self.total_flop,
            "options": [o.to_dict() for o in self.options],
            "cheapest": self.cheapest,
            "assumptions": [a.as_dict() for a in self.assumptions],
        }


def productive_gpu_hours(inputs: RunInputs) -> float:
    if inputs.gpu_hours is not None:
        return inputs.gpu_hours
    assert inputs.total_flop is not None and inputs.peak_flops_per_gpu and inputs.mfu
    return inputs.total_flop / (inputs.peak_flops_per_gpu * inputs.mfu) / 3600.0


def check_run_inputs(inputs: RunInputs) -> None:
    pc = ProblemCollector()
    pc.check(inputs.num_gpus >= 1, "num_gpus", "must be >= 1")
    pc.check(0 < inputs.goodput <= 1, "goodput", "must be in (0, 1]")
    if inputs.gpu_hours is None:
        pc.check(
            inputs.total_flop is not None and inputs.total_flop > 0, "total_flop", "give gpu_hours or FLOPs"
        )
        pc.check(
            inputs.peak_flops_per_gpu is not None and inputs.peak_flops_per_gpu > 0,
            "peak_flops_per_gpu",
            "required (with mfu) to turn FLOPs into GPU-hours",
        )
        pc.check(inputs.mfu is not None and 0 < inputs.mfu <= 1, "mfu", "must be in (0, 1]")
    else:
        pc.check(inputs.gpu_hours > 0, "gpu_hours", "must be > 0")
    pc.raise_if_any()


def on_wall_clock(productive: Any, goodput: Any) -> Any:
    """Productive time (seconds, days or GPU-hours) as the wall clock and the bill count it: ÷ the goodput, the
    share of wall-clock time that trains (failures, checkpoint stalls, restarts and fail-slows, app.core.goodput). The one
    place that relation is written: run_cost's billed GPU-hours, the planner's ranked layouts (numbers or numpy
    columns) and the plan headline's wall-clock days all use it."""
    return productive / goodput


def run_cost(inputs: RunInputs, quotes: list[PriceQuote]) -> RunCost:
    """Cost of one training run under each pricing option.

    Billed time = productive GPU-hours / goodput, spread over the run's GPUs. GPUs are rented in whole
    instances (8 per p5.48xlarge …): the remainder of the last instance is paid but idle. A commitment
    (1-yr, 3-yr) is paid for its whole term even if the run is shorter.
    """
    check_run_inputs(inputs)
    pc = ProblemCollector()
    for i, q in enumerate(quotes):
        pc.check(q.usd_per_gpu_hour >= 0, f"options.{i}.usd_per_gpu_hour", "must be >= 0")
        pc.check(q.gpus_per_instance >= 1, f"options.{i}.gpus_per_instance", "must be >= 1")
        pc.check(q.commitment_months >= 0, f"options.{i}.commitment_months", "must be >= 0")
    pc.raise_if_any()
    productive = productive_gpu_hours(inputs)
    billed = on_wall_clock(productive, inputs.goodput)
    wall = billed / inputs.num_gpus
    if wall > MAX_WALL_YEARS * HOURS_PER_YEAR:
        where = "gpu_hours" if inputs.gpu_hours is not None else "total_flop"
        raise SpecError(
            [
                Problem(
                    where,
                    f"the run would take {wall / HOURS_PER_YEAR:,.0f} years of wall time on {inputs.num_gpus:,} "
                    f"GPUs (more than {MAX_WALL_YEARS:.0f}): check the tokens, GPU-hours and GPU count",
                )
            ]
        )
    options: list[RunOptionCost] = []
    for q in quotes:
        p = q.usd_per_gpu_hour
        instances = math.ceil(inputs.num_gpus / q.gpus_per_instance)
        paid_gpus = instances * q.gpus_per_instance
        term_h = q.commitment_months * HOURS_PER_MONTH
        billed_h = max(wall, term_h)
        breakdown = {
            "productive": productive * p,
            "goodput_loss": (billed - productive) * p,
            "instance_rounding": (paid_gpus - inputs.num_gpus) * wall * p,
            "unused_commitment": paid_gpus * (billed_h - wall) * p,
        }
        options.append(
            RunOptionCost(
                quote=q,
                total_usd=sum(breakdown.values()),
                breakdown=breakdown,
                billed_gpu_hours=paid_gpus * billed_h,
                billed_hours=billed_h,
                commitment_exceeds_run=term_h > wall,
            )
        )
    cheapest = min(options, key=lambda o: o.total_usd).quote.label if options else None
    flop = inputs.total_flop
    assumptions = [q.assumption() for q in quotes]
    assumptions.append(Assumption("goodput", inputs.goodput, "", "input (see /goodput)", ""))
    if inputs.gpu_hours is None:
        assumptions += [
            Assumption(
                "training_flop_formula", "6·N·D", "FLOP", "Kaplan et al. 2020 (arXiv 2001.08361) §2.1", "2020"
            ),
            Assumption("mfu", inputs.mfu or 0.0, "", "input (estimator or measured)", ""),
        ]
    return RunCost(productive, billed, wall, flop, options, cheapest, assumptions)


# --- on-prem TCO ---------------------------------------------------------------------------------------

# Network capex as a share of (server + network) capex by fabric tiers, InfiniBand NDR switches + cables
# with NICs inside the node price: 2-tier (128 nodes) 8.6 %, 3-tier (4,096 nodes) 12.8 % (E. Cheah,
# "H100 Freakonomics" sheet, 2024-08, docs.google.com/spreadsheets/d/1Ft3RbeZ-w43kYSiLfYc1vxO41mK5lmJpcPC9GOYHAWc).
# Single switch: one leaf, ~3 %. Epoch AI's model uses 19 % for the whole cluster interconnect.
NETWORK_SHARE_BY_TIERS: dict[int, float] = {1: 0.03, 2: 0.086, 3: 0.128}

DEFAULTS: dict[str, Assumption] = {
    a.name: a
    for a in [
        Assumption(
            "lifetime_years", 5.0, "years", "Epoch AI server lifetime for hardware from 2023 on", "2025"
        ),
        Assumption(
            "economic_ooms_per_year",
            0.14,
            "OOM/yr",
            "Epoch AI ML_GPU_PRICE_PERFORMANCE_OOMS_PER_YEAR (value decays 0.14·ln10 = 32 %/yr)",
            "2025",
        ),
        Assumption(
            "cost_of_capital",
            0.08,
            "1/yr",
            "assumption: corporate weighted average cost of capital; replace with your own",
            "",
        ),
        Assumption(
            "avg_draw_fraction",
            0.75,
            "",
            "Epoch AI server_TDP_fraction: average draw during training = 75 % of server TDP",
            "2025",
        ),
        Assumption(
            "pue", 1.56, "", "Uptime Institute 2024 global data-centre survey: average PUE 1.56", "2024"
        ),
        Assumption(
            "usd_per_kwh", 0.0771, "USD/kWh", "EIA US industrial average electricity price 2024", "2024"
        ),
        Assumption(
            "colo_usd_per_kw_month",
            184.06,
            "USD/kW-month",
            "CBRE North America data center trends H2 2024: wholesale 250-500 kW asking rate",
            "2024-H2",
        ),
        Assumption(
            "maintenance_fraction_per_year",
            0.06,
            "1/yr",
            "CTWatch (Roskies & Zacharia 2006): annual maintenance 4-8 % of purchase price; midpoint",
            "2006",
        ),
        Assumption(
            "gpus_per_fte",
            250.0,
            "GPU/FTE",
            "CTWatch (Roskies & Zacharia 2006): 1 FTE per ~250 processors (pre-GPU rule of thumb)",
            "2006",
        ),
        Assumption(
            "usd_per_fte_year",
            250000.0,
            "USD/yr",
            "NAG HPC TCO calculator default: fully loaded cost per person-year",
            "2023",
        ),
        Assumption("software_usd_per_gpu_year", 0.0, "USD/yr", "none by default (open-source stack)", ""),
        Assumption(
            "storage_capex_usd",
            0.0,
            "USD",
            "none by default; parallel FS ~$250/TB (infra-economics.com)",
            "2025",
        ),
    ]
}


def _d(name: str) -> float:
    value = DEFAULTS[name].value
    assert isinstance(value, float)
    return value


@dataclass(frozen=True)
class ServerQuote:
    """The purchase price and maximum power of one server model, per GPU type (app/catalog/onprem_servers.csv).

    A server holds `gpus_per_server` GPUs (8 for HGX/DGX, 72 for a GB200 NVL72 rack); a node of another size is
    priced and powered pro rata per GPU."""

    gpu_name: str
    server: str
    gpus_per_server: int
    server_usd: float
    server_date: str
    server_source: str
    node_kw: float
    power_date: str
    power_source: str

    def capex_per_node(self, gpus_per_node: int) -> float:
        return self.server_usd / self.gpus_per_server * gpus_per_node

    def kw_per_node(self, gpus_per_node: int) -> float:
        return self.node_kw / self.gpus_per_server * gpus_per_node

    def assumptions(self, gpus_per_node: int) -> tuple[Assumption, Assumption]:
        share = (
            "" if gpus_per_node == self.gpus_per_server else f" × {gpus_per_node}/{self.gpus_per_server} GPUs"
        )
        return (
            Assumption(
                "server_capex_usd_per_node",
                self.capex_per_node(gpus_per_node),
                "USD",
                f"{self.gpu_name}: {self.server} ${self.server_usd:,.0f}{share} ({self.server_source})",
                self.server_date,
            ),
            Assumption(
                "node_power_kw",
                self.kw_per_node(gpus_per_node),
                "kW",
                f"{self.gpu_name}: {self.server} {self.node_kw:g} kW{share} ({self.power_source})",
                self.power_date,
            ),
        )


@dataclass(frozen=True)
class OnPremInputs:
    nodes: int = 1
    gpus_per_node: int = 8
    server_capex_usd_per_node: float | None = None  # None → refused: give it, or the GPU's server row
    network_capex_usd: float | None = None  # from a network BOM; None → share by fabric tiers
    network_share: float | None = None  # of (server + network) capex; None → NETWORK_SHARE_BY_TIERS
    fabric_tiers: int = 2
    storage_capex_usd: float = _d("storage_capex_usd")
    depreciation: Depreciation = "straight_line"
    lifetime_years: float = _d("lifetime_years")
    economic_ooms_per_year: float = _d("economic_ooms_per_year")
    residual_fraction: float | None = None  # resale value at end of life, share of capex; None → decay curve
    cost_of_capital: float = _d("cost_of_capital")
    node_power_kw: float | None = None  # None → refused: give it, or the GPU's server row
    avg_draw_fraction: float = _d("avg_draw_fraction")
    idle_draw_fraction: float = 0.0  # draw when idle, share of node max (0 → idle power ignored, lower bound)
    pue: float = _d("pue")
    usd_per_kwh: float = _d("usd_per_kwh")
    colo_usd_per_kw_month: float = _d("colo_usd_per_kw_month")
    maintenance_fraction_per_year: float = _d("maintenance_fraction_per_year")
    gpus_per_fte: float = _d("gpus_per_fte")
    usd_per_fte_year: float = _d("usd_per_fte_year")
    software_usd_per_gpu_year: float = _d("software_usd_per_gpu_year")
    provenance: tuple[Assumption, ...] = ()  # where the given figures come from (a server row, a BOM)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def server_usd(self) -> float:
        return _required(self.server_capex_usd_per_node, "server_capex_usd_per_node")

    @property
    def node_kw(self) -> float:
        return _required(self.node_power_kw, "node_power_kw")


def _required(value: float | None, name: str) -> float:
    if value is None:
        raise SpecError([Problem(name, "required: give it, or a GPU with an on-prem server row")])
    return value


def with_server(inputs: OnPremInputs, quote: ServerQuote) -> OnPremInputs:
    """Fill the server price and node power the user did not give from the GPU's server row, with its source."""
    capex, kw = quote.assumptions(inputs.gpus_per_node)
    provenance = list(inputs.provenance)
    server_usd, node_kw = inputs.server_capex_usd_per_node, inputs.node_power_kw
    if server_usd is None:
        server_usd = quote.capex_per_node(inputs.gpus_per_node)
        provenance.append(capex)
    if node_kw is None:
        node_kw = quote.kw_per_node(inputs.gpus_per_node)
        provenance.append(kw)
    return replace(
        inputs, server_capex_usd_per_node=server_usd, node_power_kw=node_kw, provenance=tuple(provenance)
    )


def check_onprem(inputs: OnPremInputs) -> None:
    pc = ProblemCollector()
    pc.check(inputs.nodes >= 1, "nodes", "must be >= 1")
    pc.check(inputs.gpus_per_node >= 1, "gpus_per_node", "must be >= 1")
    for name in ("server_capex_usd_per_node", "node_power_kw"):
        value = getattr(inputs, name)
        pc.check(value is not None, name, "required: give it, or a GPU with an on-prem server row")
        pc.check(value is None or value >= 0, name, "must be >= 0")
    pc.check(
        inputs.network_capex_usd is None or inputs.network_capex_usd >= 0, "network_capex_usd", "must be >= 0"
    )
    pc.check(
        inputs.network_share is None or 0 <= inputs.network_share < 1, "network_share", "must be in [0, 1)"
    )
    pc.check(inputs.fabric_tiers in NETWORK_SHARE_BY_TIERS, "fabric_tiers", "must be 1, 2 or 3")
    pc.check(inputs.lifetime_years > 0, "lifetime_years", "must be positive")
    residual = inputs.residual_fraction
    pc.check(residual is None or 0 <= residual <= 1, "residual_fraction", "must be in [0, 1]")
    pc.check(
        inputs.depreciation == "straight_line" or residual is None or residual > 0,
        "residual_fraction",
        "declining-balance depreciation never reaches 0: give a residual above 0, or straight-line",
    )
    pc.check(inputs.cost_of_capital >= 0, "cost_of_capital", "must be >= 0")
    pc.check(0 <= inputs.avg_draw_fraction <= 1, "avg_draw_fraction", "must be in [0, 1]")
    pc.check(0 <= inputs.idle_draw_fraction <= 1, "idle_draw_fraction", "must be in [0, 1]")
    pc.check(inputs.pue >= 1, "pue", "must be >= 1")
    pc.check(inputs.gpus_per_fte > 0, "gpus_per_fte", "must be positive")
    for name in (
        "storage_capex_usd",
        "usd_per_kwh",
        "colo_usd_per_kw_month",
        "maintenance_fraction_per_year",
        "usd_per_fte_year",
        "software_usd_per_gpu_year",
    ):
        pc.check(getattr(inputs, name) >= 0, name, "must be >= 0")
    pc.raise_if_any()


def capex_breakdown(inputs: OnPremInputs) -> dict[str, float]:
    servers = inputs.nodes * inputs.server_usd
    if inputs.network_capex_usd is not None:
        network = inputs.network_capex_usd
    else:
        share = (
            inputs.network_share
            if inputs.network_share is not None
            else NETWORK_SHARE_BY_TIERS[inputs.fabric_tiers]
        )
        network = servers * share / (1.0 - share)
    return {"servers": servers, "network": network, "storage": inputs.storage_capex_usd}


def capital_recovery_factor(rate: float, years: float) -> float:
    """Annual payment that repays 1 over `years` at `rate` (annuity; rate 0 → 1/years)."""
    growth = math.expm1(years * math.log1p(rate))  # (1 + r)^n − 1 without cancellation for small r
    if rate < 1e-12 or growth == 0:
        return 1.0 / years
    return rate * (1.0 + growth) / growth


def residual_fraction(inputs: OnPremInputs) -> float:
    """Resale value at the end of the lifetime, as a share of capex: given, or the default decay curve
    10^(−k·L) with k = 0.14 OOM/yr (Epoch AI's hardware price-performance trend; 20 % after 5 years)."""
    if inputs.residual_fraction is not None:
        return inputs.residual_fraction
    return float(10.0 ** (-inputs.economic_ooms_per_year * inputs.lifetime_years))


def asset_value(inputs: OnPremInputs, years: float) -> float:
    """What the hardware is worth `years` after purchase: down to the residual at end of life, in a straight
    line or declining balance (a constant share per year, C·f^(t/L)); the residual after the lifetime."""
    capex = sum(capex_breakdown(inputs).values())
    share = residual_fraction(inputs)
    t = min(max(years, 0.0), inputs.lifetime_years) / inputs.lifetime_years
    if inputs.depreciation == "straight_line":
        return capex * (1.0 - (1.0 - share) * t)
    return float(capex * share**t)


def ownership_cost(inputs: OnPremInputs) -> tuple[float, float]:
    """Yearly (depreciation, cost of capital) of buying at capex C and selling at the residual R after L years.

    Depreciation is (C − R)/L either way: the two curves differ in when value is lost, not how much.
    Straight line: the equivalent annual cost C·CRF(r, L) − R·(CRF − r) (an annuity that repays C less the
    discounted resale); cost of capital is its excess over depreciation. Declining balance (economic): value
    C·e^(−λt), λ = −ln(R/C)/L, financed at r: r × the average value (C − R)/(λL)."""
    capex = sum(capex_breakdown(inputs).values())
    share = residual_fraction(inputs)
    years, rate = inputs.lifetime_years, inputs.cost_of_capital
    depreciation = capex * (1.0 - share) / years
    if inputs.depreciation == "straight_line":
        crf = capital_recovery_factor(rate, years)
        equivalent = capex * crf - capex * share * (crf - rate)
        return depreciation, equivalent - depreciation
    decay = -math.log(share) / years
    average_value = capex * (1.0 - share) / (decay * years) if decay > 0 else capex
    return depreciation, rate * average_value


def annual_cost(inputs: OnPremInputs, utilisation: float) -> dict[str, float]:
    """Yearly cost of owning and running the cluster at a utilisation (share of hours running jobs)."""
    capex = sum(capex_breakdown(inputs).values())
    depreciation, capital = ownership_cost(inputs)
    it_kw = inputs.nodes * inputs.node_kw
    draw = inputs.avg_draw_fraction * utilisation + inputs.idle_draw_fraction * (1.0 - utilisation)
    power = it_kw * draw * inputs.pue * HOURS_PER_YEAR * inputs.usd_per_kwh
    colo = it_kw * inputs.colo_usd_per_kw_month * 12.0
    maintenance = (capex - inputs.storage_capex_usd) * inputs.maintenance_fraction_per_year
    staff = inputs.gpus / inputs.gpus_per_fte * inputs.usd_per_fte_year
    software = inputs.gpus * inputs.software_usd_per_gpu_year
    return {
        "depreciation": depreciation,
        "cost_of_capital": capital,
        "power": power,
        "colocation": colo,
        "maintenance": maintenance,
        "staff": staff,
        "software": software,
    }


def fixed_and_variable(inputs: OnPremInputs) -> tuple[float, float]:
    """Annual cost = fixed + variable·utilisation (cost is affine in utilisation)."""
    c0 = sum(annual_cost(inputs, 0.0).values())
    c1 = sum(annual_cost(inputs, 1.0).values())
    return c0, c1 - c0


def onprem_usd_per_gpu_hour(inputs: OnPremInputs, utilisation: float) -> float:
    if utilisation <= 0:
        return math.inf
    return sum(annual_cost(inputs, utilisation).values()) / (inputs.gpus * HOURS_PER_YEAR * utilisation)


def monthly_running_cost(inputs: OnPremInputs, utilisation: float) -> float:
    """Cash out per month after purchase: everything except depreciation (the purchase itself is upfront)."""
    parts = annual_cost(inputs, utilisation)
    return (sum(parts.values()) - parts["depreciation"]) / 12.0


@dataclass(frozen=True)
class Breakeven:
    label: str
    usd_per_gpu_hour: float
    months: float | None  # None: cloud is cheaper every month at this utilisation
    # None: on-prem never cheaper over its lifetime, even at 100 %; or a committed option (paid in full)
    utilisation: float | None
    onprem_cheaper_at_utilisation: bool
    committed: bool = False  # a reservation billed for every hour, used or not

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "breakeven_months": self.months,
            "breakeven_utilisation": self.utilisation,
            "onprem_cheaper_at_utilisation": self.onprem_cheaper_at_utilisation,
            "committed": self.committed,
        }


def billed_share(quote: PriceQuote, utilisation: float) -> float:
    """Share of the hours a cloud option is paid for: the hours used when billed hourly, all of them under a
    commitment (a reservation is paid whether it runs jobs or not)."""
    return 1.0 if quote.commitment_months > 0 else utilisation


def breakeven_months(
    capex_usd: float, monthly_running_usd: float, cloud_usd_per_gpu_hour: float, gpus: int, utilisation: float
) -> float | None:
    """Months until buying costs less than renting: capex + running·m = cloud_rate·GPUs·730.5 h·u·m."""
    cloud_month = cloud_usd_per_gpu_hour * gpus * HOURS_PER_MONTH * utilisation
    margin = cloud_month - monthly_running_usd
    if margin <= 0:
        return None
    return capex_usd / margin


def breakeven_utilisation(
    inputs: OnPremInputs, cloud_usd_per_gpu_hour: float, fixed_variable: tuple[float, float] | None = None
) -> float | None:
    """Utilisation at which on-prem $/GPU-hour (over the lifetime) equals the cloud price.

    fixed + variable·u = price·GPUs·8766·u  →  u = fixed / (price·GPUs·8766 − variable). `fixed_variable`:
    fixed_and_variable(inputs) when the caller already has it (the same for every cloud option)."""
    fixed, variable = fixed_variable if fixed_variable is not None else fixed_and_variable(inputs)
    denom = cloud_usd_per_gpu_hour * inputs.gpus * HOURS_PER_YEAR - variable
    if denom <= 0:
        return None
    u = fixed / denom
    return u if u <= 1.0 else None


@dataclass(frozen=True)
class TcoResult:
    utilisation: float
    capex: dict[str, float]
    capex_total_usd: float
    annual: dict[str, float]
    annual_total_usd: float
    usd_per_gpu_hour: float
    breakevens: list[Breakeven]
    curves: dict[str, object]
    assumptions: list[Assumption]

    def to_dict(self) -> dict[str, object]:
        return {
            "utilisation": self.utilisation,
            "capex": self.capex,
            "capex_total_usd": self.capex_total_usd,
            "annual": self.annual,
            "annual_total_usd": self.annual_total_usd,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "breakevens": [b.to_dict() for b in self.breakevens],
            "curves": self.curves,
            "assumptions": [a.as_dict() for a in self.assumptions],
        }


UNITS = {"server_capex_usd_per_node": "USD", "node_power_kw": "kW"}
# AWS on-demand list prices in the price book (app/catalog/prices.csv): p5.48xlarge H100 $12.29 → $6.88 per
# GPU-hour (2025-03-17 → 2026-11-09), 0.15 OOM/yr; p4d.24xlarge A100 $4.10 → $2.74 (2024-08-03 → 2026-11-09),
# 0.08 OOM/yr. Epoch AI's 0.14 OOM/yr lies between: the default residual curve.
RESIDUAL_SOURCE = (
    "decay curve 10^(-0.14 OOM/yr × lifetime) (Epoch AI hardware price-performance trend); rental list prices "
    "fell 0.15 OOM/yr (AWS p5 H100, 2025-03 to 2026-11) and 0.08 OOM/yr (AWS p4d A100, 2024-08 to 2026-11)"
)


def residual_assumption(inputs: OnPremInputs) -> Assumption:
    share = residual_fraction(inputs)
    if inputs.residual_fraction is not None:
        return Assumption("residual_fraction", share, "of capex", "user input", "")
    return Assumption("residual_fraction", share, "of capex", RESIDUAL_SOURCE, "2025")


def _provenance(inputs: OnPremInputs, name: str, value: float) -> Assumption:
    """Where an on-prem figure comes from: the server row or BOM it was filled from, the default, or the user."""
    for given in inputs.provenance:
        if given.name == name and given.value == value:
            return given
    default = DEFAULTS.get(name)
    if default is not None and default.value == value:
        return default
    unit = default.unit if default is not None else UNITS.get(name, "")
    return Assumption(name, value, unit, "user input", "")


def _breakeven(
    inputs: OnPremInputs,
    q: PriceQuote,
    utilisation: float,
    totals: tuple[float, float, float],
    fixed_variable: tuple[float, float],
) -> Breakeven:
    """Breakeven of on-prem against one cloud option; `totals`: (capex, monthly running, annual) at `utilisation`."""
    capex_total, running, annual_total = totals
    share = billed_share(q, utilisation)
    m = breakeven_months(capex_total, running, q.usd_per_gpu_hour, inputs.gpus, share)
    committed = q.commitment_months > 0
    # against a reservation paid in full, the cloud bill does not fall with use: no breakeven utilisation
    u = None if committed else breakeven_utilisation(inputs, q.usd_per_gpu_hour, fixed_variable)
    cloud_year = q.usd_per_gpu_hour * inputs.gpus * HOURS_PER_YEAR * share
    return Breakeven(q.label, q.usd_per_gpu_hour, m, u, annual_total < cloud_year, committed)


def _tco_curves(
    inputs: OnPremInputs,
    utilisation: float,
    cloud: list[PriceQuote],
    horizon: int,
    totals: tuple[float, float],
) -> dict[str, object]:
    """The TCO curves over `horizon` months and the utilisation axis; `totals`: (capex, monthly running at
    `utilisation`). Each on-prem figure per utilisation is computed once, not once per cloud option."""
    capex_total, running = totals
    month_x = list(range(0, horizon + 1))
    util_x = [round(0.05 * i, 2) for i in range(1, 21)]
    running_at = [monthly_running_cost(inputs, u) for u in util_x]
    return {
        "usd_per_gpu_hour_vs_utilisation": {
            "x": util_x,
            "series": {"on-prem": [onprem_usd_per_gpu_hour(inputs, u) for u in util_x]}
            # per GPU-hour used: a reservation's price is spread over the hours it actually runs jobs
            | {q.label: [q.usd_per_gpu_hour * billed_share(q, u) / u for u in util_x] for q in cloud},
        },
        "cumulative_usd_vs_month": {
            "x": month_x,
            "series": {
                "on-prem": [capex_total + running * m for m in month_x],
                "on-prem net of resale": [
                    capex_total - asset_value(inputs, m / 12.0) + running * m for m in month_x
                ],
            }
            | {
                q.label: [
                    q.usd_per_gpu_hour * inputs.gpus * HOURS_PER_MONTH * billed_share(q, utilisation) * m
                    for m in month_x
                ]
                for q in cloud
            },
        },
        "breakeven_months_vs_utilisation": {
            "x": util_x,
            "series": {
                q.label: [
                    breakeven_months(capex_total, r, q.usd_per_gpu_hour, inputs.gpus, billed_share(q, u))
                    for u, r in zip(util_x, running_at, strict=True)
                ]
                for q in cloud
            },
        },
    }


def tco(
    inputs: OnPremInputs, utilisation: float, cloud: list[PriceQuote], months: int | None = None
) -> TcoResult:
    """On-prem total cost of ownership, $/GPU-hour at a utilisation, breakeven against each cloud option,
    and curves ready to plot ({x: [...], y: [...]} series)."""
    check_onprem(inputs)
    pc = ProblemCollector()
    pc.check(0 < utilisation <= 1, "utilisation", "must be in (0, 1]")
    pc.raise_if_any()
    capex = capex_breakdown(inputs)
    capex_total = sum(capex.values())
    annual = annual_cost(inputs, utilisation)
    running = monthly_running_cost(inputs, utilisation)
    annual_total = sum(annual.values())
    fixed_variable = fixed_and_variable(inputs)  # once: the same for every cloud option
    breakevens = [
        _breakeven(inputs, q, utilisation, (capex_total, running, annual_total), fixed_variable)
        for q in cloud
    ]
    horizon = months or round(inputs.lifetime_years * 12)
    curves = _tco_curves(inputs, utilisation, cloud, horizon, (capex_total, running))
    used: dict[str, float] = {
        "server_capex_usd_per_node": inputs.server_usd,
        "lifetime_years": inputs.lifetime_years,
        "cost_of_capital": inputs.cost_of_capital,
        "node_power_kw": inputs.node_kw,
        "avg_draw_fraction": inputs.avg_draw_fraction,
        "pue": inputs.pue,
        "usd_per_kwh": inputs.usd_per_kwh,
        "colo_usd_per_kw_month": inputs.colo_usd_per_kw_month,
        "maintenance_fraction_per_year": inputs.maintenance_fraction_per_year,
        "gpus_per_fte": inputs.gpus_per_fte,
        "usd_per_fte_year": inputs.usd_per_fte_year,
        "software_usd_per_gpu_year": inputs.software_usd_per_gpu_year,
        "storage_capex_usd": inputs.storage_capex_usd,
    }
    if inputs.depreciation == "economic" or inputs.residual_fraction is None:
        used["economic_ooms_per_year"] = inputs.economic_ooms_per_year
    assumptions = [_provenance(inputs, k, v) for k, v in used.items()]
    assumptions.append(residual_assumption(inputs))
    if inputs.network_capex_usd is None:
        share = (
            inputs.network_share
            if inputs.network_share is not None
            else NETWORK_SHARE_BY_TIERS[inputs.fabric_tiers]
        )
        assumptions.append(
            Assumption(
                "network_share_of_capex",
                share,
                "",
                "user input"
                if inputs.network_share is not None
                else f"{inputs.fabric_tiers}-tier InfiniBand fabric, E. Cheah 'H100 Freakonomics' sheet (switches + cables)",
                "2024-08",
            )
        )
    assumptions.append(
        Assumption("depreciation", inputs.depreciation, "", "straight-line or Epoch AI economic decay", "")
    )
    assumptions += [q.assumption() for q in cloud]
    return TcoResult(
        utilisation=utilisation,
        capex=capex,
        capex_total_usd=capex_total,
        annual=annual,
        annual_total_usd=sum(annual.values()),
        usd_per_gpu_hour=onprem_usd_per_gpu_hour(inputs, utilisation),
        breakevens=breakevens,
        curves=curves,
        assumptions=assumptions,
    )


# --- Epoch AI's three methods (Cottier et al. 2024, arXiv 2405.21015) ------------------------------------

EPOCH_INTERCONNECT_FRACTION = 0.19  # training-cost-trends CLUSTER_INTERCONNECT_COST_FRACTION
# training-cost-trends cost_analysis_standalone.py: a GPU is first acquired no sooner than 90 days after its
# release (find_hardware_acquisition_price, buffer_time), and training ends 60 days before publication
# (get_training_start_date, buffer_time)
EPOCH_RELEASE_TO_ACQUISITION_DAYS = 90
EPOCH_TRAINING_TO_PUBLICATION_DAYS = 60
DAYS_PER_YEAR = 365.25


@dataclass(frozen=True)
class EpochDates:
    """The dates Epoch AI's amortized method depends on; each optional, the missing ones from their lags."""

    price_date: date | None = None  # when the hardware price was quoted
    release_date: date | None = None  # the GPU's release
    acquisition_date: date | None = None  # else the later of the price date and release + 90 days
    training_start: date | None = None  # else training end − training time, or publication − time − 60 days
    training_end: date | None = None
    publication_date: date | None = None


@dataclass(frozen=True)
class EpochTimeline:
    years_since_acquisition: float | None  # None: not enough dates to say
    training_hours: float | None
    acquisition_date: date | None
    training_start: date | None
    assumptions: list[Assumption]


def _acquisition(dates: EpochDates) -> tuple[date | None, str]:
    if dates.acquisition_date is not None:
        return dates.acquisition_date, "given"
    lag = timedelta(days=EPOCH_RELEASE_TO_ACQUISITION_DAYS)
    known = [d for d in (dates.price_date, dates.release_date + lag if dates.release_date else None) if d]
    if not known:
        return None, ""
    return max(known), "the later of the price date and release + 90 days (Epoch AI)"


def _training_start(dates: EpochDates, hours: float | None) -> tuple[date | None, str]:
    if dates.training_start is not None:
        return dates.training_start, "given"
    if hours is None:
        return None, ""
    if dates.training_end is not None:
        return dates.training_end - timedelta(hours=hours), "training end − training time"
    if dates.publication_date is not None:
        lag = timedelta(hours=hours, days=EPOCH_TRAINING_TO_PUBLICATION_DAYS)
        return dates.publication_date - lag, "publication − training time − 60 days (Epoch AI)"
    return None, ""


def epoch_timeline(dates: EpochDates, training_hours: float | None) -> EpochTimeline:
    """Years between acquiring the hardware and starting to train, by Epoch AI's rules; training can only start
    after acquisition (floored at 0). Training time comes from start and end when not given."""
    pc = ProblemCollector()
    start, end = dates.training_start, dates.training_end
    pc.check(start is None or end is None or end > start, "training_end", "must be after training_start")
    pc.check(training_hours is None or training_hours > 0, "training_hours", "must be positive")
    pc.check(
        training_hours is not None or (start is not None and end is not None),
        "training_hours",
        "give it, or training_start and training_end",
    )
    pc.raise_if_any()
    hours = training_hours
    if hours is None and start is not None and end is not None:
        hours = (end - start).total_seconds() / 3600.0
    acquired, how_acquired = _acquisition(dates)
    started, how_started = _training_start(dates, hours)
    src = "Epoch AI training-cost-trends cost_analysis_standalone.py"
    notes = []
    if acquired is not None:
        notes.append(Assumption("acquisition_date", acquired.isoformat(), "", f"{how_acquired}; {src}", ""))
    if started is not None:
        notes.append(Assumption("training_start", started.isoformat(), "", f"{how_started}; {src}", ""))
    years = None
    if acquired is not None and started is not None:
        years = max(0.0, (started - acquired).days / DAYS_PER_YEAR)
    return EpochTimeline(years, hours, acquired, started, notes)


def epoch_server_to_chip_power(gpu_name: str) -> float:
    """Server power per chip over chip TDP, as Epoch AI's chip_to_server_power (cost_analysis_standalone.py):
    DGX H100 10.2 kW / 8 / 0.7 kW, DGX A100 6.5 kW / 8 / 0.4 kW, V100 servers the mean of two, else 1.8."""
    name = gpu_name.upper()
    if "H100" in name:
        return (10.2 / 8) / 0.7
    if "A100" in name:
        return (6.5 / 8) / 0.4
    if "V100" in name:
        return ((10 / 16) / 0.3 + (1.5 / 4) / 0.3) / 2
    return 1.8


@dataclass(frozen=True)
class EpochInputs:
    chips: int
    training_hours: float
    server_price_per_chip_usd: float  # acquisition price of the server divided by its chips (DGX/8)
    years_since_acquisition: float = 0.0  # price date → training start; value decays meanwhile
    ooms_per_year: float = 0.14
    interconnect_fraction: float = EPOCH_INTERCONNECT_FRACTION
    chip_tdp_w: float = 700.0
    server_to_chip_power: float = (10.2 / 8) / 0.7  # Epoch chip_to_server_power for H100
    avg_draw_fraction: float = 0.75
    pue: float = 1.25  # Epoch: 1.1 for hyperscalers, 1.25 otherwise
    usd_per_kwh: float = 0.0771
    cloud_usd_per_chip_hour: float | None = None


@dataclass(frozen=True)
class EpochCosts:
    amortized_hardware_energy_usd: float
    amortized_breakdown: dict[str, float]  # servers / interconnect / energy
    cloud_usd: float | None
    acquisition_usd: float
    chip_hours: float
    assumptions: list[Assumption]

    def to_dict(self) -> dict[str, object]:
        return {
            "amortized_hardware_energy_usd": self.amortized_hardware_energy_usd,
            "amortized_breakdown": self.amortized_breakdown,
            "cloud_usd": self.cloud_usd,
            "acquisition_usd": self.acquisition_usd,
            "chip_hours": self.chip_hours,
            "assumptions": [a.as_dict() for a in self.assumptions],
        }


def epoch_costs(inputs: EpochInputs) -> EpochCosts:
    """Epoch AI's three cost methods for one training run.

    1. Amortized hardware CapEx + energy: the server value (price decayed by 0.14 OOM/yr since purchase)
       is amortized at k·ln10 per year over the chip-hours used; cluster interconnect adds f/(1−f);
       energy = TDP × server/chip power × average draw × PUE × chip-hours × $/kWh.
    2. Cloud rental: chip-hours × cloud price per chip-hour.
    3. Acquisition: chips × server price per chip / (1 − f) (up-front cost of the cluster).
    (github.com/epoch-research/training-cost-trends, estimate_hardware_capex_energy_cost, cluster_energy_cost)
    """
    pc = ProblemCollector()
    pc.check(inputs.chips >= 1, "chips", "must be >= 1")
    pc.check(inputs.training_hours > 0, "training_hours", "must be positive")
    pc.check(inputs.server_price_per_chip_usd > 0, "server_price_per_chip_usd", "must be positive")
    pc.check(0 <= inputs.interconnect_fraction < 1, "interconnect_fraction", "must be in [0, 1)")
    pc.raise_if_any()
    chip_hours = inputs.chips * inputs.training_hours
    value = inputs.server_price_per_chip_usd * 10 ** (-inputs.ooms_per_year * inputs.years_since_acquisition)
    per_chip_hour = value * inputs.ooms_per_year * math.log(10) / HOURS_PER_YEAR
    servers = per_chip_hour * chip_hours
    f = inputs.interconnect_fraction
    interconnect = servers * f / (1 - f)
    kw = inputs.chip_tdp_w / 1000 * inputs.server_to_chip_power * inputs.avg_draw_fraction * inputs.pue
    energy = kw * chip_hours * inputs.usd_per_kwh
    breakdown = {"servers": servers, "interconnect": interconnect, "energy": energy}
    cloud = (
        chip_hours * inputs.cloud_usd_per_chip_hour if inputs.cloud_usd_per_chip_hour is not None else None
    )
    acquisition = inputs.chips * inputs.server_price_per_chip_usd / (1 - f)
    src = "Epoch AI training-cost-trends (Cottier et al. 2024, arXiv 2405.21015)"
    return EpochCosts(
        amortized_hardware_energy_usd=sum(breakdown.values()),
        amortized_breakdown=breakdown,
        cloud_usd=cloud,
        acquisition_usd=acquisition,
        chip_hours=chip_hours,
        assumptions=[
            Assumption("ooms_per_year", inputs.ooms_per_year, "OOM/yr", src, "2025"),
            Assumption("interconnect_fraction", f, "", src, "2025"),
            Assumption("avg_draw_fraction", inputs.avg_draw_fraction, "", src, "2025"),
            Assumption("pue", inputs.pue, "", src + ": 1.1 hyperscaler, 1.25 other", "2025"),
            Assumption("usd_per_kwh", inputs.usd_per_kwh, "USD/kWh", "EIA US industrial average", "2024"),
        ],
    )


# --- seed article check --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedBreakeven:
    months: float | None
    inputs: dict[str, float]
    note: str


def seed_breakeven(
    node_capex_usd: float = 250000.0,
    cloud_usd_per_node_hour: float = 45.0,
    utilisation: float = 0.9,
    monthly_running_usd: float = 0.0,
    gpus_per_node: int = 8,
) -> SeedBreakeven:
    """The seed article's claim: 8×H100 at ~$250k 'fully loaded' vs $40-50/h cloud breaks even in 7-8 months
    at 90 % utilisation. 'Fully loaded' is read as including running costs, so running = 0 by default."""
    months = breakeven_months(
        node_capex_usd,
        monthly_running_usd,
        cloud_usd_per_node_hour / gpus_per_node,
        gpus_per_node,
        utilisation,
    )
    return SeedBreakeven(
        months,
        {
            "node_capex_usd": node_capex_usd,
            "cloud_usd_per_node_hour": cloud_usd_per_node_hour,
            "utilisation": utilisation,
            "monthly_running_usd": monthly_running_usd,
        },
        "capex / (cloud $/h × 730.5 h × utilisation − running cost per month)",
    )


@dataclass(frozen=True)
class CostOptions:
    """Cloud options and the date used for the staleness flag (kept out of the core's clock)."""

    quotes: list[PriceQuote] = field(default_factory=list)
    today: date | None = None
