"""Achievable throughput curves: GEMM efficiency by problem size, and the hardware profile calibration produces.

A GEMM of shape (m, n, k) does 2·m·n·k FLOPs and moves at least 2·(m·k + k·n + m·n) bytes in 16-bit, so its
arithmetic intensity is I = m·n·k / (m·k + k·n + m·n) = 1 / (1/m + 1/n + 1/k) FLOP per element. Small or skinny
GEMMs (low I) reach a smaller share of peak: tile quantisation, wave quantisation and the memory roofline all
scale with it (Williams et al. 2009, "Roofline", CACM 52(4); NVIDIA "Matrix Multiplication Background User's
Guide", docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication). The curve is

    achievable(I) = max_flops · I / (I + half_intensity)

with `max_flops` chosen so the curve passes through the catalog's measured best matmul TFLOP/s (mamf-finder,
stas00/ml-engineering compute/accelerator/README.md), derated to sustained load (SUSTAINED_FRACTION), at the large
square shape those sweeps peak on.
On top of that smooth curve, a GPU with a known SM count gets tile and wave quantisation: the GEMM's output is
cut into tiles of TILE_M × TILE_N (either orientation, the better of the two, as cuBLAS/CUTLASS heuristics pick a
tile shape per problem), each SM computes one tile at a time, so a GEMM takes ceil(tiles / SMs) full waves and
the SMs idle on the padding of the last row/column of tiles and on the unfilled part of the last wave (NVIDIA
"Matrix Multiplication Background User's Guide", sections "Tile quantization" and "Wave quantization";
CUTLASS's default Hopper/Ampere 16-bit tile is 128 × 256 × 64, NVIDIA/cutlass media/docs/efficient_gemm.md).
The curve is normalised so the reference shape keeps its measured throughput.
Every function here accepts numpy arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from app.core.hardware import GPUSpec
from app.core.num import Num
from app.core.precision import QUANTIZED_DTYPES

if TYPE_CHECKING:
    from app.core.network import NetworkParams

# Intensity at which a GEMM reaches half of its asymptotic throughput, as a multiple of the GPU's roofline
# ridge point (dense 16-bit peak FLOP/s ÷ HBM bytes/s, Williams et al. 2009): faster tensor cores over the same
# memory need larger tiles and larger problems to saturate. One global constant, chosen against the training-run
# validation set (docs/validation_training_runs.md). For 1-byte FP8 operands the ridge in FLOP per element is
# the same as for BF16 (twice the FLOP/s over half the bytes), so the same half-intensity applies.
RIDGE_FACTOR = 0.25
DEFAULT_HALF_INTENSITY = 40.0  # used when a GPU has no HBM bandwidth (≈ RIDGE_FACTOR × the A100 ridge point)

# mamf-finder reports its best over shapes up to ~16k (ml-engineering, compute/accelerator/benchmarks);
# a 8192³ GEMM has I = 8192/3.
REFERENCE_INTENSITY = 8192.0 / 3.0

# Output tile of one SM's GEMM work unit (CUTLASS default 16-bit tile on Ampere/Hopper, 128 × 256; cuBLAS picks
# between orientations per shape). Used only where the GPU's SM count is known.
TILE_M, TILE_N = 128, 256
REFERENCE_SIZE = 8192.0  # the square GEMM edge behind REFERENCE_INTENSITY


def quantisation_efficiency(m: Num, n: Num, sm_count: int, batch: Num = 1.0) -> Num:
    """Useful share of the SM-time a GEMM of `batch` × (m × n) outputs occupies: tile padding × partial last
    wave (NVIDIA "Matrix Multiplication Background User's Guide"). 1.0 when the SM count is unknown."""
    if sm_count <= 0:
        return np.ones(np.broadcast(np.asarray(m), np.asarray(n), np.asarray(batch)).shape)
    m_ = np.maximum(np.asarray(m, dtype=float), 1.0)
    n_ = np.maximum(np.asarray(n, dtype=float), 1.0)
    b_ = np.maximum(np.asarray(batch, dtype=float), 1.0)
    best = None
    for tm, tn in ((TILE_M, TILE_N), (TILE_N, TILE_M)):
        tiles = np.ceil(m_ / tm) * np.ceil(n_ / tn) * np.ceil(b_)
        waves = np.ceil(tiles / sm_count)
        eff = (m_ * n_ * b_) / (waves * sm_count * tm * tn)
        best = eff if best is None else np.maximum(best, eff)
    return cast(Num, best)  # set by both orientations


# When a GPU has no measured matmul figure: fraction of dense peak that large BF16 GEMMs reach.
# Median of the measured/peak ratios in the catalog (A100 86.9 %, H100 80.3 %, B200 77.6 %, MI300X 51 %).
DEFAULT_MEASURED_FRACTION = 0.80

# NVFP4 GEMMs without a measurement: the share of dense FP4 peak is this fraction of the share the part's BF16 GEMMs
# reach of theirs (block-scaled tensor-core MMAs load an E4M3 scale per 16 elements of each operand). No published
# NVFP4 matmul benchmark was found; the constant is the one global choice made on the four NVFP4 runs of
# Megatron-Bridge's 26.02 table (tests/data/training_runs_nvfp4.csv: MAPE of those runs 10.4 % at 1.0, 5.5 % at 0.8,
# the optimum of 0.6-1.0 in steps of 0.05) and checked on the four of its 26.02.01 table
# (tests/data/training_runs_megatron_bridge_2602_01.csv: 17.3 → 7.3 %); docs/constants.md#fp4-gemm-share.
# A measured FP4 matmul in the catalog (measured_matmul_tflops: {fp4: …}) or a calibration profile replaces it
FP4_GEMM_SHARE = 0.80


# Training runs for minutes at the power limit; mamf-finder's figures are a short loop of one GEMM. Share of the
# measured best kept under sustained load (power/thermal clock throttling), one global constant chosen against the
# validation set (docs/validation_training_runs.md).
SUSTAINED_FRACTION = 0.85


# Power-capped operation (nvidia-smi -pl, or a part sold with a lower power limit than the die's design power).
# Tensor-core throughput follows the SM clock. Dynamic CMOS power is P ∝ C·V²·f and over the DVFS range the
# voltage rises about linearly with the clock, so the clock-dependent power grows as f³ (Hennessy & Patterson,
# "Computer Architecture", 6th ed., Sec. 1.5, "Trends in power and energy"). Part of the board power does not
# follow the SM clock (HBM, I/O, leakage); NON_CLOCK_POWER_FRACTION of the design power, an estimate from
# H100/A100 idle-to-TDP ratios (~10-15 %) plus HBM power under load. Under a limit below the design power the
# clock settles where the two add up to the limit. Memory-bound kernels keep their speed (the HBM clock is not
# capped).
NON_CLOCK_POWER_FRACTION = 0.25


def power_capped_clock_fraction(design_power_w: float, power_limit_w: float | None) -> float:
    """Share of the full-power SM clock a GEMM-bound workload sustains under `power_limit_w` (1.0 if none)."""
    if not power_limit_w or design_power_w <= 0 or power_limit_w >= design_power_w:
        return 1.0
    fixed = NON_CLOCK_POWER_FRACTION * design_power_w
    return float(max(0.0, (power_limit_w - fixed) / (design_power_w - fixed)) ** (1.0 / 3.0))


def measured_matmul_flops(gpu: GPUSpec, dtype: str, sustained: bool = True) -> float:
    """Best measured GEMM FLOP/s for a compute dtype (derated to sustained load unless `sustained=False`, the
    burst figure a GEMM micro-benchmark sees); falls back to a share of dense peak."""
    return _measured(gpu, dtype) * (SUSTAINED_FRACTION if sustained else 1.0)


def _measured(gpu: GPUSpec, dtype: str) -> float:
    key = "bf16" if dtype == "fp16" else dtype
    measured = gpu.measured_matmul_flops.get(key) or gpu.measured_matmul_flops.get(dtype)
    if measured and dtype == "fp16":
        # the 16-bit measurement is taken as bf16's (the same tensor-core rate on NVIDIA and AMD parts), but a part
        # whose FP16 matrix peak is below its BF16 one (Gaudi 3's MME: 459 vs 1677 TFLOP/s) runs FP16 GEMMs that
        # much slower: scale by the ratio of the datasheet peaks
        return float(measured) * min(1.0, gpu.peak("fp16") / gpu.peak("bf16"))
    if measured:
        return float(measured)
    if key in QUANTIZED_DTYPES:
        # no measurement at this precision: its dense peak at the share of peak the part's measured BF16 GEMMs
        # reach (the same tensor cores and memory system at a narrower operand)
        bf16 = gpu.measured_matmul_flops.get("bf16")
        ratio = (bf16 / gpu.peak("bf16")) if bf16 else DEFAULT_MEASURED_FRACTION
        if key == "fp4":
            ratio *= FP4_GEMM_SHARE
        return float(gpu.peak(key) * ratio)
    return float(gpu.peak(dtype if dtype == "fp16" else key) * DEFAULT_MEASURED_FRACTION)


def half_intensity_for(gpu: GPUSpec) -> float:
    """RIDGE_FACTOR × the 16-bit roofline ridge point (FLOP per byte) of this GPU."""
    bw = gpu.hbm_bandwidth_bytes_per_s
    if bw <= 0:
        return DEFAULT_HALF_INTENSITY
    return RIDGE_FACTOR * gpu.peak("bf16") / bw


@dataclass(frozen=True)
class GemmEfficiency:
    """GEMM throughput curve of one GPU and dtype: achievable(I) = max_flops · I / (I + half_intensity)."""

    max_flops: float  # asymptotic FLOP/s (above the measured best, which sits at finite I)
    half_intensity: float = DEFAULT_HALF_INTENSITY
    dtype: str = "bf16"
    source: str = ""
    sm_count: int = 0  # > 0: tile and wave quantisation on top of the curve (quantisation_efficiency)

    @classmethod
    def from_measured(
        cls,
        measured_flops: float,
        dtype: str = "bf16",
        half_intensity: float = DEFAULT_HALF_INTENSITY,
        reference_intensity: float = REFERENCE_INTENSITY,
        source: str = "",
        sm_count: int = 0,
    ) -> GemmEfficiency:
        saturation = reference_intensity / (reference_intensity + half_intensity)
        saturation *= float(quantisation_efficiency(REFERENCE_SIZE, REFERENCE_SIZE, sm_count))
        return cls(measured_flops / saturation, half_intensity, dtype, source, sm_count)

    @classmethod
    def for_gpu(
        cls, gpu: GPUSpec, dtype: str = "bf16", sustained: bool = True, wave_quantisation: bool = False
    ) -> GemmEfficiency:
        """Default curve from the catalog; `sustained=False` gives the burst curve a GEMM benchmark measures.

        `wave_quantisation=True` adds tile/wave quantisation from the GPU's SM count on top of the smooth curve.
        It is off by default: the curve's half-intensity was set with it off and already absorbs the average
        quantisation loss, and with it on the training-run validation gets worse (docs/validation_training_runs.md,
        "Wave quantisation"), so it stays an explicit choice."""
        measured = measured_matmul_flops(gpu, dtype, sustained)
        src = "catalog measured matmul" if gpu.measured_matmul_flops else "fraction of dense peak"
        return cls.from_measured(
            measured,
            dtype,
            half_intensity=half_intensity_for(gpu),
            source=f"{gpu.name} {dtype}: {src}",
            sm_count=gpu.sm_count if wave_quantisation else 0,
        )

    def intensity(self, m: Num, n: Num, k: Num) -> Num:
        return 1.0 / (
            1.0 / np.asarray(m, dtype=float)
            + 1.0 / np.asarray(n, dtype=float)
            + 1.0 / np.asarray(k, dtype=float)
        )

    def flops_per_s(self, m: Num, n: Num, k: Num, batch: Num = 1.0) -> Num:
        """Throughput of `batch` independent GEMMs (m, n, k) run as one batched kernel."""
        i = self.intensity(m, n, k)
        rate = self.max_flops * i / (i + self.half_intensity)
        if self.sm_count > 0:
            rate = rate * quantisation_efficiency(m, n, self.sm_count, batch)
        return rate

    def time_s(self, m: Num, n: Num, k: Num, batch: Num = 1) -> Num:
        """Seconds for `batch` GEMMs of shape (m, n, k)."""
        flops = 2.0 * np.asarray(m, dtype=float) * n * k * batch
        return flops / self.flops_per_s(m, n, k, batch)

    def derated(self, fraction: float) -> GemmEfficiency:
        """The same curve scaled to `fraction` of its throughput (sustained load)."""
        return replace(self, max_flops=self.max_flops * fraction)

    def to_dict(self) -> dict[str, Any]:  # Any: JSON values
        return asdict(self)


@dataclass(frozen=True)
class HardwareProfile:
    """What a calibration run produces: a fitted GEMM curve, α/β network parameters (either may be None) and the
    measured fused-attention kernels (kernel → forward, backward share of the GPU's dense 16-bit peak at long
    sequence; app.core.attention uses them in place of the published micro-benchmarks)."""

    gemm: GemmEfficiency | None = None
    network: NetworkParams | None = None  # calibrated α/β per tier, None → defaults
    name: str = "defaults"
    version: str = "1"
    attention: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # what the profile was measured on: the GPU it was fitted for, every dtype with a GEMM fit (`gemm` is the
    # primary one), the fabric of its network fit and "cpu" when the benchmark ran on CPU (gloo)
    gpu: str = ""
    gemms: Mapping[str, GemmEfficiency] = field(default_factory=dict)
    fabric: str = ""
    measured_on: str = ""

    @property
    def label(self) -> str:
        return f"profile {self.name} v{self.version}"

    def gemm_for(self, dtype: str) -> GemmEfficiency | None:
        """The fitted GEMM curve for `dtype`, None when the profile has none."""
        if dtype in self.gemms:
            return self.gemms[dtype]
        return self.gemm if self.gemm is not None and self.gemm.dtype == dtype else None

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.gemms) | ({self.gemm.dtype} if self.gemm is not None else set())))


def profile_use_warnings(profile: HardwareProfile | None, dtype: str, fabric: str = "") -> list[str]:
    """What an estimate should say about using `profile` for a `dtype` run on `fabric`: a profile measured on
    CPU, a dtype without a GEMM fit (its curve falls back to the catalog), a network fitted on another fabric."""
    if profile is None:
        return []
    out: list[str] = []
    if profile.measured_on == "cpu":
        out.append(
            f"{profile.label} was measured on CPU (gloo): its curves describe that CPU, not a {profile.gpu or 'GPU'}"
        )
    have = profile.dtypes
    if have:
        missing = [] if {"bf16", "fp16"} & set(have) else ["bf16"]
        if dtype in QUANTIZED_DTYPES and dtype not in have:
            missing.append(dtype)
        if missing:
            out.append(
                f"{profile.label} has no {'/'.join(missing)} GEMM fit (it has {', '.join(have)}): the "
                f"{'/'.join(missing)} rate is the catalog default"
            )
    if profile.network is not None and profile.fabric and fabric and profile.fabric != fabric:
        out.append(
            f"{profile.label} fitted its network on {profile.fabric}; this cluster uses {fabric}: the fitted "
            "α/β may not describe it"
        )
    return out


def training_curves(
    gpu: GPUSpec, dtype: str, profile: HardwareProfile | None = None, power_limit_w: float | None = None
) -> tuple[GemmEfficiency, GemmEfficiency]:
    """(linear-layer curve, 16-bit curve for attention) a training estimate uses.

    Catalog defaults are derated to sustained load; a calibrated profile's curve comes from the same kind of
    short GEMM benchmark, so it is derated by the same SUSTAINED_FRACTION. FP8 without a calibrated FP8 curve
    uses the catalog's measured FP8 matmul with the 16-bit curve's half-intensity. A power limit below the
    die's design power (`gpu.full_power_w`) lowers the clock of both curves (power_capped_clock_fraction); a
    part whose own limit (`gpu.tdp_w`) is below its die's design power runs capped without an explicit limit.
    A profile calibrated on the capped machine already carries the cap, so pass no limit with it.
    """
    linear, attn = _training_curves(gpu, dtype, profile)
    clock = operating_clock_fraction(
        gpu, power_limit_w, calibrated=profile is not None and profile.gemm is not None
    )
    if clock < 1.0:
        return linear.derated(clock), attn.derated(clock)
    return linear, attn


def operating_clock_fraction(gpu: GPUSpec, power_limit_w: float | None, calibrated: bool = False) -> float:
    """Share of the full-power SM clock at the operating limit: `power_limit_w`, else the part's own `tdp_w`
    (a calibrated curve was measured at the part's own limit, so only an explicit limit derates it)."""
    limit = power_limit_w if (power_limit_w or calibrated) else gpu.tdp_w
    return power_capped_clock_fraction(gpu.full_power_w, limit)


def fp4_rate_assumed(gpu: GPUSpec, profile: HardwareProfile | None) -> bool:
    """True when an NVFP4 estimate's GEMM rate rests on FP4_GEMM_SHARE: no FP4 matmul measured for `gpu`, in the
    catalog or in the calibration profile."""
    return "fp4" not in gpu.measured_matmul_flops and not (profile is not None and profile.gemm_for("fp4"))


def _training_curves(
    gpu: GPUSpec, dtype: str, profile: HardwareProfile | None
) -> tuple[GemmEfficiency, GemmEfficiency]:
    # the 16-bit curve: FP16's for an fp16 run (on most parts the same as BF16's), BF16's otherwise
    bf16 = GemmEfficiency.for_gpu(gpu, "fp16" if dtype == "fp16" else "bf16")
    if profile is not None:
        sixteen = profile.gemm_for("fp16" if dtype == "fp16" else "bf16") or profile.gemm_for(
            "bf16" if dtype == "fp16" else "fp16"
        )
        if sixteen is not None:
            bf16 = sixteen.derated(SUSTAINED_FRACTION)
    fitted = profile.gemm_for(dtype) if profile is not None and dtype in QUANTIZED_DTYPES else None
    linear = bf16
    if dtype in QUANTIZED_DTYPES:
        if fitted is not None:
            linear = fitted.derated(SUSTAINED_FRACTION)
        else:
            if dtype in gpu.measured_matmul_flops:
                source = f"{gpu.name} {dtype} measured matmul"
            elif gpu.measured_matmul_flops.get("bf16"):
                share = gpu.measured_matmul_flops["bf16"] / gpu.peak("bf16")
                source = f"{gpu.name} dense {dtype} peak × its measured BF16 share of peak ({share:.0%})"
            else:
                source = (
                    f"{gpu.name} dense {dtype} peak × {DEFAULT_MEASURED_FRACTION:.0%} (no measured matmul for this "
                    "part: the catalog's median measured share of peak)"
                )
            if dtype == "fp4" and fp4_rate_assumed(gpu, profile):
                source += f" × {FP4_GEMM_SHARE:g} for NVFP4's block scales (efficiency.FP4_GEMM_SHARE)"
            linear = GemmEfficiency.from_measured(
                measured_matmul_flops(gpu, dtype),
                dtype,
                half_intensity=bf16.half_intensity,
                source=source,
                sm_count=bf16.sm_count,
            )
    return linear, bf16
