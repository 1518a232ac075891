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
  communication no flag can hide (``floors.tp_floor``: a layer's TP forward collectives, or ``1 / tp`` of
  them under TP overlap; the embedding's and output layer's TP calls; ``floors.cp_floor``: the CP
  exchange, off a ring all of it, on a ring the compute its P2P channels displace; ``floors.ep_floor``: a
  MoE layer's dispatch + combine where nothing overlaps them, behind the shared expert the compute its
  SMs displace, under 1F1B all-to-all overlap the unpaired passes' share and the combined walk's
  floor ``D - W - TP`` (dispatch + combine beyond the layer's compute and TP collectives); ``floors.fsdp_floor``: FSDP's gathers and reduce-scatters beyond the layer's
  floor pass, plus the compute NCCL's SMs displace while the rest hides), for each of the table's
  variants (precision, FP8 recipe, dispatcher, compile, TP / EP overlap: what those read), the
  selective / per-op recompute's re-run module forwards (the structural ``rc_modules``) and the full
  recompute's re-run forwards counted, offload terms at zero (a table's variants hold plans that offload
  nothing); the pipeline's makespan at least ``max_r (head_r + m busy_r + tail_r)``
  (:func:`~primus_launch.projection.pipeline.simulate.makespan_lower_bound`) with sends at zero.  Each
  term is linear in the feature vector ``x`` (``floors.FEATURES``) with non-negative coefficients of the
  shape (:class:`~primus_launch.tuner.pipeline_shape.Shape`), so the bound is ``min_v max_r (H_r + m B_r) . x_v``, a bound of every plan
  below it because the makespan bound is non-decreasing in every chunk cost.  A structural candidate
  taken from the queue is refined (:meth:`BoundModel.refined_variants`) with the floor of what
  follows the pipeline (``floors.tail_floor``: the DP sync with its whole window free to hide it, at
  least one bucket exposed, and the optimizer step), and with each stage's sync paired with that
  stage's own makespan term (``dp_comm.py`` hides it behind one micro-batch's window), least over the
  table;
- **time, per node** (:meth:`BoundModel.node_bounds`: a compute variant and its activation offloading,
  :data:`NODE_FLAGS`): the refined bound of the node's variant, and with named modules offloaded
  (``--offload-modules``, no whole layer) the same bound with each layer's exposed copy at its floor
  added (:meth:`BoundModel.offload_features`, ``cost/offload.py`` ``module_offload_floor``: the copy's
  bytes are fixed by the candidate's model, micro-batch and sharding; its exposure ``max(0, copy -
  pass)`` is least at the longest pass of the node's plans, whose layer times read only the layer axes
  and :data:`PASS_FLAGS`); the search meets a candidate's nodes lowest bound first and needs the memory
  of only those below the incumbent (``branch_bound.py``);
- **time, level 2** (per plan, ``exact_bound.py``): the plan's exact chunk costs (the projection's own
  steps) under the makespan bound, plus its exact post-pipeline tail (``steps/iteration.py``
  ``stage_tails``); only the simulation of the schedule is bounded;
- **memory** (per parallel sharding and static-memory flags, then per memory group):
  ``memory_floors.py`` (:class:`~primus_launch.tuner.memory_floors.MemoryFloors`, which
  :class:`BoundModel` extends), its module doc giving each floor's argument.

The keys each bound is cached by (what it reads of a plan) are ``bound_keys.py``'s; the shape's
coefficients ``pipeline_shape.py``'s; the floor features of one plan ``floors.py``'s.

Structural candidates whose chunk costs hold a term that may be negative (FSDP synchronised every
micro-batch under pipelining: ``steps/stage.py``'s chunk-end edge), and hybrid Mamba stacks (per-symbol layer
times the features do not count), are never bounded at level 1 (bound 0).  ``tests/test_tuner_bounds.py`` checks every bound at or below the projection on sampled
plans of every bundled recipe.  The ideas (features, shapes, the makespan bound) follow the earlier
``tuner`` branch's ``bounds.py``, re-expressed on the typed steps.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Optional
import numpy as np

from primus_launch.plan import Plan
from primus_launch.projection.layer_times import LayerTimes
from primus_launch.tuner.bound_keys import (EP_FLAGS, F, LAYER_AXES, LT_FLAGS, NODE_FLAGS, PASS_FLAGS, S, SHAPE_AXES,
                                            TAIL_AXES, TAIL_FLAGS, TP_FLAGS, VARIANT_FLAGS, distinct_values,
                                            memory_key, pick)
