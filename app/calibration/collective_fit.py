"""Collective α/β per tier and protocol regime, and the mapping onto the core's NetworkParams.

1. α–β fit (Hockney 1994): per (tier, op) and per NCCL protocol regime, least squares of
   time = α + size·busbw_factor / β, i.e. α is the per-call latency and β the bus bandwidth. Regimes follow
   NCCL's protocol choice by message size (LL for small, LL128 for medium, Simple for large messages:
   github.com/NVIDIA/nccl src/graph/tuning.cc; the thresholds below are those of its default tuning on
   NVLink/IB systems, where LL gives way near 64 KiB and LL128 near a few MiB).
2. NetworkParams: the core model (app/core/network.py) is scaled until it reproduces the measurements:
   each tier's ring (or all-to-all) efficiency by the measured/predicted bus bandwidth of the largest
   messages, then the launch overhead and the tier's per-step latency by the residual of the smallest
   ones; repeated a few times because the two terms overlap. The result is a partial dict that
   `NetworkParams.from_dict` overlays on the published defaults.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.core.hardware import ClusterSpec
from app.core.network import (
    NetworkParams,
    Placement,
    TierParams,
    busbw_factor,
    collective_time,
    default_network_params,
)
from app.core.network_measured import MeasuredRegime, ring_steps

KiB, MiB = 2**10, 2**20
REGIMES: tuple[tuple[str, float, float], ...] = (
    ("LL", 0, 64 * KiB),
    ("LL128", 64 * KiB, 4 * MiB),
    ("Simple", 4 * MiB, math.inf),
)
MAX_EFFICIENCY = 1.0
MIN_EFFICIENCY = 1e-9
STREAMING_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv")


# One home for the regime lines and their lookup: the collective model's own (app/core/network_measured.py).
RegimeFit = MeasuredRegime


def _line(x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(α, 1/β) of t = α + x/β by relative least squares, with α ≥ 0 and β > 0."""
    w = 1.0 / t
    if len(x) >= 2 and np.ptp(x) > 0:
        a = np.vstack([np.ones_like(x), x]).T * w[:, None]
        alpha, inv_beta = np.linalg.lstsq(a, t * w, rcond=None)[0]
    else:
        alpha, inv_beta = 0.0, float(np.mean(t / x))
    if inv_beta <= 0:  # latency-bound throughout: bandwidth not observable here
        return float(np.min(t)), 1e-30
    if alpha < 0:
        inv_beta = float(np.sum(w * w * x * t) / np.sum(w * w * x * x))
        alpha = 0.0
    return float(alpha), float(inv_beta)


def fit_alpha_beta(sizes: list[float], times_s: list[float], factor: float) -> list[RegimeFit]:
    """Per-regime α/β; a regime with fewer than 2 sizes is folded into its neighbour."""
    pts = sorted((float(s), float(t)) for s, t in zip(sizes, times_s, strict=True) if t > 0 and s > 0)
    groups: list[tuple[str, float, float, list[tuple[float, float]]]] = []
    for name, lo, hi in REGIMES:
        members = [p for p in pts if lo <= p[0] < hi]
        if not members:
            continue
        if len(members) < 2 and groups:
            prev = groups[-1]
            groups[-1] = (prev[0], prev[1], hi, prev[3] + members)
        else:
            groups.append((name, lo, hi, members))
    if len(groups) > 1 and len(groups[0][3]) < 2:
        first, second = groups[0], groups[1]
        groups[:2] = [(second[0], first[1], second[2], first[3] + second[3])]
    fits = []
    for name, lo, hi, members in groups:
        x = np.array([s * factor for s, _ in members])
        t = np.array([t for _, t in members])
        alpha, inv_beta = _line(x, t)
        fits.append(RegimeFit(name, lo, hi, alpha, 1.0 / inv_beta, len(members)))
    return fits


def collective_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for r in doc.get("rows", [])
        if "busbw_gbps" in r and r.get("time_us", 0) > 0 and r.get("size_bytes")
    ]


def placement_of(row: dict[str, Any]) -> Placement:
    ranks = int(row.get("ranks") or 2)
    rpn = int(row.get("ranks_per_node") or ranks)
    return Placement(ranks=ranks, ranks_per_node=min(rpn, ranks))


