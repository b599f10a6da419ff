"""The Benchmarks pages in a real browser against the real server: launch a job from the form, watch the
live block follow the job's server-sent events to the end (no reload), charts drawn beside their tables,
no console errors, and no serious or critical axe violations on the index, job and profile pages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, start_live_server
from tests.paths import VENDOR_DIR

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE = VENDOR_DIR / "axe-4.14.1.min.js"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-bench")
    # a node seen once stays "online" for the whole module (the default window is 30 s)
    live = start_live_server(f"sqlite:///{tmp / 'bench.db'}", tmp, {"CLUSTERPLAN_NODE_ONLINE_S": "3600"})
    yield live
    live.stop()


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {
            "op": "all_reduce",
            "group": "intra",
            "ranks": 2,
            "ranks_per_node": 2,
            "nodes": 1,
            "size_bytes": 2**p,
            "count": 2**p // 4,
            "dtype": "float32",
            "time_us": 40 + 2**p / 3e4,
            "algbw_gbps": 1.0,
            "busbw_gbps": 2**p / (40 + 2**p / 3e4) / 1e3,
            "wrong": 0,
        }
        for p in range(10, 24, 2)
    ]
    rows += [
        {
            "m": s,
            "n": s,
            "k": s,
            "dtype": "bf16",
            "label": "",
            "best_tflops": 600 * s / (s + 500),
            "median_tflops": 580 * s / (s + 500),
            "mean_tflops": 570 * s / (s + 500),
        }
        for s in (1024, 4096, 8192)
    ]
    return rows


def _wait_text(page: Any, selector: str, text: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if text in page.locator(selector).first.inner_text():
                return
        except Exception:  # the block is being swapped; look again
            pass
        page.wait_for_timeout(100)
    raise AssertionError(f"{text!r} never appeared in {selector}")


def _axe(page: Any) -> list[str]:
    page.add_script_tag(path=str(AXE))
    return list(
        page.evaluate(
            "() => axe.run(document, {resultTypes: ['violations']}).then(r => r.violations"
            ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
            ".map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')))"
        )
    )


def test_launch_follow_live_and_reports(browser: Any, server: LiveServer) -> None:
    api = httpx.Client(base_url=server.url + "/api/v1", headers=server.headers, timeout=30)
    token = api.post("/nodes", json={"name": "browser-node"}).json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    api.post(
        "/agent/register", headers=auth, json={"hostname": "gpu-b", "info": {"devices": [{"name": "GPU"}]}}
    )

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    server.sign_in(context)
    page = context.new_page()
    errors: list[str] = []
    page.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and "favicon" not in (m.location or {}).get("url", "")
            else None
        ),
    )
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.url + "/benchmarks")
    assert page.locator("#nodes").get_by_text("online").is_visible()
    page.fill("#l-profile", "browser-lab")
    page.check("#l-override")  # the made-up rows sit below an H100's expected GEMM rate
    page.fill("#l-nproc", "2")
    page.click("#launch button[type=submit]")
    page.wait_for_url("**/benchmarks/jobs/*", timeout=30000)
    _wait_text(page, "#job-live h2", "queued")

    job = api.post("/agent/claim", headers=auth).json()
    row_events = [
        {"event": "row", "row": r, "progress": (i + 1) / 20, "eta_s": 9.0} for i, r in enumerate(_rows()[:3])
    ]
    api.post(
        f"/agent/jobs/{job['id']}/progress",
        headers=auth,
        json={"attempt": job["attempt"], "events": [{"event": "log", "message": "warming up"}, *row_events]},
    )
    _wait_text(page, "#job-live", "warming up")  # pushed by SSE → htmx refresh, no reload
    _wait_text(page, "#job-live h2", "running")
    assert page.locator("#job-progress").get_attribute("value") == "0.15"
    api.post(
        f"/agent/jobs/{job['id']}/complete",
        headers=auth,
        json={
            "attempt": job["attempt"],
            "status": "succeeded",
            "result": {
                "status": "complete",
                "benchmark_version": "1.0",
                "rows": _rows(),
                "environment": {"torch": "2.13.0"},
            },
        },
    )
    _wait_text(page, "#job-live h2", "succeeded")
    page.wait_for_selector("#busbw-chart[data-drawn] .main-svg", timeout=40000)
    page.wait_for_selector("#gemm-chart[data-drawn] .main-svg", timeout=40000)
    assert page.locator("#busbw-chart + script + .chart-table tbody tr").count() == 7
    job_violations = _axe_page(browser, server, page.url)

    profiles = api.get("/calibration/profiles").json()["data"]
    assert [p["name"] for p in profiles] == ["browser-lab"]
    profile_url = f"{server.url}/benchmarks/profiles/{profiles[0]['id']}"
    page.goto(profile_url)
    page.wait_for_selector("#profile-busbw[data-drawn] .main-svg", timeout=40000)
    assert errors == []
    assert {
        "index": _axe_page(browser, server, server.url + "/benchmarks"),
        "job": job_violations,
        "profile": _axe_page(browser, server, profile_url),
    } == {"index": [], "job": [], "profile": []}


def _axe_page(browser: Any, server: LiveServer, url: str) -> list[str]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    server.sign_in(context)
    page = context.new_page()
    page.goto(url)
    page.wait_for_load_state("load")
    if page.locator(".chart[data-figure]").count():
        page.wait_for_selector(".chart[data-drawn]", timeout=40000)
    found = _axe(page)
    page.context.close()
    return found
