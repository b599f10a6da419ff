"""Scale-out topology: fat-tree / rail-optimised bill of materials, switch hops and oversubscription derates.

Folded-Clos (fat-tree) sizing with k-port switches: Al-Fares, Loukissas & Vahdat, "A scalable, commodity data
center network architecture" (SIGCOMM 2008) — a non-blocking leaf uses k/2 ports down and k/2 up; a 2-tier
fabric reaches k·k/2 endpoints, a 3-tier one k³/4. Rail-optimised layout (NIC i of every node on rail i's leaf):
NVIDIA DGX SuperPOD reference architecture (DGX H100 SuperPOD RA, "compute fabric", 32 nodes per scalable unit
with 64-port NDR switches). An oversubscription ratio r on a tier means r times more ports down than up.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from app.core.congestion import ecmp_share
from app.core.errors import ProblemCollector
from app.core.hardware import FabricSpec


@dataclass(frozen=True)
class FatTreeDesign:
    """What a user asks for: N nodes × rails NICs, k-port switches, tiers and oversubscription per tier."""

    nodes: int
    rails: int  # NICs (endpoints) per node
    switch_radix: int = 64
    tiers: int | None = None  # 1 = single switch, 2 = leaf/spine, 3 = leaf/spine/core; None → inferred
    oversubscription: tuple[float, ...] = (1.0,)  # leaf tier first, then spine; 1.0 = non-blocking
    rail_optimized: bool = True
    node_links_optical: bool = True  # False: copper DAC/AOC from NIC to leaf (no transceivers)

    def ratio(self, tier_index: int) -> float:
        if tier_index < len(self.oversubscription):
            return float(self.oversubscription[tier_index])
        return 1.0


@dataclass(frozen=True)
class TierCount:
    name: str  # leaf | spine | core
    switches: int
    down_ports_per_switch: int
    up_ports_per_switch: int
    oversubscription: float


@dataclass(frozen=True)
class BillOfMaterials:
    design: FatTreeDesign
    endpoints: int
    tiers: tuple[TierCount, ...]
    switches: int
    cables: dict[str, int]  # node_leaf, leaf_spine, spine_core
    transceivers: int
    non_blocking: bool
    max_endpoints: int  # what this radix/tier count can reach with the same oversubscription
    bisection_fraction: float  # of full bisection bandwidth
    nodes_per_leaf_group: int  # nodes reachable through one leaf (per rail when rail-optimised)
    switch_hops_max: int
    assumptions: tuple[str, ...] = ()
    cost: NetworkCost | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UnitPrices:
    """Unit prices in USD; `source` says where each came from (price row, request, or assumption)."""

    switch_usd: float
    transceiver_usd: float
    cable_usd: float
    nic_usd: float = 0.0  # 0 → NICs counted inside the server price
    source: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NetworkCost:
    total_usd: float
    breakdown_usd: dict[str, float]  # switches, transceivers, cables, nics — sums to total_usd
    per_node_usd: float
    per_gpu_usd: float | None
    prices: UnitPrices


def _split(radix: int, ratio: float) -> tuple[int, int]:
    """Ports down/up on one switch for oversubscription `ratio` (down ≤ ratio × up, all ports used)."""
    up = max(1, math.ceil(radix / (1.0 + ratio) - 1e-9))
    down = radix - up
    return down, up


def check_design(design: FatTreeDesign) -> None:
    problems = ProblemCollector()
    problems.check(design.nodes >= 1, "nodes", "must be at least 1")
    problems.check(design.rails >= 1, "rails", "must be at least 1 NIC per node")
    problems.check(
        design.switch_radix >= 4 and design.switch_radix % 2 == 0,
        "switch_radix",
        "must be an even number ≥ 4",
    )
    problems.check(design.tiers in (None, 1, 2, 3), "tiers", "must be 1, 2 or 3 (or omitted: inferred)")
    for i, r in enumerate(design.oversubscription):
        problems.check(1.0 <= r <= 16.0, f"oversubscription.{i}", "must be between 1 (non-blocking) and 16")
    problems.raise_if_any()


def max_endpoints(radix: int, tiers: int, oversubscription: tuple[float, ...] = (1.0,)) -> int:
    """Largest endpoint count a fat-tree of this radix and depth reaches (Al-Fares et al. 2008 §3)."""
    ratios = list(oversubscription) + [1.0] * 3
    if tiers == 1:
        return radix
    d1, _ = _split(radix, ratios[0])
    if tiers == 2:
        # each leaf needs ≥ 1 link to every spine; a spine has `radix` ports → at most `radix` leaves
        return d1 * radix
    d2, _ = _split(radix, ratios[1])
    # a pod: u1 spines (one per leaf uplink) serving d2 leaves; the core joins up to `radix` pods
    return d1 * d2 * radix


def required_tiers(endpoints: int, radix: int, oversubscription: tuple[float, ...] = (1.0,)) -> int | None:
    """Fewest fat-tree tiers (1-3) whose switches connect `endpoints` NIC ports; None when 3 do not suffice."""
    for tiers in (1, 2, 3):
        if endpoints <= max_endpoints(radix, tiers, oversubscription):
            return tiers
    return None


def resolve_tiers(design: FatTreeDesign) -> FatTreeDesign:
    """The design with its tier count inferred when not given; SpecError when the count cannot connect the
    nodes (field `tiers` when given, `nodes` when even 3 tiers of this radix are too few)."""
    check_design(design)
    endpoints = design.nodes * design.rails
    needed = required_tiers(endpoints, design.switch_radix, design.oversubscription)
    problems = ProblemCollector()
    reach = f"{design.nodes} nodes × {design.rails} rails = {endpoints} endpoints"
    if needed is None:
        problems.add(
            "nodes",
            f"{reach} exceed the {max_endpoints(design.switch_radix, 3, design.oversubscription)} a 3-tier "
            f"fat-tree of {design.switch_radix}-port switches reaches; use a larger radix or more oversubscription",
        )
    elif design.tiers is not None and design.tiers < needed:
        limit = max_endpoints(design.switch_radix, design.tiers, design.oversubscription)
        problems.add(
            "tiers",
            f"{reach} exceed the {limit} a {design.tiers}-tier fat-tree of {design.switch_radix}-port switches "
            f"reaches; {needed} tiers are needed (or omit tiers to infer them)",
        )
    problems.raise_if_any()
    return design if design.tiers is not None else replace(design, tiers=needed)


@dataclass(frozen=True)
class _TierLayout:
    """The switches of each tier, the cables between tiers, the nodes one leaf group serves and the most switch
    hops between two nodes."""

    tiers: tuple[TierCount, ...]
    cables: dict[str, int]
    nodes_per_leaf: int
    hops: int


def _one_tier(design: FatTreeDesign, endpoints: int) -> _TierLayout:
    cables = {"node_leaf": endpoints, "leaf_spine": 0, "spine_core": 0}
    return _TierLayout((TierCount("leaf", 1, endpoints, 0, 1.0),), cables, design.nodes, 1)


def _tier_layout(design: FatTreeDesign, endpoints: int) -> _TierLayout:
    """Leaves, spines and cores of a fat-tree of `design.tiers` tiers over `endpoints` NIC ports."""
    assert design.tiers is not None
    if design.tiers == 1:
        return _one_tier(design, endpoints)
    radix = design.switch_radix
    cables = {"node_leaf": endpoints, "leaf_spine": 0, "spine_core": 0}
    r1 = design.ratio(0)
    d1, _ = _split(radix, r1)
    if design.rail_optimized:
        # one leaf group per rail: NIC i of each node lands on rail i's leaves
        leaves = math.ceil(design.nodes / d1) * design.rails
        nodes_per_leaf = min(design.nodes, d1)
    else:
        leaves = math.ceil(endpoints / d1)
        nodes_per_leaf = max(1, min(design.nodes, d1 // design.rails))
    used_down = math.ceil(endpoints / leaves)
    up_per_leaf = math.ceil(used_down / r1)
    tiers = [TierCount("leaf", leaves, used_down, up_per_leaf, used_down / up_per_leaf)]
    uplinks = leaves * up_per_leaf
    cables["leaf_spine"] = uplinks
    if design.tiers == 2:
        spines = math.ceil(uplinks / radix)
        tiers.append(TierCount("spine", spines, math.ceil(uplinks / spines), 0, 1.0))
        return _TierLayout(tuple(tiers), cables, nodes_per_leaf, 3)
    r2 = design.ratio(1)
    d2, _ = _split(radix, r2)
    spines = math.ceil(uplinks / d2)
    used_d2 = math.ceil(uplinks / spines)
    up2 = math.ceil(used_d2 / r2)
    tiers.append(TierCount("spine", spines, used_d2, up2, used_d2 / up2))
    core_links = spines * up2
    cores = math.ceil(core_links / radix)
    tiers.append(TierCount("core", cores, math.ceil(core_links / cores), 0, 1.0))
    cables["spine_core"] = core_links
    return _TierLayout(tuple(tiers), cables, nodes_per_leaf, 5)


def _bom_notes(design: FatTreeDesign, inferred: bool, endpoints: int) -> tuple[str, ...]:
    notes: list[str] = []
    if inferred:
        notes.append(f"{design.tiers} tier(s) inferred: the fewest that connect {endpoints} endpoints")
    copper = (
        "; node-to-leaf links too" if design.node_links_optical else "; node-to-leaf links are copper (DAC)"
    )
    notes.append("every switch-to-switch link is optical with a transceiver at each end" + copper)
    notes.append("one cable per 400G-class port (twin-port OSFP splitters not modelled)")
    if design.rail_optimized and design.tiers is not None and design.tiers > 1:
        notes.append(f"rail-optimised: {design.rails} rails, each with its own leaf switches")
    return tuple(notes)


def _network_cost(bom: BillOfMaterials, prices: UnitPrices, gpus_per_node: int) -> NetworkCost:
    """Capex of the bill of materials at `prices`: switches, transceivers, cables and one NIC per endpoint."""
    breakdown = {
        "switches": bom.switches * prices.switch_usd,
        "transceivers": bom.transceivers * prices.transceiver_usd,
        "cables": sum(bom.cables.values()) * prices.cable_usd,
        "nics": bom.endpoints * prices.nic_usd,
    }
    total = sum(breakdown.values())
    nodes = bom.design.nodes
    return NetworkCost(
        total_usd=total,
        breakdown_usd=breakdown,
        per_node_usd=total / nodes,
        per_gpu_usd=total / (nodes * gpus_per_node) if gpus_per_node else None,
        prices=prices,
    )


def bill_of_materials(
    design: FatTreeDesign, prices: UnitPrices | None = None, gpus_per_node: int = 0
) -> BillOfMaterials:
    """Switch, cable and transceiver counts for the design (and its capex when `prices` are given).

    Without `design.tiers`, the fewest tiers that connect the nodes are used (`required_tiers`)."""
    inferred = design.tiers is None
    design = resolve_tiers(design)
    assert design.tiers is not None
    endpoints = design.nodes * design.rails
    layout = _tier_layout(design, endpoints)
    ratio_total = 1.0
    for tier in layout.tiers:
        ratio_total *= max(1.0, tier.oversubscription)
    cables = layout.cables
    optical = (
        cables["leaf_spine"]
        + cables["spine_core"]
        + (cables["node_leaf"] if design.node_links_optical else 0)
    )
    bom = BillOfMaterials(
        design=design,
        endpoints=endpoints,
        tiers=layout.tiers,
        switches=sum(t.switches for t in layout.tiers),
        cables=cables,
        transceivers=2 * optical,
        non_blocking=all(t.oversubscription <= 1.0 + 1e-9 for t in layout.tiers),
        max_endpoints=max_endpoints(design.switch_radix, design.tiers, design.oversubscription),
        bisection_fraction=1.0 / ratio_total,
        nodes_per_leaf_group=layout.nodes_per_leaf,
        switch_hops_max=layout.hops,
        assumptions=_bom_notes(design, inferred, endpoints),
    )
    if prices is None:
        return bom
    return BillOfMaterials(**{**bom.__dict__, "cost": _network_cost(bom, prices, gpus_per_node)})


def fabric_tiers(fabric: FabricSpec, cluster_nodes: int) -> int:
    """The fabric's tier count: as given, else (0) the fewest that connect the cluster's NIC ports. A count
    too small for the cluster is raised to the physical minimum (the service layer refuses it from users)."""
    needed = required_tiers(
        max(1, cluster_nodes) * max(1, fabric.nics_per_node),
        max(4, fabric.switch_radix),
        fabric.oversubscription,
    )
    return max(fabric.tiers, needed or 3)


@dataclass(frozen=True)
class PathProfile:
    switch_hops: int
    bandwidth_factor: float  # ≤ 1: share of line rate left after oversubscription and flow collisions
    note: str
    routing_share: float = 1.0  # ≤ 1: the flow-collision part of bandwidth_factor (static ECMP)


def path_profile(fabric: FabricSpec, nodes_spanned: int, cluster_nodes: int, pattern: str) -> PathProfile:
    """Switch hops and oversubscription derate for a group spanning `nodes_spanned` nodes.

    Ring and tree collectives move data between neighbouring nodes, so only the few ring edges that cross
    leaf boundaries use uplinks and oversubscription barely matters (an assumption, stated). All-to-all
    sends (1 - local share) of every rank's data across the leaf uplinks, so its bandwidth divides by the
    oversubscription ratio of every tier it crosses.
    """
    if nodes_spanned <= 1:
        return PathProfile(0, 1.0, "")
    tiers = fabric_tiers(fabric, cluster_nodes)
    if fabric.topology == "single_switch" or tiers <= 1:
        return PathProfile(1, 1.0, "single switch: 1 hop")
    radix = max(4, fabric.switch_radix)
    ratios = list(fabric.oversubscription) + [1.0] * 3
    d1, _ = _split(radix, ratios[0])
    nodes_per_leaf = d1 if fabric.topology == "rail_optimized" else max(1, d1 // max(1, fabric.nics_per_node))
    cluster_leaves = math.ceil(max(1, cluster_nodes) / nodes_per_leaf)
    scattered = fabric.placement == "scattered" and cluster_leaves > 1
    if nodes_spanned <= nodes_per_leaf and not scattered:
        return PathProfile(1, 1.0, f"within one leaf group ({nodes_per_leaf} nodes): 1 switch hop")
    d2, _ = _split(radix, ratios[1])
    nodes_per_pod = nodes_per_leaf * d2 if tiers >= 3 else nodes_per_leaf * radix
    crosses_core = tiers >= 3 and nodes_spanned > nodes_per_pod
    hops = 5 if crosses_core else 3
    if pattern != "all_to_all":
        return _ring_path(
            fabric, nodes_spanned, nodes_per_leaf, radix - d1, hops, cluster_leaves if scattered else 0
        )
    # packed, a leaf holds up to nodes_per_leaf of the group; scattered over L leaves, ⌈N / L⌉ of them
    local = math.ceil(nodes_spanned / min(nodes_spanned, cluster_leaves)) if scattered else nodes_per_leaf
    cross_leaf = 1.0 - min(local, nodes_spanned) / nodes_spanned
    factor = 1.0 / max(1.0, cross_leaf * ratios[0])
    if crosses_core:
        cross_pod = 1.0 - nodes_per_pod / nodes_spanned
        factor = min(factor, 1.0 / max(1.0, cross_pod * ratios[1]))
    note = f"{hops} switch hops; all-to-all crosses oversubscribed uplinks: bandwidth × {factor:.2f}"
    return PathProfile(hops, factor, note)


def _ring_path(
    fabric: FabricSpec, nodes_spanned: int, nodes_per_leaf: int, uplinks: int, hops: int, cluster_leaves: int
) -> PathProfile:
    """Ring, tree and send/recv traffic: oversubscription is not applied (contiguous rings cross each leaf
    edge once); under static ECMP their few large flows can collide on the uplinks (app.core.congestion)."""
    base = f"{hops} switch hops"
    if fabric.routing != "ecmp":
        note = f"{base}; adaptive routing spreads ring/tree traffic over all uplinks"
        return PathProfile(hops, 1.0, note)
    routed = ecmp_share(
        nodes_spanned,
        nodes_per_leaf,
        uplinks,
        1 if fabric.topology == "rail_optimized" else max(1, fabric.nics_per_node),
        fabric.qps_per_connection,
        cluster_leaves,
    )
    return PathProfile(hops, routed.share, f"{base}; {routed.note}", routed.share)
