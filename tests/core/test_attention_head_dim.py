"""Fused attention below head dim 128 (app.core.attention.head_dim_factors): cuDNN takes the head-dim-64 ratio
measured on its architecture (NVIDIA/cudnn-frontend, cuDNN 9.19), other kernels the unmeasured default."""

from __future__ import annotations

import pytest

from app import catalog
from app.core.attention import (
    CUDNN,
    DEFAULT_HEAD_DIM_HALF,
    FLASH_ATTENTION_2,
    TRANSFORMER_ENGINE,
    fused_attention_kernel,
    head_dim_factors,
    head_dim_half,
    kernel_head_dim_half,
)
from app.core.efficiency import measured_matmul_flops
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import NEMO
from app.core.hardware import ClusterSpec
from app.core.layout import Layout

# head dim 64 over head dim 128 at ~1,000 keys per query, TFLOP/s from the cudnn-frontend result files
# (gpt_oss at 32K tokens with a 1,024-token window against llama3.1 at 2,048 tokens, causal)
PUBLISHED = {
    "H200-SXM": ((358.0, 484.0), (299.0, 370.0)),
    "GB200": ((632.0, 1042.0), (660.0, 836.0)),
    "GB300": ((748.0, 1266.0), (689.0, 906.0)),
}


@pytest.mark.parametrize("gpu_name", sorted(PUBLISHED))
def test_cudnn_at_head_dim_64_runs_at_the_published_share_of_head_dim_128(gpu_name: str) -> None:
    gpu = catalog.find_gpu(gpu_name)
    kernel = fused_attention_kernel(
        TRANSFORMER_ENGINE, gpu, measured_matmul_flops(gpu, "bf16", sustained=False)
    )
    assert kernel.kernel == CUDNN
    fwd, bwd = head_dim_factors(64.0, kernel.head_dim_half)
    (f64, f128), (b64, b128) = PUBLISHED[gpu_name]
    assert fwd == pytest.approx(f64 / f128, rel=1e-9)
    assert bwd == pytest.approx(b64 / b128, rel=1e-9)
    assert head_dim_factors(128.0, kernel.head_dim_half) == pytest.approx((1.0, 1.0))
    # above 128 the kernel is no faster than at 128 (MLA's 192)
    assert head_dim_factors(192.0, kernel.head_dim_half) == pytest.approx((1.0, 1.0))


def test_blackwell_loses_more_at_head_dim_64_than_hopper() -> None:
    hopper = head_dim_factors(64.0, kernel_head_dim_half(CUDNN, 9.0))
    blackwell = head_dim_factors(64.0, kernel_head_dim_half(CUDNN, 10.0))
    assert blackwell[0] < hopper[0] - 0.1
    assert blackwell[1] < hopper[1]


def test_unmeasured_kernels_keep_the_default() -> None:
    assert kernel_head_dim_half(FLASH_ATTENTION_2, 9.0) == (DEFAULT_HEAD_DIM_HALF, DEFAULT_HEAD_DIM_HALF)
    assert kernel_head_dim_half(CUDNN, 8.0) == (DEFAULT_HEAD_DIM_HALF, DEFAULT_HEAD_DIM_HALF)
    fwd, _ = head_dim_factors(64.0, (DEFAULT_HEAD_DIM_HALF, DEFAULT_HEAD_DIM_HALF))
    assert fwd == pytest.approx(0.848, abs=1e-3)


def test_head_dim_half_inverts_the_ratio() -> None:
    for ratio in (0.6, 0.74, 0.85, 0.99):
        fwd, _ = head_dim_factors(64.0, (head_dim_half(ratio), 0.0))
        assert fwd == pytest.approx(ratio, rel=1e-12)


def test_a_head_dim_64_model_on_blackwell_is_slower_in_attention_than_the_default_said(monkeypatch) -> None:
    import app.core.attention as attention

    model = catalog.find_model("GPT-OSS-120B")
    cluster = ClusterSpec(gpu=catalog.find_gpu("GB200"), num_nodes=2, gpus_per_node=4)
    layout = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch=1, global_batch=64, dtype="bf16")
    opts = EstimateOptions(framework=NEMO)
    measured = estimate(model, cluster, layout, 4096, options=opts)
    monkeypatch.setattr(attention, "HEAD_DIM_64_RATIOS", {})
    assumed = estimate(model, cluster, layout, 4096, options=opts)
    assert measured.step.total_s > assumed.step.total_s
    # only the attention kernel differs: the step grows by a few per cent, not more
    assert measured.step.total_s < 1.1 * assumed.step.total_s


def test_the_estimate_states_the_head_dim_factor_it_applied() -> None:
    cluster = ClusterSpec(gpu=catalog.find_gpu("GB200"), num_nodes=2, gpus_per_node=4)
    opts = EstimateOptions(framework=NEMO)
    gpt_oss = estimate(
        catalog.find_model("GPT-OSS-120B"),
        cluster,
        Layout(tp=1, pp=1, dp=8, ep=8, micro_batch=1, global_batch=64),
        4096,
        options=opts,
    )
    (row,) = [a for a in gpt_oss.assumptions if a.name == "attention head dimension (forward)"]
    assert row.value == pytest.approx(632.0 / 1042.0, abs=1e-3)
    assert "head dim 64" in row.source and "measured" in row.source
    llama = estimate(
        catalog.find_model("Llama-3-8B"),
        cluster,
        Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64),
        4096,
    )
    assert not [a for a in llama.assumptions if a.name == "attention head dimension (forward)"]
