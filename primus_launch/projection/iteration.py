"""Assembly of one training iteration from per-layer compute times: the model shared by the dry-run
(roofline layer times) and the hybrid projection (measured layer times).

Input: :class:`LayerTimes`, the COMPUTE time of one micro-batch on one GPU per layer kind with the
plan's TP/CP/EP sharding applied and no communication. :func:`assemble` adds, per micro-batch:

- recomputation: ``full`` re-runs a layer's forward (its TP/EP communication included) in its
  backward for every layer of a chunk (``uniform``) or the first ``num_layers`` of each chunk
  (``block``); ``selective`` re-runs the core attention forward (Korthikanti et al. 2022,
  arXiv 2205.05198 sec. 4.2);
- recomputation: ``full`` re-runs a layer's forward (its TP/EP communication included) in its
  backward for every layer of a chunk (``uniform``), the first ``num_layers`` of each chunk
  (``block``) or every ``num_layers``-th (``every_n``); ``selective`` re-runs the forward of the
  ``recompute.modules`` (core attention, MLP, MoE experts, MoE activation, norms, MLA up-projections,
  shared experts: their per-layer forward times from the kernel list) (Korthikanti et al. 2022,
  arXiv 2205.05198 sec. 4.2); ``op`` (TorchTitan per-op SAC) re-runs the non-matmul ops and every
  second ``aten.mm`` of each block (attention outputs are saved; ``dryrun._op_sac_recompute_fwd``);
- TP: with sequence parallel 2 all-gathers + 2 reduce-scatters of the [T, h] activations per layer
  in forward and as many in backward, + 2 all-gathers with Megatron (it saves the sharded
  column-parallel input and all-gathers it again for the weight gradient), else 2 all-reduces each way (Megatron ``ColumnParallel`` / ``RowParallelLinear``);
  per micro-batch, with Megatron, the embedding's, the output layer's and the vocab-parallel
  cross-entropy's three fp32 all-reduces (every call listed in :mod:`cost.layer_collectives`);
  with an FP8 recipe Megatron + TE all-gathers quantised data (1 B per element per-tensor; MXFP8 the
  usages it needs), reduce-scatters stay bf16 (:func:`_sp_collectives`).
  ``tp_comm_overlap`` pipelines them with the layer's GEMMs in chunks (Megatron: TE userbuffers;
  TorchTitan: async TP): exposed = max(comm / tp, comm - e * GEMM time), ``e`` = 1 for TE
  userbuffers (no figure of its overlap loss exists; the SMs its kernels hold slow the GEMMs,
  ``cost/contention.py``) and the calibrated ``ASYNC_TP_OVERLAP`` for TorchTitan's async TP; without
  it, Megatron still hides the column-parallel linears' backward re-all-gather behind their dgrad
  GEMMs and their dgrad reduce-scatter (all-reduce) behind their wgrad GEMMs (:func:`_tp_exposed`);
- CP: ``p2p`` ring attention sends K,V around the CP ring, (cp-1) steps, in forward and K,V plus
  their gradients in backward, overlapped with the attention core: exposed = max(0, comm -
  attention); ``a2a`` (Ulysses): all-to-alls of Q, K, V before and O after the attention (and their
  gradients), not overlapped; ``allgather``: TE's all-gathers of K and V in forward, their
  re-all-gather and the dK, dV reduce-scatters in backward, not overlapped (call by call in
  :mod:`cost.layer_collectives`); ``a2a+p2p`` priced as ``p2p`` (a warning says so);
  TorchTitan (PyTorch ring attention, ``cost/context_parallel.py``): the K,V all-gather (rotate
  method ``allgather``) or per-step rotation (``p2p``) in forward and again in backward, plus the
  per-step rotation of the fp32 dK,dV in backward, overlapped with the attention core like ``p2p``;
- EP: every collective the plan's Megatron token dispatcher issues in forward and backward (with
  ``full`` recompute the forward ones run again), placed on the scale-up domains by the layout
  (:mod:`moe_dispatch`, read from megatron-core's ``token_dispatcher.py``):
  ``moe_token_dispatcher="alltoall"``: all-to-alls of the T*k routed token copies and their probs
  over EP and back (+ the token-count all-gather; + expert-TP all-gather / reduce-scatter);
  ``"allgather"``: all-gathers of routing map, probs and tokens over TP x EP, reduce-scatter back,
  mirrored in backward; ``"deepep"`` / ``"hybridep"``: one copy per destination rank / RDMA
  domain (:func:`collectives.deepep_dispatch`, efficiencies fitted to DeepEP's and HybridEP's
  figures, routing fan-out from :mod:`moe_routing`).  ``moe_shared_expert_overlap`` hides the
  dispatch behind the shared expert; ``overlap_moe_expert_parallel_comm`` (1F1B all-to-all overlap)
  runs a forward's and another micro-batch's backward of each MoE layer on two streams, node by node
  as Megatron's combined 1F1B orders them (:mod:`cost.ep_overlap`: the exposed time of the walk, its
  compute nodes slowed by the dispatcher's SMs while it runs beside them, :mod:`cost.contention`;
  one walk per combined step of one model chunk's layers, :func:`moe_layers_per_step`) on
  the passes the schedule can pair, the whole comm on the warm-up / cool-down passes it cannot
  (:func:`ep_unpaired_fraction`); with PP each paired step also waits for half of its neighbours'
  exposed activation sends (:func:`combined_step_p2p`), and on Hopper the CUDA_DEVICE_MAX_CONNECTIONS
  > 1 the overlap needs costs TP its async backward overlap (:func:`cdmc_unordered`); TorchTitan:
  exposed = max(0, comm - the other pass's compute);
- activation offloading (``offload.activation_layers``, the first layers of each chunk): each
  offloaded layer's activations go to host memory in forward and come back in backward over
  ``GPUSpec.host_link_bw``, hidden behind the next layer's compute where it is long enough;
- FSDP (``dp_sharding="full"``): per layer, the parameter all-gather (bf16; FP8 with
  ``fp8_param_gather``) in forward and again in backward (unless ``fsdp_reshard_after_forward`` is
  ``never``) and the gradient reduce-scatter in backward, prefetched: the exposed part is
  max(0, comm - that layer's compute) per pass.  With PP (torch pipelining: TorchTitan, AutoModel)
  the parameters are gathered once per schedule (not resharded after forward by default) and the
  stage's gradients are reduce-scattered at once in the schedule's ``REDUCE_GRAD`` action, joined
  to the compute stream: exposed after the pipeline -- where the stage module is the FSDP root
  (``fsdp_pp_grad_sync = "schedule"``, TorchTitan).  Where it is not (``"microbatch"``: NeMo
  AutoModel's MoE parallelizer), FSDP2's defaults run every micro-batch: per layer as above
  (gathered in each forward after the previous backward resharded, reduce-scattered in each
  backward), plus the chunk-end exposure of :func:`fsdp_microbatch_edges`.  Per MoE layer, the EP
  dispatcher's inter-node phases share the NIC with the FSDP collectives crossing nodes
  (:func:`fsdp_ep_nic_sharing`).

Per (stage, chunk) the layers of that chunk (:mod:`primus_launch.plan.layout`: Megatron's layout
string and offsets, account-for-embedding/loss, uneven first/last stage, ZB-V's "V") sum into a
:class:`pipeline.ChunkCost`; the chunk holding the embedding adds it, the one holding the loss (and
each MTP layer) the final norm, output layer and loss.
:func:`pipeline.simulate` runs the plan's schedule with the activation send time as P2P.

After the pipeline, per stage: DP gradient reduction (all-reduce, or reduce-scatter with the
distributed optimizer; fp32 when ``grad_reduce_in_fp32``) over the DP x CP group and, for experts,
over expert-DP; the distributed optimizer's bf16 parameter all-gather. Overlap model: with
``overlap_grad_reduce`` the buckets (``GRAD_BUCKET_PARAMS``) reduce during the backward of the LAST
micro-batch on that stage (all its chunks), so exposed = max(one bucket, comm - that window); with
``overlap_param_gather`` the all-gather hides behind the first micro-batch's forward likewise.
With PP only that one micro-batch's window is used (the earlier micro-batches' backward happen
before the gradients are final). Then the optimizer step: memory-bound Adam streaming
``ADAM_BYTES_PER_PARAM`` bytes per parameter held (after distributed-optimizer / FSDP sharding) at
``hbm_bw * HBM_BW_EFFICIENCY`` (bytes per parameter from the state dtypes of a precision-aware
optimizer: grad 2x read + master r/w + two moments r/w + bf16 model write; a fraction
``offload.optimizer_fraction`` runs on the host CPU at ``CPU_ADAM_BYTES_S`` with its gradients and
parameters crossing the host link).  The distributed optimizer's (or ZeRO-2 / Megatron-FSDP
``optimizer_grads``') all-gather moves 1 byte per parameter with ``fp8_param_gather``.
Iteration = pipeline makespan + max over stages of (exposed DP + optimizer).

Breakdown (exposed seconds, summing to the iteration time), on the busiest stage ``c``:
compute = its chunk costs without the communication parts; tp/cp/ep_comm = the exposed parts in
them; dp_comm = FSDP exposed + post-pipeline DP; pp_comm = the sends on the critical path (the first
forward wave's pp-1 links per chunk and the last backward wave's, 2 (pp-1) vpp sends, at most the
idle time of stage c); bubble = makespan - busy_c - pp_comm; optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost import layer_collectives as lc
from primus_launch.projection.cost.flops import model_flops_per_iteration
from primus_launch.projection.cost.moe_dispatch import dispatcher_times
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.hardware.placement import layout
from primus_launch.projection.layer_times import LayerTimes, PassTimes
from primus_launch.projection.memory.estimate import estimate_memory
from primus_launch.projection.memory.params import layer_parameter_counts, stage_parameter_split
from primus_launch.projection.pipeline.simulate import ChunkCost, simulate
from primus_launch.projection.result import ProjectionResult, TimelineEvent


@dataclass
class _Parts:
    """Per-micro-batch seconds of one chunk, split by kind (for the breakdown)."""

    f: float = 0.0
    bi: float = 0.0
    bw: float = 0.0
    tp: float = 0.0
    cp: float = 0.0
    ep: float = 0.0
    dp: float = 0.0
    pp: float = 0.0

    def cost(self) -> ChunkCost:
        return ChunkCost(self.f, self.bi, self.bw)


def _tokens(plan: Plan) -> int:
    return plan.training.micro_batch_size * plan.model.seq_length // plan.parallel.cp


def _sp_collectives(plan: Plan, gpu: str, lay) -> tuple[float, float, float, float]:
    """Seconds of one sequence-parallel all-gather of a layer GEMM's input (forward), of a
    row-parallel output gradient (backward), of Megatron's backward re-gather of the input (0 with
    TorchTitan, whose DTensor SP saves the gathered input), and of one reduce-scatter (always bf16);
    the gathered sizes, quantised under Megatron + TE FP8 recipes, from
    :func:`cost.layer_collectives.sp_gather_bytes`."""
    g_in, g_dy, g_re = lc.sp_gather_bytes(plan)
    rs = coll.reduce_scatter(float(_tokens(plan) * plan.model.hidden_size * 2), lay.tp, gpu)
    regather = coll.all_gather(g_re, lay.tp, gpu) if plan.framework == "megatron" else 0.0
    return coll.all_gather(g_in, lay.tp, gpu), coll.all_gather(g_dy, lay.tp, gpu), regather, rs


def _tp_times(plan: Plan, gpu: str, lay, moe: bool = False) -> tuple[float, float]:
    """Raw TP seconds of one layer (forward, backward), before any overlap (module doc); ``moe``:
    of a MoE layer (its own list where it has one, ``where="moe_layer"``)."""
    p = plan.parallel
    if p.tp <= 1:
        return 0.0, 0.0
    # the layer's calls (cost/layer_collectives.py): with SP 2 AG + 2 RS forward, backward 2 AG +
    # 2 RS and, with Megatron, the column-parallel linears' 2 re-all-gathers of their saved
    # sequence-sharded input (TorchTitan's DTensor SP saves the gathered input, and all-reduces its
    # replicated parameters' partial gradients); else 2 + 2 AR
    return lc.priced(lc.layer_calls(plan, moe), gpu, {"tp": lay.tp})


def _tp_exposed(plan: Plan, raw: tuple[float, float], lt: "LayerTimes", gpu: str = "", lay=None) -> tuple[float, float]:
    """TP seconds of one layer left exposed (module doc).

    ``tp_comm_overlap`` pipelines them with the layer's GEMMs (TE userbuffers; TorchTitan async TP).
    Without it, Megatron's column-parallel linears (TE ``_LayerNormLinear`` / ``_Linear`` backward,
    Megatron ``LinearWithGradAccumulationAndAsyncCommunication``) still run two of their backward
    collectives asynchronously: the sequence-parallel re-all-gather of the input behind the dgrad GEMM
    and the dgrad reduce-scatter (all-reduce without SP) behind the wgrad GEMM; the row-parallel
    linears' all-gather of the output gradient and every forward collective stay exposed.  The hidden
    part holds NCCL's SMs (``cost/contention.py``)."""
    t, p = plan.training, plan.parallel
    tp = p.tp
    if tp <= 1:
        return raw
    f, b = raw
    if t.tp_comm_overlap:
        gemm = lt.part("dense", "gemm")
        e = cal.ASYNC_TP_OVERLAP if plan.framework == "torchtitan" else 1.0
        return (max(f / tp, f - e * gemm.fwd_s), max(b / tp, b - e * (gemm.bwd_input_s + gemm.bwd_weight_s)))
    if plan.framework != "megatron" or not t.tp_async_backward or not lt.parts or gpu == "" or lay is None:
        return raw
    if cdmc_unordered(plan, gpu):
        return raw
    col = lt.part("dense", "tp_col")
    if p.sequence_parallel:
        _, ag_dy, regather, rs = _sp_collectives(plan, gpu, lay)
        exposed_b = 2 * ag_dy + max(0.0, 2 * regather - col.bwd_input_s) + max(0.0, 2 * rs - col.bwd_weight_s)
    else:
        exposed_b = max(0.0, b - col.bwd_weight_s)
    exposed_b += con.displaced(b - exposed_b, con.NCCL_SMS, get_gpu(gpu).num_sms, get_gpu(gpu).arch)
    return f, min(b, exposed_b)


