"""On-prem server rows (app/catalog/onprem_servers.csv): one dated, sourced purchase price and maximum power per
GPU type, read into app.core.cost.ServerQuote. A GPU without a row has no default: the caller must say so."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from app.core.cost import ServerQuote

ONPREM_SERVERS_FILE = Path(__file__).resolve().parent / "onprem_servers.csv"


@cache
def server_quotes() -> dict[str, ServerQuote]:
    """Server rows by catalog GPU name."""
    with ONPREM_SERVERS_FILE.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    quotes: dict[str, ServerQuote] = {}
    for line, raw in enumerate(rows, start=2):
        name = raw["gpu_name"].strip()
        if name in quotes:
            raise ValueError(f"{ONPREM_SERVERS_FILE.name} line {line}: a second row for {name}")
        quotes[name] = ServerQuote(
            gpu_name=name,
            server=raw["server"].strip(),
            gpus_per_server=int(raw["gpus_per_server"]),
            server_usd=float(raw["server_usd"]),
            server_date=raw["server_date"].strip(),
            server_source=raw["server_source"].strip(),
            node_kw=float(raw["node_kw"]),
            power_date=raw["power_date"].strip(),
            power_source=raw["power_source"].strip(),
        )
    return quotes


def server_quote(gpu_name: str) -> ServerQuote | None:
    """The server row of a catalog GPU (canonical name), or None when the catalog has none."""
    return server_quotes().get(gpu_name)
