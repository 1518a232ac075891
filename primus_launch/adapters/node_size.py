"""A node larger than the GPU's reference server, said where the projection prices it.

The hardware database gives each GPU the server of its reference system (``GPUSpec.gpus_per_node``: 8 for an HGX /
DGX H100 or an MI300X platform, 4 for a GB200 compute tray) and its scale-up domain (``GPUSpec.nvlink_domain``: 72 for
GB200 / GB300 NVL72; else the server).  The placement model (``projection/hardware/placement.py``
``scaleup_domain``) takes the run's node as one NVLink / xGMI domain when no larger domain is given, so
``--gpus-per-node 16`` on h100-sxm is priced as 16 GPUs reaching each other at NVLink speed: a size the
reference system does not have (NVIDIA's HGX H100 baseboard holds 4 or 8 GPUs).  The run is projected as given, with a
note naming the assumption (the cost model is left as it is: a node of two 8-GPU domains joined by NICs, if one
were built, would be slower on groups that span them).
"""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import Plan


def fewest_nodes(tp: int, cp: int, pp: int, ep: int, etp: int, gpn: int, mbs: Optional[int],
                 gbs: Optional[int]) -> int:
    """The fewest nodes of ``gpn`` GPUs whose world the parallel degrees divide (Megatron-LM's
    ``parallel_state.initialize_model_parallel``: ``tp * cp * pp`` and ``etp * ep * pp`` divide the world) and whose
    data-parallel size divides ``gbs / mbs``; where no count up to 4096 does, the fewest the degrees alone fit, so that
    the plan's own check names what does not fit (``global_batch_size``, or the expert degree against the experts),
    not a 1-node world.  (A recipe that states no node count: a Primus experiment, a Megatron recipe on the default
    node.)"""
    first = None
    for n in range(1, 4097):
        w = n * gpn
        if w % (tp * cp * pp) or w % (etp * ep * pp):
            continue
        first = first or n
        dp = w // (tp * cp * pp)
        if mbs and gbs and gbs % (mbs * dp):
            continue
        return n
    return first or 1


def node_size_note(plan: Plan) -> Optional[str]:
    """The note for a node of ``plan`` larger than its GPU's reference scale-up domain (module doc); None otherwise
    (a domain the cluster states, ``cluster.nvlink_domain``, is the user's own statement and is not noted)."""
    from primus_launch.projection.hardware.gpus import get_gpu

    c = plan.cluster
    try:
        spec = get_gpu(c.gpu)
    except Exception:  # an unknown GPU is refused elsewhere, naming it
        return None
    ref = spec.scaleup_domain
    if c.nvlink_domain is not None or c.gpus_per_node <= max(ref, spec.gpus_per_node) or c.world_size <= ref:
        return None
    return (f"cluster gpus_per_node={c.gpus_per_node}: {c.gpu}'s reference server has {spec.gpus_per_node} GPUs "
            f"({ref} in one scale-up domain); a node of {c.gpus_per_node} is priced as one NVLink / xGMI domain of "
            f"{min(c.gpus_per_node, c.world_size)} GPUs, a size that system does not have (two {ref}-GPU domains "
            "joined by NICs would be slower on groups spanning them)")


def with_node_note(plan: Plan) -> Plan:
    """``plan`` with :func:`node_size_note` among its reader notes (once; a new plan: the source a reader may share
    with other plans is not changed in place)."""
    note = node_size_note(plan)
    if note is None or plan.source is None or note in plan.source.notes:
        return plan
    return plan.model_copy(update={"source": plan.source.model_copy(update={"notes": [*plan.source.notes, note]})})
