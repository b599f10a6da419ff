"""Storage: checkpoint size, checkpoint write time per storage tier, and data-loading bandwidth.

Pure functions over frozen dataclasses, SI units (bytes, seconds, bytes/s). Every default carries its
source and date in an `Assumption`; results carry a breakdown and the assumptions they used.

Tiers follow the three-tier layout of the seed article (hot: node-local NVMe; warm: parallel filesystem;
cold: object store) with bandwidths from vendor specifications.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Literal

from app.core.errors import ProblemCollector

Precision = Literal["bf16", "fp16", "fp8", "fp4", "fp32"]
OptimizerKind = Literal["adamw", "adam", "sgd_momentum", "adafactor", "none"]
CheckpointFormat = Literal["safetensors", "torch_save"]
TierKind = Literal["local_nvme", "parallel_fs", "object_store"]


@dataclass(frozen=True)
class Assumption:
    """One input the result depends on: value, unit and where the number comes from (source + date)."""

    name: str
    value: float | str
    unit: str
    source: str
    date: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "source": self.source,
            "date": self.date,
        }


# --- checkpoint contents ------------------------------------------------------------------------------

# Bytes per parameter of the saved model weights by training precision. FP8 and NVFP4 training (Transformer
# Engine) keep bf16 weights; the quantized copies are transient (NVIDIA Transformer Engine docs, "FP8 primer",
# 2023; Megatron-Bridge's bf16_with_nvfp4_mixed recipe: fp8_param_gather off, bf16 parameters).
WEIGHT_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "fp4": 2.0, "fp32": 4.0}

# Optimizer state bytes per parameter in the checkpoint (mixed precision keeps an fp32 master copy):
# Adam/AdamW: fp32 master (4) + first and second moments (4 + 4) = 12, the 12 of Megatron-LM's
# "2 + 4 + 12" accounting (Korthikanti et al. 2022 / Megatron-LM theoretical_memory_usage.py; ZeRO paper
# Rajbhandari et al. 2020 §3.1 "K = 12"). SGD with momentum: master + momentum = 8. Adafactor keeps factored
# second moments (O(rows + cols), ~0 per parameter) + master = 4 (Shazeer & Stern 2018 §3).
OPTIMIZER_BYTES_MIXED: dict[str, float] = {
    "adamw": 12.0,
    "adam": 12.0,
    "sgd_momentum": 8.0,
    "adafactor": 4.0,
    "none": 0,
}
# Pure fp32 training has no separate master copy.
OPTIMIZER_BYTES_FP32: dict[str, float] = {
    "adamw": 8.0,
    "adam": 8.0,
    "sgd_momentum": 4.0,
    "adafactor": 0.0,
    "none": 0,
}

# Serialization: both formats store raw tensor bytes. safetensors adds a JSON header (8-byte length + a few
# hundred bytes per tensor, https://huggingface.co/docs/safetensors/index "Format"); torch.save writes a zip
# archive of pickled storages (uncompressed, ~same bytes, https://pytorch.org/docs/stable/notes/serialization.html).
# The difference that matters is loading: safetensors can be memory-mapped (zero copy), torch.save is
# unpickled and copied, i.e. read once and copied once more in host memory.
FORMAT_HEADER_BYTES_PER_TENSOR: dict[str, float] = {"safetensors": 200.0, "torch_save": 400.0}
FORMAT_LOAD_COPY_FACTOR: dict[str, float] = {"safetensors": 1.0, "torch_save": 2.0}


@dataclass(frozen=True)
class CheckpointSpec:
    params: float  # total parameters (MoE: all experts)
    precision: Precision = "bf16"
    optimizer: OptimizerKind = "adamw"
    include_optimizer: bool = True
    format: CheckpointFormat = "safetensors"
    tensors: int = 0  # number of tensors (0 → ~10 per layer-equivalent estimate: params / 1e8, at least 1)


@dataclass(frozen=True)
class CheckpointSize:
    total_bytes: float
    breakdown: dict[str, float]  # weights / optimizer / format_overhead, sums to total_bytes
    bytes_per_param: float
    assumptions: list[Assumption]


def checkpoint_size(spec: CheckpointSpec) -> CheckpointSize:
    """Bytes written for one full checkpoint of the training state."""
    pc = ProblemCollector()
    pc.check(spec.params > 0, "params", "must be positive")
    pc.check(spec.precision in WEIGHT_BYTES, "precision", f"one of {sorted(WEIGHT_BYTES)}")
    pc.check(spec.optimizer in OPTIMIZER_BYTES_MIXED, "optimizer", f"one of {sorted(OPTIMIZER_BYTES_MIXED)}")
    pc.check(spec.format in FORMAT_LOAD_COPY_FACTOR, "format", f"one of {sorted(FORMAT_LOAD_COPY_FACTOR)}")
    pc.raise_if_any()
    w = WEIGHT_BYTES[spec.precision]
    table = OPTIMIZER_BYTES_FP32 if spec.precision == "fp32" else OPTIMIZER_BYTES_MIXED
    o = table[spec.optimizer] if spec.include_optimizer else 0.0
    tensors = spec.tensors or max(1, int(spec.params / 1e8))
    header = FORMAT_HEADER_BYTES_PER_TENSOR[spec.format] * tensors
    weights = w * spec.params
    optim = o * spec.params
    return CheckpointSize(
        total_bytes=weights + optim + header,
        breakdown={"weights": weights, "optimizer": optim, "format_overhead": header},
        bytes_per_param=w + o,
        assumptions=[
            Assumption(
                "weight_bytes_per_param",
                w,
                "B",
                "bf16/fp16 = 2, fp32 = 4; fp8 and NVFP4 training keep bf16 weights",
                "2023",
            ),
            Assumption(
                "optimizer_bytes_per_param",
                o,
                "B",
                "Adam mixed precision: fp32 master + 2 moments = 12 (ZeRO, Rajbhandari et al. 2020 §3.1)",
                "2020",
            ),
            Assumption(
                "format_header_bytes_per_tensor",
                FORMAT_HEADER_BYTES_PER_TENSOR[spec.format],
                "B",
                "safetensors format spec / torch serialization notes",
                "2024",
            ),
        ],
    )


# --- storage tiers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StorageTier:
    """A storage tier. Local NVMe is per node (scales with node count); shared tiers have an aggregate cap."""

    name: str
    kind: TierKind
    write_bytes_per_s_per_node: float  # what one node can push (drive or storage-NIC limit)
    read_bytes_per_s_per_node: float
    aggregate_write_bytes_per_s: float = math.inf  # whole-system cap for shared tiers
    aggregate_read_bytes_per_s: float = math.inf
    request_latency_s: float = 0.0  # first-byte latency per request
    source: str = ""
    date: str = ""
    # a shared tier bought with the cluster grows with it: its cap is the larger of the fixed aggregate and
    # this much per compute node (0: a fixed cap whatever the cluster size)
    aggregate_bytes_per_s_per_compute_node: float = 0.0

    def aggregate_cap(self, nodes: int, fixed: float) -> float:
        return max(fixed, self.aggregate_bytes_per_s_per_compute_node * nodes)

    def write_bw(self, writer_nodes: int) -> float:
        cap = self.aggregate_cap(writer_nodes, self.aggregate_write_bytes_per_s)
        return min(self.write_bytes_per_s_per_node * writer_nodes, cap)

    def read_bw(self, reader_nodes: int) -> float:
        cap = self.aggregate_cap(reader_nodes, self.aggregate_read_bytes_per_s)
        return min(self.read_bytes_per_s_per_node * reader_nodes, cap)

    def with_storage_nodes(self, count: int, bytes_per_s_each: float) -> StorageTier:
        """The tier served by `count` storage nodes (servers or appliances) of a given bandwidth each: the
        whole-system bandwidth is their sum, fixed whatever the compute-node count."""
        total = count * bytes_per_s_each
        return replace(
            self,
            aggregate_write_bytes_per_s=total,
            aggregate_read_bytes_per_s=total,
            aggregate_bytes_per_s_per_compute_node=0.0,
            source=f"user input: {count} storage nodes x {bytes_per_s_each / 1e9:g} GB/s = "
            f"{total / 1e9:g} GB/s aggregate",
            date="",
        )

    def with_aggregate(self, bytes_per_s: float) -> StorageTier:
        """The tier with a given whole-system bandwidth (a user's measured or quoted figure), fixed."""
        return replace(
            self,
            aggregate_write_bytes_per_s=bytes_per_s,
            aggregate_read_bytes_per_s=bytes_per_s,
            aggregate_bytes_per_s_per_compute_node=0.0,
            source=f"user input: {bytes_per_s / 1e9:g} GB/s aggregate",
            date="",
        )


DEFAULT_TIERS: dict[str, StorageTier] = {
    "local_nvme": StorageTier(
        name="local_nvme",
        kind="local_nvme",
        write_bytes_per_s_per_node=6.0e9,
        read_bytes_per_s_per_node=13.0e9,
        request_latency_s=100e-6,
        source="Samsung PM1743 PCIe 5.0 NVMe datasheet: sequential write 6,000 MB/s, read 13,000 MB/s "
        "(semiconductor.samsung.com/ssd/enterprise-ssd/pm1743); one drive per node as the hot tier",
        date="2022",
    ),
    "parallel_fs": StorageTier(
        name="parallel_fs",
        kind="parallel_fs",
        write_bytes_per_s_per_node=25.0e9,  # 2 x 100 Gb/s storage NICs
        read_bytes_per_s_per_node=25.0e9,
        aggregate_write_bytes_per_s=100.0e9,
        aggregate_read_bytes_per_s=100.0e9,
        # Llama 3 (arXiv 2407.21783 §3.3.1): Tectonic for 16,384 H100 (2,048 nodes) peaks at 7 TB/s
        aggregate_bytes_per_s_per_compute_node=7.0e12 / 2048,
        request_latency_s=1e-3,
        source="aggregate: the larger of 100 GB/s (seed article (builders-guide): warm tier 'needs 100+ GB/s "
        "throughput') and 3.4 GB/s per compute node (Llama 3, arXiv 2407.21783 §3.3.1: Tectonic peaks at "
        "7 TB/s for 2,048 nodes); per node 2 x 100 Gb/s storage NICs (NVIDIA DGX H100 user guide: "
        "2 x ConnectX-7 for storage)",
        date="2026-03",
    ),
    "object_store": StorageTier(
        name="object_store",
        kind="object_store",
        write_bytes_per_s_per_node=100e9 / 8 * 0.5,
        read_bytes_per_s_per_node=100e9 / 8 * 0.5,
        request_latency_s=0.1,
        source="AWS S3 performance guidelines: up to 100 Gb/s per instance with parallel requests, 100-200 ms "
        "first-byte latency (docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html); "
        "50 % of line rate assumed",
        date="2024",
    ),
}


@dataclass(frozen=True)
class CheckpointWrite:
    tier: str
    size_bytes: float
    writer_nodes: int
    bandwidth_bytes_per_s: float
    write_s: float
    p99_write_s: float  # slowest writer at the 99th percentile (jitter + one slow disk)
    read_s: float  # time to load it back on restart
    breakdown: dict[str, float]  # transfer / latency / slow_disk_penalty, sums to p99_write_s


def checkpoint_write(
    size_bytes: float,
    tier: StorageTier,
    num_nodes: int,
    *,
    format: CheckpointFormat = "safetensors",
    jitter_sigma: float = 0.1,
    slow_disk_fraction: float = 1.0,
    requests_per_node: int = 1,
) -> CheckpointWrite:
    """Time for all nodes to write their shard of a checkpoint to a tier (sharded, parallel writers).

    The step that waits for the checkpoint waits for the *slowest* writer. Each writer's time is lognormal
    around the nominal time (sigma `jitter_sigma`); the 99th percentile of the maximum of N such times is
    t·exp(sigma·z) with z = Φ⁻¹(0.99^(1/N)) (order statistics of i.i.d. variables). A single slow disk running at
    `slow_disk_fraction` of nominal bandwidth bounds it from below (the seed article: "watch the p99 …
    a single slow disk can stall the entire training run").
    """
    pc = ProblemCollector()
    pc.check(size_bytes >= 0, "size_bytes", "must be >= 0")
    pc.check(num_nodes >= 1, "num_nodes", "must be >= 1")
    pc.check(0 < slow_disk_fraction <= 1, "slow_disk_fraction", "must be in (0, 1]")
    pc.check(jitter_sigma >= 0, "jitter_sigma", "must be >= 0")
    pc.raise_if_any()
    bw = tier.write_bw(num_nodes)
    transfer = size_bytes / bw
    latency = tier.request_latency_s * requests_per_node
    nominal = transfer + latency
    z = NormalDist().inv_cdf(0.99 ** (1.0 / num_nodes)) if num_nodes > 0 else 0.0
    jitter_p99 = transfer * math.exp(jitter_sigma * z) + latency
    # one slow writer: its shard goes at a fraction of its per-node share of bandwidth
    slow = transfer / slow_disk_fraction + latency
    p99 = max(jitter_p99, slow)
    read_bw = tier.read_bw(num_nodes)
    read_s = size_bytes / read_bw * FORMAT_LOAD_COPY_FACTOR[format] + latency
    return CheckpointWrite(
        tier=tier.name,
        size_bytes=size_bytes,
        writer_nodes=num_nodes,
        bandwidth_bytes_per_s=bw,
        write_s=nominal,
        p99_write_s=p99,
        read_s=read_s,
        breakdown={"transfer": transfer, "latency": latency, "slowest_writer_penalty": p99 - nominal},
    )


@dataclass(frozen=True)
class CheckpointStall:
    """How long training pauses per checkpoint, synchronous vs asynchronous."""

    sync_stall_s: float
    async_stall_s: float
    async_background_s: float  # time the background write takes (must finish before the next checkpoint)
    breakdown_sync: dict[str, float]
    breakdown_async: dict[str, float]


# Device-to-host copy for an async snapshot: PCIe Gen5 x16 = 64 GB/s per direction theoretical; ~50 GB/s
# measured with pinned memory (NVIDIA H100 PCIe Gen5 host link, nvbandwidth reports); 25 GB/s assumed
# effective because the snapshot is many mid-size tensors into pageable-then-pinned buffers.
D2H_BYTES_PER_S_PER_GPU = 25e9
D2H_SOURCE = "PCIe Gen5 x16: 64 GB/s/direction theoretical (PCI-SIG); 25 GB/s effective assumed for snapshots"


def checkpoint_stall(
    size_bytes: float,
    tier: StorageTier,
    num_nodes: int,
    gpus_per_node: int,
    *,
    d2h_bytes_per_s_per_gpu: float = D2H_BYTES_PER_S_PER_GPU,
    use_p99: bool = True,
    slow_disk_fraction: float = 1.0,
    jitter_sigma: float = 0.1,
) -> CheckpointStall:
    """Synchronous: training waits for the whole write. Asynchronous (PyTorch DCP async_save, Megatron async
    checkpointing): training waits only for the device-to-host snapshot, the write runs in the background."""
    write = checkpoint_write(
        size_bytes, tier, num_nodes, jitter_sigma=jitter_sigma, slow_disk_fraction=slow_disk_fraction
    )
    sync = write.p99_write_s if use_p99 else write.write_s
    per_gpu = size_bytes / max(1, num_nodes * gpus_per_node)
    snapshot = per_gpu / d2h_bytes_per_s_per_gpu
    return CheckpointStall(
        sync_stall_s=sync,
        async_stall_s=snapshot,
        async_background_s=sync,
        breakdown_sync={"write": sync},
        breakdown_async={"device_to_host_snapshot": snapshot},
    )


# --- data loading ------------------------------------------------------------------------------------


def token_bytes(vocab_size: int) -> int:
    """Bytes per token of pre-tokenised memory-mapped data: uint16 when ids fit (vocab ≤ 65,536), else uint32
    (Megatron-LM indexed dataset picks the smallest dtype that holds the vocabulary, megatron/core/datasets/
    indexed_dataset.py DType.optimal_dtype)."""
    return 2 if vocab_size <= 65536 else 4


@dataclass(frozen=True)
class TierLoad:
    tier: str
    available_bytes_per_s: float
    load_s_per_step: float
    fraction_of_step: float
    warn: bool


@dataclass(frozen=True)
class DataLoading:
    tokens_per_s: float
    bytes_per_token: int
    required_bytes_per_s: float
    bytes_per_step: float
    step_s: float
    tiers: list[TierLoad]
    warnings: list[str]
    assumptions: list[Assumption] = field(default_factory=list)


# Seed article, "Monitoring": data loading time per step should be under 10 % of step time.
LOADING_WARN_FRACTION = 0.10


def data_loading(
    tokens_per_step: float,
    step_s: float,
    vocab_size: int,
    num_nodes: int,
    tiers: dict[str, StorageTier] | None = None,
    *,
    bytes_per_token: int | None = None,
    warn_fraction: float = LOADING_WARN_FRACTION,
) -> DataLoading:
    """Bandwidth the data loader needs (tokens/s × bytes/token) against each tier, and the share of step time
    that reading one step's tokens takes if it is not overlapped with compute (worst case)."""
    pc = ProblemCollector()
    pc.check(tokens_per_step > 0, "tokens_per_step", "must be positive")
    pc.check(step_s > 0, "step_s", "must be positive")
    pc.check(vocab_size > 0, "vocab_size", "must be positive")
    pc.check(num_nodes >= 1, "num_nodes", "must be >= 1")
    pc.check(0 < warn_fraction < 1, "warn_fraction", "must be in (0, 1)")
    pc.raise_if_any()
    bpt = bytes_per_token or token_bytes(vocab_size)
    per_step = tokens_per_step * bpt
    tps = tokens_per_step / step_s
    rows: list[TierLoad] = []
    warnings: list[str] = []
    for name, tier in (tiers or DEFAULT_TIERS).items():
        bw = tier.read_bw(num_nodes)
        # each node issues at least one request per step
        load = per_step / bw + tier.request_latency_s
        frac = load / step_s
        warn = frac > warn_fraction
        rows.append(TierLoad(name, bw, load, frac, warn))
        if warn:
            warnings.append(
                f"{name}: loading one step takes {frac:.0%} of step time (> {warn_fraction:.0%}); "
                "prefetch, pre-tokenise or stage data on a faster tier"
            )
    return DataLoading(
        tokens_per_s=tps,
        bytes_per_token=bpt,
        required_bytes_per_s=tps * bpt,
        bytes_per_step=per_step,
        step_s=step_s,
        tiers=rows,
        warnings=warnings,
        assumptions=[
            Assumption(
                "bytes_per_token", bpt, "B", "uint16 if vocab <= 65,536 else uint32 (Megatron-LM)", "2024"
            ),
            Assumption(
                "warn_fraction",
                warn_fraction,
                "",
                "seed article: data loading < 10 % of step time",
                "2026-03",
            ),
        ],
    )
