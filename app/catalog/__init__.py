"""Built-in catalog: GPUs, interconnects, model architectures and the price book, read from the data files here.

The files use datasheet units (TFLOP/s, GiB, TB/s, GB/s, µs); this module is the edge that converts them to the SI
base units of app.core (FLOP/s, bytes, bytes/s, seconds). Lookups are cached and pure: the same files always give
the same objects. Names resolve case-, space- and punctuation-insensitively, through each entry's aliases; an
unknown name raises app.errors.NotFoundError carrying the closest known names.

The database copy of the catalog (which also holds users' own rows) is served by app/services/catalog.py.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from app.core import price_age
from app.core.hardware import GPUSpec, InterconnectSpec
from app.core.model import ModelSpec
from app.core.price_terms import parse_term, parse_unit
from app.core.units import GB, TB, TFLOP, US, GiB
from app.errors import NotFoundError

CATALOG_DIR = Path(__file__).resolve().parent
GPUS_FILE = CATALOG_DIR / "gpus.yaml"
MODELS_FILE = CATALOG_DIR / "models.yaml"
INTERCONNECTS_FILE = CATALOG_DIR / "interconnects.yaml"
PRICES_FILE = CATALOG_DIR / "prices.csv"
ACCURACY_FILE = CATALOG_DIR / "accuracy.json"
# every headline accuracy figure with its role and target, built by `clusterplan validate scorecard --write`
SCORECARD_FILE = CATALOG_DIR / "scorecard.json"
REGION_FILE = CATALOG_DIR / "validated_region.json"

# Keys in models.yaml that describe the catalog entry rather than the architecture.
MODEL_META_KEYS = ("aliases", "published_params_b", "published_active_params_b", "date")
# Columns of prices.csv that identify a row; the seed key hashes them so a re-seed refreshes a row in place.
PRICE_IDENTITY_COLUMNS = (
    "category",
    "item",
    "vendor_or_source_entity",
    "region",
    "pricing_model",
    "unit",
    "date",
)


@dataclass(frozen=True)
class CatalogEntry:
    """One built-in entry: the core spec plus what the catalog knows about it (aliases, source, date, notes)."""

    kind: str  # "gpu" | "model" | "interconnect"
    name: str
    spec: Any  # GPUSpec | ModelSpec | InterconnectSpec
    aliases: tuple[str, ...] = ()
    source: str = ""
    date: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def normalise_name(name: str) -> str:
    """Lower-case, keep only letters, digits and dots: "A100-80 (SXM)" → "a10080sxm"."""
    return re.sub(r"[^a-z0-9.]", "", name.lower())


# --- file loading (the edge: datasheet units → SI) ---------------------------------------------------------


# libyaml's parser where PyYAML was built with it (the wheels are): the same safe constructors, the catalog files read
# 7-10x faster than by the pure-Python parser (models.yaml 59 -> 8 ms), which each process pays on its first lookup
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """A YAML document read as yaml.safe_load reads it, with libyaml's parser when there is one."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # a safe loader: CSafeLoader or SafeLoader


def _read_yaml_list(path: Path) -> list[dict[str, Any]]:
    data = load_yaml(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path.name}: expected a list of entries")
    return data


def _tflops(values: Mapping[str, float] | None) -> dict[str, float]:
    return {dtype: float(v) * TFLOP for dtype, v in (values or {}).items()}


