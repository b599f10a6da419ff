"""The seed article's cost claims, recomputed: the table docs/cost.md shows is this module's output.

Each row is a claim of the builders' guide (breakeven months, checkpoint idle time, spot savings, checkpoint
interval), what the article says, and what the model gives from the article's own inputs, with the defaults of
app.core (H100 server row for power, sourced running costs). A test compares docs/cost.md with `markdown()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core import cost as core_cost
from app.core import goodput as core_goodput

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True)
class SeedClaim:
    claim: str
    article: str
    model: str


def _node() -> core_cost.OnPremInputs:
    """The article's node: $250k, 8 H100 drawing what the H100 server row says, no cluster network."""
    from app.catalog.onprem import server_quote

    h100 = server_quote("H100-SXM")
    assert h100 is not None
    return core_cost.OnPremInputs(
        server_capex_usd_per_node=250_000.0, node_power_kw=h100.kw_per_node(8), network_share=0.0
    )


def _months(node_usd_per_hour: float, running: bool) -> float | None:
    """Breakeven of a $250k 8×H100 node against a node-hour price at 90 % utilisation."""
    node = _node()
    monthly = core_cost.monthly_running_cost(node, 0.9) if running else 0.0
    return core_cost.breakeven_months(250_000.0, monthly, node_usd_per_hour / 8, 8, 0.9)


def _utilisation(node_usd_per_hour: float) -> float | None:
    node = _node()
    return core_cost.breakeven_utilisation(node, node_usd_per_hour / 8)


def _fmt(months: float | None) -> str:
    return "never" if months is None else f"{months:.1f}"


def claims() -> list[SeedClaim]:
    prices = (40.0, 45.0, 50.0)
    loaded = " / ".join(_fmt(_months(p, running=False)) for p in prices)
    running = " / ".join(_fmt(_months(p, running=True)) for p in prices)
    monthly = core_cost.monthly_running_cost(_node(), 0.9)
    utilisations = [_utilisation(p) for p in (50.0, 40.0)]
    low, high = (f"{100 * u:.0f}" if u is not None else "—" for u in utilisations)
    aws = _months(55.04, running=True)
    lambda_labs = _months(2.99 * 8, running=True)
    idle = [core_goodput.checkpoint_idle_hours(500, s) for s in (30, 60, 3, 5)]
    spot = core_goodput.spot_savings(
        core_goodput.SpotInputs(
            on_demand_usd_per_hour=55.04,
            spot_discount=0.6,
            preemptions_per_day=2.4,
            lost_work_s=1.5 * HOUR,
            restart_s=0.0,
        )
    )
    young = core_goodput.young_interval(45.0, 4.7 * DAY)
    return [
        SeedClaim(
            "Breakeven, $250k 8×H100 node vs $40 / $45 / $50 per node-hour, 90 % utilisation, fully loaded",
            "7–8 months",
            f"{loaded} months",
        ),
        SeedClaim(
            "The same with running costs added (power, colocation, maintenance, staff, cost of capital)",
            "—",
            f"{running} months (${monthly:,.0f} a month)",
        ),
        SeedClaim(
            "Utilisation above which buying pays off over five years, $50 … $40 per node-hour",
            "—",
            f"{low}–{high} %",
        ),
        SeedClaim(
            "Breakeven vs AWS p5 on-demand after the 2025 cut ($55.04/h) / Lambda $2.99 per GPU-hour",
            "—",
            f"{_fmt(aws)} / {_fmt(lambda_labs)} months",
        ),
        SeedClaim(
            "500 checkpoints × 30–60 s synchronous vs 3–5 s asynchronous",
            "5–8 h idle vs much less",
            f"{idle[0]:.1f}–{idle[1]:.1f} h vs {idle[2]:.1f}–{idle[3]:.1f} h",
        ),
        SeedClaim(
            "Spot: 60 % discount, 2.4 preemptions a day, 1.5 h lost each",
            "22 % net savings",
            f"{100 * spot.net_savings:.0f} % net savings (useful fraction {spot.useful_fraction:.2f})",
        ),
        SeedClaim(
            "Checkpoint interval for an MTBF of 4.7 days and a 45 s stall (Young 1974)",
            "every ~52 min (500 in 18 days)",
            f"every {young / HOUR:.1f} h",
        ),
    ]


def markdown() -> str:
    lines = ["| claim | the article | the model |", "|---|---|---|"]
    lines += [f"| {c.claim} | {c.article} | {c.model} |" for c in claims()]
    return "\n".join(lines) + "\n"
