"""The last gradient bucket of a step: Megatron-core reduces the gradients in buckets of max(40M, 1M × dp·cp)
parameters; the last one fills when the backward ends and the first all-gather opens the next forward, so neither
hides. FSDP's unit (one layer) plays that part for the FSDP presets and for ZeRO-3."""

from __future__ import annotations

import pytest

from app.catalog import find_model
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import DEEPSPEED, MEGATRON_CORE, TORCHTITAN, Framework
from app.core.layout import Layout
from app.core.step import last_bucket_params
from tests.core.conftest import make_cluster


def test_megatron_bucket_is_its_default_size_capped_at_the_stage() -> None:
    # megatron/core/distributed: bucket_size = max(40000000, 1000000 * dp_size) parameters
    assert MEGATRON_CORE.dp_bucket_params == (40e6, 1e6)
    assert last_bucket_params(MEGATRON_CORE, 2e9, 8, 32) == pytest.approx(40e6)
    assert last_bucket_params(MEGATRON_CORE, 2e9, 288, 32) == pytest.approx(288e6)
    assert last_bucket_params(MEGATRON_CORE, 2e9, 4096, 32) == pytest.approx(2e9)  # all of them, no more
    # FSDP reduces per wrapped block: one layer's parameters
    assert TORCHTITAN.dp_bucket_params is None
    assert last_bucket_params(TORCHTITAN, 2e9, 4096, 32) == pytest.approx(2e9 / 32)


def _dp_comm(fw: Framework, nodes: int, zero: int = 1) -> float:
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=nodes)
    dp = nodes * 8 // 4
    # the same work per GPU at every size: 2 micro-batches of four sequences per data-parallel rank, a backward
    # long enough to hide the whole reduction
    layout = Layout(tp=4, pp=1, dp=dp, zero=zero, micro_batch=4, global_batch=8 * dp, sequence_parallel=True)
    est = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=fw))
    return float(est.step.breakdown["dp_comm"])


def test_the_exposed_reduction_grows_with_the_data_parallel_size() -> None:
    """At a fixed per-GPU work the bucket grows with dp (40M parameters up to dp 40, then 1M per rank), so the
    exposed data-parallel time does too; with the bucket taken as free (a bucket of no parameters) it does not."""
    small, large = _dp_comm(MEGATRON_CORE, 16), _dp_comm(MEGATRON_CORE, 256)
    assert large > small * 1.5
    free = MEGATRON_CORE.with_(dp_bucket_params=(0.0, 0.0))
    assert _dp_comm(free, 16) < small and _dp_comm(free, 256) < large
    assert _dp_comm(free, 256) < 1.2 * _dp_comm(free, 16)


def test_without_overlap_the_whole_reduction_is_exposed_either_way() -> None:
    """DeepSpeed's ZeRO-1 hides nothing (dp_overlap 0): splitting off the last bucket changes its time by at most one
    more collective's latency."""
    with_unit = _dp_comm(DEEPSPEED, 64)
    megatron_bucket = _dp_comm(DEEPSPEED.with_(dp_bucket_params=(40e6, 1e6)), 64)
    assert with_unit == pytest.approx(megatron_bucket, rel=0.02)


def test_zero3_charges_the_step_s_first_gather_and_last_reduce_scatter() -> None:
    model = find_model("Llama-3.1-8B")
    cluster = make_cluster(nodes=32)
    layout = Layout(tp=1, pp=1, dp=256, zero=3, micro_batch=1, global_batch=512, recompute="selective")
    est = estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=TORCHTITAN))
    # one layer's gather (2 B) and reduce-scatter (4 B, fp32) over 256 ranks cannot hide: a floor under the
    # exposed ZeRO-3 time of about 6 B × 8e9 / 32 layers over the per-GPU network share
    per_gpu_bw = 50e9  # one 400 Gb/s NIC per GPU
    floor = 0.5 * 6 * 8.0e9 / 32 / per_gpu_bw
    assert est.step.breakdown["zero3_comm"] > floor
