"""Every scenario knob, declared once: name, type, range or choices, unit, label, help text, CLI flag and source.

The scenario schema (`app.schemas.scenario`: each field's range or allowed values and its OpenAPI description),
the command line's options (`clusterplan search`), the plan builder's inputs (`templates/plan_new.html` labels,
units, hints, min/max, select options; `app.web.pages._builder` parsing) and the saved-plan comparison labels
(`app.services.plan_fields`) read them from here; `tests/web/test_knob_registry.py` fails when a range, a choice
list or a help text is written anywhere else.

A knob with `generic=True` needs nothing but this record and its `Layout` field: the schema field, the builder's
state, input, query and scenario round trip, and the saved-plan label are made from the record
(docs/architecture.md, "Adding a knob").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.core.attention import SELECTABLE_ATTENTION_BACKENDS
from app.core.framework import FUSED_GROUPED_EXPERTS_SOURCE
from app.core.layout import (
    MOMENTS_DTYPES,
    OFFLOAD_MODULES,
    OPTIMIZERS,
    RECOMPUTE_MODES,
    RECOMPUTE_MODULES,
    RESHARD_MODES,
    TRAIN_DTYPES,
)
from app.core.model import MAX_MTP_LAYERS

# Upper bounds: generous beyond any real run, small enough that every product the estimator forms stays exact in
# 64-bit arithmetic and every value fits the database.
MAX_PARALLEL = (
    2**20
)  # tp, pp, dp, cp, ep, etp: 1,048,576 GPUs, ~10x the largest cluster built (xAI Colossus, 2025)
MAX_VIRTUAL_STAGES = 10_000  # vp: each model chunk holds at least one layer (ModelSpec num_layers ≤ 10,000)
MAX_BATCH = 2**24  # micro_batch, global_batch: 16.7M sequences; Llama 3 405B trained with 16M tokens = 2,048
MAX_LAYERS = 100_000  # layer counts, as the other layer fields here
MAX_NODES = 100_000  # cluster.nodes: 800,000 GPUs at 8 per node, above the largest cluster built
MAX_GPUS_PER_NODE = 576  # NVIDIA Rubin Ultra NVL576, the largest scale-up domain announced (GTC 2025)
MAX_SEQ_LEN = 10_000_000  # training.seq_len: Llama 4 Scout's 10M-token context window (Meta, April 2025)
MAX_LISTED_STAGES = 1024  # layout.stage_layers: 64x the deepest published pipeline (Llama 3 405B, pp = 16)

# "scenario": a field of the scenario document itself (its path is the bare name, as a 422 gives it)
Section = Literal["cluster", "layout", "training", "scenario"]
# "counts": a list of whole numbers, each within ge..le (one per pipeline stage)
Kind = Literal["int", "float", "bool", "choice", "list", "counts", "text"]


@dataclass(frozen=True)
class Knob:
    """One scenario field. `ge` / `gt` / `le`: its range (None = unbounded); `optional`: None (unset) is allowed;
    `zero_unset`: the plan builder's input takes 0 for unset (its smallest value is then 0); `symbol`: the short name the saved-plan comparison adds to the label;
    `cli_flag`: the `clusterplan search` option that sets it (None = scenario file only); `source`: the framework
    flag or paper the knob follows; `generic`: the schema field and the builder input are made from this record.
    `choices`: a choice knob's values, or the items a list knob may hold (the schema's enum, in this order);
    `choice_labels`: the builder's text for each choice (empty: the value itself), or for each whole number from
    `ge` to `le` of an int knob the builder offers as a select; `max_items`: a list's length. A "counts" knob's
    `ge` / `le` bound each of its numbers."""

    name: str
    section: Section
    kind: Kind
    help: str
    label: str = ""
    unit: str = ""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    optional: bool = False
    symbol: str = ""
    cli_flag: str | None = None
    source: str = ""
    generic: bool = False
    zero_unset: bool = False
    step: float | None = None  # the builder's step for a float input (None: whole numbers)
    choices: tuple[str, ...] = ()
    choice_labels: tuple[str, ...] = ()
    max_items: int | None = None

    @property
    def path(self) -> str:
        """'layout.tp': the name a 422 and the saved-plan comparison give the field ('attention_backend' for a
        field of the scenario itself)."""
        return self.name if self.section == "scenario" else f"{self.section}.{self.name}"

    @property
    def options(self) -> tuple[tuple[str, str], ...]:
        """The builder's select options: (value, text) for each choice, or for each whole number of a labelled int
        knob's range."""
        if self.kind == "int" and self.choice_labels:
            values = tuple(str(v) for v in range(int(self.ge or 0), int(self.le or 0) + 1))
            return tuple(zip(values, self.choice_labels, strict=True))
        return tuple(zip(self.choices, self.choice_labels or self.choices, strict=True))

    @property
    def choices_text(self) -> str:
        """'bf16 | fp16 | fp8 | fp4': the allowed values, as the command line's help shows them."""
        return " | ".join(self.choices)

    def choice_error(self) -> str:
        """'one of none, selective, full', as the builder and the command line name a refused value."""
        return f"one of {', '.join(self.choices)}"

    @property
    def compare_label(self) -> str:
        """The label in the saved-plan comparison: 'Tensor parallel (tp)'."""
        return f"{self.label} ({self.symbol})" if self.symbol else self.label

    @property
    def builder_min(self) -> float:
        """The builder's smallest value: 0 stands for unset where the field may be unset."""
        return 0 if self.zero_unset or self.ge is None else self.ge

    @property
    def builder_hint(self) -> str:
        """The builder's hint under the input: the help text, and what 0 means where 0 stands for unset."""
        if self.kind in ("list", "counts"):
            return f"{self.help}; comma-separated"
        return f"{self.help}; 0 = unset" if self.zero_unset else self.help

    def range_text(self) -> str:
        """'a whole number from 1 to 1,048,576', as the builder names a refused value."""
        if self.kind == "int":
            return f"a whole number from {int(self.builder_min):,} to {int(self.le or 0):,}"
        if self.kind == "counts":
            return (
                f"whole numbers from {int(self.ge or 0):,} to {int(self.le or 0):,}, at most {self.max_items:,}, "
                "separated by commas"
            )
        return f"a number from {self.builder_min:g} to {self.le:g}"


