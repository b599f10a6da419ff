"""Validate the collective model against published nccl-tests style measurements.

Input: a CSV with the columns of the project's collectives validation file (source, system, gpu, gpus_per_node,
nodes, fabric, collective, message_size_bytes, algbw_GBps, busbw_GBps, latency_us, notes). Every row is turned
into a ClusterSpec from its *specifications only* (GPU catalog entry, link generation and NIC count/speed read
from the fabric text) — nothing is fitted to a row or a system. The model's busbw is compared with the measured
one; rows that lack what a prediction needs are listed as skipped with the reason.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.core.accuracy import COLLECTIVE_LARGE_BYTES
from app.core.hardware import ClusterSpec, FabricSpec, GPUSpec
from app.core.network import (
    COLLECTIVE_OPS,
    EXTRA_OPS,
    NetworkParams,
    Placement,
    busbw_factor,
    collective_time,
    default_network_params,
    normalise_op,
)
from app.core.units import GB, GBIT, GiB

LARGE_BYTES = COLLECTIVE_LARGE_BYTES  # the small / large split of the summaries and of the accuracy bands
# Rows that state "large message" without a size are evaluated on the bandwidth plateau.
ASSUMED_LARGE_BYTES = 16 * GiB

# Scale-up link bandwidth per GPU per direction by generation, used when the fabric text names the link but
# the GPU is not in the catalog. NVLink 2/3/4/5: 6×25, 12×25, 18×25, 18×50 GB/s (NVIDIA V100/A100/H100/B200
# datasheets); PCIe x16 per direction: Gen3 16, Gen4 32, Gen5 64, Gen6 128 GB/s (PCI-SIG base specifications).
LINK_BANDWIDTH_GBPS = {
    "nvlink2": 150.0,
    "nvlink3": 300.0,
    "nvlink4": 450.0,
    "nvlink5": 900.0,
    "pcie3": 16.0,
    "pcie4": 32.0,
    "pcie5": 64.0,
    "pcie6": 128.0,
}
# InfiniBand generations per port: EDR 100, HDR 200, NDR 400, XDR 800 Gb/s (IBTA roadmap).
IB_GENERATION_GBPS = {"edr": 100.0, "hdr": 200.0, "ndr": 400.0, "xdr": 800.0}

# GPUs missing from the catalog but present in published measurements: (scale-up GB/s per direction, NVLS).
# H800: NVLink4 with 8 links = 200 GB/s (nccl #1374 row text); H20: NVLink4 900 GB/s bidirectional (NVIDIA
# H20 spec); V100 SXM2: NVLink2 6 links × 25 GB/s (V100 datasheet).
FALLBACK_GPUS = {
    "h800": (200.0, True),
    "h20": (450.0, True),
    "v100": (150.0, False),
}

ALGORITHM_WORDS = {
    "ring": "ring",
    "tree": "tree",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "collnet": "sharp",
    "collnetdirect": "sharp",
    "sharp": "sharp",
}


@dataclass(frozen=True)
class RowCase:
    """What a CSV row describes, in core types."""

    index: int  # 1-based data row number (header excluded)
    source: str
    system: str
    op: str
    message_bytes: float
    size_assumed: bool
    measured_busbw_gbps: float
    measured_latency_us: float | None
    cluster: ClusterSpec
    placement: Placement
    algorithm: str | None
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class RowResult:
    case: RowCase
    predicted_busbw_gbps: float
    predicted_latency_us: float
    algorithm: str
    protocol: str
    error_pct: float
    domains: int = 1  # scale-up domains the estimate spans (CollectiveEstimate.nodes)

    @property
    def time_ratio(self) -> float:
        """Measured ÷ estimated time (= estimated ÷ measured bus bandwidth)."""
        return 1.0 + self.error_pct / 100.0


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _gpu_spec(name: str) -> tuple[GPUSpec | None, str]:
    """Catalog GPU for a row's gpu column (None for 'unspecified')."""
    key = name.strip()
    if not key or key.lower() in ("unspecified", "unknown", "-"):
        return None, "GPU unspecified"
    from app.catalog import find_gpu
    from app.errors import NotFoundError

    try:
        return find_gpu(key), ""
    except NotFoundError as exc:
        # "H100 SXM5 80GB" → the closest catalog name of the same family ("H100-SXM")
        prefix = re.match(r"[a-z]+\d+", re.sub(r"[^a-z0-9]", "", key.lower()))
        for suggestion in exc.suggestions:
            if prefix and re.sub(r"[^a-z0-9]", "", suggestion.lower()).startswith(prefix.group(0)):
                return find_gpu(suggestion), f"{key}: taken as catalog GPU {suggestion}"
    base = re.sub(r"[^a-z0-9]", "", key.lower())
    for family, (gbps, nvls) in FALLBACK_GPUS.items():
        if base.startswith(family):
            spec = GPUSpec(
                name=key,
                vendor="NVIDIA",
                form_factor="SXM",
                peak_flops={"bf16": 0.0},
                hbm_bytes=0,
                hbm_bandwidth_bytes_per_s=0.0,
                scaleup_bandwidth_bytes_per_s=gbps * GB,
                tdp_w=0.0,
                nvls=nvls,
            )
            return spec, f"{key}: scale-up {gbps:g} GB/s from the fallback table"
    return None, f"GPU {key!r} not in the catalog"