def gpu_entry_from_record(record: Mapping[str, Any]) -> CatalogEntry:
    """Turn one gpus.yaml record (datasheet units) into a catalog entry holding a GPUSpec in SI units."""
    aliases = tuple(str(a) for a in record.get("aliases", ()))
    spec = GPUSpec(
        name=record["name"],
        vendor=record["vendor"],
        form_factor=record.get("form_factor", ""),
        peak_flops=_tflops(record["peak_tflops"]),
        hbm_bytes=round(float(record["hbm_gib"]) * GiB),
        hbm_bandwidth_bytes_per_s=float(record["hbm_tb_per_s"]) * TB,
        scaleup_bandwidth_bytes_per_s=float(record["scaleup_gb_per_s"]) * GB,
        tdp_w=float(record["tdp_w"]),
        measured_matmul_flops=_tflops(record.get("measured_matmul_tflops")),
        scaleup_kind=record.get("scaleup_kind", "nvswitch"),
        default_gpus_per_node=int(record.get("default_gpus_per_node", 8)),
        nvls=bool(record.get("nvls", False)),
        aliases=aliases,
        source=str(record.get("source", "")).strip(),
        date=str(record.get("date", "")),
        sm_count=int(record.get("sm_count", 0) or 0),
        design_power_w=float(record.get("design_power_w", 0) or 0),
        host_link_bytes_per_s=float(record.get("host_gb_per_s", 64)) * GB,
        host_memory_bytes=float(record.get("host_memory_gib", 0) or 0) * GiB,
        host_memory_bandwidth_bytes_per_s=float(record.get("host_memory_gb_per_s", 0) or 0) * GB,
        bf16_tensor_cores=bool(record.get("bf16_tensor_cores", True)),
        compute_capability=float(record.get("compute_capability", 0) or 0),
    )
    extra = {k: record[k] for k in ("hbm_type", "scaleup_fabric", "notes", "measured_date") if k in record}
    return CatalogEntry("gpu", spec.name, spec, aliases, spec.source, spec.date, extra)


def interconnect_entry_from_record(record: Mapping[str, Any]) -> CatalogEntry:
    aliases = tuple(str(a) for a in record.get("aliases", ()))
    spec = InterconnectSpec(
        name=record["name"],
        kind=record["kind"],
        technology=record["technology"],
        bandwidth_bytes_per_s=float(record["gb_per_s"]) * GB,
        latency_s=float(record["latency_us"]) * US,
        generation=str(record.get("generation", "")),
        domain_size=int(record.get("domain_size", 8)),
        supports_nvls=bool(record.get("supports_nvls", False)),
        supports_sharp=bool(record.get("supports_sharp", False)),
        source=str(record.get("source", "")).strip(),
        date=str(record.get("date", "")),
    )
    return CatalogEntry("interconnect", spec.name, spec, aliases, spec.source, spec.date, {})


def model_entry_from_record(record: Mapping[str, Any]) -> CatalogEntry:
    arch = {k: v for k, v in record.items() if k not in MODEL_META_KEYS}
    if isinstance(arch.get("source"), str):
        arch["source"] = arch["source"].strip()
    spec = ModelSpec.from_dict(arch)
    aliases = tuple(str(a) for a in record.get("aliases", ()))
    extra: dict[str, Any] = {}
    if "published_params_b" in record:
        extra["published_params"] = float(record["published_params_b"]) * 1e9
    if "published_active_params_b" in record:
        extra["published_active_params"] = float(record["published_active_params_b"]) * 1e9
    return CatalogEntry("model", spec.name, spec, aliases, spec.source, str(record.get("date", "")), extra)


@cache
def gpu_entries() -> dict[str, CatalogEntry]:
    return _index_unique(gpu_entry_from_record(r) for r in _read_yaml_list(GPUS_FILE))


@cache
def interconnect_entries() -> dict[str, CatalogEntry]:
    return _index_unique(interconnect_entry_from_record(r) for r in _read_yaml_list(INTERCONNECTS_FILE))


@cache
def model_entries() -> dict[str, CatalogEntry]:
    return _index_unique(model_entry_from_record(r) for r in _read_yaml_list(MODELS_FILE))


@cache
def accuracy_table() -> dict[str, Any]:
    """Accuracy bands by kind of run (app.core.accuracy), built by `clusterplan validate accuracy --write`."""
    import json

    return dict(json.loads(ACCURACY_FILE.read_text(encoding="utf-8")))


@cache
def scorecard_table() -> dict[str, Any]:
    """The validation scorecard (app.validation.scorecard): {figures, summary}, as committed."""
    import json

    return dict(json.loads(SCORECARD_FILE.read_text(encoding="utf-8")))


@cache
def validated_region() -> dict[str, Any]:
    """Which kinds of layout published runs cover (app.core.validated_region), built by
    `clusterplan validate region --write`."""
    import json

    return dict(json.loads(REGION_FILE.read_text(encoding="utf-8")))


