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
from typing import Optional

from primus_launch.plan import Plan
from primus_launch.projection.hardware import GiB, get_gpu
from primus_launch.projection.memory_activations import (
    TE,
    ActivationImpl,
    LayerActivations,
    layer_activation_bytes,
    output_activation_bytes,
    rope_table_bytes,
)
from primus_launch.projection.params import (
    _arch,
    _layer,
    _stage_chunks,
    _stage_split,
    arch_key,
)
from primus_launch.projection.pipeline import activations_in_flight
from primus_launch.projection.result import MemoryReport, StageMemory

FRAMEWORK_RESERVE_BYTES = 2 * GiB
FRAGMENTATION = 0.05


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
def _in_flight(schedule: str, pp: int, vpp: int, m: int) -> tuple[float, ...]:
    """Chunk-micro-batches of activations alive at each rank's peak.

    Closed forms equal to :func:`pipeline.activations_in_flight`'s walk of the schedule order
    (``tests/test_memory.py`` checks them): 1F1B ``min(pp - r, m)``; interleaved (Megatron)
    ``min(2 (pp - r - 1) + (vpp - 1) pp + 1, m vpp)``; GPipe ``m vpp``.  Zero-bubble schedules
    are walked with ``release="W"``: the weight-gradient pass still needs the linears' inputs,
    so a micro-batch counts until its ``W`` (an upper bound).
    """
    if pp == 1:
        return (1.0,)
    if schedule == "1f1b":
        return tuple(float(min(pp - r, m)) for r in range(pp))
    if schedule == "interleaved_1f1b":
        return tuple(float(min(2 * (pp - r - 1) + (vpp - 1) * pp + 1, m * vpp)) for r in range(pp))
    if schedule == "gpipe":
        return tuple(float(m * vpp) for _ in range(pp))
    return tuple(activations_in_flight(schedule, pp, vpp, m, release="W"))


def _optimizer_bytes(precision: str, optimizer: str) -> int:
    mixed = precision != "fp32"
    states = 8 if optimizer == "adam" else 4
    return states + (4 if mixed else 0)


def stage_memory(plan: Plan, impl: ActivationImpl = TE, acts: Optional[MeasuredActivations] = None) -> list[StageMemory]:
    """Per PP rank, bytes on one GPU of that rank (see the module docstring)."""
    m, p, t = plan.model, plan.parallel, plan.training
    r = t.recompute
    src = plan.source.framework if plan.source else "megatron"
    key = arch_key(m)
    return [st.model_copy() for st in _stage_memory(
        key, p.tp, p.expert_tp, p.ep, p.pp, p.vpp, p.cp, p.sequence_parallel, p.dp_sharding, p.dp_replicate,
        tuple(plan.layers_per_stage()), t.pipeline_schedule, t.micro_batch_size, plan.num_microbatches,
        t.precision, t.optimizer, t.grad_reduce_in_fp32, r.granularity, r.method, r.num_layers,
        plan.dp, plan.expert_dp, src, impl, acts)]


