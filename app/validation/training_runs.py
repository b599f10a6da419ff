"""Replay published training runs (validation/training_runs.csv columns) and compare predictions.

Each row names a source, a model shape, a layout and one measured metric. The replay builds the model from the
row's columns (architecture details the row lacks — activation, norm, embeddings, dropout — come from the
catalog entry with the same shape, else from the model family), picks the GPU from the catalog and the
framework conventions and fabric the source used (SOURCE_RULES below, each with its reason), then predicts the
metric under that source's convention:

* tflops_per_gpu — Narayanan 2021 / Korthikanti 2022: eq. 3 hardware FLOPs (with the recompute forward,
  96·B·s·l·h²(1 + s/6h + V/16lh)); Megatron-LM 2024 and NeMo: model FLOPs (3 × forward, full s² attention).
* mfu_pct — model FLOPs / dense peak of the compute dtype.
* tokens_per_s_per_gpu, iter_time_s — direct.
* layer_fwd_plus_bwd_ms — one transformer layer's forward + backward (+ recompute, + TP communication).
* mem_gib_per_gpu — nvidia-smi readings (note says so) include the CUDA context and the allocator's reserve:
  compared with the total; allocator readings with reserved bytes. GiB.
* oom — 1 when the most loaded stage exceeds HBM.

No per-row fitting: the same curves and constants serve every row; unknown layout fields get one documented
default each (micro-batch 1, no interleaving, ...).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from app.core.accuracy import accuracy_regime, estimate_layer_pass_seconds
from app.core.errors import SpecError
from app.core.estimate import Estimate, EstimateOptions, estimate, framework_for
from app.core.framework import (
    AUTOMODEL,
    DEEPSPEED,
    LLM_FOUNDRY,
    MEGATRON_2021,
    MEGATRON_2022,
    MEGATRON_CORE,
    NEMO,
    TORCHTITAN,
    TORCHTITAN_COMPILE,
    Framework,
)
from app.core.hardware import ClusterSpec, FabricSpec, GPUSpec, scaleup_domain_for
from app.core.layout import (
    MLA_RECOMPUTE_MODULES,
    MOE_OFFLOAD_MODULES,
    MOE_RECOMPUTE_MODULES,
    OFFLOAD_MODULES,
    RECOMPUTE_MODES,
    RECOMPUTE_MODULES,
    RESHARD_MODES,
    Layout,
    TrainDtype,
    even_split_layers,
    framework_reshard,
    mtp_layers_in_pipeline_layout,
    stage_layers_from_pipeline_layout,
)
from app.core.model import (
    ModelSpec,
    MoESpec,
    model_flops_per_token,
    narayanan_flops_per_iteration,
    param_counts,
)
from app.core.planner import DEFAULT_MAX_MICRO_BATCH, DEFAULT_MAX_VP
from app.core.precision import QUANTIZED_DTYPES
from app.core.units import GiB
from app.errors import NotFoundError

COLUMNS = (
    "source",
    "model_name",
    "params_B",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "ffn_hidden",
    "vocab",
    "seq_len",
    "gpu",
    "num_gpus",
    "tp",
    "pp",
    "dp",
    "cp",
    "zero_stage",
    "recompute",
    "sequence_parallel",
    "micro_batch",
    "global_batch",
    "interleave_v",
    "dtype",
    "measured_metric",
    "measured_value",
    "notes",
)
TIME_METRICS = ("iter_time_s", "tflops_per_gpu", "mfu_pct", "tokens_per_s_per_gpu", "layer_fwd_plus_bwd_ms")
MEMORY_METRICS = ("mem_gib_per_gpu",)
METRICS = (*TIME_METRICS, *MEMORY_METRICS, "oom")


# A rule's fabric when its source names none: the reference system of the row's GPU
REFERENCE_FABRIC = ""


@dataclass(frozen=True)
class SourceRule:
    """How one publisher ran and measured: framework, fabric, flash attention and FLOP convention."""

    match: str  # case-insensitive substring of the source column
    framework: Framework
    fabric: str  # fabric preset name; REFERENCE_FABRIC: the row GPU's reference system's
    nics_per_node: int | None  # override of the preset's NIC count
    flash_attention: bool
    flops: str  # "eq3" (Narayanan eq. 3, hardware) | "model" (3 × forward, full attention)
    sequence_parallel_default: bool  # when the row leaves SP blank and tp > 1
    reason: str
    # what the framework's published configs do when the row leaves recompute blank
    recompute_default: str = "none"


SOURCE_RULES: tuple[SourceRule, ...] = (
    SourceRule(
        "NeMo/Automodel",
        AUTOMODEL,
        REFERENCE_FABRIC,
        None,
        True,
        "model",
        False,
        "the GPU's reference system (DGX H100: 8 × NDR 400 Gb/s); NeMo AutoModel is PyTorch FSDP2 with "
        "Transformer Engine kernels, not "
        "Megatron-core (no sequence parallelism without TP; a blank recompute is no activation checkpointing)",
    ),
    SourceRule(
        "Narayanan",
        MEGATRON_2021,
        "ib-hdr-8x200",
        None,
        False,
        "eq3",
        False,
        "Selene DGX A100: 8 × HDR 200 Gb/s per node; Megatron-LM 2021 (no flash attention, no overlap)",
    ),
    SourceRule(
        "Korthikanti",
        MEGATRON_2022,
        "ib-hdr-8x200",
        None,
        False,
        "eq3",
        False,
        "Selene DGX A100 (same cluster as Narayanan 2021); Megatron-LM of 2022 with sequence parallelism and the "
        "asynchronous tensor-parallel backward",
    ),
    SourceRule(
        "Megatron-LM README",
        # Megatron-LM keeps and reduces bf16 runs' gradients in fp32 unless --grad-reduce-in-bf16 is given
        # (megatron/training/arguments.py: accumulate_allreduce_grads_in_fp32 for bf16); the README does not
        NEMO.with_(name="megatron-core-te", grad_bytes=4.0, grad_reduce_bytes=4.0),
        REFERENCE_FABRIC,
        None,
        True,
        "model",
        True,
        "the GPU's reference system (DGX H100, Eos: 8 × NDR 400 Gb/s); Megatron-core with Transformer Engine: "
        "distributed optimizer with "
        "overlapped grad reduce / param gather (--overlap-param-gather in the README) and TP communication "
        "overlap, as NVIDIA's published benchmark recipes use",
    ),
    SourceRule(
        "NeMo",
        NEMO,
        REFERENCE_FABRIC,
        None,
        True,
        "model",
        True,
        "the GPU's reference system (DGX H100: 8 × NDR 400 Gb/s; GB300 NVL72: one 800 Gb/s NIC per GPU); "
        "NeMo recipes enable TP communication overlap (userbuffers)",
    ),
    SourceRule(
        "torchtitan",
        TORCHTITAN,
        "roce-8x400",
        None,
        True,
        "model",
        False,
        "Meta H100 clusters: 8 × 400 Gb/s RoCE per node; torchtitan FSDP2, eager PyTorch; a blank recompute is "
        "torchtitan's default (train_configs/*.toml: [activation_checkpoint] mode = 'selective', per op)",
        "selective",
    ),
    SourceRule(
        # LLaMA (Touvron et al. 2023, arXiv 2302.13971) Sec. 2.4, "Efficient implementation": xformers' efficient
        # causal multi-head attention (flash attention), checkpointing that saves the activations expensive to
        # recompute such as the linear layers' outputs, "model and sequence parallelism, as described by
        # Korthikanti et al. (2022)", and overlap of the activations' computation with the GPUs' communication over
        # the network (the TP all-reduces); no sharded data parallelism named. Its code is not published: read
        # as Megatron-LM of 2022's conventions (the method it cites) with flash attention. 2,048 A100-80GB on
        # Meta's RSC (DGX A100 nodes: 8 x HDR 200)
        "arXiv 2302.13971",
        MEGATRON_2022,
        "ib-hdr-8x200",
        None,
        True,
        "model",
        True,
        "LLaMA Sec. 2.4: xformers causal attention, Korthikanti et al.'s model and sequence parallelism, "
        "checkpointing of the activations expensive to recompute: Megatron-LM 2022 conventions with flash attention",
        "selective",
    ),
    SourceRule(
        # StarCoder (Li et al. 2023, arXiv 2305.06161) Sec. 5.6: BigCode's fork of Megatron-LM (bigcode-project/
        # Megatron-LM, early 2023) at TP4 PP4 DP32, micro-batch 1, Megatron-LM's distributed optimizer, gradient
        # reduction in fp32 under bf16; FlashAttention for the 8K context (Sec. 5). That fork's knobs are opt-in: the
        # interleaved schedule (--num-layers-per-virtual-pipeline-stage, default None), sequence parallelism
        # (--sequence-parallel) and recomputation (--recompute-activations / --recompute-granularity; megatron/
        # arguments.py), none of which the paper names, so a blank SP or recompute takes the default: off
        "arXiv 2305.06161",
        MEGATRON_2022,
        "ib-hdr-8x200",
        None,
        True,
        "model",
        False,
        "StarCoder Sec. 5.6: BigCode's 2023 fork of Megatron-LM (distributed optimizer, FlashAttention, fp32 "
        "gradient reduction; SP, recompute and interleaving opt-in)",
    ),
    SourceRule(
        "bigscience",
        DEEPSPEED,
        # BLOOM paper (arXiv 2211.05100) Sec. 3.4.1: "4 Omni-Path 100 Gbps links per node" on Jean Zay's A100 nodes
        "opa-4x100",
        None,
        False,
        "model",
        False,
        "Jean Zay A100 partition: 4 × Omni-Path 100 Gb/s per 8-GPU node (BLOOM paper, Sec. 3.4.1); "
        "Megatron-DeepSpeed, no flash attention",
    ),
    SourceRule(
        "arXiv 2412.19437",
        MEGATRON_CORE.with_(expert_gemm_host_s=0.0),
        REFERENCE_FABRIC,
        None,
        True,
        "model",
        True,
        "DeepSeek-V3 technical report: DeepSeek's own HAI-LLM framework on H800 nodes with InfiniBand (Sec. 3.1); "
        "its FP8 expert GEMMs are grouped kernels, one launch for all local experts (the kernels released as "
        "deepseek-ai/DeepGEMM, 'normal and Mix-of-Experts (MoE) grouped GEMMs'), not one call per expert",
    ),
    SourceRule(
        "vTrain",
        DEEPSPEED,
        "ib-hdr-8x200",
        # vTrain's own validation configs describe the measured cluster: "inter_node_bandwidth": 800 for every
        # multi-node run (VIA-Research/vTrain config/validation/multi/*.json; src/config.py documents it as the
        # node's total inter-node bandwidth in Gbps), i.e. 4 × HDR 200 Gb/s per 8-GPU node
        4,
        False,
        "model",
        False,
        "Megatron-DeepSpeed on A100; vTrain's validation configs give 800 Gb/s of inter-node bandwidth per node "
        "(4 × HDR 200); no flash attention",
    ),
)
# DeepSpeed's default stage3_max_live_parameters (deepspeed.readthedocs.io, "ZeRO" config): the ZeRO-3 rows'
# gathered-parameter working set
DEEPSPEED_ZERO3_LIVE_PARAMS = 1e9

# Megatron-LM's artifact for Narayanan et al. 2021 Table 1 (examples/sc21/run_table_1.sh, with CONFIG.sh's common
# flags: --fp16 --loss-scale 8192 for every model): (layers, hidden) → micro-batch size, layers per virtual
# pipeline stage (--num-layers-per-virtual-pipeline-stage; None = no interleaving) and --DDP-impl (torch: PyTorch
# DDP, whose bucketed all-reduce overlaps the last micro-batch's backward, Megatron's no-pipelining schedule running
# the others under no_sync; local: Megatron's own all-reduce after the backward)
SC21_TABLE_1: dict[tuple[int, int], tuple[int, int | None, str]] = {
    (24, 2304): (16, None, "torch"),
    (30, 3072): (16, None, "torch"),
    (36, 4096): (16, None, "torch"),
    (40, 6144): (8, None, "torch"),
    (48, 8192): (4, None, "local"),
    (60, 10240): (2, 5, "local"),
    (80, 12288): (2, 5, "local"),
    (96, 16384): (1, 3, "local"),
    (105, 20480): (1, 1, "local"),
    (128, 25600): (1, None, "local"),
}


def sc21_table_1(row: Row) -> tuple[int, int | None, str] | None:
    """The SC21 artifact's settings for a Narayanan et al. 2021 Table 1 row (None for any other row)."""
    source = row.get("source").lower()
    if "narayanan" not in source or "table 1" not in source:
        return None
    return SC21_TABLE_1.get((row.int_or("layers", 0) or 0, row.int_or("hidden", 0) or 0))


