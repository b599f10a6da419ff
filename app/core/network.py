"""Collective communication time model (NCCL-style α–β with algorithms, protocols and topology).

Every other part of the core calls one function for a collective:
`collective_time(op, message_bytes, placement, cluster, params=None)`.

How a time is built (all formulas per candidate algorithm × protocol, NCCL picks the fastest and so do we):

    time = launch overhead + protocol base latency + Σ steps × per-step latency (tier)   [latency term]
         + bytes on the most loaded link / (line rate × tier efficiency × protocol fraction)  [bandwidth term]

* α–β cost model: Hockney, "The communication challenge for MPP" (Parallel Computing 20, 1994); ring and
  tree costs: Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH"
  (IJHPCA 19(1), 2005), Table 1 / §4; Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
  clusters of workstations" (JPDC 69, 2009) for the 2(n-1)/n ring bound.
* Algorithm and protocol structure, step counts and the latency per step and tier follow NCCL's own tuning
  model: github.com/NVIDIA/nccl src/graph/tuning.cc (`ncclTopoTuneModel`: baseLat, hwLat[NVLink|PCI|NET],
  nsteps = 2(n-1) ring all-reduce, tree latency 2((ppn-1)·intraLat + log2(nNodes)·interLat), LL = 1/4 of
  the bus bandwidth, LL128 = 120/128·0.98 ≈ 0.92).
* algbw/busbw conventions: github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md (busbw = algbw × factor).
* Default efficiencies are published measurements, documented in `default_network_params()` and in
  docs/network.md; a calibration run replaces them (`NetworkParams.from_dict`).

Multi-node bandwidth of ring/tree collectives: every node sends 2(n-1)/n·S (ring all-reduce) through its
NICs whatever the GPUs per node, because NCCL builds one ring per NIC that crosses each node boundary once
(nccl-tests doc/PERFORMANCE.md "busbw … reflects the speed of the slowest link"). So the bus bandwidth is
min(scale-up link, node NIC bandwidth): 8 × 400 Gb/s → 400 GB/s per node → ≈ 370 GB/s busbw measured on
DGX H100 clusters (NVIDIA GTC24 S62129).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from app.core.errors import ProblemCollector
from app.core.hardware import ClusterSpec, FabricSpec
from app.core.network_measured import MeasuredRegime, measured_table, measured_time
from app.core.topology import path_profile

CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]
COLLECTIVE_OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "send_recv",
)
# Also accepted: "reduce" (NCCL's rooted reduce; the same pipelined-chain cost as broadcast in NCCL's model).
EXTRA_OPS: tuple[str, ...] = ("reduce",)
ALGORITHMS: tuple[str, ...] = ("ring", "tree", "nvls", "nvls_tree", "sharp", "hierarchical", "direct")
PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")

_OP_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "all2all": "all_to_all",
    "sendrecv": "send_recv",
    "p2p": "send_recv",
    "bcast": "broadcast",
}


def normalise_op(op: str) -> str:
    """Accept nccl-tests spellings (allreduce, alltoall, sendrecv) as well as ours."""
    key = op.strip().lower().replace("-", "_")
    return _OP_ALIASES.get(key.replace("_", ""), key)


def reported_busbw_factor(op: str, n: int) -> float:
    """The factor nccl-tests prints busbw with: busbw_factor, except that a 1-rank group moves nothing over a
    bus, so all_reduce, all_gather, reduce_scatter and all_to_all report busbw 0 there ((n-1)/n = 0), while
    broadcast, reduce and send_recv keep factor 1 (doc/PERFORMANCE.md)."""
    if n <= 1 and op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        return 0.0
    return busbw_factor(op, n)


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw × factor (doc/PERFORMANCE.md). The model's transfer term
    uses it, so a 1-rank group keeps 1 here; reported_busbw_factor is what nccl-tests prints."""
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


# --------------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------------


# docs/constants.md#nccl-small-message-channels. NCCL's channel and thread counts for one collective:
# the ring graph searches for at most MAXCHANNELS / 2 = 32 channels (src/init.cc, ringGraph->maxChannels; the tree
# graph reuses the ring's count), MAXCHANNELS = 64 (src/include/device.h).
NCCL_RING_MAX_CHANNELS = 32
# docs/constants.md#nccl-coll-channels. The collective channels NCCL's graph search settles on inside one NVSwitch
# domain, which share the GPU's ring bandwidth (tuning.cc busBw = nChannels · bwIntra): 24 on Ampere and Hopper,
# "Channel 00/24 … 23/24" on an 8-GPU HGX A100 (NVIDIA/nccl-tests issue #100) and "24 coll channels, 16 nvls
# channels" on one p5.48xlarge, 8 × H100 (aws-samples/aws-do-eks Container-Root/eks/deployment/nccl-test/
# README.md, commit 701c554); Blackwell's NVLink 5 reaches the search's maximum, NCCL_RING_MAX_CHANNELS (16
# searched and duplicated to 32). Across nodes the NICs set the count (16 on two p5 nodes, same README), which the
# model does not use: there the ring runs at the NICs' rate.
NCCL_COLL_CHANNELS: dict[str, int] = {"ampere": 24, "hopper": 24}
# Threads per channel per protocol: NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512
# (src/include/device.h; src/graph/tuning.cc ncclTopoTuneModel sets comm->maxThreads from them).
NCCL_MAX_NTHREADS: dict[str, int] = {"LL": 512, "LL128": 640, "Simple": 512}
# Bytes each thread must have before NCCL adds threads or channels: NCCL_LL_THREAD_THRESHOLD 8,
# NCCL_LL128_THREAD_THRESHOLD 8, NCCL_SIMPLE_THREAD_THRESHOLD 64 (src/include/comm.h); ncclTopoTuneModel
# (src/graph/tuning.cc) multiplies the ring LL threshold by nRanks.
NCCL_THREAD_THRESHOLD: dict[str, int] = {"LL": 8, "LL128": 8, "Simple": 64}


@dataclass(frozen=True)
class TierParams:
    """Achievable fraction of line rate on one tier, and its per-step software latency per protocol.

    `ring_efficiency` applies to streaming collectives (ring, tree, broadcast, send/recv), `all_to_all_efficiency`
    to all-to-all (many concurrent peers, smaller messages per peer). Step latencies are the per-hop cost of
    one pipeline step of a ring/tree for protocols LL / LL128 / Simple; on the network tier the fabric's own
    wire latency (NIC + switch hops, from FabricSpec) is added on top.
    """

    ring_efficiency: float
    all_to_all_efficiency: float
    step_latency_s: dict[str, float]
    source: str = ""


@dataclass(frozen=True)
class ProtocolParams:
    """One NCCL protocol: the fraction of bandwidth it reaches and its fixed start-up latency."""

    name: str
    bandwidth_fraction: float
    base_latency_s: float
    source: str = ""


