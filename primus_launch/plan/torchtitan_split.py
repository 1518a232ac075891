"""TorchTitan pipeline stage layout and schedule names <-> the plan's ``pp``/``vpp``/layout fields.

The split follows torchtitan's own code (``torchtitan/distributed/pipeline_parallel.py``, 0.3.0; the
v0.2.x job keys it reads are the same: ``pipeline_parallel_layers_per_stage``,
``pipeline_parallel_first_stage_less_layers`` and ``..._last_stage_less_layers``, both default 1),
re-stated here in plain Python so a dry run never imports torch; ``tests/test_adapter_torchtitan_snapshot.py``
checks it against torchtitan's functions for every small case:

- stages ``S = ceil((L + first_less + last_less) / layers_per_stage)`` when ``layers_per_stage`` is
  set, else ``pp x (1 for single-stage schedules, 2 for looped ones)`` (``_get_pipeline_metadata``);
- ``_generate_llm_fqn_per_model_part(S, L, first_less, last_less)`` deals the ``L + first + last``
  "effective" layers evenly over the stages (the first ``extra`` stages one more), the embedding
  counting ``first_less`` layers on stage 0 and norm+output ``last_less`` on the last stage;
- ``_get_pp_rank_to_stage_indices_mapping``: stage ``s`` runs on rank ``s mod pp`` ("loop"), or in a V
  (rank r holds stages r and 2pp-1-r) for ZBVZeroBubble / DualPipeV.

Which schedules run a single stage per rank (``PipelineScheduleSingle``): :data:`SINGLE_STAGE`, as torch
defines them (the registry snapshot, :func:`primus_launch.adapters.titan_snapshot.schedules`, reads them
from torch; a test holds the two equal).  TorchTitan's rules on a plan are
:func:`primus_launch.plan.legality.torchtitan_problems`; this module is the pipeline split they and
the tuner read, the adapters translate with it.

In the plan, torchtitan's split is stated exactly: the even split, uneven first/last stages, or
Megatron's account-for-embedding/loss split when one of those is the same placement, else a
``pipeline_layout`` string (one ``|``-separated entry per stage, in Megatron's virtual-stage order,
which is torchtitan's stage order for both the loop and the V placement).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional

from primus_launch.plan.layout import format_layout, virtual_stages_for
from primus_launch.plan.sections import PipelineSchedule, PlanError

# torch.distributed.pipelining schedule names (get_schedule_class) usable for LLM training in titan
TITAN_SCHEDULES = ("1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble",
                   "ZBVZeroBubble", "DualPipeV")
_TO_PLAN: dict[str, PipelineSchedule] = {
    "1f1b": "1f1b", "interleaved1f1b": "interleaved_1f1b", "gpipe": "gpipe", "loopedbfs": "gpipe",
    "interleavedzerobubble": "zb_h1", "zbvzerobubble": "zbv", "dualpipev": "zbv",
}
_V_SCHEDULES = ("zbvzerobubble", "dualpipev")
# which schedule classes run a single stage per rank (torch.distributed.pipelining
# ``PipelineScheduleSingle`` subclasses): read from torch into the adapters' registry snapshot, which
# tests/test_adapter_torchtitan_snapshot.py holds equal to this table
SINGLE_STAGE: dict[str, bool] = {"1F1B": True, "GPipe": True, "Interleaved1F1B": False, "LoopedBFS": False,
                                 "InterleavedZeroBubble": False, "ZBVZeroBubble": False, "DualPipeV": False}


def _canonical(name: str) -> str:
    key = str(name).lower()
    for s in TITAN_SCHEDULES:
        if s.lower() == key:
            return s
    if key in ("pipelineschedulemulti", "pipelineschedulesingle"):
        # torch's base classes, which torchtitan 0.3.0 (distributed/pipeline_parallel.py) runs as
        # _PipelineScheduleRuntime with the actions of parallelism.pipeline_parallel_schedule_csv
        raise PlanError("parallelism.pipeline_parallel_schedule", name,
                        "a schedule of the actions in parallelism.pipeline_parallel_schedule_csv: not modelled; "
                        f"modelled: one of {', '.join(TITAN_SCHEDULES)}")
    raise PlanError("parallelism.pipeline_parallel_schedule", name, f"one of {', '.join(TITAN_SCHEDULES)}")


def plan_schedule(name: str) -> PipelineSchedule:
    """TorchTitan ``pipeline_parallel_schedule`` -> plan schedule (LoopedBFS is looped GPipe,
    InterleavedZeroBubble is the interleaved ZB-H1 schedule, DualPipeV runs the ZBV V-layout)."""
    return _TO_PLAN[_canonical(name).lower()]


# plan schedule -> the torch.distributed.pipelining name (``get_schedule_class``, torch 2.13 as torchtitan 0.3.0
# runs it) of the same schedule, by stages per rank: (one stage per rank, >= 2 stages per rank).  None: torch
# has no class of that schedule, so a TorchTitan recipe cannot hold the plan.  zb_h1 is the simulator's ZB-H1 at
# one stage per rank (projection/pipeline/orders.py); torch builds it only inside ScheduleInterleavedZeroBubble,
# a PipelineScheduleMulti, which torchtitan's pipeline_parallel.py refuses below 2 stages per rank, and at 2+
# stages per rank that class runs the interleaved ZB1P order, another schedule (not modelled).
_TO_TITAN: dict[str, tuple[Optional[str], Optional[str]]] = {
    "1f1b": ("1F1B", None), "interleaved_1f1b": (None, "Interleaved1F1B"), "gpipe": ("GPipe", "LoopedBFS"),
    "zb_h1": (None, None), "zbv": (None, "ZBVZeroBubble"),
}


def titan_schedule_allowed() -> str:
    """The plan schedules a TorchTitan recipe can hold with PP, each with its torchtitan name, for refusals."""
    return ("1f1b at vpp 1 (1F1B), gpipe (GPipe at vpp 1, LoopedBFS above), interleaved_1f1b at vpp >= 2 "
            "(Interleaved1F1B) or zbv at vpp 2 (ZBVZeroBubble); torch's InterleavedZeroBubble is not modelled")


def titan_schedule(schedule: PipelineSchedule, vpp: int) -> str:
    """Plan schedule (+ chunks per rank) -> the torchtitan schedule name of the same schedule (:data:`_TO_TITAN`).

    Where torch has that schedule only at the other stage count (1f1b at vpp > 1, interleaved_1f1b or zbv at
    vpp 1) the name is returned and :func:`primus_launch.plan.legality.torchtitan_problems` refuses the vpp;
    where torch has no class of it (``zb_h1``) :class:`PlanError` names ``training.pipeline_schedule``."""
    single, multi = _TO_TITAN.get(schedule, (None, None))
    name = single if vpp == 1 else multi
    if name is None:
        name = multi if vpp == 1 else single
    if name is None:
        raise PlanError("training.pipeline_schedule", schedule,
                        f"with pp > 1 torchtitan runs {titan_schedule_allowed()}")
    return name


def is_single_stage(name: str) -> bool:
    """Whether torch's schedule ``name`` is a ``PipelineScheduleSingle`` (one stage per rank,
    :data:`SINGLE_STAGE`)."""
    return SINGLE_STAGE[_canonical(name)]


def is_v_schedule(name: str) -> bool:
    return _canonical(name).lower() in _V_SCHEDULES


def generate_split(num_stages: int, num_layers: int, input_weight: int = 1, output_weight: int = 1
                   ) -> list[int]:
    """Decoder layers per stage as torchtitan's ``_generate_llm_fqn_per_model_part`` deals them
    (``ValueError`` with torchtitan's reasons when it refuses)."""
    if num_stages < 1:
        raise ValueError("Number of stages must be at least 1")
    if num_stages == 1:
        return [num_layers]
    effective = num_layers + input_weight + output_weight
    if num_stages > effective:
        raise ValueError(f"Number of stages ({num_stages}) cannot be greater than effective layers ({effective})")
    per, extra = divmod(effective, num_stages)
    if per == 0:
        raise ValueError(f"Configuration would result in empty stages ({num_stages} stages, {effective} effective layers)")
    if input_weight > per:
        raise ValueError(f"input_weight ({input_weight}) exceeds minimum layers per stage ({per}).")
    if output_weight > per:
        raise ValueError(f"output_weight ({output_weight}) exceeds minimum layers per stage ({per}).")
    out, current = [], 0
    for s in range(num_stages):
        eff = per + (1 if s < extra else 0)
        want = eff - input_weight if s == 0 else eff - output_weight if s == num_stages - 1 else eff
        n = max(0, min(want, num_layers - current))
        out.append(n)
        current += n
    return out


def stage_ranks(pp: int, schedule: str, num_stages: int) -> list[int]:
    """The PP rank of each stage (``_get_pp_rank_to_stage_indices_mapping``)."""
    if num_stages % pp:
        raise PlanError("parallelism.pipeline_parallel_schedule", schedule,
                        f"num_stages {num_stages} must be evenly divisible by pp_degree {pp}")
    if is_v_schedule(schedule):
        if num_stages // pp != 2:
            raise PlanError("parallelism.pipeline_parallel_schedule", schedule,
                            f"v schedules assume 2 stages per rank, got {num_stages // pp}")
        return [s if s < pp else 2 * pp - 1 - s for s in range(num_stages)]
    return [s % pp for s in range(num_stages)]


def _rank_counts(pp: int, schedule: str, per_stage: list[int]) -> tuple[int, ...]:
    ranks = stage_ranks(pp, schedule, len(per_stage))
    out = [0] * pp
    for s, n in enumerate(per_stage):
        out[ranks[s]] += n
    return tuple(out)


def explicit_stage_layers(pp: int, schedule: str, parts: list) -> list[int]:
    """Decoder layers per stage of ``module_fqns_per_model_part`` (a list of module-name lists)."""
    key = "parallelism.module_fqns_per_model_part"
    if not isinstance(parts, list) or not all(isinstance(x, list) for x in parts) or len(parts) % pp:
        raise PlanError(key, parts, f"a list of module-name lists, a multiple of pipeline_parallel_degree={pp} long")
    plan_schedule(schedule)
    return [sum(1 for m in part if str(m).startswith("layers.")) for part in parts]


def explicit_rank_layers(pp: int, schedule: str, parts: list) -> tuple[int, tuple[int, ...]]:
    """(stages per rank, decoder layers per rank) of ``module_fqns_per_model_part``."""
    per_stage = explicit_stage_layers(pp, schedule, parts)
    return len(parts) // pp, _rank_counts(pp, schedule, per_stage)


@lru_cache(maxsize=4096)
def stage_layers(num_layers: int, pp: int, schedule: str, layers_per_stage: Optional[int],
                 first_less: int, last_less: int) -> tuple[int, ...]:
    """Decoder layers of every stage, in torchtitan's stage order, exactly as torchtitan splits the
    model; :class:`PlanError` naming the torchtitan key when torchtitan would refuse the layout."""
    if pp == 1:
        return (num_layers,)
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
        if is_v_schedule(schedule) and stages != 2 * pp:
            raise PlanError(key, layers_per_stage, f"gives {stages // pp} stages per rank; {schedule} needs exactly 2")
    else:
        stages = pp * (1 if single else 2)
    try:
        return tuple(generate_split(stages, num_layers, first_less, last_less))
    except ValueError as e:
        raise PlanError("parallelism.pipeline_parallel_degree", pp, " ".join(str(e).split())) from None


@lru_cache(maxsize=4096)
def rank_layers(num_layers: int, pp: int, schedule: str, layers_per_stage: Optional[int],
                first_less: int, last_less: int) -> tuple[int, tuple[int, ...]]:
    """(stages per rank, decoder layers on each PP rank) exactly as torchtitan splits the model."""
    if pp == 1:
        return 1, (num_layers,)
    per_stage = stage_layers(num_layers, pp, schedule, layers_per_stage, first_less, last_less)
    return len(per_stage) // pp, _rank_counts(pp, schedule, list(per_stage))


def virtual_stage_strings(per_stage: tuple[int, ...] | list[int], mtp: int = 0) -> tuple[str, ...]:
    """torchtitan's stages as Megatron layout entries: ``E`` on the first, ``t`` per decoder layer,
    MTP layers and ``L`` (norm + output + loss) on the last."""
    out = ["t" * n for n in per_stage]
    out[0] = "E" + out[0]
    out[-1] = out[-1] + "m" * mtp + "L"
    return tuple(out)


def plan_placement(num_layers: int, pp: int, schedule: str, per_stage: tuple[int, ...] | list[int], mtp: int = 0
                   ) -> dict:
    """The plan's parallel fields stating torchtitan's split ``per_stage`` exactly: ``vpp`` and the
    first of even split / first-last stage sizes / account-for-embedding-and-loss split that gives the
    same placement, else a ``pipeline_layout`` string."""
    if pp == 1:
        return dict(vpp=1, pipeline_layers_first_stage=None, pipeline_layers_last_stage=None,
                    pipeline_layout=None, account_for_embedding_in_pipeline_split=False,
                    account_for_loss_in_pipeline_split=False)
    vpp = len(per_stage) // pp
    zbv = is_v_schedule(schedule) and vpp == 2
    want = virtual_stage_strings(per_stage, mtp)
    counts = _rank_counts(pp, schedule, list(per_stage))
    cands: list[tuple[Optional[int], Optional[int], bool, bool]] = [
        (None, None, False, False), (counts[0], counts[-1], False, False), (counts[0], None, False, False),
        (None, counts[-1], False, False), (None, None, True, True), (None, None, True, False), (None, None, False, True)]
    for first, last, acc_e, acc_l in cands:
        try:
            got = virtual_stages_for(num_layers, mtp, pp, vpp, zbv, None, first, last, acc_e, acc_l)
        except PlanError:
            continue
        if got == want:
            return dict(vpp=vpp, pipeline_layers_first_stage=first, pipeline_layers_last_stage=last,
                        pipeline_layout=None, account_for_embedding_in_pipeline_split=acc_e,
                        account_for_loss_in_pipeline_split=acc_l)
    return dict(vpp=vpp, pipeline_layers_first_stage=None, pipeline_layers_last_stage=None,
                pipeline_layout=format_layout(want), account_for_embedding_in_pipeline_split=False,
                account_for_loss_in_pipeline_split=False)


@lru_cache(maxsize=4096)
def plan_layout(num_layers: int, vpp: int, counts: tuple[int, ...]) -> tuple[Optional[int], Optional[int]]:
    """Per-rank layer counts -> the nearest (pipeline_layers_first_stage, pipeline_layers_last_stage).

    The first/last form: the middle ranks hold equal counts, only the first and last may differ, and
    with ``vpp > 1`` every rank's count is a multiple of vpp (equal chunks).  Exact when the counts
    have that form; otherwise the nearest such layout (least layers moved, the first rank kept where
    possible).  ``(None, None)`` = the even split.  (The tuner's candidate layouts; readers state
    torchtitan's split exactly with :func:`plan_placement`.)
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
