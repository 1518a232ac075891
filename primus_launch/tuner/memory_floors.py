"""The branch and bound's memory bounds: floors of a plan's peak memory over sets of plans of a tuning space.

- **per structural candidate** (:meth:`MemoryFloors.memory_out`): the weights, gradients and optimizer state of
  the model at the candidate's sharding, averaged over the stages (``memory/estimate.py`` ``stage_memory``: their
  sum does not depend on the pipeline split, so the worst stage holds at least the average), with activations,
  reserve and the memory outside the allocator at zero, least over the table's static-memory flags: a candidate
  whose floor fails the verdict's lower edge (``memory/verdict.py``: ``inside (1 + low) > usable``; the upper
  edge under ``--memory-certain``, where the answer must be ``fits``) is ``does not fit`` whatever else it sets;
- **per memory group** (:meth:`MemoryFloors.group_out`, for a candidate the search takes): the flags the memory
  model reads (``bound_keys.memory_key``) priced once by the pre-filter's own bytes inside the allocator
  (``memory/legality.py`` ``memory_peak``'s model, the least of the allocated and reserved basis, on the worst
  stage) plus the least outside it over the table (``memory/estimate.py`` ``plan_outside_bytes``), one pricing
  per group instead of one per plan; a group whose floor twin (no TE-scoped CUDA graphs, no TP overlap: each
  only adds bytes, :meth:`MemoryFloors.floor_twin`) is out is out without its own pricing (dominance);
- **at the point** (:meth:`MemoryFloors.point_out`, the ``point`` rule's second tier): the same floor at edge 0;
- **over the whole space** (:func:`whole_space_out`, before the space is built): every parameter of the model is
  stored on some GPU in at least :data:`MIN_WEIGHT_BYTES` (whatever the layout, sharding or precision), so the
  fullest GPU holds at least ``total_parameters x MIN_WEIGHT_BYTES / GPUs`` bytes inside the allocator; when that
  fails the verdict's edge, no plan of the tune fits (a 9,984-layer model of hidden size 2^20 on 8,192 GPUs needs
  14 million GiB per GPU: its tune spent minutes pricing 101K hopeless plans).

``tests/test_tuner_bounds.py`` checks each floor at or below the memory model on sampled plans of every bundled
recipe."""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import Plan
from primus_launch.plan.normal_form import normal_copy
from primus_launch.tuner.bound_keys import (F, MEMORY_AXES, OUTSIDE_FLAGS, STATIC_FLAGS, distinct_values, memory_key,
                                            pick, S)
from primus_launch.tuner.knobs import Knobs, apply_knobs
from primus_launch.tuner.space import Space


#: bytes of the narrowest format a weight is stored in: 4 bits (NVFP4 / MXFP4); bf16 weights take 2, fp8 ones 1
MIN_WEIGHT_BYTES = 0.5


def whole_space_floor(plan: Plan) -> float:
    """The least bytes of weights on the fullest GPU of any plan of ``plan``'s model on its cluster:
    ``total_parameters(model) x MIN_WEIGHT_BYTES / world_size`` (each parameter stored once at least, in 4 bits at
    least: tensor, pipeline, expert and FSDP sharding split the weights, never drop them; the average of the
    GPUs' shares is at most the largest)."""
    from primus_launch.projection.memory.params import total_parameters

    return total_parameters(plan.model) * MIN_WEIGHT_BYTES / plan.world_size


def whole_space_out(plan: Plan, memory_margin: float = 0.0, memory_certain: bool = False) -> Optional[float]:
    """:func:`whole_space_floor` when it alone makes every plan of a tune of ``plan`` ``does not fit`` (at the
    verdict's lower band edge, ``memory/verdict.py``: ``inside (1 + low) > usable``; the upper edge under
    ``--memory-certain``, where the answer must be ``fits``), else None."""
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.memory.verdict import band_for

    low, high = band_for(plan.framework)[:2]
    floor = whole_space_floor(plan)
    usable = float(get_gpu(plan.cluster.gpu).hbm_bytes) * (1.0 - memory_margin)
    return floor if floor * (1.0 + (high if memory_certain else low)) > usable else None


