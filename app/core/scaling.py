"""Scaling efficiency and time-to-train versus GPU count, fabrics side by side.

For each GPU count the training layout keeps its model-parallel shape (tp × pp × cp × ep) and grows data
parallelism; the estimator (`app.core.estimate.estimate`) prices the step, and every collective inside it
(TP/CP/EP/PP/DP traffic) goes through `app.core.network.collective_time` on the chosen fabric. The exposed
(non-overlapped) communication per step is read from the estimate's breakdown.

Definitions (stated in every result):
* weak scaling (default): micro-batches per data-parallel replica stay fixed, the global batch grows with DP —
  how clusters are usually grown for pre-training; strong scaling keeps the global batch.
* scaling efficiency(N) = per-GPU throughput at N on the fabric / the ideal per-GPU throughput: the same
  layout at the baseline count (the smallest count in the request unless `baseline_gpus` is given) on a
  perfect scale-out network (no bandwidth or latency cost between nodes). When the baseline fits on one node
  this is "linear from a single node"; either way a fabric's penalty already present at the baseline shows.
  It exceeds 100 % only where per-GPU work shrinks with N (e.g. the distributed optimizer's step, sharded
  over more data-parallel ranks), which the result states.
* efficiency vs baseline (labelled): per-GPU throughput at N / at the baseline count on the same fabric.
* network efficiency(N) = 1 − exposed scale-out/scale-up communication / step time.
* time-to-train = tokens / tokens per second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from app.core.efficiency import HardwareProfile
from app.core.errors import ProblemCollector, SpecError
from app.core.estimate import Estimate, estimate
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
    scaling_efficiency: float  # against the ideal: the baseline count on a perfect scale-out network
    time_to_train_s: float | None
    fits_memory: bool
    error: str | None = None
    efficiency_vs_baseline: float = float("nan")  # against the baseline count on the same fabric

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
    ideal_tokens_per_s_per_gpu: float = float("nan")  # baseline count on a perfect scale-out network

    def to_dict(self) -> dict[str, Any]:  # Any: JSON values
        out = asdict(self)
        for s_out, s in zip(out["series"], self.series, strict=True):
            for p_out, p in zip(s_out["points"], s.points, strict=True):
                p_out["time_to_train_days"] = p.time_to_train_days
        return out


def perfect_network(fabric: FabricSpec) -> FabricSpec:
    """The fabric with its scale-out cost removed: a million times the NIC bandwidth, no wire latency, no
    derates, adaptive routing and no oversubscription — the ideal that scaling efficiency is measured against."""
    return replace(
        fabric,
        nic_bandwidth_bytes_per_s=fabric.nic_bandwidth_bytes_per_s * 1e6,
        base_latency_s=0.0,
        hop_latency_s=0.0,
        congestion_derate=1.0,
        oversubscription=(1.0,),
        routing="adaptive",
        name="perfect network",
    )


def _failed(n: int, nodes: int, dp: int, gb: int, message: str) -> ScalingPoint:
    nan = float("nan")
    return ScalingPoint(n, nodes, dp, gb, nan, {}, nan, nan, nan, nan, nan, None, False, message)


@dataclass(frozen=True)
class ScalingRun:
    """The run a scaling study grows: `model` in `layout`'s model-parallel shape on nodes like `cluster`'s, at
    `seq_len` tokens per sequence. `mode` "weak" grows the global batch with data parallelism, "strong" keeps it;
    `estimator` prices each size (app.core.estimate.estimate, or a caller's with its own options), given
    `profile`, a measured hardware profile, if any."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    seq_len: int
    mode: ScalingMode = "weak"
    estimator: Callable[..., Estimate] = estimate
    profile: HardwareProfile | None = None


def scaling_curve(
    run: ScalingRun,
    gpu_counts: Sequence[int],
    fabrics: dict[str, FabricSpec] | None = None,
    *,
    tokens: float | None = None,
    baseline_gpus: int | None = None,
) -> ScalingResult:
    """Step time, exposed communication, scaling efficiency and time-to-train for each GPU count and fabric."""
    model, cluster, layout, seq_len, mode = run.model, run.cluster, run.layout, run.seq_len, run.mode
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

    def at_size(n: int, fabric: FabricSpec) -> ScalingPoint:
        nodes = max(1, n // cluster.gpus_per_node)
        dp = n // mp
        gb = per_replica_batch * dp if mode == "weak" else layout.global_batch
        c = replace(cluster, num_nodes=nodes, gpus_per_node=min(n, cluster.gpus_per_node), fabric=fabric)
        try:
            est = run.estimator(model, c, replace(layout, dp=dp, global_batch=gb), seq_len, run.profile)
        except SpecError as exc:
            return _failed(n, nodes, dp, gb, str(exc))
        return _point(n, nodes, dp, gb, est, tokens)

    ideal = at_size(base_n, perfect_network(next(iter(fabrics.values()))))
    ideal_rate = ideal.tokens_per_s_per_gpu if ideal.error is None else float("nan")
    series: list[FabricSeries] = []
    for fabric_name, fabric in fabrics.items():
        raw = [at_size(n, fabric) for n in counts]
        base = next((p for p in raw if p.num_gpus == base_n and p.error is None), None)
        points = tuple(
            p
            if p.error is not None
            else replace(
                p,
                scaling_efficiency=p.tokens_per_s_per_gpu / ideal_rate,
                efficiency_vs_baseline=(
                    p.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu if base else float("nan")
                ),
            )
            for p in raw
        )
        series.append(FabricSeries(fabric_name, fabric, points))
    above = any(p.scaling_efficiency > 1.0 + 1e-9 for s in series for p in s.points if p.error is None)
    assumptions: tuple[str, ...] = (
        f"{mode} scaling: "
        + (
            f"{per_replica_batch} sequences per data-parallel replica, global batch grows with DP"
            if mode == "weak"
            else f"global batch fixed at {layout.global_batch} sequences"
        ),
        f"model-parallel shape fixed: tp={layout.tp}, pp={layout.pp}, cp={layout.cp}, ep={layout.ep}; "
        f"DP = GPUs / {mp} (baseline DP {base_dp})",
        f"scaling efficiency = per-GPU throughput / the ideal: {base_n} GPUs on a perfect scale-out network "
        f"({ideal_rate:,.0f} tokens/s per GPU); efficiency_vs_baseline = against {base_n} GPUs on the same fabric",
        "exposed communication = the estimator's non-overlapped tp/cp/ep/pp/dp/zero3 time per step",
    )
    if above:
        assumptions += (
            "an efficiency above 100 %: per-GPU work shrinks with the GPU count (the optimizer step and "
            "optimizer-state traffic are sharded over more data-parallel ranks), so a larger run beats the ideal",
        )
    return ScalingResult(mode, base_n, tokens, tuple(series), assumptions, ideal_rate)


def _point(n: int, nodes: int, dp: int, gb: int, est: Estimate, tokens: float | None) -> ScalingPoint:
    step = est.step
    total = step.total_s
    exposed = {k: float(step.breakdown.get(k, 0.0)) for k in COMM_KEYS}
    tps = step.tokens_per_s
    return ScalingPoint(
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
    # nics_per_node only: the whole NIC count whose efficiency is nearest the target, and that efficiency, whether
    # or not it is within NIC_MATCH_TOLERANCE (a verdict judges it with its own tolerance: app.core.claims)
    nearest: float | None = None
    nearest_efficiency: float | None = None


def efficiency_at(
    run: ScalingRun,
    baseline_gpus: int,
    target_gpus: int,
    fabric: FabricSpec,
    reference_tokens_per_s_per_gpu: float | None = None,
) -> float:
    """Scaling efficiency at `target_gpus`; with a reference throughput (e.g. another fabric at the same
    size), the ratio of per-GPU throughputs instead."""
    if reference_tokens_per_s_per_gpu is not None:
        only = scaling_curve(run, [target_gpus], {"f": fabric})
        pt = only.series[0].points[0]
        return float("nan") if pt.error else pt.tokens_per_s_per_gpu / reference_tokens_per_s_per_gpu
    res = scaling_curve(run, [baseline_gpus, target_gpus], {"f": fabric}, baseline_gpus=baseline_gpus)
    point = res.series[0].at(target_gpus)
    return float("nan") if point is None else point.scaling_efficiency


def required_assumption(
    knob: str,
    target_efficiency: float,
    run: ScalingRun,
    baseline_gpus: int,
    target_gpus: int,
    fabric: FabricSpec,
    reference_tokens_per_s_per_gpu: float | None = None,
) -> RequiredAssumption:
    """Bisection on one knob (efficiency is monotone in each): congestion derate in (0, 1], NICs per node
    1…fabric.nics_per_node, or end-to-end latency 1 µs…10 ms. With a reference throughput the target is a
    throughput ratio (e.g. RoCE vs InfiniBand at the same GPU count) instead of a scaling efficiency."""

    def eff(f: FabricSpec) -> float:
        return efficiency_at(run, baseline_gpus, target_gpus, f, reference_tokens_per_s_per_gpu)

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
        return _required_nics(eff, fabric, target_gpus, target_efficiency, default)
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


NIC_MATCH_TOLERANCE = 0.02  # a whole NIC count "reproduces" a claim when within 2 points of it


def _required_nics(
    eff: Callable[[FabricSpec], float],
    fabric: FabricSpec,
    target_gpus: int,
    target: float,
    default: float,
) -> RequiredAssumption:
    """The NIC count whose efficiency is nearest the target, if within NIC_MATCH_TOLERANCE; otherwise none,
    with the two counts that bracket the target in the note."""
    reached = {n: eff(replace(fabric, nics_per_node=n)) for n in range(fabric.nics_per_node, 0, -1)}
    best = min(reached, key=lambda n: abs(reached[n] - target))
    nearest = {"nearest": float(best), "nearest_efficiency": reached[best]}
    if abs(reached[best] - target) <= NIC_MATCH_TOLERANCE:
        note = f"{reached[best]:.1%} with {best} NIC(s) per node"
        return RequiredAssumption("nics_per_node", target_gpus, target, float(best), default, note, **nearest)
    above = [n for n in reached if reached[n] > target]
    below = [n for n in reached if reached[n] <= target]
    parts = []
    if above:
        parts.append(f"{min(above)} NIC(s) give {reached[min(above)]:.1%}")
    if below:
        parts.append(f"{max(below)} give {reached[max(below)]:.1%}")
    note = "no whole NIC count gives it: " + ", ".join(parts)
    return RequiredAssumption("nics_per_node", target_gpus, target, None, default, note, **nearest)
