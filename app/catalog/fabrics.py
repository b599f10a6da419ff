"""Fabric presets (app/catalog/fabrics.yaml) → app.core.hardware.FabricSpec, with the source kept beside them.

Lookups are cached and pure; names resolve case- and punctuation-insensitively through aliases, and an unknown
name raises app.errors.NotFoundError with the closest preset names.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from app.catalog import load_yaml
from app.core.hardware import FabricSpec
from app.core.units import GBIT, US
from app.errors import NotFoundError

FABRICS_FILE = Path(__file__).resolve().parent / "fabrics.yaml"


# the transports' names as a fabric's label gives them (a preset's `family` names its product instead)
TRANSPORT_NAMES = {"infiniband": "InfiniBand", "roce": "RoCE", "efa": "EFA", "ethernet_tcp": "Ethernet (TCP)"}


@dataclass(frozen=True)
class FabricPreset:
    name: str
    spec: FabricSpec
    aliases: tuple[str, ...]
    source: str
    notes: str
    family: str = ""  # the network's product family when the transport does not name it (Omni-Path)

    @property
    def label(self) -> str:
        """In words, from the preset's own figures: "RoCE 8 × 400G, static ECMP, scattered placement"."""
        f = self.spec
        family = self.family or TRANSPORT_NAMES.get(f.transport, f.transport)
        parts = [
            f"{family} {f.nics_per_node} × {f.nic_bandwidth_bytes_per_s / GBIT:g}G",
            "static ECMP" if f.routing == "ecmp" else "adaptive routing",
        ]
        if f.qps_per_connection > 1:
            parts.append(f"{f.qps_per_connection} queue pairs per connection")
        if f.placement == "scattered":
            parts.append("scattered placement")
        if f.sharp:
            parts.append("SHARP")
        return ", ".join(parts)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def fabric_from_record(record: dict[str, Any]) -> FabricSpec:
    """One YAML record (datasheet units) → FabricSpec (SI units)."""
    return FabricSpec(
        transport=record["transport"],
        nics_per_node=int(record["nics_per_node"]),
        nic_bandwidth_bytes_per_s=float(record["nic_gbps"]) * GBIT,
        topology=record.get("topology", "rail_optimized"),
        tiers=int(record.get("tiers", 0)),  # 0: inferred from the node count (app.core.topology.fabric_tiers)
        oversubscription=tuple(float(x) for x in record.get("oversubscription", [1.0])),
        hop_latency_s=float(record.get("hop_latency_us", 0.6)) * US,
        base_latency_s=float(record.get("base_latency_us", 2.0)) * US,
        sharp=bool(record.get("sharp", False)),
        congestion_derate=float(record.get("congestion_derate", 1.0)),
        switch_radix=int(record.get("switch_radix", 64)),
        name=record["name"],
        routing=record.get("routing", "adaptive"),
        qps_per_connection=int(record.get("qps_per_connection", 1)),
        placement=record.get("placement", "contiguous"),
    )


@cache
def _presets() -> dict[str, FabricPreset]:
    records = load_yaml(FABRICS_FILE.read_text(encoding="utf-8")) or []
    out: dict[str, FabricPreset] = {}
    for rec in records:
        out[rec["name"]] = FabricPreset(
            name=rec["name"],
            spec=fabric_from_record(rec),
            aliases=tuple(rec.get("aliases", ())),
            source=str(rec.get("source", "")),
            notes=str(rec.get("notes", "")).strip(),
            family=str(rec.get("family", "")),
        )
    return out


@cache
def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for name, preset in _presets().items():
        for alias in (name, *preset.aliases):
            index[_key(alias)] = name
    return index


def presets() -> dict[str, FabricPreset]:
    return dict(_presets())


def fabrics() -> dict[str, FabricSpec]:
    return {name: p.spec for name, p in _presets().items()}


def find_preset(name: str) -> FabricPreset:
    table = _presets()
    if name in table:
        return table[name]
    hit = _alias_index().get(_key(name))
    if hit is not None:
        return table[hit]
    close = difflib.get_close_matches(name.lower(), list(table), n=5, cutoff=0.4)
    raise NotFoundError("fabric", name, close)


# docs/network.md#nics-per-node. A preset's `nics_per_node` counts the NICs of one 8-GPU server, as its name says
# (8 × 400G): the DGX/HGX reference designs it describes have PRESET_SERVER_GPUS GPUs per server. On a node of
# another size a preset keeps its NICs per GPU: a 4-GPU GB200 NVL72 compute tray gets 4, one ConnectX-7 400 Gb/s
# NIC per GPU, as the NVIDIA DGX GB200 SuperPOD reference architecture builds it. The step model, the scaling
# sweeps, the bill of materials and the training-run replay all place a preset on a node through fabric_for_node.
PRESET_SERVER_GPUS = 8


