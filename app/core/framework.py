"""Training-framework conventions that change memory and time but are not part of the parallel layout.

Two jobs with the same layout differ by framework: Megatron-LM keeps an fp32 gradient buffer, DeepSpeed's fp16
optimizer keeps 16-bit gradients; Megatron-core overlaps the gradient reduce-scatter with backward, the 2021
code base did not; Transformer Engine can hide tensor-parallel communication behind GEMMs. Each preset states
its sources; `MEGATRON_CORE` is the default.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from app.core.precision import FP8, NVFP4, SOURCE_BYTES
from app.core.units import GiB, MiB

# Fragmentation the splitting caching allocator adds over a virtual-memory-stitching one: GMLake (Guo et al.,
# ASPLOS 2024, arXiv 2401.08156) removes 15 % fragmentation on average (up to 33 %) across eight LLM training
# setups on A100-80GB with recompute / ZeRO / offloading, by the same mechanism PyTorch's expandable segments use.
SPLITTING_ALLOCATOR_FRAGMENTATION = 0.15


# Lee et al. 2025, arXiv 2507.03114, Sec. 5 / abstract: mean compute slowdown under overlapped communication
OVERLAP_COMPUTE_SLOWDOWN = 0.189
# share of the SMs a collective's kernels hold while it runs beside compute: DeepSeek-V3 dedicates 20 of the H800's
# 132 SMs to its cross-node (InfiniBand + NVLink) communication kernels (DeepSeek-V3 technical report, arXiv
# 2412.19437, Sec. 3.2.2); NCCL likewise holds one CTA per channel for a collective's whole duration, however slow
# the link it waits on
# (docs/constants.md#compute-slowdown-beside-hidden-communication)
COMM_SM_SHARE = 20.0 / 132.0
# share of the SMs Transformer Engine's userbuffers kernels hold while they overlap a GEMM (Framework below)
USERBUFFERS_SM_SHARE = 8.0 / 132.0
# DeepSpeed BF16_Optimizer's per-micro-batch fp32 gradient accumulation, bytes per parameter (see
# Framework.grad_accum_bytes_per_param): cast 2 + 4, add 4 + 4 + 4
BF16_OPTIMIZER_ACCUM_BYTES = 18.0


@dataclass(frozen=True)
class ParamBytes:
    """Bytes per parameter of one mixed-precision Adam recipe: the model's working weight (`param`) and gradient
    buffer (`grad`), the optimizer's main (master) weight and main gradient, the Adam moments (exp_avg and
    exp_avg_sq together), and the HBM traffic of the fused Adam step (`adam_step`). The distributed optimizer
    shards the optimizer's three (ZeRO-1)."""

    param: float
    grad: float
    main_param: float
    main_grad: float
    moments: float
    adam_step: float

    @property
    def optimizer(self) -> float:
        """What the optimizer holds besides the main weight (Framework.optimizer_bytes): moments and main gradient."""
        return self.moments + self.main_grad

    def total(self, dp: int = 1) -> float:
        """Bytes per parameter with the optimizer's states sharded over `dp` ranks (1: not distributed)."""
        return self.param + self.grad + (self.main_param + self.optimizer) / dp


# Bytes per parameter by precision recipe (working weights, Adam moments), Megatron style. The fp16 and bf16 rows
# with fp32 moments are Megatron-LM's table of the distributed optimizer (docs/source/api-guide/dist_optimizer.md,
# "theoretical number of bytes per parameter", d the data-parallel size; the optimizer steps fp32 main params):
#   float16 param, float16 grads   20   4 + 16/d   (fp16 gradients, a separate fp32 main gradient)
#   float16 param, fp32 grads      18   6 + 12/d   (bf16: the gradient buffer is the fp32 main gradient)
#   fp32 param, fp32 grads         16   8 + 8/d    (not a recipe here: every run computes in 16 bits or fewer)
# The other rows apply Megatron-core's precision options (megatron/core/optimizer/optimizer_config.py):
# * bf16 moments, the precision-aware optimizer (--use-precision-aware-optimizer --exp-avg-dtype bf16
#   --exp-avg-sq-dtype bf16; Transformer Engine FusedAdam): 2 B per moment. Beside bf16 working weights it keeps
#   only the low 16 bits of each fp32 main weight, the high 16 being the bf16 weight itself
#   (OptimizerConfig.store_param_remainders, default True; FusedAdam store_param_remainders "works only when param
#   type is BF16 and master weight type is FP32"): 2 B of main weight. fp16 and FP8 weights keep all 4.
# * FP8 parameters (--fp8-param-gather, Transformer Engine Float8Tensor weights): 1 B working weights, gathered in
#   FP8 (one scale per tensor, precision.FP8); main weights, gradients and moments keep their precision.
# adam_step: read gradient + main weight + moments (4 + 4 + 8), write main weight + moments (4 + 8), write the
# 16-bit weight (2), gradient clipping and zeroing (8) = 38 B; bf16 moments move 8 B less, remainders 2 B less.
# A framework's own conventions (NeMo's bf16 gradients, DeepSpeed's optimizers, FSDP's fp32 shards) stay in its
# preset; Framework.for_dtype("fp16") and Framework.with_precision take the rows below.
FP8_WEIGHT_BYTES = FP8.bytes_per_element  # one scale per tensor: 1 B per element
# (working weights, Adam moments):  param, grad, main param, main grad, moments, Adam step  # total, distributed
PARAM_BYTES: dict[tuple[str, str], ParamBytes] = {
    ("bf16", "fp32"): ParamBytes(2.0, 4.0, 4.0, 0.0, 8.0, 38.0),  # 18, 6 + 12/d
    ("fp16", "fp32"): ParamBytes(2.0, 2.0, 4.0, 4.0, 8.0, 38.0),  # 20, 4 + 16/d
    ("fp8", "fp32"): ParamBytes(FP8_WEIGHT_BYTES, 4.0, 4.0, 0.0, 8.0, 38.0),  # 17, 5 + 12/d
    ("bf16", "bf16"): ParamBytes(2.0, 4.0, 2.0, 0.0, 4.0, 28.0),  # 12, 6 + 6/d
    ("fp16", "bf16"): ParamBytes(2.0, 2.0, 4.0, 4.0, 4.0, 30.0),  # 16, 4 + 12/d
    ("fp8", "bf16"): ParamBytes(FP8_WEIGHT_BYTES, 4.0, 4.0, 0.0, 4.0, 30.0),  # 13, 5 + 8/d
}
# Megatron-core's default recipe: bf16 weights, fp32 gradients, fp32 main weights and moments
MEGATRON_BF16 = PARAM_BYTES[("bf16", "fp32")]
# expert biases added in the GEMM's epilogue (or no expert biases): no traffic of their own (Framework.expert_bias_bytes)
NO_EXPERT_BIAS_BYTES = ((0.0, 0.0), (0.0, 0.0))


def param_bytes(dtype: str, fp8_params: bool = False, moments_dtype: str = "fp32") -> ParamBytes:
    """The PARAM_BYTES row of a run: its working weights are FP8 with FP8 parameters, fp16 in an fp16 run, else
    bf16 (bf16, FP8 and NVFP4 compute keep bf16 weights)."""
    weights = "fp8" if fp8_params else "fp16" if dtype == "fp16" else "bf16"
    return PARAM_BYTES[(weights, moments_dtype)]


