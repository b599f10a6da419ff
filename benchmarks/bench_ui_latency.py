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

The builder page itself (a direct load: `GET /plans/new`, the whole page, no htmx) is timed twice: its first request
after the server started (what the first visitor of a fresh worker waits for) and then warm, each with its ratio to
the same baseline.

Targets (docs/constants.md#ui-latency-targets): < 150 ms for a single-layout estimate, < 1 s with a planner search. The scaling panel
(strong scaling over several cluster sizes and fabrics) and, for a layout that does not fit, the planner's search
for what fits are fetched by the page right after the main results; each is timed on its own rows ("scaling
panel", "what fits"), against 1 s.

In the browser (`--part browser`): Playwright drives Debian's chromium (never a downloaded one)
against the same server and reports the bytes of a cold first load of the builder (target 1.5 MB), the time from
navigation to every panel drawn, and, per input change, the time to the request, to the results in the DOM (target 300 ms for a single estimate) and to
every chart drawn (500 ms; 1 s for a planner search), as medians and 95th percentiles with ratios to a
`fetch("/healthz")` from the page in the same run. The page stamps each moment on its own clock; the script
polls for the stamps and never sleeps to time anything. `--part all` skips the browser part when chromium is
not installed.

    .venv/bin/python benchmarks/bench_ui_latency.py [--repeat 15] [--part all|server|browser]
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
from benchmarks.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

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
    get: object,
    url: str,
    repeat: int,
    marker: str = 'id="results"',
    check: bool = True,
    headers: dict[str, str] | None = None,
) -> list[float]:
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        response = get(url, headers=HX if headers is None else headers)  # type: ignore[operator]
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
    if not target:  # a figure without a target (the builder page itself)
        print(f"{label:52} {_cell(over_http)}  {_cell(in_app)}")
        return
    verdict = "ok" if over_http.p95 < target else "SLOW"
    print(f"{label:52} {_cell(over_http)}  {_cell(in_app)} {1000 * target:6.0f} {verdict}")


# the builder page on a direct load, with the builder's defaults (the whole page: the form and the results)
PAGE_URL = "/plans/new"
PAGE_MARKER = 'id="plan-form"'


def _first_request(http: httpx.Client, url: str) -> float:
    """Seconds for the server's first answer of `url` (a cold worker: nothing compiled or read for it yet)."""
    start = time.perf_counter()
    response = http.get(url)
    elapsed = time.perf_counter() - start
    if response.status_code != 200 or PAGE_MARKER not in response.text:
        raise SystemExit(f"unexpected response {response.status_code} for {url}")
    return elapsed


HEADER = (
    f"{'':52} {'over HTTP (ms, × baseline)':^34}  {'in process (ms, × baseline)':^34}\n"
    f"{'scenario':52} {'p50':>8} {'p95':>8} {'p50×':>7} {'p95×':>7}  {'p50':>8} {'p95':>8} {'p50×':>7} {'p95×':>7}"
    f" {'target':>6}"
)


def server_main(server_url: str, repeat: int) -> bool:
    """The server-side figures (HTTP and in process); True when a target is missed."""
    from fastapi.testclient import TestClient

    from app.main import create_app

    in_process = TestClient(create_app())
    failed = False
    with httpx.Client(base_url=server_url, timeout=60) as http:
        # before anything else asks either app for a page; each has answered /healthz already (the live server while
        # it started), so the first request's own costs (a database connection, …) are not the builder's
        first_wire = _first_request(http, PAGE_URL)
        in_process.get("/healthz")
        first_app = _first_request(in_process, PAGE_URL)
        base_wire = _time_requests(http.get, "/healthz", repeat, marker="", check=False)
        base_app = _time_requests(in_process.get, "/healthz", repeat, marker="", check=False)
        rows = [
            ("builder page, first request after the start", [first_wire], [first_app], 0.0),
            (
                "builder page (GET /plans/new, whole page)",
                _time_requests(http.get, PAGE_URL, repeat, PAGE_MARKER, headers={}),
                _time_requests(in_process.get, PAGE_URL, repeat, PAGE_MARKER, headers={}),
                0.0,
            ),
        ]
        for label, state, target in SCENARIOS:
            url = "/plans/new?" + state.query()
            wire = _time_requests(http.get, url, repeat)
            app_times = _time_requests(in_process.get, url, repeat)
            failed |= _percentile(wire, 0.95) >= target
            rows.append((label, wire, app_times, target))
            if state.mode == "manual":
                url = "/plans/new/scaling?" + state.query()
                wire = _time_requests(http.get, url, repeat, 'id="chart-scaling"')
                app_times = _time_requests(in_process.get, url, repeat, 'id="chart-scaling"')
                failed |= _percentile(wire, 0.95) >= 1.0
                rows.append(("  scaling panel (fetched after the results)", wire, app_times, 1.0))
            if 'hx-get="/plans/new/alternative?' in http.get("/plans/new?" + state.query()).text:
                # a layout that does not fit: the planner's search for what fits, fetched after the results
                url = "/plans/new/alternative?" + state.query()
                wire = _time_requests(http.get, url, repeat, 'id="fit-alternative"')
                app_times = _time_requests(in_process.get, url, repeat, 'id="fit-alternative"')
                failed |= _percentile(wire, 0.95) >= 1.0
                rows.append(("  what fits (fetched after the results)", wire, app_times, 1.0))
        after_wire = _time_requests(http.get, "/healthz", repeat, marker="", check=False)
        after_app = _time_requests(in_process.get, "/healthz", repeat, marker="", check=False)
    drift = statistics.median(after_wire) / statistics.median(base_wire)
    base_wire += after_wire
    base_app += after_app
    print(HEADER)
    print(
        f"{'baseline: GET /healthz':52} {_cell(figures(base_wire, base_wire))}  {_cell(figures(base_app, base_app))}"
    )
    for label, wire, app_times, target in rows:
        _report(label, wire, app_times, target, base_wire, base_app)
    print(
        f"baseline drift over the run: after / before = {drift:.2f} (HTTP median); "
        f"{repeat} timed requests per series after one warm-up"
    )
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=15, help="timed requests (or input changes) per scenario"
    )
    parser.add_argument(
        "--part",
        choices=("all", "server", "browser"),
        default="all",
        help="server: replayed htmx requests; browser: Playwright in Chromium (first load, input to DOM and charts)",
    )
    args = parser.parse_args()

    from tests.conftest import configure_app_database, start_live_server

    tmp = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    db = f"sqlite:///{tmp / 'bench.db'}"
    server = start_live_server(db, tmp, {"CLUSTERPLAN_RATE_LIMIT_PER_MINUTE": "1000000"})
    failed = False
    try:
        configure_app_database(db)
        os.environ["CLUSTERPLAN_RATE_LIMIT_PER_MINUTE"] = "1000000"
        if args.part in ("all", "server"):
            failed |= server_main(server.url, args.repeat)
        if args.part in ("all", "browser") and not Path(CHROMIUM).exists():
            print(f"browser part skipped: no chromium at {CHROMIUM} (make system-deps)", file=sys.stderr)
            failed |= args.part == "browser"
        elif args.part in ("all", "browser"):
            failed |= browser_main(server.url, args.repeat)
    finally:
        server.stop()
    return 1 if failed else 0