DEFAULT_RULE = SourceRule(
    "", MEGATRON_CORE, REFERENCE_FABRIC, None, True, "model", True, "no rule for this source: defaults"
)


def rule_for(source: str) -> SourceRule:
    """The first rule whose text the source contains, not followed by a letter (so that "NeMo" is not read in a
    model named Nemotron); DEFAULT_RULE when none does."""
    low = source.lower()
    for rule in SOURCE_RULES:
        if re.search(re.escape(rule.match.lower()) + r"(?![a-z])", low):
            return rule
    return DEFAULT_RULE


# Frameworks named in a source or its notes, most specific first (row text, case-insensitive). Each name starts a
# word; "nemo" must also end one, so that a model named Nemotron does not name the NeMo framework.
FRAMEWORK_KEYWORDS: tuple[tuple[tuple[str, ...], Framework, str], ...] = (
    ((r"\bdeepspeed",), DEEPSPEED, "DeepSpeed named in the row"),
    ((r"\bllm-foundry", r"\bcomposer"), LLM_FOUNDRY, "llm-foundry / Composer named in the row"),
    # Megatron-FSDP is Megatron-core's own parameter sharding (--use-megatron-fsdp), not PyTorch FSDP
    ((r"\bmegatron[- ]fsdp",), MEGATRON_CORE, "Megatron-FSDP named in the row: Megatron-core's own sharding"),
    ((r"\bfsdp", r"\btorchtitan"), TORCHTITAN, "PyTorch FSDP named in the row"),
    ((r"\bnemo\b", r"\bmegatron-bridge"), NEMO, "NeMo / Megatron-Bridge named in the row"),
)


def _fabric_for_gpu(gpu_text: str, notes: str) -> tuple[str, str]:
    """The scale-out fabric a row's cluster most likely had: what the row says (RoCE, EFA), else the reference
    system of the row's GPU (DGX A100: 8 × HDR 200; DGX H100/H200/B200, GB200: 8 × NDR 400; B300, GB300: XDR 800)."""
    text = f"{gpu_text} {notes}".lower()
    # whole words only: "process" holds "roce" and "defaults" holds "efa"
    if re.search(r"\broce", text):
        return "roce-8x400", "RoCE named in the row"
    if re.search(r"\bp4de?\b|\bp4de?\.24xlarge", text):
        return "efa-v1-4x100", "AWS p4d named in the row (400 Gb/s EFA over 4 adapters per node)"
    if re.search(r"\befa(?:v\d)?\b", text):
        return "efa-v3-16x200", "EFA named in the row"
    return REFERENCE_FABRIC, "the GPU's reference fabric (app.catalog.fabrics.REFERENCE_FABRIC_BY_GPU)"


def rule_for_row(row: Row) -> SourceRule:
    """The source's rule, or — for a source without one — a rule read from the row itself: the framework its text
    names (DeepSpeed, FSDP, NeMo; Megatron-core otherwise) and the fabric of its GPU generation."""
    rule = rule_for(row.get("source"))
    if rule is not DEFAULT_RULE:
        return rule
    text = f"{row.get('source')} {row.get('notes')}".lower()
    framework, why = MEGATRON_CORE, "no framework named: Megatron-core"
    for patterns, fw, reason in FRAMEWORK_KEYWORDS:
        if any(re.search(p, text) for p in patterns):
            framework, why = fw, reason
            break
    fabric, fabric_why = _fabric_for_gpu(row.get("gpu"), row.get("notes"))
    return replace(
        DEFAULT_RULE,
        framework=framework,
        fabric=fabric,
        sequence_parallel_default=framework.name in ("megatron-core", "nemo"),
        recompute_default="selective" if framework is TORCHTITAN else "none",
        reason=f"no rule for this source: {why}; {fabric_why}",
    )


# ---------------------------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    index: int  # 1-based data row number
    data: dict[str, str]

    def get(self, key: str) -> str:
        return (self.data.get(key) or "").strip()

    def int_or(self, key: str, default: int | None) -> int | None:
        """The first whole number in the cell ("8", "TP=8", "1 (distributed optimizer)"); a sequence length
        written in thousands of tokens ("4K", "128k") counts 1,024 each."""
        text = self.get(key)
        match = re.search(r"(\d+(?:\.\d+)?)\s*([kK](?![a-zA-Z]))?" if key == "seq_len" else r"\d+", text)
        if not match:
            return default
        if key == "seq_len":
            return round(float(match.group(1)) * (1024 if match.group(2) else 1))
        return int(match.group(0))


def load_rows(path: Path | str) -> list[Row]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = tuple(reader.fieldnames or ())
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; expected the columns of training_runs.csv")
        return [Row(i + 1, dict(r)) for i, r in enumerate(reader)]


# Hidden and attention dropout of each family's published training configs: Megatron-LM's GPT defaults
# (--hidden-dropout / --attention-dropout 0.1, megatron/training/arguments.py) and NeMo's GPT-3 configs
# (NeMo-Framework-Launcher conf/training/gpt3/*.yaml: hidden_dropout 0.1, attention_dropout 0.1); Llama, Nemotron-4
# and BLOOM train without dropout (their configs / tech reports).
FAMILY_DROPOUT: tuple[tuple[str, float], ...] = (
    ("gpt-oss", 0.0),  # before "gpt": gpt-oss, Qwen, Mistral/Mixtral, DeepSeek and MPT configs set no dropout
    ("qwen", 0.0),
    ("mistral", 0.0),
    ("mixtral", 0.0),
    ("deepseek", 0.0),
    ("mpt", 0.0),
    ("llama", 0.0),
    ("nemotron", 0.0),
    ("bloom", 0.0),
    ("gpt", 0.1),
)

_MODERN = {"activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope", "tied_embeddings": False}
FAMILY_DEFAULTS: tuple[tuple[str, dict[str, Any]], ...] = (
    # (substring of the model name, declared architecture of that family); first match wins
    ("qwen", _MODERN),  # Qwen2/2.5/3 config.json: silu-gated MLP, RMSNorm, RoPE
    ("mistral", _MODERN),  # Mistral / Mixtral config.json
    ("mixtral", _MODERN),
    ("deepseek", _MODERN),  # DeepSeek-V2/V3 config.json
    # Kimi K2 (moonshotai/Kimi-K2-Instruct config.json: architectures DeepseekV3ForCausalLM, hidden_act silu,
    # tie_word_embeddings false): DeepSeek-V3's architecture
    ("kimi", _MODERN),
    ("gpt-oss", _MODERN),  # gpt-oss-120b config.json: gated SwiGLU experts, RMSNorm, RoPE (YaRN), untied
    # MPT (mosaicml/llm-foundry mpt configs): GELU MLP (expansion 4), LayerNorm without bias, ALiBi, tied
    (
        "mpt",
        {
            "activation": "gelu",
            "norm": "layernorm",
            "position_embedding": "alibi",
            "tied_embeddings": True,
            "attention_bias": False,
            "mlp_bias": False,
        },
    ),
    # SmolLM3 (huggingface/smollm text/pretraining/smollm3/stage1_8T.yaml): SiLU-gated MLP, RMSNorm, RoPE (NoPE
    # every 4th layer, which changes no FLOP), tie_word_embeddings true
    ("smollm", {**_MODERN, "tied_embeddings": True}),
    (
        "llama",
        {"activation": "swiglu", "norm": "rmsnorm", "position_embedding": "rope", "tied_embeddings": False},
    ),
    (
        "nemotron",
        {
            "activation": "squared_relu",
            "norm": "layernorm",
            "position_embedding": "rope",
            "tied_embeddings": False,
        },
    ),
    (
        "bloom",
        {"activation": "gelu", "norm": "layernorm", "position_embedding": "alibi", "tied_embeddings": True},
    ),
    (
        "gpt",
        {"activation": "gelu", "norm": "layernorm", "position_embedding": "learned", "tied_embeddings": True},
    ),
)


def _catalog_twin(row: Row, shape: dict[str, int]) -> ModelSpec | None:
    """The catalog model this row trained: by name (aliases, case- and punctuation-insensitive, a parenthesised
    suffix dropped) when its layers and width agree with the row, else one with exactly this shape. The twin gives
    the declared activation, norm, embeddings and, for MoE and MLA models, the expert and attention structure."""
    try:
        from app import catalog

        table = catalog.models()
    except Exception:  # the catalog is optional for the replay
        return None
    name = row.get("model_name")
    named = twin_by_name(row)
    if named is not None:
        # the row's own shape must agree where it gives one
        layers, hidden = shape["num_layers"], shape["hidden_size"]
        if (not layers or named.num_layers == layers) and (not hidden or named.hidden_size == hidden):
            return named
    low = name.lower()
    best = None
    for spec in table.values():
        if (
            spec.num_layers == shape["num_layers"]
            and spec.hidden_size == shape["hidden_size"]
            and spec.num_attention_heads == shape["num_attention_heads"]
            and spec.ffn_hidden_size == shape["ffn_hidden_size"]
        ) and (best is None or spec.name.lower() in low):
            best = spec
    return best


