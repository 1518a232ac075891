"""Legality pre-filter for the tuner: divisibility rules, then per-GPU memory.

:func:`prefilter` answers why a candidate plan cannot run (one line naming the field, value and
what is allowed, or the memory verdict), or ``None`` when it can.  It is called for every
candidate of a search space, so it avoids pydantic work per call: the divisibility rules are
:func:`primus_launch.plan.legality_problems` (plain attribute reads on the candidate), and the
memory model is :func:`memory.mcore_stage_memory`, cached on plain ints/strings (parameter counts and
per-layer activation bytes are cached per architecture and degrees in :mod:`params` /
:mod:`memory`), with only the peak compared here (no :class:`MemoryReport` is built).
``scripts/bench_prefilter.py`` prints the candidates checked per second on one core.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from primus_launch.plan import Plan, PlanError, legality_problems
from primus_launch.projection.hardware.gpus import GiB, get_gpu
from primus_launch.projection.memory.estimate import (
    mcore_stage_memory,
    titan_args,
    titan_gemm_workspaces,
    titan_stage_memory,
    mcore_args,
    plan_outside_bytes,
    verdict_peak,
)
from primus_launch.projection.memory.verdict import band_for, verdict



@lru_cache(maxsize=64)
def _capacity(gpu: str) -> float:
    return float(get_gpu(gpu).hbm_bytes)


def memory_peak(plan: Plan, memory_basis: str = "reserved") -> tuple[int, int, int]:
    """(peak bytes per GPU the verdict compares, worst stage, bytes of it outside the caching allocator) of
    :func:`memory.estimate_memory` (its ``oom_peak_bytes``: the basis peak less the free cached segments the
    allocator releases before it raises out of memory, :func:`memory.estimate.verdict_peak`), without the
    report."""
    if plan.framework == "torchtitan":
        stages = titan_stage_memory(*titan_args(plan), gemm_ws=titan_gemm_workspaces(plan))
    else:
        stages = mcore_stage_memory(*mcore_args(plan))
    outside = int(sum(plan_outside_bytes(plan).values()))
    worst = max(stages, key=lambda s: verdict_peak(s, memory_basis))
    return verdict_peak(worst, memory_basis) + outside, worst.stage, outside


def prefilter(plan: Plan, margin: float = 0.0, memory_basis: str = "reserved") -> Optional[str]:
    """Why ``plan`` is illegal (divisibility first, then memory), or ``None`` when it may run.

    Memory: illegal when the verdict (:mod:`memory.verdict`) is ``does not fit``: even the bottom of the
    projection's error band (``memory_basis``: the estimated reserved peak less the free cached segments the
    allocator releases before it raises, or the allocated peak; plus the memory outside the allocator) exceeds ``capacity * (1 - margin)`` with the capacity of
    ``plan.cluster.gpu`` from the hardware database; ``tight`` plans pass.
    """
    problems = legality_problems(plan)
    if problems:
        return str(PlanError(*problems[0]))
    peak, stage, outside = memory_peak(plan, memory_basis)
    low, high, _, _ = band_for(plan.framework)
    if verdict(peak, _capacity(plan.cluster.gpu), low, high, margin, outside=outside) == "does not fit":
        usable = _capacity(plan.cluster.gpu) * (1.0 - margin)
        return (f"memory: peak {peak / GiB:.1f} GiB per GPU on pipeline stage {stage} exceeds "
                f"{usable / GiB:.1f} GiB usable ({plan.cluster.gpu} capacity with margin {margin:.0%}, {memory_basis} "
                f"basis, error band {low:+.0%}/{high:+.0%})")
    return None
