"""How far a checked result may differ from the exact answer before its element counts as wrong (`#wrong`).

Pure (no torch): the runners ask it for an absolute tolerance per element.

The check data are small integers, chosen so that the exact answer is known and, in the usual case, every
intermediate result is exact too:

- A binary floating-point format with p significand bits represents every integer of magnitude ≤ 2^p exactly
  (IEEE 754-2019 §3.3; Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, §2.1), and the
  sum of two such integers is computed exactly when it is ≤ 2^p. So while every partial sum of a reduction stays
  ≤ 2^p, the result is bit-exact whatever order the ranks add in (ring, tree, NVLS), and the tolerance is 0: a
  single changed element — a 0.5 % corruption, or one flipped low mantissa bit — is caught.
- Beyond that, the sum of n terms in any order is within γ_n · Σ|x_i| of the exact sum, γ_n = n·u / (1 − n·u),
  u = 2^−p the unit roundoff (Higham §4.2, eq. 4.4 with n − 1 additions, plus the rounding of each input to the
  dtype: γ_n in all).

Unit roundoffs u = 2^−p: float64 p = 53, float32 p = 24, float16 p = 11 (IEEE 754-2019 Table 3.5); bfloat16
p = 8 (Kalamkar et al., "A Study of BFLOAT16 for Deep Learning Training", 2019, §2); TF32 p = 11 (NVIDIA A100
Tensor Core GPU Architecture whitepaper, 2020: "10 bits of mantissa"); integers are exact.

A GEMM check multiplies operands drawn from {−1, 0, 1} (exact in every format, fp8 E4M3 included), so every
product is exact and every partial sum is an integer of magnitude ≤ k: with an accumulator of p_acc bits the
dot product is exact while k ≤ 2^p_acc, and the one rounding left is the output's, which the expected value
makes too (it is the exact product rounded to the output dtype): tolerance 0. Accumulators: fp32 for fp32, tf32,
bf16 and fp16 inputs (cuBLAS CUBLAS_COMPUTE_32F, which PyTorch uses for 16-bit GEMMs; the check turns off
PyTorch's reduced-precision split-K reduction for its one call); FP8 GEMMs on Hopper accumulate in about 14 bits
(DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, §3.3.2). Beyond 2^p_acc the dot-product bound
γ_k · Σ|a||b| (Higham §3.1, eq. 3.5) plus the output rounding u_out · |c| applies.
"""

from __future__ import annotations

SIGNIFICAND_BITS = {
    "float64": 53,
    "float32": 24,
    "fp32": 24,
    "tf32": 11,
    "float16": 11,
    "fp16": 11,
    "bfloat16": 8,
    "bf16": 8,
    "fp8": 4,  # E4M3: 3 stored mantissa bits + the implicit one (OCP 8-bit floating point spec, 2023)
}
INTEGER_DTYPES = ("int32", "int64")
# Bits of the accumulator a GEMM of each input dtype sums its products in (sources in the module docstring).
GEMM_ACCUMULATOR_BITS = {"fp32": 24, "tf32": 24, "bf16": 24, "fp16": 24, "fp8": 14}
# The dtype a GEMM of each input dtype writes (fp8 via torch._scaled_mm with out_dtype=bfloat16).
GEMM_OUTPUT_DTYPE = {"fp32": "fp32", "tf32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "bf16"}


def unit_roundoff(dtype: str) -> float:
    """u = 2^−p; 0 for integer dtypes (exact until they overflow)."""
    if dtype in INTEGER_DTYPES:
        return 0.0
    return 2.0 ** -SIGNIFICAND_BITS[dtype]


def gamma(terms: int, u: float) -> float:
    """γ_n = n·u / (1 − n·u) (Higham §3.1, Lemma 3.1); infinite where the bound breaks down (n·u ≥ 1)."""
    nu = terms * u
    return nu / (1.0 - nu) if nu < 1.0 else float("inf")


def exact_integers_up_to(dtype: str) -> float:
    """The largest magnitude below which every integer, and every sum of two of them, is exact."""
    if dtype in INTEGER_DTYPES:
        return float(2**31 - 1)
    return float(2 ** SIGNIFICAND_BITS[dtype])


def reduction_tolerance(
    dtype: str, terms: int, largest_partial_sum: float, sum_of_magnitudes: float
) -> float:
    """Absolute tolerance of a sum of `terms` integer inputs computed in `dtype`, in any order."""
    if largest_partial_sum <= exact_integers_up_to(dtype):
        return 0.0
    return gamma(terms, unit_roundoff(dtype)) * sum_of_magnitudes


def gemm_tolerance_terms(dtype: str, k: int) -> tuple[float, float]:
    """(coefficient of Σ|a||b|, coefficient of |c|) of the absolute tolerance of one element of a GEMM of
    {−1, 0, 1} operands against the exact product rounded to the output dtype: (0, 0) while the dot product
    is exact (k ≤ 2^p_acc), else the dot-product bound γ_k and the output rounding u_out."""
    if k <= 2 ** GEMM_ACCUMULATOR_BITS[dtype]:
        return 0.0, 0.0
    return gamma(k, 2.0 ** -GEMM_ACCUMULATOR_BITS[dtype]), unit_roundoff(GEMM_OUTPUT_DTYPE[dtype])