def twin_by_name(row: Row) -> ModelSpec | None:
    """The catalog model the row names (aliases, case- and punctuation-insensitive; a "(…)" suffix dropped)."""
    return _model_named(row.get("model_name"))


@lru_cache(maxsize=512)
def _model_named(name: str) -> ModelSpec | None:
    try:
        from app import catalog
    except Exception:  # the catalog is optional for the replay
        return None
    for candidate in (name, name.split("(")[0].strip()):
        if not candidate:
            continue
        try:
            return catalog.find_model(candidate)
        except Exception:
            continue
    return None


# shape columns a catalog model of the same name may fill when the row leaves them blank
SHAPE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("layers", "num_layers"),
    ("hidden", "hidden_size"),
    ("heads", "num_attention_heads"),
    ("kv_heads", "num_kv_heads"),
    ("ffn_hidden", "ffn_hidden_size"),
    ("vocab", "vocab_size"),
)


# Frameworks on Megatron-core (2024-) whose published recipes split an uneven pipeline with the embedding and the
# loss as one layer each: NeMo's Llama 3.1 405B performance recipe sets
# trainer.strategy.account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split = True, and
# Megatron-Bridge's Qwen3-235B-A22B recipe sets both ("Pipeline split accounting (required for 235B model)")
MEGATRON_CORE_SPLIT_FRAMEWORKS = ("megatron-core", "nemo")
# BigScience's 02-28 benchmarks ran with DeepSpeed's --pp-partition-method 'type:transformer|embedding': the
# embedding and the tied LM head each take a transformer layer's slot (bigscience train/tr11-176B-ml/
# chronicles-prequel.md, "Rebalancing layers": "so we use 2 layers less, to match 2+nlayers*PP math")
EMBEDDING_PARTITION_MARKERS = ("rebalancing layers", "02-28")
_PIPELINE_LAYOUT_NOTE = re.compile(r"PP layout\s*'([^']+)'", re.IGNORECASE)

# Megatron-Bridge's DeepSeek-V3 recipe (src/megatron/bridge/recipes/deepseek/deepseek_v3.py, layout_map by (pp, vp);
# mtp_num_layers = 1): the embedding on the first virtual stage, the MTP layer and the loss on the last
MEGATRON_BRIDGE_DSV3_LAYOUTS: dict[tuple[int, int], str] = {
    (4, 1): "Et*16|t*16|t*16|t*13mL",
    (8, 1): "Et*8|(t*8|)*6t*5mL",
    (4, 2): "Et*8|(t*8|)*6t*5mL",
    (16, 1): "Et*4|(t*4|)*14tmL",
    (8, 2): "Et*4|(t*4|)*14tmL",
    (4, 4): "Et*4|(t*4|)*14tmL",
}


def megatron_bridge_dsv3(row: Row) -> bool:
    """A Megatron-Bridge run of DeepSeek-V3, which its recipe trains with one MTP layer and lays out by (pp, vp)."""
    return "megatron-bridge" in row.get("source").lower() and "deepseek-v3" in row.get("model_name").lower()


def stated_pipeline_layout(row: Row, layout: Layout) -> tuple[str, str] | None:
    """(Megatron-core pipeline layout string, where it comes from) for a row: the notes' own, or Megatron-Bridge's
    DeepSeek-V3 recipe layout for its (pp, vp); None when neither applies."""
    stated = _PIPELINE_LAYOUT_NOTE.search(row.get("notes"))
    if stated:
        return stated.group(1), "the notes"
    recipe = MEGATRON_BRIDGE_DSV3_LAYOUTS.get((layout.pp, layout.vp)) if megatron_bridge_dsv3(row) else None
    if recipe:
        return recipe, "Megatron-Bridge's DeepSeek-V3 recipe"
    return None


def mtp_layers_for(row: Row, layout: Layout) -> tuple[int, str]:
    """(multi-token-prediction layers, where the count comes from) of a row's run: the 'm' of its stated pipeline
    layout, else one for a Megatron-Bridge DeepSeek-V3 run (its recipe's mtp_num_layers), else none."""
    stated = stated_pipeline_layout(row, layout)
    if stated:
        try:
            return mtp_layers_in_pipeline_layout(stated[0], layout.pp), f"pipeline layout from {stated[1]}"
        except ValueError:
            return 0, ""
    return (1, "Megatron-Bridge's DeepSeek-V3 recipe") if megatron_bridge_dsv3(row) else (0, "")


def pipeline_split_for(
    row: Row, model: ModelSpec, layout: Layout, framework: Framework
) -> tuple[tuple[int, ...], str] | None:
    """Layers of every stage of a row whose layers do not divide by pp·vp, from what its source states:
    a Megatron-core pipeline layout in the notes, DeepSpeed's 'type:transformer|embedding' partition, or the
    Megatron-core recipes' embedding / loss accounting. None when nothing stated fits (the caller then models
    every stage at the bottleneck's depth)."""
    text = f"{row.get('source')} {row.get('notes')}".lower()
    stated = stated_pipeline_layout(row, layout)
    if stated:
        try:
            counts = stage_layers_from_pipeline_layout(stated[0], layout.pp)
        except ValueError:
            counts = ()
        if counts and sum(counts) == model.num_layers and min(counts) >= 1:
            return counts, f"pipeline layout {stated[0]!r} from {stated[1]}"
    end = even_split_layers(model.num_layers, layout.pp)
    if end is None:
        return None
    ends = (end,) + (end + 1,) * (layout.pp - 2) + (end,)
    deepspeed_split = "type:transformer|embedding" in text or (
        "bigscience" in text and any(marker in text for marker in EMBEDDING_PARTITION_MARKERS)
    )
    if deepspeed_split and layout.vp == 1:
        return ends, "DeepSpeed partition 'type:transformer|embedding': embedding and LM head count as layers"
    chunks = layout.pp * layout.vp
    if framework.name.startswith(MEGATRON_CORE_SPLIT_FRAMEWORKS) and (model.num_layers + 2) % chunks == 0:
        return ends, "Megatron-core embedding / loss accounting in the pipeline split (the recipes' setting)"
    return None


def _note_int(notes: str, pattern: str) -> int | None:
    match = re.search(pattern, notes, re.IGNORECASE)
    return int(match.group(1)) if match else None


def moe_from_notes(notes: str, ffn_hidden: int) -> tuple[MoESpec | None, int]:
    """Mixture-of-experts structure stated in a row's notes, and the dense FFN width.

    The CSV has no expert columns, so MoE rows state it in words: "128 experts, top-8", "256 routed experts + 1
    shared expert", "first 3 layers dense (ffn 18432)"; the ffn_hidden column then holds one expert's width.
    Returns (None, ffn_hidden) when the notes describe no experts.
    """
    experts = _note_int(notes, r"(\d+)\s+(?:routed\s+)?experts")
    top_k = _note_int(notes, r"top-?\s*(\d+)")
    if not experts or not top_k:
        return None, ffn_hidden
    shared = _note_int(notes, r"(\d+)\s+shared\s+experts?") or 0
    first_dense = re.search(r"first\s+(\d+)\s+layers?\s+(?:are\s+)?dense(?:\s*\(ffn\s+(\d+)\))?", notes, re.I)
    dense_layers = int(first_dense.group(1)) if first_dense else 0
    dense_ffn = int(first_dense.group(2)) if first_dense and first_dense.group(2) else ffn_hidden
    spec = MoESpec(
        num_experts=experts,
        experts_per_token=top_k,
        expert_ffn_hidden_size=ffn_hidden,
        num_shared_experts=shared,
        first_dense_layers=dense_layers,
    )
    return spec, dense_ffn


def row_model(row: Row, rule: SourceRule) -> ModelSpec:
    shape: dict[str, Any] = {field: row.int_or(column, 0) or 0 for column, field in SHAPE_COLUMNS}
    named = twin_by_name(row)
    if named is not None and (not shape["num_layers"] or named.num_layers == shape["num_layers"]):
        # blank shape cells come from the catalog model the row names
        for _, field_name in SHAPE_COLUMNS:
            if not shape[field_name]:
                shape[field_name] = getattr(named, field_name)
    shape["num_kv_heads"] = shape["num_kv_heads"] or shape["num_attention_heads"]
    seq = row.int_or("seq_len", 2048) or 2048
    name = row.get("model_name").lower()
    dropout = next((d for key, d in FAMILY_DROPOUT if key in name), FAMILY_DROPOUT[-1][1])
    twin = _catalog_twin(row, shape)
    if twin is not None and (twin.moe is not None or twin.mla is not None):
        # the catalog's own description of an MoE / MLA model: its expert and latent-attention structure is
        # what the CSV's columns cannot carry
        return replace(
            twin,
            name=row.get("model_name"),
            max_seq_len=seq,
            hidden_dropout=dropout,
            attention_dropout=dropout,
            vocab_size=shape["vocab_size"] or twin.vocab_size,
            # the row's run states its multi-token prediction itself (mtp_layers_for), not the catalog's model
            mtp_layers=0,
        )
    arch: dict[str, Any]
    if twin is not None:
        arch = {
            "activation": twin.activation,
            "norm": twin.norm,
            "position_embedding": twin.position_embedding,
            "tied_embeddings": twin.tied_embeddings,
            "attention_bias": twin.attention_bias,
            "mlp_bias": twin.mlp_bias,
        }
        if twin.head_dim and twin.num_attention_heads == shape["num_attention_heads"]:
            arch["head_dim"] = twin.head_dim
    else:
        arch = next((a for key, a in FAMILY_DEFAULTS if key in name), FAMILY_DEFAULTS[-1][1])
        arch = dict(arch)
        gpt_like = arch.get("norm") == "layernorm" and arch.get("activation") == "gelu"
        arch.setdefault("attention_bias", gpt_like)
        arch.setdefault("mlp_bias", gpt_like)
    notes = row.get("notes")
    moe, dense_ffn = moe_from_notes(notes, shape["ffn_hidden_size"])
    if moe is not None:
        shape["ffn_hidden_size"] = dense_ffn
        arch["moe"] = moe
    head_dim = _note_int(notes, r"head[_ ]dim\s*(\d+)")
    if head_dim and "head_dim" not in arch:
        arch["head_dim"] = head_dim
    return ModelSpec(
        name=row.get("model_name"),
        max_seq_len=seq,
        hidden_dropout=dropout,
        attention_dropout=dropout,
        **shape,
        **arch,
    )


