"""DeepEP over a multi-node NVLink domain (an NVL72 rack with more than 8 EP ranks in it): its all-to-all at no
more than the rates Megatron-LM measured there, in the estimate, the planner's columns and the assumptions; other
dispatchers and 8-GPU NVLink domains keep the network model's rates."""

from __future__ import annotations

import numpy as np
import pytest

from app import catalog
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import (
    DEEPEP_MNNVL_COMBINE_BYTES_PER_S,
    DEEPEP_MNNVL_DISPATCH_BYTES_PER_S,
    MEGATRON_CORE,
)
from app.core.hardware import ClusterSpec
from app.core.layout import Layout
from app.core.step import deepep_mnnvl_applies, deepep_mnnvl_floor, ep_ranks_in_domain

DEEPEP = MEGATRON_CORE.with_(moe_dispatcher="deepep")
HYBRIDEP = MEGATRON_CORE.with_(moe_dispatcher="hybridep")
ASSUMPTION = "DeepEP over a multi-node NVLink domain: dispatch / combine bandwidth, at most"


def _gb200(nodes: int = 64) -> ClusterSpec:
    return ClusterSpec(
        gpu=catalog.find_gpu("GB200"), num_nodes=nodes, gpus_per_node=4, scaleup_domain_gpus=72
    )


def _h100(nodes: int = 32) -> ClusterSpec:
    return ClusterSpec(gpu=catalog.find_gpu("H100-SXM"), num_nodes=nodes, gpus_per_node=8)


def test_the_floor_worked_by_hand() -> None:
    # 1 GB per rank and all-to-all: dispatch at 400 GB/s (2.5 ms) and combine at 190 GB/s (5.26 ms) pair up, so
    # each all-to-all costs their mean, 3.88 ms, where the network model says less
    per_rank = 1e9
    mean = (per_rank / DEEPEP_MNNVL_DISPATCH_BYTES_PER_S + per_rank / DEEPEP_MNNVL_COMBINE_BYTES_PER_S) / 2
    assert mean == pytest.approx(3.882e-3, rel=1e-3)
    gb200 = _gb200()
    assert deepep_mnnvl_floor(DEEPEP, gb200, 1e-3, per_rank, 32) == pytest.approx(mean)
    # a slower network figure stands
    assert deepep_mnnvl_floor(DEEPEP, gb200, 9e-3, per_rank, 32) == 9e-3
    # HybridEP and NCCL's all-to-all keep the network model's rates; so does DeepEP inside 8 GPUs of NVLink
    assert deepep_mnnvl_floor(HYBRIDEP, gb200, 1e-3, per_rank, 32) == 1e-3
    assert deepep_mnnvl_floor(MEGATRON_CORE, gb200, 1e-3, per_rank, 32) == 1e-3
    assert deepep_mnnvl_floor(DEEPEP, gb200, 1e-3, per_rank, 8) == 1e-3
    assert deepep_mnnvl_floor(DEEPEP, _h100(), 1e-3, per_rank, 32) == 1e-3


def test_it_works_per_layout_column() -> None:
    gb200 = _gb200()
    ranks = np.array([4.0, 8.0, 16.0, 32.0])
    applies = deepep_mnnvl_applies(DEEPEP, gb200, ranks)
    assert list(applies) == [False, False, True, True]
    seconds = deepep_mnnvl_floor(DEEPEP, gb200, np.full(4, 1e-3), np.full(4, 1e9), ranks)
    assert list(seconds[:2]) == [1e-3, 1e-3] and all(s > 3e-3 for s in seconds[2:])


def test_ep_ranks_in_domain_counts_trays_of_a_rack() -> None:
    # EP 32 over 4-GPU trays of one NVL72 rack: all 32 in one domain; EP 32 over 8-GPU H100 nodes: 8 per domain
    assert ep_ranks_in_domain(_gb200(), 32, 4) == 32
    assert ep_ranks_in_domain(_h100(), 32, 8) == 8


def _dsv3(cluster: ClusterSpec, fw) -> tuple[float, list[str]]:
    model = catalog.find_model("DeepSeek-V3")
    layout = Layout(
        tp=1,
        pp=8,
        dp=32,
        ep=32,
        micro_batch=1,
        global_batch=2048,
        recompute="selective",
        dtype="fp8",
        first_stage_layers=7,
        last_stage_layers=6,
    )
    est = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=fw))
    return est.step.breakdown["ep_comm"], [a.name for a in est.assumptions]


def test_deepseek_v3_on_an_nvl72_rack_pays_deepep_rates() -> None:
    deepep, deepep_names = _dsv3(_gb200(), DEEPEP)
    hybridep, hybridep_names = _dsv3(_gb200(), HYBRIDEP)
    # both deduplicate the same tokens; DeepEP's measured rates are well under NVLink 5's, HybridEP's are not
    assert deepep > 1.5 * hybridep
    assert ASSUMPTION in deepep_names and ASSUMPTION not in hybridep_names
    # on 8-GPU H100 nodes DeepEP runs its own intranode kernels: no floor, the two dispatchers cost the same
    h100_deepep, h100_names = _dsv3(_h100(), DEEPEP)
    h100_hybridep, _ = _dsv3(_h100(), HYBRIDEP)
    assert h100_deepep == pytest.approx(h100_hybridep, rel=1e-12)
    assert ASSUMPTION not in h100_names
