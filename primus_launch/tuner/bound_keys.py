"""What each of the branch and bound's bounds reads of a plan, and the keys that group plans by it: the
structural axes (:data:`S`) and execution flags (:data:`F`) of a :class:`~primus_launch.tuner.knobs.Knobs`
tuple by index, the flags of a compute variant (:data:`VARIANT_FLAGS`) and of a node (:data:`NODE_FLAGS`),
those each part of the floor features, the static memory, the memory inside and outside the allocator and the
post-pipeline floor read, and the axes the layer times, the shape, the static memory and the tail read.  A
bound cached by such a key is the same for every plan sharing it (``tests/test_tuner_bounds.py`` checks the
keys against the projection on sampled plans); the bounds themselves are ``bounds.py``'s (time),
``memory_floors.py``'s (memory) and ``exact_bound.py``'s (a plan's level 2)."""

from __future__ import annotations

from operator import itemgetter
from typing import Callable

from primus_launch.tuner.knobs import AXES, N_STRUCT

S = {a: i for i, a in enumerate(AXES[:N_STRUCT])}
F = {a: i for i, a in enumerate(AXES[N_STRUCT:])}
#: the execution flags :func:`~primus_launch.projection.cost.roofline.floor_cfg` reads (the others it
#: sets at their floor) and TP / EP communication overlap (the communication floors' form): a table's
#: variants
VARIANT_FLAGS = ("precision", "fp8_recipe", "dispatcher", "compile", "tp_comm_overlap", "ep_overlap")
#: a node of a structural candidate's table (:meth:`BoundModel.node_bounds`): a compute variant and its
#: activation offloading (whole layers, named modules)
NODE_FLAGS = VARIANT_FLAGS + ("offload_layers", "offload_modules")
#: the execution flags the layer times read (``cost/roofline.py`` ``_cfg``: precision, FP8 recipe and
#: parameter gather, dispatcher, compile, TP overlap's userbuffers, CUDA graphs; with the layer axes and,
#: for FP8's per-step weight casts, the micro-batches): the pass times a node's offload copy may hide behind
PASS_FLAGS = ("precision", "fp8_recipe", "fp8_param_gather", "dispatcher", "compile", "tp_comm_overlap",
              "cuda_graph_impl", "cuda_graph_scope")
#: the flags each part of the floor features reads (:meth:`BoundModel.floor_features`)
LT_FLAGS = ("precision", "fp8_recipe", "dispatcher", "compile")
TP_FLAGS = ("precision", "fp8_recipe", "tp_comm_overlap")
EP_FLAGS = ("precision", "fp8_recipe", "dispatcher", "ep_overlap")
#: the execution flags the static memory (weights, gradients, optimizer state) reads
STATIC_FLAGS = ("precision", "fp8_recipe", "fp8_param_gather", "optimizer_offload", "moments")
#: the execution flags the memory inside the caching allocator reads (``memory/mcore.py`` ``mcore_args``
#: of a Megatron plan: CUDA graphs as a full-iteration graph and as TE graphs' scopes; ``memory/estimate.py`` ``titan_args``
#: of a TorchTitan plan: precision and compile) and those the memory outside it reads (``plan_outside_bytes``);
#: TP overlap's userbuffers GEMM workspaces are inside it (``memory/workspaces.py``)
MEMORY_FLAGS = ("precision", "fp8_recipe", "fp8_param_gather", "optimizer_offload", "moments", "offload_layers",
                "offload_modules", "ep_overlap", "tp_comm_overlap", "cuda_graph_impl", "cuda_graph_scope", "compile")
TITAN_MEMORY_FLAGS = ("precision", "compile")
OUTSIDE_FLAGS = ("precision", "dispatcher", "tp_comm_overlap")
#: the execution flags the post-pipeline floor (DP sync, optimizer step) reads
TAIL_FLAGS = STATIC_FLAGS + ("overlap_grad_reduce", "overlap_param_gather")
#: the structural axes the layer times read (with the variant)
LAYER_AXES = ("tp", "cp", "ep", "etp", "sp", "mbs")
#: the structural axes the shape reads (layers per chunk, schedule, full recompute)
SHAPE_AXES = ("pp", "vpp", "first_stage_layers", "last_stage_layers", "acc_embedding", "acc_loss", "layout",
              "schedule", "rc_granularity", "rc_method", "rc_layers", "rc_modules")
#: the structural axes the static memory reads (the data-parallel size through tp, cp and pp)
MEMORY_AXES = ("tp", "etp", "ep", "pp", "cp", "dp_sharding", "dp_replicate")
#: the structural axes the post-pipeline floor reads (the stages' parameters: the split too, and the schedule, whose
#: V placement (zbv: rank r holds chunks r and 2 pp - 1 - r, ``memory/params.py`` ``stage_parameter_split``) puts the
#: embedding and the output layer on one rank)
TAIL_AXES = MEMORY_AXES + ("vpp", "first_stage_layers", "last_stage_layers", "acc_embedding", "acc_loss", "layout",
                           "schedule")


def pick(values: tuple, axes: tuple[str, ...], index: dict[str, int]) -> tuple:
    """The values of ``axes`` in ``values`` (a structural tuple with ``S``, a flag tuple with ``F``), by one
    ``itemgetter`` per (axes, index) built once (2.2M calls in the Qwen3-235B tune: the per-call generator was
    5 % of its profile)."""
    key = (axes, id(index))
    get = _GETTERS.get(key)
    if get is None:
        get = _GETTERS[key] = _getter(tuple(index[a] for a in axes))
    return get(values)


def _getter(idx: tuple[int, ...]) -> Callable[[tuple], tuple]:
    if len(idx) == 1:
        i = idx[0]
        return lambda v: (v[i],)
    return itemgetter(*idx) if idx else (lambda v: ())


#: pick's getters; its keys hold the index dicts' ids: only the module's S and F (and their like) are passed
_GETTERS: dict[tuple, Callable[[tuple], tuple]] = {}


def distinct_values(table: tuple, flags: tuple[str, ...]) -> dict[tuple, tuple]:
    """The distinct values of ``flags`` in ``table``, each with the first flag tuple holding it."""
    out: dict[tuple, tuple] = {}
    for f in table:
        out.setdefault(pick(f, flags, F), f)
    return out


#: :data:`MEMORY_FLAGS` by name less the graph flags (keyed in :func:`memory_key` itself) and compile (TorchTitan's)
_MCORE_MEMORY_FLAGS = tuple(a for a in MEMORY_FLAGS if a not in ("cuda_graph_impl", "cuda_graph_scope", "compile"))


def memory_key(framework: str, f: tuple) -> tuple:
    """What of flag tuple ``f`` the memory inside the allocator reads (:data:`MEMORY_FLAGS`)."""
    if framework == "torchtitan":
        return pick(f, TITAN_MEMORY_FLAGS, F)
    k = pick(f, _MCORE_MEMORY_FLAGS, F)
    impl, scope = f[F["cuda_graph_impl"]], f[F["cuda_graph_scope"]]
    # a full-iteration graph's pool; TE graphs' static buffers per scope (memory/mcore.py mcore_opts
    # te_graph_scope, memory/te_graphs.py)
    return k + (impl == "local" and "full_iteration" in scope, tuple(scope) if impl == "transformer_engine" else None)
