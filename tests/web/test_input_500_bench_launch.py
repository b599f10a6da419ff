"""The launch form refuses what the job API refuses (app.services.jobs.validate_params): a step factor of
Infinity, an integer past 64 bits or a sweep of millions of message sizes re-renders the form with the reason,
and no job is queued (a stored Infinity would make the job unreadable for every reader and every agent)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlmodel import Session, select

from app.db import get_engine
from app.models.benchmarks import BenchmarkJob

FORM = {"kind": "collectives", "ops": "all_reduce", "nproc": "2", "min_bytes": "1K", "max_bytes": "1M"}


def jobs() -> int:
    with Session(get_engine()) as session:
        return int(session.exec(select(func.count()).select_from(BenchmarkJob)).one())


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"step_factor": "inf"}, "step_factor: must be a finite number, got inf"),
        ({"step_factor": "nan"}, "step_factor: must be a finite number, got nan"),
        ({"iters": "99999999999999999999"}, "iters: integer out of range: must fit in 64 bits"),
        ({"step_factor": "1.0000001"}, "more than 64 message sizes"),
        ({"kind": "calibration", "gemm_iters": "99999999999999999999"}, "iters: integer out of range"),
    ],
)
@pytest.mark.parametrize("htmx", [False, True])
def test_launch_refuses_values_a_job_cannot_hold(
    client: TestClient, extra: dict[str, str], reason: str, htmx: bool
) -> None:
    before = jobs()
    headers = {"HX-Request": "true"} if htmx else {}
    r = client.post("/benchmarks/launch", data={**FORM, **extra}, headers=headers, follow_redirects=False)
    assert r.status_code == (200 if htmx else 422), r.text[:500]
    assert 'role="alert"' in r.text and reason in r.text
    assert jobs() == before


def test_launch_still_queues_a_sane_sweep(client: TestClient) -> None:
    before = jobs()
    r = client.post("/benchmarks/launch", data={**FORM, "device": "cpu"}, follow_redirects=False)
    assert r.status_code == 303
    assert jobs() == before + 1
    client.post(f"{r.headers['location']}/cancel")
