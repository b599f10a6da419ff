"""Network core: nccl-tests busbw factors, algorithm choice, golden values from published runs, properties."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.catalog import find_gpu
from app.catalog.fabrics import fabrics, find_fabric
from app.core.errors import SpecError
from app.core.hardware import ClusterSpec
from app.core.network import (
    COLLECTIVE_OPS,
    NetworkParams,
    Placement,
    busbw_factor,
    channels_used,
    collective_time,
    default_network_params,
)
from app.core.units import GB, GiB, MiB


def cluster(
    gpu: str = "H100-SXM", nodes: int = 1, fabric: str = "ib-ndr-8x400", nvls: bool | None = None
) -> ClusterSpec:
    spec = find_gpu(gpu)
    return ClusterSpec(
        spec,
        nodes,
        spec.default_gpus_per_node,
        scaleup_kind=spec.scaleup_kind,
        fabric=find_fabric(fabric),
        nvls=nvls,
    )


# --- nccl-tests conventions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 8, 1.75),
        ("all_reduce", 2, 1.0),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 32, 31 / 32),
        ("broadcast", 8, 1.0),
        ("send_recv", 2, 1.0),
        ("all_reduce", 1, 1.0),
    ],
)
def test_busbw_factors_match_nccl_tests(op: str, n: int, factor: float) -> None:
    assert busbw_factor(op, n) == pytest.approx(factor)


def test_busbw_is_algbw_times_factor_and_breakdown_sums() -> None:
    for op in COLLECTIVE_OPS:
        ranks = 2 if op == "send_recv" else 32
        est = collective_time(op, 256 * MiB, Placement(ranks, 8), cluster(nodes=4))
        assert est.busbw_bytes_per_s == pytest.approx(est.algbw_bytes_per_s * busbw_factor(op, ranks))
        assert est.algbw_bytes_per_s == pytest.approx(256 * MiB / est.time_s)
        assert sum(est.breakdown.values()) == pytest.approx(est.time_s)
        assert est.candidates[0].time_s == pytest.approx(est.time_s)


# --- golden values (published measurements, tolerance stated per case) ----------------------------------------


def test_h100_single_node_nvls_and_ring_match_published_busbw() -> None:
    # nccl-tests #212 / GTC24: 8×H100 NVLS ≈ 480 GB/s busbw, ring ≈ 370 GB/s at large sizes
    c = cluster()
    nvls = collective_time("all_reduce", 16 * GiB, Placement(8, 8), c)
    ring = collective_time("all_reduce", 16 * GiB, Placement(8, 8), c, algorithm="ring")
    assert nvls.algorithm == "nvls"
    assert nvls.busbw_bytes_per_s / GB == pytest.approx(480, rel=0.05)
    assert ring.busbw_bytes_per_s / GB == pytest.approx(370, rel=0.05)


def test_a100_ring_and_multinode_rdma_match_published_busbw() -> None:
    # GTC24 S62129: DGX A100 232 GB/s in-node; 4 × DGX A100 with 8×200 Gb/s 192 GB/s
    single = collective_time("all_reduce", 16 * GiB, Placement(8, 8), cluster("A100-80GB-SXM"))
    multi = collective_time(
        "all_reduce", 16 * GiB, Placement(32, 8), cluster("A100-80GB-SXM", 4, "ib-hdr-8x200")
    )
    assert single.busbw_bytes_per_s / GB == pytest.approx(232, rel=0.05)
    assert multi.busbw_bytes_per_s / GB == pytest.approx(192, rel=0.05)
    assert multi.bottleneck.startswith("NICs")


def test_dgx_h100_multinode_bandwidth_is_nic_bound_and_flat_with_scale() -> None:
    # NVIDIA NVLSTree scan: ~370 GB/s at 16 GiB from 4 to 1024 nodes
    values = [
        collective_time("all_reduce", 16 * GiB, Placement(8 * n, 8), cluster(nodes=n)).busbw_bytes_per_s / GB
        for n in (4, 32, 1024)
    ]
    for v in values:
        assert v == pytest.approx(370, rel=0.05)


def test_all_to_all_multinode_matches_gtc25() -> None:
    # GTC25 S72583: 4 × DGX H100 all-to-all busbw 48 GB/s (per GPU NIC 50 GB/s)
    est = collective_time("all_to_all", 16 * GiB, Placement(32, 8), cluster(nodes=4))
    assert est.busbw_bytes_per_s / GB == pytest.approx(48, rel=0.08)


def test_small_message_latency_is_tens_of_microseconds() -> None:
    # nccl-tests #150: 8 B all-reduce between two A100 nodes over HDR, 19.9 µs
    est = collective_time("all_reduce", 8, Placement(2, 1), cluster("A100-80GB-SXM", 2, "ib-hdr-8x200"))
    assert 10e-6 < est.time_s < 40e-6
    assert est.protocol == "LL"


def test_xgmi_pair_uses_one_link() -> None:
    # MI300X: two GPUs talk over one 64 GB/s xGMI link (47.7 GB/s measured), eight over seven links (313)
    mi = find_gpu("MI300X")
    two = ClusterSpec(mi, 1, 2, scaleup_kind="xgmi")
    eight = ClusterSpec(mi, 1, 8, scaleup_kind="xgmi")
    b2 = collective_time("all_reduce", 4 * GiB, Placement(2, 2), two).busbw_bytes_per_s / GB
    b8 = collective_time("all_reduce", 4 * GiB, Placement(8, 8), eight).busbw_bytes_per_s / GB
    assert b2 == pytest.approx(47.7, rel=0.05)
    assert b8 == pytest.approx(313, rel=0.05)


# --- algorithm availability ---------------------------------------------------------------------------------------


def test_nvls_only_where_the_hardware_has_it() -> None:
    a100 = collective_time("all_reduce", 1 * GiB, Placement(8, 8), cluster("A100-80GB-SXM"))
    assert a100.algorithm != "nvls"
    assert all("nvls" not in c.algorithm for c in a100.candidates)
    with pytest.raises(SpecError):
        collective_time("all_reduce", 1 * GiB, Placement(8, 8), cluster("A100-80GB-SXM"), algorithm="nvls")
    h100_off = collective_time("all_reduce", 1 * GiB, Placement(8, 8), cluster(nvls=False))
    assert all("nvls" not in c.algorithm for c in h100_off.candidates)
    # NCCL engages NVLS only from 5 GPUs (stas00/ml-engineering H200 rows)
    four = collective_time("all_reduce", 1 * GiB, Placement(4, 4), cluster())
    assert four.algorithm == "ring"
    multi = collective_time("all_reduce", 1 * GiB, Placement(32, 8), cluster(nodes=4))
    assert "nvls_tree" in {c.algorithm for c in multi.candidates}


def test_sharp_only_with_sharp_fabric() -> None:
    plain = collective_time("all_reduce", 16 * GiB, Placement(32, 8), cluster(nodes=4))
    assert "sharp" not in {c.algorithm for c in plain.candidates}
    sharp = collective_time(
        "all_reduce", 16 * GiB, Placement(32, 8), cluster(nodes=4, fabric="ib-ndr-8x400-sharp")
    )
    assert sharp.algorithm == "sharp"
    # GTC24/25: NVLS + IB SHARP on 4 × DGX H100 reaches ~480 GB/s busbw
    assert sharp.busbw_bytes_per_s / GB == pytest.approx(480, rel=0.12)
    assert sharp.busbw_bytes_per_s > plain.busbw_bytes_per_s


def test_protocol_choice_follows_size() -> None:
    c = cluster("A100-80GB-SXM")
    small = collective_time("all_reduce", 4 * 1024, Placement(8, 8), c)
    big = collective_time("all_reduce", 4 * GiB, Placement(8, 8), c)
    assert small.protocol == "LL"
    assert big.protocol == "Simple"


def test_hierarchical_only_when_forced_and_slower_than_nccl_choice_on_rail_fabric() -> None:
    c = cluster(nodes=4)
    auto = collective_time("all_reduce", 1 * GiB, Placement(32, 8), c)
    hier = collective_time("all_reduce", 1 * GiB, Placement(32, 8), c, algorithm="hierarchical")
    assert auto.algorithm != "hierarchical"
    assert hier.algorithm == "hierarchical"
    assert hier.time_s > 0


def test_oversubscription_slows_all_to_all_but_not_ring() -> None:
    base = find_fabric("ib-ndr-8x400")
    over = replace(base, oversubscription=(2.0,))
    big = lambda f: ClusterSpec(find_gpu("H100-SXM"), 128, 8, fabric=f)  # noqa: E731
    p = Placement(1024, 8)
    a2a = [collective_time("all_to_all", 4 * GiB, p, big(f)).time_s for f in (base, over)]
    ring = [collective_time("all_reduce", 4 * GiB, p, big(f), algorithm="ring").time_s for f in (base, over)]
    # 2:1 leaves: 42 ports down, 22 up; two thirds of the traffic leaves the leaf → ~1.34× slower
    assert a2a[1] == pytest.approx(a2a[0] * (1 - 42 / 128) * 2, rel=0.05)
    assert ring[1] == pytest.approx(ring[0])


def test_congestion_derate_and_fewer_nics_slow_multinode_transfers() -> None:
    base = cluster(nodes=8)
    t0 = collective_time("all_reduce", 4 * GiB, Placement(64, 8), base).time_s
    derated = replace(base, fabric=replace(base.fabric, congestion_derate=0.5))
    fewer = replace(base, fabric=replace(base.fabric, nics_per_node=2))
    assert collective_time("all_reduce", 4 * GiB, Placement(64, 8), derated).time_s > 1.5 * t0
    assert collective_time("all_reduce", 4 * GiB, Placement(64, 8), fewer).time_s > 3 * t0


def test_bad_placement_lists_every_problem() -> None:
    with pytest.raises(SpecError) as err:
        collective_time("all_everything", -5, Placement(0, 16), cluster())
    fields = {p.field for p in err.value.problems}
    assert {"op", "message_bytes", "placement.ranks", "placement.ranks_per_node"} <= fields


def test_single_rank_or_empty_message_costs_nothing() -> None:
    assert collective_time("all_reduce", 1 * GiB, Placement(1, 1), cluster()).time_s == 0.0
    assert collective_time("all_gather", 0, Placement(8, 8), cluster()).time_s == 0.0


def test_params_from_dict_overrides_only_given_fields() -> None:
    base = default_network_params()
    p = NetworkParams.from_dict(
        {
            "launch_overhead_s": 1e-6,
            "nvlink": {"ring_efficiency": 0.5},
            "transports": {"roce": {"ring_efficiency": 0.6}},
        }
    )
    assert p.launch_overhead_s == 1e-6
    assert p.nvlink.ring_efficiency == 0.5
    assert p.nvlink.step_latency_s == base.nvlink.step_latency_s
    assert p.transports["roce"].ring_efficiency == 0.6
    assert p.transports["infiniband"] == base.transports["infiniband"]
    slow = collective_time("all_gather", 1 * GiB, Placement(8, 8), cluster(), p)
    fast = collective_time("all_gather", 1 * GiB, Placement(8, 8), cluster())
    assert slow.time_s > 1.5 * fast.time_s


# --- properties -----------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(COLLECTIVE_OPS),
    fabric=st.sampled_from(sorted(fabrics())),
    gpu=st.sampled_from(["H100-SXM", "A100-80GB-SXM", "B200", "MI300X", "H100-PCIe"]),
    nodes=st.integers(1, 64),
    per_node=st.integers(1, 8),
    size=st.floats(1, 2**36),
    factor=st.floats(1.0, 64.0),
)
def test_time_is_monotonic_in_message_size_on_the_same_channels(
    op: str, fabric: str, gpu: str, nodes: int, per_node: int, size: float, factor: float
) -> None:
    """A larger message on the same algorithm and protocol never takes less time, except by the channels NCCL
    adds for it (channels_used: transfer time ∝ bytes / channels, so a step from nc to nc' channels can cut the
    time by at most nc / nc'). The pick itself is not monotonic: see the next test."""
    c = cluster(gpu, nodes, fabric)
    ranks = 2 if op == "send_recv" else nodes * per_node
    p = Placement(ranks, per_node if op != "send_recv" else min(per_node, 2))
    first = collective_time(op, size, p, c)
    if ranks == 1:
        assert first.time_s == 0.0
        return
    assert first.time_s > 0
    larger = collective_time(op, size * factor, p, c, algorithm=first.algorithm, protocol=first.protocol)
    nc1 = channels_used(size, first.protocol, first.algorithm, ranks)
    nc2 = channels_used(size * factor, first.protocol, first.algorithm, ranks)
    assert larger.time_s >= first.time_s * min(1.0, nc1 / nc2) * (1 - 1e-12)


def test_the_protocol_pick_can_make_a_larger_message_faster() -> None:
    """NCCL ranks algorithm × protocol by its tuning model on every channel, then runs the pick on the channels
    the message size earns (src/enqueue.cc topoGetAlgoInfo), so past the LL threshold it switches to Simple,
    whose larger per-thread threshold leaves a mid-sized message on fewer channels: two MI300X over xGMI take
    longer for 185 KB on Simple than for 171 KB on LL, and less for 200 KB than for 185 KB (one more channel)."""
    c = cluster("MI300X", 1, "efa-v2-32x100")
    p = Placement(2, 2)
    ll, simple, more = (collective_time("all_reduce", s, p, c) for s in (171_205, 184_874, 199_635))
    assert (ll.protocol, simple.protocol, more.protocol) == ("LL", "Simple", "Simple")
    assert simple.time_s > ll.time_s and more.time_s < simple.time_s
    assert channels_used(199_635, "Simple", "ring", 2) > channels_used(184_874, "Simple", "ring", 2)


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(2, 256), size=st.floats(2**20, 2**34))
def test_busbw_never_exceeds_link_bounds(nodes: int, size: float) -> None:
    c = cluster(nodes=nodes)
    est = collective_time("all_reduce", size, Placement(8 * nodes, 8), c)
    # without SHARP a node cannot move more than its NICs (400 GB/s) on a ring, nor 2× that on a 2-node tree
    assert est.busbw_bytes_per_s <= 2 * 400e9
    assert est.algbw_bytes_per_s <= c.scaleup_bw
