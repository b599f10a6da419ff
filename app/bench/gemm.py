"""Maximum-achievable-matmul sweep (after mamf-finder, github.com/stas00/ml-engineering compute/accelerator/benchmarks).

Per shape and dtype: warm-up iterations, then timed iterations each preceded by a cache flush (writing a
buffer larger than the last-level cache, so every matmul reads its operands from memory, as in training);
CUDA events around each matmul on GPU, the monotonic clock on CPU (where the matmul is synchronous).
Reports best / median / mean TFLOP/s per shape and the maximum per dtype. After timing, one product of
{−1, 0, 1} operands is checked against the exact answer (`wrong`, as nccl-tests' #wrong; app.bench.tolerance):
a run with any wrong element is "failed".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from app.bench.environment import collect_environment, cuda_device_count, fp8_supported
from app.bench.progress import ProgressSink
from app.bench.tolerance import gemm_tolerance_terms
from app.benchproto.config import GemmConfig, GemmShape, validate_gemm
from app.benchproto.schema import finish, gemm_row, new_document, write_document

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


def multiply(a: torch.Tensor, b: torch.Tensor, dtype: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """The one GEMM call the sweep times and the check verifies (fp8 through torch._scaled_mm, bf16 out)."""
    if dtype == "fp8":
        scale = torch.ones((), device=a.device)
        return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
    return torch.matmul(a, b, out=out)


def _operands(a: torch.Tensor, b: torch.Tensor, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A (m×k) and B (k×n) in the GEMM's dtype; fp8 wants B column-major (_scaled_mm's layout)."""
    if dtype == "fp8":
        f8 = torch.float8_e4m3fn
        return a.float().to(f8), b.float().t().contiguous().to(f8).t()
    return a.to(TORCH_DTYPES[dtype]), b.to(TORCH_DTYPES[dtype])


class _Matmul:
    """One shape/dtype's random operands and the call that multiplies them.

    `refill()` copies a random matrix into C before each timed call, as mamf-finder does ("to ensure that C
    gets actually written to, as otherwise the rerun results will be always the same and no power will be
    drawn to write"): the product then changes memory every time, as in training."""

    def __init__(self, shape: GemmShape, dtype: str, device: str) -> None:
        self.a, self.b = _operands(
            torch.randn(shape.m, shape.k, device=device), torch.randn(shape.k, shape.n, device=device), dtype
        )
        self.c = None if dtype == "fp8" else torch.empty(shape.m, shape.n, device=device, dtype=self.a.dtype)
        self.c_rand = (
            None if self.c is None else torch.randn(shape.m, shape.n, device=device).to(self.c.dtype)
        )
        self.call: Callable[[], Any] = lambda: multiply(self.a, self.b, dtype, self.c)

    def refill(self) -> None:
        if self.c is not None and self.c_rand is not None:
            self.c.copy_(self.c_rand)


CHECK_ROWS = 128  # rows of C compared with the exact product (evenly spaced, first and last included)


def check_matmul(shape: GemmShape, dtype: str, device: str) -> int:
    """Multiply {−1, 0, 1} operands once; count the elements of CHECK_ROWS rows of C that differ from the
    exact product (float64) rounded to the output dtype by more than app.bench.tolerance allows."""
    a_int = torch.randint(-1, 2, (shape.m, shape.k), dtype=torch.int8, device=device)
    b_int = torch.randint(-1, 2, (shape.k, shape.n), dtype=torch.int8, device=device)
    a, b = _operands(a_int, b_int, dtype)
    with _full_precision_reduction(device):
        c = multiply(a, b, dtype)
    rows = torch.linspace(0, shape.m - 1, min(shape.m, CHECK_ROWS), device=device).round().long().unique()
    exact = a_int[rows].double() @ b_int.double()
    expected = exact.to(c.dtype).double()
    on_sums, on_result = gemm_tolerance_terms(dtype, shape.k)
    tolerance = on_result * exact.abs()
    if on_sums:
        tolerance += on_sums * (a_int[rows].double().abs() @ b_int.double().abs())
    within = (c[rows].double() - expected).abs() <= tolerance  # NaN is never within
    return int((~within).sum().item())


class _full_precision_reduction:
    """PyTorch lets cuBLAS reduce split-K partial sums of 16-bit GEMMs in 16 bits by default
    (torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction); the check's one call turns
    that off so its exactness argument (fp32 accumulation) holds."""

    def __init__(self, device: str) -> None:
        self.on_cuda = device.startswith("cuda")
        self.saved: tuple[bool, bool] = (False, False)

    def __enter__(self) -> None:
        if self.on_cuda:
            mm = torch.backends.cuda.matmul
            self.saved = (
                mm.allow_fp16_reduced_precision_reduction,
                mm.allow_bf16_reduced_precision_reduction,
            )
            mm.allow_fp16_reduced_precision_reduction = False
            mm.allow_bf16_reduced_precision_reduction = False

    def __exit__(self, *_exc: object) -> None:
        if self.on_cuda:
            mm = torch.backends.cuda.matmul
            mm.allow_fp16_reduced_precision_reduction, mm.allow_bf16_reduced_precision_reduction = self.saved


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
            mm.refill()
            if flush is not None:
                flush.zero_()
            starts[i].record()
            mm.call()
            ends[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]
    else:
        for _ in range(iters):
            mm.refill()
            if flush is not None:
                flush.zero_()
            t0 = time.perf_counter_ns()
            mm.call()
            times.append((time.perf_counter_ns() - t0) / 1e9)
    return times


def accelerator_warm_up(
    shape: GemmShape,
    dtype: str,
    device: str,
    seconds: float,
    iters: int,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run the first shape for `seconds` before the sweep and return the rounds run. mamf-finder does this for
    30 s: "a cold accelerator gives a higher score on say a single shape, than the same shape run after a dozen
    of other shapes" (boost clocks before the power and thermal limits settle)."""
    rounds = 0
    end = clock() + seconds
    while clock() < end:
        time_matmul(shape, dtype, device, iters, 0, None)
        rounds += 1
    return rounds


def run_gemm(
    config: GemmConfig,
    sink: ProgressSink | None = None,
    out_path: str | None = None,
    argv: list[str] | None = None,
    all_devices: bool = False,
    should_stop: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
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
        warm_s = config.warm_up_seconds(dev)
        if warm_s > 0 and config.shapes:
            first = config.shapes[0]
            rounds = accelerator_warm_up(first, config.dtypes[0], dev, warm_s, config.iters, clock)
            sink.log(
                f"accelerator warm-up on {dev}: {rounds} rounds of {first.m}x{first.n}x{first.k} in {warm_s:g} s"
            )
        for dtype in config.dtypes:
            for shape in config.shapes:
                if should_stop is not None and should_stop():
                    finish(doc, "interrupted")
                    if out_path:
                        write_document(doc, out_path)
                    return doc
                times = time_matmul(shape, dtype, dev, config.iters, config.warmup_iters, flush)
                wrong = check_matmul(shape, dtype, dev) if config.check else None
                row = gemm_row(shape.m, shape.n, shape.k, dtype, dev, times, shape.label, wrong)
                doc["rows"].append(row)
                sink.row(row)
                if out_path:
                    write_document(doc, out_path)
        del flush
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()  # give the memory back before NCCL ranks start on the same GPUs
    finish(doc, "complete")  # "failed" when any element was wrong
    if out_path:
        write_document(doc, out_path)
    sink.finish(doc["status"], summary=doc["summary"], error=doc.get("error", ""))
    return doc
