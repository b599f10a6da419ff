"""Node acceptance: does this node measure what the catalog and the model expect of its GPU and fabric?

Pure: a result document, the declared GPU and fabric in, a report out. Each check compares a measurement with
the model's expectation for exactly that measurement (the same shape, op, size and placement) and gives a
verdict — pass, warn or fail — with the range it was held to and the source of that range:

- **GEMM rate** (per dtype): the median over shapes of best TFLOP/s (mamf-finder's headline statistic) over the
  rate the uncalibrated model expects at that shape (`GemmEfficiency.for_gpu`: the catalog's measured achievable
  matmul TFLOP/s and the efficiency curve, at burst clocks: what a short benchmark measures).
- **Bus bandwidth** (per op and group, messages ≥ 64 MiB): the median of measured over predicted busbw
  (`app.core.network.collective_time` with the published default parameters, for the measured placement).
- **Latency** (per op and group, the smallest message, when it is under 64 KiB — NCCL's LL protocol range,
  where time is latency): measured over predicted time.

Thresholds (ratio of measured to expected; for latency, of expected to measured, so that low is bad alike):

- pass ≥ 0.90: nccl-tests fails a run whose average bus bandwidth is below 0.9 × the NCCL_TESTS_MIN_BW it was
  given (github.com/NVIDIA/nccl-tests src/common.cu), i.e. it accepts 10 % below the expectation;
- fail < 0.75 for GEMM and bandwidth: the collective model's p90 error on healthy published systems at
  ≥ 64 MiB is 15.7 % (docs/validation_collectives.md), so a node a quarter below the model is outside what the
  model's own error explains; the one misconfigured system in that file measured 46 % of its expected busbw;
- latency: pass within the model's p90 error for small single-node messages (55.8 %: measured ≤ 1.558 ×
  predicted), fail beyond the largest small-message error it makes on any published system (+77.0 %, 8 × A100 at
  1 MiB: measured > 1.77 × predicted), warn between (docs/validation_collectives.md, rows < 64 MiB; the rows under
  64 KiB, the range this check reads, all measured faster than predicted, 0.70-0.86 ×).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from app.calibration.collective_fit import collective_rows, predict_time_s
from app.calibration.gemm_fit import gemm_rows
from app.core.hardware import FabricSpec, GPUSpec
from app.core.network import busbw_factor, default_network_params

PASS, WARN, FAIL = "pass", "warn", "fail"
VERDICT_ORDER = (PASS, WARN, FAIL)
PASS_RATIO = 0.90
FAIL_RATIO = 0.75
LATENCY_PASS_RATIO = 1.0 / 1.558
LATENCY_FAIL_RATIO = 1.0 / 1.77
LARGE_MESSAGE_BYTES = 64 * 2**20
# below 64 KiB NCCL uses its LL protocol, where a call's time is latency (NCCL src/graph/tuning.cc)
LATENCY_MAX_BYTES = 64 * 2**10
RATIO_SOURCE = (
    "pass ≥ 90 % (nccl-tests NCCL_TESTS_MIN_BW margin, src/common.cu); fail < 75 % (beyond the collective "
    "model's 15.7 % p90 error at ≥ 64 MiB, docs/validation_collectives.md)"
)
LATENCY_SOURCE = (
    "pass ≤ 1.56 × predicted, fail > 1.77 × (the model's p90 small-message error on one node, 55.8 %, and its "
    "largest small-message error, 77.0 %, docs/validation_collectives.md)"
)


@dataclass(frozen=True)
class Check:
    name: str  # e.g. "gemm bf16", "busbw all_reduce/intra", "latency all_reduce/intra"
    unit: str
    measured: float
    expected: float
    ratio: float  # measured / expected (latency: expected / measured); 1 = as the model expects
    verdict: str
    pass_range: str
    fail_below: str
    source: str
    points: int


def verdict_of(ratio: float, pass_ratio: float, fail_ratio: float) -> str:
    return PASS if ratio >= pass_ratio else FAIL if ratio < fail_ratio else WARN


def worst(verdicts: list[str]) -> str:
    return max(verdicts, key=VERDICT_ORDER.index) if verdicts else PASS


def _rate_check(name: str, unit: str, pairs: list[tuple[float, float]], source: str) -> Check:
    ratio = statistics.median(m / e for m, e in pairs)
    return Check(
        name=name,
        unit=unit,
        measured=statistics.median(m for m, _ in pairs),
        expected=statistics.median(e for _, e in pairs),
        ratio=ratio,
        verdict=verdict_of(ratio, PASS_RATIO, FAIL_RATIO),
        pass_range=f"≥ {PASS_RATIO:.0%} of expected",
        fail_below=f"{FAIL_RATIO:.0%}",
        source=source,
        points=len(pairs),
    )


def gemm_checks(doc: dict[str, Any], gpu: GPUSpec) -> list[Check]:
    from app.calibration.profile import default_gemm_curve

    by_dtype: dict[str, list[tuple[float, float]]] = {}
    for row in gemm_rows(doc):
        eff = default_gemm_curve(gpu, row["dtype"])
        if eff is None:
            continue  # the catalog has no rate for this dtype on this GPU
        expected = float(eff.flops_per_s(row["m"], row["n"], row["k"])) / 1e12
        by_dtype.setdefault(row["dtype"], []).append((float(row.get("best_tflops") or 0.0), expected))
    source = f"{gpu.name} achievable matmul rate and efficiency curve (app.core.efficiency); {RATIO_SOURCE}"
    return [_rate_check(f"gemm {d}", "TFLOP/s", pairs, source) for d, pairs in sorted(by_dtype.items())]


def network_checks(doc: dict[str, Any], gpu: GPUSpec, fabric: FabricSpec) -> list[Check]:
    from app.calibration.profile import cluster_for

    rows = collective_rows(doc)
    if not rows:
        return []
    cluster, params = cluster_for(doc, gpu, fabric), default_network_params()
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(f"{row['op']}/{row.get('group', 'all')}", []).append(row)
    checks: list[Check] = []
    model = f"collective model with published defaults for {gpu.name} on {fabric.name or 'its fabric'}"
    for key, members in sorted(groups.items()):
        large = [r for r in members if r["size_bytes"] >= LARGE_MESSAGE_BYTES]
        if large:
            pairs = [(r["busbw_gbps"], _predicted_busbw(r, cluster, params)) for r in large]
            checks.append(_rate_check(f"busbw {key}", "GB/s", pairs, f"{model}; {RATIO_SOURCE}"))
        smallest = min(members, key=lambda r: r["size_bytes"])
        if smallest["size_bytes"] >= LATENCY_MAX_BYTES:
            continue  # no message small enough for its time to be latency
        predicted_us = predict_time_s(smallest, cluster, params) * 1e6
        ratio = predicted_us / smallest["time_us"]
        checks.append(
            Check(
                name=f"latency {key} @ {smallest['size_bytes']} B",
                unit="µs",
                measured=smallest["time_us"],
                expected=predicted_us,
                ratio=ratio,
                verdict=verdict_of(ratio, LATENCY_PASS_RATIO, LATENCY_FAIL_RATIO),
                pass_range=f"≤ {1 / LATENCY_PASS_RATIO:.2f} × expected",
                fail_below=f"{LATENCY_FAIL_RATIO:.0%} (time > {1 / LATENCY_FAIL_RATIO:.2f} × expected)",
                source=f"{model}; {LATENCY_SOURCE}",
                points=1,
            )
        )
    return checks


def _predicted_busbw(row: dict[str, Any], cluster: Any, params: Any) -> float:
    time_s = predict_time_s(row, cluster, params)
    return row["size_bytes"] / time_s * busbw_factor(row["op"], int(row.get("ranks") or 2)) / 1e9


def acceptance_report(doc: dict[str, Any], gpu: GPUSpec, fabric: FabricSpec) -> dict[str, Any]:
    """{verdict, gpu, fabric, checks: [...], notes}: the worst verdict over every check."""
    checks = gemm_checks(doc, gpu) + network_checks(doc, gpu, fabric)
    notes = []
    if not checks:
        notes.append("nothing to check: the document has no GEMM or collective rows the model can predict")
    names = [c.name for c in checks]
    if collective_rows(doc) and not any(n.startswith("busbw") for n in names):
        notes.append("no message ≥ 64 MiB was measured: bus bandwidth is not checked")
    if collective_rows(doc) and not any(n.startswith("latency") for n in names):
        notes.append("no message under 64 KiB was measured: latency is not checked")
    return {
        "verdict": worst([c.verdict for c in checks]),
        "gpu": gpu.name,
        "fabric": fabric.name,
        "checks": [asdict(c) for c in checks],
        "notes": notes,
    }


def failed_checks(report: dict[str, Any]) -> list[str]:
    """One line per failed check: what was measured against what was expected."""
    return [
        f"{c['name']}: {c['measured']:.4g} {c['unit']} against {c['expected']:.4g} expected ({c['ratio']:.1%})"
        for c in report["checks"]
        if c["verdict"] == FAIL
    ]
