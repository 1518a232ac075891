"""Megatron's 1F1B all-to-all overlap (``--overlap-moe-expert-parallel-comm``) as its two streams run it.

Source: megatron-core 0.16.1 ``models/common/model_chunk_schedule_plan.py``
(``TransformerLayerSchedulePlan.run``), ``pipeline_parallel/utils.py`` (``ScheduleNode``,
``stream_acquire_context``) and ``models/gpt/fine_grained_callables.py``; the same order, events and
node contents at Megatron-LM dev @d48bd6be (the MoE recipes' version; ``mhc_post`` / MTP nodes aside,
empty for these models).  In the steady state of
the pipeline schedule the forward of one micro-batch and the backward of another go through the MoE
layers together, one layer pair at a time.  Each layer is split into nodes: ``attn`` (attention,
pre-MLP norm, router, dispatch preprocess) and ``mlp`` (experts, shared experts) on the compute
stream, ``moe_dispatch`` and ``moe_combine`` on the communication stream.  Per layer pair the streams
run, in order (the docstring of ``run``):

    comm stream:    combine_bwd | dispatch_fwd -> dispatch_bwd | combine_fwd
    compute stream: attn_fwd    | mlp_bwd -> mlp_bwd_dw -> mlp_fwd | attn_bwd (-> attn_bwd_dw)

Each micro-batch has one CUDA event that every node of it waits on and records
(``stream_acquire_context``), so a micro-batch's nodes run one after the other: forward
``attn -> dispatch -> mlp -> combine``, backward ``combine -> mlp -> dispatch -> attn``; the
``backward_dw`` calls (weight gradients, only with ``--delay-wgrad-compute``; otherwise the node's
backward computes them) take no event, so ``dispatch_bwd`` waits for ``mlp_bwd``'s input gradient
only.  The next layer's forward waits for this layer's ``combine_fwd``, its backward (the layer
below) for this ``attn_bwd``.

:func:`exposed_per_layer` walks that order over a run of layer pairs (streams FIFO, events as above)
and returns the steady-state time per pair beyond its compute: the all-to-all time the overlap leaves
exposed; :func:`exposed_per_step` the same for one combined step of ``n`` layers that starts with
both streams empty (Megatron runs one model chunk per step and joins the streams at its end).  A
compute node beside a running dispatch / combine keeps ``1 - c`` of its rate (``c``: the SMs the
communication kernel holds, :func:`cost.contention.lost_fraction`), so a communication-bound pair is
not slowed by it while a compute-bound one is.  Limits: no communication -> 0; no compute -> all of it
(one stream).

Not every second of a dispatch / combine node is SM-light communication.  HybridEP (DeepEP branch
``hybrid-ep`` @cf78085, the build Megatron-LM's MoE recipes pin; Megatron-LM dev @d48bd6be
``token_dispatcher._HybridEPManager`` / ``fused_a2a.HybridEPDispatch``) runs on the communication
stream, per forward dispatch, a metadata-preprocessing kernel of ``num_sms_preprocessing_api`` = 108
blocks followed by ``cudaStreamSynchronize`` (``executor.cu``: no token budget, so the host reads the
received counts), and around each transfer the permute / unpermute kernels gridded ``sm_count * 16``
blocks (``config.cuh`` ``Configurer::get_default_config``, unfused: Megatron's
``moe_permute_fusion_into_hybridep`` defaults to False); only the transfer kernel itself keeps to its
8 (across NVLink domains) or 24 (inside one) SMs.  The all-to-all dispatcher's combine node runs
the unpermute of the expert output (``MoEAlltoAllTokenDispatcher.combine_postprocess``, called from
``submodule_combine_forward`` -> ``MoELayer.postprocess``) on the communication stream as well, and its
autograd backward with it.  ``LayerPair.whole`` holds those seconds of each dispatch / combine node
(``dispatch_f``, ``combine_f``, ``dispatch_b``, ``combine_b``): a compute node beside them keeps none of
its rate (``c = 1``), beside the rest of the node ``1 - c``; the whole-GPU part is placed first in each
node (preprocessing / unpermute precede the transfer).  ``whole`` = the nodes' seconds serialises the
two streams: exposed = the four communication nodes' seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class LayerPair:
    """Seconds of one MoE layer's nodes: forward ``attn_f`` / ``mlp_f``; backward input-gradient
    ``attn_b`` / ``mlp_b`` and the weight gradients ``attn_w`` / ``mlp_w`` run by ``backward_dw``
    (zero without ``--delay-wgrad-compute``: then they are inside ``attn_b`` / ``mlp_b``);
    communication ``dispatch_f``, ``combine_f``, ``dispatch_b``, ``combine_b``; ``whole``: the seconds of
    each of those four nodes (same order) that hold the whole GPU (module doc; at most the node's)."""

    attn_f: float
    mlp_f: float
    attn_b: float
    mlp_b: float
    attn_w: float
    mlp_w: float
    dispatch_f: float
    combine_f: float
    dispatch_b: float
    combine_b: float
    whole: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    @property
    def compute_s(self) -> float:
        """The pair's compute: both layers' attention and MLP forward, input-gradient and weight-gradient seconds."""
        return self.attn_f + self.mlp_f + self.attn_b + self.mlp_b + self.attn_w + self.mlp_w


def _run(start: float, work: float, busy: list[tuple[float, float, float]], c: float) -> float:
    """End of a compute node of ``work`` seconds started at ``start`` that runs at ``1 - c_i`` of its
    rate while the communication stream is busy (``busy``: its intervals ``(start, end, c_i)``, in
    time order; ``c_i`` = ``c`` or 1 for whole-GPU work, module doc)."""
    if work <= 0.0:
        return start + work
    t, w = start, work
    for s0, e0, ci in busy:
        if e0 <= t or ci <= 0.0:
            continue
        keep = 1.0 - ci
        if s0 > t:
            if w <= s0 - t:
                return t + w
            w -= s0 - t
            t = s0
        if keep <= 0.0:
            t = e0
            continue
        if w <= (e0 - t) * keep:
            return t + w / keep
        w -= (e0 - t) * keep
        t = e0
    return t + w


def _walk(x: LayerPair, n: int, c: float = 0.0) -> float:
    """Makespan of ``n`` consecutive layer pairs (module doc); compute nodes lose ``c`` of their rate
    while a dispatch / combine runs beside them (``cost/contention.py``: the SMs the communication
    kernel holds).  Nodes are placed in dependency order (each stream stays FIFO in program order)."""
    comp = comm = 0.0       # when each stream is free
    f_ready = b_ready = 0.0  # the forward / backward micro-batch's last node (its event)
    busy: list[tuple[float, float, float]] = []
    w_df, w_cf, w_db, w_cb = x.whole

    def com(start: float, dur: float, w: float = 0.0) -> float:
        if dur > 0.0:
            mid = start + min(dur, max(0.0, w))
            if mid > start:
                busy.append((start, mid, 1.0))
            if mid < start + dur:
                busy.append((mid, start + dur, c))
        return start + dur

    aw_left = 0.0           # the previous layer's attn backward_dw, placed after this layer's combine_bwd
    for _ in range(n):
        if len(busy) > 16:
            del busy[:-16]
        cb = com(max(comm, b_ready), x.combine_b, w_cb)
        comm = cb
        comp = _run(comp, aw_left, busy, c)
        af = _run(max(comp, f_ready), x.attn_f, busy, c)
        comp = af
        df = com(max(comm, af), x.dispatch_f, w_df)
        comm = df
        mb = _run(max(comp, cb), x.mlp_b, busy, c)
        comp = mb
        db = com(max(comm, mb), x.dispatch_b, w_db)
        comm = db
        comp = _run(comp, x.mlp_w, busy, c)                # backward_dw: no event
        mf = _run(max(comp, df), x.mlp_f, busy, c)
        comp = mf
        cf = com(max(comm, mf), x.combine_f, w_cf)
        comm = cf
        ab = _run(max(comp, db), x.attn_b, busy, c)
        comp = ab
        aw_left = x.attn_w                               # attn backward_dw right after
        f_ready, b_ready = cf, ab
    comp = _run(comp, aw_left, busy, c)
    return max(comp, comm)


@lru_cache(maxsize=4096)
def exposed_per_step(x: LayerPair, n: int, c: float = 0.0) -> float:
    """Seconds one combined step of ``n`` layer pairs takes beyond its compute.  Megatron runs one
    model chunk's forward and another's backward as one step
    (``models/common/model_chunk_schedule_plan.py`` ``TransformerModelChunkSchedulePlan.run``: the
    overlapped layers, then the P2P sends, then ``wait_current_stream`` joins the streams), so each
    step starts with both streams empty and the first layer's ``combine_bwd`` has only ``attn_fwd``
    beside it; with few layers per chunk (interleaved pipelines) that start-up is a share of every
    layer, with the whole model in one chunk (no pipelining) it vanishes into the steady state."""
    if n <= 0:
        return 0.0
    return max(0.0, _walk(x, n, c) - n * x.compute_s)


@lru_cache(maxsize=4096)
def exposed_per_layer(x: LayerPair, pairs: int = 4, c: float = 0.0) -> float:
    """Steady-state seconds per layer pair beyond its compute (module doc): the increment of the
    walk from ``pairs`` to ``2 * pairs`` layer pairs, per pair, minus the pair's compute.  The walk
    carries over only the two micro-batches' last nodes from pair to pair;
    on 20,000 random pairs 2, 3 and 4 gave the 32-pair figure to 1e-9 (tests/test_ep_overlap.py
    compares 16 -> 32 pairs of a separately written event simulation)."""
    inc = (_walk(x, 2 * pairs, c) - _walk(x, pairs, c)) / pairs
    return max(0.0, inc - x.compute_s)
