"""From a result document to a calibrated hardware profile and its predicted-vs-measured report.

`build_profile(doc, gpu, fabric)` returns the profile parameters (JSON-ready) and the report; stored in
the CalibrationProfile table by app/services/calibration.py. `hardware_profile(params, name, version)`
turns stored parameters back into the core's `HardwareProfile(gemm, network, name, version)`.

"Before" predictions use the published defaults the estimator would use without calibration
(`GemmEfficiency.for_gpu` from the catalog's measured matmul TFLOP/s; `default_network_params()`), for
the declared GPU and fabric; "after" predictions use the fitted curve and parameters.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, replace
from typing import Any

from app.benchproto.hosts import environment_without_hosts
from app.benchproto.schema import attention_rows
from app.calibration.collective_fit import (
    calibrate_network,
    collective_rows,
    fit_alpha_beta_by_tier,
    placement_of,
    predict_time_s,
    tier_of,
)
from app.calibration.gemm_fit import fit_all_dtypes, fit_gemm, gemm_rows, measured_tflops
from app.calibration.held_back import collective_key, gemm_shape_key, split_held_back
from app.catalog.fabrics import fabric_for_node
from app.core.attention import ATTENTION_KERNELS, CUDNN, FLASH_ATTENTION_2
from app.core.efficiency import GemmEfficiency, HardwareProfile
from app.core.hardware import ClusterSpec, FabricSpec, GPUSpec
from app.core.network import NetworkParams, busbw_factor, default_network_params

DEFAULT_GPU = "H100-SXM"
PREFERRED_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8")


def cluster_for(doc: dict[str, Any], gpu: GPUSpec, fabric: FabricSpec) -> ClusterSpec:
    rows = collective_rows(doc)
    nodes = max([placement_of(r).nodes for r in rows] or [1])
    rpn = max([placement_of(r).ranks_per_node for r in rows] or [1])
    gpn = max(gpu.default_gpus_per_node, rpn)
    return ClusterSpec(
        gpu=gpu,
        num_nodes=max(1, nodes),
        gpus_per_node=gpn,
        scaleup_kind=gpu.scaleup_kind,
        fabric=fabric_for_node(fabric, gpn),  # the preset placed on these nodes, as every cluster places it
    )


def _err_pct(predicted: float | None, measured: float) -> float | None:
    if predicted is None or measured <= 0:
        return None
    return (predicted - measured) / measured * 100.0


def _mean_error(values: list[float | None]) -> float | None:
    """Mean error factor over rows, in %: exp(mean |ln(predicted / measured)|) − 1.

    Symmetric in over- and under-prediction (a 2× too fast and a 2× too slow prediction both count as
    100 %), unlike the mean absolute percentage error, which can never exceed 100 % for predictions that
    are too fast. Inputs are the rows' signed percentage errors.
    """
    logs = [abs(math.log1p(v / 100.0)) for v in values if v is not None and v > -100.0]
    return (math.exp(statistics.fmean(logs)) - 1.0) * 100.0 if logs else None


def refuse_wrong_results(doc: dict[str, Any]) -> None:
    """ValueError for a document with any wrong element: a machine that computes wrong answers is broken,
    and its timings say nothing about the hardware the profile is named after."""
    bad = [r for r in doc.get("rows", []) if int(r.get("wrong") or 0) > 0]
    if bad:
        first = bad[0]
        where = first.get("op") or f"{first.get('m')}x{first.get('n')}x{first.get('k')} {first.get('dtype')}"
        raise ValueError(
            f"{len(bad)} row(s) have wrong elements (first: {where}, {first['wrong']} wrong): "
            "results that fail their correctness check are not fitted"
        )


def build_profile(
    doc: dict[str, Any], gpu: GPUSpec, fabric: FabricSpec, source: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(params, report) for a result document measured on `gpu` GPUs linked by `fabric`."""
    refuse_wrong_results(doc)
    params: dict[str, Any] = {
        "gpu": gpu.name,
        "fabric": fabric.name,
        "benchmark_version": doc.get("benchmark_version"),
        # no host names: a profile is read by every plans:read holder, a node's host by administrators only
        "environment": {
            k: v
            for k, v in environment_without_hosts(doc.get("environment") or {}).items()
            if k in ("torch", "cuda", "nccl", "driver", "devices", "hosts")
        },
    }
    report: dict[str, Any] = {"gpu": gpu.name, "fabric": fabric.name, "notes": []}

    g_rows = gemm_rows(doc)
    if g_rows:
        fits = fit_all_dtypes(doc, source=source)
        params["gemm"] = {d: asdict(f.efficiency) for d, f in fits.items()}
        params["gemm_measure"] = "best"
        primary = next((d for d in PREFERRED_DTYPES if d in fits), next(iter(fits)))
        params["gemm_primary_dtype"] = primary
        table = _gemm_table(g_rows, {d: f.efficiency for d, f in fits.items()}, gpu)
        report["gemm"] = {
            "rows": table,
            "measure": "best TFLOP/s per shape (median where no best was recorded)",
            "error_before_pct": _mean_error([t["before_err_pct"] for t in table]),
            "error_after_pct": _mean_error([t["after_err_pct"] for t in table]),
            "held_back": _gemm_held_back(g_rows, gpu),
            "fits": {
                d: {
                    "max_tflops": f.efficiency.max_flops / 1e12,
                    "half_intensity": f.efficiency.half_intensity,
                    "points": f.points,
                    "error_pct": f.error_pct,
                }
                for d, f in fits.items()
            },
        }

    c_rows = collective_rows(doc)
    if c_rows:
        cluster = cluster_for(doc, gpu, fabric)
        defaults = default_network_params()
        _, overrides = calibrate_network(doc, cluster, defaults)
        alpha_beta = fit_alpha_beta_by_tier(doc, cluster)
        params["network"] = {**overrides, "name": "calibrated", "source": source or "calibration"}
        params["alpha_beta"] = {
            tier: {key: [f.to_dict() for f in fits] for key, fits in ops.items()}
            for tier, ops in alpha_beta.items()
        }
        params["cluster"] = {"gpus_per_node": cluster.gpus_per_node, "nodes": cluster.num_nodes}
        held = _collectives_held_back(doc, c_rows, cluster, defaults)
        params["alpha_beta_tiers"] = alpha_beta_tiers(held)
        report["collectives"] = _collectives_report(c_rows, cluster, params, defaults, held)
    a_rows = attention_rows(doc)
    if a_rows:
        measured, table, notes = fit_attention(a_rows, gpu)
        if measured:
            params["attention"] = measured
        report["attention"] = {"rows": table, "kernels": measured}
        report["notes"] += notes
    if not g_rows and not c_rows and not a_rows:
        raise ValueError("the result has no GEMM, collective or attention rows to calibrate from")
    params["gemm_dtypes"] = sorted(params.get("gemm") or {})
    params["measured_on"] = "cpu" if measured_on_cpu(params) else "gpu"
    report["measured_on"] = params["measured_on"]
    if params["measured_on"] == "cpu":
        report["notes"].append(
            f"measured on CPU (gloo): 'before' shows the catalog defaults for {gpu.name}, which a CPU is not; "
            "the fit itself is valid for the measured device"
        )
    return params, report