def _scaleup_from_text(text: str) -> tuple[str | None, float | None]:
    """(kind, GB/s per direction) named by a fabric description, if any."""
    low = text.lower().replace(" ", "")
    explicit = re.search(r"(\d+(?:\.\d+)?)gb/suni", low)
    if "infinityfabric" in low or "xgmi" in low:
        return "xgmi", None
    if "pcie" in low and "nvlink" not in low:
        gen = re.search(r"pcie(?:gen)?(\d)", low)
        gbps = LINK_BANDWIDTH_GBPS.get(f"pcie{gen.group(1)}") if gen else None
        return "pcie", gbps
    gen_nv = re.search(r"nvlink(\d)", low)
    if explicit and "nvlink" in low:
        return ("nvl72" if "nvl72" in low else "nvswitch"), float(explicit.group(1))
    if gen_nv:
        return ("nvl72" if "nvl72" in low else "nvswitch"), LINK_BANDWIDTH_GBPS.get(
            f"nvlink{gen_nv.group(1)}"
        )
    return None, None


def _fabric_from_text(text: str, system: str, gpus_per_node: int) -> tuple[FabricSpec, list[str]]:
    """NIC transport, count and speed from the fabric text (one NIC per GPU when the count is not stated)."""
    notes: list[str] = []
    low = text.lower()
    if "efa" in low:
        transport = "efa"
    elif re.search(r"\bib\b|infiniband|rdma|\bndr\b|\bhdr\b|\bxdr\b|\bedr\b", low):
        transport = "infiniband"
    elif "roce" in low:
        transport = "roce"
    elif "tcp" in low or "gbe" in low or "ethernet" in low:
        transport = "ethernet_tcp"
    else:
        transport = "infiniband"
        notes.append("transport not stated: InfiniBand assumed")
    count: float | None = None
    speed: float | None = None
    m = re.search(r"(\d+)\s*x\s*(\d+(?:\.\d+)?)\s*g", low)
    if m:
        count, speed = float(m.group(1)), float(m.group(2))
    else:
        single = re.search(r"(\d+(?:\.\d+)?)\s*g(?:b|bps|be)?\b", low)
        if single:
            speed = float(single.group(1))
        nics = re.search(r"(\d+)\s*(?:nics?|hcas?|adapters?)\b", low) or re.search(
            r"(\d+)\s*(?:nics?|hcas?)\b", system.lower()
        )
        if nics:
            count = float(nics.group(1))
        elif "single" in low or "1 nic" in low:
            count = 1.0
    if speed is None:
        for gen, gbps in IB_GENERATION_GBPS.items():
            if re.search(rf"\b{gen}\b", low):
                speed = gbps
                break
    if speed is None:
        speed = 400.0
        notes.append("NIC speed not stated: 400 Gb/s assumed")
    if count is None:
        count = float(max(1, gpus_per_node))
        notes.append(f"NIC count not stated: one per GPU ({int(count)}) assumed")
    sharp = transport == "infiniband" and bool(re.search(r"ib\s*sharp|infiniband\s*sharp", low))
    presets = {"infiniband": (0.13, 1.5), "roce": (0.6, 2.5), "efa": (1.0, 10.0), "ethernet_tcp": (1.0, 15.0)}
    hop_us, base_us = presets[transport]
    fabric = FabricSpec(
        transport=transport,  # type: ignore[arg-type]
        nics_per_node=max(1, round(count)),
        nic_bandwidth_bytes_per_s=speed * GBIT,
        topology="rail_optimized",
        tiers=2,
        hop_latency_s=hop_us * 1e-6,
        base_latency_s=base_us * 1e-6,
        sharp=sharp,
        name=text.strip(),
    )
    return fabric, notes


