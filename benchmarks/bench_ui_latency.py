"""Planning page latency: server time from an input change to new results.

An input change in the builder sends one htmx GET of /plans/new with the form's fields; the server answers
with the results block. This script starts the real server (`clusterplan serve`) on a fresh SQLite database,
replays such requests over loopback and reports, per scenario, the median and 95th percentile of

* the wall time of the request (what the browser waits for, minus rendering), and
* the server's own handling time (the `Server-Timing`-free way: the same request timed in-process through
  the ASGI app, which excludes the network stack).

Targets (issue 8): < 150 ms for a single-layout estimate, < 1 s with a planner search. The scaling panel
(weak scaling over 6 cluster sizes × 3 fabrics, 18 estimates) is fetched by the page right after the main
results; it is timed on its own rows ("scaling panel"), against 1 s.

    .venv/bin/python benchmarks/bench_ui_latency.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.web.pages._builder import BuilderState  # noqa: E402

SCENARIOS: list[tuple[str, BuilderState, float]] = [
    ("estimate: Llama-3 8B, 2×8 H100", BuilderState(), 0.150),
    (
        "estimate: Llama-3 70B, 64×8 H100, TP8 PP4",
        BuilderState(model="Llama-3-70B", nodes=64, tp=8, pp=4, global_batch=1024, recompute="selective"),
        0.150,
    ),
    (
        "estimate: Llama-3.1 405B, 504×8 H100, TP8 PP7 VP2",
        BuilderState(
            model="Llama-3.1-405B", nodes=504, tp=8, pp=7, vp=2, global_batch=2016, seq_len=8192, zero=1
        ),
        0.150,
    ),
    ("planner: Llama-3 8B, 2×8 H100", BuilderState(mode="planner"), 1.0),
    (
        "planner: Mixtral 8x7B (MoE), 64×8 H100",
        BuilderState(model="Mixtral-8x7B", nodes=64, mode="planner", global_batch=1024),
        1.0,
    ),
    (
        "planner: Llama-3 70B, 64×8 H100",
        BuilderState(model="Llama-3-70B", nodes=64, mode="planner", global_batch=1024),
        1.0,
    ),
    (
        "planner: Llama-3.1 405B, 504×8 H100",
        BuilderState(model="Llama-3.1-405B", nodes=504, mode="planner", global_batch=2016, seq_len=8192),
        1.0,
    ),
]

HX = {"HX-Request": "true"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def _time_requests(get: object, url: str, repeat: int, marker: str = 'id="results"') -> list[float]:
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        response = get(url, headers=HX)  # type: ignore[operator]
        elapsed = time.perf_counter() - start
        if response.status_code != 200 or marker not in response.text:
            raise SystemExit(f"unexpected response {response.status_code} for {url}")
        if 'role="alert"' in response.text:
            raise SystemExit(f"the scenario has input problems: {url}")
        if i > 0:  # the first request warms caches (catalog, imports)
            times.append(elapsed)
    return times


def _report(label: str, wire: list[float], app_times: list[float], target: float) -> None:
    p95 = _percentile(wire, 0.95)
    print(
        f"{label:52} {1000 * statistics.median(wire):8.1f}ms {1000 * p95:8.1f}ms "
        f"{1000 * statistics.median(app_times):8.1f}ms {1000 * _percentile(app_times, 0.95):8.1f}ms "
        f"{1000 * target:5.0f}ms {'ok' if p95 < target else 'SLOW'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed requests per scenario")
    args = parser.parse_args()

    from tests.conftest import configure_app_database, start_live_server

    tmp = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    db = f"sqlite:///{tmp / 'bench.db'}"
    server = start_live_server(db, tmp, {"CLUSTERPLAN_RATE_LIMIT_PER_MINUTE": "1000000"})
    try:
        configure_app_database(db)
        from fastapi.testclient import TestClient

        from app.main import create_app

        os.environ["CLUSTERPLAN_RATE_LIMIT_PER_MINUTE"] = "1000000"
        in_process = TestClient(create_app())
        failed = False
        print(f"{'scenario':52} {'HTTP p50':>9} {'HTTP p95':>9} {'app p50':>9} {'app p95':>9} {'target':>7}")
        with httpx.Client(base_url=server.url, timeout=60) as http:
            for label, state, target in SCENARIOS:
                url = "/plans/new?" + state.query()
                wire = _time_requests(http.get, url, args.repeat)
                app_times = _time_requests(in_process.get, url, args.repeat)
                p95 = _percentile(wire, 0.95)
                ok = p95 < target
                failed |= not ok
                _report(label, wire, app_times, target)
                if state.mode == "manual":
                    url = "/plans/new/scaling?" + state.query()
                    wire = _time_requests(http.get, url, args.repeat, 'id="chart-scaling"')
                    app_times = _time_requests(in_process.get, url, args.repeat, 'id="chart-scaling"')
                    failed |= _percentile(wire, 0.95) >= 1.0
                    _report("  scaling panel (fetched after the results)", wire, app_times, 1.0)
    finally:
        server.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
