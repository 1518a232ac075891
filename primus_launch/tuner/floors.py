"""The floor features of one plan, for the branch and bound's level-1 bounds (:mod:`primus_launch.tuner.bounds`).

A plan's chunk costs are linear in a feature vector ``x`` (:data:`FEATURES`): the pass times of each
layer kind at the floor of its flags (:func:`layer_floor`), and the communication no flag can hide,
each written into ``x`` by the function of its kind (:func:`tp_floor`, :func:`cp_floor`,
:func:`ep_floor`, :func:`fsdp_floor`); :func:`plan_floor_features` is their sum.  What follows the
pipeline, the DP sync and the optimizer step, is floored per stage (:func:`tail_stages`,
:func:`tail_floor`).  The shapes that weigh these features, the caches over a space and the memory
floors are :mod:`primus_launch.tuner.bounds`'s; its module doc gives each bound's argument.
"""

from __future__ import annotations

import numpy as np

from primus_launch.plan import RECOMPUTE_MODULES, Plan
from primus_launch.projection.layer_times import LayerTimes

#: the feature vector: forward / input-gradient / weight-gradient seconds of a dense, MoE,
#: dense-window and MoE-window layer, the embedding, the output layer + loss and an MTP block's extra;
#: then the floor of one dense and one MoE layer's exposed TP seconds (forward, backward) and the
#: embedding's and output layer + loss's TP calls (exact: nothing hides them); a MoE layer's EP
#: dispatch + combine where nothing overlaps them (0 where something may); ``epx``: under Megatron's
#: 1F1B all-to-all overlap, what a MoE layer's dispatch + combine add beyond its compute at least
#: (counted in the stages' busy time only); ``fsdp_*``: what FSDP's parameter gathers / gradient
#: reduce-scatters of a dense (``d``) and a MoE (``m``) full-attention layer take beyond that layer's
#: floor compute, forward / backward (:func:`fsdp_floor`); ``epu_*``: under 1F1B all-to-all overlap a
#: MoE layer's raw dispatch + combine, of which the passes the schedule cannot pair leave
#: :func:`~primus_launch.projection.cost.ep_comm.unpaired_fraction` exposed (scaled per structural
#: group by ``bounds.BoundModel.scale``); ``fsdp_*w*``: a window layer's FSDP floor (its exposure is
#: priced beside its full-attention kind's pass); ``cp_*``: a layer's CP exchange that stays exposed;
#: ``sel_{d,m}_<module>``: the forward seconds selective recompute re-runs of that module of a dense / MoE
#: layer (``cost/recompute.py`` ``recompute_modules_fwd``: a sum of the layer's parts), ``_op`` TorchTitan's
#: per-op recompute (the non-matmul ops and every second mm); ``perm_m`` / ``unperm_m``: a MoE layer's
#: token permute / unpermute forward + input-gradient seconds (no coefficient: read by :func:`ep_floor`,
#: checked below the roofline's with the others); ``off_{d,m}_{f,b}``: the floor of a dense / MoE layer's
#: exposed fine-grained offload copy, forward / backward (``bounds.BoundModel.offload_features``: 0 in the
#: level-1 rows, set per node of the table that offloads modules)
FEATURES = ("d_f", "d_bi", "d_bw", "m_f", "m_bi", "m_bw", "dw_f", "dw_bi", "dw_bw", "mw_f", "mw_bi", "mw_bw",
            "emb_f", "emb_bi", "emb_bw", "head_f", "head_bi", "head_bw", "mtp_f", "mtp_bi", "mtp_bw",
            "tp_f", "tp_b", "tpm_f", "tpm_b", "embtp_f", "embtp_b", "headtp_f", "headtp_b", "ep_f", "ep_b", "epx",
            "fsdp_df", "fsdp_db", "fsdp_mf", "fsdp_mb", "epu_f", "epu_b",
            "fsdp_dwf", "fsdp_dwb", "fsdp_mwf", "fsdp_mwb", "cp_f", "cp_b", "epxw", "perm_m", "unperm_m",
            "off_d_f", "off_d_b", "off_m_f", "off_m_b") + tuple(
    f"sel_{k}_{mod}" for k in ("d", "m") for mod in RECOMPUTE_MODULES + ("op",))
