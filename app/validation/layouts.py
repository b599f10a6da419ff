"""Replay published, tuned layouts through the planner: is the publisher's choice among our top 5?

For every distinct configuration of the tuned-layout tables in validation/training_runs.csv (Narayanan et al.
2021 Table 1, the Megatron-LM README H100 table, the NeMo performance tables) the planner searches every layout
for the same model, GPU count, sequence length, global batch, dtype and framework conventions (the same
`SOURCE_RULES` the training-run replay uses: fabric, framework, flash attention). Reported per row:

* shape_in_top5 — the publisher's (tp, pp, cp) among the five fastest distinct (tp, pp, cp) shapes we rank;
* layout_in_top5 — one of our five fastest layouts agrees with every field the publisher states (tp, pp, dp,
  cp, and vp, micro-batch, ZeRO stage, recompute, SP where given);
* publisher_rank — rank of the fastest layout that agrees with the publisher among all layouts that fit;
* best_at_least_as_fast — our best predicted step time ≤ the estimator's step time for the publisher's layout
  (unknown fields take the training-run replay's documented defaults), with the predicted speed-up.

By default the search is limited to what the publisher's framework could run (FRAMEWORK_SPACES: e.g. no
ZeRO-3 or context parallelism in Megatron-LM of 2021); `framework_limits=False` searches everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.core.errors import SpecError
from app.core.estimate import Estimate, EstimateOptions, estimate
from app.core.hardware import ClusterSpec
from app.core.layout import RECOMPUTE_MODES, Layout, RunOptions
from app.core.model import ModelSpec
from app.core.planner import Constraints, PlannedLayout, SearchProblem, plan
from app.validation.training_runs import (
    UNSTATED_MICRO_BATCH,
    UNSTATED_VP,
    Row,
    SourceRule,
    best_completion,
    completion_candidates,
    load_rows,
    row_fabric,
    row_framework,
    row_gpu,
    row_layout,
    row_model,
    rule_for_row,
)

TUNED_SOURCES = ("arXiv 2104.04473) Table 1", "Megatron-LM README", "NVIDIA/NeMo")

# What each publisher's framework could run, so the search covers the publisher's own choices and no more:
# (substring of the source, allowed ZeRO stages, allowed context-parallel sizes, reason).
FRAMEWORK_SPACES: tuple[tuple[str, tuple[int, ...], tuple[int, ...] | None, str], ...] = (
    (
        "Narayanan",
        (0,),
        (1,),
        "Megatron-LM of 2021: no distributed optimizer (added in 2022), no ZeRO-3, no context parallelism",
    ),
    (
        "Megatron-LM README",
        (0, 1),
        None,
        "Megatron-core 2024: distributed optimizer (ZeRO-1); no ZeRO-2/3 in the benchmarked recipe",
    ),
    ("NeMo", (0, 1), None, "NeMo 24.07 on Megatron-core: distributed optimizer (ZeRO-1)"),
)


def framework_space(source: str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None, str]:
    for match, zero, cp, reason in FRAMEWORK_SPACES:
        if match.lower() in source.lower():
            return zero, cp, reason
    return None, None, "every layout"


SEARCH_TOP = 5000  # layouts kept to locate the publisher's rank


@dataclass
class LayoutCase:
    row: int
    source: str
    model_name: str
    num_gpus: int
    publisher: str
    stated: dict[str, Any]
    ours: str | None = None
    shape_in_top5: bool | None = None
    layout_in_top5: bool | None = None
    publisher_rank: int | None = None
    feasible_layouts: int = 0
    best_step_s: float | None = None
    publisher_step_s: float | None = None
    publisher_fits: bool | None = None
    best_at_least_as_fast: bool | None = None
    speedup: float | None = None
    elapsed_s: float = 0.0
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LayoutReport:
    cases: list[LayoutCase] = field(default_factory=list)

    @property
    def done(self) -> list[LayoutCase]:
        return [c for c in self.cases if c.skipped is None]

    def summary(self) -> dict[str, Any]:
        done = self.done
        n = len(done)

        def share(attr: str) -> float | None:
            return sum(1 for c in done if getattr(c, attr)) / n if n else None

        return {
            "cases": n,
            "skipped": len(self.cases) - n,
            "shape_in_top5": sum(1 for c in done if c.shape_in_top5),
            "layout_in_top5": sum(1 for c in done if c.layout_in_top5),
            "best_at_least_as_fast": sum(1 for c in done if c.best_at_least_as_fast),
            "publisher_fits": sum(1 for c in done if c.publisher_fits),
            "best_at_least_as_fast_when_publisher_fits": sum(
                1 for c in done if c.publisher_fits and c.best_at_least_as_fast
            ),
            "shape_in_top5_share": share("shape_in_top5"),
            "layout_in_top5_share": share("layout_in_top5"),
            "best_at_least_as_fast_share": share("best_at_least_as_fast"),
            "median_speedup": sorted(c.speedup for c in done if c.speedup)[n // 2] if n else None,
            "total_search_s": sum(c.elapsed_s for c in done),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"cases": [c.to_dict() for c in self.cases], "summary": self.summary()}


def tuned_rows(rows: list[Row], all_sources: bool = False) -> list[Row]:
    """One row per distinct configuration of the tuned-layout sources."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for row in rows:
        if not all_sources and not any(s.lower() in row.get("source").lower() for s in TUNED_SOURCES):
            continue
        key = tuple(
            row.get(k)
            for k in (
                "source",
                "model_name",
                "num_gpus",
                "tp",
                "pp",
                "dp",
                "cp",
                "micro_batch",
                "global_batch",
            )
        )
        if key in seen:
            continue
        seen.add(key)
        out.append(row)
    return out


