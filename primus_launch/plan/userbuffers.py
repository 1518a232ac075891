"""Transformer Engine's default userbuffers configuration (Megatron ``--tp-comm-overlap``): which
communication method, how many SMs and whether an SM margin each TP-overlapped layer GEMM pass uses.

A framework fact both sides need: the Megatron reader checks a ``--tp-comm-overlap-cfg`` YAML's layer names
and fills its per-layer defaults (``adapters/megatron_args.py``), and the cost model prices the SMs the
communication holds (``projection/cost/contention.py``).

Source: ``transformer_engine/pytorch/module/base.py`` ``initialize_ub.get_default_config`` @d0067d0:
``ring_exchange`` (all-gather overlap of qkv/fc1 forward and proj/fc2 input-grad) ``num_sm`` 1, on copy
engines (``use_ce``), no margin; ``pipeline`` (reduce-scatter overlap of proj/fc2 forward) and ``bulk``
(qkv/fc1 input-grad and weight-grad) ``num_sm`` 16 with ``set_sm_margin``; proj/fc2 weight gradients are
``external`` (no communication kernel of their own).
"""

from __future__ import annotations

UB_SMS = {"ring_exchange": 1, "pipeline": 16, "bulk": 16, "external": 0}
# (layer GEMM, pass) -> TE userbuffers method; passes: 0 forward, 1 input-grad, 2 weight-grad
UB_METHOD = {
    "qkv": ("ring_exchange", "bulk", "bulk"),
    "fc1": ("ring_exchange", "bulk", "bulk"),
    "proj": ("pipeline", "ring_exchange", "external"),
    "fc2": ("pipeline", "ring_exchange", "external"),
}
UB_MARGIN = {"ring_exchange": False, "pipeline": True, "bulk": True, "external": False}
# TE's userbuffers layer names -> (layer GEMM, pass) (``initialize_ub``'s ``methods`` table)
UB_NAMES = {f"{g}_{ps}": (g, i) for g in UB_METHOD for i, ps in enumerate(("fprop", "dgrad", "wgrad"))}


def ub_default(name: str) -> tuple[str, int, bool]:
    """(method, num_sm, set_sm_margin) TE's ``initialize_ub.get_default_config`` gives layer ``name``:
    ``num_sm`` 1 for ring_exchange else 16, ``set_sm_margin`` = not ring_exchange."""
    g, i = UB_NAMES[name]
    method = UB_METHOD[g][i]
    return method, UB_SMS[method], UB_MARGIN[method]
