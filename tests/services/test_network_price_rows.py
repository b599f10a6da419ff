"""Price rows of app/catalog/network_prices.csv per fabric: the HDR rows read with their stated derivation, the
RoCE rows' derivation from the NDR rows, a fabric whose class lacks a row it needs flagged with the missing items
(never priced from another speed's rows), and the rows, once the class is complete, used for its fabric."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.catalog import network_prices
from app.catalog.fabrics import find_fabric
from app.catalog.network_prices import (
    ITEMS,
    missing_items,
    network_price_rows,
    price_class,
    unit_prices_for,
)
from app.core.units import GBIT
from app.schemas import cost as s
from app.services import cost as svc
from app.services.catalog import PUBLIC

OPTION = [{"label": "test", "usd_per_gpu_hour": 2.0}]
# classes lacking a published, dated unit price for a BOM item (docs/cost.md): their fabrics are flagged, not priced
UNPRICED = {
    "ib-hdr-8x200": ("ib-hdr", ["transceiver", "cable"]),
    "ib-xdr-8x800": ("ib-xdr", ["switch", "transceiver", "cable"]),
}
TUE_2023 = "https://github.com/gferhpc/supercomputing.tue.nl/blob/main/docs/documentation/specifications/configs/2023.md"
NL_VAT, USD_PER_EUR_2023 = 1.21, 1.0813  # Dutch VAT; ECB 2023 average reference rate


def _network(fabric: str | None = None, gpu: str = "H100-SXM", nodes: int = 128) -> s.TcoResponse:
    body: dict[str, Any] = {"onprem": {"nodes": nodes}, "gpu": gpu, "options": OPTION}
    if fabric is not None:
        body["fabric"] = fabric
    return svc.tco(None, s.TcoRequest.model_validate(body), viewer=PUBLIC)


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


def test_the_hdr_rows_are_read_with_their_source_and_derivation() -> None:
    hdr = network_price_rows()["ib-hdr"]
    assert set(hdr) == {"switch", "nic"}  # no published transceiver or cable price was found
    switch, nic = hdr["switch"], hdr["nic"]
    assert switch.unit_usd == pytest.approx(22_000 / NL_VAT * USD_PER_EUR_2023, abs=1)
    assert nic.unit_usd == pytest.approx(1_450 / NL_VAT * USD_PER_EUR_2023, abs=1)
    assert switch.ports == 40 == find_fabric("ib-hdr-8x200").switch_radix  # QM8700: 40 HDR ports
    for row, quoted in ((switch, "MQM8700 managed 40-port HDR"), (nic, "ConnectX-6 HDR")):
        assert row.date == "2023" and row.confidence == "derived"
        assert TUE_2023 in row.source and quoted in row.source
        assert "/ 1.21 (Dutch VAT) x 1.0813 USD per EUR" in row.source
    assert "EUR 22,000 incl. VAT" in switch.source and "EUR 1,450 incl. VAT" in nic.source


def test_the_roce_rows_are_the_ndr_rows_times_the_cited_share() -> None:
    rows = network_price_rows()
    for item in ITEMS:
        ndr, roce = rows["ib-ndr"][item], rows["roce-400g"][item]
        assert roce.unit_usd == pytest.approx(0.65 * ndr.unit_usd)
        assert roce.confidence == "derived"
        assert "x 0.65" in roce.source and "yobitel.com/knowledge-base/nvidia-spectrum-x" in roce.source
    assert rows["roce-400g"]["switch"].ports == rows["ib-ndr"]["switch"].ports == 64


def test_the_classes_without_rows() -> None:
    rows = network_price_rows()
    assert set(rows) == {"ib-ndr", "roce-400g", "ib-hdr"}
    # 800 Gb/s Ethernet (no preset in the catalog yet): its class has no rows either
    roce_800 = replace(find_fabric("roce-8x400"), nic_bandwidth_bytes_per_s=800 * GBIT)
    assert price_class(roce_800) == "roce-800g" and unit_prices_for(roce_800) is None
    assert missing_items(roce_800) == ("switch", "transceiver", "cable")


@pytest.mark.parametrize("fabric", sorted(UNPRICED))
def test_a_fabric_lacking_rows_is_flagged_not_priced_from_another_speed(fabric: str) -> None:
    klass, missing = UNPRICED[fabric]
    assert price_class(find_fabric(fabric)) == klass and unit_prices_for(find_fabric(fabric)) is None
    assert list(missing_items(find_fabric(fabric))) == missing
    result = _network(fabric)
    line = result.network
    assert line is not None and line.fabric == fabric and line.price_class == klass
    assert line.method == "share" and line.no_price_row == klass and line.missing_price_items == missing
    assert line.switches is None and not line.sources  # no BOM, no unit price quoted
    named = klass if len(missing) == 3 else f"{klass} {', '.join(missing)}"
    assert line.note.startswith(f"no network price row for {named} ({fabric}) in network_prices.csv")
    used = {a.name: a for a in result.assumptions}
    assert used["network_fallback"].value == klass
    ndr = _network("ib-ndr-8x400").network
    assert ndr is not None and ndr.per_gpu_usd != pytest.approx(line.per_gpu_usd)  # not NDR's prices


def test_the_hdr_note_names_the_rows_it_has() -> None:
    line = _network("ib-hdr-8x200").network
    assert line is not None and "its switch, nic row(s) alone cannot price a bill of materials" in line.note


def test_a_fabric_with_rows_is_not_flagged() -> None:
    for fabric in ("ib-ndr-8x400", "roce-8x400"):
        line = _network(fabric).network
        assert line is not None and line.method == "bom"
        assert line.no_price_row == "" and line.missing_price_items == []
    a100 = _network(gpu="A100-80GB-SXM").network  # the A100's reference fabric is HDR
    assert a100 is not None and a100.fabric == "ib-hdr-8x200" and a100.no_price_row == "ib-hdr"


def test_the_hdr_switch_row_prices_the_fabric_once_its_class_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_rows: None
) -> None:
    extra = [_row("ib-hdr", "transceiver", "400"), _row("ib-hdr", "cable", "100")]
    monkeypatch.setattr(network_prices, "NETWORK_PRICES_FILE", _write(tmp_path / "prices.csv", extra))
    hdr = find_fabric("ib-hdr-8x200")
    assert missing_items(hdr) == ()
    prices = unit_prices_for(hdr)
    assert prices is not None and prices.switch_usd == 19_660  # the TU/e row, 40 ports as the preset
    assert prices.source["switch_usd"].startswith("ib-hdr switch (40-port) $19,660, 2023 (TU/e HPC Lab")
    assert "ConnectX-6" in prices.source["nic_usd"]
    line = _network("ib-hdr-8x200").network
    assert line is not None and line.method == "bom" and line.no_price_row == ""
    assert line.price_class == "ib-hdr" and line.switches
    assert line.breakdown_usd["switches"] == pytest.approx(19_660 * line.switches)
    assert line.breakdown_usd["transceivers"] == pytest.approx(400 * (line.transceivers or 0))
    assert unit_prices_for(find_fabric("ib-xdr-8x800")) is None  # the other classes are unchanged


def test_a_new_class_is_read_and_the_nic_row_is_optional(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_rows: None
) -> None:
    xdr = [
        _row("ib-xdr", "switch", "72000", "144"),
        _row("ib-xdr", "transceiver", "1000"),
        _row("ib-xdr", "cable", "300"),
    ]
    monkeypatch.setattr(network_prices, "NETWORK_PRICES_FILE", _write(tmp_path / "prices.csv", xdr))
    prices = unit_prices_for(find_fabric("ib-xdr-8x800"))
    assert prices is not None
    assert (prices.switch_usd, prices.transceiver_usd, prices.cable_usd) == (72000, 1000, 300)
    assert prices.source["switch_usd"] == "ib-xdr switch (144-port) $72,000, 2026-01 (test row)"
    assert prices.source["nic_usd"] == "in the server price (no NIC row)"
    line = _network("ib-xdr-8x800").network
    assert line is not None and line.method == "bom" and line.no_price_row == ""


def test_a_second_row_for_an_item_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_rows: None
) -> None:
    twice = [_row("ib-ndr", "switch", "1", "64")]
    monkeypatch.setattr(network_prices, "NETWORK_PRICES_FILE", _write(tmp_path / "prices.csv", twice))
    with pytest.raises(ValueError, match="a second switch row for ib-ndr"):
        network_price_rows()
