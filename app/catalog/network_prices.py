"""Network unit prices (app/catalog/network_prices.csv): one dated, sourced price per item (switch, transceiver,
cable, NIC) and price class (ib-ndr, roce-400g, ...), read into app.core.topology.UnitPrices.

A fabric preset maps to a price class by transport and NIC line rate. A class may lack rows, or some of them: a
row is added only for an item with a published, dated price (docs/cost.md lists what was searched for and not
found). A fabric whose class lacks a row for an item its bill of materials needs (switch, transceiver, cable) has
no unit prices: it is never priced from another class's rows; the on-prem TCO falls back to the network share by
fabric tiers (app.core.cost.NETWORK_SHARE_BY_TIERS) and names the class and the missing items in its network line
(`no_price_row`) and provenance."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from app.core.hardware import FabricSpec
from app.core.topology import UnitPrices

NETWORK_PRICES_FILE = Path(__file__).resolve().parent / "network_prices.csv"
ITEMS = ("switch", "transceiver", "cable", "nic")
# the items a fat-tree bill of materials is priced with; the NIC row is quoted for reference only (NICs are in the
# server price), so a class without one is still priced
BOM_ITEMS = ("switch", "transceiver", "cable")

# The fabric a GPU's on-prem cluster is priced with when the request names none is its reference fabric
# (app.catalog.fabrics.reference_fabric_name), the one the step model runs on.


@dataclass(frozen=True)
class NetworkPriceRow:
    price_class: str
    item: str
    unit_usd: float
    ports: int | None
    date: str
    source: str
    confidence: str
    notes: str

    def statement(self) -> str:
        ports = f" ({self.ports}-port)" if self.ports else ""
        return f"{self.price_class} {self.item}{ports} ${self.unit_usd:,.0f}, {self.date} ({self.source})"


@cache
def network_price_rows() -> dict[str, dict[str, NetworkPriceRow]]:
    """Rows by price class, then item; a second row for the same class and item is an error. A class may lack
    items (see missing_items)."""
    with NETWORK_PRICES_FILE.open(encoding="utf-8", newline="") as handle:
        raw_rows = list(csv.DictReader(handle))
    out: dict[str, dict[str, NetworkPriceRow]] = {}
    for line, raw in enumerate(raw_rows, start=2):
        item = raw["item"].strip()
        if item not in ITEMS:
            raise ValueError(f"{NETWORK_PRICES_FILE.name} line {line}: item {item!r} is not one of {ITEMS}")
        row = NetworkPriceRow(
            price_class=raw["price_class"].strip(),
            item=item,
            unit_usd=float(raw["unit_usd"]),
            ports=int(raw["ports"]) if raw["ports"].strip() else None,
            date=raw["date"].strip(),
            source=raw["source"].strip(),
            confidence=raw["confidence"].strip(),
            notes=raw["notes"].strip(),
        )
        by_item = out.setdefault(row.price_class, {})
        if item in by_item:
            raise ValueError(
                f"{NETWORK_PRICES_FILE.name} line {line}: a second {item} row for {row.price_class}"
            )
        by_item[item] = row
    return out


def price_class(fabric: FabricSpec) -> str:
    """The price class of a fabric: transport and NIC line rate, e.g. ib-ndr (InfiniBand 400 Gb/s)."""
    gbps = round(fabric.nic_bandwidth_bytes_per_s * 8 / 1e9)
    if fabric.transport == "infiniband":
        return {100: "ib-edr", 200: "ib-hdr", 400: "ib-ndr", 800: "ib-xdr"}.get(gbps, f"ib-{gbps}g")
    return f"{fabric.transport.replace('_', '-')}-{gbps}g"


def missing_items(fabric: FabricSpec) -> tuple[str, ...]:
    """The bill-of-materials items (BOM_ITEMS) the fabric's price class has no row for; () when it can be priced."""
    rows = network_price_rows().get(price_class(fabric), {})
    return tuple(item for item in BOM_ITEMS if item not in rows)


def unit_prices_for(fabric: FabricSpec) -> UnitPrices | None:
    """The fabric's unit prices from its class's rows, or None when the class lacks a row for a BOM item (never
    another class's rows). Switch prices are per port of the row's switch, times the fabric's radix; NICs are
    counted in the server price."""
    if missing_items(fabric):
        return None
    rows = network_price_rows()[price_class(fabric)]
    switch_row = rows["switch"]
    per_port = switch_row.unit_usd / (switch_row.ports or fabric.switch_radix)
    switch_usd = per_port * fabric.switch_radix
    scaled = (
        "" if switch_row.ports in (None, fabric.switch_radix) else f", scaled to {fabric.switch_radix} ports"
    )
    source = {
        "switch_usd": switch_row.statement() + scaled,
        "transceiver_usd": rows["transceiver"].statement(),
        "cable_usd": rows["cable"].statement(),
        "nic_usd": "in the server price"
        + (f" (row for reference: {rows['nic'].statement()})" if "nic" in rows else " (no NIC row)"),
    }
    return UnitPrices(switch_usd, rows["transceiver"].unit_usd, rows["cable"].unit_usd, 0.0, source)


def network_prices_date(fabric: FabricSpec) -> str:
    """The latest date among the class's rows ('' when it has none)."""
    rows = network_price_rows().get(price_class(fabric), {})
    return max((r.date for r in rows.values()), default="")
