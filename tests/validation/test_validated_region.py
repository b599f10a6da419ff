"""The validated region: which kinds of layout published runs cover, and the planner's recommendation inside it."""

from __future__ import annotations

import glob
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.catalog import accuracy_table, validated_region
from app.core.accuracy import ranking_resolution_of
from app.core.validated_region import LayoutFacts, features_of, outside, region_from
from app.validation.region import build_region, contradicted, dumps, layout_facts
from app.validation.training_runs import estimate_row, evaluate_row, load_rows


def facts(**layout: Any) -> LayoutFacts:
    base = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "etp": None, "zero": 1, "micro_batch": 1}
    base.update(layout)
    seq_len = base.pop("seq_len", 8192)
    experts = base.pop("num_experts", 0)
    return LayoutFacts.of(SimpleNamespace(**base), seq_len, 8, experts)


def test_features_and_bounds() -> None:
    assert features_of(facts(zero=3, tp=2)) == ["zero3_with_tp"]
    assert features_of(facts(tp=16)) == ["tp_across_nodes"]
    assert features_of(facts(ep=8, etp=2)) == ["ep_across_nodes"]  # 16 expert ranks over 8-GPU nodes
    assert features_of(facts(ep=8, etp=1)) == []
    assert facts(cp=16).cp_chunk_tokens == 512 and facts(zero=3, dp=256, cp=16).zero3_shard == 4096
    region = region_from([facts(cp=2, seq_len=8192), facts(zero=3, dp=64), facts(micro_batch=4)])
    assert region["cp_min_chunk_tokens"] == 4096 and region["cp_max"] == 2 and region["micro_batch_max"] == 4
    assert region["zero3_shard_max"] == 64 and region["features"]["zero3_with_tp"] == 0


def test_outside_names_each_reason() -> None:
    region = region_from([facts(cp=2, seq_len=8192), facts(zero=3, dp=64, tp=2)])
    assert outside(facts(cp=2), region) == []
    reasons = outside(facts(zero=3, dp=256, cp=16, micro_batch=4), region)
    assert reasons == [
        "context parallelism on 512-token chunks per rank (the shortest published is 4,096)",
        "context parallel 16 (published runs reach 2)",
        "micro-batch 4 (published runs reach 1)",
        "ZeRO-3/FSDP sharding over 4,096 ranks (published runs reach 64)",
        "ZeRO-3/FSDP beside context parallelism (no published run confirms the estimate)",
    ]


def test_routed_experts_per_rank_are_bounded_by_published_runs() -> None:
    """Each routed expert on a rank is its own GEMM, quantization and launch per layer pass: a layout that keeps
    more experts per rank than any published run (few or no expert-parallel ranks) is an extrapolation."""
    assert facts(num_experts=128, ep=8).local_experts == 16 and facts(ep=1).local_experts == 0
    region = region_from([facts(num_experts=128, ep=8), facts(num_experts=256, ep=64), facts()])
    assert region["local_experts_max"] == 16
    assert outside(facts(num_experts=128, ep=8), region) == []
    assert outside(facts(num_experts=128, ep=1), region) == [
        "128 routed experts per rank (published runs reach 16)"
    ]
    assert outside(facts(tp=2), region) == []  # a dense model has no experts to bound


def test_the_columns_test_agrees_with_the_reasons_layout_by_layout() -> None:
    """`inside` over the planner's columns and `outside` for one layout are the same checks (CHECKS)."""
    import itertools

    import numpy as np

    from app.core.validated_region import inside

    region = validated_region()
    combos = list(
        itertools.product(
            [1, 2, 16], [1, 4], [1, 64, 512], [1, 2, 32, 64], [1, 2, 8], [0, 1], [1, 3], [1, 128]
        )
    )
    names = ("tp", "pp", "dp", "cp", "ep", "etp", "zero", "micro_batch")
    columns = SimpleNamespace(**{n: np.array([c[k] for c in combos]) for k, n in enumerate(names)})
    for experts in (0, 128):
        mask = inside(LayoutFacts.of_columns(columns, 8192, 8, experts), region)
        for combo, ok in zip(combos, mask, strict=True):
            layout = SimpleNamespace(**dict(zip(names, combo, strict=True)))
            assert bool(ok) == (outside(LayoutFacts.of(layout, 8192, 8, experts), region) == []), combo
    assert 0 < int(mask.sum()) < len(combos)


def test_the_planner_does_not_recommend_unpublished_experts_per_rank(client: Any) -> None:
    """Qwen3-30B-A3B (128 experts) on one 8-GPU B200 node under torchtitan, whose grouped GEMM is one launch for
    all local experts (no per-expert call to pay): the fastest estimate drops expert parallelism and keeps all 128
    experts on every rank, which no published run did (Megatron-Bridge ran EP8); the recommendation keeps at most
    the published experts per rank."""
    body = {
        "model": "Qwen3-30B-A3B",
        "framework": "torchtitan-fsdp2",
        "cluster": {"gpu": "B200", "nodes": 1},
        "training": {"seq_len": 4096, "tokens": 1e12},
        "global_batch": 512,
        "top": 5,
    }
    d = client.post("/api/v1/plan", json=body).json()
    best, recommended = d["best"], d["recommended"]
    assert best["layout"]["ep"] == 1 and "128 routed experts per rank" in " ".join(best["outside_region"])
    limit = validated_region()["local_experts_max"]
    assert recommended["validated"] is True and 128 // recommended["layout"]["ep"] <= limit
    assert "routed experts per rank" in d["region_note"]


