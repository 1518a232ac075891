"""The normal form of a plan: one plan for one launched job where a framework runs two spellings alike.

TorchTitan data parallelism at a shard group of one.  torchtitan 0.3.0 ``distributed/parallel_dims.py``:
``dp_shard = -1`` resolves to ``world // (dp_replicate * cp * tp * pp)``, ``fsdp_enabled = dp_shard > 1 or
cp > 1``, and the FSDP mesh is ``fsdp = dp_shard * cp``; ``models/llama3/parallelize.py`` always runs
``apply_fsdp_to_decoder`` on ``["dp_replicate", "fsdp"]`` (``["fsdp"]`` without replicas) -- "with
shard_degree=1 it is a no-op for the all-gather but still installs the MixedPrecisionPolicy".  So at
``dp_shard * cp = 1`` every rank keeps whole fp32 parameters, gradients and Adam moments (nothing is
sharded), no parameter is all-gathered across GPUs, and the replicas (if any) all-reduce each unit's
gradients: the job a ``dp_sharding = "none"`` plan describes (DDP over ``dp`` ranks), and the one the
TorchTitan reader gives for that TOML (``adapters/torchtitan.py``: FSDP iff ``fsdp_enabled``).  A
TorchTitan plan saying ``"full"`` there (a tuned TP x PP that leaves no shard rank) is therefore
rewritten to ``"none"`` with ``dp_replicate = 1`` and ``overlap_param_gather`` off (nothing to gather);
its memory and time are unchanged: the projection prices the normal form of the plan it is given
(:func:`normal_copy`; ``projection/dryrun.py``, ``tuner/exact_bound.py``), so an unvalidated copy in the
other spelling (the tuner's ``apply_knobs``) projects as its validated plan does.  Under EP the routed
experts are still FSDP-sharded there: ``parallel_dims.py`` builds ``efsdp = dp_shard * cp * tp / ep``
whenever ``ep > 1`` and ``apply_fsdp_to_decoder`` places them on ``["dp_replicate", "efsdp"]`` (``efsdp``
= 2 at TP 4 x EP 2), in both spellings (one TOML); ``memory/estimate.py`` ``titan_args`` (``Se``) and
``cost/dp_comm.py`` ``held_parameters`` hold that expert shard.

Megatron is left as written: ``--use-megatron-fsdp`` / ``--use-torch-fsdp2`` at DP 1 still build
Megatron-FSDP's (or FSDP2's) own buffers and its recipe states the flag, so ``"full"`` at DP 1 is a
different job from DDP there and reads back as written.
"""

from __future__ import annotations

from primus_launch.plan.sections import PlanSections


def titan_shard_degree(plan: PlanSections) -> int:
    """TorchTitan's FSDP mesh size ``dp_shard x cp`` of ``plan`` under its ``dp_sharding`` (``dp_shard =
    dp / dp_replicate`` with FSDP, 1 with DDP; torchtitan 0.3.0 ``parallel_dims.py``)."""
    p = plan.parallel
    shard = plan.dp // max(1, p.dp_replicate) if p.dp_sharding == "full" else 1
    return shard * p.cp


def _outside_normal_form(plan: PlanSections) -> bool:
    """Whether ``plan`` is a TorchTitan plan saying ``"full"`` over a shard group of one (module doc)."""
    p = plan.parallel
    if plan.framework != "torchtitan" or p.dp_sharding != "full" or plan.world_size % (p.tp * p.cp * p.pp):
        return False
    return titan_shard_degree(plan) == 1


def normalize(plan: PlanSections) -> None:
    """Put ``plan`` (in place, before its legality check) in the normal form above: a TorchTitan plan with
    ``dp_sharding = "full"`` and ``dp_shard x cp = 1`` becomes ``"none"``, ``dp_replicate = 1``,
    ``overlap_param_gather = False`` (torchtitan 0.3.0 ``ParallelDims.fsdp_enabled`` is false there)."""
    if not _outside_normal_form(plan):
        return
    plan.parallel = plan.parallel.model_copy(update={"dp_sharding": "none", "dp_replicate": 1})
    plan.training = plan.training.model_copy(update={"overlap_param_gather": False})


def normal_copy(plan: PlanSections) -> PlanSections:
    """``plan`` itself where it is in the normal form, else a normalized shallow copy (the caller's plan is left
    as it is): what the projection prices, so both spellings of one job project alike."""
    if not _outside_normal_form(plan):
        return plan
    q = plan.model_copy()
    normalize(q)
    return q
