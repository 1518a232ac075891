"""TorchTitan pipeline stage layout and schedule names <-> the plan's ``pp``/``vpp``/uneven-stage fields.

The split itself is torchtitan's own code (``torchtitan.distributed.pipeline_parallel``, 0.3.0; the
v0.2.x job keys it reads are the same: ``pipeline_parallel_layers_per_stage``,
``pipeline_parallel_first_stage_less_layers`` and ``..._last_stage_less_layers``, both default 1):

- stages ``S = ceil((L + first_less + last_less) / layers_per_stage)`` when ``layers_per_stage`` is
  set, else ``pp x (1 for single-stage schedules, 2 for looped ones)`` (``_get_pipeline_metadata``);
- ``_generate_llm_fqn_per_model_part(S, L, first_less, last_less)`` deals the ``L + first + last``
  "effective" layers evenly over the stages (the first ``extra`` stages one more), the embedding
  counting ``first_less`` layers on stage 0 and norm+output ``last_less`` on the last stage;
- ``_get_pp_rank_to_stage_indices_mapping``: stage ``s`` runs on rank ``s mod pp`` ("loop"), or in a V
  (rank r holds stages r and 2pp-1-r) for ZBVZeroBubble / DualPipeV.

Schedule classes come from ``torch.distributed.pipelining.schedules.get_schedule_class``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional

from primus_launch.plan import PipelineSchedule, PlanError

# torch.distributed.pipelining schedule names (get_schedule_class) usable for LLM training in titan
TITAN_SCHEDULES = ("1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble",
                   "ZBVZeroBubble", "DualPipeV")
_TO_PLAN: dict[str, PipelineSchedule] = {
    "1f1b": "1f1b", "interleaved1f1b": "interleaved_1f1b", "gpipe": "gpipe", "loopedbfs": "gpipe",
    "interleavedzerobubble": "zb_h1", "zbvzerobubble": "zbv", "dualpipev": "zbv",
}


def plan_schedule(name: str) -> PipelineSchedule:
    """TorchTitan ``pipeline_parallel_schedule`` -> plan schedule (LoopedBFS is looped GPipe,
    InterleavedZeroBubble is the interleaved ZB-H1 schedule, DualPipeV runs the ZBV V-layout)."""
    key = str(name).lower()
    if key not in _TO_PLAN:
        raise PlanError("parallelism.pipeline_parallel_schedule", name, f"one of {', '.join(TITAN_SCHEDULES)}")
    return _TO_PLAN[key]


def titan_schedule(schedule: PipelineSchedule, vpp: int) -> str:
    """Plan schedule (+ chunks per rank) -> the canonical torchtitan schedule name."""
    if schedule == "1f1b":
        return "1F1B"
    if schedule == "interleaved_1f1b":
        return "Interleaved1F1B"
    if schedule == "gpipe":
        return "GPipe" if vpp == 1 else "LoopedBFS"
    if schedule == "zb_h1":
        return "InterleavedZeroBubble"
    return "ZBVZeroBubble"


def is_single_stage(name: str) -> bool:
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class

    return issubclass(get_schedule_class(name), PipelineScheduleSingle)


def _rank_counts(pp: int, schedule: str, per_stage: list[int]) -> tuple[int, ...]:
    from torchtitan.distributed.pipeline_parallel import _get_pp_rank_to_stage_indices_mapping

    stages = len(per_stage)
    try:
        return tuple(sum(per_stage[s] for s in _get_pp_rank_to_stage_indices_mapping(r, pp, schedule, stages))
                     for r in range(pp))
    except AssertionError as e:
        raise PlanError("parallelism.pipeline_parallel_schedule", schedule, " ".join(str(e).split())) from None


def explicit_rank_layers(pp: int, schedule: str, parts: list) -> tuple[int, tuple[int, ...]]:
    """Layout from ``module_fqns_per_model_part`` (a list of module-name lists, one per stage)."""
    key = "parallelism.module_fqns_per_model_part"
    if not isinstance(parts, list) or not all(isinstance(x, list) for x in parts) or len(parts) % pp:
        raise PlanError(key, parts, f"a list of module-name lists, a multiple of pipeline_parallel_degree={pp} long")
    plan_schedule(schedule)
    per_stage = [sum(1 for m in part if str(m).startswith("layers.")) for part in parts]
    return len(parts) // pp, _rank_counts(pp, schedule, per_stage)


@lru_cache(maxsize=4096)
def rank_layers(num_layers: int, pp: int, schedule: str, layers_per_stage: Optional[int],
                first_less: int, last_less: int) -> tuple[int, tuple[int, ...]]:
    """(stages per rank, decoder layers on each PP rank) exactly as torchtitan splits the model.

    Raises :class:`PlanError` naming the torchtitan key when torchtitan would refuse the layout.
    """
    if pp == 1:
        return 1, (num_layers,)
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part

    plan_schedule(schedule)  # validates the name
    single = is_single_stage(schedule)
    if layers_per_stage is not None:
        stages = math.ceil((num_layers + first_less + last_less) / layers_per_stage)
        key = "parallelism.pipeline_parallel_layers_per_stage"
        if stages % pp:
            raise PlanError(key, layers_per_stage,
                            f"gives {stages} stages, which pipeline_parallel_degree={pp} must divide")
        if single and stages != pp:
            raise PlanError(key, layers_per_stage, f"gives {stages // pp} stages per rank; {schedule} runs exactly 1")
        if not single and stages < 2 * pp:
            raise PlanError(key, layers_per_stage, f"gives {stages // pp} stage per rank; {schedule} needs >= 2")
        if plan_schedule(schedule) == "zbv" and stages != 2 * pp:
            raise PlanError(key, layers_per_stage, f"gives {stages // pp} stages per rank; {schedule} needs exactly 2")
    else:
        stages = pp * (1 if single else 2)
    try:
        parts = _generate_llm_fqn_per_model_part(stages, num_layers, first_less, last_less)
    except ValueError as e:
        raise PlanError("parallelism.pipeline_parallel_degree", pp, " ".join(str(e).split())) from None
    per_stage = [sum(1 for m in part if m.startswith("layers.")) for part in parts]
    return stages // pp, _rank_counts(pp, schedule, per_stage)


@lru_cache(maxsize=4096)
def plan_layout(num_layers: int, vpp: int, counts: tuple[int, ...]) -> tuple[Optional[int], Optional[int]]:
    """Per-rank layer counts -> the plan's (pipeline_layers_first_stage, pipeline_layers_last_stage).

    The plan's model (Megatron's): the middle ranks hold equal counts, only the first and last may
    differ, and with ``vpp > 1`` every rank's count is a multiple of vpp (equal chunks).  Exact when
    torchtitan's split has that form; otherwise the nearest such layout (least layers moved, the
    first rank kept where possible).  ``(None, None)`` = the even split.
    """
    pp = len(counts)
    if pp == 1:
        return None, None
    if len(set(counts)) == 1 and num_layers % (pp * vpp) == 0:
        return None, None
    c0, cl, middle = counts[0], counts[-1], counts[1:-1]
    if (not middle or len(set(middle)) == 1) and all(c % vpp == 0 for c in counts):
        return c0, cl
    step = vpp
    n_mid = len(middle)

    def near(x: int) -> range:
        lo = max(0, (x // step - 2) * step)
        return range(lo, x + 2 * step + 1, step)

    best: Optional[tuple] = None
    mids = sorted({e for m in (middle or (0,)) for e in near(m) if e >= step}) if n_mid else [0]
    for e in mids:
        for f in near(c0):
            last = num_layers - f - e * n_mid
            if last < 0 or last % step:
                continue
            target = (f, *([e] * n_mid), last)
            cost = (sum(abs(a - b) for a, b in zip(target, counts)), abs(f - c0))
            if best is None or cost < best[0]:
                best = (cost, f, last, e)
    if best is None:
        raise PlanError("parallelism.pipeline_parallel_degree", pp,
                        f"torchtitan's split {list(counts)} has no equal-chunk form over vpp={vpp}")
    _, f, last, e = best
    if f == e == last and num_layers % (pp * vpp) == 0:
        return None, None
    return f, last