@dataclass(frozen=True)
class Framework:
    name: str
    # --- bytes per parameter (mixed-precision Adam, PARAM_BYTES; Megatron-LM docs/source/api-guide/
    #     dist_optimizer.md, "18 bytes per parameter, 6 + 12/d with the distributed optimizer")
    weight_bytes: float = MEGATRON_BF16.param  # 16-bit working weights
    grad_bytes: float = MEGATRON_BF16.grad  # Megatron accumulates gradients in an fp32 main_grad buffer
    master_bytes: float = MEGATRON_BF16.main_param  # fp32 master weights
    optimizer_bytes: float = MEGATRON_BF16.optimizer  # Adam first and second moments in fp32
    extra_unsharded_bytes: float = 0.0  # e.g. DeepSpeed BF16_Optimizer's fp32 gradient accumulation buffer
    grad_reduce_bytes: float = 4.0  # element size of the data-parallel gradient reduction
    param_gather_bytes: float = 2.0  # element size when gathering parameters (ZeRO-1 update, ZeRO-3 fetch)
    # --- runtime overheads (memory)
    cuda_context_bytes: float = 0.8 * GiB  # CUDA context + cuBLAS workspaces: visible to nvidia-smi only
    # NCCL's channel buffers (NCCL_BUFFSIZE 4 MiB per channel and peer for the Simple protocol, plus LL/LL128),
    # allocated with cudaMalloc outside PyTorch's caching allocator: seen by nvidia-smi, not by
    # torch.cuda.memory_reserved (NCCL docs, "Environment variables": NCCL_BUFFSIZE)
    nccl_buffer_bytes: float = 0.5 * GiB
    comm_buffer_bytes: float = 0.0  # framework communication buckets inside the caching allocator
    allocator_overhead_fraction: float = 0.05  # caching-allocator reserve over peak allocated (fragmentation)
    # PyTorch's caching allocator with expandable segments (PYTORCH_CUDA_ALLOC_CONF, PyTorch ≥ 2.1) maps
    # physical pages into one growing virtual range; the older splitting allocator fragments under recompute,
    # ZeRO and pipelining: SPLITTING_ALLOCATOR_FRAGMENTATION more of the peak allocated
    expandable_segments: bool = True
    logits_bytes_per_element: float = 6.0  # 16-bit logits + fp32 cross-entropy copy (vocab-parallel CE)
    eager_activation_factor: float = 1.0  # >1 for unfused eager PyTorch (extra saved intermediates)
    # HBM traffic of the cross-entropy loss per logit (bytes, forward + backward). Megatron's unfused
    # vocab-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py; --cross-entropy-loss-fusion is
    # opt-in, TransformerConfig.cross_entropy_loss_fusion = False) runs one kernel per step on the fp32 logits:
    # forward cast to fp32 (read 2, write 4), max (read 4), subtract max in place (4 + 4), exp in place (4 + 4),
    # sum (4), divide in place to the saved softmax (4 + 4) = 38 B; backward multiply by the incoming gradient in
    # place (4 + 4) and cast back to 16 bit (4 + 2) = 14 B; 52 B in all
    ce_bytes_per_logit: float = 52.0
    selective_policy: str = "core_attention"  # what recompute="selective" recomputes: core_attention | op
    # --- runtime behaviour (time)
    tp_overlap: float = 0.0  # share of tensor-parallel communication hidden behind GEMMs
    # Megatron's column-parallel linear backward (LinearWithGradAccumulationAndAsyncCommunication in
    # megatron/core/tensor_parallel/layers.py, Megatron-LM ≥ 2022 with --async-tensor-model-parallel-allreduce on
    # by default): the input-gradient all-reduce (reduce-scatter under SP) is launched asynchronously before the
    # weight-gradient GEMM, and under SP the all-gather of the input for that GEMM before the data-gradient GEMM
    # (CUDA_DEVICE_MAX_CONNECTIONS=1 orders them), so those collectives hide behind the backward GEMMs of the QKV
    # and FFN-in layers; the all-gathers that undo the forward's reduce-scatters stay exposed
    tp_async_backward: bool = False
    dp_overlap: float = 1.0  # share of the backward pass the gradient reduction may hide behind
    # The gradients are reduced in buckets, each launched when its gradients are final; the last bucket (the first
    # layers' parameters, backprop order) is final only when the backward ends, so its reduction cannot hide, nor
    # can the all-gather of the first bucket the next forward needs first. (floor, per data-parallel rank): a
    # bucket of max(floor, per_rank × dp·cp) parameters, Megatron-core's default DistributedDataParallelConfig.
    # bucket_size ("max(40000000, 1000000 * dp_size) parameters (larger DP sizes need larger buckets to ensure
    # collectives do not become latency-bound)", megatron/core/distributed/distributed_data_parallel_config.py and
    # distributed_data_parallel.py). None: the unit is one layer (FSDP reduces per wrapped transformer block)
    dp_bucket_params: tuple[float, float] | None = (40e6, 1e6)
    param_gather_overlap: float = 1.0  # share of the forward pass the parameter all-gather may hide behind
    # share of a micro-batch's compute that ZeRO-3 weight prefetch may hide behind. 1.0 is PyTorch FSDP's and
    # Megatron-FSDP's schedule: the all-gather of unit i+1 is issued before unit i computes (forward prefetch;
    # BACKWARD_PRE in the backward) and each reduce-scatter runs beside the next unit's backward, so every
    # collective but the forward's first all-gather and the backward's last reduce-scatter overlaps compute (Zhao et
    # al. 2023, "PyTorch FSDP", VLDB, arXiv 2304.11277, Sec. 3.3 and Fig. 5). Those two, one unit (a layer) each
    # per step, are charged exposed (app.core.step.data_parallel_times), as the last gradient bucket of ZeRO 0-2
    # is (dp_bucket_params); how much the overlap slows compute is charged too (overlap_slowdown, comm_sm_share)
    zero3_overlap: float = 1.0
    zero3_rank_nic: bool = False  # ZeRO-3 collectives limited to each rank's own NIC share (see DEEPSPEED)
    # ZeRO-3 gathered-parameter working set: 0 → two whole layers of weights and gradients (FSDP unit = one
    # transformer block, current + prefetched); > 0 → at most this many live parameters (DeepSpeed
    # stage3_max_live_parameters), gradients going through the reduce bucket counted in comm_buffer_bytes
    zero3_live_params: float = 0.0
    # ZeRO-3 collectives per transformer layer and pass, each paying the collective's latency, which for a ring
    # grows with the number of ranks. 1: PyTorch FSDP (FSDP1 auto-wrap per block, FSDP2 fully_shard per block) and
    # Megatron-FSDP (fsdp_unit_modules = the transformer layer) gather and reduce one unit per collective (Zhao et
    # al. 2023, arXiv 2304.11277, Sec. 3.3); DeepSpeed ZeRO-3 fetches the parameters of each sub-module — norm,
    # QKV, projection, FFN in/out — right before that sub-module runs (6); 0 → one message per pass (no preset)
    zero3_collectives_per_layer: int = 1
    # ZeRO-3 keeps a sharded 16-bit copy of the weights beside the fp32 master shard: DeepSpeed's fp16/bf16 param
    # partitions, Megatron-FSDP's sharded model-weight buffer. PyTorch FSDP with a mixed-precision policy does
    # not: the sharded parameter is the fp32 one (the optimizer's master weight) and it is cast to 16 bit only
    # when a unit is all-gathered (FSDP2 MixedPrecisionPolicy(param_dtype=bf16), torch.distributed.fsdp docs;
    # FSDP1 MixedPrecision(param_dtype) likewise), so its persistent state is 4 + 4 + 8 = 16 B per parameter
    zero3_sharded_16bit_copy: bool = True
    pp_overlap: float = 0.0  # share of pipeline send/recv hidden
    # Expert-parallel token dispatch. Megatron-core's default MoEAlltoAllTokenDispatcher sends every top-k copy of
    # a token to its expert's rank with one NCCL all-to-all, so a token whose experts sit on three other nodes
    # crosses the network up to k times. DeepEP's normal kernels and HybridEP (Megatron-core's "flex" dispatcher,
    # --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep|hybridep) send each token once per
    # destination node over RDMA and forward it to the expert GPUs over NVLink (DeepSeek-V3 technical report,
    # arXiv 2412.19437, Sec. 3.2.2; deepseek-ai/DeepEP README: "asymmetric-domain bandwidth forwarding")
    # which of them: "alltoall" (no deduplication), "deepep" or "hybridep"; the accuracy band also reads it
    moe_dispatcher: str = "alltoall"
    # how the router spreads a token's top-k experts, which sets how many ranks and nodes a deduplicating
    # dispatcher sends it to (app.core.step.dispatch_dedup_share): "uniform", a trained, balanced router;
    # "contiguous", NeMo Automodel's FakeBalancedGate (experts t·k … t·k + k − 1 of token t), which its published
    # MoE benchmarks ran with
    moe_routing: str = "uniform"
    # Megatron-core's --overlap-moe-expert-parallel-comm (Megatron-Bridge moe_a2a_overlap, the MoE model zoo's
    # A2A_OVERLAP=1): the combined 1F1B schedule runs the forward of one micro-batch beside the backward of
    # another, so each EP all-to-all hides behind the other micro-batch's compute (megatron/core/models/gpt/
    # fine_grained_callables.py, "EP A2A overlap" in megatron/core/transformer/moe/README.md)
    moe_a2a_overlap: bool = False
    # Host time of one expert GEMM call, seconds: what a layer pass pays per local expert and GEMM when the expert
    # GEMMs run as one call each rather than as one grouped kernel (EXPERT_GEMM_HOST_S); 0 for a single-launch
    # grouped kernel. app.core.step.layer_times charges it for 2 forward and 4 backward GEMMs per local expert
    expert_gemm_host_s: float = 0.0
    # Expert biases added outside the expert GEMMs (models whose experts carry them, LayerShape.expert_bias):
    # ((forward, backward) bytes of HBM traffic per element of fc1's output, the same for fc2's), per routed token
    # copy (app.core.step.layer_times); (0, 0) where the GEMM's epilogue adds the bias (EXPERT_BIAS_BYTES_*)
    expert_bias_bytes: tuple[tuple[float, float], tuple[float, float]] = NO_EXPERT_BIAS_BYTES
    # Compute slows while a collective runs beside it: NCCL's kernels hold SMs (one CTA per channel) and share HBM
    # bandwidth with the GEMMs. Lee et al. 2025 ("Characterizing Compute-Communication Overlap in GPU-Accelerated
    # Distributed Deep Learning", arXiv 2507.03114) measure an average compute slowdown of 18.9 % (max 40 %) on
    # A100/H100/MI250/MI210 for GPT and Llama training kernels overlapped with their collectives. Each second of
    # hidden communication therefore costs this share of a second (app.core.step.overlapped)
    overlap_slowdown: float = OVERLAP_COMPUTE_SLOWDOWN
    # the floor of that slowdown for a collective that leaves the scale-up domain (app.core.step.overlap_slowdown)
    comm_sm_share: float = COMM_SM_SHARE
    # Transformer Engine's userbuffers (tp_overlap) move data with copy engines (ring_exchange, 1 SM) or a few
    # SMs (bulk: 2-24 SMs per GEMM, pipeline), configured per GEMM so the GEMM keeps the rest: NeMo's H100 recipe
    # for hidden 8192, tp 4 gives bulk 4/24/2/4 SMs and ring exchange elsewhere (NeMo
    # nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py), about 8 of 132 SMs on average
    tp_overlap_slowdown: float = USERBUFFERS_SM_SHARE
    # boundary-activation transfer times on a stage's critical path per micro-batch and model chunk. Megatron's
    # 1F1B pairs each send with the opposite receive in one batched exchange (send_forward_recv_backward /
    # send_backward_recv_forward over torch.distributed.batch_isend_irecv, megatron/core/pipeline_parallel/
    # p2p_communication.py): 2. DeepSpeed's PipelineEngine runs SendActivation, RecvActivation, SendGrad and
    # RecvGrad as four separate blocking instructions (deepspeed/runtime/pipe/schedule.py TrainSchedule.steps,
    # p2p.py send/recv): 4
    pp_transfers_per_microbatch: int = 2
    # Without sequence parallelism every TP rank holds the whole boundary activation. Scatter-gather sends 1/tp
    # of it from each rank and all-gathers it over the TP group on receipt: Megatron-LM 2021-22
    # (--scatter-gather-tensors-in-pipeline, on by default; Narayanan et al. 2021 Sec. 4.1) and DeepSpeed's
    # PipelineEngine (is_pipe_partitioned = is_grad_partitioned = is_model_parallel; PartitionedTensor over the
    # TP group, .full() on receipt: deepspeed/runtime/pipe/engine.py). Megatron-core dropped it: without SP it
    # sends the whole [s, b, h] tensor from every rank (megatron/core/pipeline_parallel/schedules.py
    # get_tensor_shapes divides the sequence by tp only under sequence parallelism). With SP the boundary is
    # already [s/tp, b, h] in every framework.
    pp_scatter_gather: bool = False
    elementwise_efficiency: float = 0.7  # achieved share of HBM bandwidth in memory-bound kernels
    fused_elementwise: bool = True  # fused bias/dropout/add and norm kernels (Megatron fused kernels)
    # HBM traffic of one norm's forward per element of the hidden state (bytes; backward ~2×): a fused
    # LayerNorm/RMSNorm kernel reads and writes the 16-bit activation once (Apex/TE fused norms): 4
    norm_bytes_per_element: float = 4.0
    step_overhead_s: float = 0.0  # per-iteration fixed cost (data loading, logging)
    # when a ZeRO-3 run with pp > 1 frees its gathered parameters (app.core.layout.RESHARD_MODES): PyTorch
    # pipelining over FSDP2 modules keeps them and the unsharded gradients until the step's last backward
    # (torch/distributed/pipelining/stage.py backward_maybe_with_nosync: set_reshard_after_backward(False),
    # set_requires_gradient_sync(False), FSDP's post-backward run once on the last micro-batch)
    pipeline_reshard: str = "forward"
    # bf16 runs of DeepSpeed use its BF16_Optimizer instead of the fp16 ZeRO optimizer: 16-bit gradients plus an
    # unsharded fp32 gradient-accumulation buffer, and no separate fp32 partition gradient
    # (DeepSpeed runtime/bf16_optimizer.py, fp32_groups_gradients; Megatron-DeepSpeed --bf16)
    bf16_optimizer: bool = False
    # HBM bytes moved per local parameter and micro-batch outside the backward kernels, by a gradient accumulation
    # the framework runs after each micro-batch's backward. DeepSpeed's BF16_Optimizer folds the 16-bit gradients
    # into its fp32 buffer after every micro-batch: `hp_grad.add_(lp.grad.to(fp32))` per parameter, called from
    # PipelineEngine._exec_backward_pass ("manually call because we don't call optimizer.backward()") and from
    # BF16_Optimizer.backward (deepspeed/runtime/bf16_optimizer.py update_hp_grads): the cast reads 2 B and writes a
    # 4 B temporary, the add reads it and the fp32 accumulator (4 + 4 B) and writes the accumulator (4 B): 18 B.
    # Megatron accumulates in fp32 inside the weight-gradient GEMM (gradient_accumulation_fusion): 0
    grad_accum_bytes_per_param: float = 0.0
    # Megatron keeps an fp16 run's gradients in fp16 (its gradient buffer takes the parameter dtype: fp32
    # accumulation and reduction are forced only for bf16, megatron/training/arguments.py
    # accumulate_allreduce_grads_in_fp32) and the optimizer holds a separate fp32 main gradient next to the fp32
    # main weights: "fp16 param, fp16 grads: 20 bytes per parameter, 4 + 16/d with the distributed optimizer"
    # (Megatron-LM docs, distributed optimizer; PARAM_BYTES). `for_dtype("fp16")` applies it
    fp16_grads_in_param_dtype: bool = False
    # Bytes per element of the GEMM inputs a layer keeps for its weight-gradient GEMM. 16-bit runs keep the 16-bit
    # tensor (2). Under FP8, Transformer Engine keeps only the quantized copy it cast for the forward GEMM, in its
    # column-wise (transposed) layout: "Prepare input tensor for backward pass ... update_usage(rowwise_usage=False,
    # columnwise_usage=True)" before save_for_backward (transformer_engine/pytorch/ops/basic/basic_linear.py,
    # grouped_linear.py; module/linear.py, layernorm_linear.py save the FP8 ln_out): 1 B per element (MXFP8 adds one
    # E8M0 scale per 32 elements, 3 %). torchao's Float8Linear (torchtitan) saves the high-precision input and
    # re-casts it in backward (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args.forward:
    # ctx.save_for_backward(input_hp, weight_hp_t)): 2. `for_dtype("fp8")` applies it as `gemm_input_bytes`
    fp8_saved_input_bytes: float = 1.0
    gemm_input_bytes: float = 2.0
    # FP8 parameters (Layout.fp8_param_gather): which sharding keeps the working weights as FP8 tensors and
    # all-gathers them in FP8. "distributed-optimizer": Megatron-core `--fp8-param-gather` (Transformer Engine
    # Float8Tensor parameters; the distributed optimizer or FSDP, zero ≥ 1). "fsdp": torchao's FSDP2 float8
    # all-gather (`enable_fsdp_float8_all_gather`: the fp32 shard is cast to FP8 before the all-gather, zero = 3
    # only; torchao/float8/fsdp_utils.py). "unsupported": frameworks without either (DeepSpeed, Megatron-LM
    # before FP8). `with_precision` applies it (PARAM_BYTES)
    fp8_param_gather: str = "distributed-optimizer"
    # Megatron-core's precision-aware optimizer (Transformer Engine FusedAdam with exp_avg_dtype /
    # exp_avg_sq_dtype): Adam moments in bf16 (Layout.optimizer_moments_dtype); `with_precision` applies it
    precision_aware_optimizer: bool = True
    # HBM traffic of the fused Adam step per parameter: read grad + master + m + v (16), write master + m + v (12),
    # the 16-bit copy of the weight (2), gradient clipping and zeroing (8) (PARAM_BYTES)
    adam_step_bytes_per_param: float = MEGATRON_BF16.adam_step
    # Fused attention: "flash-attention-1" (FlashAttention of 2022-23), "flash-attention-2" (the flash-attn
    # package, PyTorch SDPA's flash backend) or "transformer-engine" (TE's DotProductAttention: cuDNN on compute capability >= 9.0, FlashAttention-2 below);
    # kernel speeds per architecture in app.core.attention
    attention_backend: str = "flash-attention-2"
    # The ZeRO stages the framework can run (Layout.zero; the planner searches only these, app.core.planner
    # _sharding_rules). Megatron-core shards the optimizer with its distributed optimizer (--use-distributed-optimizer,
    # ZeRO-1-like; Megatron-LM docs/source/api-guide/dist_optimizer.md) and parameters too with Megatron-FSDP
    # (--use-megatron-fsdp, earlier --use-custom-fsdp, --data-parallel-sharding-strategy optim_grads_params:
    # "shards optimizer states, gradients, and parameters"; Megatron-Core developer guide, "Megatron FSDP"), so
    # every stage; DeepSpeed has ZeRO 1-3 and PyTorch FSDP FULL_SHARD is ZeRO-3. The 2021-22 Megatron-LM presets
    # narrow it (MEGATRON_2021, MEGATRON_2022)
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    # Context parallelism (Layout.cp, Megatron-core --context-parallel-size: the sequence split over ranks for the
    # attention too, with ring exchange of keys and values; Megatron-Core developer guide, "context_parallel
    # package"), in Megatron-core from late 2023. Megatron-LM of 2021-22 had none: Korthikanti et al.'s sequence
    # parallelism splits only the regions outside tensor parallelism (arXiv 2205.05198, Sec. 4.2.2)
    context_parallel: bool = True
    # Sequence parallelism and selective activation recomputation, both introduced by Korthikanti et al. 2022
    # (arXiv 2205.05198, Sec. 4.2.2 and 5; Megatron-LM --sequence-parallel, --recompute-granularity selective).
    # Code bases of 2021 have full recomputation (--checkpoint-activations) only
    sequence_parallel: bool = True
    selective_recompute: bool = True
    # The highest ZeRO stage the framework runs beside pipeline parallelism (pp > 1). DeepSpeed's pipeline engine
    # refuses ZeRO-2 and ZeRO-3: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
    # (deepspeed/runtime/pipe/engine.py, PipelineEngine.__init__)
    pipeline_max_zero: int = 3
    # The least pipeline size the framework interleaves with (vp > 1), and whether it splits layers unevenly over
    # the stages (Megatron-core's embedding / loss accounting, --account-for-embedding-in-pipeline-split). Megatron-LM
    # of 2021-23 asserted "pipeline-model-parallel size should be greater than 2 with interleaved schedule" and gave
    # every stage num_layers / pp layers ("num_layers must be divisible by transformer_pipeline_model_parallel_size";
    # megatron/arguments.py validate_args, megatron/model/transformer.py _get_num_layers)
    interleave_min_pp: int = 2
    uneven_pipeline_split: bool = True

    @property
    def fragmentation_fraction(self) -> float:
        """Allocator reserve over peak allocated memory (fragmentation), by allocator mode."""
        extra = 0.0 if self.expandable_segments else SPLITTING_ALLOCATOR_FRAGMENTATION
        return self.allocator_overhead_fraction + extra

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def moe_dispatch_dedup(self) -> bool:
        """Whether EP tokens cross the network once per destination node (DeepEP, HybridEP), not once per expert."""
        return self.moe_dispatcher != "alltoall"

    def with_(self, **changes: Any) -> Framework:
        return replace(self, **changes)

    def with_fused_grouped_experts(self) -> Framework:
        """This framework with its experts run as one fused grouped GEMM over device-side token counts, so no call
        per local expert (expert_gemm_host_s 0): Megatron-core's Transformer Engine op fuser
        (--use-transformer-engine-op-fuser with --moe-grouped-gemm; moe_use_grouped_tensor), which full-iteration
        CUDA graphs of MoE layers run on (FUSED_GROUPED_EXPERTS_SOURCE). Unchanged where the experts already run
        as one kernel."""
        if not self.expert_gemm_host_s:
            return self
        return replace(self, name=f"{self.name}+fused-experts", expert_gemm_host_s=0.0)

    def with_optimizer_state(self, row: ParamBytes) -> Framework:
        """This framework with the optimizer's side of a recipe's bytes per parameter (`row`): the main weight,
        the moments with the main gradient, and the Adam step's traffic."""
        return replace(
            self,
            master_bytes=row.main_param,
            optimizer_bytes=row.optimizer,
            adam_step_bytes_per_param=row.adam_step,
        )

    def fp8_param_gather_refusal(self, zero: int | None) -> str | None:
        """Why this framework cannot keep FP8 parameters at ZeRO stage `zero` (None: at any stage, as the planner asks
        before it searches them), or None when it can."""
        if self.fp8_param_gather == "unsupported":
            return f"{self.name} has no FP8 parameters (fp8_param_gather)"
        if self.fp8_param_gather == "fsdp" and zero is not None and zero != 3:
            return (
                f"{self.name} gathers FP8 parameters through FSDP only (zero = 3, torchao float8 all-gather)"
            )
        return None

    def precision_aware_refusal(self) -> str | None:
        """Why this framework cannot keep the Adam moments in bf16, or None when it can."""
        if not self.precision_aware_optimizer:
            return f"{self.name} keeps fp32 Adam moments (bf16 moments are Megatron-core's precision-aware optimizer)"
        return None

    def with_precision(self, dtype: str, fp8_params: bool, moments_dtype: str) -> Framework:
        """This framework with a layout's precision options applied: FP8 parameters (1 B working weights, gathered
        in FP8) and the Adam moments' dtype (bf16: Megatron-core's precision-aware optimizer, with the main-weight
        remainders beside bf16 weights). The bytes per parameter are the recipe's row of PARAM_BYTES (`param_bytes`);
        without either option the framework's own conventions stand. The estimate and the planner both use it."""
        if not fp8_params and moments_dtype == "fp32":
            return self
        row = param_bytes(dtype, fp8_params, moments_dtype)
        fw = self.with_optimizer_state(row)
        if fp8_params:
            fw = replace(fw, weight_bytes=row.param, param_gather_bytes=row.param)
        return fw

    def for_dtype(self, dtype: str) -> Framework:
        """The conventions that apply to a run in compute dtype `dtype` (see `bf16_optimizer`)."""
        if self.bf16_optimizer and dtype == "bf16":
            # fp32 accumulation buffer (4 B/param, not sharded); the optimizer keeps fp32 master + Adam moments
            return replace(
                self,
                extra_unsharded_bytes=4.0,
                optimizer_bytes=8.0,
                bf16_optimizer=False,
                grad_accum_bytes_per_param=BF16_OPTIMIZER_ACCUM_BYTES,
            )
        if dtype == "fp16" and self.fp16_grads_in_param_dtype:
            fp16 = PARAM_BYTES[("fp16", "fp32")]
            return replace(
                self,
                grad_bytes=fp16.grad,
                grad_reduce_bytes=fp16.grad,
                optimizer_bytes=fp16.optimizer,
                fp16_grads_in_param_dtype=False,
            )
        if dtype == "fp8" and self.gemm_input_bytes != self.fp8_saved_input_bytes:
            return replace(self, gemm_input_bytes=self.fp8_saved_input_bytes)
        if dtype == "fp4":
            # a framework that keeps the quantized FP8 copy keeps the NVFP4 one (Transformer Engine's
            # NVFP4BlockScaling saves the column-wise, Hadamard-transformed NVFP4 input for the weight-gradient
            # GEMM: 4.5 bits per element); one that keeps the 16-bit input under FP8 (torchao) keeps it here too
            keeps_quantized = self.fp8_saved_input_bytes < SOURCE_BYTES
            saved = NVFP4.bytes_per_element if keeps_quantized else SOURCE_BYTES
            return replace(self, gemm_input_bytes=saved) if saved != self.gemm_input_bytes else self
        return self