@dataclass(frozen=True)
class NetworkParams:
    """Calibratable α/β parameters of the collective model; defaults come from published measurements."""

    launch_overhead_s: float
    nvlink: TierParams
    pcie: TierParams
    xgmi: TierParams
    transports: dict[str, TierParams]  # infiniband | roce | efa | ethernet_tcp
    protocols: dict[str, ProtocolParams]
    nvls_efficiency: float  # NVLS algbw as a fraction of per-GPU NVLink bandwidth (NVLink 4, Hopper)
    nvls_efficiency_nvlink5: float  # the same on NVLink 5 (Blackwell) switches
    nvls_min_ranks: int  # NCCL engages NVLS only from this many GPUs per node
    nvls_latency_s: float
    tree_efficiency: float  # double-binary-tree bandwidth relative to its link bound
    sharp_efficiency: float  # in-network reduction (CollNet) relative to NIC line rate
    all_to_all_peer_latency_s: float  # per-peer posting cost of an all-to-all
    pipeline_bytes: float  # data in flight per pipeline stage of tree/NVLS algorithms (all channels)
    # NCCL's tuning-model refinements (src/graph/tuning.cc, NCCL 2.2x): extra network step latency of a tree
    # over a ring per protocol (hwLat NET Tree {5.0, 8.5, 14} − Ring {2.7, 4.0, 14} µs) …
    tree_network_extra_latency_s: dict[str, float] = field(
        default_factory=lambda: {"LL": 2.3 * US, "LL128": 4.5 * US, "Simple": 0.0}
    )
    # … the network post overhead every step of an inter-node ring pays (getNetOverhead: 1 µs on Intel CPUs,
    # ×3 for Simple) …
    net_post_overhead_s: float = 1.0e-6
    # … the "plateau effect of ring": multi-node Simple ring all-reduce latency ×1.4 on sm80+ …
    ring_plateau_factor: float = 1.4
    # … and the medium-size tree correction, bandwidth × factor at log2(bytes / 64) (treeCorrectionFactor)
    tree_correction: dict[str, tuple[float, ...]] = field(default_factory=lambda: dict(NCCL_TREE_CORRECTION))
    # … and the LL protocol's bus-bandwidth ceiling per NVIDIA GPU generation and node count (1, 2, ≥ 4 nodes),
    # GB/s (llMaxBws): LL moves 8-byte stores with a flag, one warp-wide poll per line, so it saturates the
    # GPU's load/store path long before a Hopper or Blackwell link; multi-node rows are lower still.
    ll_max_busbw_gbps: dict[str, tuple[float, float, float]] = field(
        default_factory=lambda: dict(NCCL_LL_MAX_BW)
    )
    # … and the inter-node latency a network plugin reports to NCCL (ncclNetProperties_t.latency), which NCCL's
    # topology search stores as the graph's latencyInter and tuning.cc adds to every network step (twice for
    # Simple, the flush). NCCL's own IB and socket transports report 0, so there the fabric's wire latency
    # stands. On EFA the model charges every adapter generation the 75 µs AWS's aws-ofi-nccl plugin reports on
    # p4d/p4de/p5/p5e (NET_PLUGIN_REPORTED_LATENCY says why not its 35 µs on p5en and later). Keyed by the
    # slowest adapter speed (Gb/s) an entry holds from.
    net_reported_latency_s: dict[str, tuple[tuple[float, float], ...]] = field(
        default_factory=lambda: dict(NET_PLUGIN_REPORTED_LATENCY)
    )
    # … and the channels and threads NCCL gives a small message (src/enqueue.cc topoGetAlgoInfo, see
    # channels_used): at most ring_max_channels channels, each of up to max_threads[protocol] threads, shrunk
    # until every thread has thread_threshold_bytes[protocol] (× ranks for ring LL) to move.
    ring_max_channels: int = NCCL_RING_MAX_CHANNELS
    # … of the coll_channels a single NVLink domain's communicator has, per GPU generation (NCCL_COLL_CHANNELS;
    # ring_max_channels where it has no entry)
    coll_channels: dict[str, int] = field(default_factory=lambda: dict(NCCL_COLL_CHANNELS))
    max_threads: dict[str, int] = field(default_factory=lambda: dict(NCCL_MAX_NTHREADS))
    thread_threshold_bytes: dict[str, int] = field(default_factory=lambda: dict(NCCL_THREAD_THRESHOLD))
    name: str = "published-defaults"
    version: str = "1"
    source: str = ""
    # A calibrated profile's measured α/β per tier → "op@ranks" → protocol regime (app/core/network_measured.py);
    # where it covers a communicator, collective_time uses it instead of the modelled α and β.
    alpha_beta: dict[str, dict[str, tuple[MeasuredRegime, ...]]] = field(default_factory=dict)

    def tier(self, name: str) -> TierParams:
        if name == "nvlink":
            return self.nvlink
        if name == "pcie":
            return self.pcie
        if name == "xgmi":
            return self.xgmi
        return self.transports.get(name) or self.transports["infiniband"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: NetworkParams | None = None) -> NetworkParams:
        """Overlay a (partial) dict — e.g. a calibration result — on `base` (default: published defaults)."""
        base = base or default_network_params()
        updates: dict[str, Any] = {}
        known = {f.name for f in fields(cls)}
        for key, value in data.items():
            if key not in known:
                continue
            current = getattr(base, key)
            if isinstance(current, TierParams) and isinstance(value, dict):
                updates[key] = _merge_tier(current, value)
            elif key == "transports" and isinstance(value, dict):
                merged = dict(base.transports)
                for t_name, t_val in value.items():
                    prior = merged.get(t_name, base.transports["infiniband"])
                    merged[t_name] = _merge_tier(prior, t_val) if isinstance(t_val, dict) else t_val
                updates[key] = merged
            elif key == "protocols" and isinstance(value, dict):
                merged_p = dict(base.protocols)
                for p_name, p_val in value.items():
                    prior_p = merged_p.get(p_name, ProtocolParams(p_name, 1.0, 0.0))
                    merged_p[p_name] = replace(prior_p, **{k: v for k, v in p_val.items() if k != "name"})
                updates[key] = merged_p
            elif key == "alpha_beta":
                updates[key] = measured_table(value)
            else:
                updates[key] = value
        return replace(base, **updates)


def _merge_tier(tier: TierParams, data: dict[str, Any]) -> TierParams:
    values = {k: v for k, v in data.items() if k in {f.name for f in fields(TierParams)}}
    if "step_latency_s" in values:
        values["step_latency_s"] = {**tier.step_latency_s, **values["step_latency_s"]}
    return replace(tier, **values)


