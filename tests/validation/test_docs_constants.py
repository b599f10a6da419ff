"""Code points at the constants page by stable anchors, never at a round of the validation history."""

from __future__ import annotations

import re

from tests.paths import ROOT

ANCHOR_REF = re.compile(r"docs/constants\.md#([a-z0-9-]+)")
ROUND_REF = re.compile(r"\bround \d+\b", re.IGNORECASE)


def _app_sources() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "app").rglob("*.py"))]


def test_every_constants_anchor_the_code_names_exists() -> None:
    page = (ROOT / "docs" / "constants.md").read_text()
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', page))
    referenced = {(path, a) for path, text in _app_sources() for a in ANCHOR_REF.findall(text)}
    assert referenced, "no code points at docs/constants.md: the reference format changed"
    assert [(path, a) for path, a in referenced if a not in anchors] == []


def test_no_code_points_at_a_round() -> None:
    hits = [(path, m.group(0)) for path, text in _app_sources() for m in ROUND_REF.finditer(text)]
    assert hits == []


def test_the_history_keeps_the_rounds_and_the_report_does_not() -> None:
    report = (ROOT / "docs" / "validation_training_runs.md").read_text()
    history = (ROOT / "docs" / "validation" / "history.md").read_text()
    assert not re.search(r"^#+ Round \d+", report, re.M)
    assert len(re.findall(r"^### Round \d+", history, re.M)) >= 10
