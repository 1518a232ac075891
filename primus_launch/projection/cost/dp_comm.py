"""Data-parallel gradient reduction and parameter all-gather of one pipeline stage, after the pipeline.

Per stage: the gradient reduction (all-reduce, or reduce-scatter with the distributed optimizer;
fp32 when ``grad_reduce_in_fp32``) over the DP x CP group and, for experts, over expert-DP; the
distributed optimizer's bf16 parameter all-gather (1 byte per parameter with ``fp8_param_gather``, 2 for MXFP8 weights,
:func:`cost.fsdp.fsdp_bytes`; 2 for the layers kept in BF16 by ``--first-last-layers-bf16``, ``Plan.bf16_layer_ids``); with FSDP (``dp_sharding = "full"``) the HSDP replicas' all-reduce and,
under torch pipelining with the stage module as the FSDP root, the stage's whole reduce-scatter
(``REDUCE_GRAD``, exposed).  Overlap model: with ``overlap_grad_reduce`` the buckets
(``GRAD_BUCKET_PARAMS``, Megatron DDP's ``max(40M, 1M * dp)``) reduce during the backward of the LAST
micro-batch on that stage (all its chunks), so exposed = max(one bucket, comm - that window); with
``overlap_param_gather`` the all-gather hides behind the first micro-batch's forward likewise; the
hidden part holds NCCL's SMs (``cost/contention.py``).  With PP only that one micro-batch's window is
used (the earlier micro-batches' backward happen before the gradients are final).  The window is that
one micro-batch's backward whatever the number of micro-batches: Megatron runs micro-batches
``0 .. n-2`` under DDP's ``no_sync`` and only the last one's backward launches the bucket reductions
(``megatron/core/pipeline_parallel/schedules.py`` ``forward_backward_no_pipelining``; the pipelined
schedules' ``enable_grad_sync`` before the last backward of each chunk).

Each bucket is its own NCCL call (``distributed/param_and_grad_buffer.py``: one reduce-scatter /
all-reduce and one all-gather per bucket), so the reduction costs the whole transfer as one call plus
NCCL's own per-call latency for every further bucket (``cost/collectives.py`` ``nccl_call_latency``: base +
ring steps, whose inter-node part grows with the nodes of the DP group, ``(m-1) x 14 us`` per reduce-scatter
or all-gather); Megatron's bucket size ``max(40M, 1M x dp)`` keeps that latency a bounded share of a bucket
at large DP (``--ddp-bucket-size`` / ``--ddp-num-buckets`` replace it: :func:`bucket_params`).

TorchTitan plans: no Megatron buckets; the NCCL calls and the overlap granule are the rank's FSDP2 units
(:func:`titan_grad_units`: torchtitan 0.3.0 wraps every job in FSDP2, a replicate-only job too).

Interleaved 1F1B (Megatron, ``vpp > 1``, ``pp > 1``): megatron-core 0.16.1 ``pipeline_parallel/schedules.py``
``forward_backward_pipelining_with_interleaving`` with Megatron-LM's defaults ``align_grad_reduce`` /
``align_param_gather`` (``training.py`` sets ``config.grad_sync_func`` / ``config.param_sync_func`` to each model
chunk's ``start_grad_sync`` / ``start_param_sync``) launches the DP communication per model chunk:

- gradients: chunk ``j``'s whole reduce-scatter is launched after this rank's backward number ``k_j + r``
  (``backward_step_helper_postprocess``: ``k_j`` the rank's last backward of chunk ``j``, ``r`` the PP rank, so
  that all stages launch together), or after the last backward where ``k_j + r`` is past the end ("launch any
  remaining grad reductions"); no bucket of a chunk goes earlier (``no_sync`` is lifted only around the call).
  Chunk ``vpp - 1``'s reduction overlaps the backward of the later chunks; the last chunk's (chunk 0, whose
  last backward ends the rank's schedule) is exposed whole.  The chunks' calls queue on one communication stream:
  ``t_j = max(t_{j-1}, launch_j) + c_j``; exposed = ``t_0`` - the rank's end.
- parameters: chunks 0 and 1 are all-gathered at the schedule's start, chunk ``q >= 2`` before this rank's forward
  number ``f_{q-1} - r`` (``forward_step_helper_preprocess``: ``f_c`` the first forward of chunk ``c``); a chunk's
  forward waits for its gather bucket by bucket (``forward_pre_hook`` -> ``finish_param_sync``), so chunk ``q``
  delays the schedule by ``max(0, start_q + c_q / buckets_q - need_q, t_q - (need_q + f_q))`` (``need_q``: the
  start of its first forward, shifted by the delays before it; ``f_q``: that forward's seconds).
- each chunk is its own DDP module with its own buckets, so each pays its own NCCL calls.
With ``--no-align-grad-reduce`` (``config.grad_sync_func`` None) each chunk's buckets go out during its last backward
as their gradients are ready (``backward_step_helper_preprocess`` lifts ``no_sync`` before it), the last bucket at
its end; with ``--no-align-param-gather`` a chunk's first bucket is dispatched by its first forward's pre-hook
(``finish_param_sync``), the next ones one ahead.
The step times are this rank's compute in its own Megatron order (``pipeline/orders.py``), without the pipeline's
idle gaps (which would only widen the windows).  Per-chunk parameters are the stage's over ``vpp`` (the embedding /
output layer's extra on the first / last chunk is spread).  Not modelled: ``--overlap-param-gather-with-optimizer-step``
(reported by the Megatron adapter); other stages' end earlier than stage 0 (their slack) is not used.

Word-embedding gradient all-reduce (Megatron, PP > 1; :func:`embedding_grad_sync_s`): after the DP reduction,
``finalize_model_grads`` all-reduces the word-embedding weight's whole gradient over the embedding group, the first
and the last pipeline stage of each pipeline (megatron-core 0.16.1 / Megatron-LM 0d8e0714
``distributed/finalize_model_grads.py`` ``_allreduce_word_embedding_grads`` -> ``_allreduce_embedding_grad``:
``torch.distributed.all_reduce(grad, group=embd_group)``), when the weight is duplicated across stages:
``share_embeddings_and_output_weights or mtp_num_layers`` (``_get_shared_word_embedding_weight``; an MTP stage
builds its own embedding copy).  One blocking call, not bucketed, not overlapped:
``t = all_reduce(padded_vocab / TP x hidden x grad bytes)`` over 2 ranks ``tp cp dp (pp - 1)`` apart, on the
tails of stages 0 and ``pp - 1``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

from primus_launch.plan import Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost.fsdp import fsdp_bytes
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout, place
from primus_launch.projection.memory.params import StageParams, bf16_layer_params, stage_parameter_split
from primus_launch.projection.pipeline.orders import B, F, schedule_orders


def bucket_params(dp_size: int, plan: Plan | None = None, rank_params: float = 0.0) -> int:
    """Parameters per gradient bucket of Megatron DDP (Megatron-LM ``training.py`` ``get_model``, core_r0.16.0):
    ``--ddp-bucket-size`` as given; ``--ddp-num-buckets N``: the rank's parameters (all its model chunks,
    ``rank_params``) ``// N``; else ``max(40M, 1M x dp)`` (the default ``bucket_size`` grows with the DP group)."""
    t = plan.training if plan is not None else None
    if t is not None and t.ddp_bucket_size:
        return t.ddp_bucket_size
    if t is not None and t.ddp_num_buckets:
        return max(1, int(rank_params) // t.ddp_num_buckets)
    return max(cal.GRAD_BUCKET_PARAMS, 1_000_000 * dp_size)


def bucket_calls(plan: Plan, params: float, dp_size: int, rank_params: float | None = None) -> int:
    """NCCL calls one gradient reduction (and parameter all-gather) of ``params`` parameters takes: one per
    bucket with ``overlap_grad_reduce``, else one (Megatron DDP sets ``bucket_size = None`` without the
    overlap: one bucket per buffer); ``rank_params``: the rank's parameters (default ``params``)."""
    if params <= 0:
        return 0
    if not plan.training.overlap_grad_reduce:
        return 1
    per = bucket_params(dp_size, plan, params if rank_params is None else rank_params)
    # a bucket closes at the first whole parameter that brings it to >= bucket_size (param_and_grad_buffer.py), so
    # each of the k full buckets overshoots and a remainder of no more than k elements (what --ddp-num-buckets'
    # integer division leaves) rides in the last one instead of opening another; tensors are not walked one by one
    k, rest = divmod(int(params), per)
    return max(1, k + (rest > k))


def titan_grad_units(plan: Plan, rank: int) -> int:
    """FSDP2 units of a TorchTitan plan's PP rank ``rank``: its NCCL gradient calls per step and the granule its
    reduction overlaps the backward in.  torchtitan 0.3.0 has no DDP path: ``models/llama3/parallelize.py`` always
    runs ``apply_fsdp_to_decoder`` ("with shard_degree=1 it is a no-op for the all-gather but still installs the
    MixedPrecisionPolicy"), on the mesh ``["dp_replicate", "fsdp"]``, so a replicate-only job (``dp_sharding`` none)
    all-reduces each unit's gradients over the replicas in its post-backward, as HSDP does; ``distributed/fsdp.py``
    wraps the embedding, each block and ``[norm, lm_head]`` (the slots of the rank's chunks, MTP heads included).
    Not Megatron DDP's ``max(40M, 1M x dp)`` buckets; not torchtitan v0.2's ``replicate(bucket_cap_mb=100)``
    either (0.3.0 is the version modelled)."""
    return max(1, sum(c.slots for c in plan.chunk_layout()[rank]))


def _grad_calls(plan: Plan, params: float, dp_size: int, rank: int, rank_params: float) -> int:
    """NCCL gradient calls of ``params`` parameters: Megatron DDP's buckets (:func:`bucket_calls`), TorchTitan's
    FSDP2 units (:func:`titan_grad_units`)."""
    if params <= 0:
        return 0
    if plan.framework == "torchtitan":
        return titan_grad_units(plan, rank)
    return bucket_calls(plan, params, dp_size, rank_params)


_OP = {coll.reduce_scatter: "reduce_scatter", coll.all_gather: "all_gather", coll.all_reduce: "all_reduce"}


def _per_bucket(fn, nbytes: float, calls: int, pl, gpu: str) -> float:
    """Seconds of ``calls`` back-to-back NCCL calls moving ``nbytes`` together: the whole transfer priced as one
    call (its bandwidth, fitted fixed latency and ring steps), plus for each later call NCCL's own per-call
    latency (:func:`collectives.nccl_call_latency`: base + ring / tree steps; its launch hides behind the call
    before it on the communication stream)."""
    if calls <= 0 or nbytes <= 0 or pl.size <= 1:
        return 0.0
    return fn(float(nbytes), pl, gpu) + (calls - 1) * coll.nccl_call_latency(_OP[fn], pl.size, pl.nodes)


Counts = tuple[int, ...]
SyncPoints = tuple[tuple[Counts, ...], tuple[tuple[Counts, Counts], ...], tuple[tuple[int, Counts, Counts], ...]]


def _dot(counts: Sequence[int], secs: Sequence[float]) -> float:
    """``sum counts x secs`` with ``0 x inf = 0`` (the tuner's floors pass infinite windows)."""
    return sum(n * x for n, x in zip(counts, secs) if n)


def per_chunk_sync(plan: Plan) -> bool:
    """Whether Megatron's interleaved schedule syncs the plan's DP gradients and parameters per model chunk (module
    doc): a Megatron plan with ``vpp > 1`` and ``pp > 1`` under ``interleaved_1f1b``, its DP not FSDP."""
    p = plan.parallel
    return (p.dp_sharding != "full" and p.pp > 1 and p.vpp > 1 and plan.framework == "megatron"
            and plan.training.pipeline_schedule == "interleaved_1f1b")


def interleaved_sync_points(pp: int, vpp: int, m: int, group: int | None, rank: int) -> SyncPoints:
    """Where Megatron's interleaved schedule launches and needs rank ``rank``'s DP communication (module doc),
    as step counts of the rank's own order (``pipeline/orders.py``, equal to Megatron's): each count vector holds
    ``vpp`` forward counts per chunk then ``vpp`` backward counts per chunk.

    Returns ``(grad, param, free)``: ``grad`` per chunk in launch order the chunk id, then the steps that run after
    its reduce-scatter is launched; ``param`` per chunk ``q`` the steps before its all-gather is launched and the
    steps before its first forward; ``free`` (``--no-align-grad-reduce``: the buckets launch in the chunk's last
    backward as their gradients are ready) per chunk in the order of their last backwards the chunk id, the steps
    from that backward's start and the steps after its end.  Every launch lies in the first or the last cycle of micro-batch groups
    (warm-up: ``2 (pp - r - 1) + (vpp - 1) g`` forwards; cool-down as many backwards), so ``m`` is reduced by
    whole groups ``g`` to under ``4 g`` (the counts before / after those launches do not hold the middle groups)."""
    g = pp if group is None else group
    return _sync_points(pp, vpp, m - max(0, (m - 3 * g) // g) * g, group, rank)


@lru_cache(maxsize=4096)
def _sync_points(pp: int, vpp: int, m: int, group: int | None, rank: int) -> SyncPoints:
    """:func:`interleaved_sync_points` from the whole order of ``m`` micro-batches (cached)."""
    o = schedule_orders("interleaved_1f1b", pp, vpp, m, group)
    steps = [o.decode(a)[::2] for a in o.orders[rank]]          # (kind, chunk)
    prefix = [(0,) * (2 * vpp)]
    run = [0] * (2 * vpp)
    for kind, ch in steps:
        run[(0 if kind == F else vpp) + ch] += 1
        prefix.append(tuple(run))
    total = prefix[-1]
    fpos = [i for i, (kd, _) in enumerate(steps) if kd == F]
    bpos = [i for i, (kd, _) in enumerate(steps) if kd == B]
    last_b = {steps[i][1]: n for n, i in enumerate(bpos)}       # last backward number per chunk
    launch = sorted((min(last_b[ch] + rank, len(bpos) - 1), ch) for ch in range(vpp))
    grad = tuple((ch,) + tuple(t - b for t, b in zip(total, prefix[bpos[n] + 1])) for n, ch in launch)
    first_f: dict[int, int] = {}
    for n, i in enumerate(fpos):
        first_f.setdefault(steps[i][1], n)
    param = tuple((prefix[fpos[max(0, first_f[q - 1] - rank)]] if q >= 2 else prefix[0], prefix[fpos[first_f[q]]])
                  for q in range(vpp))
    after = lambda pos: tuple(t - b for t, b in zip(total, prefix[pos]))  # noqa: E731
    free = tuple((ch, after(bpos[n]), after(bpos[n] + 1)) for n, ch in sorted((n, ch) for ch, n in last_b.items()))
    return grad, param, free


@lru_cache(maxsize=4096)
def _sync_matrices(pp: int, vpp: int, m: int, group: int | None, rank: int) -> tuple[np.ndarray, ...]:
    """:func:`interleaved_sync_points` as count matrices (rows: aligned grad launches, free grad starts / ends,
    param launches / needs), for one product with the step seconds."""
    grad, param, free = interleaved_sync_points(pp, vpp, m, group, rank)
    mat = lambda rows: np.array(rows, dtype=float).reshape(len(rows), 2 * vpp)  # noqa: E731
    return (mat([pt[1:] for pt in grad]), mat([f[1] for f in free]), mat([f[2] for f in free]),
            mat([at for at, _ in param]), mat([need for _, need in param]))


def _seconds(mat: np.ndarray, secs: Sequence[float]) -> list[float]:
    """Each row of counts times the step seconds (``0 x inf = 0``: the tuner's floors pass infinite windows)."""
    if all(math.isfinite(x) for x in secs):
        return (mat @ np.asarray(secs, dtype=float)).tolist()
    return [_dot(row, secs) for row in mat.tolist()]


def interleaved_exposed(plan: Plan, rank: int, chunks: Sequence[tuple[float, float]], grad_chunk: float,
                        ag_chunk: float, grad_calls: int, ag_calls: int) -> tuple[float, float]:
    """Exposed (reduce-scatter, all-gather) seconds of PP rank ``rank`` under Megatron's interleaved schedule with
    aligned per-chunk launches (module doc); ``chunks``: per model chunk one micro-batch's (forward, backward)
    seconds; ``grad_chunk`` / ``ag_chunk``: one chunk's communication seconds, in ``*_calls`` buckets."""
    p = plan.parallel
    v = p.vpp
    secs = [f for f, _ in chunks] + [b for _, b in chunks]
    gm, fs, fe, pa, pn = _sync_matrices(p.pp, v, plan.num_microbatches, p.microbatch_group, rank)
    t_ = plan.training
    g = 0.0
    if grad_chunk > 0:
        t = float("-inf")
        if t_.align_grad_reduce:
            for after in _seconds(gm, secs):     # launch = end - the steps after it
                t = max(t, -after) + grad_chunk
        else:                                    # buckets during the chunk's last backward, the last at its end
            for start, end in zip(_seconds(fs, secs), _seconds(fe, secs)):
                t = max(max(t, -start) + grad_chunk, -end + grad_chunk / max(1, grad_calls))
        g = max(0.0, t)
    a = 0.0
    if ag_chunk > 0:
        t = float("-inf")
        delay = 0.0
        for q, (at, need) in enumerate(zip(_seconds(pa, secs), _seconds(pn, secs))):
            need_s = need + delay
            launch = at + delay if t_.align_param_gather else need_s
            start = max(t, launch)
            t = start + ag_chunk
            stall = max(0.0, start + ag_chunk / max(1, ag_calls) - need_s, t - (need_s + chunks[q][0]))
            delay += stall
            a += stall
    return g, a


def dp_grad_sync(plan: Plan, spec: GPUSpec, lay: Layout, sp_: StageParams, fwd_win: float,
                 bwd_win: float, rank: int = 0, chunks: Sequence[tuple[float, float]] | None = None) -> float:
    """Exposed seconds of one stage's gradient reduction plus parameter all-gather after the pipeline
    (module doc); ``sp_``: the parameters one GPU of the stage holds, ``fwd_win`` / ``bwd_win``: one
    micro-batch's forward / backward seconds summed over the stage's chunks; ``rank``: the PP rank and
    ``chunks`` its per-chunk (forward, backward) seconds (default: the windows split evenly), read by Megatron's
    interleaved schedule only."""
    gpu = spec.name
    p, t = plan.parallel, plan.training
    eb = fsdp_bytes(plan)
    param_elem, grad_elem, expert_grad_elem = eb.param, eb.grad, eb.expert_grad
    dp_size = lay.dp.size
    sharded = p.dp_sharding in ("optimizer", "optimizer_grads")
    fsdp_pp = p.dp_sharding == "full" and lay.dp_shard.size > 1 and p.pp > 1
    sync_mb = fsdp_pp and p.fsdp_pp_grad_sync == "microbatch"
    v = p.vpp if per_chunk_sync(plan) else 1
    sp_c = StageParams(sp_.dense // v, sp_.expert // v) if v > 1 else sp_   # one model chunk's (module doc)
    grad = ag = 0.0
    nd = ne = 0
    if p.dp_sharding == "full":
        if p.dp_replicate > 1:  # HSDP: all-reduce of the shard's grads over the replicas
            grad = coll.all_reduce(float(grad_elem * sp_.total / max(1, lay.dp_shard.size)), lay.dp_replicate, gpu)
        if fsdp_pp and not sync_mb:   # torch pipelining's REDUCE_GRAD: the stage's gradients at once, exposed
            grad += (coll.reduce_scatter(float(grad_elem * sp_.dense), lay.dp_shard, gpu)
                     + coll.reduce_scatter(expert_grad_elem * sp_.expert, lay.expert_dp, gpu))
    elif dp_size > 1 or lay.expert_dp.size > 1:
        gd, ge = float(grad_elem * sp_c.dense), float(grad_elem * sp_c.expert)
        nd = _grad_calls(plan, sp_c.dense, dp_size, rank, sp_.total)
        ne = _grad_calls(plan, sp_c.expert, dp_size, rank, sp_.total)
        if sharded:
            grad = (_per_bucket(coll.reduce_scatter, gd, nd, lay.dp, gpu)
                    + _per_bucket(coll.reduce_scatter, ge, ne, lay.expert_dp, gpu))
            pe_d = pe_e = param_elem
            if param_elem < 2.0 and plan.bf16_layer_ids():
                # the layers kept in BF16 (--first-last-layers-bf16) hold BF16 parameters (built outside
                # fp8_model_init): their share of the stage's gather moves 2 bytes per element
                b16 = bf16_layer_params(plan, rank)
                pe_d += (2.0 - param_elem) * (b16.dense / sp_.dense if sp_.dense else 0.0)
                pe_e += (2.0 - param_elem) * (b16.expert / sp_.expert if sp_.expert else 0.0)
            ag = (_per_bucket(coll.all_gather, pe_d * sp_c.dense, nd, lay.dp, gpu)
                  + _per_bucket(coll.all_gather, pe_e * sp_c.expert, ne, lay.expert_dp, gpu))
        else:
            grad = (_per_bucket(coll.all_reduce, gd, nd, lay.dp, gpu)
                    + _per_bucket(coll.all_reduce, ge, ne, lay.expert_dp, gpu))
    units, arch = spec.num_sms, spec.arch
    if v > 1:
        if chunks is None:
            chunks = [(fwd_win / v, bwd_win / v)] * v
        raw_g, raw_a = v * grad, v * ag
        eg, ea = interleaved_exposed(plan, rank, chunks, grad if t.overlap_grad_reduce else 0.0,
                                     ag if t.overlap_param_gather else 0.0, nd + ne, nd + ne)
        grad = eg if t.overlap_grad_reduce else raw_g
        ag = ea if t.overlap_param_gather else raw_a
        grad += con.displaced(raw_g - grad, con.NCCL_SMS, units, arch)
        ag += con.displaced(raw_a - ag, con.NCCL_SMS, units, arch)
        return grad + ag
    buckets = (titan_grad_units(plan, rank) if plan.framework == "torchtitan"
               else bucket_calls(plan, sp_.total, dp_size))
    if t.overlap_grad_reduce and grad > 0:
        raw = grad
        grad = max(grad / buckets, grad - bwd_win)
        grad += con.displaced(raw - grad, con.NCCL_SMS, units, arch)
    if t.overlap_param_gather and ag > 0:
        raw = ag
        ag = max(ag / buckets, ag - fwd_win)
        ag += con.displaced(raw - ag, con.NCCL_SMS, units, arch)
    return grad + ag


def embedding_grad_sync_s(plan: Plan, spec: GPUSpec, lay: Layout) -> float:
    """Seconds of Megatron's word-embedding gradient all-reduce between the first and the last pipeline stage
    (module doc: ``all_reduce(padded_vocab / TP x hidden x grad bytes)`` over 2 ranks), 0 where it does not run
    (not Megatron, PP 1, untied embeddings without MTP)."""
    m, p = plan.model, plan.parallel
    if plan.framework != "megatron" or p.pp <= 1:
        return 0.0
    if m.untie_embeddings_and_output_weights and not m.mtp_num_layers:
        return 0.0
    elems = m.padded_vocab_size(p.tp) // p.tp * m.hidden_size
    grp = place(2, lay.pp.stride * (p.pp - 1), lay.pp.gpus_per_node)
    return coll.all_reduce(float(elems * fsdp_bytes(plan).grad), grp, spec.name)


def held_parameters(plan: Plan, lay: Layout, sp_: StageParams) -> float:
    """Parameters the optimizer of one GPU of the stage updates: the dense ones over the FSDP shard
    group (the DP group with the distributed optimizer), the experts' over expert-DP (module doc); Megatron's
    partial distributed optimizer (``--num-distributed-optimizer-instances N``, ``dp_replicate``) over the
    intra-instance groups, ``dp x cp / N`` and ``expert-DP / N`` (megatron-core 0.16.1 ``distributed_data_parallel.py``
    ``intra_dp_cp_group`` / ``intra_expt_dp_group``)."""
    p = plan.parallel
    sharded = p.dp_sharding in ("optimizer", "optimizer_grads")
    shard_dense = lay.dp_shard.size if p.dp_sharding == "full" or sharded else 1  # HSDP / partial DistOpt: shard group
    shard_expert = lay.expert_dp.size if p.dp_sharding != "none" else 1
    if plan.framework == "torchtitan" and p.ep > 1:
        # torchtitan 0.3.0 has no DDP path: apply_fsdp_to_decoder shards the routed experts on the ``efsdp``
        # mesh (parallel_dims.py ``efsdp = dp_shard * cp * tp / ep``; dp_shard 1 with "none") of the mesh
        # ``["dp_replicate", "efsdp"]``, i.e. expert-DP over the replicas ("none": all DP ranks) -- the share
        # memory/estimate.py ``titan_args`` holds (``Se``)
        shard_expert = max(1, lay.expert_dp.size // max(1, plan.dp if p.dp_sharding == "none" else p.dp_replicate))
    if sharded and plan.framework == "megatron":
        shard_expert = max(1, shard_expert // max(1, p.dp_replicate))
    return sp_.dense / shard_dense + sp_.expert / shard_expert


def dp_sync_line(plan: Plan) -> str:
    """One line for the explanation table: the DP group's footprint, its buckets (NCCL calls) and NCCL's per-call
    latency each further bucket pays (module doc); '' where the plan has no Megatron DP gradient buckets."""
    from primus_launch.projection.hardware.placement import layout

    p = plan.parallel
    lay = layout(plan)
    if plan.framework != "megatron" or p.dp_sharding == "full" or lay.dp.size <= 1:
        return ""   # TorchTitan's DDP (torch's own bucket size) has no Megatron DDP buckets
    sharded = p.dp_sharding in ("optimizer", "optimizer_grads")
    op = "reduce_scatter" if sharded else "all_reduce"
    t = plan.training
    if t.ddp_bucket_size or t.ddp_num_buckets:
        per = bucket_params(lay.dp.size, plan, stage_parameter_split(plan)[0].total)
        rule = (f"--ddp-bucket-size {t.ddp_bucket_size}" if t.ddp_bucket_size
                else f"--ddp-num-buckets {t.ddp_num_buckets}: stage 0's parameters // {t.ddp_num_buckets}")
    else:
        per, rule = bucket_params(lay.dp.size), "Megatron DDP max(40M, 1M x dp)"
    lat = coll.nccl_call_latency(op, lay.dp.size, lay.dp.nodes)
    how = (f"{per / 1e6:.0f}M-parameter buckets ({rule}), one NCCL call each"
           if t.overlap_grad_reduce else "one bucket (no overlap_grad_reduce)")
    if per_chunk_sync(plan):
        # Megatron-LM training.py sets config.grad_sync_func only with overlap_grad_reduce and param_sync_func only
        # with overlap_param_gather: without them each chunk syncs after the pipeline (finalize_model_grads) /
        # gathers after the optimizer step
        rs = (("after the chunk's last backward, all stages together" if t.align_grad_reduce
               else "in the chunk's last backward") if t.overlap_grad_reduce else "after the pipeline")
        ag = (("ahead of its first forward" if t.align_param_gather else "from its first forward's pre-hook")
              if t.overlap_param_gather else "after the optimizer step")
        how += (f"; per model chunk (VP {p.vpp}, own buckets): {'reduction' if not sharded else 'reduce-scatter'} "
                + rs + ("" if not sharded else ", all-gather " + ag))
    return (f"{lay.dp.size} ranks over {lay.dp.nodes} domain(s), {lay.dp.per_node} per domain; {how}; "
            f"{'reduce-scatter + all-gather' if sharded else 'all-reduce'}: NCCL per-call latency "
            f"{1e6 * lat:.0f} us (base + ring / tree steps, NCCL tuning.cc; inter-node step "
            f"{1e6 * coll.NCCL_NET_STEP_S:.0f} us)")

