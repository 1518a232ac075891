"""Where each layer of a plan sits in the pipeline: decoder layers, embedding, MTP layers, loss.

Every way a recipe can place layers is resolved into one list of *virtual stages* (``pp * vpp``
entries, each a string over ``E`` embedding, ``t`` decoder layer, ``m`` MTP layer, ``L`` output
layer + loss), in the order of Megatron's ``PipelineParallelLayerLayout``
(``megatron/core/transformer/pipeline_parallel_layer_layout.py``): virtual stage ``v`` is model
chunk ``v // pp`` of PP rank ``v % pp``, and decoder layer ids are handed out in ``v`` order (which
equals ``get_transformer_layer_offset`` for every placement below):

- ``pipeline_layout`` (``--pipeline-model-parallel-layout``): parsed as Megatron's
  ``parse_str_to_list`` does (commas are cosmetic; ``(...)*N`` then ``x*N`` unrolled; ``|`` separates
  virtual stages);
- ``pipeline_layers_first_stage`` / ``..._last_stage`` (``--decoder-first/last-pipeline-num-layers``):
  rank 0 / rank pp-1 hold that many layers (split evenly over their chunks), the other ranks share
  the rest evenly (``transformer_block.get_num_layers_to_build``);
- ``account_for_embedding/loss_in_pipeline_split``: embedding and loss count as one layer slot each;
  ``(L + e + l) / (pp * vpp)`` slots per virtual stage, the first virtual stage builds one decoder
  layer fewer with the embedding, the last one fewer with the loss;
- otherwise ``L / (pp * vpp)`` decoder layers per virtual stage.

Without a layout string, Megatron builds the MTP block with the loss (``post_process``: last
virtual stage).  ZB-V (``pipeline_schedule == "zbv"``, vpp 2, torch ``ScheduleZBVZeroBubble``): the
2 pp virtual stages form a "V": virtual stage ``v < pp`` on rank ``v``, ``v >= pp`` on rank
``2pp - 1 - v``, so rank 0 holds both the embedding and the loss.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from primus_launch.plan.sections import PlanError, PlanSections

LAYOUT_CHARS = "EtmL"


@dataclass(frozen=True)
class Chunk:
    """What one model chunk (virtual stage) of one PP rank holds."""

    layers: tuple[int, ...]  # global decoder layer ids
    embedding: bool = False
    mtp: int = 0  # MTP layers (each with its own output head and loss)
    loss: bool = False  # final norm, output layer and loss

    @property
    def slots(self) -> int:
        return len(self.layers) + self.embedding + self.mtp + self.loss


def parse_layout(text: str) -> tuple[str, ...]:
    """Virtual stages of a Megatron layout string, e.g. ``"Et*3|(tt|)*29m|L"``.

    Megatron ``PipelineParallelLayerLayout.parse_str_to_list``: commas are removed, ``(...)*N``
    and then ``x*N`` are unrolled, ``|`` separates virtual stages.
    """
    s = text.replace(",", "").replace(" ", "")
    s = re.sub(r"\(([^)]+)\)\*(\d+)", lambda g: g.group(1) * int(g.group(2)), s)
    s = re.sub(r"(.)\*(\d+)", lambda g: g.group(1) * int(g.group(2)), s)
    bad = sorted(set(s) - set(LAYOUT_CHARS + "|"))
    if bad:
        raise PlanError("parallel.pipeline_layout", text,
                        f"characters E, t, m, L, '|', '*N' and parentheses only (got {''.join(bad)!r})")
    return tuple(s.split("|"))


def stage_position(v: int, pp: int, zbv: bool) -> tuple[int, int]:
    """(PP rank, chunk) of virtual stage ``v``."""
    if zbv:
        return (v, 0) if v < pp else (2 * pp - 1 - v, 1)
    return v % pp, v // pp


def virtual_stages(plan: PlanSections) -> tuple[str, ...]:
    """The plan's virtual stages in Megatron order (module doc); a :class:`PlanError` when the
    plan's placement cannot be realised."""
    m, p = plan.model, plan.parallel
    return virtual_stages_for(m.num_layers, m.mtp_num_layers, p.pp, p.vpp, _is_zbv(plan), p.pipeline_layout,
                           p.pipeline_layers_first_stage, p.pipeline_layers_last_stage,
                           p.account_for_embedding_in_pipeline_split, p.account_for_loss_in_pipeline_split)


def _is_zbv(plan: PlanSections) -> bool:
    p = plan.parallel
    return plan.training.pipeline_schedule == "zbv" and p.pp > 1 and p.vpp == 2


