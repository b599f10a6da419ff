"""The fused attention kernel a framework runs on a GPU (app.core.attention) and the FLOP conventions of the
sources whose TFLOP/s the replay checks them against."""

from __future__ import annotations

import pytest

from app.catalog import entries
from app.core.attention import (
    ATTENTION_KERNELS,
    CUDNN,
    DEVELOPMENT_SEQ_LEN,
    FLASH_ATTENTION_1,
    FLASH_ATTENTION_2,
    FLASH_ATTENTION_2_SPEEDUP,
    LEGACY_SHARES,
    TRAINING_SHARES,
    TRANSFORMER_ENGINE,
    fused_attention_kernel,
    kernel_for,
    kv_loop_efficiency,
)
from app.core.efficiency import measured_matmul_flops
from app.core.framework import FRAMEWORKS, MEGATRON_2021, MEGATRON_2022, MEGATRON_CORE, NEMO, TORCHTITAN
from app.core.hardware import GPUSpec
from app.core.model import model_flops_per_token
from app.core.step import FLASH_BACKWARD_FLOP_RATIO, attention_kernel
from app.validation.training_runs import source_flop_convention, stated_flop_convention
from tests.paths import ROOT


def gpu(name: str) -> GPUSpec:
    spec = entries("gpu")[name].spec
    assert isinstance(spec, GPUSpec)
    return spec


def layer_time(shares: tuple[float, float]) -> float:
    """Attention time per unit of forward FLOPs at these forward/backward shares (a layer's weighting)."""
    return 1.0 / shares[0] + FLASH_BACKWARD_FLOP_RATIO / shares[1]


def test_transformer_engine_runs_cudnn_from_hopper_on_and_flash_attention_2_before() -> None:
    assert kernel_for(TRANSFORMER_ENGINE, gpu("H100-SXM")) == CUDNN
    assert kernel_for(TRANSFORMER_ENGINE, gpu("B200")) == CUDNN
    assert kernel_for(TRANSFORMER_ENGINE, gpu("GB300")) == CUDNN
    assert kernel_for(TRANSFORMER_ENGINE, gpu("A100-80GB-SXM")) == FLASH_ATTENTION_2
    assert kernel_for(FLASH_ATTENTION_2, gpu("H100-SXM")) == FLASH_ATTENTION_2
    # the presets: Megatron-core, NeMo and NeMo AutoModel run TE's attention; torchtitan, llm-foundry, the 2021
    # Megatron-LM and Megatron-DeepSpeed call flash-attn / SDPA
    te = {name for name, fw in FRAMEWORKS.items() if fw.attention_backend == TRANSFORMER_ENGINE}
    assert te == {"megatron-core", "nemo", "nemo-automodel-fsdp2"}


def test_h100_keeps_its_validated_rates_with_either_kernel() -> None:
    """The training shares were chosen so that H100 estimates keep the rates the validation was built on, at the
    sequence length of the development runs of each kernel (DEVELOPMENT_SEQ_LEN: the kernel's loop over the keys
    runs below its long-sequence rate there)."""
    h100 = gpu("H100-SXM")
    legacy = layer_time(LEGACY_SHARES)
    for fw in (MEGATRON_CORE, TORCHTITAN):
        kernel = attention_kernel(fw, h100)
        loop = kv_loop_efficiency((DEVELOPMENT_SEQ_LEN[kernel.kernel] + 1) / 2, 1, kernel.loop_scale)
        at_dev = (kernel.shares[0] * loop[0], kernel.shares[1] * loop[1])
        assert layer_time(at_dev) == pytest.approx(legacy, rel=0.01), fw.name
        # at long sequences the kernel runs faster than the development runs show
        assert layer_time(kernel.shares) < 0.95 * legacy
    assert attention_kernel(NEMO, h100).kernel == CUDNN
    assert attention_kernel(TORCHTITAN, h100).kernel == FLASH_ATTENTION_2


