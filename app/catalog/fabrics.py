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


# The fabric of a cluster that names none: the DGX H100 SuperPOD compute fabric (sources in fabrics.yaml), NDR
# 400 Gb/s, which is also the compute NIC of DGX H200/B200 and of the GB200 NVL72 trays.
DEFAULT_FABRIC_PRESET = "ib-ndr-8x400"
# The compute NIC of a GPU's reference system where it runs faster than the default preset's: NVIDIA DGX B300
# datasheet, 8 × ConnectX-8 VPI at up to 800 Gb/s; NVIDIA GB300 NVL72 specification, one ConnectX-8 SuperNIC
# (800 Gb/s) per GPU.
REFERENCE_NIC_GBPS: dict[str, float] = {"B300": 800.0, "GB300": 800.0}
# InfiniBand's names for the per-port rates a default fabric can carry, for its label
IB_RATE_NAMES: dict[float, str] = {400.0: "NDR 400", 800.0: "XDR 800"}


def default_fabric(gpu_name: str, gpus_per_node: int) -> FabricSpec:
    """The fabric of a cluster that names none, for the step model and the network service alike: the
    DEFAULT_FABRIC_PRESET (one NIC per GPU of an 8-GPU server) at the GPU's reference NIC rate, placed on a node of
    `gpus_per_node` GPUs and named by what it is ("default (4 × NDR 400 Gb/s)")."""
    base = find_fabric(DEFAULT_FABRIC_PRESET)
    gbps = REFERENCE_NIC_GBPS.get(gpu_name, base.nic_bandwidth_bytes_per_s / GBIT)
    spec = fabric_for_node(replace(base, nic_bandwidth_bytes_per_s=gbps * GBIT), gpus_per_node)
    return replace(spec, name=f"default ({spec.nics_per_node} × {IB_RATE_NAMES.get(gbps, f'{gbps:g}')} Gb/s)")


def find_fabric(name: str, **overrides: Any) -> FabricSpec:
    """The preset's FabricSpec, optionally with fields replaced (e.g. congestion_derate=0.8)."""
    spec = find_preset(name).spec
    return replace(spec, **overrides) if overrides else spec
