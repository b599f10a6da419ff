"""Platform caveats (app.core.accuracy.PLATFORM_CAVEATS): what published runs of one kind of model on one GPU
generation measured against their estimates, quoted beside every estimate of that kind. The quoted figures must be
those of the validation files, and the caveat must reach the estimate, the search and the saved plan."""

from __future__ import annotations

import copy
import glob
import json
from pathlib import Path
from typing import Any

import pytest

from app.core.accuracy import BLACKWELL_LARGE_DENSE, band_for, ratio_stats
from app.services.estimate import platform_caveat_text
from app.validation.accuracy import platform_ratios
from tests.paths import ROOT

FILES = [Path(p) for p in sorted(glob.glob(str(ROOT / "tests" / "data" / "training_runs*.csv")))]
EXAMPLE = json.loads((ROOT / "examples" / "llama31-405b-pp16-2048xh100.json").read_text())


def _stats(reference: bool) -> dict[str, Any]:
    return ratio_stats(platform_ratios(FILES, BLACKWELL_LARGE_DENSE, reference))


def test_the_blackwell_caveat_quotes_the_validation_files() -> None:
    c = BLACKWELL_LARGE_DENSE
    measured = _stats(reference=False)
    assert measured["runs"] == c.band.runs
    assert (measured["ratio_low"], measured["ratio_median"], measured["ratio_high"]) == pytest.approx(
        (c.band.ratio_low, c.band.ratio_median, c.band.ratio_high), abs=0.005
    )
    assert (measured["ratio_min"], measured["ratio_max"]) == pytest.approx(
        (c.band.ratio_min, c.band.ratio_max), abs=0.005
    )
    assert measured["mape_pct"] == pytest.approx(c.band.mape_pct, abs=0.05)
    reference = _stats(reference=True)
    assert reference["runs"] == c.reference_runs
    assert (reference["ratio_low"], reference["ratio_high"]) == pytest.approx(
        (c.reference_low, c.reference_high), abs=0.005
    )
    # the caveat is only worth saying because the platform differs from the generation before it
    assert c.band.ratio_median > reference["ratio_high"]


def test_the_caveat_applies_to_large_dense_models_on_blackwell_only() -> None:
    c = BLACKWELL_LARGE_DENSE
    assert c.applies(10.0, 405e9, moe=False) and c.applies(10.3, 340e9, moe=False)
    assert not c.applies(9.0, 405e9, moe=False)  # H100
    assert not c.applies(10.0, 70e9, moe=False)  # smaller models scatter around their estimates
    assert not c.applies(10.0, 671e9, moe=True)  # MoE models have their own bands
    assert f"{c.band.ratio_median:.2f}×" in c.sentence() and "H100 and H200" in c.sentence()


def test_a_covered_estimate_quotes_the_platform_s_runs_as_its_band() -> None:
    from app.catalog import accuracy_table, find_model

    model = find_model("Llama-3.1-405B")
    on_blackwell = band_for(accuracy_table(), model, 8192, None, "alltoall", 10.0)
    on_hopper = band_for(accuracy_table(), model, 8192, None, "alltoall", 9.0)
    assert on_blackwell == BLACKWELL_LARGE_DENSE.band and on_blackwell.regime == "dense-blackwell-300b"
    assert on_hopper is not None and on_hopper.regime == "dense"
    assert on_blackwell.ratio_low > on_hopper.ratio_low and on_blackwell.ratio_high > on_hopper.ratio_high
    # long context keeps its own band: no published run of this size on Blackwell measured it
    long = band_for(accuracy_table(), model, 131072, None, "alltoall", 10.0)
    assert long is not None and long.regime == "dense-long-context"
    # the caveat says "the range above is these runs'": only where the band is theirs
    assert platform_caveat_text(on_blackwell) == BLACKWELL_LARGE_DENSE.sentence()
    assert platform_caveat_text(long) is None and platform_caveat_text(on_hopper) is None


def _scenario(gpu: str) -> dict[str, Any]:
    body = copy.deepcopy(EXAMPLE)
    body["cluster"] = {"gpu": gpu, "nodes": 512 if gpu == "GB200" else 256}
    body["layout"].update(tp=4 if gpu == "GB200" else 8, dp=16 if gpu == "GB200" else 8)
    return body


def test_the_estimate_and_the_search_carry_the_caveat(client: Any) -> None:
    on_gb200 = client.post("/api/v1/estimate", json=_scenario("GB200"))
    assert on_gb200.status_code == 200, on_gb200.text
    accuracy = on_gb200.json()["accuracy"]
    assert accuracy["platform_caveat"] == BLACKWELL_LARGE_DENSE.sentence()
    assert (
        accuracy["regime"] == "dense-blackwell-300b"
        and accuracy["ratio_median"] == BLACKWELL_LARGE_DENSE.band.ratio_median
    )
    step = on_gb200.json()["step"]["total_s"]
    assert accuracy["step_time_range_s"] == pytest.approx(
        [step * BLACKWELL_LARGE_DENSE.band.ratio_low, step * BLACKWELL_LARGE_DENSE.band.ratio_high]
    )
    on_h100 = client.post("/api/v1/estimate", json=_scenario("H100-SXM"))
    assert on_h100.status_code == 200, on_h100.text
    assert on_h100.json()["accuracy"]["platform_caveat"] is None
    body = {
        "model": "Llama-3.1-405B",
        "cluster": {"gpu": "GB200", "nodes": 512},
        "training": {"seq_len": 8192, "tokens": 15e12},
        "global_batch": 2048,
        "top": 3,
    }
    searched = client.post("/api/v1/plan", json=body)
    assert searched.status_code == 200, searched.text
    assert searched.json()["accuracy"]["platform_caveat"] == BLACKWELL_LARGE_DENSE.sentence()
    assert searched.json()["accuracy"]["regime"] == "dense-blackwell-300b"


def test_the_saved_plan_s_accuracy_note_carries_the_caveat(client: Any) -> None:
    created = client.post("/api/v1/plans", json={"name": "405B on GB200", "scenario": _scenario("GB200")})
    assert created.status_code in (200, 201), created.text
    result = created.json()["current"]["result"]
    assert BLACKWELL_LARGE_DENSE.sentence() in result["accuracy"]["step"]
