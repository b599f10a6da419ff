"""Small and medium messages: latency terms and switch points as NCCL's tuning model has them, and a drift
check on the held-out nccl-tests rows (tests/data/network/collectives_heldout.csv), which no constant was
chosen from."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.network import collective_time, default_network_params
from app.validation.collectives import RowCase, parse_row, validate_file
from tests.paths import DATA_DIR

HELDOUT = DATA_DIR / "network" / "collectives_heldout.csv"
SWEEPS = DATA_DIR / "network" / "collectives_heldout_sweeps.csv"
AZURE = DATA_DIR / "network" / "collectives_heldout_azure.csv"


def _case(**row: str) -> RowCase:
    base = {"source": "test", "collective": "all_reduce", "busbw_GBps": "1"}
    case = parse_row(1, {**base, **row})
    assert isinstance(case, RowCase), case
    return case


def test_latency_bound_8_byte_all_reduce_on_two_nodes_is_nccls_ring_ll() -> None:
    # NCCL src/graph/tuning.cc: ring/LL, baseLat 6.6 µs + 2 network steps × hwLat[NET][Ring][LL] 2.7 µs = 12.0 µs
    case = _case(
        system="2 nodes, 1 GPU each",
        gpu="A100-SXM-80GB",
        gpus_per_node="1",
        nodes="2",
        fabric="IB HDR",
        message_size_bytes="8",
    )
    est = collective_time("all_reduce", 8, case.placement, case.cluster)
    assert (est.algorithm, est.protocol) == ("ring", "LL")
    assert est.breakdown["latency"] == pytest.approx(12.0e-6, rel=0.10)
    # the launch overhead comes on top; nccl-tests #150 measured 19.9 µs out-of-place
    assert est.time_s * 1e6 == pytest.approx(19.9, rel=0.20)


def test_single_node_h200_switches_from_ring_ll_to_nvls_near_1_mib() -> None:
    # NCCL_DEBUG_SUBSYS=TUNING on 8×H200 (NCCL 2.27): "RING with LL up to 1MiB, then NVLS with SIMPLE from 2MiB"
    # (stas00/ml-engineering network/benchmarks). NVLS latency = hwLat[NVLINK][NVLS] 25 µs with no base latency
    # (tuning.cc from 2.21.5). The model keeps NCCL's older LL bandwidth (1/4, not 2.21's 1/2: the A100 sweep
    # contradicts 1/2), so its switch lands at about 0.8 MiB, within one power of two of NCCL's.
    case = _case(system="8x H200 node", gpu="H200-SXM", gpus_per_node="8", nodes="1", fabric="NVSwitch")
    picks = {
        size: collective_time("all_reduce", size, case.placement, case.cluster)
        for size in (256 * 1024, 512 * 1024, 2 * 1024**2, 64 * 1024**2)
    }
    assert [(e.algorithm, e.protocol) for e in picks.values()] == [
        ("ring", "LL"),
        ("ring", "LL"),
        ("nvls", "Simple"),
        ("nvls", "Simple"),
    ]
    assert default_network_params().nvls_latency_s == pytest.approx(25e-6)


@pytest.mark.parametrize(
    ("nodes", "ceiling_gbps", "binds"), [(1, 87.7, False), (2, 22.5, True), (4, 19.0, True)]
)
def test_ll_bus_bandwidth_stops_at_nccls_ceiling_on_ampere(
    nodes: int, ceiling_gbps: float, binds: bool
) -> None:
    # tuning.cc llMaxBws[Ampere] = {87.7, 22.5, 19.0} GB/s for 1, 2 and more nodes; on one node LL's quarter
    # of the 300 GB/s NVLink 3 ring (≈ 60 GB/s) stays under the ceiling
    case = _case(
        system=f"{nodes}x 8x A100",
        gpu="A100-SXM",
        gpus_per_node="8",
        nodes=str(nodes),
        fabric="InfiniBand 8x200G HDR per node",
    )
    est = collective_time(
        "all_reduce", 4 * 1024**3, case.placement, case.cluster, algorithm="ring", protocol="LL"
    )
    assert est.busbw_bytes_per_s / 1e9 <= ceiling_gbps
    assert (est.busbw_bytes_per_s / 1e9 >= 0.95 * ceiling_gbps) is binds


def test_rows_at_the_print_resolution_are_skipped_not_scored() -> None:
    row = {
        "source": "test",
        "system": "4 nodes",
        "gpu": "B200-SXM",
        "gpus_per_node": "8",
        "nodes": "4",
        "fabric": "AWS EFA v4, 8x400 Gbps per node",
        "collective": "all_reduce",
        "message_size_bytes": "32768",
        "busbw_GBps": "0.01",
    }
    assert isinstance(parse_row(1, row), str)
    assert isinstance(parse_row(1, {**row, "latency_us": "6000"}), RowCase)


# Held-out figures measured when the rows were added, kept as a ceiling: the model may get better on them,
# never worse. (median, p90) of |error| in %. Re-set once, by NCCL's 24 collective channels on A100 and Hopper
# nodes (docs/constants.md#nccl-coll-channels): all sizes p90 32.5 -> 33.1 (the A100 256 KiB row, which Azure's
# A100 measures a third faster, from +6.6 to +23 %), every other figure unchanged.
HELDOUT_CEILING = {
    "all": (14.6, 33.1),
    "large": (5.6, 19.2),
    "small": (18.3, 47.0),
}


def _assert_within(summary: dict[str, Any], ceiling: dict[str, tuple[float, float]]) -> None:
    """Each size class's median and p90 |error| at most its ceiling (half a point of rounding)."""
    for key, (median, p90) in ceiling.items():
        assert summary[key]["median_abs_pct"] <= median + 0.5, key
        assert summary[key]["p90_abs_pct"] <= p90 + 0.5, key


