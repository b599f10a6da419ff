"""Collective communication time model.

This is the single function every other part of the core calls for a collective:
`collective_time(op, message_bytes, placement, cluster)`.

Placeholder α–β model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005 ring/tree costs) until the full
network model lands. nccl-tests conventions for algbw/busbw (github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.core.hardware import ClusterSpec

CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]
COLLECTIVE_OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "send_recv",
)


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw × factor (doc/PERFORMANCE.md)."""
    if n <= 1:
        return 1.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "send_recv", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


@dataclass(frozen=True)
class Placement:
    """Where a communicator's ranks sit: n ranks, k of them per node (k ≤ gpus per node)."""

    ranks: int
    ranks_per_node: int

    @property
    def nodes(self) -> int:
        return max(1, -(-self.ranks // max(1, self.ranks_per_node)))


@dataclass(frozen=True)
class CollectiveEstimate:
    op: str
    message_bytes: float
    time_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    algorithm: str
    protocol: str
    tier: str  # "scale_up" | "scale_out" | "mixed" | "local"


def collective_time(
    op: str, message_bytes: float, placement: Placement, cluster: ClusterSpec
) -> CollectiveEstimate:
    """Time for one collective over `placement` ranks (ring α–β model)."""
    n = placement.ranks
    if n <= 1 or message_bytes <= 0:
        return CollectiveEstimate(op, message_bytes, 0.0, float("inf"), float("inf"), "none", "none", "local")
    inter = placement.nodes > 1
    if inter:
        per_gpu_nic = (
            cluster.fabric.nic_bandwidth_bytes_per_s * cluster.fabric.nics_per_node / cluster.gpus_per_node
        )
        bw = min(cluster.scaleup_bw, per_gpu_nic) * cluster.fabric.congestion_derate
        alpha = cluster.fabric.base_latency_s + 2 * cluster.fabric.hop_latency_s
        tier = "scale_out"
    else:
        bw = cluster.scaleup_bw
        alpha = cluster.scaleup_latency_s
        tier = "scale_up"
    factor = busbw_factor(op, n)
    steps = {
        "all_reduce": 2 * (n - 1),
        "all_gather": n - 1,
        "reduce_scatter": n - 1,
        "all_to_all": n - 1,
    }.get(op, 1)
    time_s = steps * alpha + message_bytes * factor / bw
    algbw = message_bytes / time_s
    return CollectiveEstimate(op, message_bytes, time_s, algbw, algbw * factor, "ring", "simple", tier)
