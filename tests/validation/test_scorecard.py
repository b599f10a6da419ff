"""`clusterplan validate scorecard`: one table of every headline figure, each equal to its own replay, judged
against its target as quoted, and compared with a scorecard saved earlier."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from app.catalog import SCORECARD_FILE
from app.validation import scorecard
from app.validation.scorecard import Figure, change
from tests.cli_support import invoke
from tests.paths import DATA_DIR


@pytest.fixture(scope="module")
def figures() -> dict[str, Figure]:
    return {f.key: f for f in scorecard.build()}


def test_each_figure_is_its_own_replay(figures: dict[str, Figure]) -> None:
    from app.validation.collectives import validate_file
    from app.validation.training_runs import load_rows, replay
    from app.validation.training_totals import load_rows as load_totals
    from app.validation.training_totals import replay as replay_totals

    held = replay(load_rows(DATA_DIR / "training_runs_heldout.csv")).summary()["time"]
    assert figures["heldout.time"].value == pytest.approx(held["mape_pct"])
    assert figures["heldout.time"].n == held["n"]
    final = replay(load_rows(DATA_DIR / "training_runs_final_check.csv")).summary()["time"]
    assert figures["final.time"].value == pytest.approx(final["mape_pct"])
    totals = replay_totals(load_totals(DATA_DIR / "training_totals.csv")).summary()
    assert figures["runs.best"].value == pytest.approx(totals["mape_pct"])
    assert figures["runs.optimistic"].value == totals["optimistic"]
    small = validate_file(DATA_DIR / "network" / "collectives.csv").to_json()["summary"]["small"]
    assert figures["coll.dev.small.p90"].value == pytest.approx(small["p90_abs_pct"])
    assert figures["coll.dev.small.p90"].n == small["n"]


def test_band_figures_are_the_bands_estimates_quote(figures: dict[str, Figure]) -> None:
    """Each band figure is the committed band (app/catalog/accuracy.json) that every estimate of that kind quotes:
    the same rows, the same MAPE, and every band of the table is on the scorecard."""
    from app.catalog import accuracy_table

    regimes = accuracy_table()["regimes"]
    bands = {key.removeprefix("band."): f for key, f in figures.items() if key.startswith("band.")}
    assert set(bands) == set(regimes)
    for regime, record in regimes.items():
        assert bands[regime].n == record["runs"], regime
        assert bands[regime].value == pytest.approx(record["mape_pct"]), regime


def test_roles_and_targets(figures: dict[str, Figure]) -> None:
    assert figures["dev.time"].role == scorecard.DEVELOPMENT
    assert figures["heldout.dense"].role == scorecard.HELD_OUT
    assert figures["coll.sweeps.all.p90"].role == scorecard.HELD_OUT
    # a third of the whole runs, rounded down, may be more than 10 % low
    assert figures["runs.optimistic"].limit == (figures["runs.optimistic"].n or 0) // 3
    # the held-out collective files are reported, not judged; the development set's are
    assert figures["coll.heldout.small.p90"].limit is None
    assert figures["coll.dev.small.p90"].limit == 35.0
    # the dense rows of the held-out file include the long-context dense ones
    assert 0 < (figures["heldout.dense"].n or 0) < (figures["heldout.time"].n or 0)


@pytest.mark.parametrize(
    ("value", "limit", "at_least", "status"),
    [
        (4.51, 4.5, False, "met"),  # quoted as 4.5 %
        (4.56, 4.5, False, "not met"),  # quoted as 4.6 %
        (9.0, 4.0, False, "not met"),
        (0.0, 0.0, False, "met"),
        (3.0, 4.0, True, "not met"),
        (4.0, 4.0, True, "met"),
        (7.0, None, False, ""),
        (None, 4.0, False, "not met"),  # a target with no rows left to judge
    ],
)
def test_status_is_judged_as_quoted(
    value: float | None, limit: float | None, at_least: bool, status: str
) -> None:
    assert Figure("k", "label", "held out", value, limit=limit, at_least=at_least).status == status


def test_change_says_which_way_is_better() -> None:
    error = Figure("heldout.time", "l", "held out", 12.0)
    assert change(error, 14.0) == (pytest.approx(-2.0), "better")
    assert change(error, 11.0) == (pytest.approx(1.0), "worse")
    assert change(error, 12.01)[1] == ""  # rounding
    assert change(error, None) == (None, "")
    inside = Figure("runs.range", "l", "held out", 10.0, unit="runs")
    assert change(inside, 9.0) == (pytest.approx(1.0), "better")


def test_change_of_a_signed_error_is_judged_by_its_distance_from_zero() -> None:
    """The whole runs' mean error is signed (negative: optimistic): −20 % → −25 % is worse, not better."""
    mean = Figure("runs.mean", "l", "held out", -25.0)
    assert change(mean, -20.0) == (pytest.approx(-5.0), "worse")
    assert change(mean, -30.0) == (pytest.approx(5.0), "better")
    assert change(Figure("runs.mean", "l", "held out", 2.0), -4.0)[1] == "better"
    assert change(Figure("runs.mean", "l", "held out", 6.0), -4.0)[1] == "worse"