def _forced_algorithm(row: dict[str, str]) -> str | None:
    """The algorithm a measurement was taken with, when the row says so (NCCL_ALGO=…, algo=…, '(ring)')."""
    explicit = (row.get("algorithm") or "").strip().lower().replace("_", "")
    if explicit:
        return ALGORITHM_WORDS.get(explicit)
    text = " ".join((row.get("system", ""), row.get("fabric", ""), row.get("notes", "")))
    m = re.search(r"(?:nccl_algo|algo)\s*=\s*([a-z_]+)", text, re.IGNORECASE)
    if m:
        return ALGORITHM_WORDS.get(m.group(1).lower().replace("_", ""))
    m = re.search(r"\b(ring|tree|nvlstree)\s+selected", text, re.IGNORECASE)
    if m:
        return ALGORITHM_WORDS.get(m.group(1).lower())
    m = re.search(r"\((ring|nvls|nvlstree)\)", text, re.IGNORECASE)
    if m:
        return ALGORITHM_WORDS.get(m.group(1).lower())
    return None


PRINT_RESOLUTION_GBPS = 0.01  # nccl-tests and all_reduce_bench.py print algbw/busbw in GB/s with two decimals


def _row_nodes(row: dict[str, str], assumptions: list[str]) -> float:
    """The node count: stated, read from the system's name ("4 nodes", "x4"), 4 for a multi-node row that does
    not say how many, else 1."""
    nodes = _num(row.get("nodes"))
    if nodes is not None:
        return nodes
    system = (row.get("system", "") or "").lower()
    m = re.search(r"(\d+)\s*nodes", system) or re.search(r"\bx\s*(\d+)\b", system)
    if m:
        return float(m.group(1))
    if "multi-node" in system or re.search(r"\d+\s*x?\s*\d+\s*gb", (row.get("fabric", "") or "").lower()):
        assumptions.append("node count not stated: 4 nodes assumed")
        return 4.0
    return 1.0


def _row_gpus_per_node(
    row: dict[str, str], gpu: GPUSpec | None, nodes: float, assumptions: list[str]
) -> float:
    """GPUs per node: stated, the GPU's usual server on one node, else one per NIC the fabric names (8 in one
    node)."""
    gpn = _num(row.get("gpus_per_node"))
    if gpn is not None:
        return gpn
    if gpu is not None and nodes <= 1:
        gpn = float(gpu.default_gpus_per_node)
    else:
        fab_probe, _ = _fabric_from_text(row.get("fabric", "") or "", row.get("system", "") or "", 1)
        gpn = float(fab_probe.nics_per_node) if nodes > 1 else 8.0
    assumptions.append(f"GPUs per node not stated: {int(gpn)} assumed")
    return gpn


def _row_busbw(row: dict[str, str], op: str, ranks: int) -> float | str:
    """The measured bus bandwidth (from algbw when only that is given), or why the row cannot judge the model."""
    busbw = _num(row.get("busbw_GBps"))
    algbw = _num(row.get("algbw_GBps"))
    if busbw is None and algbw is not None:
        busbw = algbw * busbw_factor(op, ranks)
    if busbw is None or busbw <= 0:
        return "no measured bandwidth (busbw or algbw) in the row"
    if busbw < PRINT_RESOLUTION_GBPS * 10 and _num(row.get("latency_us")) is None:
        # nccl-tests and the all_reduce_bench scripts print GB/s with two decimals: 0.01 may be anything from
        # 0.005 to 0.015, so without the measured time the row cannot judge the model to better than ±50 %
        return f"busbw {busbw:g} GB/s is within 10× of the 0.01 GB/s print resolution and no time is given"
    return busbw


