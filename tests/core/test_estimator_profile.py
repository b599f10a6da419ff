"""Calibrated hardware profiles feed the estimate the same way the catalog defaults do."""

from __future__ import annotations

import pytest

from app.catalog import find_gpu, find_model
from app.core.efficiency import SUSTAINED_FRACTION, GemmEfficiency, HardwareProfile, training_curves
from app.core.estimate import estimate
from app.core.hardware import ClusterSpec
from app.core.layout import Layout

H100 = find_gpu("H100-SXM")
MODEL = find_model("Llama-2-7B")
CLUSTER = ClusterSpec(gpu=H100, num_nodes=1, gpus_per_node=8)
LAYOUT = Layout(tp=2, dp=4, sequence_parallel=True, micro_batch=1, global_batch=32)


def test_profile_with_the_catalog_burst_curve_reproduces_the_default_estimate() -> None:
    burst = GemmEfficiency.for_gpu(H100, "bf16", sustained=False)
    default = estimate(MODEL, CLUSTER, LAYOUT, 4096)
    calibrated = estimate(MODEL, CLUSTER, LAYOUT, 4096, HardwareProfile(gemm=burst, name="same"))
    assert calibrated.step.total_s == pytest.approx(default.step.total_s, rel=1e-12)


def test_a_faster_calibrated_gemm_curve_shortens_compute_only() -> None:
    burst = GemmEfficiency.for_gpu(H100, "bf16", sustained=False)
    faster = GemmEfficiency(burst.max_flops * 1.2, burst.half_intensity, "bf16", "test")
    default = estimate(MODEL, CLUSTER, LAYOUT, 4096)
    calibrated = estimate(MODEL, CLUSTER, LAYOUT, 4096, HardwareProfile(gemm=faster))
    assert calibrated.step.breakdown["forward_compute"] < default.step.breakdown["forward_compute"]
    assert calibrated.step.breakdown["tp_comm"] == pytest.approx(default.step.breakdown["tp_comm"])
    assert calibrated.memory.peak_bytes == pytest.approx(default.memory.peak_bytes)


def test_sustained_curve_is_the_burst_curve_derated() -> None:
    burst = GemmEfficiency.for_gpu(H100, "bf16", sustained=False)
    sustained = GemmEfficiency.for_gpu(H100, "bf16")
    assert sustained.max_flops == pytest.approx(burst.max_flops * SUSTAINED_FRACTION)
    # the burst curve passes through the catalog's mamf-finder figure at the 8192³ reference shape
    assert float(burst.flops_per_s(8192, 8192, 8192)) == pytest.approx(794.5e12, rel=1e-9)
    linear, attention = training_curves(H100, "fp8")
    assert linear.dtype == "fp8" and attention.dtype == "bf16"
    assert linear.max_flops > attention.max_flops
