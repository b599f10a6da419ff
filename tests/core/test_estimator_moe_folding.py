"""MoE parallel folding (Liu et al. 2025, arXiv 2504.14960; Megatron-core --expert-tensor-parallel-size).

With `etp` set the expert layers regroup the tp·cp·dp ranks of a stage as etp × ep × edp with adjacent ranks: ep
may span the attention's tensor-parallel ranks, each GPU holds its experts at 1/etp of their width, and the
all-to-all stays inside a node when etp·ep fits in one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.catalog import find_model
from app.core.errors import SpecError
from app.core.estimate import estimate
from app.core.layout import Layout, check_layout
from app.core.memory import transformer_params_per_gpu
from app.core.model import layer_shape
from tests.core.conftest import make_cluster
from tests.paths import ROOT

EXAMPLES = ROOT / "examples"


def test_legacy_mapping_needs_ep_to_divide_dp_cp_and_folding_lifts_it() -> None:
    model = find_model("Mixtral-8x7B")
    legacy = Layout(tp=8, pp=1, dp=8, ep=8, zero=1, sequence_parallel=True, global_batch=64)
    check_layout(model, make_cluster(), legacy, 4096)  # ep 8 divides dp 8
    too_wide = legacy.with_(tp=8, dp=4, ep=8, global_batch=32)
    with pytest.raises(SpecError) as err:
        check_layout(model, make_cluster(nodes=4), too_wide, 4096)
    assert any(p.field == "layout.ep" and "etp" in p.message for p in err.value.problems)
    folded = too_wide.with_(etp=1)
    check_layout(model, make_cluster(nodes=4), folded, 4096)  # etp·ep = 8 divides tp·dp = 32
    with pytest.raises(SpecError) as err:
        check_layout(model, make_cluster(nodes=4), folded.with_(etp=8, ep=8), 4096)  # 64 does not divide 32
    assert [p.field for p in err.value.problems] == ["layout.etp"]


def test_etp_on_a_dense_model_is_an_error() -> None:
    with pytest.raises(SpecError) as err:
        check_layout(
            find_model("Llama-3.1-8B"), make_cluster(nodes=1), Layout(tp=2, dp=4, etp=1, global_batch=8), 4096
        )
    assert [p.field for p in err.value.problems] == ["layout.etp"]


def test_expert_weights_split_by_etp_not_tp() -> None:
    shape = layer_shape(find_model("Mixtral-8x7B"))
    _, legacy = transformer_params_per_gpu(shape, 0, 32, 8, 8)
    _, folded = transformer_params_per_gpu(shape, 0, 32, 8, 8, 1)
    assert folded == pytest.approx(8 * legacy)
    assert legacy == pytest.approx(32 * shape.num_experts / 8 * shape.expert_ffn_params / 8)


def test_folded_expert_parallelism_stays_on_nvlink_and_keeps_the_flops() -> None:
    """tp 8, ep 8: legacy places the 8 EP ranks 8 apart (one per node, over InfiniBand); folded with etp 1 they
    are the 8 GPUs of one node. The expert FLOPs are the same; the all-to-all is far cheaper."""
    model = find_model("Mixtral-8x7B")
    base = Layout(tp=8, pp=1, dp=8, ep=8, zero=1, sequence_parallel=True, micro_batch=1, global_batch=64)
    legacy = estimate(model, make_cluster(), base, 4096)
    folded = estimate(model, make_cluster(), base.with_(etp=1), 4096)
    assert folded.step.model_flops_per_step == legacy.step.model_flops_per_step
    assert 0 < folded.step.breakdown["ep_comm"] < 0.5 * legacy.step.breakdown["ep_comm"]
    # each GPU now keeps whole experts: 8× the expert weights of the legacy mapping
    assert folded.memory.most_loaded.breakdown["weights"] > legacy.memory.most_loaded.breakdown["weights"]


def test_api_accepts_etp_and_reports_the_field_on_error(client: Any) -> None:
    body = json.loads((EXAMPLES / "mixtral-8x7b-64xh100.json").read_text())
    body["layout"].update({"tp": 8, "dp": 8, "ep": 8, "etp": 1})
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    body["layout"].update({"etp": 0})
    r = client.post("/api/v1/estimate", json=body)
    assert r.status_code == 422
    assert any(d["loc"][-1] == "etp" for d in r.json()["detail"])