def _unlisted_gpu(
    row: dict[str, str], scaleup: tuple[str | None, float | None], n_nodes: int, assumptions: list[str]
) -> tuple[GPUSpec, tuple[str | None, float | None]] | str:
    """A GPU the catalog lacks, built from the scale-up link the row names (NVLink4-class off-node when it names
    none), with that link; or why the row cannot be predicted."""
    up_kind, up_gbps = scaleup
    if up_gbps is None and up_kind is None:
        if n_nodes <= 1:
            return "neither the GPU nor the scale-up link is identified"
        up_kind, up_gbps = "nvswitch", 450.0
        assumptions.append("scale-up unknown: NVLink4-class assumed (not the bottleneck off-node)")
    gpu = GPUSpec(
        name=row.get("gpu", "") or "unspecified",
        vendor="",
        form_factor="",
        peak_flops={"bf16": 0.0},
        hbm_bytes=0,
        hbm_bandwidth_bytes_per_s=0.0,
        scaleup_bandwidth_bytes_per_s=(up_gbps or 32.0) * GB,
        tdp_w=0.0,
        scaleup_kind=up_kind or "nvswitch",  # type: ignore[arg-type]
        nvls=False,
    )
    return gpu, (up_kind, up_gbps)


def _row_cluster(
    row: dict[str, str],
    gpu: GPUSpec,
    scaleup: tuple[str | None, float | None],
    k: int,
    n_nodes: int,
    assumptions: list[str],
) -> ClusterSpec:
    """The cluster the row ran on: its scale-up link (an NVL72 domain of at least 72 GPUs) and its fabric. A row
    may use a subset of a node's GPUs: when its NIC count is stated per node, the node keeps its usual GPU count
    and the group gets its share of the NICs; otherwise the stated NICs are the ones the group used."""
    up_kind, up_gbps = scaleup
    fabric_text, system = row.get("fabric", "") or "", row.get("system", "") or ""
    kind = up_kind or gpu.scaleup_kind
    scaleup_bw = gpu.scaleup_bandwidth_bytes_per_s
    if up_gbps is not None and kind != "xgmi":
        scaleup_bw = up_gbps * GB
    domain = 0
    if kind == "nvl72" or gpu.scaleup_kind == "nvl72":
        kind = "nvl72"
        domain = max(k, 72)
    per_node_nics = bool(re.search(r"per\s*node|/\s*node", fabric_text.lower()))
    node_gpus = k
    if (
        per_node_nics
        and n_nodes > 1
        and kind != "nvl72"
        and row.get("gpu", "").strip().lower() != "unspecified"
    ):
        node_gpus = max(k, gpu.default_gpus_per_node)
    fabric, fabric_notes = _fabric_from_text(fabric_text, system, node_gpus)
    if n_nodes > 1:
        assumptions.extend(fabric_notes)
    return ClusterSpec(
        gpu=gpu,
        num_nodes=n_nodes,
        gpus_per_node=node_gpus,
        scaleup_kind=kind,  # type: ignore[arg-type]
        scaleup_bandwidth_bytes_per_s=scaleup_bw,
        scaleup_domain_gpus=domain,
        fabric=fabric,
        name=system,
    )


