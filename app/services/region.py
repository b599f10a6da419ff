"""The validated region applied to ranked layouts: each says whether published runs of its kind exist, and the
recommendation is the fastest inside the region (app.core.validated_region; app/catalog/validated_region.json)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from app.catalog import validated_region
from app.core.validated_region import LayoutFacts, outside

# Ranked layouts looked at for the fastest one inside the region: enough that a region-compatible layout is
# almost always among them (the search ranks every layout; this only bounds what is kept).
REGION_CANDIDATES = 200


def reasons_for(layout: Any, seq_len: int, gpus_per_node: int, num_experts: int = 0) -> list[str]:
    """Why `layout` (a Layout or its dict) of a model with `num_experts` routed experts is outside the validated
    region; empty when inside."""
    if isinstance(layout, dict):
        layout = SimpleNamespace(**layout)
    return outside(LayoutFacts.of(layout, seq_len, gpus_per_node, num_experts), validated_region())


def accept_for(seq_len: int, gpus_per_node: int, num_experts: int = 0) -> Callable[[Any], bool]:
    """The validated region's test of one layout, for the planner's `accept` (its `recommended`: the fastest
    layout inside the region however far down the ranking it is)."""
    region = validated_region()
    return lambda layout: not outside(LayoutFacts.of(layout, seq_len, gpus_per_node, num_experts), region)


def mark(
    entries: list[dict[str, Any]], seq_len: int, gpus_per_node: int, key: str, num_experts: int = 0
) -> int | None:
    """Give each ranked entry `validated` and `outside_region` (its `key` holds the layout); the index of the
    first entry inside the region (None: none is)."""
    first: int | None = None
    for index, entry in enumerate(entries):
        reasons = reasons_for(entry[key], seq_len, gpus_per_node, num_experts)
        entry["validated"] = not reasons
        entry["outside_region"] = reasons
        if first is None and not reasons:
            first = index
    return first


def region_note(entries: list[dict[str, Any]], recommended: int | None, label_key: str, time_key: str) -> str:
    """One sentence on the recommendation when the fastest layout is outside the region."""
    if not entries or entries[0].get("validated", True):
        return ""
    fastest = entries[0]
    why = "; ".join(fastest["outside_region"])
    if recommended is None:
        return (
            f"No ranked layout is inside the validated region; the fastest, {fastest[label_key]}, has {why}: "
            "published runs do not cover it, so treat its estimate as an extrapolation."
        )
    chosen = entries[recommended]
    slower = 100.0 * (chosen[time_key] / fastest[time_key] - 1.0) if fastest[time_key] else 0.0
    rank = chosen.get("rank", recommended + 1)
    return (
        f"Recommended: {chosen[label_key]} (rank {rank}, {slower:.1f} % slower), the fastest layout "
        f"inside the validated region. The fastest, {fastest[label_key]}, has {why}: published runs do not cover "
        "it, so its estimate is an extrapolation."
    )
