"""The seed article's memory formula beside the estimator's breakdown, term by term.

The article that motivated the project (docs/cost.md, "The seed article's claims") sizes a parallel layout with

    param_memory = model_size * 2          # fp16 weights
    optimizer_memory = model_size * 4      # adam states
    gradient_memory = model_size * 2       # fp16 grads
    per_gpu_* = *_memory / tp_size
    activation_memory = model_size * 12 / (tp_size * pp_size)   # rough estimate

in GB for `model_size` in billions of parameters, and prints it for a 70B model on 64 GPUs at TP=8 PP=4 and at
TP=4 PP=8. `naive_terms` is that formula as written; `compare` puts it beside the estimator's most loaded
pipeline stage for the same layouts of a 70B model in the catalog (the scenario below states every other choice),
and says, per term, why the two differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.services.estimate import parse_scenario, run

GB = 1e9
# the article's two layouts of a 70B model on 64 GPUs: (tp, pp)
ARTICLE_LAYOUTS = ((8, 4), (4, 8))
ARTICLE_MODEL_B = 70.0
ARTICLE_GPUS = 64
# what the article leaves open, stated: a 70B catalog model at its own context length, one sequence per
# micro-batch, 64 sequences per step, and Megatron-core's defaults for everything else (distributed optimizer,
# fp32 main gradients, 1F1B, no recompute, no sequence parallelism), on DGX H100 nodes
SCENARIO: dict[str, Any] = {
    "model": "Llama-2-70B",
    "cluster": {"gpu": "H100-SXM", "nodes": 8, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
    "training": {"seq_len": 4096},
    "framework": "megatron-core",
}
GLOBAL_BATCH = 64

# the estimator's memory components, grouped as the article's terms
TERMS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "weights",
        ("weights",),
        "the article divides by TP only; a pipeline stage holds 1/PP of the layers too (and the embedding or the "
        "LM head on an end stage)",
    ),
    (
        "gradients",
        ("gradients",),
        "÷ PP as for the weights; Megatron-core keeps fp32 main gradients (4 B, not 2) for bf16 training",
    ),
    (
        "optimizer",
        ("master_weights", "optimizer_states"),
        "Adam keeps an fp32 master copy and two fp32 moments, 12 B per parameter (not 4), ÷ PP, and the "
        "distributed optimizer shards them over the data-parallel ranks (ZeRO-1)",
    ),
    (
        "activations",
        ("activations", "logits"),
        "not a multiple of the parameter count: tokens per micro-batch × hidden size per layer, ÷ TP for the "
        "tensor-parallel parts only (without sequence parallelism, Megatron-core's default, the norms' and "
        "residuals' inputs are whole on every TP rank), × the micro-batches a 1F1B stage holds in flight (PP on "
        "the first stage)",
    ),
    (
        "other",
        ("workspace", "comm_buffers", "fragmentation", "cuda_context", "nccl_buffers"),
        "left out by the article: kernel workspace, communication buffers, the allocator's reserve, the CUDA "
        "context and NCCL's buffers",
    ),
)


def naive_terms(model_b: float, tp: int, pp: int) -> dict[str, float]:
    """The article's formula as written (GB per GPU), by term."""
    return {
        "weights": model_b * 2 / tp,
        "gradients": model_b * 2 / tp,
        "optimizer": model_b * 4 / tp,
        "activations": model_b * 12 / (tp * pp),
        "other": 0.0,
    }


@dataclass(frozen=True)
class TermRow:
    term: str
    naive_gb: float
    estimator_gb: float
    why: str


@dataclass(frozen=True)
class LayoutClaim:
    tp: int
    pp: int
    dp: int
    rows: list[TermRow]

    @property
    def naive_gb(self) -> float:
        return sum(r.naive_gb for r in self.rows)

    @property
    def estimator_gb(self) -> float:
        return sum(r.estimator_gb for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "naive_gb": self.naive_gb,
            "estimator_gb": self.estimator_gb,
            "ratio": self.naive_gb / self.estimator_gb,
            "terms": [r.__dict__ for r in self.rows],
        }


def compare(tp: int, pp: int) -> LayoutClaim:
    """The article's formula and the estimator's most loaded stage for one of its layouts."""
    dp = ARTICLE_GPUS // (tp * pp)
    layout = {"tp": tp, "pp": pp, "dp": dp, "global_batch": GLOBAL_BATCH, "micro_batch": 1}
    _, est = run(parse_scenario({**SCENARIO, "layout": layout}))
    stage = max(est.memory.stages, key=lambda s: sum(s.breakdown.values()))
    naive = naive_terms(ARTICLE_MODEL_B, tp, pp)
    rows = [
        TermRow(name, naive[name], sum(stage.breakdown.get(k, 0.0) for k in keys) / GB, why)
        for name, keys, why in TERMS
    ]
    return LayoutClaim(tp, pp, dp, rows)


def claims() -> list[LayoutClaim]:
    return [compare(tp, pp) for tp, pp in ARTICLE_LAYOUTS]


def render_markdown(results: list[LayoutClaim]) -> str:
    """The table docs/validation.md shows (a test fails when the two differ)."""
    lines = [
        "| layout | term | article (GB) | estimator (GB) | article ÷ estimator | why they differ |",
        "|---|---|---:|---:|---:|---|",
    ]
    for claim in results:
        label = f"TP{claim.tp} PP{claim.pp} DP{claim.dp}"
        for r in claim.rows:
            ratio = f"{r.naive_gb / r.estimator_gb:.2f}×" if r.estimator_gb > 0 else "–"
            lines.append(
                f"| {label} | {r.term} | {r.naive_gb:.2f} | {r.estimator_gb:.2f} | {ratio} | {r.why} |"
            )
        lines.append(
            f"| {label} | **total** | **{claim.naive_gb:.2f}** | **{claim.estimator_gb:.2f}** | "
            f"**{claim.naive_gb / claim.estimator_gb:.2f}×** | |"
        )
    first, second = results[0], results[1]
    less = "holds" if first.estimator_gb < second.estimator_gb else "does not hold"
    lines.append("")
    lines.append(
        f"The article's claim that TP{first.tp} PP{first.pp} uses less memory per GPU than TP{second.tp} "
        f"PP{second.pp} {less} in the estimator ({first.estimator_gb:.1f} against {second.estimator_gb:.1f} GB on "
        f"the most loaded stage; the formula gives {first.naive_gb:.1f} against {second.naive_gb:.1f} GB)."
    )
    return "\n".join(lines)