X = {name: i for i, name in enumerate(FEATURES)}
K = len(FEATURES)
KIND = {(False, False): X["d_f"], (True, False): X["m_f"], (False, True): X["dw_f"], (True, True): X["mw_f"]}


def pass_features(lt: LayerTimes) -> np.ndarray:
    """The feature vector of ``lt``, with ``steps/stage.py``'s fallbacks (a MoE layer without its own
    times is priced as a dense one, a window layer as its full-attention kind; no MTP extra: 0)."""
    x = np.zeros(K)
    if lt.parts:
        for k, kind in (("d", "dense"), ("m", "moe")):
            for mod in RECOMPUTE_MODULES:
                x[X[f"sel_{k}_{mod}"]] = lt.part(kind, mod).fwd_s
            x[X[f"sel_{k}_op"]] = lt.part(kind, "non_matmul").fwd_s + lt.part(kind, "op_sac_mm").fwd_s
        for name, key in (("perm_m", "moe_permute"), ("unperm_m", "moe_unpermute")):
            x[X[name]] = lt.part("moe", key).fwd_s + lt.part("moe", key).bwd_input_s
    d0 = lt.dense_layer
    mo0 = lt.moe_layer or d0
    for name, pt in (("d", d0), ("m", mo0), ("dw", lt.dense_window_layer or d0), ("mw", lt.moe_window_layer or mo0),
                     ("emb", lt.embedding), ("head", lt.head_loss), ("mtp", lt.mtp_extra)):
        if pt is not None:
            at = X[name + "_f"]
            x[at], x[at + 1], x[at + 2] = pt.fwd_s, pt.bwd_input_s, pt.bwd_weight_s
    return x


def layer_floor(plan: Plan, x: np.ndarray) -> None:
    """The pass-time features of ``plan`` at the floor of its flags
    (:func:`~primus_launch.projection.cost.roofline.layer_times_floor`) added into ``x``."""
    from primus_launch.projection.cost.roofline import layer_times_floor

    x += pass_features(layer_times_floor(plan))


def plan_floor_features(plan: Plan) -> np.ndarray:
    """The level-1 features of one plan (after ``resolve_power_cap``): the pass times at
    :func:`~primus_launch.projection.cost.roofline.layer_times_floor` (:func:`layer_floor`), then
    :func:`tp_floor`, :func:`cp_floor`, :func:`ep_floor` and :func:`fsdp_floor`."""
    x = np.zeros(K)
    layer_floor(plan, x)
    tp_floor(plan, x)
    cp_floor(plan, x)
    ep_floor(plan, x)
    fsdp_floor(plan, x)
    return x


