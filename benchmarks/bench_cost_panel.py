"""The builder's cost panel (cost per run on every cloud option and the TCO against on-prem,
app.services.plan_costs.cost_payload): its time per call computed afresh, on a cache miss and on a cache hit
(app.services.cost_panel_cache), and the builder's whole results (app.web.pages._panels.build_view) on a miss and on
a hit, in process, on a fresh SQLite database with the built-in price book.

Each case is timed for an anonymous caller (the built-in rows only) and for a user with a private quote of their own
(the built-in rows and theirs). Every figure is the median and the 95th percentile of `--repeat` calls after one
warm-up, in milliseconds, with the median as a ratio to the baseline measured in the same run: the panel computed
afresh (uncached_cost_payload) for the panel's rows, the builder's results on a cache miss for the builder's rows.
A miss is made by emptying the cache before the call (outside the timed part).

    .venv/bin/python benchmarks/bench_cost_panel.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.web.pages._builder import BuilderState  # noqa: E402

CASES: list[tuple[str, BuilderState]] = [
    (
        "Llama-3 70B, 64×8 H100, TP8 PP4",
        BuilderState(model="Llama-3-70B", nodes=64, tp=8, pp=4, global_batch=1024),
    ),
    ("Llama-3 8B, 2×8 H100 (builder defaults)", BuilderState()),
]
PRIVATE_QUOTE_USD = (
    0.5  # a negotiated H100 price below every built-in one: the user's panel differs from the public
)


Timed = tuple[
    Callable[[], Any], Callable[[], None] | None
]  # a call, and what runs untimed before it (or None)


def _interleaved(calls: dict[str, Timed], repeat: int) -> dict[str, list[float]]:
    """Seconds per call of each of `calls`, `repeat` times after one warm-up, taking turns (one call of each per
    round) so that every series sees the same machine load."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(repeat + 1):
        for name, (call, before) in calls.items():
            if before is not None:
                before()
            start = time.perf_counter()
            call()
            elapsed = time.perf_counter() - start
            if round_ > 0:
                times[name].append(elapsed)
    return times


def _quoting_user() -> Any:
    """A user with a private H100 quote of their own, as the price API adds it."""
    from sqlmodel import Session

    from app.auth.users import create_user
    from app.db import get_engine
    from app.services.catalog import Actor, add_price_row

    with Session(get_engine()) as session:
        user = create_user(session, f"bench-{uuid.uuid4().hex[:8]}@example.com", "bench cost panel password")
        add_price_row(
            session,
            {
                "category": "cloud_gpu",
                "item": "negotiated H100 quote (benchmark)",
                "vendor": "QuoteCloud",
                "pricing_model": "on-demand",
                "unit": "GPU-hour",
                "price_usd": PRIVATE_QUOTE_USD,
                "usd_per_gpu_hour": PRIVATE_QUOTE_USD,
                "gpu_name": "H100-SXM",
                "gpus_per_unit": 1,
                "price_date": date.today() - timedelta(days=3),
                "source": "benchmark",
                "includes": "GPU-hour",
            },
            owner_id=user.id,
        )
        return Actor(user.id)


def run_case(label: str, state: BuilderState, who: str, viewer: Any, repeat: int) -> list[dict[str, Any]]:
    """The panel and the builder's results of one case for one viewer: rows of (what, times, baseline)."""
    from sqlmodel import Session

    from app.db import get_engine
    from app.services import plan_costs, planning
    from app.services.cost_panel_cache import panel_cache
    from app.web.pages import _panels
    from app.web.pages._builder import state_to_scenario

    with Session(get_engine()) as session:
        evaluation = planning.evaluate(session, state_to_scenario(state), scaling=False, viewer=viewer)
        resolved, summary = evaluation.objects["resolved"], evaluation.result["summary"]
        inputs = plan_costs.cost_inputs(resolved, summary)
        assert inputs is not None
        panel = partial(plan_costs.cost_payload, session, resolved, summary, viewer)
        view = partial(_panels.build_view, session, state, viewer=viewer)
        t = _interleaved(
            {
                "computed": (partial(plan_costs.uncached_cost_payload, session, inputs, viewer), None),
                "miss": (panel, panel_cache.clear),
                "hit": (panel, None),
                "view miss": (view, panel_cache.clear),
                "view hit": (view, None),
            },
            repeat,
        )
    rows = (  # (what, its series, its baseline's series)
        ("cost panel, computed (baseline)", "computed", "computed"),
        ("cost panel, cache miss", "miss", "computed"),
        ("cost panel, cache hit", "hit", "computed"),
        ("builder results, cache miss (baseline)", "view miss", "view miss"),
        ("builder results, cache hit", "view hit", "view miss"),
    )
    return [
        {"case": f"{label}, {who}", "what": what, "times": t[series], "baseline": t[base]}
        for what, series, base in rows
    ]


def measure(repeat: int) -> list[dict[str, Any]]:
    """Every case for an anonymous caller and for a user with a private quote, on the configured database."""
    from app.services.catalog import PUBLIC

    viewers = [("anonymous", PUBLIC), ("a user with a private quote", _quoting_user())]
    return [
        row
        for label, state in CASES
        for who, viewer in viewers
        for row in run_case(label, state, who, viewer, repeat)
    ]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))]


def print_table(rows: list[dict[str, Any]], repeat: int) -> None:
    print(f"{'case':<68} {'':<40} {'p50 ms':>8} {'p95 ms':>8} {'× base':>8}")
    for r in rows:
        median = statistics.median(r["times"])
        ratio = median / statistics.median(r["baseline"])
        p95 = _percentile(r["times"], 0.95)
        print(f"{r['case']:<68} {r['what']:<40} {1e3 * median:8.3f} {1e3 * p95:8.3f} {ratio:7.2f}×")
    print(f"{repeat} timed calls per row after one warm-up, in process, on SQLite")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200, help="timed calls per row")
    args = parser.parse_args()

    from app.startup import prepare_database
    from tests.conftest import configure_app_database

    configure_app_database(f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-cost-')) / 'bench.db'}")
    prepare_database()
    print_table(measure(args.repeat), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
