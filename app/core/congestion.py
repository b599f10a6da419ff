"""Flow collisions under static ECMP hashing: the share of line rate a synchronous collective keeps.

A fabric with adaptive routing (InfiniBand AR, NVIDIA Spectrum-X) spreads each flow's packets over all equal
uplinks, so no uplink carries more than its share. Static ECMP pins each flow to one uplink by a hash of its
5-tuple (and, with "enhanced ECMP", its RDMA queue pair): the flows leaving a leaf land on its uplinks like
balls thrown into bins. A ring or tree runs at the pace of its slowest hop, so the collective keeps
1 / E[max(1, most loaded uplink)] of its line rate.

* Balls into bins: k flows hashed uniformly onto n uplinks; the expected maximum load, computed exactly
  here, grows as ln n / ln ln n for k = n (Mitzenmacher & Upfal, "Probability and Computing", 2005, §5.2
  and §5.4).
* Why low-entropy ECMP hurts training traffic, and the fix by more queue pairs per connection: Gangidi et al.,
  "RDMA over Ethernet for Distributed AI Training at Meta Scale", SIGCOMM 2024, §5 ("ECMP rendered poor
  performance for the training workload due to the low flow entropy"; E-ECMP with QP scaling "up to 40 %"
  better AllReduce than baseline ECMP).
* Flows per NIC: NCCL opens NCCL_NCHANNELS_PER_NET_PEER = 2 channels per network peer and
  NCCL_IB_QPS_PER_CONNECTION = 1 queue pair per connection by default (docs.nvidia.com/deeplearning/nccl,
  user-guide env.html), each queue pair one hashed flow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

# NCCL_NCHANNELS_PER_NET_PEER default (NCCL user guide, environment variables): channels per network peer
NCCL_CHANNELS_PER_NET_PEER = 2


@dataclass(frozen=True)
class RoutingShare:
    """The share of line rate left after flow collisions, and how it was reached."""

    share: float  # ≤ 1
    flows_per_leaf: int  # hashed flows leaving one leaf's uplinks
    uplinks_per_leaf: int
    expected_max_load: float  # E[max(1, load of the busiest uplink)] in line rates
    note: str


@cache
def _p_max_at_most(balls: int, bins: int, m: int) -> float:
    """P(no bin holds more than m) when `balls` are thrown uniformly into `bins` (exact, by conditioning on
    one bin at a time: its count is Binomial(remaining balls, 1 / remaining bins))."""
    if balls <= m:
        return 1.0
    if m * bins < balls:
        return 0.0
    r = np.arange(balls + 1)[:, None]
    j = np.arange(m + 1)[None, :]
    valid = j <= r
    rj = np.where(valid, r - j, 0)
    log_comb = _LGAMMA(r + 1) - _LGAMMA(j + 1) - _LGAMMA(rj + 1)
    ok = (np.arange(balls + 1) <= m).astype(float)  # one bin left: all remaining balls land in it
    for b in range(2, bins + 1):
        p = 1.0 / b
        pmf = np.where(valid, np.exp(log_comb + j * math.log(p) + rj * math.log1p(-p)), 0.0)
        ok = (pmf * ok[rj]).sum(axis=1)
    return float(min(1.0, ok[balls]))


_LGAMMA = np.vectorize(math.lgamma, otypes=[float])


@cache
def expected_max_load(flows: int, bins: int, flow_demand: float, sets: int = 1) -> float:
    """E[max(1, d·M)]: M the largest count over `sets` independent sets of `bins` bins, each receiving
    `flows` uniform random throws (exact per set), d the demand of one flow in line rates."""
    if flows <= 0 or bins <= 0:
        return 1.0
    # max(1, d·M) = 1 + d·Σ_{m ≥ c} 1[M > m] with c = ⌈1/d⌉ flows filling one uplink (d = 1/c here)
    first = max(0, math.ceil(1.0 / flow_demand - 1e-9))
    expected = 1.0
    for m in range(first, flows):
        above = 1.0 - _p_max_at_most(flows, bins, m) ** sets
        if above < 1e-12:
            break
        expected += flow_demand * above
    return expected


def ecmp_share(
    nodes_spanned: int,
    nodes_per_leaf: int,
    uplinks_per_leaf: int,
    nics_per_leaf_crossing: int,
    qps_per_connection: int,
    cluster_leaves: int = 0,
) -> RoutingShare:
    """Share of line rate a ring/tree/send-recv keeps under static ECMP.

    Contiguous placement (`cluster_leaves` = 0): the group's nodes fill leaves in order and each ring leaves
    a leaf once, so the flows on a leaf's uplinks are those of the `nics_per_leaf_crossing` NICs at its edge
    (all of a node's NICs on a rack leaf, one NIC on a rail leaf). Scattered placement (`cluster_leaves` =
    the leaves of the cluster): the scheduler spreads the group's nodes over up to that many leaves, so
    every ring hop leaves its leaf and every node on a leaf sends up. Each NIC's line rate is split over
    NCCL's channels × queue pairs, one hashed flow each; the busiest uplink (of every leaf the group spans,
    and the spine downlinks into them) sets the pace.
    """
    scattered = cluster_leaves > 1
    leaves = min(nodes_spanned, cluster_leaves) if scattered else math.ceil(nodes_spanned / nodes_per_leaf)
    if nodes_spanned <= 1 or leaves <= 1:
        return RoutingShare(1.0, 0, uplinks_per_leaf, 1.0, "within one leaf: no uplinks, no collisions")
    per_nic = NCCL_CHANNELS_PER_NET_PEER * max(1, qps_per_connection)
    crossing_nodes = math.ceil(nodes_spanned / leaves) if scattered else 1
    flows = crossing_nodes * nics_per_leaf_crossing * per_nic
    bins = max(1, uplinks_per_leaf)
    # uplinks of every leaf spanned and the spine downlinks into each: 2 × leaves independent bin sets
    load = expected_max_load(flows, bins, 1.0 / per_nic, 2 * leaves)
    note = (
        f"static ECMP: {flows} flows hashed onto {bins} uplinks per leaf over {leaves} leaves; "
        f"busiest uplink carries {load:.2f}× line rate → {1 / load:.0%} of line rate"
    )
    return RoutingShare(1.0 / load, flows, bins, load, note)
