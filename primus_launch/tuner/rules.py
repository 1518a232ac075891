"""Framework rules the tuner's new knobs must obey beyond :func:`primus_launch.plan.legality_problems`,
and what each framework and GPU can express.

:func:`knob_problems` lists the combination rules Megatron-LM (core 0.16) asserts for the execution
knobs the search space changes (EP overlap, delayed wgrad, CUDA graphs, recompute modules,
offloading, Megatron-FSDP, the precision-aware optimizer, FP8); the space (``space.py``) is built
so that every candidate it enumerates has none of them, and ``tests/test_tuner_space.py`` checks
the enumeration against a brute force over the raw product filtered by these rules.

Sources (Megatron-LM branch ``core_r0.16.0``):

- ``megatron/core/transformer/transformer_config.py`` ``__post_init__``: recompute modules
  (``moe_act`` needs grouped GEMM, ``mla_up_proj`` needs MLA, ``shared_experts`` not with
  ``moe_shared_expert_overlap``, ``moe_act``/``layernorm`` not with FP8 delayed scaling);
  ``overlap_moe_expert_parallel_comm`` (PP > 1 with its one MTP layer, CUDA graphs only
  ``transformer_engine`` without ``moe``/``mlp`` scopes: core_v0.16.1's, relaxed later; the rules every
  version asserts -- EP > 1, the dispatcher, no full recompute, BF16/FP16, no shared-expert overlap, one MTP
  layer at most, a virtual pipeline when PP > 1, ``delay_wgrad_compute`` only with the overlap -- are the
  plan's own, ``plan/legality.py`` ``ep_overlap_problems``, so a recipe breaking them is refused); CUDA graph scopes (no
  ``full_iteration`` with ``transformer_engine``,
  ``moe`` scope and whole MoE layers only with drop-padding MoE (``training.moe_expert_capacity_factor`` +
  ``moe_pad_expert_input_to_capacity``),
  ``moe_preprocess`` needs ``moe_router`` and is refused with the alltoall dispatcher under token drop without
  padding (host copies in the preprocess) and when the router pads
  for FP8 (``--moe-router-padding-for-fp8``: host copies in the preprocess; asserted for that spelling only,
  applied here to ``--moe-router-padding-for-quantization`` too, which the plan does not tell apart), the
  router's padding needs fp8 / fp4 and the alltoall or flex dispatcher, ``mlp`` scope only with dense layers, full recompute
  only with the ``full_iteration`` graph, no CUDA graphs with CPU offloading, graphed
  recomputation without dropout); CPU offloading (fewer layers than the model, no PP, no
  recompute); fine-grained activation offloading (``attn_proj`` needs ``core_attn``, not with
  CPU offloading).
- ``megatron/training/arguments.py`` ``validate_args``: ``cuda_graph_impl local`` with EP > 1
  needs ``--moe-pad-experts-for-cuda-graph-inference`` (not a plan field: excluded);
  ``full_iteration`` needs ``--no-check-for-nan-in-loss-and-grad`` (not a plan field: excluded);
  ``--optimizer-cpu-offload`` needs ``--use-precision-aware-optimizer`` and, with
  ``--fp8-param-gather``, ``--fp8-recipe delayed``; ``--fp8-param-gather`` needs the distributed
  optimizer or FSDP.
- ``megatron/core/transformer/moe/token_dispatcher.py``: the flex dispatcher (DeepEP / HybridEP)
  needs expert TP x EP > 1.
- ``megatron/core/optimizer/optimizer_config.py``: the precision-aware optimizer needs Adam and the
  distributed optimizer.
- Megatron-LM dev (d48bd6be0a) ``--chunked-optimizer-state-offload`` (``optimizer_state_fraction > 0``):
  ``OptimizerConfig.__post_init__`` asserts it and ``--optimizer-cpu-offload`` mutually exclusive, Adam
  (or Muon) on the distributed optimizer, and with the precision-aware optimizer fp32 main params and
  fp32 / bf16 moments; ``validate_args`` asserts no Megatron-FSDP (torch FSDP2 asserts no distributed
  optimizer) and no full-iteration CUDA graph.
- Megatron-FSDP (``docs/user-guide/features/custom_fsdp.md``): compatible with TP, EP and CP; no
  pipeline parallelism is documented, so the space uses it with PP = 1 only.

GPU support (what the space offers on a GPU; a knob a GPU cannot run is not searched there):
CUDA graphs, DeepEP / HybridEP, TE userbuffers TP overlap and fine-grained activation offloading
are NVIDIA-only (CUDA / NVSHMEM / TE features; AMD runs them through Primus-Turbo knobs that
Megatron-LM's flags cannot express); FP8 needs ``peak_flops_fp8 > peak_flops_bf16`` in the hardware
database; FP8 ``blockwise`` is Hopper/Blackwell (TE ``Float8BlockScaling``), ``mxfp8`` Blackwell
(TE ``MXFP8BlockScaling``), AMD: ``delayed`` and ``tensorwise`` (TE-ROCm recipes).  Megatron's
default recipe, delayed scaling, is searched as ``fp8_recipe=None`` (no flag).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from primus_launch.plan import ep_overlap_problems

if TYPE_CHECKING:
    from primus_launch.plan import Plan

Problem = tuple[str, object, str]

#: numerics-changing knob families the user must allow (``--allow``): name -> what it unlocks
ALLOWABLE: dict[str, str] = {
    "fp8": "FP8 training (precision fp8, the FP8 scaling recipe, FP8 parameter all-gather)",
    "optimizer-dtypes": "precision-aware optimizer with BF16 Adam moments (exp_avg, exp_avg_sq)",
}

#: what the tuner may change per framework (the writers render each of these natively and the readers
#: read them back identically; tests/test_tuner_space.py checks it per knob and format)
FRAMEWORK_KNOBS: dict[str, frozenset[str]] = {
    "megatron": frozenset({
        "layout", "account_for", "first_last", "rc_modules", "cuda_graph", "dispatcher", "ep_overlap",
        "delay_wgrad", "megatron_fsdp", "offload", "optimizer_offload", "tp_comm_overlap", "fp8", "moments"}),
    # TorchTitan job TOMLs (v0.1/v0.2 keys): FP8 through the float8 / mx converters with the
    # FSDP float8 all-gather, torch.compile, async TP
    "torchtitan": frozenset({"fp8", "compile", "tp_comm_overlap"}),
}
#: TorchTitan 0.3 launch lines and scripts: precision is the config function's (not a command-line
#: key), so only compile and async TP
TITAN_03_KNOBS = frozenset({"compile", "tp_comm_overlap"})


#: NeMo 1.0 training configs (adapters/nemo_yaml.py): NeMo's MegatronGPTModel has no Megatron-FSDP, pipeline
#: layout, recompute-module list, CUDA-graph or offload keys, and its fp8 is a bool pair the writer does not edit;
#: the Megatron-Core of NeMo 24.x predates the flex (DeepEP) dispatcher; ``ub_tp_comm_overlap`` it has
NEMO1_KNOBS = frozenset({"tp_comm_overlap"})




#: knob families of Transformer Engine layers, not searched on Megatron's local layers (``--transformer-impl local``,
#: read as ``training.attention_backend`` ``local``: :func:`local_layers`): TE userbuffers TP overlap (only TE's
#: linear layers use the communicators ``--tp-comm-overlap`` initializes), FP8 (TE's modules carry it; the local
#: ``ColumnParallelLinear`` / ``RowParallelLinear`` do not), the delayed wgrad (Megatron-LM d98e8a64dd
#: ``megatron/training/arguments.py`` ``validate_args`` asserts ``transformer_impl == 'transformer_engine'``)
TE_LAYER_KNOBS = frozenset({"tp_comm_overlap", "fp8", "delay_wgrad"})


def local_layers(plan: "Plan") -> bool:
    """Whether ``plan`` runs megatron-core's local layers (``--transformer-impl local``: the reader sets
    ``training.attention_backend`` ``local``, ``adapters/megatron_args.py`` ``_attention_backend``).  The
    attention backend is not a searched knob (``knobs.py``), so such a plan keeps it."""
    return plan.framework == "megatron" and plan.training.attention_backend == "local"


def knobs_for(plan: "Plan") -> frozenset[str]:
    """The knob families the tuner may change in ``plan``'s recipe format.  Megatron-FSDP is searched in every
    Megatron format: the ``--no-gradient-accumulation-fusion`` its user guide requires (written with it,
    ``adapters/megatron_args.py`` ``desired_args``) is in the candidate plan (``knobs.apply_knobs``) and priced
    (``projection/cost/wgrad_accumulation.py``).  On local layers (:func:`local_layers`) not the
    :data:`TE_LAYER_KNOBS`."""
    if local_layers(plan):
        return _knobs_for(plan) - TE_LAYER_KNOBS
    return _knobs_for(plan)


def _knobs_for(plan: "Plan") -> frozenset[str]:
    if plan.source is not None and plan.source.format == "nemo1-yaml":
        return NEMO1_KNOBS
    if plan.framework == "torchtitan" and plan.source is not None and plan.source.format in (
            "torchtitan-argv", "torchtitan-script"):
        return TITAN_03_KNOBS
    return FRAMEWORK_KNOBS.get(plan.framework, frozenset())


BLACKWELL = ("b200", "b300", "gb200", "gb300")
HOPPER = ("h100", "h200")


def gpu_vendor(gpu: str) -> str:
    """The GPU's vendor in the database (``nvidia`` / ``amd``), ``unknown`` for a GPU not in it."""
    from primus_launch.projection.hardware.gpus import get_gpu

    try:
        return get_gpu(gpu).vendor
    except Exception:  # an unknown GPU: nothing vendor-specific is searched
        return "unknown"


