"""Expert-parallel dispatch: node-deduplicating dispatchers (DeepEP, HybridEP) and the EP all-to-all overlap."""

from __future__ import annotations

import math

import pytest
from fastapi.testclient import TestClient

from app import catalog
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import MEGATRON_CORE
from app.core.hardware import ClusterSpec
from app.core.layout import Layout
from app.core.network import Placement
from app.core.step import dispatch_dedup_share, moe_a2a_overlapped, scaleout_domains
from app.validation.training_runs import Row, row_framework, rule_for_row
from tests.core.conftest import make_cluster
from tests.paths import ROOT


def test_dedup_share_worked_by_hand() -> None:
    # 128 experts on 4 nodes (32 each), top-8: a node gets none of a token's 8 copies with probability
    # C(96, 8) / C(128, 8); the token crosses the network 3·(1 − P0) times instead of 8·3/4 = 6
    p_none = math.comb(96, 8) / math.comb(128, 8)
    assert p_none == pytest.approx(0.0925, abs=5e-4)
    expected = 3 * (1 - p_none) / 6
    assert dispatch_dedup_share(128, 8, 4) == pytest.approx(expected, rel=1e-12)
    assert dispatch_dedup_share(128, 8, 4) == pytest.approx(0.4536, abs=1e-4)
    # one domain, or top-1 routing, leaves nothing to deduplicate
    assert dispatch_dedup_share(128, 8, 1) == 1.0
    for n in (2, 4, 8, 16):
        assert dispatch_dedup_share(64, 1, n) == pytest.approx(1.0)
    # more copies per token → more of them share a node → a smaller share crosses the network
    shares = [dispatch_dedup_share(256, k, 8) for k in (1, 2, 4, 8)]
    assert shares == sorted(shares, reverse=True) and all(0 < s <= 1 for s in shares)


def test_scaleout_domains_counts_nodes_and_nvl72_racks() -> None:
    h100 = ClusterSpec(gpu=catalog.find_gpu("H100-SXM"), num_nodes=32, gpus_per_node=8)
    assert scaleout_domains(h100, 32, 8) == 4
    assert scaleout_domains(h100, 8, 8) == 1
    gb200 = ClusterSpec(gpu=catalog.find_gpu("GB200"), num_nodes=64, gpus_per_node=4, scaleup_domain_gpus=72)
    assert scaleout_domains(gb200, 64, 4) == 1  # 16 trays of one NVL72 rack


def test_overlap_hides_each_all_to_all_behind_one_chunk() -> None:
    # forward 4 ms of which 1 ms experts; backward twice the forward: windows 3, 1, 6, 2 ms; all-to-all 2 ms each
    slow = 0.2
    cost = moe_a2a_overlapped(2e-3, 4e-3, 8e-3, 1e-3, slow)
    hidden = 2e-3 + 1e-3 + 2e-3 + 2e-3
    exposed = 4 * 2e-3 - hidden
    assert cost == pytest.approx(exposed + slow * hidden, rel=1e-12)
    assert cost < 4 * 2e-3


def _qwen_estimate(fw, ep: int = 32, tp: int = 2):
    model = catalog.find_model("Qwen3-235B-A22B")
    layout = Layout(
        tp=tp,
        pp=2,
        dp=256 // (tp * 2),
        ep=ep,
        etp=1,
        sequence_parallel=tp > 1,
        micro_batch=1,
        global_batch=2048,
        recompute="selective",
    )
    return estimate(model, make_cluster(nodes=32), layout, 4096, options=EstimateOptions(framework=fw))


def test_contiguous_routing_worked_by_hand() -> None:
    # Automodel's FakeBalancedGate sends token t to experts 8t … 8t + 7 (mod E)
    # 256 experts on 64 ranks (4 each): every block of 8 spans exactly 2 ranks
    assert dispatch_dedup_share(256, 8, 64, "contiguous") == pytest.approx(2 / 8)
    # ... and one of 8 nodes (32 experts each)
    assert dispatch_dedup_share(256, 8, 8, "contiguous") == pytest.approx(1 / 8)
    # 384 experts on 32 ranks (12 each): blocks start at 0, 8, 16 (mod 24) and span 1, 2 and 1 ranks
    assert dispatch_dedup_share(384, 8, 32, "contiguous") == pytest.approx((1 + 2 + 1) / 3 / 8)
    # the uniform router reaches more groups than the contiguous one, never fewer
    for experts, k, groups in ((128, 8, 8), (256, 8, 64), (128, 4, 64), (32, 4, 8)):
        assert dispatch_dedup_share(experts, k, groups, "contiguous") <= dispatch_dedup_share(
            experts, k, groups
        )
    assert dispatch_dedup_share(128, 8, 1, "contiguous") == 1.0


