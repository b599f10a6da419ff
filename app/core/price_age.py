"""When a price-book figure is too old to rely on, by category, and which dates and categories are refused.

Each category of the price book has its own threshold: GPU rental prices move within months, a vendor's power
specification does not. A row older than its threshold is flagged stale (shown, never hidden); a date after
today or a category outside this table is refused.
"""

from __future__ import annotations

from datetime import date

from app.core.errors import Problem

DAYS_PER_MONTH = 365.25 / 12

# category → (months after which a figure is stale, why)
STALE_AFTER_MONTHS: dict[str, tuple[float, str]] = {
    "cloud_gpu": (
        6,
        "GPU rental prices move within months: AWS cut P5 (H100) prices 44 % in June 2025; the H100 1-yr "
        "contract index went from its $1.70 cycle low (2025-10) to $2.35 (2026-03)",
    ),
    "cloud_discount": (12, "providers revise discount schedules about yearly"),
    "cloud_storage": (12, "storage list prices change about yearly"),
    "onprem_server": (
        12,
        "HGX H100 server list price rose 16 % in 10 months ($248,956 2023-09 to $288,142 2024-07, archive.ph/D6Dub)",
    ),
    "onprem_network": (12, "switch and optics prices follow each hardware generation, about yearly"),
    "onprem_storage": (12, "flash prices change within a year"),
    "power": (36, "vendor power specifications hold for a hardware generation (about 2-3 years)"),
    "facility": (
        12,
        "EIA publishes electricity prices yearly; CBRE colocation rates rose 12.6 % in a year (H2 2024)",
    ),
    "staff": (36, "staffing ratios and salaries drift over years"),
    "depreciation": (36, "accounting lifetimes are revised every few years (10-K filings 2022-2025)"),
}


# the price-book category each dated on-prem default belongs to, so that it is marked stale like a price
DEFAULT_CATEGORIES: dict[str, str] = {
    "server_capex_usd_per_node": "onprem_server",
    "node_power_kw": "power",
    "avg_draw_fraction": "power",
    "pue": "facility",
    "usd_per_kwh": "facility",
    "colo_usd_per_kw_month": "facility",
    "maintenance_fraction_per_year": "facility",
    "gpus_per_fte": "staff",
    "usd_per_fte_year": "staff",
    "lifetime_years": "depreciation",
    "economic_ooms_per_year": "depreciation",
    "residual_fraction": "depreciation",
}


def stale_rule() -> str:
    """The rule in words, every category's threshold named (the help of the "stale rows only" filters)."""
    by_months: dict[float, list[str]] = {}
    for category, (months, _) in STALE_AFTER_MONTHS.items():
        by_months.setdefault(months, []).append(category)
    thresholds = "; ".join(
        f"{months:g} months ({stale_after_days(names[0])} days) for {', '.join(names)}"
        for months, names in sorted(by_months.items())
    )
    return f"a row is stale once older than its category's threshold: {thresholds}"


def stale_after_days(category: str) -> int:
    """Age in days after which a row of this category is stale; KeyError for an unknown category."""
    months, _ = STALE_AFTER_MONTHS[category]
    return round(months * DAYS_PER_MONTH)


def is_stale(price_date: date, today: date, category: str = "cloud_gpu") -> bool:
    return (today - price_date).days > stale_after_days(category)


def row_problems(category: str, price_date: date | None, today: date) -> list[Problem]:
    """An unknown category or a date after today, as problems naming the field."""
    problems = []
    if category not in STALE_AFTER_MONTHS:
        known = ", ".join(sorted(STALE_AFTER_MONTHS))
        problems.append(Problem("category", f"unknown category {category!r}; known: {known}"))
    if price_date is not None and price_date > today:
        problems.append(
            Problem("price_date", f"{price_date.isoformat()} is after today ({today.isoformat()})")
        )
    return problems
