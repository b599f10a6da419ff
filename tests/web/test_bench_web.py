"""Benchmarks pages: nodes, launch, live job page (full and htmx partial), charts with tables, profiles."""

from __future__ import annotations

import re
import uuid

from fastapi.testclient import TestClient

from tests.auth_support import bearer, issue_token

HTMX = {"HX-Request": "true"}
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.IGNORECASE)


def rows() -> list[dict]:
    out = [
        {
            "op": "all_reduce",
            "group": "intra",
            "ranks": 2,
            "ranks_per_node": 2,
            "nodes": 1,
            "size_bytes": 2**p,
            "time_us": 30 + 2**p / 2e4,
            "algbw_gbps": 1.0,
            "busbw_gbps": 2**p / (30 + 2**p / 2e4) / 1e3,
            "wrong": 0,
        }
        for p in range(10, 22, 2)
    ]
    out += [
        {
            "m": s,
            "n": s,
            "k": s,
            "dtype": "bf16",
            "label": "",
            "best_tflops": 500 * s / (s + 300),
            "median_tflops": 480 * s / (s + 300),
            "mean_tflops": 470 * s / (s + 300),
        }
        for s in (512, 2048, 8192)
    ]
    return out


def test_index_nodes_and_token_once(client: TestClient) -> None:
    page = client.get("/benchmarks")
    assert page.status_code == 200
    assert "Launch a job" in page.text and "Calibrated profiles" in page.text
    assert not INLINE_SCRIPT.search(page.text)
    created = client.post("/benchmarks/nodes", data={"name": "web-node-1"}, headers=HTMX)
    assert created.status_code == 201
    assert "<html" not in created.text and "shown once" in created.text
    token = re.search(r"<code>(cpn_[^<]+)</code>", created.text)
    assert token is not None
    again = client.get("/benchmarks").text
    assert "web-node-1" in again and token.group(1) not in again and "offline" in again
    dup = client.post("/benchmarks/nodes", data={"name": "web-node-1"}, headers=HTMX)
    assert dup.status_code == 200 and "already exists" in dup.text  # htmx swaps only 2xx responses
    assert client.post("/benchmarks/nodes", data={"name": "web-node-1"}).status_code == 422
    assert client.get("/benchmarks?block=nope", headers=HTMX).status_code == 200


def test_launch_follow_and_cancel(client: TestClient) -> None:
    bad = client.post(
        "/benchmarks/launch",
        data={"kind": "collectives", "ops": "all_reduce", "min_bytes": "1M", "max_bytes": "1K"},
        headers=HTMX,
    )
    assert bad.status_code == 200 and "maxbytes" in bad.text and 'role="alert"' in bad.text
    plain = client.post("/benchmarks/launch", data={"kind": "gemm", "gemm_sizes": "0"})
    assert plain.status_code == 422 and "must be ≥ 1" in plain.text
    launched = client.post(
        "/benchmarks/launch",
        data={
            "kind": "collectives",
            "ops": ["all_reduce", "all_gather"],
            "nproc": "2",
            "min_bytes": "1K",
            "max_bytes": "1M",
            "device": "cpu",
        },
        follow_redirects=False,
    )
    assert launched.status_code == 303
    url = launched.headers["location"]
    page = client.get(url)
    assert (
        page.status_code == 200 and "queued" in page.text and 'data-events="/api/v1/benchmarks/' in page.text
    )
    assert "benchmarks.js" in page.text and not INLINE_SCRIPT.search(page.text)
    partial = client.get(url, headers=HTMX)
    assert partial.text.lstrip().startswith('<div id="job-live"') and "<html" not in partial.text
    assert "HX-Request" in partial.headers["Vary"].split(", ")
    cancelled = client.post(f"{url}/cancel", follow_redirects=False)
    assert cancelled.status_code == 303
    assert "cancelled" in client.get(url).text
    assert client.get("/benchmarks/jobs/00000000-0000-0000-0000-000000000000").status_code == 404