# ------------------------------------------------------------------------------------------ in the browser

# The browser targets (docs/constants.md#ui-latency-targets): first load of the builder, and an input change to the results in the DOM and to every chart
# drawn (single estimate), and to the results of a planner search.
FIRST_LOAD_TARGET_BYTES = 1.5e6
BROWSER_TARGETS = {"estimate: results in the DOM": 0.300, "estimate: all charts drawn": 0.500}
PLANNER_TARGET_S = 1.0

# Installed in the page (through the DevTools protocol, which the CSP does not govern) after each load: stamps,
# on the page's own clock, the input change, the request htmx sends, the swap of #results and the first frame
# in which every chart in the results is drawn and no deferred panel is still loading. Nothing is timed by
# sleeping: Python polls `window.__bench` until the stamps are there.
PROBE = """() => {
  const b = window.__bench = {change: null, request: null, swap: null, charts: null};
  const changed = () => { if (b.change === null) { b.change = performance.now(); } };
  document.addEventListener("input", changed, true);
  document.addEventListener("change", changed, true);
  document.addEventListener("htmx:beforeRequest", (e) => {
    if (b.change !== null && b.request === null && e.detail.elt && e.detail.elt.id === "plan-form") {
      b.request = performance.now();
    }
  });
  document.addEventListener("htmx:afterSwap", (e) => {
    if (b.change !== null && b.swap === null && e.detail.target && e.detail.target.id === "results") {
      b.swap = performance.now();
    }
  });
  const drawn = () => {
    const results = document.getElementById("results");
    if (!results || results.querySelector('[hx-trigger="load"]')) { return false; }
    const charts = results.querySelectorAll(".chart[data-figure]");
    return Array.from(charts).every((c) => c.getAttribute("data-drawn") === "true" && c._fullLayout
      && c.querySelector(".main-svg"));
  };
  const frame = () => {
    if (b.swap !== null && b.charts === null && drawn()) { b.charts = performance.now(); }
    if (b.charts === null) { requestAnimationFrame(frame); }
  };
  requestAnimationFrame(frame);
}"""

