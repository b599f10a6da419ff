"""Price rows of app/catalog/network_prices.csv per fabric: which classes have rows, the stated derivation of the
RoCE rows from the NDR rows, a class without rows flagged (never priced from another speed's rows), and a row, once
added, read and used for its fabric."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.catalog import network_prices
from app.catalog.fabrics import find_fabric
from app.catalog.network_prices import ITEMS, network_price_rows, price_class, unit_prices_for
from app.core.units import GBIT
from app.schemas import cost as s
from app.services import cost as svc

OPTION = [{"label": "test", "usd_per_gpu_hour": 2.0}]
# classes with no published, dated unit price found (docs/cost.md): their fabrics must be flagged, not priced
UNPRICED = {"ib-hdr-8x200": "ib-hdr", "ib-xdr-8x800": "ib-xdr"}


def _network(fabric: str | None = None, gpu: str = "H100-SXM", nodes: int = 128) -> s.TcoResponse:
    body: dict[str, Any] = {"onprem": {"nodes": nodes}, "gpu": gpu, "options": OPTION}
    if fabric is not None:
        body["fabric"] = fabric
    return svc.tco(None, s.TcoRequest.model_validate(body))


@pytest.fixture
def fresh_rows() -> Iterator[None]:
    network_price_rows.cache_clear()
    yield
    network_price_rows.cache_clear()


def _write(path: Path, extra: list[dict[str, str]]) -> Path:
    with network_prices.NETWORK_PRICES_FILE.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows + extra)
    return path


def _row(klass: str, item: str, usd: str, ports: str = "") -> dict[str, str]:
    return {
        "price_class": klass,
        "item": item,
        "unit_usd": usd,
        "ports": ports,
        "date": "2026-01",
        "source": "test row",
        "confidence": "estimate",
        "notes": "",
    }


def test_the_classes_with_rows_are_ndr_and_the_derived_roce_400g() -> None:
    rows = network_price_rows()
    assert set(rows) == {"ib-ndr", "roce-400g"}
    for klass in UNPRICED.values():
        assert klass not in rows
    # 800 Gb/s Ethernet (no preset in the catalog yet): its class has no rows either
    roce_800 = replace(find_fabric("roce-8x400"), nic_bandwidth_bytes_per_s=800 * GBIT)
    assert price_class(roce_800) == "roce-800g" and unit_prices_for(roce_800) is None


def test_the_roce_rows_are_the_ndr_rows_times_the_cited_share() -> None:
    rows = network_price_rows()
    for item in ITEMS:
        ndr, roce = rows["ib-ndr"][item], rows["roce-400g"][item]
        assert roce.unit_usd == pytest.approx(0.65 * ndr.unit_usd)
        assert roce.confidence == "derived"
        assert "x 0.65" in roce.source and "yobitel.com/knowledge-base/nvidia-spectrum-x" in roce.source
    assert rows["roce-400g"]["switch"].ports == rows["ib-ndr"]["switch"].ports == 64


@pytest.mark.parametrize(("fabric", "klass"), sorted(UNPRICED.items()))
def test_a_fabric_without_rows_is_flagged_not_priced_from_another_speed(fabric: str, klass: str) -> None:
    assert price_class(find_fabric(fabric)) == klass and unit_prices_for(find_fabric(fabric)) is None
    result = _network(fabric)
    line = result.network
    assert line is not None and line.fabric == fabric and line.price_class == klass
    assert line.method == "share" and line.no_price_row == klass
    assert line.switches is None and not line.sources  # no BOM, no unit price quoted
    assert line.note.startswith(f"no network price row for {klass} ({fabric}) in network_prices.csv")
    used = {a.name: a for a in result.assumptions}
    assert used["network_fallback"].value == klass
    ndr = _network("ib-ndr-8x400").network
    assert ndr is not None and ndr.per_gpu_usd != pytest.approx(line.per_gpu_usd)  # not NDR's prices


def test_a_fabric_with_rows_is_not_flagged() -> None:
    for fabric in ("ib-ndr-8x400", "roce-8x400"):
        line = _network(fabric).network
        assert line is not None and line.method == "bom" and line.no_price_row == ""
    a100 = _network(gpu="A100-80GB-SXM").network  # the A100's reference fabric is HDR
    assert a100 is not None and a100.fabric == "ib-hdr-8x200" and a100.no_price_row == "ib-hdr"


def test_a_row_added_for_a_class_is_read_and_used_for_its_fabric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_rows: None
) -> None:
    xdr = [
        _row("ib-xdr", "switch", "72000", "144"),
        _row("ib-xdr", "transceiver", "1000"),
        _row("ib-xdr", "cable", "300"),
        _row("ib-xdr", "nic", "2000"),
    ]
    monkeypatch.setattr(network_prices, "NETWORK_PRICES_FILE", _write(tmp_path / "prices.csv", xdr))
    prices = unit_prices_for(find_fabric("ib-xdr-8x800"))
    assert prices is not None
    assert (prices.switch_usd, prices.transceiver_usd, prices.cable_usd) == (72000, 1000, 300)
    assert prices.source["switch_usd"] == "ib-xdr switch (144-port) $72,000, 2026-01 (test row)"
    line = _network("ib-xdr-8x800").network
    assert line is not None and line.method == "bom" and line.no_price_row == ""
    assert line.price_class == "ib-xdr" and line.switches
    assert line.breakdown_usd["switches"] == pytest.approx(72000 * line.switches)
    assert unit_prices_for(find_fabric("ib-hdr-8x200")) is None  # the other classes are unchanged


def test_an_incomplete_class_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_rows: None
) -> None:
    partial = [_row("ib-hdr", "switch", "20000", "40"), _row("ib-hdr", "transceiver", "400")]
    monkeypatch.setattr(network_prices, "NETWORK_PRICES_FILE", _write(tmp_path / "prices.csv", partial))
    with pytest.raises(ValueError, match="price class ib-hdr lacks cable, nic"):
        network_price_rows()