# Transformer Engine's GroupedLinear, which Megatron-core's TEGroupedMLP (--moe-grouped-gemm) runs the experts
# with, issues one cuBLASLt GEMM per local expert, round-robin over compute streams ("For now, we only have
# multi-stream cublas backend", transformer_engine/pytorch/csrc/extensions/gemm.cpp te_general_grouped_gemm;
# TransformerEngine PR #853 and issue #1386: multi-stream cuBLAS rather than a grouped kernel), and reads the
# tokens per expert on the host first (TEGroupedMLP.forward: tokens_per_expert.tolist(), "transformer engine
# requires this to be a list"), so the calls start from a drained queue and each costs a fixed time of its own.
# Measured: 8 experts x 128 tokens, N = K = 2048 on SM100 in per-tensor NVFP4 (the one dtype the benchmark times;
# the multi-stream path is the same for every dtype, PR #853), 0.267 ms for the 8 GEMMs through it
# with the operands prepared ("pure", kernel-vs-kernel: GEMM time on the GPU, the work itself under a microsecond
# per GEMM), against 0.069 ms for one CUTLASS grouped launch of the same work (TransformerEngine PR #3134,
# benchmarks/linear/benchmark_grouped_linear.py): 0.267 / 8 = 33 us per expert GEMM. A kernel-side time, so CUDA
# graphs do not remove it. Applied to every expert GEMM of the forward (fc1, fc2) and the backward (their data and
# weight gradients). The field keeps its name, expert_gemm_host_s, though the figure is not host time alone.
EXPERT_GEMM_HOST_S = 0.267e-3 / 8
# The other path, in Megatron-core since 2026: the Transformer Engine op fuser (use_transformer_engine_op_fuser with
# moe_grouped_gemm, which turns on moe_use_grouped_tensor: TE's GroupedTensor with CUDA split metadata) runs the
# experts as one fused grouped GEMM over device-side per-expert token counts, graph-capturable. Megatron-Bridge's
# full-iteration CUDA-graph MoE recipes all set it (perf_recipes qwen/common.py and deepseek/common.py
# _enable_hybridep_full_iteration_mxfp8, gpt_oss/common.py _apply_gpt_oss_120b_full_iter_fp8mx_configs), beside the
# static shapes (moe_expert_rank_capacity_factor) that "require the fused grouped GEMM over device-side per-expert
# counts", and their comments give the reason: "the legacy grouped MLP path syncs tokens_per_expert to the host
# every layer". Framework.with_fused_grouped_experts.
FUSED_GROUPED_EXPERTS_SOURCE = (
    "Megatron-core --use-transformer-engine-op-fuser with --moe-grouped-gemm (moe_use_grouped_tensor); "
    "Megatron-Bridge full-iteration CUDA-graph MoE recipes (perf_recipes */common.py)"
)

