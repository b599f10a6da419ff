"""The parallel filesystem sized by its storage nodes (count × GB/s each), beside the aggregate input and the
per-compute-node default."""

from __future__ import annotations

import pytest

from app.core import storage as core_storage
from app.core.errors import SpecError
from app.schemas import cost as s
from app.services import cost as svc

LLAMA3 = {"num_gpus": 16384, "preset": "llama3-405b", "checkpoint": {"params": 405e9}, "tier": "parallel_fs"}


def test_storage_nodes_sum_to_a_fixed_aggregate() -> None:
    tier = core_storage.DEFAULT_TIERS["parallel_fs"].with_storage_nodes(20, 50e9)
    assert tier.write_bw(2048) == pytest.approx(1e12) and tier.read_bw(2048) == pytest.approx(1e12)
    assert tier.write_bw(10) == pytest.approx(10 * 25e9)  # below the cap, the nodes' storage NICs limit
    assert "20 storage nodes x 50 GB/s = 1000 GB/s" in tier.source


def test_goodput_takes_the_storage_nodes() -> None:
    default = svc.goodput(s.GoodputRequest.model_validate(LLAMA3))
    nodes = svc.goodput(
        s.GoodputRequest.model_validate(
            LLAMA3 | {"parallel_fs_storage_nodes": 20, "parallel_fs_gb_per_s_per_storage_node": 50}
        )
    )
    aggregate = svc.goodput(s.GoodputRequest.model_validate(LLAMA3 | {"parallel_fs_gb_per_s": 1000}))
    # 1 TB/s from 20 × 50 GB/s is the same filesystem as a 1,000 GB/s aggregate, slower than Tectonic's 7 TB/s
    assert nodes.goodput == pytest.approx(aggregate.goodput)
    assert nodes.goodput < default.goodput
    assert any("20 storage nodes" in a.source for a in nodes.assumptions)


def test_storage_report_takes_the_storage_nodes() -> None:
    body = {
        "checkpoint": {"params": 70e9},
        "num_nodes": 128,
        "tokens_per_step": 4e6,
        "step_s": 10.0,
        "vocab_size": 128256,
    }
    r = svc.storage(
        s.StorageRequest.model_validate(
            body | {"parallel_fs_storage_nodes": 4, "parallel_fs_gb_per_s_per_storage_node": 20}
        )
    )
    (pfs,) = [t for t in r.checkpoint_tiers if t.tier == "parallel_fs"]
    assert pfs.bandwidth_bytes_per_s == pytest.approx(80e9)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"parallel_fs_storage_nodes": 20}, "parallel_fs_storage_nodes"),
        ({"parallel_fs_gb_per_s_per_storage_node": 50}, "parallel_fs_storage_nodes"),
        (
            {
                "parallel_fs_gb_per_s": 100,
                "parallel_fs_storage_nodes": 2,
                "parallel_fs_gb_per_s_per_storage_node": 50,
            },
            "parallel_fs_gb_per_s",
        ),
    ],
)
def test_half_or_double_inputs_are_refused(extra: dict[str, float], field: str) -> None:
    with pytest.raises(SpecError) as err:
        svc.goodput(s.GoodputRequest.model_validate(LLAMA3 | extra))
    assert err.value.problems[0].field == field
