"""Per-GPU memory of a Megatron-Core plan, per pipeline stage (megatron-core 0.16.1 with Transformer
Engine 2.13 unless stated).

Per pipeline stage (one GPU of that stage), in bytes:

- **weights** ``N * w`` with ``N`` from :func:`params.stage_parameter_split` and ``w = 2`` for
  bf16/fp16/fp8 (Megatron/TE keep bf16 weights under fp8 unless ``--fp8-param-gather``) and ``4`` for
  fp32; under fp8 TE caches each linear's quantized weight across micro-batches (rowwise + columnwise
  copies, minus the rowwise one an fp8 parameter already is; no columnwise copy of a tensorwise weight
  on Blackwell, which runs non-TN FP8 GEMMs on the one copy: :mod:`memory.fp8`; of the weight it runs on, i.e. the
  all-gathered one under FSDP: TE ``module/base.py`` ``get_weight_workspace`` with ``cache_name="weight"``
  whenever megatron passes ``is_first_microbatch``, which ``MegatronModule.set_is_first_microbatch`` does
  through the FSDP wrappers too); ROCm TE's ``keep_fp8_weight_transpose_cache=False`` (Primus
  ``no_fp8_weight_transpose_cache``) keeps the rowwise copy only and makes one layer's columnwise copy
  in its backward;
- **gradients** Megatron DDP's contiguous grad buffer, full size even with the distributed optimizer
  (``distributed/param_and_grad_buffer.py``): fp32 iff Megatron accumulates in fp32
  (``training/arguments.py``: ``accumulate_allreduce_grads_in_fp32`` = not ``--grad-reduce-in-bf16``
  and ``--main-grads-dtype fp32``), else the parameters' 2 bytes; torch FSDP2 (``--use-torch-fsdp2``,
  ``distributed/torch_fully_sharded_data_parallel.py``: ``fully_shard`` of the bf16 ``Float16Module`` with
  no mixed-precision policy) has no grad buffer: gradients are reduce-scattered into the parameters'
  sharded dtype, and the optimizer step's fp32 copies (``Float16OptimizerWithFloat16Params
  ._copy_model_grads_to_main_grads``, the bf16 ones freed as it goes) are a transient without activations;
- **optimizer** Adam keeps an fp32 master copy and two fp32 moments (``--main-params-dtype`` /
  ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` with ``--use-precision-aware-optimizer``; TE's FusedAdam, which
  holds the master copy on the precision-aware path without fp8, keeps an fp32 master of a bf16 parameter as
  its 16 trailing bits: :func:`master_param_bytes`; fp32 parameters are their own main params, so without
  the precision-aware optimizer only the two fp32 moments, and with it the moments in their dtypes plus,
  where TE's FusedAdam holds master weights, its ``master_param`` state of an fp32 parameter in
  ``--main-params-dtype``: TE 2.13 / 2.14 ``optimizers/fused_adam.py`` ``initialize_state`` makes it for every
  parameter, remainders only for bf16 ones, and megatron-core 0.16.1 ``optimizer/__init__.py`` passes
  ``master_weights=True`` under ``use_precision_aware_optimizer_no_fp8_or_ds_fp8``).  The
  distributed optimizer shards the dense parameters' state over the data-parallel x context-parallel
  ranks (``optimizer/__init__.py`` builds it on ``intra_dp_cp_group``; the grad buffer's
  ``data_parallel_group`` is the dp x cp group, ``distributed/distributed_data_parallel.py``) and the
  experts' over expert-DP, each divided by ``--num-distributed-optimizer-instances N`` (``parallel.dp_replicate``:
  the partial distributed optimizer builds its buffers on the intra-instance groups of ``dp x cp / N`` and
  ``expert-DP / N`` ranks and all-reduces the shards across the ``N`` instances; megatron-core 0.16.1
  ``distributed_data_parallel.py`` / ``parallel_state.py`` ``intra_partial_(expert_)data_parallel_size``: the state
  of one GPU is ``N`` times the full sharding's); ``--optimizer-cpu-offload`` keeps its fraction of the moments on the host (and of the
  masters only under the precision-aware optimizer: HybridDeviceOptimizer leaves Megatron's fp32 main params on
  the device, see ``mcore_stage_memory``); Megatron-LM dev's
  ``--chunked-optimizer-state-offload`` keeps its fraction of masters and moments on the host between steps and
  brings the masters back whole and the moments in chunk slots for the step (:mod:`memory.optimizer_offload`);
  Megatron-FSDP
  shards weights, gradients and state over dp x cp;
- **activations** per (rank, chunk) the bytes one micro-batch keeps (:mod:`memory.activations`, with
  recompute / offloading as below), walked over the schedule's own order
  (:func:`memory.inflight.stage_activation_peaks`: interleaving with
  ``--microbatch-group-size-per-virtual-pipeline-stage``, the combined 1F1B of
  ``--overlap-moe-expert-parallel-comm``), the loss chunk's kept tensors included;
  recompute: ``selective`` drops what each ``--recompute-modules`` entry recomputes;
  ``full``/``uniform`` with ``N`` keeps the input of every group of ``N`` layers; ``full``/``block``
  with ``N`` keeps only the input of the first ``N`` layers of each chunk and everything of the rest;
- **transient** on top of the activations in flight, the largest of: a layer's backward temporaries
  plus, with full recompute, the rebuilt group; on the last stage the loss forward's logits; on the
  first stage the embedding weight-gradient; Megatron-FSDP's unsharded layer; MoE dispatch buffers
  (permuted tokens and combine output of the rank's ``(token, expert)`` pairs); CP communication
  buffers; the layer a fine-grained offloaded module (``--offload-modules``) reloads; plus, kept for the run,
  the stage's GEMM workspaces (torch's cuBLAS per thread and stream, Transformer Engine's:
  :mod:`memory.workspaces`), reported as ``workspace_bytes``.

``--cpu-offloading-num-layers K`` (Transformer Engine 2.13 / 2.14 ``pytorch/cpu_offload.py``
``DefaultOffloadSynchronizer``, the path megatron's ``TransformerBlock`` takes unless
``NVTE_CPU_OFFLOAD_V1=1``): layers ``0..K-1`` of the block (``model_layers = num_layers``; Megatron allows
it only without PP and without recompute) push their saved tensors to pinned host memory; layer ``i``'s
GPU copy is released when layer ``L - K + i`` starts its forward and reloaded when layer ``L - 1 - K + i``
starts its backward, so at every point of the step at most ``L - K`` layers' activations are on the GPU,
the layer running included (:mod:`memory.offload` walks it).  What stays resident of an offloaded
layer: parameters and the quantized weights (``mark_not_offload``) and tensors under 256 Ki elements
(``_check_if_offload``: the norms' fp32 ``rstd`` at ``s b / t < 262144`` tokens, under 1 MiB per layer,
not counted).  No double buffer: the V2 path has none (``double_buffering`` is deprecated there).

``--delay-wgrad-compute`` runs each layer's weight gradient right after its input gradient inside the
combined step (``model_chunk_schedule_plan.py``), so it keeps nothing across micro-batches; TE CUDA
graphs (``--cuda-graph-impl transformer_engine``, TE >= 2.7 ``_reuse_graph_input_output_buffers``,
megatron ``transformer/cuda_graphs.py``) free each graph's static outputs after its backward, so their
pool holds what the eager schedule holds plus, per (layer, micro-batch) in flight, the static attention
mask, the static outputs eager frees (the shared expert's output under ``moe_router``) and the chunk
input beside its static copy (:mod:`memory.te_graphs`); captured before the first step
(``--cuda-graph-warmup-steps 0``) the allocated peak is the capture's (the graphed layers' saved tensors in
flight, the static inputs, one graphed backward, no Adam moments yet) or the replay's (the eager part), the
larger, and the pool is reserved beside the replay (``side_pools``); a ``full_iteration`` graph (``full_cuda_graph.py``) also
keeps every micro-batch's input data (tokens, labels, position ids, loss mask: 28 bytes per token, and the
dataloader's ``[1, s, s]`` bool attention mask per sample unless ``--no-create-attention-mask-in-dataloader``:
:func:`~primus_launch.projection.memory.paged_stash.static_batch_bytes`, whole sequences), and
its pool is not a second copy of the eager warm-up's (``torch.cuda.graph`` empties the cache before
capture; what the allocator cannot reuse inside a capture is not modelled: :mod:`memory.paged_stash`).
The optimizer step (:func:`optimizer_step_grad_bytes`: fp32 copies of a bf16 grad buffer's local shard)
runs after the last backward freed the activations, so eager it is a peak of its own
(``statics + copies``); under a ``full_iteration`` graph the graph's private pool stays reserved through
the eager step (``torch.cuda.graph`` pools are released only with the graph), so the copies add to the
captured step's peak.  (TE-scoped graphs keep their pools too; the graphed modules' part of the
activations beside the step is not counted.)

Static-shape MoE of megatron main / dev (:mod:`memory.paged_stash`): ``--moe-expert-rank-capacity-factor c``
sizes the dispatch buffers and the experts' gradients at ``c`` x the balanced routed tokens (the MoE
transient) and, without ``--moe-paged-stash``, the experts' saved tensors too (``+ (c - 1) E``, ``E`` the
experts' saved tensors in flight at the peak, walked over the schedule like the activations); with the
stash those live in a buffer of ``|f| E`` (``f`` = ``--moe-paged-stash-buffer-size-factor-cuda``) and one
layer's come back at the padded shape for its backward (``c e``, in the MoE transient).  Token drop padded to
the capacity (``--moe-expert-capacity-factor f --moe-pad-expert-input-to-capacity``: the alltoall dispatcher's
``drop_and_pad``, every local expert receiving ``capacity x tp x ep`` rows, ``capacity = ceil(f T k / E)``) pads
the same tensors to ``f`` x the balanced count: priced as ``c = f`` (:func:`padded_capacity`; nothing at f = 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from primus_launch.plan import (ATTENTION_RECOMPUTE_MODULES, STATE_DTYPE_BYTES, Chunk, DPSharding, Framework, ModelArch,
                                PipelineSchedule, Plan, Precision, RecomputeGranularity, RecomputeMethod)
from primus_launch.plan.legality import effective_fsdp_impl
from primus_launch.projection.cost.mamba import mamba_activation_bytes, mamba_backward_temp_bytes
from primus_launch.projection.cost.offload import module_offload_inert
from primus_launch.projection.cost.recompute import effective_granularity
from primus_launch.projection.memory.activations import (
    TE,
    ActivationImpl,
    LayerActivations,
    impl_for,
    layer_activation_bytes,
    moe_pairs,
    mtp_activation_bytes,
    output_activation_bytes,
    rope_table_bytes,
)
from primus_launch.projection.memory.offload import te_offload_peak
from primus_launch.projection.memory.optimizer_offload import bundle_bytes, step_restore_bytes
from primus_launch.projection.memory.muon import muon_stage_bytes
from primus_launch.projection.memory.paged_stash import static_batch_bytes, static_moe_extra
from primus_launch.projection.hardware.gpus import gpu_arch
from primus_launch.projection.memory.fp8 import (columnwise_copy, non_tn_fp8_gemm, quantized_bytes, te_fp8_attention,
                                                weight_bytes_per_param)
from primus_launch.projection.memory.inflight import as_weights, chunk_micro_batches, stage_activation_peaks
from primus_launch.projection.memory.params import (ArchKey, arch_from_key, hybrid_layer_params, layer_params_for_key,
                                                   largest_linear_module, stage_split_for_key, arch_key)
from primus_launch.projection.memory.stage import MeasuredActivations, stage_report
from primus_launch.projection.memory.te_graphs import (attention_in_graph, graphed_kept_bytes, hybrid_graph_bytes,
                                                      te_graph_chunk_input_bytes, te_graph_layer_bytes)
from primus_launch.projection.memory.workspaces import GemmWorkspaces, gemm_workspaces
from primus_launch.projection.result import StageMemory


@dataclass(frozen=True)
class McoreOpts:
    """The Megatron settings beyond the layout that change memory (hashable, for the caches)."""

    modules: tuple[str, ...] = ("core_attn",)  # --recompute-modules (granularity selective)
    offload_layers: int = 0  # --cpu-offloading-num-layers (activations)
    offload_modules: tuple[str, ...] = ()  # --offload-modules (fine-grained activation offloading)
    optimizer_offload: float = 0.0  # --optimizer-cpu-offload --optimizer-offload-fraction
    state_offload: float = 0.0  # --chunked-optimizer-state-offload --optimizer-state-offload-fraction (dev)
    state_chunk_mb: int = 0  # --optimizer-state-offload-chunk-size-mb
    main_grads: int = 4  # bytes per gradient-buffer element
    main_params: int = 4  # bytes of the optimizer's master copy (--main-params-dtype)
    exp_avg: int = 4
    exp_avg_sq: int = 4
    fp8: str | None = None  # TE fp8 recipe when training in fp8 (delayed|tensorwise|blockwise|mxfp8)
    fp8_param_gather: bool = False
    cp_comm: str = "p2p"
    mb_group: int | None = None  # --microbatch-group-size-per-virtual-pipeline-stage (None = pp)
    layer_ids: tuple[int, ...] = ()  # full recompute of exactly these global layer ids (Primus recompute_layer_ids)
    mtp_ids: tuple = ()  # with layer_ids: [rank][chunk] -> global ids of the chunk's MTP depths
    ce: str = "unfused"  # the loss: unfused | native (--cross-entropy-loss-fusion) | te (its TE impl) | fla_linear | fla
    loss_chunks: int = 1  # fla_linear: the chunks asked of FLA's FusedLinearCrossEntropyLoss (training.loss_chunks)
    ep_overlap: bool = False  # --overlap-moe-expert-parallel-comm: the combined 1F1B schedule
    full_graph: bool = False  # --cuda-graph-scope full_iteration (local CUDA graph of the whole step)
    attention_mask: bool = True  # the dataloader's batch carries [1, s, s] causal masks (create_attention_mask)
    fp8_transpose_cache: bool = True  # TE keeps the columnwise fp8 weight across micro-batches (ROCm TE: optional)
    fp8_non_tn: bool = False  # the GPU runs non-TN FP8 GEMMs: tensorwise tensors need no transpose (memory.fp8)
    fp8_dpa: bool = False  # training.fp8_attention where TE runs it: q / k / v (O under delayed) saved in FP8
    torch_fsdp2: bool = False  # --use-torch-fsdp2 (gradients in the parameters' dtype, fp32 copies at the step)
    capacity: float | None = None  # --moe-expert-rank-capacity-factor (static-shape MoE, memory.paged_stash)
    paged_stash: bool = False  # --moe-paged-stash
    stash_factor: float = 1.10  # --moe-paged-stash-buffer-size-factor-cuda
    decoupled_grads: bool = False  # precision-aware optimizer reading the grad buffer (no fp32 grad copies)
    precision_aware: bool = False  # --use-precision-aware-optimizer (TE FusedAdam with the state dtypes)
    defer_wgrad: int = -1  # --defer-embedding-wgrad-compute: -1 off, else --wgrad-deferral-limit (0 = all)
    te_graph_scope: tuple[str, ...] | None = None  # --cuda-graph-scope under --cuda-graph-impl transformer_engine
    shared_in_graph: bool = False  # shared experts computed inside the MoE graph (not overlapped)
    te_graph_capture_first: bool = False  # --cuda-graph-warmup-steps 0: captured before any eager step (te_graphs)
    gemm_ws: GemmWorkspaces = GemmWorkspaces()  # torch / TE GEMM workspaces in the allocator (memory.workspaces)
    wgrad_fresh: int = 0  # --no-gradient-accumulation-fusion: bytes per element of a module's fresh weight gradient
    # --optimizer muon / dist_muon (memory.muon): (layer_wise, scalar optimizer, tp mode, fp32 matmul prec, split qkv)
    muon: tuple = ()
    # decoder layers kept out of the FP8 context (Plan.bf16_layer_ids, --first-last-layers-bf16): BF16 weights (no
    # TE FP8 copies, a BF16 parameter under --fp8-param-gather) and BF16 saved tensors
    bf16_layers: frozenset = frozenset()


def padded_capacity(plan: Plan) -> float | None:
    """The factor over the balanced routed tokens the MoE layer's buffers and saved expert tensors are padded to
    (module doc): ``--moe-expert-rank-capacity-factor``, else the token-drop capacity factor when padded."""
    t = plan.training
    if not plan.model.is_moe:
        return None
    if t.moe_expert_rank_capacity_factor is not None:
        return t.moe_expert_rank_capacity_factor
    return t.moe_expert_capacity_factor if t.moe_pad_expert_input_to_capacity else None


def mcore_opts(plan: Plan) -> McoreOpts:
    """The :class:`McoreOpts` of a plan: the flags beyond the cache's scalar arguments that change a Megatron
    stage's bytes, each read as the module doc and :class:`McoreOpts`' comments say (gradient buffer dtype,
    master / moment bytes, fp8 weight copies, offloading, CUDA-graph scope, GEMM workspaces)."""
    t, p = plan.training, plan.parallel
    pa = t.precision_aware_optimizer
    fp8 = (t.fp8_recipe or "delayed") if t.precision == "fp8" else None
    # the recipe Megatron's OptimizerConfig holds (a BF16 run's too: Megatron-Bridge's default 'tensorwise')
    opt_fp8 = fp8 if fp8 is not None else t.optimizer_fp8_recipe
    fp32_grads = t.storage_precision == "fp32" or (t.grad_reduce_in_fp32 and (not pa or t.main_grads_dtype == "fp32"))
    ce = ("te" if t.cross_entropy_fusion_impl == "te" else "native") if t.cross_entropy_loss_fusion else "unfused"
    if t.loss_impl != "framework":   # FLA's losses replace Megatron's (activations.output_activation_bytes)
        ce = t.loss_impl
    return McoreOpts(
        modules=tuple(sorted(set(t.recompute.modules))), offload_layers=t.offload.activation_layers,
        # nothing offloaded where megatron-core never opens an offload chunk (cost/offload.py module_offload_inert)
        offload_modules=() if module_offload_inert(plan) else tuple(sorted(set(t.offload.activation_modules))),
        optimizer_offload=t.offload.optimizer_fraction,
        state_offload=t.offload.optimizer_state_fraction, state_chunk_mb=t.offload.optimizer_state_chunk_mb,
        main_grads=4 if fp32_grads else 2,
        main_params=master_param_bytes(precision_aware=pa, main_params_dtype=t.main_params_dtype,
                                       precision=t.precision, fp8_recipe=opt_fp8, fp8_param_gather=t.fp8_param_gather,
                                       optimizer_offload=t.offload.optimizer_fraction),
        exp_avg=STATE_DTYPE_BYTES[t.exp_avg_dtype] if pa else 4, exp_avg_sq=STATE_DTYPE_BYTES[t.exp_avg_sq_dtype] if pa else 4,
        fp8=fp8, fp8_param_gather=t.fp8_param_gather and fp8 is not None, cp_comm=p.cp_comm_type,
        mb_group=p.microbatch_group, ce=ce, loss_chunks=t.loss_chunks if ce == "fla_linear" else 1,
        ep_overlap=bool(t.overlap_moe_expert_parallel_comm and plan.model.is_moe),
        full_graph=t.cuda_graph_impl == "local" and "full_iteration" in t.cuda_graph_scope,
        attention_mask=t.dataloader_attention_mask,
        fp8_transpose_cache=t.fp8_weight_transpose_cache or fp8 not in ("delayed", "tensorwise"),
        fp8_non_tn=fp8 is not None and non_tn_fp8_gemm(gpu_arch(plan.cluster.gpu)),  # '' (not in the DB): Hopper rules
        # TE's FP8 attention filter, the time side's (memory.fp8 te_fp8_attention): delayed on NVIDIA
        # parts, current scaling / MXFP8 from sm100, blockwise / NVFP4 and ROCm keep bf16 attention
        fp8_dpa=bool(t.fp8_attention) and fp8 is not None and not te_fp8_attention(gpu_arch(plan.cluster.gpu), fp8),
        torch_fsdp2=effective_fsdp_impl(plan) == "torch_fsdp2",
        capacity=padded_capacity(plan),
        paged_stash=t.moe_paged_stash and plan.model.is_moe and t.moe_expert_rank_capacity_factor is not None,
        stash_factor=t.moe_paged_stash_buffer_factor,
        precision_aware=bool(pa),
        decoupled_grads=bool(pa and (t.main_params_dtype != "fp32" or opt_fp8 in (None, "delayed")
                                     or t.offload.optimizer_fraction > 0)),
        defer_wgrad=t.wgrad_deferral_limit if (t.defer_embedding_wgrad and p.pp > 1) else -1,
        te_graph_scope=tuple(t.cuda_graph_scope) if t.cuda_graph_impl == "transformer_engine" else None,
        shared_in_graph=bool(plan.model.moe_shared_expert_intermediate_size) and not t.moe_shared_expert_overlap,
        te_graph_capture_first=t.cuda_graph_impl == "transformer_engine" and t.cuda_graph_warmup_steps == 0,
        gemm_ws=plan_gemm_workspaces(plan),
        bf16_layers=plan.bf16_layer_ids() if fp8 is not None else frozenset(),
        muon=((t.muon_layer_wise, t.muon_scalar_optimizer, t.muon_tp_mode, t.muon_fp32_matmul_prec, t.muon_split_qkv)
              if t.optimizer == "muon" else ()),
        # the fresh gradient is in the parameters' dtype (torch FSDP2's unsharded gradients: the "full" transient)
        wgrad_fresh=(4 if t.storage_precision == "fp32" else 2) if plan.framework == "megatron" and not (
            t.gradient_accumulation_fusion or (p.dp_sharding == "full" and effective_fsdp_impl(plan) == "torch_fsdp2"))
        else 0,
        **(dict(layer_ids=tuple(t.recompute.layer_ids), mtp_ids=plan.chunk_mtp_ids())
           if t.recompute.granularity == "full" and t.recompute.method == "layer_ids" else {}))


def plan_gemm_workspaces(plan: Plan) -> GemmWorkspaces:
    """The GEMM workspaces of a Megatron plan (:func:`memory.workspaces.gemm_workspaces`): Transformer
    Engine layers unless the local spec (``attention_backend`` local); its userbuffers workspaces with
    ``--tp-comm-overlap`` (sequence parallel, TP > 1); GroupedLinear's with the experts as TE grouped GEMM;
    torch GEMMs on every stage under unfused / local attention."""
    t, p = plan.training, plan.parallel
    te = t.attention_backend != "local"
    return gemm_workspaces(gpu_arch(plan.cluster.gpu), te=te,
                           userbuffers=bool(t.tp_comm_overlap and p.sequence_parallel and p.tp > 1),
                           # the local spec's experts are a SequentialMLP of torch linears whatever
                           # --moe-grouped-gemm says (Megatron-LM d98e8a64dd models/backends.py
                           # LocalSpecProvider.grouped_mlp_modules)
                           te_grouped=bool(te and plan.model.is_moe and t.moe_grouped_gemm
                                           and t.moe_expert_gemm in ("te", "te_fused")),
                           torch_everywhere=t.attention_backend in ("unfused", "local"))


def master_param_bytes(*, precision_aware: bool, main_params_dtype: str, precision: str, fp8_recipe: str | None,
                       fp8_param_gather: bool = False, optimizer_offload: float = 0.0) -> int:
    """Bytes per parameter of the optimizer's master copy.

    Without ``--use-precision-aware-optimizer`` Megatron keeps fp32 main params (4).  With it,
    megatron-core 0.16.1 / Megatron-LM 3758b54b2 ``optimizer/optimizer_config.py``:
    ``use_precision_aware_optimizer_no_fp8_or_ds_fp8`` (main params not fp32, or no fp8 / delayed scaling,
    or CPU offload) hands the master weights to Transformer Engine's ``FusedAdam`` (``optimizer/__init__.py``:
    ``master_weights=True``, ``master_weight_dtype=main_params_dtype``, ``store_param_remainders`` =
    ``OptimizerConfig.store_param_remainders``, default True, no Megatron-LM flag turns it off, dropped
    only before TE 2.1); TE 2.13 / 2.14 ``optimizers/fused_adam.py`` then stores an fp32 master of a bf16
    parameter as its trailing 16 bits (``torch.int16``, the other 16 are the bf16 parameter): 2 bytes.
    Otherwise (fp8 recipes other than delayed with fp32 main params) Megatron keeps its own fp32 copy: 4;
    the test reads ``OptimizerConfig.fp8_recipe``, not whether fp8 is on, so a BF16 run whose config holds a
    recipe gets 4 too (``fp8_recipe`` here is that value: ``training.optimizer_fp8_recipe`` without fp8).
    Megatron-Bridge (v0.4.2 .. 600d069b8, ``training/mixed_precision.py``) is such a case: its
    ``MixedPrecisionConfig.fp8_recipe`` defaults to ``"tensorwise"`` with ``fp8=None`` (``bf16_mixed()`` keeps
    it) and ``update_config_with_precision_overrides`` copies every field the OptimizerConfig also has
    before ``ConfigContainer.validate`` runs the deferred ``OptimizerConfig.__post_init__``; Megatron-LM's
    own ``--fp8-recipe`` defaults to ``delayed``;
    ``--main-params-dtype`` fp16 / bf16: 2.  Not applied (4 kept) to fp8 parameters (``--fp8-param-gather``)
    and to the CPU-offloaded optimizer, whose master copies this does not read."""
    if not precision_aware:
        return 4
    if main_params_dtype != "fp32":
        return STATE_DTYPE_BYTES[main_params_dtype]
    decoupled = precision in ("bf16", "fp8") and fp8_recipe in (None, "delayed")
    if decoupled and not (fp8_recipe and fp8_param_gather) and not optimizer_offload:
        return 2
    return 4


def _optimizer_bytes(precision: str, optimizer: str) -> int:
    mixed = precision != "fp32"
    states = 8 if optimizer == "adam" else 4
    return states + (4 if mixed else 0)


def mcore_args(plan: Plan, impl: ActivationImpl | None = None) -> tuple:
    """The cached arguments of :func:`mcore_stage_memory` for a Megatron plan."""
    m, p, t = plan.model, plan.parallel, plan.training
    r = t.recompute
    src = plan.source.framework if plan.source else "megatron"
    # the dtypes below are the storage precision's (fp8 / fp4 over fp32 parameters: fp32); the quantized
    # GEMM inputs come from mcore_opts' fp8 recipe
    return (arch_key(m), p.tp, p.expert_tp, p.ep, p.pp, p.vpp, p.cp, p.sequence_parallel, p.dp_sharding,
            p.dp_replicate, plan.chunk_layout(), t.pipeline_schedule, t.micro_batch_size, plan.num_microbatches,
            t.storage_precision, t.optimizer, t.grad_reduce_in_fp32, effective_granularity(plan), r.method,
            r.num_layers,
            plan.dp, plan.expert_dp, src, impl_for(m, t.attention_backend, impl or TE, t.rope_fusion),
            mcore_opts(plan))


def moe_layer_kinds(m: ModelArch) -> tuple[bool, ...]:
    """Per decoder layer (0-based), whether it has routed experts (:meth:`ModelArch.is_moe_layer`: Megatron
    ``moe_layer_freq``, a hybrid stack's ``E`` layers), computed once for a model's many layer visits."""
    return tuple(m.is_moe_layer(i) for i in range(m.num_layers))


@lru_cache(maxsize=65536)
def mcore_stage_memory(key: ArchKey, tp: int, etp: int, ep: int, pp: int, vpp: int, cp: int, sp: bool,
                       dp_sharding: DPSharding, dp_replicate: int, layout: tuple[tuple[Chunk, ...], ...],
                       schedule: PipelineSchedule, mbs: int, nmb: int, precision: Precision, optimizer: str,
                       grad_fp32: bool, gran: RecomputeGranularity, method: RecomputeMethod, rnum: Optional[int],
                       dp: int, edp: int, framework: Framework, impl: ActivationImpl, opts: McoreOpts = McoreOpts(),
                       acts: Optional[MeasuredActivations] = None) -> tuple[StageMemory, ...]:
    """Per PP rank, the :class:`StageMemory` of one GPU of a Megatron-Core plan, from the hashable arguments
    :func:`mcore_args` builds (cached).  Formula and sources: the module doc -- ``weights + gradients +
    optimizer`` from the stage's parameter split and the data-parallel sharding, the activations of the
    micro-batches in flight walked over the schedule (:func:`memory.inflight.stage_activation_peaks`), the
    largest transient on top, each assembled by :func:`memory.stage.stage_report`.  ``acts``: measured
    per-layer activations in place of the tensor-list model's."""
    m = arch_from_key(key)
    moe = moe_layer_kinds(m)  # per decoder layer: routed experts (read once per call, not per layer visit)
    split = stage_split_for_key(key, tp, etp, ep, layout, "te")
    a = 4 if precision == "fp32" else 2
    w = 4 if precision == "fp32" else 2
    g = opts.main_grads  # the gradient buffer's element
    if precision == "fp32" and not opts.precision_aware:
        opt = _optimizer_bytes(precision, optimizer)
    elif precision == "fp32":
        # fp32 parameters are their own main params (distrib_optimizer.py: the fp32 shard itself goes to the
        # optimizer); TE's FusedAdam still makes a master_param state whenever it holds master weights
        # (use_precision_aware_optimizer_no_fp8_or_ds_fp8: opts.decoupled_grads), in --main-params-dtype
        # (no int16 remainders: those are for bf16 parameters only), beside the two moments in their dtypes
        opt = (opts.main_params if opts.decoupled_grads else 0) + opts.exp_avg + opts.exp_avg_sq
    else:
        # master copy + moments (--main-params-dtype / --exp-avg-dtype / --exp-avg-sq-dtype)
        opt = opts.main_params + opts.exp_avg + (opts.exp_avg_sq if optimizer == "adam" else 0)
    # Adam's moments' share of the per-parameter optimizer bytes, for a capture before the first step (fp32
    # without a precision-aware optimizer: _optimizer_bytes is the two fp32 moments alone, share 1)
    # --optimizer-cpu-offload (HybridDeviceOptimizer, Megatron-LM d98e8a64dd optimizer/cpu_offloading/
    # hybrid_optimizer.py ``_get_sub_optimizer_param_groups``): the optimizer's parameters up to the fraction get a
    # pinned host copy, and their moments live with the host optimizer; the device parameter itself stays (the
    # ``param_copy_back_gpu_hook`` copies the host result into it).  Without the precision-aware optimizer those
    # parameters are the fp32 main params Megatron built on the device first (``distrib_optimizer.py``
    # ``_build_model_and_main_param_groups``: ``shard_model_param.clone().float()``, handed over as
    # ``orig_group``; ``Float16OptimizerWithFloat16Params`` likewise), so the master copy stays whole and only the
    # moments leave; with it (main params None) the fp32 copies ``param_update_in_fp32`` makes are on the
    # parameter's side, so master and moments leave together, in fp32 whatever the state dtypes say:
    # megatron-core 0.16.1 / Megatron-LM d98e8a64dd ``optimizer/__init__.py``: the CPU-offload branch
    # builds the HybridDeviceOptimizer with plain ``Adam`` (TE FusedAdam at its defaults) and ``CPUAdam`` and
    # never passes --exp-avg-dtype / --exp-avg-sq-dtype / --main-params-dtype (``optimizer_config.py`` returns
    # before checking them under ``optimizer_cpu_offload``): the device part ``1 - f`` keeps an fp32 clone of each
    # bf16 shard (``param_update_in_fp32=True``), fp32 moments, and the fp32 gradient ``_set_sub_optimizer_grads``
    # makes of a bf16 (decoupled) gradient (``grad.to(fp32)``: the buffer itself when it is fp32), which no
    # zero_grad clears (the distributed optimizer zeroes its own groups, not the sub-optimizer's params).
    if opts.optimizer_offload and opts.precision_aware:
        states = 8.0 if optimizer == "adam" else 4.0
        opt = ((0.0 if precision == "fp32" else 4.0) + states + (4.0 if g < 4 else 0.0)) * (1.0 - opts.optimizer_offload)
        moments = states * (1.0 - opts.optimizer_offload)
    else:
        kept_master = opts.main_params if (opts.optimizer_offload and precision != "fp32") else 0
        opt = kept_master + (opt - kept_master) * (1.0 - opts.optimizer_offload)
        moments = (opts.exp_avg + opts.exp_avg_sq) * (1.0 - opts.optimizer_offload)
    moments_share = min(1.0, moments / opt) if optimizer == "adam" and opt > 0 else 0.0
    if optimizer == "muon" and opts.muon:
        # Muon's momentum and the scalar optimizer's moments are made by the first step too (zeros_like in
        # ``step``); the fp32 masters exist before it (about 4 of Muon's 8 bytes per parameter)
        moments_share = 0.0 if precision == "fp32" else 0.5
    # chunked optimizer-state offload (memory.optimizer_offload): the selected masters and moments live on the
    # host between steps and come back for the step (the masters whole, the moments in staging slots)
    opt *= 1.0 - opts.state_offload
    seq = m.seq_length
    kw = dict(seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, ep=ep, etp=etp, abytes=a, impl=impl, fp8=opts.fp8,
              fp8_dpa=opts.fp8_dpa, fp8_non_tn=opts.fp8_non_tn)
    dense_act = layer_activation_bytes(m, moe=False, **kw)
    moe_act = layer_activation_bytes(m, moe=True, **kw) if m.is_moe else dense_act
    acts16 = None
    if opts.bf16_layers and acts is None:   # the BF16 layers' saved tensors: no FP8 copies, attention in BF16
        kw16 = {**kw, "fp8": None, "fp8_dpa": False}
        d16 = layer_activation_bytes(m, moe=False, **kw16)
        acts16 = (d16, layer_activation_bytes(m, moe=True, **kw16) if m.is_moe else d16)
    out_kept, out_transient = output_activation_bytes(m, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, abytes=a, impl=impl,
                                                      ce=opts.ce, loss_chunks=opts.loss_chunks)
    if acts is not None:  # measured pieces (projection.measure)
        dense_act, moe_act, (out_kept, out_transient) = acts.dense, acts.moe or acts.dense, acts.output
    last_rank = next(r for r, row in enumerate(layout) if any(c.loss for c in row))
    first_rank = next(r for r, row in enumerate(layout) if any(c.embedding for c in row))
    sb = seq // cp * mbs
    rope_tbl = rope_table_bytes(m, seq=seq, cp=cp)
    # dense parameters' gradients reduce and their optimizer state shards over dp x cp (intra_dp_cp_group)
    dpcp = max(1, dp * cp)
    shard = max(1, dpcp // max(1, dp_replicate))
    # the distributed optimizer's shard groups: --num-distributed-optimizer-instances N (dp_replicate) builds its
    # buffers over the intra-instance groups, dp x cp / N (dense) and expert-dp / N (experts) (megatron-core 0.16.1
    # distributed_data_parallel.py: _allocate_buffers_for_parameters(dense_params, self.intra_dp_cp_group) and
    # (expert_parallel_params, self.intra_expt_dp_group); parallel_state.py intra_partial_(expert_)data_parallel_size)
    eshard = max(1, edp // max(1, dp_replicate))

    def kept(la) -> float:
        """Per layer and micro-batch without full recompute: selective (--recompute-modules) and
        fine-grained offloading (--offload-modules) applied."""
        k = la.selective(opts.modules) if gran == "selective" else la.full
        return k - offloaded(la)

    def offloaded(la) -> float:
        """What --offload-modules moves to host (none of what a selective checkpoint already drops)."""
        return la.offloaded(opts.offload_modules, opts.modules if gran == "selective" else ())

    statics, chunk_rows, layer_rows, extras, graph_rows, static_rows = [], [], [], [], [], []
    muon_step: dict[int, tuple[float, float]] = {}
    for rank in range(pp):
        sp_ = split[rank]
        # ---- static ----
        if dp_sharding == "full":
            if framework == "torchtitan":
                weights = 4 * (sp_.dense / shard + sp_.expert / edp)
                grads = 4 * (sp_.dense / shard + sp_.expert / edp)
                optim = (opt - (4 if precision != "fp32" else 0)) * (sp_.dense / shard + sp_.expert / edp)
            else:
                weights = w * (sp_.dense / shard + sp_.expert / edp)
                # torch FSDP2 (no mixed-precision policy): gradients reduce-scattered in the parameters' dtype;
                # Megatron-FSDP: its main-grad buffers
                grads = (w if opts.torch_fsdp2 else g) * (sp_.dense / shard + sp_.expert / edp)
                optim = opt * (sp_.dense / shard + sp_.expert / edp)
        else:
            weights = w * sp_.total
            grads = g * sp_.total
            if dp_sharding in ("optimizer", "optimizer_grads"):
                optim = opt * (sp_.dense / shard + sp_.expert / eshard)
            else:
                optim = opt * sp_.total
            if dp_sharding == "optimizer_grads":
                # Megatron-FSDP optim_grads (ZeRO-2): gradients reduce-scattered into DP shards
                grads = g * (sp_.dense / shard + sp_.expert / eshard)
        if opts.fp8:
            lin = linear_params(key, tp, etp, ep, layout[rank], sp_.total, moe)
            # the linears' bytes under fp8 (memory.fp8.weight_bytes_per_param): the stored weight (bf16, or an
            # fp8 parameter with --fp8-param-gather: the rowwise copy), sharded like the other weights under
            # full sharding (the experts are all linear), and TE's copies of the weight it runs on, the
            # all-gathered one under FSDP: the rowwise workspace (bf16 weights only) and the columnwise one
            # (MXFP8 / blockwise always; the tensorwise transpose off Blackwell only; ROCm TE
            # keep_fp8_weight_transpose_cache=False: made in each backward and freed,
            # rocm_utils.clear_fp8_weight_transpose_cache)
            stored = quantized_bytes(opts.fp8) if opts.fp8_param_gather else w
            lin_stored = ((lin - sp_.expert) / shard + sp_.expert / edp) if dp_sharding == "full" else lin
            copies = weight_bytes_per_param(opts.fp8, non_tn=opts.fp8_non_tn, param_gather=opts.fp8_param_gather,
                                            cache_columnwise=opts.fp8_transpose_cache, weight_bytes=w) - stored
            # the layers kept in BF16 (opts.bf16_layers): built outside fp8_model_init, their linears hold the bf16
            # weight alone (megatron-core 0.16.1 transformer_block.py build_layer / ssm/mamba_block.py: get_fp8_context
            # (is_init=True) is nullcontext() for them; TE quantises no weight outside fp8_autocast)
            lin16 = _linear_params_of(key, tp, etp, ep, [i for ch in layout[rank] for i in ch.layers
                                                         if i in opts.bf16_layers]) if opts.bf16_layers else 0.0
            f8 = max(0.0, 1.0 - lin16 / lin) if lin > 0 else 1.0
            weights += f8 * (lin_stored * (stored - w) + lin * copies)
        if opts.muon and dp_sharding == "none":
            # Muon (memory.muon): the state of the parameters this GPU's optimizer owns -- all of them, or its
            # layer-wise share under dist_muon -- instead of the Adam bytes above
            lw, scalar_opt, tp_mode, prec, split_qkv = opts.muon
            optim, muon_owned, muon_trans = muon_stage_bytes(
                key, tp, etp, ep, layout, rank, dpcp, edp, layer_wise=lw, precision=precision,
                scalar_optimizer=scalar_opt, tp_mode=tp_mode, prec=prec, split_qkv=split_qkv)
            optim *= (1.0 - opts.state_offload)
            muon_step[rank] = (muon_owned, muon_trans)
        statics.append((weights, grads, optim))
        # ---- activations per micro-batch, per chunk ----
        chunk_bytes, chunk_layer = _chunk_activations(m, moe, layout[rank], rank, opts, gran, method, rnum,
                                                      dense_act, moe_act, kept, a, sb, rope_tbl, seq, mbs, tp, sp, cp,
                                                      impl, acts16)
        if rank == last_rank:
            # the loss's kept tensors, walked with the chunk that holds the loss
            for c, chunk in enumerate(layout[rank]):
                if chunk.loss:
                    chunk_bytes[c] += out_kept
        chunk_rows.append(chunk_bytes)
        layer_rows.append(chunk_layer)
        g_row, x_row = _chunk_graphed(m, layout[rank], opts, gran, dense_act, moe_act, kept, sb=sb, seq=seq, mbs=mbs,
                                      tp=tp, sp=sp, cp=cp)
        graph_rows.append(g_row)
        static_rows.append(x_row)
        extras.append(_recompute_extra(m, layout[rank], opts, gran, method, rnum, dense_act, moe_act))
    retained, flush = (), ()
    if opts.defer_wgrad >= 0 and pp > 1:
        # --defer-embedding-wgrad-compute: what the loss chunk's backward leaves on the last stage until the flush
        per_mb, at_flush = deferred_wgrad_bytes(m, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, a=a)
        retained = as_weights([[per_mb if (r == last_rank and ch.loss) else 0.0 for ch in layout[r]]
                               for r in range(pp)])
        flush = tuple(at_flush if r == last_rank else 0.0 for r in range(pp))
    peaks = stage_activation_peaks(schedule, pp, vpp, nmb, opts.mb_group, as_weights(chunk_rows), opts.ep_overlap,
                                   as_weights(layer_rows) if opts.ep_overlap else (), retained,
                                   max(0, opts.defer_wgrad), flush)
    counts = chunk_micro_batches(schedule, pp, vpp, nmb, opts.mb_group, opts.ep_overlap)
    pool_peaks = eager_peaks = capture_peaks = None
    if any(x for row in graph_rows for x in row):
        # TE-scoped graphs (memory.te_graphs): the graphed layers' saved tensors live in the private pool,
        # allocated at capture only; the replayed steps allocate the rest
        pool_peaks = stage_activation_peaks(schedule, pp, vpp, nmb, opts.mb_group, as_weights(graph_rows),
                                            opts.ep_overlap, as_weights(layer_rows) if opts.ep_overlap else ())
        eager_rows = [[c - g for c, g in zip(cr, gr)] for cr, gr in zip(chunk_rows, graph_rows)]
        eager_peaks = stage_activation_peaks(schedule, pp, vpp, nmb, opts.mb_group, as_weights(eager_rows),
                                             opts.ep_overlap, as_weights(layer_rows) if opts.ep_overlap else (),
                                             retained, max(0, opts.defer_wgrad), flush)
        # the capture: the graphed tensors in the schedule's order beside the static inputs (allocated before it)
        capture_rows = [[g + x for g, x in zip(gr, xr)] for gr, xr in zip(graph_rows, static_rows)]
        capture_peaks = stage_activation_peaks(schedule, pp, vpp, nmb, opts.mb_group, as_weights(capture_rows),
                                               opts.ep_overlap, as_weights(layer_rows) if opts.ep_overlap else ())
    static_moe = [(0.0, 0.0)] * pp
    if opts.capacity is not None and m.is_moe:
        # the experts' saved tensors in flight at each rank's peak, walked like the activations
        # (memory.paged_stash: the stash buffer is sized on this walk)
        e_layer = _experts_kept(moe_act, opts, gran)
        e_rows = [[e_layer * sum(1 for i in ch.layers if moe[i]) for ch in layout[r]] for r in range(pp)]
        e_big = [[e_layer if any(moe[i] for i in ch.layers) else 0.0 for ch in layout[r]]
                 for r in range(pp)]
        e_peaks = stage_activation_peaks(schedule, pp, vpp, nmb, opts.mb_group, as_weights(e_rows), opts.ep_overlap,
                                         as_weights(e_big) if opts.ep_overlap else ())
        static_moe = [static_moe_extra(e_peaks[r], max(e_big[r], default=0.0), opts.capacity, opts.paged_stash,
                                       opts.stash_factor) for r in range(pp)]
    out = []
    for rank in range(pp):
        weights, grads, optim = statics[rank]
        sp_ = split[rank]
        chunk_bytes = chunk_rows[rank]
        activations = peaks[rank]
        graphed = pool_peaks is not None and any(graph_rows[rank])
        if graphed:
            activations = eager_peaks[rank]  # at replay (memory.te_graphs)
        if sp and not impl.te_qkv_layout:
            # megatron's global memory buffer holding the all-gathered (full-sequence) input of the local
            # spec's column-parallel linears under SP: allocated once, kept (TE gathers per GEMM)
            activations += a * sb * m.hidden_size
        if opts.full_graph:
            # a full-iteration graph's static copy of every micro-batch's batch dict (memory.paged_stash)
            activations += static_batch_bytes(seq, mbs, opts.attention_mask) * nmb
        stash_kept, stash_layer = static_moe[rank]
        activations += stash_kept  # paged stash buffer / capacity-padded saved tensors (memory.paged_stash)
        if opts.offload_modules and not opts.offload_layers:
            # --offload-modules' margin (pipeline_parallel/fine_grained_activation_offload.py @d98e8a64dd,
            # PipelineOffloadManager.post_warmup_callback): after the warm-up step the last group of each module
            # name in the first chunk to run its backward is marked not to offload ("so the reloading won't block
            # the main stream"), so one layer's offloadable tensors stay on the GPU until that backward, the peak
            m_big = moe_act if m.is_moe else dense_act
            activations += offloaded(m_big)
        # ---- transients (on top of the activations in flight) ----
        bwd = max((moe_act if moe[i] else dense_act).backward_temp
                  for ch in layout[rank] for i in ch.layers) if any(ch.layers for ch in layout[rank]) else 0.0
        graph_bwd = 0.0
        if graphed:
            # the graphed part's backward temporaries sit in the pool; the replay allocates the eager part's
            bwd, graph_bwd = _graph_backward_split(m, layout[rank], opts.te_graph_scope, dense_act, moe_act)
        if m.is_hybrid and any(m.layer_symbol(i) == "M" for ch in layout[rank] for i in ch.layers):
            # a Mamba layer's backward (cost/mamba.py mamba_backward_temp_bytes) beside the other layers' largest
            bwd = max(bwd, mamba_backward_temp_bytes(m, seq // cp * mbs, tp, sp, cp))
        layer_bwd = bwd + extras[rank]
        if opts.wgrad_fresh:
            # without gradient-accumulation fusion: one module's fresh weight gradient until its hook moves it into
            # main_grad (cost/wgrad_accumulation.py; memory.params largest_linear_module)
            layer_bwd += opts.wgrad_fresh * max(largest_linear_module(key, tp, etp, ep, moe[i])
                                                for ch in layout[rank] for i in ch.layers) \
                if any(ch.layers for ch in layout[rank]) else 0.0
        if opts.fp8 and not opts.fp8_transpose_cache and columnwise_copy(opts.fp8, non_tn=opts.fp8_non_tn):
            # the layer's columnwise fp8 weights, made for its backward and freed after it
            one = layer_params_for_key(key, tp, etp, ep, m.is_moe, "te")
            layer_bwd += max(0.0, one.total - 2 * m.hidden_size - ((m.num_experts or 0) * m.hidden_size
                                                                  if m.is_moe else 0))
        trans = [layer_bwd]
        if rank == last_rank:
            # loss forward: the logits beside the kept loss tensors; the layers' backward comes after the
            # output layer's backward has freed what it kept
            trans = [out_transient, layer_bwd - out_kept]
        if rank == first_rank:
            # dense embedding weight-gradient, after one micro-batch's backward freed its chunk
            freed = chunk_bytes[0]
            trans.append(w * m.padded_vocab_size(tp) / tp * m.hidden_size - freed)
        if dp_sharding == "full":
            layer = layer_params_for_key(key, tp, etp, ep, m.is_moe, "te")
            gb = w if opts.torch_fsdp2 else (4 if grad_fp32 else 2)
            trans.append(2 * 2 * layer.total + gb * layer.total + layer_bwd)
            if opts.torch_fsdp2 and precision != "fp32":
                # the optimizer step (megatron Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads):
                # fp32 copies of the sharded gradients, the bf16 ones freed as it goes; no activations then
                trans.append((4 - w) * (sp_.dense / shard + sp_.expert / edp) - activations)
        if any(moe[i] for ch in layout[rank] for i in ch.layers):
            pairs = moe_pairs(m, sb=sb, tp=tp, sp=sp, etp=etp)
            cap = opts.capacity or 1.0  # static-shape dispatch: buffers sized capacity x balanced
            # the experts' backward gradients at the padded shape (activations.layer_activation_bytes'
            # ``largest`` over the balanced count)
            pad_bwd = (cap - 1.0) * pairs * a * ((2 if m.swiglu else 1) + 2) * m.expert_ffn / etp
            trans.append(2.0 * a * cap * pairs * m.hidden_size + layer_bwd + pad_bwd + stash_layer)
        big = moe_act if m.is_moe else dense_act
        # --cpu-offloading-num-layers: a reloaded layer takes the place of one released (memory.offload:
        # never more than L - K layers on the GPU), so nothing on top of the layer's backward
        if opts.offload_modules and not opts.offload_layers:
            # the next group's reload in the backward: the copies come back even where a selective recompute
            # refills the same tensors (mla_up_proj's q, k, v: ``LayerActivations.copied``)
            trans.append(big.copied(opts.offload_modules, opts.modules if gran == "selective" else ()) + layer_bwd)
        if cp > 1:
            trans.append(cp_comm_bytes(m, opts.cp_comm, seq=seq, mbs=mbs, tp=tp, cp=cp, a=a) + layer_bwd)
        if dp_sharding == "optimizer_grads":
            layer = layer_params_for_key(key, tp, etp, ep, m.is_moe, "te")
            trans.append(g * layer.total + layer_bwd)  # a layer's unsharded gradients before reduce-scatter
        step = optimizer_step_grad_bytes(
            main_grads=g, precision=precision, decoupled=opts.decoupled_grads, dp_sharding=dp_sharding,
            local_params=(sp_.dense / shard + sp_.expert / eshard) if dp_sharding in ("optimizer", "optimizer_grads")
            else sp_.total)
        if rank in muon_step:
            muon_owned, muon_trans = muon_step[rank]
            # the Float16 wrapper's fp32 gradient copies of the owned parameters, and the largest matrix's
            # Newton-Schulz buffers (memory.muon.muon_stage_bytes)
            step = optimizer_step_grad_bytes(main_grads=g, precision=precision, decoupled=False,
                                             dp_sharding="none", local_params=muon_owned) + muon_trans
        if opts.state_offload > 0:
            sharded_opt = dp_sharding in ("optimizer", "optimizer_grads", "full")
            children = ((sp_.dense / shard, sp_.expert / (edp if dp_sharding == "full" else eshard)) if sharded_opt
                        else (sp_.dense, sp_.expert))
            master_b, moments_b = bundle_bytes(precision=precision, optimizer=optimizer, main_params=opts.main_params,
                                               exp_avg=opts.exp_avg, exp_avg_sq=opts.exp_avg_sq)
            step += step_restore_bytes(fraction=opts.state_offload, chunk_mb=opts.state_chunk_mb, master=master_b,
                                       moments=moments_b, local_params=children)
        if opts.full_graph:
            # the graph's private pool keeps the captured step's peak (activations and in-graph transients)
            # reserved while the eager optimizer step runs beside it
            transient = max(0.0, max(trans)) + step
        else:
            # eager: the step runs after the last backward freed the activations
            trans.append(step - activations)
            transient = max(0.0, max(trans))
        in_flight = counts[rank] / max(1, len(layout[rank]))  # micro-batches' worth of chunks at the peak
        # torch / TE GEMM workspaces, allocated at the first GEMM and kept (memory.workspaces)
        ws = opts.gemm_ws.stage_bytes(layers=any(ch.layers for ch in layout[rank]), loss=rank == last_rank,
                                      moe=any(moe[i] for ch in layout[rank] for i in ch.layers))
        side = 0.0
        if graphed:
            # allocated peak: the replay's or the capture's (the static inputs, X, are in both), whichever is larger;
            # reserved: the replay's plus the pool, which keeps the capture's graphed tensors (memory.te_graphs)
            pool = pool_peaks[rank] + graph_bwd
            # the capture runs before the first optimizer step: Adam's moments are made by that step (TE / apex
            # FusedAdam initialise a parameter's state in ``step``, torch.optim.Adam in ``_init_group``;
            # megatron's ``init_state_fn`` only when loading a checkpoint -- Float16OptimizerWithFloat16Params,
            # FP32Optimizer and DistributedOptimizer alike, megatron-core optimizer.py ``sharded_state_dict
            # (is_loading=True)``), whatever the precision; the main-parameter shard exists
            # (DistributedOptimizer.__init__); reported inside the activations so the optimizer term stays the step's
            moments = optim * moments_share
            capture_act = capture_peaks[rank] - moments
            if capture_act + graph_bwd > activations + transient:
                side = max(0.0, activations + transient + pool - capture_act - graph_bwd)
                activations, transient = capture_act, graph_bwd
            else:
                side = pool
        out.append(stage_report(rank, weights, grads, optim, activations, transient, int(-(-in_flight // 1)), sp_.total,
                          framework="megatron", workspaces=ws, side_pools=side))
    return tuple(out)


def deferred_wgrad_bytes(m: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int = 1, a: int = 2) -> tuple[float, float]:
    """(bytes kept per deferred micro-batch, bytes added at the flush) of ``--defer-embedding-wgrad-compute``.

    megatron-core 0.16.1 ``tensor_parallel/layers.py``: the output layer's ``ColumnParallelLinear.forward``
    appends its input (``input_parallel``: the sequence-parallel shard ``[s/t, b, h]`` under SP) to
    ``embedding_activation_buffer`` and ``LinearWithGradAccumulationAndAsyncCommunication.backward``
    appends the logits' gradient (``grad_output``, ``[s, b, V/t]`` in the activation dtype; under the TE
    cross-entropy the logits buffer the loss wrote it into) to ``grad_output_buffer`` instead of running the
    weight-gradient GEMM, for the first ``--wgrad-deferral-limit`` micro-batches (0: all);
    ``pipeline_parallel/schedules.py`` clears the buffers when a step starts and drains them in
    ``finish_embedding_wgrad_compute`` after the last backward (``utils.py`` ``drain_embedding_wgrad_compute``:
    the GEMMs pipelined with all-gathers of the inputs into two full-sequence global buffers ``[s, b, h]``
    under SP).  Per micro-batch ``a s b V/t + a s b h / t_sp``; at the flush ``2 a s b h`` (SP) on top.
    ``V`` = padded vocabulary, ``s`` the sequence over CP."""
    sb = seq // cp * mbs
    h = m.hidden_size
    per_mb = a * sb * m.padded_vocab_size(tp) / tp + a * sb * h / (tp if sp else 1)
    return float(per_mb), float(2 * a * sb * h if sp and tp > 1 else 0.0)


def optimizer_step_grad_bytes(*, main_grads: int, precision: str, decoupled: bool, dp_sharding: str,
                              local_params: float) -> float:
    """Bytes of the fp32 gradient copies Megatron's optimizer step makes, beside the grad buffer.

    megatron-core 0.16.1 ``optimizer/distrib_optimizer.py`` ``_copy_model_grads_to_main_grads``: each
    local shard's gradient becomes ``shard_main_param.grad = shard_model_grad.float()``: a new fp32
    tensor of the shard when the grad buffer is bf16 (``--grad-reduce-in-bf16`` / ``--main-grads-dtype
    bf16``), a view when it is fp32; the precision-aware optimizer's ``decoupled_grad`` path
    (``use_precision_aware_optimizer_no_fp8_or_ds_fp8``, ``optimizer_config.py``: main params not fp32,
    or no fp8 / delayed scaling, or CPU offload) reads the buffer and copies nothing.  The copies live
    until the next iteration's ``zero_grad(set_to_none=True)``: ``4 x local_params`` (the dense shard over
    dp x cp plus the experts' over expert-DP with the distributed optimizer, every parameter without
    it).  Megatron-FSDP (``dp_sharding="full"``) keeps its own main-grad buffers: 0 here."""
    if precision == "fp32" or main_grads >= 4 or decoupled or dp_sharding == "full":
        return 0.0
    return 4.0 * local_params


def hybrid_layer_bytes(m: ModelArch, sym: str, dense_act: LayerActivations, moe_act: LayerActivations,
                       tokens: int, tp: int, sp: bool,
                       modules: tuple[str, ...] | None = None, cp: int = 1) -> float:
    """One layer of a hybrid stack: ``*`` the attention block of a GPT layer (``LayerActivations.attention``),
    ``-`` / ``E`` the rest of a dense / MoE GPT layer (its norm, MLP or router, dispatch and experts), ``M``
    :func:`~primus_launch.projection.cost.mamba.mamba_activation_bytes`.  ``modules``: selective recompute
    (``--recompute-modules``): each symbol drops what those of its modules drop in a GPT layer
    (``LayerActivations.selective``; ``plan.ATTENTION_RECOMPUTE_MODULES`` in ``*``, the others -- layernorm: the MoE
    layer's separate pre_mlp_layernorm, the attention's and the MLP's input norms being fused into their first TE
    linear; mlp, moe, moe_act, shared_experts -- in ``-`` / ``E``); a Mamba layer has no recompute module
    (megatron-core 0.16.1 ``ssm/mamba_layer.py``); ``cp``: the context-parallel size (``tokens`` = b s / cp)."""
    if sym == "M":
        return mamba_activation_bytes(m, tokens, tp, sp, cp)
    la = dense_act if sym in ("*", "-") else moe_act
    if sym == "*":
        mods = tuple(x for x in (modules or ()) if x in ATTENTION_RECOMPUTE_MODULES)
        return max(0.0, la.attention - ((la.full - la.selective(mods)) if mods else 0.0))
    mods = tuple(x for x in (modules or ()) if x not in ATTENTION_RECOMPUTE_MODULES)
    return max(0.0, la.full - la.attention - ((la.full - la.selective(mods)) if mods else 0.0))


def _layers_kept(m, moe, chunk, opts: McoreOpts, gran, method, rnum, dense_act, moe_act, kept, seq, mbs, tp, sp,
                 cp) -> list[float]:
    """Bytes each decoder layer of ``chunk`` keeps for one micro-batch (recompute / selective / hybrid rules);
    ``moe``: :func:`moe_layer_kinds` of ``m``."""
    kinds = [moe[i] for i in chunk.layers]  # True = MoE layer
    n = len(kinds)
    if m.is_hybrid:
        full_of = [hybrid_layer_bytes(m, m.layer_symbol(i), dense_act, moe_act, seq // cp * mbs, tp, sp, cp=cp)
                   for i in chunk.layers]
    else:
        full_of = [moe_act.full if k else dense_act.full for k in kinds]
    if gran == "full" and method == "every_n":
        # every N-th layer checkpointed (TorchTitan layer SAC: layer ids counted per chunk)
        N = rnum or 1
        kept_of = [dense_act.layer_input if j % N == 0 else full_of[j] for j in range(n)]
    elif gran == "full" and method == "layer_ids":
        # AMD Primus recompute_layer_ids (patches/recompute_layer_patches.py): the listed layers
        # (global ids) each checkpointed alone, keeping only their input; the others keep all
        ids = set(opts.layer_ids)
        kept_of = [dense_act.layer_input if i in ids else full_of[j] for j, i in enumerate(chunk.layers)]
    elif gran == "full":
        N = n if rnum is None and method == "block" else (rnum or 1)
        if method == "uniform":
            kept_of = [dense_act.layer_input if j % N == 0 else 0.0 for j in range(n)]
        else:
            N = min(N, n)
            kept_of = [dense_act.layer_input if j < N else full_of[j] for j in range(n)]
    elif m.is_hybrid and gran == "selective":   # module offloading moves nothing on them (cost/offload.py)
        kept_of = [hybrid_layer_bytes(m, m.layer_symbol(i), dense_act, moe_act, seq // cp * mbs, tp, sp,
                                      tuple(opts.modules), cp=cp) for i in chunk.layers]
    elif m.is_hybrid:
        kept_of = list(full_of)
    else:
        kept_of = [kept(moe_act) if k else kept(dense_act) for k in kinds]
    return kept_of


def _chunk_activations(m, moe, chunks, rank, opts: McoreOpts, gran, method, rnum, dense_act, moe_act, kept, a, sb,
                       rope_tbl, seq, mbs, tp, sp, cp, impl, acts16=None) -> tuple[list[float], list[float]]:
    """Per chunk of one rank: (bytes one micro-batch keeps, bytes of its largest layer).  ``acts16``: the
    (dense, MoE) activations of a layer run in BF16, for the layers of ``opts.bf16_layers`` (kept out of the
    FP8 context: no FP8 saved copies; ``Plan.bf16_layer_ids``)."""
    out, biggest = [], []
    for c, chunk in enumerate(chunks):
        kinds = [moe[i] for i in chunk.layers]  # True = MoE layer
        kept_of = _layers_kept(m, moe, chunk, opts, gran, method, rnum, dense_act, moe_act, kept, seq, mbs, tp, sp, cp)
        if acts16 is not None and any(i in opts.bf16_layers for i in chunk.layers):
            k16 = _layers_kept(m, moe, chunk, opts, gran, method, rnum, acts16[0], acts16[1], kept, seq, mbs, tp, sp,
                               cp)
            kept_of = [k16[j] if i in opts.bf16_layers else kept_of[j] for j, i in enumerate(chunk.layers)]
        if opts.offload_layers and kept_of and not gran == "full":
            # --cpu-offloading-num-layers: the first K layers' activations go to host; the most the GPU
            # holds at once, walked over TE's offload / reload order (memory.offload)
            total = te_offload_peak(kept_of, opts.offload_layers) + rope_tbl
        else:
            total = sum(kept_of) + rope_tbl
        if chunk.embedding:
            total += 8.0 * sb  # token ids kept by the embedding backward
        if opts.te_graph_scope is not None and m.is_hybrid:
            # a hybrid stack's graphed layers (memory.te_graphs hybrid_graph_bytes): static bytes per layer
            gkw = dict(tokens=sb / (tp if sp else 1), hidden=m.hidden_size)
            total += sum(hybrid_graph_bytes(opts.te_graph_scope, m.layer_symbol(i), kept=0.0,
                                            shared_in_graph=opts.shared_in_graph, mbs=mbs, seq=seq, cp=cp, **gkw)[1]
                         for i in chunk.layers)
            if kinds:
                total += te_graph_chunk_input_bytes(opts.te_graph_scope, receives=not chunk.embedding, **gkw)
        elif opts.te_graph_scope is not None:
            # TE-scoped CUDA graphs: static inputs / outputs beyond eager's saved tensors (memory.te_graphs)
            gkw = dict(tokens=sb / (tp if sp else 1), hidden=m.hidden_size)
            last_moe = moe[-1]
            total += sum(te_graph_layer_bytes(opts.te_graph_scope, moe=k, shared_in_graph=opts.shared_in_graph,
                                              mbs=mbs, seq=seq, cp=cp, **gkw) for k in kinds + [last_moe] * chunk.mtp)
            if kinds:
                total += te_graph_chunk_input_bytes(opts.te_graph_scope, receives=not chunk.embedding, **gkw)
        if chunk.mtp:
            # multi-token-prediction modules (their layer, norms, projection and loss softmax)
            mkw = dict(seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, abytes=a, impl=impl)
            if gran == "full" and method == "layer_ids":  # depth d recomputed iff num_layers + d listed
                n_ck = sum(1 for i in opts.mtp_ids[rank][c] if i in set(opts.layer_ids))
                total += (n_ck * mtp_activation_bytes(m, **mkw, recompute="full")
                          + (chunk.mtp - n_ck) * mtp_activation_bytes(m, **mkw, recompute="none"))
            else:
                # megatron MultiTokenPredictionLayer._checkpointed_forward: full/uniform checkpoints the
                # module; full/block warns "not supported for MTP yet" and runs it without recompute
                mtp_rc = "none" if (gran == "full" and method == "block") else gran
                if mtp_rc == "full":
                    total += chunk.mtp * mtp_activation_bytes(m, **mkw, recompute="full")
                else:
                    # the module's TransformerLayer is built from the same config (multi_token_prediction.py
                    # ``MultiTokenPredictionLayer.transformer_layer``): --recompute-modules and --offload-modules
                    # act in it as in a decoder layer of the last layer's kind, so it drops what ``kept`` drops
                    last = moe_act if moe[-1] else dense_act
                    total += chunk.mtp * (mtp_activation_bytes(m, **mkw, recompute="none") - (last.full - kept(last)))
        out.append(total)
        biggest.append(max(kept_of, default=0.0))
    return out, biggest


def _chunk_graphed(m, chunks, opts: McoreOpts, gran, dense_act, moe_act, kept, *, sb, seq, mbs, tp, sp,
                   cp) -> tuple[list[float], list[float]]:
    """Per chunk of one rank under TE-scoped CUDA graphs (memory.te_graphs): (bytes of one micro-batch's saved
    tensors that live in the graphs' private pool, the static inputs / outputs the graphs add).  Zeros without
    graphs, with measured activations (no attention split), and where the graph's saved tensors are not the
    eager ones (full recompute, offloading): those keep the sum."""
    zero = [0.0] * len(chunks)
    if (opts.te_graph_scope is None or not opts.te_graph_capture_first or gran == "full" or opts.offload_modules
            or opts.offload_layers or not dense_act.attention):
        return zero, zero
    scope = opts.te_graph_scope

    def attention_kept(la) -> float:
        d = dict(la.drops)
        drop = (sum(d.get(mod, 0.0) for mod in set(opts.modules) if mod in ATTENTION_RECOMPUTE_MODULES)
                if gran == "selective" else 0.0)
        return max(0.0, la.attention - drop)

    gkw = dict(tokens=sb / (tp if sp else 1), hidden=m.hidden_size)
    g_out, x_out = [], []
    if m.is_hybrid:   # per layer symbol (memory.te_graphs hybrid_graph_bytes)
        for chunk in chunks:
            g = x = 0.0
            for i in chunk.layers:
                pool, static = hybrid_graph_bytes(
                    scope, m.layer_symbol(i), kept=hybrid_layer_bytes(m, m.layer_symbol(i), dense_act, moe_act, sb, tp, sp, cp=cp),
                    shared_in_graph=opts.shared_in_graph, mbs=mbs, seq=seq, cp=cp, **gkw)
                g += pool
                x += static
            if chunk.layers:
                x += te_graph_chunk_input_bytes(scope, receives=not chunk.embedding, **gkw)
            g_out.append(g)
            x_out.append(x)
        return g_out, x_out
    for chunk in chunks:
        g = x = 0.0
        for i in chunk.layers:
            k = m.is_moe_layer(i)
            la = moe_act if k else dense_act
            att = attention_kept(la)
            g += graphed_kept_bytes(scope, moe=k, attention=att, rest=max(0.0, kept(la) - att))
            x += te_graph_layer_bytes(scope, moe=k, shared_in_graph=opts.shared_in_graph, mbs=mbs, seq=seq, cp=cp,
                                      **gkw)
        if chunk.layers:
            x += te_graph_chunk_input_bytes(scope, receives=not chunk.embedding, **gkw)
        g_out.append(g)
        x_out.append(x)
    return g_out, x_out


def _graph_backward_split(m, chunks, scope: tuple[str, ...], dense_act, moe_act) -> tuple[float, float]:
    """The largest layer backward's temporaries (eager part, graphed part) under TE-scoped graphs: the
    layer's output gradient in both; the unfused attention's ``s x s`` gradients in the graph when the attention
    is; the MLP / experts' in the graph when the whole MLP / MoE is (memory.te_graphs)."""
    eager = graph = 0.0
    for ch in chunks:
        for i in ch.layers:
            k = m.is_moe_layer(i)
            la = moe_act if k else dense_act
            grad_out = la.backward_temp - max(la.attention_backward, la.mlp_backward)
            whole = graphed_kept_bytes(scope, moe=k, attention=0.0, rest=1.0) > 0
            att = attention_in_graph(scope) and graphed_kept_bytes(scope, moe=k, attention=1.0, rest=0.0) > 0
            eager = max(eager, grad_out + max(0.0 if att else la.attention_backward, 0.0 if whole else la.mlp_backward))
            graph = max(graph, grad_out + max(la.attention_backward if att else 0.0, la.mlp_backward if whole else 0.0))
    return eager, graph


def _experts_kept(moe_act, opts: McoreOpts, gran) -> float:
    """One MoE layer's routed experts' saved tensors per micro-batch that stay after recompute
    (memory.paged_stash): ``moe`` recomputes them all, ``moe_act`` fc2's input; full recompute: none."""
    if gran == "full" or (gran == "selective" and "moe" in opts.modules):
        return 0.0
    drops = dict(moe_act.drops)
    return max(0.0, moe_act.experts - (drops.get("moe_act", 0.0) if gran == "selective" and "moe_act" in opts.modules
                                        else 0.0))


def _recompute_extra(m, chunks, opts: McoreOpts, gran, method, rnum, dense_act, moe_act) -> float:
    """Full recompute: the activations a checkpointed group rebuilds during its backward (and the group's
    input gradient), the largest over the rank's chunks; 0 otherwise."""
    if gran != "full":
        return 0.0
    extra = 0.0
    for chunk in chunks:
        full_of = [moe_act.full if m.is_moe_layer(i) else dense_act.full for i in chunk.layers]
        n = len(full_of)
        if not n:
            continue
        if method == "every_n":
            N = rnum or 1
            ck = [j % N == 0 for j in range(n)]
            if any(ck):
                extra = max(extra, max(full_of[j] for j in range(n) if ck[j]) + dense_act.layer_input)
        elif method == "layer_ids":
            # a checkpointed layer is recomputed in its backward, after the later layers' backward freed
            # what the non-checkpointed ones kept
            ids = set(opts.layer_ids)
            after = 0.0
            for j in reversed(range(n)):
                if chunk.layers[j] in ids:
                    extra = max(extra, max(0.0, full_of[j] - after) + dense_act.layer_input)
                else:
                    after += full_of[j]
        elif method == "uniform":
            N = rnum or 1
            grp = max(sum(full_of[g0:g0 + N]) for g0 in range(0, n, N))
            extra = max(extra, grp + dense_act.layer_input)
        else:
            N = min(n if rnum is None else rnum, n)
            if N:
                # the block is recomputed after the later layers' backward freed theirs
                extra = max(extra, max(0.0, max(full_of[:N]) - sum(full_of[N:])) + dense_act.layer_input)
    return extra


def _linear_params_of(key: ArchKey, tp: int, etp: int, ep: int, layers: list[int]) -> float:
    """:func:`linear_params` of the decoder layers ``layers`` alone (their parameters less norms, routers and MLA
    latent norms, by the same rule)."""
    if not layers:
        return 0.0
    m = arch_from_key(key)
    if m.is_hybrid:
        total = sum(hybrid_layer_params(key, tp, etp, ep, m.layer_symbol(i)).total for i in layers)
    else:
        total = sum(layer_params_for_key(key, tp, etp, ep, m.is_moe_layer(i), "te").total for i in layers)
    return linear_params(key, tp, etp, ep, (Chunk(layers=tuple(layers)),), total)


def linear_params(key: ArchKey, tp: int, etp: int, ep: int, chunks: tuple[Chunk, ...], total: int,
                  moe: Optional[tuple[bool, ...]] = None) -> float:
    """Parameters of one GPU's Transformer Engine linears (what fp8 quantizes): everything but the
    embedding / output head, the norms and the routers.  ``moe``: :func:`moe_layer_kinds` of the model, where the
    caller has it."""
    m = arch_from_key(key)
    moe = moe_layer_kinds(m) if moe is None else moe
    h = m.hidden_size
    other = 0.0
    for c in chunks:
        for i in c.layers:
            other += 2 * h + ((m.num_experts or 0) * h if moe[i] else 0)
            if m.multi_latent_attention:
                other += (m.q_lora_rank or 0) + m.kv_lora_rank
        if c.embedding or c.mtp:
            other += m.padded_vocab_size(tp) / tp * h
        if c.loss:
            other += m.padded_vocab_size(tp) / tp * h + h
    return max(0.0, total - other)


def cp_comm_bytes(m: ModelArch, comm: str, *, seq: int, mbs: int, tp: int, cp: int, a: int) -> float:
    """Context-parallel attention buffers on top of a layer's activations (Transformer Engine
    ``attention/dot_product_attention/context_parallel.py``): ``p2p`` ring: the K/V chunk in flight
    beside the one in use (send/receive double buffer; in backward their gradients too: ``2 x 2``
    K/V chunks); ``allgather``: K and V gathered to the full sequence; ``a2a`` (Ulysses): Q, K, V and
    the output exchanged to head-sharded full-sequence copies; ``a2a+p2p``: both.  A stated model."""
    sb = seq // cp * mbs
    d = m.kv_channels if not m.multi_latent_attention else m.qk_head_dim + m.qk_pos_emb_head_dim
    nkv = m.kv_heads if not m.multi_latent_attention else m.num_attention_heads
    kv = a * sb * 2 * nkv * d / tp
    qkvo = kv + 2 * a * sb * m.num_attention_heads * d / tp
    return {"p2p": 4 * kv, "allgather": cp * kv, "a2a": qkvo, "a2a+p2p": qkvo + 4 * kv}.get(comm, 4 * kv)
