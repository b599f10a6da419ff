"""docs/performance.md reads as a report (results, method, targets, known gaps) and its history lives in
docs/validation/history.md; every constants anchor it links to exists."""

from __future__ import annotations

import re

from tests.paths import ROOT

PAGE = ROOT / "docs" / "performance.md"
HISTORY = ROOT / "docs" / "validation" / "history.md"
CONSTANTS = ROOT / "docs" / "constants.md"


def test_the_report_has_results_method_and_known_gaps() -> None:
    headings = re.findall(r"^## (.+)$", PAGE.read_text(), re.M)
    assert headings[:2] == ["Results", "Method"]
    assert "Known gaps" in headings


def test_the_report_keeps_no_history() -> None:
    page = PAGE.read_text()
    # the phrases of a lab notebook: what a past change did, and trees named by commit
    notebook = re.compile(r"before this work|what changed|earlier run|\bat `[0-9a-f]{7}`|tree at `", re.I)
    assert notebook.findall(page) == []
    assert re.search(r"^# Performance history$", HISTORY.read_text(), re.M)


def test_every_target_row_has_a_verdict_and_its_anchor_exists() -> None:
    page = PAGE.read_text()
    table = page[page.index("| what | figure |") : page.index("### The load test by endpoint")]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    assert len(rows) >= 8
    with_target = [row for row in rows if "anchor" in row or "target" in row.split("|")[4]]
    assert all(re.search(r"\| (met|met, narrowly|\*\*missed\*\*) \|$", row) for row in with_target)
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', CONSTANTS.read_text()))
    linked = set(re.findall(r"constants\.md#([a-z0-9-]+)", page))
    assert {"estimate-throughput-target", "contention-targets", "ui-latency-targets"} <= linked
    assert linked <= anchors | {"server-constants"}