def row_gpu(row: Row) -> GPUSpec:
    from app import catalog

    text = row.get("gpu")
    candidates = []
    if "96GB" in text.replace(" ", "") and "H100" in text.upper():
        candidates.append("H100-SXM-96GB")
    base = text.split("(")[0].strip()
    candidates += [text, base]
    if base.upper().startswith("A100"):
        # the memory size decides between the two A100 entries; 80 GB when the row does not say
        forty = re.search(r"A100\W*40\b|\b40\s*GB", text, re.IGNORECASE) is not None
        candidates.append("A100-40GB-SXM" if forty else "A100-80GB-SXM")
    if base.upper().startswith("H100"):
        candidates.append("H100-SXM")
    for name in candidates:
        try:
            return catalog.find_gpu(name)
        except NotFoundError:
            continue
    # free text ("NVIDIA H100 80GB HBM3", "8x H200 SXM 141GB"): the product name inside it
    for pattern, name in _GPU_TOKENS:
        if re.search(pattern, text, re.IGNORECASE):
            if name == "A100-80GB-SXM" and re.search(r"A100\W*(?:SXM\d?\W*)?40\b|\b40\s*GB", text, re.I):
                name = "A100-40GB-SXM"
            if name == "H100-SXM" and re.search(r"pcie", text, re.I):
                name = "H100-PCIe"
            return catalog.find_gpu(name)
    raise NotFoundError("gpu", text, [])


# product names inside free-text GPU descriptions, most specific first (a digit may not follow: H20 ≠ H200)
_GPU_TOKENS: tuple[tuple[str, str], ...] = tuple(
    (rf"(?:(?<![A-Za-z0-9])|(?<=\d[xX])){token}(?![0-9])", name)
    for token, name in (
        ("GB300", "GB300"),
        ("GB200", "GB200"),
        ("B300", "B300"),
        ("B200", "B200"),
        ("H200", "H200-SXM"),
        ("H800", "H800-SXM"),
        ("H100", "H100-SXM"),
        ("H20", "H20"),
        ("A100", "A100-80GB-SXM"),
        ("V100", "V100-SXM2-32GB"),
        ("MI325X", "MI325X"),
        ("MI300X", "MI300X"),
        ("L40S", "L40S"),
        ("Gaudi\\s*3", "Gaudi3"),
    )
)


def row_power(row: Row, gpu: GPUSpec) -> tuple[GPUSpec, float | None]:
    """The GPU and the row's operating power limit ("500W power cap" in the gpu column), if stated.

    The catalog entry carries the die's design power (`GPUSpec.full_power_w`), the power its peak figures hold
    at; the estimator derates the clock for a limit below it (app.core.efficiency.operating_clock_fraction).
    """
    match = re.search(r"(\d+(?:\.\d+)?)\s*W\s+power\s+cap", row.get("gpu"), re.IGNORECASE)
    if not match:
        return gpu, None
    return gpu, float(match.group(1))