def tier_of(row: dict[str, Any], cluster: ClusterSpec) -> str:
    """The tier a measured group exercises: the scale-up link inside a node, the NIC transport across."""
    p = placement_of(row)
    if p.nodes <= 1:
        kind = cluster.scaleup_kind
        return "pcie" if kind in ("pcie", "none") else "xgmi" if kind == "xgmi" else "nvlink"
    return cluster.fabric.transport


def fit_alpha_beta_by_tier(
    doc: dict[str, Any], cluster: ClusterSpec
) -> dict[str, dict[str, list[RegimeFit]]]:
    by_key: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in collective_rows(doc):
        by_key.setdefault((tier_of(row, cluster), row["op"], int(row.get("ranks") or 2)), []).append(row)
    out: dict[str, dict[str, list[RegimeFit]]] = {}
    for (tier, op, ranks), rows in sorted(by_key.items()):
        fits = fit_alpha_beta(
            [r["size_bytes"] for r in rows], [r["time_us"] / 1e6 for r in rows], busbw_factor(op, ranks)
        )
        out.setdefault(tier, {})[f"{op}@{ranks}"] = fits
    return out


def predict_time_s(row: dict[str, Any], cluster: ClusterSpec, params: NetworkParams) -> float:
    p = placement_of(row)
    fitted = _fit_cluster(cluster, p)
    return collective_time(row["op"], float(row["size_bytes"]), p, fitted, params).time_s


def _fit_cluster(cluster: ClusterSpec, p: Placement) -> ClusterSpec:
    """The cluster grown (never shrunk) to hold the measured placement, so the model accepts it."""
    from dataclasses import replace

    gpn = max(cluster.gpus_per_node, p.ranks_per_node)
    nodes = max(cluster.num_nodes, p.nodes)
    if gpn == cluster.gpus_per_node and nodes == cluster.num_nodes:
        return cluster
    return replace(cluster, gpus_per_node=gpn, num_nodes=nodes)


def _set_tier(params: NetworkParams, tier: str, updated: TierParams) -> NetworkParams:
    from dataclasses import replace

    if tier == "nvlink":
        return replace(params, nvlink=updated)
    if tier == "pcie":
        return replace(params, pcie=updated)
    if tier == "xgmi":
        return replace(params, xgmi=updated)
    return replace(params, transports={**params.transports, tier: updated})


def _scale_tier(params: NetworkParams, tier: str, field: str, ratio: float) -> NetworkParams:
    from dataclasses import replace

    current = params.tier(tier)
    # An efficiency is a fraction of line rate: never above 1 (latency-bound data cannot pin it down,
    # and an unconstrained fit would drift to absurd values there).
    value = min(MAX_EFFICIENCY, max(MIN_EFFICIENCY, getattr(current, field) * ratio))
    updated = replace(current, **{field: value})
    return _set_tier(params, tier, updated)


SCALE_UP_TIERS = ("nvlink", "pcie", "xgmi")