def parse_row(index: int, row: dict[str, str]) -> RowCase | str:
    """A RowCase, or the reason the row cannot be predicted."""
    op = normalise_op(row.get("collective", "") or "")
    if op not in COLLECTIVE_OPS and op not in EXTRA_OPS:
        return f"unknown collective {row.get('collective')!r}"
    assumptions: list[str] = []
    nodes = _row_nodes(row, assumptions)
    gpu, gpu_note = _gpu_spec(row.get("gpu", "") or "")
    if gpu_note:
        assumptions.append(gpu_note)
    scaleup = _scaleup_from_text(row.get("fabric", "") or "")
    k = int(_row_gpus_per_node(row, gpu, nodes, assumptions))
    n_nodes = max(1, int(nodes))
    busbw = _row_busbw(row, op, k * n_nodes)
    if isinstance(busbw, str):
        return busbw
    size = _num(row.get("message_size_bytes"))
    size_assumed = size is None or size <= 0
    if size is None or size <= 0:
        size = float(ASSUMED_LARGE_BYTES)
        assumptions.append("message size not stated (large message): evaluated at 16 GiB")
    if gpu is None:
        built = _unlisted_gpu(row, scaleup, n_nodes, assumptions)
        if isinstance(built, str):
            return built
        gpu, scaleup = built
    cluster = _row_cluster(row, gpu, scaleup, k, n_nodes, assumptions)
    ranks = 2 if op == "send_recv" and k * n_nodes < 2 else k * n_nodes
    return RowCase(
        index=index,
        source=row.get("source", "") or "",
        system=row.get("system", "") or "",
        op=op,
        message_bytes=size,
        size_assumed=size_assumed,
        measured_busbw_gbps=busbw,
        measured_latency_us=_num(row.get("latency_us")),
        cluster=cluster,
        placement=Placement(ranks=ranks, ranks_per_node=k),
        algorithm=_forced_algorithm(row),
        assumptions=tuple(assumptions),
    )


def predict(case: RowCase, params: NetworkParams | None = None) -> RowResult:
    params = params or default_network_params()
    algorithm = case.algorithm
    if algorithm in ("nvls", "nvls_tree"):
        algorithm = "nvls" if case.placement.nodes <= 1 else "nvls_tree"
        params = replace(params, nvls_min_ranks=2)  # forcing NVLS (NCCL_ALGO) bypasses NCCL's own threshold
    try:
        est = collective_time(
            case.op, case.message_bytes, case.placement, case.cluster, params, algorithm=algorithm
        )
    except ValueError:
        est = collective_time(case.op, case.message_bytes, case.placement, case.cluster, params)
    predicted = est.busbw_bytes_per_s / GB
    error = (predicted - case.measured_busbw_gbps) / case.measured_busbw_gbps * 100.0
    return RowResult(case, predicted, est.time_s * 1e6, est.algorithm, est.protocol, error, est.nodes)


def _percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _summary(results: list[RowResult]) -> dict[str, Any]:
    errors = [abs(r.error_pct) for r in results]
    return {
        "n": len(errors),
        "median_abs_pct": round(statistics.median(errors), 2) if errors else None,
        "p90_abs_pct": round(_percentile(errors, 0.9), 2) if errors else None,
    }


def preset_family(fabric: FabricSpec) -> str:
    """ "<transport> <NICs>×<Gb/s>: preset, …" for the catalog fabric presets with this row's NICs, else "no preset".
    Presets of one NIC set differ in routing, topology and tuning, which a row's fabric text rarely states, so
    they share a group."""
    from app.catalog.fabrics import presets

    gbps = fabric.nic_bandwidth_bytes_per_s / GBIT
    names = sorted(
        p.name
        for p in presets().values()
        if p.spec.transport == fabric.transport
        and p.spec.nics_per_node == fabric.nics_per_node
        and math.isclose(p.spec.nic_bandwidth_bytes_per_s / GBIT, gbps, rel_tol=0.01)
    )
    if not names:
        return "no preset"
    return f"{fabric.transport} {fabric.nics_per_node}×{gbps:g}G: {', '.join(names)}"


def _split_by_size(rows: list[RowResult]) -> dict[str, list[RowResult]]:
    split = {
        "large": [r for r in rows if r.case.message_bytes >= LARGE_BYTES],
        "small": [r for r in rows if r.case.message_bytes < LARGE_BYTES],
    }
    return {k: v for k, v in split.items() if v}