def is_nvidia(gpu: str) -> bool:
    """Whether the GPU is an NVIDIA one (:func:`gpu_vendor`)."""
    return gpu_vendor(gpu) == "nvidia"


def fp8_recipes(gpu: str, framework: str) -> tuple:
    """FP8 scaling recipes the space offers on ``gpu`` (``()`` when the GPU has no FP8 rate)."""
    from primus_launch.projection.hardware.gpus import get_gpu, has_fp8

    try:
        g = get_gpu(gpu)
    except Exception:
        return ()
    if not has_fp8(g):
        return ()
    if framework == "torchtitan":  # torchao float8 (tensorwise / rowwise scaling), MX on Blackwell
        return ("tensorwise", "rowwise") + (("mxfp8",) if gpu.startswith(BLACKWELL) else ())
    # Megatron's default recipe (delayed scaling) is offered as None: no --fp8-recipe flag, which
    # every Megatron format writes the same way (an argument YAML leaves default values out)
    if g.vendor == "amd":
        return (None, "tensorwise")
    out: tuple = (None, "tensorwise")
    if gpu.startswith(HOPPER) or gpu.startswith(BLACKWELL):
        out += ("blockwise",)
    if gpu.startswith(BLACKWELL):
        out += ("mxfp8",)
    return out


