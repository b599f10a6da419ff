"""Scaling efficiency and time-to-train versus GPU count, fabrics side by side.

For each GPU count the training layout keeps its model-parallel shape (tp × pp × cp × ep) and grows data
parallelism; the estimator (`app.core.estimate.estimate`) prices the step, and every collective inside it
(TP/CP/EP/PP/DP traffic) goes through `app.core.network.collective_time` on the chosen fabric. The exposed
(non-overlapped) communication per step is read from the estimate's breakdown.

Definitions (stated in every result):
* weak scaling (default): micro-batches per data-parallel replica stay fixed, the global batch grows with DP —
  how clusters are usually grown for pre-training; strong scaling keeps the global batch.
* scaling efficiency(N) = per-GPU throughput at N / per-GPU throughput at the baseline count (the smallest
  count in the request unless `baseline_gpus` is given) on the same fabric — the usual reading of "98 %
  scaling efficiency up to 128 GPUs".
* network efficiency(N) = 1 − exposed scale-out/scale-up communication / step time.
* time-to-train = tokens / tokens per second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from app.core.errors import ProblemCollector, SpecError
from app.core.estimate import estimate
from app.core.hardware import ClusterSpec, FabricSpec
from app.core.layout import Layout
from app.core.model import ModelSpec
from app.core.units import DAY

COMM_KEYS = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "zero3_comm")
ScalingMode = Literal["weak", "strong"]


@dataclass(frozen=True)
class ScalingPoint:
    num_gpus: int
    nodes: int
    dp: int
    global_batch: int
    step_time_s: float
    exposed_comm_s: dict[str, float]  # per kind, seconds per step
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    network_efficiency: float
    scaling_efficiency: float
    time_to_train_s: float | None
    fits_memory: bool
    error: str | None = None

    @property
    def time_to_train_days(self) -> float | None:
        return None if self.time_to_train_s is None else self.time_to_train_s / DAY


@dataclass(frozen=True)
class FabricSeries:
    fabric_name: str
    fabric: FabricSpec
    points: tuple[ScalingPoint, ...]

    def at(self, num_gpus: int) -> ScalingPoint | None:
        return next((p for p in self.points if p.num_gpus == num_gpus), None)


@dataclass(frozen=True)
class ScalingResult:
    mode: str
    baseline_gpus: int
    tokens: float | None
    series: tuple[FabricSeries, ...]
    assumptions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for s_out, s in zip(out["series"], self.series, strict=True):
            for p_out, p in zip(s_out["points"], s.points, strict=True):
                p_out["time_to_train_days"] = p.time_to_train_days
        return out


def _failed(n: int, nodes: int, dp: int, gb: int, message: str) -> ScalingPoint:
    nan = float("nan")
    return ScalingPoint(n, nodes, dp, gb, nan, {}, nan, nan, nan, nan, nan, None, False, message)


def scaling_curve(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    seq_len: int,
    gpu_counts: Sequence[int],
    fabrics: dict[str, FabricSpec] | None = None,
    *,
    tokens: float | None = None,
    mode: ScalingMode = "weak",
    baseline_gpus: int | None = None,
    estimator: Callable[..., Any] = estimate,
    profile: Any = None,
) -> ScalingResult:
    """Step time, exposed communication, scaling efficiency and time-to-train for each GPU count and fabric."""
    problems = ProblemCollector()
    mp = layout.tp * layout.pp * layout.cp
    counts = sorted({int(n) for n in gpu_counts})
    problems.check(bool(counts), "gpu_counts", "give at least one GPU count")
    for n in counts:
        problems.check(n >= 1, "gpu_counts", f"{n}: must be ≥ 1")
        problems.check(n % mp == 0, "gpu_counts", f"{n} is not a multiple of tp·pp·cp = {mp}")
        problems.check(
            n <= cluster.gpus_per_node or n % cluster.gpus_per_node == 0,
            "gpu_counts",
            f"{n} is not a whole number of {cluster.gpus_per_node}-GPU nodes",
        )
    problems.check(mode in ("weak", "strong"), "mode", "must be 'weak' or 'strong'")
    if baseline_gpus is not None:
        problems.check(baseline_gpus in counts, "baseline_gpus", "must be one of gpu_counts")
    problems.check(tokens is None or tokens > 0, "tokens", "must be > 0")
    problems.raise_if_any()
    fabrics = fabrics or {cluster.fabric.name or "fabric": cluster.fabric}
    base_n = baseline_gpus or counts[0]
    base_dp = max(1, base_n // mp)
    per_replica_batch = max(1, layout.global_batch // max(1, layout.dp))
    series: list[FabricSeries] = []
    for fabric_name, fabric in fabrics.items():
        raw: list[ScalingPoint] = []
        for n in counts:
            nodes = max(1, n // cluster.gpus_per_node)
            gpn = min(n, cluster.gpus_per_node)
            dp = n // mp
            gb = per_replica_batch * dp if mode == "weak" else layout.global_batch
            c = replace(cluster, num_nodes=nodes, gpus_per_node=gpn, fabric=fabric)
            lay = replace(layout, dp=dp, global_batch=gb)
            try:
                est = estimator(model, c, lay, seq_len, profile)
            except SpecError as exc:
                raw.append(_failed(n, nodes, dp, gb, str(exc)))
                continue
            step = est.step
            total = step.total_s
            exposed = {k: float(step.breakdown.get(k, 0.0)) for k in COMM_KEYS}
            tps = step.tokens_per_s
            raw.append(
                ScalingPoint(
                    num_gpus=n,
                    nodes=nodes,
                    dp=dp,
                    global_batch=gb,
                    step_time_s=total,
                    exposed_comm_s=exposed,
                    tokens_per_s=tps,
                    tokens_per_s_per_gpu=tps / n,
                    mfu=step.mfu,
                    network_efficiency=1.0 - sum(exposed.values()) / total,
                    scaling_efficiency=float("nan"),
                    time_to_train_s=(tokens / tps) if tokens else None,
                    fits_memory=bool(est.memory.fits),
                )
            )
        base = next((p for p in raw if p.num_gpus == base_n and p.error is None), None)
        points = tuple(
            p
            if p.error is not None or base is None
            else replace(p, scaling_efficiency=p.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu)
            for p in raw
        )
        series.append(FabricSeries(fabric_name, fabric, points))
    assumptions = (
        f"{mode} scaling: "
        + (
            f"{per_replica_batch} sequences per data-parallel replica, global batch grows with DP"
            if mode == "weak"
            else f"global batch fixed at {layout.global_batch} sequences"
        ),
        f"model-parallel shape fixed: tp={layout.tp}, pp={layout.pp}, cp={layout.cp}, ep={layout.ep}; "
        f"DP = GPUs / {mp} (baseline DP {base_dp})",
        f"scaling efficiency relative to {base_n} GPUs on the same fabric",
        "exposed communication = the estimator's non-overlapped tp/cp/ep/pp/dp/zero3 time per step",
    )
    return ScalingResult(mode, base_n, tokens, tuple(series), assumptions)


# --------------------------------------------------------------------------------------------------------
# What would it take? Solve for the fabric assumption that reproduces a claimed efficiency.
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequiredAssumption:
    """The value of one fabric knob at which the model reproduces a claimed scaling efficiency."""

    knob: str  # congestion_derate | nics_per_node | base_latency_s
    target_gpus: int
    target_efficiency: float
    value: float | None  # None: no value in the searched range reaches the target
    predicted_at_default: float
    note: str = ""


def efficiency_at(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    seq_len: int,
    baseline_gpus: int,
    target_gpus: int,
    fabric: FabricSpec,
    mode: ScalingMode = "weak",
    estimator: Callable[..., Any] = estimate,
    reference_tokens_per_s_per_gpu: float | None = None,
) -> float:
    """Scaling efficiency at `target_gpus`; with a reference throughput (e.g. another fabric at the same
    size), the ratio of per-GPU throughputs instead."""
    if reference_tokens_per_s_per_gpu is not None:
        only = scaling_curve(
            model, cluster, layout, seq_len, [target_gpus], {"f": fabric}, mode=mode, estimator=estimator
        )
        pt = only.series[0].points[0]
        return float("nan") if pt.error else pt.tokens_per_s_per_gpu / reference_tokens_per_s_per_gpu
    res = scaling_curve(
        model,
        cluster,
        layout,
        seq_len,
        [baseline_gpus, target_gpus],
        {"f": fabric},
        mode=mode,
        baseline_gpus=baseline_gpus,
        estimator=estimator,
    )
    point = res.series[0].at(target_gpus)
    return float("nan") if point is None else point.scaling_efficiency


def required_assumption(
    knob: str,
    target_efficiency: float,
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    seq_len: int,
    baseline_gpus: int,
    target_gpus: int,
    fabric: FabricSpec,
    mode: ScalingMode = "weak",
    estimator: Callable[..., Any] = estimate,
    reference_tokens_per_s_per_gpu: float | None = None,
) -> RequiredAssumption:
    """Bisection on one knob (efficiency is monotone in each): congestion derate in (0, 1], NICs per node
    1…fabric.nics_per_node, or end-to-end latency 1 µs…10 ms. With a reference throughput the target is a
    throughput ratio (e.g. RoCE vs InfiniBand at the same GPU count) instead of a scaling efficiency."""

    def eff(f: FabricSpec) -> float:
        return efficiency_at(
            model,
            cluster,
            layout,
            seq_len,
            baseline_gpus,
            target_gpus,
            f,
            mode,
            estimator,
            reference_tokens_per_s_per_gpu,
        )

    default = eff(fabric)
    if knob == "congestion_derate":
        lo, hi = 1e-4, 1.0  # efficiency increases with the derate value
        if eff(replace(fabric, congestion_derate=lo)) > target_efficiency:
            return RequiredAssumption(
                knob, target_gpus, target_efficiency, None, default, "not reached above 0.0001"
            )
        if default < target_efficiency:
            return RequiredAssumption(
                knob, target_gpus, target_efficiency, None, default, "below target already"
            )
        for _ in range(40):
            mid = (lo + hi) / 2
            if eff(replace(fabric, congestion_derate=mid)) < target_efficiency:
                lo = mid
            else:
                hi = mid
        return RequiredAssumption(knob, target_gpus, target_efficiency, hi, default)
    if knob == "nics_per_node":
        for nics in range(fabric.nics_per_node, 0, -1):
            reached = eff(replace(fabric, nics_per_node=nics))
            if reached <= target_efficiency:
                note = f"{reached:.1%} with {nics} NIC(s) per node"
                return RequiredAssumption(knob, target_gpus, target_efficiency, float(nics), default, note)
        return RequiredAssumption(
            knob, target_gpus, target_efficiency, None, default, "not reached with 1 NIC"
        )
    if knob == "base_latency_s":
        lo, hi = fabric.base_latency_s, 10e-3  # efficiency decreases with latency
        if eff(replace(fabric, base_latency_s=hi)) > target_efficiency:
            return RequiredAssumption(
                knob, target_gpus, target_efficiency, None, default, "not reached below 10 ms"
            )
        if default < target_efficiency:
            return RequiredAssumption(
                knob, target_gpus, target_efficiency, None, default, "below target already"
            )
        for _ in range(40):
            mid = (lo * hi) ** 0.5
            if eff(replace(fabric, base_latency_s=mid)) > target_efficiency:
                lo = mid
            else:
                hi = mid
        return RequiredAssumption(knob, target_gpus, target_efficiency, hi, default)
    raise SpecError([])  # pragma: no cover — knob names are checked by callers


@dataclass(frozen=True)
class SeedClaimsAnalysis:
    """The seed article's networking claims against the model (docs/network.md explains them)."""

    scaling: ScalingResult
    predicted: dict[str, dict[int, float]]  # fabric → GPUs → scaling efficiency
    claimed: dict[str, dict[int, float]]
    required: tuple[RequiredAssumption, ...]
    days: dict[str, float | None]  # fabric → time-to-train at `claim_gpus`
    claimed_days: dict[str, float]
    implied_tokens: float | None  # tokens that make the InfiniBand run take the claimed 18 days
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scaling"] = self.scaling.to_dict()
        return data