@dataclass(frozen=True)
class ValidationReport:
    results: tuple[RowResult, ...]
    skipped: tuple[tuple[int, str], ...]

    def large(self) -> list[RowResult]:
        return [r for r in self.results if r.case.message_bytes >= LARGE_BYTES]

    def small(self) -> list[RowResult]:
        return [r for r in self.results if r.case.message_bytes < LARGE_BYTES]

    def by_fabric(self) -> dict[str, list[RowResult]]:
        """Rows grouped by the link class they cross: scale-up only, or the scale-out transport."""
        groups: dict[str, list[RowResult]] = {}
        for r in self.results:
            key = "scale-up only" if r.case.placement.nodes <= 1 else r.case.cluster.fabric.transport
            groups.setdefault(key, []).append(r)
        return dict(sorted(groups.items()))

    def by_fabric_size(self) -> dict[str, dict[str, list[RowResult]]]:
        """Each fabric group split into messages ≥ 64 MiB and smaller, so that neither class hides the other."""
        return {
            name: {
                "large": [r for r in rows if r.case.message_bytes >= LARGE_BYTES],
                "small": [r for r in rows if r.case.message_bytes < LARGE_BYTES],
            }
            for name, rows in self.by_fabric().items()
        }

    def by_preset(self) -> dict[str, list[RowResult]]:
        """Multi-node rows grouped by the catalog fabric presets whose NICs they match (transport, NICs per node,
        speed), so that the rows behind each preset are scored apart; rows that match none are "no preset"."""
        groups: dict[str, list[RowResult]] = {}
        for r in self.results:
            if r.case.placement.nodes > 1:
                groups.setdefault(preset_family(r.case.cluster.fabric), []).append(r)
        return dict(sorted(groups.items()))

    def to_json(self) -> dict[str, Any]:
        rows = [
            {
                "source": r.case.source,
                "system": r.case.system,
                "collective": r.case.op,
                "message_size_bytes": None if r.case.size_assumed else int(r.case.message_bytes),
                "measured_busbw_gbps": float(f"{r.case.measured_busbw_gbps:.6g}"),
                "predicted_busbw_gbps": float(f"{r.predicted_busbw_gbps:.6g}"),
                "error_pct": round(r.error_pct, 2),
            }
            for r in self.results
        ]
        return {
            "rows": rows,
            "summary": {
                "all": _summary(list(self.results)),
                "large": _summary(self.large()),
                "small": _summary(self.small()),
                "by_fabric": {k: _summary(v) for k, v in self.by_fabric().items()},
                "by_preset": {
                    k: {
                        "all": _summary(v),
                        **{key: _summary(rows) for key, rows in _split_by_size(v).items()},
                    }
                    for k, v in self.by_preset().items()
                },
                "skipped": [{"row": i, "reason": reason} for i, reason in self.skipped],
            },
        }


def validate_rows(rows: list[dict[str, str]], params: NetworkParams | None = None) -> ValidationReport:
    results: list[RowResult] = []
    skipped: list[tuple[int, str]] = []
    for i, row in enumerate(rows, start=1):
        case = parse_row(i, row)
        if isinstance(case, str):
            skipped.append((i, case))
            continue
        try:
            results.append(predict(case, params))
        except ValueError as exc:
            skipped.append((i, f"cannot model: {exc}"))
    return ValidationReport(tuple(results), tuple(skipped))


REQUIRED_COLUMNS = ("system", "collective")


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        if not any(c in (reader.fieldnames or []) for c in ("busbw_GBps", "algbw_GBps")):
            raise ValueError(f"{path}: needs a busbw_GBps or algbw_GBps column")
        return list(reader)


def validate_file(path: Path, params: NetworkParams | None = None) -> ValidationReport:
    return validate_rows(read_csv(path), params)


_SIZE_LABELS = (("large", "≥ 64 MiB"), ("small", "< 64 MiB"))