def knob_problems(plan: "Plan") -> list[Problem]:
    """Megatron-LM rules of the tuner's execution knobs that ``plan`` breaks (module docstring);
    for TorchTitan (whose parallel rules are ``plan.torchtitan_problems``): async TP needs
    the compiled model (``CompileConfig.__post_init__`` in 0.3, ``parallelize`` in v0.2), the FSDP
    float8 all-gather needs FSDP and tensorwise scaling (torchao ``Float8LinearConverter``)."""
    if plan.framework == "torchtitan":
        return _titan_knob_problems(plan)
    if plan.framework != "megatron":
        return []
    return [*_recompute_and_router_problems(plan), *_ep_overlap_problems(plan), *_cuda_graph_problems(plan),
            *_offload_problems(plan), *_optimizer_problems(plan)]


def _titan_knob_problems(plan: "Plan") -> list[Problem]:
    """TorchTitan's rules of the tuner's knobs (:func:`knob_problems`): async TP needs the compiled model, the
    FSDP float8 all-gather needs FSDP and tensorwise scaling."""
    t, p = plan.training, plan.parallel
    out: list[Problem] = []
    if t.tp_comm_overlap and p.tp > 1 and not t.compile:
        out.append(("training.tp_comm_overlap", True, "async TP needs torch.compile of the model"))
    if t.fp8_param_gather and (t.precision != "fp8" or p.dp_sharding != "full"
                               or t.fp8_recipe not in (None, "tensorwise")):
        out.append(("training.fp8_param_gather", True, "FSDP float8 all-gather: FSDP and tensorwise scaling"))
    return out


def _selective_modules(plan: "Plan") -> set[str]:
    """The recompute modules of ``plan`` (empty unless its recompute granularity is ``selective``)."""
    r = plan.training.recompute
    return set(r.modules) if r.granularity == "selective" else set()


