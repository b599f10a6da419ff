"""Throughput of the fused (flash) attention kernel a framework runs on a GPU.

A fused attention kernel keeps the score tiles on chip, so its speed is set by how well the kernel uses the
tensor cores of one architecture, not by the GEMM curve's memory roofline. Which kernel runs depends on the
framework and the GPU:

* "flash-attention-2": the flash-attn package (Dao 2023) or PyTorch SDPA's flash backend, built for Ampere's
  mma.sync instructions. On Hopper and Blackwell it does not use the WGMMA / tcgen05 tensor-core paths.
* "flash-attention-1": FlashAttention (Dao et al. 2022) and the memory-efficient attention kernels of its time
  (xformers 2022), what runs before July 2023 used (FlashAttention-2, arXiv 2307.08691, came out then).
* "transformer-engine": Transformer Engine's DotProductAttention picks its FusedAttention (cuDNN) backend on
  compute capability 9.0 and later ("Disabling FlashAttention to give FusedAttention preference on Hopper+ for
  performance reasons", transformer_engine/pytorch/attention get_attention_backend) and FlashAttention-2 below.

Kernel speeds come from published micro-benchmarks at long sequences (causal, head dim 128, BF16), as a share
of the part's dense 16-bit peak (ATTENTION_KERNELS, by compute capability). A training run reaches a share of that
speed (TRAINING_SHARES) on top of the GEMMs' sustained-clock derating: the rate is applied to the sustained 16-bit
GEMM curve, so power capping and calibration carry over. Parts without a measurement of their architecture keep
the H100 training rates (LEGACY_SHARES), and the estimate's assumptions say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.hardware import GPUSpec

FLASH_ATTENTION_1 = "flash-attention-1"
FLASH_ATTENTION_2 = "flash-attention-2"
TRANSFORMER_ENGINE = "transformer-engine"
ATTENTION_BACKENDS = (FLASH_ATTENTION_1, FLASH_ATTENTION_2, TRANSFORMER_ENGINE)
# what a scenario may choose: FlashAttention v1 runs only inside the 2021-22 period presets (megatron-2021/2022),
# whose runs predate FlashAttention-2; a plan for today's software picks one of these
SELECTABLE_ATTENTION_BACKENDS = (FLASH_ATTENTION_2, TRANSFORMER_ENGINE)
# FlashAttention-2 runs "around 2x" as fast as FlashAttention on A100: 50-73 % of the theoretical maximum FLOP/s
# against FlashAttention's 25-40 % (Dao 2023, arXiv 2307.08691, abstract; Sec. 4.1: 1.7-3.0x across settings). The
# first kernel's rates are FlashAttention-2's measured ones over this factor (FLASH_ATTENTION_1_KERNELS)
FLASH_ATTENTION_2_SPEEDUP = 2.0
CUDNN = "cudnn"  # the kernel Transformer Engine runs on compute capability >= 9.0
CUDNN_MIN_CAPABILITY = 9.0

# Forward and backward throughput of the attention kernel on an H100 in training, as shares of the sustained 16-bit
# GEMM rate: the rates the training-run validation is built on (forward 0.4, backward 0.8 x that, chosen against
# its development set; docs/validation_training_runs.md). Used where ATTENTION_KERNELS has no entry for the GPU's
# architecture, and the reference TRAINING_SHARES are derived from.
LEGACY_SHARES = (0.4, 0.32)


@dataclass(frozen=True)
class KernelMeasurement:
    """Long-sequence throughput of one kernel on one architecture, as shares of the dense 16-bit peak."""

    forward: float
    backward: float
    source: str


# (compute capability, kernel) -> measured share of dense BF16 peak, causal, head dim 128, mean over 16k-64k
# (or 16k-128k) tokens. Peaks: A100 312, H100/H200 989, B200 2250, GB200/GB300 2500 TFLOP/s (app/catalog).
ATTENTION_KERNELS: dict[tuple[float, str], KernelMeasurement] = {
    (8.0, FLASH_ATTENTION_2): KernelMeasurement(
        0.66,
        0.63,
        "Dao 2023 (arXiv 2307.08691) Sec. 4.1, A100: forward up to 73 %, backward up to 63 % of peak; forward x "
        "0.905 for the causal mask (FlashAttention-2's causal / non-causal forward at 16k on H100, Shah et al. "
        "2024 Fig. 5)",
    ),
    (9.0, FLASH_ATTENTION_2): KernelMeasurement(
        0.341,
        0.319,
        "NVIDIA/cudnn-frontend benchmark/benchmark_results.csv (H200 at 1980 MHz, PyTorch SDPA flash backend, "
        "causal, 16k/32k/64k): forward 325/345/343, backward 305/317/323 TFLOP/s",
    ),
    (9.0, CUDNN): KernelMeasurement(
        0.583,
        0.506,
        "NVIDIA/cudnn-frontend benchmark/benchmark_results.csv (H200, cuDNN 9.1.0, causal, 16k/32k/64k): "
        "forward 587/577/567, backward 498/500/504 TFLOP/s; Shah et al. 2024 (FlashAttention-3) Figs. 5-6 give "
        "cuDNN 1.6x FlashAttention-2 on H100 likewise",
    ),
    (10.0, FLASH_ATTENTION_2): KernelMeasurement(
        0.185,
        0.149,
        "NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training artifacts, flash-attn 2.7.4, GQA 128/8, causal, "
        "16k-128k: B200 forward 437, backward 345 TFLOP/s (0.194 / 0.153 of 2250); GB200 (PyTorch flash) 439 / "
        "360 (0.175 / 0.144 of 2500); mean of the two",
    ),
    (10.0, CUDNN): KernelMeasurement(
        0.625,
        0.493,
        "same artifacts, cuDNN 9.10: B200 forward 1372, backward 1076 TFLOP/s (0.610 / 0.478); GB200 1597 / 1267 "
        "(0.639 / 0.507); mean of the two",
    ),
    (10.3, FLASH_ATTENTION_2): KernelMeasurement(
        0.190,
        0.151,
        "same artifacts, GB300, flash-attn 2.7.4, 16k-128k: forward 476, backward 377 TFLOP/s of 2500",
    ),
    (10.3, CUDNN): KernelMeasurement(
        0.699,
        0.517,
        "same artifacts, GB300, cuDNN: forward 1747, backward 1292 TFLOP/s of 2500",
    ),
}


# Head dimension. A fused kernel's throughput falls below head dim 128 (less tensor-core work per loaded tile): taken
# as d / (d + c), normalised at d = 128 and capped at 1. c per pass comes from r, a head-dim-64 call's throughput
# over a head-dim-128 call's at the same keys per query, c = 128 (1 − r) / (2r − 1). Measured with cuDNN 9.19
# (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/{h200,gb200,gb300}_919_only_cudnn, BF16, GQA
# 64/8): the gpt_oss configuration (head dim 64, 1,024-token sliding window, 32K tokens: about 1,008 keys per query)
# against the llama3.1 one at 2,048 tokens causal (1,024.5 keys per query), TFLOP/s forward and backward: H200
# 358 / 484 and 299 / 370; GB200 632 / 1042 and 660 / 836; GB300 748 / 1266 and 689 / 906. Blackwell's kernel loses
# more at head dim 64 than Hopper's (0.61 against 0.74 of the head-dim-128 forward rate). docs/constants.md#attention-head-dim
HEAD_DIM_64_RATIOS: dict[float, tuple[float, float]] = {
    9.0: (358.0 / 484.0, 299.0 / 370.0),
    10.0: (632.0 / 1042.0, 660.0 / 836.0),
    10.3: (748.0 / 1266.0, 689.0 / 906.0),
}
# where no kernel of the architecture is measured at head dim 64 (FlashAttention-2 and FlashAttention, pre-Hopper
# parts), c = 28: head dim 64 at 0.85 of head dim 128, the estimator's assumption before the measurements above
DEFAULT_HEAD_DIM_HALF = 28.0


def head_dim_half(ratio: float) -> float:
    """c of the head-dim saturation d / (d + c) from a measured head-dim-64 : head-dim-128 throughput ratio."""
    return 128.0 * (1.0 - ratio) / (2.0 * ratio - 1.0)


def head_dim_factors(head_dim: Any, halves: tuple[float, float]) -> tuple[Any, Any]:
    """(forward, backward) throughput of a fused kernel at `head_dim` relative to head dim 128, capped at 1
    (`halves`: AttentionKernel.head_dim_half). Numbers or numpy columns."""
    fwd, bwd = (np.minimum(1.0, (head_dim / (head_dim + c)) / (128.0 / (128.0 + c))) for c in halves)
    return fwd, bwd


# FlashAttention (v1) where FlashAttention-2 is measured: its rates over FLASH_ATTENTION_2_SPEEDUP (measured on A100,
# taken as it is on the other architectures, where neither kernel uses the newer tensor-core instructions)
ATTENTION_KERNELS.update(
    {
        (capability, FLASH_ATTENTION_1): KernelMeasurement(
            m.forward / FLASH_ATTENTION_2_SPEEDUP,
            m.backward / FLASH_ATTENTION_2_SPEEDUP,
            f"FlashAttention-2's rates / {FLASH_ATTENTION_2_SPEEDUP:g} (Dao 2023, arXiv 2307.08691: about 2x "
            f"FlashAttention on A100); FlashAttention-2: {m.source}",
        )
        for (capability, kernel), m in list(ATTENTION_KERNELS.items())
        if kernel == FLASH_ATTENTION_2
    }
)


# A fused kernel pays a fixed cost per query tile on top of its loop over the keys (loading Q, the softmax rescale,
# writing O and the log-sum-exp), and a causal call a partly masked tile on the diagonal: throughput = K / (K + K0
# + D) of its long-sequence rate, for K keys per query. Fitted on cuDNN 9.19's H200 BF16 training benchmark (NVIDIA/
# cudnn-frontend benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/llama3.1_20260227_034703.csv, GQA
# 64/8, head dim 128): without a mask 633/671/691/702 TFLOP/s forward and 504/560/594/612 backward at 2K/4K/8K/16K
# tokens give K0 (the 2K : 16K ratio); causal, 484/591/644/673 and 370/474/541/579 give K0 + D on K = L / 2 (the
# other points within 4 % of the fit). K0, D in keys per query: (forward, backward)
KV_LOOP_OVERHEAD_KEYS = (258.0, 517.0)
KV_LOOP_DIAGONAL_KEYS = (227.0, 202.0)
# FlashAttention-2 backward: 5 matmuls vs 2 forward (Dao 2023, Sec. 3.1)
FLASH_BACKWARD_FLOP_RATIO = 2.5
# the keys per query of the long-sequence measurements the kernel rates are (ATTENTION_KERNELS: causal, 16k-64k)
MEASURED_KEYS = (8192.0, 16384.0, 32768.0)


# The per-tile cost is memory traffic (load Q, write O and the log-sum-exp), the loop over the keys tensor-core
# work: in keys, the per-tile cost grows with the kernel's FLOP rate over the GPU's HBM bandwidth. The fit's kernel
# (cuDNN 9.19 on H200, 4.8 TB/s): about 680 TFLOP/s forward and 580 backward at 16K-32K tokens, in FLOP per byte
FIT_INTENSITY = (680e12 / 4.8e12, 580e12 / 4.8e12)


def _kv_loop(keys: Any, cp: Any, index: int, scale: float) -> Any:
    overhead, diagonal = KV_LOOP_OVERHEAD_KEYS[index] * scale, KV_LOOP_DIAGONAL_KEYS[index]
    return keys / (keys + cp * overhead + diagonal)


def loop_scale(measured: KernelMeasurement, peak_flops: float, hbm_bytes_per_s: float) -> tuple[float, float]:
    """How a kernel's per-tile cost in keys compares with the fit's (FIT_INTENSITY): its measured long-sequence
    rates (shares of `peak_flops`) over the GPU's HBM bandwidth."""
    rates = (measured.forward * peak_flops, measured.backward * peak_flops)
    return rates[0] / hbm_bytes_per_s / FIT_INTENSITY[0], rates[1] / hbm_bytes_per_s / FIT_INTENSITY[1]


