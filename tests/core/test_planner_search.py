"""Planner search: rankings, rejections, Pareto front, heuristic preset, sizing and the seed FAQ."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import catalog
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_2021, MEGATRON_2022, MEGATRON_CORE
from app.core.layout import RunOptions
from app.core.planner import Constraints, PlanResult, SearchProblem, heuristic_mask, pareto_front, plan
from app.core.sizing import knee_point, size_sweep
from app.core.units import GiB
from tests.core.conftest import make_cluster


@pytest.fixture(scope="module")
def llama70_64() -> object:
    return plan(
        SearchProblem(catalog.find_model("Llama-2-70B"), make_cluster(), 4096, 512),
        tokens=2e12,
        usd_per_gpu_hour=3.0,
    )


def test_counts_add_up_and_best_is_the_scalar_estimate(llama70_64) -> None:
    r = llama70_64
    assert r.enumerated_layouts == r.feasible_layouts + sum(r.rejections.values())
    assert (
        r.evaluated_layouts
        == r.feasible_layouts + r.rejections["out_of_memory"] + r.rejections["host_memory"]
    )
    assert r.rejections["out_of_memory"] > 0 and r.feasible_layouts > 100
    best = r.best
    est = estimate(catalog.find_model("Llama-2-70B"), make_cluster(), best.layout, 4096)
    assert est.memory.fits
    assert best.step_time_s == pytest.approx(est.step.total_s, rel=1e-9)
    assert best.memory_per_gpu_bytes == pytest.approx(est.memory.peak_bytes, rel=1e-9)
    assert best.mfu == pytest.approx(est.step.mfu, rel=1e-9)
    # time to train and cost per run follow from the step time
    assert best.time_to_train_s == pytest.approx(2e12 / (512 * 4096) * best.step_time_s)
    assert best.cost_usd == pytest.approx(best.time_to_train_s / 3600 * 64 * 3.0)


def test_top_is_sorted_and_best_is_fastest_that_fits(llama70_64) -> None:
    times = [p.step_time_s for p in llama70_64.top]
    assert times == sorted(times)
    assert all(p.headroom_bytes >= 0 for p in llama70_64.top)
    assert len(llama70_64.top) == 10


@pytest.mark.parametrize(
    ("name", "test"),
    [
        ("tp8", lambda rows: rows.tp == 8),
        ("zero0 pp1", lambda rows: (rows.zero == 0) & (rows.pp == 1)),
        ("cp2 mb2", lambda rows: (rows.cp == 2) & (rows.micro_batch == 2)),
        ("none", lambda rows: rows.tp < 0),
    ],
)
def test_recommended_is_the_best_ranked_layout_accept_takes(name: str, test: object) -> None:
    """`accept` (a test of the enumerated columns) picks the recommendation from the whole ranking, with its rank
    there, also far below the `top` kept: the first layout of the full ranking the same test takes."""
    problem = SearchProblem(catalog.find_model("Llama-2-70B"), make_cluster(), 4096, 512)
    every = plan(problem, top=10**6, pareto_limit=0)
    taken = [
        p
        for p in every.top
        if test(SimpleNamespace(**{k: np.array([v]) for k, v in vars(p.layout).items()}))[0]
    ]
    narrow = plan(problem, top=3, pareto_limit=0)
    recommended = narrow.recommend(test)
    assert len(narrow.top) == 3
    if not taken:
        assert recommended is None, name
        return
    assert recommended is not None and recommended.layout == taken[0].layout, name
    assert recommended.rank == taken[0].rank, name


def test_top_shapes_are_distinct_and_fastest_first(llama70_64) -> None:
    shapes = llama70_64.top_shapes
    keys = [(p.num_gpus, p.layout.tp, p.layout.pp, p.layout.cp, p.layout.ep) for p in shapes]
    assert len(keys) == len(set(keys)) == 10
    assert shapes[0].step_time_s == llama70_64.best.step_time_s
    assert [p.step_time_s for p in shapes] == sorted(p.step_time_s for p in shapes)
    # each is the fastest of its shape among the ranked layouts
    for p in llama70_64.top:
        same = [
            q
            for q in shapes
            if (q.layout.tp, q.layout.pp, q.layout.cp) == (p.layout.tp, p.layout.pp, p.layout.cp)
        ]
        assert same and same[0].step_time_s <= p.step_time_s


def test_pareto_front_is_non_dominated(llama70_64) -> None:
    front = llama70_64.pareto
    assert front and front[0].step_time_s == llama70_64.best.step_time_s
    for a in front:
        for b in front:
            if a is b:
                continue
            assert not (
                b.step_time_s <= a.step_time_s
                and b.headroom_bytes >= a.headroom_bytes
                and (b.step_time_s < a.step_time_s or b.headroom_bytes > a.headroom_bytes)
            )
    # headroom grows as step time grows along the front
    heads = [p.headroom_bytes for p in front]
    assert heads == sorted(heads)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.1, 10), st.floats(-5, 5), st.sampled_from([8, 16, 32])), min_size=1, max_size=30
    )
)
def test_pareto_front_property(points) -> None:
    t = np.array([p[0] for p in points])
    h = np.array([p[1] for p in points])
    g = np.array([p[2] for p in points])
    keep = set(pareto_front(t, h, g, np.ones(len(points), dtype=bool)))
    for i in range(len(points)):
        dominated = any(
            t[j] <= t[i] and h[j] >= h[i] and g[j] <= g[i] and (t[j] < t[i] or h[j] > h[i] or g[j] < g[i])
            for j in range(len(points))
        )
        if i in keep:
            assert not dominated
        elif not dominated:
            # an identical twin was kept instead
            assert any(t[j] == t[i] and h[j] == h[i] and g[j] == g[i] for j in keep)


def test_heuristic_preset_restricts_and_is_compared() -> None:
    model = catalog.find_model("Llama-2-70B")
    free = plan(SearchProblem(model, make_cluster(nodes=4), 4096, 256))
    heur = plan(
        SearchProblem(model, make_cluster(nodes=4), 4096, 256), constraints=Constraints(preset="heuristic")
    )
    assert heur.rejections["heuristic_preset"] > 0
    for p in heur.top:
        lay = p.layout
        assert lay.tp <= 8 and lay.tp * lay.pp * lay.cp <= 32 and lay.cp == 1
    assert heur.best.step_time_s >= free.best.step_time_s
    cmp = free.heuristic
    assert cmp.heuristic_best.step_time_s == pytest.approx(heur.best.step_time_s)
    assert cmp.slowdown_pct == pytest.approx((heur.best.step_time_s / free.best.step_time_s - 1) * 100)


def test_constraints_are_obeyed_and_counted() -> None:
    model = catalog.find_model("Llama-2-70B")
    r = plan(
        SearchProblem(model, make_cluster(), 4096, 512),
        constraints=Constraints(tp=(8,), zero=(1,), recompute=("none",), min_headroom_bytes=4 * GiB),
    )
    assert r.rejections["constraints"] > 0
    assert {p.layout.tp for p in r.top} == {8}
    assert {p.layout.zero for p in r.top} == {1}
    assert all(p.headroom_bytes >= 4 * GiB for p in r.top)


@pytest.mark.parametrize(
    ("framework", "stages"), [(MEGATRON_2021, {0}), (MEGATRON_2022, {0, 1}), (MEGATRON_CORE, {0, 1, 2, 3})]
)
def test_the_planner_searches_only_what_the_framework_has(framework, stages) -> None:
    """Megatron-LM of 2021 had no sharded optimizer, of 2022 the distributed optimizer only (Framework.zero_stages),
    and neither had context parallelism (Framework.context_parallel): a search under either never proposes ZeRO-3
    or CP > 1, and counts what it leaves out."""
    model = catalog.find_model("Llama-2-70B")
    options = EstimateOptions(framework=framework)
    r = plan(SearchProblem(model, make_cluster(), 4096, 512, options=options), top=400, pareto_limit=0)
    assert r.best is not None
    assert {p.layout.zero for p in r.top} <= stages
    modern = stages == {0, 1, 2, 3}
    assert (r.rejections.get("zero_stage_not_in_framework", 0) > 0) == (not modern)
    assert (r.rejections.get("context_parallel_not_in_framework", 0) > 0) == (not modern)
    if modern:  # the same search finds ZeRO-3 and CP layouts where it may
        assert 3 in {p.layout.zero for p in r.top} and max(p.layout.cp for p in r.top) > 1
    else:  # nor interleaving with pp < 3 or an uneven split (Framework.interleave_min_pp, uneven_pipeline_split)
        assert {p.layout.cp for p in r.top} == {1}
        assert all(p.layout.vp == 1 or p.layout.pp > 2 for p in r.top)
        assert all(p.layout.first_stage_layers is None for p in r.top)
        assert r.rejections["interleave_pp_not_in_framework"] > 0


def test_the_planner_keeps_deepspeeds_pipeline_at_zero_1() -> None:
    """DeepSpeed's pipeline engine refuses ZeRO-2/3 with pp > 1, and the 2021-based Megatron-DeepSpeed preset has no
    sequence parallelism, selective recompute or ring-attention context parallelism (Framework.pipeline_max_zero,
    sequence_parallel, selective_recompute, context_parallel). Without flash attention (BigScience's runs) selective
    recompute is a layout of its own."""
    model = catalog.find_model("Llama-2-70B")
    r = plan(
        SearchProblem(
            model,
            make_cluster(),
            4096,
            512,
            run=RunOptions(flash_attention=False),
            options=EstimateOptions(framework=DEEPSPEED),
        ),
        top=400,
        pareto_limit=0,
    )
    assert r.best is not None
    assert all(p.layout.zero <= 1 for p in r.top if p.layout.pp > 1)
    assert not any(p.layout.sequence_parallel or p.layout.recompute == "selective" for p in r.top)
    assert {p.layout.cp for p in r.top} == {1}
    for key in ("pipeline_zero", "sequence_parallel", "selective_recompute", "context_parallel"):
        assert r.rejections[f"{key}_not_in_framework"] > 0, key


def test_rank_by_cost_across_sizes_prefers_cheaper_runs() -> None:
    model = catalog.find_model("Llama-3-8B")
    r = plan(
        SearchProblem(model, make_cluster(nodes=1), 8192, 256),
        tokens=1e11,
        gpu_counts=[8, 16, 64],
        rank_by="cost",
        usd_per_gpu_hour=2.0,
    )
    costs = [p.cost_usd for p in r.top]
    assert costs == sorted(costs)
    by_time = plan(
        SearchProblem(model, make_cluster(nodes=1), 8192, 256),
        tokens=1e11,
        gpu_counts=[8, 16, 64],
        usd_per_gpu_hour=2.0,
    )
    assert by_time.best.num_gpus == 64
    assert r.best.cost_usd <= by_time.best.cost_usd


def test_goodput_puts_time_and_cost_on_the_wall_clock() -> None:
    """With the goodput of each size, a ranked layout's wall-clock time is its compute time over that size's goodput
    and its cost is counted on it; a size without a goodput has no cost, and no goodput at all leaves compute."""
    model = catalog.find_model("Llama-3-8B")
    goodput = {8: 0.99, 64: 0.9}

    def search(shares: dict[int, float] | None, rank_by: str = "cost") -> PlanResult:
        return plan(
            SearchProblem(model, make_cluster(nodes=1), 8192, 256, goodput=shares),
            tokens=1e11,
            gpu_counts=[8, 16, 64],
            rank_by=rank_by,  # type: ignore[arg-type]
            usd_per_gpu_hour=2.0,
            top=5000,  # every fitting layout
        )

    compute = search(None)
    assert all(p.wall_clock_s is None and p.goodput is None for p in compute.top)
    wall = search(goodput)
    assert {p.num_gpus for p in wall.top} == {8, 16, 64}
    for p in wall.top:
        share = goodput.get(p.num_gpus)
        if share is None:  # 16 GPUs: asked for, unknown
            assert p.goodput is None and p.wall_clock_s is None and p.cost_usd is None
            continue
        assert p.goodput == share
        assert p.wall_clock_s == pytest.approx(p.time_to_train_s / share, rel=1e-12)
        assert p.cost_usd == pytest.approx(p.wall_clock_s / 3600 * p.num_gpus * 2.0, rel=1e-12)
    # 64 GPUs lose 10 % to failures: ranked by cost, they fall behind the 8-GPU runs they beat on compute alone
    first_64 = next(p.rank for p in wall.top if p.num_gpus == 64)
    assert first_64 > next(p.rank for p in compute.top if p.num_gpus == 64)
    by_time = search(goodput, "time").best
    assert by_time.step_time_s == search(None, "time").best.step_time_s  # the ranking by time is unchanged


def test_moe_search_uses_expert_parallelism() -> None:
    r = plan(SearchProblem(catalog.find_model("Mixtral-8x7B"), make_cluster(), 4096, 256))
    assert r.feasible_layouts > 0
    assert any(p.layout.ep > 1 for p in r.top + r.pareto)


def test_bad_inputs_are_reported_together() -> None:
    with pytest.raises(SpecError) as exc:
        plan(SearchProblem(catalog.find_model("Llama-3-8B"), make_cluster(), 0, 0), rank_by="cost", top=0)
    fields = {p.field for p in exc.value.problems}
    assert {"seq_len", "global_batch", "usd_per_gpu_hour", "top"} <= fields


def test_heuristic_mask_matches_the_rule() -> None:
    from app.core.planner_eval import LayoutArrays

    cols = {k: np.array(v) for k, v in dict(tp=[8, 8, 16, 4], pp=[4, 8, 1, 2], cp=[1, 1, 1, 2]).items()}
    one = np.ones(4, dtype=np.int64)
    rows = LayoutArrays(
        tp=cols["tp"],
        pp=cols["pp"],
        vp=one,
        dp=one,
        cp=cols["cp"],
        ep=one,
        etp=one * 0,
        zero=one,
        sp=one,
        recompute=one,
        micro_batch=one,
        recompute_layers=one * 0,
        offload_layers=one * 0,
        optimizer_offload=one * 0.0,
    )
    assert heuristic_mask(rows, 8).tolist() == [True, False, False, False]


def test_seed_faq_70b_needs_32_gpus_with_tp_4_to_8_and_pp_2_to_4() -> None:
    """Builders-guide FAQ: a 70B model needs ≥ 32 × 80 GB GPUs, TP 4 or 8 and PP 2 or 4 (docs/planner.md)."""
    model = catalog.find_model("Llama-2-70B")
    sweep = size_sweep(SearchProblem(model, make_cluster(nodes=1), 4096, 512), 2e12, sizes=[8, 16, 32, 64])
    assert sweep.min_gpus_that_fit == 32
    assert not sweep.point(16).feasible
    # Megatron-style recipe at 32 GPUs: distributed optimizer (ZeRO ≤ 1), the seed heuristic, pp ≤ 4
    r = plan(
        SearchProblem(model, make_cluster(nodes=4), 4096, 512),
        constraints=Constraints(zero=(0, 1), preset="heuristic", pp=(1, 2, 4)),
        top=1000,
    )
    shapes = {(p.layout.tp, p.layout.pp) for p in r.top}
    assert shapes and {tp for tp, _ in shapes} <= {4, 8} and {pp for _, pp in shapes} <= {2, 4}


def test_size_sweep_picks_deadline_cheapest_and_knee() -> None:
    model = catalog.find_model("Llama-3-8B")
    r = size_sweep(
        SearchProblem(model, make_cluster(nodes=1), 8192, 512),
        1e12,
        sizes=[8, 16, 32, 64, 128, 256, 512],
        usd_per_gpu_hour=2.0,
        deadline_s=20 * 86400,
    )
    ok = [p for p in r.points if p.feasible]
    assert ok[0].scaling_efficiency == pytest.approx(1.0)
    ttt = [p.time_to_train_s for p in ok]
    assert ttt == sorted(ttt, reverse=True)
    meets = [p.num_gpus for p in ok if p.time_to_train_s <= 20 * 86400]
    assert r.smallest_meeting_deadline == min(meets)
    assert r.cheapest == min(ok, key=lambda p: p.cost_usd).num_gpus


def test_knee_point() -> None:
    assert knee_point([8, 16, 32, 64], [8.0, 4.0, 2.0, 1.0]) is None  # perfect scaling: no bend
    assert knee_point([32, 64, 128, 256, 512], [16.0, 8.0, 4.0, 3.6, 3.4]) == 128


@settings(max_examples=12, deadline=None)
@given(
    tp=st.sets(st.sampled_from([1, 2, 4, 8]), min_size=1),
    zero=st.sets(st.sampled_from([0, 1, 2, 3]), min_size=1),
    recompute=st.sets(st.sampled_from(["none", "full"]), min_size=1),
    headroom_gib=st.sampled_from([0.0, 2.0, 8.0]),
)
def test_constraints_never_add_layouts_or_speed(tp, zero, recompute, headroom_gib) -> None:
    model = catalog.find_model("Llama-3-8B")
    cluster = make_cluster(nodes=2)
    free = plan(SearchProblem(model, cluster, 8192, 64), constraints=Constraints(max_vp=2))
    limited = plan(
        SearchProblem(model, cluster, 8192, 64),
        constraints=Constraints(
            tp=tuple(tp),
            zero=tuple(zero),
            recompute=tuple(recompute),
            max_vp=2,
            min_headroom_bytes=headroom_gib * GiB,
        ),
    )
    assert limited.feasible_layouts <= free.feasible_layouts
    assert limited.enumerated_layouts == free.enumerated_layouts
    if limited.best is not None:
        lay = limited.best.layout
        assert lay.tp in tp and lay.zero in zero and lay.recompute in recompute
        assert limited.best.step_time_s >= free.best.step_time_s
        assert limited.best.headroom_bytes >= headroom_gib * GiB
