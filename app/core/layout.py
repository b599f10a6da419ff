"""Parallel layout of one training job, and the checks that make it consistent with a model and a cluster.

Rank order follows Megatron-LM's default `tp-cp-ep-dp-pp` (megatron/core/parallel_state.py): tensor parallel
ranks are adjacent (inside a node), then context parallel, then data parallel, then pipeline stages.
Expert parallelism is carved out of the data-parallel × context-parallel ranks, with expert tensor parallel = tp
(etp unset). With `etp` set, expert layers follow Megatron-core's MoE parallel folding (Liu et al. 2025,
arXiv 2504.14960; `--expert-tensor-parallel-size`, Megatron-core ≥ 0.10): the tp·cp·dp ranks of a pipeline stage
are regrouped for the expert layers as etp × ep × edp with adjacent ranks, so ep may span the attention's tensor
parallel ranks (etp = 1 is the common choice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, cast, get_args, overload

from app.core.errors import ProblemCollector
from app.core.hardware import ClusterSpec, GPUSpec
from app.core.model import ModelSpec
from app.core.num import Count, Num, where
from app.core.precision import QUANTIZED_DTYPES

RecomputeMode = Literal["none", "selective", "full"]
TrainDtype = Literal["bf16", "fp16", "fp8", "fp4"]
Optimizer = Literal["adamw", "adam"]
MomentsDtype = Literal["fp32", "bf16"]
ReshardAfter = Literal["forward", "backward", "step"]

RECOMPUTE_MODES: tuple[str, ...] = get_args(RecomputeMode)
# Megatron-core's selective recompute modules (--recompute-modules, TransformerConfig.recompute_modules, used with
# --recompute-granularity selective; default ["core_attn"]): what each re-runs in the backward instead of keeping
# its activations. core_attn: the attention scores (fused attention keeps none); layernorm: the norm outputs;
# mlp: a dense layer's MLP; moe: a MoE layer's experts, router and token dispatch; moe_act: the experts'
# activation function; shared_experts: the shared experts' MLP; mla_up_proj: multi-head latent attention's
# up-projections and RoPE, so that only the compressed latents are kept, not the per-head queries, keys and values
# (Megatron-core TransformerConfig.recompute_modules "mla_up_proj"; DeepSeek-V3, arXiv 2412.19437, Sec. 3.2.3:
# "we recompute all RMSNorm operations and MLA up-projections during back-propagation").
RECOMPUTE_MODULES: tuple[str, ...] = (
    "core_attn",
    "layernorm",
    "mlp",
    "moe",
    "moe_act",
    "shared_experts",
    "mla_up_proj",
)
MLA_RECOMPUTE_MODULES: tuple[str, ...] = ("mla_up_proj",)
# Megatron-core's fine-grained activation offloading (--fine-grained-activation-offloading --offload-modules):
# modules whose input activation goes to host memory in forward and comes back before their backward
OFFLOAD_MODULES: tuple[str, ...] = (
    "attn_norm",
    "core_attn",
    "attn_proj",
    "mlp_norm",
    "expert_fc1",
    "moe_act",
)
MOE_RECOMPUTE_MODULES: tuple[str, ...] = ("moe", "moe_act", "shared_experts")
MOE_OFFLOAD_MODULES: tuple[str, ...] = ("expert_fc1", "moe_act")
TRAIN_DTYPES: tuple[str, ...] = ("bf16", "fp16", *QUANTIZED_DTYPES)
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
MOMENTS_DTYPES: tuple[str, ...] = get_args(MomentsDtype)
# when ZeRO-3 / FSDP frees the gathered parameters again (PyTorch FSDP2 fully_shard): "forward" re-shards after the
# forward and gathers again for the backward (reshard_after_forward=True, the default; DeepSpeed ZeRO-3); "backward"
# keeps them from the forward to the backward of each micro-batch (reshard_after_forward=False, FSDP1
# SHARD_GRAD_OP; the Llama 3 paper, arXiv 2407.21783 Sec. 3.3.2: "we do not reshard after forward computation to
# avoid an extra all-gather communication during backward passes"); "step" keeps the gathered parameters and the
# unsharded gradients across the micro-batches of a step, gathering once and reduce-scattering once per step
# (torchtitan's pipeline schedules: reshard_after_forward=False with gradient sync only on the last micro-batch)
RESHARD_MODES: tuple[str, ...] = get_args(ReshardAfter)


@overload
def framework_reshard(pipeline_reshard: str, pp: int, zero: int) -> int: ...
@overload
def framework_reshard(pipeline_reshard: str, pp: Count, zero: Count) -> Count: ...
def framework_reshard(pipeline_reshard: str, pp: Count, zero: Count) -> Count:
    """RESHARD_MODES index a framework runs ZeRO-3 at: its pipeline schedule's (Framework.pipeline_reshard) when
    pp > 1, "forward" otherwise. Numbers or one value per layout."""
    held = RESHARD_MODES.index(pipeline_reshard)
    return cast(Count, where((pp > 1) & (zero >= 3), held, 0))  # np.where of two ints: an int64 array


@dataclass(frozen=True)
class Layout:
    """How one training job is split across GPUs.

    - zero: 0 = plain data parallel; 1 = optimizer states sharded (Megatron's distributed optimizer);
      2 = also gradients; 3 = also weights (ZeRO-3 / FSDP full sharding). Sharding spans dp·cp ranks.
    - recompute_layers: with recompute="full", how many layers per pipeline stage are recomputed
      (Megatron `--recompute-num-layers`); None = all.
    - recompute_modules: with recompute="selective", Megatron-core's `--recompute-modules` (RECOMPUTE_MODULES);
      empty = its default, core_attn.
    - global_batch and micro_batch are in sequences.
    - dtype is the compute dtype of the linear layers: fp8 (per-tensor scaled FP8) and fp4 (NVFP4, Blackwell) keep
      bf16 weights and fp32 master weights and optimizer states; attention runs in 16 bit (app.core.precision).
    - offload_layers: transformer layers whose saved activations go to host memory during the forward pass and
      come back for the backward (Megatron-core `--cpu-offloading-num-layers`, Transformer Engine's
      `get_cpu_offload_context`, double-buffered); 0 = none.
    - offload_modules: Megatron-core's fine-grained activation offloading (`--offload-modules`, OFFLOAD_MODULES):
      the listed modules' inputs go to host memory in every layer; works with pipelines and selective recompute.
    - optimizer_offload: share of this GPU's optimizer shard (fp32 master weights and Adam moments) kept and updated
      on the host (Megatron-core `--optimizer-cpu-offload --optimizer-offload-fraction F
      --use-precision-aware-optimizer`, HybridDeviceOptimizer): its gradients go to the host, a CPU AdamW updates
      it, the new weights come back; 0 = none, 1 = all.
    - first_stage_layers / last_stage_layers: transformer layers on the first / last pipeline stage, the rest split
      evenly over the stages between (Megatron-core `--decoder-first-pipeline-num-layers`,
      `--decoder-last-pipeline-num-layers`); None = an even split. One layer fewer on each end stage gives the
      embedding and the LM head and loss a layer's slot each, as Megatron-core's
      `--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split` and DeepSpeed's
      `partition_method="type:transformer|embedding"` do (Llama 3.1 405B: 126 layers on 16 stages, 7 + 14·8 + 7).
    - stage_layers: the transformer layers of every pipeline stage, first to last, for splits whose middle stages
      differ too (what a Megatron-core `--pipeline-model-parallel-layout` gives); empty = derived from the fields
      above. Not together with first_stage_layers / last_stage_layers.
    - bf16_first_layers / bf16_last_layers: under dtype fp8 or fp4, transformer layers at the start / end of the
      network whose linear layers stay 16-bit (Megatron-core `--first-last-layers-bf16
      --num-layers-at-start-in-bf16 N --num-layers-at-end-in-bf16 M`). Megatron-Bridge's FP8 current-scaling recipe
      keeps 1 + 1 (bf16_with_fp8_current_scaling_mixed); NVIDIA's NVFP4 pretraining recipe about 15 % of the
      layers, most of them at the end (arXiv 2509.25149); 0 = every layer quantized.
    - fp8_param_gather: under dtype fp8, the working weights are FP8 tensors (1 B per parameter instead of 2) and
      the sharded parameters are all-gathered in FP8: Megatron-core `--fp8-param-gather` (NeMo `fp8_params`,
      Megatron-Bridge's FP8 presets), which needs the distributed optimizer or FSDP (zero ≥ 1), and torchao's
      FSDP2 float8 all-gather (`enable_fsdp_float8_all_gather`, zero = 3). The fp32 master weights, Adam moments
      and gradients are unchanged (check_precision_options).
    - optimizer_moments_dtype: the Adam moments' dtype. "bf16" is Megatron-core's precision-aware optimizer
      (`--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`, Transformer Engine's
      FusedAdam), 2 + 2 B per parameter instead of 4 + 4, and beside bf16 working weights only the low 16 bits of
      each fp32 master weight (store_param_remainders); Megatron-core allows it with Adam and the distributed
      optimizer only (OptimizerConfig.__post_init__), so zero ≥ 1. Megatron-Bridge's DeepSeek-V3 recipe uses it.
    - reshard_after: under zero=3, when the gathered parameters are freed (RESHARD_MODES): "forward" (two
      all-gathers and one reduce-scatter per micro-batch, one block's parameters unsharded at a time), "backward"
      (one all-gather per micro-batch, the stage's parameters unsharded from its forward to its backward) or "step"
      (one all-gather and one reduce-scatter per step, the stage's parameters and fp32-reduced gradients unsharded
      throughout).
    - microbatch_group: under interleaving (vp > 1), the micro-batches each model chunk runs in a row before the
      next chunk (Megatron-core `--microbatch-group-size-per-virtual-pipeline-stage`, g): from pp (the default,
      None) to the step's micro-batches. The first stage's warm-up runs 2(p − 1) + (v − 1)·g chunk forwards
      (schedules.py get_pp_rank_microbatches), so each micro-batch above pp keeps v − 1 more chunk activations.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None  # expert tensor parallel (MoE parallel folding); None = tp, the legacy mapping
    vp: int = 1
    zero: int = 1
    sequence_parallel: bool = False
    recompute: RecomputeMode = "none"
    recompute_layers: int | None = None
    recompute_modules: tuple[str, ...] = ()
    micro_batch: int = 1
    global_batch: int = 1
    dtype: TrainDtype = "bf16"
    flash_attention: bool = True
    optimizer: Optimizer = "adamw"
    offload_layers: int = 0
    offload_modules: tuple[str, ...] = ()
    optimizer_offload: float = 0.0
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    stage_layers: tuple[int, ...] = ()
    bf16_first_layers: int = 0
    bf16_last_layers: int = 0
    fp8_param_gather: bool = False
    optimizer_moments_dtype: MomentsDtype = "fp32"
    reshard_after: ReshardAfter = "forward"
    microbatch_group: int | None = None

    @property
    def uneven_pipeline(self) -> bool:
        """True when the stages' layer counts are given (first/last stage or every stage), not derived as L / p."""
        return self.pp > 1 and (
            self.first_stage_layers is not None
            or self.last_stage_layers is not None
            or bool(self.stage_layers)
        )

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel size of the expert layers (etp, or tp when unset)."""
        return self.etp if self.etp is not None else self.tp

    @property
    def expert_dp(self) -> int:
        """Ranks that hold the same expert shard (the expert layers' data-parallel size)."""
        return max(1, self.tp * self.cp * self.dp // max(1, self.expert_tp * self.ep))

    @property
    def selective_modules(self) -> tuple[str, ...]:
        """The modules recompute="selective" re-runs (Megatron-core's default core_attn when none are named)."""
        if self.recompute != "selective":
            return ()
        return self.recompute_modules or ("core_attn",)

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per pipeline per step (gradient-accumulation steps)."""
        return max(1, self.global_batch // max(1, self.dp * self.micro_batch))

    def to_dict(self) -> dict[str, Any]:  # Any: JSON values
        # Every field is a scalar or a tuple of scalars, so a shallow copy equals dataclasses.asdict at a tenth of
        # its cost (asdict deep-copies each value; the planner serialises hundreds of layouts per answer).
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Layout:  # Any: JSON values
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown layout fields: {sorted(unknown)}")
        for name in ("recompute_modules", "offload_modules", "stage_layers"):
            if name in data:
                data = {**data, name: tuple(data[name] or ())}
        return cls(**data)

    def with_(self, **changes: Any) -> Layout:  # Any: any field's type
        return replace(self, **changes)


@dataclass(frozen=True)
class RunOptions:
    """The layout fields every layout of a search shares: compute dtype, flash attention, the layers an fp8 / fp4 run
    keeps 16-bit (first, last), FP8 parameters, the Adam moments' dtype, and Megatron-core's selective recompute
    modules and fine-grained offload modules (Layout's fields of those names). Multi-token-prediction modules are
    the model's (ModelSpec.mtp_layers)."""

    dtype: TrainDtype = "bf16"
    flash_attention: bool = True
    bf16_layers: tuple[int, int] = (0, 0)
    fp8_param_gather: bool = False
    optimizer_moments_dtype: MomentsDtype = "fp32"
    recompute_modules: tuple[str, ...] = ()
    offload_modules: tuple[str, ...] = ()

    @classmethod
    def of(cls, source: Any) -> RunOptions:  # Any: any record with Layout's field names
        """The options a record with the Layout's field names carries (a Layout, a search request); the recompute
        and offload modules stay per layout and are not taken."""
        return cls(
            dtype=source.dtype,
            flash_attention=source.flash_attention,
            bf16_layers=(source.bf16_first_layers, source.bf16_last_layers),
            fp8_param_gather=source.fp8_param_gather,
            optimizer_moments_dtype=source.optimizer_moments_dtype,
        )

    def layout_fields(self, recompute: str) -> dict[str, Any]:  # Any: any field's type
        """The Layout fields of a layout with this `recompute` mode (the recompute modules apply to "selective")."""
        return {
            "dtype": self.dtype,
            "flash_attention": self.flash_attention,
            "bf16_first_layers": self.bf16_layers[0],
            "bf16_last_layers": self.bf16_layers[1],
            "fp8_param_gather": self.fp8_param_gather,
            "optimizer_moments_dtype": self.optimizer_moments_dtype,
            "recompute_modules": self.recompute_modules if recompute == "selective" else (),
            "offload_modules": self.offload_modules,
        }


@dataclass(frozen=True)
class LayoutColumns:
    """The layout fields the training-step model reads, each one layout's number or one value per row (app.core.num).

    `etp` is the expert tensor-parallel size in effect (Layout.expert_tp), `recompute` an index into RECOMPUTE_MODES,
    `sp` 0/1, `recompute_layers` 0 for all of a stage's layers (Layout's None), `num_microbatches` and `expert_dp`
    as Layout's properties compute them. Each is a Num: one layout's whole number (or share), or a float64 array with
    one value per row in the planner (whole numbers below 2**53, exact in float64, so both evaluations agree).
    """

    tp: Num
    pp: Num
    vp: Num
    dp: Num
    cp: Num
    ep: Num
    etp: Num
    folded: Num  # 1 where etp is set (MoE parallel folding): expert ranks adjacent after the etp ranks
    zero: Num
    sp: Num
    recompute: Num
    micro_batch: Num
    num_microbatches: Num
    recompute_layers: Num
    offload_layers: Num
    optimizer_offload: Num
    expert_dp: Num
    reshard: Num = 0  # index into RESHARD_MODES (Layout.reshard_after); the planner searches "forward" alone
    microbatch_group: Num = (
        0  # Layout.microbatch_group, 0 = pp (Megatron-core's default); the planner takes it
    )

    @classmethod
    def of(cls, layout: Layout) -> LayoutColumns:
        return cls(
            tp=layout.tp,
            pp=layout.pp,
            vp=layout.vp,
            dp=layout.dp,
            cp=layout.cp,
            ep=layout.ep,
            etp=layout.expert_tp,
            folded=int(layout.etp is not None),
            zero=layout.zero,
            sp=int(layout.sequence_parallel),
            recompute=RECOMPUTE_MODES.index(layout.recompute),
            micro_batch=layout.micro_batch,
            num_microbatches=layout.num_microbatches,
            recompute_layers=layout.recompute_layers or 0,
            offload_layers=layout.offload_layers,
            optimizer_offload=layout.optimizer_offload,
            expert_dp=layout.expert_dp,
            reshard=RESHARD_MODES.index(layout.reshard_after),
            microbatch_group=layout.microbatch_group or 0,
        )


def stage_layer_counts(num_layers: int, layout: Layout) -> tuple[int, ...]:
    """Transformer layers on each pipeline stage, all its model chunks together (check_layout makes them whole).

    An even split gives every stage L / p. With first_stage_layers and/or last_stage_layers set, the layers left
    over are shared evenly by the stages between, as Megatron-core's get_num_layers_to_build does
    (megatron/core/transformer/transformer_block.py, num_layers_in_first/last_pipeline_stage).
    """
    pp = max(1, layout.pp)
    if not layout.uneven_pipeline:
        return (num_layers // pp,) * pp
    if layout.stage_layers:
        return tuple(int(n) for n in layout.stage_layers)
    first, last = layout.first_stage_layers, layout.last_stage_layers
    middle_stages = pp - (first is not None) - (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    each = rest // middle_stages if middle_stages > 0 else 0
    counts = [each] * pp
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return tuple(counts)


def stage_bf16_layer_counts(num_layers: int, layout: Layout) -> tuple[int, ...]:
    """Layers each pipeline stage keeps 16-bit under bf16_first_layers / bf16_last_layers.

    The flags name global layer numbers (Megatron-core is_first_last_bf16_layer: layer < start count or ≥ L − end
    count). Under interleaving, model chunk v of stage s holds virtual stage v·pp + s, the virtual stages taking the
    layers in order; each stage's layers are split over its vp chunks as evenly as they go (the first chunks take
    one more), so the end layers fall on the last stage's final chunk first, then on the stages before it.
    """
    first, last = layout.bf16_first_layers, layout.bf16_last_layers
    pp, vp = max(1, layout.pp), max(1, layout.vp)
    if not (first or last):
        return (0,) * pp
    chunks: list[tuple[int, int, int]] = []  # (virtual stage, stage, layers)
    for stage, n in enumerate(stage_layer_counts(num_layers, layout)):
        base, extra = divmod(n, vp)
        chunks += [(v * pp + stage, stage, base + (1 if v < extra else 0)) for v in range(vp)]
    counts = [0] * pp
    start = 0
    for _, stage, n in sorted(chunks):
        end = start + n
        counts[stage] += max(0, min(end, first) - start) + max(0, end - max(start, num_layers - last))
        start = end
    return tuple(counts)


def pipeline_label(layout: Any) -> str:  # Any: a Layout or a record with its field names
    """ "PP16", "PP16(7|…|7)" with an uneven split's first and last stage layers ("=" for an even end), or every
    stage's layers ("PP8(9|8|8|8|8|8|6|6)") when they are all given."""
    stages = tuple(getattr(layout, "stage_layers", ()) or ())
    if stages:
        return f"PP{layout.pp}({'|'.join(str(n) for n in stages)})"
    first, last = getattr(layout, "first_stage_layers", None), getattr(layout, "last_stage_layers", None)
    if first is None and last is None:
        return f"PP{layout.pp}"
    return f"PP{layout.pp}({'=' if first is None else first}|…|{'=' if last is None else last})"


def microbatch_group_shown(layout: Any) -> int:  # Any: as pipeline_label
    """The micro-batch group a label names: only a group other than Megatron-core's default (pp micro-batches per
    chunk in a row, `microbatch_group_size_per_vp_stage`) under interleaving; 0 when there is nothing to show."""
    group = getattr(layout, "microbatch_group", None) or 0
    return group if getattr(layout, "vp", 1) > 1 and group and group != layout.pp else 0


def layout_label(layout: Any) -> str:  # Any: as pipeline_label
    """The short label of a layout, the one every surface shows (planner rankings, saved plans, replays):
    "TP4 PP8 VP6 DP16 ZeRO-1 SP recompute=selective mb=2", with "mbg=N" after VP for a micro-batch group other
    than pp."""
    parts = [f"TP{layout.tp}", pipeline_label(layout)]
    if getattr(layout, "vp", 1) > 1:
        parts.append(f"VP{layout.vp}")
    group = microbatch_group_shown(layout)
    if group:
        parts.append(f"mbg={group}")
    parts.append(f"DP{layout.dp}")
    if layout.cp > 1:
        parts.append(f"CP{layout.cp}")
    if layout.ep > 1:
        parts.append(f"EP{layout.ep}")
    if getattr(layout, "etp", None) is not None and layout.etp != layout.tp:
        parts.append(f"ETP{layout.etp}")
    parts.append(f"ZeRO-{layout.zero}")
    if getattr(layout, "reshard_after", "forward") != "forward":
        parts.append(f"reshard={layout.reshard_after}")
    if layout.sequence_parallel:
        parts.append("SP")
    parts += _recompute_and_offload_labels(layout)
    return " ".join(parts)


def _recompute_and_offload_labels(layout: Any) -> list[str]:  # Any: as pipeline_label
    parts: list[str] = []
    recompute_layers = getattr(layout, "recompute_layers", None)
    modules = getattr(layout, "recompute_modules", ())
    if layout.recompute == "full" and recompute_layers is not None:
        parts.append(f"recompute=full({recompute_layers} layers/stage)")
    elif layout.recompute != "none":
        parts.append(f"recompute={layout.recompute}" + (f"({','.join(modules)})" if modules else ""))
    parts.append(f"mb={layout.micro_batch}")
    if getattr(layout, "offload_layers", 0):
        parts.append(f"offload={layout.offload_layers} layers")
    if getattr(layout, "offload_modules", ()):
        parts.append(f"offload=({','.join(layout.offload_modules)})")
    if getattr(layout, "optimizer_offload", 0):
        parts.append(f"optimizer offload={layout.optimizer_offload:g}")
    return parts


def stage_layers_label(counts: tuple[int, ...]) -> str:
    """Compact form of per-stage layer counts, runs of equal stages grouped: "8 × 16" for an even split,
    "7 + 8 × 14 + 7" for uneven end stages, "6 + 9 + 8 × 13 + 7" for any other split."""
    runs: list[list[int]] = []
    for n in counts:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return " + ".join(f"{n} × {k}" if k > 1 else str(n) for n, k in runs)


def even_split_layers(num_layers: int, pp: int) -> int | None:
    """Layers on each end stage when the embedding and the LM head with its loss take one layer's slot each
    (Megatron-core --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split): (L + 2) / p − 1,
    or None when L + 2 does not divide by p or an end stage would be left without a layer."""
    if pp < 2 or (num_layers + 2) % pp:
        return None
    end = (num_layers + 2) // pp - 1
    return end if end >= 1 else None


def uneven_split_layers(num_layers: int, pp: int) -> tuple[int, int] | None:
    """(first, last) stage layers of the most even uneven split of `num_layers` over `pp` stages, counting the
    embedding and the loss as a layer each on their end stages as even_split_layers does, where the middle stages
    hold the same whole number of layers and every stage at least one; the symmetric split when there is one, else
    the one whose heaviest stage is lightest (ties: the closer ends, then the larger first). None for pp < 3
    without an even split."""
    end = even_split_layers(num_layers, pp)
    if end is not None:
        return end, end
    if pp < 3:
        return None
    splits = [
        (first, num_layers - middle * (pp - 2) - first, middle)
        for middle in range(1, num_layers // (pp - 2) + 1)
        for first in range(1, num_layers - middle * (pp - 2))
    ]
    if not splits:
        return None
    first, last, _ = min(splits, key=lambda s: (max(s[0] + 1, s[2], s[1] + 1), abs(s[0] - s[1]), -s[0]))
    return first, last


_LAYOUT_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_LAYOUT_REPEAT = re.compile(r"([EtmL])\*(\d+)")


def expand_pipeline_layout(text: str) -> str:
    """A Megatron-core pipeline layout with its repetitions written out: "(tt|)*2L" → "tt|tt|L"."""
    limit = 100_000

    def repeat(m: re.Match[str]) -> str:
        body, times = m.group(1), int(m.group(2))
        if len(body) * times > limit:
            raise ValueError(f"pipeline layout expands beyond {limit:,} symbols")
        return body * times

    expanded = re.sub(r"\s", "", text)
    while True:
        nxt = _LAYOUT_REPEAT.sub(repeat, _LAYOUT_GROUP.sub(repeat, expanded))
        if len(nxt) > limit:
            raise ValueError(f"pipeline layout expands beyond {limit:,} symbols")
        if nxt == expanded:
            return nxt
        expanded = nxt


def stage_layers_from_pipeline_layout(text: str, pp: int, vp: int | None = None) -> tuple[int, ...]:
    """Transformer layers per pipeline rank of a Megatron-core pipeline layout string
    (--pipeline-model-parallel-layout, e.g. DeepSeek-V3's "Et|(tt|)*30L"): '|' separates the virtual stages,
    'E' is the embedding, 't' a transformer layer, 'm' an MTP layer, 'L' the loss; "(...)*N" and "t*N" repeat.
    Virtual stage i runs on pipeline rank i mod pp (megatron/core/transformer/pipeline_parallel_layer_layout.py).
    Raises ValueError on other symbols, when the virtual stages do not divide by pp, or (vp given) when they are
    not pp·vp."""
    expanded = expand_pipeline_layout(text)
    stages = expanded.split("|")
    bad = sorted(set(expanded) - set("EtmL|"))
    if bad:
        raise ValueError(f"unknown symbols {bad} in pipeline layout {text!r}")
    if vp is not None and len(stages) != pp * vp:
        raise ValueError(f"{len(stages)} virtual stages, but pp·vp = {pp}·{vp} = {pp * vp}")
    if pp < 1 or len(stages) % pp:
        raise ValueError(f"{len(stages)} virtual stages in {text!r} do not divide by pp = {pp}")
    counts = [0] * pp
    for i, stage in enumerate(stages):
        counts[i % pp] += stage.count("t")
    return tuple(counts)


def mtp_layers_in_pipeline_layout(text: str, pp: int) -> int:
    """Multi-token-prediction layers ('m') of a Megatron-core pipeline layout string. Megatron-core runs them with
    the loss, on the last pipeline rank; raises ValueError when an 'm' sits on another rank."""
    stages = expand_pipeline_layout(text).split("|")
    for i, stage in enumerate(stages):
        if "m" in stage and (pp < 1 or i % pp != pp - 1):
            raise ValueError(
                f"MTP layers ('m') must sit on the last pipeline rank; virtual stage {i} runs on rank {i % pp}"
            )
    return sum(stage.count("m") for stage in stages)


def _split_hint(num_layers: int, pp: int) -> str:
    """What to change when the layers do not divide by pp·vp: the interleavings that divide each stage's layers,
    or the uneven split (uneven_split_layers) when the stages themselves cannot hold equal shares."""
    if num_layers % pp == 0:
        per_stage = num_layers // pp
        fits = [str(v) for v in range(1, per_stage + 1) if per_stage % v == 0]
        return f"; with pp = {pp}, vp may be {', '.join(fits)}"
    split = uneven_split_layers(num_layers, pp)
    if split is None:
        return ""
    first, last = split
    ends = (
        f"first_stage_layers = last_stage_layers = {first}"
        if first == last
        else f"first_stage_layers = {first}, last_stage_layers = {last}"
    )
    return f"; an uneven split fits: {ends} (the embedding and the loss count as a layer)"


def _check_pipeline_split(p: ProblemCollector, model: ModelSpec, layout: Layout) -> bool:
    """The layer counts of an uneven pipeline split: whole and at least one on every stage. True when the split
    itself is consistent (stage_layer_counts may then be used)."""
    chunks = layout.pp * layout.vp
    if layout.stage_layers:
        return _check_stage_layers(p, model, layout)
    if not (layout.first_stage_layers is not None or layout.last_stage_layers is not None):
        hint = _split_hint(model.num_layers, layout.pp)
        p.check(
            model.num_layers % chunks == 0,
            "layout.pp",
            f"layers ({model.num_layers}) not divisible by pp·vp = {layout.pp}·{layout.vp} = {chunks}{hint}",
        )
        return model.num_layers % chunks == 0
    ok = True
    for name in ("first_stage_layers", "last_stage_layers"):
        value = getattr(layout, name)
        if value is None:
            continue
        good = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        p.check(good, f"layout.{name}", f"must be an integer ≥ 1 or unset, got {value!r}")
        ok = ok and good
    if not ok:
        return False
    if layout.pp < 2:
        p.check(
            False, "layout.pp", "first_stage_layers / last_stage_layers need pipeline parallelism (pp > 1)"
        )
        return False
    first, last = layout.first_stage_layers, layout.last_stage_layers
    middle = layout.pp - (first is not None) - (last is not None)
    rest = model.num_layers - (first or 0) - (last or 0)
    named = " and ".join(f"{n} {v}" for n, v in (("first", first), ("last", last)) if v is not None)
    if middle == 0:
        ok = rest == 0
        p.check(
            ok,
            "layout.pp",
            f"with pp = 2 the first and last stages hold every layer: {named} must add up to the model's "
            f"{model.num_layers} layers",
        )
    else:
        ok = rest >= middle and rest % middle == 0
        p.check(
            ok,
            "layout.pp",
            f"{model.num_layers} layers minus {named} leave {rest}, which must split evenly over the {middle} "
            f"other stages, at least one each",
        )
    # with interleaving the stage's layers need not divide by vp: Megatron-core's pipeline layouts
    # (--pipeline-model-parallel-layout) and its embedding / loss accounting give chunks of different depth
    return ok


def _check_stage_layers(p: ProblemCollector, model: ModelSpec, layout: Layout) -> bool:
    """Every stage's layers given: one whole number ≥ 1 per stage, adding up to the model's layers."""
    field = "layout.stage_layers"
    counts = layout.stage_layers
    if layout.first_stage_layers is not None or layout.last_stage_layers is not None:
        p.check(False, field, "give every stage's layers or first_stage_layers / last_stage_layers, not both")
        return False
    whole = all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts)
    p.check(whole, field, f"every stage needs a whole number of layers ≥ 1, got {list(counts)!r}")
    if not whole:
        return False
    ok = len(counts) == layout.pp and sum(counts) == model.num_layers
    p.check(
        len(counts) == layout.pp,
        field,
        f"{len(counts)} stages given but pp = {layout.pp}",
    )
    p.check(
        sum(counts) == model.num_layers,
        field,
        f"the stages hold {sum(counts)} layers, the model has {model.num_layers}",
    )
    return ok


def check_module_names(
    p: ProblemCollector,
    field_name: str,
    names: tuple[str, ...],
    allowed: tuple[str, ...],
    moe_only: tuple[str, ...],
    model: ModelSpec,
) -> None:
    """Every name known, the MoE-only ones only on a mixture-of-experts model and the MLA-only ones
    (MLA_RECOMPUTE_MODULES) only on a model with multi-head latent attention."""
    unknown = [m for m in names if m not in allowed]
    p.check(not unknown, field_name, f"unknown modules {unknown}; choose from {list(allowed)}")
    if model.moe is None:
        needs_moe = [m for m in names if m in moe_only]
        p.check(not needs_moe, field_name, f"{needs_moe} need a mixture-of-experts model")
    if model.mla is None:
        needs_mla = [m for m in names if m in MLA_RECOMPUTE_MODULES]
        p.check(not needs_mla, field_name, f"{needs_mla} need multi-head latent attention (MLA)")


def check_precision_options(
    p: ProblemCollector,
    dtype: str,
    zero: object,
    fp8_param_gather: bool,
    moments_dtype: str,
    prefix: str = "",
) -> None:
    """The precision options of a layout or a planner request; problems go to `p` under `prefix` + the field
    name. `zero` None leaves the ZeRO stage unchecked (the planner searches it).

    FP8 parameters need FP8 compute and sharded parameters to gather: Megatron-core refuses `--fp8-param-gather`
    without the distributed optimizer or FSDP (megatron/training/arguments.py), torchao's float8 all-gather is an
    FSDP2 feature, and NVFP4 recipes keep 16-bit parameters (Megatron-Bridge bf16_with_nvfp4_mixed:
    fp8_param_gather off). bf16 Adam moments are Megatron-core's precision-aware optimizer, "only supported with
    distributed optimizer" (megatron/core/optimizer/optimizer_config.py OptimizerConfig.__post_init__)."""
    sharded = zero is None or (isinstance(zero, int) and zero >= 1)
    if fp8_param_gather:
        p.check(
            dtype == "fp8",
            f"{prefix}fp8_param_gather",
            f"FP8 parameters need the fp8 compute dtype; this run is {dtype}",
        )
        p.check(
            sharded,
            f"{prefix}fp8_param_gather",
            "FP8 parameters are gathered from sharded ones: they need the distributed optimizer or FSDP (zero ≥ 1)",
        )
    p.check(
        moments_dtype in MOMENTS_DTYPES,
        f"{prefix}optimizer_moments_dtype",
        f"must be one of {list(MOMENTS_DTYPES)}",
    )
    if moments_dtype == "bf16":
        p.check(
            sharded,
            f"{prefix}optimizer_moments_dtype",
            "bf16 Adam moments (Megatron-core's precision-aware optimizer) need the distributed optimizer (zero ≥ 1)",
        )


def check_bf16_layers(
    p: ProblemCollector, num_layers: int, dtype: str, first: object, last: object, prefix: str = ""
) -> None:
    """Layers kept 16-bit (bf16_first_layers / bf16_last_layers): whole numbers within the model, on an fp8 or fp4
    run only; problems go to `p` under `prefix` + the field name (the layout's or the planner request's)."""
    for name, value in (("bf16_first_layers", first), ("bf16_last_layers", last)):
        if not value:
            continue
        p.check(
            isinstance(value, int) and 0 <= value <= num_layers,
            f"{prefix}{name}",
            f"must be a whole number of layers between 0 and {num_layers}, got {value!r}",
        )
        p.check(
            dtype in QUANTIZED_DTYPES,
            f"{prefix}{name}",
            f"16-bit layers apply to an fp8 or fp4 run; this run is {dtype} throughout",
        )
    if isinstance(first, int) and isinstance(last, int):
        p.check(
            first + last <= num_layers,
            f"{prefix}bf16_last_layers",
            f"bf16_first_layers + bf16_last_layers = {first + last} is more than the model's {num_layers} layers",
        )


def unsupported_dtype(gpu: GPUSpec, dtype: str) -> str | None:
    """Why `gpu` cannot train in compute dtype `dtype`, or None: FP8 and FP4 need their tensor cores (a dense peak in
    the catalog), BF16 needs BF16 tensor cores (V100 trains fp16 with loss scaling)."""
    if dtype in QUANTIZED_DTYPES and gpu.peak_flops.get(dtype, 0) <= 0:
        return f"{gpu.name} has no {dtype.upper()} tensor cores"
    if dtype == "bf16" and not gpu.bf16_tensor_cores:
        return f"{gpu.name} has no BF16 tensor cores (train in fp16 with loss scaling)"
    return None


def check_layout(model: ModelSpec, cluster: ClusterSpec | None, layout: Layout, seq_len: int) -> None:
    """Raise SpecError listing every inconsistency between model, cluster, layout and sequence length (one checker
    per family of rules, in this order, so the problems are listed in the same order every time)."""
    p = ProblemCollector()
    _check_sizes(p, layout)
    if p.problems:
        p.raise_if_any()
    _check_choices(p, layout, seq_len)
    _check_cluster(p, cluster, layout)
    _check_tensor_parallel(p, model, layout)
    split_ok = _check_pipeline_split(p, model, layout)
    _check_schedule(p, layout, seq_len)
    _check_experts(p, model, layout)
    _check_recompute_modules(p, model, layout)
    _check_precision(p, model, layout)
    _check_offload(p, model, layout)
    _check_recompute_layers(p, model, layout, split_ok)
    p.raise_if_any()


def _check_sizes(p: ProblemCollector, layout: Layout) -> None:
    """The parallel sizes and batches are integers ≥ 1."""
    for name in ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch", "global_batch"):
        value = getattr(layout, name)
        p.check(
            isinstance(value, int) and value >= 1, f"layout.{name}", f"must be an integer ≥ 1, got {value!r}"
        )
    if layout.etp is not None:
        p.check(
            isinstance(layout.etp, int) and layout.etp >= 1,
            "layout.etp",
            f"must be an integer ≥ 1 or unset, got {layout.etp!r}",
        )


def _check_choices(p: ProblemCollector, layout: Layout, seq_len: int) -> None:
    """ZeRO stage, recompute mode, dtype, optimizer and sequence length are among the known ones."""
    p.check(layout.zero in (0, 1, 2, 3), "layout.zero", f"must be 0, 1, 2 or 3, got {layout.zero!r}")
    p.check(
        layout.recompute in RECOMPUTE_MODES, "layout.recompute", f"must be one of {list(RECOMPUTE_MODES)}"
    )
    p.check(layout.dtype in TRAIN_DTYPES, "layout.dtype", f"must be one of {list(TRAIN_DTYPES)}")
    p.check(layout.optimizer in OPTIMIZERS, "layout.optimizer", f"must be one of {list(OPTIMIZERS)}")
    p.check(
        layout.reshard_after in RESHARD_MODES, "layout.reshard_after", f"must be one of {list(RESHARD_MODES)}"
    )
    p.check(
        layout.reshard_after == "forward" or layout.zero == 3,
        "layout.reshard_after",
        f"only ZeRO-3 / FSDP re-shards parameters (zero is {layout.zero}); leave it at 'forward'",
    )
    p.check(seq_len >= 1, "training.seq_len", f"must be ≥ 1, got {seq_len}")


def _check_cluster(p: ProblemCollector, cluster: ClusterSpec | None, layout: Layout) -> None:
    """The layout uses every GPU of the cluster, in a dtype the GPU runs."""
    if cluster is not None:
        gpus = cluster.num_gpus
        p.check(
            layout.num_gpus == gpus,
            "layout",
            f"tp·pp·dp·cp = {layout.tp}·{layout.pp}·{layout.dp}·{layout.cp} = {layout.num_gpus} "
            f"but the cluster has {gpus} GPUs",
        )
        refused = unsupported_dtype(cluster.gpu, layout.dtype)
        p.check(refused is None, "layout.dtype", refused or "")


def _check_tensor_parallel(p: ProblemCollector, model: ModelSpec, layout: Layout) -> None:
    """Tensor parallelism divides the attention heads, the KV heads and the FFN."""
    heads = model.num_attention_heads
    p.check(
        model.mla is not None or model.effective_head_dim >= 1,
        "model.num_attention_heads",
        f"{heads} attention heads leave no head dimension in hidden size {model.hidden_size}",
    )
    p.check(
        heads % layout.tp == 0, "layout.tp", f"attention heads ({heads}) not divisible by tp ({layout.tp})"
    )
    if model.mla is None:
        kv = model.num_kv_heads
        p.check(
            kv % layout.tp == 0 or layout.tp % kv == 0,
            "layout.tp",
            f"kv heads ({kv}) and tp ({layout.tp}) must divide one another",
        )
    p.check(
        model.ffn_hidden_size % layout.tp == 0,
        "layout.tp",
        f"FFN hidden size ({model.ffn_hidden_size}) not divisible by tp ({layout.tp})",
    )


def _check_microbatch_group(p: ProblemCollector, layout: Layout) -> None:
    """Micro-batches per pipeline round: interleaving only, from pp to the step's micro-batches, and a last round
    of none or at least pp (megatron/core/pipeline_parallel/schedules.py,
    forward_backward_pipelining_with_interleaving: "should range in [PP, M]", "The remainder ... < PP")."""
    g = layout.microbatch_group
    if g is None:
        return
    m = layout.num_microbatches
    if layout.vp <= 1:
        p.add("layout.microbatch_group", "only the interleaved schedule (vp > 1) takes it")
    elif not (isinstance(g, int) and layout.pp <= g <= m):
        p.add(
            "layout.microbatch_group",
            f"must lie from pp ({layout.pp}) to the micro-batches per step ({m}), got {g!r}",
        )
    elif 0 < m % g < layout.pp:
        p.add(
            "layout.microbatch_group",
            f"the last round would run {m % g} micro-batches ({m} = {m // g}·{g} + {m % g}), fewer than pp "
            f"({layout.pp}): choose a group that divides {m} or leaves at least pp over",
        )


def _check_schedule(p: ProblemCollector, layout: Layout, seq_len: int) -> None:
    """Interleaving, the global batch over dp·micro-batch, and the context-parallel split of the sequence."""
    if layout.vp > 1:
        p.check(layout.pp > 1, "layout.vp", "interleaved stages (vp > 1) need pipeline parallelism (pp > 1)")
    per_step = layout.dp * layout.micro_batch
    p.check(
        layout.global_batch % per_step == 0,
        "layout.global_batch",
        f"global batch ({layout.global_batch}) not divisible by dp·micro_batch = "
        f"{layout.dp}·{layout.micro_batch} = {per_step}",
    )
    if layout.vp > 1 and layout.global_batch % per_step == 0:
        m = layout.global_batch // per_step
        p.check(
            m % layout.pp == 0,
            "layout.vp",
            f"the interleaved schedule needs micro-batches ({m}) to be a multiple of pp ({layout.pp})",
        )
    _check_microbatch_group(p, layout)
    if layout.cp > 1:
        p.check(
            seq_len % (2 * layout.cp) == 0,
            "layout.cp",
            f"sequence length ({seq_len}) not divisible by 2·cp = {2 * layout.cp} (load-balanced causal split)",
        )


def _check_experts(p: ProblemCollector, model: ModelSpec, layout: Layout) -> None:
    """Expert parallelism (ep, etp) against the model's experts, and sequence parallelism."""
    if model.moe is None:
        p.check(layout.ep == 1, "layout.ep", f"ep = {layout.ep} but {model.name} has no experts")
        p.check(
            layout.etp is None or layout.etp == layout.tp,
            "layout.etp",
            f"etp = {layout.etp} but {model.name} has no experts",
        )
    else:
        experts = model.moe.num_experts
        p.check(
            experts % layout.ep == 0, "layout.ep", f"experts ({experts}) not divisible by ep ({layout.ep})"
        )
        if layout.etp is None:
            p.check(
                (layout.dp * layout.cp) % layout.ep == 0,
                "layout.ep",
                f"ep ({layout.ep}) must divide dp·cp = {layout.dp * layout.cp} (set etp for MoE parallel folding)",
            )
        else:
            group = layout.tp * layout.cp * layout.dp
            p.check(
                group % (layout.etp * layout.ep) == 0,
                "layout.etp",
                f"etp·ep = {layout.etp}·{layout.ep} must divide tp·cp·dp = {group} (MoE parallel folding)",
            )
    if layout.sequence_parallel:
        p.check(layout.tp > 1, "layout.sequence_parallel", "sequence parallelism needs tp > 1")
    if model.moe is not None and layout.ep > 1 and layout.tp > 1:
        # megatron/training/arguments.py: "When using expert parallelism and tensor parallelism, sequence
        # parallelism must be used" (the token dispatcher works on each rank's sequence-parallel shard)
        p.check(
            layout.sequence_parallel,
            "layout.sequence_parallel",
            "expert parallelism with tp > 1 needs sequence parallelism (Megatron-core)",
        )


def _check_recompute_modules(p: ProblemCollector, model: ModelSpec, layout: Layout) -> None:
    """Selective recompute's modules."""
    if layout.recompute_modules:
        check_module_names(
            p,
            "layout.recompute_modules",
            layout.recompute_modules,
            RECOMPUTE_MODULES,
            MOE_RECOMPUTE_MODULES,
            model,
        )
        p.check(
            layout.recompute == "selective",
            "layout.recompute_modules",
            "recompute modules apply to recompute='selective' only",
        )


def _check_precision(p: ProblemCollector, model: ModelSpec, layout: Layout) -> None:
    """16-bit layers of an fp8 / fp4 run, FP8 parameters and the moments' dtype."""
    check_bf16_layers(
        p, model.num_layers, layout.dtype, layout.bf16_first_layers, layout.bf16_last_layers, "layout."
    )
    check_precision_options(
        p,
        layout.dtype,
        layout.zero,
        layout.fp8_param_gather,
        layout.optimizer_moments_dtype,
        "layout.",
    )


def _check_offload(p: ProblemCollector, model: ModelSpec, layout: Layout) -> None:
    """Activation offloading by layers or by modules, and optimizer offloading."""
    if layout.offload_layers:
        # megatron/core/transformer/transformer_config.py __post_init__: cpu_offloading_num_layers must lie in
        # [0, num_layers); "Currently there is no support for Pipeline parallelism with CPU offloading"; "CPU
        # offloading does not work when activation recomputation is enabled"
        p.check(
            isinstance(layout.offload_layers, int) and 0 <= layout.offload_layers < model.num_layers,
            "layout.offload_layers",
            f"must be an integer between 0 and the model's layers − 1 ({model.num_layers - 1}), "
            f"got {layout.offload_layers!r}",
        )
        p.check(layout.pp == 1, "layout.offload_layers", "activation offloading needs pp = 1 (Megatron-core)")
        p.check(
            layout.recompute == "none",
            "layout.offload_layers",
            "activation offloading does not combine with recompute (Megatron-core)",
        )
    if layout.offload_modules:
        check_module_names(
            p, "layout.offload_modules", layout.offload_modules, OFFLOAD_MODULES, MOE_OFFLOAD_MODULES, model
        )
        p.check(
            layout.recompute != "full",
            "layout.offload_modules",
            "fine-grained offloading works with no or selective recompute, not full (a fully recomputed layer "
            "keeps only its input)",
        )
        p.check(
            not layout.offload_layers,
            "layout.offload_modules",
            "choose layer offloading (offload_layers) or fine-grained module offloading, not both",
        )
    if layout.optimizer_offload:
        f = layout.optimizer_offload
        p.check(
            isinstance(f, (int, float)) and not isinstance(f, bool) and 0.0 <= f <= 1.0,
            "layout.optimizer_offload",
            f"must be a share between 0 and 1 of the optimizer states, got {f!r}",
        )
        # HybridDeviceOptimizer wraps the optimizer of Megatron-core's data-parallel paths; fully sharded runs
        # (Megatron-FSDP / torch FSDP2 CPUOffloadPolicy) offload parameters and gradients too, not modelled here
        p.check(
            layout.zero < 3,
            "layout.optimizer_offload",
            "optimizer offloading is modelled for ZeRO 0-2 (Megatron-core's HybridDeviceOptimizer), not ZeRO-3",
        )


def _check_recompute_layers(p: ProblemCollector, model: ModelSpec, layout: Layout, split_ok: bool) -> None:
    """The number of fully recomputed layers per stage."""
    if layout.recompute_layers is not None:
        per_stage = (
            max(stage_layer_counts(model.num_layers, layout))
            if split_ok
            else model.num_layers // max(1, layout.pp * layout.vp) * layout.vp
        )
        p.check(
            layout.recompute == "full",
            "layout.recompute_layers",
            "a number of recomputed layers applies to recompute='full' only",
        )
        p.check(
            0 <= layout.recompute_layers <= per_stage,
            "layout.recompute_layers",
            f"must be between 0 and the layers per stage ({per_stage})",
        )
