"""Build the validated region (app/catalog/validated_region.json) from the published training runs.

Every row the replay can model (app.validation.training_runs.estimate_row: the layout as the source ran it,
its defaults filled the same way) contributes its layout; rows the replay skips are left out, as they are from
every validation figure. A run validates its kind of layout only where its measurement agrees with the estimate:
a run whose step time the replay misses by more than the ranking resolution (app.core.accuracy: the error within
which 8 in 10 published layout comparisons were ordered right, all kinds together) shows that the estimate cannot
be trusted for that kind, so it is left out too. MLPerf's Llama 3.1 8B on 512 GB200 with context parallelism on
2,048-token chunks, estimated 1.7× too fast, is such a run; so is the one ZeRO-3 run with TP 2 (+48 %).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.catalog import accuracy_table
from app.core.accuracy import ranking_resolution_of
from app.core.validated_region import LayoutFacts, num_experts_of, region_from
from app.validation.training_runs import TIME_METRICS, RowResult, evaluate_row, load_rows


def contradicted(result: RowResult, resolution_pct: float) -> bool:
    """Whether a replayed row's measured step time (or its time-like metric) is further from the estimate than the
    ranking resolution."""
    return (
        result.metric in TIME_METRICS
        and result.error_pct is not None
        and abs(result.error_pct) > resolution_pct
    )


def layout_facts(paths: Iterable[Path]) -> list[LayoutFacts]:
    resolution = ranking_resolution_of(accuracy_table(), None)
    facts: list[LayoutFacts] = []
    for path in paths:
        for row in load_rows(path):
            result = evaluate_row(row)
            if result.skipped is not None:
                continue  # left out of every validation figure, for the reason given there
            if resolution is not None and contradicted(result, resolution.resolution_pct):
                continue
            replayed = result.detail["replayed"]
            seq_len = row.int_or("seq_len", 2048) or 2048
            gpn, experts = replayed.cluster.gpus_per_node, num_experts_of(replayed.model)
            facts.append(LayoutFacts.of(replayed.layout, seq_len, gpn, experts))
    return facts


def build_region(paths: Iterable[Path]) -> dict[str, Any]:
    paths = list(paths)
    return {"files": sorted(p.name for p in paths), **region_from(layout_facts(paths))}


def dumps(region: dict[str, Any]) -> str:
    return json.dumps(region, indent=2, sort_keys=True) + "\n"
