"""A candidate of the tuner's search: the :class:`Knobs` tuple (the values of a
:class:`~primus_launch.plan.Plan` the tuner may change, structural axes first, execution flags after
:data:`N_STRUCT`), read off a plan (:func:`knobs_of`), applied to one (:func:`apply_knobs`) and
checked against every rule (:func:`problems_of`).  Which values each axis takes, and the
enumeration of the legal combinations, are :mod:`primus_launch.tuner.space`'s.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from primus_launch.plan import Plan, framework_problems, legality_problems
from primus_launch.tuner import rules


class Knobs(NamedTuple):
    """One candidate configuration (the values the tuner may change)."""

    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    etp: Optional[int]  # None = same as tp
    sp: bool
    mbs: int
    dp_sharding: str
    dp_replicate: int
    rc_granularity: str
    rc_method: str
    rc_layers: Optional[int]
    rc_modules: tuple[str, ...]
    schedule: str
    first_stage_layers: Optional[int]
    last_stage_layers: Optional[int]
    acc_embedding: bool
    acc_loss: bool
    layout: Optional[str]
    # execution flags (``space.py`` ``_FlagOptions``)
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    tp_comm_overlap: bool
    cuda_graph_impl: str
    cuda_graph_scope: tuple[str, ...]
    dispatcher: str
    ep_overlap: bool
    delay_wgrad: bool
    compile: bool
    offload_layers: int
    offload_modules: tuple[str, ...]
    optimizer_offload: float
    precision: str
    fp8_recipe: Optional[str]
    fp8_param_gather: bool
    moments: tuple[str, str]  # (exp_avg, exp_avg_sq) dtypes


AXES: tuple[str, ...] = Knobs._fields
N_STRUCT = AXES.index("overlap_grad_reduce")  # structural axes come first, execution flags after

#: plan field -> the knob axis that sets it (``Source.fixed`` names plan fields)
FIELD_AXES: dict[str, str] = {
    "parallel.tp": "tp", "parallel.pp": "pp", "parallel.vpp": "vpp", "parallel.cp": "cp", "parallel.ep": "ep",
    "parallel.etp": "etp", "parallel.sequence_parallel": "sp", "training.micro_batch_size": "mbs",
    "parallel.dp_sharding": "dp_sharding", "parallel.dp_replicate": "dp_replicate",
    "training.recompute.granularity": "rc_granularity", "training.recompute.method": "rc_method",
    "training.recompute.num_layers": "rc_layers", "training.recompute.modules": "rc_modules",
    "training.pipeline_schedule": "schedule", "parallel.pipeline_layers_first_stage": "first_stage_layers",
    "parallel.pipeline_layers_last_stage": "last_stage_layers",
    "parallel.account_for_embedding_in_pipeline_split": "acc_embedding",
    "parallel.account_for_loss_in_pipeline_split": "acc_loss", "parallel.pipeline_layout": "layout",
    "training.overlap_grad_reduce": "overlap_grad_reduce", "training.overlap_param_gather": "overlap_param_gather",
    "training.tp_comm_overlap": "tp_comm_overlap", "training.cuda_graph_impl": "cuda_graph_impl",
    "training.cuda_graph_scope": "cuda_graph_scope", "training.moe_token_dispatcher": "dispatcher",
    "training.overlap_moe_expert_parallel_comm": "ep_overlap", "training.delay_wgrad_compute": "delay_wgrad",
    "training.compile": "compile", "training.offload.activation_layers": "offload_layers",
    "training.offload.activation_modules": "offload_modules", "training.offload.optimizer_fraction": "optimizer_offload",
    "training.precision": "precision", "training.fp8_recipe": "fp8_recipe",
    "training.fp8_param_gather": "fp8_param_gather", "training.exp_avg_dtype": "moments",
    "training.exp_avg_sq_dtype": "moments", "training.precision_aware_optimizer": "moments",
}


class ProgramLimits(NamedTuple):
    """What the recipe's training program cannot run (``plan.source.fixed``), as knob axes: ``pinned``
    axes keep the recipe's value, ``banned`` (axis, value) pairs are values it cannot take."""

    own: Knobs
    pinned: tuple[int, ...]
    banned: tuple[tuple[int, str], ...]

    def ok(self, k: tuple, start: int = 0) -> bool:
        """Whether candidate values ``k`` (the axes from ``start`` on) stay inside the limits."""
        n = len(k)
        for i in self.pinned:
            if start <= i < start + n and k[i - start] != self.own[i]:
                return False
        for i, v in self.banned:
            if start <= i < start + n and str(k[i - start]) == v and str(self.own[i]) != v:
                return False
        return True

    def __bool__(self) -> bool:
        return bool(self.pinned or self.banned)