US = 1e-6
# NCCL src/graph/tuning.cc treeCorrectionFactor[LL | LL128 | Simple][log2(bytes/64)], 64 B to 256 MiB:
# "Trees are not perfectly sticking to the model for medium sizes".
NCCL_TREE_CORRECTION: dict[str, tuple[float, ...]] = {
    "LL": (1, 1, 1, 1, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1, 1, 1),
    "LL128": (
        1,
        1,
        1,
        1,
        1,
        0.9,
        0.8,
        0.8,
        0.8,
        0.7,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.8,
        0.9,
        0.9,
        0.9,
        0.9,
        1,
        1,
    ),
    "Simple": (
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.8,
        0.7,
        0.6,
        0.6,
        0.5,
        0.5,
        0.5,
        0.5,
        0.6,
        0.7,
        0.8,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
    ),
}
# NCCL src/graph/tuning.cc llMaxBws[compCapIndex][nNodes 1 | 2 | >2] (NCCL 2.23-2.27): LL bus bandwidth ceiling,
# GB/s. Ring LL: min(llMaxBw, busBw/4); tree LL: min(llMaxBw, busBw/3.8).
NCCL_LL_MAX_BW: dict[str, tuple[float, float, float]] = {
    "volta": (39.0, 39.0, 20.4),
    "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0),
    "blackwell": (2 * 141.0, 2 * 45.0, 2 * 35.0),
}
# docs/constants.md#efa-plugin-reported-latency. Per transport: ((from adapter Gb/s, latency s), …), the last entry
# whose speed the NIC reaches applies. aws-ofi-nccl src/platform-aws.cpp platform_data_map reports 75.0 µs on
# p4d.24xlarge, p4de.24xlarge, p5.48xlarge and p5e (4 or 32 × 100 Gb/s EFA) and 35.0 µs on p5en (16 × 200 Gb/s),
# p6-b200 (8 × 400 Gb/s), p6-b300 and the later P-series. The model charges 75 µs on every generation: the
# measured p6-b200 sweep (4 nodes, 1 KiB-8 MiB) sits on a ~360 µs floor that 35 µs puts at ~200 µs and 75 µs
# reproduces, and on p5en and later the plugin's own region tables choose NCCL's algorithm
# (src/tuner/nccl_ofi_regions.cpp region_init_internal_p5en, _p6, _p6_b300), so the lower figure no longer
# decides NCCL's choice there. Chosen on those p6-b200 rows (docs/validation_collectives.md); no p5en
# small-message measurement checks it.
NET_PLUGIN_REPORTED_LATENCY: dict[str, tuple[tuple[float, float], ...]] = {
    "efa": ((0.0, 75 * US),),
}
# docs/constants.md#nccl-tree-chunk. Bytes of payload one channel moves per pipeline step (src/enqueue.cc
# calcCollChunking: buffSize / NCCL_STEPS, LL halved for its flags, LL128 15 of 16 words): buffers from
# src/init.cc, NCCL_STEPS = 8 (src/include/device.h).
# Simple: DEFAULT_BUFFSIZE 4 MiB / 8; LL: DEFAULT_LL_BUFFSIZE 8 lines × 512 threads × 8 steps × 16 B / 8 / 2;
# LL128: DEFAULT_LL128_BUFFSIZE 120 elements × 640 threads × 8 steps × 8 B / 8 × 15 / 16.
NCCL_CHUNK_BYTES: dict[str, int] = {"LL": 32768, "LL128": 576000, "Simple": 524288}
_NCCL_TUNING = "github.com/NVIDIA/nccl src/graph/tuning.cc (hwLat/baseLat tables, ring rows)"


def default_network_params() -> NetworkParams:
    """Published-measurement defaults. Each number's source is next to it (also in docs/network.md)."""
    return NetworkParams(
        # Per-call cost of launching a collective kernel and synchronising ranks. Published small-message
        # all-reduce latencies: 43.8 µs at 32 KiB on 8×A100 (nccl-tests -g 8), 40 µs at 32 KiB on 8×H200
        # (all_reduce_bench with barrier), 19.9 µs at 8 B over IB HDR (nccl-tests #150), 47.5 µs at 4 B on
        # 2×8 H20 (nccl #1244); after NCCL's own modelled latency, ~10-25 µs remain. We take 12 µs.
        launch_overhead_s=12 * US,
        nvlink=TierParams(
            # ~370 GB/s effective of 450 GB/s NVLink4 for ring / non-all-reduce ("20 % protocol overhead"),
            # nccl-tests #212 (sjeaugey); A100 232-235/300, B200 680-700/900 (GTC24/25 slides) agree (0.78-0.82).
            ring_efficiency=0.80,
            # all-to-all busbw 210/300 (A100), 320/450 (H100), 640/900 (B200, GB200) — NVIDIA GTC25 S72583.
            all_to_all_efficiency=0.71,
            step_latency_s={"LL": 0.6 * US, "LL128": 1.9 * US, "Simple": 3.4 * US},
            source=f"efficiency: nccl-tests #212, GTC24 S62129, GTC25 S72583; step latency: {_NCCL_TUNING} NVLink",
        ),
        pcie=TierParams(
            # 8-GPU PCIe all-reduce busbw 24 of 32 GB/s (Gen4), 48 of 64 (Gen5), 96 of 128 (Gen6): GTC24/GTC25.
            ring_efficiency=0.75,
            all_to_all_efficiency=0.75,
            step_latency_s={"LL": 1.0 * US, "LL128": 2.5 * US, "Simple": 5.7 * US},
            source=f"efficiency: NVIDIA GTC24 S62129 / GTC25 S72583 PCIe bars; step latency: {_NCCL_TUNING} PCI",
        ),
        xgmi=TierParams(
            # MI300X: 8-GPU RCCL all-reduce busbw 312.9 of 7×64 = 448 GB/s; 2 GPUs 47.7 of 64 (one link):
            # stas00/ml-engineering network/README.md (commit 744d01e).
            ring_efficiency=0.72,
            all_to_all_efficiency=0.65,
            step_latency_s={"LL": 1.0 * US, "LL128": 2.5 * US, "Simple": 5.7 * US},
            source="efficiency: stas00/ml-engineering network/README.md MI300X rows; latency: PCI row of tuning.cc",
        ),
        transports={
            # NDR 400 Gb/s → 46-48 GB/s per NIC through NCCL (92-96 % of 50 GB/s): nccl-tests #290 (AddyLaddy);
            # 8×400G DGX H100 multi-node 370-380 GB/s, 8×200G DGX A100 192 GB/s (GTC24 S62129).
            # Network step latency (software part; wire latency comes from the fabric): NCCL NET hwLat ring
            # {2.7, 4.0, 14} µs minus ~2 µs IB end-to-end wire latency.
            "infiniband": TierParams(
                0.94,
                0.76,
                {"LL": 0.7 * US, "LL128": 2.0 * US, "Simple": 12.0 * US},
                source=f"nccl-tests #290; GTC24 S62129; all-to-all 24/25, 48/50 GB/s per GPU over 32 GPUs "
                f"(GTC25 S72583, ×(n-k)/(n-1) NIC share); {_NCCL_TUNING} NET",
            ),
            # RoCE v2 with lossless (PFC/ECN) tuning reaches the same line-rate fraction as IB in NCCL;
            # "200Gb IB/RoCE 1 NIC → 24 GB/s, 400Gb → 48 GB/s" (GTC24 S62129 treats them alike).
            "roce": TierParams(
                0.94,
                0.72,
                {"LL": 1.0 * US, "LL128": 2.5 * US, "Simple": 13.0 * US},
                source=f"GTC24 S62129 (IB/RoCE bars identical); latency: {_NCCL_TUNING} NET + ~0.5 µs",
            ),
            # AWS EFA (SRD): all_reduce 4 nodes 8×400G 381.8 GB/s busbw of 400 GB/s per node (95 %), p5 32×100G
            # 356 GB/s at 4-16 nodes (89 %), stas00/ml-engineering and crazyguitar/aws-gpu-communication-benchmark.
            "efa": TierParams(
                0.91,
                0.78,
                {"LL": 2.0 * US, "LL128": 4.0 * US, "Simple": 16.0 * US},
                source="stas00/ml-engineering network/README.md (EFA v4); crazyguitar/aws-gpu-communication-benchmark",
            ),
            # NCCL socket transport: 100 GbE TCP → 10 GB/s all_reduce busbw of 12.5 GB/s (GTC24 S62129).
            "ethernet_tcp": TierParams(
                0.80,
                0.60,
                {"LL": 5.0 * US, "LL128": 8.0 * US, "Simple": 25.0 * US},
                source="NVIDIA GTC24 S62129 '2 nodes, 100GbE TCP sockets' bar (10 GB/s)",
            ),
        },
        protocols={
            # LL: 8-byte stores with a 4-byte flag, NCCL models 1/4 of bus bandwidth for all-reduce (1/3 others).
            "LL": ProtocolParams("LL", 0.25, 6.6 * US, source=f"{_NCCL_TUNING} Ring/LL"),
            # LL128: 120 of every 128 bytes are payload; NCCL models 0.92 of bus bandwidth.
            "LL128": ProtocolParams("LL128", 0.92, 14.0 * US, source=f"{_NCCL_TUNING} Ring/LL128"),
            "Simple": ProtocolParams("Simple", 1.0, 8.4 * US, source=f"{_NCCL_TUNING} Ring/Simple"),
        },
        # NVLS all-reduce algbw ≈ 275 GB/s on 8×H100 (480 busbw, nccl-tests #212), 262-274 GB/s for 5-8 GPUs
        # (nccl #1455): 0.6 of 450 GB/s, nearly independent of the GPU count.
        nvls_efficiency=0.60,
        # NCCL's own NVLS model lowers efficiency from Hopper (0.85) to Blackwell (0.74): src/tuning/nvls.cc
        # nvlsEfficiency[]. Same ratio applied to ours: 0.60 × 0.74 / 0.85 = 0.52.
        nvls_efficiency_nvlink5=0.52,
        # "NVLS engaged only for > 4 GPUs" (stas00/ml-engineering H200 rows; nccl #1455 "NVLS = ring for <= 4").
        nvls_min_ranks=5,
        # NVLS latency inside the NVLink domain: NCCL tuning.cc hwLat[NVLINK][NVLS] = 23 µs in NCCL 2.19-2.20,
        # 25 µs from 2.21.5 (the version of every NVLS row measured at a small size here: 2.21.5, 2.27.7). NCCL's
        # baseLat for NVLS and NVLS tree is 0, so this is the whole single-node NVLS latency. The model then
        # switches from ring/LL to NVLS at ~0.8 MiB on 8×H200; NCCL_DEBUG=INFO TUNING shows NCCL 2.27 switching
        # between 1 and 2 MiB (stas00/ml-engineering network/benchmarks), its ring LL being faster (1/2, not 1/4).
        nvls_latency_s=25 * US,
        # Tree bandwidth vs its ideal bound: 2-node 8×H100 EFA all-reduce 477.7 GB/s busbw where the ideal
        # 2-node tree would reach ~700 (crazyguitar data); NCCL itself scales tree bandwidth by 0.9 and caps it.
        tree_efficiency=0.70,
        # SHARP (CollNet) + NVLS on 4×DGX H100: 480 GB/s busbw (GTC25 S72583) = NVLS-bound; NIC side ≈ IB.
        sharp_efficiency=0.95,
        all_to_all_peer_latency_s=0.5 * US,
        # Tree/NVLS pipelines move data in chunks; every stage of depth adds one chunk's transfer time
        # (store-and-forward of the first chunk). NCCL defaults: NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 = 512 KiB
        # per channel step, up to 32 channels → 16 MiB in flight (docs.nvidia.com/deeplearning/nccl
        # env.html). It reproduces the ~45-50 µs per tree level seen in NVIDIA's NVLSTree 64 MiB scan from
        # 4 to 1024 nodes (GTC24 S62129).
        pipeline_bytes=16 * 2**20,
        name="published-defaults",
        version="1",
        source="docs/network.md §Default parameters (published nccl-tests measurements, NCCL tuning model)",
    )