def _row_sizes(row: Row, n_gpus: int, defaults: list[str]) -> tuple[int, int, int, int]:
    """(tp, pp, dp, cp) as stated; a blank pp is what the GPU count leaves, a blank dp what the others leave."""
    tp = row.int_or("tp", 1) or 1
    cp = row.int_or("cp", 1) or 1
    dp_given = row.int_or("dp", None)
    pp = row.int_or("pp", None)
    if pp is None and dp_given and n_gpus and n_gpus % (tp * cp * dp_given) == 0:
        pp = n_gpus // (tp * cp * dp_given)  # the one blank size the GPU count determines
        defaults.append(f"pp={pp} (GPUs / tp·cp·dp)")
    pp = pp or 1
    return tp, pp, dp_given or max(1, n_gpus // (tp * pp * cp)), cp


def _row_zero(row: Row, rule: SourceRule, defaults: list[str]) -> int:
    zero = row.int_or("zero_stage", None)
    zero_text = row.get("zero_stage").lower()
    if zero is None and ("fsdp" in zero_text or "hsdp" in zero_text or "full_shard" in zero_text):
        defaults.append(  # fully sharded data parallel without a stage number
            "zero=3 (HSDP modelled as sharding over every data-parallel rank)"
            if "hsdp" in zero_text
            else "zero=3 (FSDP)"
        )
        return 3
    if zero is None:
        # the framework's published default: Megatron-core's distributed optimizer, FSDP's full sharding, and
        # Megatron-DeepSpeed's GPT example (examples_deepspeed/rebase/ds_pretrain_gpt_1.3B.sh: zero_stage=1, the
        # script that also lists GPT-3 175B at global batch 1536)
        zero = {"megatron-core": 1, "nemo": 1, DEEPSPEED.name: 1, TORCHTITAN.name: 3}.get(
            rule.framework.name, 0
        )
        defaults.append(f"zero={zero}")
    return zero


def _row_schedule(
    row: Row, model: ModelSpec, pp: int, artifact: tuple[int, int | None, str] | None, defaults: list[str]
) -> tuple[int, int]:
    """(micro-batch, interleaving): stated, from the SC21 artifact, or the placeholders the completion replaces."""
    mb = row.int_or("micro_batch", None)
    if mb is None and artifact is not None:
        mb = artifact[0]
        defaults.append(f"micro_batch={mb} (SC21 artifact)")
    if mb is None:
        mb = 1
        defaults.append(UNSTATED_MICRO_BATCH)
    vp = row.int_or("interleave_v", None)
    if vp is None and artifact is not None:
        per_stage = artifact[1]
        vp = model.num_layers // (pp * per_stage) if per_stage else 1
        defaults.append(f"vp={vp} (SC21 artifact)")
    if vp is None:
        vp = 1
        defaults.append(UNSTATED_VP)
    return mb, vp


def _row_recompute(
    row: Row, model: ModelSpec, rule: SourceRule, defaults: list[str]
) -> tuple[str, tuple[str, ...]]:
    """The recompute mode (the source's default when blank or not understood) and the selective modules the
    notes name that the model has."""
    recompute = recompute_from_cell(row.get("recompute"))
    if recompute is None:
        recompute = rule.recompute_default
        stated = row.get("recompute")
        defaults.append(
            f"recompute {stated!r} not understood: replayed as {recompute}"
            if stated
            else f"recompute={recompute}"
        )
    modules: tuple[str, ...] = ()
    if recompute == "selective":
        modules = recompute_modules_from_notes(row.get("notes"))
        if model.moe is None:
            modules = tuple(m for m in modules if m not in MOE_RECOMPUTE_MODULES)
        if model.mla is None:
            modules = tuple(m for m in modules if m not in MLA_RECOMPUTE_MODULES)
    return recompute, modules


def _row_experts(
    row: Row, model: ModelSpec, sizes: tuple[int, int, int, int], defaults: list[str]
) -> tuple[int, int | None]:
    """(ep, etp) of a MoE row from its notes ("EP=64", "ETP=1"); a published layout whose ep does not divide
    dp·cp can only have run folded, with ETP=1 (Megatron-Bridge, MoE model zoo). (1, None) for a dense model."""
    if model.moe is None:
        return 1, None
    tp, _, dp, cp = sizes
    # the CSV has no EP column: MoE rows state it in the notes; otherwise no expert parallelism
    ep = _note_int(row.get("notes"), r"\bEP\s*=\s*(\d+)") or 1
    if ep == 1:
        defaults.append("ep=1")
    etp = _note_int(row.get("notes"), r"\bETP\s*=\s*(\d+)")
    if etp is None and ep > 1 and (dp * cp) % ep and (tp * cp * dp) % ep == 0:
        etp = 1
        defaults.append("etp=1 (ep does not divide dp·cp: MoE parallel folding)")
    return ep, etp


def _row_offloads(
    row: Row, model: ModelSpec, pp: int, recompute: str, defaults: list[str]
) -> tuple[int, tuple[str, ...]]:
    """Layers whose activations go to the host (Megatron-Bridge's cpu_offloading_num_layers=N, Megatron-core's
    --cpu-offloading-num-layers N: only with pp = 1 and no recompute) and the fine-grained offloaded modules
    ("--offload-modules expert_fc1 moe_act")."""
    offload = _note_int(row.get("notes"), r"cpu[-_]offloading[-_]num[-_]layers\s*[=:]?\s*(\d+)") or 0
    if offload and (pp > 1 or recompute != "none"):
        defaults.append(f"cpu offloading of {offload} layers ignored: it needs pp = 1 and no recompute")
        offload = 0
    modules = offload_modules_from_notes(row.get("notes"))
    if modules and model.moe is None:
        modules = tuple(m for m in modules if m not in MOE_OFFLOAD_MODULES)
    if modules and (recompute == "full" or offload):
        defaults.append("fine-grained offloading ignored: not with full recompute or layer offloading")
        modules = ()
    return offload, modules


def _row_sequence_parallel(row: Row, rule: SourceRule, tp: int, defaults: list[str]) -> bool:
    sp_text = row.get("sequence_parallel").lower()
    if sp_text:
        return sp_text.startswith("y") or sp_text.split()[0].strip(",;()") in ("1", "true", "on", "enabled")
    sp = rule.sequence_parallel_default and tp > 1
    defaults.append(f"sequence_parallel={'on' if sp else 'off'}")
    return sp


def _row_dtype(
    row: Row, rule: SourceRule, artifact: tuple[int, int | None, str] | None, defaults: list[str]
) -> str:
    dtype_text = row.get("dtype").lower()
    dtype = dtype_from_cell(dtype_text)
    if "mxfp4" in dtype_text:
        defaults.append("dtype MXFP4 modelled as NVFP4 (4-bit elements, finer scales)")
    if artifact is not None and "not specified" in dtype_text and "16" in dtype_text:
        dtype = "fp16"  # CONFIG.sh of the SC21 artifact: --fp16
        defaults.append("dtype=fp16 (SC21 artifact)")
    if "not stated" in dtype_text and "16" in dtype_text and rule.framework.name == DEEPSPEED.name:
        # an unstated 16-bit format under Megatron-DeepSpeed: its GPT example trains in fp16 (--fp16 in
        # examples_deepspeed/rebase/ds_pretrain_gpt_1.3B.sh), as vTrain's simulator profiles (torch.float16)
        dtype = "fp16"
        defaults.append("dtype=fp16 (Megatron-DeepSpeed's example)")
    return dtype


def _row_precision_options(
    row: Row, rule: SourceRule, dtype: str, zero: int, defaults: list[str]
) -> tuple[tuple[int, int], bool, str]:
    """The 16-bit first and last layers of an fp8 / fp4 run ("--num-layers-at-start-in-bf16 1"), FP8 parameters
    and bf16 Adam moments, where the notes give them and the framework runs them."""
    bf16_ends = (0, 0)
    if dtype in QUANTIZED_DTYPES:
        start, end = (
            _note_int(row.get("notes"), rf"num[-_]layers[-_]at[-_]{side}[-_]in[-_]bf16\s*[=:]?\s*(\d+)") or 0
            for side in ("start", "end")
        )
        bf16_ends = (start, end)
    fp8_params = dtype == "fp8" and zero >= 1 and fp8_params_from_notes(row.get("notes"))
    if fp8_params:
        refusal = rule.framework.fp8_param_gather_refusal(zero)
        if refusal is not None:
            fp8_params = False
            defaults.append(f"FP8 parameters in the notes not modelled: {refusal}")
    moments = "bf16" if zero >= 1 and bf16_moments_for(row, defaults) else "fp32"
    if moments == "bf16" and rule.framework.precision_aware_refusal() is not None:
        moments = "fp32"
        defaults.append(f"bf16 Adam moments not modelled: {rule.framework.precision_aware_refusal()}")
    return bf16_ends, fp8_params, moments


def row_layout(row: Row, model: ModelSpec, rule: SourceRule, n_gpus: int) -> tuple[Layout, list[str]]:
    """The layout a row states, with every blank filled by its source's default or a placeholder the completion
    replaces; `defaults` lists each filled knob in that order."""
    defaults: list[str] = []
    sizes = _row_sizes(row, n_gpus, defaults)
    tp, pp, dp, cp = sizes
    zero = _row_zero(row, rule, defaults)
    artifact = sc21_table_1(row)
    mb, vp = _row_schedule(row, model, pp, artifact, defaults)
    recompute, modules = _row_recompute(row, model, rule, defaults)
    ep, etp = _row_experts(row, model, sizes, defaults)
    offload, offload_modules = _row_offloads(row, model, pp, recompute, defaults)
    sp = _row_sequence_parallel(row, rule, tp, defaults)
    dtype = _row_dtype(row, rule, artifact, defaults)
    bf16_ends, fp8_params, moments = _row_precision_options(row, rule, dtype, zero, defaults)
    layout = Layout(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=ep,
        etp=etp,
        vp=vp,
        zero=zero,
        sequence_parallel=sp and tp > 1,
        recompute=recompute if recompute in RECOMPUTE_MODES else "none",  # type: ignore[arg-type]
        recompute_modules=modules,
        micro_batch=mb,
        global_batch=row.int_or("global_batch", 1) or 1,
        dtype=dtype,  # type: ignore[arg-type]
        flash_attention=rule.flash_attention,
        offload_layers=offload,
        offload_modules=offload_modules,
        bf16_first_layers=bf16_ends[0],
        bf16_last_layers=bf16_ends[1],
        fp8_param_gather=fp8_params,
        optimizer_moments_dtype=moments,  # type: ignore[arg-type]
    )
    return layout, defaults


# how notes name FP8 parameters: Megatron-core's flag and config field, NeMo's model.fp8_params, torchtitan's
# "FSDP float8 all-gather" (torchao enable_fsdp_float8_all_gather)
FP8_PARAMS_NOTE = re.compile(
    r"fp8[-_ ]param[-_ ]gather|fp8[-_]params\s*[=:]?\s*true|fp8_params\b(?!\s*[=:]\s*false)"
    r"|fsdp[-_ ]float8[-_ ]all[-_ ]gather|float8 all[-_ ]gather",
    re.IGNORECASE,
)


# how notes name bf16 Adam moments: Megatron-core's precision-aware optimizer and its dtype flags (not DeepSpeed's
# "BF16 optimizer", which keeps fp32 moments beside an fp32 gradient accumulator)
BF16_MOMENTS_NOTE = re.compile(
    r"bf16 (?:adam )?(?:optimizer states|moments)|precision[-_ ]aware[-_ ]optimizer"
    r"|exp[-_]avg(?:[-_]sq)?[-_]dtype\s*[=:]?\s*(?:torch\.)?(?:bf16|bfloat16)",
    re.IGNORECASE,
)


def bf16_moments_for(row: Row, defaults: list[str]) -> bool:
    """True where a row's run kept bf16 Adam moments (Layout.optimizer_moments_dtype): its notes say so, or it is a
    Megatron-Bridge DeepSeek-V3 run, whose recipe sets the precision-aware optimizer with bf16 moments
    (src/megatron/bridge/recipes/deepseek/deepseek_v3.py: use_precision_aware_optimizer, exp_avg_dtype and
    exp_avg_sq_dtype torch.bfloat16; the performance configs build on that recipe)."""
    if BF16_MOMENTS_NOTE.search(row.get("notes")):
        return True
    if megatron_bridge_dsv3(row):
        defaults.append("optimizer_moments_dtype=bf16 (Megatron-Bridge's DeepSeek-V3 recipe)")
        return True
    return False


def fp8_params_from_notes(notes: str) -> bool:
    """True where a row's notes say its FP8 run kept FP8 parameters (Layout.fp8_param_gather)."""
    return bool(FP8_PARAMS_NOTE.search(notes or ""))


def recompute_from_cell(text: str) -> str | None:
    """The recompute mode a row's cell names ("full", "Full (uniform, 1 layer)", "selective (core_attn)", "none",
    "no"); None for a blank or unrecognised cell."""
    word = re.match(r"\s*([a-z]+)", text.lower())
    if word is None:
        return None
    head = word.group(1)
    if head.startswith("full"):
        return "full"
    if head.startswith("selective") or head == "partial":
        return "selective"
    if head in ("none", "no", "off", "n", "false", "disabled"):
        return "none"
    return None


def dtype_from_cell(text: str) -> TrainDtype:
    """The compute dtype a row's dtype cell names: fp4 for NVFP4 (or MXFP4), fp8 for any FP8 recipe (per-tensor,
    MXFP8, FP8-CS/DS), fp16 when FP16 alone is named, else bf16 (a 16-bit run that does not say which)."""
    low = text.lower()
    if "fp4" in low:
        return "fp4"
    if "fp8" in low or "float8" in low:
        return "fp8"
    if low.startswith("fp16") or (re.search(r"\bfp16\b|float16", low) and "bf16" not in low):
        return "fp16"
    return "bf16"


_OFFLOAD_MODULE_LIST = re.compile(
    r"offload[-_]modules\s*[:=]?\s*\[?((?:[\"']?(?:attn_norm|core_attn|attn_proj|mlp_norm|expert_fc1|moe_act)"
    r"[\"']?[\s,]*)+)",
    re.IGNORECASE,
)


def offload_modules_from_notes(notes: str) -> tuple[str, ...]:
    """Megatron-core fine-grained offloading modules a row's notes name ("--offload-modules expert_fc1 moe_act",
    "offload_modules=['expert_fc1']"), in order."""
    match = _OFFLOAD_MODULE_LIST.search(notes)
    if not match:
        return ()
    names = re.findall("|".join(OFFLOAD_MODULES), match.group(1).lower())
    return tuple(dict.fromkeys(names))


_MODULE_LIST = re.compile(
    r"recompute[-_ ]modules?\s*[:=]?\s*([a-z_ ,]+)|recompute selective\s*\(([a-z_ ,]+)\)", re.IGNORECASE
)


def recompute_modules_from_notes(notes: str) -> tuple[str, ...]:
    """Megatron-core recompute modules a row's notes name ("--recompute-modules layernorm moe", "Recompute
    selective (moe_act, layernorm)"), in order. "up_proj" is mla_up_proj's name of mid-2025 (Megatron-LM
    docs/discussions/deepseek-v3-gb200-optimization: "the MLA up projection (`--recompute-modules mlp up_proj`)")."""
    match = _MODULE_LIST.search(notes)
    if not match:
        return ()
    words = [w for w in re.split(r"[\s,]+", (match.group(1) or match.group(2)).strip()) if w]
    known: list[str] = []
    for w in words:
        name = "mla_up_proj" if w.lower() == "up_proj" else w.lower()
        if name not in RECOMPUTE_MODULES:
            break  # the list ended: the next words are prose
        if name not in known:
            known.append(name)
    return tuple(known)


def row_framework(row: Row, rule: SourceRule, layout: Layout) -> Framework:
    fw = rule.framework
    if layout.zero >= 3 and fw.name == MEGATRON_2021.name:
        # Megatron-LM of 2021 had no ZeRO-3 of its own: those rows ran DeepSpeed's ZeRO-3 (row notes)
        fw = fw.with_(
            name=f"{fw.name}+deepspeed-zero3",
            zero_stages=DEEPSPEED.zero_stages,
            zero3_overlap=DEEPSPEED.zero3_overlap,
            zero3_rank_nic=DEEPSPEED.zero3_rank_nic,
            zero3_live_params=DEEPSPEED_ZERO3_LIVE_PARAMS,
            zero3_collectives_per_layer=DEEPSPEED.zero3_collectives_per_layer,
            comm_buffer_bytes=DEEPSPEED.comm_buffer_bytes,
            grad_reduce_bytes=DEEPSPEED.grad_reduce_bytes,
        )
    return framework_from_row_text(row, fw)


def framework_from_row_text(row: Row, fw: Framework) -> Framework:
    """The framework as the row's source and notes describe it, whatever the layout: PyTorch DDP in the SC21
    artifact, torch.compile, a node-deduplicating MoE dispatcher and the overlapped EP all-to-all. The planner's
    search of a row (app.validation.training_totals) and the replay of its stated layout (row_framework) share it."""
    artifact = sc21_table_1(row)
    if artifact is not None and artifact[2] == "torch":
        # PyTorch DDP: the gradient all-reduce overlaps the last micro-batch's backward
        fw = fw.with_(name=f"{fw.name}+torch-ddp", dp_overlap=1.0)
    # bf16 runs of Megatron-DeepSpeed use DeepSpeed's BF16_Optimizer (Framework.bf16_optimizer, applied by the
    # estimator for the row's dtype): BigScience's rows state its "extra 4 B/param, not sharded"
    text = f"{row.get('source')} {row.get('notes')}".lower()
    compiled = re.search(r"(?<!no )(?<!without )(?<!w/o )\b(?:torch\.)?compile\b", text) is not None
    if fw.name == TORCHTITAN.name and compiled:
        # torch.compile fuses each transformer block's pointwise chains and, in torchtitan of 2025 on, compiles
        # the loss (TORCHTITAN_COMPILE); before 2025 the loss stayed eager, as in the plain preset
        fw = TORCHTITAN_COMPILE
        dated = source_year_month(row.get("source"))
        if dated is not None and dated < (2025, 1):
            fw = fw.with_(
                name="torchtitan-fsdp2-compile-2024",
                logits_bytes_per_element=TORCHTITAN.logits_bytes_per_element,
                ce_bytes_per_logit=TORCHTITAN.ce_bytes_per_logit,
            )
    if fw.name == TORCHTITAN.name and _HAND_FUSED.search(text):
        # an FSDP stack with hand-written fused kernels for the same ops torch.compile fuses: the norm, the SwiGLU,
        # the rotary embedding and the cross-entropy (TinyLlama's lit-gpt: xformers' fused SwiGLU, FlashAttention's
        # fused RMSNorm, rotary and cross-entropy; jzhang38/TinyLlama README, "Training Details")
        fw = TORCHTITAN_COMPILE.with_(name="fsdp-hand-fused-kernels")
    notes = row.get("notes")
    dispatcher = dispatcher_from_notes(notes)
    if dispatcher != "alltoall":
        fw = fw.with_(moe_dispatcher=dispatcher)
    if _A2A_OVERLAP.search(notes):
        fw = fw.with_(moe_a2a_overlap=True)
    if _FAKE_BALANCED_GATE.search(notes):
        fw = fw.with_(moe_routing="contiguous")
    if _FUSED_GROUPED_EXPERTS.search(notes):
        fw = fw.with_fused_grouped_experts()
    return fw


# a node-deduplicating MoE dispatcher named in the notes ("dispatcher DeepEP", "HybridEP", "flex dispatcher with
# the DeepEP backend", or DeepSeek-V3's own "node-limited routing": each token crosses IB once per destination node
# and is forwarded to its experts over NVLink, arXiv 2412.19437 Sec. 3.2.2, the kernels later released as DeepEP);
# and the EP all-to-all overlapped with the other micro-batch's compute ("A2A_OVERLAP=1", the MoE model zoo's
# "+1f1b overlap", Megatron-Bridge's "moe_a2a_overlap=True", or DeepSeek-V3's DualPipe, which runs a forward and a
# backward chunk side by side so that their dispatch and combine hide behind each other's compute, Sec. 3.2.1)
# hand-fused pointwise kernels named in the row: "fused swiglu", "fused layernorm" / "fused rmsnorm", "fused cross
# entropy", "fused rotary"
# NeMo Automodel's benchmark router, "Fake balanced gate": token t goes to experts t·k … t·k + k − 1 (mod E)
# (nemo_automodel/components/moe/layers.py FakeBalancedGate), Framework.moe_routing "contiguous"
_FAKE_BALANCED_GATE = re.compile(r"\bfake balanced gate\b", re.IGNORECASE)
# Experts run as one fused grouped GEMM over device-side token counts, named in the notes or implied by a
# Megatron-Bridge full-iteration CUDA-graph MoE recipe, all of which set the op fuser
# (app.core.framework.FUSED_GROUPED_EXPERTS_SOURCE, Framework.with_fused_grouped_experts)
_FUSED_GROUPED_EXPERTS = re.compile(
    r"CUDA graphs \(full_iteration|use_transformer_engine_op_fuser\s*=\s*true|use-transformer-engine-op-fuser"
    r"|moe_use_grouped_tensor\s*=\s*true",
    re.IGNORECASE,
)
_HAND_FUSED = re.compile(r"\bfused (?:swiglu|layernorm|rmsnorm|cross[- ]entropy|rotary)\b", re.IGNORECASE)
_DEDUP_DISPATCHER = re.compile(r"\b(deepep|hybridep)\b|\bnode-limited routing\b", re.IGNORECASE)
_A2A_OVERLAP = re.compile(
    r"a2a_overlap\s*=\s*(?:1|true)\b|\b1f1b overlap\b|overlap-moe-expert-parallel-comm|\bdualpipe\b",
    re.IGNORECASE,
)


def dispatcher_from_notes(notes: str) -> str:
    """The MoE token dispatcher a row's notes name: "hybridep", "deepep" (DeepSeek-V3's node-limited routing ran
    the kernels later released as DeepEP) or "alltoall" (Megatron-core's default) when they name neither."""
    match = _DEDUP_DISPATCHER.search(notes)
    if match is None:
        return "alltoall"
    return (match.group(1) or "deepep").lower()


def source_year_month(source: str) -> tuple[int, int] | None:
    """(year, month) a source names ("…_202412_…", "…_2025-06_…"), if it names one."""
    match = re.search(r"(?<!\d)(20[1-3]\d)[-_]?(0[1-9]|1[0-2])(?!\d)", source)
    return (int(match.group(1)), int(match.group(2))) if match else None


def row_fabric(rule: SourceRule, gpu_name: str, gpus_per_node: int) -> FabricSpec:
    """The rule's fabric preset placed on the row's nodes (app.catalog.fabrics.fabric_for_node), or with the NIC
    count the rule states; for REFERENCE_FABRIC, the GPU's (app.catalog.fabrics.fabric_on_node, as a plan that
    names no fabric gets)."""
    from app.catalog.fabrics import fabric_on_node, find_fabric

    if rule.nics_per_node:
        return find_fabric(rule.fabric, nics_per_node=rule.nics_per_node)
    return fabric_on_node(rule.fabric or None, gpu_name, gpus_per_node)


# ---------------------------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class RowResult:
    row: int
    source: str
    model_name: str
    metric: str
    measured: float
    predicted: float | None = None
    error_pct: float | None = None
    skipped: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "model_name": self.model_name,
            "metric": self.metric,
            "measured": self.measured,
            "predicted": self.predicted,
            "error_pct": self.error_pct,
        }


