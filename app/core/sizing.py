""" "How many GPUs do I need": the planner's best layout at every cluster size, and what each size costs.

For each GPU count (default 8, 16, …, 16,384) the planner (`app.core.planner.plan`) searches every layout at the
same global batch (strong scaling of one training recipe), and keeps the fastest that fits. From those points:

* time to train = tokens / tokens per second of that best layout;
* cost per run of the compute = time to train × GPUs × $/GPU-hour (a price from the price book or the request);
  the planner service (app.services.planner.sizes) charges the wall-clock GPU-hours instead (goodput included),
  reports this one as `compute_cost_usd` and picks the cheapest size again on its cost (`cheapest_size`);
* scaling efficiency(N) = per-GPU throughput at N / per-GPU throughput at the smallest size that fits;
* the smallest cluster that meets a deadline, the cheapest cluster, and the knee of the time-to-train curve:
  the point farthest below the chord between the first and last feasible points on (log2 GPUs, log2 time)
  normalised to [0, 1] ("Kneedle", Satopää et al. 2011, ICDCS workshops, "Finding a 'Kneedle' in a Haystack").
  On log-log axes perfect scaling is a straight line, so the knee is where adding GPUs stops paying off
  (no knee is reported when the curve stays within 2 % of straight).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from app.core.errors import ProblemCollector
from app.core.estimate import Assumption
from app.core.hardware import ClusterSpec
from app.core.planner import Constraints, PlannedLayout, PlanResult, SearchProblem, plan

KNEE_MIN_GAP = 0.02  # normalised distance below the chord that counts as a bend
DEFAULT_SIZES: tuple[int, ...] = tuple(2**k for k in range(3, 15))  # 8 … 16,384


@dataclass(frozen=True)
class SizePoint:
    num_gpus: int
    feasible: bool
    best: PlannedLayout | None
    evaluated_layouts: int
    feasible_layouts: int
    time_to_train_s: float | None
    cost_usd: float | None
    tokens_per_s: float | None
    scaling_efficiency: float | None
    speedup: float | None  # time to train at the smallest feasible size / time here
    elapsed_s: float
    reason: str = ""  # why nothing fits

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_gpus": self.num_gpus,
            "feasible": self.feasible,
            "best": self.best.to_dict() if self.best else None,
            "evaluated_layouts": self.evaluated_layouts,
            "feasible_layouts": self.feasible_layouts,
            "time_to_train_s": self.time_to_train_s,
            "time_to_train_days": self.time_to_train_s / 86400.0 if self.time_to_train_s else None,
            "cost_usd": self.cost_usd,
            "tokens_per_s": self.tokens_per_s,
            "scaling_efficiency": self.scaling_efficiency,
            "speedup": self.speedup,
            "elapsed_s": self.elapsed_s,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SizingResult:
    model: str
    gpu: str
    seq_len: int
    global_batch: int
    tokens: float
    usd_per_gpu_hour: float | None
    deadline_s: float | None
    points: list[SizePoint]
    min_gpus_that_fit: int | None
    smallest_meeting_deadline: int | None
    cheapest: int | None
    knee: int | None
    elapsed_s: float
    assumptions: list[Assumption] = field(default_factory=list)

    def point(self, num_gpus: int) -> SizePoint | None:
        return next((p for p in self.points if p.num_gpus == num_gpus), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "seq_len": self.seq_len,
            "global_batch": self.global_batch,
            "tokens": self.tokens,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "deadline_s": self.deadline_s,
            "points": [p.to_dict() for p in self.points],
            "min_gpus_that_fit": self.min_gpus_that_fit,
            "smallest_meeting_deadline": self.smallest_meeting_deadline,
            "cheapest": self.cheapest,
            "knee": self.knee,
            "elapsed_s": self.elapsed_s,
            "assumptions": [a.to_dict() for a in self.assumptions],
        }


def knee_point(sizes: Sequence[int], times: Sequence[float]) -> int | None:
    """Kneedle on (log2 N, log2 time): the size farthest below the chord of the normalised, decreasing curve."""
    if len(sizes) < 3 or min(times) <= 0:
        return None
    xs = [math.log2(n) for n in sizes]
    times = [math.log2(t) for t in times]
    x0, x1 = xs[0], xs[-1]
    t_hi, t_lo = max(times), min(times)
    if x1 == x0 or t_hi == t_lo:
        return None
    best, best_gap = None, KNEE_MIN_GAP
    for n, x, t in zip(sizes, xs, times, strict=True):
        xn = (x - x0) / (x1 - x0)
        yn = (t - t_lo) / (t_hi - t_lo)
        gap = (1.0 - xn) - yn  # chord from (0, 1) to (1, 0); positive = below it
        if gap > best_gap:
            best, best_gap = n, gap
    return best


def size_sweep(
    problem: SearchProblem,
    tokens: float,
    *,
    sizes: Sequence[int] | None = None,
    usd_per_gpu_hour: float | None = None,
    deadline_s: float | None = None,
    constraints: Constraints | None = None,
) -> SizingResult:
    """Best layout, time to train, cost per run and scaling efficiency for each cluster size of the problem's GPU;
    the problem's `run`: the options every layout of every size shares (app.core.layout.RunOptions, as `plan` takes
    them)."""
    model, cluster, seq_len, global_batch = (
        problem.model,
        problem.cluster,
        problem.seq_len,
        problem.global_batch,
    )
    wanted = _checked_sizes(cluster, sizes, tokens, deadline_s, usd_per_gpu_hour)
    start = time.perf_counter()
    search = partial(
        plan,
        problem,
        tokens=tokens,
        constraints=constraints,
        usd_per_gpu_hour=usd_per_gpu_hour,
        top=1,
        pareto_limit=0,
    )
    # each size's result without its ranking (PlanResult.recommend's arrays of every evaluated layout): the sweep
    # holds every size's result at once
    raw = [(n, replace(search(gpu_counts=[n]), ranking=None, fitting=None)) for n in wanted]
    points = _size_points(raw)
    ok = [pt for pt in points if pt.feasible and pt.time_to_train_s is not None]
    return SizingResult(
        model=model.name,
        gpu=cluster.gpu.name,
        seq_len=seq_len,
        global_batch=global_batch,
        tokens=tokens,
        usd_per_gpu_hour=usd_per_gpu_hour,
        deadline_s=deadline_s,
        points=points,
        min_gpus_that_fit=ok[0].num_gpus if ok else None,
        smallest_meeting_deadline=_smallest_meeting(ok, deadline_s),
        cheapest=_cheapest(ok) if usd_per_gpu_hour is not None else None,
        knee=knee_point([pt.num_gpus for pt in ok], [pt.time_to_train_s or 0.0 for pt in ok]),
        elapsed_s=time.perf_counter() - start,
        assumptions=_sweep_assumptions(usd_per_gpu_hour),
    )


def _checked_sizes(
    cluster: ClusterSpec,
    sizes: Sequence[int] | None,
    tokens: float,
    deadline_s: float | None,
    usd_per_gpu_hour: float | None,
) -> list[int]:
    """The sizes to search, in increasing order (DEFAULT_SIZES by default); every problem of the request at once."""
    p = ProblemCollector()
    p.check(tokens > 0, "tokens", "give the training tokens (> 0) to compute time to train")
    p.check(deadline_s is None or deadline_s > 0, "deadline_s", "must be > 0")
    p.check(usd_per_gpu_hour is None or usd_per_gpu_hour > 0, "usd_per_gpu_hour", "must be > 0")
    gpn = cluster.gpus_per_node
    wanted = sorted({int(n) for n in (sizes or DEFAULT_SIZES)})
    for n in wanted:
        p.check(
            n >= 1 and (n < gpn or n % gpn == 0),
            "sizes",
            f"{n} GPUs is not a whole number of {gpn}-GPU nodes",
        )
    p.raise_if_any()
    return wanted


def _size_points(raw: list[tuple[int, PlanResult]]) -> list[SizePoint]:
    """One point per searched size; scaling efficiency and speedup against the smallest size where a layout fits,
    and for a size where none fits the reason."""
    base = next(((n, r.best) for n, r in raw if r.best is not None), None)
    points: list[SizePoint] = []
    for n, r in raw:
        b = r.best
        if b is None:
            top_reason = max(r.rejections.items(), key=lambda kv: kv[1])[0] if r.rejections else ""
            reason = "no layout fits in memory" if r.evaluated_layouts else f"no valid layout ({top_reason})"
            points.append(
                SizePoint(
                    n, False, None, r.evaluated_layouts, 0, None, None, None, None, None, r.elapsed_s, reason
                )
            )
            continue
        assert base is not None
        n0, b0 = base
        eff = (b.tokens_per_s / n) / (b0.tokens_per_s / n0)
        speedup = (b0.time_to_train_s or 0) / b.time_to_train_s if b.time_to_train_s else None
        points.append(
            SizePoint(
                n,
                True,
                b,
                r.evaluated_layouts,
                r.feasible_layouts,
                b.time_to_train_s,
                b.cost_usd,
                b.tokens_per_s,
                eff,
                speedup,
                r.elapsed_s,
            )
        )
    return points


def _smallest_meeting(ok: list[SizePoint], deadline_s: float | None) -> int | None:
    """The fewest GPUs whose time to train is within the deadline (None without a deadline or where none meets it)."""
    if deadline_s is None:
        return None
    return next(
        (pt.num_gpus for pt in ok if pt.time_to_train_s is not None and pt.time_to_train_s <= deadline_s),
        None,
    )


def _cheapest(ok: list[SizePoint]) -> int | None:
    """The size with the lowest cost per run of the compute, the fewer GPUs among equals."""
    return cheapest_size([(pt.num_gpus, pt.cost_usd) for pt in ok])


def cheapest_size(costs: Sequence[tuple[int, float | None]]) -> int | None:
    """The GPU count with the lowest cost of (GPU count, cost per run) pairs, the fewer GPUs among equals; a size
    without a cost counts as dearest; None when there are none."""
    if not costs:
        return None
    return min(costs, key=lambda nc: (nc[1] if nc[1] is not None else math.inf, nc[0]))[0]


def _sweep_assumptions(usd_per_gpu_hour: float | None) -> list[Assumption]:
    """What the sweep assumes, with the price where one was given."""
    assumptions = [
        Assumption("scaling", "strong", "", "the same global batch at every size (one training recipe)"),
        Assumption(
            "scaling efficiency",
            "per-GPU tokens/s ÷ per-GPU tokens/s at the smallest size that fits",
            "",
            "usual reading of 'x % scaling efficiency'",
        ),
        Assumption("knee", "Kneedle on (log2 GPUs, log2 time to train)", "", "Satopää et al. 2011"),
    ]
    if usd_per_gpu_hour is not None:
        assumptions.append(Assumption("price", usd_per_gpu_hour, "$/GPU-hour", "request or price book"))
    return assumptions
