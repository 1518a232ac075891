"""The tuner's search space: which knobs of a :class:`~primus_launch.plan.Plan` it may change, and
the enumeration of every combination that is legal for the plan's model and cluster.

A candidate is a :class:`Knobs` tuple (hashable, ordered), applied to the user's plan with
:func:`apply_knobs`.  Model, cluster, global batch size, precision and optimizer never change.

Axes and what each framework supports (sources: Megatron-LM ``megatron/training/arguments.py``;
TorchTitan ``torchtitan/config/job_config.py`` and ``distributed/pipeline_parallel.py``):

=================  ====================================  =====================================
axis               Megatron-LM                           TorchTitan
=================  ====================================  =====================================
tp, pp, cp         divisors of the world size            same
vpp                layers per rank divisible by vpp      same (stages per rank)
ep, etp (MoE)      ep | experts, etp in {tp, 1}          same
sequence_parallel  on/off with tp > 1                    always on with tp > 1 (norm SP)
dp_sharding        none / optimizer (dist. optimizer)    full (FSDP2), HSDP replicate groups
recompute          none, selective, full uniform,        none, selective, full
                   full block with N layers
schedule           1f1b (vpp=1) / interleaved_1f1b       1f1b
                   (vpp>1), set by vpp                   (vpp=1); interleaved_1f1b, zb_h1,
                                                         zbv (vpp=2) with vpp > 1
overlap flags      grad reduce, param gather (dist.      kept as given (FSDP prefetch
                   opt. + grad reduce overlap),          overlaps by construction)
                   tp_comm_overlap (needs SP)
=================  ====================================  =====================================

Divisibility follows :func:`primus_launch.plan.legality_problems` exactly: every enumerated
candidate applied to the plan has no legality problem (checked in ``tests/test_tuner.py`` against
a brute force over the raw product).  Memory legality is the pre-filter's job (``search.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple, Optional

from primus_launch.plan import Plan, legality_problems


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
    schedule: str
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    tp_comm_overlap: bool
    first_stage_layers: Optional[int]
    last_stage_layers: Optional[int]


AXES: tuple[str, ...] = Knobs._fields


@dataclass(frozen=True)
class SpaceConfig:
    """Caps on the search space (defaults are the tuner's space; see :meth:`restricted`).

    ``max_tp=None`` keeps TP inside one node (``gpus_per_node``): Megatron-LM and TorchTitan place
    TP innermost and both recommend TP within the NVLink/xGMI domain.
    """

    max_tp: Optional[int] = None
    max_cp: int = 8
    max_vpp: int = 8
    max_mbs: int = 8
    max_ep: Optional[int] = None
    search_sp: bool = True          # Megatron: try SP off as well as on when tp > 1
    search_overlap: bool = True     # Megatron: try the overlap flags both ways
    block_recompute_layers: tuple[int, ...] = (1, 2, 4, 8)
    max_dp_replicate_choices: int = 3

    @classmethod
    def restricted(cls) -> "SpaceConfig":
        """The space used for ``--exhaustive`` comparisons (and for the planner it is judged
        against): sequence parallel fixed on whenever tp > 1 and the overlap flags fixed on where
        the framework allows them (both never cost time in either framework's design; SP also
        saves activation memory), CP up to 4, micro-batch up to 4, block recompute of 1, 2 or 4
        layers only, HSDP shard group of one node only.  TP, PP, VPP (up to 8), EP, expert-TP, DP
        sharding, recompute kind and schedule keep the default ranges."""
        return cls(max_cp=4, max_vpp=8, max_mbs=4, search_sp=False, search_overlap=False,
                   block_recompute_layers=(1, 2, 4), max_dp_replicate_choices=2)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def knobs_of(plan: Plan) -> Knobs:
    """The knob values of an existing plan."""
    p, t = plan.parallel, plan.training
    r = t.recompute
    return Knobs(p.tp, p.pp, p.vpp, p.cp, p.ep, p.etp, p.sequence_parallel, t.micro_batch_size,
                 p.dp_sharding, p.dp_replicate, r.granularity, r.method, r.num_layers,
                 t.pipeline_schedule, t.overlap_grad_reduce, t.overlap_param_gather, t.tp_comm_overlap,
                 p.pipeline_layers_first_stage, p.pipeline_layers_last_stage)


def apply_knobs(plan: Plan, k: Knobs) -> Plan:
    """``plan`` with the knob values of ``k`` (an unvalidated copy: pydantic ``model_copy``; the
    enumeration guarantees legality, :func:`validated` re-checks when it matters)."""
    p = plan.parallel
    same_split = (k.pp, k.vpp, k.first_stage_layers, k.last_stage_layers) == (
        p.pp, p.vpp, p.pipeline_layers_first_stage, p.pipeline_layers_last_stage)
    par = p.model_copy(update=dict(
        tp=k.tp, pp=k.pp, vpp=k.vpp, cp=k.cp, ep=k.ep, etp=k.etp, sequence_parallel=k.sp,
        dp_sharding=k.dp_sharding, dp_replicate=k.dp_replicate,
        pipeline_layers_first_stage=k.first_stage_layers, pipeline_layers_last_stage=k.last_stage_layers,
        # a recipe's own layout string / account-for split holds for its own pipeline shape only
        **({} if same_split else dict(pipeline_layout=None, account_for_embedding_in_pipeline_split=False,
                                      account_for_loss_in_pipeline_split=False))))
    rc = plan.training.recompute.model_copy(update=dict(
        granularity=k.rc_granularity, method=k.rc_method, num_layers=k.rc_layers))
    tr = plan.training.model_copy(update=dict(
        micro_batch_size=k.mbs, recompute=rc, pipeline_schedule=k.schedule,
        overlap_grad_reduce=k.overlap_grad_reduce, overlap_param_gather=k.overlap_param_gather,
        tp_comm_overlap=k.tp_comm_overlap))
    return plan.model_copy(update=dict(parallel=par, training=tr))


def validated(plan: Plan) -> Plan:
    """A fully validated copy (raises :class:`~primus_launch.plan.PlanError` when illegal)."""
    return Plan.model_validate(plan.model_dump())


def _layouts(L: int, pp: int, vpp: int, own: tuple[Optional[int], Optional[int]], own_pp_vpp: tuple[int, int]
             ) -> list[tuple[Optional[int], Optional[int]]]:
    """Pipeline layouts (first, last stage layers) for ``pp`` x ``vpp``: the even split when it
    exists, else the most balanced uneven one (Megatron ``--decoder-first/last-pipeline-num-layers``,
    the way DeepSeek-V3's 61 layers are laid out); plus the user's own layout at their pp/vpp."""
    out: list[tuple[Optional[int], Optional[int]]] = []
    if pp == 1:
        return [(None, None)]
    if L % (pp * vpp) == 0:
        out.append((None, None))
    elif pp > 2:
        best = None
        for each in range(vpp, L // (pp - 2) + 1, vpp):
            rest = L - each * (pp - 2)
            if rest < 2 * vpp:
                break
            # first <= last, both multiples of vpp, as close to `each` as possible
            for first in range(vpp, rest // 2 + 1, vpp):
                last = rest - first
                if last % vpp:
                    continue
                key = (max(each, first, last), abs(last - first), -first)
                if best is None or key < best[0]:
                    best = (key, (first, last))
        if best is not None:
            out.append(best[1])
    if (pp, vpp) == own_pp_vpp and own != (None, None) and own not in out:
        out.append(own)
    return out


def _mbs_values(plan: Plan, dp: int, cfg: SpaceConfig, own: int) -> list[int]:
    gbs = plan.training.global_batch_size
    if gbs % dp:
        return []
    per = gbs // dp
    return [d for d in divisors(per) if d <= cfg.max_mbs or d == own]


def _recompute_options(plan: Plan, fw: str, per_chunk: int, cfg: SpaceConfig, own: tuple
                       ) -> list[tuple[str, str, Optional[int]]]:
    opts: list[tuple[str, str, Optional[int]]] = [("none", "uniform", None)]
    if fw == "torchtitan":  # AC mode "full": every block (the adapter writes it as num_layers=1); per-op SAC
        opts += [("op", "uniform", None), ("full", "uniform", 1)]
    else:
        opts += [("selective", "uniform", None), ("full", "uniform", 1)]
        for n in cfg.block_recompute_layers:
            if n < per_chunk:
                opts.append(("full", "block", n))
    if own not in opts:
        g, m, n = own
        if not (g == "full" and m == "block" and n is not None and n > per_chunk):
            opts.append(own)
    return opts


def _schedules(fw: str, pp: int, vpp: int, nmb: int, own: str) -> list[str]:
    if pp == 1:
        return [own if own in ("1f1b", "gpipe") else "1f1b"]
    if fw == "megatron":
        if vpp == 1:
            return ["1f1b"]
        return ["interleaved_1f1b"] if nmb % pp == 0 else []
    # torch.distributed.pipelining: 1F1B is single-stage; Interleaved1F1B, InterleavedZeroBubble
    # (ZB-H1) and ZBVZeroBubble are multi-stage schedules (>= 2 stages per rank)
    out = ["1f1b"] if vpp == 1 else (["interleaved_1f1b"] if nmb % pp == 0 else []) + ["zb_h1"]
    if vpp == 2:
        out.append("zbv")
    return out


def enumerate_space(plan: Plan, cfg: SpaceConfig = SpaceConfig()) -> Iterator[Knobs]:
    """Every divisibility-legal candidate for ``plan``'s model and cluster, in a stable order.

    Built by nested loops over divisors, so illegal combinations are never produced (the rules are
    those of :func:`primus_launch.plan.legality_problems`)."""
    m = plan.model
    own = knobs_of(plan)
    fw = plan.source.framework if plan.source else "megatron"
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
                vpps = [1] if pp == 1 else [v for v in range(1, cfg.max_vpp + 1) if L // pp >= v] \
                    + ([own.vpp] if own.vpp > cfg.max_vpp and pp == own.pp else [])
                own_layout = (own.first_stage_layers, own.last_stage_layers)
                for vpp in vpps:
                    if fw == "torchtitan" and pp > 1:
                        # torchtitan splits the model itself (pipeline_parallel.py): one layout per
                        # (pp, vpp, schedule), the one its split gives, plus the user's own
                        groups = []
                        for sched in (["1f1b"] if vpp == 1 else ["interleaved_1f1b", "zb_h1"] + (["zbv"] if vpp == 2 else [])):
                            lay = _titan_layouts(L, pp, vpp, sched)
                            if (pp, vpp, sched) == (own.pp, own.vpp, own.schedule) and own_layout not in lay:
                                lay.append(own_layout)
                            groups += [(sched, fl) for fl in lay]
                    else:
                        groups = [(None, fl) for fl in _layouts(L, pp, vpp, own_layout, (own.pp, own.vpp))]
                    for sched, (first, last) in groups:
                        if first is None and last is None:
                            per_chunk = L // pp // vpp
                        else:
                            each = (L - (first or 0) - (last or 0)) // max(1, pp - (first is not None) - (last is not None))
                            per_chunk = max(first or 0, last or 0, each) // vpp
                        yield from _inner(plan, fw, cfg, own, tp, cp, pp, vpp, dp, first, last, per_chunk, sched)


def _titan_layouts(L: int, pp: int, vpp: int, schedule: str) -> list[tuple[Optional[int], Optional[int]]]:
    """The plan layout of torchtitan's own split for ``pp`` x ``vpp`` stages under ``schedule``
    (``pipeline_parallel_layers_per_stage`` chosen to give pp*vpp stages, default first/last-stage
    "less layers" of 1 for the embedding and the output head), via the adapter's exact model of
    torchtitan's ``_generate_llm_fqn_per_model_part``."""
    from primus_launch.adapters.torchtitan_layout import plan_layout, rank_layers, titan_schedule
    from primus_launch.plan import PlanError

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


def _inner(plan: Plan, fw: str, cfg: SpaceConfig, own: Knobs, tp: int, cp: int, pp: int, vpp: int, dp: int,
           first: Optional[int], last: Optional[int], per_chunk: int, only_schedule: Optional[str] = None
           ) -> Iterator[Knobs]:
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
        sps = [True, False] if cfg.search_sp else [True]
    sps = [s for s in sps if not s or (m.seq_length // cp) % tp == 0]
    # data-parallel sharding
    if fw == "torchtitan":
        shardings = ["full"] + ([own.dp_sharding] if own.dp_sharding != "full" else [])
    else:
        shardings = ["optimizer", "none"] + ([own.dp_sharding] if own.dp_sharding not in ("none", "optimizer") else [])
    mbss = _mbs_values(plan, dp, cfg, own.mbs)
    rcs = _recompute_options(plan, fw, per_chunk, cfg, (own.rc_granularity, own.rc_method, own.rc_layers))
    for ep, etp in eps:
        for sp in sps:
            for shard in shardings:
                reps = [1]
                if shard == "full" and dp > 1:
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
                                for flags in _overlap_flags(fw, cfg, own, tp, sp, shard):
                                    yield Knobs(tp, pp, vpp, cp, ep, etp, sp, mbs, shard, rep, rc[0], rc[1], rc[2],
                                                sched, flags[0], flags[1], flags[2], first, last)


def _titan_problem(plan: Plan, tp: int, cp: int, pp: int, vpp: int, ep: int, etp: Optional[int], shard: str,
                   rep: int, sched: str) -> bool:
    """Whether the torchtitan adapter's own rules (``torchtitan_problems``: EP carved out of
    dp_shard x cp (x tp), expert TP 1 or tp, stages per rank of the schedule) refuse this."""
    key = (id(plan), tp, cp, pp, vpp, ep, etp, shard, rep, sched)
    hit = _TITAN_CACHE.get(key)
    if hit is None:
        from primus_launch.adapters.torchtitan import torchtitan_problems

        par = plan.parallel.model_copy(update=dict(tp=tp, cp=cp, pp=pp, vpp=vpp, ep=ep, etp=etp, dp_sharding=shard,
                                                   dp_replicate=rep))
        tr = plan.training.model_copy(update=dict(pipeline_schedule=sched))
        hit = bool(torchtitan_problems(plan.model_copy(update=dict(parallel=par, training=tr))))
        if len(_TITAN_CACHE) > 100_000:
            _TITAN_CACHE.clear()
        _TITAN_CACHE[key] = hit
    return hit


_TITAN_CACHE: dict[tuple, bool] = {}


def _overlap_flags(fw: str, cfg: SpaceConfig, own: Knobs, tp: int, sp: bool, shard: str
                   ) -> list[tuple[bool, bool, bool]]:
    if fw == "torchtitan":
        return [(own.overlap_grad_reduce, own.overlap_param_gather, own.tp_comm_overlap and tp > 1 and sp)]
    tpco_ok = tp > 1 and sp
    if not cfg.search_overlap:
        return [(True, shard == "optimizer", own.tp_comm_overlap and tpco_ok)]
    out = []
    for ogr in (True, False):
        for opg in ((True, False) if shard == "optimizer" and ogr else (False,)):
            for tpco in ((True, False) if tpco_ok else (False,)):
                out.append((ogr, opg, tpco))
    return out


def problems_of(plan: Plan, k: Knobs) -> list[tuple[str, object, str]]:
    """Divisibility problems of ``plan`` with knobs ``k`` (the plan module's rules)."""
    return legality_problems(apply_knobs(plan, k))
