"""The validated region applied to ranked layouts: each says whether published runs of its kind exist, and the
recommendation is the fastest inside the region (app.core.validated_region; app/catalog/validated_region.json),
found by the planner over its whole ranking (`accept_for`, app.core.planner.PlanResult.recommend)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from app.catalog import validated_region
from app.core.validated_region import LayoutFacts, inside, outside


def reasons_for(layout: Any, seq_len: int, gpus_per_node: int, num_experts: int = 0) -> list[str]:
    """Why `layout` (a Layout or its dict) of a model with `num_experts` routed experts is outside the validated
    region; empty when inside."""
    if isinstance(layout, dict):
        layout = SimpleNamespace(**layout)
    return outside(LayoutFacts.of(layout, seq_len, gpus_per_node, num_experts), validated_region())


def accept_for(seq_len: int, gpus_per_node: int, num_experts: int = 0) -> Callable[[Any], Any]:
    """The validated region's test of the planner's enumerated layouts (a boolean per layout): given it,
    PlanResult.recommend finds the fastest layout inside the region however far down the ranking it is."""
    region = validated_region()
    return lambda rows: inside(LayoutFacts.of_columns(rows, seq_len, gpus_per_node, num_experts), region)


def mark(
    entries: list[dict[str, Any]], seq_len: int, gpus_per_node: int, key: str, num_experts: int = 0
) -> None:
    """Give each ranked entry `validated` and `outside_region` (its `key` holds the layout)."""
    for entry in entries:
        reasons = reasons_for(entry[key], seq_len, gpus_per_node, num_experts)
        entry["validated"] = not reasons
        entry["outside_region"] = reasons


def recommended_entry(
    entries: list[dict[str, Any]], recommended: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The entry of the planner's recommendation (its dict, with its `rank` in the whole ranking): the ranked entry
    of that rank when it is among `entries` (the same dict, so what is added to one shows in both), else `recommended`
    itself, marked inside the region."""
    if recommended is None:
        return None
    for entry in entries:
        if entry.get("rank") == recommended["rank"]:
            return entry
    return {**recommended, "validated": True, "outside_region": []}


def region_note(
    entries: list[dict[str, Any]], chosen: dict[str, Any] | None, label_key: str, time_key: str
) -> str:
    """One sentence on the recommendation (`chosen`, with its `rank`) when the fastest layout is outside the
    region."""
    if not entries or entries[0].get("validated", True):
        return ""
    fastest = entries[0]
    why = "; ".join(fastest["outside_region"])
    if chosen is None:
        return (
            f"No layout that fits is inside the validated region; the fastest, {fastest[label_key]}, has {why}: "
            "published runs do not cover it, so treat its estimate as an extrapolation."
        )
    slower = 100.0 * (chosen[time_key] / fastest[time_key] - 1.0) if fastest[time_key] else 0.0
    return (
        f"Recommended: {chosen[label_key]} (rank {chosen['rank']}, {slower:.1f} % slower), the fastest layout "
        f"inside the validated region. The fastest, {fastest[label_key]}, has {why}: published runs do not cover "
        "it, so its estimate is an extrapolation."
    )
