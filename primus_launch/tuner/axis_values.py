"""The values each structural axis of a tuning space may take for a plan, the user's own value first (so that
ties keep it): divisors of the world size, micro-batch sizes dividing the per-rank batch, the pipeline splits
of ``pp`` x ``vpp`` stages (even, accounting for the embedding / loss, lighter first / last stages, a Megatron
layout string; TorchTitan's own split), the recompute options (selective module sets, full, block) and the
pipeline schedules.  Sources are each function's; the legality rules they follow are :mod:`rules`' and the
space's table (``space.py``)."""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import RECOMPUTE_MODULES, Plan
from primus_launch.tuner.knobs import Knobs
from primus_launch.tuner.space_config import SpaceConfig


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order, in O(sqrt n) steps (a global batch may be large)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


# --------------------------------------------------------------------------- pipeline splits
def layout_string(L: int, mtp: int, pp: int, vpp: int) -> Optional[str]:
    """A balanced Megatron layout string for ``pp * vpp`` virtual stages: the decoder layers, the MTP
    layers and the loss each take one slot (the embedding none: a lookup), slots spread as evenly
    as possible with the extra ones on the first stages (Megatron ``PipelineParallelLayerLayout``
    grammar; e.g. DeepSeek-V3 on 32 virtual stages gives ``Ett|(tt|)*29tm|L``).  None when there are
    fewer slots than stages."""
    from primus_launch.plan.layout import format_layout

    n = pp * vpp
    slots = L + mtp + 1
    base, extra = divmod(slots, n)
    if base < 1:
        return None
    tokens = "t" * L + "m" * mtp + "L"
    stages, at = [], 0
    for v in range(n):
        size = base + (1 if v < extra else 0)
        stages.append(("E" if v == 0 else "") + tokens[at:at + size])
        at += size
    return format_layout(tuple(stages))