def test_deduplicating_dispatch_sends_each_token_once_per_rank_and_node() -> None:
    plain = _qwen_estimate(MEGATRON_CORE)
    deepep = _qwen_estimate(MEGATRON_CORE.with_(moe_dispatcher="deepep"))
    ratio = deepep.step.breakdown["ep_comm"] / plain.step.breakdown["ep_comm"]
    # EP 32 over 4 nodes: the scale-out bytes shrink to 0.454 of the plain all-to-all, NVLink fan-out aside
    assert dispatch_dedup_share(128, 8, 4) - 1e-9 <= ratio < 0.6
    assert deepep.step.breakdown["forward_compute"] == plain.step.breakdown["forward_compute"]
    # EP 8 inside one node: 16 experts per rank, so a token's 8 copies reach 8·(1 − C(112, 8)/C(128, 8)) = 5.34
    # ranks on average; each rank gets one copy and applies it to its experts (DeepEP's is_token_in_rank)
    intra_plain = _qwen_estimate(MEGATRON_CORE, ep=8, tp=1)
    intra_deepep = _qwen_estimate(MEGATRON_CORE.with_(moe_dispatcher="deepep"), ep=8, tp=1)
    per_rank = dispatch_dedup_share(128, 8, 8)
    assert per_rank == pytest.approx(1 - math.comb(112, 8) / math.comb(128, 8), rel=1e-12)
    intra = intra_deepep.step.breakdown["ep_comm"] / intra_plain.step.breakdown["ep_comm"]
    assert per_rank - 1e-9 <= intra < per_rank + 0.05  # latency terms do not shrink with the bytes
    # a contiguous benchmark router keeps each token on one rank of the eight
    gate = _qwen_estimate(MEGATRON_CORE.with_(moe_dispatcher="deepep", moe_routing="contiguous"), ep=8, tp=1)
    assert gate.step.breakdown["ep_comm"] < 0.5 * intra_deepep.step.breakdown["ep_comm"]
    # the plain all-to-all sends every copy whatever the router
    plain_gate = _qwen_estimate(MEGATRON_CORE.with_(moe_routing="contiguous"), ep=8, tp=1)
    assert plain_gate.step.breakdown["ep_comm"] == pytest.approx(intra_plain.step.breakdown["ep_comm"])


def test_a2a_overlap_only_lowers_exposed_ep_time() -> None:
    plain = _qwen_estimate(MEGATRON_CORE)
    overlap = _qwen_estimate(MEGATRON_CORE.with_(moe_a2a_overlap=True))
    assert 0 < overlap.step.breakdown["ep_comm"] < plain.step.breakdown["ep_comm"]
    assert overlap.step.total_s < plain.step.total_s
    assert sum(overlap.step.breakdown.values()) == pytest.approx(overlap.step.total_s)
    names = {a.name: a.value for a in overlap.assumptions}
    assert names["EP all-to-all hidden behind the paired micro-batch"] == 1
    assert {a.name: a.value for a in plain.assumptions}[
        "EP all-to-all hidden behind the paired micro-batch"
    ] == 0


def _row(notes: str) -> Row:
    return Row(
        0,
        {
            "source": "yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md",
            "model_name": "Qwen3-235B-A22B (MoE)",
            "notes": notes,
        },
    )


@pytest.mark.parametrize(
    ("notes", "dedup", "overlap"),
    [
        ("Cross-node EP strategy; dispatcher DeepEP.", True, False),
        ("Dispatcher HybridEP, A2A_OVERLAP=0, force load balancing.", True, False),
        ("HybridEP, A2A_OVERLAP=1, partial CUDA graphs.", True, True),
        ("dispatcher DeepEP; table note '+1f1b overlap' (EP all-to-all overlapped)", True, True),
        ("dispatcher A2A (NCCL all-to-all).", False, False),
        ("moe_a2a_overlap=True with moe_token_dispatcher_type alltoall in the recipe", False, True),
    ],
)
def test_replay_reads_dispatcher_and_overlap_from_notes(notes: str, dedup: bool, overlap: bool) -> None:
    row = _row(notes)
    fw = row_framework(row, rule_for_row(row), Layout(ep=8, dp=8, global_batch=64))
    assert fw.moe_dispatch_dedup is dedup
    named = (
        "hybridep" if "hybridep" in notes.lower() else "deepep" if "deepep" in notes.lower() else "alltoall"
    )
    assert fw.moe_dispatcher == named
    assert fw.moe_a2a_overlap is overlap
    assert fw.moe_routing == "uniform"