def program_limits(plan: Plan) -> ProgramLimits:
    """The knob axes ``plan``'s training program pins or limits (:attr:`Source.fixed`, read by the adapters
    from the program's argument parser and device: ``adapters/program_limits.py``)."""
    fixed = plan.source.fixed if plan.source is not None else []
    pinned, banned = set(), []
    for entry in fixed:
        field, _, value = entry.partition("=")
        axis = FIELD_AXES.get(field)
        if axis is None:
            continue
        if value:
            banned.append((AXES.index(axis), value))
        else:
            pinned.add(AXES.index(axis))
    return ProgramLimits(knobs_of(plan), tuple(sorted(pinned)), tuple(banned))


def program_problems(plan: Plan, k: Knobs) -> list[tuple[str, object, str]]:
    """The knob values of ``k`` that ``plan``'s training program cannot run (:func:`program_limits`)."""
    lim = program_limits(plan)
    prog = plan.source.program if plan.source is not None else None
    out = []
    for i in lim.pinned:
        if k[i] != lim.own[i]:
            out.append((AXES[i], k[i], f"{lim.own[i]!r}: the recipe's program {prog} cannot change it"))
    for i, v in lim.banned:
        if str(k[i]) == v and str(lim.own[i]) != v:
            out.append((AXES[i], k[i], f"not {v}: the recipe's program {prog} cannot run it"))
    return out


def knobs_of(plan: Plan) -> Knobs:
    """The knob values of an existing plan."""
    p, t = plan.parallel, plan.training
    r, o = t.recompute, t.offload
    return Knobs(p.tp, p.pp, p.vpp, p.cp, p.ep, p.etp, p.sequence_parallel, t.micro_batch_size,
                 p.dp_sharding, p.dp_replicate, r.granularity, r.method, r.num_layers, tuple(r.modules),
                 t.pipeline_schedule, p.pipeline_layers_first_stage, p.pipeline_layers_last_stage,
                 p.account_for_embedding_in_pipeline_split, p.account_for_loss_in_pipeline_split,
                 p.pipeline_layout, t.overlap_grad_reduce, t.overlap_param_gather, t.tp_comm_overlap,
                 t.cuda_graph_impl, tuple(t.cuda_graph_scope), t.moe_token_dispatcher,
                 t.overlap_moe_expert_parallel_comm, t.delay_wgrad_compute, t.compile, o.activation_layers,
                 tuple(o.activation_modules), o.optimizer_fraction, t.precision, t.fp8_recipe, t.fp8_param_gather,
                 (t.exp_avg_dtype, t.exp_avg_sq_dtype))


_FSDP_SHARDINGS = ("full", "optimizer_grads")


def accumulation_fused(plan: Plan, dp_sharding: str) -> bool:
    """Whether ``plan`` moved to ``dp_sharding`` keeps Megatron's gradient-accumulation fusion: moving a Megatron
    plan onto Megatron-FSDP (or torch FSDP2) writes ``--no-gradient-accumulation-fusion``
    (``adapters/megatron_args.py`` ``desired_args``: the user guide's required flags; ``validate_args`` for torch
    FSDP2), which the plan prices (``cost/wgrad_accumulation.py``); a plan already sharded keeps its own value."""
    return plan.training.gradient_accumulation_fusion and not (
        plan.framework == "megatron" and dp_sharding in _FSDP_SHARDINGS
        and plan.parallel.dp_sharding not in _FSDP_SHARDINGS)


