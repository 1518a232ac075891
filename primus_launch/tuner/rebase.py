"""A legal starting plan of a recipe on another cluster, for a tune whose recipe's own parallel layout is not
legal there (``--tune recipe --nodes 1 --gpus-per-node 2`` of a TP-8 recipe): the model, sequence, global batch,
precision and every other knob are kept; the parallel layout (TP, PP, CP, EP, the pipeline split) is reset to the
smallest model parallelism the plan's own legality rules (``plan/legality.py``) accept on the new cluster, DP
taking the rest.  PP need not divide the layers: Megatron-Core 0.16.1 places the rest on uneven first / last
stages (``--decoder-first/last-pipeline-num-layers``, ``TransformerConfig.__post_init__`` "Uneven PP") and
TorchTitan splits the model itself (``axis_values.balanced_split``), so 3 or 91 GPUs get a start where some
PP x DP fits.  The search then runs over that cluster's space from it; the plan is a seed, not a reference (the
result says there is no legal reference on that cluster).  Where no layout is legal, :func:`seed_or_why` says
why in one clause."""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import Plan, PlanError
from primus_launch.tuner.axis_values import balanced_split, divisors


def _layouts(plan: Plan, gpus_per_node: int, world: int) -> list[tuple[int, int, Optional[int], Optional[int]]]:
    """(tp, pp, first, last) with TP dividing the GPUs of a node, PP up to the layers with TP x PP dividing the
    world, the most balanced split the framework accepts; smallest TP x PP first, an even split before an uneven
    one of the same product, then the smaller TP."""
    L = plan.model.num_layers
    out = []
    for tp in divisors(gpus_per_node):
        if world % tp:
            continue
        for pp in divisors(world // tp):
            if pp > L:
                break
            split = balanced_split(L, pp, plan.framework)
            if split is not None:
                out.append((tp, pp, *split))
    return sorted(out, key=lambda x: (x[0] * x[1], x[2:] != (None, None), x[0]))


def seed_or_why(plan: Plan, cluster: dict) -> tuple[Optional[Plan], str]:
    """(the first legal plan of ``plan`` on ``cluster`` -- ``gpu``, ``num_nodes``, ``gpus_per_node`` as
    ``Plan.cluster`` -- over :func:`_layouts` with CP = EP = 1, no virtual stages, micro batch the recipe's else 1,
    or None; why none is legal, one clause naming what was tried and the rule the nearest layouts break)."""
    try:
        c = plan.cluster.model_copy(update=cluster)
        world = c.num_nodes * c.gpus_per_node
    except (PlanError, ValueError, TypeError) as e:
        return None, f"the cluster is not one ({e})"
    p = plan.parallel
    layouts = _layouts(plan, c.gpus_per_node, world)
    errors: dict[str, tuple[int, str]] = {}
    for tp, pp, first, last in layouts:
        for mbs in dict.fromkeys((plan.training.micro_batch_size, 1)):
            try:
                return plan.with_changes(
                    cluster=dict(cluster),
                    parallel={"tp": tp, "pp": pp, "vpp": 1, "cp": 1, "ep": 1, "etp": None, "dp_replicate": 1,
                              "microbatch_group": None, "pipeline_layout": None,
                              "pipeline_layers_first_stage": first, "pipeline_layers_last_stage": last,
                              "account_for_embedding_in_pipeline_split": False,
                              "account_for_loss_in_pipeline_split": False,
                              "sequence_parallel": p.sequence_parallel and tp > 1},
                    training={"micro_batch_size": mbs}), ""
            except (PlanError, ValueError) as e:
                err = _plan_error(e)
                key = err.field if err is not None else type(e).__name__
                n, example = errors.get(key, (0, str(err) if err is not None else " ".join(str(e).split())))
                errors[key] = (n + 1, example)
    tried = (f"TP (in a node of {c.gpus_per_node}) x PP (<= {plan.model.num_layers} layers, uneven stages allowed) x "
             f"DP = {world:,} GPUs")
    if not layouts:
        return None, f"no layout {tried} exists"
    rules = sorted(errors.items(), key=lambda x: -x[1][0])
    return None, (f"of {len(layouts)} layout(s) {tried}: " + ", ".join(
        f"{n} break {example}" for field, (n, example) in rules))


def _plan_error(e: ValueError) -> Optional[PlanError]:
    """The plan's own error inside a pydantic validation error (its first), else ``e`` itself or None."""
    if isinstance(e, PlanError):
        return e
    errors = getattr(e, "errors", None)
    for err in (errors() if callable(errors) else []):
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, PlanError):
            return inner
    return None


def legal_seed(plan: Plan, cluster: dict) -> Optional[Plan]:
    """The first legal plan of ``plan`` on ``cluster`` (:func:`seed_or_why`); None when no such layout is legal."""
    return seed_or_why(plan, cluster)[0]