def test_replay_reads_automodel_s_benchmark_router() -> None:
    row = Row(
        0,
        {
            "source": "NVIDIA-NeMo/Automodel docs/performance-summary.md",
            "model_name": "DeepSeek-V3 (MoE 671B, 37B active)",
            "notes": "Mock data; 'Fake balanced gate' (forced balanced expert routing); DeepEP token dispatcher.",
        },
    )
    fw = row_framework(row, rule_for_row(row), Layout(ep=8, dp=8, global_batch=64))
    assert (fw.moe_dispatcher, fw.moe_routing) == ("deepep", "contiguous")


def _scenario(**extra) -> dict:
    return {
        "model": "Qwen3-235B-A22B",
        "cluster": {"gpu": "H100-SXM", "nodes": 32, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
        "layout": {
            "tp": 2,
            "pp": 2,
            "ep": 32,
            "etp": 1,
            "sequence_parallel": True,
            "micro_batch": 1,
            "global_batch": 2048,
            "recompute": "selective",
        },
        "training": {"seq_len": 4096},
        **extra,
    }


def test_api_takes_the_dispatcher_and_overlap(client: TestClient) -> None:
    plain = client.post("/api/v1/estimate", json=_scenario())
    tuned = client.post("/api/v1/estimate", json=_scenario(moe_dispatcher="deepep", moe_a2a_overlap=True))
    assert plain.status_code == 200 and tuned.status_code == 200, tuned.text
    ep_plain = plain.json()["step"]["breakdown_s"]["ep_comm"]
    ep_tuned = tuned.json()["step"]["breakdown_s"]["ep_comm"]
    assert 0 < ep_tuned < 0.6 * ep_plain


def test_api_rejects_dispatcher_on_a_dense_model(client: TestClient) -> None:
    body = _scenario(moe_dispatcher="deepep")
    body["model"] = "Llama-3-70B"
    body["layout"] = {"tp": 8, "pp": 4, "global_batch": 512}
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422
    assert "moe_dispatcher" in r.text and "dense" in r.text
    r = client.post("/api/v1/estimate", json=_scenario(moe_dispatcher="nccl"))
    assert r.status_code == 422 and "moe_dispatcher" in r.text
    body["moe_dispatcher"] = "alltoall"
    body["moe_a2a_overlap"] = True
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422 and "moe_a2a_overlap" in r.text


def test_planner_searches_with_the_dispatcher(client: TestClient) -> None:
    body = {
        "model": "Qwen3-30B-A3B",
        "cluster": {"gpu": "H100-SXM", "nodes": 4, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 4096},
        "global_batch": 256,
        "top": 3,
    }
    plain = client.post("/api/v1/plan", json=body)
    tuned = client.post("/api/v1/plan", json={**body, "moe_dispatcher": "deepep", "moe_a2a_overlap": True})
    assert plain.status_code == 200 and tuned.status_code == 200, tuned.text
    dense = client.post("/api/v1/plan", json={**body, "model": "Llama-3-8B", "moe_dispatcher": "deepep"})
    assert dense.status_code == 422 and "moe_dispatcher" in dense.text

    def best(r) -> float:
        return float(r.json()["best"]["step_time_s"])

    assert best(tuned) <= best(plain)


def test_placement_helper_matches_network_nodes() -> None:
    # a node-sized placement is one scale-out domain on an 8-GPU HGX node
    h100 = make_cluster(nodes=32)
    assert scaleout_domains(h100, Placement(16, 8).ranks, 8) == Placement(16, 8).nodes


def test_cli_estimate_runs_the_deepep_example(tmp_path) -> None:
    import json

    from tests.cli_support import clusterplan

    example = ROOT / "examples" / "qwen3-30b-a3b-32xh100-deepep.json"
    run = clusterplan("estimate", str(example), "--json", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["framework"] == "megatron-core+deepep+a2a-overlap"
    flags = {a["name"]: a["value"] for a in doc["assumptions"]}
    assert flags["MoE dispatch: one copy per destination rank and node"] == 1
    assert flags["EP all-to-all hidden behind the paired micro-batch"] == 1