def _stated(row: Row) -> dict[str, Any]:
    stated: dict[str, Any] = {}
    for col, name in (("tp", "tp"), ("pp", "pp"), ("dp", "dp"), ("cp", "cp"), ("micro_batch", "micro_batch")):
        v = row.int_or(col, None)
        if v is not None:
            stated[name] = v
    vp = row.int_or("interleave_v", None)
    if vp is not None:
        stated["vp"] = vp
    zero = row.int_or("zero_stage", None)
    if zero is not None:
        stated["zero"] = zero
    rec = row.get("recompute").lower()
    if rec in RECOMPUTE_MODES:
        stated["recompute"] = rec
    sp = row.get("sequence_parallel").lower()
    if sp:
        stated["sequence_parallel"] = sp.startswith("y") or sp in ("1", "true")
    return stated


def _matches(p: PlannedLayout, stated: dict[str, Any], flash: bool) -> bool:
    lay = p.layout
    for key, value in stated.items():
        actual = getattr(lay, key)
        if key == "recompute" and flash and {value, actual} <= {"none", "selective"}:
            continue  # identical under flash attention
        if key == "sequence_parallel" and lay.tp == 1:
            continue
        if actual != value:
            return False
    return True


def evaluate_case(row: Row, framework_limits: bool = True) -> LayoutCase:
    stated = _stated(row)
    n_gpus = row.int_or("num_gpus", 0) or 0
    publisher = " ".join(f"{k}={v}" for k, v in stated.items())
    case = LayoutCase(row.index, row.get("source"), row.get("model_name"), n_gpus, publisher, stated)
    rule = rule_for_row(row)
    try:
        model = row_model(row, rule)
        gpu = row_gpu(row)
        layout, defaults = row_layout(row, model, rule, n_gpus)
        gpn = min(gpu.default_gpus_per_node, n_gpus)
        if not n_gpus or n_gpus % gpn:
            case.skipped = f"{n_gpus} GPUs is not a whole number of {gpn}-GPU nodes"
            return case
        if model.num_layers % (layout.pp * layout.vp):
            case.skipped = "uneven pipeline stages are outside the planner's search"
            return case
        cluster = ClusterSpec(
            gpu=gpu, num_nodes=n_gpus // gpn, gpus_per_node=gpn, fabric=row_fabric(rule, gpu.name, gpn)
        )
        fw = row_framework(row, rule, layout)
        opts = EstimateOptions(framework=fw)
        seq = row.int_or("seq_len", 2048) or 2048
        zero_allowed, cp_allowed, _ = (
            framework_space(row.get("source")) if framework_limits else (None, None, "")
        )
        constraints = Constraints(
            zero=zero_allowed,
            cp=cp_allowed,
            max_vp=max(8, layout.vp),
            max_micro_batch=max(16, layout.micro_batch),
        )
        result = plan(
            SearchProblem(
                model,
                cluster,
                seq,
                layout.global_batch,
                run=RunOptions(dtype=layout.dtype, flash_attention=rule.flash_attention),
                options=opts,
            ),
            constraints=constraints,
            top=SEARCH_TOP,
            pareto_limit=0,
        )
    except (SpecError, ValueError, LookupError) as exc:
        case.skipped = str(exc)
        return case
    case.elapsed_s = result.elapsed_s
    case.feasible_layouts = result.feasible_layouts
    if result.best is None:
        case.skipped = "no layout fits"
        return case
    best = result.best
    case.ours = best.to_dict()["label"]
    case.best_step_s = best.step_time_s
    shapes: list[tuple[int, int, int]] = []
    for p in result.top:
        s = (p.layout.tp, p.layout.pp, p.layout.cp)
        if s not in shapes:
            shapes.append(s)
        if len(shapes) == 5:
            break
    case.shape_in_top5 = (stated.get("tp", 1), stated.get("pp", 1), stated.get("cp", 1)) in shapes
    case.layout_in_top5 = any(_matches(p, stated, rule.flash_attention) for p in result.top[:5])
    case.publisher_rank = next(
        (p.rank for p in result.top if _matches(p, stated, rule.flash_attention)), None
    )
    try:
        est = publisher_estimate(model, cluster, layout, seq, opts, rule, defaults)
        case.publisher_step_s = est.step.total_s
        case.publisher_fits = est.memory.fits
        case.best_at_least_as_fast = best.step_time_s <= est.step.total_s * (1 + 1e-9)
        case.speedup = est.step.total_s / best.step_time_s
    except SpecError as exc:
        case.skipped = f"publisher layout: {exc}"
    return case