CLAIMED_EFFICIENCY = {"infiniband": {128: 0.98}, "roce": {64: 0.82, 128: 0.71}}
CLAIMED_DAYS = {"infiniband": 18.0, "roce": 43.0}


def seed_claims(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    seq_len: int,
    gpu_counts: Sequence[int],
    ib: FabricSpec,
    roce: FabricSpec,
    *,
    tokens: float | None = None,
    claim_gpus: int = 128,
    estimator: Callable[..., Any] = estimate,
) -> SeedClaimsAnalysis:
    """Predict the article's scenario on IB vs RoCE and solve for the assumptions that would give its claims."""
    result = scaling_curve(
        model,
        cluster,
        layout,
        seq_len,
        gpu_counts,
        {"infiniband": ib, "roce": roce},
        tokens=tokens,
        estimator=estimator,
    )
    base = result.baseline_gpus
    predicted = {
        s.fabric_name: {p.num_gpus: p.scaling_efficiency for p in s.points if p.error is None}
        for s in result.series
    }
    required: list[RequiredAssumption] = []
    for n, target in CLAIMED_EFFICIENCY["roce"].items():
        if n not in gpu_counts or n == base:
            continue
        for knob in ("congestion_derate", "nics_per_node", "base_latency_s"):
            required.append(
                required_assumption(
                    knob, target, model, cluster, layout, seq_len, base, n, roce, estimator=estimator
                )
            )
    ib_point = result.series[0].at(claim_gpus)
    if ib_point is not None and ib_point.error is None:
        ratio = CLAIMED_DAYS["infiniband"] / CLAIMED_DAYS["roce"]
        required.append(
            required_assumption(
                "congestion_derate",
                ratio,
                model,
                cluster,
                layout,
                seq_len,
                base,
                claim_gpus,
                roce,
                estimator=estimator,
                reference_tokens_per_s_per_gpu=ib_point.tokens_per_s_per_gpu,
            )
        )
    days: dict[str, float | None] = {}
    implied_tokens = None
    for s in result.series:
        point = s.at(claim_gpus)
        days[s.fabric_name] = point.time_to_train_days if point else None
        if s.fabric_name == "infiniband" and point and point.error is None:
            implied_tokens = CLAIMED_DAYS["infiniband"] * DAY * point.tokens_per_s
    notes = (
        "claimed 18 vs 43 days is a 2.4× slowdown; the claimed efficiencies (98 % vs 71 % at 128 GPUs) imply "
        f"only {0.98 / 0.71:.2f}×, so the two claims are not consistent with each other",
    )
    return SeedClaimsAnalysis(
        scaling=result,
        predicted=predicted,
        claimed={k: dict(v) for k, v in CLAIMED_EFFICIENCY.items()},
        required=tuple(required),
        days=days,
        claimed_days=dict(CLAIMED_DAYS),
        implied_tokens=implied_tokens,
        notes=notes,
    )
