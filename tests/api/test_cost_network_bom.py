"""The on-prem network capex line from the fat-tree bill of materials at dated unit prices
(app/catalog/network_prices.csv), with the share by fabric tiers only as a stated fallback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.catalog.fabrics import REFERENCE_FABRIC_BY_GPU, find_fabric
from app.catalog.network_prices import (
    ITEMS,
    network_price_rows,
    price_class,
    unit_prices_for,
)
from app.catalog.onprem import server_quotes
from app.core.errors import SpecError
from app.schemas import cost as s
from app.services import cost as svc
from app.services.catalog import PUBLIC
from tests.paths import ROOT

OPTION = [{"label": "test", "usd_per_gpu_hour": 2.0}]
# E. Cheah 'H100 Freakonomics' sheet (2024-08): InfiniBand NDR switches + cables per node, NICs in the node price
CHEAH_2_TIER_PER_NODE = 33_984.0  # 128 nodes: ($1.728M switches + $2.621M cables) / 128
CHEAH_3_TIER_PER_NODE = 52_978.0  # 4,096 nodes: ($92.16M + $124.5M) / 4,096


def _tco(gpu: str | None = "H100-SXM", **onprem: Any) -> s.TcoResponse:
    body: dict[str, Any] = {"onprem": {"nodes": 128} | onprem, "options": OPTION}
    if gpu is not None:
        body["gpu"] = gpu
    fabric = body["onprem"].pop("fabric", None)
    if fabric is not None:
        body["fabric"] = fabric
    return svc.tco(None, s.TcoRequest.model_validate(body), viewer=PUBLIC)


def test_every_price_row_is_dated_and_sourced_and_the_priced_classes_complete() -> None:
    rows = network_price_rows()
    assert {"ib-ndr", "roce-400g"} <= set(rows)
    for klass in (
        "ib-ndr",
        "roce-400g",
    ):  # a class may lack items (ib-hdr: tests/services/test_network_price_rows)
        assert set(rows[klass]) == set(ITEMS)
    for by_item in rows.values():
        for row in by_item.values():
            assert row.date[:4].isdigit() and row.source and row.unit_usd > 0
    assert set(server_quotes()) <= set(REFERENCE_FABRIC_BY_GPU)  # every quoted server has its own fabric


def test_fabric_presets_map_to_price_classes() -> None:
    assert price_class(find_fabric("ib-ndr-8x400")) == "ib-ndr"
    assert price_class(find_fabric("ib-xdr-8x800")) == "ib-xdr"
    assert price_class(find_fabric("ib-hdr-8x200")) == "ib-hdr"
    assert price_class(find_fabric("roce-8x400")) == "roce-400g"
    assert unit_prices_for(find_fabric("ib-xdr-8x800")) is None  # no row: the share fallback
    meta = unit_prices_for(find_fabric("roce-meta-8x400"))  # 32-port switches: per-port price × 32
    full = unit_prices_for(find_fabric("roce-8x400"))
    assert meta is not None and full is not None
    assert meta.switch_usd == pytest.approx(full.switch_usd / 2)
    assert "scaled to 32 ports" in meta.source["switch_usd"]


def test_h100_network_line_reproduces_cheah_per_node_network_capex() -> None:
    two = _tco(nodes=128).network
    assert two is not None and two.method == "bom" and two.fabric == "ib-ndr-8x400"
    assert (two.tiers, two.tiers_inferred, two.switches) == (2, True, 48)
    assert two.per_gpu_usd * 8 == pytest.approx(CHEAH_2_TIER_PER_NODE, rel=0.01)
    three = _tco(nodes=4096).network
    assert three is not None and three.tiers == 3
    assert three.per_gpu_usd * 8 == pytest.approx(CHEAH_3_TIER_PER_NODE, rel=0.01)
    # published share of the network in cluster capex: ~10-20 % (Cheah 8.6-12.8 % at $310k nodes; Epoch 19 %)
    for line in (two, three):
        assert 0.08 <= line.share_of_capex <= 0.20


def test_network_capex_is_in_the_tco_with_its_provenance() -> None:
    result = _tco(nodes=128)
    assert result.network is not None
    assert result.capex["network"] == pytest.approx(result.network.total_usd)
    used = {a.name: a for a in result.assumptions}
    assert "network_share_of_capex" not in used
    provenance = used["network_capex_usd"]
    assert "48 switches" in provenance.source and "2 tier(s) inferred" in provenance.source
    assert provenance.date == "2025"
    assert "2024-08" in result.network.sources["switch_usd"]
    assert "in the server price" in result.network.sources["nic_usd"]


def test_one_node_needs_no_scale_out_fabric() -> None:
    line = _tco(nodes=1).network
    assert line is not None and line.total_usd == 0 and line.switches == 0
    assert "no scale-out fabric" in line.note


def test_a_fabric_without_price_rows_falls_back_to_the_share_by_inferred_tiers() -> None:
    a100 = _tco("A100-80GB-SXM", nodes=128)  # HDR, radix 40: 1,024 NIC ports need 3 tiers
    line = a100.network
    assert line is not None and line.method == "share" and line.price_class == "ib-hdr"
    assert line.tiers == 3 and line.tiers_inferred and line.share_of_capex == pytest.approx(0.128)
    used = {a.name: a for a in a100.assumptions}
    assert "no network price row for ib-hdr" in used["network_fallback"].source
    small = _tco("A100-80GB-SXM", nodes=16).network
    assert small is not None and small.tiers == 2


def test_fabric_override_and_explicit_figures() -> None:
    roce = _tco(nodes=128, fabric="roce-8x400").network
    ib = _tco(nodes=128).network
    assert roce is not None and ib is not None and roce.price_class == "roce-400g"
    assert roce.total_usd == pytest.approx(0.65 * ib.total_usd)
    share = _tco(nodes=128, network_share=0.1).network
    assert share is not None and share.method == "share" and share.share_of_capex == pytest.approx(0.1)
    given = _tco(nodes=128, network_capex_usd=1e6).network
    assert given is not None and given.method == "given" and given.total_usd == 1e6


def test_too_few_tiers_and_unknown_fabrics_are_refused() -> None:
    with pytest.raises(SpecError) as few:
        _tco(nodes=128, fabric_tiers=1)
    assert few.value.problems[0].field == "onprem.fabric_tiers"
    with pytest.raises(SpecError) as few_shared:  # the share fallback checks the tiers too
        _tco("A100-80GB-SXM", nodes=128, fabric_tiers=2)
    assert few_shared.value.problems[0].field == "onprem.fabric_tiers"
    assert _tco("A100-80GB-SXM", nodes=16, fabric_tiers=3).network.tiers == 3  # type: ignore[union-attr]
    with pytest.raises(SpecError) as unknown:
        _tco(nodes=128, fabric="no-such-fabric")
    assert unknown.value.problems[0].field == "fabric"


def test_api_returns_the_network_line(client: Any) -> None:
    body = {"onprem": {"nodes": 128}, "gpu": "H100-SXM", "options": OPTION}
    tco = client.post("/api/v1/cost/tco", json=body)
    assert tco.status_code == 200, tco.text
    network = tco.json()["network"]
    assert network["method"] == "bom" and network["switches"] == 48
    breakeven = client.post("/api/v1/cost/breakeven", json=body).json()
    assert breakeven["network"]["per_gpu_usd"] == pytest.approx(network["per_gpu_usd"])
    page = client.get("/cost?nodes=128&gpu=H100-SXM")
    assert 'id="network-basis"' in page.text and "48 switches" in page.text


def test_cli_prints_the_network_line(tmp_path: Path) -> None:
    env = {**os.environ, "CLUSTERPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}
    args = ["cost", "tco", "--gpu", "H100-SXM", "--nodes", "128", "--price", "2.5"]
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "network $4,248/GPU (10.5% of server + network capex): BOM of ib-ndr-8x400, 2 tier(s) inferred"
        in (done.stdout)
    )
