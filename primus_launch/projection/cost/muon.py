"""The Muon optimizer step of one GPU (Megatron ``--optimizer muon`` / ``dist_muon``), after the pipeline.

Which parameters a GPU updates: :mod:`memory.muon` (all of the stage's, or under ``dist_muon`` its
layer-wise share: whole tensors dealt by size over DP x CP, the experts' over expert-DP).  Sources:
megatron-core at Megatron-Bridge v0.4.2's pin (Megatron-LM 2edffadb52) ``optimizer/muon.py``,
``optimizer/layer_wise_optimizer.py``; Emerging-Optimizers v0.1.0 ``orthogonalized_optimizers/
orthogonalized_optimizer.py`` (``step``) and ``muon_utils.py`` (``newton_schulz``, ``newton_schulz_tp``).

Per owned matrix ``W`` (``r x c``), one after the other (the step loops over the parameters):

- Newton-Schulz: ``X`` is ``m x n`` with ``m = min(r, c)``, ``n = max(r, c)`` (``transpose = rows > cols``),
  and each of ``--muon-num-ns-steps`` quintic iterations runs three GEMMs: ``A = X X^T`` (``2 m^2 n``
  FLOPs), ``B = b A + c A A`` (``addmm``: ``2 m^3``), ``X = a X + B X`` (``addmm``: ``2 m^2 n``) --
  ``s (4 m^2 n + 2 m^3)`` FLOPs.  Under ``--muon-fp32-matmul-prec medium`` (default) ``X`` is cast to bf16
  (bf16 GEMMs); ``high`` is TF32 (the fp32 GEMM price, half the bf16 peak); ``highest`` true fp32 is priced as
  ``high`` (the adapter reports it).  Each GEMM through :func:`cost.compute.gemm_time`.
- TP (``--muon-tp-mode``, ``muon.py`` ``TensorParallelMuon.orthogonalize``): ``blockwise`` orthogonalises the
  local shard; ``duplicated`` all-gathers the fp32 shards along ``partition_dim`` (TP group; expert TP for
  experts) and every TP rank runs the whole matrix; ``distributed`` keeps the shard, ``m`` the unsharded dim,
  ``n`` the local one, and all-reduces ``A`` (``m x m``, bf16 under medium) every iteration.  A fused GQA
  ``linear_qkv`` is orthogonalised as its Q, K, V blocks under ``--muon-split-qkv`` (default).
- Elementwise HBM traffic per matrix element, counted from the step: the fp32 copy of the main gradient
  (``2 g``, as Adam's), decoupled weight decay and the update on the fp32 master (``p.mul_``, ``p.add_``: 16),
  the momentum ``lerp_`` (12), the Nesterov ``lerp`` (12), ``normalize`` (12), the bf16 cast in and fp32 cast
  out (6 + 6, medium only), the scale multiply (8), the bf16 parameter copy (6): ``2 g + 78`` bytes (``2 g +
  66`` without the casts), one kernel per operation (:func:`cost.compute.elementwise_time`, with its launch
  floor).
- Scalar parameters (``--muon-scalar-optimizer``): Adam's ``2 g + 2 x 4 + 2 x 4 + 2 x 4 + 2`` bytes per element
  (:mod:`cost.optimizer`), Lion's one moment less (``2 g + 18``).

A GPU's step is its dense owner's share plus its expert owner's share (the largest of each, an upper bound where
both groups have several owners, as the memory).  ``dist_muon`` then all-gathers the updated parameters in the
parameter dtype over DP x CP and over expert-DP (``allgather_params``: flat buffers, uneven sizes), exposed after
the step (``async_allgather`` = ``--overlap-param-gather`` moves it to the forward pre-hooks; priced exposed, the
adapter reports it).  Not priced: the grad-norm / clipping reductions (as for Adam), the per-iteration
``all_gather_object`` of ``sharded_state_dict`` (checkpointing only).
"""

from __future__ import annotations

from collections import Counter

from primus_launch.plan import Plan
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost.compute import elementwise_time, gemm_time
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout, place
from primus_launch.projection.memory.muon import Share, Tensor, ns_dims, ns_pieces, ns_shape, owner_shares
from primus_launch.projection.memory.params import arch_key

#: bytes per element of the bf16 cast in and the fp32 cast out around the Newton-Schulz iteration (``medium`` only:
#: Emerging-Optimizers v0.1.0 ``muon_utils.newton_schulz`` ``X.to(torch.bfloat16)`` / ``X.to(torch.float32)``)
_CAST_OPS = (6.0, 6.0)


def ns_flops(m: int, n: int, steps: int) -> float:
    """FLOPs of ``steps`` quintic Newton-Schulz iterations on an ``m x n`` iterate (module doc):
    ``steps (4 m^2 n + 2 m^3)`` with ``m <= n``."""
    m, n = sorted((m, n))
    return float(steps) * (4.0 * m * m * n + 2.0 * m ** 3)


