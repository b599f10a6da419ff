"""Compute dtypes below 16 bits: how their GEMM operands are stored and what quantizing them costs.

FP8 and NVFP4 are compute dtypes only. The weights stay 16-bit, the master weights and Adam moments fp32; what
changes is the tensor-core rate of the linear layers' GEMMs (forward, data gradient and weight gradient alike), the
casts that quantize every GEMM input and output gradient, and the size of the quantized copy a framework saves for
the backward pass. Attention runs in 16 bit under both recipes (Transformer Engine's FP8 and NVFP4 recipes quantize
the linear layers; its DotProductAttention stays BF16 unless FP8 attention is asked for separately).

Formats:
- FP8 (E4M3 / E5M2) with per-tensor scaling (delayed or current): 1 byte per element (Micikevicius et al. 2022,
  "FP8 Formats for Deep Learning", arXiv 2209.05433). MXFP8 adds one E8M0 scale per 32 elements (OCP Microscaling
  Formats v1.0, 2023), 3 % more, within this model's resolution.
- NVFP4: E2M1 elements in blocks of 16 sharing one E4M3 scale, plus one fp32 scale per tensor: 4.5 bits per
  element (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv 2509.25149, Sec. 2; NVIDIA technical blog
  "Introducing NVFP4", 2025). The training recipe of that paper runs all three GEMMs of each linear layer in NVFP4,
  applies 16×16 random Hadamard transforms to the weight-gradient inputs (fused into the cast kernel), scales the
  weights in 16×16 blocks and rounds gradients stochastically; Transformer Engine ships it as the
  NVFP4BlockScaling recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

# bytes a 16-bit activation or gradient occupies before it is quantized
SOURCE_BYTES = 2.0


@dataclass(frozen=True)
class QuantizedFormat:
    name: str
    element_bits: float
    block: int  # elements sharing one scale; 0 = one scale per tensor
    scale_bits: float

    @property
    def bytes_per_element(self) -> float:
        """Storage of one quantized element, its share of the block scale included."""
        per_block = self.scale_bits / self.block if self.block else 0.0
        return (self.element_bits + per_block) / 8.0

    @property
    def cast_bytes_per_element(self) -> float:
        """HBM traffic of quantizing one 16-bit element: read it, write the row-wise copy (the forward or data-
        gradient GEMM operand) and the column-wise copy (the transposed operand of the weight-gradient GEMM).
        Transformer Engine writes both in one kernel (TE docs, "FP8 primer"; the NVFP4 cast also applies the
        Hadamard transform there)."""
        return SOURCE_BYTES + 2.0 * self.bytes_per_element


FP8 = QuantizedFormat("fp8", element_bits=8.0, block=0, scale_bits=0.0)
NVFP4 = QuantizedFormat("nvfp4", element_bits=4.0, block=16, scale_bits=8.0)

# the format each quantized compute dtype trains with
QUANTIZED_FORMATS: dict[str, QuantizedFormat] = {"fp8": FP8, "fp4": NVFP4}
QUANTIZED_DTYPES: tuple[str, ...] = tuple(QUANTIZED_FORMATS)


def quantized_format(dtype: str) -> QuantizedFormat | None:
    """The quantized format of a compute dtype, None for a 16-bit one."""
    return QUANTIZED_FORMATS.get(dtype)


def cast_bytes_per_element(dtype: str) -> float:
    """HBM bytes per GEMM-input element spent quantizing it (0 for a 16-bit run)."""
    fmt = quantized_format(dtype)
    return fmt.cast_bytes_per_element if fmt is not None else 0.0
