"""The compare page's rows as a reader sees them: labels with units, shares in %, results rounded for display, the
wall-clock figures before the compute ones. The comparison itself (app.services.plans.compare_plans) and the CSV and
JSON exports keep the raw values."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from app.web.pages._filters import num_auto, num_signed
from app.web.templating import templates

# a result the plan pages lead with goes before the compute figure it stands beside
LEADS = {"wall_clock_days": "time_to_train_days", "wall_clock_gpu_hours": "gpu_hours"}
SHARE_UNIT = "fraction"  # stored as 0–1, shown in %
# the results a layout that does not fit in GPU memory cannot have, and their likely ranges (<key>_likely_low and
# _likely_high): it cannot run (the builder and the plan's own page say "none" for them), so the page shows CANNOT_RUN
# instead of a time and a cost to compare (the exports keep them)
NEEDS_A_RUN = frozenset(
    {"wall_clock_days", "time_to_train_days", "wall_clock_gpu_hours", "gpu_hours", "cost_per_run_usd"}
)
CANNOT_RUN = "none: does not fit"


@dataclass(frozen=True)
class PickerPlan:
    """A plan as the compare page's picker lists it: its name, latest revision, its owner's e-mail when the plan is
    not the viewer's own (None for the viewer's own, or a plan saved before plans had owners) and the UTC date it
    was last changed, so that plans of one name can be told apart."""

    id: Any
    name: str
    latest_revision: int
    owner: str | None
    updated: str


def picker_plans(plans: list[Any], viewer_email: str | None) -> list[PickerPlan]:
    """The picker's entries for `plans` (PlanSummary rows the viewer may read: app.services.plans.list_plans)."""
    mine = (viewer_email or "").lower()
    return [
        PickerPlan(
            id=p.id,
            name=p.name,
            latest_revision=p.latest_revision,
            owner=p.owner if p.owner and p.owner.lower() != mine else None,
            updated=(p.updated_at or p.created_at).strftime("%Y-%m-%d"),
        )
        for p in plans
    ]


def display_rows(rows: list[Any]) -> list[dict[str, Any]]:
    """Each comparison row (ComparisonRow) with the text of its values, changes and percentages, in page order."""
    return [_display_row(row) for row in _leading_first(rows)]


def _leading_first(rows: list[Any]) -> list[Any]:
    """The rows with each wall-clock result moved just before its compute counterpart (where both are present)."""
    ordered = list(rows)
    for lead, follower in LEADS.items():
        keys = [r.key for r in ordered]
        if lead in keys and follower in keys:
            row = ordered.pop(keys.index(lead))
            ordered.insert([r.key for r in ordered].index(follower), row)
    return ordered


def _display_row(row: Any) -> dict[str, Any]:
    share = row.unit == SHARE_UNIT
    scale = 100.0 if share else 1.0
    rounded = row.section == "Results"  # inputs, choices and provenance are shown as given
    return {
        "key": row.key,
        "label": row.label,
        "unit": "%" if share else row.unit,
        "section": row.section,
        "differs": row.differs,
        "texts": [_value_text(v, scale, rounded) for v in row.values],
        "numeric": [_is_number(v) for v in row.values],
        "deltas": [_change_text(d, scale, rounded) for d in row.deltas],
        "percents": [None if p is None else _change_text(p, 1.0, True) + " %" for p in row.percents],
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _value_text(value: Any, scale: float, rounded: bool) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):  # recompute modules: "core_attn, mlp", not "['core_attn', 'mlp']"
        return ", ".join(_value_text(v, 1.0, False) for v in value) if value else "—"
    if not _is_number(value):
        return str(value)
    return significant(value * scale) if rounded else num_auto(value * scale)


def _change_text(value: float | None, scale: float, rounded: bool) -> str:
    if value is None or not _is_number(value):
        return "—"
    x = value * scale
    if x == 0 or not rounded:
        return num_signed(x)
    return ("+" if x > 0 else "−") + significant(abs(x))


def significant(x: float, digits: int = 3) -> str:
    """A result for display: whole numbers from 100 up with thousands separators, smaller ones to `digits`
    significant figures (74.0, 6.71, 0.949); whole values without decimals."""
    if not math.isfinite(x):
        return "—"
    if abs(x) >= 10 ** (digits - 1) or float(x).is_integer():
        return f"{round(x):,}"
    return f"{x:#.{digits}g}".rstrip(".")


def plans_that_run(comparison: Any) -> list[bool]:
    """Per compared plan, whether its layout fits in GPU memory (its "fits" result; a plan without one counts as
    fitting), from every row of the comparison, also those "only the rows that differ" leaves out."""
    for row in comparison.rows:
        if row.section == "Results" and row.key == "fits":
            return [value is not False for value in row.values]
    return [True] * len(comparison.plans)


def runnable_only(rows: list[dict[str, Any]], runs: list[bool]) -> list[dict[str, Any]]:
    """The display rows with a plan that cannot run shown as CANNOT_RUN in the rows it has no answer for (time,
    GPU-hours, cost), and no change against a plan that cannot run."""
    if all(runs):
        return rows
    out = []
    for row in rows:
        base = re.sub(r"_likely_(low|high)$", "", row["key"])
        if row["section"] != "Results" or base not in NEEDS_A_RUN:
            out.append(row)
            continue
        compared = [runs[0] and ok for ok in runs]  # a change needs both this plan and the first to run
        out.append(
            {
                **row,
                "texts": [text if ok else CANNOT_RUN for text, ok in zip(row["texts"], runs, strict=True)],
                "numeric": [n and ok for n, ok in zip(row["numeric"], runs, strict=True)],
                "deltas": [d if ok else "—" for d, ok in zip(row["deltas"], compared, strict=True)],
                "percents": [p if ok else None for p, ok in zip(row["percents"], compared, strict=True)],
            }
        )
    return out


templates.env.filters.update(plans_that_run=plans_that_run, runnable_only=runnable_only)