def ns_iteration_seconds(m: int, n: int, gpu: str, prec: str) -> float:
    """Seconds of the three GEMMs of one Newton-Schulz iteration (Emerging-Optimizers v0.1.0 ``muon_utils.py``
    ``newton_schulz_step``) on an ``m x n`` iterate whitening its ``m`` rows (:func:`memory.muon.ns_dims`): ``X X^T``
    ``[m, n] x [n, m]``, ``A A`` ``[m, m] x [m, m]``, ``B X`` ``[m, m] x [m, n]``, bf16 under ``medium``, else the
    fp32 (TF32) price."""
    precision = "bf16" if prec == "medium" else "fp32"
    return gemm_time(m, m, n, gpu, precision) + gemm_time(m, m, m, gpu, precision) + gemm_time(m, n, m, gpu, precision)


def ns_seconds(m: int, n: int, steps: int, gpu: str, prec: str) -> float:
    """Seconds of the Newton-Schulz GEMMs of one ``m x n`` iterate (module doc), whitened along its smaller
    dimension as ``newton_schulz`` transposes: ``steps`` x :func:`ns_iteration_seconds`."""
    m, n = sorted((m, n))
    return steps * ns_iteration_seconds(m, n, gpu, prec)


def _matrix_ops(g: float, prec: str) -> tuple[float, ...]:
    """Bytes per element of each elementwise kernel of one matrix's step (module doc)."""
    ops = (2 * g, 16.0, 12.0, 12.0, 12.0, 8.0, 6.0)
    return ops + (_CAST_OPS if prec == "medium" else ())


def share_seconds(plan: Plan, spec: GPUSpec, lay: Layout, share: Share) -> float:
    """Seconds of one owner's step over ``share`` (module doc): per matrix piece the Newton-Schulz GEMMs and
    its TP collectives, the elementwise kernels of every matrix, the scalar optimizer's streaming."""
    t, p, m = plan.training, plan.parallel, plan.model
    g = 4.0  # the main gradient the optimizer reads: the Float16 wrapper's fp32 copy (or the fp32 buffer)
    prec, steps, mode = t.muon_fp32_matmul_prec, t.muon_num_ns_steps, t.muon_tp_mode
    gpu = spec.name
    out = 0.0
    shapes: Counter[tuple[Tensor, int]] = Counter()
    for tensor in share.tensors:
        if tensor.matrix:
            shapes[(tensor, p.expert_tp if tensor.expert else p.tp)] += 1
    ops = _matrix_ops(g, prec)
    for (tensor, size), count in shapes.items():
        each = sum(elementwise_time(b * tensor.numel, gpu) for b in ops)
        grp = place(size, 1, lay.tp.gpus_per_node) if tensor.expert else lay.tp
        for piece in ns_pieces(tensor, m, p.tp, t.muon_split_qkv):
            r, c = ns_shape(piece, size, mode)
            if mode == "distributed" and piece.part >= 0 and size > 1:
                # the unsharded dim is whitened, the partitioned one stays local; A all-reduced per iteration
                keep, local = ns_dims(piece, size, mode)
                per = (ns_iteration_seconds(keep, local, gpu, prec)
                       + coll.all_reduce(float((2 if prec == "medium" else 4) * keep * keep), grp, gpu))
                each += steps * per
                continue
            each += ns_seconds(r, c, steps, gpu, prec)
            if mode == "duplicated" and piece.part >= 0 and size > 1:
                each += coll.all_gather(4.0 * r * c, grp, gpu)
        out += count * each
    if share.scalar:
        per = 2 * g + (8.0 + 8.0 + 8.0 + 2.0 if t.muon_scalar_optimizer == "adam" else 8.0 + 8.0 + 2.0)
        out += elementwise_time(per * share.scalar, gpu)
    return out


def muon_step_s(plan: Plan, spec: GPUSpec, lay: Layout, rank: int) -> float:
    """Seconds of the Muon step of the worst GPU of PP rank ``rank`` (module doc): the largest dense owner's
    :func:`share_seconds` plus the largest expert owner's, and under ``dist_muon`` the parameter all-gathers."""
    p = plan.parallel
    key = arch_key(plan.model)
    layout = plan.chunk_layout()
    dense, expert = owner_shares(key, p.tp, p.expert_tp, p.ep, layout, rank, lay.dp.size, lay.expert_dp.size,
                                 plan.training.muon_layer_wise)
    step = max(share_seconds(plan, spec, lay, s) for s in dense) + max(share_seconds(plan, spec, lay, s) for s in expert)
    if plan.training.muon_layer_wise:
        w = 4 if plan.training.precision == "fp32" else 2
        for shares, grp in ((dense, lay.dp), (expert, lay.expert_dp)):
            total = sum(s.matrix + s.scalar for s in shares)
            if grp.size > 1 and total:
                step += coll.all_gather(float(w * total), grp, spec.name)
    return step
