"""Fits from real logs come closer than the defaults on points they did not see, and the estimator's collective
times use a profile's measured α/β for the tier and regime it was measured on.

Figures at the time of writing (mean error factor, tests/data/bench/SOURCES.md for the logs):
- GCP A3-Mega, all_reduce, 16 H100 on 2 nodes, 8 B-8 GiB (declared fabric roce-8x200): held-back sizes
  123.8 % with the defaults, 17.8 % with the scaled model alone, 8.7 % with the measured α/β (all 31 rows:
  139.6 % → 9.4 %). The defaults' small-message latency (≈ 40 µs against ≈ 125 µs measured) dominates "before".
- H100 mamf-finder bf16 (one GPU's 3375-shape sweep, 126-row excerpt): held-back shapes 27.1 % → 20.4 %; a
  second GPU's file with none of the same shapes (held out) 16.1 % → 13.9 %. fp8: held-back 39.6 % → 25.9 %.
"""

from __future__ import annotations

import pytest

from app.bench.importers import import_file
from app.calibration.gemm_fit import fit_all_dtypes, gemm_rows
from app.calibration.profile import _gemm_table, _mean_error, build_profile, hardware_profile
from app.catalog import find_gpu
from app.catalog.fabrics import find_fabric
from app.core.network import Placement, collective_time, default_network_params
from app.core.network_measured import MeasuredRegime, measured_time
from tests.core.conftest import make_cluster
from tests.paths import DATA_DIR

DATA = DATA_DIR / "bench"
H100 = find_gpu("H100-SXM")


@pytest.fixture(scope="module")
def a3_mega() -> tuple[dict, dict]:
    doc = import_file(DATA / "all_reduce_a3mega_2nodes.log")
    return build_profile(doc, H100, find_fabric("roce-8x200"))


def test_a3_mega_fit_beats_the_defaults_on_held_back_sizes(a3_mega: tuple[dict, dict]) -> None:
    params, report = a3_mega
    held = report["collectives"]["held_back"]
    assert held["points"] == 8
    assert held["error_after_pct"] < held["error_before_pct"]
    # the measured α/β lines beat the scaled model on the NIC tier's unseen sizes, so the profile uses them there
    assert held["tiers"]["roce"]["alpha_beta_pct"] < held["tiers"]["roce"]["model_only_pct"]
    assert params["alpha_beta_tiers"] == ["roce"]
    assert held["error_after_pct"] < 10.0  # 8.7 % (see the module docstring)
    coll = report["collectives"]
    assert coll["error_after_pct"] < coll["error_model_only_pct"] < coll["error_before_pct"]


def test_the_estimator_uses_the_measured_line_on_its_tier_only(a3_mega: tuple[dict, dict]) -> None:
    params, _ = a3_mega
    network = hardware_profile(params, "a3", 1).network
    cluster = make_cluster(nodes=2, fabric="roce-8x200")
    row = next(
        r for r in import_file(DATA / "all_reduce_a3mega_2nodes.log")["rows"] if r["size_bytes"] == 2**30
    )
    est = collective_time("all_reduce", 2**30, Placement(16, 8), cluster, network)
    assert est.algorithm == "measured" and est.protocol == "Simple"
    assert est.time_s * 1e6 == pytest.approx(row["time_us"], rel=0.10)  # 6759 µs measured
    # tensor parallelism inside a node runs on NVLink, which this log never measured: the model, unchanged
    nvlink = collective_time("all_reduce", 2**30, Placement(8, 8), cluster, network)
    assert nvlink.algorithm != "measured"
    assert nvlink.time_s == pytest.approx(
        collective_time("all_reduce", 2**30, Placement(8, 8), cluster, default_network_params()).time_s
    )
    # forcing an algorithm (NCCL_ALGO) asks for the model
    forced = collective_time("all_reduce", 2**30, Placement(16, 8), cluster, network, algorithm="ring")
    assert forced.algorithm == "ring"


def test_a_measured_line_extends_to_other_rank_counts_by_ring_steps() -> None:
    line = MeasuredRegime("Simple", 0, float("inf"), alpha_s=100e-6, beta_bytes_per_s=300e9, points=5)
    table = {"roce": {"all_reduce@16": (line,)}}
    same = measured_time(table, "roce", "all_reduce", 16, 2**30, 2 * 15 / 16)
    assert same is not None and same.alpha_s == pytest.approx(100e-6)
    wider = measured_time(table, "roce", "all_reduce", 32, 2**30, 2 * 31 / 32)
    assert wider is not None and wider.measured_ranks == 16
    assert wider.alpha_s == pytest.approx(100e-6 * 62 / 30)  # 2(n−1) ring steps
    assert wider.time_s == pytest.approx(100e-6 * 62 / 30 + 2**30 * 2 * 31 / 32 / 300e9)
    assert measured_time(table, "nvlink", "all_reduce", 16, 2**30, 1.875) is None
    assert measured_time(table, "roce", "all_gather", 16, 2**30, 0.9375) is None


def test_h100_mamf_fit_beats_the_defaults_on_held_back_and_held_out_shapes() -> None:
    doc = import_file(DATA / "mamf_h100_bf16_gpu0.txt")
    _, report = build_profile(doc, H100, find_fabric("ib-ndr-8x400"))
    held = report["gemm"]["held_back"]
    assert held["error_after_pct"] < held["error_before_pct"]
    fits = {d: f.efficiency for d, f in fit_all_dtypes(doc).items()}
    other = _gemm_table(gemm_rows(import_file(DATA / "mamf_h100_bf16_gpu1.txt")), fits, H100)
    before = _mean_error([t["before_err_pct"] for t in other])
    after = _mean_error([t["after_err_pct"] for t in other])
    assert before is not None and after is not None and after < before


def test_h100_fp8_fit_beats_the_defaults_on_held_back_shapes() -> None:
    _, report = build_profile(import_file(DATA / "mamf_h100_fp8_gpu0.txt"), H100, find_fabric("ib-ndr-8x400"))
    held = report["gemm"]["held_back"]
    assert held["error_after_pct"] < held["error_before_pct"]
