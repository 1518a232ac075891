"""Where each parallel group's ranks sit: scale-up domains spanned, members per domain, NICs per group.

A *scale-up domain* is the set of GPUs one GPU reaches over NVLink / xGMI: a node (8 GPUs of a DGX
or an MI300X platform) or, on GB200 / GB300 NVL72, the 72 GPUs of a rack (18 trays of 4 GPUs).
Its size is ``plan.cluster.nvlink_domain``, else the GPU's reference system
(``GPUSpec.nvlink_domain``, 72 for gb200 / gb300), else ``gpus_per_node`` -- capped by the world
size.  Everything below counts in domains ("node" below = domain): a group inside one domain runs
at scale-up speed even when it spans several trays.

Megatron-LM orders ranks "tp-cp-ep-dp-pp" (``megatron/core/parallel_state.py``
``initialize_model_parallel`` / ``RankGenerator``): TP is innermost (adjacent global ranks), then
CP, then DP, then PP outermost; the expert grid is "tp-ep-dp-pp" with expert-TP innermost, EP
carved out of DP x CP. A group of ``size`` members whose consecutive members are ``stride`` global
ranks apart, on nodes of ``g`` GPUs, therefore has

- ``stride * size <= g``: all members on one node;
- ``stride >= g``: one member per node, ``size`` nodes;
- otherwise ``g // stride`` members per node on ``size / (g // stride)`` nodes.

NIC sharing: every GPU has its own NIC share (``GPUSpec.inter_node_bw`` is per GPU). All groups of
a kind run their collective at the same time (e.g. the 8 DP groups of a TP=8 node), so a group
with ``k`` members on a node owns exactly ``k`` NIC shares of that node: its scale-out bandwidth per
node is ``k * inter_node_bw``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from primus_launch.plan import Plan


@dataclass(frozen=True)
class GroupPlacement:
    """A communicator's footprint on the cluster."""

    size: int
    stride: int
    nodes: int            # nodes the group spans
    per_node: int         # members of the group on each of those nodes
    gpus_per_node: int

    @property
    def intra_node(self) -> bool:
        """Whether the whole group sits on one node (its collectives never cross the scale-out network)."""
        return self.nodes <= 1


@lru_cache(maxsize=65536)
def place(size: int, stride: int, gpus_per_node: int) -> GroupPlacement:
    """Footprint of a group of ``size`` ranks spaced ``stride`` apart (see module doc)."""
    g = gpus_per_node
    if size <= 1:
        return GroupPlacement(max(size, 1), stride, 1, 1, g)
    if stride * size <= g:
        return GroupPlacement(size, stride, 1, size, g)
    if stride >= g:
        return GroupPlacement(size, stride, size, 1, g)
    per = max(1, g // stride)
    return GroupPlacement(size, stride, -(-size // per), per, g)


@dataclass(frozen=True)
class Layout:
    tp: GroupPlacement
    cp: GroupPlacement
    dp: GroupPlacement          # data-parallel group of dense params (dp x cp, Megatron grads)
    dp_shard: GroupPlacement    # FSDP shard group (dp*cp / dp_replicate)
    dp_replicate: GroupPlacement
    ep: GroupPlacement
    expert_dp: GroupPlacement
    pp: GroupPlacement          # two adjacent pipeline stages


def scaleup_domain(plan: Plan) -> int:
    """GPUs of one scale-up domain for ``plan`` (module doc)."""
    from primus_launch.projection.hardware.gpus import get_gpu

    c = plan.cluster
    dom = c.nvlink_domain
    if dom is None:
        spec = get_gpu(c.gpu)
        dom = spec.nvlink_domain if spec.nvlink_domain and spec.nvlink_domain > c.gpus_per_node else c.gpus_per_node
    return max(1, min(dom, c.world_size))


def layout(plan: Plan) -> Layout:
    """Group placements of ``plan`` under Megatron's rank order (module doc)."""
    p = plan.parallel
    g = scaleup_domain(plan)
    tp, cp, pp = p.tp, p.cp, p.pp
    dp = plan.dp
    etp, ep = p.expert_tp, p.ep
    edp = plan.expert_dp
    dp_cp = dp * cp
    rep = p.dp_replicate if p.dp_replicate > 1 else 1
    shard = dp_cp // rep
    return Layout(
        tp=place(tp, 1, g),
        cp=place(cp, tp, g),
        dp=place(dp_cp, tp, g),
        dp_shard=place(shard, tp, g),
        dp_replicate=place(rep, tp * shard, g),
        ep=place(ep, etp, g),
        expert_dp=place(edp, etp * ep, g),
        pp=place(2 if pp > 1 else 1, tp * cp * dp, g),
    )
