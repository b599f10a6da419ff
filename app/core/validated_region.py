"""The validated region: which kinds of layout published measurements cover.

The estimator's accuracy bands (app.core.accuracy) hold for layouts like those the published runs used. A layout
with a feature no published run had (context parallelism on 512-token chunks, ZeRO-3 beside tensor
parallelism, …) is an extrapolation: the estimate may still be right, but nothing measured says so. The
planner therefore recommends the fastest layout inside the region and shows a faster one outside it beside,
with the reason.

The region is derived from the validation files (app.validation.region builds app/catalog/validated_region.json
from them, leaving out the runs whose measurement contradicts their estimate by more than the ranking resolution;
a test keeps the two in step):

- bounds: the smallest context-parallel chunk (tokens per rank, seq_len / cp), the largest cp and micro-batch
  any published run used, the most ranks a published ZeRO-3/FSDP run sharded its parameters over (each
  all-gather and reduce-scatter then spans them all, at a scale nothing measured), and the most routed experts a
  published mixture-of-experts run kept on one rank (num_experts / ep: each is its own GEMM, quantization and
  launch in every layer pass, and a layout with few or no expert-parallel ranks trades the all-to-all the model
  prices for many small expert GEMMs no published run measured);
- features that must have at least one published run: each counted over the rows that have it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Num = (
    Any  # an int for one layout, a numpy array for the planner's columns of layouts (LayoutFacts.of_columns)
)


@dataclass(frozen=True)
class LayoutFacts:
    """What the region looks at in one layout (in a cluster with `gpus_per_node`, at `seq_len` tokens): ints, or
    numpy arrays with one entry per layout (`of_columns`), for which every check below is evaluated at once."""

    tp: Num
    pp: Num
    dp: Num
    cp: Num
    ep: Num
    etp: Num
    zero: Num
    micro_batch: Num
    seq_len: int
    gpus_per_node: int
    local_experts: Num = 0  # routed experts per rank (num_experts / ep); 0 for a dense model

    @classmethod
    def of(cls, layout: Any, seq_len: int, gpus_per_node: int, num_experts: int = 0) -> LayoutFacts:
        """The facts of `layout` (a Layout or its fields) for a model with `num_experts` routed experts."""
        tp = int(layout.tp)
        etp = getattr(layout, "etp", None)
        return cls(
            tp=tp,
            pp=int(layout.pp),
            dp=int(layout.dp),
            cp=int(layout.cp),
            ep=int(layout.ep),
            etp=int(etp) if etp else tp,
            zero=int(layout.zero),
            micro_batch=int(layout.micro_batch),
            seq_len=int(seq_len),
            gpus_per_node=int(gpus_per_node),
            local_experts=int(num_experts) // max(1, int(layout.ep)) if num_experts else 0,
        )

    @classmethod
    def of_columns(cls, rows: Any, seq_len: int, gpus_per_node: int, num_experts: int = 0) -> LayoutFacts:
        """The facts of every layout of the planner's columns (app.core.planner_eval.LayoutArrays: an `etp` of 0
        is the legacy expert layout, etp = tp)."""
        tp, ep = np.asarray(rows.tp), np.asarray(rows.ep)
        return cls(
            tp=tp,
            pp=np.asarray(rows.pp),
            dp=np.asarray(rows.dp),
            cp=np.asarray(rows.cp),
            ep=ep,
            etp=np.where(np.asarray(rows.etp) > 0, rows.etp, tp),
            zero=np.asarray(rows.zero),
            micro_batch=np.asarray(rows.micro_batch),
            seq_len=int(seq_len),
            gpus_per_node=int(gpus_per_node),
            local_experts=int(num_experts) // np.maximum(1, ep) if num_experts else np.zeros_like(ep),
        )

    @property
    def cp_chunk_tokens(self) -> Num:
        return self.seq_len // np.maximum(1, self.cp)

    @property
    def zero3_shard(self) -> Num:
        """Ranks a ZeRO-3/FSDP parameter is sharded over (data- times context-parallel; 0 without ZeRO-3)."""
        return np.where(self.zero == 3, self.dp * self.cp, 0)


@dataclass(frozen=True)
class Feature:
    key: str
    label: str  # reads after "published runs have no" / "no published run has"
    present: Callable[[LayoutFacts], Any]  # a bool, or a boolean array for columns of layouts


# Combinations that change how a framework runs, each a named kind of layout (the examples and the
# sharding combinations FSDP and Megatron treat separately).
FEATURES: tuple[Feature, ...] = (
    Feature("zero3_with_tp", "ZeRO-3/FSDP beside tensor parallelism", lambda f: (f.zero == 3) & (f.tp > 1)),
    Feature("zero3_with_pp", "ZeRO-3/FSDP beside pipeline parallelism", lambda f: (f.zero == 3) & (f.pp > 1)),
    Feature("zero3_with_cp", "ZeRO-3/FSDP beside context parallelism", lambda f: (f.zero == 3) & (f.cp > 1)),
    Feature("tp_across_nodes", "tensor parallelism across nodes", lambda f: f.tp > f.gpus_per_node),
    Feature(
        "ep_across_nodes",
        "expert parallelism spanning nodes",
        lambda f: (f.ep > 1) & (f.ep * f.etp > f.gpus_per_node),
    ),
)


@dataclass(frozen=True)
class Check:
    """One way a layout can be outside a region: `beyond` (a bool, or a boolean array for columns) and the reason
    for one layout."""

    beyond: Callable[[LayoutFacts, Mapping[str, Any]], Any]
    reason: Callable[[LayoutFacts, Mapping[str, Any]], str]


def _short_chunk(f: LayoutFacts, r: Mapping[str, Any]) -> Any:
    chunk_min = r.get("cp_min_chunk_tokens")
    return (f.cp > 1) & (f.cp_chunk_tokens < chunk_min) if chunk_min else f.cp > 1


def _short_chunk_reason(f: LayoutFacts, r: Mapping[str, Any]) -> str:
    chunk_min = r.get("cp_min_chunk_tokens")
    shortest = f"the shortest published is {chunk_min:,}" if chunk_min else "no published run used CP"
    return f"context parallelism on {int(f.cp_chunk_tokens):,}-token chunks per rank ({shortest})"


def _bound(r: Mapping[str, Any], key: str, default: int) -> int:
    return int(r.get(key) or default)


# The bounds, in the order their reasons are given; then each feature no published run has (feature_check).
BOUND_CHECKS: tuple[Check, ...] = (
    Check(_short_chunk, _short_chunk_reason),
    Check(
        lambda f, r: f.cp > _bound(r, "cp_max", 1),
        lambda f, r: f"context parallel {int(f.cp)} (published runs reach {_bound(r, 'cp_max', 1)})",
    ),
    Check(
        lambda f, r: f.micro_batch > _bound(r, "micro_batch_max", 1),
        lambda f, r: (
            f"micro-batch {int(f.micro_batch)} (published runs reach {_bound(r, 'micro_batch_max', 1)})"
        ),
    ),
    Check(
        lambda f, r: f.zero3_shard > _bound(r, "zero3_shard_max", 0),
        lambda f, r: (
            f"ZeRO-3/FSDP sharding over {int(f.zero3_shard):,} ranks (published runs reach "
            f"{_bound(r, 'zero3_shard_max', 0):,})"
        ),
    ),
    Check(
        lambda f, r: f.local_experts > _bound(r, "local_experts_max", 0),
        lambda f, r: (
            f"{int(f.local_experts)} routed experts per rank (published runs reach "
            f"{_bound(r, 'local_experts_max', 0)})"
        ),
    ),
)


def feature_check(feature: Feature) -> Check:
    """A feature as a check: beyond the region when the layout has it and no published run does."""
    return Check(
        lambda f, r: feature.present(f) & (not (r.get("features") or {}).get(feature.key)),
        lambda f, r: f"{feature.label} (no published run confirms the estimate)",
    )


CHECKS: tuple[Check, ...] = (*BOUND_CHECKS, *(feature_check(feature) for feature in FEATURES))


def num_experts_of(model: Any) -> int:
    """Routed experts of a model (0 for a dense one): what the experts-per-rank bound divides by ep."""
    moe = getattr(model, "moe", None)
    return int(moe.num_experts) if moe else 0


def features_of(facts: LayoutFacts) -> list[str]:
    return [feature.key for feature in FEATURES if feature.present(facts)]


def region_from(rows: Iterable[LayoutFacts]) -> dict[str, Any]:
    """The region published layouts span: their count, the bounds and how many rows have each feature."""
    rows = list(rows)
    cp_rows = [r for r in rows if r.cp > 1]
    return {
        "rows": len(rows),
        "cp_min_chunk_tokens": min((int(r.cp_chunk_tokens) for r in cp_rows), default=None),
        "cp_max": max((r.cp for r in rows), default=1),
        "micro_batch_max": max((r.micro_batch for r in rows), default=1),
        "zero3_shard_max": max((int(r.zero3_shard) for r in rows), default=0),
        "local_experts_max": max((r.local_experts for r in rows), default=0),
        "features": {feature.key: sum(bool(feature.present(r)) for r in rows) for feature in FEATURES},
    }


def outside(facts: LayoutFacts, region: Mapping[str, Any]) -> list[str]:
    """Why one layout is outside the region (empty: inside), one reason per unmeasured feature or bound."""
    return [check.reason(facts, region) for check in CHECKS if check.beyond(facts, region)]


def inside(facts: LayoutFacts, region: Mapping[str, Any]) -> Any:
    """Whether each layout is inside the region: the same CHECKS as `outside`, a boolean array for columns."""
    beyond = np.zeros(np.shape(facts.tp), dtype=bool)
    for check in CHECKS:
        beyond = beyond | check.beyond(facts, region)
    return ~beyond