def test_heldout_file_summary_does_not_drift() -> None:
    report = validate_file(HELDOUT)
    summary = report.to_json()["summary"]
    assert summary["all"]["n"] == 23
    assert summary["skipped"] == []
    assert {r.case.source.split(" ")[0] for r in report.results} == {
        "github.com/stas00/ml-engineering",
        "github.com/crazyguitar/aws-gpu-communication-benchmark",
    }
    _assert_within(summary, HELDOUT_CEILING)


# The held-out sweeps (8×H200, 8×B200, 4 × 8 B200 over EFA; docs/validation_collectives.md "Held-out sweeps"),
# added after every constant: their figures when added, kept as a ceiling. (median, p90) of |error| in %.
# The 24 collective channels brought the 8×H200 node's 64-512 KiB rows from -16..-19 % to -5..-9 %: all 15.0 -> 9.9.
# EFA's 75 µs per network step on p6 (NET_PLUGIN_REPORTED_LATENCY) brought the 4 × p6-b200 small rows from
# +48..+191 % to -9..+60 %: all (9.9, 54.8) -> (9.4, 36.1), small (27.5, 65.5) -> (9.4, 49.0); its ring rows at
# 64-512 MiB went from -8..+15 % to -17..-5 %, so large (9.0, 14.9) -> (8.7, 15.1).
SWEEPS_CEILING = {
    "all": (9.4, 36.1),
    "large": (8.7, 15.1),
    "small": (9.4, 49.0),
}


def test_heldout_sweeps_summary_does_not_drift() -> None:
    report = validate_file(SWEEPS)
    summary = report.to_json()["summary"]
    assert summary["all"]["n"] == 47
    assert summary["skipped"] == []
    _assert_within(summary, SWEEPS_CEILING)


def test_b200_single_node_mid_sizes_are_estimated_too_fast() -> None:
    """The open finding the sweeps show, pinned so that a fix is noticed: on one 8×B200 node the model's busbw at
    4 MiB is far above the measured 76.5 GB/s (the H200 node of the same sweep is within 1 %)."""
    report = validate_file(SWEEPS)
    by_key = {(r.case.system, int(r.case.message_bytes)): r for r in report.results}
    b200 = by_key[("AWS p6-b200.48xlarge (8x B200)", 4 * 1024**2)]
    h200 = by_key[("8x H200 node (HGX, NVSwitch)", 4 * 1024**2)]
    assert b200.error_pct > 50.0
    assert abs(h200.error_pct) < 5.0


# Azure's nccl-tests sweeps (8×A100, 8×H100 NVLS, 8×H200 NVLS; docs/validation_collectives.md "Held-out Azure
# sweeps"), added after every constant: their figures when added, kept as a ceiling. (median, p90) of |error| in %.
# Re-set once, by NCCL's 24 collective channels on A100 and Hopper nodes: the medians fell (all 14.4 -> 12.2,
# small 18.7 -> 17.3; A100 32-512 KiB from -17..-27 % to -5..-16 %) and the p90s rose (27.6 -> 28.5, 30.1 -> 32.1;
# A100 4-16 KiB, where the measured time is a flat floor, from +1..+37 % to +11..+41 %).
AZURE_CEILING = {
    "all": (12.2, 28.5),
    "large": (2.3, 8.4),
    "small": (17.3, 32.1),
}


def _azure_errors() -> dict[tuple[str, int], float]:
    report = validate_file(AZURE)
    return {(r.case.cluster.gpu.name, int(r.case.message_bytes)): r.error_pct for r in report.results}


def test_heldout_azure_summary_does_not_drift() -> None:
    report = validate_file(AZURE)
    summary = report.to_json()["summary"]
    assert summary["all"]["n"] == 68
    # four 1-2 KiB rows print busbw within 10x of the 0.01 GB/s resolution
    assert [s["row"] for s in summary["skipped"]] == [1, 2, 25, 49]
    _assert_within(summary, AZURE_CEILING)


def test_azure_a100_ring_ramp_is_estimated_too_fast_and_hopper_nvls_large_fits() -> None:
    """The two findings of the Azure sweeps, pinned so that a change is noticed: from 4 to 128 MiB the A100 ring
    is estimated 20-45 % too fast (the development file's older 8×A100 sweep says the same), and NVLS on H100 and
    H200 is within 3 % from 128 MiB up."""
    errors = _azure_errors()
    a100_mid = [errors[("A100-80GB-SXM", 2**k)] for k in range(22, 28)]  # 4 MiB .. 128 MiB
    assert all(e > 15.0 for e in a100_mid), a100_mid
    for gpu in ("H100-SXM", "H200-SXM"):
        large = [errors[(gpu, 2**k)] for k in range(27, 34)]  # 128 MiB .. 8 GiB
        assert all(abs(e) < 5.0 for e in large), (gpu, large)


def test_azure_a100_1_mib_contradicts_the_development_rows_outlier() -> None:
    """The development file's 8×A100 1 MiB row (18.0 GB/s measured) is its largest small-message error; Azure's
    8×A100 at the same size measured 36.2 GB/s, which the model is within 15 % of."""
    assert abs(_azure_errors()[("A100-80GB-SXM", 2**20)]) < 15.0