def test_results_charts_and_profile_report(client: TestClient) -> None:
    token = client.post("/api/v1/nodes", json={"name": "web-node-2"}).json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    job = client.post(
        "/api/v1/benchmarks", json={"kind": "calibration", "params": {"nproc": 2, "gpu": "H100-SXM"}}
    ).json()
    # The session database is shared with earlier tests: jobs they left queued are claimed (and failed) first.
    claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    while claimed["id"] != job["id"]:
        client.post(
            f"/api/v1/agent/jobs/{claimed['id']}/complete",
            headers=auth,
            json={"attempt": claimed["attempt"], "status": "failed", "error": "left over by another test"},
        )
        claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    client.post(
        f"/api/v1/agent/jobs/{claimed['id']}/complete",
        headers=auth,
        json={
            "attempt": claimed["attempt"],
            "status": "succeeded",
            "result": {"status": "complete", "rows": rows(), "environment": {"torch": "2.13.0"}},
        },
    )
    page = client.get(f"/benchmarks/jobs/{job['id']}").text
    assert 'data-figure="busbw-chart-data"' in page and 'data-figure="gemm-chart-data"' in page
    assert 'id="busbw-chart-data"' in page and "8192×8192×8192" in page
    assert "Model (GB/s)" in page and "torch 2.13.0" in page
    partial = client.get(f"/benchmarks/jobs/{job['id']}", headers=HTMX)
    assert (
        partial.status_code == 200 and 'id="busbw-chart-data"' in partial.text and "<html" not in partial.text
    )
    fit = client.post(
        "/api/v1/calibration/profiles",
        json={"job_id": job["id"], "name": "web-lab", "override_acceptance": True},
    )
    assert fit.status_code == 201
    profile = client.get(f"/benchmarks/profiles/{fit.json()['id']}")
    assert profile.status_code == 200
    text = profile.text
    assert "Calibrated profile web-lab" in text and "before" in text and "after" in text
    assert 'data-figure="profile-busbw-data"' in text and 'data-figure="profile-gemm-data"' in text
    assert "Launch overhead" in text and not INLINE_SCRIPT.search(text)
    assert "web-lab" in client.get("/benchmarks").text
    assert client.get("/benchmarks/profiles/nope").status_code == 404