def test_shares_follow_the_published_micro_benchmarks() -> None:
    a100, b200 = gpu("A100-80GB-SXM"), gpu("B200")
    # FlashAttention-2 is an Ampere kernel: 66 % of A100 peak forward, 19 % of B200's (flash-attn 2.7.4 on B200
    # runs Ampere's mma instructions)
    fa2_a100 = attention_kernel(TORCHTITAN, a100)
    expected = ATTENTION_KERNELS[(8.0, FLASH_ATTENTION_2)].forward * 312e12 / 271.2e12
    assert fa2_a100.forward_share == pytest.approx(expected * TRAINING_SHARES[FLASH_ATTENTION_2], rel=1e-6)
    assert fa2_a100.forward_share > 1.5 * LEGACY_SHARES[0]
    fa2_b200 = attention_kernel(TORCHTITAN, b200)
    assert fa2_b200.forward_share < 0.6 * LEGACY_SHARES[0]
    # on B200 Transformer Engine's cuDNN kernel runs about 3.4x FlashAttention-2's micro-benchmark, 2.1-2.5x in
    # training at long sequences (their training shares come from 4K and 8K development runs)
    cudnn_b200 = attention_kernel(MEGATRON_CORE, b200)
    ratio = layer_time(fa2_b200.shares) / layer_time(cudnn_b200.shares)
    assert 1.8 < ratio < 2.6
    # absolute FLOP/s: A100 FlashAttention-2 forward in training at long sequences ≈ 0.84 / 0.916 × 0.66 × 312
    # TFLOP/s (the development runs' 0.84 at 8,192 tokens on H100, where FlashAttention-2's key loop runs at 0.916
    # of its long-sequence rate, layer-weighted; before the sustained-clock derating of the GEMM curve it rides on)
    burst = measured_matmul_flops(a100, "bf16", sustained=False)
    assert TRAINING_SHARES[FLASH_ATTENTION_2] == pytest.approx(0.84 / 0.916, rel=2e-3)
    assert fa2_a100.forward_share * burst / 1e12 == pytest.approx(0.84 / 0.916 * 0.66 * 312, rel=2e-3)
    # the per-tile cost scales with the kernel's rate over the HBM bandwidth: FlashAttention-2 on A100 (206 TFLOP/s
    # on 2.04 TB/s) pays about 0.7 of the cuDNN-on-H200 fit's, in keys
    assert 0.6 < fa2_a100.loop_scale[0] < 0.8


def test_parts_without_a_measured_architecture_keep_the_h100_rates_and_say_so() -> None:
    for name in ("MI300X", "Gaudi3", "L40S", "V100-SXM2-32GB"):
        part = gpu(name)
        kernel = attention_kernel(MEGATRON_CORE, part)
        assert kernel.shares == LEGACY_SHARES, name
        assert "no published" in kernel.basis


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown attention backend"):
        fused_attention_kernel("xformers", gpu("H100-SXM"), 794.5e12)


def test_catalog_compute_capabilities() -> None:
    parts = {name: entry.spec for name, entry in entries("gpu").items()}
    assert parts["H100-SXM"].compute_capability == 9.0
    assert parts["H200-SXM"].compute_capability == 9.0
    assert parts["A100-80GB-SXM"].compute_capability == 8.0
    assert parts["B200"].compute_capability == 10.0
    assert parts["GB300"].compute_capability == 10.3
    for name, spec in parts.items():
        if spec.vendor == "NVIDIA":
            assert spec.compute_capability >= 7.0, name
        else:
            assert spec.compute_capability == 0.0, name


def test_moe_model_zoo_tflops_count_causal_attention() -> None:
    """The MoE model zoo's Qwen3-235B H100 table: 2048 × 4096-token steps on 256 GPUs, 19.7 s at 245 'Per GPU TF'
    and 17.6 s at 276. Only the causal-attention model FLOPs reproduce both."""
    model = entries("model")["Qwen3-235B-A22B"].spec
    tokens = 2048 * 4096

    def tflops(convention: str, step_s: float) -> float:
        return tokens * model_flops_per_token(model, 4096, convention) / step_s / 256 / 1e12

    assert tflops("causal", 19.7) == pytest.approx(245, rel=0.01)
    assert tflops("causal", 17.6) == pytest.approx(276, rel=0.01)
    assert tflops("full", 19.7) > 245 * 1.1
    source = "yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md (commit 020b813) table 'H100 / Long Context'"
    assert source_flop_convention(source) == "causal"
    assert source_flop_convention("NVIDIA/NeMo docs/source/performance/performance_summary.md") is None
    # a convention stated in the notes still wins
    assert stated_flop_convention("6N per token without attention") == "6N"