def calibrated_network(params: dict[str, Any], base: NetworkParams | None = None) -> NetworkParams:
    """The network parameters a profile gives the estimator: the scaled model, and the measured α/β lines
    (app/core/network_measured.py) of the tiers where they beat the scaled model on held-back measurements
    (params["alpha_beta_tiers"]), which collective_time then uses for that tier."""
    tiers = set(params.get("alpha_beta_tiers") or [])
    lines = {t: fits for t, fits in (params.get("alpha_beta") or {}).items() if t in tiers}
    network = params.get("network") or {}
    return NetworkParams.from_dict(
        {**network, "alpha_beta": lines, "name": network.get("name", "calibrated")},
        base or default_network_params(),
    )


def _collective_row(
    r: dict[str, Any],
    cluster: ClusterSpec,
    defaults: NetworkParams,
    model: NetworkParams,
    fitted: NetworkParams,
) -> dict[str, Any]:
    measured_s = r["time_us"] / 1e6
    before_s = predict_time_s(r, cluster, defaults)
    model_s = predict_time_s(r, cluster, model)
    after_s = predict_time_s(r, cluster, fitted)
    factor = busbw_factor(r["op"], int(r.get("ranks") or 2))
    size = r["size_bytes"]
    return {
        "op": r["op"],
        "group": r.get("group", "all"),
        "ranks": r.get("ranks"),
        "tier": tier_of(r, cluster),
        "size_bytes": size,
        "measured_time_us": r["time_us"],
        "measured_busbw_gbps": r["busbw_gbps"],
        "before_time_us": before_s * 1e6,
        "model_only_time_us": model_s * 1e6,
        "after_time_us": after_s * 1e6,
        "alpha_beta_time_us": after_s * 1e6,
        "before_busbw_gbps": size / before_s * factor / 1e9 if before_s > 0 else None,
        "after_busbw_gbps": size / after_s * factor / 1e9 if after_s > 0 else None,
        "before_err_pct": _err_pct(before_s, measured_s),
        "model_only_err_pct": _err_pct(model_s, measured_s),
        "after_err_pct": _err_pct(after_s, measured_s),
        "alpha_beta_err_pct": _err_pct(after_s, measured_s),
    }