def uneven_splits(L: int, pp: int, vpp: int, limit: int = 2) -> list[tuple[int, int]]:
    """Uneven splits (``--decoder-first/last-pipeline-num-layers``): when ``pp * vpp`` does not divide
    the layers, the most balanced one (DeepSeek-V3's 61 layers); else up to ``limit`` splits whose
    first and last stages hold fewer layers than the even share (room for the embedding and the
    output layer + loss), closest to even first.  Every stage's count divides by vpp; the middle
    stages share the rest evenly.

    Only first / last counts within ``(pp + 4) * vpp`` of the even share ``L / pp`` are tried (every layer
    count would be O(L^2): 10,000 layers took 98 s), and for each first count only the last counts leaving the
    middle stages a multiple of ``(pp - 2) * vpp`` layers (two or three per first count: O(pp) in all; every
    pair of the window was O(pp^2): 8,192 stages of 9,984 layers took minutes): an even split's picks lie
    within 2 * vpp of its stages' share, itself within 4 * vpp / pp of L / pp; the most balanced uneven split spreads its stages by at
    most (pp / 2 + 1) * vpp (a middle share e = floor(L / (pp vpp)) leaves first + last between 2e and
    2e + pp chunks), and L / pp lies between its smallest and largest stage."""
    if pp <= 2:
        return []
    even = L % (pp * vpp) == 0
    out: list[tuple[tuple, tuple[int, int]]] = []
    window = (pp + 4) * vpp
    lo = max(vpp, (L // pp - window) // vpp * vpp)
    hi = min(L, L // pp + window + 1)
    step = (pp - 2) * vpp  # the middle stages' layers divide by it: last = L - first (mod step)
    for first in range(lo, hi + 1, vpp):
        start = lo + (L - first - lo) % step
        if start % vpp:  # last must be a multiple of vpp too: none in this residue class
            continue
        for last in range(start, min(hi, L - first) + 1, step):
            rest = L - first - last
            if rest <= 0:
                continue
            each = rest // (pp - 2)
            if even:
                if not (first <= each and last <= each and (first, last) != (each, each)):
                    continue
                if first < each - 2 * vpp or last < each - 2 * vpp:
                    continue
                key = (each - first + each - last, abs(first - last), -first)
            else:
                key = (max(each, first, last) - min(each, first, last), abs(last - first), -first)
            out.append((key, (first, last)))
    out.sort()
    if not even:
        return [out[0][1]] if out else []
    return [fl for _, fl in out[:limit]]


def pipeline_splits(plan: Plan, fw: str, cfg: SpaceConfig, own: Knobs, pp: int, vpp: int
                    ) -> list[tuple[Optional[str], Optional[int], Optional[int], bool, bool, Optional[str]]]:
    """Pipeline placements for ``pp`` x ``vpp`` as (schedule or None, first, last, acc_embedding,
    acc_loss, layout); the user's own placement first at their shape."""
    m = plan.model
    L, n = m.num_layers, pp * vpp
    own_split = (own.first_stage_layers, own.last_stage_layers, own.acc_embedding, own.acc_loss, own.layout)
    mine = (pp, vpp) == (own.pp, own.vpp)
    if pp == 1:
        return [(None, None, None, False, False, None)]
    if fw == "torchtitan":
        # torchtitan splits the model itself (pipeline_parallel.py): one placement per (pp, vpp,
        # schedule), the one its split gives, plus the user's own
        out = []
        for sched in (["1f1b"] if vpp == 1 else ["interleaved_1f1b"] + (["zbv"] if vpp == 2 else [])):
            lay = [(f, l, False, False, None) for f, l in _titan_layouts(L, pp, vpp, sched)]
            if (pp, vpp, sched) == (own.pp, own.vpp, own.schedule):
                lay = [own_split] + [x for x in lay if x != own_split]
            out += [(sched, *x) for x in lay]
        return out
    out: list[tuple] = []
    if mine and own_split != (None, None, False, False, None):
        out.append(own_split)
    if L % n == 0:
        out.append((None, None, False, False, None))
    if cfg.execution:
        if own.layout is not None:
            lay = layout_string(L, m.mtp_num_layers, pp, vpp)
            if lay is not None:
                out.append((None, None, False, False, lay))
        for e, l in ((True, True), (True, False), (False, True)):
            slots = L + e + l
            if slots % n == 0 and slots // n - 1 >= 0 and (n > 1 or slots // n >= e + l):
                out.append((None, None, e, l, None))
    if L % n or cfg.execution:
        for f, l in uneven_splits(L, pp, vpp):
            out.append((f, l, False, False, None))
    seen, uniq = set(), []
    for x in out:
        if x not in seen:
            seen.add(x)
            uniq.append((None, *x))
    return uniq


def _titan_layouts(L: int, pp: int, vpp: int, schedule: str) -> list[tuple[Optional[int], Optional[int]]]:
    """The plan layout of torchtitan's own split for ``pp`` x ``vpp`` stages under ``schedule``
    (``pipeline_parallel_layers_per_stage`` chosen to give pp*vpp stages, default first/last-stage
    "less layers" of 1 for the embedding and the output head), via the exact model of
    torchtitan's ``_generate_llm_fqn_per_model_part``."""
    from primus_launch.plan import PlanError
    from primus_launch.plan.torchtitan_split import plan_layout, rank_layers, titan_schedule

    name = titan_schedule(schedule, vpp)
    out: list[tuple[Optional[int], Optional[int]]] = []
    for lps in [None, *range(1, L + 3)]:
        try:
            v, counts = rank_layers(L, pp, name, lps, 1, 1)
            if v != vpp:
                continue
            lay = plan_layout(L, vpp, counts)
        except PlanError:
            continue
        if lay not in out:
            out.append(lay)
        break
    return out


# --------------------------------------------------------------------------- enumeration
def mbs_values(plan: Plan, dp: int, cfg: SpaceConfig, own: int) -> list[int]:
    """Micro-batch sizes at ``dp`` data-parallel ranks: the divisors of the per-rank batch (global batch / dp) up to
    ``cfg.max_mbs``, and the plan's own ``own`` above it; none when dp does not divide the global batch."""
    gbs = plan.training.global_batch_size
    if gbs % dp:
        return []
    per = gbs // dp
    out = [d for d in range(1, min(per, cfg.max_mbs) + 1) if per % d == 0]
    if own > cfg.max_mbs and per % own == 0:
        out.append(own)
    return out


def _module_sets(plan: Plan, own: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Selective-recompute module sets (Megatron ``--recompute-modules``) for the model: each
    applicable module alone, the sets published recipes use (``mla_up_proj mlp``, ``moe_act
    layernorm``), and the cheap ones cumulated (layernorm, moe_act, mla_up_proj, core_attn,
    shared_experts); the user's own set first."""
    m, t = plan.model, plan.training
    dense = any(not m.is_moe_layer(i) for i in range(m.num_layers))
    ok = {"core_attn": True, "layernorm": True, "mla_up_proj": m.multi_latent_attention,
          "mlp": dense, "moe_act": m.is_moe and t.moe_grouped_gemm, "moe": m.is_moe,
          "shared_experts": m.is_moe and m.moe_shared_expert_intermediate_size > 0 and not t.moe_shared_expert_overlap}
    order = [x for x in RECOMPUTE_MODULES if ok[x]]
    sets: list[tuple[str, ...]] = [own] + [(x,) for x in order]
    for pair in (("mla_up_proj", "mlp"), ("moe_act", "layernorm")):
        if all(ok[x] for x in pair):
            sets.append(pair)
    chain: list[str] = []
    for x in ("layernorm", "moe_act", "mla_up_proj", "core_attn", "shared_experts"):
        if ok[x]:
            chain.append(x)
            if len(chain) > 1:
                sets.append(tuple(sorted(chain, key=RECOMPUTE_MODULES.index)))
    norm = [tuple(sorted(s, key=lambda x: RECOMPUTE_MODULES.index(x) if x in RECOMPUTE_MODULES else 99)) for s in sets]
    return list(dict.fromkeys([own] + norm[1:]))


def recompute_options(plan: Plan, fw: str, per_chunk: int, cfg: SpaceConfig, own: Knobs
                      ) -> list[tuple[str, str, Optional[int], tuple[str, ...]]]:
    """Recompute options as (granularity, method, layers, modules): none; TorchTitan per-op SAC and full (every
    block); Megatron selective with each module set (:func:`_module_sets`), full uniform and full block of
    ``cfg.block_recompute_layers`` layers below ``per_chunk``; the user's own too, unless a block of more layers
    than the chunk holds."""
    default_mods = ("core_attn",)
    own_mods = own.rc_modules if own.rc_granularity == "selective" else default_mods
    opts: list[tuple[str, str, Optional[int], tuple[str, ...]]] = [("none", "uniform", None, default_mods)]
    if fw == "torchtitan":  # AC mode "full": every block (the adapter writes it as num_layers=1); per-op SAC
        opts += [("op", "uniform", None, default_mods), ("full", "uniform", 1, default_mods)]
    else:
        sets = _module_sets(plan, own_mods) if cfg.execution else [own_mods]
        opts += [("selective", "uniform", None, s) for s in sets]
        opts.append(("full", "uniform", 1, default_mods))
        for n in cfg.block_recompute_layers:
            if n < per_chunk:
                opts.append(("full", "block", n, default_mods))
    mine = (own.rc_granularity, own.rc_method, own.rc_layers,
            own.rc_modules if own.rc_granularity == "selective" else default_mods)
    if mine not in opts:
        g, mth, n, _ = mine
        if not (g == "full" and mth == "block" and n is not None and n > per_chunk):
            opts.append(mine)
    return opts


def schedules(fw: str, pp: int, vpp: int, nmb: int, own: str) -> list[str]:
    """Pipeline schedules for ``pp`` x ``vpp`` stages with ``nmb`` micro-batches: without a pipeline the user's
    own (1f1b or gpipe); Megatron 1f1b (vpp 1) or interleaved 1f1b (micro-batches a multiple of pp); TorchTitan
    the same (1f1b with at least pp micro-batches) and ZBV at vpp 2 (torch.distributed.pipelining's
    multi-stage schedules)."""
    if pp == 1:
        return [own if own in ("1f1b", "gpipe") else "1f1b"]
    if fw == "megatron":
        if vpp == 1:
            return ["1f1b"]
        return ["interleaved_1f1b"] if nmb % pp == 0 else []
    # torch.distributed.pipelining: 1F1B is single-stage (Schedule1F1B refuses fewer micro-batches than
    # stages); Interleaved1F1B and ZBVZeroBubble are multi-stage schedules (>= 2 stages per rank).  zb_h1 is
    # left out: torch has no single-stage ZB-H1 (plan/torchtitan_split.py titan_schedule refuses it).
    out = (["1f1b"] if nmb >= pp else []) if vpp == 1 else (["interleaved_1f1b"] if nmb % pp == 0 else [])
    if vpp == 2:
        out.append("zbv")
    return out


def balanced_split(L: int, pp: int, fw: str) -> Optional[tuple[Optional[int], Optional[int]]]:
    """The most balanced placement of ``L`` layers on ``pp`` stages (one virtual stage each) as (first, last)
    stage layers, (None, None) for an even split; None where the framework accepts none.

    Megatron-Core 0.16.1 (``TransformerConfig.__post_init__``, "Uneven PP") accepts any split whose first / last
    stage counts are positive and leave the middle ``pp - 2`` stages an equal share (none left where there is no
    middle stage): at ``pp`` 2, ``ceil(L / 2)`` + ``floor(L / 2)``; above, :func:`uneven_splits`' most balanced.
    TorchTitan splits the model itself (:func:`_titan_layouts`, its ``_generate_llm_fqn_per_model_part``)."""
    if pp == 1 or pp > L:
        return (None, None) if pp == 1 else None
    if fw == "torchtitan":
        lay = _titan_layouts(L, pp, 1, "1f1b")
        return lay[0] if lay else None
    if L % pp == 0:
        return (None, None)
    if pp == 2:
        return (L - L // 2, L // 2)
    splits = uneven_splits(L, pp, 1)
    return splits[0] if splits else None
