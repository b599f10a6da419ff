"""`clusterplan validate layouts`: publishers' tuned layouts against the planner's ranking."""

from __future__ import annotations

import json
from pathlib import Path

from app.validation.layouts import load, replay_layouts, tuned_rows
from tests.cli_support import invoke
from tests.paths import DATA_DIR

DATA = DATA_DIR / "planner_tuned_layouts.csv"


def test_tuned_rows_pick_the_three_tables_once_each() -> None:
    rows = tuned_rows(load(DATA))
    sources = {r.get("source").split(" ")[0] for r in rows}
    assert len(rows) == 4 and sources == {"NVIDIA/Megatron-LM", "NVIDIA/NeMo", "Narayanan"}


def test_replay_finds_publishers_layouts_and_is_never_slower_when_theirs_fits() -> None:
    report = replay_layouts(load(DATA))
    s = report.summary()
    assert s["cases"] == 4 and s["skipped"] == 0
    by_model = {c.model_name: c for c in report.cases}
    # Megatron-LM README GPT-1.7B on 48 H100: TP1 PP1 DP48 with the distributed optimizer is our best
    c = by_model["GPT-1.7B"]
    assert c.layout_in_top5 and c.publisher_rank == 1
    # NeMo GPT-3 175B on 128 H100: TP4 PP8 VP6 is our best too
    c = by_model["GPT3-175B"]
    assert c.shape_in_top5 and c.layout_in_top5 and c.publisher_rank <= 5
    for c in report.cases:
        if c.publisher_fits:
            assert c.best_at_least_as_fast and c.speedup >= 1.0
    assert s["best_at_least_as_fast_when_publisher_fits"] == s["publisher_fits"]


def test_cli_validate_layouts_json(tmp_path: Path) -> None:
    res = invoke(["validate", "layouts", str(DATA), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["summary"]["cases"] == 4 and len(d["cases"]) == 4
    res = invoke(["validate", "layouts", str(tmp_path / "missing.csv")])
    assert res.exit_code != 0
