"""Legality pre-filter for the tuner: divisibility rules, then per-GPU memory.

:func:`prefilter` answers why a candidate plan cannot run (one line naming the field, value and
what is allowed, or the memory verdict), or ``None`` when it can.  It is called for every
candidate of a search space, so it avoids pydantic work per call: the divisibility rules are
:func:`primus_launch.plan.legality_problems` (plain attribute reads on the candidate), and the
memory model is ``memory.estimate.memory_peak`` (``mcore_stage_memory`` / ``titan_stage_memory``), cached on plain ints/strings (parameter counts and
per-layer activation bytes are cached per architecture and degrees in :mod:`params` /
:mod:`memory`), with only the peak compared here (no :class:`MemoryReport` is built).
``scripts/bench_prefilter.py`` prints the candidates checked per second on one core.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from primus_launch.plan import Plan, PlanError, legality_problems
from primus_launch.projection.hardware.gpus import GiB, get_gpu
from primus_launch.projection.memory.estimate import memory_peak


@lru_cache(maxsize=64)
def _capacity(gpu: str) -> float:
    return float(get_gpu(gpu).hbm_bytes)


def prefilter(plan: Plan, margin: float = 0.05, memory_basis: str = "reserved") -> Optional[str]:
    """Why ``plan`` is illegal (divisibility first, then memory), or ``None`` when it may run.

    Memory: illegal when the peak per GPU (``memory_basis``: the estimated reserved or the allocated
    peak, plus the memory outside the allocator) exceeds ``capacity * (1 - margin)`` with the capacity
    of ``plan.cluster.gpu`` from the hardware database.
    """
    problems = legality_problems(plan)
    if problems:
        return str(PlanError(*problems[0]))
    peak, stage = memory_peak(plan, memory_basis)
    usable = _capacity(plan.cluster.gpu) * (1.0 - margin)
    if peak > usable:
        return (f"memory: peak {peak / GiB:.1f} GiB per GPU on pipeline stage {stage} exceeds "
                f"{usable / GiB:.1f} GiB usable ({plan.cluster.gpu} HBM with margin {margin:.0%}, {memory_basis} basis)")
    return None