# DeepEP over a multi-node NVLink domain. DeepEP's own kernels serve NVLink domains of up to 8 GPUs (its intranode
# path; larger domains through a community patch, deepseek-ai/DeepEP PR #218). On GB200 NVL72 with EP32 its dispatch
# reached "about 400 GB/s and the combine can only reach about 190 GB/s algorithm bandwidth with 24 SMs, which is a
# large gap from the unidirectional bandwidth of 900 GB/s for MNNVL" (NVIDIA/Megatron-LM docs/discussions/
# deepseek-v3-gb200-optimization, Sec. 2.2.1, 2025). app.core.step charges DeepEP's all-to-all in an EP group with
# more than DEEPEP_NVLINK_DOMAIN_GPUS ranks in one NVLink domain at no more than these rates; HybridEP, written for
# NVL72, and NCCL's all-to-all keep the network model's rates. docs/constants.md#deepep-mnnvl
DEEPEP_NVLINK_DOMAIN_GPUS = 8
DEEPEP_MNNVL_DISPATCH_BYTES_PER_S = 400e9
DEEPEP_MNNVL_COMBINE_BYTES_PER_S = 190e9
DEEPEP_MNNVL_SOURCE = (
    "Megatron-LM docs/discussions/deepseek-v3-gb200-optimization Sec. 2.2.1: DeepEP at EP32 on GB200 NVL72, "
    "dispatch about 400 GB/s and combine about 190 GB/s algorithm bandwidth (24 SMs)"
)