def test_cli_json_and_against(
    tmp_path: Path, figures: dict[str, Figure], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scorecard, "build", lambda: list(figures.values()))
    saved = invoke(["validate", "scorecard", "--json"])
    assert saved.exit_code == 0, saved.output
    document = json.loads(saved.output)
    assert {f["key"] for f in document["figures"]} == set(figures)
    assert document["summary"]["targets"] == sum(1 for f in figures.values() if f.limit is not None)
    # pretend the held-out MAPE was 2 points higher and the final check's 2 points lower before
    for f in document["figures"]:
        if f["key"] == "heldout.time":
            f["value"] += 2.0
        if f["key"] == "final.time":
            f["value"] -= 2.0
    document["figures"] = [f for f in document["figures"] if f["key"] != "nvfp4.time"]
    before = tmp_path / "before.json"
    before.write_text(json.dumps(document), encoding="utf-8")
    table = invoke(["validate", "scorecard", "--against", str(before)])
    assert table.exit_code == 0, table.output
    lines = {line.split("  ")[0]: line for line in table.output.splitlines()}
    assert lines["held-out file: step time MAPE"].endswith("-2.00 better")
    assert lines["final check (all MoE): step time MAPE"].endswith("+2.00 worse")
    assert lines["NVFP4 runs (its one constant chosen here): MAPE"].endswith("new")
    assert lines["step time MAPE"].endswith("=")
    # --json with --against carries the same change per figure
    changed = invoke(["validate", "scorecard", "--json", "--against", str(before)])
    assert changed.exit_code == 0, changed.output
    rows = {f["key"]: f for f in json.loads(changed.output)["figures"]}
    assert rows["heldout.time"]["change"] == pytest.approx(-2.0)
    assert rows["heldout.time"]["change_verdict"] == "better"
    assert rows["final.time"]["change_verdict"] == "worse"
    assert rows["nvfp4.time"]["change"] is None and rows["nvfp4.time"]["change_verdict"] == "new"
    assert rows["dev.time"]["change"] == 0 and rows["dev.time"]["change_verdict"] == ""


@pytest.mark.parametrize(
    "content",
    [
        "{}",
        "not json",
        '{"figures": [{"value": 1}]}',
        '{"figures": [{"key": "dev.time", "value": "5.3"}]}',  # a value that is no number
        '{"figures": [{"key": "dev.time", "value": true}]}',
    ],
)
def test_against_a_file_that_is_no_scorecard_is_one_line(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    from tests.cli_support import clusterplan

    result = clusterplan("validate", "scorecard", "--against", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "not a scorecard written by --json" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_committed_scorecard_is_what_the_replay_gives_now(figures: dict[str, Figure]) -> None:
    committed = json.loads(SCORECARD_FILE.read_text(encoding="utf-8"))
    assert committed == json.loads(scorecard.dumps(list(figures.values()))), (
        "app/catalog/scorecard.json is stale: run `clusterplan validate scorecard --write`"
    )


def test_accuracy_page_and_api_show_the_committed_scorecard(client: Any) -> None:
    committed = json.loads(SCORECARD_FILE.read_text(encoding="utf-8"))
    api = client.get("/api/v1/accuracy/scorecard")
    assert api.status_code == 200 and api.json() == committed
    page = client.get("/catalog/accuracy")
    assert page.status_code == 200
    held = next(f for f in committed["figures"] if f["key"] == "heldout.time")
    row = re.search(r'<tr id="figure-heldout-time">(.*?)</tr>', page.text, re.S)
    assert row is not None
    assert f"{held['value']:.1f} %" in row.group(1) and "held out" in row.group(1)
    summary = committed["summary"]
    assert f"{summary['met']} of {summary['targets']} targets met" in page.text
    for f in committed["figures"]:  # each status in words, a missed target marked
        found = re.search(rf'<tr id="figure-{f["key"].replace(".", "-")}">(.*?)</tr>', page.text, re.S)
        assert found is not None, f["key"]
        words = {
            "not met": '<span class="not-met">not met</span>',
            "met": '<span class="met">met</span>',
            "": "reported",
        }
        assert words[f["status"]] in found.group(1), f["key"]
