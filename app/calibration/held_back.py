"""Does a fit generalise? Fit on three quarters of the rows, compare the defaults and the fit on the quarter
held back.

The held-back rows are every fourth row in a fixed order (GEMM: by shape; collectives: by op, group and size),
so they spread over the whole measured range and the split is the same on every run. The saved profile is then
fitted on all rows; the held-back errors say whether fitting this kind of data improves the model at points the
fit did not see (app.services.calibration refuses a fit that does not, unless forced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

HOLD_BACK_EVERY = 4


def split_held_back(
    rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows to fit, rows held back); nothing is held back from fewer than 2 × HOLD_BACK_EVERY rows."""
    ordered = sorted(rows, key=key)
    if len(ordered) < 2 * HOLD_BACK_EVERY:
        return ordered, []
    held = [r for i, r in enumerate(ordered) if i % HOLD_BACK_EVERY == HOLD_BACK_EVERY // 2]
    kept = [r for i, r in enumerate(ordered) if i % HOLD_BACK_EVERY != HOLD_BACK_EVERY // 2]
    return kept, held


def gemm_shape_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["dtype"], row["m"], row["n"], row["k"])


def collective_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["op"], row.get("group", "all"), int(row.get("ranks") or 2), row["size_bytes"])


def improves(held_back: dict[str, Any] | None) -> bool:
    """True when there is nothing held back, or the fit's error there is below the defaults'."""
    if not held_back or held_back.get("error_before_pct") is None or held_back.get("error_after_pct") is None:
        return True
    return bool(held_back["error_after_pct"] < held_back["error_before_pct"])
