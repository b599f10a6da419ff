"""The planner speed scripts under benchmarks/ still run against today's core: each one's search on its smallest
case returns a best layout (a script that no longer imports or builds its framework fails here, not on the day
someone measures with it); the cost panel's script times the panel computed, missed and hit in the cache. They time
nothing here."""

from __future__ import annotations

import pytest

from benchmarks import bench_cost_panel, bench_moe_dispatch, bench_offload, bench_planner
from tests.conftest import configure_app_database


def test_moe_dispatch_script_searches_with_its_tuned_framework() -> None:
    assert bench_moe_dispatch.TUNED.moe_dispatch_dedup and bench_moe_dispatch.TUNED.moe_a2a_overlap
    _, plain = bench_moe_dispatch.search("Qwen3-30B-A3B", 64, 4096, 512, bench_moe_dispatch.MEGATRON_CORE)
    _, tuned = bench_moe_dispatch.search("Qwen3-30B-A3B", 64, 4096, 512, bench_moe_dispatch.TUNED)
    # the deduplicating dispatcher with the overlapped all-to-all is never slower than the plain one's best
    assert 0 < tuned["step_time_s"] <= plain["step_time_s"]


def test_offload_script_searches_each_kind() -> None:
    for kind in bench_offload.KINDS:
        _, best, evaluated = bench_offload.search("H100-SXM", 8, kind)
        assert evaluated > 0 and best["step_time_s"] > 0, kind


def test_planner_script_gives_the_service_answer_it_times() -> None:
    """The service case calls the planner service as the API does (with a price-book viewer): a signature change
    there breaks this, not the next measurement."""
    row = bench_planner.run_service(repeat=1)
    assert row["median_cpu_s"] > 0 and "16384" in row["case"]


def test_cost_panel_script_times_the_panel_computed_missed_and_hit(
    sqlite_app_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each case, for an anonymous caller and a user with a private quote: the panel computed afresh (the baseline),
    on a cache miss and on a hit, and the builder's results on a miss (their baseline) and on a hit."""
    from app.services.cost_panel_cache import panel_cache

    configure_app_database(sqlite_app_url)
    rows = bench_cost_panel.measure(repeat=1)
    assert len(rows) == len(bench_cost_panel.CASES) * 2 * 5
    assert all(len(r["times"]) == 1 and r["times"][0] > 0 and r["baseline"] for r in rows)
    assert panel_cache.hits > 0  # the last series, the builder's results on a hit (a miss empties the counts)
    bench_cost_panel.print_table(rows, repeat=1)
    assert "cost panel, cache hit" in capsys.readouterr().out
