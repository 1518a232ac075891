"""Lower bounds of the dry-run projection over sets of plans of a tuning space, for the
branch-and-bound search (:mod:`primus_launch.tuner.branch_bound`).

The dry-run prices a plan in typed steps (:mod:`primus_launch.projection.steps`): layer times
(:func:`~primus_launch.projection.cost.roofline.layer_times_roofline`), one layer's communication
(``steps/layer.py``), per stage and chunk one micro-batch's forward / input-gradient /
weight-gradient seconds (``steps/stage.py``), the pipeline schedule (``steps/schedule.py``) and the
DP sync and optimizer after it (``steps/iteration.py``).  Every chunk second is a sum of a layer
kind's pass time, times a count fixed by the plan's *shape* (pipeline split, schedule, recompute),
plus communication, selective-recompute and offload terms that are never negative.  The bounds:

- **time, level 1** (per structural candidate, over its whole flag table): the chunk costs with the
  compute of the layers at the floor of the flags (:func:`~primus_launch.projection.cost.roofline.layer_times_floor`:
  no host launch time, no userbuffers slowdown, no per-micro-batch FP8 weight casts), the
  communication no flag can hide (:func:`tp_floor`: a layer's TP forward collectives, or ``1 / tp`` of
  them under TP overlap; the embedding's and output layer's TP calls; :func:`ep_floor`: a MoE layer's
  dispatch + combine where nothing overlaps them), for each of the table's variants (precision, FP8
  recipe, dispatcher, compile, TP / EP overlap: what those read), every other communication,
  selective-recompute and offload term at zero, the full recompute's re-run forwards counted; the
  pipeline's makespan at least ``max_r (head_r + m busy_r + tail_r)``
  (:func:`~primus_launch.projection.pipeline.simulate.makespan_lower_bound`) with sends at zero.  Each
  term is linear in the feature vector ``x`` (:data:`FEATURES`) with non-negative coefficients of the
  shape (:class:`Shape`), so the bound is ``min_v max_r (H_r + m B_r) . x_v``, a bound of every plan
  below it because the makespan bound is non-decreasing in every chunk cost.  To it the search adds
  the floor of what follows the pipeline (:func:`tail_floor`: the DP sync with its whole window free
  to hide it, at least one bucket exposed, and the optimizer step), least over the table;
- **time, level 2** (per plan): the plan's exact chunk costs (the projection's own steps) under the
  makespan bound, plus its exact post-pipeline tail (``steps/iteration.py`` ``stage_tails``); only the
  simulation of the schedule is bounded;
- **memory** (per parallel sharding and static-memory flags): the weights, gradients and optimizer
  state of the model at the assignment's sharding, averaged over the stages (their sum does not
  depend on the pipeline split; the worst stage holds at least the average), activations, reserve and
  the memory outside the allocator at zero: a plan whose floor fails the verdict's lower edge
  (``memory/verdict.py``: ``inside (1 + low) > usable``) is ``does not fit`` whatever else it sets.

Structural candidates whose chunk costs hold a term that may be negative (FSDP synchronised every
micro-batch under pipelining: ``steps/stage.py``'s chunk-end edge) are never bounded at level 1
(bound 0).  ``tests/test_tuner_bounds.py`` checks every bound at or below the projection on sampled
plans of every bundled recipe.  The ideas (features, shapes, the makespan bound) follow the earlier
``tuner`` branch's ``bounds.py``, re-expressed on the typed steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
import numpy as np

from primus_launch.plan import Plan
from primus_launch.projection.layer_times import LayerTimes
from primus_launch.projection.pipeline.simulate import SPLIT_BACKWARD, makespan_lower_bound
from primus_launch.tuner.space import AXES, N_STRUCT, Knobs, Space, apply_knobs

#: the feature vector: forward / input-gradient / weight-gradient seconds of a dense, MoE,
#: dense-window and MoE-window layer, the embedding, the output layer + loss and an MTP block's extra;
#: then the floor of one dense and one MoE layer's exposed TP seconds (forward, backward) and the
#: embedding's and output layer + loss's TP calls (exact: nothing hides them); a MoE layer's EP
#: dispatch + combine where nothing overlaps them (0 where something may); ``epx``: under Megatron's
#: 1F1B all-to-all overlap, what a MoE layer's dispatch + combine add beyond its compute at least
#: (counted in the stages' busy time only)
FEATURES = ("d_f", "d_bi", "d_bw", "m_f", "m_bi", "m_bw", "dw_f", "dw_bi", "dw_bw", "mw_f", "mw_bi", "mw_bw",
            "emb_f", "emb_bi", "emb_bw", "head_f", "head_bi", "head_bw", "mtp_f", "mtp_bi", "mtp_bw",
            "tp_f", "tp_b", "tpm_f", "tpm_b", "embtp_f", "embtp_b", "headtp_f", "headtp_b", "ep_f", "ep_b", "epx")
X = {name: i for i, name in enumerate(FEATURES)}
K = len(FEATURES)
KIND = {(False, False): X["d_f"], (True, False): X["m_f"], (False, True): X["dw_f"], (True, True): X["mw_f"]}

S = {a: i for i, a in enumerate(AXES[:N_STRUCT])}
F = {a: i for i, a in enumerate(AXES[N_STRUCT:])}
#: the execution flags :func:`~primus_launch.projection.cost.roofline.floor_cfg` reads (the others it
#: sets at their floor) and TP / EP communication overlap (the communication floors' form): a table's
#: variants
VARIANT_FLAGS = ("precision", "fp8_recipe", "dispatcher", "compile", "tp_comm_overlap", "ep_overlap")
#: the execution flags the static memory (weights, gradients, optimizer state) reads
STATIC_FLAGS = ("precision", "fp8_recipe", "fp8_param_gather", "optimizer_offload", "moments")
#: the execution flags the post-pipeline floor (DP sync, optimizer step) reads
TAIL_FLAGS = STATIC_FLAGS + ("overlap_grad_reduce", "overlap_param_gather")
#: the structural axes the layer times read (with the variant)
LAYER_AXES = ("tp", "cp", "ep", "etp", "sp", "mbs")
#: the structural axes the shape reads (layers per chunk, schedule, full recompute)
SHAPE_AXES = ("pp", "vpp", "first_stage_layers", "last_stage_layers", "acc_embedding", "acc_loss", "layout",
              "schedule", "rc_granularity", "rc_method", "rc_layers")
#: the structural axes the static memory reads (the data-parallel size through tp, cp and pp)
MEMORY_AXES = ("tp", "etp", "ep", "pp", "cp", "dp_sharding", "dp_replicate")
#: the structural axes the post-pipeline floor reads (the stages' parameters: the split too)
TAIL_AXES = MEMORY_AXES + ("vpp", "first_stage_layers", "last_stage_layers", "acc_embedding", "acc_loss", "layout")


def pick(values: tuple, axes: tuple[str, ...], index: dict[str, int]) -> tuple:
    """The values of ``axes`` in ``values`` (a structural tuple with ``S``, a flag tuple with ``F``)."""
    return tuple(values[index[a]] for a in axes)


def pass_features(lt: LayerTimes) -> np.ndarray:
    """The feature vector of ``lt``, with ``steps/stage.py``'s fallbacks (a MoE layer without its own
    times is priced as a dense one, a window layer as its full-attention kind; no MTP extra: 0)."""
    x = np.zeros(K)
    d0 = lt.dense_layer
    mo0 = lt.moe_layer or d0
    for name, pt in (("d", d0), ("m", mo0), ("dw", lt.dense_window_layer or d0), ("mw", lt.moe_window_layer or mo0),
                     ("emb", lt.embedding), ("head", lt.head_loss), ("mtp", lt.mtp_extra)):
        if pt is not None:
            at = X[name + "_f"]
            x[at], x[at + 1], x[at + 2] = pt.fwd_s, pt.bwd_input_s, pt.bwd_weight_s
    return x


@dataclass(frozen=True)
class Shape:
    """The coefficients of one plan shape (module doc): per pipeline rank the makespan bound's
    ``head`` + ``tail`` rows (``ends``) and ``busy`` row per micro-batch, each (pp, K)."""

    ends: np.ndarray
    busy: np.ndarray

    def makespan_lb(self, x: np.ndarray, nmb: np.ndarray) -> np.ndarray:
        """``max_r (ends_r + m busy_r) . x`` for the rows of ``x`` (n, K) with ``nmb`` (n,)."""
        return (x @ self.ends.T + np.asarray(nmb, dtype=np.float64)[:, None] * (x @ self.busy.T)).max(axis=1)


def build_shape(plan: Plan) -> Shape:
    """The :class:`Shape` of ``plan``: ``steps/stage.py``'s layer and recompute counts per chunk as
    coefficients of the features (``tests/test_tuner_bounds.py`` checks ``C . x`` against the stage
    costs' compute on sampled plans)."""
    from primus_launch.projection.cost.recompute import recomputed_layers

    m, p = plan.model, plan.parallel
    pp, vpp = p.pp, p.vpp
    r_ = plan.training.recompute
    chunks = plan.chunk_layout()
    mtp_ids = plan.chunk_mtp_ids() if (r_.granularity == "full" and r_.method == "layer_ids") else None
    last = (m.is_moe_layer(m.num_layers - 1), m.is_window_layer(m.num_layers - 1))
    fw = np.zeros((pp, vpp, K))
    bk = np.zeros((pp, vpp, K))
    for r in range(pp):
        for c in range(vpp):
            ch = chunks[r][c]
            kinds = [(m.is_moe_layer(i), m.is_window_layer(i)) for i in ch.layers] + [last] * ch.mtp
            rec = recomputed_layers(plan, kinds, ch, mtp_ids[r][c] if mtp_ids is not None else ())
            f, b = fw[r, c], bk[r, c]
            for kk in kinds:
                at = KIND[kk]
                f[at] += 1
                b[at + 1] += 1
                b[at + 2] += 1
                f[X["tpm_f" if kk[0] else "tp_f"]] += 1
                b[X["tpm_b" if kk[0] else "tp_b"]] += 1
                if kk[0]:
                    f[X["ep_f"]] += 1
                    b[X["ep_b"]] += 1
            for kk in rec:
                b[KIND[kk]] += 1
                b[X["tpm_f" if kk[0] else "tp_f"]] += 1
                if kk[0]:
                    b[X["ep_f"]] += 1
            if ch.mtp:
                f[X["mtp_f"]] += ch.mtp
                b[X["mtp_bi"]] += ch.mtp
                b[X["mtp_bw"]] += ch.mtp
            if ch.embedding:
                f[X["emb_f"]] += 1
                b[X["emb_bi"]] += 1
                b[X["emb_bw"]] += 1
                f[X["embtp_f"]] += 1
                b[X["embtp_b"]] += 1
            heads = int(ch.loss) + ch.mtp
            if heads:
                f[X["head_f"]] += heads
                b[X["head_bi"]] += heads
                b[X["head_bw"]] += heads
                f[X["headtp_f"]] += heads
                b[X["headtp_b"]] += heads
    busy = (fw + bk).sum(axis=1)
    for r in range(pp):
        for c in range(vpp):
            busy[r, X["epx"]] += sum(1 for i in chunks[r][c].layers if m.is_moe_layer(i)) + (chunks[r][c].mtp if last[0] else 0)
    ends = np.zeros((pp, K))
    fused = pp <= 1 or plan.training.pipeline_schedule not in SPLIT_BACKWARD
    head = np.zeros(K)
    tail = np.zeros(K)
    for r in range(pp):
        ends[r] = head + (tail if fused else 0.0)
        head = head + fw[r, 0]
        tail = tail + bk[r, 0]
    return Shape(ends=ends, busy=busy)


def exact_bound(plan: Plan) -> float:
    """Level 2 (module doc): the makespan bound on ``plan``'s exact chunk costs plus its exact
    post-pipeline tail; at most the dry-run's iteration time of ``plan``."""
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.hardware.gpus import resolve_power_cap
    from primus_launch.projection.steps.iteration import stage_tails
    from primus_launch.projection.steps.layer import layer_costs
    from primus_launch.projection.steps.schedule import schedule_name
    from primus_launch.projection.steps.setup import setup
    from primus_launch.projection.steps.stage import stage_costs

    run = resolve_power_cap(plan)
    s = setup(run, layer_times_roofline(run))
    st = stage_costs(s, layer_costs(s))
    p = run.parallel
    ms = makespan_lower_bound(schedule_name(run), p.pp, p.vpp, run.num_microbatches,
                              [[q.cost() for q in row] for row in st.chunks], st.p2p_s)
    return ms + max(t.dp_s + t.optimizer_s for t in stage_tails(s, st))


def _lt_part(plan: Plan, x: np.ndarray) -> None:
    from primus_launch.projection.cost.roofline import layer_times_floor

    x += pass_features(layer_times_floor(plan))


def plan_floor_features(plan: Plan) -> np.ndarray:
    """The level-1 features of one plan (after ``resolve_power_cap``): the pass times at
    :func:`~primus_launch.projection.cost.roofline.layer_times_floor`, :func:`tp_floor`, :func:`ep_floor`."""
    x = np.zeros(K)
    _lt_part(plan, x)
    tp_floor(plan, x)
    ep_floor(plan, x)
    return x


def tp_floor(plan: Plan, x: np.ndarray) -> None:
    """The TP features of ``plan`` into ``x``: a layer's exposed TP seconds are at least ``(f / tp,
    b / tp)`` of its raw ``(f, b)`` with TP communication overlap (``cost/tp_comm.py`` ``tp_exposed``:
    ``max(c / tp, c - gemm)``) and at least ``(f, 0)`` without (every forward collective stays exposed;
    the backward's asynchronous part may hide); the embedding's and the output layer + loss's TP calls
    exactly (``steps/layer.py``)."""
    from primus_launch.projection.cost import layer_collectives as lc
    from primus_launch.projection.cost.tp_comm import tp_layer_comm
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    tp = plan.parallel.tp
    if tp <= 1:
        return
    spec, lay = get_gpu(plan.cluster.gpu), layout(plan)
    over = plan.training.tp_comm_overlap
    for name, moe in (("tp", False), ("tpm", True)):
        f, b = tp_layer_comm(plan, spec, lay, moe=moe) if (moe and plan.model.is_moe) else tp_layer_comm(plan, spec, lay)
        x[X[name + "_f"]], x[X[name + "_b"]] = (f / tp, b / tp) if over else (f, 0.0)
    tpc = lc.tp_calls(plan)
    x[X["embtp_f"]], x[X["embtp_b"]] = lc.priced([c for c in tpc if c.where == "embedding"], spec.name, {"tp": lay.tp})
    x[X["headtp_f"]], x[X["headtp_b"]] = lc.priced([c for c in tpc if c.where in ("head", "loss")], spec.name,
                                                   {"tp": lay.tp})


def ep_floor(plan: Plan, x: np.ndarray) -> None:
    """The EP features of ``plan`` into ``x``: without shared-expert or 1F1B all-to-all overlap a MoE
    layer's dispatch + combine are all exposed (``cost/ep_comm.py`` ``ep_exposed`` returns them raw;
    ``steps/layer.py`` adds the SMs of the hidden part, 0 here): exactly the raw seconds; with either
    overlap 0 (a floor)."""
    if not plan.model.is_moe:
        return
    t = plan.training
    if t.moe_shared_expert_overlap:
        return
    from primus_launch.projection.cost.ep_comm import ep_layer_comm
    from primus_launch.projection.cost.roofline import layer_times_floor
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    raw = ep_layer_comm(plan, get_gpu(plan.cluster.gpu), layout(plan))
    if not t.overlap_moe_expert_parallel_comm:
        x[X["ep_f"]], x[X["ep_b"]] = raw
        return
    lt = layer_times_floor(plan)
    if plan.framework != "megatron" or lt.moe_layer is None:
        return
    # the combined-1F1B walk (cost/ep_overlap.py): the communication stream runs a layer pair's
    # dispatch and combine one after another, so a pair takes at least their sum and a layer's pass
    # plus its exposed EP is at least max(compute, dispatch + combine) (the unpaired share: compute +
    # all of them); that beyond the floor compute of the longer MoE kind (a floor of either kind's) and
    # beyond the layer's TP collectives, which run inside the walk's attn node and can hide under the
    # communication stream (cost/ep_comm.py moe_layer_pair) while the bound counts them on their own
    from primus_launch.projection.cost.tp_comm import tp_layer_comm

    spec = get_gpu(plan.cluster.gpu)
    tp = sum(tp_layer_comm(plan, spec, layout(plan), moe=True)) if plan.parallel.tp > 1 else 0.0
    longest = max(lt.moe_layer.total_s, (lt.moe_window_layer or lt.moe_layer).total_s)
    x[X["epx"]] = max(0.0, raw[0] + raw[1] - longest - tp)


def tail_floor(plan: Plan) -> float:
    """A floor of the part after the pipeline (``steps/iteration.py`` ``stage_tails``): per stage the
    DP sync with the whole backward / forward windows free to hide it (``cost/dp_comm.py``: with overlap
    at least one bucket stays exposed, ``max(c / buckets, c - window)``, and the hidden part's SM share
    only adds) plus the optimizer step; the longest stage's."""
    from primus_launch.projection.cost.dp_comm import dp_grad_sync, held_parameters
    from primus_launch.projection.cost.optimizer import optimizer_step_s
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.memory.params import stage_parameter_split

    spec, lay = get_gpu(plan.cluster.gpu), layout(plan)
    inf = float("inf")
    return max(dp_grad_sync(plan, spec, lay, sp_, inf, inf) + optimizer_step_s(plan, spec, held_parameters(plan, lay, sp_))
               for sp_ in stage_parameter_split(plan))


class BoundModel:
    """The level-1 time bounds and the memory floors of ``space`` (module doc), with their caches.
    ``memory_margin`` / ``memory_basis``: those of the pre-filter whose verdict the floor anticipates."""

    def __init__(self, plan: Plan, space: Space, memory_margin: float = 0.0):
        self.plan, self.space = plan, space
        self.memory_margin = memory_margin
        self._lt: dict[tuple, np.ndarray] = {}
        self._shape: dict[tuple, Shape] = {}
        self._mem: dict[tuple, float] = {}
        self._nmb: dict[tuple, int] = {}
        self._tail: dict[tuple, float] = {}
        self._rows: dict[tuple, np.ndarray] = {}
        self._p_lt: dict[tuple, np.ndarray] = {}
        self._p_tp: dict[tuple, np.ndarray] = {}
        self._p_ep: dict[tuple, np.ndarray] = {}
        self.variants = [self._group(t, VARIANT_FLAGS) for t in space.tables]
        self.statics = [self._group(t, STATIC_FLAGS) for t in space.tables]
        self.tails = [self._group(t, TAIL_FLAGS) for t in space.tables]

    # --- keys
    @staticmethod
    def _group(table: tuple, flags: tuple[str, ...]) -> dict[tuple, tuple]:
        """The distinct values of ``flags`` in ``table``, each with the first flag tuple holding it."""
        out: dict[tuple, tuple] = {}
        for f in table:
            out.setdefault(pick(f, flags, F), f)
        return out

    def probe(self, h: tuple, f: tuple) -> Plan:
        """The plan of structural values ``h`` and flags ``f``."""
        return apply_knobs(self.plan, Knobs(*h, *f))

    def floor_features(self, h: tuple, f: tuple) -> np.ndarray:
        """:func:`plan_floor_features` of the plan of ``h`` and ``f``, from three caches keyed by what
        each part reads: the floor layer times (layer key, precision, FP8 recipe, dispatcher, compile),
        the TP floor (layer key, precision, FP8 recipe, TP overlap), the EP floor (layer key,
        precision, FP8 recipe, dispatcher, EP overlap); ``tests/test_tuner_bounds.py`` checks the sum
        equals :func:`plan_floor_features` on sampled plans."""
        lk = pick(h, LAYER_AXES, S)
        key = lk + pick(f, VARIANT_FLAGS, F)
        x = self._lt.get(key)
        if x is None:
            x = np.zeros(K)
            for part, flags, fn in ((self._p_lt, ("precision", "fp8_recipe", "dispatcher", "compile"), _lt_part),
                                    (self._p_tp, ("precision", "fp8_recipe", "tp_comm_overlap"), tp_floor),
                                    (self._p_ep, ("precision", "fp8_recipe", "dispatcher", "ep_overlap"), ep_floor)):
                pk = lk + pick(f, flags, F)
                v = part.get(pk)
                if v is None:
                    v = np.zeros(K)
                    fn(self._run(h, f), v)
                    part[pk] = v
                x += v
            self._lt[key] = x
        return x

    def _run(self, h: tuple, f: tuple) -> Plan:
        from primus_launch.projection.hardware.gpus import resolve_power_cap

        return resolve_power_cap(self.probe(h, f))

    def shape(self, h: tuple, f: tuple) -> Shape:
        key = pick(h, SHAPE_AXES, S)
        sh = self._shape.get(key)
        if sh is None:
            sh = self._shape[key] = build_shape(self.probe(h, f))
        return sh

    def nmb(self, h: tuple) -> int:
        key = (h[S["tp"]], h[S["cp"]], h[S["pp"]], h[S["mbs"]])
        n = self._nmb.get(key)
        if n is None:
            n = self._nmb[key] = self.probe(h, self.space.tables[0][0]).num_microbatches
        return n

    def unsupported(self, h: tuple) -> bool:
        """True where a chunk cost may hold a negative term (module doc): never bounded at level 1."""
        p = self.plan.parallel
        return (h[S["dp_sharding"]] == "full" and h[S["pp"]] > 1 and p.fsdp_pp_grad_sync == "microbatch")

    # --- level 1
    def level1(self, s: int) -> float:
        """The level-1 time bound of structural candidate ``s`` over its flag table (module doc)."""
        return float(self.level1_variants(s).min())

    def level1_variants(self, s: int) -> np.ndarray:
        """Per compute variant of ``s``'s table (in :attr:`variants` order), the level-1 bound."""
        h = self.space.structs[s]
        vs = self.variants[self.space.ctx[s]]
        if self.unsupported(h):
            return np.zeros(len(vs))
        xs = self.variant_rows(h, self.space.ctx[s])
        sh = self.shape(h, next(iter(vs.values())))
        return sh.makespan_lb(xs, np.full(len(xs), self.nmb(h)))

    def variant_rows(self, h: tuple, c: int) -> np.ndarray:
        """(variants, K): the floor features of each compute variant of table ``c`` at ``h``'s layer key."""
        key = (pick(h, LAYER_AXES, S), c)
        m = self._rows.get(key)
        if m is None:
            m = self._rows[key] = np.stack([self.floor_features(h, f) for f in self.variants[c].values()])
        return m

    def level1_all(self) -> np.ndarray:
        """:meth:`level1` of every structural candidate, grouped: the bound of each distinct (layer
        key, flag table, shape, micro-batches) once, per shape for all its groups at once."""
        sp = self.space
        lk_of = itemgetter(*(S[a] for a in LAYER_AXES))
        sk_of = itemgetter(*(S[a] for a in SHAPE_AXES))
        nk_of = itemgetter(S["tp"], S["cp"], S["pp"], S["mbs"])
        groups: dict[tuple, list[int]] = {}
        nmb_of: dict[tuple, int] = {}
        for s, h in enumerate(sp.structs):
            if self.unsupported(h):
                key = ("unsupported",)
            else:
                nk = nk_of(h)
                n = nmb_of.get(nk)
                if n is None:
                    n = nmb_of[nk] = self.nmb(h)
                key = (lk_of(h), sp.ctx[s], sk_of(h), n)
            groups.setdefault(key, []).append(s)
        lb = np.zeros(len(sp.structs))
        by_shape: dict[tuple, list[tuple]] = {}
        for key in groups:
            if key != ("unsupported",):
                by_shape.setdefault(key[2], []).append(key)
        for keys in by_shape.values():
            mats, owner, nm = [], [], []
            sh = None
            for gi, key in enumerate(keys):
                h = sp.structs[groups[key][0]]
                if sh is None:
                    sh = self.shape(h, sp.tables[key[1]][0])
                m = self.variant_rows(h, key[1])
                mats.append(m)
                owner.append(np.full(len(m), gi))
                nm.append(np.full(len(m), float(key[3])))
            v = sh.makespan_lb(np.concatenate(mats), np.concatenate(nm))
            best = np.full(len(keys), np.inf)
            np.minimum.at(best, np.concatenate(owner), v)
            for gi, key in enumerate(keys):
                lb[groups[key]] = best[gi]
        return lb

    def tail(self, s: int) -> float:
        """The least :func:`tail_floor` over structural candidate ``s``'s table (cached by what it reads)."""
        h = self.space.structs[s]
        out = float("inf")
        for f in self.tails[self.space.ctx[s]].values():
            key = pick(h, TAIL_AXES, S) + pick(f, TAIL_FLAGS, F)
            v = self._tail.get(key)
            if v is None:
                from primus_launch.projection.hardware.gpus import resolve_power_cap

                v = self._tail[key] = tail_floor(resolve_power_cap(self.probe(h, f)))
            out = min(out, v)
        return out

    # --- memory
    def static_floor(self, h: tuple, f: tuple) -> float:
        """Bytes of weights, gradients and optimizer state per GPU averaged over the stages of the
        plan of ``h`` and ``f`` (``memory/estimate.py`` ``stage_memory``), cached by what they read."""
        key = pick(h, MEMORY_AXES, S) + pick(f, STATIC_FLAGS, F)
        v = self._mem.get(key)
        if v is None:
            from primus_launch.projection.memory.estimate import stage_memory

            st = stage_memory(self.probe(h, f))
            v = self._mem[key] = sum(x.parameters_bytes + x.gradients_bytes + x.optimizer_bytes for x in st) / len(st)
        return v

    def memory_out(self, s: int) -> bool:
        """True when every plan of structural candidate ``s`` is ``does not fit`` by its static floor
        (module doc), whatever its flags."""
        from primus_launch.projection.hardware.gpus import get_gpu
        from primus_launch.projection.memory.verdict import band_for

        h = self.space.structs[s]
        floor = min(self.static_floor(h, f) for f in self.statics[self.space.ctx[s]].values())
        low = band_for(self.plan.framework)[0]
        usable = float(get_gpu(self.plan.cluster.gpu).hbm_bytes) * (1.0 - self.memory_margin)
        return floor * (1.0 + low) > usable

    def knob_floor(self, k: Knobs) -> float:
        """:meth:`static_floor` of candidate ``k`` (the tests compare it with its projected peak)."""
        return self.static_floor(tuple(k[:N_STRUCT]), tuple(k[N_STRUCT:]))


__all__ = ["FEATURES", "BoundModel", "Shape", "build_shape", "exact_bound", "pass_features"]
