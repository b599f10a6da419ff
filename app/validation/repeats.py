"""How much a publisher's own measurements of one configuration disagree: the noise floor of a validation set.

Some sources measure the same configuration more than once: on other days, after a system fix, or on another code
branch. BigScience's chronicles, for instance, report GPT 181B on 48 nodes (TP 8, PP 12, DP 4, micro-batch 2) at
134.02, 120.29 and 128.82 s per iteration (bigscience-workshop/bigscience train/tr11-176B-ml/
chronicles-prequel.md, 02-21 to 02-25). No estimate can be closer to every one of such rows than their own
spread allows, so the replay reports it beside the errors (`clusterplan validate training-runs`).

A configuration is everything a row states except its source, name, measured value and notes: two rows with the
same model shape, cluster, layout, dtype and metric are repeats of one another.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.validation.training_runs import Row

# columns that describe a measurement rather than the configuration measured
NOT_CONFIGURATION = frozenset({"source", "model_name", "params_B", "measured_value", "notes"})


@dataclass(frozen=True)
class RepeatGroup:
    """Rows that measured one configuration, and how far apart their values are."""

    rows: tuple[int, ...]  # 1-based data row numbers
    metric: str
    values: tuple[float, ...]

    @property
    def spread_pct(self) -> float:
        """Largest over smallest measured value, minus one, in per cent."""
        return (max(self.values) / min(self.values) - 1.0) * 100.0

    @property
    def half_spread_pct(self) -> float:
        """The smallest error, in per cent of the value it is measured against, that one prediction can have
        against every row of the group at once: a prediction p with |p − lo|/lo = |p − hi|/hi sits at
        p = 2·lo·hi/(lo + hi), which is (hi − lo)/(hi + lo) from either."""
        lo, hi = min(self.values), max(self.values)
        return (hi - lo) / (hi + lo) * 100.0


def configuration_key(row: Row, left_out: frozenset[str] = NOT_CONFIGURATION) -> tuple[tuple[str, str], ...]:
    """The row's columns and values (lower case), but those in `left_out`, as a hashable key."""
    return tuple(sorted((k, row.get(k).lower()) for k in row.data if k not in left_out))


def repeat_groups(rows: Iterable[Row]) -> list[RepeatGroup]:
    """Groups of two or more rows with one configuration and a numeric measured value (OOM rows excluded),
    widest spread first."""
    grouped: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = {}
    for row in rows:
        if row.get("measured_metric") == "oom":
            continue
        try:
            value = float(row.get("measured_value"))
        except ValueError:
            continue
        if value <= 0:
            continue
        grouped.setdefault(configuration_key(row), []).append((row.index, value))
    groups = [
        RepeatGroup(
            tuple(i for i, _ in members),
            dict(key)["measured_metric"],
            tuple(v for _, v in members),
        )
        for key, members in grouped.items()
        if len(members) > 1
    ]
    return sorted(groups, key=lambda g: -g.spread_pct)


def render_repeats(groups: list[RepeatGroup]) -> str:
    """Text section for the replay's report ('' when the file has no repeated configuration)."""
    if not groups:
        return ""
    widest = groups[0]
    head = f"repeated configurations: {len(groups)} measured more than once"
    if widest.spread_pct > 0:
        head += (
            f"; widest spread {widest.spread_pct:.1f} % (rows {', '.join(map(str, widest.rows))}), so no single "
            f"prediction can be within {widest.half_spread_pct:.1f} % of all of them"
        )
    lines = ["", head]
    for g in groups:
        values = ", ".join(f"{v:g}" for v in g.values)
        lines.append(
            f"  rows {', '.join(map(str, g.rows))}: {g.metric} {values} (spread {g.spread_pct:.1f} %)"
        )
    return "\n".join(lines)
