"""The MoE token dispatcher's host-device sync and the launch-bound walk of the ops between two syncs.

:data:`SYNC_BEFORE` names the graph scopes an MoE layer's forward runs before the sync; :func:`launch_bound_seconds`
walks the ops from an idle GPU (the recurrence in its docstring); :func:`backward_syncs` /
:func:`syncs_in_backward` tell whether the backward re-runs the sync (full or ``moe`` recompute, the 1F1B EP
overlap), so its host launches cannot run ahead across layers (``cost/host_runahead.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from primus_launch.plan import Plan
from primus_launch.projection.cost.framework import GRAPH_LAUNCH_S
from primus_launch.projection.cost.recompute import effective_granularity

# Graph scopes an MoE layer's forward runs before its token dispatcher's host-device sync: the router
# and the first permutation run, then the host waits for the routed-token counts (Megatron-Core
# core_r0.16.0 transformer/moe/token_dispatcher.py: the all-to-all dispatcher's ``d2h_event.synchronize()``
# at ``cuda_sync_point`` "before_ep_alltoall" (EP > 1) or "before_finish" (the grouped GEMM's CPU
# split sizes); the all-gather dispatcher's ``tokens_per_expert.cpu()``; DeepEP normal-mode dispatch
# waits for its received-token counter, HybridEP "without an upper bound ... will cause a CPU sync";
# TorchTitan's expert-parallel all-to-all ``input_splits.tolist()``).  One per MoE layer forward.
SYNC_BEFORE = frozenset({"attn", "moe_router", "moe_preprocess"})


def launch_bound_seconds(seq: list, host_s: float, graphs: frozenset = frozenset()) -> float:
    """When the GPU finishes ``seq`` -- ops ``[scope, GPU s, kernels, extra host s, extra launches]`` in launch
    order -- launched by one host thread into an idle GPU (the period of an MoE forward between two token-dispatcher
    syncs, ``layer_ops.LayerOps.times``).  Op ``i`` costs the host ``h_i = kernels x t_launch + extra host``
    (``t_launch`` = ``host_s``; scopes in ``graphs`` launch nothing but one graph replay,
    ``framework.GRAPH_LAUNCH_S``, per run of captured ops) spread over its ``L_i = kernels + extra launches`` launches, and the GPU ``g_i`` spread over the
    same kernels.  With ``H`` the host clock and ``E`` the GPU's:

        E <- max(max(E, H + h_i / L_i) + g_i,  H + h_i + g_i / L_i);   H <- H + h_i

    (the op's first kernel starts once launched and the GPU is free; its last cannot start before it is
    launched): ``max(sum g, sum h)`` when one side dominates throughout, more when a host-bound run of small ops
    leaves the GPU idle and a GPU-bound run then makes the host wait -- what ``max(G, H)`` per pass hides.  A
    kernel of ``g / L < h / L`` (GPU faster than the launch) leaves the GPU idle ``h / L - g / L`` per launch."""
    E = H = 0.0
    captured = False
    for scope, g, n, hx, extra in seq:
        if scope in graphs:
            if not captured:
                H += GRAPH_LAUNCH_S
            captured = True
            E = max(E, H) + g
            continue
        captured = False
        h = n * host_s + hx
        L = n + extra
        if L <= 0:
            E = max(E, H) + g
            H += h
            continue
        E = max(max(E, H + h / L) + g, H + h + g / L)
        H += h
    return E


def backward_syncs(plan: Plan) -> bool:
    """Whether the backward re-runs the MoE dispatcher's host sync, so its host launches cannot run ahead across
    layers (cost/host_runahead.py): :func:`syncs_in_backward` of the plan's recompute and EP overlap."""
    r = plan.training.recompute
    return syncs_in_backward(effective_granularity(plan), r.modules, plan.training.overlap_moe_expert_parallel_comm)


def syncs_in_backward(granularity: str, modules: Iterable[str] | None, ep_overlap: bool) -> bool:
    """Full recompute, ``moe`` among the selective-recompute ``modules``, or the 1F1B EP overlap (a forward
    interleaved with each backward): the backward then re-runs the dispatcher's forward and its host sync."""
    return granularity == "full" or (granularity == "selective" and "moe" in (modules or ())) or bool(ep_overlap)