_PEAK_PATTERNS = (
    r"\bof\s+(\d+(?:\.\d+)?)\s*TF",  # "41% of 989 TF"
    r"(\d+(?:\.\d+)?)\s*TF(?:LOP)?(?:/?s)?\s+(?:bf16\s+|fp8\s+|dense\s+)*peak",  # "989 TFLOPs peak"
    r"peak\s*(?:of\s*|=\s*|:\s*)?(\d+(?:\.\d+)?)\s*TF",  # "peak 989 TF", "peak = 312 TF"
)


def stated_peak_tflops(notes: str) -> float | None:
    """The per-GPU peak TFLOP/s a row's notes say its MFU was computed against, if they say."""
    for pattern in _PEAK_PATTERNS:
        match = re.search(pattern, notes, re.IGNORECASE)
        if match:
            value = float(match.group(1))
            if 10.0 <= value <= 100_000.0:
                return value
    return None


def stated_flop_convention(notes: str) -> str | None:
    """A model-FLOPs convention the notes name: "6N" (6 × parameters per token, no attention term) or "causal"
    (attention counted over the causal half); None = the Megatron convention (full s² attention)."""
    low = notes.lower()
    if re.search(r"\b6\s*[*·x×]?\s*n\b", low) and re.search(r"(no|without|excl\w*)\s+attention", low):
        return "6N"
    if re.search(r"causal\s+(attention\s+)?(flops|count)|attention\s+flops\s+(counted\s+)?causal", low):
        return "causal"
    return None


# Sources whose TFLOP/s follow a convention their rows do not state, with the evidence. Megatron-LM's throughput
# logging counted full s² attention until 2024 (NVIDIA/Megatron-LM issue #831, May 2024, at commit c3677e0; NeMo
# 24.03's TFLOP/s equal its tokens/s × full-attention model FLOPs to 0.1 %) and the causal half by July 2025
# ("seq_length / 2" in megatron/training/training.py num_floating_point_operations; AI-Hypercomputer/maxtext issue
# #1972 cites commit 250b794).
SOURCE_FLOP_CONVENTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "Megatron-MoE-ModelZoo",
        "causal",
        "the zoo's Qwen3-235B H100 rows: 245 and 276 'Per GPU TF' at 19.7 and 17.6 s per 2048 x 4096-token step on "
        "256 GPUs are tokens x causal-attention model FLOPs / time (246.7, 276.2); full s² attention gives 278, 311",
    ),
    (
        "deepseek-v3-gb200-optimization",
        "causal",
        "Megatron-LM's logging of late 2025 (the write-up's last step needs cuDNN 9.14), after the causal change",
    ),
)


def source_flop_convention(source: str) -> str | None:
    """The FLOP convention a source's TFLOP/s follow when its rows do not say (SOURCE_FLOP_CONVENTIONS)."""
    low = source.lower()
    for match, convention, _evidence in SOURCE_FLOP_CONVENTIONS:
        if match.lower() in low:
            return convention
    return None


def convention_flops_per_token(model: ModelSpec, seq_len: int, convention: str) -> float:
    """Training FLOPs per token under a named convention (app.core.model for the parts)."""
    if convention == "6N":
        counts = param_counts(model)
        return 6.0 * (counts.active - counts.embedding)
    return model_flops_per_token(model, seq_len, "causal")


def predict_metric(
    row: Row, est: Estimate, rule: SourceRule, model: ModelSpec, per_layer: dict[str, float]
) -> float:
    metric = row.get("measured_metric")
    step = est.step
    layout = est.layout
    seq = est.seq_len
    if metric == "iter_time_s":
        return step.total_s
    if metric == "tokens_per_s_per_gpu":
        return step.tokens_per_s_per_gpu
    if metric == "tflops_per_gpu":
        if rule.flops == "eq3":
            flops = narayanan_flops_per_iteration(
                layout.global_batch, seq, model.num_layers, model.hidden_size, model.vocab_size
            )
            return flops / step.total_s / layout.num_gpus / 1e12
        convention = stated_flop_convention(row.get("notes")) or source_flop_convention(row.get("source"))
        if convention is not None:
            per_token = convention_flops_per_token(model, seq, convention)
            return step.tokens_per_s_per_gpu * per_token / 1e12
        return step.model_tflops_per_gpu
    if metric == "mfu_pct":
        # the peak the source divided by, when the notes name it ("MFU 41% of 989 TF", "989 TFLOPs peak");
        # otherwise the dense peak of the compute dtype
        notes = row.get("notes")
        stated = stated_peak_tflops(notes)
        if stated:
            return step.model_tflops_per_gpu / stated * 100
        if re.search(r"bf16\s+(?:dense\s+)?(?:peak|mfu)|mfu\W{0,3}\(?\s*bf16", notes, re.IGNORECASE):
            # an FP8 run's MFU quoted against the 16-bit peak (torchtitan, Llama 3 "BF16 MFU")
            return step.model_tflops_per_gpu * 1e12 / est.cluster.gpu.peak("bf16") * 100
        return step.mfu * 100
    if metric == "layer_fwd_plus_bwd_ms":
        return 1e3 * (
            per_layer["forward"]
            + per_layer["backward"]
            + per_layer["recompute"]
            + per_layer["tp_comm"]
            + per_layer["cp_comm"]
            + per_layer["ep_comm"]
        )
    if metric == "mem_gib_per_gpu":
        notes = row.get("notes").lower()
        first_node = "first node" in notes
        stage = est.memory.stages[0] if first_node else est.memory.most_loaded
        if "nvidia-smi" in notes:
            return stage.total_bytes / GiB
        return stage.reserved_bytes / GiB
    if metric == "oom":
        return 1.0 if est.memory.most_loaded.total_bytes > est.memory.hbm_bytes else 0.0
    raise ValueError(f"unknown metric {metric!r}")


class RowSkipped(Exception):
    """A row the replay cannot evaluate, with the reason it reports."""


@dataclass(frozen=True)
class RowEstimate:
    """A row as the replay models it: the estimate and everything it was made from."""

    estimate: Estimate
    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    framework: Framework
    rule: SourceRule
    power_limit_w: float | None
    defaults: list[str]


def row_cluster(gpu: GPUSpec, n_gpus: int, rule: SourceRule) -> ClusterSpec:
    """The cluster of a row's run: whole nodes of the GPU's default size, its scale-up domain, the rule's fabric.
    Raises RowSkipped when the GPUs do not fill whole nodes."""
    gpn = min(gpu.default_gpus_per_node, n_gpus) if n_gpus else gpu.default_gpus_per_node
    if n_gpus % gpn:
        raise RowSkipped(f"{n_gpus} GPUs is not a whole number of {gpn}-GPU nodes")
    return ClusterSpec(
        gpu=gpu,
        num_nodes=n_gpus // gpn,
        gpus_per_node=gpn,
        scaleup_kind=gpu.scaleup_kind,
        scaleup_domain_gpus=scaleup_domain_for(gpu.scaleup_kind, n_gpus),
        fabric=row_fabric(rule, gpu.name, gpn),
    )