@lru_cache(maxsize=8192)
def virtual_stages_for(L: int, mtp: int, pp: int, vpp: int, zbv: bool, layout: str | None, first: int | None,
                       last: int | None, acc_e: bool, acc_l: bool) -> tuple[str, ...]:
    """The virtual stages of a placement given by the plan's fields (:func:`virtual_stages`, module doc):
    ``L`` decoder layers, ``mtp`` MTP layers, ``pp`` x ``vpp`` stages, ZB-V's "V", Megatron's layout
    string, uneven first / last stages, the embedding / loss counted as layer slots."""
    n_v = pp * vpp
    if layout is not None:
        stages = parse_layout(layout)
        if len(stages) != n_v:
            raise PlanError("parallel.pipeline_layout", layout,
                            f"{len(stages)} virtual stages; must equal pp*vpp = {pp}*{vpp}")
        flat = "".join(stages)
        if not flat.startswith("E") or not flat.endswith("L") or flat.count("E") != 1 or flat.count("L") != 1:
            raise PlanError("parallel.pipeline_layout", layout, "E exactly once and first, L exactly once and last")
        if flat.count("t") != L:
            raise PlanError("parallel.pipeline_layout", layout,
                            f"{flat.count('t')} decoder layers (t); must equal num_layers={L}")
        if flat.count("m") != mtp:
            raise PlanError("parallel.pipeline_layout", layout,
                            f"{flat.count('m')} MTP layers (m); must equal mtp_num_layers={mtp}")
        if "m" in flat and "t" in flat[flat.index("m"):]:
            raise PlanError("parallel.pipeline_layout", layout, "decoder layers (t) must come before MTP layers (m)")
        return stages
    if pp == 1 and vpp == 1:
        return ("E" + "t" * L + "m" * mtp + "L",)
    if first is not None or last is not None:
        if acc_e or acc_l:
            raise PlanError("parallel.account_for_embedding_in_pipeline_split", True,
                            "cannot be combined with uneven first/last pipeline stages (Megatron asserts)")
        rest = L - (first or 0) - (last or 0)
        middle = pp - (first is not None) - (last is not None)
        if rest < 0 or (middle > 0 and rest % middle) or (middle == 0 and rest):
            raise PlanError("parallel.pipeline_layers_first_stage", first,
                            f"with last={last}: the other {L - (first or 0) - (last or 0)} layers must split "
                            f"evenly over the {middle} middle stages")
        each = rest // middle if middle else 0
        per_rank = [each] * pp
        if first is not None:
            per_rank[0] = first
        if last is not None:
            per_rank[-1] = last
        if any(x % vpp for x in per_rank):
            raise PlanError("parallel.pipeline_layers_first_stage", first,
                            f"layers per stage {per_rank} must each divide by vpp={vpp}")
        counts = [per_rank[stage_position(v, pp, zbv)[0]] // vpp for v in range(n_v)]
    else:
        slots = L + acc_e + acc_l
        if slots % n_v:
            what = f"num_layers={L}" + (" + embedding" if acc_e else "") + (" + loss" if acc_l else "")
            raise PlanError("parallel.pp", pp, f"pp*vpp={n_v} must divide {what}")
        counts = [slots // n_v] * n_v
        if acc_e:
            counts[0] -= 1
        if acc_l:
            counts[-1] -= 1
        if min(counts) < 0:
            raise PlanError("parallel.account_for_embedding_in_pipeline_split", True,
                            "not enough layers for the embedding / loss slots")
    stages = ["t" * c for c in counts]
    stages[0] = "E" + stages[0]
    stages[-1] = stages[-1] + "m" * mtp + "L"
    return tuple(stages)


def chunk_layout(plan: PlanSections) -> tuple[tuple[Chunk, ...], ...]:
    """Per PP rank, per model chunk, the :class:`Chunk` it holds: ``[rank][chunk]``."""
    p = plan.parallel
    return _chunks(virtual_stages(plan), p.pp, p.vpp, _is_zbv(plan))


def chunk_mtp_ids(plan: PlanSections) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """Per PP rank, per model chunk: the global ids ``num_layers + d`` of the MTP depths ``d`` it holds.

    Megatron hands the MTP depths out in virtual-stage order, as it does decoder layers
    (``multi_token_prediction.get_mtp_layer_offset``: the ``m`` of the earlier virtual stages);
    AMD Primus's ``recompute_layer_ids`` addresses depth ``d`` as ``num_layers + d``
    (``patches/recompute_layer_patches.py`` ``mtp_depth_to_layer_id``)."""
    p = plan.parallel
    return _mtp_ids(virtual_stages(plan), p.pp, p.vpp, _is_zbv(plan), plan.model.num_layers)


@lru_cache(maxsize=1024)
def _mtp_ids(stages: tuple[str, ...], pp: int, vpp: int, zbv: bool, num_layers: int
             ) -> tuple[tuple[tuple[int, ...], ...], ...]:
    grid: list[list[tuple[int, ...]]] = [[()] * vpp for _ in range(pp)]
    nxt = num_layers
    for v, st in enumerate(stages):
        n = st.count("m")
        r, c = stage_position(v, pp, zbv)
        grid[r][c] = tuple(range(nxt, nxt + n))
        nxt += n
    return tuple(tuple(row) for row in grid)


@lru_cache(maxsize=8192)
def _chunks(stages: tuple[str, ...], pp: int, vpp: int, zbv: bool) -> tuple[tuple[Chunk, ...], ...]:
    grid: list[list[Chunk | None]] = [[None] * vpp for _ in range(pp)]
    nxt = 0
    for v, st in enumerate(stages):
        n = st.count("t")
        r, c = stage_position(v, pp, zbv)
        grid[r][c] = Chunk(layers=tuple(range(nxt, nxt + n)), embedding="E" in st, mtp=st.count("m"), loss="L" in st)
        nxt += n
    return tuple(tuple(row) for row in grid)  # type: ignore[arg-type]


def format_layout(stages: tuple[str, ...]) -> str:
    """A compact Megatron layout string for virtual stages: runs of a character become ``x*N`` and
    runs of equal stages ``(...|)*N``; ``parse_layout(format_layout(s)) == s``."""
    def one(st: str) -> str:
        return "".join(ch if len(run) == 1 else f"{ch}*{len(run)}"
                       for run, ch in ((g.group(0), g.group(0)[0]) for g in re.finditer(r"(.)\1*", st)))

    out: list[str] = []
    i = 0
    while i < len(stages):
        j = i
        while j + 1 < len(stages) and stages[j + 1] == stages[i]:
            j += 1
        n = j - i + 1
        body = one(stages[i])
        last = j == len(stages) - 1
        if n > 1 and not last:
            out.append(f"({body}|)*{n}")
        elif n > 1:
            out.append(f"({body}|)*{n - 1}" + body)
        else:
            out.append(body + ("" if last else "|"))
        i = j + 1
    return "".join(out)