# Expert biases (gpt-oss: HF GptOssExperts gate_up_proj_bias, down_proj_bias) outside the expert GEMMs, in bytes per
# element of the expert's fc1 / fc2 output and per routed token copy, (forward, backward), 16-bit activations:
# - Megatron-core TEGroupedMLP (megatron/core/transformer/moe/experts.py): fc1 is built with skip_bias_add=False,
#   so Transformer Engine's GroupedLinear adds its bias in the GEMM; fc2 with skip_bias_add=True, and
#   TEGroupedMLP._apply_bias adds it per local expert as torch.cat([t + b * p ...]).to(dtype), the router
#   probabilities p in the model's 16-bit dtype (moe_router_dtype unset): forward b·p written (2), t + b·p read
#   and written (2 + 2 + 2), the cat copied (2 + 2) = 12; backward the two gradients of b·p, each a product written
#   and read back and a reduction (2 + 2 + 2, twice) = 12
EXPERT_BIAS_BYTES_MEGATRON = ((0.0, 0.0), (12.0, 12.0))
# - NeMo Automodel GroupedExpertsDeepEP (nemo_automodel/components/moe/experts.py, grouped_gemm's ops.gmm has no
#   bias): fc1 by _apply_bias as torch.cat([t + b ...]): forward t + b (2 + 2) and the cat (2 + 2) = 8, backward the
#   bias gradient's reduction (2); fc2 as Megatron's but with DeepEP's fp32 top-k weights, so b·p and the sum are
#   fp32: forward b·p (4), t + b·p (2 + 4 + 4), the cat (4 + 4), .to(bf16) (4 + 2) = 28; backward the cast of the
#   gradient to fp32 (2 + 4), its cast back for t (4 + 2) and the two products and reductions (4 + 4 + 4, twice)
#   = 36
EXPERT_BIAS_BYTES_AUTOMODEL = ((8.0, 2.0), (28.0, 36.0))
# - torchtitan GptOssGroupedExperts (torchtitan/models/gpt_oss/moe.py): each bias repeat_interleave'd to one row
#   per token (2 written), then added (2 + 2 + 2) = 8 forward; backward the repeat's reduction (2)
EXPERT_BIAS_BYTES_TORCHTITAN = ((8.0, 2.0), (8.0, 2.0))

