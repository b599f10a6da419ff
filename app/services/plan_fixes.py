"""When no layout fits: the nearest cluster sizes and global batches at which one does, found with the size
sweep (app.services.planner.sizes) over a small, bounded set of candidates."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.services import planner as planner_service
from app.services.catalog import Actor
from app.services.plan_ranking import REJECTION_TEXT

MAX_SIZES = 24  # the size sweep takes at most 24 sizes per request
MAX_BATCHES = 8  # global batches tried at the current size (one sweep each)
MEMORY_KEYS = ("out_of_memory", "host_memory")


def _reason_key(point: dict[str, Any]) -> str:
    """The planner's main rejection of a size: `memory` or `divisibility` (or '' when one fits)."""
    if point.get("feasible"):
        return ""
    reason = str(point.get("reason") or "")
    return "memory" if any(k in reason for k in MEMORY_KEYS) or "memory" in reason else "divisibility"


def node_candidates(nodes: int, limit: int = MAX_SIZES) -> list[int]:
    """Node counts near `nodes`, below and above: the neighbours, the nearest multiples of 2, 4, 8, … and the
    cluster halved and doubled up to 64× (memory may need many more nodes); the `limit` nearest by ratio."""
    found: set[int] = set()
    for step in (1, 2, 3, 4):
        found.update((nodes - step, nodes + step))
    power = 2
    while power <= max(2, nodes) * 2:
        found.update((nodes // power * power, -(-nodes // power) * power))
        power *= 2
    for shift in range(1, 7):
        found.update((nodes >> shift, nodes << shift))
    near = sorted(
        (n for n in found if n >= 1 and n != nodes),
        key=lambda n: (max(n, nodes) / min(n, nodes), n),
    )
    return sorted(near[:limit])


def batch_candidates(batch: int, limit: int = MAX_BATCHES) -> list[int]:
    """Global batches near `batch`, below and above: the nearest multiples of 2, 4, 8, … (powers of two first)."""
    found: set[int] = set()
    power = 2
    while power <= batch * 2:
        found.update((batch // power * power, -(-batch // power) * power))
        power *= 2
    found.update({1 << (batch.bit_length() - 1), 1 << batch.bit_length()})
    near = sorted((b for b in found if b >= 1 and b != batch), key=lambda b: (abs(b - batch), b))
    return sorted(near[:limit])


def nearest_fits(
    session: Session | None,
    request: dict[str, Any],
    nodes: int,
    gpus_per_node: int,
    batch: int,
    *,
    viewer: Actor,
) -> dict[str, Any]:
    """For a sizes-sweep request (app.services.planner.SizesRequest) at which no layout fits on `nodes` nodes:
    why (divisibility or memory), the nearest node counts below and above with a fitting layout at this batch,
    and the nearest global batches below and above with one at this size."""
    here = nodes * gpus_per_node
    sweep = planner_service.sizes(
        {**request, "sizes": [here, *(n * gpus_per_node for n in node_candidates(nodes, MAX_SIZES - 1))]},
        session,
        viewer=viewer,
    )
    by_gpus = {int(p["num_gpus"]): p for p in sweep.points}
    current = by_gpus.get(here, {})
    fitting = sorted(g // gpus_per_node for g, p in by_gpus.items() if p.get("feasible") and g != here)
    below = max((n for n in fitting if n < nodes), default=None)
    above = min((n for n in fitting if n > nodes), default=None)
    batches: list[int] = []
    for candidate in batch_candidates(batch):
        batch_request = {**request, "sizes": [here], "global_batch": candidate}
        point = planner_service.sizes(batch_request, session, viewer=viewer).points
        if point and point[0].get("feasible"):
            batches.append(candidate)
    return {
        "reason": _reason_key(current) or "divisibility",
        "detail": _detail(str(current.get("reason") or "")),
        "nodes_below": below,
        "nodes_above": above,
        "batch_below": max((b for b in batches if b < batch), default=None),
        "batch_above": min((b for b in batches if b > batch), default=None),
    }


def _detail(reason: str) -> str:
    """The sweep's reason in words: 'no valid layout (gpu_count)' names the rule by its rejection text."""
    for key, text in REJECTION_TEXT.items():
        reason = reason.replace(f"({key})", f"({text})")
    return reason