# The baseline: a same-origin fetch of /healthz from the page (the same browser, server and loopback, no work).
FETCH_HEALTHZ = """async () => {
  const t = performance.now();
  const r = await fetch("/healthz", {cache: "no-store"});
  await r.text();
  return performance.now() - t;
}"""

# Bytes over the wire for the page and everything it loaded (headers included: transferSize).
TRANSFERRED = """() => performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"))
  .reduce((sum, e) => sum + (e.transferSize || 0), 0)"""

SETTLED = """() => { const r = document.getElementById("results");
  return !!r && !r.querySelector('[hx-trigger="load"]') && !r.hasAttribute("aria-busy")
    && Array.from(r.querySelectorAll(".chart[data-figure]")).every((c) => c.getAttribute("data-drawn") === "true"); }"""


def _poll(page: object, expression: str, timeout_s: float = 30.0) -> object:
    """Poll a page expression until it is truthy (bounded; the CSP forbids wait_for_function's eval)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = page.evaluate(expression)  # type: ignore[attr-defined]
        if value:
            return value
        page.wait_for_timeout(20)  # type: ignore[attr-defined]
    raise SystemExit(f"timed out after {timeout_s} s waiting for {expression[:60]}…")


# Installed before the page's own scripts: stamps, on the page's clock (0 = the navigation's start), the first frame
# in which the results are in with every chart drawn and no deferred panel still loading.
FIRST_LOAD_PROBE = """(() => {
  const settled = () => {
    const r = document.getElementById("results");
    if (document.readyState === "loading" || !r) { return false; }  // still parsing: more charts may follow
    const charts = Array.from(r.querySelectorAll(".chart[data-figure]"));
    return charts.length > 0 && !r.querySelector('[hx-trigger="load"]') && !r.hasAttribute("aria-busy")
      && charts.every((c) => c.getAttribute("data-drawn") === "true" && c.querySelector(".main-svg"));
  };
  const frame = () => {
    if (settled()) { window.__firstLoad = performance.now(); } else { requestAnimationFrame(frame); }
  };
  requestAnimationFrame(frame);
})();"""


def _first_loads(browser: object, url: str, repeat: int) -> tuple[list[float], list[float]]:
    """Bytes transferred by a cold load of the builder (fresh context, empty cache) until every panel is drawn, and
    seconds from the navigation's start to that frame."""
    sizes, times = [], []
    for _ in range(repeat):
        context = browser.new_context()  # type: ignore[attr-defined]
        context.add_init_script(FIRST_LOAD_PROBE)
        page = context.new_page()
        page.goto(url)
        _poll(page, SETTLED)
        times.append(float(_poll(page, "() => window.__firstLoad")) / 1000)  # type: ignore[arg-type]
        sizes.append(float(page.evaluate(TRANSFERRED)))
        context.close()
    return sizes, times


