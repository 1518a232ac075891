"""The tuner's search space: which knobs of a :class:`~primus_launch.plan.Plan` it may change, and
the enumeration of every combination that is legal for the plan's model, cluster and framework.

A candidate is a :class:`Knobs` tuple (hashable, ordered; ``tuner/knobs.py``), applied to the user's plan with
:func:`apply_knobs`.  Model, cluster, global batch size and optimizer never change; precision and
the optimizer's moment dtypes only when the user allows them (``SpaceConfig.allow``: ``fp8``,
``optimizer-dtypes``; :data:`primus_launch.tuner.rules.ALLOWABLE`).

Axes and what each framework supports (sources: Megatron-LM ``megatron/training/arguments.py`` and
``transformer_config.py`` on ``core_r0.16.0``; TorchTitan ``torchtitan/config/job_config.py`` and
``distributed/pipeline_parallel.py``; the rules are :mod:`primus_launch.tuner.rules`):

===================  ======================================  ===================================
axis                 Megatron-LM                             TorchTitan
===================  ======================================  ===================================
tp, pp, cp           divisors of the world size              same
vpp                  layers per rank divisible by vpp        same (stages per rank)
ep, etp (MoE)        ep | experts, etp in {tp, 1}            same
sequence_parallel    on with tp > 1 (``search_sp``: off too)  always on with tp > 1 (norm SP)
dp_sharding          none / optimizer (dist. optimizer) /    full (FSDP2), HSDP replicate groups
                     optimizer_grads, full (Megatron-FSDP,
                     pp = 1)
pipeline split       even; account-for embedding / loss;     torchtitan's own split of
                     lighter first / last stages; a layout    ``pipeline_parallel_layers_per_stage``
                     string (``E t m L``) when the recipe
                     uses one
recompute            none, selective (module sets), full     none, op (per-op SAC), full
                     uniform, full block with N layers
schedule             1f1b (vpp=1) / interleaved_1f1b         1f1b (vpp=1); interleaved_1f1b,
                     (vpp>1), set by vpp                     zbv (vpp=2) with vpp > 1
overlap flags        grad reduce + param gather on; TP       kept as given
                     comm overlap (NVIDIA, needs SP)
CUDA graphs          TE per-scope graphs (NVIDIA)            -
MoE communication    alltoall / allgather / deepep /         -
                     hybridep (NVIDIA); EP overlap; delayed
                     wgrad
offloading           CPU offloading of layers (pp = 1);      -
                     fine-grained module offloading
                     (NVIDIA); optimizer states to the host
precision (allowed)  fp8 with the GPU's recipes, FP8 param   fp8 (float8 converter)
                     gather; BF16 Adam moments
===================  ======================================  ===================================

Every enumerated candidate applied to the plan has no problem in
:func:`primus_launch.plan.legality_problems`, :func:`primus_launch.tuner.rules.knob_problems` and
:func:`~primus_launch.tuner.rules.gpu_problems` (and, for TorchTitan,
:func:`primus_launch.plan.torchtitan_problems`): ``tests/test_tuner_space.py`` checks it against a brute
force over the raw product.  Memory legality is the pre-filter's job (``search.py``).  The user's own value of every
axis is always in the space (first among the values of its axis, so that ties keep it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

from primus_launch.plan import RECOMPUTE_MODULES, Plan, torchtitan_problems
from primus_launch.tuner import rules
# the candidate tuple and its application to a plan (their own module), importable from here as before
from primus_launch.tuner.knobs import (AXES, N_STRUCT, Knobs, apply_knobs, knobs_of, problems_of, program_limits,
                                      validated)

__all__ = ["AXES", "N_STRUCT", "Knobs", "Space", "SpaceConfig", "apply_knobs", "divisors", "enumerate_space",
           "knobs_of", "layout_string", "problems_of", "searched_knobs", "validated"]


@dataclass(frozen=True)
class SpaceConfig:
    """Caps on the search space (the defaults are the tuner's full space).

    ``max_tp=None`` keeps TP inside one node (``gpus_per_node``): Megatron-LM and TorchTitan place
    TP innermost and both recommend TP within the NVLink/xGMI domain.  ``search_sp`` /
    ``search_overlap`` also try sequence parallel off and the grad-reduce / param-gather overlaps
    off (off by default: neither saves time or memory in either framework's design).  ``allow``
    names the numerics-changing knob families the user allowed (:data:`rules.ALLOWABLE`).
    ``execution=False`` keeps every execution knob (CUDA graphs, MoE communication, offloading,
    compile, recompute modules, uneven splits) at the recipe's value: the structural space only.
    """

    max_tp: Optional[int] = None
    max_cp: int = 8
    max_vpp: int = 8
    max_mbs: int = 8
    max_ep: Optional[int] = None
    search_sp: bool = False
    search_overlap: bool = False
    block_recompute_layers: tuple[int, ...] = (1, 2, 4, 8)
    max_dp_replicate_choices: int = 3
    allow: frozenset[str] = field(default_factory=frozenset)
    execution: bool = True

    @classmethod
    def restricted(cls) -> "SpaceConfig":
        """A small structural space for quick comparisons and tests: the execution knobs kept at
        the recipe's values, CP up to 4, micro-batch up to 4, block recompute of 1, 2 or 4 layers,
        HSDP shard group of one node only."""
        return cls(max_cp=4, max_vpp=8, max_mbs=4, block_recompute_layers=(1, 2, 4),
                   max_dp_replicate_choices=2, execution=False)

    def describe(self) -> dict:
        d = dict(self.__dict__)
        d["allow"] = sorted(self.allow)
        return d


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










def searched_knobs(plan: Plan, cfg: "SpaceConfig") -> dict[str, bool]:
    """Which knob families the space varies for ``plan`` (name -> searched), for the report."""
    can = rules.knobs_for(plan) if cfg.execution else frozenset()
    return {name: name in can and (name not in ("fp8", "moments") or
                                   ("fp8" if name == "fp8" else "optimizer-dtypes") in cfg.allow)
            for name in sorted(rules.FRAMEWORK_KNOBS["megatron"] | rules.FRAMEWORK_KNOBS["torchtitan"])}


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
    count would be O(L^2): 10,000 layers took 98 s): an even split's picks lie within 2 * vpp of its stages'
    share, itself within 4 * vpp / pp of L / pp; the most balanced uneven split spreads its stages by at
    most (pp / 2 + 1) * vpp (a middle share e = floor(L / (pp vpp)) leaves first + last between 2e and
    2e + pp chunks), and L / pp lies between its smallest and largest stage."""
    if pp <= 2:
        return []
    even = L % (pp * vpp) == 0
    out: list[tuple[tuple, tuple[int, int]]] = []
    window = (pp + 4) * vpp
    lo = max(vpp, (L // pp - window) // vpp * vpp)
    hi = min(L, L // pp + window + 1)
    for first in range(lo, hi + 1, vpp):
        for last in range(lo, min(hi, L - first) + 1, vpp):
            rest = L - first - last
            if rest <= 0 or rest % (pp - 2) or (rest // (pp - 2)) % vpp:
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


def _splits(plan: Plan, fw: str, cfg: SpaceConfig, own: Knobs, pp: int, vpp: int
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
def _mbs_values(plan: Plan, dp: int, cfg: SpaceConfig, own: int) -> list[int]:
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


def _recompute_options(plan: Plan, fw: str, per_chunk: int, cfg: SpaceConfig, own: Knobs
                       ) -> list[tuple[str, str, Optional[int], tuple[str, ...]]]:
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


def _schedules(fw: str, pp: int, vpp: int, nmb: int, own: str) -> list[str]:
    if pp == 1:
        return [own if own in ("1f1b", "gpipe") else "1f1b"]
    if fw == "megatron":
        if vpp == 1:
            return ["1f1b"]
        return ["interleaved_1f1b"] if nmb % pp == 0 else []
    # torch.distributed.pipelining: 1F1B is single-stage; Interleaved1F1B and ZBVZeroBubble are
    # multi-stage schedules (>= 2 stages per rank).  InterleavedZeroBubble (zb_h1 with vpp > 1) is
    # left out: the pipeline simulator models ZB-H1 with one chunk per rank only.
    out = ["1f1b"] if vpp == 1 else (["interleaved_1f1b"] if nmb % pp == 0 else [])
    if vpp == 2:
        out.append("zbv")
    return out


class Space:
    """The legal candidates of a plan as a lazy product: the structural candidates (the ``Knobs``
    fields before ``overlap_grad_reduce``, a list) times, for each, the legal execution-flag tuples
    of its context (a few shared tables).  ``len`` counts without building the candidates;
    ``space[i]``, iteration and :meth:`index` follow one stable order (structure-major)."""

    def __init__(self, plan: Plan, cfg: SpaceConfig = SpaceConfig()):
        import numpy as np

        self.plan, self.cfg = plan, cfg
        self.flags = _FlagOptions(plan, plan.framework, cfg, knobs_of(plan))
        self.structs: list[tuple] = []
        self.ctx: list[int] = []
        self._table_ids: dict[int, int] = {}
        self.tables: list[tuple[tuple, ...]] = []
        lim = program_limits(plan)  # what the recipe's training program cannot run (Source.fixed)
        kept: dict[int, tuple[tuple, ...]] = {}
        for head, table in _structures(plan, cfg, self.flags):
            if lim:
                if not lim.ok(head):
                    continue
                key = id(table)
                if key not in kept:
                    kept[key] = tuple(f for f in table if lim.ok(f, N_STRUCT))
                table = kept[key]
            if not table:
                continue
            tid = self._table_ids.get(id(table))
            if tid is None:
                tid = self._table_ids[id(table)] = len(self.tables)
                self.tables.append(table)
            self.structs.append(head)
            self.ctx.append(tid)
        sizes = np.fromiter((len(self.tables[c]) for c in self.ctx), dtype=np.int64, count=len(self.ctx))
        self.offsets = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sizes)])
        self._struct_index = {h: j for j, h in enumerate(self.structs)}
        self._flag_index = [{f: j for j, f in enumerate(t)} for t in self.tables]

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def struct_of(self, i: int) -> int:
        import numpy as np

        return int(np.searchsorted(self.offsets, i, side="right")) - 1

    def __getitem__(self, i: int) -> Knobs:
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = self.struct_of(i)
        return Knobs._make(self.structs[s] + self.tables[self.ctx[s]][i - int(self.offsets[s])])

    def __iter__(self) -> Iterator[Knobs]:
        for head, c in zip(self.structs, self.ctx):
            for f in self.tables[c]:
                yield Knobs._make(head + f)

    def iter_range(self, start: int, stop: int) -> Iterator[tuple[int, Knobs]]:
        """(index, candidate) for ``start <= index < stop``, in order."""
        stop = min(stop, len(self))
        if start >= stop:
            return
        s = self.struct_of(start)
        i = start
        while i < stop:
            head, table = self.structs[s], self.tables[self.ctx[s]]
            for f in table[i - int(self.offsets[s]):]:
                if i >= stop:
                    return
                yield i, Knobs._make(head + f)
                i += 1
            s += 1

    def index(self, k: Knobs) -> Optional[int]:
        """Position of ``k`` in the space, or None when it is not a legal candidate."""
        s = self._struct_index.get(tuple(k[:N_STRUCT]))
        if s is None:
            return None
        f = self._flag_index[self.ctx[s]].get(tuple(k[N_STRUCT:]))
        return None if f is None else int(self.offsets[s]) + f

    def flag_table(self, s: int) -> tuple[tuple, ...]:
        return self.tables[self.ctx[s]]

    def struct_index(self, k: Knobs) -> Optional[int]:
        return self._struct_index.get(tuple(k[:N_STRUCT]))


def enumerate_space(plan: Plan, cfg: SpaceConfig = SpaceConfig()) -> Iterator[Knobs]:
    """Every legal candidate for ``plan``'s model, cluster and framework, in a stable order.

    Built by nested loops over divisors and precomputed option lists, so illegal combinations are
    never produced (the rules are those of :func:`problems_of`)."""
    return iter(Space(plan, cfg))


def _structures(plan: Plan, cfg: SpaceConfig, flags: "_FlagOptions") -> Iterator[tuple[tuple, tuple[tuple, ...]]]:
    """(structural head, its flag table) for every structural candidate, in the space's order."""
    m = plan.model
    own = flags.own
    fw = plan.framework
    W = plan.world_size
    L = m.num_layers
    max_tp = cfg.max_tp or plan.cluster.gpus_per_node
    for tp in divisors(W):
        if tp > max_tp and tp != own.tp:
            continue
        if m.num_attention_heads % tp or m.ffn_hidden_size % tp:
            continue
        if not m.multi_latent_attention and m.kv_heads % tp:
            continue
        for cp in divisors(W // tp):
            if cp > cfg.max_cp and cp != own.cp:
                continue
            if m.seq_length % (cp * (2 if cp > 1 else 1)):
                continue
            for pp in divisors(W // (tp * cp)):
                if pp > L:
                    continue
                dp = W // (tp * cp * pp)
                # (L + 2) // pp: with the embedding and the loss counted in the split a rank may
                # hold more virtual stages than layers (stages of the embedding or loss alone)
                top = (L + 2 * cfg.execution) // pp
                vpps = [1] if pp == 1 else [v for v in range(1, cfg.max_vpp + 1) if top >= v] \
                    + ([own.vpp] if own.vpp > cfg.max_vpp and pp == own.pp else [])
                for vpp in vpps:
                    for split in _splits(plan, fw, cfg, own, pp, vpp):
                        sched = split[0]
                        try:
                            per_chunk = _max_per_chunk(plan, pp, vpp, split[1:], sched)
                        except Exception:
                            continue
                        yield from _inner(plan, fw, cfg, own, flags, tp, cp, pp, vpp, dp, split[1:], per_chunk, sched)


def _max_per_chunk(plan: Plan, pp: int, vpp: int, split: tuple, sched: Optional[str]) -> int:
    from primus_launch.plan.layout import virtual_stages_for

    first, last, acc_e, acc_l, layout = split
    m = plan.model
    stages = virtual_stages_for(m.num_layers, m.mtp_num_layers, pp, vpp, sched == "zbv" and vpp == 2, layout,
                             first, last, acc_e, acc_l)
    return max(st.count("t") for st in stages)


def _inner(plan: Plan, fw: str, cfg: SpaceConfig, own: Knobs, flags: "_FlagOptions", tp: int, cp: int, pp: int,
           vpp: int, dp: int, split: tuple, per_chunk: int, only_schedule: Optional[str] = None
           ) -> Iterator[tuple[tuple, tuple[tuple, ...]]]:
    m = plan.model
    W = plan.world_size
    # MoE: (ep, etp)
    if m.is_moe:
        eps = []
        max_ep = cfg.max_ep or W
        for ep in divisors(m.num_experts):
            if ep > max_ep and ep != own.ep:
                continue
            for etp in ([None, 1] if tp > 1 else [None]) + ([own.etp] if own.etp not in (None, 1) else []):
                e = tp if etp is None else etp
                if W % (e * ep * pp) or m.expert_ffn % e:
                    continue
                eps.append((ep, etp))
        eps = list(dict.fromkeys(eps))
    else:
        eps = [(1, None)] if own.ep == 1 else []
    # sequence parallel
    if tp == 1:
        sps = [False]
    elif fw == "torchtitan":
        sps = [True]
    else:
        sps = [True, False] if cfg.search_sp else list(dict.fromkeys([True] + ([own.sp] if own.tp == tp else [])))
    sps = [s for s in sps if not s or (m.seq_length // cp) % tp == 0]
    # data-parallel sharding
    if fw == "torchtitan":
        shardings = ["full"] + ([own.dp_sharding] if own.dp_sharding != "full" else [])
    else:
        shardings = ["optimizer", "none"]
        if cfg.execution and pp == 1 and "megatron_fsdp" in rules.knobs_for(plan):
            shardings += ["optimizer_grads", "full"]  # Megatron-FSDP
        if own.dp_sharding not in shardings and (pp == 1 or own.dp_sharding in ("none", "optimizer")):
            shardings.append(own.dp_sharding)
        if plan.training.precision_aware_optimizer:  # kept on: needs the distributed optimizer
            shardings = [s for s in shardings if s != "none"]
        if plan.training.optimizer == "muon":  # Megatron's Muon refuses the distributed optimizer and FSDP
            shardings = ["none"]
    mbss = _mbs_values(plan, dp, cfg, own.mbs)
    rcs = _recompute_options(plan, fw, per_chunk, cfg, own)
    first, last, acc_e, acc_l, layout = split
    for ep, etp in eps:
        # DP x CP of 1 (and expert DP of 1): the distributed optimizer shards over one rank and no gradient is
        # reduced across data-parallel ranks, so the sharding and the DP overlaps change nothing (the same run):
        # the recipe's own values come first, so that ties keep them
        edp = W // ((tp if etp is None else etp) * ep * pp)
        inert = fw == "megatron" and dp * cp == 1 and (not m.is_moe or edp == 1)
        shards = sorted(shardings, key=lambda x: x != own.dp_sharding) if inert else shardings
        for sp in sps:
            for shard in shards:
                reps = [1]
                if shard == "full" and dp > 1 and fw == "torchtitan":
                    # HSDP: shard inside a node's (or two nodes') worth of DP ranks, replicate across
                    node_dp = max(1, plan.cluster.gpus_per_node // (tp * cp))
                    for s in (node_dp, 2 * node_dp, 4 * node_dp)[: cfg.max_dp_replicate_choices - 1]:
                        if s < dp and dp % s == 0:
                            reps.append(dp // s)
                    if own.dp_replicate not in reps and dp % own.dp_replicate == 0:
                        reps.append(own.dp_replicate)
                for rep in reps:
                    for mbs in mbss:
                        nmb = plan.training.global_batch_size // (mbs * dp)
                        for sched in _schedules(fw, pp, vpp, nmb, own.schedule):
                            if only_schedule is not None and sched != only_schedule:
                                continue
                            if fw == "torchtitan" and _titan_problem(plan, tp, cp, pp, vpp, ep, etp, shard, rep, sched):
                                continue
                            for rc in rcs:
                                head = (tp, pp, vpp, cp, ep, etp, sp, mbs, shard, rep, rc[0], rc[1], rc[2], rc[3],
                                        sched, first, last, acc_e, acc_l, layout)
                                yield head, flags.options(tp, sp, ep * (tp if etp is None else etp), pp, vpp, shard,
                                                          rc[0], rc[3], ep, inert)


def _titan_problem(plan: Plan, tp: int, cp: int, pp: int, vpp: int, ep: int, etp: Optional[int], shard: str,
                   rep: int, sched: str) -> bool:
    """Whether TorchTitan's rules (``plan.torchtitan_problems``: EP carved out of
    dp_shard x cp (x tp), expert TP 1 or tp, stages per rank of the schedule) refuse this."""
    key = (id(plan), tp, cp, pp, vpp, ep, etp, shard, rep, sched)
    hit = _TITAN_CACHE.get(key)
    if hit is None:
        par = plan.parallel.model_copy(update=dict(tp=tp, cp=cp, pp=pp, vpp=vpp, ep=ep, etp=etp, dp_sharding=shard,
                                                   dp_replicate=rep))
        tr = plan.training.model_copy(update=dict(pipeline_schedule=sched))
        hit = bool(torchtitan_problems(plan.model_copy(update=dict(parallel=par, training=tr))))
        if len(_TITAN_CACHE) > 100_000:
            _TITAN_CACHE.clear()
        _TITAN_CACHE[key] = hit
    return hit


_TITAN_CACHE: dict[tuple, bool] = {}


class _FlagOptions:
    """The legal execution-flag tuples (``Knobs`` fields from ``overlap_grad_reduce`` on) for a
    structural candidate, cached per the few structural facts the rules read."""

    def __init__(self, plan: Plan, fw: str, cfg: SpaceConfig, own: Knobs):
        self.plan, self.fw, self.cfg, self.own = plan, fw, cfg, own
        self.cache: dict[tuple, tuple[tuple, ...]] = {}
        m, t = plan.model, plan.training
        gpu = plan.cluster.gpu
        self.nvidia = rules.is_nvidia(gpu)
        self.local = rules.local_layers(plan)   # megatron-core local layers: no TE-only knob (rules.TE_LAYER_KNOBS)
        can = rules.knobs_for(plan) if cfg.execution else frozenset()
        self.can = can
        self.allow_fp8 = "fp8" in cfg.allow and "fp8" in can
        self.allow_moments = "optimizer-dtypes" in cfg.allow and "moments" in can
        self.recipes = rules.fp8_recipes(gpu, fw)
        self.dense = any(not m.is_moe_layer(i) for i in range(m.num_layers))
        self.all_moe = m.is_moe and not self.dense

    def options(self, tp: int, sp: bool, eg: int, pp: int, vpp: int, shard: str, gran: str,
                mods: tuple[str, ...], ep: int, inert: bool = False) -> tuple[tuple, ...]:
        """``eg`` = expert TP x EP (the flex dispatcher's group), ``ep`` = EP; ``inert``: no data-parallel
        communication (DP x CP and expert DP of 1): the recipe's own DP overlaps come first."""
        key = (tp > 1 and sp, tp > 1, eg > 1, ep > 1, pp > 1, vpp > 1, shard, gran, mods if gran == "selective" else (),
               inert)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = tuple(self._build(tp, sp, ep, pp, vpp, shard, gran, mods, eg, inert))
        return hit

    # each helper returns the values of one knob family, the user's own first
    def _precisions(self, shard: str, gran: str, mods: tuple[str, ...]) -> list[tuple[str, Optional[str], bool]]:
        """(precision, fp8 recipe, fp8 param gather): the recipe's own; with ``allow fp8`` also BF16
        and FP8 with each recipe the GPU runs, param gather off and on (Megatron)."""
        own = self.own
        out = [(own.precision, own.fp8_recipe, own.fp8_param_gather)]
        if self.allow_fp8 and own.precision in ("bf16", "fp16", "fp8"):
            if own.precision == "fp8":
                out.append(("bf16", None, False))
            for rec in self.recipes:
                for pg in (False, True):
                    out.append(("fp8", rec, pg))
        return list(dict.fromkeys(out))

    def _build(self, tp, sp, ep, pp, vpp, shard, gran, mods, eg, inert=False) -> Iterator[tuple]:
        own, plan, fw, cfg, can = self.own, self.plan, self.fw, self.cfg, self.can
        m, t = plan.model, plan.training
        # grad-reduce / param-gather overlap, TP comm overlap
        if fw == "torchtitan":
            tpcos = [own.tp_comm_overlap and tp > 1 and sp]
            if tp > 1 and sp and "tp_comm_overlap" in can:  # async TP (needs compile: _ok)
                tpcos = list(dict.fromkeys(tpcos + [True, False]))
            overlaps = [(own.overlap_grad_reduce, own.overlap_param_gather, x) for x in tpcos]
        else:
            tpco_ok = tp > 1 and sp
            tpcos = [own.tp_comm_overlap and tpco_ok]
            if tpco_ok and "tp_comm_overlap" in can and self.nvidia:
                tpcos = list(dict.fromkeys(tpcos + [True, False]))
            if cfg.search_overlap:
                overlaps = []
                for ogr in (True, False):
                    for opg in ((True, False) if shard != "none" and ogr else (False,)):
                        overlaps += [(ogr, opg, x) for x in tpcos]
            else:
                overlaps = [(True, shard != "none", x) for x in tpcos]
                if inert:   # nothing to overlap: the recipe's own flags first (Megatron: param gather needs sharding)
                    mine = (own.overlap_grad_reduce, own.overlap_param_gather and shard != "none")
                    overlaps = list(dict.fromkeys([mine + (x,) for x in tpcos] + overlaps))
            if t.optimizer == "muon" and not t.muon_layer_wise:  # plain muon: no DP overlaps (Megatron asserts)
                overlaps = [(False, False, x) for x in tpcos]
        # CUDA graphs (TE per-scope graphs; local whole-layer graphs for dense models without EP)
        graphs: list[tuple[str, tuple[str, ...]]] = [(own.cuda_graph_impl, own.cuda_graph_scope)]
        if "cuda_graph" in can and self.nvidia and gran != "full":
            if m.is_moe:
                graphs += [("transformer_engine", ("attn",)), ("transformer_engine", ("moe_router", "moe_preprocess")),
                           ("transformer_engine", ("attn", "moe_router", "moe_preprocess"))]
            else:
                graphs += [("transformer_engine", ()), ("transformer_engine", ("attn",))]
            graphs.append(("none", ()))
        graphs = list(dict.fromkeys(graphs))
        # MoE communication: dispatcher, EP overlap (+ delayed wgrad)
        disps = [own.dispatcher]
        if m.is_moe and "dispatcher" in can:
            disps += ["alltoall", "allgather"] + (["deepep", "hybridep"] if self.nvidia and eg > 1 else [])
        disps = list(dict.fromkeys(disps))
        ovls = [(own.ep_overlap, own.delay_wgrad)]
        if m.is_moe and "ep_overlap" in can:
            ovls += [(False, False), (True, False)] + ([(True, True)] if not self.local else [])
        ovls = list(dict.fromkeys(ovls))
        # offloading
        offl = [(own.offload_layers, own.offload_modules)]
        if "offload" in can:
            offl.append((0, ()))
            if pp == 1 and gran == "none":
                offl.append((m.num_layers // 2, ()))
            if self.nvidia and not self.local:   # fine-grained offloading: TE layers only (rules.knob_problems)
                offl.append((0, ("core_attn", "attn_proj")))
                if m.is_moe:
                    offl += [(0, ("expert_fc1",)), (0, ("expert_fc1", "moe_act"))]
        offl = list(dict.fromkeys(offl))
        opt_offs = [own.optimizer_offload]
        if "optimizer_offload" in can and t.optimizer == "adam" and shard != "none":
            opt_offs = list(dict.fromkeys(opt_offs + [0.0, 1.0]))
        moms = [own.moments]
        if self.allow_moments and t.optimizer == "adam" and shard != "none":
            moms = list(dict.fromkeys(moms + [("fp32", "fp32"), ("bf16", "bf16")]))
        compiles = [own.compile] + ([not own.compile] if "compile" in can else [])
        precs = self._precisions(shard, gran, mods)
        for ogr, opg, tpco in overlaps:
            for cg in graphs:
                for disp in disps:
                    for ovl in ovls:
                        for comp in compiles:
                            for off in offl:
                                for oo in opt_offs:
                                    for prec in precs:
                                        for mom in moms:
                                            f = (ogr, opg, tpco, cg[0], cg[1], disp, ovl[0], ovl[1], comp,
                                                 off[0], off[1], oo, prec[0], prec[1], prec[2], mom)
                                            if self._ok(f, tp, sp, ep, pp, vpp, shard, gran, mods, eg):
                                                yield f

    def _ok(self, f: tuple, tp, sp, ep, pp, vpp, shard, gran, mods, eg) -> bool:
        """The rules of :mod:`rules` for the flags (given the structural facts); the user's own
        combination passes as it is only where it is the recipe's own structure."""
        (ogr, opg, tpco, cg_impl, cg_scope, disp, ovl, dwg, comp, off_l, off_m, oo, prec, rec, pg, mom) = f
        m, t = self.plan.model, self.plan.training
        sel = gran == "selective"
        msel = set(mods) if sel else set()
        pao = t.precision_aware_optimizer or mom != ("fp32", "fp32") or oo > 0
        if self.fw == "megatron":
            if disp in ("deepep", "hybridep") and m.is_moe and eg <= 1:
                return False
            if self.local and (dwg or off_m):   # TE layers only (rules.knob_problems)
                return False
            # recompute modules x precision
            if prec == "fp8" and rec in (None, "delayed") and msel & {"moe_act", "layernorm"}:
                return False
            # EP overlap
            if ovl:
                if not m.is_moe or ep <= 1 or disp == "allgather" or gran == "full" or prec == "fp32":
                    return False
                if t.moe_shared_expert_overlap or m.mtp_num_layers > 1 or (m.mtp_num_layers == 1 and pp == 1):
                    return False
                if pp > 1 and vpp == 1:
                    return False
                if cg_impl == "local" or (cg_impl == "transformer_engine" and {"moe", "mlp"} & set(cg_scope)):
                    return False
            if dwg and not ovl:
                return False
            # CUDA graphs
            if cg_impl != "none":
                sc = set(cg_scope)
                whole = not sc or "full_iteration" in sc
                if "full_iteration" in sc or (cg_impl == "local" and ep > 1) or "moe" in sc:
                    return False
                if "moe_preprocess" in sc and "moe_router" not in sc:
                    return False
                if "moe_preprocess" in sc and disp == "alltoall" and m.is_moe and t.moe_router_padding_for_quantization \
                        and prec in ("fp8", "fp4"):  # apply_knobs keeps the padding only there
                    return False
                if sc & {"moe_router", "moe_preprocess"} and not m.is_moe:
                    return False
                if "mlp" in sc and self.all_moe:
                    return False
                if not sc and m.is_moe:
                    return False
                if gran == "full" or off_l:
                    return False
                if sel:
                    if cg_impl == "transformer_engine" and "moe" in msel and "moe_router" in sc:
                        return False
                    if m.attention_dropout and "core_attn" in msel and (whole or "attn" in sc):
                        return False
                    if m.hidden_dropout and (("mlp" in msel and (whole or "mlp" in sc))
                                             or ("moe" in msel and (whole or "moe" in sc))):
                        return False
            # offloading
            if off_l:
                if off_l >= m.num_layers or pp > 1 or gran != "none" or off_m:
                    return False
            if "attn_proj" in off_m and "core_attn" not in off_m:
                return False
            if oo > 0:
                if not pao:
                    return False
                if pg and prec == "fp8" and rec not in (None, "delayed"):
                    return False
            if pao and (t.optimizer != "adam" or shard == "none"):
                return False
            # chunked optimizer-state offload (Megatron-LM dev; rules.knob_problems): the distributed
            # optimizer, no --optimizer-cpu-offload
            if t.offload.optimizer_state_fraction > 0 and (oo > 0 or shard != "optimizer"):
                return False
            if pg and prec == "fp8" and shard == "none":
                return False
        else:  # torchtitan
            if tpco and tp > 1 and not comp:
                return False
            if pg and (prec != "fp8" or shard != "full" or rec not in (None, "tensorwise")):
                return False
        # GPU
        if not self.nvidia and (cg_impl != "none" or disp in ("deepep", "hybridep") or off_m):
            return False
        if prec == "fp8" and rec not in self.recipes + ((None, "delayed") if self.fw == "megatron" else ()):
            return False
        return True
