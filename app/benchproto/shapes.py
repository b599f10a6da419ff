"""The GEMM shapes a model actually runs, per transformer layer, for a tensor-parallel degree.

Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv 1909.08053 §3): QKV and FFN-up are
column-parallel (output dimension split by tp), attention-out and FFN-down are row-parallel (input
dimension split by tp); the logits GEMM is split over the vocabulary. Each forward GEMM
C[m,n] = A[m,k]·B[k,n] has two backward GEMMs (Narayanan et al. 2021, arXiv 2104.04473 §5.1,
"backward is 2× forward"): data gradient dA = dC·Bᵀ (m×k from k=n) and weight gradient dB = Aᵀ·dC
(k×n from the token dimension m).
"""

from __future__ import annotations

from app.benchproto.config import GemmShape
from app.core.errors import ProblemCollector
from app.core.model import ModelSpec

DEFAULT_SWEEP = (256, 512, 1024, 2048, 4096, 8192)


def square_sweep(sizes: tuple[int, ...] = DEFAULT_SWEEP) -> list[GemmShape]:
    return [GemmShape(s, s, s, f"square-{s}") for s in sizes]


def _with_backward(shape: GemmShape) -> list[GemmShape]:
    return [
        GemmShape(shape.m, shape.n, shape.k, f"{shape.label}.fwd"),
        GemmShape(shape.m, shape.k, shape.n, f"{shape.label}.dgrad"),
        GemmShape(shape.k, shape.n, shape.m, f"{shape.label}.wgrad"),
    ]


def model_gemm_shapes(
    model: ModelSpec, tp: int = 1, micro_batch: int = 1, seq_len: int = 4096, backward: bool = True
) -> list[GemmShape]:
    """Per-layer GEMMs of `model` on one tensor-parallel rank (tokens = micro_batch × seq_len)."""
    p = ProblemCollector()
    p.check(tp >= 1, "tp", "must be ≥ 1")
    p.check(micro_batch >= 1, "micro_batch", "must be ≥ 1")
    p.check(seq_len >= 1, "seq_len", "must be ≥ 1")
    if tp >= 1:
        p.check(model.num_attention_heads % tp == 0, "tp", "must divide the number of attention heads")
        p.check(model.ffn_hidden_size % tp == 0, "tp", "must divide the FFN hidden size")
    p.raise_if_any()

    tokens = micro_batch * seq_len
    h = model.hidden_size
    d = model.effective_head_dim
    q_out = model.num_attention_heads * d
    kv_out = 2 * model.num_kv_heads * d
    up_factor = 2 if model.gated_ffn else 1
    forward = [
        GemmShape(tokens, (q_out + kv_out) // tp, h, "qkv"),
        GemmShape(tokens, h, q_out // tp, "attn_out"),
    ]
    if model.moe is None or model.moe.first_dense_layers > 0:
        forward += [
            GemmShape(tokens, up_factor * model.ffn_hidden_size // tp, h, "ffn_up"),
            GemmShape(tokens, h, model.ffn_hidden_size // tp, "ffn_down"),
        ]
    if model.moe is not None:
        # Balanced routing: every expert sees tokens × top-k / experts rows (GShard, arXiv 2006.16668 §2).
        expert_tokens = max(1, tokens * model.moe.experts_per_token // model.moe.num_experts)
        f = model.moe.expert_ffn_hidden_size
        forward += [
            GemmShape(expert_tokens, up_factor * f, h, "expert_up"),
            GemmShape(expert_tokens, h, f, "expert_down"),
        ]
    forward.append(GemmShape(tokens, -(-model.vocab_size // tp), h, "logits"))
    if not backward:
        return forward
    return [s for shape in forward for s in _with_backward(shape)]
