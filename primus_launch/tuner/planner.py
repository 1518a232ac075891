"""Deterministic seed planner: single-axis sweeps around the user's recipe, then local search.

1. **Seed**: the user's configuration (or, when it is outside the space or rejected by the
   pre-filter, the nearest legal candidate).
2. **Sweeps**: for every axis group (TP, PP, CP, EP, expert-TP, VPP, MBS, recompute, DP sharding,
   HSDP replicate, SP, schedule, overlap flags) every other value is tried with the rest of the
   seed held; where the new value makes the seed illegal (GBS no longer divisible by MBS x DP, a
   schedule that needs VPP, memory) the *nearest* legal candidate is taken: fewest, cheapest side
   changes (weighted Hamming distance, :attr:`Engine.WEIGHTS`), ties broken by the space's stable
   order.
3. **Model-guided local search**: an additive surrogate of ``log(iteration time)`` over the axis
   values plus the pairwise interactions of coupled axes (TP x PP, TP x CP, PP x VPP, PP x MBS,
   EP x expert-TP, ...) is fitted by ridge least squares on every scored candidate that fits;
   the legal, unscored candidates within ``radius`` changed axis groups of the incumbent are
   ranked by it and the best few are scored; repeat until ``patience`` rounds bring no
   improvement (the surrogate only orders candidates: every reported number is the projection's).
4. **Polish**: first-improvement hill climbing (neighbours in the surrogate's order) over the
   one-axis neighbourhood of the incumbent
   (repairs now chosen by the surrogate among the near-nearest), so the result is a verified local
   optimum when the budget allows; then the same climb restarted from the best candidate of each
   TP / CP / PP / EP value within 25% of the incumbent (coupled axes the additive model misses),
   and, while budget is left, from the best candidate of every value of every axis group within
   50% of it.

Spaces too big to index whole (the execution knobs multiply the structural candidates into the
millions: :class:`~primus_launch.tuner.space.Space` is a lazy product) are searched by
:func:`hierarchical`: rounds of the phases above over :func:`subspace` around the incumbent (every
structure with the flags nearest the incumbent's, plus every flag combination of the incumbent's
structure), re-centred after each round until one brings no improvement.

No randomness: every ordering comes from the space's enumeration order and numpy's deterministic
least squares, so the same inputs give the same trials in the same order.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from primus_launch.tuner.engine import Engine, Exhausted, Memo
from primus_launch.tuner.space import AXES, N_STRUCT, Knobs, Space

GROUPS: tuple[tuple[str, ...], ...] = (
    ("tp",), ("pp",), ("cp",), ("ep",), ("etp",), ("vpp",), ("mbs",),
    ("rc_granularity", "rc_method", "rc_layers", "rc_modules"), ("dp_sharding",), ("dp_replicate",), ("sp",),
    ("schedule",), ("overlap_grad_reduce",), ("overlap_param_gather",), ("tp_comm_overlap",),
    ("first_stage_layers", "last_stage_layers", "acc_embedding", "acc_loss", "layout"),
    ("cuda_graph_impl", "cuda_graph_scope"), ("dispatcher",), ("ep_overlap", "delay_wgrad"), ("compile",),
    ("offload_layers", "offload_modules"), ("optimizer_offload",), ("precision", "fp8_recipe", "fp8_param_gather"),
    ("moments",),
)
LAYOUT = ("first_stage_layers", "last_stage_layers", "acc_embedding", "acc_loss", "layout")
PAIRS: tuple[tuple[str, str], ...] = (
    ("tp", "pp"), ("tp", "cp"), ("pp", "vpp"), ("pp", "cp"), ("tp", "mbs"), ("pp", "mbs"),
    ("ep", "etp"), ("tp", "ep"), ("pp", "ep"), ("mbs", "rc_granularity"), ("pp", "rc_granularity"),
    ("vpp", "mbs"), ("pp", "schedule"), ("ep", "dispatcher"), ("ep", "ep_overlap"), ("mbs", "offload_modules"),
    ("mbs", "cuda_graph_scope"), ("pp", "optimizer_offload"),
)


def _unique_rows(a: np.ndarray) -> list[tuple[int, ...]]:
    """The distinct rows of a small-integer matrix, sorted (as ``sorted(set(map(tuple, a)))``)."""
    radix = a.max(axis=0).astype(np.int64) + 1
    if float(np.prod(radix.astype(np.float64))) < 2.0**62:
        key = np.zeros(len(a), dtype=np.int64)
        for j in range(a.shape[1]):
            key = key * radix[j] + a[:, j]
        out = []
        for k in np.unique(key).tolist():
            row = []
            for r in reversed(radix.tolist()):
                k, x = divmod(k, r)
                row.append(x)
            out.append(tuple(reversed(row)))
        return out
    return [tuple(int(x) for x in row) for row in np.unique(a, axis=0)]


class Surrogate:
    """Additive model: prediction = mean + sum of the weights of a candidate's categories."""

    def __init__(self, blocks: list[np.ndarray], offsets: list[int], w: np.ndarray, mu: float):
        self.blocks, self.offsets, self.w, self.mu = blocks, offsets, w, mu

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        out = np.full(len(rows), self.mu)
        for b, o in zip(self.blocks, self.offsets):
            out += self.w[o + b[rows]]
        return out