# Megatron-core 2024 (NVIDIA/Megatron-LM, --use-distributed-optimizer --overlap-grad-reduce
# --overlap-param-gather, Transformer Engine, fp32 gradient buffer); the column-parallel backward overlaps its
# input-gradient collectives with the weight-gradient GEMM (tp_async_backward; Transformer Engine's Linear does
# the same without userbuffers).
MEGATRON_CORE = Framework(
    name="megatron-core",
    tp_async_backward=True,
    fp16_grads_in_param_dtype=True,
    attention_backend="transformer-engine",
    expert_gemm_host_s=EXPERT_GEMM_HOST_S,
    expert_bias_bytes=EXPERT_BIAS_BYTES_MEGATRON,
)

# NeMo on Megatron-core with Transformer Engine userbuffers (tp_comm_overlap=True in the NeMo performance
# recipes, NVIDIA/NeMo docs/source/performance/performance_summary.md), distributed optimizer.
# Userbuffers' bulk data-/weight-gradient overlaps (ub_bulk_dgrad, ub_bulk_wgrad) are the same overlap as
# tp_async_backward, counted within tp_overlap, so it is not applied a second time.
# Gradients in bf16: NVIDIA's published performance runs keep and reduce the gradients in the 16-bit parameter
# dtype, not Megatron-LM's fp32 default. NeMo 1.x (NeMo-Framework-Launcher examples/training/*/h100/*.sh, e.g.
# gpt/h100/175b_fp8_16node.sh, llama/h100/llama3_8b_fp8.sh) runs distributed_fused_adam with
# contiguous_grad_buffer and `optim.grad_sync_dtype=bf16`; Megatron-Bridge's performance configs set
# `ddp.grad_reduce_in_fp32 = False` (the grad buffer then takes the bf16 parameter dtype). 2 B per parameter
# held and reduced.
NEMO = MEGATRON_CORE.with_(
    name="nemo",
    tp_overlap=0.8,
    pp_overlap=0.5,
    tp_async_backward=False,
    grad_bytes=2.0,
    grad_reduce_bytes=2.0,
)

# Megatron-LM as of Narayanan et al. 2021 / Korthikanti et al. 2022: no gradient-reduction overlap
# ("no grad all-reduce overlap used", Korthikanti Sec. 6.3), no TP overlap, fp32 gradient all-reduce.
# PyTorch of that time (< 2.1) had only the splitting caching allocator.
# The 2021 code (Narayanan et al. 2021) ran the column-parallel input-gradient all-reduce synchronously
# (copy_to_tensor_model_parallel_region in megatron/mpu/layers.py), so tp_async_backward is off.
# Megatron-LM of 2021 replicated the optimizer on every data-parallel rank: the distributed optimizer
# (--use-distributed-optimizer, megatron/optimizer/distrib_optimizer.py) came in 2022, and parameter sharding only
# with Megatron-FSDP (Megatron-Core 0.11-0.14, 2025); Narayanan et al. 2021 compare with ZeRO-3 in DeepSpeed
# (Table 2), not in Megatron-LM. So ZeRO stage 0 only.
MEGATRON_2021 = MEGATRON_CORE.with_(
    name="megatron-2021",
    expert_gemm_host_s=0.0,  # no Transformer Engine GroupedLinear (and no MoE) in the 2021-22 code
    expert_bias_bytes=NO_EXPERT_BIAS_BYTES,
    zero_stages=(0,),
    context_parallel=False,
    sequence_parallel=False,  # both came with Korthikanti et al. 2022 (MEGATRON_2022)
    selective_recompute=False,
    interleave_min_pp=3,
    uneven_pipeline_split=False,
    precision_aware_optimizer=False,
    fp8_param_gather="unsupported",
    # before Transformer Engine and FlashAttention-2 (July 2023): Megatron-LM's --use-flash-attn of early 2023 called
    # FlashAttention v1 (flash_attn_func / flash_attn_unpadded_func; BigCode's fork, megatron/model/transformer.py)
    attention_backend="flash-attention-1",
    pp_scatter_gather=True,
    dp_overlap=0.0,
    param_gather_overlap=0.0,
    dp_bucket_params=None,
    expandable_segments=False,
    tp_async_backward=False,
)