@lru_cache(maxsize=65536)
def _stage_memory(key, tp, etp, ep, pp, vpp, cp, sp, dp_sharding, dp_replicate, lps, schedule, mbs, nmb,
                  precision, optimizer, grad_fp32, gran, method, rnum, dp, edp, framework,
                  impl: ActivationImpl, acts: Optional[MeasuredActivations] = None) -> tuple[StageMemory, ...]:
    m = _arch(key)
    zbv = schedule == "zbv"
    split = _stage_split(key, tp, etp, ep, pp, vpp, lps, zbv, "te")
    chunks = _stage_chunks(lps, pp, vpp, zbv)
    kd = m.moe_dense_first_layers
    a = 4 if precision == "fp32" else 2
    w = 4 if precision == "fp32" else 2
    g = 4 if (grad_fp32 or precision == "fp32") else 2
    opt = _optimizer_bytes(precision, optimizer)
    seq = m.seq_length
    kw = dict(seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, ep=ep, etp=etp, abytes=a, impl=impl)
    dense_act = layer_activation_bytes(m, moe=False, **kw)
    moe_act = layer_activation_bytes(m, moe=True, **kw) if m.is_moe else dense_act
    out_kept, out_transient = output_activation_bytes(m, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, abytes=a, impl=impl)
    if acts is not None:  # measured pieces (projection.measure)
        dense_act, moe_act, (out_kept, out_transient) = acts.dense, acts.moe or acts.dense, acts.output
    last_rank = 0 if (zbv and pp > 1 and vpp == 2) else pp - 1
    flight = _in_flight(schedule, pp, vpp, nmb)
    sb = seq // cp * mbs
    rope_tbl = rope_table_bytes(m, seq=seq, cp=cp)
    shard = max(1, dp // max(1, dp_replicate))

    def kept(la, n_in_group_input: bool) -> float:
        if n_in_group_input:
            return la.layer_input
        if gran == "selective":
            return la.full - la.core_attention
        return la.full

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
            if dp_sharding == "optimizer":
                optim = opt * (sp_.dense / dp + sp_.expert / edp)
            else:
                optim = opt * sp_.total
        # ---- activations per micro-batch, per chunk ----
        chunk_bytes = []
        recompute_extra = 0.0  # full recompute: a group's activations rebuilt during its backward
        bwd = 0.0
        for c, (c0, n) in enumerate(chunks[rank]):
            nm = max(0, c0 + n - max(c0, kd)) if m.is_moe else 0  # MoE layers (they follow the dense)
            nd = n - nm
            if gran == "full":
                N = n if rnum is None and method == "block" else (rnum or 1)
                if method == "uniform":
                    ng = -(-n // N) if n else 0
                    total = ng * dense_act.layer_input
                    if nd == 0 or nm == 0:
                        grp = min(N, n) * (moe_act.full if nd == 0 else dense_act.full)
                    else:
                        grp = max(sum(moe_act.full if j >= nd else dense_act.full
                                      for j in range(g0, min(g0 + N, n))) for g0 in range(0, n, N))
                    if n:
                        recompute_extra = max(recompute_extra, grp + dense_act.layer_input)
                else:
                    N = min(N, n)
                    rest_d, rest_m = max(0, nd - N), nm - max(0, N - nd)
                    rest_full = rest_d * dense_act.full + rest_m * moe_act.full
                    total = N * dense_act.layer_input + rest_full
                    if N:
                        # the block is recomputed after the later layers' backward freed theirs
                        biggest = moe_act.full if N > nd else dense_act.full
                        recompute_extra = max(recompute_extra,
                                              max(0.0, biggest - rest_full) + dense_act.layer_input)
            elif gran == "selective":
                total = (nd * (dense_act.full - dense_act.core_attention)
                         + nm * (moe_act.full - moe_act.core_attention))
            else:
                total = nd * dense_act.full + nm * moe_act.full
            if nd:
                bwd = max(bwd, dense_act.backward_temp)
            if nm:
                bwd = max(bwd, moe_act.backward_temp)
            total += rope_tbl
            if rank == 0 and c == 0:
                total += 8.0 * sb  # token ids kept by the embedding backward
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
        if rank == 0:
            # dense embedding weight-gradient, after one micro-batch's backward freed its chunk
            freed = chunk_bytes[0] + (out_kept if rank == last_rank else 0.0)
            trans.append(w * m.padded_vocab_size(tp) / tp * m.hidden_size - freed)
        if dp_sharding == "full":
            layer = _layer(key, tp, etp, ep, m.is_moe, "te")
            trans.append(2 * 2 * layer.total + (4 if grad_fp32 else 2) * layer.total + layer_bwd)
        if m.is_moe and any(c0 + n > kd for c0, n in chunks[rank]):
            trans.append(2.0 * a * sb * m.moe_router_topk * m.hidden_size + layer_bwd)
        transient = max(0.0, max(trans))
        reserve = FRAMEWORK_RESERVE_BYTES + FRAGMENTATION * (activations + transient)
        total = weights + grads + optim + activations + transient + reserve
        out.append(StageMemory(
            stage=rank, parameters_bytes=int(weights), gradients_bytes=int(grads), optimizer_bytes=int(optim),
            activations_bytes=int(activations), transient_bytes=int(transient), reserve_bytes=int(reserve),
            total_bytes=int(total), microbatches_in_flight=int(math.ceil(units / max(1, len(chunks[rank])))),
            num_parameters=sp_.total))
    return tuple(out)


def _ep_routing(plan: Plan) -> bool:
    return plan.model.is_moe and plan.parallel.ep > 1


def estimate_memory(plan: Plan, margin: float = 0.05, impl: ActivationImpl = TE,
                    acts: Optional[MeasuredActivations] = None) -> MemoryReport:
    """Peak bytes per GPU, the worst stage's breakdown and whether it fits ``capacity*(1-margin)``;
    ``acts``: measured per-layer activations instead of the model's."""
    stages = stage_memory(plan, impl, acts)
    worst = max(stages, key=lambda s: s.total_bytes)
    cap = int(get_gpu(plan.cluster.gpu).hbm_bytes)
    framework = plan.source.framework if plan.source else "megatron"
    what = {"megatron": "megatron-core + Transformer Engine (flash attention, fused SwiGLU/RoPE, no dropout)",
            "torchtitan": "torchtitan on GPU (flash/flex attention without an s x s matrix, bf16 norm inputs, "
                          "no dropout)"}.get(framework, framework)
    first = acts.note if acts is not None else f"activations assume {what}"
    notes = [
        f"{first}; framework reserve {FRAMEWORK_RESERVE_BYTES / GiB:.0f} GiB + "
        f"{FRAGMENTATION:.0%} of activations for allocator fragmentation",
    ]
    if plan.training.precision == "fp8":
        notes.append("fp8: weights and activations counted in bf16 (TE keeps bf16 weights; it keeps some "
                     "linear inputs in fp8, so activations are an upper bound)")
    if _ep_routing(plan):
        notes.append("MoE: each EP rank assumed to receive the average sb*topk routed tokens (balanced routing)")
    return MemoryReport(
        peak_bytes_per_gpu=worst.total_bytes, capacity_bytes=cap, margin_fraction=margin,
        fits=worst.total_bytes <= cap * (1 - margin), worst_stage=worst.stage,
        breakdown={"parameters": worst.parameters_bytes, "gradients": worst.gradients_bytes,
                   "optimizer": worst.optimizer_bytes, "activations": worst.activations_bytes,
                   "transient": worst.transient_bytes, "reserve": worst.reserve_bytes},
        stages=stages, notes=notes)
