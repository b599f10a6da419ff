"""Measured α/β of a calibrated profile: per link tier, collective, rank count and NCCL protocol regime.

A calibration (app/calibration/collective_fit.py) fits time = α + size · busbw_factor / β to each regime of
message sizes of each measured (tier, op, ranks) group — Hockney's α–β model (Parallel Computing 20, 1994),
with β the bus bandwidth of nccl-tests doc/PERFORMANCE.md. `collective_time` (app/core/network.py) uses these
lines, where a profile has them for the tier a communicator runs on, instead of its modelled α and β: they are
what that hardware measured. The scale-up tier (nvlink | pcie | xgmi) and the NIC transport (infiniband | roce
| efa | …) are kept apart, so a network-only profile never moves tensor-parallel traffic inside a node.

Rank counts: the fit for the communicator's own rank count is used; otherwise the nearest measured count
of the same tier and op, with β kept (bus bandwidth is the rank-independent figure, PERFORMANCE.md: "the bus
bandwidth … should be independent of the number of ranks") and α scaled by the ratio of ring steps,
2(n−1) for all-reduce and n−1 for the gathers and all-to-all (Thakur, Rabenseifner & Gropp, IJHPCA 19(1),
2005, Table 1), since the per-call latency of a ring grows with its steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

MeasuredTable = Mapping[str, Mapping[str, tuple["MeasuredRegime", ...]]]  # tier → "op@ranks" → regimes


@dataclass(frozen=True)
class MeasuredRegime:
    """One NCCL protocol regime's α/β line: sizes in [min_bytes, max_bytes), fitted on `points` sizes."""

    protocol: str
    min_bytes: float
    max_bytes: float
    alpha_s: float
    beta_bytes_per_s: float  # bus bandwidth
    points: int

    def time_s(self, size_bytes: float, factor: float) -> float:
        return self.alpha_s + size_bytes * factor / self.beta_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if math.isinf(data["max_bytes"]):
            data["max_bytes"] = None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MeasuredRegime:
        top = data.get("max_bytes")
        return cls(
            protocol=str(data["protocol"]),
            min_bytes=float(data["min_bytes"]),
            max_bytes=math.inf if top is None else float(top),
            alpha_s=float(data["alpha_s"]),
            beta_bytes_per_s=float(data["beta_bytes_per_s"]),
            points=int(data.get("points", 0)),
        )


def regime_for(fits: tuple[MeasuredRegime, ...] | list[MeasuredRegime], size_bytes: float) -> MeasuredRegime:
    """The regime holding `size_bytes`; below the first or above the last, the nearest end's line."""
    for fit in fits:
        if fit.min_bytes <= size_bytes < fit.max_bytes:
            return fit
    return fits[-1] if size_bytes >= fits[-1].min_bytes else fits[0]


def measured_table(data: Mapping[str, Any] | None) -> dict[str, dict[str, tuple[MeasuredRegime, ...]]]:
    """The table from its stored form (lists of dicts, as a profile's params["alpha_beta"] keeps it)."""
    table: dict[str, dict[str, tuple[MeasuredRegime, ...]]] = {}
    for tier, groups in (data or {}).items():
        for key, fits in (groups or {}).items():
            regimes = tuple(f if isinstance(f, MeasuredRegime) else MeasuredRegime.from_dict(f) for f in fits)
            if regimes:
                table.setdefault(str(tier), {})[str(key)] = regimes
    return table


def ring_steps(op: str, n: int) -> float:
    """Ring steps of one call (Thakur et al. 2005): 2(n−1) for all-reduce, n−1 for gather/scatter/all-to-all."""
    if op == "all_reduce":
        return 2.0 * (n - 1)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return float(n - 1)
    return 1.0


@dataclass(frozen=True)
class MeasuredTime:
    time_s: float
    regime: MeasuredRegime
    measured_ranks: int
    alpha_s: float  # α as used (scaled to the communicator's ring steps when its rank count was not measured)


def measured_time(
    table: MeasuredTable, tier: str, op: str, ranks: int, size_bytes: float, factor: float
) -> MeasuredTime | None:
    """The measured α/β time of `op` over `ranks` on `tier`, or None when the profile has no fit for it."""
    groups = table.get(tier) or {}
    candidates = []
    for key, fits in groups.items():
        name, _, count = key.partition("@")
        if name == op and count.isdigit() and fits:
            candidates.append((abs(int(count) - ranks), int(count), fits))
    if not candidates:
        return None
    _, measured, fits = min(candidates, key=lambda c: (c[0], c[1]))
    regime = regime_for(fits, size_bytes)
    alpha = regime.alpha_s
    if measured != ranks and ring_steps(op, measured) > 0:
        alpha *= ring_steps(op, ranks) / ring_steps(op, measured)
    return MeasuredTime(alpha + size_bytes * factor / regime.beta_bytes_per_s, regime, measured, alpha)
