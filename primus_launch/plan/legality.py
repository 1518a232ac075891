"""Legality rules of a plan: the divisibility and combination rules of Megatron-LM and TorchTitan.

Sources: megatron/training/arguments.py ``validate_args``, megatron/core/parallel_state.py,
megatron/core/transformer/transformer_config.py ``__post_init__``, torchtitan
``distributed/parallel_dims.py``.  Each problem is ``(field, value, what is allowed)``.

:func:`legality_problems` holds every plan (a :class:`~primus_launch.plan.schema.Plan` is validated by
it); :func:`framework_problems` adds the rules of the framework that runs the recipe (TorchTitan's
``ParallelDims`` and pipelining rules, :func:`torchtitan_problems`), which the adapters and the tuner
apply.  Both are pure functions of the plan's sections.
"""

from __future__ import annotations

from primus_launch.plan.layout import chunk_layout
from primus_launch.plan.sections import CUDA_GRAPH_SCOPES, OFFLOAD_MODULES, RECOMPUTE_MODULES, PlanError, PlanSections
from primus_launch.plan.te_attention import te_backends
from primus_launch.plan.torchtitan_split import is_single_stage, titan_schedule

Problem = tuple[str, object, str]

MAX_WORLD_SIZE = 2**20   # GPUs (the largest clusters hold ~10^5)


def max_virtual_stages(layers: int) -> int:
    """The most pipeline stages x virtual stages a plan of ``layers`` transformer layers may have: a
    generous multiple (a stage may hold only the embedding, the loss or nothing, as Megatron's
    layouts allow) that keeps the per-stage tables of the layout and the schedule small."""
    return 4 * layers + 8


def legality_problems(plan: PlanSections) -> list[Problem]:
    """Every rule ``plan`` breaks, as (field, value, what is allowed); empty when legal."""
    early = _bound_problems(plan)
    if early:
        return early
    p, c = plan.parallel, plan.cluster
    dp = c.world_size // (p.tp * p.cp * p.pp)
    out: list[Problem] = []
    if c.nvlink_domain is not None and c.nvlink_domain % c.gpus_per_node:
        out.append(("cluster.nvlink_domain", c.nvlink_domain, f"a multiple of gpus_per_node={c.gpus_per_node}"))
    out += _shape_problems(plan)
    out += _attention_backend_problems(plan)
    out += _layer_pattern_problems(plan)
    out += _hybrid_problems(plan)
    out += _moe_problems(plan)
    out += _pipeline_problems(plan)
    out += _precision_and_overlap_problems(plan, dp)
    out += ep_overlap_problems(plan)
    out += _recompute_problems(plan)
    out += _named_choice_problems(plan)
    out += _batch_problems(plan, dp)
    return out


def _bound_problems(plan: PlanSections) -> list[Problem]:
    """The bounds checked before any other rule (one problem, or none): the world size, the virtual stages
    (:func:`max_virtual_stages`) and tp x cp x pp dividing the world size; past them nothing
    :func:`legality_problems` computes allocates more than these allow (``sections.LIMITS`` bounds each field)."""
    m, p, c = plan.model, plan.parallel, plan.cluster
    W = c.world_size
    if W > MAX_WORLD_SIZE:
        return [("cluster", f"{c.num_nodes} nodes x {c.gpus_per_node} GPUs = {W:,}",
                 f"at most {MAX_WORLD_SIZE:,} GPUs (the projection's bound)")]
    stages = p.pp * p.vpp
    if stages > max_virtual_stages(m.num_layers + m.mtp_num_layers):
        return [("parallel.vpp", p.vpp, f"pp x vpp = {stages:,} virtual stages: at most "
                                        f"{max_virtual_stages(m.num_layers + m.mtp_num_layers):,} for "
                                        f"{m.num_layers + m.mtp_num_layers} layers")]
    mp = p.tp * p.cp * p.pp
    if W % mp:
        return [("parallel", f"tp*cp*pp={mp}", f"must divide world size {W} (nodes x gpus_per_node)")]
    return []


