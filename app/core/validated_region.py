"""The validated region: which kinds of layout published measurements cover.

The estimator's accuracy bands (app.core.accuracy) hold for layouts like those the published runs used. A layout
with a feature no published run had (context parallelism on 512-token chunks, ZeRO-3 beside tensor
parallelism, …) is an extrapolation: the estimate may still be right, but nothing measured says so. The
planner therefore recommends the fastest layout inside the region and shows a faster one outside it beside,
with the reason.

The region is derived from the validation files (app.validation.region builds app/catalog/validated_region.json
from them; a test keeps the two in step):

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


@dataclass(frozen=True)
class LayoutFacts:
    """What the region looks at in one layout (in a cluster with `gpus_per_node`, at `seq_len` tokens)."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    etp: int
    zero: int
    micro_batch: int
    seq_len: int
    gpus_per_node: int
    local_experts: int = 0  # routed experts per rank (num_experts / ep); 0 for a dense model

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

    @property
    def cp_chunk_tokens(self) -> int:
        return self.seq_len // max(1, self.cp)

    @property
    def zero3_shard(self) -> int:
        """Ranks a ZeRO-3/FSDP parameter is sharded over (data- times context-parallel; 0 without ZeRO-3)."""
        return self.dp * self.cp if self.zero == 3 else 0


@dataclass(frozen=True)
class Feature:
    key: str
    label: str  # reads after "published runs have no" / "no published run has"
    present: Callable[[LayoutFacts], bool]


# Combinations that change how a framework runs, each a named kind of layout (the examples and the
# sharding combinations FSDP and Megatron treat separately).
FEATURES: tuple[Feature, ...] = (
    Feature("zero3_with_tp", "ZeRO-3/FSDP beside tensor parallelism", lambda f: f.zero == 3 and f.tp > 1),
    Feature("zero3_with_pp", "ZeRO-3/FSDP beside pipeline parallelism", lambda f: f.zero == 3 and f.pp > 1),
    Feature("zero3_with_cp", "ZeRO-3/FSDP beside context parallelism", lambda f: f.zero == 3 and f.cp > 1),
    Feature("tp_across_nodes", "tensor parallelism across nodes", lambda f: f.tp > f.gpus_per_node),
    Feature(
        "ep_across_nodes",
        "expert parallelism spanning nodes",
        lambda f: f.ep > 1 and f.ep * f.etp > f.gpus_per_node,
    ),
)


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
        "cp_min_chunk_tokens": min((r.cp_chunk_tokens for r in cp_rows), default=None),
        "cp_max": max((r.cp for r in rows), default=1),
        "micro_batch_max": max((r.micro_batch for r in rows), default=1),
        "zero3_shard_max": max((r.zero3_shard for r in rows), default=0),
        "local_experts_max": max((r.local_experts for r in rows), default=0),
        "features": {feature.key: sum(feature.present(r) for r in rows) for feature in FEATURES},
    }


def outside(facts: LayoutFacts, region: Mapping[str, Any]) -> list[str]:
    """Why a layout is outside the region (empty: inside), one reason per unmeasured feature or bound."""
    reasons: list[str] = []
    chunk_min = region.get("cp_min_chunk_tokens")
    if facts.cp > 1 and (chunk_min is None or facts.cp_chunk_tokens < chunk_min):
        shortest = f"the shortest published is {chunk_min:,}" if chunk_min else "no published run used CP"
        reasons.append(f"context parallelism on {facts.cp_chunk_tokens:,}-token chunks per rank ({shortest})")
    if facts.cp > int(region.get("cp_max") or 1):
        reasons.append(f"context parallel {facts.cp} (published runs reach {region.get('cp_max')})")
    if facts.micro_batch > int(region.get("micro_batch_max") or 1):
        reasons.append(
            f"micro-batch {facts.micro_batch} (published runs reach {region.get('micro_batch_max')})"
        )
    shard_max = int(region.get("zero3_shard_max") or 0)
    if facts.zero3_shard > shard_max:
        reasons.append(
            f"ZeRO-3/FSDP sharding over {facts.zero3_shard:,} ranks (published runs reach {shard_max:,})"
        )
    experts_max = int(region.get("local_experts_max") or 0)
    if facts.local_experts > experts_max:
        reasons.append(f"{facts.local_experts} routed experts per rank (published runs reach {experts_max})")
    counts = region.get("features") or {}
    for feature in FEATURES:
        if feature.present(facts) and not counts.get(feature.key):
            reasons.append(f"{feature.label} (no published run)")
    return reasons
