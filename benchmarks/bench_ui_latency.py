"""Planning page latency: server time from an input change to new results.

An input change in the builder sends one htmx GET of /plans/new with the form's fields; the server answers
with the results block. This script starts the real server (`clusterplan serve`) on a fresh SQLite database,
replays such requests over loopback and reports, per scenario, the median and 95th percentile of

* the wall time of the request (what the browser waits for, minus rendering), and
* the server's own handling time (the `Server-Timing`-free way: the same request timed in-process through
  the ASGI app, which excludes the network stack).

Every figure is a median and a 95th percentile, and each row also gives both as a ratio to a baseline
measured in the same run: `GET /healthz` (the same server, middleware and loopback, no work), timed before
and after the scenarios. The ratios let runs on machines of different speed or load be compared; the drift
of the baseline between its two halves says how steady the machine was.

Targets (issue 8): < 150 ms for a single-layout estimate, < 1 s with a planner search. The scaling panel
(strong scaling over several cluster sizes and fabrics) is fetched by the page right after the main
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
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.web.pages._builder import BuilderState  # noqa: E402

# targets: p95 over HTTP, docs/constants.md#ui-latency-targets
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


def _time_requests(
    get: object, url: str, repeat: int, marker: str = 'id="results"', check: bool = True
) -> list[float]:
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        response = get(url, headers=HX)  # type: ignore[operator]
        elapsed = time.perf_counter() - start
        if response.status_code != 200 or marker not in response.text:
            raise SystemExit(f"unexpected response {response.status_code} for {url}")
        if check and 'role="alert"' in response.text:
            raise SystemExit(f"the scenario has input problems: {url}")
        if i > 0:  # the first request warms caches (catalog, imports)
            times.append(elapsed)
    return times


@dataclass
class Figures:
    """Median and 95th percentile of one series, and both as ratios to the run's baseline."""

    median: float
    p95: float
    median_ratio: float
    p95_ratio: float


def figures(times: list[float], baseline: list[float]) -> Figures:
    median, p95 = statistics.median(times), _percentile(times, 0.95)
    base_median, base_p95 = statistics.median(baseline), _percentile(baseline, 0.95)
    return Figures(median, p95, median / base_median, p95 / base_p95)


def _cell(f: Figures) -> str:
    return f"{1000 * f.median:8.1f} {1000 * f.p95:8.1f} {f.median_ratio:6.0f}× {f.p95_ratio:6.0f}×"


def _report(
    label: str,
    wire: list[float],
    app_times: list[float],
    target: float,
    base_wire: list[float],
    base_app: list[float],
) -> None:
    over_http = figures(wire, base_wire)
    in_app = figures(app_times, base_app)
    verdict = "ok" if over_http.p95 < target else "SLOW"
    print(f"{label:52} {_cell(over_http)}  {_cell(in_app)} {1000 * target:6.0f} {verdict}")


HEADER = (
    f"{'':52} {'over HTTP (ms, × baseline)':^34}  {'in process (ms, × baseline)':^34}\n"
    f"{'scenario':52} {'p50':>8} {'p95':>8} {'p50×':>7} {'p95×':>7}  {'p50':>8} {'p95':>8} {'p50×':>7} {'p95×':>7}"
    f" {'target':>6}"
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
        with httpx.Client(base_url=server.url, timeout=60) as http:
            base_wire = _time_requests(http.get, "/healthz", args.repeat, marker="", check=False)
            base_app = _time_requests(in_process.get, "/healthz", args.repeat, marker="", check=False)
            rows = []
            for label, state, target in SCENARIOS:
                url = "/plans/new?" + state.query()
                wire = _time_requests(http.get, url, args.repeat)
                app_times = _time_requests(in_process.get, url, args.repeat)
                failed |= _percentile(wire, 0.95) >= target
                rows.append((label, wire, app_times, target))
                if state.mode == "manual":
                    url = "/plans/new/scaling?" + state.query()
                    wire = _time_requests(http.get, url, args.repeat, 'id="chart-scaling"')
                    app_times = _time_requests(in_process.get, url, args.repeat, 'id="chart-scaling"')
                    failed |= _percentile(wire, 0.95) >= 1.0
                    rows.append(("  scaling panel (fetched after the results)", wire, app_times, 1.0))
            after_wire = _time_requests(http.get, "/healthz", args.repeat, marker="", check=False)
            after_app = _time_requests(in_process.get, "/healthz", args.repeat, marker="", check=False)
        drift = statistics.median(after_wire) / statistics.median(base_wire)
        base_wire += after_wire
        base_app += after_app
        print(HEADER)
        print(
            f"{'baseline: GET /healthz':52} {_cell(figures(base_wire, base_wire))}  "
            f"{_cell(figures(base_app, base_app))}"
        )
        for label, wire, app_times, target in rows:
            _report(label, wire, app_times, target, base_wire, base_app)
        print(
            f"baseline drift over the run: after / before = {drift:.2f} (HTTP median); "
            f"{args.repeat} timed requests per series after one warm-up"
        )
    finally:
        server.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