def alpha_beta_tiers(held: dict[str, Any] | None) -> list[str]:
    """The tiers whose measured α/β lines reproduce held-back measurements better than the scaled model does
    (none without held-back rows: the lines have more free parameters, so only unseen points can tell)."""
    return sorted(
        tier
        for tier, errs in ((held or {}).get("tiers") or {}).items()
        if errs["alpha_beta_pct"] is not None
        and errs["model_only_pct"] is not None
        and errs["alpha_beta_pct"] < errs["model_only_pct"]
    )


def _collectives_report(
    rows: list[dict[str, Any]],
    cluster: ClusterSpec,
    params: dict[str, Any],
    defaults: NetworkParams,
    held: dict[str, Any] | None,
) -> dict[str, Any]:
    """Measured against the defaults ("before"), the scaled model alone ("model only") and the profile as the
    estimator uses it, measured α/β included ("after"), on every row and on held-back rows."""
    model = NetworkParams.from_dict(params["network"], defaults)
    fitted = calibrated_network(params, defaults)
    table = [_collective_row(r, cluster, defaults, model, fitted) for r in rows]
    return {
        "rows": table,
        "after": "the profile as the estimator uses it: the scaled model, and measured α/β per regime on the "
        "tiers where those beat the model on held-back rows",
        "error_before_pct": _mean_error([t["before_err_pct"] for t in table]),
        "error_model_only_pct": _mean_error([t["model_only_err_pct"] for t in table]),
        "error_after_pct": _mean_error([t["after_err_pct"] for t in table]),
        "error_alpha_beta_pct": _mean_error([t["alpha_beta_err_pct"] for t in table]),
        "alpha_beta_tiers": params.get("alpha_beta_tiers", []),
        "held_back": held,
    }


def default_gemm_curve(gpu: GPUSpec, dtype: str) -> GemmEfficiency | None:
    """What the uncalibrated model expects a GEMM benchmark to measure: the catalog's burst curve (the
    sustained-load derating applies to training, not to a short benchmark loop)."""
    try:
        return GemmEfficiency.for_gpu(gpu, dtype, sustained=False)
    except KeyError:
        return None


