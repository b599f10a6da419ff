"""What the commands print: strict JSON (no NaN/Infinity tokens) and day counts that may be unbounded.

JSON has no numbers for infinity or NaN (RFC 8259, section 6), and Python's `json.dumps` writes the
non-standard `Infinity`/`NaN` tokens unless told not to; every `--json` output goes through `to_json`, which
writes each non-finite float as `null` and then refuses anything else that is not JSON (`allow_nan=False`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

SECONDS_PER_DAY = 86400  # 24 h × 3600 s


def finite_or_none(value: Any) -> Any:
    """`value` with every non-finite float (inf, -inf, nan) replaced by None, through dicts, lists and tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def to_json(data: Any, indent: int | None = None, default: Callable[[Any], Any] | None = None) -> str:
    """Strict JSON text of `data`: non-finite floats become null (see the module docstring)."""
    return json.dumps(finite_or_none(data), indent=indent, default=default, allow_nan=False)


def days_text(days: float | None, digits: int = 2) -> str:
    """'12.34 days'; 'unbounded' for an infinite span (e.g. infinitely many tokens); 'n/a' when unknown."""
    if days is None or math.isnan(days):
        return "n/a"
    if math.isinf(days):
        return "unbounded"
    return f"{days:,.{digits}f} days"


def likely_days(range_s: list[float]) -> str:
    """'35.11 days to 60.29 days': a [low, high] range in seconds."""
    lo_s, hi_s = range_s
    return f"{days_text(lo_s / SECONDS_PER_DAY)} to {days_text(hi_s / SECONDS_PER_DAY)}"


def likely_wall_clock(range_s: list[float] | None) -> str:
    """', 36.0 days to 61.4 days on the wall clock' for a wall-clock range in seconds; '' without one."""
    return f", {likely_days(range_s)} on the wall clock" if range_s else ""


def days_cell(days: float | None, digits: int = 1) -> str:
    """A table cell under a 'days' heading: the number alone, or 'unbounded' / 'n/a' as in `days_text`."""
    return days_text(days, digits).removesuffix(" days")
