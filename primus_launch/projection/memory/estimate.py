"""Per-GPU memory of a training plan: weights, gradients, optimizer state, activations, peaks.

Per pipeline stage (one GPU of that stage), in bytes:

- **weights** ``N * w`` with ``N`` from :func:`params.stage_parameter_split` and ``w = 2`` for
  bf16/fp16/fp8 (Megatron/TE keep bf16 weights under fp8 unless fp8 parameter gather is used,
  which the plan does not express) and ``4`` for fp32;
- **gradients** Megatron DDP's contiguous grad buffer, full size even with the distributed
  optimizer (it reduce-scatters in place): ``N * 4`` when ``grad_reduce_in_fp32`` (or fp32
  training), else ``N * 2`` (``megatron/core/distributed/param_and_grad_buffer.py``);
- **optimizer** Adam keeps an fp32 master copy and two fp32 moments, ``12`` bytes/param in mixed
  precision (``8`` in fp32: no master copy); SGD keeps the master and one momentum (``8``/``4``).
  The distributed optimizer (``dp_sharding="optimizer"``) divides it by DP for dense parameters
  and by expert-DP for expert parameters (Megatron docs, "Distributed Optimizer": ``6 + 12/d``
  bytes/param for bf16 params with fp32 grads);
- **FSDP** (``dp_sharding="full"``): weights, gradients and optimizer all divide by the shard
  group (``dp / dp_replicate`` for dense, ``expert_dp`` for experts).  TorchTitan's FSDP2 keeps
  fp32 sharded parameters (they are the master copy) and fp32 sharded gradients, so
  ``(4 + 4 + 8) / shard``; Megatron-FSDP keeps bf16 sharded weights plus the optimizer's fp32
  master (``(2 + 4 + 12) / shard``);
- **activations** one micro-batch of each model chunk (:mod:`memory_activations`; recompute as
  below) times the chunk-micro-batches the schedule keeps in flight on that rank
  (:func:`pipeline.activations_in_flight`, walked from the schedule's own order: 1F1B keeps
  ``pp - r`` on rank ``r``, interleaved Megatron's warm-up + 1, ...); with SP, plus once the
  all-gather buffer ``a s b h`` (megatron ``GlobalMemoryBuffer``) of the column-parallel inputs.  Recompute: ``selective``
  drops the core-attention internals; ``full``/``uniform`` with ``N`` keeps the input of every
  group of ``N`` layers; ``full``/``block`` with ``N`` keeps only the input of the first ``N``
  layers of each chunk and everything of the rest (``N`` = all layers when unset);
- **transient** on top of the activations in flight, the largest of: a layer's backward
  temporaries ``a sb ((g+2) F/t + h/spd)`` (measured, :mod:`memory_activations`) plus, with full
  recompute, the rebuilt group and its input gradient; on the last stage the bf16 logits of the
  loss forward ``a sb V/t`` beside the kept fp32 softmax (the layers' backward there runs after the
  output layer freed its ``kept``); on the first stage the dense embedding weight-gradient
  ``w V/t h`` after one micro-batch's chunk is freed; FSDP's unsharded parameters (current +
  prefetched layer in bf16) and one layer's unsharded gradients; MoE dispatch buffers
  (``2 a sb topk h`` per EP rank: permuted tokens and combine output);
- **reserve** a stated framework reserve: ``FRAMEWORK_RESERVE_BYTES`` = 2 GiB (CUDA/HIP context
  with lazy module loading ~0.5 GiB, cuBLAS/hipBLASLt workspaces, NCCL/RCCL communicators and
  buffers for the TP/PP/DP groups ~1 GiB) plus ``FRAGMENTATION`` = 5 % of the dynamic part
  (activations + transient) for the caching allocator's fragmentation.  These are assumptions, not
  measurements; the margin (``--memory-margin``) is on top of them.

``fits`` = ``peak <= capacity * (1 - margin)`` with the GPU's HBM from :mod:`hardware`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Optional

from primus_launch.plan import Plan
from primus_launch.projection.hardware.gpus import GiB, get_gpu
from primus_launch.projection.memory.activations import (
    TE,
    ActivationImpl,
    LayerActivations,
    impl_for,
    layer_activation_bytes,
    mtp_activation_bytes,
    output_activation_bytes,
    rope_table_bytes,
)
from primus_launch.projection.memory.params import (
    arch_from_key,
    arch_key,
    layer_params_for_key,
    stage_split_for_key,
)
from primus_launch.projection.memory.titan import TITAN, PPStage, TitanImpl, pp_rank_walk, stage_walk, torch_pp_ops
from primus_launch.projection.memory.titan import head_kept_bytes as titan_head_bytes
from primus_launch.projection.memory.titan import layer_activation_bytes as titan_layer_bytes
from primus_launch.projection.pipeline.simulate import activations_in_flight
from primus_launch.projection.result import MemoryReport, StageMemory

#: memory a process takes outside PyTorch's caching allocator (CUDA/HIP context with lazy module
#: loading ~0.5 GiB, cuBLAS/hipBLASLt workspaces, NCCL/RCCL communicator buffers of the TP/PP/DP
#: groups ~1 GiB): a stated assumption, not a measurement; it never shows in ``memory_reserved()``
OUTSIDE_ALLOCATOR_BYTES = 2 * GiB
#: reserved minus allocated at the peak: the caching allocator keeps freed blocks cached and cannot
#: serve a request from two non-adjacent free blocks (c10/cuda/CUDACachingAllocator.cpp: blocks are
#: rounded to 512 B / segments of 2 MiB and more, large blocks are split and not merged across
#: segments), so ``memory_reserved`` runs above ``memory_allocated`` by a fraction of the dynamic
#: (activation + transient) memory: a stated assumption of 10 %, judged (not tuned) against published
#: reserved peaks in ``scripts/validate_memory.py``
ALLOCATOR_FRAGMENTATION = 0.10
# kept for callers of the old names (total reserve = outside-allocator bytes + fragmentation)
FRAMEWORK_RESERVE_BYTES = OUTSIDE_ALLOCATOR_BYTES
FRAGMENTATION = ALLOCATOR_FRAGMENTATION
MemoryBasis = Literal["reserved", "allocated"]


@dataclass(frozen=True)
class MeasuredActivations:
    """Per-GPU activation bytes of one micro-batch measured on real pieces
    (:mod:`primus_launch.projection.measure`), used in place of the tensor-list model's per-layer
    and output figures; stages, recompute, in-flight micro-batches and the rest as modelled."""

    dense: LayerActivations
    moe: Optional[LayerActivations]
    output: tuple[float, float]  # (kept, transient) of the final norm + output layer + loss
    note: str


@lru_cache(maxsize=4096)
def _in_flight(schedule: str, pp: int, vpp: int, m: int, group: int | None = None) -> tuple[float, ...]:
    """Chunk-micro-batches of activations alive at each rank's peak.

    Closed forms equal to :func:`pipeline.activations_in_flight`'s walk of the schedule order
    (``tests/test_memory.py`` checks them): 1F1B ``min(pp - r, m)``; interleaved (Megatron)
    ``min(2 (pp - r - 1) + (vpp - 1) g + 1, m vpp)`` with Megatron's micro-batch group ``g``
    (default pp: the warm-up of ``get_pp_rank_microbatches`` plus the one in its first 1F1B step);
    GPipe ``m vpp``.  Zero-bubble schedules
    are walked with ``release="W"``: the weight-gradient pass still needs the linears' inputs,
    so a micro-batch counts until its ``W`` (an upper bound).
    """
    if pp == 1:
        return (1.0,)
    if schedule == "1f1b" and vpp > 1:
        # Megatron runs its interleaved schedule whenever virtual stages are set
        # (get_forward_backward_func: forward_backward_pipelining_with_interleaving)
        schedule = "interleaved_1f1b"
    if schedule == "1f1b":
        return tuple(float(min(pp - r, m)) for r in range(pp))
    if schedule == "interleaved_1f1b":
        g = pp if group is None else group
        return tuple(float(min(2 * (pp - r - 1) + (vpp - 1) * g + 1, m * vpp)) for r in range(pp))
    if schedule == "gpipe":
        return tuple(float(m * vpp) for _ in range(pp))
    return tuple(activations_in_flight(schedule, pp, vpp, m, release="W"))


_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class McoreOpts:
    """The Megatron settings beyond the layout that change memory (hashable, for the caches)."""

    modules: tuple[str, ...] = ("core_attn",)  # --recompute-modules (granularity selective)
    offload_layers: int = 0  # --cpu-offloading-num-layers (activations)
    offload_modules: tuple[str, ...] = ()  # --offload-modules (fine-grained activation offloading)
    optimizer_offload: float = 0.0  # --optimizer-cpu-offload --optimizer-offload-fraction
    main_grads: int = 4  # bytes per gradient-buffer element (--main-grads-dtype)
    main_params: int = 4  # bytes of the optimizer's master copy (--main-params-dtype)
    exp_avg: int = 4
    exp_avg_sq: int = 4
    fp8: str | None = None  # TE fp8 recipe when training in fp8 (delayed|tensorwise|blockwise|mxfp8)
    fp8_param_gather: bool = False
    cp_comm: str = "p2p"
    mb_group: int | None = None  # --microbatch-group-size-per-virtual-pipeline-stage (None = pp)
    layer_ids: tuple[int, ...] = ()  # full recompute of exactly these global layer ids (Primus recompute_layer_ids)
    mtp_ids: tuple = ()  # with layer_ids: [rank][chunk] -> global ids of the chunk's MTP depths


def mcore_opts(plan: Plan) -> McoreOpts:
    t, p = plan.training, plan.parallel
    pa = t.precision_aware_optimizer
    fp8 = (t.fp8_recipe or "delayed") if t.precision == "fp8" else None
    return McoreOpts(
        modules=tuple(sorted(set(t.recompute.modules))), offload_layers=t.offload.activation_layers,
        offload_modules=tuple(sorted(set(t.offload.activation_modules))),
        optimizer_offload=t.offload.optimizer_fraction,
        main_grads=_DTYPE_BYTES[t.main_grads_dtype] if pa else (4 if (t.grad_reduce_in_fp32 or t.precision == "fp32") else 2),
        main_params=_DTYPE_BYTES[t.main_params_dtype] if pa else 4,
        exp_avg=_DTYPE_BYTES[t.exp_avg_dtype] if pa else 4, exp_avg_sq=_DTYPE_BYTES[t.exp_avg_sq_dtype] if pa else 4,
        fp8=fp8, fp8_param_gather=t.fp8_param_gather and fp8 is not None, cp_comm=p.cp_comm_type,
        mb_group=p.microbatch_group,
        **(dict(layer_ids=tuple(t.recompute.layer_ids), mtp_ids=plan.chunk_mtp_ids())
           if t.recompute.granularity == "full" and t.recompute.method == "layer_ids" else {}))


def _optimizer_bytes(precision: str, optimizer: str) -> int:
    mixed = precision != "fp32"
    states = 8 if optimizer == "adam" else 4
    return states + (4 if mixed else 0)


def stage_memory(plan: Plan, impl: ActivationImpl | None = None, titan_impl: TitanImpl = TITAN,
                 acts: Optional[MeasuredActivations] = None) -> list[StageMemory]:
    """Per PP rank, bytes on one GPU of that rank (see the module docstring; TorchTitan plans:
    :mod:`memory_titan`)."""
    if plan.framework == "torchtitan":
        return [st.model_copy() for st in titan_stage_memory(*titan_args(plan), titan_impl, measured=acts)]
    return [st.model_copy() for st in mcore_stage_memory(*mcore_args(plan, impl), acts=acts)]


def mcore_args(plan: Plan, impl: ActivationImpl | None = None) -> tuple:
    """The cached arguments of :func:`mcore_stage_memory` for a Megatron plan."""
    m, p, t = plan.model, plan.parallel, plan.training
    r = t.recompute
    src = plan.source.framework if plan.source else "megatron"
    return (arch_key(m), p.tp, p.expert_tp, p.ep, p.pp, p.vpp, p.cp, p.sequence_parallel, p.dp_sharding,
            p.dp_replicate, plan.chunk_layout(), t.pipeline_schedule, t.micro_batch_size, plan.num_microbatches,
            t.precision, t.optimizer, t.grad_reduce_in_fp32, r.granularity, r.method, r.num_layers,
            plan.dp, plan.expert_dp, src, impl_for(m, t.attention_backend, impl or TE), mcore_opts(plan))


@lru_cache(maxsize=65536)
def mcore_stage_memory(key, tp, etp, ep, pp, vpp, cp, sp, dp_sharding, dp_replicate, layout, schedule, mbs, nmb,
                  precision, optimizer, grad_fp32, gran, method, rnum, dp, edp, framework,
                  impl: ActivationImpl, opts: McoreOpts = McoreOpts(),
                  acts: Optional[MeasuredActivations] = None) -> tuple[StageMemory, ...]:
    m = arch_from_key(key)
    split = stage_split_for_key(key, tp, etp, ep, layout, "te")
    a = 4 if precision == "fp32" else 2
    w = 4 if precision == "fp32" else 2
    g = opts.main_grads  # the gradient buffer (--main-grads-dtype with the precision-aware optimizer)
    if precision == "fp32":
        opt = _optimizer_bytes(precision, optimizer)
    else:
        # master copy + moments (--main-params-dtype / --exp-avg-dtype / --exp-avg-sq-dtype)
        opt = opts.main_params + opts.exp_avg + (opts.exp_avg_sq if optimizer == "adam" else 0)
    opt *= 1.0 - opts.optimizer_offload  # HybridDeviceOptimizer keeps the offloaded fraction on the host
    seq = m.seq_length
    kw = dict(seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, ep=ep, etp=etp, abytes=a, impl=impl, fp8=opts.fp8)
    dense_act = layer_activation_bytes(m, moe=False, **kw)
    moe_act = layer_activation_bytes(m, moe=True, **kw) if m.is_moe else dense_act
    out_kept, out_transient = output_activation_bytes(m, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, abytes=a, impl=impl)
    if acts is not None:  # measured pieces (projection.measure)
        dense_act, moe_act, (out_kept, out_transient) = acts.dense, acts.moe or acts.dense, acts.output
    last_rank = next(r for r, row in enumerate(layout) if any(c.loss for c in row))
    first_rank = next(r for r, row in enumerate(layout) if any(c.embedding for c in row))
    flight = _in_flight(schedule, pp, vpp, nmb, opts.mb_group)
    sb = seq // cp * mbs
    rope_tbl = rope_table_bytes(m, seq=seq, cp=cp)
    shard = max(1, dp // max(1, dp_replicate))

    def kept(la) -> float:
        """Per layer and micro-batch without full recompute: selective (--recompute-modules) and
        fine-grained offloading (--offload-modules) applied."""
        k = la.selective(opts.modules) if gran == "selective" else la.full
        off = dict(la.offloadable)
        return k - sum(off.get(mod, 0.0) for mod in opts.offload_modules)

    def offloaded(la) -> float:
        off = dict(la.offloadable)
        return sum(off.get(mod, 0.0) for mod in opts.offload_modules)

    out = []
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
                grads = g * (sp_.dense / shard + sp_.expert / edp)
                optim = opt * (sp_.dense / shard + sp_.expert / edp)
        else:
            weights = w * sp_.total
            grads = g * sp_.total
            if dp_sharding in ("optimizer", "optimizer_grads"):
                optim = opt * (sp_.dense / dp + sp_.expert / edp)
            else:
                optim = opt * sp_.total
            if dp_sharding == "optimizer_grads":
                # Megatron-FSDP optim_grads (ZeRO-2): gradients reduce-scattered into DP shards
                grads = g * (sp_.dense / dp + sp_.expert / edp)
        if opts.fp8:
            lin = _linear_params(key, tp, etp, ep, layout[rank], sp_.total)
            if opts.fp8_param_gather:
                weights -= (w - 1) * lin  # the linears' weights kept in fp8 (--fp8-param-gather)
            # Transformer Engine caches each linear's quantized weight across micro-batches
            # (megatron extensions/transformer_engine.py passes is_first_microbatch; TE module/base.py
            # get_weight_workspace): rowwise + columnwise (transposed) copies, minus the rowwise one the
            # fp8 parameter already is; MXFP8 / blockwise add their scales
            qb = 1.0 + {"mxfp8": 1 / 32, "blockwise": 4 / 128}.get(opts.fp8, 0.0)
            weights += qb * lin * (1 if opts.fp8_param_gather else 2)
        # ---- activations per micro-batch, per chunk ----
        chunk_bytes = []
        recompute_extra = 0.0  # full recompute: a group's activations rebuilt during its backward
        bwd = 0.0
        for c, chunk in enumerate(layout[rank]):
            kinds = [m.is_moe_layer(i) for i in chunk.layers]  # True = MoE layer
            n = len(kinds)
            nm = sum(kinds)
            nd = n - nm
            full_of = [moe_act.full if k else dense_act.full for k in kinds]
            if gran == "full" and method == "every_n":
                # every N-th layer checkpointed (TorchTitan layer SAC: layer ids counted per chunk)
                N = rnum or 1
                ck = [j % N == 0 for j in range(n)]
                total = sum(dense_act.layer_input if ck[j] else full_of[j] for j in range(n))
                if any(ck):
                    recompute_extra = max(recompute_extra, max(full_of[j] for j in range(n) if ck[j])
                                          + dense_act.layer_input)
            elif gran == "full" and method == "layer_ids":
                # AMD Primus recompute_layer_ids (patches/recompute_layer_patches.py): the listed layers
                # (global ids) each checkpointed alone, keeping only their input; the others keep all.
                # A checkpointed layer is recomputed in its backward, after the later layers'
                # backward freed what the non-checkpointed ones kept (as the block branch below;
                # = block when the first N of the chunk are listed, = uniform/1 when all are)
                ids = set(opts.layer_ids)
                ck = [i in ids for i in chunk.layers]
                total = sum(dense_act.layer_input if ck[j] else full_of[j] for j in range(n))
                after = 0.0  # full activations of the non-checkpointed layers after j
                for j in reversed(range(n)):
                    if ck[j]:
                        recompute_extra = max(recompute_extra, max(0.0, full_of[j] - after) + dense_act.layer_input)
                    else:
                        after += full_of[j]
            elif gran == "full":
                N = n if rnum is None and method == "block" else (rnum or 1)
                if method == "uniform":
                    ng = -(-n // N) if n else 0
                    total = ng * dense_act.layer_input
                    if n:
                        grp = max(sum(full_of[g0:g0 + N]) for g0 in range(0, n, N))
                        recompute_extra = max(recompute_extra, grp + dense_act.layer_input)
                else:
                    N = min(N, n)
                    rest_full = sum(full_of[N:])
                    total = N * dense_act.layer_input + rest_full
                    if N:
                        # the block is recomputed after the later layers' backward freed theirs
                        biggest = max(full_of[:N])
                        recompute_extra = max(recompute_extra,
                                              max(0.0, biggest - rest_full) + dense_act.layer_input)
            else:
                kept_of = [kept(moe_act) if k else kept(dense_act) for k in kinds]
                # --cpu-offloading-num-layers: those layers' activations go to host (TE cpu_offload; the
                # reload of one layer is a transient below)
                total = sum(kept_of[min(n, opts.offload_layers):])
            if nd:
                bwd = max(bwd, dense_act.backward_temp)
            if nm:
                bwd = max(bwd, moe_act.backward_temp)
            total += rope_tbl
            if chunk.embedding:
                total += 8.0 * sb  # token ids kept by the embedding backward
            if chunk.mtp:
                # multi-token-prediction modules (their layer, norms, projection and loss softmax)
                if gran == "full" and method == "layer_ids":  # depth d recomputed iff num_layers + d listed
                    n_ck = sum(1 for i in opts.mtp_ids[rank][c] if i in set(opts.layer_ids))
                    mkw = dict(seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, abytes=a, impl=impl)
                    total += (n_ck * mtp_activation_bytes(m, **mkw, recompute="full")
                              + (chunk.mtp - n_ck) * mtp_activation_bytes(m, **mkw, recompute="none"))
                else:
                    # megatron MultiTokenPredictionLayer._checkpointed_forward: full/uniform checkpoints the
                    # module; full/block warns "not supported for MTP yet" and runs it without recompute
                    mtp_rc = "none" if (gran == "full" and method == "block") else gran
                    total += chunk.mtp * mtp_activation_bytes(m, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, abytes=a,
                                                              impl=impl, recompute=mtp_rc)
            chunk_bytes.append(total)
        per_mb = sum(chunk_bytes) / max(1, len(chunk_bytes))
        units = flight[rank]
        activations = units * per_mb
        if rank == last_rank:
            # the loss's kept tensors: one micro-batch (the last virtual stage runs its backward
            # right after its forward in every schedule here; the walk gives 1)
            activations += out_kept
        if sp:
            # megatron's global memory buffer holding the all-gathered (full-sequence) input of the
            # column-parallel linears under SP: allocated once, kept
            activations += a * sb * m.hidden_size
        # ---- transients (on top of the activations in flight) ----
        layer_bwd = bwd + recompute_extra
        trans = [layer_bwd]
        if rank == last_rank:
            # loss forward: bf16 logits beside the kept fp32 softmax; the layers' backward comes
            # after the output layer's backward has freed what it kept
            trans = [out_transient, layer_bwd - out_kept]
        if rank == first_rank:
            # dense embedding weight-gradient, after one micro-batch's backward freed its chunk
            freed = chunk_bytes[0] + (out_kept if rank == last_rank else 0.0)
            trans.append(w * m.padded_vocab_size(tp) / tp * m.hidden_size - freed)
        if dp_sharding == "full":
            layer = layer_params_for_key(key, tp, etp, ep, m.is_moe, "te")
            trans.append(2 * 2 * layer.total + (4 if grad_fp32 else 2) * layer.total + layer_bwd)
        if any(m.is_moe_layer(i) for ch in layout[rank] for i in ch.layers):
            trans.append(2.0 * a * sb * m.moe_router_topk * m.hidden_size + layer_bwd)
        big = moe_act if m.is_moe else dense_act
        if opts.offload_layers:
            trans.append(kept(big) + layer_bwd)  # one offloaded layer reloaded for its backward
        elif opts.offload_modules:
            trans.append(offloaded(big) + layer_bwd)
        if cp > 1:
            trans.append(_cp_comm_bytes(m, opts.cp_comm, seq=seq, mbs=mbs, tp=tp, cp=cp, a=a) + layer_bwd)
        if dp_sharding == "optimizer_grads":
            layer = layer_params_for_key(key, tp, etp, ep, m.is_moe, "te")
            trans.append(g * layer.total + layer_bwd)  # a layer's unsharded gradients before reduce-scatter
        transient = max(0.0, max(trans))
        out.append(_stage(rank, weights, grads, optim, activations, transient,
                          int(math.ceil(units / max(1, len(layout[rank])))), sp_.total))
    return tuple(out)


def _linear_params(key, tp, etp, ep, chunks, total: int) -> float:
    """Parameters of one GPU's Transformer Engine linears (what fp8 quantizes): everything but the
    embedding / output head, the norms and the routers."""
    m = arch_from_key(key)
    h = m.hidden_size
    other = 0.0
    for c in chunks:
        for i in c.layers:
            other += 2 * h + ((m.num_experts or 0) * h if m.is_moe_layer(i) else 0)
            if m.multi_latent_attention:
                other += (m.q_lora_rank or 0) + m.kv_lora_rank
        if c.embedding or c.mtp:
            other += m.padded_vocab_size(tp) / tp * h
        if c.loss:
            other += m.padded_vocab_size(tp) / tp * h + h
    return max(0.0, total - other)


def _cp_comm_bytes(m, comm: str, *, seq: int, mbs: int, tp: int, cp: int, a: int) -> float:
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


def _stage(rank, weights, grads, optim, activations, transient, in_flight, nparams) -> StageMemory:
    frag = ALLOCATOR_FRAGMENTATION * max(0.0, activations + transient)
    allocated = weights + grads + optim + activations + transient
    reserve = OUTSIDE_ALLOCATOR_BYTES + frag
    return StageMemory(
        stage=rank, parameters_bytes=int(weights), gradients_bytes=int(grads), optimizer_bytes=int(optim),
        activations_bytes=int(activations), transient_bytes=int(transient), reserve_bytes=int(reserve),
        total_bytes=int(allocated + reserve), microbatches_in_flight=in_flight, num_parameters=nparams,
        allocated_bytes=int(allocated), allocator_reserve_bytes=int(frag),
        outside_allocator_bytes=int(OUTSIDE_ALLOCATOR_BYTES))


def _ep_routing(plan: Plan) -> bool:
    return plan.model.is_moe and plan.parallel.ep > 1


def estimate_memory(plan: Plan, margin: float = 0.05, impl: ActivationImpl | None = None,
                    memory_basis: MemoryBasis = "reserved",
                    acts: Optional[MeasuredActivations] = None) -> MemoryReport:
    """Peak bytes per GPU, the worst stage's breakdown and whether it fits ``capacity*(1-margin)``.

    ``memory_basis="reserved"`` (default) compares the caching allocator's estimated reserved peak
    (allocated + :data:`ALLOCATOR_FRAGMENTATION` of the dynamic part) plus
    :data:`OUTSIDE_ALLOCATOR_BYTES` with the device's capacity; ``"allocated"`` the allocated peak plus
    the same outside-allocator bytes.  ``acts``: measured per-layer activations instead of the
    model's (a TorchTitan plan: ``MeasuredTitanActivations`` feeding :mod:`memory_titan`'s model).
    """
    if memory_basis not in ("reserved", "allocated"):
        from primus_launch.plan import PlanError

        raise PlanError("memory_basis", memory_basis, "reserved or allocated")
    stages = stage_memory(plan, impl, acts=acts)
    worst = max(stages, key=lambda s: basis_peak(s, memory_basis))
    peak = basis_peak(worst, memory_basis)
    cap = int(get_gpu(plan.cluster.gpu).hbm_bytes)
    titan = plan.framework == "torchtitan"
    notes = [
        acts.note if acts is not None else
        ("activations: torchtitan modules (fused RMSNorm, flash SDPA, unfused SwiGLU, fp32 loss logits), FSDP2 "
         "walk of the backward (tests/titan_trace.py traces)" if titan else
         "activations assume megatron-core + Transformer Engine (flash attention, fused SwiGLU/RoPE)"
         + (", dropout masks" if plan.model.hidden_dropout or plan.model.attention_dropout else ", no dropout")),
        f"memory basis {memory_basis}: allocated peak {worst.allocated_bytes / GiB:.1f} GiB, estimated reserved "
        f"{(worst.allocated_bytes + worst.allocator_reserve_bytes) / GiB:.1f} GiB (allocator model: +"
        f"{ALLOCATOR_FRAGMENTATION:.0%} of activations + transients), + {OUTSIDE_ALLOCATOR_BYTES / GiB:.0f} GiB "
        f"outside the allocator (CUDA context, cuBLAS, NCCL; assumed)",
    ]
    t = plan.training
    if not titan:
        if t.recompute.granularity == "selective" and tuple(t.recompute.modules) != ("core_attn",):
            notes.append(f"selective recompute of {', '.join(t.recompute.modules)} (megatron-core checkpoints, measured)")
        if t.offload.activation_layers or t.offload.activation_modules:
            notes.append("activation offloading: offloaded activations counted on the host, one layer reloaded at a "
                         "time (stated model of TE cpu_offload / Megatron fine-grained offloading)")
        if t.offload.weights:
            notes.append("--cpu-offloading-weights: not modelled (weights counted on the GPU)")
        if t.cuda_graph_impl != "none":
            notes.append(f"CUDA graphs ({t.cuda_graph_impl}): static input/output buffers and graph memory pools not "
                         "modelled")
        if plan.parallel.cp > 1:
            notes.append(f"context parallel {plan.parallel.cp_comm_type}: attention communication buffers as a stated "
                         "model of TE's context_parallel.py")
    if plan.training.precision == "fp8" and titan:
        notes.append("float8 (torchao Float8Linear, rowwise / tensorwise): bf16 weights and high-precision linear "
                     "inputs saved for backward, fp8 casts transient (traced: equal to bf16 at the peak)")
    elif plan.training.precision == "fp8":
        notes.append(f"fp8 ({t.fp8_recipe or 'delayed'}, Transformer Engine, modelled from its source, not traced): "
                     "linears save fp8 inputs, each keeps its quantized weight (rowwise + columnwise) across "
                     "micro-batches" + (", fp8 parameters (--fp8-param-gather)" if t.fp8_param_gather else ""))
    elif plan.training.precision == "fp4":
        notes.append("fp4: counted as bf16 (NVFP4 weight/activation copies not modelled)")
    if titan and plan.training.compile:
        notes.append("torch.compile: norms fused and SwiGLU keeping w1/w3 outputs only (stated model, not traced)")
    if _ep_routing(plan):
        notes.append("MoE: each EP rank assumed to receive the average sb*topk routed tokens (balanced routing)")
    breakdown = {"parameters": worst.parameters_bytes, "gradients": worst.gradients_bytes,
                 "optimizer": worst.optimizer_bytes, "activations": worst.activations_bytes,
                 "transient": worst.transient_bytes,
                 "reserve": peak - worst.allocated_bytes}
    return MemoryReport(
        peak_bytes_per_gpu=peak, capacity_bytes=cap, margin_fraction=margin,
        fits=peak <= cap * (1 - margin), worst_stage=worst.stage, breakdown=breakdown,
        stages=stages, notes=notes, memory_basis=memory_basis, allocated_peak_bytes=worst.allocated_bytes,
        reserved_peak_bytes=worst.allocated_bytes + worst.allocator_reserve_bytes,
        outside_allocator_bytes=worst.outside_allocator_bytes)


def memory_peak(plan: Plan, memory_basis: str = "reserved") -> tuple[int, int]:
    """(peak bytes per GPU, worst stage) of :func:`estimate_memory`, without the report (the tuner's
    pre-filter, ``memory/legality.py``: cached on plain values, no pydantic work per call)."""
    if plan.framework == "torchtitan":
        stages = titan_stage_memory(*titan_args(plan))
        worst = max(stages, key=lambda s: basis_peak(s, memory_basis))
        return basis_peak(worst, memory_basis), worst.stage
    stages = mcore_stage_memory(*mcore_args(plan))
    worst = max(stages, key=lambda s: basis_peak(s, memory_basis))
    return basis_peak(worst, memory_basis), worst.stage


def basis_peak(st: StageMemory, basis: str) -> int:
    """Bytes compared with the capacity: the basis peak plus the memory outside the allocator."""
    if basis == "allocated":
        return st.allocated_bytes + st.outside_allocator_bytes
    return st.total_bytes


# ---------------------------------------------------------------- TorchTitan
def titan_args(plan: Plan) -> tuple:
    m, p, t = plan.model, plan.parallel, plan.training
    r = t.recompute
    # FSDP shard group dp_shard = dp / dp_replicate; DDP (dp_sharding "none"): torchtitan 0.3.0's
    # fully_shard with a shard group of one (its mixed-precision policy), i.e. all DP ranks replicate
    shard = plan.dp // max(1, p.dp_replicate) if p.dp_sharding == "full" else 1
    return (arch_key(m), p.tp, p.expert_tp, p.ep, p.pp, p.vpp, p.cp, shard, 1, plan.chunk_layout(),
            t.pipeline_schedule, t.micro_batch_size, plan.num_microbatches, t.precision, r.granularity, r.method,
            r.num_layers, t.compile, p.fsdp_reshard_after_forward, titan_attention(plan))


def titan_attention(plan: Plan) -> str:
    """torchtitan's attention module for a plan: ``flex`` (0.3.0's llama3/qwen3/deepseek default
    ``attn_backend="flex"``; context parallelism all-gathers K and V) or ``sdpa`` (``attention_backend``
    flash / fused, and the v0.2 TOML configs, which ran SDPA with torch's ring attention under CP)."""
    t = plan.training
    if t.attention_backend == "auto" and not (plan.source and plan.source.format == "torchtitan-toml"):
        return "flex"
    return "sdpa"


@lru_cache(maxsize=65536)
def titan_stage_memory(*args, measured=None) -> tuple[StageMemory, ...]:
    """TorchTitan stages (:mod:`memory_titan`): FSDP2 over ``S = dp_shard x cp``, the backward walk."""
    return tuple(st for st, _ in titan_stage_parts(*args, measured=measured))


@lru_cache(maxsize=4096)
def titan_stage_parts(key, tp, etp, ep, pp, vpp, cp, dp, dp_replicate, layout, schedule, mbs, nmb, precision,
                      gran, method, rnum, compiled, reshard, attn="flex",
                      impl: TitanImpl = TITAN, measured=None) -> tuple[tuple[StageMemory, dict[str, float]], ...]:
    """Per PP rank (:class:`StageMemory`, the walk's breakdown at the peak: ``held`` unsharded parameters,
    ``recv`` buffers, ``accumulated`` unsharded gradients inside the transient / activations / gradients)."""
    m = arch_from_key(key)
    S = max(1, dp // max(1, dp_replicate)) * cp
    Se = max(1, S * tp // max(1, ep))  # torchtitan efsdp = dp_shard * cp * tp / ep
    seq = m.seq_length
    sb = seq // cp * mbs
    h = m.hidden_size
    flight = _in_flight(schedule, pp, vpp, nmb)
    ac = {"none": "none", "op": "op", "selective": "op", "full": "full"}[gran]
    d_rope = m.qk_pos_emb_head_dim if m.multi_latent_attention else m.kv_channels
    kw = dict(seq=seq, mbs=mbs, tp=tp, cp=cp, compiled=compiled, impl=impl, ep=ep, attn=attn)
    layer_of = {moe: titan_layer_bytes(m, ac="none", moe=moe, **kw) for moe in {False, m.is_moe}}
    ck_of = {moe: titan_layer_bytes(m, ac="full" if ac == "full" else "op", moe=moe, **kw) for moe in {False, m.is_moe}}
    if measured is not None:  # measured blocks (projection.measure.upscale.MeasuredTitanActivations)
        layer_of, ck_of = measured.titan_layers(layer_of, ck_of)
    V = m.vocab_size
    Ue = V / tp * h
    Uh = V / tp * h + h
    out = []
    for rank in range(pp):
        units: list[tuple[str, float, float, float]] = []
        dense_p = expert_p = 0.0
        n_layers = 0
        has_emb = any(c.embedding for c in layout[rank])
        has_loss = any(c.loss for c in layout[rank])
        for chunk in layout[rank]:
            if chunk.embedding:
                units.append(("emb", Ue, 0.0, 0.0, id(chunk)))
                dense_p += Ue
            for j, i in enumerate(chunk.layers):
                moe = m.is_moe_layer(i)
                lp = layer_params_for_key(key, tp, etp, ep, moe, "te")
                dense_p += lp.dense
                expert_p += lp.expert
                n_layers += 1
                full = layer_of[moe]
                if ac == "full" and method == "every_n":
                    ck = (j + 1) % (rnum or 1) == 0
                elif ac == "full":
                    ck = True
                else:
                    ck = ac == "op"
                kept = ck_of[moe].kept if ck else full.full
                rebuilt = full.full - kept if ck else 0.0
                units.append(("layer", lp.dense + lp.expert * S / Se, kept, rebuilt, id(chunk)))
        if has_loss:
            dense_p += Uh
        shard_p = dense_p / S + expert_p / Se
        # fp32 shards + each block's RoPE buffer: complex64 [s, d/2] (llama3 / deepseek_v3 ComplexRoPE), fp32
        # cos|sin [s, 2d] (qwen3 CosSinRoPE, models/common/rope.py)
        rope_b = (8.0 if m.name.startswith("qwen3") else 4.0) * seq * d_rope
        weights = 4.0 * shard_p + rope_b * n_layers
        optim = 8.0 * shard_p  # AdamW exp_avg + exp_avg_sq, fp32, sharded like the parameters
        static = weights + optim
        g_ = 2 if m.swiglu else 1
        layer_bwd = 2.0 * sb * ((g_ + 2) * m.ffn_hidden_size / tp + h)
        if pp > 1 and schedule in ("1f1b", "gpipe", "interleaved_1f1b"):
            # torch.distributed.pipelining + FSDP2, walked over the rank's schedule (memory_titan)
            a_sbh = 2.0 * sb * h / tp
            stages = []
            for chunk in layout[rank]:
                cu = [u for u in units if u[4] == id(chunk)]
                punits = [(k, U, 8.0 * sb if k == "emb" else kept, rb) for (k, U, kept, rb, _) in cu]
                extra = a_sbh
                lg = lk = lp = 0.0
                if chunk.loss:
                    hn, hin, lp = titan_head_bytes(m, seq=seq, mbs=mbs, tp=tp, cp=cp, compiled=compiled, impl=impl)
                    punits.append(("head", Uh, hn + hin, 0.0))
                    lk = 2.0 * sb * V / tp
                    lg = (2 if tp == 1 else 3) * 4.0 * sb * V / tp
                    extra = lp + lk
                stages.append(PPStage(units=tuple(punits), extra_kept=extra, first=chunk.embedding, last=chunk.loss,
                                      boundary=a_sbh, loss_grads=lg, logits_kept=lk, log_probs=lp))
            ops = torch_pp_ops(schedule, pp, vpp, nmb, rank)
            peak, parts = pp_rank_walk(static=static, stages=stages, ops=ops, S=S, nmb=nmb,
                                       held=reshard != "always", layer_bwd=layer_bwd)
            w = max(sum(1 for o in ops[:i + 1] if o[0] == "F") - sum(1 for o in ops[:i + 1] if o[0] == "B")
                    for i in range(len(ops)))
            out.append((_stage(rank, weights, parts["gradients"], optim, parts["activations"], parts["transient"],
                               w, int(dense_p + expert_p)), parts))
            continue
        # activations: every chunk-micro-batch in flight keeps its blocks; the loss's once
        units_in_flight = flight[rank] / max(1, len(layout[rank])) if pp > 1 else 1.0
        scaled = [(k, U, kept * units_in_flight, rb) for (k, U, kept, rb, _) in units]
        emb_ids = 8.0 * sb * units_in_flight if has_emb else 0.0
        head = None
        loss_grads = held = 0.0
        if has_loss:
            hn, hin, logp = titan_head_bytes(m, seq=seq, mbs=mbs, tp=tp, cp=cp, compiled=compiled, impl=impl)
            if measured is not None:
                hn, hin, logp = measured.titan_head(hn, hin, logp)
            head = (hn, hin, logp, Uh)
            loss_grads = (2 if tp == 1 else 3) * 4.0 * sb * V / tp
            if reshard != "always":
                held = 2.0 * Uh if S > 1 else 0.0
        pp_extra = 0.0
        if pp > 1 and reshard != "always":
            # unsharded bf16 parameters kept from the first forward + fp32 unsharded gradients
            # accumulated across micro-batches (no gradient sync until the last)
            pp_extra = 6.0 * (dense_p + expert_p) - (held if has_loss else 0.0)
        peak, parts = stage_walk(static=static, units=scaled, S=S, head=head, emb_ids=emb_ids,
                                 loss_grads=loss_grads, held_head=held, pp_extra=pp_extra, layer_bwd=layer_bwd)
        acts = parts["activations"]
        out.append((_stage(rank, weights, parts["gradients"], optim, acts, parts["transient"],
                           int(math.ceil(units_in_flight)), int(dense_p + expert_p)), parts))
    return tuple(out)
