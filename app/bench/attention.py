"""Fused-attention sweep: forward and backward TFLOP/s of PyTorch's scaled_dot_product_attention per kernel.

The same measurement as NVIDIA/cudnn-frontend's SDPA training benchmark (benchmark/sdpa_benchmark_training): causal
self-attention on [batch, heads, seq, head_dim] BF16 tensors, each kernel pinned with torch.nn.attention.sdpa_kernel
(FlashAttention-2: SDPBackend.FLASH_ATTENTION; cuDNN: SDPBackend.CUDNN_ATTENTION, the cuDNN fused attention that
Transformer Engine also runs on Hopper and Blackwell). Warm-up iterations, then timed forward and backward passes
(CUDA events on GPU, the monotonic clock on CPU). FLOPs count the causal half: forward 4·b·h·s²·d / 2, backward 2.5×
that (FlashAttention-2's five matmuls against two; Dao 2023 Sec. 3.1), as the kernels' own benchmarks do.
The rows calibrate the estimator's attention rates (app.calibration.profile, app.core.attention).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from app.bench.environment import collect_environment, cuda_device_count
from app.bench.gemm import resolve_device
from app.bench.progress import ProgressSink
from app.benchproto.config import ATTENTION_SDPA_BACKENDS, AttentionConfig, validate_attention
from app.benchproto.schema import attention_row, finish, new_document, write_document

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _kernel_context(kernel: str) -> Any:
    from contextlib import nullcontext

    member = ATTENTION_SDPA_BACKENDS[kernel]
    if not member:
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, member)])


def time_attention(
    seq_len: int, kernel: str, config: AttentionConfig, device: str
) -> tuple[list[float], list[float]]:
    """Per-iteration forward and backward seconds of one causal SDPA call."""
    shape = (config.batch, config.heads, seq_len, config.head_dim)
    dtype = DTYPES[config.dtype]
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device=device, dtype=dtype)
    on_cuda = device.startswith("cuda")
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def clock() -> Callable[[], float]:
        if on_cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()

            def stop() -> float:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                torch.cuda.synchronize()
                return float(start.elapsed_time(end)) / 1e3

            return stop
        t0 = time.perf_counter_ns()
        return lambda: (time.perf_counter_ns() - t0) / 1e9

    fwd: list[float] = []
    bwd: list[float] = []
    with _kernel_context(kernel):
        for i in range(config.warmup_iters + config.iters):
            for t in (q, k, v):
                t.grad = None
            if on_cuda:
                torch.cuda.synchronize()
            stop = clock()
            out = sdpa(q, k, v, is_causal=True)
            f = stop()
            stop = clock()
            out.backward(grad)
            b = stop()
            if i >= config.warmup_iters:
                fwd.append(f)
                bwd.append(b)
    return fwd, bwd


def run_attention(
    config: AttentionConfig,
    sink: ProgressSink | None = None,
    out_path: str | None = None,
    argv: list[str] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run the sweep; the document (partial while running) is rewritten to out_path after every row."""
    gpus = cuda_device_count()
    validate_attention(config, gpus)
    device = resolve_device(config.device)
    sink = sink or ProgressSink(None)
    doc = new_document("attention", {**config.to_dict(), "device": device}, argv, collect_environment())
    sink.start(len(config.kernels) * len(config.seq_lens), kind="attention", devices=[device])
    for kernel in config.kernels:
        for seq_len in config.seq_lens:
            if should_stop is not None and should_stop():
                finish(doc, "interrupted")
                if out_path:
                    write_document(doc, out_path)
                return doc
            fwd, bwd = time_attention(seq_len, kernel, config, device)
            row = attention_row(kernel, seq_len, config, device, fwd, bwd)
            doc["rows"].append(row)
            sink.row(row)
            if out_path:
                write_document(doc, out_path)
            if device == "cuda":
                torch.cuda.empty_cache()
    finish(doc, "complete")
    if out_path:
        write_document(doc, out_path)
    sink.finish("complete", summary=doc["summary"])
    return doc