def cdmc_unordered(plan: Plan, gpu: str) -> bool:
    """Whether the column-parallel linears' async backward collectives lose their head start over
    the GEMMs they should overlap: Megatron's 1F1B all-to-all overlap needs
    ``CUDA_DEVICE_MAX_CONNECTIONS`` > 1 (``megatron/core/transformer/moe/README.md``, "Requirements for
    EP A2A Overlap"), and before Blackwell that forfeits the launch-order guarantee TP's overlap
    relies on: Megatron-LM ``megatron/training/arguments.py`` (dev @d48bd6be, ``validate_args``) asks
    for ``CUDA_DEVICE_MAX_CONNECTIONS=1`` with TP/CP on devices of arch < 10 and, with
    ``--overlap-moe-expert-parallel-comm``, only warns "try not to use tensor model parallelism ...";
    with several hardware queues a GEMM launched after the NCCL kernel can take every SM first and
    the collective then runs after it (Transformer Engine's maintainer on pytorch/pytorch#143890:
    "GEMM might monopolize SMs and prevent a small NCCL kernel from starting").  The requirement
    "no longer exists since the Blackwell architecture" (same ``arguments.py`` comment)."""
    t = plan.training
    if plan.framework != "megatron" or not t.overlap_moe_expert_parallel_comm or plan.parallel.tp <= 1:
        return False
    return get_gpu(gpu).arch in ("hopper", "ampere")


