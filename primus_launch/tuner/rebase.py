"""A legal starting plan of a recipe on another cluster, for a tune whose recipe's own parallel layout is not
legal there (``--tune recipe --nodes 1 --gpus-per-node 2`` of a TP-8 recipe): the model, sequence, global batch,
precision and every other knob are kept; the parallel layout (TP, PP, CP, EP, the pipeline split) is reset to the
smallest model parallelism the plan's own legality rules (``plan/legality.py``) accept on the new cluster, DP
taking the rest.  The search then runs over that cluster's space from it; the plan is a seed, not a reference
(the result says there is no legal reference on that cluster)."""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import Plan, PlanError


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def legal_seed(plan: Plan, cluster: dict) -> Optional[Plan]:
    """The first legal plan of ``plan`` on ``cluster`` (``gpu``, ``num_nodes``, ``gpus_per_node``, as
    ``Plan.cluster``) with TP in the GPUs of a node and PP dividing the layers, ordered by TP x PP then TP
    (CP = EP = 1, no virtual stages, an even pipeline split; micro batch the recipe's, else 1); None when
    no such layout is legal (the caller reports the recipe's own error)."""
    try:
        c = plan.cluster.model_copy(update=cluster)
        world = c.num_nodes * c.gpus_per_node
    except (PlanError, ValueError, TypeError):
        return None
    layers = plan.model.num_layers
    layouts = sorted(((tp, pp) for tp in _divisors(c.gpus_per_node) for pp in _divisors(layers)
                      if world % (tp * pp) == 0), key=lambda x: (x[0] * x[1], x[0]))
    p = plan.parallel
    for tp, pp in layouts:
        for mbs in dict.fromkeys((plan.training.micro_batch_size, 1)):
            try:
                return plan.with_changes(
                    cluster=dict(cluster),
                    parallel={"tp": tp, "pp": pp, "vpp": 1, "cp": 1, "ep": 1, "etp": None, "dp_replicate": 1,
                              "microbatch_group": None, "pipeline_layout": None,
                              "pipeline_layers_first_stage": None, "pipeline_layers_last_stage": None,
                              "sequence_parallel": p.sequence_parallel and tp > 1},
                    training={"micro_batch_size": mbs})
            except (PlanError, ValueError):
                continue
    return None