class MemoryFloors:
    """The memory floors of ``space`` (module doc), with their caches.  ``memory_margin``: that of the pre-filter
    whose verdict the floor anticipates.  ``memory_certain``: the answer must be ``fits`` (``--memory-certain``),
    so a floor is out when it does not fit at the band's upper edge (``memory/verdict.py``: ``fits`` needs
    ``inside (1 + high) + outside <= usable``); else at its lower edge (``does not fit``: ``inside (1 + low) +
    outside > usable``)."""

    def __init__(self, plan: Plan, space: Space, memory_margin: float = 0.0, memory_certain: bool = False):
        self.plan, self.space = plan, space
        self.memory_margin = memory_margin
        self.memory_certain = memory_certain
        self._mem: dict[tuple, float] = {}
        self._inside: dict[tuple, float] = {}
        self._outside: dict[tuple, float] = {}
        self._outside_of: dict[int, float] = {}  # outside_floor by candidate: 118k calls on Qwen3-235B, ~3.7k distinct
        self._outg: dict[int, list] = {}
        self.statics = [distinct_values(t, STATIC_FLAGS) for t in space.tables]

    def probe(self, h: tuple, f: tuple) -> Plan:
        """The plan of structural values ``h`` and flags ``f`` in its normal form (``plan/normal_form.py``
        ``normal_copy``: what the projection prices), so that every floor read off it is a floor of that plan's
        projection.  The cache keys of the floors hold ``dp_sharding``, ``dp_replicate`` and the degrees, which
        decide whether the normal form differs (TorchTitan FSDP over a shard group of one)."""
        return normal_copy(apply_knobs(self.plan, Knobs(*h, *f)))

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

        h = self.space.structs[s]
        floor = min(self.static_floor(h, f) for f in self.statics[self.space.ctx[s]].values())
        edge = self._memory_edge()
        usable = float(get_gpu(self.plan.cluster.gpu).hbm_bytes) * (1.0 - self.memory_margin)
        return floor * (1.0 + edge) > usable

    def _memory_edge(self) -> float:
        """The band edge a floor is held against: the upper one when the answer must be ``fits``."""
        from primus_launch.projection.memory.verdict import band_for

        low, high = band_for(self.plan.framework)[:2]
        return high if self.memory_certain else low

    def inside_floor(self, h: tuple, f: tuple) -> float:
        """Bytes inside the caching allocator of the plan of ``h`` and ``f`` on its worst stage, the
        least of the allocated and the reserved basis (``memory/legality.py`` ``memory_peak``: the
        pre-filter's own model), cached by the structural values and :data:`~primus_launch.tuner.bound_keys.MEMORY_FLAGS`: the same for
        every plan of ``h`` with those flags."""
        key = (h, memory_key(self.plan.framework, f))
        v = self._inside.get(key)
        if v is None:
            from primus_launch.projection.memory.estimate import (mcore_args, mcore_stage_memory, titan_args,
                                                                  titan_gemm_workspaces, titan_stage_memory)

            p = self.probe(h, f)
            st = (titan_stage_memory(*titan_args(p), gemm_ws=titan_gemm_workspaces(p)) if p.framework == "torchtitan"
                  else mcore_stage_memory(*mcore_args(p)))
            v = self._inside[key] = float(max(min(x.allocated_bytes, x.total_bytes) for x in st))
        return v

    def outside_floor(self, s: int) -> float:
        """The least bytes outside the allocator over ``s``'s table (``memory/estimate.py``
        ``plan_outside_bytes``), cached by what they read."""
        out = self._outside_of.get(s)
        if out is not None:
            return out
        h = self.space.structs[s]
        out = float("inf")
        for f in self._out_groups(self.space.ctx[s]):
            key = (pick(h, MEMORY_AXES + ("mbs", "sp"), S), pick(f, OUTSIDE_FLAGS, F))
            v = self._outside.get(key)
            if v is None:
                from primus_launch.projection.memory.estimate import plan_outside_bytes

                v = self._outside[key] = float(sum(plan_outside_bytes(self.probe(h, f)).values()))
            out = min(out, v)
        self._outside_of[s] = out
        return out

    def _out_groups(self, c: int) -> list[tuple]:
        g = self._outg.get(c)
        if g is None:
            g = self._outg[c] = list(distinct_values(self.space.tables[c], OUTSIDE_FLAGS).values())
        return g

    def _own_group_out(self, s: int, f: tuple, edge: Optional[float] = None) -> bool:
        from primus_launch.projection.hardware.gpus import get_gpu

        edge = self._memory_edge() if edge is None else edge
        usable = float(get_gpu(self.plan.cluster.gpu).hbm_bytes) * (1.0 - self.memory_margin)
        return self.inside_floor(self.space.structs[s], f) * (1.0 + edge) + self.outside_floor(s) > usable

    def point_out(self, s: int, f: tuple) -> bool:
        """True when every plan of ``s`` with ``f``'s memory flags has its point estimate over the usable
        capacity: the floor of :meth:`group_out` held at the point (edge 0, ``memory_rule.over_capacity``:
        ``inside + outside > usable``; the floor is at most the verdict's inside bytes and the least outside, as
        for the band's edges), with the same eager-twin dominance.  Such a plan is never the ``point`` rule's
        answer, only a ``tight`` one (``branch_bound.py``: the second-tier incumbent)."""
        twin = self.floor_twin(f)
        if twin is not None and self._own_group_out(s, twin, 0.0):
            return True
        return self._own_group_out(s, f, 0.0)

    def eager_twin(self, f: tuple) -> tuple | None:
        """The flag tuple of ``f`` without its Transformer Engine-scoped CUDA graphs (``cuda_graph_impl``
        ``none``), when ``f`` has them (Megatron plans only), else None.  Its memory group is a floor of
        ``f``'s: ``memory/mcore.py`` adds the graphs' static buffers (``memory/te_graphs.py``:
        ``te_graph_layer_bytes``, ``te_graph_chunk_input_bytes``, each >= 0) to the eager schedule's
        activations of the same plan, and the peak walk is monotone in the activations
        (``tests/test_tuner_bounds.py`` checks it on sampled plans).  Not under ``--cuda-graph-warmup-steps 0``
        (None): graphs captured before the first step move the graphed layers' saved tensors out of the allocated
        peak (``memory/mcore.py`` ``te_graph_capture_first``, ``memory/te_graphs.py``), so a graphed plan may
        allocate less than its twin (the 235B recipe's ``attn`` scope: 27.9 vs 36.3 GiB)."""
        if (self.plan.framework == "torchtitan" or f[F["cuda_graph_impl"]] != "transformer_engine"
                or self.plan.training.cuda_graph_warmup_steps == 0):
            return None
        g = list(f)
        g[F["cuda_graph_impl"]], g[F["cuda_graph_scope"]] = "none", ()
        return tuple(g)

    def floor_twin(self, f: tuple) -> tuple | None:
        """The memory twin :meth:`group_out` holds before ``f``'s own group: :meth:`eager_twin` (no
        Transformer Engine-scoped CUDA graphs, where that is a floor) and, on a Megatron plan, without
        ``--tp-comm-overlap``; None when that is ``f`` itself.  A floor of ``f``'s bytes inside the
        allocator: inside it ``--tp-comm-overlap`` only adds TE's userbuffers GEMM workspaces
        (``memory/mcore.py`` ``plan_gemm_workspaces``: ``userbuffers``; ``memory/workspaces.py``
        ``gemm_workspaces``: ``te = (1 + 3 ub) x TE_WORKSPACE``, kept from the first GEMM and added to the
        stage, ``stage_bytes``); its userbuffers themselves lie outside (``memory/outside.py``
        ``userbuffers_bytes``, in :meth:`outside_floor`'s least over the table).  ``tests/test_tuner_bounds.py``
        checks the twin's bytes at most the plan's on sampled plans."""
        g = self.eager_twin(f)
        g = list(f if g is None else g)
        if self.plan.framework != "torchtitan" and g[F["tp_comm_overlap"]]:
            g[F["tp_comm_overlap"]] = False
        g = tuple(g)
        return None if g == f else g

    def group_out(self, s: int, f: tuple) -> bool:
        """True when no plan of ``s`` with ``f``'s memory flags may be the answer: its bytes inside
        the allocator (:meth:`inside_floor`) at the verdict's lower edge (upper with ``memory_certain``) plus the least outside it exceed
        the usable capacity (``memory/verdict.py``: ``inside (1 + low) + outside > usable``).  A group with
        TE-scoped CUDA graphs is out without its own pricing when its eager twin's (:meth:`eager_twin`) is:
        the graphs only add bytes (dominance)."""
        twin = self.floor_twin(f)
        if twin is not None and self._own_group_out(s, twin):
            return True
        return self._own_group_out(s, f)

    def group_keys(self, s: int, f: tuple) -> tuple[tuple, ...]:
        """The memory groups :meth:`group_out` prices for plan ``f`` of candidate ``s`` (each once per
        search, whatever the caches hold): its own, preceded by its eager twin's when it has graphs; the
        twin's alone when that one is out (its own is then never priced)."""
        own = (s, memory_key(self.plan.framework, f))
        twin = self.floor_twin(f)
        if twin is None:
            return (own,)
        tk = (s, memory_key(self.plan.framework, twin))
        return (tk,) if self._own_group_out(s, twin) else (tk, own)