def publisher_estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    seq: int,
    opts: EstimateOptions,
    rule: SourceRule,
    defaults: list[str],
) -> Estimate:
    """The publisher's layout estimated at the planner's best completion of the micro-batch and interleaving its
    row leaves blank, as the training-run replay completes them (app.validation.training_runs)."""
    mbs, vps = completion_candidates(
        model, layout, rule.framework, UNSTATED_MICRO_BATCH in defaults, UNSTATED_VP in defaults
    )
    tried: list[tuple[Estimate, Estimate]] = []
    for mb in mbs:
        for vp in vps:
            try:
                est = estimate(model, cluster, replace(layout, micro_batch=mb, vp=vp), seq, options=opts)
            except SpecError:
                continue  # a completion the publisher could not have run
            tried.append((est, est))
    if not tried:
        return estimate(model, cluster, layout, seq, options=opts)
    return best_completion(tried)[0]


def replay_layouts(rows: list[Row], all_sources: bool = False, framework_limits: bool = True) -> LayoutReport:
    """`framework_limits`: search only what the publisher's framework could run (FRAMEWORK_SPACES)."""
    return LayoutReport([evaluate_case(r, framework_limits) for r in tuned_rows(rows, all_sources)])


def load(path: Path | str) -> list[Row]:
    return load_rows(path)


def render_table(report: LayoutReport) -> str:
    lines = [
        f"{'row':>4} {'model':<16} {'GPUs':>5}  {'publisher':<44} {'our best':<46} top5 shape/layout  rank  speed-up"
    ]
    for c in report.cases:
        if c.skipped:
            lines.append(f"{c.row:>4} {c.model_name[:16]:<16} {c.num_gpus:>5}  skipped: {c.skipped}")
            continue
        pub = c.publisher.replace("micro_batch", "mb").replace("sequence_parallel", "sp")
        lines.append(
            f"{c.row:>4} {c.model_name[:16]:<16} {c.num_gpus:>5}  {pub[:44]:<44} {(c.ours or '')[:46]:<46} "
            f"{'yes' if c.shape_in_top5 else 'no ':>4}/{'yes' if c.layout_in_top5 else 'no ':<4}  "
            f"{c.publisher_rank if c.publisher_rank else '-':>5}  {c.speedup or 0:6.2f}×"
            + ("" if c.publisher_fits else "  (publisher layout predicted OOM)")
        )
    s = report.summary()
    if s["cases"]:
        lines += [
            "",
            f"publisher's (tp, pp, cp) shape in our top 5: {s['shape_in_top5']}/{s['cases']}; "
            f"publisher's full layout in our top 5: {s['layout_in_top5']}/{s['cases']}; "
            f"our best predicted at least as fast: {s['best_at_least_as_fast']}/{s['cases']} "
            f"({s['best_at_least_as_fast_when_publisher_fits']}/{s['publisher_fits']} where the publisher's layout "
            "fits our memory model); "
            f"median predicted speed-up {s['median_speedup']:.2f}×; search time {s['total_search_s']:.2f} s",
        ]
    return "\n".join(lines)
