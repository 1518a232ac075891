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

This module holds the space as a lazy product (:class:`Space`); the parts live in modules of their own: the
caps (``space_config.py``), each axis's values (``axis_values.py``), the structural candidates' enumeration
(``structures.py``) and the execution flags' legality filter (``flag_tables.py``).
"""

from __future__ import annotations

from typing import Iterator, Optional

from primus_launch.plan import Plan
from primus_launch.tuner import rules
from primus_launch.tuner.flag_tables import FlagOptions
# the candidate tuple and its application to a plan (their own module), importable from here as before
from primus_launch.tuner.knobs import (AXES, N_STRUCT, Knobs, apply_knobs, knobs_of, problems_of, program_limits,
                                      validated)
# the space's caps (their own module), importable from here as before
from primus_launch.tuner.space_config import SpaceConfig
from primus_launch.tuner.structures import structures

__all__ = ["AXES", "N_STRUCT", "Knobs", "Space", "SpaceConfig", "apply_knobs", "enumerate_space", "knobs_of",
           "problems_of", "searched_knobs", "validated"]


def searched_knobs(plan: Plan, cfg: "SpaceConfig") -> dict[str, bool]:
    """Which knob families the space varies for ``plan`` (name -> searched), for the report."""
    can = rules.knobs_for(plan) if cfg.execution else frozenset()
    return {name: name in can and (name not in ("fp8", "moments") or
                                   ("fp8" if name == "fp8" else "optimizer-dtypes") in cfg.allow)
            for name in sorted(rules.FRAMEWORK_KNOBS["megatron"] | rules.FRAMEWORK_KNOBS["torchtitan"])}


class Space:
    """The legal candidates of a plan as a lazy product: the structural candidates (the ``Knobs``
    fields before ``overlap_grad_reduce``, a list) times, for each, the legal execution-flag tuples
    of its context (a few shared tables).  ``len`` counts without building the candidates;
    ``space[i]``, iteration and :meth:`index` follow one stable order (structure-major)."""

    def __init__(self, plan: Plan, cfg: SpaceConfig = SpaceConfig()):
        import numpy as np

        self.plan, self.cfg = plan, cfg
        self.flags = FlagOptions(plan, plan.framework, cfg, knobs_of(plan))
        self.structs: list[tuple] = []
        self.ctx: list[int] = []
        self._table_ids: dict[int, int] = {}
        self.tables: list[tuple[tuple, ...]] = []
        lim = program_limits(plan)  # what the recipe's training program cannot run (Source.fixed)
        kept: dict[int, tuple[tuple, ...]] = {}
        for head, table in structures(plan, cfg, self.flags):
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
        """The structural candidate the ``i``-th candidate belongs to (a search of the table offsets)."""
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

    def nearest(self, k: Knobs) -> Optional[Knobs]:
        """The candidate nearest ``k`` when ``k`` is not one of the space's, else None: the structural
        candidate sharing the most structural fields when ``k``'s structure is not in the space (with its
        first flag tuple), else ``k``'s structure with the flag tuple sharing the most flags.  One pass
        over the structures (or one flag table); None also for an empty space."""
        head, flags = tuple(k[:N_STRUCT]), tuple(k[N_STRUCT:])
        s = self._struct_index.get(head)
        if s is None:
            if not self.structs:
                return None
            s = max(range(len(self.structs)), key=lambda j: sum(a == b for a, b in zip(self.structs[j], head)))
        elif self._flag_index[self.ctx[s]].get(flags) is not None:
            return None
        table = self.tables[self.ctx[s]]
        near = max(table, key=lambda f: sum(a == b for a, b in zip(f, flags)))
        return Knobs._make(self.structs[s] + near)

    def flag_table(self, s: int) -> tuple[tuple, ...]:
        """The legal execution-flag tuples of structural candidate ``s``."""
        return self.tables[self.ctx[s]]

    def struct_index(self, k: Knobs) -> Optional[int]:
        """The structural candidate of ``k`` (its fields before the flags), or None when it is not one of the space's."""
        return self._struct_index.get(tuple(k[:N_STRUCT]))


def enumerate_space(plan: Plan, cfg: SpaceConfig = SpaceConfig()) -> Iterator[Knobs]:
    """Every legal candidate for ``plan``'s model, cluster and framework, in a stable order.

    Built by nested loops over divisors and precomputed option lists, so illegal combinations are
    never produced (the rules are those of :func:`problems_of`)."""
    return iter(Space(plan, cfg))