def _cp_times(plan: Plan, gpu: str, lay) -> tuple[float, float]:
    """Raw context-parallel seconds of one layer (forward, backward) by ``cp_comm_type``."""
    p = plan.parallel
    if p.cp <= 1:
        return 0.0, 0.0
    m = plan.model
    T = _tokens(plan)
    if m.multi_latent_attention:
        kv_elems = m.num_attention_heads // p.tp * (m.qk_head_dim + m.qk_pos_emb_head_dim + m.v_head_dim)
        q_elems = o_elems = m.num_attention_heads // p.tp * m.v_head_dim
    else:
        kv_elems = 2 * max(1, m.kv_heads // p.tp) * m.kv_channels
        q_elems = o_elems = max(1, m.num_attention_heads // p.tp) * m.kv_channels
    if p.cp_comm_type == "a2a":
        one = (coll.all_to_all(float(T * (q_elems + kv_elems) * 2), lay.cp, gpu)
               + coll.all_to_all(float(T * o_elems * 2), lay.cp, gpu))
        return one, one
    step = coll.p2p(float(T * kv_elems * 2), lay.cp.nodes > 1, gpu)
    if plan.framework == "torchtitan":
        # PyTorch ring attention (cost/context_parallel.py): K,V rotate by one all-gather (rotate
        # method allgather) or per step (alltoall), in forward and again in backward; the fp32 dK,dV
        # rotate per step (_RotateMethod.ALL_TO_ALL) in backward
        kv = (coll.all_gather(float(T * p.cp * kv_elems * 2), lay.cp, gpu) if p.cp_comm_type == "allgather"
              else (p.cp - 1) * step)
        return kv, kv + (p.cp - 1) * coll.p2p(float(T * kv_elems * 4), lay.cp.nodes > 1, gpu)
    if p.cp_comm_type == "allgather":
        # TE's AttnFuncWithCPAndKVAllGather: K and V all-gathered apart in forward, gathered again
        # in backward, dK and dV reduce-scattered (cost/layer_collectives.py)
        return lc.priced(lc.cp_calls(plan), gpu, {"cp": lay.cp})
    return (p.cp - 1) * step, (p.cp - 1) * 2 * step


def _ep_times(plan: Plan, gpu: str, lay) -> tuple[float, float]:
    """Raw EP seconds of one MoE layer (forward, backward): every collective the plan's Megatron
    token dispatcher issues (:mod:`primus_launch.projection.cost.moe_dispatch`)."""
    return dispatcher_times(plan, gpu, lay.ep)


def _ep_walked(plan: Plan, lt: LayerTimes) -> bool:
    """Whether the EP exposure comes from the combined-1F1B two-stream walk (Megatron's
    ``--overlap-moe-expert-parallel-comm``), which prices SM contention inside it."""
    return (plan.framework == "megatron" and plan.training.overlap_moe_expert_parallel_comm
            and lt.moe_layer is not None)


def _ep_exposed(plan: Plan, raw: tuple[float, float], lt: LayerTimes) -> tuple[float, float]:
    """EP seconds left after shared-expert and 1F1B all-to-all overlap (module doc)."""
    t = plan.training
    f, b = raw
    if t.moe_shared_expert_overlap:
        sh = lt.part("moe", "shared_experts")
        f = max(0.0, f - sh.fwd_s)
        b = max(0.0, b - sh.bwd_input_s - sh.bwd_weight_s)
    if t.overlap_moe_expert_parallel_comm and lt.moe_layer is not None:
        mo = lt.moe_layer
        u = ep_unpaired_fraction(plan)
        if _ep_walked(plan, lt):
            # the two streams of Megatron's combined 1F1B, node by node (cost/ep_overlap.py); the
            # dispatcher's SMs slow the compute nodes it overlaps (cost/contention.py)
            from primus_launch.projection.cost.ep_overlap import exposed_per_layer, exposed_per_step

            spec = get_gpu(plan.cluster.gpu)
            c = con.lost_fraction(con.ep_sms(t.moe_token_dispatcher), spec.num_sms, spec.arch)
            pair = _moe_layer_pair(plan, lt, f, b)
            n = moe_layers_per_step(plan)
            paired = max(exposed_per_layer(pair, c=c), exposed_per_step(pair, n, c) / n)
            share = f / (f + b) if f + b > 0 else 0.5
            return u * f + (1 - u) * paired * share, u * b + (1 - u) * paired * (1 - share)
        # delay_wgrad_compute moves the weight gradients out of the backward, where they cover the
        # backward's dispatch / combine as well
        cover_b = mo.fwd_s + (mo.bwd_weight_s if t.delay_wgrad_compute else 0.0)
        f = u * f + (1 - u) * max(0.0, f - (mo.bwd_input_s + mo.bwd_weight_s))
        b = u * b + (1 - u) * max(0.0, b - cover_b)
    return f, b


# where megatron's fine-grained schedule cuts an MoE layer (models/gpt/fine_grained_callables.py): the
# attn node runs attention, the pre-MLP norm, the router, the dispatch preprocess and the shared
# experts (unless --moe-shared-expert-overlap); the mlp node the routed experts and the combine's
# local part
_ATTN_NODE = ("scope:attn", "scope:moe_router", "scope:moe_preprocess", "scope:mlp")


def _moe_layer_pair(plan: Plan, lt: LayerTimes, f: float, b: float):
    """One MoE layer as :class:`~primus_launch.projection.cost.ep_overlap.LayerPair`: its forward,
    input-gradient and weight-gradient seconds split into the attn and mlp nodes by the roofline's
    scopes (measured layers: the roofline's split scaled to the measured layer), the dispatcher's
    forward (backward) seconds ``f`` (``b``) halved into dispatch and combine (the same tokens go
    out and come back)."""
    from primus_launch.projection.cost.ep_overlap import LayerPair

    mo = lt.moe_layer
    af, ai, aw = (getattr(mo, k) * _attn_share(plan, lt, k) for k in ("fwd_s", "bwd_input_s", "bwd_weight_s"))
    mf, mi, mw = mo.fwd_s - af, mo.bwd_input_s - ai, mo.bwd_weight_s - aw
    if not plan.training.delay_wgrad_compute:  # each node's backward computes its weight gradients
        ai, mi, aw, mw = ai + aw, mi + mw, 0.0, 0.0
    return LayerPair(attn_f=af, mlp_f=mf, attn_b=ai, mlp_b=mi, attn_w=aw, mlp_w=mw,
                     dispatch_f=f / 2, combine_f=f / 2, dispatch_b=b / 2, combine_b=b / 2)


def moe_layers_per_step(plan: Plan) -> int:
    """MoE layers one combined 1F1B step pairs (:func:`cost.ep_overlap.exposed_per_step`): those of
    one model chunk, the mean over the busiest rank's chunks (at least 1)."""
    m = plan.model
    rows = plan.chunk_layout()
    best = max(rows, key=lambda r: sum(len(c.layers) for c in r))
    n = sum(sum(1 for i in c.layers if m.is_moe_layer(i)) for c in best)
    return max(1, round(n / max(1, len(best))))


def combined_step_p2p(plan: Plan, lt: LayerTimes, p2p_s: float) -> float:
    """Pipeline send seconds each steady step of Megatron's combined 1F1B waits for, per model chunk
    and micro-batch (``--overlap-moe-expert-parallel-comm`` with PP > 1).

    A combined step runs one chunk's forward with another's backward and needs both inputs before it
    starts: ``TransformerModelChunkSchedulePlan.run`` (megatron-core dev
    ``models/common/model_chunk_schedule_plan.py``) calls ``pre_forward`` and ``pre_backward`` (the
    P2P receive waits, ``pipeline_parallel/schedules.py``) before the first layer's nodes, and a stage
    produces both outputs only at the end of its own step: the forward output after the last
    ``combine_fwd`` (sent on the communication stream beside the last ``attn_bwd``), the input
    gradient after the last ``attn_bwd`` (sent on the compute stream beside the delayed
    ``attn.backward_dw`` of that layer).  With the forward inputs one step ahead (the extra warm-up
    micro-batch of ``get_pp_rank_microbatches``) and the gradients a step behind, the pipeline's
    period is the step plus half of each send's exposed part: ``(max(0, p - (attn_b + attn_w)) +
    max(0, p - attn_w)) / 2`` (``p``: one activation send).  Separate forward and backward passes
    (no overlap) hide the sends behind the other pass; warm-up / cool-down passes are unpaired
    (:func:`ep_unpaired_fraction`)."""
    t, p = plan.training, plan.parallel
    if (plan.framework != "megatron" or not t.overlap_moe_expert_parallel_comm or p.pp <= 1 or p2p_s <= 0.0
            or lt.moe_layer is None):
        return 0.0
    mo = lt.moe_layer
    aw = mo.bwd_weight_s * _attn_share(plan, lt, "bwd_weight_s") if t.delay_wgrad_compute else 0.0
    ab = mo.bwd_input_s * _attn_share(plan, lt, "bwd_input_s")
    if not t.delay_wgrad_compute:
        ab += mo.bwd_weight_s * _attn_share(plan, lt, "bwd_weight_s")
    e = (max(0.0, p2p_s - (ab + aw)) + max(0.0, p2p_s - aw)) / 2
    return (1.0 - ep_unpaired_fraction(plan)) * e


def _attn_share(plan: Plan, lt: LayerTimes, field: str) -> float:
    """Share of an MoE layer's ``field`` seconds in the combined schedule's ``attn`` node."""
    src = lt
    if not lt.parts:
        from primus_launch.projection.cost.roofline import layer_times_roofline

        src = layer_times_roofline(plan)
    tot = getattr(src.moe_layer, field)
    if tot <= 0:
        return 0.5
    return sum(getattr(src.part("moe", k), field) for k in _ATTN_NODE) / tot


def ep_unpaired_fraction(plan: Plan) -> float:
    """Fraction of a stage's forward (and backward) passes that Megatron's 1F1B all-to-all overlap
    (``--overlap-moe-expert-parallel-comm``) cannot pair with a pass of another micro-batch, so their
    dispatch / combine stay exposed: the overlap merges the forward of one micro-batch with the
    backward of an earlier one, which exists only in the steady state of the schedule.  The warm-up
    forwards and the cool-down backwards run alone: ``w`` of the ``nmb x vpp`` passes with ``w`` =
    Megatron's warm-up count for the first stage (``pipeline_parallel/schedules.py``: ``pp - 1``
    without interleaving, ``(pp - 1) * 2 + (vpp - 1) * pp`` with it), and at least 1 (with PP = 1 the
    combined schedule still starts with a lone forward and ends with a lone backward)."""
    p = plan.parallel
    n = max(1, plan.num_microbatches * p.vpp)
    if p.pp <= 1:
        w = 1
    elif p.vpp > 1:
        w = (p.pp - 1) * 2 + (p.vpp - 1) * p.pp
    else:
        w = p.pp - 1
    return min(1.0, max(1, w) / n)


def _offload_exposed(plan: Plan, lt: LayerTimes, moe: bool) -> tuple[float, float]:
    """Host-link seconds left exposed per offloaded layer (forward D2H, backward H2D) of activation
    offloading (``offload.activation_layers``): the layer's kept activations over
    ``GPUSpec.host_link_bw`` (PCIe / NVLink-C2C), overlapped with the next layer's compute."""
    from primus_launch.projection.memory.activations import layer_activation_bytes

    m, p, t = plan.model, plan.parallel, plan.training
    la = layer_activation_bytes(m, seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, sp=p.sequence_parallel,
                                cp=p.cp, moe=moe, ep=p.ep, etp=p.expert_tp)
    secs = la.full / get_gpu(plan.cluster.gpu).host_link_bw
    pt = (lt.moe_layer if moe else None) or lt.dense_layer
    return max(0.0, secs - pt.fwd_s), max(0.0, secs - pt.bwd_input_s - pt.bwd_weight_s)


def optimizer_bytes_per_param(plan: Plan) -> float:
    """Bytes the Adam step streams per (sharded) parameter (module doc; 34 with fp32 states)."""
    t = plan.training
    if t.optimizer != "adam":
        return 14.0
    size = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
    g = size[t.main_grads_dtype] if t.precision_aware_optimizer else 4
    mp = size[t.main_params_dtype] if t.precision_aware_optimizer else 4
    m1 = size[t.exp_avg_dtype] if t.precision_aware_optimizer else 4
    m2 = size[t.exp_avg_sq_dtype] if t.precision_aware_optimizer else 4
    return 2 * g + 2 * mp + 2 * m1 + 2 * m2 + 2


def _recompute_modules_fwd(plan: Plan, lt: LayerTimes, kind: str) -> float:
    """Forward seconds re-run by selective recompute in one layer of ``kind`` (dense / moe)."""
    r = plan.training.recompute
    if r.granularity == "op":   # TorchTitan per-op SAC: the non-matmul ops and every second mm
        return lt.part(kind, "non_matmul").fwd_s + lt.part(kind, "op_sac_mm").fwd_s
    if r.granularity != "selective":
        return 0.0
    if not lt.parts:
        return lt.attn_core.fwd_s if lt.attn_core is not None else 0.0
    return sum(lt.part(kind, mod).fwd_s for mod in r.modules)


def _fsdp_elems(plan: Plan) -> tuple[float, float, float]:
    """Bytes per element of the FSDP parameter all-gather (bf16; FP8 with ``fp8_param_gather``), of
    the gradient reduce-scatter (fp32 with ``grad_reduce_in_fp32``, else bf16) and of the expert
    gradients' reduce-scatter (``expert_grad_reduce_in_fp32``, None = as the others)."""
    t = plan.training
    param_elem = 1.0 if (t.fp8_param_gather and t.precision in ("fp8", "fp4")) else 2.0
    g = 4.0 if t.grad_reduce_in_fp32 else 2.0
    ge = g if t.expert_grad_reduce_in_fp32 is None else (4.0 if t.expert_grad_reduce_in_fp32 else 2.0)
    return param_elem, g, ge


def fsdp_reshards_after_forward(plan: Plan) -> bool:
    """Whether FSDP frees the gathered parameters after each forward (and gathers them again for the
    backward): ``fsdp_reshard_after_forward`` "always", or "default" without PP (TorchTitan
    ``get_fsdp_reshard_after_forward_policy``: False under PP)."""
    p = plan.parallel
    return p.fsdp_reshard_after_forward == "always" or (p.fsdp_reshard_after_forward == "default" and p.pp == 1)


def fsdp_unit_comm(plan: Plan, gpu: str, lay, moe: bool) -> tuple[float, float, float, float]:
    """Raw seconds of one decoder layer's FSDP units on one GPU: (all-gather of the non-expert
    parameters over the DP shard group, all-gather of the expert parameters over expert-DP,
    reduce-scatter of the non-expert gradients, reduce-scatter of the expert gradients)."""
    m, p = plan.model, plan.parallel
    pe, gd, ge = _fsdp_elems(plan)
    sp_ = layer_parameter_counts(m, p.tp, p.expert_tp, p.ep, moe)
    ag_e = coll.all_gather(pe * sp_.expert, lay.expert_dp, gpu) if sp_.expert else 0.0
    rs_e = coll.reduce_scatter(ge * sp_.expert, lay.expert_dp, gpu) if sp_.expert else 0.0
    return (coll.all_gather(pe * sp_.dense, lay.dp_shard, gpu), ag_e,
            coll.reduce_scatter(gd * sp_.dense, lay.dp_shard, gpu), rs_e)


def fsdp_layer_exposed(plan: Plan, lt: LayerTimes, gpu: str, lay, ep_raw: tuple[float, float], moe: bool,
                       pt: PassTimes) -> tuple[float, float]:
    """Exposed FSDP seconds of one layer per micro-batch (forward, backward), ``dp_sharding = "full"``
    (module doc): the all-gather prefetched behind the layer's forward, the reduce-scatter (and the
    re-gather when resharded after forward) behind its backward, their hidden part holding NCCL's SMs
    (``cost/contention.py``), plus :func:`fsdp_ep_nic_sharing` for an MoE layer.  Under torch
    pipelining with the stage module as FSDP root (``fsdp_pp_grad_sync = "schedule"``) the gather runs
    once per schedule (its exposure spread over the micro-batches) and the reduce-scatter after the
    pipeline (:func:`assemble`)."""
    p = plan.parallel
    pp, nmb = p.pp, plan.num_microbatches
    units, arch = get_gpu(gpu).num_sms, get_gpu(gpu).arch
    reshard = fsdp_reshards_after_forward(plan)
    ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(plan, gpu, lay, moe)
    ag, rs = ag_d + ag_e, rs_d + rs_e
    if pp > 1 and p.fsdp_pp_grad_sync == "schedule":
        rs = 0.0
        if not reshard:   # one all-gather per schedule, behind the first micro-batch's forward
            hf = min(ag, pt.fwd_s)
            return (ag - hf + con.displaced(hf, con.NCCL_SMS, units, arch)) / nmb, 0.0
    bwd = (ag if reshard else 0.0) + rs
    hf, hb = min(ag, pt.fwd_s), min(bwd, pt.bwd_input_s + pt.bwd_weight_s)
    nf, nb = fsdp_ep_nic_sharing(plan, lt, gpu, lay, ep_raw) if moe else (0.0, 0.0)
    return (ag - hf + con.displaced(hf, con.NCCL_SMS, units, arch) + nf,
            bwd - hb + con.displaced(hb, con.NCCL_SMS, units, arch) + nb)


def fsdp_ep_nic_sharing(plan: Plan, lt: LayerTimes, gpu: str, lay, ep_raw: tuple[float, float]) -> tuple[float, float]:
    """Seconds one MoE layer's EP dispatch / combine is slowed (forward, backward) by the FSDP
    collectives of the same micro-batch that cross the same NICs, when both leave the scale-up domain.

    A GPU's NIC carries its EP dispatcher's inter-node traffic (DeepEP / HybridEP RDMA, or the
    all-to-all) and its FSDP all-gathers / reduce-scatters whose group spans nodes (the expert-DP
    group holds one GPU per node).  The EP phases are on the critical path (no EP overlap
    configured) and the FSDP collectives are issued where FSDP2 issues them:

    - forward: the next layer's all-gathers (its non-expert unit, then its experts' unit, serially on
      the all-gather stream) are issued once the host passes this layer's dispatch (the dispatcher
      waits on the host for the received-token counts), so they run during this layer's experts and
      meet its combine: the combine is slowed by what of the inter-node gathers is left when it starts,
      ``min(E_fwd / 2, max(0, ag_inter - experts forward))``;
    - backward: the experts' reduce-scatter is issued as soon as their backward ends, right before
      the dispatch's backward: ``min(E_bwd / 2, rs_experts)`` when the expert-DP group spans nodes.

    While both run the NIC is shared evenly (each at half rate), so the EP phase is delayed by the
    FSDP bytes that cross it.  DeepEP's README (Traffic isolation) recommends putting expert-parallel
    and other traffic on separate InfiniBand virtual lanes "to prevent interference"; no public
    figure of the interference exists, so the even share is the model's assumption."""
    if lay.ep.nodes <= 1 or not plan.model.is_moe:
        return 0.0, 0.0
    ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(plan, gpu, lay, True)
    d_inter, e_inter = lay.dp_shard.nodes > 1, lay.expert_dp.nodes > 1
    ag_end = (ag_d + ag_e) if e_inter else (ag_d if d_inter else 0.0)
    experts_f = lt.part("moe", "scope:moe").fwd_s
    f = min(ep_raw[0] / 2, max(0.0, ag_end - experts_f))
    b = min(ep_raw[1] / 2, rs_e) if e_inter else 0.0
    return f, b


def fsdp_microbatch_edges(plan: Plan, lt: LayerTimes, gpu: str, lay, first_moe: bool,
                          embedding: bool, head: bool = False) -> tuple[float, float]:
    """Seconds FSDP2 leaves exposed at the ends of one model chunk's forward and backward when it
    syncs every micro-batch (``parallel.fsdp_pp_grad_sync = "microbatch"``, pp > 1), on top of the
    per-layer prefetched exposure.

    - forward: the chunk's FSDP root orders the all-gather streams after the compute stream in its
      pre-forward (torch ``_fully_shard/_fsdp_state.py`` ``_root_pre_forward``:
      ``all_gather_stream.wait_stream(current_stream)``) and FSDP2 has no forward prefetch across
      units by default, so the first unit's gather waits: the embedding's (chunk holding it) and the
      first layer's non-expert parameters; the experts (their own ``fully_shard`` unit, gathered in
      their pre-forward) hide behind that layer's attention block and router;
    - backward: the root's post-backward final callback (``is_last_backward`` stays True)
      makes the compute stream wait for every reduce-scatter it issued
      (``_root_post_backward_final_callback``, ``FSDPParamGroup.finalize_backward``): the first
      layer's non-expert gradients (reduced after its whole backward) and the embedding's, and what
      of the experts' reduce-scatter (issued after the experts' backward) the layer's attention
      block and router backward do not cover;
    - an untied output layer (AutoModel shards ``lm_head`` outside ``model.model``, so it is an FSDP root
      of its own) waits for its gather in its own root pre-forward: exposed on the chunk holding the
      loss (its reduce-scatter, issued first in the backward, hides behind the chunk's backward).

    Returns (forward, backward) seconds, the first layer's per-layer exposure not subtracted."""
    m, p = plan.model, plan.parallel
    pe, gd, _ = _fsdp_elems(plan)
    ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(plan, gpu, lay, first_moe)
    kind = "moe" if first_moe else "dense"
    a, r = lt.part(kind, "scope:attn"), lt.part(kind, "scope:moe_router")
    win_f = a.fwd_s + r.fwd_s
    win_b = a.bwd_input_s + a.bwd_weight_s + r.bwd_input_s + r.bwd_weight_s
    f = ag_d + max(0.0, ag_e - win_f)
    b = rs_d + max(0.0, rs_e - win_b)
    vocab = float(m.vocab_size * m.hidden_size // p.tp)   # the embedding's / output layer's shard
    if embedding:
        f += coll.all_gather(pe * vocab, lay.dp_shard, gpu)
        b += coll.reduce_scatter(gd * vocab, lay.dp_shard, gpu)
    if head and m.untie_embeddings_and_output_weights:
        f += coll.all_gather(pe * vocab, lay.dp_shard, gpu)
    return f, b


def assemble(plan: Plan, layer_times: LayerTimes, mode: str, record_timeline: bool = False,
             memory_margin: float = 0.05) -> ProjectionResult:
    """One iteration of ``plan`` from ``layer_times`` (module doc for the model)."""
    m, p, t = plan.model, plan.parallel, plan.training
    gpu = plan.cluster.gpu
    spec = get_gpu(gpu)
    lay = layout(plan)
    pp, vpp = p.pp, p.vpp
    nmb = plan.num_microbatches
    lt = layer_times
    attn = lt.attn_core
    if attn is None and (t.recompute.granularity == "selective" or p.cp > 1):
        # measured layer times without an attention split: take the roofline's core-attention
        # share of a dense layer, scaled to the measured layer
        from primus_launch.projection.cost.roofline import layer_times_roofline

        roof = layer_times_roofline(plan)
        ra = roof.attn_core or PassTimes(0.0, 0.0, 0.0)
        k = lt.dense_layer.total_s / roof.dense_layer.total_s if roof.dense_layer.total_s > 0 else 0.0
        attn = PassTimes(ra.fwd_s * k, ra.bwd_input_s * k, 0.0)
        lt = LayerTimes(**{**{f: getattr(lt, f) for f in ("dense_layer", "moe_layer", "embedding", "head_loss",
                                                          "dense_window_layer", "moe_window_layer", "mtp_extra",
                                                          "parts")}, "attn_core": attn})
    attn = attn or PassTimes(0.0, 0.0, 0.0)

    tp_f, tp_b = _tp_exposed(plan, _tp_times(plan, gpu, lay), lt, gpu, lay)
    # a MoE layer's TP calls: TorchTitan's differ from its dense layer's (layer_collectives)
    tpm_f, tpm_b = _tp_exposed(plan, _tp_times(plan, gpu, lay, moe=True), lt, gpu, lay) if m.is_moe else (tp_f, tp_b)
    units, arch = spec.num_sms, spec.arch
    cp_f, cp_b = _cp_times(plan, gpu, lay)
    if p.cp_comm_type in ("p2p", "a2a+p2p") or (plan.framework == "torchtitan" and p.cp_comm_type == "allgather"):
        # ring P2P hidden behind the attention core; the hidden part holds NCCL's P2P channels
        # (cost/contention.py: NCCL_SMS inside a scale-up domain, one channel per NIC (2) across)
        n_p2p = con.NCCL_SMS if lay.cp.nodes <= 1 else 2
        hid_f, hid_b = min(cp_f, attn.fwd_s), min(cp_b, attn.bwd_input_s)
        cp_f = cp_f - hid_f + con.displaced(hid_f, n_p2p, units, arch)
        cp_b = cp_b - hid_b + con.displaced(hid_b, n_p2p, units, arch)
    ep_raw = _ep_times(plan, gpu, lay)
    ep_f, ep_b = _ep_exposed(plan, ep_raw, lt)
    if not _ep_walked(plan, lt):   # the combined-1F1B walk slows its compute nodes itself
        n_ep = con.ep_sms(t.moe_token_dispatcher)
        ep_f += con.displaced(ep_raw[0] - ep_f, n_ep, units, arch)
        ep_b += con.displaced(ep_raw[1] - ep_b, n_ep, units, arch)

    fsdp = p.dp_sharding == "full" and lay.dp_shard.size > 1
    param_elem, grad_elem, expert_grad_elem = _fsdp_elems(plan)
    fsdp_dense = fsdp_moe = (0.0, 0.0)
    # FSDP with pipeline parallelism exists only on torch pipelining (TorchTitan, NeMo AutoModel):
    # parameters stay unsharded across a schedule's micro-batches (reshard_after_forward "default" =
    # False under PP, torchtitan/distributed/fsdp.py get_fsdp_reshard_after_forward_policy), the
    # micro-batch backwards run with set_requires_gradient_sync(False), and the stage's whole gradient
    # reduce-scatter runs in the schedule's REDUCE_GRAD action after its last backward, joined to the
    # compute stream (torch/distributed/pipelining/stage.py perform_reduce_grad): exposed, below.
    # That holds where the stage module is the FSDP root (fsdp_pp_grad_sync "schedule"); where it is
    # not ("microbatch": NeMo AutoModel's MoE parallelizer), torch's backward_maybe_with_nosync takes
    # its plain-backward branch and FSDP2's defaults run every micro-batch: per layer as without PP
    # (reduce-scatter in each backward; gathered again in the next forward after
    # reshard_after_backward), plus the chunk-end exposure of fsdp_microbatch_edges
    fsdp_pp = fsdp and pp > 1
    sync_mb = fsdp_pp and p.fsdp_pp_grad_sync == "microbatch"
    if fsdp:
        fsdp_dense = fsdp_layer_exposed(plan, lt, gpu, lay, ep_raw, False, lt.dense_layer)
        if m.is_moe and lt.moe_layer is not None:
            fsdp_moe = fsdp_layer_exposed(plan, lt, gpu, lay, ep_raw, True, lt.moe_layer)
    nic = fsdp_ep_nic_sharing(plan, lt, gpu, lay, ep_raw) if (sync_mb and m.is_moe) else (0.0, 0.0)

    r = t.recompute
    chunks = plan.chunk_layout()
    rec_ids = set(r.layer_ids) if r.granularity == "full" and r.method == "layer_ids" else set()
    mtp_ids = plan.chunk_mtp_ids() if rec_ids else None
    last_moe = m.is_moe_layer(m.num_layers - 1)
    last_win = m.is_window_layer(m.num_layers - 1)
    rec_dense_sel = _recompute_modules_fwd(plan, lt, "dense")
    rec_moe_sel = _recompute_modules_fwd(plan, lt, "moe") if m.is_moe else 0.0

    # embedding / head / loss TP communication, (forward, backward) per micro-batch
    # (cost/layer_collectives.py: the vocab-parallel embedding's all-reduce or reduce-scatter, the
    # output layer's input-gradient all-reduce or its SP all-gathers and reduce-scatter -- TorchTitan's
    # final norm weight's all-reduce too --, the vocab-parallel cross-entropy's three fp32 all-reduces)
    tpc = lc.tp_calls(plan)
    emb_tp2 = lc.priced([c for c in tpc if c.where == "embedding"], gpu, {"tp": lay.tp})
    head_tp2 = lc.priced([c for c in tpc if c.where in ("head", "loss")], gpu, {"tp": lay.tp})

    d0 = lt.dense_layer
    mo0 = lt.moe_layer or d0
    dw = lt.dense_window_layer or d0
    mw = lt.moe_window_layer or mo0

    def layer_pt(moe: bool, win: bool) -> PassTimes:
        if moe:
            return mw if win else mo0
        return dw if win else d0

    act = _tokens(plan) * m.hidden_size * 2
    if p.sequence_parallel:
        act //= p.tp
    p2p_s = coll.p2p(float(act), lay.pp.nodes > 1, gpu) if pp > 1 else 0.0
    step_p2p = combined_step_p2p(plan, lt, p2p_s)

    parts: list[list[_Parts]] = []
    for rank in range(pp):
        row = []
        for c in range(vpp):
            chunk = chunks[rank][c]
            # MTP layers (plan.layout: with the loss unless the layout string places them) are
            # priced as decoder layers of the last layer's kind plus their norms / eh_proj and
            # their own output head + loss
            kinds = [(m.is_moe_layer(i), m.is_window_layer(i)) for i in chunk.layers] + [(last_moe, last_win)] * chunk.mtp
            n = len(kinds)
            n_moe = sum(1 for k_, _ in kinds if k_)
            n_dense = n - n_moe
            if r.granularity == "full":
                if r.method == "every_n":
                    rec = [k for j, k in enumerate(kinds) if j % (r.num_layers or 1) == 0]
                elif r.method == "layer_ids":
                    # AMD Primus recompute_layer_ids: exactly the listed layers (global ids; MTP depth d
                    # = num_layers + d), each its own checkpoint (patches/recompute_layer_patches.py)
                    gids = chunk.layers + mtp_ids[rank][c]
                    rec = [k for gid, k in zip(gids, kinds) if gid in rec_ids]
                elif r.method == "block":
                    # megatron TransformerBlock._checkpointed_forward: the chunk's first N decoder layers;
                    # its MTP layers are not recomputed under block (MultiTokenPredictionLayer warns)
                    nd = len(chunk.layers)
                    rec = kinds[:nd if r.num_layers is None else min(r.num_layers, nd)]
                else:
                    rec = kinds  # uniform: every decoder layer and every MTP layer (checkpointed with N = 1)
            else:
                rec = []
            rec_moe = sum(1 for k_, _ in rec if k_)
            rec_dense = len(rec) - rec_moe
            q = _Parts()
            for kk in kinds:
                pt = layer_pt(*kk)
                q.f += pt.fwd_s
                q.bi += pt.bwd_input_s
                q.bw += pt.bwd_weight_s
            # recompute (compute part)
            for kk in rec:
                q.bi += layer_pt(*kk).fwd_s
            q.bi += n_dense * rec_dense_sel + n_moe * rec_moe_sel
            n_off = min(t.offload.activation_layers, n)
            if n_off:
                for kk in kinds[:n_off]:
                    of, ob = _offload_exposed(plan, lt, kk[0])
                    q.f += of
                    q.bi += ob
            if chunk.mtp and lt.mtp_extra is not None:
                q.f += chunk.mtp * lt.mtp_extra.fwd_s
                q.bi += chunk.mtp * lt.mtp_extra.bwd_input_s
                q.bw += chunk.mtp * lt.mtp_extra.bwd_weight_s
            comp = q.f + q.bi + q.bw
            # communication inside the layers
            tpl_f = n_dense * tp_f + n_moe * tpm_f  # the chunk's layers' TP seconds, forward / backward
            tpl_b = n_dense * tp_b + n_moe * tpm_b
            tpl_r = rec_dense * tp_f + rec_moe * tpm_f  # recomputed forwards
            q.tp = tpl_f + tpl_b + tpl_r
            q.cp = n * (cp_f + cp_b) + (rec_dense + rec_moe) * cp_f
            q.ep = n_moe * (ep_f + ep_b) + rec_moe * ep_f
            q.dp = n_dense * sum(fsdp_dense) + n_moe * sum(fsdp_moe)
            if sync_mb and kinds:
                # the chunk's first FSDP units wait (fsdp_microbatch_edges) in place of the first layer's
                # prefetched share (its NIC-sharing part stays: the next layer's gathers still meet its
                # combine); the last MoE layer's combine meets no gather (the next chunk's root
                # pre-forward orders its gathers after compute)
                first_moe = kinds[0][0]
                ef, eb = fsdp_microbatch_edges(plan, lt, gpu, lay, first_moe, chunk.embedding, chunk.loss)
                per = fsdp_moe if first_moe else fsdp_dense
                nf, nb = nic if first_moe else (0.0, 0.0)
                ef = max(0.0, ef - (per[0] - nf)) - (nic[0] if kinds[-1][0] else 0.0)
                eb = max(0.0, eb - (per[1] - nb))
                q.f += ef
                q.bi += eb
                q.dp += ef + eb
            q.f += tpl_f + n * cp_f + n_moe * ep_f + n_dense * fsdp_dense[0] + n_moe * fsdp_moe[0]
            q.bi += (tpl_b + n * cp_b + n_moe * ep_b + n_dense * fsdp_dense[1] + n_moe * fsdp_moe[1]
                     + tpl_r + (rec_dense + rec_moe) * cp_f + rec_moe * ep_f)
            if chunk.embedding:
                q.f += lt.embedding.fwd_s + emb_tp2[0]
                q.bi += lt.embedding.bwd_input_s + emb_tp2[1]
                q.bw += lt.embedding.bwd_weight_s
                comp += lt.embedding.total_s
                q.tp += sum(emb_tp2)
            heads = int(chunk.loss) + chunk.mtp
            if heads:
                q.f += heads * (lt.head_loss.fwd_s + head_tp2[0])
                q.bi += heads * (lt.head_loss.bwd_input_s + head_tp2[1])
                q.bw += heads * lt.head_loss.bwd_weight_s
                comp += heads * lt.head_loss.total_s
                q.tp += heads * sum(head_tp2)
            if step_p2p > 0.0 and n_moe:
                q.pp = step_p2p
                q.bi += step_p2p
            del comp
            row.append(q)
        parts.append(row)

    costs = [[q.cost() for q in row] for row in parts]
    schedule = t.pipeline_schedule if pp > 1 else "1f1b"
    group = p.microbatch_group if plan.framework == "megatron" else None  # Megatron's interleaved groups
    res = simulate(schedule, pp, vpp, nmb, costs, p2p_s, record=record_timeline, group=group)
    makespan = res.makespan_s

    # ----- after the pipeline: DP gradient reduction, param all-gather, optimizer -----
    stage_params = stage_parameter_split(plan)
    dp_size = lay.dp.size
    sharded = p.dp_sharding in ("optimizer", "optimizer_grads")
    shard_dense = lay.dp_shard.size if p.dp_sharding == "full" else (dp_size if sharded else 1)  # HSDP: shard group
    shard_expert = lay.expert_dp.size if p.dp_sharding != "none" else 1
    opt_bytes = optimizer_bytes_per_param(plan) if t.optimizer == "adam" else 14
    from primus_launch.projection.cost.compute import hbm_eta

    hbm = spec.hbm_bw * (hbm_eta(spec.arch)[0] if spec.arch else cal.HBM_BW_EFFICIENCY)
    off = t.offload.optimizer_fraction
    post = []
    for rank in range(pp):
        sp_ = stage_params[rank]
        fwd_win = sum(q.f for q in parts[rank])
        bwd_win = sum(q.bi + q.bw for q in parts[rank])
        grad = ag = 0.0
        if p.dp_sharding == "full":
            if p.dp_replicate > 1:  # HSDP: all-reduce of the shard's grads over the replicas
                grad = coll.all_reduce(float(grad_elem * sp_.total / max(1, lay.dp_shard.size)), lay.dp_replicate, gpu)
            if fsdp_pp and not sync_mb:   # torch pipelining's REDUCE_GRAD: the stage's gradients at once, exposed
                grad += (coll.reduce_scatter(float(grad_elem * sp_.dense), lay.dp_shard, gpu)
                         + coll.reduce_scatter(expert_grad_elem * sp_.expert, lay.expert_dp, gpu))
        elif dp_size > 1 or lay.expert_dp.size > 1:
            gd, ge = float(grad_elem * sp_.dense), float(grad_elem * sp_.expert)
            if sharded:
                grad = coll.reduce_scatter(gd, lay.dp, gpu) + coll.reduce_scatter(ge, lay.expert_dp, gpu)
                ag = (coll.all_gather(param_elem * sp_.dense, lay.dp, gpu)
                      + coll.all_gather(param_elem * sp_.expert, lay.expert_dp, gpu))
            else:
                grad = coll.all_reduce(gd, lay.dp, gpu) + coll.all_reduce(ge, lay.expert_dp, gpu)
        buckets = max(1, -(-sp_.total // max(cal.GRAD_BUCKET_PARAMS, 1_000_000 * dp_size)))
        if t.overlap_grad_reduce and grad > 0:
            raw = grad
            grad = max(grad / buckets, grad - bwd_win / nmb)
            grad += con.displaced(raw - grad, con.NCCL_SMS, units, arch)
        if t.overlap_param_gather and ag > 0:
            raw = ag
            ag = max(ag / buckets, ag - fwd_win / nmb)
            ag += con.displaced(raw - ag, con.NCCL_SMS, units, arch)
        held = sp_.dense / shard_dense + sp_.expert / shard_expert
        opt = held * (1 - off) * opt_bytes / hbm
        if off > 0:   # host-side Adam on the offloaded share; grads down, params up the host link
            opt += held * off * max(opt_bytes / cal.CPU_ADAM_BYTES_S, 6.0 / spec.host_link_bw)
        post.append((grad + ag, opt))
    crit_post = max(range(pp), key=lambda i: post[i][0] + post[i][1])
    dp_post, opt_s = post[crit_post]
    iteration = makespan + dp_post + opt_s

    busy = res.stage_busy_s
    c = max(range(pp), key=lambda i: busy[i])
    tp_c = nmb * sum(q.tp for q in parts[c])
    cp_c = nmb * sum(q.cp for q in parts[c])
    ep_c = nmb * sum(q.ep for q in parts[c])
    dpin_c = nmb * sum(q.dp for q in parts[c])
    ppin_c = nmb * sum(q.pp for q in parts[c])
    compute_c = busy[c] - tp_c - cp_c - ep_c - dpin_c - ppin_c
    # the sends on the critical path: the first forward wave crosses pp-1 links per model chunk and
    # the last backward wave crosses them back (the simulation hides the others behind compute);
    # with the combined 1F1B each steady step also waits for its neighbours' sends (ppin_c)
    pp_comm = ppin_c + min(max(0.0, makespan - busy[c]), 2 * (pp - 1) * vpp * p2p_s)
    bubble = max(0.0, makespan - busy[c] - pp_comm)
    breakdown = {"compute": compute_c, "tp_comm": tp_c, "cp_comm": cp_c, "ep_comm": ep_c,
                 "dp_comm": dpin_c + dp_post, "pp_comm": pp_comm, "bubble": bubble, "optimizer": opt_s}

    world = plan.world_size
    flops = model_flops_per_iteration(plan)
    tflops = flops / (iteration * world) / 1e12
    timeline: list[TimelineEvent] = []
    notes = [f"critical stage {c} of {pp}; {nmb} micro-batches; schedule {res.schedule or schedule}"]
    if record_timeline:
        timeline = list(res.events)
        drawn_end = makespan
        if res.timeline_microbatches < nmb:  # a long schedule: drawn shortened (pipeline.simulate)
            drawn_end = max((e.end_s for e in timeline), default=0.0)
            notes.append(f"timeline: drawn for {res.timeline_microbatches:,} of the {nmb:,} micro-batches (the same "
                         f"steady state; the figures are the whole iteration's)")
        for rank in range(pp):
            g, o = post[rank]
            if g > 0:
                timeline.append(TimelineEvent(stage=rank, kind="dp_comm", start_s=drawn_end, end_s=drawn_end + g))
            timeline.append(TimelineEvent(stage=rank, kind="optimizer", start_s=drawn_end + g, end_s=drawn_end + g + o))
    return ProjectionResult(
        mode=mode, iteration_time_s=iteration,
        tokens_per_sec_per_gpu=plan.tokens_per_iteration / (iteration * world),
        model_tflops_per_gpu=tflops, mfu=tflops * 1e12 / spec.peak_flops(t.precision), num_gpus=world,
        model_flops_per_iteration=flops, time_breakdown=breakdown, memory=estimate_memory(plan, margin=memory_margin),
        plan=plan, timeline=timeline, notes=notes)