def entries(kind: str) -> dict[str, CatalogEntry]:
    """All built-in entries of one kind ("gpu", "model", "interconnect"), keyed by canonical name."""
    loaders = {"gpu": gpu_entries, "model": model_entries, "interconnect": interconnect_entries}
    if kind not in loaders:
        raise ValueError(f"unknown catalog kind {kind!r}; expected one of {', '.join(loaders)}")
    return loaders[kind]()


def _index_unique(items: Iterable[CatalogEntry]) -> dict[str, CatalogEntry]:
    out: dict[str, CatalogEntry] = {}
    for entry in items:
        if entry.name in out:
            raise ValueError(f"duplicate catalog {entry.kind} {entry.name!r}")
        out[entry.name] = entry
    build_alias_index(out.values())  # refuses an alias that points at two entries
    return out


# --- public lookups ------------------------------------------------------------------------------------------


def gpus() -> dict[str, GPUSpec]:
    return {name: e.spec for name, e in gpu_entries().items()}


def models() -> dict[str, ModelSpec]:
    return {name: e.spec for name, e in model_entries().items()}


def interconnects() -> dict[str, InterconnectSpec]:
    return {name: e.spec for name, e in interconnect_entries().items()}


def find_gpu(name: str) -> GPUSpec:
    spec: GPUSpec = find_entry("gpu", name).spec
    return spec


def find_model(name: str) -> ModelSpec:
    spec: ModelSpec = find_entry("model", name).spec
    return spec


def find_interconnect(name: str) -> InterconnectSpec:
    spec: InterconnectSpec = find_entry("interconnect", name).spec
    return spec


def find_entry(kind: str, name: str) -> CatalogEntry:
    """Resolve a name or alias of one kind; unknown names raise NotFoundError with close matches."""
    table = entries(kind)
    if name in table:
        return table[name]
    index = _alias_index(kind)
    key = normalise_name(name)
    if key and key in index:
        return table[index[key]]
    raise NotFoundError(kind, name, close_matches(name, _candidate_names(table.values())))


def resolve_name(kind: str, name: str) -> str | None:
    """Canonical built-in name for `name` (or an alias of it), None when unknown."""
    try:
        return find_entry(kind, name).name
    except NotFoundError:
        return None


def _candidate_names(items: Iterable[CatalogEntry]) -> dict[str, str]:
    """Normalised name or alias → canonical name, for suggestions."""
    out: dict[str, str] = {}
    for entry in items:
        for label in (entry.name, *entry.aliases):
            out.setdefault(normalise_name(label), entry.name)
    return out


@cache
def _alias_index(kind: str) -> dict[str, str]:
    return build_alias_index(entries(kind).values())


def build_alias_index(items: Iterable[CatalogEntry]) -> dict[str, str]:
    """Normalised name or alias → canonical name; raises ValueError when one alias names two entries."""
    index: dict[str, str] = {}
    for entry in items:
        for label in (entry.name, *entry.aliases):
            key = normalise_name(label)
            if not key:
                continue
            owner = index.setdefault(key, entry.name)
            if owner != entry.name:
                raise ValueError(
                    f"catalog {entry.kind} alias {label!r} names both {owner!r} and {entry.name!r}"
                )
    return index


def close_matches(name: str, candidates: Mapping[str, str], limit: int = 5) -> list[str]:
    """Canonical names whose name or alias is close to `name`: difflib ratio first, then substring hits."""
    key = normalise_name(name)
    if not key:
        return []
    found: list[str] = []
    for hit in difflib.get_close_matches(key, list(candidates), n=limit * 3, cutoff=0.6):
        if candidates[hit] not in found:
            found.append(candidates[hit])
    if len(key) >= 3:
        for label, canonical in sorted(candidates.items()):
            if (key in label or label in key) and canonical not in found and len(label) >= 3:
                found.append(canonical)
    return found[:limit]


# --- price book ----------------------------------------------------------------------------------------------


_DATE_PATTERNS = (
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})"), lambda m: date(int(m[1]), int(m[2]), int(m[3]))),
    (re.compile(r"(\d{4})-H([12])"), lambda m: date(int(m[1]), 1 if m[2] == "1" else 7, 1)),
    (re.compile(r"(\d{4})-(\d{2})"), lambda m: date(int(m[1]), int(m[2]), 1)),
    (re.compile(r"(\d{4})"), lambda m: date(int(m[1]), 1, 1)),
)


