"""The seed-claim table in docs/cost.md is the output of `clusterplan cost seed-claims`: it fails on drift."""

from __future__ import annotations

import re

import pytest

from app.services.seed_claims import claims, markdown
from tests.paths import ROOT

DOC = ROOT / "docs" / "cost.md"


def test_the_docs_table_is_the_commands_output(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["cost", "seed-claims"])
    assert (exc.value.code or 0) == 0
    printed = capsys.readouterr().out
    assert printed == markdown()
    block = re.search(r"<!-- seed-claims:begin -->\n(.*?)<!-- seed-claims:end -->", DOC.read_text(), re.S)
    assert block is not None, "docs/cost.md lost its seed-claims block"
    assert block.group(1) == printed, "docs/cost.md drifted: paste `clusterplan cost seed-claims` into it"


def test_the_claims_carry_the_published_arithmetic() -> None:
    rows = {c.claim.split(",")[0]: c for c in claims()}
    # $250k / ($45 × 730.5 h × 0.9) = 8.45 months; 500 × 30-60 s = 4.2-8.3 h; spot 0.4 / 0.85 of on-demand
    assert rows["Breakeven"].model.startswith("9.5 / 8.5 / 7.6")
    assert (
        rows["500 checkpoints × 30–60 s synchronous vs 3–5 s asynchronous"].model == "4.2–8.3 h vs 0.4–0.7 h"
    )
    assert rows["Spot: 60 % discount"].model.startswith("53 % net savings")
