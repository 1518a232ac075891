"""Projection as a library call: ``project(plan) -> ProjectionResult``.

The CLI only renders what this returns; the tuner calls it (or ``project_dry_run``) in-process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult

MeasureDevice = Literal["cpu", "cuda"]


def default_measure_device() -> MeasureDevice:
    """``cuda`` when a GPU is visible, else ``cpu`` (CPU timings only check the path)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def project(
    plan: Plan,
    *,
    dry_run: bool = True,
    memory_margin: float = 0.0,
    measure_device: Optional[MeasureDevice] = None,
    record_timeline: bool = False,
    cache_dir: Optional[Path] = None,
    memory_basis: str = "reserved",
) -> ProjectionResult:
    """Project one training iteration of ``plan`` on its target cluster.

    ``dry_run=True``: pure simulation (roofline/efficiency models of the target GPU).
    ``dry_run=False``: build the real framework layers at reduced size on the local device,
    measure them, and upscale analytically (``projection.measure``).
    ``memory_basis``: what ``fits`` compares with the GPU's capacity -- ``"reserved"`` (default: the
    caching allocator's estimated reserved peak) or ``"allocated"`` (the allocated peak); both add the
    memory outside the allocator (:func:`projection.memory.estimate.estimate_memory`).
    """
    from primus_launch.plan.normal_form import normal_copy
    from primus_launch.projection.hardware.gpus import check_precision

    plan = normal_copy(plan)   # one price per launched job, measured or not (plan/normal_form.py)
    check_precision(plan.cluster.gpu, plan.training.precision, plan.training.fp8_recipe,
                    plan.training.fp4_recipe)  # unknown GPU -> PlanError before any work
    check_memory_args(memory_margin, memory_basis)
    substituted = not dry_run and plan.model.is_hybrid
    if dry_run or substituted:
        from primus_launch.projection.dryrun import project_dry_run

        result = project_dry_run(plan, memory_margin=memory_margin, record_timeline=record_timeline)
        if substituted:   # megatron-core's MambaMixer needs mamba_ssm / causal_conv1d (CUDA kernels) to be built
            result = result.model_copy(update={"notes": list(result.notes) + [
                "measured path: not measured -- the Mamba layers of a hybrid stack need mamba_ssm and causal_conv1d "
                "(CUDA-only kernels; megatron-core 0.16.1 MambaMixer raises ImportError without them): the dry-run "
                "projection is substituted"]})
    else:
        from primus_launch.projection.measure.upscale import project_measured

        from primus_launch.projection.dryrun import as_stated
        from primus_launch.projection.hardware.gpus import resolve_power_cap

        device = measure_device or default_measure_device()
        run = resolve_power_cap(plan)  # the target GPU at the stated power cap (Cluster.power_limit_w)
        result = project_measured(run, device=device, memory_margin=memory_margin,
                                  record_timeline=record_timeline, cache_dir=cache_dir, memory_basis=memory_basis)
        result = as_stated(plan, run, result)
    if memory_basis != result.memory.memory_basis:
        from primus_launch.projection.memory.estimate import estimate_memory

        result = result.model_copy(update={"memory": estimate_memory(plan, margin=memory_margin,
                                                                     memory_basis=memory_basis)})
    return with_unmodelled(result)


def check_memory_args(memory_margin: float, memory_basis: str) -> None:
    """The memory verdict's arguments of :func:`project` (and of the tuner's ``tune``) checked: ``memory_margin`` a
    fraction in [0, 1), ``memory_basis`` ``reserved`` or ``allocated``; a one-line :class:`PlanError` naming the
    field, the value and what is allowed."""
    from primus_launch.plan import PlanError

    if not 0.0 <= memory_margin < 1.0:
        raise PlanError("memory_margin", memory_margin, "a fraction in [0, 1)")
    if memory_basis not in ("reserved", "allocated"):
        raise PlanError("memory_basis", memory_basis, "reserved or allocated")


def with_unmodelled(result: ProjectionResult) -> ProjectionResult:
    """``result`` with every setting of its plan it does not model in ``warnings`` (each once): the reader's
    (:func:`with_reader_warnings`) first, then the memory flags (``cost/flags.py`` ``unmodelled_memory_flags``);
    what :func:`project` returns, and what the CLI says of a tune's best plan (the tuner scores with the bare
    dry-run)."""
    from primus_launch.projection.cost.flags import unmodelled_memory_flags

    have = {(w.flag, w.value) for w in result.warnings}
    mem = [w for w in unmodelled_memory_flags(result.plan) if (w.flag, w.value) not in have]
    if mem:
        result = result.model_copy(update={"warnings": list(result.warnings) + mem})
    return with_reader_warnings(result)


def with_reader_warnings(result: ProjectionResult) -> ProjectionResult:
    """``result`` with the reader's not-modelled flags (``plan.source.unmodelled``) first in its
    ``warnings`` (each once)."""
    src = result.plan.source
    if src is None or not src.unmodelled:
        return result
    seen = {(w.flag, w.value) for w in src.unmodelled}
    rest = [w for w in result.warnings if (w.flag, w.value) not in seen]
    return result.model_copy(update={"warnings": list(src.unmodelled) + rest})