# Megatron-LM of Korthikanti et al. 2022 (sequence parallelism): the 2021 conventions plus the asynchronous
# column-parallel backward that came with sequence parallelism (LinearWithGradAccumulationAndAsyncCommunication,
# on by default: --no-async-tensor-model-parallel-allreduce turns it off). Its Table 4 shows it: without SP the
# measured layer backward (11.9 ms for GPT-22B at tp 8, b 4) equals the backward GEMM and kernel time alone, i.e.
# the two input-gradient all-reduces (~0.8 ms each) are not on the critical path.
# Its only sharding is the distributed optimizer (ZeRO-1: optimizer states; gradients reduce-scattered into a full
# fp32 buffer), added in 2022 (megatron/optimizer/distrib_optimizer.py; StarCoder's 2023 fork of it runs
# --use-distributed-optimizer, Li et al. 2023, arXiv 2305.06161, Sec. 5.6): no ZeRO-2 or ZeRO-3 before
# Megatron-FSDP (2025).
MEGATRON_2022 = MEGATRON_2021.with_(
    name="megatron-2022",
    tp_async_backward=True,
    zero_stages=(0, 1),
    sequence_parallel=True,
    selective_recompute=True,
)

# Megatron-DeepSpeed (BigScience, vTrain): ZeRO-1 fp16 optimizer keeps 16-bit gradients, reduces in 16 bit
# (DeepSpeed runtime/zero/stage_1_and_2.py); no overlap of the reduction with the pipeline's last backward.
# ZeRO-3 in DeepSpeed of that period fetched the parameters of each sub-module with its own collective and
# reached only the per-rank NIC bandwidth across nodes: Narayanan et al. 2021 Table 2 shows ZeRO-3 throughput
# falling 144 → 88 → 44 TFLOP/s from 384 to 1,536 GPUs at a fixed batch, i.e. communication that does not
# speed up with more GPUs and whose exposed part grows with the ring's length (per-collective latency × the
# 6 collectives per layer and pass). Prefetch hides it behind half of the compute (zero3_overlap, the one
# constant chosen against those six rows, the only published DeepSpeed ZeRO-3 runs in the validation set).
DEEPSPEED = MEGATRON_CORE.with_(
    name="megatron-deepspeed",
    expert_gemm_host_s=0.0,  # DeepSpeed-MoE's experts, not Transformer Engine's GroupedLinear
    # DeepSpeed-MoE's experts are torch.nn.Linear modules: addmm adds the bias in the GEMM
    expert_bias_bytes=NO_EXPERT_BIAS_BYTES,
    precision_aware_optimizer=False,
    fp8_param_gather="unsupported",
    # Megatron-DeepSpeed's --use-flash-attn-v2 calls the flash-attn package, not Transformer Engine
    attention_backend="flash-attention-2",
    # its fp16 conventions are its own (below): 16-bit gradients, fp32 partition gradient in optimizer_bytes
    fp16_grads_in_param_dtype=False,
    grad_bytes=2.0,
    # the fp16 ZeRO-1/2 optimizer also keeps an fp32 gradient of its partition for the update
    # (DeepSpeed runtime/zero/stage_1_and_2.py, single_partition_of_fp32_groups[i].grad): 8 + 4 B, sharded
    optimizer_bytes=12.0,
    grad_reduce_bytes=2.0,
    dp_overlap=0.0,
    param_gather_overlap=0.0,
    dp_bucket_params=None,
    zero3_overlap=0.5,
    zero3_rank_nic=True,
    # sub-modules with parameters in a GPT layer: two norms, QKV, output projection, FFN in, FFN out
    zero3_collectives_per_layer=6,
    bf16_optimizer=True,
    # ZeRO-1/2 reduce and all-gather buckets, 5e8 elements each in 16 bit (DeepSpeed config defaults,
    # deepspeed.readthedocs.io "ZeRO optimizations": reduce_bucket_size, allgather_bucket_size)
    comm_buffer_bytes=2 * 5e8 * 2,
    # DeepSpeed's PipelineEngine partitions the boundary activation and its gradient over the TP ranks (see
    # pp_scatter_gather) and moves them in four blocking transfers per micro-batch (see
    # pp_transfers_per_microbatch)
    pp_scatter_gather=True,
    pp_transfers_per_microbatch=4,
    # the Megatron-DeepSpeed runs of 2021-22 (BigScience, vTrain) predate expandable segments (PyTorch 2.1)
    expandable_segments=False,
    # ... and lazy loading of CUDA modules (CUDA 11.7, on by default from PyTorch 1.13): every kernel image is
    # loaded at start-up. BigScience measured that context with nvidia-smi on its own stack: "40GB A100 takes
    # 1573MiB for cuda kernels" (bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md, "Possible
    # topologies for 200B"; 1271 MiB on its 32 GB V100s)
    cuda_context_bytes=1573 * MiB,
    # BigScience's fork keeps the 2021 synchronous input-gradient all-reduce (bigscience-workshop/
    # Megatron-DeepSpeed megatron/mpu/layers.py ColumnParallelLinear: copy_to_tensor_model_parallel_region)
    tp_async_backward=False,
    # ... and the rest of Megatron-LM of 2021 too: no sequence parallelism, full recomputation only
    # (--checkpoint-activations; BigScience's tr11-176B-ml.slurm), see MEGATRON_2021
    sequence_parallel=False,
    selective_recompute=False,
    # no ring-attention context parallelism either: Megatron-DeepSpeed's only split of the attention's sequence is
    # DeepSpeed-Ulysses (--ds-sequence-parallel-size, DeepSpeed 0.10.2, Aug 2023; arXiv 2309.14509), an all-to-all
    # over the heads that this model does not price, and BigScience's fork of 2022 predates it
    context_parallel=False,
    # DeepSpeed's pipeline engine runs ZeRO-1 at most (Framework.pipeline_max_zero)
    pipeline_max_zero=1,
)