def _changes(page: object, field: str, values: tuple[str, str], repeat: int) -> dict[str, list[float]]:
    """Alternate a field between two values (a select is chosen, a number typed); per change, seconds from the
    first input or change event to the request sent, to the results swapped into the DOM and to every chart
    drawn."""
    series: dict[str, list[float]] = {"request sent": [], "results in the DOM": [], "all charts drawn": []}
    tag = page.evaluate(f"() => document.querySelector('{field}').tagName")  # type: ignore[attr-defined]
    for i in range(repeat + 1):
        page.evaluate(PROBE)  # type: ignore[attr-defined]
        if tag == "SELECT":
            page.select_option(field, values[i % 2])  # type: ignore[attr-defined]
        else:
            page.fill(field, values[i % 2])  # type: ignore[attr-defined]
        stamps = _poll(page, "() => window.__bench.charts !== null && window.__bench")
        _poll(page, SETTLED)  # the deferred panels' own swaps are over before the next change
        if i == 0:
            continue  # the first change warms the server's and the page's caches
        assert isinstance(stamps, dict)
        for key, stamp in (
            ("request sent", "request"),
            ("results in the DOM", "swap"),
            ("all charts drawn", "charts"),
        ):
            series[key].append((stamps[stamp] - stamps["change"]) / 1000)
    return series


def _fetch_baseline(page: object, repeat: int) -> list[float]:
    page.evaluate(FETCH_HEALTHZ)  # type: ignore[attr-defined]
    return [float(page.evaluate(FETCH_HEALTHZ)) / 1000 for _ in range(repeat)]  # type: ignore[attr-defined]


def browser_main(base_url: str, repeat: int) -> bool:
    """The browser-side figures against their targets; True when a target is missed."""
    from playwright.sync_api import sync_playwright

    fabrics = ("ib-ndr-8x400", "roce-8x400")
    estimate_url = base_url + "/plans/new?" + BuilderState().query()
    planner_url = base_url + "/plans/new?" + BuilderState(mode="planner").query()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            sizes, load_times = _first_loads(browser, estimate_url, max(3, repeat // 3))
            page = browser.new_page()
            page.goto(estimate_url)
            _poll(page, SETTLED)
            baseline = _fetch_baseline(page, repeat)
            estimate = _changes(page, "#f-fabric", fabrics, repeat)
            typed = _changes(page, "#f-nodes", ("4", "2"), repeat)
            page.goto(planner_url)
            _poll(page, SETTLED)
            planner = _changes(page, "#f-fabric", fabrics, repeat)
            baseline += _fetch_baseline(page, repeat)
        finally:
            browser.close()
    return _browser_report(
        sizes,
        baseline,
        {
            "builder first load": {"navigation to every panel drawn": load_times},
            "estimate": estimate,
            "planner": planner,
            "typed nodes": typed,
        },
        repeat,
    )


def _browser_report(
    sizes: list[float], baseline: list[float], groups: dict[str, dict[str, list[float]]], repeat: int
) -> bool:
    missed = max(sizes) > FIRST_LOAD_TARGET_BYTES
    median = statistics.median(sizes)
    print(
        f"\nbuilder first load (cold cache, all panels drawn): median {median / 1e6:.3f} MB, "
        f"max {max(sizes) / 1e6:.3f} MB over {len(sizes)} loads; target {FIRST_LOAD_TARGET_BYTES / 1e6:.1f} MB "
        f"({'ok' if not missed else 'MISSED'}; median = {median / FIRST_LOAD_TARGET_BYTES:.2f}× target)"
    )
    print(f"\n{'in Chromium (ms, × baseline)':52} {'p50':>8} {'p95':>8} {'p50×':>7} {'p95×':>7}")
    print(f"{'baseline: fetch(/healthz) from the page':52} {_cell(figures(baseline, baseline))}")
    for prefix, series in groups.items():
        for key, times in series.items():
            label = f"{prefix}: {key}"
            target = _browser_target(prefix, key)
            verdict = ""
            if target:
                slow = statistics.median(times) > target
                missed |= slow
                verdict = f"{1000 * target:6.0f} {'SLOW' if slow else 'ok'}"
            print(f"{label:52} {_cell(figures(times, baseline))} {verdict}")
    print(
        f"builder first load: {len(sizes)} cold loads (fresh browser context, empty cache); "
        f"{repeat} changes per series after one warm-up; estimate and planner choose another fabric (a select: "
        "sent at once), typed nodes types a node count (sent after the builder's 300 ms pause in typing, so it has "
        "no target); a verdict compares the median"
    )
    return missed


def _browser_target(prefix: str, key: str) -> float:
    if prefix == "estimate":
        return BROWSER_TARGETS.get(f"estimate: {key}", 0.0)
    if prefix == "planner" and key != "request sent":
        return PLANNER_TARGET_S
    return 0.0


if __name__ == "__main__":
    raise SystemExit(main())