def _recompute_and_router_problems(plan: "Plan") -> list[Problem]:
    """Megatron's rules of the selective recompute modules (``transformer_config.py`` ``__post_init__``), of the
    router's padding for quantization and of the flex dispatcher (:func:`knob_problems`)."""
    m, p, t = plan.model, plan.parallel, plan.training
    mods = _selective_modules(plan)
    fp8_delayed = t.precision == "fp8" and t.fp8_recipe in (None, "delayed")
    out: list[Problem] = []
    if "moe_act" in mods and not t.moe_grouped_gemm:
        out.append(("training.recompute.modules", "moe_act", "needs moe_grouped_gemm"))
    if "mla_up_proj" in mods and not m.multi_latent_attention:
        out.append(("training.recompute.modules", "mla_up_proj", "needs multi_latent_attention"))
    if "shared_experts" in mods and m.moe_shared_expert_intermediate_size and t.moe_shared_expert_overlap:
        out.append(("training.recompute.modules", "shared_experts", "not with moe_shared_expert_overlap"))
    if fp8_delayed and mods & {"moe_act", "layernorm"}:
        out.append(("training.recompute.modules", "moe_act/layernorm", "not with FP8 delayed scaling"))
    if m.is_moe and t.moe_router_padding_for_quantization and t.precision not in ("fp8", "fp4"):
        out.append(("training.moe_router_padding_for_quantization", True, "needs fp8 or fp4 precision"))
    if m.is_moe and t.moe_router_padding_for_quantization and t.moe_token_dispatcher == "allgather":
        out.append(("training.moe_router_padding_for_quantization", True, "not with the allgather dispatcher"))
    if m.is_moe and t.moe_token_dispatcher in ("deepep", "hybridep") and p.expert_tp * p.ep <= 1:
        out.append(("training.moe_token_dispatcher", t.moe_token_dispatcher, "the flex dispatcher needs expert TP x "
                                                                             "EP > 1"))
    return out


def _ep_overlap_problems(plan: "Plan") -> list[Problem]:
    """Megatron's rules of the EP communication overlap (``overlap_moe_expert_parallel_comm``), the delayed
    wgrad, and the knobs that need Transformer Engine layers (:func:`knob_problems`)."""
    m, p, t = plan.model, plan.parallel, plan.training
    r, o = t.recompute, t.offload
    out: list[Problem] = []
    # the version-stable asserts (EP > 1, a virtual pipeline, the dispatcher, no full recompute, BF16 / FP16, no
    # shared-expert overlap, one MTP layer at most, the delayed wgrad only with the overlap) are the plan's own
    # (plan/legality.py ep_overlap_problems): every candidate is checked with legality_problems too.  Here the
    # ones core_v0.16.1 asserts and later versions relaxed, so the space stays inside both:
    if t.overlap_moe_expert_parallel_comm and not ep_overlap_problems(plan):
        why = None
        if m.mtp_num_layers == 1 and p.pp == 1:
            why = "at most one MTP layer, and then pp > 1"
        elif t.cuda_graph_impl == "local" or (t.cuda_graph_impl == "transformer_engine"
                                               and {"moe", "mlp"} & set(t.cuda_graph_scope)):
            why = "CUDA graphs only transformer_engine without moe/mlp scopes"
        if why:
            out.append(("training.overlap_moe_expert_parallel_comm", True, why))
    # --- Transformer Engine layers (megatron/training/arguments.py validate_args, d98e8a64dd)
    if local_layers(plan) and t.delay_wgrad_compute:
        out.append(("training.delay_wgrad_compute", True, "needs transformer_impl transformer_engine (local layers)"))
    if local_layers(plan) and o.activation_modules:
        out.append(("training.offload.activation_modules", ",".join(o.activation_modules),
                    "fine-grained activation offloading needs transformer_impl transformer_engine (local layers)"))
    return out