def kv_loop_efficiency(keys: Any, cp: Any = 1, scale: tuple[float, float] = (1.0, 1.0)) -> tuple[Any, Any]:
    """(forward, backward) throughput of a causal fused-attention kernel whose queries see `keys` keys on average,
    relative to the long-sequence rate it was measured at (MEASURED_KEYS). Under context parallelism of size `cp`
    each query's keys come in cp ring steps, each a kernel call with its own per-tile cost, and one step holds the
    diagonal. Numbers or numpy columns."""
    out = []
    for index in (0, 1):
        reference = sum(_kv_loop(k, 1, index, scale[index]) for k in MEASURED_KEYS) / len(MEASURED_KEYS)
        out.append(_kv_loop(keys, cp, index, scale[index]) / reference)
    return out[0], out[1]


# Training reaches a share of a kernel's micro-benchmark speed (locked clocks, one kernel alone on the GPU; in a
# layer the kernel shares the SMs and HBM with the communication and element-wise kernels around it and waits on
# layout copies). One share per kernel, each the share at which the development runs of that kernel on H100 ran:
# the rates the training-run validation was built on (LEGACY_SHARES, chosen against those runs; docs/
# validation_training_runs.md) over the kernel's H100 micro-benchmark shares of the sustained GEMM (x 989 / 794.5),
# weighted as a layer uses them (backward: 2.5x the forward FLOPs):
#   FlashAttention-2 (torchtitan's runs): (1/0.4245 + 2.5/0.3971) / (1/0.4 + 2.5/0.32) = 0.839
#   cuDNN (the Megatron-LM README's and NeMo 24.07's Transformer Engine runs): (1/0.7257 + 2.5/0.6299) / 10.31 = 0.519
# So H100 estimates keep their validated speed with either kernel, and the measured differences between
# architectures (FlashAttention-2 at 66 % of A100 peak but 19 % of B200's) carry over. The 2024 runs put cuDNN in
# training at the speed of FlashAttention-2 although its micro-benchmark is 1.6x faster; 2025-26 runs reach more of
# it (docs/validation_training_runs.md, "Attention kernels")
# Those development runs ran at 8,192 tokens (torchtitan, FlashAttention-2) and 4,096 (the Megatron-LM README,
# cuDNN), where a causal kernel runs at kv_loop_efficiency of its long-sequence rate; the shares are taken at the
# long-sequence rate, so divided by that efficiency, weighted as a layer uses the two passes
DEVELOPMENT_SEQ_LEN = {FLASH_ATTENTION_2: 8192, CUDNN: 4096}
# the development runs' GPU: H100 SXM, 989 TFLOP/s dense BF16 and 3.35 TB/s (app/catalog/gpus.yaml)
DEVELOPMENT_GPU = (989e12, 3.35e12)


