"""Maximum-achievable-matmul sweep (after mamf-finder, github.com/stas00/ml-engineering compute/accelerator/benchmarks).

Per shape and dtype: warm-up iterations, then timed iterations each preceded by a cache flush (writing a
buffer larger than the last-level cache, so every matmul reads its operands from memory, as in training);
CUDA events around each matmul on GPU, the monotonic clock on CPU (where the matmul is synchronous).
Reports best / median / mean TFLOP/s per shape and the maximum per dtype.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from app.bench.config import GemmConfig, GemmShape, validate_gemm
from app.bench.environment import collect_environment, cuda_device_count, fp8_supported
from app.bench.progress import ProgressSink
from app.bench.schema import finish, gemm_row, new_document, write_document

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CPU_FLUSH_BYTES = 64 * 2**20


def supported_dtypes(device: str) -> tuple[str, ...]:
    """Every GEMM dtype the device runs: tf32 needs an NVIDIA GPU (≥ Ampere), fp8 FP8 tensor cores."""
    if not device.startswith("cuda"):
        return ("fp32", "bf16", "fp16")
    out = ["fp32"]
    if torch.cuda.get_device_capability(0) >= (8, 0):
        out.append("tf32")
    out += ["bf16", "fp16"]
    if fp8_supported():
        out.append("fp8")
    return tuple(out)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


class _Matmul:
    """One shape/dtype's operands and the call that multiplies them (fp8 via torch._scaled_mm)."""

    def __init__(self, shape: GemmShape, dtype: str, device: str) -> None:
        self.dtype = dtype
        if dtype == "fp8":
            f8 = torch.float8_e4m3fn
            self.a = torch.randn(shape.m, shape.k, device=device).to(f8)
            # _scaled_mm wants B column-major: build (n, k) row-major and transpose.
            self.b = torch.randn(shape.n, shape.k, device=device).to(f8).t()
            self.scale = torch.ones((), device=device)
            self.call: Callable[[], Any] = lambda: torch._scaled_mm(
                self.a, self.b, scale_a=self.scale, scale_b=self.scale, out_dtype=torch.bfloat16
            )
        else:
            tdtype = TORCH_DTYPES[dtype]
            self.a = torch.randn(shape.m, shape.k, device=device, dtype=tdtype)
            self.b = torch.randn(shape.k, shape.n, device=device, dtype=tdtype)
            self.c = torch.empty(shape.m, shape.n, device=device, dtype=tdtype)
            self.call = lambda: torch.matmul(self.a, self.b, out=self.c)


def time_matmul(
    shape: GemmShape, dtype: str, device: str, iters: int, warmup_iters: int, flush: torch.Tensor | None
) -> list[float]:
    """Per-iteration seconds for `iters` timed matmuls of one shape."""
    on_cuda = device.startswith("cuda")
    if on_cuda:
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    mm = _Matmul(shape, dtype, device)
    for _ in range(warmup_iters):
        mm.call()
    times: list[float] = []
    if on_cuda:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        torch.cuda.synchronize()
        for i in range(iters):
            if flush is not None:
                flush.zero_()
            starts[i].record()
            mm.call()
            ends[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]
    else:
        for _ in range(iters):
            if flush is not None:
                flush.zero_()
            t0 = time.perf_counter_ns()
            mm.call()
            times.append((time.perf_counter_ns() - t0) / 1e9)
    return times


def run_gemm(
    config: GemmConfig,
    sink: ProgressSink | None = None,
    out_path: str | None = None,
    argv: list[str] | None = None,
    all_devices: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run the sweep; the document (partial while running) is rewritten to out_path after every shape."""
    gpus = cuda_device_count()
    device = resolve_device(config.device)
    if config.dtypes == ("all",):
        from dataclasses import replace

        config = replace(config, dtypes=supported_dtypes(device))
    validate_gemm(config, gpus, fp8_supported())
    if device == "cpu" and "tf32" in config.dtypes:
        from app.core.errors import Problem, SpecError

        raise SpecError([Problem("dtype", "tf32 is a tensor-core mode of NVIDIA GPUs; not available on CPU")])
    devices = [f"cuda:{i}" for i in range(gpus)] if device == "cuda" and all_devices else [device]
    sink = sink or ProgressSink(None)
    doc = new_document(
        "gemm", {**config.to_dict(), "device": device, "devices": devices}, argv, collect_environment()
    )
    sink.start(len(devices) * len(config.shapes) * len(config.dtypes), kind="gemm", devices=devices)
    for dev in devices:
        flush_bytes = (
            config.flush_bytes if dev.startswith("cuda") else min(config.flush_bytes, CPU_FLUSH_BYTES)
        )
        flush = torch.empty(flush_bytes, dtype=torch.int8, device=dev) if config.flush_cache else None
        for dtype in config.dtypes:
            for shape in config.shapes:
                if should_stop is not None and should_stop():
                    finish(doc, "interrupted")
                    if out_path:
                        write_document(doc, out_path)
                    return doc
                times = time_matmul(shape, dtype, dev, config.iters, config.warmup_iters, flush)
                row = gemm_row(shape.m, shape.n, shape.k, dtype, dev, times, shape.label)
                doc["rows"].append(row)
                sink.row(row)
                if out_path:
                    write_document(doc, out_path)
        del flush
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()  # give the memory back before NCCL ranks start on the same GPUs
    finish(doc, "complete")
    if out_path:
        write_document(doc, out_path)
    sink.finish("complete", summary=doc["summary"])
    return doc