def _cuda_graph_problems(plan: "Plan") -> list[Problem]:
    """Megatron's rules of the CUDA graph implementation and scopes (``transformer_config.py``: scopes,
    drop-padding MoE, recompute under graphs, no CPU offloading) (:func:`knob_problems`)."""
    m, p, t = plan.model, plan.parallel, plan.training
    r, o = t.recompute, t.offload
    sel = r.granularity == "selective"
    mods = _selective_modules(plan)
    out: list[Problem] = []
    if t.cuda_graph_impl != "none":
        sc = set(t.cuda_graph_scope)
        whole = not sc or "full_iteration" in sc
        if "full_iteration" in sc:
            out.append(("training.cuda_graph_scope", "full_iteration", "needs --no-check-for-nan-in-loss-and-grad "
                                                                       "(not a plan field)"))
        if t.cuda_graph_impl == "local" and p.ep > 1:
            out.append(("training.cuda_graph_impl", "local", "with ep > 1 needs --moe-pad-experts-for-cuda-graph-"
                                                             "inference (not a plan field)"))
        # transformer_config.py: the moe scope (and a whole MoE layer) only with drop-padding MoE
        padded = t.moe_expert_capacity_factor is not None and t.moe_pad_expert_input_to_capacity
        if "moe" in sc and not padded:
            out.append(("training.cuda_graph_scope", "moe", "only with drop-padding MoE (capacity factor)"))
        if "moe_preprocess" in sc and "moe_router" not in sc:
            out.append(("training.cuda_graph_scope", "moe_preprocess", "needs moe_router"))
        if "moe_preprocess" in sc and m.is_moe and t.moe_token_dispatcher == "alltoall" \
                and t.moe_router_padding_for_quantization:
            out.append(("training.cuda_graph_scope", "moe_preprocess", "not with the alltoall dispatcher and "
                                                                       "moe_router_padding_for_quantization"))
        if "moe_preprocess" in sc and m.is_moe and t.moe_token_dispatcher == "alltoall" \
                and t.moe_expert_capacity_factor is not None and not padded:
            out.append(("training.cuda_graph_scope", "moe_preprocess", "not with the alltoall dispatcher and "
                                                                       "token drop without padding"))
        if sc & {"moe_router", "moe_preprocess"} and not m.is_moe:
            out.append(("training.cuda_graph_scope", "moe_router", "MoE models only"))
        if "mlp" in sc and m.is_moe and all(m.is_moe_layer(i) for i in range(m.num_layers)):
            out.append(("training.cuda_graph_scope", "mlp", "only with dense layers"))
        if not sc and m.is_moe and not padded:
            out.append(("training.cuda_graph_scope", "(whole layer)", "dropless MoE layers are not graphed whole"))
        if r.granularity == "full":
            out.append(("training.cuda_graph_impl", t.cuda_graph_impl, "full recompute only with the "
                                                                       "full_iteration graph"))
        if sel:
            if t.cuda_graph_impl == "transformer_engine" and "moe" in mods and "moe_router" in sc:
                out.append(("training.recompute.modules", "moe", "not with the moe_router graph (TE)"))
            if m.attention_dropout and "core_attn" in mods and (whole or "attn" in sc):
                out.append(("training.recompute.modules", "core_attn", "graphed attention recompute needs "
                                                                       "attention_dropout 0"))
            if m.hidden_dropout and (("mlp" in mods and (whole or "mlp" in sc))
                                     or ("moe" in mods and (whole or "moe" in sc))):
                out.append(("training.recompute.modules", "mlp/moe", "graphed MLP/MoE recompute needs "
                                                                     "hidden_dropout 0"))
        if o.activation_layers:
            out.append(("training.offload.activation_layers", o.activation_layers, "not with CUDA graphs"))
    return out


def _offload_problems(plan: "Plan") -> list[Problem]:
    """Megatron's rules of CPU activation offloading, fine-grained activation offloading, the optimizer
    offload and the chunked optimizer-state offload (:func:`knob_problems`)."""
    m, p, t = plan.model, plan.parallel, plan.training
    r, o = t.recompute, t.offload
    out: list[Problem] = []
    if o.activation_layers:
        if o.activation_layers >= m.num_layers:
            out.append(("training.offload.activation_layers", o.activation_layers, f"< num_layers={m.num_layers}"))
        if p.pp > 1:
            out.append(("training.offload.activation_layers", o.activation_layers, "not with pipeline parallelism"))
        if r.granularity != "none":
            out.append(("training.offload.activation_layers", o.activation_layers, "not with recompute"))
        if o.activation_modules:
            out.append(("training.offload.activation_modules", ",".join(o.activation_modules),
                        "fine-grained offloading not with CPU offloading"))
    if "attn_proj" in o.activation_modules and "core_attn" not in o.activation_modules:
        out.append(("training.offload.activation_modules", "attn_proj", "needs core_attn"))
    if o.optimizer_fraction > 0:
        if not t.precision_aware_optimizer:
            out.append(("training.offload.optimizer_fraction", o.optimizer_fraction,
                        "needs precision_aware_optimizer"))
        if t.fp8_param_gather and t.precision == "fp8" and t.fp8_recipe not in (None, "delayed"):
            out.append(("training.offload.optimizer_fraction", o.optimizer_fraction,
                        "with fp8_param_gather needs fp8_recipe delayed"))
    # --- Megatron-LM dev's chunked optimizer-state offload (arguments.py validate_args and
    # optimizer_config.py OptimizerConfig.__post_init__ at dev d48bd6be0a / 9050d4c5fb)
    if o.optimizer_state_fraction > 0:
        sf = o.optimizer_state_fraction
        if o.optimizer_fraction > 0:
            out.append(("training.offload.optimizer_fraction", o.optimizer_fraction,
                        "0 with the chunked optimizer-state offload (Megatron: mutually exclusive)"))
        if p.dp_sharding != "optimizer":
            out.append(("parallel.dp_sharding", p.dp_sharding, "optimizer (the distributed optimizer, no FSDP) with "
                                                               "the chunked optimizer-state offload"))
        if t.optimizer not in ("adam", "muon"):
            out.append(("training.offload.optimizer_state_fraction", sf, "needs the adam or muon optimizer"))
        if "full_iteration" in t.cuda_graph_scope and t.cuda_graph_impl != "none":
            out.append(("training.offload.optimizer_state_fraction", sf, "not with full-iteration CUDA graphs"))
        if t.precision_aware_optimizer:
            if t.main_params_dtype != "fp32":
                out.append(("training.main_params_dtype", t.main_params_dtype, "fp32 with the chunked "
                                                                               "optimizer-state offload"))
            for name in ("exp_avg_dtype", "exp_avg_sq_dtype"):
                if getattr(t, name) not in ("fp32", "bf16"):
                    out.append((f"training.{name}", getattr(t, name), "fp32 or bf16 with the chunked "
                                                                      "optimizer-state offload"))
    return out