# torchtitan FSDP2 (pytorch/torchtitan, docs/fsdp.md): bf16 compute with fp32 sharded parameters and fp32
# gradient reduce-scatter (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)); eager kernels.
TORCHTITAN = MEGATRON_CORE.with_(
    name="torchtitan-fsdp2",
    # its GroupedExperts run torch._grouped_mm, one grouped kernel per GEMM for all local experts; NeMo Automodel
    # (below) likewise: GroupedExpertsDeepEP's grouped_gemm.ops.gmm (default) or torch._grouped_mm
    expert_gemm_host_s=0.0,
    expert_bias_bytes=EXPERT_BIAS_BYTES_TORCHTITAN,
    precision_aware_optimizer=False,
    # FSDP reduces per wrapped transformer block, not in Megatron-core's DP-sized buckets (Framework.dp_bucket_params)
    dp_bucket_params=None,
    fp8_param_gather="fsdp",
    # F.scaled_dot_product_attention on CUDA tries its flash backend (FlashAttention-2) first; cuDNN attention is
    # last in PyTorch's default backend priority
    attention_backend="flash-attention-2",
    fp16_grads_in_param_dtype=False,
    weight_bytes=2.0,
    grad_bytes=4.0,
    grad_reduce_bytes=4.0,
    fused_elementwise=False,
    eager_activation_factor=1.0,
    # eager torch.nn.RMSNorm is ATen's composite rms_norm (aten/src/ATen/native/layer_norm.cpp): upcast to fp32
    # (read 2, write 4), pow (4 + 4), mean (read 4), multiply by the reciprocal RMS (4 + 4), cast back to bf16
    # (4 + 2), multiply by the weight (2 + 2): 36 B per element, one kernel per step
    norm_bytes_per_element=36.0,
    # eager cross-entropy over the full vocabulary: F.cross_entropy(pred.float(), labels) (torchtitan
    # train.py loss_fn, 2024). At its peak the backward holds the saved fp32 log-softmax (4 B), the fp32 gradient
    # arriving from the NLL loss (4 B) and the fp32 gradient it produces (4 B) per logit; the forward peaks at
    # 10 B (bf16 logits + fp32 copy + fp32 log-softmax)
    logits_bytes_per_element=12.0,
    # the same loss in eager kernels: cast to fp32 (2 + 4), log_softmax (two reads of the input, one write:
    # 4 + 4 + 4), NLL backward writes a zero-filled fp32 gradient (4), log_softmax backward (reads gradient and
    # saved output, writes 4 + 4 + 4), cast back to bf16 (4 + 2): 40 B per logit
    ce_bytes_per_logit=40.0,
    # recompute="selective" in torchtitan is op-level selective activation checkpointing: save the attention
    # kernel's outputs and every second matmul output, recompute the rest (torchtitan docs, activation
    # checkpointing "selective op")
    selective_policy="op",
    # PyTorch tensor parallelism (DTensor ColwiseParallel) runs its backward collectives synchronously unless
    # async TP is enabled (opt-in)
    tp_async_backward=False,
    # fully_shard keeps only the fp32 parameter shard; bf16 copies exist while a unit is gathered
    zero3_sharded_16bit_copy=False,
    # torchtitan's pipeline schedules are torch.distributed.pipelining over fully_shard modules
    pipeline_reshard="step",
    # torchao Float8Linear keeps the bf16 GEMM inputs for backward (see Framework.fp8_saved_input_bytes)
    fp8_saved_input_bytes=2.0,
)

# torchtitan with torch.compile (training.compile = true), as of 2025: each transformer block is compiled, which
# fuses the eager pointwise chains (the RMSNorm becomes one kernel at 4 B per element, bias/activation/residual
# ops fuse), and so is the loss: torchtitan/components/loss.py build_cross_entropy_loss wraps
# cross_entropy(pred.float(), labels) in torch.compile when training.compile is set (the 2024 train.py had it
# commented out: "TODO: compiling loss function causes CUDA errors, turning off for now"). Inductor's min-cut
# partitioner keeps the bf16 logits and a per-row log-sum-exp instead of the fp32 copy and log-softmax, and the
# backward writes the bf16 gradient in one fused kernel: at the peak the bf16 logits and their bf16 gradient,
# 4 B per logit; traffic: the forward reads the logits twice (max, sum of exp), the backward reads them and
# writes the gradient, 8 B per logit
TORCHTITAN_COMPILE = TORCHTITAN.with_(
    name="torchtitan-fsdp2-compile",
    fused_elementwise=True,
    norm_bytes_per_element=4.0,
    logits_bytes_per_element=4.0,
    ce_bytes_per_logit=8.0,
)

# MosaicML llm-foundry (Composer, PyTorch FSDP FULL_SHARD): eager PyTorch blocks like torchtitan's, but the loss is
# FlashAttention's fused cross-entropy: llmfoundry/models/mpt/modeling_mpt.py takes
# om_model_config.get('loss_fn', 'fused_crossentropy') → flash_attn.losses.cross_entropy.CrossEntropyLoss, a
# kernel that reads the 16-bit logits, keeps one log-sum-exp per row and writes the 16-bit gradient: at the peak
# the logits and their gradient, 4 B per logit (no fp32 copy), and 8 B of traffic per logit (forward read, backward
# read + write, with the max and sum done in one pass over blocks)
LLM_FOUNDRY = TORCHTITAN.with_(
    name="llm-foundry",
    precision_aware_optimizer=False,
    fp8_param_gather="unsupported",
    logits_bytes_per_element=4.0,
    ce_bytes_per_logit=8.0,
)

# NeMo AutoModel builds its own model classes (DeepSeek-V3 and Kimi K2, Qwen3 MoE, gpt-oss, ...) under the dtype its
# recipe asks for, and the benchmark recipes ask for none: "auto" becomes bf16 (nemo_automodel/_transformers/
# auto_model.py _init_model: `with local_torch_dtype(torch_dtype, ...)`, whose default_dtype is torch.bfloat16). The
# parameters are bf16, so FSDP2's shard is the bf16 weight, its gradient is cast back to the parameter's dtype after
# the fp32 reduce-scatter, and torch.optim.Adam keeps its moments in the parameter's dtype: 2 + 2 + 4 = 8 B per
# parameter, no fp32 master. The Adam step reads the gradient, weight and moments (8 B), writes the weight and
# moments (6) and clips and zeroes the gradient (4): 18 B
AUTOMODEL_PURE_BF16 = ParamBytes(
    param=2.0, grad=2.0, main_param=0.0, main_grad=0.0, moments=4.0, adam_step=18.0
)

# NVIDIA NeMo AutoModel (PyTorch FSDP2 with Hugging Face-style model code and Transformer Engine kernels; not
# Megatron): fully_shard with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) (nemo_automodel/components/
# moe/parallelizer.py apply_fsdp), over a model it builds in bf16 (AUTOMODEL_PURE_BF16), so the sharded state is
# 2 + 2 + 4 B per parameter, not torchtitan's fp32 4 + 4 + 8. The blocks run
# TE's fused RMSNorm, linear and attention kernels (BackendConfig rms_norm: te, linear: te, attn: te), so fused
# element-wise traffic and 1-byte FP8 GEMM inputs; the loss is MaskedCrossEntropy with fp32_upcast: false, eager
# cross-entropy on the bf16 logits: the bf16 logits, bf16 log-softmax and bf16 gradient at the peak (6 B per logit)
# and half the traffic of the fp32 eager loss (TORCHTITAN's 40 B): 20 B per logit
AUTOMODEL = TORCHTITAN.with_optimizer_state(AUTOMODEL_PURE_BF16).with_(
    name="nemo-automodel-fsdp2",
    weight_bytes=AUTOMODEL_PURE_BF16.param,
    grad_bytes=AUTOMODEL_PURE_BF16.grad,
    # the bf16 shard is the weight itself (no fp32 master beside it)
    zero3_sharded_16bit_copy=True,
    fused_elementwise=True,
    norm_bytes_per_element=4.0,
    logits_bytes_per_element=6.0,
    ce_bytes_per_logit=20.0,
    fp8_saved_input_bytes=1.0,
    attention_backend="transformer-engine",  # BackendConfig attn: te
    expert_bias_bytes=EXPERT_BIAS_BYTES_AUTOMODEL,
    # NeMo AutoModel's pipeline schedule is not read here: kept at the FSDP2 default. Holding DeepSeek-V3's
    # parameters and fp32 gradients for the step would not fit the pp = 4 / 8 runs it published (final check)
    pipeline_reshard="forward",
)

FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        MEGATRON_CORE,
        NEMO,
        MEGATRON_2021,
        MEGATRON_2022,
        DEEPSPEED,
        TORCHTITAN,
        TORCHTITAN_COMPILE,
        LLM_FOUNDRY,
        AUTOMODEL,
    )
}
