"""Dry-run projection: the roofline layer times (:mod:`primus_launch.projection.cost.roofline`) assembled
into an iteration (:func:`primus_launch.projection.iteration.assemble`), with the flags the model does
not price reported as warnings (:mod:`primus_launch.projection.cost.flags`) and its expected error, the
spread of the judged validation rows like it (:mod:`primus_launch.projection.band`). No torch, no GPU."""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.cost.roofline import layer_times_roofline
from primus_launch.projection.iteration import assemble
from primus_launch.projection.result import ProjectionResult


def project_dry_run(plan: Plan, *, memory_margin: float = 0.0, record_timeline: bool = False) -> ProjectionResult:
    """Dry-run projection of ``plan``: kernel-level layer times assembled into an iteration."""
    from primus_launch.projection.band import band_for
    from primus_launch.projection.cost.flags import unmodelled_flags
    from primus_launch.projection.hardware.gpus import check_precision, resolve_power_cap

    from primus_launch.plan.normal_form import normal_copy

    plan = normal_copy(plan)   # one price per launched job (plan/normal_form.py)
    check_precision(plan.cluster.gpu, plan.training.precision, plan.training.fp8_recipe, plan.training.fp4_recipe)
    refuse_unmodelled_hybrid(plan)
    run = resolve_power_cap(plan)
    res = assemble(run, layer_times_roofline(run), "dry-run", record_timeline=record_timeline,
                   memory_margin=memory_margin)
    res = as_stated(plan, run, res)
    res = res.model_copy(update={"band": band_for(plan)})
    warn = unmodelled_flags(plan)
    if warn:
        res = res.model_copy(update={"warnings": list(res.warnings) + warn})
    return res


def refuse_unmodelled_hybrid(plan: Plan) -> None:
    """Refuse, in one line, a hybrid Mamba plan with a setting the projection does not model
    (``cost/mamba.py`` ``hybrid_unmodelled``)."""
    from primus_launch.plan import PlanError
    from primus_launch.projection.cost.mamba import hybrid_unmodelled

    problems = hybrid_unmodelled(plan)
    if problems:
        raise PlanError(*problems[0])


def as_stated(plan: Plan, run: Plan, res: ProjectionResult) -> ProjectionResult:
    """``res``, the projection of ``run`` (``plan`` after ``resolve_power_cap``), reported for the plan
    as the user stated it: ``plan`` kept in the result and the cap in its notes; ``res`` itself when no
    cap applied."""
    if run is plan:
        if plan.cluster.power_limit_w is None:
            return res
        from primus_launch.projection.hardware.gpus import get_gpu

        rated = get_gpu(plan.cluster.gpu).tdp_watts  # a cap at or above the rated power: said, not silent
        return res.model_copy(update={"notes": list(res.notes) + [
            f"power cap {plan.cluster.power_limit_w:g} W at or above the rated {rated:g} W: no effect (the rated "
            "projection; nvidia-smi --power-limit accepts nothing above the board's maximum)"]})
    return res.model_copy(update={"plan": plan, "notes": list(res.notes) + [power_cap_note(run)]})


def power_cap_note(run: Plan) -> str:
    """The result note of a power-capped run (``run`` = the plan after ``resolve_power_cap``)."""
    from primus_launch.projection.cost.calibration import POWER_CAP_EXPONENT, power_cap_factor
    from primus_launch.projection.hardware.gpus import get_gpu

    g = get_gpu(run.cluster.gpu)
    f = power_cap_factor(g.power_limit_w, g.tdp_watts)
    return (f"power cap {g.power_limit_w:g} W of the rated {g.tdp_watts:g} W: compute-bound kernels run at "
            f"x {f:.3f} ((cap / rated) ** {POWER_CAP_EXPONENT}, calibration.power_cap_factor)")