def _optimizer_problems(plan: "Plan") -> list[Problem]:
    """Megatron's rules of the optimizer and the data-parallel sharding: Muon, the precision-aware optimizer,
    Megatron-FSDP, the FP8 parameter all-gather (:func:`knob_problems`)."""
    p, t = plan.parallel, plan.training
    out: list[Problem] = []
    if t.optimizer == "muon":
        # Megatron-LM 2edffadb52 arguments.py validate_args / optimizer/muon.py: no distributed optimizer or FSDP,
        # no fp16; plain muon (not dist_muon) without the DP overlaps
        if p.dp_sharding != "none":
            out.append(("parallel.dp_sharding", p.dp_sharding, "none with the Muon optimizer"))
        if t.precision == "fp16":
            out.append(("training.precision", t.precision, "not fp16 with the Muon optimizer"))
        if not t.muon_layer_wise and (t.overlap_grad_reduce or t.overlap_param_gather):
            out.append(("training.overlap_grad_reduce", True, "off with Muon unless layer-wise (dist_muon)"))
    if t.precision_aware_optimizer and (t.optimizer != "adam" or p.dp_sharding == "none"):
        out.append(("training.precision_aware_optimizer", True, "needs Adam and the distributed optimizer"))
    if p.dp_sharding in ("optimizer_grads", "full") and p.pp > 1:
        out.append(("parallel.dp_sharding", p.dp_sharding, "Megatron-FSDP is used with pp = 1"))
    if t.fp8_param_gather and t.precision == "fp8" and p.dp_sharding == "none":
        out.append(("training.fp8_param_gather", True, "needs the distributed optimizer or FSDP"))
    return out


def gpu_problems(plan: "Plan") -> list[Problem]:
    """Knobs ``plan`` sets that its GPU does not run (module docstring)."""
    t, gpu = plan.training, plan.cluster.gpu
    out: list[Problem] = []
    nvidia = is_nvidia(gpu)
    if not nvidia:
        if t.cuda_graph_impl != "none":
            out.append(("training.cuda_graph_impl", t.cuda_graph_impl, "NVIDIA GPUs only"))
        if t.moe_token_dispatcher in ("deepep", "hybridep"):
            out.append(("training.moe_token_dispatcher", t.moe_token_dispatcher, "NVIDIA GPUs only"))
        if t.offload.activation_modules:
            out.append(("training.offload.activation_modules", ",".join(t.offload.activation_modules),
                        "NVIDIA GPUs only"))
    # Megatron: None = its default, delayed; TorchTitan's reader states the recipe (tensorwise default)
    ok = fp8_recipes(gpu, plan.framework) + ((None, "delayed") if plan.framework == "megatron" else ())
    if t.precision == "fp8" and t.fp8_recipe not in ok:
        out.append(("training.fp8_recipe", t.fp8_recipe, f"on {gpu}: {fp8_recipes(gpu, plan.framework)}"))
    return out