def fabric_for_node(spec: FabricSpec, gpus_per_node: int) -> FabricSpec:
    """A preset's fabric on a node of `gpus_per_node` GPUs: its NICs per GPU kept, at least one NIC per node."""
    nics = max(1, round(spec.nics_per_node * gpus_per_node / PRESET_SERVER_GPUS))
    return spec if nics == spec.nics_per_node else replace(spec, nics_per_node=nics)


# The scale-out fabric of a GPU's reference system: the fabric of a cluster that names none, for the step model,
# the scaling sweeps, the on-prem bill of materials, the calibration profiles and the training-run replay alike.
# A100: DGX A100 SuperPOD reference architecture, 8 HDR 200 Gb/s compute NICs per node (2020).
# H100/H200/H800: DGX H100/H200 SuperPOD reference architecture, 8 NDR 400 Gb/s ConnectX-7 rails (2023); DeepSeek's
# H800 nodes likewise (DeepSeek-V3 technical report Sec. 3.1: InfiniBand, 8 × 400 Gb/s per node, Fire-Flyer 2).
# B200: DGX B200 user guide, 8 ConnectX-7 400 Gb/s compute ports (2024). GB200: DGX GB200 SuperPOD reference
# architecture, one ConnectX-7 400 Gb/s NIC per GPU on a Quantum-2 NDR compute fabric (2024).
# B300: NVIDIA DGX B300 datasheet, 8 × ConnectX-8 VPI at up to 800 Gb/s. GB300: NVIDIA GB300 NVL72 specification,
# one ConnectX-8 SuperNIC (800 Gb/s) per GPU; on a Quantum-X800 XDR fabric (ib-xdr-8x800).
# MI300X/MI325X: an assumption, 8 × 400 Gb/s RoCE (e.g. Oracle OCI BM.GPU.MI300X.8, 2024; AMD's Instinct
# platforms ship without a NIC of their own); replace with your fabric.
# V100: DGX-2 had 8 EDR 100 Gb/s ports (DGX-2 datasheet, 2018); the catalog has no EDR preset, so the nearest
# InfiniBand generation, HDR 200, stands in (optimistic on inter-node time).
# Any other GPU: DEFAULT_FABRIC_PRESET.
REFERENCE_FABRIC_BY_GPU: dict[str, str] = {
    "A100-40GB-SXM": "ib-hdr-8x200",
    "A100-80GB-SXM": "ib-hdr-8x200",
    "V100-SXM2-32GB": "ib-hdr-8x200",
    "H100-SXM": "ib-ndr-8x400",
    "H100-SXM-96GB": "ib-ndr-8x400",
    "H200-SXM": "ib-ndr-8x400",
    "H800-SXM": "ib-ndr-8x400",
    "B200": "ib-ndr-8x400",
    "GB200": "ib-ndr-8x400",
    "B300": "ib-xdr-8x800",
    "GB300": "ib-xdr-8x800",
    "MI300X": "roce-8x400",
    "MI325X": "roce-8x400",
}
DEFAULT_FABRIC_PRESET = "ib-ndr-8x400"


def reference_fabric_name(gpu_name: str) -> str:
    """The preset of the GPU's reference system (REFERENCE_FABRIC_BY_GPU), by the GPU's catalog name."""
    return REFERENCE_FABRIC_BY_GPU.get(gpu_name, DEFAULT_FABRIC_PRESET)


@cache
def default_fabric(gpu_name: str, gpus_per_node: int) -> FabricSpec:
    """The fabric of a cluster that names none: the GPU's reference preset (REFERENCE_FABRIC_BY_GPU) placed on a
    node of `gpus_per_node` GPUs (fabric_for_node), named by what it is there ("default: InfiniBand 4 × 400G,
    adaptive routing (ib-ndr-8x400)"). It assumes no in-network reduction: NCCL uses SHARP only through its CollNet
    plugin or NVLS+SHARP set up for it, so a cluster that has it names a SHARP preset."""
    preset = find_preset(reference_fabric_name(gpu_name))
    spec = fabric_for_node(replace(preset.spec, sharp=False), gpus_per_node)
    return replace(spec, name=f"default: {replace(preset, spec=spec).label} ({preset.name})")


def reference_fabric(gpu_name: str) -> FabricSpec:
    """default_fabric on the reference design's own 8-GPU server, for callers that place it themselves."""
    return default_fabric(gpu_name, PRESET_SERVER_GPUS)


def fabric_on_node(name: str | None, gpu_name: str, gpus_per_node: int) -> FabricSpec:
    """The named preset, or the GPU's default fabric when `name` is None, placed on a node of `gpus_per_node`
    GPUs: what a cluster that names a preset or none runs on. Raises NotFoundError for an unknown name."""
    if name is None:
        return default_fabric(gpu_name, gpus_per_node)
    return fabric_for_node(find_fabric(name), gpus_per_node)


def find_fabric(name: str, **overrides: Any) -> FabricSpec:
    """The preset's FabricSpec, optionally with fields replaced (e.g. congestion_derate=0.8)."""
    spec = find_preset(name).spec
    return replace(spec, **overrides) if overrides else spec