class Planner:
    """The deterministic planner over an :class:`Engine` (module doc): the seed, single-axis sweeps, the
    surrogate-guided local search, then the polish (hill climbing and its restarts near the incumbent)."""

    def __init__(self, engine: Engine, *, batch: int = 4, patience: int = 3, radius: int = 3,
                 ridge: float = 0.3, restart_within: float = 1.25):
        self.restart_within = restart_within
        self.e = engine
        self.batch = batch
        self.patience = patience
        self.radius = radius
        self.ridge = ridge
        col = {a: i for i, a in enumerate(AXES)}
        self.col = col
        self.groups: list[tuple[list[int], list[tuple[int, ...]]]] = []
        for g in GROUPS:
            cols = [col[a] for a in g]
            vals = _unique_rows(engine.codes[:, cols]) if len(engine.space) else []
            if len(vals) > 1:
                self.groups.append((cols, vals))
        self._features: list[np.ndarray] | None = None
        self._climbed: set[int] = set()

    # ----- neighbourhoods -----
    def neighbours(self, base: int, pred: "Surrogate | None" = None, slack: float = 8.0) -> list[int]:
        """One candidate per other value of each axis group: the nearest legal one (fewest, cheapest
        side changes); with a surrogate ``pred``, the best-predicted among those within ``slack``
        of the nearest distance (so a memory repair can be e.g. more CP instead of recompute)."""
        out: list[int] = []
        e = self.e
        codes = e.codes
        for cols, vals in self.groups:
            own = tuple(int(codes[base, c]) for c in cols)
            for v in vals:
                if v == own:
                    continue
                if pred is None:
                    out += e.nearest(base, dict(zip(cols, v)))
                    continue
                near = e.nearest(base, dict(zip(cols, v)), limit=64)
                if not near:
                    continue
                dist = e._distances(base)
                d0 = dist[near[0]]
                pool = [i for i in near if dist[i] <= d0 + slack and i not in e.results] or near[:1]
                p = dict(zip(pool, pred(np.array(pool, dtype=np.int64))))
                out.append(min(pool, key=lambda i: (p[i], dist[i], i)))
        return list(dict.fromkeys(i for i in out if i != base))

    # ----- surrogate -----
    def features(self) -> list[np.ndarray]:
        """Per feature block, each candidate's category: one block per axis column, one per pair."""
        if self._features is None:
            c = self.e.codes.astype(np.int64)
            skip = {self.col[a] for a in LAYOUT}
            blocks = [c[:, j] for j in range(c.shape[1]) if j not in skip and c.shape[0] and c[:, j].max() > 0]
            for a, b in PAIRS:
                ca, cb = c[:, self.col[a]], c[:, self.col[b]]
                if ca.max(initial=0) > 0 and cb.max(initial=0) > 0:
                    blocks.append(ca * (cb.max() + 1) + cb)
            self._features = blocks
        return self._features

    def fit(self) -> "Surrogate":
        """Ridge least squares of log(iteration time) on the scored candidates that fit."""
        e = self.e
        rows = np.array(sorted(i for i in e.results if e.time_of(i) < math.inf), dtype=np.int64)
        blocks = self.features()
        offsets, off = [], 0
        for b in blocks:
            offsets.append(off)
            off += int(b.max()) + 1 if b.size else 1
        if rows.size == 0:
            return Surrogate(blocks, offsets, np.zeros(off), 0.0)
        y = np.log([e.time_of(int(i)) for i in rows])
        idx = np.stack([o + b[rows] for b, o in zip(blocks, offsets)], axis=1)  # (n, blocks)
        used, inv = np.unique(idx, return_inverse=True)  # unobserved categories keep weight 0
        X = np.zeros((rows.size, used.size))
        X[np.repeat(np.arange(rows.size), idx.shape[1]), inv.ravel()] = 1.0
        mu = float(y.mean())
        # ridge in its dual form (n samples <= features): w = X^T (X X^T + lambda I)^-1 (y - mu)
        alpha = np.linalg.solve(X @ X.T + self.ridge * np.eye(rows.size), y - mu)
        w = np.zeros(off)
        w[used] = X.T @ alpha
        return Surrogate(blocks, offsets, w, mu)

    def core(self, i: int) -> tuple:
        """A candidate's codes without the pipeline layout columns."""
        codes = self.e.codes[i]
        return tuple(int(codes[j]) for j in range(len(codes)) if AXES[j] not in LAYOUT)

    def group_distance(self, base: int) -> np.ndarray:
        """How many independent axis groups of each candidate differ from ``base`` (the schedule,
        implied by VPP in Megatron, is not counted)."""
        codes = self.e.codes
        d = np.zeros(len(self.e.space), dtype=np.int64)
        sched = self.col["schedule"]
        for cols, _ in self.groups:
            if cols == [sched]:
                continue
            d += (codes[:, cols] != codes[base, cols]).any(axis=1)
        return d

    # ----- phases -----
    def seed(self, knobs: Knobs) -> int | None:
        """The start: ``knobs``' index where it is a legal candidate, else the nearest legal candidate by
        weighted Hamming distance (None when none is found within the lazy-check limit)."""
        e = self.e
        i = e.index.get(knobs)
        if i is not None and e.is_legal(i):
            return i
        if not e.space:
            return None
        own = np.array([e.lookups[c].get(getattr(knobs, a), -1) for c, a in enumerate(AXES)])
        diffs = ((e.codes != own) * e.weights).sum(axis=1)
        for n, j in enumerate(np.argsort(diffs, kind="stable")):
            if e.legal_mask is not None and not e.legal_mask[j]:
                continue
            if e.is_legal(int(j)):
                return int(j)
            if n > 20 * e.MAX_LAZY_CHECKS:
                break
        return None

    def incumbent(self) -> int:
        """The best scored candidate by :meth:`Engine.key` (ties: earliest in space order)."""
        return min(self.e.results, key=lambda i: (self.e.key(i), i))

    def climb(self, start: int) -> int:
        """First-improvement hill climbing from ``start``, neighbours tried in the surrogate's
        order (best predicted first); returns the local optimum (all neighbours scored, none better)."""
        e = self.e
        cur = start
        while True:
            model = self.fit()
            nb = self.neighbours(cur, model)
            if not nb:
                return cur
            pred = model(np.array(nb, dtype=np.int64))
            moved = False
            for _, i in sorted(zip(pred.tolist(), nb)):
                e.evaluate(i, "planner")
                if e.key(i) < e.key(cur):
                    cur, moved = i, True
                    break
            if not moved:
                return cur

    def guided(self) -> None:
        """Surrogate-ranked batches within ``radius`` groups of the incumbent; the radius widens
        by two after ``patience`` batches without improvement, up to the whole space."""
        e = self.e
        stale = 0
        radius = self.radius
        max_radius = len(self.groups)
        while True:
            if stale >= self.patience:
                if radius >= max_radius:
                    return
                radius, stale = radius + 2, 0
            inc = self.incumbent()
            before = e.key(inc)
            model = self.fit()
            ok = self.group_distance(inc) <= radius
            if e.legal_mask is not None:
                ok &= e.legal_mask
            for i in list(e.results) + list(e.failed) + [i for i, r in e.reasons.items() if r is not None]:
                ok[i] = False
            cand = np.nonzero(ok)[0]
            pred = model(cand)
            picked = 0
            seen = {self.core(j) for j in e.results}
            for i in cand[np.lexsort((cand, pred))]:
                i = int(i)
                if self.core(i) in seen:  # same but for the pipeline layout: not worth a score here
                    continue
                if e.legal_mask is None and not e.is_legal(i):
                    continue
                seen.add(self.core(i))
                e.evaluate(i, "planner")
                picked += 1
                if picked >= self.batch:
                    break
            if picked == 0:
                stale = self.patience
                continue
            stale = stale + 1 if e.key(self.incumbent()) >= before else 0

    def run(self, seed_knobs: Knobs, *, between: Optional[Callable[[Engine], None]] = None) -> None:
        """Run all phases until convergence or :class:`Exhausted` (caught by the caller).

        ``between(engine)`` is called after the sweeps (the LLM loop hooks in there)."""
        e = self.e
        s = self.seed(seed_knobs)
        if s is None:
            return
        e.evaluate(s, "seed")
        for i in self.neighbours(s):  # single-axis sweeps around the seed
            e.evaluate(i, "planner")
        if between is not None:
            between(e)
        self.guided()
        self.climb(self.incumbent())
        self.restarts(("tp", "cp", "pp", "ep"), self.restart_within)
        # budget left: climb from the best point of every value of every axis group
        self.restarts(tuple(a for g in GROUPS for a in g[:1]), 2 * self.restart_within)

    def restarts(self, axes: tuple[str, ...], within: float) -> None:
        """Climb again from the best scored candidate of each value of ``axes`` (coupled axes where
        one-axis moves and an additive surrogate miss interactions), best first, while they are
        within a factor ``within`` of the incumbent's time."""
        e = self.e
        while True:
            best_t = e.time_of(self.incumbent())
            ranked = sorted(e.results, key=lambda i: (e.key(i), i))
            starts: dict[tuple[int, int], int] = {}
            for name in axes:
                c = self.col[name]
                for i in ranked:
                    if e.time_of(i) > best_t * within:
                        break
                    starts.setdefault((c, int(e.codes[i, c])), i)
            todo = sorted((i for i in set(starts.values()) if i not in self._climbed), key=lambda i: (e.key(i), i))
            if not todo:
                return
            self._climbed.add(todo[0])
            self.climb(todo[0])


