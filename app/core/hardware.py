"""Hardware specifications: accelerators, interconnects and the cluster fabric built from them.

All values are SI base units: FLOP/s, bytes, bytes/s, seconds, watts.
Bandwidths are per direction (unidirectional) unless the name says otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

ComputeDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4"]
ScaleUpKind = Literal["nvswitch", "nvl72", "pcie", "xgmi", "roce_mesh", "none"]
Transport = Literal["infiniband", "roce", "ethernet_tcp", "efa"]
TopologyKind = Literal["fat_tree", "rail_optimized", "single_switch"]
Routing = Literal["adaptive", "ecmp"]
JobPlacement = Literal["contiguous", "scattered"]


# GB200/GB300 NVL72: 18 compute trays of 4 GPUs share one NVLink domain (NVIDIA GB200 NVL72 specification)
NVL72_DOMAIN_GPUS = 72


def scaleup_domain_for(scaleup_kind: str, total_gpus: int) -> int:
    """GPUs in one scale-up domain for a GPU whose catalog scale-up kind is `scaleup_kind` (0: one node)."""
    return min(NVL72_DOMAIN_GPUS, total_gpus) if scaleup_kind == "nvl72" else 0


@dataclass(frozen=True)
class GPUSpec:
    name: str
    vendor: str
    form_factor: str
    peak_flops: dict[str, float]  # dense FLOP/s per dtype ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
    hbm_bytes: int
    hbm_bandwidth_bytes_per_s: float
    scaleup_bandwidth_bytes_per_s: float  # per GPU, per direction
    tdp_w: float
    measured_matmul_flops: dict[str, float] = field(default_factory=dict)  # best achievable GEMM per dtype
    scaleup_kind: ScaleUpKind = "nvswitch"
    default_gpus_per_node: int = 8
    nvls: bool = False  # NVLink SHARP (in-switch reduction) available in the scale-up domain
    aliases: tuple[str, ...] = ()
    source: str = ""
    date: str = ""
    # streaming multiprocessors (NVIDIA) / compute units (AMD) that run GEMM output tiles in parallel; 0 = unknown
    # (no wave quantisation modelled)
    sm_count: int = 0
    # power at which the die's peak figures hold; 0 → tdp_w. A part sold with a lower limit than its die's
    # design (H100 96GB at 500 W) lists the die's design power here and its own limit in tdp_w
    design_power_w: float = 0.0
    # GPU ↔ host memory link, per GPU and direction (activation offloading): PCIe Gen5 x16 (64 GB/s) unless the
    # catalog entry says otherwise (PCIe Gen4, Gen6, NVLink-C2C)
    host_link_bytes_per_s: float = 64e9
    # the reference system's host DRAM per GPU (bytes), where activation offloading puts its copies; 0 = unknown
    # (no host-capacity check)
    host_memory_bytes: float = 0.0
    # the reference system's host DRAM bandwidth per GPU (bytes/s, theoretical), for the CPU optimizer step of
    # optimizer offloading; 0 = unknown
    host_memory_bandwidth_bytes_per_s: float = 0.0
    # whether the part has BF16 matrix units; V100 has none (its catalog bf16 figure is the FP16 tensor peak, the
    # 16-bit reference for fp16 plans), so a bf16 run on it is refused
    bf16_tensor_cores: bool = True
    # CUDA compute capability (8.0 Ampere, 9.0 Hopper, 10.x Blackwell); 0 = not an NVIDIA part or unknown. Frameworks
    # choose kernels by it (Transformer Engine's cuDNN attention on 9.0 and later: app.core.attention)
    compute_capability: float = 0.0

    @property
    def full_power_w(self) -> float:
        """Design power of the die (the power its peak and measured matmul figures hold at)."""
        return self.design_power_w or self.tdp_w

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype (fp8 falls back to bf16 where unsupported)."""
        if dtype in self.peak_flops and self.peak_flops[dtype] > 0:
            return self.peak_flops[dtype]
        if dtype == "fp8":
            return self.peak_flops["bf16"]
        raise KeyError(f"{self.name} has no peak for {dtype}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GPUSpec:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        if "aliases" in kwargs:
            kwargs["aliases"] = tuple(kwargs["aliases"])
        return cls(**kwargs)


@dataclass(frozen=True)
class InterconnectSpec:
    """A link or NIC technology from the catalog (NVLink 4, NDR InfiniBand, RoCE v2 400G …)."""

    name: str
    kind: Literal["scale_up", "scale_out"]
    technology: str  # nvlink | pcie | xgmi | infiniband | roce | ethernet_tcp | efa
    bandwidth_bytes_per_s: float  # per GPU (scale-up) or per NIC (scale-out), per direction
    latency_s: float  # one-way small-message latency (end to end, through one switch)
    generation: str = ""
    domain_size: int = 8  # max GPUs sharing the scale-up domain
    supports_nvls: bool = False
    supports_sharp: bool = False
    source: str = ""
    date: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InterconnectSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class FabricSpec:
    """Scale-out network of a cluster."""

    transport: Transport = "infiniband"
    nics_per_node: int = 8
    nic_bandwidth_bytes_per_s: float = 400e9 / 8  # NDR 400 Gb/s
    topology: TopologyKind = "rail_optimized"
    tiers: int = 2  # fat-tree tiers (leaf/spine = 2, leaf/spine/core = 3)
    oversubscription: tuple[float, ...] = (1.0,)  # per tier above the leaf, 1.0 = non-blocking
    hop_latency_s: float = 0.6e-6  # per switch hop
    base_latency_s: float = 2.0e-6  # NIC + software end-to-end
    sharp: bool = False  # in-network reduction (InfiniBand SHARP)
    congestion_derate: float = 1.0  # fraction of line rate achievable under load (1.0 = none)
    switch_radix: int = 64
    name: str = ""
    # adaptive: the switches spread packets over all uplinks (InfiniBand AR, Spectrum-X); ecmp: each flow is
    # pinned to one uplink by a static hash, so flows can collide (app.core.congestion)
    routing: Routing = "adaptive"
    qps_per_connection: int = 1  # RDMA queue pairs per NIC connection (NCCL_IB_QPS_PER_CONNECTION)
    placement: JobPlacement = "contiguous"  # a job's nodes packed leaf by leaf, or spread over the fabric


@dataclass(frozen=True)
class ClusterSpec:
    gpu: GPUSpec
    num_nodes: int
    gpus_per_node: int
    scaleup_kind: ScaleUpKind = "nvswitch"
    scaleup_bandwidth_bytes_per_s: float = 0.0  # per GPU per direction; 0 → gpu.scaleup_bandwidth
    scaleup_latency_s: float = 3.0e-6
    scaleup_domain_gpus: int = 0  # 0 → gpus_per_node (NVL72: 72 GPUs across 18 trays)
    nvls: bool | None = None  # None → gpu.nvls
    fabric: FabricSpec = field(default_factory=FabricSpec)
    name: str = ""

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def scaleup_bw(self) -> float:
        return self.scaleup_bandwidth_bytes_per_s or self.gpu.scaleup_bandwidth_bytes_per_s

    @property
    def domain_gpus(self) -> int:
        return self.scaleup_domain_gpus or self.gpus_per_node

    @property
    def has_nvls(self) -> bool:
        return self.gpu.nvls if self.nvls is None else self.nvls