def _gemm_table(
    rows: list[dict[str, Any]], fitted: dict[str, GemmEfficiency], gpu: GPUSpec
) -> list[dict[str, Any]]:
    table = []
    for r in rows:
        before_eff = default_gemm_curve(gpu, r["dtype"])
        measured = measured_tflops(r)
        before = float(before_eff.flops_per_s(r["m"], r["n"], r["k"])) / 1e12 if before_eff else None
        after = (
            float(fitted[r["dtype"]].flops_per_s(r["m"], r["n"], r["k"])) / 1e12
            if r["dtype"] in fitted
            else None
        )
        table.append(
            {
                "m": r["m"],
                "n": r["n"],
                "k": r["k"],
                "dtype": r["dtype"],
                "label": r.get("label", ""),
                "measured_tflops": measured,
                "best_tflops": r.get("best_tflops"),
                "median_tflops": r.get("median_tflops"),
                "before_tflops": before,
                "after_tflops": after,
                "before_err_pct": _err_pct(before, measured),
                "after_err_pct": _err_pct(after, measured),
            }
        )
    return table


def _gemm_held_back(rows: list[dict[str, Any]], gpu: GPUSpec) -> dict[str, Any] | None:
    """Defaults and a fit on the other rows, compared on every fourth shape (app.calibration.held_back)."""
    kept, held = split_held_back(rows, gemm_shape_key)
    fitted = {}
    for dtype in sorted({r["dtype"] for r in held}):
        train = [r for r in kept if r["dtype"] == dtype]
        if len(train) >= 2:
            fitted[dtype] = fit_gemm(train, dtype).efficiency
    held = [r for r in held if r["dtype"] in fitted]
    if not held:
        return None
    table = _gemm_table(held, fitted, gpu)
    return {
        "points": len(held),
        "error_before_pct": _mean_error([t["before_err_pct"] for t in table]),
        "error_after_pct": _mean_error([t["after_err_pct"] for t in table]),
    }


def _collectives_held_back(
    doc: dict[str, Any], rows: list[dict[str, Any]], cluster: ClusterSpec, defaults: NetworkParams
) -> dict[str, Any] | None:
    """Defaults and network parameters fitted on the other rows, compared on every fourth measurement."""
    kept, held = split_held_back(rows, collective_key)
    if not held:
        return None
    kept_doc = {**doc, "rows": kept}
    _, overrides = calibrate_network(kept_doc, cluster, defaults)
    lines = fit_alpha_beta_by_tier(kept_doc, cluster)
    model = NetworkParams.from_dict({**overrides, "name": "held-back fit"}, defaults)
    measured = {
        "network": {**overrides, "name": "held-back fit"},
        "alpha_beta": lines,
        "alpha_beta_tiers": list(lines),
    }
    with_lines = calibrated_network(measured, defaults)
    errors: dict[str, list[tuple[float | None, float | None, float | None]]] = {}
    for r in held:
        measured_s = r["time_us"] / 1e6
        errors.setdefault(tier_of(r, cluster), []).append(
            (
                _err_pct(predict_time_s(r, cluster, defaults), measured_s),
                _err_pct(predict_time_s(r, cluster, model), measured_s),
                _err_pct(predict_time_s(r, cluster, with_lines), measured_s),
            )
        )
    tiers = {
        tier: {
            "points": len(errs),
            "model_only_pct": _mean_error([e[1] for e in errs]),
            "alpha_beta_pct": _mean_error([e[2] for e in errs]),
        }
        for tier, errs in errors.items()
    }
    chosen = set(alpha_beta_tiers({"tiers": tiers}))
    every = [e for errs in errors.values() for e in errs]
    after = [e[2] if tier in chosen else e[1] for tier, errs in errors.items() for e in errs]
    return {
        "points": len(held),
        "error_before_pct": _mean_error([e[0] for e in every]),
        "error_model_only_pct": _mean_error([e[1] for e in every]),
        "error_alpha_beta_pct": _mean_error([e[2] for e in every]),
        "error_after_pct": _mean_error(after),
        "tiers": tiers,
    }