def calibrate_network(
    doc: dict[str, Any], cluster: ClusterSpec, base: NetworkParams | None = None, rounds: int = 4
) -> tuple[NetworkParams, dict[str, Any]]:
    """NetworkParams that reproduce the measured rows, and the partial dict of what changed."""
    from dataclasses import replace

    params = base or default_network_params()
    rows = collective_rows(doc)
    if not rows:
        raise ValueError("no collective rows to calibrate from")
    by_tier: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_tier.setdefault(tier_of(row, cluster), []).append(row)
    # The launch overhead is paid by every collective, tensor-parallel ones on NVLink included: it is fitted
    # only when a scale-up tier was measured. Rows measured across nodes alone put their latency into their
    # own tier's per-step latency, so a profile fitted on the network never moves NVLink communication.
    fits_overhead = any(tier in SCALE_UP_TIERS for tier in by_tier)
    for _ in range(rounds):
        # Bandwidth: the largest quarter of sizes in each tier and op family.
        for tier, tier_rows in by_tier.items():
            for field, ops in (
                ("ring_efficiency", STREAMING_OPS),
                ("all_to_all_efficiency", ("all_to_all",)),
            ):
                fam = [r for r in tier_rows if r["op"] in ops]
                if not fam:
                    continue
                cutoff = np.quantile([r["size_bytes"] for r in fam], 0.75)
                large = [r for r in fam if r["size_bytes"] >= cutoff]
                ratios = [predict_time_s(r, cluster, params) / (r["time_us"] / 1e6) for r in large]
                params = _scale_tier(params, tier, field, float(np.median(ratios)))
        # Latency: the smallest quarter of sizes; the common part goes into the launch overhead, the
        # rest of each tier's residual into its per-step latency.
        residual: dict[str, float] = {}
        steps: dict[str, float] = {}
        for tier, tier_rows in by_tier.items():
            cutoff = np.quantile([r["size_bytes"] for r in tier_rows], 0.25)
            small = [r for r in tier_rows if r["size_bytes"] <= cutoff]
            residual[tier] = float(
                np.median([r["time_us"] / 1e6 - predict_time_s(r, cluster, params) for r in small])
            )
            steps[tier] = float(np.median([ring_steps(r["op"], int(r.get("ranks") or 2)) for r in small]))
        shift = min(residual.values()) if fits_overhead else 0.0
        params = replace(params, launch_overhead_s=max(0.0, params.launch_overhead_s + shift))
        for tier, extra in residual.items():
            extra -= shift
            if extra > 0 and steps[tier] > 0:
                current = params.tier(tier)
                per_step = extra / steps[tier]
                latencies = {p: v + per_step for p, v in current.step_latency_s.items()}
                updated = replace(current, step_latency_s=latencies)
                params = _set_tier(params, tier, updated)
    params = _refine(params, rows, cluster, list(by_tier), fits_overhead)
    overrides: dict[str, Any] = {"launch_overhead_s": params.launch_overhead_s} if fits_overhead else {}
    for tier in by_tier:
        t = params.tier(tier)
        entry = {
            "ring_efficiency": t.ring_efficiency,
            "all_to_all_efficiency": t.all_to_all_efficiency,
            "step_latency_s": dict(t.step_latency_s),
            "source": "calibrated from measurements",
        }
        if tier in SCALE_UP_TIERS:
            overrides[tier] = entry
        else:
            overrides.setdefault("transports", {})[tier] = entry
    return params, overrides


def _log_error(params: NetworkParams, rows: list[dict[str, Any]], cluster: ClusterSpec) -> float:
    errs = [math.log(max(predict_time_s(r, cluster, params), 1e-12) / (r["time_us"] / 1e6)) for r in rows]
    return float(np.mean(np.square(errs)))


def _with(params: NetworkParams, key: tuple[str, str], factor: float) -> NetworkParams:
    from dataclasses import replace

    tier, field = key
    if tier == "*":
        return replace(params, launch_overhead_s=max(params.launch_overhead_s, 1e-7) * factor)
    if field == "step_latency_s":
        current = params.tier(tier)
        updated = replace(current, step_latency_s={p: v * factor for p, v in current.step_latency_s.items()})
        return _set_tier(params, tier, updated)
    return _scale_tier(params, tier, field, factor)


def _refine(
    params: NetworkParams,
    rows: list[dict[str, Any]],
    cluster: ClusterSpec,
    tiers: list[str],
    fits_overhead: bool = True,
    sweeps: int = 12,
) -> NetworkParams:
    """Coordinate descent in log space on the mean squared log error of predicted vs measured time.

    Each parameter (launch overhead; per tier: ring and all-to-all efficiency, step latency) is multiplied
    or divided by a step factor while that lowers the error; the factor shrinks from 4 to ~1.01.
    """
    keys: list[tuple[str, str]] = [("*", "launch")] if fits_overhead else []
    ops = {r["op"] for r in rows}
    for tier in tiers:
        keys.append((tier, "step_latency_s"))
        if ops & set(STREAMING_OPS):
            keys.append((tier, "ring_efficiency"))
        if "all_to_all" in ops:
            keys.append((tier, "all_to_all_efficiency"))
    best = _log_error(params, rows, cluster)
    step = 4.0
    for _ in range(sweeps):
        improved = False
        for key in keys:
            for factor in (step, 1.0 / step):
                while True:
                    candidate = _with(params, key, factor)
                    err = _log_error(candidate, rows, cluster)
                    if err < best - 1e-12:
                        params, best, improved = candidate, err, True
                    else:
                        break
        if not improved:
            step = math.sqrt(step)
            if step < 1.01:
                break
    return params