def test_only_the_owner_or_an_admin_sees_and_uses_cancel_and_retry(client: TestClient) -> None:
    owner = bearer(issue_token("web-owner@example.com", ["plans:read", "benchmarks:run"], is_admin=False))
    other = bearer(issue_token("web-other@example.com", ["plans:read", "benchmarks:run"], is_admin=False))
    job = {"kind": "collectives", "params": {"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "4K"}}
    job_id = client.post("/api/v1/benchmarks", json=job, headers=owner).json()["id"]
    url = f"/benchmarks/jobs/{job_id}"
    seen_by_other = client.get(url, headers=other).text
    assert "Cancel job" not in seen_by_other and "Only the job's creator or an administrator" in seen_by_other
    assert client.post(f"{url}/cancel", headers=other, follow_redirects=False).status_code == 403
    assert "Cancel job" in client.get(url, headers=owner).text
    assert client.post(f"{url}/cancel", headers=owner, follow_redirects=False).status_code == 303
    assert "Retry job" in client.get(url, headers=owner).text
    assert client.post(f"{url}/retry", headers=other, follow_redirects=False).status_code == 403
    assert client.post(f"{url}/retry", headers=owner, follow_redirects=False).status_code == 303
    assert client.get(f"/api/v1/benchmarks/{job_id}", headers=other).json()["status"] == "queued"


def test_job_page_and_api_show_the_node_acceptance_verdict(client: TestClient) -> None:
    """A node at half the expected GEMM rate and half the busbw: fail, on the job page and in the API, and
    no profile named after its GPU without the override."""
    from tests.bench.test_bench_acceptance import healthy_document

    token = client.post("/api/v1/nodes", json={"name": "web-node-slow"}).json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    params = {"nproc": 2, "gpu": "H100-SXM", "fabric": "ib-ndr-8x400"}
    job = client.post("/api/v1/benchmarks", json={"kind": "calibration", "params": params}).json()
    claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    while claimed["id"] != job["id"]:  # jobs left queued by earlier tests of the shared database
        client.post(
            f"/api/v1/agent/jobs/{claimed['id']}/complete",
            headers=auth,
            json={"attempt": claimed["attempt"], "status": "failed", "error": "left over by another test"},
        )
        claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    result = {"status": "complete", **healthy_document(gemm_scale=0.5, busbw_scale=0.5)}
    done = client.post(
        f"/api/v1/agent/jobs/{job['id']}/complete",
        headers=auth,
        json={"attempt": claimed["attempt"], "status": "succeeded", "result": result},
    )
    assert done.json()["status"] == "succeeded"  # slow is not wrong: the run itself succeeded
    report = client.get(f"/api/v1/benchmarks/{job['id']}/acceptance").json()
    assert report["verdict"] == "fail" and report["gpu"] == "H100-SXM"
    assert {c["name"].split(" @")[0]: c["verdict"] for c in report["checks"]} == {
        "gemm bf16": "fail",
        "busbw all_reduce/intra": "fail",
        "latency all_reduce/intra": "fail",  # 1 KiB at twice the expected time: past the 1.77x limit
    }
    healthy_as = client.get(f"/api/v1/benchmarks/{job['id']}/acceptance", params={"gpu": "no-such-gpu"})
    assert healthy_as.status_code == 404
    page = client.get(f"/benchmarks/jobs/{job['id']}").text
    assert "Node acceptance against H100-SXM" in page and 'class="status status-fail">fail<' in page
    assert "nccl-tests" in page and "validation_collectives" in page
    refused = client.post("/api/v1/calibration/profiles", json={"job_id": job["id"], "name": "slow-h100"})
    assert refused.status_code == 422 and "override_acceptance" in refused.text


def test_node_page_lists_its_acceptance_checks(client: TestClient) -> None:
    from tests.bench.test_bench_acceptance import healthy_document

    node = client.post("/api/v1/nodes", json={"name": "web-node-checked"}).json()
    auth = {"Authorization": f"Bearer {node['token']}"}
    params = {"nproc": 2, "gpu": "H100-SXM"}
    job = client.post("/api/v1/benchmarks", json={"kind": "check", "params": params}).json()
    claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    while claimed["id"] != job["id"]:  # jobs left queued by earlier tests of the shared database
        client.post(
            f"/api/v1/agent/jobs/{claimed['id']}/complete",
            headers=auth,
            json={"attempt": claimed["attempt"], "status": "failed", "error": "left over by another test"},
        )
        claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    client.post(
        f"/api/v1/agent/jobs/{job['id']}/complete",
        headers=auth,
        json={"attempt": claimed["attempt"], "status": "succeeded", "result": healthy_document(0.5, 1.0)},
    )
    assert f'href="/benchmarks/nodes/{node["id"]}"' in client.get("/benchmarks").text
    page = client.get(f"/benchmarks/nodes/{node['id']}").text
    assert "Node web-node-checked" in page and "Acceptance checks" in page
    assert f'href="/benchmarks/jobs/{job["id"]}"' in page and 'class="status status-fail">fail<' in page
    assert "gemm bf16:" in page and not INLINE_SCRIPT.search(page)
    assert client.get(f"/benchmarks/nodes/{job['id']}").status_code == 404


def _claim(client: TestClient, auth: dict[str, str], job_id: str) -> dict:
    """Claim `job_id` for the node of `auth`, failing the jobs earlier tests of the shared database left queued."""
    claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    while claimed["id"] != job_id:
        client.post(
            f"/api/v1/agent/jobs/{claimed['id']}/complete",
            headers=auth,
            json={"attempt": claimed["attempt"], "status": "failed", "error": "left over by another test"},
        )
        claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    return claimed


def test_nodes_are_shown_to_admins_only_as_in_the_api(client: TestClient) -> None:
    """Non-admins get no nodes block (a one-line note), a 403 node page and never a token prefix or host; a
    runner still picks a node to run on by name, and a job page names its node (its host only for admins)."""
    node = client.post("/api/v1/nodes", json={"name": "web-node-private"}).json()
    auth = bearer(node["token"])
    info = {"devices": [{"name": "NVIDIA H100 80GB HBM3"}] * 2}
    client.post("/api/v1/agent/register", headers=auth, json={"hostname": "secret-host-7", "info": info})
    prefix = node["token"][:12]
    runner = bearer(
        issue_token("web-node-runner@example.com", ["plans:read", "benchmarks:run"], is_admin=False)
    )
    reader = bearer(issue_token("web-node-reader@example.com", ["plans:read"], is_admin=False))

    admin_block = client.get("/benchmarks?block=nodes", headers=HTMX).text
    assert "secret-host-7" in admin_block and prefix in admin_block
    assert client.get(f"/benchmarks/nodes/{node['id']}").status_code == 200
    for who in (runner, reader):
        page = client.get("/benchmarks", headers=who).text
        block = client.get("/benchmarks?block=nodes", headers={**HTMX, **who}).text
        assert "Nodes are managed by administrators" in block
        for text in (page, block):
            assert "secret-host-7" not in text and prefix not in text and "NVIDIA H100 80GB HBM3" not in text
            assert f"/benchmarks/nodes/{node['id']}" not in text
        refused = client.get(f"/benchmarks/nodes/{node['id']}", headers=who)
        assert refused.status_code == 403 and "secret-host-7" not in refused.text
    assert '<option value="web-node-private"' in client.get("/benchmarks", headers=runner).text
    assert "web-node-private" not in client.get("/benchmarks", headers=reader).text

    body = {"kind": "collectives", "params": {"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "4K"}}
    job = client.post("/api/v1/benchmarks", json={**body, "target_node": "web-node-private"}, headers=runner)
    assert job.status_code == 202, job.text
    _claim(client, auth, job.json()["id"])
    url = f"/benchmarks/jobs/{job.json()['id']}"
    seen = client.get(url, headers=reader).text
    assert "<strong>web-node-private</strong>" in seen and "secret-host-7" not in seen
    assert "secret-host-7" in client.get(url).text


def test_the_launch_form_refuses_another_users_profile_name(client: TestClient) -> None:
    """A calibration job naming a profile its creator may not version is refused at launch, not after the run."""
    from sqlmodel import Session

    from app.db import get_engine
    from app.models.benchmarks import CalibrationProfile

    owner = bearer(issue_token("web-lab-owner@example.com", ["plans:read", "benchmarks:run"], is_admin=False))
    other = bearer(issue_token("web-lab-other@example.com", ["plans:read", "benchmarks:run"], is_admin=False))
    owner_id = client.get("/api/v1/auth/me", headers=owner).json()["user_id"]
    with Session(get_engine()) as session:
        row = CalibrationProfile(
            name="web-owned-lab", gpu_name="H100-SXM", params={}, report={}, owner_id=uuid.UUID(owner_id)
        )
        session.add(row)
        session.commit()
    form = {
        "kind": "calibration",
        "profile_name": "web-owned-lab",
        "nproc": "2",
        "device": "cpu",
        "gemm_sizes": "64",
        "ops": "all_reduce",
        "min_bytes": "1K",
        "max_bytes": "4K",
    }
    jobs = client.get("/api/v1/benchmarks").json()["count"]
    refused = client.post("/benchmarks/launch", data=form, headers=other, follow_redirects=False)
    assert (
        refused.status_code == 403
        and "belongs to another user" in refused.text
        and 'role="alert"' in refused.text
    )
    swapped = client.post("/benchmarks/launch", data=form, headers={**HTMX, **other})
    assert swapped.status_code == 200 and "belongs to another user" in swapped.text  # htmx swaps only 2xx
    assert client.get("/api/v1/benchmarks").json()["count"] == jobs
    assert (
        client.post("/benchmarks/launch", data=form, headers=owner, follow_redirects=False).status_code == 303
    )