def _long_context_scenario(**extra) -> dict:
    return {
        "model": "Llama-3-8B",
        "cluster": {"gpu": "B200", "nodes": 1, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
        "layout": {"tp": 1, "pp": 1, "cp": 8, "micro_batch": 1, "global_batch": 8, "recompute": "full"},
        "training": {"seq_len": 131072},
        **extra,
    }


def test_api_takes_the_attention_backend(client) -> None:
    auto = client.post("/api/v1/estimate", json=_long_context_scenario())
    fa2 = client.post("/api/v1/estimate", json=_long_context_scenario(attention_backend="flash-attention-2"))
    assert auto.status_code == 200 and fa2.status_code == 200, fa2.text
    # Megatron-core on B200 runs TE's cuDNN attention; FlashAttention-2 on Blackwell is about 2x slower in
    # training, and a 128K-token step is mostly attention
    assert fa2.json()["step"]["total_s"] > 1.5 * auto.json()["step"]["total_s"]
    kernels = {a["name"]: a for a in auto.json()["assumptions"]}
    assert "cudnn" in kernels["flash attention throughput (forward)"]["source"]
    assert "flash attention throughput (backward)" in kernels
    bad = client.post("/api/v1/estimate", json=_long_context_scenario(attention_backend="xformers"))
    assert bad.status_code == 422 and "attention_backend" in bad.text


def test_planner_takes_the_attention_backend(client) -> None:
    body = {
        "model": "Llama-3-8B",
        "cluster": {"gpu": "B200", "nodes": 1, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 32768},
        "global_batch": 64,
        "top": 3,
    }
    auto = client.post("/api/v1/plan", json=body)
    fa2 = client.post("/api/v1/plan", json={**body, "attention_backend": "flash-attention-2"})
    assert auto.status_code == 200 and fa2.status_code == 200, fa2.text
    assert float(fa2.json()["best"]["step_time_s"]) > float(auto.json()["best"]["step_time_s"])
    assert fa2.json()["framework"].endswith("+flash-attention-2")


def test_catalog_shows_each_gpus_attention_kernels(client) -> None:
    h100 = client.get("/api/v1/gpus/H100-SXM").json()
    assert h100["compute_capability"] == 9.0
    kernels = {k["kernel"]: k for k in h100["attention_kernels"]}
    assert kernels["cudnn"]["used_by"] == ["transformer-engine"]
    assert kernels["flash-attention-2"]["used_by"] == ["flash-attention-2"]
    assert kernels["cudnn"]["forward_tflops"] == pytest.approx(0.583 * 989, rel=1e-6)
    assert kernels["cudnn"]["training_share"] == TRAINING_SHARES[CUDNN]
    a100 = client.get("/api/v1/gpus/A100-80GB-SXM").json()
    assert [k["kernel"] for k in a100["attention_kernels"]] == ["flash-attention-2"]
    assert a100["attention_kernels"][0]["used_by"] == ["flash-attention-2", "transformer-engine"]
    assert client.get("/api/v1/gpus/MI300X").json()["attention_kernels"] == []
    page = client.get("/catalog/gpus/B200")
    assert page.status_code == 200
    assert (
        "Fused attention" in page.text and "cudnn-frontend" in page.text and "compute capability" in page.text
    )


def test_plan_cli_takes_the_kernel_and_the_scenarios_framework_settings(capsys) -> None:  # type: ignore[no-untyped-def]

    from app.cli.commands.search import build_request
    from app.cli.main import main

    example = ROOT / "examples" / "llama3-8b-128k-8xb200.json"

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as info:
            main(list(args))
        out = capsys.readouterr()
        return int(info.value.code or 0), out.out, out.err

    code, out, err = run("plan", str(example), "--top", "1", "--attention-backend", "flash-attention-2")
    assert code == 0, err
    assert "megatron-core+flash-attention-2" in out.splitlines()[0]
    code, _, err = run("plan", str(example), "--attention-backend", "xformers")
    assert code == 2 and "attention_backend" in err
    moe = ROOT / "examples" / "qwen3-30b-a3b-32xh100-deepep.json"
    req = build_request(moe, None, None, None, None, None, None, None, None, None)
    assert req["moe_dispatcher"] == "deepep"


def test_the_key_loop_follows_the_published_sequence_sweep() -> None:
    """cuDNN 9.19 on H200, causal BF16 (cudnn-frontend sdpa_benchmark_training): 484 / 591 / 644 / 673 / 688
    TFLOP/s forward and 370 / 474 / 541 / 579 / 581 backward at 2K / 4K / 8K / 16K / 32K tokens, against the
    16K-64K rate the kernel measurements are."""
    measured_fwd = {2048: 484, 4096: 591, 8192: 644, 16384: 673, 32768: 688}
    measured_bwd = {2048: 370, 4096: 474, 8192: 541, 16384: 579, 32768: 581}
    ref_fwd, ref_bwd = (673 + 688) / 2, (579 + 581) / 2
    for seq, fwd in measured_fwd.items():
        loop = kv_loop_efficiency((seq + 1) / 2)
        assert loop[0] == pytest.approx(fwd / ref_fwd, abs=0.04), seq
        assert loop[1] == pytest.approx(measured_bwd[seq] / ref_bwd, abs=0.04), seq
    # context parallelism: the keys of a query arrive in cp ring steps, each a call with its own per-tile cost
    plain, ring = kv_loop_efficiency(4096.0), kv_loop_efficiency(4096.0, 8)
    assert ring[0] < 0.75 * plain[0] and ring[1] < 0.7 * plain[1]
    # the more ring steps, the lower the rate, at any length
    for keys in (1024.0, 8192.0, 65536.0):
        rates = [kv_loop_efficiency(keys, cp)[0] for cp in (1, 2, 4, 8, 16)]
        assert rates == sorted(rates, reverse=True)


def test_the_estimate_states_the_key_loop_it_applied() -> None:
    """The estimate's assumptions give the share of the long-sequence attention rate its kernels reach: Llama 3 70B
    at 8K tokens with CP2 on H100 sees 4,096 keys per query in two ring steps."""
    from app.core.estimate import EstimateOptions, estimate
    from tests.core.conftest import make_cluster, make_layout, make_model

    layout = make_layout(tp=8, pp=1, cp=2, dp=4, zero=1, sequence_parallel=True, global_batch=64)
    est = estimate(make_model("Llama-3-70B"), make_cluster(nodes=8), layout, 8192, options=EstimateOptions())
    loop = {a.name: a for a in est.assumptions}["attention key loop (forward)"]
    kernel = attention_kernel(MEGATRON_CORE, gpu("H100-SXM"))
    fwd, bwd = kv_loop_efficiency(8192.5 / 2, 2, kernel.loop_scale)
    assert loop.value == pytest.approx(fwd, abs=1e-3) and f"backward × {bwd:.3f}" in loop.source
    assert "4,096 keys per query in 2 ring step(s)" in loop.source
    assert 0.6 < fwd < 0.95


def test_megatron_lm_of_2021_22_runs_flashattention_at_half_the_second_versions_rate() -> None:
    """FlashAttention-2 is "around 2x" FlashAttention on A100 (Dao 2023, arXiv 2307.08691): the 2021-22 Megatron-LM
    presets, which predate it, run the first kernel at half its rates, in training as in the micro-benchmark."""
    a100 = gpu("A100-80GB-SXM")
    assert MEGATRON_2021.attention_backend == MEGATRON_2022.attention_backend == FLASH_ATTENTION_1
    assert kernel_for(FLASH_ATTENTION_1, a100) == FLASH_ATTENTION_1
    v1, v2 = ATTENTION_KERNELS[(8.0, FLASH_ATTENTION_1)], ATTENTION_KERNELS[(8.0, FLASH_ATTENTION_2)]
    assert FLASH_ATTENTION_2_SPEEDUP == 2.0
    assert (v1.forward, v1.backward) == pytest.approx((v2.forward / 2, v2.backward / 2))
    flops = measured_matmul_flops(a100, "bf16")
    first = fused_attention_kernel(FLASH_ATTENTION_1, a100, flops)
    second = fused_attention_kernel(FLASH_ATTENTION_2, a100, flops)
    assert first.shares == pytest.approx((second.shares[0] / 2, second.shares[1] / 2))
