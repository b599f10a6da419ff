"""Locust users for benchmarks/load/run.py; each class hits one endpoint so each gets its own numbers.

Run one class at a time (its name on the locust command line). `EstimateUser` varies the layout between a
handful of valid ones, so after the first five requests the estimate route's response cache answers them
(the common case: a tool or page asking again for the same scenarios). `EstimateVariedUser` also draws the
global batch from 20 000 values, so nearly every request is a cache miss that resolves and computes.
`PlanSaveUser`, `PlanSearchUser` and `HealthUser` serve benchmarks/load/contention.py (saves beside planner
searches, and liveness under a search flood); they authenticate with the tokens it puts in the environment.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import gevent
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser

ROOT = Path(__file__).resolve().parents[2]
SCENARIO: dict[str, Any] = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
# Valid layouts of 64 GPUs for Llama-3-70B (tp·pp·dp·cp = 64; global batch divisible by dp·micro batch).
LAYOUTS = [
    {"tp": 4, "pp": 4, "vp": 5, "dp": 2, "cp": 2},
    {"tp": 8, "pp": 4, "vp": 5, "dp": 2, "cp": 1},
    {"tp": 4, "pp": 8, "vp": 5, "dp": 2, "cp": 1},
    {"tp": 8, "pp": 2, "vp": 5, "dp": 4, "cp": 1},
    {"tp": 8, "pp": 8, "vp": 5, "dp": 1, "cp": 1},
]


# Valid for every layout in LAYOUTS (micro_batch 1): the micro-batches per step, global batch / dp, must be a
# multiple of pp for the interleaved schedule, and dp·pp ≤ 16 there, so any multiple of 32 will do.
VARIED_BATCHES = 20_000


def scenario(varied: bool = False) -> dict[str, Any]:
    body = json.loads(json.dumps(SCENARIO))
    body["layout"].update(random.choice(LAYOUTS))
    if varied:
        body["layout"]["global_batch"] = 32 * random.randint(1, VARIED_BATCHES)
    return body


class LoadUser(FastHttpUser):
    abstract = True
    wait_time = constant(0)  # closed loop: each of the N clients sends its next request at once
    # run.py's clients act as its administrator (there is no anonymous local administrator).
    default_headers = (
        {"Authorization": f"Bearer {os.environ['LOAD_TOKEN']}"} if os.environ.get("LOAD_TOKEN") else None
    )
    connection_timeout = 60.0
    network_timeout = 60.0


class BareUser(LoadUser):
    @task
    def bare(self) -> None:
        self.client.post("/bare", json=SCENARIO, name="POST /bare")


class EstimateUser(LoadUser):
    @task
    def estimate(self) -> None:
        with self.client.post(
            "/api/v1/estimate", json=scenario(), name="POST /api/v1/estimate", catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")


class EstimateVariedUser(LoadUser):
    @task
    def estimate(self) -> None:
        with self.client.post(
            "/api/v1/estimate",
            json=scenario(varied=True),
            name="POST /api/v1/estimate (varied)",
            catch_response=True,
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")


class PlanGetUser(LoadUser):
    @task
    def plan(self) -> None:
        plan_id = os.environ["LOAD_PLAN_ID"]
        self.client.get(f"/api/v1/plans/{plan_id}", name="GET /api/v1/plans/{plan_id}")


class PlanListUser(LoadUser):
    @task
    def plans(self) -> None:
        self.client.get("/api/v1/plans?limit=20", name="GET /api/v1/plans")


class PlanReviseUser(LoadUser):
    @task
    def revise(self) -> None:
        plan_id = os.environ["LOAD_PLAN_ID"]
        with self.client.post(
            f"/api/v1/plans/{plan_id}/revisions",
            json={"scenario": scenario(), "notes": "load test"},
            name="POST /api/v1/plans/{plan_id}/revisions",
            catch_response=True,
        ) as r:
            if r.status_code not in (200, 201):
                r.failure(f"{r.status_code}: {r.text[:200]}")


def auth(variable: str) -> dict[str, str]:
    """The bearer header for the token benchmarks/load/contention.py put in `variable`."""
    return {"Authorization": f"Bearer {os.environ[variable]}"}


def plan_request() -> dict[str, Any]:
    """The planner's search for the example scenario: every layout of Llama-3-70B on 64 H100s."""
    return {
        "model": SCENARIO["model"],
        "cluster": SCENARIO["cluster"],
        "training": SCENARIO["training"],
        "global_batch": SCENARIO["layout"]["global_batch"],
        "top": 5,
    }


class PlanSaveUser(LoadUser):
    """Saves a revision of the saver's own plan (a plans:write token), over and over."""

    @task
    def save(self) -> None:
        plan_id = os.environ["LOAD_PLAN_ID"]
        with self.client.post(
            f"/api/v1/plans/{plan_id}/revisions",
            json={"scenario": scenario(), "notes": "load test"},
            headers=auth("LOAD_SAVER_TOKEN"),
            name="save",
            catch_response=True,
        ) as r:
            if r.status_code not in (200, 201):
                r.failure(f"{r.status_code}: {r.text[:200]}")


class PlanSearchUser(LoadUser):
    """Runs planner searches with one shared read-only token; a 429 (its cap) is waited out as it asks."""

    @task
    def search(self) -> None:
        wait_s = 0.0
        with self.client.post(
            "/api/v1/layout-search", json=plan_request(), headers=auth("LOAD_PLANNER_TOKEN"), name="search",
            catch_response=True,
        ) as r:  # fmt: skip
            if r.status_code == 429:  # the per-caller cap doing its job: counted under its own name
                r.request_meta["name"] = "search refused (429)"
                r.success()
                wait_s = float(r.headers.get("retry-after") or 1)
            elif r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")
        if wait_s:
            gevent.sleep(wait_s)


class HealthUser(LoadUser):
    """One liveness probe, every 50 ms (a container orchestrator probes far less often)."""

    fixed_count = 1
    wait_time = constant(0.05)

    @task
    def health(self) -> None:
        with self.client.get("/healthz", name="healthz", catch_response=True) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")