# --------------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateTime:
    algorithm: str
    protocol: str
    time_s: float


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
    # time_s = launch + latency + transfer
    breakdown: dict[str, float] = field(default_factory=dict)
    ranks: int = 1
    ranks_per_node: int = 1
    nodes: int = 1
    bottleneck: str = ""  # which link bounds the transfer term
    candidates: tuple[CandidateTime, ...] = ()
    assumptions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("algbw_bytes_per_s", "busbw_bytes_per_s"):
            if math.isinf(data[key]):
                data[key] = None
        return data


# --------------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Links:
    """Bandwidths (bytes/s, already × efficiency) and per-step latencies of the links a placement uses."""

    n: int
    k: int  # ranks per scale-up domain
    nodes: int  # scale-up domains spanned
    up_tier: str  # nvlink | pcie | xgmi
    up_bw: float  # per-GPU scale-up bandwidth × ring efficiency
    up_bw_a2a: float
    up_raw: float
    net_bw: float  # per-domain NIC bandwidth used by the communicator × efficiency × derates
    net_bw_a2a: float
    gpu_net_bw: float  # one GPU's NIC share × efficiency × derates
    net_raw: float
    net_wire_latency_s: float
    nvls: bool
    nvls_bw: float  # NVLS algbw (bytes/s) for this GPU generation
    sharp: bool
    transport: str
    hops: int
    generation: str  # NVIDIA GPU generation named by the NVLink rate ("" elsewhere), for NCCL's LL ceiling
    topology_note: str
    channels: int  # the collective channels the communicator's ring runs on at most (NCCL_COLL_CHANNELS)