def fit_attention(
    rows: list[dict[str, Any]], gpu: GPUSpec
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Per kernel the longest sequence's median forward/backward TFLOP/s as shares of the GPU's dense 16-bit peak
    (what app.core.attention takes), the measured-vs-published table and notes. Rows of PyTorch's own choice
    ("auto") or of the unfused math path are reported but not used: the estimate needs the kernel's name."""
    peak = gpu.peak("bf16") / 1e12
    published = {k: v for (cc, k), v in ATTENTION_KERNELS.items() if cc == gpu.compute_capability}
    table = []
    for r in rows:
        ref = published.get(r["attention_kernel"])
        table.append(
            {
                "kernel": r["attention_kernel"],
                "seq_len": r["seq_len"],
                "batch": r.get("batch"),
                "heads": r.get("heads"),
                "head_dim": r.get("head_dim"),
                "measured_forward_tflops": r["forward_tflops"],
                "measured_backward_tflops": r["backward_tflops"],
                "published_forward_tflops": ref.forward * peak if ref else None,
                "published_backward_tflops": ref.backward * peak if ref else None,
            }
        )
    measured: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for kernel in (FLASH_ATTENTION_2, CUDNN):
        mine = [r for r in rows if r["attention_kernel"] == kernel]
        if not mine:
            continue
        longest = max(r["seq_len"] for r in mine)
        at = [r for r in mine if r["seq_len"] == longest]
        fwd = statistics.median(r["forward_tflops"] for r in at)
        bwd = statistics.median(r["backward_tflops"] for r in at)
        measured[kernel] = {
            "forward_share_of_peak": fwd / peak,
            "backward_share_of_peak": bwd / peak,
            "forward_tflops": fwd,
            "backward_tflops": bwd,
            "seq_len": longest,
        }
        if longest < 8192:
            notes.append(
                f"{kernel}: the longest sequence measured is {longest} tokens; the published figures it replaces "
                "are long-sequence (16K–128K) rates, so long-context estimates may be too slow"
            )
    skipped = sorted({r["attention_kernel"] for r in rows} - set(measured))
    if skipped:
        notes.append(
            f"attention rows of {', '.join(skipped)} are reported but not calibrated: the estimate needs a named "
            "kernel (flash-attention-2 or cudnn)"
        )
    return measured, table, notes


def hardware_profile(params: dict[str, Any], name: str, version: int | str, gpu: str = "") -> HardwareProfile:
    """The core's HardwareProfile from stored profile parameters."""
    gemm = None
    fits = params.get("gemm") or {}
    gemms = {
        str(d): GemmEfficiency(
            max_flops=float(data["max_flops"]),
            half_intensity=float(data["half_intensity"]),
            dtype=str(data.get("dtype", d)),
            source=str(data.get("source", "")),
        )
        for d, data in fits.items()
    }
    if gemms:
        gemm = gemms[str(params.get("gemm_primary_dtype") or next(iter(gemms)))]
    network = None
    if params.get("network"):
        network = replace(calibrated_network(params), name=name, version=str(version))
    attention = {
        str(kernel): (float(m["forward_share_of_peak"]), float(m["backward_share_of_peak"]))
        for kernel, m in (params.get("attention") or {}).items()
    }
    return HardwareProfile(
        gemm=gemm,
        network=network,
        name=name,
        version=str(version),
        attention=attention,
        gpu=str(gpu or params.get("gpu") or ""),
        gemms={g.dtype: g for g in gemms.values()},
        fabric=str(params.get("fabric") or ""),
        measured_on=str(params.get("measured_on") or ("cpu" if measured_on_cpu(params) else "")),
    )


def measured_on_cpu(params: dict[str, Any]) -> bool:
    """True when every device of the benchmark's environment was a CPU (a gloo run)."""
    devices = (params.get("environment") or {}).get("devices") or []
    return bool(devices) and all(str(d.get("name", "")).startswith("cpu") for d in devices)