def _layer_weighted_loop(kernel: str) -> float:
    scale = loop_scale(ATTENTION_KERNELS[(9.0, kernel)], *DEVELOPMENT_GPU)
    fwd, bwd = kv_loop_efficiency((DEVELOPMENT_SEQ_LEN[kernel] + 1) / 2, 1, scale)
    return float((1 + FLASH_BACKWARD_FLOP_RATIO) / (1 / fwd + FLASH_BACKWARD_FLOP_RATIO / bwd))


TRAINING_SHARES = {
    FLASH_ATTENTION_2: 0.84 / _layer_weighted_loop(FLASH_ATTENTION_2),
    CUDNN: 0.52 / _layer_weighted_loop(CUDNN),
}
# FlashAttention (v1) in training reaches the share FlashAttention-2 does of its micro-benchmark (no development run
# of its own)
TRAINING_SHARES[FLASH_ATTENTION_1] = TRAINING_SHARES[FLASH_ATTENTION_2]


@dataclass(frozen=True)
class AttentionKernel:
    """The fused attention kernel an estimate uses: forward and backward throughput as shares of the sustained
    16-bit GEMM rate (the attention curve's max_flops), and where the figures come from."""

    kernel: str  # flash-attention-1 | flash-attention-2 | cudnn
    forward_share: float
    backward_share: float
    basis: str
    loop_scale: tuple[float, float] = (1.0, 1.0)  # its per-tile cost against the fit's (loop_scale)
    # c of its head-dim saturation, (forward, backward) (HEAD_DIM_64_RATIOS, head_dim_factors)
    head_dim_half: tuple[float, float] = (DEFAULT_HEAD_DIM_HALF, DEFAULT_HEAD_DIM_HALF)

    @property
    def shares(self) -> tuple[float, float]:
        return (self.forward_share, self.backward_share)