def _links(placement: Placement, cluster: ClusterSpec, params: NetworkParams, op: str) -> _Links:
    n = placement.ranks
    gpn = cluster.gpus_per_node
    domain = max(cluster.domain_gpus, gpn)
    nodes_per_domain = max(1, domain // gpn)
    k_node = min(placement.ranks_per_node, n)
    k = min(n, k_node * nodes_per_domain) if nodes_per_domain > 1 else k_node
    nodes = max(1, -(-n // max(1, k)))
    kind = cluster.scaleup_kind
    # point-to-point meshes (AMD xGMI, Gaudi on-die RoCE links) share the mesh model and the xgmi parameters
    up_tier = "pcie" if kind in ("pcie", "none") else "xgmi" if kind in ("xgmi", "roce_mesh") else "nvlink"
    tier = params.tier(up_tier)
    raw_up = cluster.scaleup_bw
    if up_tier == "xgmi":
        # point-to-point mesh: a GPU reaches its peers over one link each, so a group of k uses k-1 links
        # (MI300X: 7 links × 64 GB/s = 448 GB/s aggregate; AMD CDNA3 white paper).
        links = max(1, max(domain, cluster.gpu.default_gpus_per_node) - 1)
        raw_up = raw_up / links * max(1, min(k - 1, links))
    fabric = cluster.fabric
    ttier = params.tier(fabric.transport)
    # all gpn/k groups of a layout communicate at once (e.g. 8 rail-aligned DP groups), so a group gets its
    # share of the NICs, not all of them
    nics_used = fabric.nics_per_node * k_node / gpn * nodes_per_domain
    net_raw = fabric.nic_bandwidth_bytes_per_s * nics_used
    gpu_nics = fabric.nics_per_node / gpn
    pattern = "all_to_all" if op == "all_to_all" else "ring"
    path = path_profile(fabric, nodes * nodes_per_domain, cluster.num_nodes, pattern)
    derate = fabric.congestion_derate * path.bandwidth_factor
    generation = _nvlink_generation(cluster) if up_tier == "nvlink" else ""
    return _Links(
        n=n,
        k=k,
        nodes=nodes,
        up_tier=up_tier,
        up_bw=raw_up * tier.ring_efficiency,
        up_bw_a2a=raw_up * tier.all_to_all_efficiency,
        up_raw=raw_up,
        net_bw=net_raw * ttier.ring_efficiency * derate,
        net_bw_a2a=net_raw * ttier.all_to_all_efficiency * derate,
        gpu_net_bw=fabric.nic_bandwidth_bytes_per_s * gpu_nics * ttier.ring_efficiency * derate,
        net_raw=net_raw,
        net_wire_latency_s=max(
            fabric.base_latency_s + path.switch_hops * fabric.hop_latency_s,
            _reported_net_latency(params, fabric),
        ),
        nvls=cluster.has_nvls and kind in ("nvswitch", "nvl72"),
        # NVLink 5 (Blackwell) moves ≥ 900 GB/s per GPU; NVLink 4 (Hopper) 450 (NVIDIA datasheets)
        nvls_bw=raw_up * (params.nvls_efficiency_nvlink5 if raw_up >= 600e9 else params.nvls_efficiency),
        sharp=fabric.sharp and fabric.transport == "infiniband",
        transport=fabric.transport,
        hops=path.switch_hops,
        topology_note=path.note,
        generation=generation,
        channels=params.coll_channels.get(generation, params.ring_max_channels)
        if nodes <= 1
        else params.ring_max_channels,
    )


def _reported_net_latency(params: NetworkParams, fabric: FabricSpec) -> float:
    """The inter-node latency the transport's network plugin reports to NCCL (0 where it reports none): NCCL adds
    it to every network step in place of a measured wire latency (src/graph/search.cc latencyInter)."""
    gbps = fabric.nic_bandwidth_bytes_per_s * 8 / 1e9
    reported = 0.0
    for from_gbps, latency_s in params.net_reported_latency_s.get(fabric.transport, ()):
        if gbps >= from_gbps:
            reported = latency_s
    return reported


def _nvlink_generation(cluster: ClusterSpec) -> str:
    """GPU generation from the NVLink rate per GPU and direction: NVLink 2 150, 3 300, 4 450, 5 900 GB/s
    (NVIDIA V100/A100/H100/B200 datasheets)."""
    bw = cluster.gpu.scaleup_bandwidth_bytes_per_s
    if bw < 200e9:
        return "volta"
    if bw < 400e9:
        return "ampere"
    return "hopper" if bw < 600e9 else "blackwell"


@dataclass(frozen=True)
class _Cost:
    algorithm: str
    protocol: str
    latency_s: float  # excluding the launch overhead
    transfer_s: float
    bottleneck: str
    # the transfer time NCCL's tuner expects, with every channel (src/graph/tuning.cc busBw = nChannels · bw):
    # it picks the algorithm and protocol by that, then runs on channels_used (src/enqueue.cc topoGetAlgoInfo)
    tuned_transfer_s: float | None = None

    @property
    def tuned_s(self) -> float:
        """The time NCCL's tuner ranks this candidate by."""
        return self.latency_s + (self.transfer_s if self.tuned_transfer_s is None else self.tuned_transfer_s)


def _step_latency(
    params: NetworkParams, links: _Links, protocol: str, algorithm: str = "ring"
) -> tuple[float, float]:
    """(intra-domain step latency, inter-domain step latency) for one protocol, as NCCL's tuning model
    builds them: a tree's network step costs the tree's network latency; Simple pays the wire latency twice
    (the flush); every step of a multi-node ring costs at least the network post overhead (×3 for Simple).
    NCCL also charges a ring with one rank per node the tree's network latency; that rule is left out: it
    moved no validation row and worsened the training-run replay (docs/network.md)."""
    up = params.tier(links.up_tier).step_latency_s[protocol]
    net = params.tier(links.transport).step_latency_s[protocol]
    if algorithm == "tree":
        net += params.tree_network_extra_latency_s.get(protocol, 0.0)
    net += (2 if protocol == "Simple" else 1) * links.net_wire_latency_s
    if links.nodes > 1 and algorithm == "ring":
        up = max(up, params.net_post_overhead_s * (3 if protocol == "Simple" else 1))
    return up, net


def _tree_correction(params: NetworkParams, protocol: str, message_bytes: float) -> float:
    """NCCL's medium-size tree bandwidth correction (treeCorrectionFactor), 1 outside its 64 B-256 MiB range."""
    table = params.tree_correction.get(protocol, ())
    index = int(math.log2(max(1.0, message_bytes / 64)))
    return table[index] if 0 <= index < len(table) else 1.0


def channels_used(
    message_bytes: float,
    protocol: str,
    algorithm: str,
    ranks: int,
    params: NetworkParams | None = None,
    max_channels: int | None = None,
) -> int:
    """Channels (thread blocks) NCCL runs a ring or tree collective of `message_bytes` on.

    NCCL src/enqueue.cc topoGetAlgoInfo ("Ring/Tree channel tuning"; getChannnelThreadInfo in older releases):
    starting from all channels with the protocol's maximum threads each, `while (nBytes < nc*nt*threadThreshold)`
    drop a channel, down to one. The threshold is per protocol, × nRanks for ring LL (src/graph/tuning.cc).
    Below one channel NCCL then halves the threads, which keeps each thread's bytes and so not the time.
    `max_channels`: the communicator's channels (default ring_max_channels)."""
    params = params or default_network_params()
    nt = params.max_threads[protocol]
    threshold = params.thread_threshold_bytes[protocol] * (
        ranks if (algorithm, protocol) == ("ring", "LL") else 1
    )
    # the loop stops at the largest nc with nBytes ≥ nc·nt·threshold, or at one channel
    cap = max_channels or params.ring_max_channels
    return max(1, min(cap, int(message_bytes // (nt * threshold))))


def _channel_share(
    message_bytes: float, protocol: str, algorithm: str, ranks: int, params: NetworkParams, channels: int
) -> float:
    """Share of a GPU's scale-up bandwidth a message reaches: NCCL stripes the scale-up links over the
    communicator's `channels` (tuning.cc busBw = nChannels · bwIntra), so channels_used carry
    channels_used / channels."""
    return channels_used(message_bytes, protocol, algorithm, ranks, params, channels) / channels


def tree_chunk_bytes(protocol: str, message_bytes: float, nodes: int, ranks: int, channels: int) -> int:
    """Bytes one channel moves per pipeline step of a tree all-reduce (src/enqueue.cc calcCollChunking). For
    tree LL128 NCCL halves the chunk while a channel would get fewer than nsteps · 64 / ppn chunks (down to
    128 KiB), then nsteps · 16 / ppn (down to 32 KiB), nsteps = 1 + log2(nNodes) + 0.1 · ppn."""
    chunk = NCCL_CHUNK_BYTES[protocol]
    if protocol != "LL128":
        return chunk
    ppn = ranks / nodes
    nsteps = 1 + int(math.log2(nodes)) + 0.1 * ppn  # log2i: the integer part

    def chunks() -> float:
        return message_bytes // (channels * chunk)

    while chunks() < nsteps * 64 / ppn and chunk > 131072:
        chunk //= 2
    while chunks() < nsteps * 16 / ppn and chunk > 32768:
        chunk //= 2
    return chunk


def _ring_bw(links: _Links, share: float = 1.0) -> tuple[float, str]:
    """A ring's bandwidth and bottleneck, with `share` of the scale-up bandwidth (the channels it runs on)."""
    up = links.up_bw * share
    if links.nodes <= 1:
        return up, f"scale-up ({links.up_tier})"
    if links.k <= 1:
        return links.net_bw, f"NICs ({links.transport})"
    if up <= links.net_bw:
        return up, f"scale-up ({links.up_tier})"
    return links.net_bw, f"NICs ({links.transport})"


@dataclass(frozen=True)
class _Pick:
    """What every candidate of one collective is priced from: the operation, its bytes, the links of its placement,
    the parameters, the protocols NCCL may run on that link, the ring bandwidth NCCL ranks by (every channel) and
    the LL protocol's bus-bandwidth ceiling for the architecture and node count."""

    op: str
    s: float
    links: _Links
    params: NetworkParams
    protocols: tuple[str, ...]
    ring_bw: float
    ll_max: float

    @classmethod
    def of(cls, op: str, s: float, links: _Links, params: NetworkParams) -> _Pick:
        protocols = ("LL", "LL128", "Simple") if links.up_tier == "nvlink" else ("LL", "Simple")
        ll_cap = params.ll_max_busbw_gbps.get(links.generation)
        nodes = links.nodes
        ll_max = ll_cap[0 if nodes <= 1 else 1 if nodes == 2 else 2] * 1e9 if ll_cap else float("inf")
        return cls(op, s, links, params, protocols, _ring_bw(links)[0], ll_max)

    def proto_bw(self, bw: float, protocol: str, algbw_per_busbw: float = 1.0) -> float:
        """`bw` as the protocol carries it: LL128 and Simple their share; LL its share up to NCCL's LL ceiling."""
        frac = self.params.protocols[protocol].bandwidth_fraction
        if protocol == "LL" and self.op != "all_reduce" and self.links.nodes <= 1:
            frac = max(frac, 1.0 / 3.0)  # NCCL: LL reaches 1/3 for single-node non-all-reduce
        if protocol == "LL":
            return min(bw * frac, self.ll_max * algbw_per_busbw)
        return bw * frac


def _ring_candidates(c: _Pick) -> list[_Cost]:
    """Ring all-reduce, all-gather and reduce-scatter, one per protocol."""
    links, params, s, n, nodes = c.links, c.params, c.s, c.links.n, c.links.nodes
    steps = 2 * (n - 1) if c.op == "all_reduce" else n - 1
    inter_steps = (2 if c.op == "all_reduce" else 1) * (nodes - 1)
    factor = busbw_factor(c.op, n)
    out = []
    for p in c.protocols:
        up_lat, net_lat = _step_latency(params, links, p)
        lat = params.protocols[p].base_latency_s + (steps - inter_steps) * up_lat + inter_steps * net_lat
        if c.op == "all_reduce" and nodes > 1 and p == "Simple":
            lat *= params.ring_plateau_factor
        # NCCL ranks with every channel, then runs on channels_used (NVLS, CollNet, p2p keep theirs)
        used_bw, neck = _ring_bw(links, _channel_share(s, p, "ring", n, params, links.channels))
        tuned = factor * s / c.proto_bw(c.ring_bw, p)
        out.append(_Cost("ring", p, lat, factor * s / c.proto_bw(used_bw, p), neck, tuned))
    return out


def _tree_candidates(c: _Pick, depth: int, tree_net: float, tree_fill: float) -> list[_Cost]:
    """Multi-node tree all-reduce, one per protocol: every tree level (up and down) adds one pipeline chunk's
    store-and-forward time on the NICs, a chunk being what all channels move in one step."""
    links, params, s, n, k, nodes = c.links, c.params, c.s, c.links.n, c.links.k, c.links.nodes
    tree_bw = params.tree_efficiency * (min(links.up_bw, tree_net) if k > 1 else tree_net)
    neck = "NICs" if k <= 1 or tree_net < links.up_bw else "scale-up"
    out = []
    for p in c.protocols:
        nc = channels_used(s, p, "tree", n, params, links.channels)
        fill = 2 * depth * min(s, nc * tree_chunk_bytes(p, s, nodes, n, nc)) / links.net_bw
        up_lat, net_lat = _step_latency(params, links, p, "tree")
        lat = params.protocols[p].base_latency_s + 2 * ((k - 1) * up_lat + depth * net_lat)
        # NCCL's tree algbw is half its busBw (tuning.cc ratio .5), so the LL ceiling halves here
        up = links.up_bw * _channel_share(s, p, "tree", n, params, links.channels)
        used_bw = params.tree_efficiency * (min(up, tree_net) if k > 1 else tree_net)
        bw = c.proto_bw(used_bw, p, 0.5) * _tree_correction(params, p, s)
        tuned = s / (c.proto_bw(tree_bw, p, 0.5) * _tree_correction(params, p, s)) + tree_fill
        out.append(_Cost("tree", p, lat, s / bw + fill, neck, tuned))
    return out


def _multi_node_all_reduce(c: _Pick) -> list[_Cost]:
    """Tree, NVLS-tree and SHARP all-reduce across nodes."""
    links, params, s, k, nodes = c.links, c.params, c.s, c.links.k, c.links.nodes
    depth = max(1, math.ceil(math.log2(nodes)))
    tree_net = links.net_bw / (2.0 if nodes > 2 else 1.0)
    tree_fill = 2 * depth * min(s, params.pipeline_bytes) / links.net_bw
    out = _tree_candidates(c, depth, tree_net, tree_fill)
    nvls = links.nvls and k >= params.nvls_min_ranks
    _, net_lat = _step_latency(params, links, "Simple")
    if nvls:
        bw = min(links.nvls_bw, tree_net)
        # NCCL: latency = hwLat[NVLINK][NVLSTree] + 2·log2(nodes)·interLat, baseLat[NVLSTree] = 0
        lat = params.nvls_latency_s + 2 * depth * net_lat
        neck = "NVLS" if links.nvls_bw <= tree_net else "NICs"
        fill = tree_fill + min(s, params.pipeline_bytes) / links.nvls_bw
        out.append(_Cost("nvls_tree", "Simple", lat, s / bw + fill, neck))
    if links.sharp:
        if nvls:
            intra, intra_lat = links.nvls_bw, params.nvls_latency_s
        else:
            intra = links.up_bw * k / (2.0 * (k - 1)) if k > 1 else float("inf")
            intra_lat = 2 * (k - 1) * _step_latency(params, links, "Simple")[0]
        net = links.net_bw * params.sharp_efficiency / params.tier(links.transport).ring_efficiency
        lat = params.protocols["Simple"].base_latency_s + intra_lat + 2 * net_lat
        neck = "NICs (in-network reduction)" if net < intra else "scale-up"
        fill = 2 * min(s, params.pipeline_bytes) / net  # up to the switch, back down
        out.append(_Cost("sharp", "Simple", lat, s / min(intra, net) + fill, neck))
    return out


def _rooted_candidates(c: _Pick) -> list[_Cost]:
    """Ring broadcast and reduce, one per protocol."""
    links, params, s, n, nodes = c.links, c.params, c.s, c.links.n, c.links.nodes
    out = []
    for p in c.protocols:
        up_lat, net_lat = _step_latency(params, links, p)
        lat = params.protocols[p].base_latency_s + (n - nodes) * up_lat + (nodes - 1) * net_lat
        used_bw, neck = _ring_bw(links, _channel_share(s, p, "ring", n, params, links.channels))
        out.append(_Cost("ring", p, lat, s / c.proto_bw(used_bw, p), neck, s / c.proto_bw(c.ring_bw, p)))
    return out


def _send_recv_candidates(c: _Pick) -> list[_Cost]:
    links, params = c.links, c.params
    out = []
    for p in c.protocols:
        up_lat, net_lat = _step_latency(params, links, p)
        if links.nodes > 1:
            bw, lat, neck = links.gpu_net_bw, net_lat, f"NIC ({links.transport})"
        else:
            # a single peer over xGMI uses one link; over NVSwitch/PCIe the GPU's full port
            bw, lat, neck = links.up_bw, up_lat, f"scale-up ({links.up_tier})"
        out.append(
            _Cost("direct", p, params.protocols[p].base_latency_s + lat, c.s / c.proto_bw(bw, p), neck)
        )
    return out


def _all_to_all_cost(c: _Pick) -> _Cost:
    """Each rank sends S/n to every peer: (k-1)/n·S stays inside the domain, (n-k)/n·S leaves it; the k ranks of
    a domain share its NICs (Thakur et al. 2005 §4.5 pairwise exchange, bandwidth term)."""
    links, params, s, n, k, nodes = c.links, c.params, c.s, c.links.n, c.links.k, c.links.nodes
    intra_t = s * (k - 1) / n / links.up_bw_a2a if k > 1 else 0.0
    inter_t = s * (n - k) / n * k / links.net_bw_a2a if nodes > 1 else 0.0
    neck = "NICs" if inter_t > intra_t else "scale-up"
    up_lat, net_lat = _step_latency(params, links, "Simple")
    lat = (
        params.protocols["Simple"].base_latency_s
        + (net_lat if nodes > 1 else up_lat)
        + (n - 1) * params.all_to_all_peer_latency_s
    )
    return _Cost("direct", "Simple", lat, max(intra_t, inter_t), neck)


def _candidates(op: str, s: float, links: _Links, params: NetworkParams) -> list[_Cost]:
    """Every algorithm and protocol NCCL could run `op` of `s` bytes with on these links."""
    c = _Pick.of(op, s, links, params)
    out: list[_Cost] = []
    if op in ("all_reduce", "all_gather", "reduce_scatter"):
        out += _ring_candidates(c)
    if op == "all_reduce" and links.nodes > 1:
        out += _multi_node_all_reduce(c)
    if op == "all_reduce" and links.nodes <= 1 and links.nvls and links.n >= params.nvls_min_ranks:
        lat = params.nvls_latency_s  # NCCL: latency = hwLat[NVLINK][NVLS], baseLat[NVLS] = 0 (tuning.cc)
        fill = min(s, params.pipeline_bytes) / links.nvls_bw  # reduce-scatter → all-gather hand-off
        out.append(_Cost("nvls", "Simple", lat, s / links.nvls_bw + fill, "NVLS"))
    if op in ("broadcast", "reduce"):
        out += _rooted_candidates(c)
    if op == "send_recv":
        out += _send_recv_candidates(c)
    if op == "all_to_all":
        out.append(_all_to_all_cost(c))
    return out


def _hierarchical(op: str, s: float, links: _Links, params: NetworkParams) -> _Cost:
    """Intra-domain reduce-scatter, inter-domain ring all-reduce of each GPU's 1/k shard, intra all-gather."""
    n, k, nodes = links.n, links.k, links.nodes
    up_lat, net_lat = _step_latency(params, links, "Simple")
    base = params.protocols["Simple"].base_latency_s
    if op != "all_reduce" or nodes <= 1 or k <= 1:
        raise ValueError("hierarchical applies to a multi-node all_reduce with several ranks per node")
    intra = 2 * (k - 1) / k * s / links.up_bw
    per_gpu_net = links.net_bw / k
    inter = 2 * (nodes - 1) / nodes * (s / k) / per_gpu_net
    lat = base + 2 * (k - 1) * up_lat + 2 * (nodes - 1) * net_lat
    neck = "NICs" if inter > intra else "scale-up"
    del n
    return _Cost("hierarchical", "Simple", lat, intra + inter, neck)


def _channels_note(best: _Cost, message_bytes: float, links: _Links, params: NetworkParams) -> str:
    """How many of the communicator's channels a ring or tree runs on ("" for NVLS, SHARP, all-to-all, p2p)."""
    if best.algorithm not in ("ring", "tree"):
        return ""
    nc = channels_used(message_bytes, best.protocol, best.algorithm, links.n, params, links.channels)
    return f"{best.algorithm}/{best.protocol} on {nc} of the communicator's {links.channels} channels"


def check_placement(op: str, message_bytes: float, placement: Placement, cluster: ClusterSpec) -> None:
    """Raise SpecError listing every problem with a collective request."""
    problems = ProblemCollector()
    problems.check(
        op in COLLECTIVE_OPS or op in EXTRA_OPS,
        "op",
        f"unknown collective {op!r}; choose one of {', '.join(COLLECTIVE_OPS + EXTRA_OPS)}",
    )
    problems.check(
        math.isfinite(message_bytes) and message_bytes >= 0,
        "message_bytes",
        "must be a finite size ≥ 0 bytes",
    )
    problems.check(placement.ranks >= 1, "placement.ranks", "must be at least 1")
    problems.check(placement.ranks_per_node >= 1, "placement.ranks_per_node", "must be at least 1")
    problems.check(
        placement.ranks_per_node <= cluster.gpus_per_node,
        "placement.ranks_per_node",
        f"{placement.ranks_per_node} ranks per node but the cluster has {cluster.gpus_per_node} GPUs per node",
    )
    problems.check(cluster.gpus_per_node >= 1, "cluster.gpus_per_node", "must be at least 1")
    problems.check(cluster.scaleup_bw > 0, "cluster.scaleup_bandwidth", "scale-up bandwidth must be > 0")
    fab = cluster.fabric
    problems.check(
        fab.nic_bandwidth_bytes_per_s > 0, "cluster.fabric.nic_bandwidth", "NIC bandwidth must be > 0"
    )
    problems.check(fab.nics_per_node >= 1, "cluster.fabric.nics_per_node", "must be at least 1")
    problems.check(
        0 < fab.congestion_derate <= 1,
        "cluster.fabric.congestion_derate",
        "must be in (0, 1] (1 = no derate)",
    )
    problems.check(
        fab.routing in ("adaptive", "ecmp"), "cluster.fabric.routing", "must be 'adaptive' or 'ecmp'"
    )
    problems.check(
        isinstance(fab.qps_per_connection, int) and 1 <= fab.qps_per_connection <= 128,
        "cluster.fabric.qps_per_connection",
        "must be a whole number of queue pairs from 1 to 128",
    )
    problems.check(
        fab.placement in ("contiguous", "scattered"),
        "cluster.fabric.placement",
        "must be 'contiguous' or 'scattered'",
    )
    problems.raise_if_any()


def _measured_estimate(
    op: str, message_bytes: float, placement: Placement, links: _Links, params: NetworkParams
) -> CollectiveEstimate | None:
    """The profile's measured α/β line for this tier, op and regime (app/core/network_measured.py), if it has one:
    the scale-up tier inside one domain, the NIC transport across domains."""
    n = placement.ranks
    tier = links.up_tier if links.nodes <= 1 else links.transport
    factor = busbw_factor(op, n)
    found = measured_time(params.alpha_beta, tier, op, n, message_bytes, factor)
    if found is None:
        return None
    algbw = message_bytes / found.time_s
    transfer = found.time_s - found.alpha_s
    ranks_note = (
        f"measured on {n} ranks"
        if found.measured_ranks == n
        else f"measured on {found.measured_ranks} ranks, α scaled to {n} ranks' ring steps"
    )
    return CollectiveEstimate(
        op=op,
        message_bytes=message_bytes,
        time_s=found.time_s,
        algbw_bytes_per_s=algbw,
        busbw_bytes_per_s=algbw * factor,
        algorithm="measured",
        protocol=found.regime.protocol,
        tier="scale_up" if links.nodes <= 1 else ("scale_out" if links.k <= 1 else "mixed"),
        breakdown={"launch": 0.0, "latency": found.alpha_s, "transfer": transfer},
        ranks=n,
        ranks_per_node=min(placement.ranks_per_node, n),
        nodes=links.nodes,
        bottleneck=tier,
        assumptions=(
            f"parameters: {params.name} v{params.version}",
            f"measured α/β on {tier} ({found.regime.protocol} regime, {found.regime.points} sizes, {ranks_note}): "
            f"α {found.alpha_s * 1e6:.1f} µs, bus bandwidth {found.regime.beta_bytes_per_s / 1e9:.1f} GB/s",
        ),
    )


def collective_time(
    op: str,
    message_bytes: float,
    placement: Placement,
    cluster: ClusterSpec,
    params: NetworkParams | None = None,
    *,
    algorithm: str | None = None,
    protocol: str | None = None,
) -> CollectiveEstimate:
    """Time of one collective of `message_bytes` (nccl-tests size convention) over `placement`.

    Picks the fastest algorithm × protocol among those the hardware offers (NVLS only where
    `cluster.has_nvls`, SHARP only where `fabric.sharp` on InfiniBand), as NCCL's tuner does, and reports
    which. `algorithm`/`protocol` force a choice (like NCCL_ALGO / NCCL_PROTO); "hierarchical" is only
    used when forced (NCCL does not implement it; it is the textbook two-level all-reduce).
    """
    op = normalise_op(op)
    check_placement(op, message_bytes, placement, cluster)
    params = params or default_network_params()
    n = placement.ranks
    if n <= 1 or message_bytes <= 0:
        return CollectiveEstimate(
            op,
            message_bytes,
            0.0,
            float("inf"),
            float("inf"),
            "none",
            "none",
            "local",
            breakdown={"launch": 0.0, "latency": 0.0, "transfer": 0.0},
            ranks=n,
            ranks_per_node=placement.ranks_per_node,
            nodes=placement.nodes,
            assumptions=("a single rank or an empty message needs no communication",),
        )
    links = _links(placement, cluster, params, op)
    if params.alpha_beta and algorithm is None and protocol is None:
        measured = _measured_estimate(op, message_bytes, placement, links, params)
        if measured is not None:
            return measured
    costs = _candidates(op, message_bytes, links, params)
    if algorithm == "hierarchical":
        costs = [_hierarchical(op, message_bytes, links, params)]
    elif algorithm is not None:
        costs = [c for c in costs if c.algorithm == algorithm]
    if protocol is not None:
        costs = [c for c in costs if c.protocol == protocol]
    if not costs:
        from app.core.errors import Problem, SpecError

        raise SpecError(
            [
                Problem(
                    "algorithm" if algorithm else "protocol",
                    f"{algorithm or ''}{'/' if algorithm and protocol else ''}{protocol or ''} is not available for "
                    f"{op} on {n} ranks × {links.nodes} node(s) of this cluster",
                )
            ]
        )
    best = min(costs, key=lambda c: c.tuned_s)  # NCCL's pick, then timed on the channels it runs
    launch = params.launch_overhead_s
    time_s = launch + best.latency_s + best.transfer_s
    algbw = message_bytes / time_s
    factor = busbw_factor(op, n)
    tier = "scale_up" if links.nodes <= 1 else ("scale_out" if links.k <= 1 else "mixed")
    assumptions = (
        f"parameters: {params.name} v{params.version}",
        f"{links.nodes} scale-up domain(s) × {links.k} rank(s); scale-up {links.up_tier} "
        f"{links.up_raw / 1e9:.0f} GB/s per GPU per direction",
        f"scale-out {links.transport}: {links.net_raw / 1e9:.0f} GB/s per domain for this group, "
        f"{links.hops} switch hop(s), congestion derate {cluster.fabric.congestion_derate:g}",
        links.topology_note,
        "NVLS available" if links.nvls else "no NVLS (needs NVSwitch with NVLink SHARP)",
        "SHARP available" if links.sharp else "no in-network reduction (SHARP)",
        _channels_note(best, message_bytes, links, params),
    )
    return CollectiveEstimate(
        op=op,
        message_bytes=message_bytes,
        time_s=time_s,
        algbw_bytes_per_s=algbw,
        busbw_bytes_per_s=algbw * factor,
        algorithm=best.algorithm,
        protocol=best.protocol,
        tier=tier,
        breakdown={"launch": launch, "latency": best.latency_s, "transfer": best.transfer_s},
        ranks=n,
        ranks_per_node=min(placement.ranks_per_node, n),
        nodes=links.nodes,
        bottleneck=best.bottleneck,
        candidates=tuple(
            CandidateTime(c.algorithm, c.protocol, launch + c.latency_s + c.transfer_s)
            for c in sorted(costs, key=lambda c: c.tuned_s)
        ),
        assumptions=tuple(a for a in assumptions if a),
    )