def _shape_problems(plan: PlanSections) -> list[Problem]:
    """The model's shape (heads, query groups, positions) and its fit to TP and CP."""
    m, p = plan.model, plan.parallel
    out: list[Problem] = []
    # --- model shape (megatron/training/arguments.py validate_args: kv_channels = hidden_size //
    # num_attention_heads, asserted whole when not given; TransformerConfig.__post_init__: the query groups
    # divide the heads; torchtitan's Attention: head_dim = dim // n_heads, n_rep = n_heads // n_kv_heads)
    if m.head_dim is None and not m.multi_latent_attention and m.hidden_size % m.num_attention_heads:
        out.append(("model.hidden_size", m.hidden_size, f"a multiple of num_attention_heads={m.num_attention_heads} "
                                                        "when head_dim (kv_channels) is not given"))
    if not m.multi_latent_attention and m.num_attention_heads % m.kv_heads:
        out.append(("model.num_query_groups", m.kv_heads, f"must divide num_attention_heads={m.num_attention_heads}"))
    # megatron/training/arguments.py validate_args (core_v0.16.1): "max_position_embeddings ... must be greater
    # than or equal to seq_length" (asserted whatever the position embedding)
    mpe = m.max_position_embeddings
    if plan.framework == "megatron" and mpe is not None and mpe < m.seq_length:
        out.append(("model.max_position_embeddings", mpe, f"at least seq_length={m.seq_length} (Megatron-LM's "
                                                          "validate_args asserts it)"))
    # --- model shape vs TP / CP
    if m.num_attention_heads % p.tp:
        out.append(("parallel.tp", p.tp, f"must divide num_attention_heads={m.num_attention_heads}"))
    # megatron-core >= 0.16.0 (f7dfb99795, 'Support TP greater than num_kv_heads by supporting QKV activation
    # sub-sharding'; TransformerConfig.__post_init__: "num_query_groups ... must be a multiple or divisor of
    # tensor_model_parallel_size"): TP may also be a multiple of the query groups; torchtitan shards wk / wv by
    # whole KV heads, so there the groups must stay a multiple of TP
    if not m.multi_latent_attention and m.kv_heads % p.tp:
        if plan.framework != "megatron":
            out.append(("parallel.tp", p.tp, f"must divide num_query_groups={m.kv_heads}"))
        elif p.tp % m.kv_heads:
            out.append(("parallel.tp", p.tp, f"must divide num_query_groups={m.kv_heads} or be a multiple of it"))
    if m.ffn_hidden_size % p.tp:
        out.append(("parallel.tp", p.tp, f"must divide ffn_hidden_size={m.ffn_hidden_size}"))
    if p.sequence_parallel and p.tp == 1:
        out.append(("parallel.sequence_parallel", True, "requires tp > 1"))
    if m.seq_length % (p.cp * (2 if p.cp > 1 else 1)):
        out.append(("parallel.cp", p.cp, f"2*cp must divide seq_length={m.seq_length}"))
    if p.cp > 1 and p.cp_comm_type == "a2a" and (m.num_attention_heads // p.tp) % p.cp:
        out.append(("parallel.cp", p.cp, f"a2a (Ulysses) context parallelism must divide the heads per TP rank "
                                         f"({m.num_attention_heads // p.tp})"))
    if p.sequence_parallel and (m.seq_length // p.cp) % p.tp:
        out.append(("parallel.tp", p.tp, f"with sequence parallel must divide seq_length/cp={m.seq_length // p.cp}"))
    return out


def _layer_pattern_problems(plan: PlanSections) -> list[Problem]:
    """The per-layer patterns (MoE, window, FP4): one 0/1 entry per decoder layer, each with what it needs."""
    m = plan.model
    out: list[Problem] = []
    for name, pat in (("model.moe_layer_pattern", m.moe_layer_pattern),
                      ("model.window_layer_pattern", m.window_layer_pattern)):
        if pat is not None and (len(pat) != m.num_layers or any(x not in (0, 1) for x in pat)):
            out.append((name, f"{len(pat)} entries", f"0/1 per decoder layer ({m.num_layers})"))
    fpat = plan.training.fp4_layer_pattern
    if fpat is not None and (len(fpat) != m.num_layers or any(x not in (0, 1) for x in fpat)):
        out.append(("training.fp4_layer_pattern", f"{len(fpat)} entries", f"0/1 per decoder layer ({m.num_layers})"))
    if fpat is not None and plan.training.precision != "fp4":
        out.append(("training.fp4_layer_pattern", "set", "only with precision fp4"))
    if plan.training.lowp_params_dtype is not None and plan.training.precision not in ("fp8", "fp4"):
        out.append(("training.lowp_params_dtype", plan.training.lowp_params_dtype, "only with precision fp8 or fp4"))
    if m.moe_layer_pattern is not None and m.moe_dense_first_layers:
        out.append(("model.moe_dense_first_layers", m.moe_dense_first_layers, "0 when moe_layer_pattern is set"))
    return out


def _moe_problems(plan: PlanSections) -> list[Problem]:
    """The MoE rules: EP and expert TP dividing the experts, the world size and the expert FFN, the router's
    top-k and groups; EP 1 for a dense model, no latent width without experts."""
    m, p = plan.model, plan.parallel
    W = plan.cluster.world_size
    out: list[Problem] = []
    if m.moe_latent_size is not None and not m.is_moe:
        out.append(("model.moe_latent_size", m.moe_latent_size, "needs num_experts (the routed experts' latent width)"))
    # --- MoE
    if m.is_moe:
        if m.num_experts % p.ep:
            out.append(("parallel.ep", p.ep, f"must divide num_experts={m.num_experts}"))
        etp = p.expert_tp
        if W % (etp * p.ep * p.pp):
            out.append(("parallel.ep", p.ep, f"etp*ep*pp={etp * p.ep * p.pp} must divide world size {W}"))
        if m.expert_ffn % etp:
            out.append(("parallel.etp", etp, f"must divide moe_ffn_hidden_size={m.expert_ffn}"))
        if m.moe_router_topk > m.num_experts:
            out.append(("model.moe_router_topk", m.moe_router_topk, f"must be <= num_experts={m.num_experts}"))
        G, g = m.moe_router_num_groups, m.moe_router_group_topk
        if (G is None) != (g is None):
            out.append(("model.moe_router_group_topk", g, "set together with moe_router_num_groups"))
        elif G is not None:
            if m.num_experts % G:
                out.append(("model.moe_router_num_groups", G, f"must divide num_experts={m.num_experts}"))
            elif g > G or g * (m.num_experts // G) < m.moe_router_topk:
                out.append(("model.moe_router_group_topk", g,
                            f"<= num_groups={G} with group_topk x experts per group >= topk={m.moe_router_topk}"))
    elif p.ep != 1:
        out.append(("parallel.ep", p.ep, "must be 1 for a dense model"))
    return out


def _pipeline_problems(plan: PlanSections) -> list[Problem]:
    """The pipeline rules: virtual stages, the chunk layout (:func:`chunk_layout`) and the schedule's needs."""
    p, t = plan.parallel, plan.training
    out: list[Problem] = []
    if p.vpp > 1 and p.pp == 1:
        out.append(("parallel.vpp", p.vpp, "requires pp > 1"))
    try:
        chunk_layout(plan)
    except PlanError as e:
        out.append((e.field, e.value, e.allowed))
    if t.pipeline_schedule == "interleaved_1f1b" and p.vpp == 1 and p.pp > 1:
        out.append(("training.pipeline_schedule", t.pipeline_schedule, "needs vpp > 1"))
    if t.pipeline_schedule == "zbv" and p.pp > 1 and p.vpp != 2:
        out.append(("training.pipeline_schedule", t.pipeline_schedule, "ZBV needs vpp == 2 (two chunks per rank in a V)"))
    return out


def _precision_and_overlap_problems(plan: PlanSections, dp: int) -> list[Problem]:
    """The precision-dependent flags (the FP8 / FP4 recipes, the BF16 first / last layers), the communication
    overlaps and the partial distributed optimizer (``dp_replicate``) against ``dp``, the data-parallel size."""
    m, p, t = plan.model, plan.parallel, plan.training
    W = plan.cluster.world_size
    out: list[Problem] = []
    if t.fp8_recipe is not None and t.precision != "fp8":
        out.append(("training.fp8_recipe", t.fp8_recipe, "only with precision fp8"))
    if t.fp8_attention and t.precision != "fp8":
        out.append(("training.fp8_attention", True, "only with precision fp8"))
    if t.fp8_param_gather and t.precision not in ("fp8", "fp4"):
        out.append(("training.fp8_param_gather", True, "only with precision fp8"))
    if t.fp4_recipe is not None and t.precision != "fp4":
        out.append(("training.fp4_recipe", t.fp4_recipe, "only with precision fp4"))
    for name in ("bf16_layers_start", "bf16_layers_end"):
        n = getattr(t, name)
        if not n or t.precision not in ("fp8", "fp4"):
            continue   # without FP8 / FP4 every layer is BF16 already: not read (Plan.bf16_layer_ids)
        if plan.framework != "megatron":
            out.append((f"training.{name}", n, "0 outside Megatron (--first-last-layers-bf16)"))
        elif t.precision == "fp8" and (t.fp8_recipe or "delayed") == "delayed":
            out.append((f"training.{name}", n, "0 with fp8_recipe delayed (megatron-core TransformerConfig raises: "
                                               "'Delayed scaling does not support first / last layer in BF16')"))
        elif t.precision == "fp8" and n > m.num_layers // p.pp:
            out.append((f"training.{name}", n, f"at most num_layers // pp = {m.num_layers // p.pp} (megatron-core "
                                               "TransformerConfig raises)"))
        elif n > m.num_layers:
            out.append((f"training.{name}", n, f"at most num_layers ({m.num_layers})"))
    # --- overlap (megatron/training/arguments.py validate_args): param-gather overlap needs sharded
    # parameters or optimizer state (or dist_muon's layer-wise optimizer: "or args.optimizer == 'dist_muon'") and
    # grad-reduce overlap; TP comm overlap needs sequence parallelism
    layer_wise = t.optimizer == "muon" and t.muon_layer_wise
    if t.overlap_param_gather and ((p.dp_sharding == "none" and not layer_wise) or not t.overlap_grad_reduce):
        out.append(("training.overlap_param_gather", True,
                    "needs dp_sharding optimizer/optimizer_grads/full and overlap_grad_reduce"))
    if t.tp_comm_overlap and not p.sequence_parallel:
        out.append(("training.tp_comm_overlap", True, "needs sequence_parallel (and tp > 1)"))
    if p.dp_replicate > 1 and plan.framework == "megatron":
        # --num-distributed-optimizer-instances (megatron-core 0.16.1 parallel_state.py asserts both divisions;
        # distributed_data_parallel.py: 'Partial DistOpt cannot be used without DistOpt')
        edp = W // (p.expert_tp * p.ep * p.pp) if W % (p.expert_tp * p.ep * p.pp) == 0 else 0
        if p.dp_sharding == "none":
            out.append(("parallel.dp_replicate", p.dp_replicate, "1 without a distributed optimizer (dp_sharding none)"))
        elif (dp * p.cp) % p.dp_replicate or (m.is_moe and edp % p.dp_replicate):
            out.append(("parallel.dp_replicate", p.dp_replicate, f"must divide dp*cp={dp * p.cp}"
                        + (f" and expert dp={edp}" if m.is_moe else "")))
    elif p.dp_replicate > 1 and dp % p.dp_replicate:
        out.append(("parallel.dp_replicate", p.dp_replicate, f"must divide dp={dp}"))
    return out


def ep_overlap_problems(plan: PlanSections) -> list[Problem]:
    """Megatron-Core's asserts on the EP all-to-all overlap (``--overlap-moe-expert-parallel-comm``) and the
    delayed wgrad (``--delay-wgrad-compute``) that hold in every version the readers take: megatron-core
    ``TransformerConfig.__post_init__`` at core_v0.16.1 and at Megatron-LM main d98e8a64dd (2026-08) alike --
    a virtual pipeline when PP > 1 ("If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be
    specified when pipeline_model_parallel_size > 1"), EP > 1, the alltoall or flex dispatcher, no full
    recompute, a BF16 / FP16 model, no shared-expert overlap, at most one MTP layer; the delayed wgrad only
    with the overlap.  Megatron-LM, Primus and Megatron-Bridge all build that TransformerConfig, so a recipe
    breaking one never starts.  (The rules that changed between those versions -- CUDA graph scopes, MTP with
    PP 1 -- stay in the tuner's ``rules.knob_problems``, which keeps its space inside both.)"""
    if plan.framework != "megatron":
        return []
    m, p, t = plan.model, plan.parallel, plan.training
    out: list[Problem] = []
    if t.overlap_moe_expert_parallel_comm:
        why = None
        if not m.is_moe or p.ep <= 1:
            why = "needs expert parallelism (ep > 1)"
        elif p.pp > 1 and p.vpp == 1:
            why = (f"needs a virtual pipeline when pp > 1 (pp={p.pp}: --num-virtual-stages-per-pipeline-rank or "
                   "--num-layers-per-virtual-pipeline-stage; megatron-core TransformerConfig asserts it)")
        elif t.moe_token_dispatcher == "allgather":
            why = "needs the alltoall or flex (deepep/hybridep) dispatcher"
        elif t.recompute.granularity == "full":
            why = "not with full recompute"
        elif t.precision == "fp32":
            why = "needs a bf16/fp16 model"
        elif t.moe_shared_expert_overlap:
            why = "not with moe_shared_expert_overlap"
        elif m.mtp_num_layers > 1:
            why = "at most one MTP layer"
        if why:
            out.append(("training.overlap_moe_expert_parallel_comm", True, why))
    if t.delay_wgrad_compute and not t.overlap_moe_expert_parallel_comm:
        out.append(("training.delay_wgrad_compute", True, "needs overlap_moe_expert_parallel_comm"))
    return out


def _recompute_problems(plan: PlanSections) -> list[Problem]:
    """The recompute settings: known modules, the every-n period, MTP's uniform recompute, Primus's layer ids."""
    m, t = plan.model, plan.training
    out: list[Problem] = []
    r = t.recompute
    bad = [x for x in r.modules if x not in RECOMPUTE_MODULES]
    if bad:
        out.append(("training.recompute.modules", ",".join(bad), "of " + ", ".join(RECOMPUTE_MODULES)))
    if r.granularity == "full" and r.method == "every_n" and not r.num_layers:
        out.append(("training.recompute.num_layers", r.num_layers, "a period >= 1 with method every_n"))
    # megatron transformer/multi_token_prediction.py MultiTokenPredictionLayer._checkpointed_forward:
    # uniform recompute of an MTP layer asserts recompute_num_layers == 1
    if (plan.framework == "megatron" and m.mtp_num_layers and r.granularity == "full" and r.method == "uniform"
            and (r.num_layers or 1) != 1):
        out.append(("training.recompute.num_layers", r.num_layers, "1 with method uniform and MTP layers "
                                                                   "(megatron's MTP layer asserts it)"))
    # Primus recompute_layer_ids (patches/recompute_layer_patches.py validate_specified_recompute_layers)
    if r.method == "layer_ids" or r.layer_ids:
        top = m.num_layers + m.mtp_num_layers - 1
        if plan.framework != "megatron":
            out.append(("training.recompute.method", r.method, "uniform, every_n or block on TorchTitan (layer_ids is "
                                                               "AMD Primus's Megatron recompute_layer_ids)"))
        elif r.granularity != "full":
            out.append(("training.recompute.granularity", r.granularity, "full with recompute_layer_ids (Primus "
                                                                         "raises otherwise)"))
        elif r.method != "layer_ids":
            out.append(("training.recompute.method", r.method, "layer_ids (null in Primus) with recompute_layer_ids"))
        elif not r.layer_ids:
            out.append(("training.recompute.layer_ids", "[]", "must not be empty (Primus raises)"))
        elif list(r.layer_ids) != sorted(set(r.layer_ids)):
            out.append(("training.recompute.layer_ids", ",".join(map(str, r.layer_ids)), "sorted unique ids"))
        elif r.layer_ids[0] < 0 or r.layer_ids[-1] > top:
            bad_id = next(i for i in r.layer_ids if i < 0 or i > top)
            out.append(("training.recompute.layer_ids", bad_id, f"between 0 and {top} (0..{m.num_layers - 1} are "
                        "decoder layers" + (f", {m.num_layers}..{top} the {m.mtp_num_layers} MTP depths)"
                                            if m.mtp_num_layers else ")")))
    return out


def _named_choice_problems(plan: PlanSections) -> list[Problem]:
    """The named choices of CUDA graph scopes and offloaded modules, and the offloaded layers' count."""
    m, t = plan.model, plan.training
    out: list[Problem] = []
    bad = [x for x in t.cuda_graph_scope if x not in CUDA_GRAPH_SCOPES]
    if bad:
        out.append(("training.cuda_graph_scope", ",".join(bad), "of " + ", ".join(CUDA_GRAPH_SCOPES)))
    if t.cuda_graph_scope and t.cuda_graph_impl == "none":
        out.append(("training.cuda_graph_scope", ",".join(t.cuda_graph_scope), "needs cuda_graph_impl local or "
                                                                              "transformer_engine"))
    bad = [x for x in t.offload.activation_modules if x not in OFFLOAD_MODULES]
    if bad:
        out.append(("training.offload.activation_modules", ",".join(bad), "of " + ", ".join(OFFLOAD_MODULES)))
    if t.offload.activation_layers > m.num_layers:
        out.append(("training.offload.activation_layers", t.offload.activation_layers,
                    f"<= num_layers={m.num_layers}"))
    return out


def _batch_problems(plan: PlanSections, dp: int) -> list[Problem]:
    """The global batch against micro-batch x ``dp``, and the interleaved schedule's micro-batch groups."""
    p, t = plan.parallel, plan.training
    out: list[Problem] = []
    if t.global_batch_size % (t.micro_batch_size * dp):
        out.append(("training.global_batch_size", t.global_batch_size,
                    f"must be divisible by micro_batch_size x dp = {t.micro_batch_size} x {dp}"))
    else:
        nmb = t.global_batch_size // (t.micro_batch_size * dp)
        if p.pp > 1 and p.vpp > 1 and t.pipeline_schedule == "interleaved_1f1b":
            # megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving:
            # the group lies in [pp, m] and the last group is empty or holds at least pp micro-batches
            g = p.microbatch_group or p.pp
            if p.microbatch_group is not None and not p.pp <= g <= nmb:
                out.append(("parallel.microbatch_group", g, f"between pp={p.pp} and the micro-batches ({nmb})"))
            elif 0 < nmb % g < p.pp:
                what = f"divisible by pp={p.pp}" if p.microbatch_group is None else \
                    f"a multiple of the micro-batch group ({g}) or leaving a last group of at least pp={p.pp}"
                out.append(("training.global_batch_size", t.global_batch_size,
                            f"interleaved schedule needs micro-batches ({nmb}) {what}"))
    return out
    return out


def torchtitan_problems(plan: PlanSections) -> list[Problem]:
    """Rules torchtitan adds to :func:`legality_problems`, as (field, value, allowed): the adapters
    refuse a TorchTitan recipe that breaks them and the tuner never proposes one.

    Sources: ``ParallelDims`` (v0.2.2: EP is carved out of dp_shard x cp, x tp when etp = 1, so ep
    must divide ``dp_shard*cp*tp/etp``; etp is 1 or tp, and tp without EP: ``parallelize.py`` ``apply_moe_ep_tp``
    gives the experts the TP plan when EP is off), ``Decoder.Config.update_from_config`` (no
    weight tying with PP), ``pipeline_parallel.py`` (single-stage schedules run one stage per rank,
    looped ones >= 2, V schedules exactly 2).
    """
    p, t, m = plan.parallel, plan.training, plan.model
    out: list[Problem] = []
    if p.dp_sharding in ("optimizer", "optimizer_grads"):
        out.append(("parallel.dp_sharding", p.dp_sharding, "torchtitan has none (DDP) or full (FSDP/HSDP)"))
    r = t.recompute
    if r.granularity == "selective" or (r.granularity == "full" and r.method == "block"):
        what = "selective" if r.granularity == "selective" else "full block"
        out.append(("training.recompute", what, "torchtitan's activation checkpointing: none, full, op "
                                                "(per-op SAC) or full every N layers"))
    dp = plan.cluster.world_size // (p.tp * p.cp * p.pp)
    shard = dp // p.dp_replicate if dp % p.dp_replicate == 0 else 0
    if m.is_moe and p.ep == 1 and p.expert_tp != p.tp:
        # torchtitan's apply_moe_ep_tp: without EP the experts take the TP mesh's plan (expert_tensor_parallel_degree
        # is read only with EP; the reader gives expert TP = tp there)
        out.append(("parallel.etp", p.expert_tp, f"torchtitan shards the experts over TP without EP (expert TP = "
                                                 f"tp={p.tp}; expert TP 1 only with ep > 1)"))
    if p.ep > 1 and m.is_moe:
        etp = p.expert_tp
        if etp != 1 and plan.source is not None and plan.source.format in ("torchtitan-argv", "torchtitan-script"):
            out.append(("parallel.etp", etp, "torchtitan 0.3 has no expert TP: EP borrows the TP ranks (etp 1)"))
        if etp not in (1, p.tp):
            out.append(("parallel.etp", etp, f"torchtitan supports expert TP 1 or tp={p.tp}"))
        pool = shard * p.cp * (p.tp if etp == 1 else 1)
        if pool % p.ep:
            out.append(("parallel.ep", p.ep, f"torchtitan needs ep to divide dp_shard*cp{'*tp' if etp == 1 else ''}"
                        f"={pool}"))
    if p.pp > 1:
        if not m.untie_embeddings_and_output_weights:
            out.append(("parallel.pp", p.pp, "torchtitan does not support weight tying with pipeline parallel"))
        try:
            name = titan_schedule(t.pipeline_schedule, p.vpp)
        except PlanError as e:
            out.append((e.field, e.value, e.allowed))
            return out
        single = is_single_stage(name)
        if single and p.vpp != 1:
            out.append(("parallel.vpp", p.vpp, f"torchtitan's {name} runs one stage per rank (vpp=1)"))
        if not single and p.vpp < 2:
            out.append(("parallel.vpp", p.vpp, f"torchtitan's {name} needs >= 2 stages per rank"))
        mb = t.micro_batch_size * dp
        nmb = t.global_batch_size // mb if mb and t.global_batch_size % mb == 0 else 0
        if name == "1F1B" and 0 < nmb < p.pp:
            # torch 2.13 Schedule1F1B.__init__: "Number of microbatches (m) must be greater than or equal to the
            # number of stages (pp)"; the writer gives the schedule all of the plan's micro-batches in one step
            out.append(("training.global_batch_size", t.global_batch_size,
                        f"torch's 1F1B needs micro-batches (global / (micro_batch_size x dp) = {nmb}) >= pp={p.pp}"))
    return out


def _attention_backend_problems(plan: PlanSections) -> list[Problem]:
    """A Megatron plan on NVIDIA GPUs whose attention no backend can run (:mod:`primus_launch.plan.te_attention`:
    Megatron's ``--attention-backend`` and TE 2.14.1's ``get_attention_backend`` filters); AMD (TE-ROCm) and
    TorchTitan (its own attention) are not judged."""
    m, p, t = plan.model, plan.parallel, plan.training
    if plan.framework != "megatron" or plan.cluster.gpu.startswith("mi"):
        return []
    if te_backends(t.attention_backend, m.softmax_type, p.cp, p.cp_comm_type):
        return []
    sinks = m.softmax_type != "vanilla"
    if t.attention_backend == "flash" and sinks:
        return [("training.attention_backend", "flash",
                 f"auto, fused, unfused or local with model.softmax_type={m.softmax_type}: Transformer Engine "
                 "disables FlashAttention for attention sinks and --attention-backend flash turns the others off")]
    if t.attention_backend in ("unfused", "local"):
        return [("training.attention_backend", t.attention_backend,
                 f"auto, fused or flash with parallel.cp={p.cp}: "
                 + ("Megatron's local attention asserts context_parallel_size == 1" if t.attention_backend == "local"
                    else "Transformer Engine's unfused attention does not support context parallelism"))]
    return [("parallel.cp_comm_type", p.cp_comm_type,
             f"a2a with model.softmax_type={m.softmax_type} and parallel.cp={p.cp}: Transformer Engine runs attention "
             "sinks under context parallelism only in FusedAttention with cp_comm_type a2a")]


def framework_problems(plan: PlanSections) -> list[Problem]:
    """The rules of the framework that runs ``plan`` beyond :func:`legality_problems` (TorchTitan's,
    :func:`torchtitan_problems`; Megatron's are all in :func:`legality_problems`)."""
    return torchtitan_problems(plan) if plan.framework == "torchtitan" else []


def check_plan(plan: PlanSections) -> list[str]:
    """Human-readable legality problems (empty when legal)."""
    return [str(PlanError(*p)) for p in legality_problems(plan)]


# =============================================================================================
# Launch environment a Megatron plan requires.  Megatron-LM's validate_args reads os.environ, so
# these are start-up rules of the plan *with* its launch environment: the writers of tuned recipes
# (adapters/megatron.py, megatron_yaml.py) use megatron_env_fixes to write what a knob needs.
# Source: Megatron-LM megatron/training/arguments.py validate_args at core_v0.16.1 (tag of the
# pinned megatron-core; the same asserts on main/dev at 2026-08).
# =============================================================================================

# torch.cuda.get_device_properties().major of each kernel family (GPUSpec.arch); ROCm reports 9 for
# gfx942 (CDNA3) and gfx950 (CDNA4).  Unknown ('') counts as Hopper, as the cost model does.
_ARCH_MAJOR = {"ampere": 8, "hopper": 9, "blackwell": 10, "blackwell_ultra": 10, "cdna3": 9, "cdna4": 9}
# the value written where Megatron needs CUDA_DEVICE_MAX_CONNECTIONS other than 1: CUDA's default
# (8), what AMD Primus sets for FSDP (primus/backends/megatron/patches/env_patches.py)
FSDP_MAX_CONNECTIONS = "8"


def arch_major(gpu_arch: str) -> int:
    """Compute-capability major of a GPU kernel family (``GPUSpec.arch``): 8 Ampere, 9 Hopper and AMD
    CDNA3/4 (as ROCm reports gfx9xx), 10 Blackwell; Hopper when unknown."""
    return _ARCH_MAJOR.get(gpu_arch, 9)


def _megatron_fsdp(plan: "Plan") -> bool:
    # adapters/megatron_args.py desired_args: optimizer_grads / full -> --use-megatron-fsdp (or a
    # script's --use-torch-fsdp2); both assert CUDA_DEVICE_MAX_CONNECTIONS != 1
    return plan.parallel.dp_sharding in ("optimizer_grads", "full")


def megatron_env_problems(plan: "Plan", env: dict[str, str], gpu_arch: str = "",
                          te_version: tuple[int, int] | None = None) -> list[Problem]:
    """Every start-up assert of Megatron-LM's ``validate_args`` that ``plan`` launched with ``env``
    (the variables the recipe sets; absent = unset) breaks, as (``env VAR``, value, what is allowed).

    Rules (megatron/training/arguments.py validate_args, core_v0.16.1):

    - Megatron-FSDP (``--use-megatron-fsdp``, line 687) and torch FSDP2 (line 622): ``assert
      CUDA_DEVICE_MAX_CONNECTIONS != "1"``;
    - TP > 1 or CP > 1 on a GPU of compute capability < 10, without FSDP and without
      ``--overlap-moe-expert-parallel-comm`` (line 951): ``assert CUDA_DEVICE_MAX_CONNECTIONS == "1"``;
    - ``--fine-grained-activation-offloading`` with Transformer Engine >= 2.10 (line 1226):
      ``assert NVTE_CPU_OFFLOAD_V1 == "1"`` (``te_version`` None: any TE, the rule applies);
    - ``--cuda-graph-impl transformer_engine`` (line 1248): ``PYTORCH_CUDA_ALLOC_CONF`` without
      ``expandable_segments:True`` or ``NCCL_GRAPH_REGISTER == "0"``.
    """
    if plan.framework != "megatron":
        return []
    p, t = plan.parallel, plan.training
    out: list[Problem] = []
    cmc = env.get("CUDA_DEVICE_MAX_CONNECTIONS")
    if _megatron_fsdp(plan):
        if cmc == "1":
            out.append(("env CUDA_DEVICE_MAX_CONNECTIONS", cmc, "unset or > 1 with Megatron-FSDP / FSDP2 (dp_sharding "
                        f"{p.dp_sharding}; megatron/training/arguments.py validate_args)"))
    elif (p.tp > 1 or p.cp > 1) and arch_major(gpu_arch) < 10 and not t.overlap_moe_expert_parallel_comm:
        if cmc != "1":
            out.append(("env CUDA_DEVICE_MAX_CONNECTIONS", cmc if cmc is not None else "unset",
                        f"1 with tp={p.tp} / cp={p.cp} > 1 on compute capability < 10 (megatron/training/"
                        "arguments.py validate_args)"))
    if t.offload.activation_modules and (te_version is None or te_version >= (2, 10)):
        v = env.get("NVTE_CPU_OFFLOAD_V1")
        if v != "1":
            out.append(("env NVTE_CPU_OFFLOAD_V1", v if v is not None else "unset",
                        "1 with fine-grained activation offloading under Transformer Engine >= 2.10 (megatron/"
                        "training/arguments.py validate_args)"))
    if t.cuda_graph_impl == "transformer_engine" and "expandable_segments:True" in env.get(
            "PYTORCH_CUDA_ALLOC_CONF", "") and env.get("NCCL_GRAPH_REGISTER") != "0":
        out.append(("env NCCL_GRAPH_REGISTER", env.get("NCCL_GRAPH_REGISTER", "unset"),
                    "0 with TE CUDA graphs and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (megatron/training/"
                    "arguments.py validate_args)"))
    return out


def megatron_env_fixes(plan: "Plan", env: dict[str, str], gpu_arch: str = "") -> dict[str, str]:
    """The variables to set so that ``plan`` launched with ``env`` passes :func:`megatron_env_problems`
    under any Transformer Engine: ``CUDA_DEVICE_MAX_CONNECTIONS`` 1 or :data:`FSDP_MAX_CONNECTIONS`,
    ``NVTE_CPU_OFFLOAD_V1=1`` (ignored by TE < 2.10), ``NCCL_GRAPH_REGISTER=0``; empty when none."""
    fixes: dict[str, str] = {}
    for field_, _, _ in megatron_env_problems(plan, env, gpu_arch):
        var = field_.split(" ", 1)[1]
        if var == "CUDA_DEVICE_MAX_CONNECTIONS":
            fixes[var] = FSDP_MAX_CONNECTIONS if _megatron_fsdp(plan) else "1"
        elif var == "NVTE_CPU_OFFLOAD_V1":
            fixes[var] = "1"
        elif var == "NCCL_GRAPH_REGISTER":
            fixes[var] = "0"
    return fixes


# =============================================================================================
# Megatron-LM with torch FSDP2 (--use-torch-fsdp2) instead of Megatron-FSDP.  The plan says only
# dp_sharding = "full"; a recipe already on torch FSDP2 stays on it when these hold (the writer,
# adapters/megatron_args.py desired_args, moves it to Megatron-FSDP otherwise).
# Source: Megatron-LM megatron/training/arguments.py validate_args at core_v0.16.1.
# =============================================================================================
def torch_fsdp2_problems(plan: "Plan") -> list[Problem]:
    """What ``validate_args`` rejects in ``plan`` run with ``--use-torch-fsdp2``:

    - ``--overlap-param-gather`` asserts the distributed optimizer or Megatron-FSDP (line 598), and
      torch FSDP2 asserts no distributed optimizer (line 612): the two cannot meet;
    - pipeline parallelism (line 608), expert parallelism (line 610), tied embeddings (line 618) and
      fp16 (line 620) are asserted away.
    """
    p, t, m = plan.parallel, plan.training, plan.model
    out: list[Problem] = []
    if t.overlap_param_gather:
        out.append(("training.overlap_param_gather", True, "off with torch FSDP2 (needs the distributed optimizer "
                                                           "or Megatron-FSDP)"))
    if p.pp > 1:
        out.append(("parallel.pp", p.pp, "1 with torch FSDP2"))
    if p.ep > 1:
        out.append(("parallel.ep", p.ep, "1 with torch FSDP2"))
    if not m.untie_embeddings_and_output_weights:
        out.append(("model.untie_embeddings_and_output_weights", False, "True with torch FSDP2"))
    if t.precision == "fp16":
        out.append(("training.precision", "fp16", "not fp16 with torch FSDP2"))
    return out


def effective_fsdp_impl(plan: "Plan") -> str:
    """The implementation a Megatron plan with ``dp_sharding = full`` runs on: ``torch_fsdp2`` where the
    plan asks for it and :func:`torch_fsdp2_problems` finds nothing ``validate_args`` would reject,
    else Megatron-FSDP (``megatron_fsdp``: what the Megatron writer writes for such a plan)."""
    p = plan.parallel
    if p.dp_sharding == "full" and p.fsdp_impl == "torch_fsdp2" and not torch_fsdp2_problems(plan):
        return "torch_fsdp2"
    return "megatron_fsdp"


HYBRID_SYMBOLS = "M*-E"


def _hybrid_problems(plan: PlanSections) -> list[Problem]:
    """A hybrid Mamba / attention stack's rules (megatron-core 0.16.1 ``ssm/mamba_hybrid_layer_allocation.py``
    ``_allocate_override``: one symbol of ``M * - E`` per layer, the pattern's length the layer count;
    ``ssm/mamba_mixer.py`` ``MambaMixer.__init__``: TP divides the Mamba heads and groups, the groups divide the
    heads; an ``E`` layer needs experts)."""
    m, p = plan.model, plan.parallel
    pat = m.hybrid_pattern
    if pat is None:
        return []
    out: list[Problem] = []
    bad = sorted({ch for ch in pat if ch not in HYBRID_SYMBOLS})
    if bad or len(pat) != m.num_layers:
        shown = pat if len(pat) <= 60 else f"{pat[:60]}... ({len(pat)} symbols)"
        return [("model.hybrid_pattern", shown, f"one of M (Mamba), * (attention), - (MLP), E (MoE) per decoder "
                                                f"layer ({m.num_layers})" + (f"; not {''.join(bad)!r}" if bad else ""))]
    if "E" in pat and not m.is_moe:
        out.append(("model.hybrid_pattern", "E layers", "need num_experts"))
    if m.moe_layer_pattern is not None:
        out.append(("model.moe_layer_pattern", f"{len(m.moe_layer_pattern)} entries", "unset with hybrid_pattern "
                                                                                       "(its E layers are the MoE ones)"))
    mtp = m.hybrid_mtp_pattern
    if mtp is not None:
        badm = sorted({ch for ch in mtp if ch not in HYBRID_SYMBOLS})
        if badm or not mtp:
            out.append(("model.hybrid_mtp_pattern", mtp, "one of M, *, -, E per MTP layer" +
                        (f"; not {''.join(badm)!r}" if badm else "")))
        if not m.mtp_num_layers:
            out.append(("model.hybrid_mtp_pattern", mtp, "needs mtp_num_layers > 0 (its depths)"))
        if "E" in mtp and not m.is_moe:
            out.append(("model.hybrid_mtp_pattern", "E layers", "need num_experts"))
    if "M" in pat:
        H, G = m.mamba_heads, m.mamba_num_groups
        if m.mamba_num_heads is None and (2 * m.hidden_size) % m.mamba_head_dim:
            out.append(("model.mamba_head_dim", m.mamba_head_dim, f"must divide 2 x hidden_size={2 * m.hidden_size} "
                                                                  "when mamba_num_heads is not given"))
        if H % G:
            out.append(("model.mamba_num_groups", G, f"must divide the Mamba heads ({H})"))
        if H % p.tp or G % p.tp:
            out.append(("parallel.tp", p.tp, f"must divide the Mamba heads ({H}) and groups ({G})"))
        elif p.cp > 1:
            # megatron-core 0.16.1 ssm/mamba_context_parallel.py MambaContextParallel.__init__'s asserts
            ht, gt = H // p.tp, G // p.tp
            if ht % p.cp:
                out.append(("parallel.cp", p.cp, f"must divide the Mamba heads per TP rank ({ht})"))
            elif (gt < p.cp and p.cp % gt) or (gt >= p.cp and gt % p.cp):
                out.append(("parallel.cp", p.cp, f"must divide, or be a multiple of, the Mamba groups per TP rank "
                                                 f"({gt})"))
    return out