def fsdp_floor(plan: Plan, x: np.ndarray) -> None:
    """The FSDP features of ``plan`` into ``x`` (``dp_sharding = "full"`` over more than one rank).

    ``cost/fsdp.py`` ``fsdp_layer_exposed`` leaves ``c - min(c, pass)`` of a layer's gathers ``c``
    exposed beside that layer's own pass time (``pass``: the forward for the all-gather; the
    input- plus weight-gradient for the backward's re-gather and reduce-scatter), plus SM and NIC
    terms that are never negative.  So the layer's pass plus its exposed FSDP is at least
    ``g(pass) = max(pass, c) + lam min(pass, c)`` (``lam``: the compute rate NCCL's SMs take from the
    pass while the hidden part runs, ``cost/contention.py`` ``displaced``), non-decreasing in
    ``pass``, so at least ``g(pass_floor)``: the features hold its excess over the floor layer times
    (:func:`~primus_launch.projection.cost.roofline.layer_times_floor`) for a full-attention layer.  A
    window layer is charged its full-attention kind's exposure ``c - min(c, P) + lam min(c, P)``
    beside a pass of its own, at least ``lam c`` whatever ``P`` (``fsdp_*w*``).  The gathers at their least over the variant: FP8 parameter
    gather on and off (``fsdp_bytes``).  Under torch pipelining with the stage as FSDP root
    (``fsdp_pp_grad_sync = "schedule"``) the reduce-scatter is after the pipeline (in
    :func:`tail_floor`'s sync) and a gather not resharded after forward is spread over the
    micro-batches: 0 there; synced every micro-batch, the candidate is not bounded at level 1
    (``bounds.BoundModel.unsupported``)."""
    p = plan.parallel
    if p.dp_sharding != "full":
        return
    from primus_launch.projection.cost.fsdp import fsdp_reshards_after_forward, fsdp_unit_comm
    from primus_launch.projection.cost.roofline import layer_times_floor
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    lay = layout(plan)
    if lay.dp_shard.size <= 1:
        return
    if p.pp > 1 and p.fsdp_pp_grad_sync == "microbatch":
        return
    spec = get_gpu(plan.cluster.gpu)
    reshard = fsdp_reshards_after_forward(plan)
    schedule_sync = p.pp > 1 and p.fsdp_pp_grad_sync == "schedule"
    if schedule_sync and not reshard:
        return
    t = plan.training
    plans = [plan]
    if t.precision in ("fp8", "fp4"):   # the gathers' element: FP8 with fp8_param_gather, else BF16
        plans.append(plan.model_copy(update={"training": t.model_copy(update={"fp8_param_gather": not t.fp8_param_gather})}))
    from primus_launch.projection.cost import contention as con

    lam = con.lost_fraction(con.NCCL_SMS, spec.num_sms, spec.arch)
    lt = layer_times_floor(plan)
    for moe, pt, nf, nb in ((False, lt.dense_layer, "fsdp_df", "fsdp_db"), (True, lt.moe_layer, "fsdp_mf", "fsdp_mb")):
        if pt is None or (moe and not plan.model.is_moe):
            continue
        ag = rs = float("inf")
        for q in plans:
            ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(q, spec, lay, moe)
            ag, rs = min(ag, ag_d + ag_e), min(rs, rs_d + rs_e)
        if schedule_sync:
            rs = 0.0
        bwd = (ag if reshard else 0.0) + rs
        pf, pb = pt.fwd_s, pt.bwd_input_s + pt.bwd_weight_s
        x[X[nf]] = max(0.0, ag - pf) + lam * min(ag, pf)
        x[X[nb]] = max(0.0, bwd - pb) + lam * min(bwd, pb)
        x[X[nf[:-1] + "wf"]] = lam * ag
        x[X[nb[:-1] + "wb"]] = lam * bwd


def tp_floor(plan: Plan, x: np.ndarray) -> None:
    """The TP features of ``plan`` into ``x``: a layer's exposed TP seconds are at least ``(f / tp,
    b / tp)`` of its raw ``(f, b)`` with TP communication overlap (``cost/tp_comm.py`` ``tp_exposed``:
    ``max(c / tp, c - gemm)``) and at least ``(f, 0)`` without (every forward collective stays exposed;
    the backward's asynchronous part may hide); the embedding's and the output layer + loss's TP calls
    exactly (``steps/layer.py``)."""
    from primus_launch.projection.cost import layer_collectives as lc
    from primus_launch.projection.cost.tp_comm import tp_layer_comm
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    tp = plan.parallel.tp
    if tp <= 1:
        return
    spec, lay = get_gpu(plan.cluster.gpu), layout(plan)
    over = plan.training.tp_comm_overlap
    for name, moe in (("tp", False), ("tpm", True)):
        f, b = tp_layer_comm(plan, spec, lay, moe=moe) if (moe and plan.model.is_moe) else tp_layer_comm(plan, spec, lay)
        x[X[name + "_f"]], x[X[name + "_b"]] = (f / tp, b / tp) if over else (f, 0.0)
    tpc = lc.tp_calls(plan)
    x[X["embtp_f"]], x[X["embtp_b"]] = lc.priced([c for c in tpc if c.where == "embedding"], spec.name, {"tp": lay.tp})
    x[X["headtp_f"]], x[X["headtp_b"]] = lc.priced([c for c in tpc if c.where in ("head", "loss")], spec.name,
                                                   {"tp": lay.tp})