# FP8 with one scale per row (torchao's float8 "rowwise" recipe): the estimator's FP8 is per-tensor scaled
# (app.core.precision), and a row-wise recipe's casts (an amax per row of each operand and of its transpose) and
# scaled GEMMs run at rates it does not model; the one published source, torchtitan's June 2025 async-TP page,
# calls its row-wise baseline low ("being addressed here", pytorch/torchtitan issue #1207)
_ROW_WISE_FP8 = re.compile(r"\brow-?wise\b", re.IGNORECASE)
ROW_WISE_FP8_SKIP = "FP8 with row-wise scales (torchao's float8 rowwise recipe) is not modelled"
# A figure its own source footnotes as a known performance regression (a defect the next release fixes) measures the
# defect, not the software: Megatron-Bridge's 26.06.01 performance summary marks its GPT-OSS-120B rows so ("a known
# issue (NVIDIA/cudnn-frontend issue 256). It will be resolved with the next container release"), and its 26.08
# table measures the same GB200 layout 1.57x faster. The replay reads the footnote from the row's notes.
_SOURCE_REGRESSION = re.compile(r"performance regression\b.{0,200}\bknown issue", re.IGNORECASE)
SOURCE_REGRESSION_SKIP = "the source footnotes this figure as a known performance regression"


def estimate_row(row: Row, metric: str | None = None) -> RowEstimate:
    """Model one row under its source's rule and estimate it. Raises RowSkipped for a row that cannot be modelled
    (with `metric`, also for a time metric without the global batch), and the core's SpecError / NotFoundError /
    ValueError for an inconsistent one."""
    rule = rule_for_row(row)
    named = twin_by_name(row)
    missing = [c for c in ("layers", "hidden", "heads", "vocab") if not row.int_or(c, 0)]
    if missing and named is None:
        raise RowSkipped(f"model shape incomplete: {', '.join(missing)} blank or zero")
    if dtype_from_cell(row.get("dtype")) == "fp8" and _ROW_WISE_FP8.search(row.get("dtype")):
        raise RowSkipped(ROW_WISE_FP8_SKIP)
    if _SOURCE_REGRESSION.search(row.get("notes") or ""):
        raise RowSkipped(SOURCE_REGRESSION_SKIP)
    model = row_model(row, rule)
    gpu, power_limit_w = row_power(row, row_gpu(row))
    n_gpus = row.int_or("num_gpus", 0) or 0
    if not n_gpus and all(row.int_or(c, 0) for c in ("tp", "pp", "dp")):
        # a blank GPU count is the product of the stated sizes
        n_gpus = int(
            (row.int_or("tp", 1) or 1)
            * (row.int_or("pp", 1) or 1)
            * (row.int_or("dp", 1) or 1)
            * (row.int_or("cp", 1) or 1)
        )
    if metric in TIME_METRICS and not row.int_or("global_batch", None):
        raise RowSkipped(
            "global_batch is blank: the number of micro-batches per step (gradient accumulation, pipeline "
            "bubble) is unknown"
        )
    layout, defaults = row_layout(row, model, rule, n_gpus)
    ctx = _RowContext(row, model, gpu, power_limit_w, n_gpus, rule)
    if UNSTATED_MICRO_BATCH not in defaults and UNSTATED_VP not in defaults:
        return _estimate_layout(ctx, layout, defaults)
    return _best_completion(ctx, layout, defaults)


@dataclass(frozen=True)
class _RowContext:
    """What every completion of one row is estimated with: the row, its model (before the MTP layers and the pipeline
    split its notes state), its GPU and power limit (row_power), its GPU count and its source's rule."""

    row: Row
    model: ModelSpec
    gpu: GPUSpec
    power_limit_w: float | None
    n_gpus: int
    rule: SourceRule


# the placeholders row_layout writes for a blank micro_batch / interleave_v cell; estimate_row replaces them with
# the planner's best completion (_best_completion)
UNSTATED_MICRO_BATCH = "micro_batch=1"
UNSTATED_VP = "vp=1"
IMPUTED = "imputed: planner's best completion"
T = TypeVar("T")

# frameworks with an interleaved pipeline schedule: Megatron-LM since 2021 (--num-layers-per-virtual-pipeline-
# stage, Narayanan et al. 2021 Sec. 2.2.2), Megatron-core and NeMo (virtual_pipeline_model_parallel_size),
# torchtitan (pipelining_schedule Interleaved1F1B); DeepSpeed's PipelineEngine runs 1F1B alone
# (deepspeed/runtime/pipe/schedule.py TrainSchedule) and llm-foundry and NeMo Automodel have no pipeline
INTERLEAVING_FRAMEWORKS = frozenset(
    {MEGATRON_2021.name, MEGATRON_2022.name, MEGATRON_CORE.name, NEMO.name, TORCHTITAN.name}
)
# ... of which those whose stated layouts that name no interleaving may still have run one, so that a blank vp is
# the planner's best completion. Megatron-LM of 2021-23 interleaved only when asked: --num-layers-per-virtual-
# pipeline-stage defaults to None, which sets virtual_pipeline_model_parallel_size = None and runs plain 1F1B
# (megatron/arguments.py validate_args, NVIDIA/Megatron-LM 2021-23 and BigCode's 2023 fork of it), and the runs of
# that period that interleaved say so (Narayanan et al. 2021 Table 1 through its artifact's flag, Korthikanti et
# al. 2022's rows). So a stated layout of the 2021-22 presets without vp ran vp = 1.
VP_COMPLETED_FRAMEWORKS = INTERLEAVING_FRAMEWORKS - {MEGATRON_2021.name, MEGATRON_2022.name}


def completion_candidates(
    model: ModelSpec, layout: Layout, framework: Framework, free_mb: bool, free_vp: bool
) -> tuple[list[int], list[int]]:
    """The micro-batches and interleavings a row's blank cells may take: the planner's search space (micro-batches
    of 1 … DEFAULT_MAX_MICRO_BATCH in powers of two, 1 … DEFAULT_MAX_VP interleaved chunks, app.core.planner)
    narrowed to what the stated columns allow: a micro-batch that divides the batch of each data-parallel rank,
    an interleaving that divides each stage's layers, with pp > 1 and under a framework whose blank vp may have
    interleaved (VP_COMPLETED_FRAMEWORKS). Where the layers do not divide by pp, a Megatron-core framework's split
    counts the embedding and the loss as a layer each (pipeline_split_for), so the interleaving divides each stage's
    (L + 2) / p slots. A stated (or not free) knob keeps the layout's value."""
    per_rank = layout.global_batch // layout.dp if layout.global_batch % layout.dp == 0 else 0
    mbs = [layout.micro_batch]
    if free_mb and per_rank:
        powers = (2**k for k in range(DEFAULT_MAX_MICRO_BATCH.bit_length()))
        mbs = [m for m in powers if m <= DEFAULT_MAX_MICRO_BATCH and per_rank % m == 0]
    vps = [layout.vp]
    slots = model.num_layers
    if (
        slots % layout.pp
        and framework.name.startswith(MEGATRON_CORE_SPLIT_FRAMEWORKS)
        and even_split_layers(slots, layout.pp)
    ):
        # the embedding and the loss take a layer's slot each: Llama 3 405B's 126 layers on 16 stages run as
        # 7 | 8 … 8 | 7, "the first model chunk on the first stage has only the embedding, and the last model chunk
        # on the last stage has only output projection and loss calculation" (Llama 3 paper, arXiv 2407.21783,
        # Sec. 3.3.2, with an interleaved schedule); Megatron-core --account-for-embedding/loss-in-pipeline-split
        slots += 2
    if free_vp and layout.pp > 1 and framework.name in VP_COMPLETED_FRAMEWORKS and slots % layout.pp == 0:
        per_stage = slots // layout.pp
        vps = [v for v in range(1, DEFAULT_MAX_VP + 1) if per_stage % v == 0]
    return mbs, vps


def _best_completion(ctx: _RowContext, layout: Layout, defaults: list[str]) -> RowEstimate:
    """The row estimated at the planner's best completion of its blank micro_batch / interleave_v cells: every
    candidate pair (completion_candidates) through the row's own estimate, whose check_layout refuses what could
    not run (an interleaved schedule needs micro-batches a multiple of pp), those that fit in HBM kept, the fastest chosen (the smallest
    peak where none fits). Each imputed value is marked in the defaults; a knob with one candidate (vp without a
    pipeline) keeps its plain default."""
    mbs, vps = completion_candidates(
        ctx.model, layout, ctx.rule.framework, UNSTATED_MICRO_BATCH in defaults, UNSTATED_VP in defaults
    )
    free_mb = UNSTATED_MICRO_BATCH in defaults and len(mbs) > 1
    free_vp = UNSTATED_VP in defaults and len(vps) > 1
    if not (free_mb or free_vp):
        return _estimate_layout(ctx, layout, defaults)
    base = [
        d
        for d in defaults
        if not (free_mb and d == UNSTATED_MICRO_BATCH) and not (free_vp and d == UNSTATED_VP)
    ]
    tried: list[RowEstimate] = []
    for mb in mbs:
        for vp in vps:
            marks = list(base)
            if free_mb:
                marks.append(f"micro_batch={mb} ({IMPUTED})")
            if free_vp:
                marks.append(f"vp={vp} ({IMPUTED})")
            candidate = replace(layout, micro_batch=mb, vp=vp)
            try:
                tried.append(_estimate_layout(ctx, candidate, marks))
            except (SpecError, ValueError, ArithmeticError):
                continue  # a completion check_layout (run by the estimate) refuses: it could not run
    if not tried:
        return _estimate_layout(ctx, layout, defaults)
    chosen, fits = best_completion([(t.estimate, t) for t in tried])
    return chosen if fits else replace(chosen, defaults=[*chosen.defaults, NONE_FITS])


NONE_FITS = "no completion fits: the one with the smallest peak"


def best_completion(tried: Sequence[tuple[Estimate, T]]) -> tuple[T, bool]:
    """Of estimated completions, the fastest that fits in HBM, or where none fits the one with the smallest peak;
    and whether it fits."""
    fitting = [t for t in tried if t[0].memory.fits]
    if fitting:
        return max(fitting, key=lambda t: float(t[0].step.tokens_per_s))[1], True
    return min(tried, key=lambda t: float(t[0].memory.most_loaded.total_bytes))[1], False