from primus_launch.tuner.floors import (K, X, ep_floor, fsdp_floor, layer_floor, tail_floor, tail_stages,
                                        tp_cp_floor)
from primus_launch.tuner.knobs import accumulation_fused
from primus_launch.tuner.memory_floors import MemoryFloors
from primus_launch.tuner.pipeline_shape import Shape, build_shape
from primus_launch.tuner.space import Space


class BoundModel(MemoryFloors):
    """The level-1 and per-node time bounds of ``space`` (module doc) and, inherited, its memory floors
    (:class:`~primus_launch.tuner.memory_floors.MemoryFloors`: ``memory_margin``, ``memory_certain``), with
    their caches."""

    def __init__(self, plan: Plan, space: Space, memory_margin: float = 0.0, memory_certain: bool = False):
        super().__init__(plan, space, memory_margin, memory_certain)
        self._lt: dict[tuple, np.ndarray] = {}
        self._shape: dict[tuple, Shape] = {}
        self._nmb: dict[tuple, int] = {}
        self._tail: dict[tuple, float] = {}
        self._tail0: dict[tuple, np.ndarray] = {}
        self._rows: dict[tuple, np.ndarray] = {}
        self._p_lt: dict[tuple, np.ndarray] = {}
        self._p_tp: dict[tuple, np.ndarray] = {}
        self._p_ep: dict[tuple, np.ndarray] = {}
        self._p_fsdp: dict[tuple, np.ndarray] = {}
        self._vparts: dict[int, list] = {}
        self._nodes: dict[int, dict] = {}
        self._plt: dict[tuple, LayerTimes] = {}
        self._offx: dict[tuple, np.ndarray] = {}
        self._vsets: dict[tuple, int] = {}
        self._vset_of: dict[int, int] = {}
        self.variants = [distinct_values(t, VARIANT_FLAGS) for t in space.tables]
        self.tails = [distinct_values(t, TAIL_FLAGS) for t in space.tables]

    # --- keys
    @staticmethod
    def row_key(h: tuple) -> tuple:
        """What the floor features of structural values ``h`` read besides the flags: the layer axes,
        and under FSDP (``dp_sharding = "full"``) the pipeline and replicate degrees (its shard group
        and resharding)."""
        lk = pick(h, LAYER_AXES, S)
        if h[S["dp_sharding"]] == "full":
            return lk + (h[S["pp"]], h[S["dp_replicate"]])
        return lk + (None, None)

    def _vset(self, c: int) -> int:
        """The id of table ``c``'s compute variants (tables with the same variants share their rows)."""
        v = self._vset_of.get(c)
        if v is None:
            v = self._vset_of[c] = self._vsets.setdefault(tuple(self.variants[c]), len(self._vsets))
        return v

    def _parts(self, c: int) -> list[tuple[tuple, tuple, tuple, tuple, tuple]]:
        """Per compute variant of table ``c``: its key and the keys of its four parts' flags, and a
        flag tuple holding it (cached)."""
        v = self._vparts.get(c)
        if v is None:
            v = self._vparts[c] = [(vk, pick(f, LT_FLAGS, F), pick(f, TP_FLAGS, F), pick(f, EP_FLAGS, F), f)
                                   for vk, f in self.variants[c].items()]
        return v

    def floor_features(self, h: tuple, f: tuple) -> np.ndarray:
        """``floors.plan_floor_features`` of the plan of ``h`` and ``f``, from four caches keyed by what
        each part reads: the floor layer times (layer key, precision, FP8 recipe, dispatcher, compile),
        the TP floor (layer key, precision, FP8 recipe, TP overlap), the EP floor (layer key,
        precision, FP8 recipe, dispatcher, EP overlap), the FSDP floor (:meth:`row_key`, the layer
        times' flags); ``tests/test_tuner_bounds.py`` checks the sum equals ``floors.plan_floor_features``
        on sampled plans."""
        return self._features(h, self.row_key(h), pick(f, VARIANT_FLAGS, F), pick(f, LT_FLAGS, F),
                              pick(f, TP_FLAGS, F), pick(f, EP_FLAGS, F), f)

    def _features(self, h: tuple, rk: tuple, vk: tuple, lk_f: tuple, tp_f: tuple, ep_f: tuple, f: tuple) -> np.ndarray:
        key = (rk, vk)
        x = self._lt.get(key)
        if x is None:
            lk = rk[:-2]
            x = np.zeros(K)
            run = None   # the plan of h and f, built once for the parts not cached yet
            for part, pk, fn in ((self._p_lt, (lk, lk_f), layer_floor), (self._p_tp, (lk, tp_f), tp_cp_floor),
                                 (self._p_ep, (lk, ep_f), ep_floor),
                                 (self._p_fsdp, (rk, lk_f) if rk[-2] is not None else None, fsdp_floor)):
                if pk is None:
                    continue
                v = part.get(pk)
                if v is None:
                    if run is None:
                        run = self._run(h, f)
                    v = np.zeros(K)
                    fn(run, v)
                    part[pk] = v
                x += v
            self._lt[key] = x
        return x

    def _run(self, h: tuple, f: tuple) -> Plan:
        from primus_launch.projection.hardware.gpus import resolve_power_cap

        return resolve_power_cap(self.probe(h, f))

    def shape(self, h: tuple, f: tuple) -> Shape:
        """The :class:`~primus_launch.tuner.pipeline_shape.Shape` of the plan of ``h`` and ``f``, cached by the
        axes it reads (:data:`~primus_launch.tuner.bound_keys.SHAPE_AXES`)."""
        key = pick(h, SHAPE_AXES, S)
        sh = self._shape.get(key)
        if sh is None:
            sh = self._shape[key] = build_shape(self.probe(h, f))
        return sh

    def nmb(self, h: tuple) -> int:
        """The micro-batches per iteration of structural values ``h`` (global batch / (micro-batch x DP)), cached by
        the degrees and the micro-batch."""
        key = (h[S["tp"]], h[S["cp"]], h[S["pp"]], h[S["mbs"]])
        n = self._nmb.get(key)
        if n is None:
            n = self._nmb[key] = self.probe(h, self.space.tables[0][0]).num_microbatches
        return n

    @staticmethod
    def scale(pp: int, vpp: int, nmb: int) -> np.ndarray:
        """Per feature, its factor at a pipeline of ``pp`` x ``vpp`` chunks and ``nmb`` micro-batches:
        ``epu_*`` by the unpaired fraction ``u`` of 1F1B all-to-all overlap, ``epx*`` by ``1 - u``
        (``floors.ep_floor``), the others 1."""
        from primus_launch.projection.cost.ep_comm import unpaired_fraction

        u = unpaired_fraction(pp, vpp, nmb)
        v = np.ones(K)
        v[X["epu_f"]] = v[X["epu_b"]] = u
        v[X["epx"]] = v[X["epxw"]] = 1.0 - u
        return v

    def unsupported(self, h: tuple) -> bool:
        """True where a chunk cost may hold a negative term (module doc), or where the level-1 features do not
        describe the layers (a hybrid Mamba stack: its layers are per-symbol times, ``steps/stage.py``, not the
        GPT kinds the features count): never bounded at level 1."""
        p = self.plan.parallel
        return (self.plan.model.is_hybrid
                or (h[S["dp_sharding"]] == "full" and h[S["pp"]] > 1 and p.fsdp_pp_grad_sync == "microbatch"))

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
        n = self.nmb(h)
        xs = self.variant_rows(h, self.space.ctx[s]) * self.scale(h[S["pp"]], h[S["vpp"]], n)
        sh = self.shape(h, next(iter(vs.values())))
        return sh.makespan_lb(xs, np.full(len(xs), n))

    def variant_rows(self, h: tuple, c: int, rk: tuple | None = None) -> np.ndarray:
        """(variants, K): the floor features of each compute variant of table ``c`` at ``h``'s
        :meth:`row_key` (unscaled)."""
        rk = self.row_key(h) if rk is None else rk
        key = (rk, self._vset(c))
        m = self._rows.get(key)
        if m is None:
            m = self._rows[key] = np.stack([self._features(h, rk, *pk) for pk in self._parts(c)])
        return m

    def level1_all(self) -> np.ndarray:
        """:meth:`level1` of every structural candidate, grouped: the bound of each distinct (row
        key, flag table, shape, micro-batches) once, per shape for all its groups at once."""
        sp = self.space
        lk_of = itemgetter(*(S[a] for a in LAYER_AXES))
        sk_of = itemgetter(*(S[a] for a in SHAPE_AXES))
        nk_of = itemgetter(S["tp"], S["cp"], S["pp"], S["mbs"])
        i_full, i_pp, i_rep = S["dp_sharding"], S["pp"], S["dp_replicate"]
        unsup = self.plan.parallel.fsdp_pp_grad_sync == "microbatch"
        nmb_of: dict[tuple, int] = {}
        gid: dict[tuple, int] = {}          # group key -> group
        g_block, g_shape, g_n = [], [], []  # per group: its row block, shape, micro-batches
        blocks: dict[tuple, int] = {}       # (row key, table) -> block
        b_start, b_len, mats = [], [], []
        shapes: dict[tuple, int] = {}
        shape_h: list[tuple] = []
        of = np.full(len(sp.structs), -1, dtype=np.int64)
        at = 0
        for s, h in enumerate(sp.structs):
            full = h[i_full] == "full"
            if unsup and full and h[i_pp] > 1:
                continue
            nk = nk_of(h)
            n = nmb_of.get(nk)
            if n is None:
                n = nmb_of[nk] = self.nmb(h)
            rk = lk_of(h) + ((h[i_pp], h[i_rep]) if full else (None, None))
            c = sp.ctx[s]
            sk = sk_of(h)
            key = (rk, c, sk, n)
            g = gid.get(key)
            if g is None:
                g = gid[key] = len(g_block)
                bkey = (rk, self._vset(c))
                bk = blocks.get(bkey)
                if bk is None:
                    bk = blocks[bkey] = len(b_start)
                    m = self.variant_rows(h, c, rk)
                    b_start.append(at)
                    b_len.append(len(m))
                    mats.append(m)
                    at += len(m)
                si = shapes.get(sk)
                if si is None:
                    si = shapes[sk] = len(shape_h)
                    shape_h.append((h, c))
                g_block.append(bk)
                g_shape.append(si)
                g_n.append(n)
            of[s] = g
        lb = np.zeros(len(sp.structs))
        if not g_block:
            return lb
        rows = np.concatenate(mats)
        g_block_a, g_shape_a, g_n_a = np.asarray(g_block), np.asarray(g_shape), np.asarray(g_n)
        b_start_a, b_len_a = np.asarray(b_start), np.asarray(b_len)
        best = np.full(len(g_block), np.inf)
        for si, (h, c) in enumerate(shape_h):
            gs = np.nonzero(g_shape_a == si)[0]
            sh = self.shape(h, sp.tables[c][0])
            lens = b_len_a[g_block_a[gs]]
            starts = b_start_a[g_block_a[gs]]
            off = np.concatenate(([0], np.cumsum(lens)[:-1]))
            idx = np.repeat(starts - off, lens) + np.arange(int(lens.sum()))
            ns = np.repeat(g_n_a[gs], lens)
            x = rows[idx]
            for n in np.unique(g_n_a[gs]):
                sel = ns == n
                x[sel] *= self.scale(h[i_pp], h[S["vpp"]], int(n))
            v = sh.makespan_lb(x, ns)
            best[gs] = np.minimum.reduceat(v, off)
        ok = of >= 0
        lb[ok] = best[of[ok]]
        return lb

    def tail_rows(self, s: int) -> np.ndarray:
        """(tail groups of ``s``'s table, pp): per stage its DP sync with no window to hide it plus its
        optimizer step (``floors.tail_stages`` at window 0; cached by what it reads)."""
        h = self.space.structs[s]
        rows = []
        for f in self.tails[self.space.ctx[s]].values():
            key = pick(h, TAIL_AXES, S) + pick(f, TAIL_FLAGS, F)
            v = self._tail0.get(key)
            if v is None:
                from primus_launch.projection.hardware.gpus import resolve_power_cap

                v = self._tail0[key] = np.asarray(tail_stages(resolve_power_cap(self.probe(h, f)), 0.0))
            rows.append(v)
        return np.stack(rows)

    def refined_variants(self, s: int) -> np.ndarray:
        """Per compute variant of ``s``'s table, the bound the search expands it by: the level-1 bound
        plus :meth:`tail`, and the sync paired with the stage it follows.  ``dp_grad_sync`` hides a
        stage's sync behind at most one micro-batch's forward + backward of that stage
        (``max(c / buckets, c - window)``, the window at most ``busy_r``), so the iteration, at least
        ``head_r + m busy_r + tail_r`` + stage r's sync and optimizer, is at least
        ``(ends_r + (m - 1) busy_r) . x`` + stage r's sync with no window (:meth:`tail_rows`); least over
        the table's DP-sync flags."""
        h = self.space.structs[s]
        out = self.level1_variants(s) + self.tail(s)
        if self.unsupported(h):
            return out
        n = self.nmb(h)
        xs = self.variant_rows(h, self.space.ctx[s]) * self.scale(h[S["pp"]], h[S["vpp"]], n)
        sh = self.shape(h, next(iter(self.variants[self.space.ctx[s]].values())))
        base = xs @ sh.ends.T + (n - 1.0) * (xs @ sh.busy.T)              # (variants, pp)
        d = self.tail_rows(s)                                              # (tail groups, pp)
        b2 = (base[:, None, :] + d[None, :, :]).max(axis=2).min(axis=1)
        return np.maximum(out, b2)

    def tail(self, s: int) -> float:
        """The least ``floors.tail_floor`` over structural candidate ``s``'s table (cached by what it reads)."""
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

    # --- nodes: a variant and its activation offloading
    def table_nodes(self, c: int) -> dict[tuple, tuple[dict[tuple, tuple], dict[tuple, tuple]]]:
        """Per node of table ``c`` (its :data:`NODE_FLAGS` values, in the table's order): the distinct
        :data:`PASS_FLAGS` values of its flag tuples and its distinct :func:`memory_key` values, each
        with a flag tuple holding it (cached)."""
        g = self._nodes.get(c)
        if g is None:
            g = self._nodes[c] = {}
            fw = self.plan.framework
            for f in self.space.tables[c]:
                passes, mems = g.setdefault(pick(f, NODE_FLAGS, F), ({}, {}))
                passes.setdefault(pick(f, PASS_FLAGS, F), f)
                mems.setdefault(memory_key(fw, f), f)
        return g

    def _wgrad_key(self, h: tuple) -> Optional[str]:
        """What the layer times read of the data-parallel sharding: the unfused gradient accumulation's bytes
        per weight (``cost/wgrad_accumulation.py``: DDP's add, Megatron-FSDP's copy, none under torch FSDP2),
        present on a Megatron plan that runs without the fusion or that :func:`knobs.apply_knobs` moves onto
        Megatron-FSDP (which writes ``--no-gradient-accumulation-fusion``); ``None`` where the fusion holds."""
        d = h[S["dp_sharding"]]
        return None if accumulation_fused(self.plan, d) else d

    def _sync_key(self, h: tuple, f: tuple) -> Optional[bool]:
        """For a hybrid stack, whether its backward re-runs the dispatcher's host sync (``cost/host_sync.py``
        ``backward_syncs``: full recompute, ``moe`` recomputed, the 1F1B EP overlap), which decides whether its
        backward host time is pooled over the pass (``cost/host_runahead.py``); None for other stacks, whose
        layer times do not read it."""
        if not self.plan.model.hybrid_pattern:
            return None
        from primus_launch.projection.cost.host_sync import syncs_in_backward

        return syncs_in_backward(h[S["rc_granularity"]], h[S["rc_modules"]], f[F["ep_overlap"]])

    def _pass_times(self, h: tuple, f: tuple) -> LayerTimes:
        """The roofline layer times of the plan of ``h`` and ``f``, cached by what they read: the layer
        axes, :data:`PASS_FLAGS`, the sharding where the gradient accumulation is unfused
        (:meth:`_wgrad_key`) and, with FP8 or FP4 (the weight casts per micro-batch), the
        micro-batches (``tests/test_tuner_bounds.py`` checks the key)."""
        low = f[F["precision"]] in ("fp8", "fp4")
        key = (pick(h, LAYER_AXES, S), pick(f, PASS_FLAGS, F), self._wgrad_key(h), self.nmb(h) if low else None,
               self._sync_key(h, f))
        lt = self._plt.get(key)
        if lt is None:
            from primus_launch.projection.cost.roofline import layer_times_roofline

            lt = self._plt[key] = layer_times_roofline(self._run(h, f))
        return lt

    def offload_features(self, s: int, nk: tuple) -> np.ndarray:
        """The ``off_*`` features of node ``nk`` of structural candidate ``s``: with named modules
        offloaded and no whole layer (``steps/layer.py``: modules only then), per layer kind the least
        exposure of its copy over the node's pass times (``cost/offload.py`` ``module_offload_floor``: the
        copy's bytes are the node's, the pass at its longest), at most what ``steps/stage.py`` adds to
        each layer's forward and input-gradient of every plan of the node; else 0."""
        layers, mods = nk[-2], nk[-1]
        if layers or not mods:
            return np.zeros(K)
        h, c = self.space.structs[s], self.space.ctx[s]
        passes = self.table_nodes(c)[nk][0]
        low = any(pk[0] in ("fp8", "fp4") for pk in passes)
        key = (pick(h, LAYER_AXES, S), c, nk, self._wgrad_key(h), self.nmb(h) if low else None)
        x = self._offx.get(key)
        if x is None:
            from primus_launch.projection.cost.offload import module_offload_floor
            from primus_launch.projection.hardware.gpus import get_gpu

            run = self._run(h, next(iter(passes.values())))
            kinds = (False, True) if self.plan.model.is_moe else (False,)
            fl = module_offload_floor(run, (self._pass_times(h, f) for f in passes.values()),
                                      get_gpu(run.cluster.gpu), kinds)
            x = np.zeros(K)
            for moe, (f_, b_) in fl.items():
                name = "off_m" if moe else "off_d"
                x[X[name + "_f"]], x[X[name + "_b"]] = f_, b_
            self._offx[key] = x
        return x

    def node_bounds(self, s: int) -> list[tuple[float, tuple]]:
        """``(bound, node)`` for every node of ``s``'s table (:data:`NODE_FLAGS`), lowest first (ties in
        the table's order): its variant's :meth:`refined_variants` bound, and where the node offloads
        modules the same bound with :meth:`offload_features` added to the variant's floor features (the
        makespan bound and the sync paired with its stage are non-decreasing in every chunk cost), the
        larger of the two.  A bound of every plan of the node."""
        h, c = self.space.structs[s], self.space.ctx[s]
        nodes = list(self.table_nodes(c))
        vnames = list(self.variants[c])
        at = {v: i for i, v in enumerate(vnames)}
        vref = self.refined_variants(s)
        nv = len(VARIANT_FLAGS)
        out = [float(vref[at[nk[:nv]]]) for nk in nodes]
        offs = [(i, self.offload_features(s, nk)) for i, nk in enumerate(nodes)]
        offs = [(i, x) for i, x in offs if x.any()]
        if offs and not self.unsupported(h):
            n = self.nmb(h)
            xs = self.variant_rows(h, c) * self.scale(h[S["pp"]], h[S["vpp"]], n)
            sh = self.shape(h, next(iter(self.variants[c].values())))
            rows = np.stack([xs[at[nodes[i][:nv]]] + x for i, x in offs])
            l1 = sh.makespan_lb(rows, np.full(len(rows), n)) + self.tail(s)
            base = rows @ sh.ends.T + (n - 1.0) * (rows @ sh.busy.T)
            d = self.tail_rows(s)
            b2 = (base[:, None, :] + d[None, :, :]).max(axis=2).min(axis=1)
            for k, (i, _) in enumerate(offs):
                out[i] = max(out[i], float(l1[k]), float(b2[k]))
        order = sorted(range(len(nodes)), key=lambda i: (out[i], i))
        return [(out[i], nodes[i]) for i in order]

    def node_out(self, s: int, nk: tuple, tried: set | None = None, fit: set | None = None) -> bool:
        """Whether every plan of node ``nk`` of ``s`` is ``does not fit`` by :meth:`group_out`, its memory
        groups tried in the table's order up to the first that may fit; ``tried`` collects the groups
        priced (:meth:`group_keys`), ``fit`` those of the one that may fit."""
        for f in self.table_nodes(self.space.ctx[s])[nk][1].values():
            if tried is not None:
                tried.update(self.group_keys(s, f))
            if not self.group_out(s, f):
                if fit is not None:
                    fit.update(self.group_keys(s, f))
                return False
        return True