def test_a_run_its_estimate_misses_validates_nothing() -> None:
    """MLPerf's Llama 3.1 8B on 512 GB200 (row 29: TP2 CP4, 2,048-token chunks) ran 1.69x slower than its
    estimate, beyond the ranking resolution, so it does not make 2K-token chunks a validated kind of layout; the
    GPT-3 175B run of row 1 (+10 %) counts."""
    path = Path("tests/data/training_runs_mlperf.csv")
    rows = {row.index: row for row in load_rows(path)}
    resolution = ranking_resolution_of(accuracy_table(), None)
    assert resolution is not None and 15.0 < resolution.resolution_pct < 40.0
    assert contradicted(evaluate_row(rows[29]), resolution.resolution_pct)
    assert not contradicted(evaluate_row(rows[1]), resolution.resolution_pct)
    chunk = 8192 // estimate_row(rows[29]).layout.cp
    assert chunk == 2048
    kept = layout_facts([path])
    assert len(kept) == len(rows) - 3  # the two 512-GPU 8B runs (+68, +69 %) and the 128-H100 TP2 one (+33 %)
    assert min(int(f.cp_chunk_tokens) for f in kept if f.cp > 1) == 4096
    assert build_region([path])["cp_min_chunk_tokens"] == 4096


def test_the_catalog_region_is_the_validation_files_region() -> None:
    """app/catalog/validated_region.json is what `clusterplan validate region tests/data/training_runs*.csv
    --write` builds; regenerate it when a validation file changes."""
    built = build_region(sorted(Path(p) for p in glob.glob("tests/data/training_runs*.csv")))
    assert built == validated_region(), (
        "run: clusterplan validate region tests/data/training_runs*.csv --write"
    )
    assert dumps(built).endswith("\n") and built["rows"] > 400


def test_the_planner_recommends_the_fastest_layout_inside_the_region(client: Any) -> None:
    # Llama 3.1 405B, 15T tokens, batch 2,048 on 16,384 H100: the fastest estimate puts context parallelism on
    # 2,048-token chunks, shorter than any published run used; the recommendation is Meta's TP8 PP16 with CP2
    body = {
        "model": "Llama-3.1-405B",
        "cluster": {"gpu": "H100-SXM", "nodes": 2048, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 8192, "tokens": 15e12},
        "global_batch": 2048,
        "top": 5,
    }
    d = client.post("/api/v1/plan", json=body).json()
    best, recommended = d["best"], d["recommended"]
    assert best["validated"] is False and any("2,048-token chunks" in r for r in best["outside_region"])
    assert recommended["validated"] is True and recommended["outside_region"] == []
    assert recommended["step_time_s"] >= best["step_time_s"]
    assert recommended["rank"] > 1 and f"rank {recommended['rank']}" in d["region_note"]
    assert (recommended["layout"]["tp"], recommended["layout"]["pp"]) == (8, 16)
    assert len(d["top"]) == 5 and all("validated" in entry for entry in d["top"])


def test_the_llama_3_70b_headline_is_a_published_kind_of_layout(client: Any) -> None:
    """Llama 3 70B, batch 2,048 of 8K on 4,096 H100: once context parallelism pays for its short ring-step kernels
    (app.core.attention.kv_loop_efficiency), the fastest layout is tensor and pipeline parallel inside the
    validated region, not TP1 with CP16 on 512-token chunks."""
    body = {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "H100-SXM", "nodes": 512, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 8192, "tokens": 15e12},
        "global_batch": 2048,
        "top": 5,
    }
    d = client.post("/api/v1/plan", json=body).json()
    best = d["best"]
    assert best["validated"] is True and best["outside_region"] == []
    assert best["layout"]["tp"] >= 2 and 8192 // best["layout"]["cp"] >= 4096
    assert 0.40 < best["mfu"] < 0.55


def test_the_recommendation_is_found_below_the_layouts_kept(client: Any) -> None:
    """The service keeps only the layouts it shows; the recommendation comes from the planner's whole ranking
    (its `accept`), with its own rank, however far down it is."""
    body = {
        "model": "Qwen3-30B-A3B",
        "framework": "torchtitan-fsdp2",
        "cluster": {"gpu": "B200", "nodes": 1},
        "training": {"seq_len": 4096, "tokens": 1e12},
        "global_batch": 512,
    }
    wide = client.post("/api/v1/plan", json={**body, "top": 200}).json()
    ranks = {entry["label"]: entry["rank"] for entry in wide["top"]}
    d = client.post("/api/v1/plan", json={**body, "top": 1}).json()
    recommended = d["recommended"]
    assert len(d["top"]) == 1 and recommended["rank"] > 1 and recommended["validated"] is True
    assert ranks[recommended["label"]] == recommended["rank"] == wide["recommended"]["rank"]
    assert all(e["validated"] is False for e in wide["top"][: recommended["rank"] - 1])
    assert f"rank {recommended['rank']}" in d["region_note"]
