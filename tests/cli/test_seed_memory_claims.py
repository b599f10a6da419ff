"""The seed article's memory formula in docs/validation.md is the output of `clusterplan validate seed-memory`."""

from __future__ import annotations

import json
import re

import pytest

from app.validation.seed_memory import claims, naive_terms, render_markdown
from tests.paths import ROOT

DOC = ROOT / "docs" / "validation.md"


def test_the_docs_table_is_the_commands_output(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["validate", "seed-memory"])
    assert (exc.value.code or 0) == 0
    printed = capsys.readouterr().out
    block = re.search(r"<!-- seed-memory:begin -->\n(.*?)<!-- seed-memory:end -->", DOC.read_text(), re.S)
    assert block is not None, "docs/validation.md lost its seed-memory block"
    assert block.group(1) == printed, "docs/validation.md drifted: paste `clusterplan validate seed-memory`"


def test_the_formula_is_the_articles() -> None:
    # builders-guide: estimate_memory(70, 64, 8, 4) = 70·2/8 + 70·4/8 + 70·2/8 + 70·12/32 GB
    assert sum(naive_terms(70, 8, 4).values()) == pytest.approx(96.25)
    assert sum(naive_terms(70, 4, 8).values()) == pytest.approx(166.25)


def test_each_term_is_the_estimators_stage_split_into_the_articles_terms() -> None:
    results = claims()
    for claim in results:
        terms = {r.term: r for r in claim.rows}
        # the model states scale with 1/(tp·pp) in the estimator: the article's ÷ TP only is pp× too high
        assert terms["weights"].naive_gb / terms["weights"].estimator_gb > claim.pp * 0.9
        assert terms["other"].naive_gb == 0 and terms["other"].estimator_gb > 0
    first, second = results
    assert first.estimator_gb < second.estimator_gb  # the article's claim: TP8 PP4 needs less than TP4 PP8
    assert render_markdown(results).count("**total**") == 2


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    with pytest.raises(SystemExit):
        main(["validate", "seed-memory", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [(d["tp"], d["pp"]) for d in doc["layouts"]] == [(8, 4), (4, 8)]
    assert all(d["ratio"] == pytest.approx(d["naive_gb"] / d["estimator_gb"]) for d in doc["layouts"])