def cp_floor(plan: Plan, x: np.ndarray) -> None:
    """The CP features of ``plan`` into ``x``: a layer's CP exchange (``cost/cp_comm.py``
    ``cp_layer_comm``) is all exposed off a ring; on a ring ``steps/layer.py`` leaves
    ``c - h + lam h`` with ``h = min(c, attention core)`` (``lam``: the compute rate the ring's P2P
    channels take, ``cost/contention.py``), at least ``lam c`` whatever the core's time."""
    if plan.parallel.cp <= 1:
        return
    from primus_launch.projection.cost import contention as con
    from primus_launch.projection.cost.cp_comm import cp_layer_comm, cp_ring
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    spec, lay = get_gpu(plan.cluster.gpu), layout(plan)
    f, b = cp_layer_comm(plan, spec, lay)
    if cp_ring(plan):
        lam = con.lost_fraction(con.NCCL_SMS if lay.cp.nodes <= 1 else 2, spec.num_sms, spec.arch)
        f, b = lam * f, lam * b
    x[X["cp_f"]], x[X["cp_b"]] = f, b


def tp_cp_floor(plan: Plan, x: np.ndarray) -> None:
    """:func:`tp_floor` and :func:`cp_floor` into ``x`` (the part of the floor features that reads the TP flags)."""
    tp_floor(plan, x)
    cp_floor(plan, x)


def ep_floor(plan: Plan, x: np.ndarray) -> None:
    """The EP features of ``plan`` into ``x``: without shared-expert or 1F1B all-to-all overlap a MoE
    layer's dispatch + combine are all exposed (``cost/ep_comm.py`` ``ep_exposed`` returns them raw;
    ``steps/layer.py`` adds the SMs of the hidden part, 0 here): exactly the raw seconds; with
    shared-expert overlap alone ``c - h + lam h`` (``h``: the part the shared expert hides, ``lam``: the
    compute rate the dispatcher's SMs take), at least ``lam c``; with both overlaps 0 (a floor); with 1F1B all-to-all overlap ``ep_exposed`` charges
    ``u raw + (1 - u) paired`` (``u``: ``unpaired_fraction``), so a layer's pass plus its exposed EP is
    at least ``compute_floor + u raw + (1 - u) epx``: the raw seconds in ``epu_*`` and ``epx`` below,
    scaled by ``u`` and ``1 - u`` where the group's pipeline and micro-batches are known
    (``bounds.BoundModel.scale``)."""
    if not plan.model.is_moe:
        return
    t = plan.training
    from primus_launch.projection.cost.ep_comm import ep_layer_comm
    from primus_launch.projection.cost.roofline import layer_times_floor
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    spec = get_gpu(plan.cluster.gpu)
    if t.moe_shared_expert_overlap:
        if not t.overlap_moe_expert_parallel_comm:
            # behind the shared expert: c - h + lam h with h = min(c, shared expert), at least lam c
            from primus_launch.projection.cost import contention as con

            lam = con.lost_fraction(con.ep_sms(t.moe_token_dispatcher), spec.num_sms, spec.arch)
            f, b = ep_layer_comm(plan, spec, layout(plan))
            x[X["ep_f"]], x[X["ep_b"]] = lam * f, lam * b
        return
    raw = ep_layer_comm(plan, spec, layout(plan))
    if not t.overlap_moe_expert_parallel_comm:
        x[X["ep_f"]], x[X["ep_b"]] = raw
        return
    # the passes the schedule cannot pair keep all of it (ep_exposed: u f + (1 - u) paired), scaled
    # by u per structural group (BoundModel.scale); the paired share below by 1 - u
    x[X["epu_f"]], x[X["epu_b"]] = raw
    lt = layer_times_floor(plan)
    if plan.framework != "megatron" or lt.moe_layer is None:
        return
    # the combined-1F1B walk (cost/ep_overlap.py): the communication stream runs a layer pair's
    # dispatch and combine one after another, so a pair takes at least their sum and a layer's pass
    # plus its exposed EP is at least max(compute, dispatch + combine) (the unpaired share: compute +
    # all of them); that beyond the floor compute of the longer MoE kind (a floor of either kind's) and
    # beyond the layer's TP collectives, which run inside the walk's attn node and can hide under the
    # communication stream (cost/ep_comm.py moe_layer_pair) while the bound counts them on their own
    from primus_launch.projection.cost.tp_comm import tp_layer_comm

    tp = sum(tp_layer_comm(plan, spec, layout(plan), moe=True)) if plan.parallel.tp > 1 else 0.0
    longest = max(lt.moe_layer.total_s, (lt.moe_window_layer or lt.moe_layer).total_s)
    x[X["epx"]] = max(0.0, raw[0] + raw[1] - longest - tp)
    if t.moe_token_dispatcher == "deepep":
        # DeepEP's permutes stay in the mlp node (ep_comm.moe_layer_pair: nothing moved onto the
        # communication stream, permutes_on_comm 0): n layer pairs of the walk from empty streams
        # (exposed_per_step, of which the paired exposure is at least the per-layer share) run their
        # dispatches and combines (D = the raw seconds each) one after another on the communication
        # stream while every compute node beside them keeps at most 1 - c of its rate (c:
        # walk_contention; whole-GPU parts 0), so T >= n W + c n D: the paired exposure is at least
        # c D, for a MoE layer and for a window MoE layer charged the MoE kind's exposure
        from primus_launch.projection.cost.ep_comm import walk_contention

        cd = walk_contention(plan, spec) * (raw[0] + raw[1])
        x[X["epx"]] = max(x[X["epx"]], cd)
        x[X["epxw"]] = cd
    elif t.moe_token_dispatcher in ("alltoall", "hybridep") and lt.parts:
        # the permutes P the walk moves onto the communication stream (ep_comm.permutes_on_comm:
        # the unpermute, HybridEP also the permute) make its comm D + P and come off its exposure:
        # paired >= c (D + P) - P, so a MoE layer's pass plus its paired exposure is at least
        # W + c D - (1 - c) P >= W_floor + c D - (1 - c) P_floor (the layer's other parts and its
        # permutes each at least their floor, 1 - c <= 1)
        from primus_launch.projection.cost.ep_comm import walk_contention

        pf = pass_features(lt)
        perm = pf[X["unperm_m"]] + (pf[X["perm_m"]] if t.moe_token_dispatcher == "hybridep" else 0.0)
        c = walk_contention(plan, spec)
        x[X["epx"]] = max(x[X["epx"]], c * (raw[0] + raw[1]) - (1.0 - c) * perm)


