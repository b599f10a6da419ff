"""POST /api/v1/estimate states the time to train on the wall clock beside the compute time: the goodput of
that many GPUs (failures, checkpoint stalls, restarts and fail-slows) divides the compute time."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from app.core.units import HOUR
from tests.paths import EXAMPLES_DIR


def _body(nodes: int | None = None, tokens: float | None = 1e12) -> dict[str, Any]:
    body = json.loads((EXAMPLES_DIR / "llama3-70b-64xh100.json").read_text())
    body = copy.deepcopy(body)
    if tokens is None:
        body["training"].pop("tokens", None)
    else:
        body["training"]["tokens"] = tokens
    if nodes is not None:
        body["cluster"]["nodes"] = nodes
        body["layout"]["dp"] = body["layout"]["dp"] * nodes // 8
        body["layout"]["global_batch"] = (
            body["layout"]["global_batch"] * nodes // 8
        )  # same micro-batches per rank
    return body


def test_wall_clock_is_the_compute_time_over_the_goodput(client: Any) -> None:
    out = client.post("/api/v1/estimate", json=_body()).json()
    compute, wall, goodput = out["time_to_train_s"], out["wall_clock_time_to_train_s"], out["goodput"]
    assert 0.5 < goodput < 1.0
    assert wall == pytest.approx(compute / goodput, rel=1e-12)
    assert wall > compute
    assert out["wall_clock_gpu_hours"] == pytest.approx(out["num_gpus"] * wall / HOUR, rel=1e-12)


def test_more_gpus_lose_more_to_failures(client: Any) -> None:
    small = client.post("/api/v1/estimate", json=_body()).json()
    r = client.post("/api/v1/estimate", json=_body(nodes=512))
    assert r.status_code == 200, r.text
    large = r.json()
    assert large["num_gpus"] == 64 * small["num_gpus"]
    assert large["goodput"] < small["goodput"]


def test_the_scenario_sets_the_fail_slows_of_its_cluster(client: Any) -> None:
    """cluster.fail_slow_slowdown replaces the goodput model's default (1.34 across nodes): 1 counts failures,
    checkpoints and restarts alone; the compute time does not move."""
    default = client.post("/api/v1/estimate", json=_body()).json()
    body = _body()
    body["cluster"]["fail_slow_slowdown"] = 1
    failures_only = client.post("/api/v1/estimate", json=body).json()
    body["cluster"]["fail_slow_slowdown"] = 2
    doubled = client.post("/api/v1/estimate", json=body).json()
    assert default["time_to_train_s"] == failures_only["time_to_train_s"] == doubled["time_to_train_s"]
    assert (default["fail_slow_slowdown"], failures_only["fail_slow_slowdown"]) == (1.34, 1)
    # each useful second takes 1.34 (2) seconds of wall time on top of the failures' share
    assert 1 / default["goodput"] == pytest.approx(1 / failures_only["goodput"] + 0.34)
    assert 1 / doubled["goodput"] == pytest.approx(1 / failures_only["goodput"] + 1.0)
    body["cluster"]["fail_slow_slowdown"] = 0.5
    bad = client.post("/api/v1/estimate", json=body)
    assert bad.status_code == 422
    assert any(d["loc"][-1] == "fail_slow_slowdown" for d in bad.json()["detail"]), bad.json()


def test_no_tokens_no_time_to_train(client: Any) -> None:
    out = client.post("/api/v1/estimate", json=_body(tokens=None)).json()
    assert out["time_to_train_s"] is None
    assert out["goodput"] is None and out["wall_clock_time_to_train_s"] is None


def test_the_time_to_train_range_is_given_on_the_wall_clock_too(client: Any) -> None:
    """The accuracy band's time-to-train range (the step band widened by whole published runs, whose reported hours
    were compared with the wall-clock prediction where they included failures) is stated on both clocks."""
    out = client.post("/api/v1/estimate", json=_body()).json()
    acc = out["accuracy"]
    ratios = [acc["time_to_train_ratio_low"], acc["time_to_train_ratio_high"]]
    assert acc["time_to_train_range_s"] == pytest.approx(
        [out["time_to_train_s"] * r for r in ratios], rel=1e-12
    )
    assert acc["wall_clock_range_s"] == pytest.approx(
        [out["wall_clock_time_to_train_s"] * r for r in ratios], rel=1e-12
    )
    assert out["accuracy"]["wall_clock_range_s"][1] > out["accuracy"]["time_to_train_range_s"][1]
    none = client.post("/api/v1/estimate", json=_body(tokens=None)).json()["accuracy"]
    assert none["time_to_train_range_s"] is None and none["wall_clock_range_s"] is None
