"""Build the validated region (app/catalog/validated_region.json) from the published training runs.

Every row the replay can model (app.validation.training_runs.estimate_row: the layout as the source ran it,
its defaults filled the same way) contributes its layout; rows the replay skips are left out, as they are from
every validation figure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.core.errors import SpecError
from app.core.validated_region import LayoutFacts, num_experts_of, region_from
from app.errors import NotFoundError
from app.validation.training_runs import RowSkipped, estimate_row, load_rows


def layout_facts(paths: Iterable[Path]) -> list[LayoutFacts]:
    facts: list[LayoutFacts] = []
    for path in paths:
        for row in load_rows(path):
            try:
                replayed = estimate_row(row)
            except (RowSkipped, SpecError, NotFoundError, ValueError, ArithmeticError, TypeError):
                continue  # the rows evaluate_row skips, for the same reasons
            seq_len = row.int_or("seq_len", 2048) or 2048
            gpn, experts = replayed.cluster.gpus_per_node, num_experts_of(replayed.model)
            facts.append(LayoutFacts.of(replayed.layout, seq_len, gpn, experts))
    return facts


def build_region(paths: Iterable[Path]) -> dict[str, Any]:
    paths = list(paths)
    return {"files": sorted(p.name for p in paths), **region_from(layout_facts(paths))}


def dumps(region: dict[str, Any]) -> str:
    return json.dumps(region, indent=2, sort_keys=True) + "\n"