def render_table(report: ValidationReport) -> str:
    """Human-readable report: one line per row, then the summary and skipped rows."""
    lines = [
        f"{'row':>4} {'system':40s} {'collective':14s} {'ranks':>6} {'size':>10} {'measured':>9} {'predicted':>9} "
        f"{'error':>8}  algorithm   latency meas/pred (µs)"
    ]
    for r in report.results:
        c = r.case
        size = "n/a" if c.size_assumed else _human_bytes(c.message_bytes)
        lat = (
            ""
            if c.measured_latency_us is None
            else f"{c.measured_latency_us:.1f} / {r.predicted_latency_us:.1f}"
        )
        lines.append(
            f"{c.index:4d} {c.system[:40]:40s} {c.op:14s} {c.placement.ranks:6d} {size:>10} "
            f"{c.measured_busbw_gbps:9.2f} {r.predicted_busbw_gbps:9.2f} {r.error_pct:+7.1f}%  "
            f"{r.algorithm + '/' + r.protocol:11s} {lat}"
        )
    data = report.to_json()["summary"]
    summaries = [("all sizes", data["all"]), ("messages ≥ 64 MiB", data["large"])]
    summaries.append(("messages < 64 MiB", data["small"]))
    by_size = report.by_fabric_size()
    for name, s in data["by_fabric"].items():
        summaries.append((f"  {name}", s))
        split = {key: _summary(rows) for key, rows in by_size.get(name, {}).items() if rows}
        if len(split) > 1:
            summaries.extend(
                (f"    {name} {label}", split[key]) for key, label in _SIZE_LABELS if key in split
            )
    summaries.extend(_preset_summaries(report))
    for label, s in summaries:
        lines.append(
            f"{label}: n={s['n']}, median |error| {s['median_abs_pct']} %, p90 |error| {s['p90_abs_pct']} %"
        )
    for item in data["skipped"]:
        lines.append(f"skipped row {item['row']}: {item['reason']}")
    return "\n".join(lines)


def _preset_summaries(report: ValidationReport) -> list[tuple[str, dict[str, Any]]]:
    """One line per fabric preset group of multi-node rows, split by size when both classes are present."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, rows in report.by_preset().items():
        label = "no fabric preset" if name == "no preset" else f"fabric preset {name}"
        out.append((f"  {label}", _summary(rows)))
        split = _split_by_size(rows)
        if len(split) > 1:
            out.extend((f"    {label} {size}", _summary(split[key])) for key, size in _SIZE_LABELS)
    return out


def _human_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}B"


def _group_key(case: RowCase) -> tuple[str, str, int, int]:
    return (case.system, case.op, case.placement.ranks, case.placement.ranks_per_node)


def write_plots(report: ValidationReport, folder: Path, params: NetworkParams | None = None) -> list[Path]:
    """busbw vs message size per system: model curve and measured points; and predicted vs measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    params = params or default_network_params()
    groups: dict[tuple[str, str, int, int], list[RowResult]] = {}
    for r in report.results:
        groups.setdefault(_group_key(r.case), []).append(r)
    sized = {k: v for k, v in groups.items() if any(not r.case.size_assumed for r in v)}
    written: list[Path] = []
    keys = sorted(sized)
    cols = 4
    rows_n = max(1, math.ceil(len(keys) / cols))
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.2 * rows_n), squeeze=False)
    sizes = [2.0**e for e in range(12, 35)]
    for ax, key in zip(axes.flat, keys, strict=False):
        results = sized[key]
        case = results[0].case
        model_bw = []
        for s in sizes:
            sc = replace(case, message_bytes=s, size_assumed=False)
            model_bw.append(predict(sc, params).predicted_busbw_gbps)
        ax.plot(sizes, model_bw, "-", color="tab:blue", label="model")
        meas = [
            (r.case.message_bytes, r.case.measured_busbw_gbps) for r in results if not r.case.size_assumed
        ]
        ax.plot([m[0] for m in meas], [m[1] for m in meas], "o", color="tab:red", label="measured")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{key[0][:34]}\n{key[1]} n={key[2]} k={key[3]}", fontsize=8)
        ax.set_xlabel("message size (bytes)", fontsize=7)
        ax.set_ylabel("busbw (GB/s)", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    if keys:
        axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    path = folder / "collectives_busbw_vs_size.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    xs = [r.case.measured_busbw_gbps for r in report.results]
    ys = [r.predicted_busbw_gbps for r in report.results]
    colors = ["tab:blue" if r.case.message_bytes >= LARGE_BYTES else "tab:orange" for r in report.results]
    ax.scatter(xs, ys, c=colors, s=14)
    lo = max(1e-4, min(xs + ys))
    hi = max(xs + ys)
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.plot([lo, hi], [lo * 1.2, hi * 1.2], "k:", lw=0.6)
    ax.plot([lo, hi], [lo / 1.2, hi / 1.2], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured busbw (GB/s)")
    ax.set_ylabel("predicted busbw (GB/s)")
    ax.set_title("collectives: model vs measured (blue ≥ 64 MiB, orange smaller; dotted ±20 %)", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path = folder / "collectives_predicted_vs_measured.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
