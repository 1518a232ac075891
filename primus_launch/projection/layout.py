"""Where each parallel group's ranks sit: nodes spanned, members per node, NICs per group.

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


def layout(plan: Plan) -> Layout:
    """Group placements of ``plan`` under Megatron's rank order (module doc)."""
    p = plan.parallel
    g = plan.cluster.gpus_per_node
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
