"""Fat-tree bill of materials: counts for known fabrics, oversubscription, capacity limits, capex."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.errors import SpecError
from app.core.topology import FatTreeDesign, UnitPrices, bill_of_materials, max_endpoints


def test_two_tier_non_blocking_ndr_128_nodes_by_8_rails() -> None:
    # DGX H100 SuperPOD RA, 4 scalable units (128 nodes): 32 leaf + 16 spine QM9700 (64-port NDR) switches
    bom = bill_of_materials(FatTreeDesign(nodes=128, rails=8, switch_radix=64, tiers=2))
    assert bom.endpoints == 1024
    assert [(t.name, t.switches) for t in bom.tiers] == [("leaf", 32), ("spine", 16)]
    assert bom.switches == 48
    assert bom.cables == {"node_leaf": 1024, "leaf_spine": 1024, "spine_core": 0}
    assert bom.transceivers == 2 * 2048
    assert bom.non_blocking and bom.bisection_fraction == 1.0
    assert bom.nodes_per_leaf_group == 32
    assert bom.max_endpoints == 2048


def test_one_scalable_unit_and_copper_node_links() -> None:
    bom = bill_of_materials(FatTreeDesign(nodes=32, rails=8, node_links_optical=False))
    assert [(t.name, t.switches) for t in bom.tiers] == [("leaf", 8), ("spine", 4)]
    assert bom.transceivers == 2 * bom.cables["leaf_spine"] == 512


def test_three_tier_half_populated_k64_fat_tree() -> None:
    # k = 64 three-tier fat-tree reaches k³/4 = 65,536 endpoints (Al-Fares et al. 2008); half of it:
    assert max_endpoints(64, 3) == 65536
    bom = bill_of_materials(
        FatTreeDesign(nodes=4096, rails=8, switch_radix=64, tiers=3, oversubscription=(1.0, 1.0))
    )
    assert [(t.name, t.switches) for t in bom.tiers] == [("leaf", 1024), ("spine", 1024), ("core", 512)]
    assert sum(bom.cables.values()) == 3 * 32768
    assert bom.switch_hops_max == 5


def test_oversubscribed_leaf_uses_fewer_spines() -> None:
    nb = bill_of_materials(FatTreeDesign(nodes=128, rails=8, oversubscription=(1.0,)))
    over = bill_of_materials(FatTreeDesign(nodes=128, rails=8, oversubscription=(3.0,)))
    assert not over.non_blocking
    # 3:1 leaves offer 48 down / 16 up; 128 nodes per rail need ceil(128/48) = 3 leaves per rail (24 in all),
    # each then using 43 ports down and ceil(43/3) = 15 up; 24 × 15 uplinks need 6 spines
    assert over.tiers[0].switches == 24
    assert (over.tiers[0].down_ports_per_switch, over.tiers[0].up_ports_per_switch) == (43, 15)
    assert over.tiers[1].switches == 6
    assert over.switches < nb.switches
    assert over.bisection_fraction == pytest.approx(15 / 43)


def test_too_many_endpoints_for_two_tiers_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="3 tiers"):
        bill_of_materials(FatTreeDesign(nodes=300, rails=8, tiers=2))
    with pytest.raises(SpecError) as err:
        bill_of_materials(FatTreeDesign(nodes=0, rails=0, switch_radix=3, tiers=4))
    assert {p.field for p in err.value.problems} == {"nodes", "rails", "switch_radix", "tiers"}


def test_capex_reproduces_the_cheah_sheet_for_128_nodes() -> None:
    # Price book: "IB switches+cables per node, 2-tier fabric (128 nodes)" $33,984 per node = $1.728M switches
    # ($36k × 48) + $2.621M cables/optics; our per-link split: $280 cable + 2 × $500 transceivers.
    prices = UnitPrices(switch_usd=36_000, transceiver_usd=500, cable_usd=280)
    bom = bill_of_materials(FatTreeDesign(nodes=128, rails=8), prices, gpus_per_node=8)
    assert bom.cost is not None
    assert bom.cost.breakdown_usd["switches"] == 1_728_000
    assert bom.cost.per_node_usd == pytest.approx(33_984, rel=0.001)
    assert sum(bom.cost.breakdown_usd.values()) == pytest.approx(bom.cost.total_usd)
    assert bom.cost.per_gpu_usd == pytest.approx(bom.cost.total_usd / 1024)


@settings(max_examples=80, deadline=None)
@given(
    nodes=st.integers(1, 2000), rails=st.sampled_from([1, 2, 4, 8]), ratio=st.sampled_from([1.0, 2.0, 3.0])
)
def test_every_endpoint_has_a_port_and_uplinks_respect_ratio(nodes: int, rails: int, ratio: float) -> None:
    tiers = 2 if nodes * rails <= max_endpoints(64, 2, (ratio,)) else 3
    bom = bill_of_materials(
        FatTreeDesign(nodes=nodes, rails=rails, tiers=tiers, oversubscription=(ratio, 1.0))
    )
    leaf = bom.tiers[0]
    assert leaf.switches * leaf.down_ports_per_switch >= bom.endpoints
    assert leaf.down_ports_per_switch + leaf.up_ports_per_switch <= 64
    assert leaf.down_ports_per_switch / leaf.up_ports_per_switch <= ratio + 1e-9
    top = bom.tiers[-1]
    assert top.switches * 64 >= (bom.cables["spine_core"] or bom.cables["leaf_spine"])
