"""Calibration fits recover known parameters from synthetic measurements, and produce the core's own types."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from app.calibration.collective_fit import calibrate_network, fit_alpha_beta
from app.calibration.gemm_fit import fit_gemm
from app.calibration.profile import build_profile, hardware_profile
from app.catalog import find_gpu
from app.catalog.fabrics import find_fabric
from app.core.efficiency import GemmEfficiency, HardwareProfile
from app.core.hardware import ClusterSpec
from app.core.network import NetworkParams, Placement, busbw_factor, collective_time, default_network_params
from tests.core.conftest import make_cluster
from tests.paths import DATA_DIR

SHAPES = [(m, n, k) for m in (256, 1024, 4096, 16384) for n in (512, 4096) for k in (1024, 8192)]


def _gemm_doc(eff: GemmEfficiency) -> dict:
    rows = []
    for m, n, k in SHAPES:
        tflops = float(eff.flops_per_s(m, n, k)) / 1e12
        rows.append(
            {
                "m": m,
                "n": n,
                "k": k,
                "dtype": eff.dtype,
                "median_tflops": tflops * 0.97,  # the fit follows the best, as mamf-finder's headline does
                "best_tflops": tflops,
                "mean_tflops": tflops * 0.96,
            }
        )
    return {"rows": rows, "environment": {}}


def test_gemm_fit_recovers_the_curve() -> None:
    truth = GemmEfficiency(max_flops=850e12, half_intensity=60.0, dtype="bf16")
    fit = fit_gemm(_gemm_doc(truth)["rows"], "bf16")
    assert fit.efficiency.max_flops == pytest.approx(850e12, rel=0.02)
    assert fit.efficiency.half_intensity == pytest.approx(60.0, rel=0.05)
    assert fit.error_pct < 1.0
    assert isinstance(fit.efficiency, GemmEfficiency)


def test_alpha_beta_per_protocol_regime() -> None:
    """Three regimes with their own α and β (LL: low latency, low bandwidth; Simple: the reverse)."""
    truth = {"LL": (8e-6, 20e9), "LL128": (15e-6, 150e9), "Simple": (30e-6, 360e9)}
    sizes = [2**p for p in range(10, 31)]
    factor = busbw_factor("all_reduce", 8)
    times = []
    for s in sizes:
        regime = "LL" if s < 64 * 2**10 else "LL128" if s < 4 * 2**20 else "Simple"
        alpha, beta = truth[regime]
        times.append(alpha + s * factor / beta)
    fits = fit_alpha_beta(sizes, times, factor)
    assert [f.protocol for f in fits] == ["LL", "LL128", "Simple"]
    for f in fits:
        alpha, beta = truth[f.protocol]
        assert f.alpha_s == pytest.approx(alpha, rel=0.02)
        assert f.beta_bytes_per_s == pytest.approx(beta, rel=0.02)


def _coll_doc(params: NetworkParams, cluster: ClusterSpec) -> dict:
    rows = []
    for op in ("all_reduce", "all_gather"):
        for group, placement in (("intra", Placement(8, 8)), ("inter", Placement(2, 1))):
            for p in range(12, 31, 2):
                est = collective_time(op, 2**p, placement, cluster, params)
                rows.append(
                    {
                        "op": op,
                        "group": group,
                        "ranks": placement.ranks,
                        "ranks_per_node": placement.ranks_per_node,
                        "nodes": placement.nodes,
                        "size_bytes": 2**p,
                        "time_us": est.time_s * 1e6,
                        "algbw_gbps": est.algbw_bytes_per_s / 1e9,
                        "busbw_gbps": est.busbw_bytes_per_s / 1e9,
                        "wrong": 0,
                    }
                )
    return {"rows": rows, "environment": {}}


def test_network_calibration_recovers_a_slower_cluster() -> None:
    """Measurements from a cluster 35 % slower on NVLink, 20 % on IB, with 3× the launch overhead."""
    cluster = make_cluster(nodes=2, gpu_scaleup=True)
    base = default_network_params()
    truth = replace(
        base,
        launch_overhead_s=36e-6,
        nvlink=replace(base.nvlink, ring_efficiency=base.nvlink.ring_efficiency * 0.65),
        transports={
            **base.transports,
            "infiniband": replace(
                base.transports["infiniband"],
                ring_efficiency=base.transports["infiniband"].ring_efficiency * 0.8,
            ),
        },
    )
    doc = _coll_doc(truth, cluster)
    params, overrides = calibrate_network(doc, cluster)
    assert isinstance(params, NetworkParams)
    assert params.nvlink.ring_efficiency == pytest.approx(truth.nvlink.ring_efficiency, rel=0.05)
    assert params.transports["infiniband"].ring_efficiency == pytest.approx(
        truth.transports["infiniband"].ring_efficiency, rel=0.05
    )
    assert params.launch_overhead_s == pytest.approx(36e-6, rel=0.15)
    # The overrides overlay on the defaults through the core's own loader.
    assert NetworkParams.from_dict(overrides).nvlink.ring_efficiency == pytest.approx(
        params.nvlink.ring_efficiency
    )


def test_profile_report_before_and_after() -> None:
    cluster = make_cluster(nodes=2, gpu_scaleup=True)
    base = default_network_params()
    truth = replace(base, launch_overhead_s=40e-6, nvlink=replace(base.nvlink, ring_efficiency=0.5))
    doc = _coll_doc(truth, cluster)
    doc["rows"] += _gemm_doc(GemmEfficiency(max_flops=600e12, half_intensity=90.0))["rows"]
    doc["environment"] = {"devices": [{"name": "NVIDIA H100 80GB HBM3"}]}
    params, report = build_profile(doc, cluster.gpu, cluster.fabric, source="test")
    coll, gemm = report["collectives"], report["gemm"]
    assert coll["error_after_pct"] < 3.0 < coll["error_before_pct"]
    assert gemm["error_after_pct"] < 1.0 < gemm["error_before_pct"]
    assert len(coll["rows"]) == len(doc["rows"]) - len(SHAPES)
    row = coll["rows"][-1]
    assert {"measured_busbw_gbps", "before_busbw_gbps", "after_busbw_gbps", "alpha_beta_time_us"} <= set(row)
    profile = hardware_profile(params, "h100-test", 3)
    assert isinstance(profile, HardwareProfile)
    assert (profile.name, profile.version) == ("h100-test", "3")
    assert isinstance(profile.gemm, GemmEfficiency) and profile.gemm.max_flops == pytest.approx(
        600e12, rel=0.02
    )
    assert isinstance(profile.network, NetworkParams)
    assert profile.network.launch_overhead_s == pytest.approx(40e-6, rel=0.15)


def test_calibrate_cli_fit_show_list_and_plot(db_url: str, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Imported mamf-finder output → versioned profile with its before/after report and a PNG plot."""

    from app.cli.main import main

    data = DATA_DIR / "bench"

    def run(*args: str) -> tuple[int, str, str]:
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    plot = tmp_path / "report.png"
    code, out, err = run(
        "calibrate", "fit", str(data / "mamf.txt"), "--name", "lab", "--gpu", "H100-SXM", "--plot", str(plot)
    )
    assert code == 0, err
    assert "# profile lab v1 · GPU H100-SXM" in out and "before" in out and "after" in out
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:4] == b"\x89PNG"
    code, out, _ = run("calibrate", "fit", str(data / "all_reduce_perf.txt"), "--name", "lab", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["version"] == 2 and doc["report"]["collectives"]["error_after_pct"] is not None
    code, out, _ = run("calibrate", "list")
    assert "lab" in out and "v2" in out and "v1" in out
    code, out, _ = run("calibrate", "show", "lab", "--version", "1")
    assert code == 0 and "GEMM: mean error factor" in out
    code, _, err = run("calibrate", "show", "lba")
    assert code == 2 and "unknown calibration profile 'lba'" in err and "lab" in err


def test_calibrate_cli_fits_only_a_succeeded_single_attempt_job(db_url: str, capsys) -> None:  # type: ignore[no-untyped-def]
    from sqlmodel import Session

    from app.cli.main import main
    from app.db import get_engine
    from app.models.benchmarks import BenchmarkJob, JobAttempt, Node

    rows = [
        {"m": s, "n": s, "k": s, "dtype": "bf16", "median_tflops": 700 * s / (s + 400), "best_tflops": 1.0}
        for s in (512, 1024, 2048, 4096)
    ]
    with Session(get_engine()) as session:
        node = Node(name="cli-node", token_prefix="cpn_x", token_hash="h-cli")
        session.add(node)
        session.flush()
        jobs = {
            "failed": BenchmarkJob(kind="gemm", params={}, status="failed", attempt=1, result={"rows": rows}),
            "mixed": BenchmarkJob(
                kind="gemm", params={}, status="succeeded", attempt=2, result={"rows": rows}
            ),
            "good": BenchmarkJob(
                kind="gemm",
                params={},
                status="succeeded",
                attempt=1,
                claimed_by=node.id,
                result={"rows": rows},
            ),
        }
        session.add_all(jobs.values())
        session.flush()
        session.add(JobAttempt(job_id=jobs["good"].id, attempt=1, node_id=node.id, status="succeeded"))
        session.commit()
        ids = {k: str(j.id) for k, j in jobs.items()}

    def run(*args: str) -> tuple[int, str]:
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    code, err = run("calibrate", "fit", "--job", ids["failed"], "--name", "cli-gate")
    assert code == 2 and "job_id: job" in err and "is failed: only a succeeded job" in err
    code, err = run("calibrate", "fit", "--job", ids["mixed"], "--name", "cli-gate")
    assert code == 2 and "ran 2 attempts" in err
    code, err = run("calibrate", "fit", "--name", "cli-gate")
    assert code == 2 and "either a RESULT file or --job" in err
    code, err = run("calibrate", "fit", "--job", ids["good"], "--name", "cli-gate", "--gpu", "H100-SXM")
    assert code == 2 and "fail the acceptance check for H100-SXM" in err and "--override-acceptance" in err
    code, err = run(
        "calibrate",
        "fit",
        "--job",
        ids["good"],
        "--name",
        "cli-gate",
        "--gpu",
        "H100-SXM",
        "--override-acceptance",
    )
    assert code == 0, err


def test_latency_bound_data_keeps_efficiencies_physical() -> None:
    """Tiny messages say nothing about bandwidth: the fit must not push efficiencies above line rate."""
    rows = [
        {
            "op": op,
            "group": "intra",
            "ranks": 2,
            "ranks_per_node": 2,
            "nodes": 1,
            "size_bytes": s,
            "time_us": 300.0 + (s % 7),
            "busbw_gbps": 0.0,
            "wrong": 0,
        }
        for op in ("all_reduce", "all_to_all")
        for s in (8, 64, 512, 1024)
    ]
    params, _ = calibrate_network({"rows": rows}, make_cluster(nodes=2, gpu_scaleup=True))
    for tier in (params.nvlink, params.transports["infiniband"]):
        assert 0 < tier.ring_efficiency <= 1.0 and 0 < tier.all_to_all_efficiency <= 1.0
    assert params.launch_overhead_s > 100e-6  # the 300 µs floor went into latency, not bandwidth


def test_a_profile_fitted_across_nodes_leaves_nvlink_communication_alone() -> None:
    """Only inter-node rows (one rank per node, a slower fabric with more latency): the fit reproduces them,
    and a tensor-parallel all-reduce on NVLink costs exactly what it did with the defaults."""
    cluster = make_cluster(nodes=2, gpu_scaleup=True)
    base = default_network_params()
    ib = base.transports["infiniband"]
    truth = replace(
        base,
        transports={
            **base.transports,
            "infiniband": replace(
                ib,
                ring_efficiency=ib.ring_efficiency * 0.7,
                step_latency_s={p: v * 3 for p, v in ib.step_latency_s.items()},
            ),
        },
    )
    doc = _coll_doc(truth, cluster)
    doc["rows"] = [r for r in doc["rows"] if r["group"] == "inter"]
    _, overrides = calibrate_network(doc, cluster)
    assert "launch_overhead_s" not in overrides and "nvlink" not in overrides
    fitted = NetworkParams.from_dict(overrides, base)
    for size in (2**20, 64 * 2**20, 2**30):  # TP all-reduce inside a node
        tp = collective_time("all_reduce", size, Placement(8, 8), cluster, fitted).time_s
        assert tp == collective_time("all_reduce", size, Placement(8, 8), cluster, base).time_s
    errors = [
        abs(
            math.log(
                collective_time(r["op"], r["size_bytes"], Placement(2, 1), cluster, fitted).time_s
                * 1e6
                / r["time_us"]
            )
        )
        for r in doc["rows"]
    ]
    assert max(errors) < math.log(1.15)  # the inter-node rows are reproduced within 15 %


DATA = DATA_DIR / "bench"


def test_a_tagged_nccl_tests_log_without_device_list_imports_with_its_real_rank_count() -> None:
    """mpirun --tag-output prefixes every line; with no device list the 16 ranks come from busbw / algbw
    (438.85 / 234.05 = 1.875 = 2·15/16), the two nodes from --nodes."""
    from app.bench.importers import import_file

    doc = import_file(DATA / "all_reduce_p5_2nodes_tag_output.log")
    (row,) = doc["rows"]
    assert (row["op"], row["size_bytes"], row["busbw_gbps"], row["ranks"]) == (
        "all_reduce",
        2**31,
        438.85,
        16,
    )
    assert (row["nodes"], row["ranks_per_node"]) == (1, 16) and "pass --nodes" in doc["notes"][0]
    two = import_file(DATA / "all_reduce_p5_2nodes_tag_output.log", nodes=2)
    assert (two["rows"][0]["nodes"], two["rows"][0]["ranks_per_node"]) == (2, 8)
    assert two["environment"]["hostnames"] == []  # nothing invented


def test_srun_labels_are_stripped_and_device_lists_still_win(tmp_path: Path) -> None:
    from app.bench.importers import import_file

    plain = import_file(DATA / "all_reduce_perf.txt")
    labelled = tmp_path / "all_reduce_perf.log"
    labelled.write_text(
        "\n".join(f"0: {line}" for line in (DATA / "all_reduce_perf.txt").read_text().splitlines())
    )
    again = import_file(labelled)
    assert (
        again["rows"] == plain["rows"] and again["environment"]["devices"] == plain["environment"]["devices"]
    )
    assert "notes" not in plain


def test_a_log_whose_ranks_cannot_be_told_is_refused() -> None:
    from app.bench.importers import import_text

    log = "\n".join(
        [
            "#       size         count      type   redop    root     time   algbw   busbw #wrong",
            "     1048576        262144     float    none       0    40.00   26.21   26.21      0",
        ]
    )
    with pytest.raises(ValueError, match="pass --ranks"):
        import_text(log, op="broadcast")
    assert import_text(log, op="broadcast", ranks=8)["rows"][0]["ranks"] == 8


def test_gemm_fit_follows_the_best_and_reports_held_back_shapes() -> None:
    """Measured 20 % below the H100 default curve: the fit (on best TFLOP/s) recovers the curve, and on the
    shapes held back from it the error falls from the defaults' 25 % to nothing."""
    gpu = find_gpu("H100-SXM")
    default = GemmEfficiency.for_gpu(gpu, "bf16", sustained=False)
    doc = _gemm_doc(replace(default, max_flops=default.max_flops * 0.8))
    params, report = build_profile(doc, gpu, find_fabric("ib-ndr-8x400"))
    assert params["gemm"]["bf16"]["max_flops"] == pytest.approx(default.max_flops * 0.8, rel=0.01)
    assert params["gemm_measure"] == "best"
    held = report["gemm"]["held_back"]
    assert held["points"] == len(SHAPES) // 4
    assert held["error_before_pct"] == pytest.approx(25.0, rel=0.01) and held["error_after_pct"] < 1.0
    from app.services.calibration import check_generalises

    check_generalises(report)  # improves: no error


def test_a_fit_that_does_not_generalise_needs_force() -> None:
    """The held-back shapes measure exactly the defaults, the others 40 % below: the fit follows the others
    and is worse than the defaults where it was not fitted."""
    from app.calibration.held_back import gemm_shape_key, split_held_back
    from app.core.errors import SpecError
    from app.services.calibration import check_generalises

    gpu = find_gpu("H100-SXM")
    default = GemmEfficiency.for_gpu(gpu, "bf16", sustained=False)
    doc = _gemm_doc(default)
    _, held = split_held_back(doc["rows"], gemm_shape_key)
    for row in doc["rows"]:
        if row not in held:
            row["best_tflops"] *= 0.6
    _, report = build_profile(doc, gpu, find_fabric("ib-ndr-8x400"))
    held_report = report["gemm"]["held_back"]
    assert held_report["error_before_pct"] < 1.0 < held_report["error_after_pct"]
    with pytest.raises(SpecError) as refused:
        check_generalises(report)
    assert refused.value.problems[0].field == "force" and "held back" in refused.value.problems[0].message
    check_generalises(report, force=True)
    assert "saved with force" in report["notes"][-1]


def test_network_fit_reports_held_back_sizes() -> None:
    cluster = make_cluster(nodes=2, gpu_scaleup=True)
    base = default_network_params()
    truth = replace(base, nvlink=replace(base.nvlink, ring_efficiency=base.nvlink.ring_efficiency * 0.65))
    _, report = build_profile(_coll_doc(truth, cluster), find_gpu("H100-SXM"), find_fabric("ib-ndr-8x400"))
    held = report["collectives"]["held_back"]
    assert held["points"] == 10  # every fourth of 40 rows
    assert held["error_after_pct"] < held["error_before_pct"]
