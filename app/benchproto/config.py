"""Run configurations for the GEMM and collective sweeps, validated with every problem reported at once.

Pure: device counts are passed in, so validation is the same in the CLI, the agent and the tests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from app.benchproto.sizes import parse_size
from app.core.errors import ProblemCollector
from app.core.network import COLLECTIVE_OPS, normalise_op

COLLECTIVE_DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4}
GEMM_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
GROUP_MODES = ("all", "intra", "inter", "each")  # "each" = intra, inter and all, separately
BACKENDS = ("auto", "gloo", "nccl")
DEVICES = ("auto", "cpu", "cuda")
AVERAGE_MODES = ("avg", "min", "max", "rank0")
ACCELERATOR_WARMUP_S = (
    30.0  # mamf-finder's accelerator_warmup_seconds  # nccl-tests -a: how per-rank times are reduced
)


@dataclass(frozen=True)
class CollectiveConfig:
    ops: tuple[str, ...] = ("all_reduce",)
    min_bytes: int = 1024
    max_bytes: int = 16 * 2**20
    step_factor: float = 2.0
    step_bytes: int = 0
    iters: int = 20
    warmup_iters: int = 5
    dtype: str = "float32"
    backend: str = "auto"  # auto → nccl on CUDA, gloo on CPU
    device: str = "auto"
    groups: str = "all"
    ranks_per_node: int = 0  # 0 → torchrun's LOCAL_WORLD_SIZE; set to split one host into pretend nodes
    check: bool = True
    average: str = "avg"

    def __post_init__(self) -> None:
        # nccl-tests' own op names (alltoall_perf, sendrecv_perf, …) name the same collectives
        object.__setattr__(self, "ops", tuple(normalise_op(op) for op in self.ops))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ops"] = list(self.ops)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CollectiveConfig:
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        if "op" in data and "ops" not in data:
            kwargs["ops"] = data["op"]
        if isinstance(kwargs.get("ops"), str):
            kwargs["ops"] = tuple(o.strip() for o in kwargs["ops"].split(",") if o.strip())
        elif "ops" in kwargs:
            kwargs["ops"] = tuple(kwargs["ops"])
        for key in ("min_bytes", "max_bytes", "step_bytes"):
            if key in kwargs:
                kwargs[key] = parse_size(kwargs[key])
        for alias, key in (("minbytes", "min_bytes"), ("maxbytes", "max_bytes")):
            if alias in data:
                kwargs[key] = parse_size(data[alias])
        return cls(**kwargs)


def expand_ops(ops: tuple[str, ...]) -> tuple[str, ...]:
    if ops == ("all",):
        return COLLECTIVE_OPS
    return ops


def resolve_backend(config: CollectiveConfig, cuda_devices: int) -> tuple[str, str]:
    """(backend, device) after `auto`: NCCL on CUDA when GPUs exist, gloo on CPU otherwise."""
    device = config.device
    if device == "auto":
        device = (
            "cuda" if (config.backend == "nccl" or (config.backend == "auto" and cuda_devices)) else "cpu"
        )
    backend = config.backend
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    return backend, device


def validate_collectives(config: CollectiveConfig, nproc: int, cuda_devices: int) -> None:
    """Raise SpecError naming every problem: unknown op, min > max, NCCL without GPUs, too many ranks."""
    p = ProblemCollector()
    for op in expand_ops(config.ops):
        p.check(
            op in COLLECTIVE_OPS, "op", f"unknown collective {op!r}; choose from {', '.join(COLLECTIVE_OPS)}"
        )
    p.check(bool(config.ops), "op", "give at least one collective")
    p.check(config.min_bytes > 0, "minbytes", "must be > 0")
    p.check(
        config.max_bytes >= config.min_bytes,
        "maxbytes",
        f"maxbytes ({config.max_bytes}) is smaller than minbytes ({config.min_bytes})",
    )
    p.check(config.step_bytes > 0 or config.step_factor > 1, "stepfactor", "must be > 1")
    p.check(config.iters >= 1, "iters", "must be ≥ 1")
    p.check(config.warmup_iters >= 0, "warmup_iters", "must be ≥ 0")
    p.check(config.dtype in COLLECTIVE_DTYPES, "dtype", f"choose from {', '.join(COLLECTIVE_DTYPES)}")
    p.check(config.backend in BACKENDS, "backend", f"choose from {', '.join(BACKENDS)}")
    p.check(config.device in DEVICES, "device", f"choose from {', '.join(DEVICES)}")
    p.check(config.groups in GROUP_MODES, "groups", f"choose from {', '.join(GROUP_MODES)}")
    p.check(config.average in AVERAGE_MODES, "average", f"choose from {', '.join(AVERAGE_MODES)}")
    p.check(nproc >= 1, "nproc", "must be ≥ 1")
    p.check(config.ranks_per_node >= 0, "ranks_per_node", "must be ≥ 0")
    if config.backend in BACKENDS and config.device in DEVICES:
        backend, device = resolve_backend(config, cuda_devices)
        if backend == "nccl" and device != "cuda":
            p.add("backend", "NCCL needs CUDA tensors; use --device cuda or the gloo backend")
        if device == "cuda" and cuda_devices == 0:
            p.add(
                "device",
                "NCCL/CUDA requested but no CUDA GPU is visible on this node; use --device cpu (gloo)",
            )
        elif device == "cuda" and nproc > cuda_devices:
            p.add("nproc", f"{nproc} ranks requested but only {cuda_devices} CUDA device(s) on this node")
    p.raise_if_any()


@dataclass(frozen=True)
class GemmShape:
    m: int
    n: int
    k: int
    label: str = ""

    @property
    def flops(self) -> float:
        """2·m·n·k FLOP for C = A·B with A (m×k), B (k×n): one multiply and one add per term."""
        return 2.0 * self.m * self.n * self.k


@dataclass(frozen=True)
class GemmConfig:
    shapes: tuple[GemmShape, ...] = field(default_factory=tuple)
    dtypes: tuple[str, ...] = ("bf16",)
    device: str = "auto"
    iters: int = 50
    warmup_iters: int = 10
    flush_cache: bool = True
    flush_bytes: int = 256 * 2**20  # larger than any current GPU's L2 (H100: 50 MB) and most CPU LLCs
    check: bool = True  # verify one product per shape against the exact answer (`wrong`, app.bench.tolerance)
    # Seconds of the first shape before the sweep (mamf-finder: 30 s, "accelerator_warmup_seconds"); None: 30 on
    # a GPU, 0 on a CPU (no accelerator boost clock to settle)
    warmup_s: float | None = None

    def warm_up_seconds(self, device: str) -> float:
        if self.warmup_s is not None:
            return max(0.0, self.warmup_s)
        return ACCELERATOR_WARMUP_S if device.startswith("cuda") else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shapes"] = [asdict(s) for s in self.shapes]
        data["dtypes"] = list(self.dtypes)
        return data


def parse_shape_ranges(text: str) -> list[tuple[int, int, int]]:
    """mamf-finder style ranges: "M N K" triplets or "start:stop:step" per dimension; ';' separates triplets."""
    out: list[tuple[int, int, int]] = []
    for chunk in text.replace(",", " ").split(";"):
        parts = chunk.split()
        if not parts:
            continue
        if len(parts) == 1:
            parts = parts * 3
        if len(parts) != 3:
            raise ValueError(
                f"shape {chunk.strip()!r}: give M N K, one size, or start:stop:step per dimension"
            )
        dims = [_dim_values(p) for p in parts]
        out.extend((m, n, k) for m in dims[0] for n in dims[1] for k in dims[2])
    if not out:
        raise ValueError("no GEMM shapes given")
    return out


def _dim_values(text: str) -> list[int]:
    if ":" in text:
        fields_ = [int(x) for x in text.split(":")]
        start, stop = fields_[0], fields_[1]
        step = fields_[2] if len(fields_) > 2 else 1
        if step <= 0 or stop < start:
            raise ValueError(f"range {text!r}: need start ≤ stop and step > 0")
        return list(range(start, stop + 1, step))
    return [int(text)]


def validate_gemm(config: GemmConfig, cuda_devices: int, fp8_supported: bool = False) -> None:
    p = ProblemCollector()
    p.check(bool(config.shapes), "shapes", "give at least one shape")
    for i, shape in enumerate(config.shapes):
        p.check(min(shape.m, shape.n, shape.k) >= 1, f"shapes.{i}", "every dimension must be ≥ 1")
    for dtype in config.dtypes:
        p.check(
            dtype in GEMM_DTYPES, "dtype", f"unknown dtype {dtype!r}; choose from {', '.join(GEMM_DTYPES)}"
        )
    p.check(config.device in DEVICES, "device", f"choose from {', '.join(DEVICES)}")
    if config.device == "cuda" and cuda_devices == 0:
        p.add("device", "CUDA requested but no CUDA GPU is visible on this node; use --device cpu")
    if "fp8" in config.dtypes and not fp8_supported:
        p.add("dtype", "fp8 GEMM needs a GPU with FP8 tensor cores (compute capability ≥ 8.9)")
    if "fp8" in config.dtypes:
        for i, shape in enumerate(config.shapes):
            # torch._scaled_mm (cuBLASLt FP8) needs every dimension divisible by 16.
            if min(shape.m, shape.n, shape.k) >= 1 and (shape.m % 16 or shape.n % 16 or shape.k % 16):
                p.add(
                    f"shapes.{i}",
                    f"{shape.m}x{shape.n}x{shape.k}: fp8 GEMM dimensions must be multiples of 16",
                )
    p.check(config.iters >= 1, "iters", "must be ≥ 1")
    p.check(config.warmup_iters >= 0, "warmup_iters", "must be ≥ 0")
    p.raise_if_any()


# kernel name in reports -> torch SDPBackend member name; "auto" lets PyTorch choose (not used for calibration)
ATTENTION_SDPA_BACKENDS = {
    "flash-attention-2": "FLASH_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
    "auto": "",
}
ATTENTION_DTYPES = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class AttentionConfig:
    seq_lens: tuple[int, ...] = (1024, 4096, 16384)
    kernels: tuple[str, ...] = ("auto",)
    batch: int = 1
    heads: int = 16
    head_dim: int = 128
    dtype: str = "bf16"
    device: str = "auto"
    iters: int = 10
    warmup_iters: int = 3

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seq_lens"] = list(self.seq_lens)
        data["kernels"] = list(self.kernels)
        return data

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> AttentionConfig:
        """From a job's params (`{"seq_lens": [...], "kernels": [...], ...}`); unknown keys are ignored."""
        known = {f: params[f] for f in cls.__dataclass_fields__ if f in params}
        for name in ("seq_lens", "kernels"):
            if name in known:
                raw = known[name]
                known[name] = tuple(raw.split(",") if isinstance(raw, str) else raw)
        if "seq_lens" in known:
            known["seq_lens"] = tuple(int(s) for s in known["seq_lens"])
        return cls(**known)