def _parallel(name: str, help: str, label: str, unit: str = "GPUs", **more: Any) -> Knob:
    """A parallel size: a whole number from 1 to MAX_PARALLEL, shown with its symbol."""
    return Knob(
        name, "layout", "int", help, label=label, unit=unit, ge=1, le=MAX_PARALLEL, symbol=name, **more
    )


KNOBS: tuple[Knob, ...] = (
    # ---- cluster -----------------------------------------------------------------------------------------------
    Knob(
        "nodes",
        "cluster",
        "int",
        "number of nodes (servers)",
        label="Nodes",
        unit="nodes",
        ge=1,
        le=MAX_NODES,
        cli_flag="--nodes",
    ),
    Knob(
        "gpus_per_node",
        "cluster",
        "int",
        "GPUs per node; default: the GPU's usual server (8)",
        label="GPUs per node",
        unit="GPUs",
        ge=1,
        le=MAX_GPUS_PER_NODE,
        optional=True,
        cli_flag="--gpus-per-node",
    ),
    # ---- training ----------------------------------------------------------------------------------------------
    Knob(
        "seq_len",
        "training",
        "int",
        "tokens per sequence",
        label="Sequence length",
        unit="tokens",
        ge=1,
        le=MAX_SEQ_LEN,
        cli_flag="--seq-len",
    ),
    # ---- layout: parallel sizes --------------------------------------------------------------------------------
    _parallel(
        "tp",
        "tensor parallel size (inside the scale-up domain)",
        "Tensor parallel",
        source="Megatron-core --tensor-model-parallel-size",
    ),
    _parallel(
        "pp",
        "pipeline parallel stages",
        "Pipeline stages",
        unit="stages",
        source="Megatron-core --pipeline-model-parallel-size",
    ),
    Knob(
        "vp",
        "layout",
        "int",
        "interleaved model chunks per stage (1 = plain 1F1B)",
        label="Interleaved chunks",
        unit="per stage",
        ge=1,
        le=MAX_VIRTUAL_STAGES,
        symbol="vp",
        source="Megatron-core --num-virtual-stages-per-pipeline-rank; Narayanan et al. 2021 Sec. 2.2.2",
    ),
    _parallel(
        "dp",
        "data parallel size; default: GPUs / (tp·pp·cp)",
        "Data parallel",
        unit="replicas",
        optional=True,
    ),
    _parallel(
        "cp",
        "context parallel size (sequence split for attention)",
        "Context parallel",
        source="Megatron-core --context-parallel-size",
    ),
    _parallel(
        "ep",
        "expert parallel size (MoE models)",
        "Expert parallel",
        source="Megatron-core --expert-model-parallel-size",
    ),
    _parallel(
        "etp",
        "expert tensor parallel size under MoE parallel folding (Megatron-core --expert-tensor-parallel-size); "
        "unset = tp, with ep carved out of dp·cp",
        "Expert tensor parallel",
        optional=True,
        zero_unset=True,
        source="Megatron-core --expert-tensor-parallel-size",
    ),
    # ---- layout: pipeline schedule -----------------------------------------------------------------------------
    Knob(
        "microbatch_group",
        "layout",
        "int",
        "interleaved schedule (vp > 1) only: micro-batches each model chunk runs in a row before the next chunk "
        "(Megatron-core --microbatch-group-size-per-virtual-pipeline-stage); from pp to the micro-batches per step; "
        "each one above pp keeps vp − 1 more chunk activations in flight on every stage; unset = pp",
        label="Micro-batches per pipeline round",
        unit="micro-batches",
        ge=1,
        le=MAX_BATCH,
        optional=True,
        zero_unset=True,
        source="Megatron-core schedules.py get_pp_rank_microbatches: warm-up 2(p − i − 1) + (v − 1)·g",
        generic=True,
    ),
    Knob(
        "first_stage_layers",
        "layout",
        "int",
        "transformer layers on the first pipeline stage (Megatron-core --decoder-first-pipeline-num-layers); the "
        "layers left over split evenly over the stages between; unset = an even split. One layer fewer than the "
        "middle stages gives the embedding a layer's slot",
        label="First stage layers",
        unit="layers",
        ge=1,
        le=MAX_LAYERS,
        optional=True,
        zero_unset=True,
        source="Megatron-core --decoder-first-pipeline-num-layers",
    ),
    Knob(
        "last_stage_layers",
        "layout",
        "int",
        "transformer layers on the last pipeline stage (Megatron-core --decoder-last-pipeline-num-layers); one "
        "fewer than the middle stages gives the LM head and loss a layer's slot (e.g. Llama-3.1-405B, 126 layers "
        "on pp = 16: first 7, last 7, 8 on each other stage)",
        label="Last stage layers",
        unit="layers",
        ge=1,
        le=MAX_LAYERS,
        optional=True,
        zero_unset=True,
        source="Megatron-core --decoder-last-pipeline-num-layers",
    ),
    Knob(
        "stage_layers",
        "layout",
        "counts",
        "transformer layers of every pipeline stage, first to last (pp numbers adding up to the model's layers), "
        "for splits whose middle stages differ too (a Megatron-core --pipeline-model-parallel-layout); empty = "
        "derived; not with first_stage_layers / last_stage_layers",
        label="Layers per stage",
        unit="layers",
        ge=1,
        le=MAX_LAYERS,
        max_items=MAX_LISTED_STAGES,
        source="Megatron-core --pipeline-model-parallel-layout",
    ),
    # ---- layout: choices and switches ------------------------------------------------------------------------
    Knob(
        "sequence_parallel",
        "layout",
        "bool",
        "Megatron sequence parallelism (needs tp > 1; the builder leaves it off at tp = 1, as Megatron-LM does)",
        label="Sequence parallel",
        source="Megatron-core --sequence-parallel; Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4.2.2",
    ),
    Knob(
        "recompute",
        "layout",
        "choice",
        "activation recompute: none, selective (the modules of recompute_modules) or full (whole transformer "
        "layers, recompute_layers of them per stage)",
        label="Activation recompute",
        choices=RECOMPUTE_MODES,
        source="Megatron-core --recompute-granularity; Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 5",
    ),
    Knob(
        "recompute_modules",
        "layout",
        "list",
        "with recompute='selective': Megatron-core's --recompute-modules (default core_attn); layernorm, mlp "
        "(dense layers), moe, moe_act, shared_experts (MoE layers), mla_up_proj (multi-head latent attention)",
        label="Recompute modules",
        choices=RECOMPUTE_MODULES,
        max_items=len(RECOMPUTE_MODULES),
        source="Megatron-core --recompute-modules",
    ),
    Knob(
        "dtype",
        "layout",
        "choice",
        "compute dtype of the linear layers: bf16, fp16, fp8 (per-tensor scaled FP8) or fp4 (NVFP4, Blackwell); "
        "attention runs in 16 bit",
        label="Compute precision",
        choices=TRAIN_DTYPES,
        choice_labels=("BF16", "FP16", "FP8", "NVFP4"),
        cli_flag="--dtype",
        source="Megatron-core --bf16 / --fp16 / --fp8-format / --fp4-format",
    ),
    Knob(
        "flash_attention",
        "layout",
        "bool",
        "fused attention (no s² score tensors): keeps one fp32 log-sum-exp per query and head instead",
        label="Flash attention",
        source="Dao et al. 2022 (arXiv 2205.14135)",
    ),
    Knob(
        "optimizer",
        "layout",
        "choice",
        "adamw or adam: the same states (fp32 master weights, two moments), so the same estimate",
        label="Optimizer",
        choices=OPTIMIZERS,
        source="Megatron-core --optimizer adam (decoupled weight decay, AdamW)",
    ),
    Knob(
        "offload_modules",
        "layout",
        "list",
        "Megatron-core fine-grained activation offloading (--offload-modules): modules whose input activations go "
        "to host memory in every layer; expert_fc1 and moe_act for MoE models; not with recompute='full' or "
        "offload_layers",
        label="Offloaded modules",
        choices=OFFLOAD_MODULES,
        max_items=len(OFFLOAD_MODULES),
        source="Megatron-core --fine-grained-activation-offloading --offload-modules",
    ),
    Knob(
        "reshard_after",
        "layout",
        "choice",
        "zero = 3 only: when FSDP frees the gathered parameters. forward: after each forward, gathered again for "
        "the backward (FSDP2 reshard_after_forward=True, DeepSpeed ZeRO-3); backward: kept from the forward to the "
        "backward of each micro-batch (reshard_after_forward=False; Llama 3); step: parameters and gradients kept "
        "unsharded across the step's micro-batches, one all-gather and one reduce-scatter per step (torchtitan's "
        "pipeline schedules)",
        label="ZeRO-3 re-shard after",
        choices=RESHARD_MODES,
        choice_labels=(
            "forward (FSDP default)",
            "backward (kept to the backward)",
            "step (kept across micro-batches)",
        ),
        source="PyTorch FSDP2 fully_shard(reshard_after_forward); arXiv 2407.21783 Sec. 3.3.2",
    ),
    # ---- layout: batch, sharding, recompute, offload ---------------------------------------------------------
    Knob(
        "micro_batch",
        "layout",
        "int",
        "sequences per micro-batch",
        label="Micro-batch",
        unit="sequences",
        ge=1,
        le=MAX_BATCH,
        source="Megatron-core --micro-batch-size",
    ),
    Knob(
        "global_batch",
        "layout",
        "int",
        "sequences per optimizer step",
        label="Global batch",
        unit="sequences",
        ge=1,
        le=MAX_BATCH,
        cli_flag="--global-batch",
        source="Megatron-core --global-batch-size",
    ),
    Knob(
        "zero",
        "layout",
        "int",
        "0 none, 1 distributed optimizer, 2 + gradients, 3 + weights (FSDP)",
        label="ZeRO stage",
        ge=0,
        le=3,
        choice_labels=("0 (none)", "1 (optimizer)", "2 (+ gradients)", "3 (+ weights)"),
        source="Rajbhandari et al. 2020 (arXiv 1910.02054) Sec. 5",
    ),
    Knob(
        "recompute_layers",
        "layout",
        "int",
        "with recompute='full': layers per stage recomputed (None = all)",
        label="Recomputed layers",
        unit="layers",
        ge=0,
        le=MAX_LAYERS,
        optional=True,
        source="Megatron-core --recompute-num-layers",
    ),
    Knob(
        "offload_layers",
        "layout",
        "int",
        "layers whose saved activations are offloaded to host memory during the forward pass (Megatron-core "
        "--cpu-offloading-num-layers; needs pp = 1 and recompute = 'none'); 0 = none",
        label="Offloaded layers",
        unit="layers",
        ge=0,
        le=MAX_LAYERS,
        source="Megatron-core --cpu-offloading-num-layers",
    ),
    Knob(
        "optimizer_offload",
        "layout",
        "float",
        "share of each GPU's optimizer states (fp32 master weights and Adam moments) kept and updated on the host "
        "by a CPU AdamW (Megatron-core --optimizer-cpu-offload --optimizer-offload-fraction); ZeRO 0-2; 0 = none",
        label="Optimizer offload",
        unit="share",
        ge=0.0,
        le=1.0,
        step=0.05,
        source="Megatron-core --optimizer-offload-fraction",
    ),
    # ---- layout: precision -------------------------------------------------------------------------------------
    Knob(
        "bf16_first_layers",
        "layout",
        "int",
        "with dtype fp8 or fp4: transformer layers at the start of the network kept 16-bit (Megatron-core "
        "--first-last-layers-bf16 --num-layers-at-start-in-bf16); 0 = none",
        label="16-bit layers at the start",
        unit="layers",
        ge=0,
        le=MAX_LAYERS,
        source="Megatron-core --num-layers-at-start-in-bf16",
    ),
    Knob(
        "bf16_last_layers",
        "layout",
        "int",
        "with dtype fp8 or fp4: transformer layers at the end kept 16-bit (--num-layers-at-end-in-bf16; "
        "Megatron-Bridge's FP8 current-scaling recipe keeps 1 + 1, NVIDIA's NVFP4 recipe about 15 % of the layers, "
        "most at the end); 0 = none",
        label="16-bit layers at the end",
        unit="layers",
        ge=0,
        le=MAX_LAYERS,
        source="Megatron-core --num-layers-at-end-in-bf16; arXiv 2509.25149",
    ),
    Knob(
        "fp8_param_gather",
        "layout",
        "bool",
        "with dtype fp8: working weights kept and all-gathered as FP8 tensors, 1 B per parameter (Megatron-core "
        "--fp8-param-gather, NeMo fp8_params, Megatron-Bridge's FP8 presets: zero ≥ 1; torchao's FSDP2 float8 "
        "all-gather: zero = 3); master weights, Adam moments and gradients unchanged",
        label="FP8 parameters",
        cli_flag="--fp8-params",
        source="Megatron-core --fp8-param-gather",
    ),
    Knob(
        "optimizer_moments_dtype",
        "layout",
        "choice",
        "Adam first and second moments: fp32, or bf16 with Megatron-core's precision-aware optimizer "
        "(--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16; needs the distributed "
        "optimizer, zero ≥ 1): 4 B per parameter instead of 8",
        label="Adam moments",
        choices=MOMENTS_DTYPES,
        cli_flag="--optimizer-moments",
        source="Megatron-core --use-precision-aware-optimizer --exp-avg-dtype --exp-avg-sq-dtype",
    ),
    Knob(
        "mtp_layers",
        "layout",
        "int",
        "deprecated: set the model's mtp_layers. Multi-token-prediction modules trained on the last pipeline stage "
        "(Megatron-core --mtp-num-layers; DeepSeek-V3: 1), applied to the model; unset = the model's own; a model "
        "with a different non-zero mtp_layers is refused",
        label="Multi-token-prediction modules",
        unit="modules",
        ge=0,
        le=MAX_MTP_LAYERS,
        optional=True,
        zero_unset=True,
        cli_flag="--mtp-layers",
        source="Megatron-core --mtp-num-layers; DeepSeek-V3 (arXiv 2412.19437) Sec. 2.2",
    ),
    # ---- the scenario's own fields: framework kernels and MoE communication ----------------------------------
    Knob(
        "moe_dispatcher",
        "scenario",
        "choice",
        "MoE token dispatcher: alltoall (Megatron-core's default NCCL all-to-all: every top-k copy of a token "
        "is sent) or deepep / hybridep (Megatron-core's flex dispatcher: one copy per destination rank, and one "
        "per destination node over the network, fanned out over NVLink); MoE models only",
        label="MoE token dispatcher",
        choices=("alltoall", "deepep", "hybridep"),
        choice_labels=("all-to-all (NCCL)", "DeepEP", "HybridEP"),
        cli_flag="--moe-dispatcher",
        source="Megatron-core --moe-token-dispatcher-type alltoall | flex --moe-flex-dispatcher-backend",
    ),
    Knob(
        "moe_fused_grouped_gemm",
        "scenario",
        "bool",
        "run the experts as one fused grouped GEMM over device-side token counts (Megatron-core "
        "--use-transformer-engine-op-fuser, which full-iteration CUDA graphs of MoE layers need) instead of "
        "Transformer Engine's GroupedLinear, one cuBLAS call per local expert at about 33 µs each; MoE models on "
        "megatron-core or nemo only (the other presets already run one grouped kernel)",
        label="Fused grouped expert GEMM",
        cli_flag="--moe-fused-grouped-gemm",
        source=FUSED_GROUPED_EXPERTS_SOURCE,
    ),
    Knob(
        "moe_a2a_overlap",
        "scenario",
        "bool",
        "hide the expert-parallel all-to-alls behind the paired micro-batch's compute (Megatron-core "
        "--overlap-moe-expert-parallel-comm); MoE models only, no effect at ep = 1",
        label="Overlap MoE all-to-alls",
        cli_flag="--moe-a2a-overlap",
        source="Megatron-core --overlap-moe-expert-parallel-comm",
    ),
    Knob(
        "ddp_bucket_size",
        "scenario",
        "int",
        "parameters per data-parallel gradient bucket (Megatron-core --ddp-bucket-size); unset: Megatron-core's "
        "default, max(40M, 1M × dp·cp); the last bucket of a step cannot hide behind the backward, nor the first "
        "all-gather behind the next forward. Megatron-core and NeMo presets only (the FSDP presets reduce per layer)",
        label="DDP bucket size",
        unit="parameters",
        ge=1_000_000,
        le=1_000_000_000_000,
        optional=True,
        zero_unset=True,
        cli_flag="--ddp-bucket-size",
        source="Megatron-core DistributedDataParallelConfig.bucket_size (--ddp-bucket-size)",
    ),
    Knob(
        "attention_backend",
        "scenario",
        "choice",
        "fused attention kernel: auto (the framework's: Transformer Engine for megatron-core, nemo and "
        "nemo-automodel-fsdp2, FlashAttention-2 for the others), flash-attention-2 (the flash-attn package or "
        "PyTorch SDPA's flash backend) or transformer-engine (cuDNN attention on compute capability 9.0 and "
        "later, FlashAttention-2 below); kernel speeds per GPU architecture from published micro-benchmarks",
        label="Attention kernel",
        choices=("auto", *SELECTABLE_ATTENTION_BACKENDS),
        choice_labels=("framework default", "FlashAttention-2", "Transformer Engine"),
        cli_flag="--attention-backend",
        source="app.core.attention (Megatron-core --attention-backend)",
    ),
)

BY_PATH: dict[str, Knob] = {k.path: k for k in KNOBS}


def knob(path: str) -> Knob:
    """The knob at 'layout.tp' (KeyError for a name not declared here)."""
    return BY_PATH[path]


def section_knobs(section: Section) -> tuple[Knob, ...]:
    return tuple(k for k in KNOBS if k.section == section)


def generic_knobs(section: Section = "layout") -> tuple[Knob, ...]:
    """The knobs whose schema field and builder input are made from the record alone."""
    return tuple(k for k in KNOBS if k.section == section and k.generic)


def default_of(k: Knob) -> Any:
    """A generic knob's default: None when it may be unset, else its smallest value."""
    return None if k.optional else k.ge