def _estimate_layout(ctx: _RowContext, layout: Layout, defaults: list[str]) -> RowEstimate:
    """Estimate a row at one completed layout (the MTP layers and the pipeline split its notes state added)."""
    row, model, rule = ctx.row, ctx.model, ctx.rule
    defaults = list(defaults)
    mtp, mtp_source = mtp_layers_for(row, layout)
    if mtp:
        model = replace(model, mtp_layers=mtp)
        defaults.append(f"mtp_layers={mtp} ({mtp_source})")
    chunks = layout.pp * layout.vp
    split = pipeline_split_for(row, model, layout, rule.framework) if model.num_layers % chunks else None
    if split is not None:
        counts, why = split
        if len(set(counts[1:-1])) <= 1:
            layout = replace(layout, first_stage_layers=counts[0], last_stage_layers=counts[-1])
            defaults.append(
                f"uneven pipeline: first stage {counts[0]}, last stage {counts[-1]} layers ({why})"
            )
        else:
            layout = replace(layout, stage_layers=counts)
            defaults.append(f"uneven pipeline: stages of {'/'.join(map(str, counts))} layers ({why})")
    elif model.num_layers % chunks:
        # uneven pipeline partitions (DeepSpeed 'type:transformer|embedding'): the bottleneck stage holds
        # ceil(L / p) layers, so model every stage at that depth
        deeper = -(-model.num_layers // chunks) * chunks
        defaults.append(f"uneven pipeline: {model.num_layers} layers modelled as {deeper}")
        model = replace(model, num_layers=deeper)
    cluster = row_cluster(ctx.gpu, ctx.n_gpus, rule)
    fw = row_framework(row, rule, layout)
    reshard = RESHARD_MODES[framework_reshard(fw.pipeline_reshard, layout.pp, layout.zero)]
    if reshard != layout.reshard_after:
        layout = replace(layout, reshard_after=reshard)  # type: ignore[arg-type]
        defaults.append(f"reshard_after={reshard} ({fw.name}'s pipeline schedule)")
    options = EstimateOptions(framework=fw, power_limit_w=ctx.power_limit_w)
    est = estimate(model, cluster, layout, row.int_or("seq_len", 2048) or 2048, options=options)
    return RowEstimate(est, model, cluster, layout, fw, rule, ctx.power_limit_w, defaults)


def evaluate_row(row: Row) -> RowResult:
    metric = row.get("measured_metric")
    try:
        measured = float(row.get("measured_value"))
    except ValueError:
        measured = float("nan")
    result = RowResult(row.index, row.get("source"), row.get("model_name"), metric, measured)
    if metric not in METRICS:
        result.skipped = f"unknown metric {metric!r}"
        return result
    if measured != measured:
        result.skipped = "measured_value is not a number"
        return result
    if metric == "oom" and measured not in (0.0, 1.0):
        result.skipped = (
            f"measured_value of an oom row must be 1 (ran out of memory) or 0 (fit), got {measured:g}"
        )
        return result
    if metric != "oom" and not (0.0 < measured < float("inf")):
        result.skipped = f"measured_value must be a positive finite number, got {measured:g}"
        return result
    try:
        modelled = estimate_row(row, metric)
        est, model, layout, fw = modelled.estimate, modelled.model, modelled.layout, modelled.framework
        per_layer: dict[str, float] = {}
        if metric == "layer_fwd_plus_bwd_ms":
            from app.core.efficiency import training_curves
            from app.core.step import StepRun, stage_times

            linear, attn = training_curves(modelled.cluster.gpu, layout.dtype, None, modelled.power_limit_w)
            run = StepRun(
                model, modelled.cluster, layout, est.seq_len, linear, attn, framework_for(fw, layout)
            )
            stage_times(run, per_layer)
        predicted = predict_metric(row, est, modelled.rule, model, per_layer)
    except RowSkipped as exc:
        result.skipped = str(exc)
        return result
    except SpecError as exc:
        result.skipped = f"inconsistent row: {exc}"
        return result
    except NotFoundError as exc:
        result.skipped = str(exc)
        return result
    except (ValueError, ArithmeticError, TypeError) as exc:
        # a row the checks above let through but the model cannot evaluate: reported, the other rows go on
        result.skipped = f"cannot evaluate this row: {type(exc).__name__}: {exc}"
        return result
    result.predicted = predicted
    if metric != "oom":
        result.error_pct = (predicted - measured) / measured * 100 if measured else None
    result.detail = {
        "replayed": modelled,  # the row as estimated, for readers that need its model, cluster or layout
        "defaults": modelled.defaults,
        "framework": fw.name,
        "fabric": modelled.cluster.fabric.name,
        "regime": accuracy_regime(model, est.seq_len, estimate_layer_pass_seconds(est), fw.moe_dispatcher),
        # a run that was measured ran, so it fit: a peak above HBM here is a memory-model (or unstated-setting) miss
        "over_hbm": est.memory.most_loaded.total_bytes > est.memory.hbm_bytes,
    }
    return result


@dataclass
class Report:
    rows: list[RowResult]

    def _errors(self, metrics: Iterable[str]) -> list[float]:
        wanted = set(metrics)
        return [
            r.error_pct
            for r in self.rows
            if r.metric in wanted and r.skipped is None and r.error_pct is not None
        ]

    @staticmethod
    def _stats(errors: list[float]) -> dict[str, Any]:
        if not errors:
            return {"n": 0, "mape_pct": None, "max_abs_pct": None}
        return {
            "n": len(errors),
            "mape_pct": sum(abs(e) for e in errors) / len(errors),
            "max_abs_pct": max(abs(e) for e in errors),
        }

    def summary(self) -> dict[str, Any]:
        ooms = [r for r in self.rows if r.metric == "oom" and r.skipped is None]
        correct = sum(1 for r in ooms if r.predicted == r.measured)
        return {
            "time": self._stats(self._errors(TIME_METRICS)),
            "memory": self._stats(self._errors(MEMORY_METRICS)),
            "oom": {"n": len(ooms), "correct": correct, "wrong": len(ooms) - correct},
            "skipped": [{"row": r.row, "reason": r.skipped} for r in self.rows if r.skipped is not None],
        }

    def ran_but_predicted_oom(self) -> dict[str, Any]:
        """Measured runs (every metric but `oom`) whose predicted peak exceeds HBM: they ran, so they fit."""
        ran = [r for r in self.rows if r.skipped is None and r.metric != "oom" and "over_hbm" in r.detail]
        return {"n": len(ran), "rows": [r.row for r in ran if r.detail["over_hbm"]]}

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows if r.skipped is None], "summary": self.summary()}


def replay(rows: Iterable[Row]) -> Report:
    return Report([evaluate_row(r) for r in rows])


def render_table(report: Report) -> str:
    lines = [
        f"{'row':>4}  {'source':<28} {'model':<26} {'metric':<22} {'measured':>10} {'predicted':>10} {'error':>8}"
    ]
    for r in report.rows:
        src = r.source[:28]
        if r.skipped is not None:
            lines.append(f"{r.row:>4}  {src:<28} {r.model_name[:26]:<26} {r.metric:<22} skipped: {r.skipped}")
            continue
        err = "" if r.error_pct is None else f"{r.error_pct:+7.1f}%"
        if r.metric == "oom":
            err = "ok" if r.predicted == r.measured else "WRONG"
        lines.append(
            f"{r.row:>4}  {src:<28} {r.model_name[:26]:<26} {r.metric:<22} {r.measured:>10.4g} "
            f"{(r.predicted or 0.0):>10.4g} {err:>8}"
        )
    s = report.summary()
    lines.append("")

    def fmt(block: dict[str, Any]) -> str:
        if not block["n"]:
            return "n=0"
        return f"n={block['n']}  MAPE {block['mape_pct']:.1f} %  max |error| {block['max_abs_pct']:.1f} %"

    lines.append(f"time-like metrics: {fmt(s['time'])}")
    lines.append(f"memory:            {fmt(s['memory'])}")
    lines.append(f"OOM outcomes:      {s['oom']['correct']}/{s['oom']['n']} right")
    over = report.ran_but_predicted_oom()  # text only: the --json document keeps its documented shape
    listed = f" (rows {', '.join(map(str, over['rows']))})" if over["rows"] else ""
    lines.append(f"ran, predicted OOM: {len(over['rows'])} of {over['n']} measured runs{listed}")
    if s["skipped"]:
        lines.append(f"skipped rows:      {len(s['skipped'])}")
    return "\n".join(lines)


def speed_error(r: RowResult) -> float:
    """Error on a common axis: predicted speed / measured speed − 1, for rates and for times alike."""
    if r.metric in ("iter_time_s", "layer_fwd_plus_bwd_ms") and r.predicted:
        return (r.measured / r.predicted - 1) * 100
    return r.error_pct or 0.0


def write_plot(report: Report, path: Path | str) -> Path:
    """Predicted vs measured: time-like metrics as error per row (by source), memory as GiB vs GiB."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.6, 1]})
    sources: dict[str, list[RowResult]] = {}
    for r in report.rows:
        if r.skipped is None and r.error_pct is not None:
            sources.setdefault(r.source.split(" ")[0].split("/")[-1][:24], []).append(r)
    markers = "osD^v<>ph*"
    for i, (src, rows) in enumerate(sorted(sources.items())):
        timed = [r for r in rows if r.metric in TIME_METRICS]
        mem = [r for r in rows if r.metric in MEMORY_METRICS]
        if timed:
            ax_time.scatter(
                [r.row for r in timed], [speed_error(r) for r in timed], label=src, marker=markers[i % 10]
            )
        if mem:
            ax_mem.scatter(
                [r.measured for r in mem], [r.predicted for r in mem], label=src, marker=markers[i % 10]
            )
    for band, style in ((5, ":"), (10, "--")):
        ax_time.axhline(band, color="grey", ls=style, lw=0.8)
        ax_time.axhline(-band, color="grey", ls=style, lw=0.8)
    ax_time.axhline(0, color="black", lw=0.8)
    s = report.summary()
    t = s["time"]
    ax_time.set_title(
        f"time-like metrics: n={t['n']}, MAPE {t['mape_pct']:.1f} %, max |err| {t['max_abs_pct']:.1f} %"
        if t["n"]
        else "time-like metrics"
    )
    ax_time.set_xlabel("row of the validation CSV")
    ax_time.set_ylabel("predicted speed vs measured (%)  (> 0: model too optimistic)")
    ax_time.legend(fontsize=7, loc="lower left")
    lim = (
        max([60.0] + [r.measured for r in report.rows if r.metric in MEMORY_METRICS and r.skipped is None])
        * 1.1
    )
    xs = [0.0, lim]
    ax_mem.plot(xs, xs, color="black", lw=0.8)
    for frac, style in ((0.05, ":"), (0.15, "--")):
        ax_mem.plot(xs, [x * (1 + frac) for x in xs], color="grey", ls=style, lw=0.8)
        ax_mem.plot(xs, [x * (1 - frac) for x in xs], color="grey", ls=style, lw=0.8)
    m = s["memory"]
    ax_mem.set_title(
        f"memory per GPU: n={m['n']}, MAPE {m['mape_pct']:.1f} %" if m["n"] else "memory per GPU"
    )
    ax_mem.set_xlabel("measured (GiB)")
    ax_mem.set_ylabel("predicted (GiB)")
    ax_mem.set_xlim(0, lim)
    ax_mem.set_ylim(0, lim)
    ax_mem.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