def validate_attention(config: AttentionConfig, cuda_devices: int) -> None:
    p = ProblemCollector()
    p.check(bool(config.seq_lens), "seq_lens", "give at least one sequence length")
    for i, s in enumerate(config.seq_lens):
        p.check(s >= 1, f"seq_lens.{i}", "every sequence length must be ≥ 1")
    for kernel in config.kernels:
        p.check(
            kernel in ATTENTION_SDPA_BACKENDS,
            "kernel",
            f"unknown kernel {kernel!r}; choose from {', '.join(ATTENTION_SDPA_BACKENDS)}",
        )
    p.check(config.dtype in ATTENTION_DTYPES, "dtype", f"choose from {', '.join(ATTENTION_DTYPES)}")
    for name in ("batch", "heads", "head_dim", "iters"):
        p.check(getattr(config, name) >= 1, name, "must be ≥ 1")
    p.check(config.warmup_iters >= 0, "warmup_iters", "must be ≥ 0")
    p.check(config.device in ("auto", "cpu", "cuda"), "device", "choose from auto, cpu, cuda")
    if config.device == "cuda" and cuda_devices == 0:
        p.add("device", "CUDA requested but no CUDA GPU is visible on this node; use --device cpu")
    on_gpu = config.device == "cuda" or (config.device == "auto" and cuda_devices > 0)
    if not on_gpu:
        for kernel in config.kernels:
            if kernel == "cudnn":
                p.add(
                    "kernel", "cudnn attention runs on NVIDIA GPUs only; use auto, math or flash-attention-2"
                )
    p.raise_if_any()