def tail_stages(plan: Plan, window: float) -> list[float]:
    """Per stage the DP sync after the pipeline with ``window`` seconds of forward and of backward
    free to hide it (``cost/dp_comm.py`` ``dp_grad_sync``) plus the optimizer step and Megatron's passes over the
    gradient buffer with the step's scalar all-reduces (``cost/step_extras.py``: the window does not enter them)."""
    from primus_launch.projection.cost.dp_comm import dp_grad_sync, held_parameters
    from primus_launch.projection.cost.muon import muon_step_s
    from primus_launch.projection.cost.optimizer import optimizer_step_s
    from primus_launch.projection.cost.step_extras import step_extras_s
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.memory.params import stage_parameter_split

    spec, lay = get_gpu(plan.cluster.gpu), layout(plan)
    # dp + optimizer_step_s(overlap_s=dp) does not increase as dp shrinks (cost/optimizer.py), so a wider window
    # still bounds the projection's tail from below
    out = []
    pp = plan.parallel.pp
    for r, sp_ in enumerate(stage_parameter_split(plan)):
        dp_s = dp_grad_sync(plan, spec, lay, sp_, window, window, r)
        extras = step_extras_s(plan, spec, lay, sp_.dense, sp_.expert, last_stage=r == pp - 1)
        if plan.training.optimizer == "muon" and plan.framework == "megatron" and plan.parallel.dp_sharding == "none":
            out.append(dp_s + muon_step_s(plan, spec, lay, r) + extras)   # as steps/iteration.py: cost/muon.py
        else:
            out.append(dp_s + optimizer_step_s(plan, spec, held_parameters(plan, lay, sp_), overlap_s=dp_s) + extras)
    return out


def tail_floor(plan: Plan) -> float:
    """A floor of the part after the pipeline (``steps/iteration.py`` ``stage_tails``): per stage the
    DP sync with the whole backward / forward windows free to hide it (``cost/dp_comm.py``: with overlap
    at least one bucket stays exposed, ``max(c / buckets, c - window)``, and the hidden part's SM share
    only adds) plus the optimizer step; the longest stage's."""
    return max(tail_stages(plan, float("inf")))