# --------------------------------------------------------------------------- spaces too big to index
FLAG_AXES = AXES[N_STRUCT:]


def _flag_distance(a: tuple, b: tuple) -> float:
    w = Engine.WEIGHTS
    return sum(w[name] for name, x, y in zip(FLAG_AXES, a, b) if x != y)


def subspace(space: Space, inc: Knobs) -> list[Knobs]:
    """The candidates around ``inc`` that one :class:`Planner` round searches in a space too big to
    index whole: every structural candidate with the execution flags nearest to ``inc``'s (fewest,
    cheapest changes; ties: the table's order, the recipe's own values first), plus every flag
    combination of ``inc``'s own structure."""
    want = tuple(inc[N_STRUCT:])
    dist: dict[tuple, float] = {}  # the tables share their flag tuples: each distance once

    def distance(f: tuple) -> float:
        d = dist.get(f)
        if d is None:
            d = dist[f] = _flag_distance(f, want)
        return d

    nearest = [min(t, key=distance) for t in space.tables]  # min: first of ties
    out = [Knobs._make(h + nearest[c]) for h, c in zip(space.structs, space.ctx)]
    s = space.struct_index(inc)
    if s is not None:
        head = space.structs[s]
        out += [Knobs._make(head + f) for f in space.flag_table(s) if f != nearest[space.ctx[s]]]
    return out


def hierarchical(space: Space, memo: Memo, seed: Knobs, *,
                 between: Optional[Callable[[Engine], None]] = None, max_rounds: int = 6) -> None:
    """Block-coordinate search of a space too big to index (``len(space)`` in the millions): rounds
    of the :class:`Planner` over :func:`subspace` around the incumbent, each re-centred on the best
    candidate found so far, until a round brings no improvement.  Every round but the last may
    spend at most half of the budget left, so that the flags of a new incumbent are searched too.
    Raises :class:`Exhausted` like :meth:`Planner.run`."""
    inc = seed
    total = memo.budget
    for rnd in range(max_rounds):
        engine = Engine(memo.plan, subspace(space, inc), memo=memo)
        if total is not None and rnd < max_rounds - 1:
            memo.budget = memo.scored + max(1, (total - memo.scored) // 2)
        try:
            Planner(engine).run(inc, between=between if rnd == 0 else None)
        except Exhausted:
            memo.budget = total
            if memo.spent():  # the tune's own budget or time limit, not the round's share
                raise
        memo.budget = total
        best = memo.best()
        if best is None or best == inc:
            return
        inc = best