def kernel_for(backend: str, gpu: GPUSpec) -> str:
    """The kernel `backend` runs on `gpu`: Transformer Engine's cuDNN attention on compute capability ≥ 9.0,
    FlashAttention (v1) for that backend, FlashAttention-2 otherwise."""
    if backend == TRANSFORMER_ENGINE and gpu.compute_capability >= CUDNN_MIN_CAPABILITY:
        return CUDNN
    return FLASH_ATTENTION_1 if backend == FLASH_ATTENTION_1 else FLASH_ATTENTION_2


def fused_attention_kernel(
    backend: str,
    gpu: GPUSpec,
    measured_16bit_flops: float,
    calibrated: Mapping[str, tuple[float, float]] | None = None,
    calibration: str = "",
    calibrated_16bit_flops: float = 0.0,
) -> AttentionKernel:
    """Forward/backward fused-attention throughput for `backend` on `gpu`, relative to the sustained 16-bit GEMM
    curve whose measured best is `measured_16bit_flops` (FLOP/s, before the sustained derating). `calibrated`
    (kernel → forward, backward share of dense peak, from a calibration profile named `calibration`) replaces the
    published micro-benchmark of that kernel; as it was measured on the same machine as the profile's GEMM curve,
    its rates are taken relative to that curve's best (`calibrated_16bit_flops`, when the profile has one), so the
    machine's clocks are not counted twice."""
    if backend not in ATTENTION_BACKENDS:
        raise ValueError(
            f"unknown attention backend {backend!r}; choose one of {', '.join(ATTENTION_BACKENDS)}"
        )
    kernel = kernel_for(backend, gpu)
    measured = ATTENTION_KERNELS.get((gpu.compute_capability, kernel))
    if calibrated and kernel in calibrated:
        fwd, bwd = calibrated[kernel]
        measured = KernelMeasurement(float(fwd), float(bwd), f"measured by calibration profile {calibration}")
        if calibrated_16bit_flops > 0:
            measured_16bit_flops = calibrated_16bit_flops
    if measured is None or measured_16bit_flops <= 0:
        return AttentionKernel(
            kernel,
            LEGACY_SHARES[0],
            LEGACY_SHARES[1],
            f"no published {kernel} measurement for {gpu.name}'s architecture: the H100 training rates "
            f"({LEGACY_SHARES[0]:g} / {LEGACY_SHARES[1]:g} of the sustained GEMM rate)",
        )
    share = TRAINING_SHARES[kernel]
    to_gemm = gpu.peak("bf16") / measured_16bit_flops * share
    return AttentionKernel(
        kernel,
        measured.forward * to_gemm,
        measured.backward * to_gemm,
        f"{measured.forward:.3g} / {measured.backward:.3g} of dense peak on compute capability "
        f"{gpu.compute_capability:g} ({measured.source}), x {share:g} in training",
        loop_scale(measured, gpu.peak("bf16"), gpu.hbm_bandwidth_bytes_per_s),
        kernel_head_dim_half(kernel, gpu.compute_capability),
    )