def parse_price_date(text: str) -> date:
    """The date a price was observed. Partial dates ("2024-08", "2024-H2", "2025 (undated)") take the first day of
    the period they name, so a staleness check errs towards calling a price old. A range ("2022-2025") takes its
    last year."""
    text = text.strip()
    years = re.findall(r"\b(\d{4})\b", text)
    if re.fullmatch(r"\d{4}-\d{4}", text):
        return date(int(years[-1]), 1, 1)
    leading = text.lstrip("~ ")
    for pattern, build in _DATE_PATTERNS:
        match = pattern.match(leading)
        if match:
            return build(match)
    raise ValueError(f"price date {text!r} has no year")


def _optional_float(text: str) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


def _optional_int(text: str) -> int | None:
    text = (text or "").strip()
    return int(text) if text else None


def price_seed_key(raw: Mapping[str, str]) -> str:
    identity = "\x1f".join((raw.get(col) or "").strip() for col in PRICE_IDENTITY_COLUMNS)
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:40]


def check_price_row(raw: Mapping[str, str], price_date: date, where: str) -> None:
    """A known category, a date no later than today, and for a cloud GPU row a billing term and a GPU price
    unit; anything else is refused with the row named."""
    item = f"{raw['item'].strip()} ({raw['vendor_or_source_entity'].strip()})"
    problems = price_age.row_problems(raw["category"].strip(), price_date, date.today())
    if problems:
        raise ValueError(f"{where}, {item}: " + "; ".join(f"{p.field}: {p.message}" for p in problems))
    if raw["category"].strip() != "cloud_gpu":
        return
    try:
        parse_term(raw["pricing_model"])
        parse_unit(raw["unit"])
    except ValueError as exc:
        raise ValueError(f"{where}, {item}: {exc}") from None


def read_price_rows(path: Path) -> tuple[dict[str, Any], ...]:
    with path.open(encoding="utf-8", newline="") as handle:
        raw_rows = list(csv.DictReader(handle))
    rows = []
    for line, raw in enumerate(raw_rows, start=2):
        date_text = raw["date"].strip()
        check_price_row(raw, parse_price_date(date_text), f"{path.name} line {line}")
        rows.append(
            {
                "category": raw["category"].strip(),
                "item": raw["item"].strip(),
                "vendor": raw["vendor_or_source_entity"].strip(),
                "region": raw["region"].strip(),
                "pricing_model": raw["pricing_model"].strip(),
                "unit": raw["unit"].strip(),
                "price_usd": _optional_float(raw["price_usd"]),
                "usd_per_gpu_hour": _optional_float(raw["usd_per_gpu_hour"]),
                "date": date_text,
                "price_date": parse_price_date(date_text),
                "source": raw["source"].strip(),
                "confidence": raw["confidence"].strip(),
                "notes": raw["notes"].strip(),
                "gpu_name": raw.get("gpu_name", "").strip() or None,
                "gpus_per_unit": _optional_int(raw.get("gpus_per_unit", "")),
                "includes": raw.get("includes", "").strip(),
                "seed_key": price_seed_key(raw),
            }
        )
    return tuple(rows)


@cache
def _price_rows() -> tuple[dict[str, Any], ...]:
    return read_price_rows(PRICES_FILE)


def price_rows() -> list[dict[str, Any]]:
    """Every row of the built-in price book (copies; `price_usd` is None where the source gives no price)."""
    return [dict(row) for row in _price_rows()]


def clear_caches() -> None:
    """Forget the parsed files (tests that edit a copy of the catalog call this)."""
    for fn in (gpu_entries, interconnect_entries, model_entries, _price_rows, _alias_index):
        fn.cache_clear()


__all__ = [
    "CatalogEntry",
    "clear_caches",
    "close_matches",
    "entries",
    "find_entry",
    "find_gpu",
    "find_interconnect",
    "find_model",
    "gpus",
    "interconnects",
    "models",
    "normalise_name",
    "parse_price_date",
    "price_rows",
    "resolve_name",
]