def apply_knobs(plan: Plan, k: Knobs) -> Plan:
    """``plan`` with the knob values of ``k`` (an unvalidated copy: pydantic ``model_copy``; the
    enumeration guarantees legality, :func:`validated` re-checks when it matters).

    The precision-aware optimizer is on when the recipe had it (kept) or when BF16 moments or
    optimizer offloading need it (Megatron's HybridDeviceOptimizer reuses its code path)."""
    t = plan.training
    # the recipe's Megatron micro-batch group stays where its pipeline shape does and Megatron still
    # accepts it (group in [pp, m], last group empty or >= pp); else Megatron's default (pp)
    group = plan.parallel.microbatch_group
    if group is not None:
        dp = plan.cluster.world_size // (k.tp * k.pp * k.cp)
        m = t.global_batch_size // max(1, k.mbs * dp)
        if (k.pp, k.vpp) != (plan.parallel.pp, plan.parallel.vpp) or not (k.pp <= group <= m) or 0 < m % group < k.pp:
            group = None
    par = plan.parallel.model_copy(update=dict(
        microbatch_group=group,
        tp=k.tp, pp=k.pp, vpp=k.vpp, cp=k.cp, ep=k.ep, etp=k.etp, sequence_parallel=k.sp,
        dp_sharding=k.dp_sharding, dp_replicate=k.dp_replicate,
        pipeline_layers_first_stage=k.first_stage_layers, pipeline_layers_last_stage=k.last_stage_layers,
        account_for_embedding_in_pipeline_split=k.acc_embedding, account_for_loss_in_pipeline_split=k.acc_loss,
        pipeline_layout=k.layout))
    # the recipe's Primus recompute_layer_ids (global ids, valid for any placement) stay with its own
    # recompute knobs; any other recompute choice is one of Megatron's methods
    own = t.recompute
    keep_ids = (k.rc_granularity, k.rc_method, k.rc_layers) == (own.granularity, own.method, own.num_layers)
    rc = own.model_copy(update=dict(granularity=k.rc_granularity, method=k.rc_method, num_layers=k.rc_layers,
                                    modules=k.rc_modules, layer_ids=own.layer_ids if keep_ids else ()))
    off = t.offload.model_copy(update=dict(activation_layers=k.offload_layers, activation_modules=k.offload_modules,
                                           optimizer_fraction=k.optimizer_offload))
    pao = t.precision_aware_optimizer or k.moments != ("fp32", "fp32") or k.optimizer_offload > 0
    fusion = accumulation_fused(plan, k.dp_sharding)
    tr = t.model_copy(update=dict(
        micro_batch_size=k.mbs, recompute=rc, pipeline_schedule=k.schedule, offload=off,
        overlap_grad_reduce=k.overlap_grad_reduce, overlap_param_gather=k.overlap_param_gather,
        tp_comm_overlap=k.tp_comm_overlap, cuda_graph_impl=k.cuda_graph_impl, cuda_graph_scope=k.cuda_graph_scope,
        moe_token_dispatcher=k.dispatcher, overlap_moe_expert_parallel_comm=k.ep_overlap,
        # sync-free MoE is Primus-Turbo DeepEP's (plan/sections.py moe_sync_free): a switch to another dispatcher
        # leaves it (the Primus writer lowers turbo_sync_free_moe_stage to 1 there; a candidate that kept it was
        # priced without the host sync and could not be written back: "cannot express training.moe_sync_free")
        moe_sync_free=t.moe_sync_free and k.dispatcher == "deepep",
        delay_wgrad_compute=k.delay_wgrad, compile=k.compile,
        # TorchTitan's loss is compiled only with the model's compile on (0.3 compile.enable gates every component;
        # v0.2 training.compile is one switch): compile turned off leaves nothing compiled, turned on compiles the
        # loss too (0.3's default components, model + loss; what the writer makes of the recipe)
        compile_loss=t.compile_loss if k.compile == t.compile else k.compile,
        precision=k.precision, fp8_recipe=k.fp8_recipe,
        fp8_param_gather=k.fp8_param_gather, precision_aware_optimizer=pao,
        # fp8 / fp4 over fp32 or fp16 parameters (no --bf16) stays so while the candidate keeps a low precision;
        # a bf16 candidate is --bf16 (plan/legality.py: the field only with fp8 / fp4)
        lowp_params_dtype=t.lowp_params_dtype if k.precision in ("fp8", "fp4") else None,
        # the routing-map padding is for FP8 / FP4 GEMMs under the alltoall / flex dispatchers: Megatron's
        # TransformerConfig refuses it elsewhere (TEGroupedMLP then pads the experts' input itself)
        moe_router_padding_for_quantization=t.moe_router_padding_for_quantization and k.precision in ("fp8", "fp4")
        and k.dispatcher != "allgather",
        exp_avg_dtype=k.moments[0], exp_avg_sq_dtype=k.moments[1], gradient_accumulation_fusion=fusion))
    return plan.model_copy(update=dict(parallel=par, training=tr))


def validated(plan: Plan) -> Plan:
    """A fully validated copy (raises :class:`~primus_launch.plan.PlanError` when illegal)."""
    return Plan.model_validate(plan.model_dump())


def problems_of(plan: Plan, k: Knobs) -> list[tuple[str, object, str]]:
    """Every rule ``plan`` with knobs ``k`` breaks: the plan module's, the tuner's knob and GPU
    rules, the framework's (``plan.framework_problems``: TorchTitan's) and the recipe's training
    program's (:func:`program_problems`)."""
    p = apply_knobs(plan, k)
    return (legality_problems(p) + rules.knob_problems(p) + rules.gpu_problems(p) + framework_problems(p)
            + program_problems(plan, k))
