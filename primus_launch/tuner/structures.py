"""The enumeration of a space's structural candidates: nested loops over the parallel degrees (TP, CP, PP,
VPP, EP / expert TP), the pipeline splits, sequence parallel, the DP sharding (and HSDP replicate groups), the
micro-batch, the schedule and the recompute option, skipping what the model's shapes or the framework refuse
(TorchTitan's rules by ``plan.torchtitan_problems``), each with its table of legal execution flags
(``flag_tables.FlagOptions``)."""

from __future__ import annotations

from typing import Iterator, Optional

from primus_launch.plan import Plan, torchtitan_problems
from primus_launch.tuner import rules
from primus_launch.tuner.axis_values import divisors, mbs_values, pipeline_splits, recompute_options, schedules
from primus_launch.tuner.flag_tables import FlagOptions
from primus_launch.tuner.knobs import Knobs
from primus_launch.tuner.space_config import SpaceConfig


def structures(plan: Plan, cfg: SpaceConfig, flags: "FlagOptions") -> Iterator[tuple[tuple, tuple[tuple, ...]]]:
    """(structural head, its flag table) for every structural candidate, in the space's order.

    TP may exceed the query groups of a Megatron plan where it is a multiple of them (``plan/legality.py``, as
    megatron-core 0.16.1's ``TransformerConfig.__post_init__`` asserts: "num_query_groups ... must be a multiple or
    divisor of tensor_model_parallel_size"; Megatron-LM core_v0.16.1 ``validate_args`` adds no rule): its attention
    then sub-shards the QKV activations (``transformer/attention.py``: one query group per rank, the QKV output
    all-gathered), which the projection prices in time (``cost/attention_block.py`` ``qkv_subsharding``,
    ``cost/tp_comm.py`` ``qkv_subshard_comm``) and memory (``memory/activations.py``, MEMORY.md round 33).  The
    rule came with megatron-core 0.16.0 (f7dfb99795); core_v0.15.3 refuses such a TP, so a tuned recipe with it
    needs megatron-core >= 0.16.0, the version the projection models.  TorchTitan shards wk / wv by whole KV heads:
    there TP stays a divisor of the groups."""
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
        if not m.multi_latent_attention and m.kv_heads % tp and (fw != "megatron" or tp % m.kv_heads):
            continue   # TP above the query groups: Megatron's QKV sub-sharding only (docstring)
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
                    for split in pipeline_splits(plan, fw, cfg, own, pp, vpp):
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


def _inner(plan: Plan, fw: str, cfg: SpaceConfig, own: Knobs, flags: "FlagOptions", tp: int, cp: int, pp: int,
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
    else:  # dense: expert TP reads nothing (plan/inert.py); the recipe's own kept where Megatron's expert groups
        # still divide the world (parallel_state: etp x ep x pp | world), so the tuned recipe does not rewrite it
        keep = own.etp if own.etp is not None and W % (own.etp * pp) == 0 else None
        eps = [(1, keep)] if own.ep == 1 else []
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
    mbss = mbs_values(plan, dp, cfg, own.mbs)
    rcs = recompute_options(plan, fw, per_chunk, cfg, own)
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
                        for sched in schedules(fw, pp, vpp, nmb, own.schedule):
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