def kernel_head_dim_half(kernel: str, compute_capability: float) -> tuple[float, float]:
    """(forward, backward) c of `kernel`'s head-dim saturation on an architecture: measured for cuDNN
    (HEAD_DIM_64_RATIOS), DEFAULT_HEAD_DIM_HALF otherwise."""
    ratios = HEAD_DIM_64_RATIOS.get(compute_capability) if kernel == CUDNN else None
    if ratios is None:
        return (DEFAULT_HEAD_DIM_HALF, DEFAULT_HEAD_DIM_HALF)
    return (head_dim_half(ratios[0]), head_dim_half(ratios[1]))


def published_kernels(gpu: GPUSpec) -> list[dict[str, object]]:
    """The measured fused-attention kernels of `gpu`'s architecture, for the catalog: micro-benchmark TFLOP/s
    (forward, backward), the share training reaches, which backends run the kernel there, and the source."""
    out: list[dict[str, object]] = []
    for kernel in (FLASH_ATTENTION_2, CUDNN):
        measured = ATTENTION_KERNELS.get((gpu.compute_capability, kernel))
        if measured is None:
            continue
        peak = gpu.peak("bf16") / 1e12
        out.append(
            {
                "kernel": kernel,
                "forward_tflops": measured.forward * peak,
                "backward_tflops": measured.backward * peak,
                "training_share": TRAINING_SHARES[kernel],
                "used_by": [b for b in ATTENTION_BACKENDS if kernel_for(b, gpu) == kernel],
                "source": measured.source,
            }
        )
    return out
