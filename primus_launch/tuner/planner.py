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
4. **Polish**: best-improvement hill climbing over the one-axis (repaired) neighbourhood of the
   incumbent, so the result is a verified local optimum when the budget allows.

No randomness: every ordering comes from the space's enumeration order and numpy's deterministic
least squares, so the same inputs give the same trials in the same order.
"""

from __future__ import annotations

import math

import numpy as np

from primus_launch.tuner.engine import Engine
from primus_launch.tuner.space import AXES, Knobs

GROUPS: tuple[tuple[str, ...], ...] = (
    ("tp",), ("pp",), ("cp",), ("ep",), ("etp",), ("vpp",), ("mbs",),
    ("rc_granularity", "rc_method", "rc_layers"), ("dp_sharding",), ("dp_replicate",), ("sp",),
    ("schedule",), ("overlap_grad_reduce",), ("overlap_param_gather",), ("tp_comm_overlap",),
)
PAIRS: tuple[tuple[str, str], ...] = (
    ("tp", "pp"), ("tp", "cp"), ("pp", "vpp"), ("pp", "cp"), ("tp", "mbs"), ("pp", "mbs"),
    ("ep", "etp"), ("tp", "ep"), ("pp", "ep"), ("mbs", "rc_granularity"), ("pp", "rc_granularity"),
    ("vpp", "mbs"), ("pp", "schedule"),
)


class Planner:
    def __init__(self, engine: Engine, *, batch: int = 4, patience: int = 3, radius: int = 3,
                 ridge: float = 0.3):
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
            vals = sorted({tuple(int(x) for x in row) for row in engine.codes[:, cols]}) if engine.space else []
            if len(vals) > 1:
                self.groups.append((cols, vals))
        self._features: list[np.ndarray] | None = None

    # ----- neighbourhoods -----
    def neighbours(self, base: int) -> list[int]:
        out: list[int] = []
        codes = self.e.codes
        for cols, vals in self.groups:
            own = tuple(int(codes[base, c]) for c in cols)
            for v in vals:
                if v == own:
                    continue
                out += self.e.nearest(base, dict(zip(cols, v)))
        return list(dict.fromkeys(i for i in out if i != base))

    # ----- surrogate -----
    def features(self) -> list[np.ndarray]:
        """Per feature block, each candidate's category: one block per axis column, one per pair."""
        if self._features is None:
            c = self.e.codes.astype(np.int64)
            blocks = [c[:, j] for j in range(c.shape[1]) if c.shape[0] and c[:, j].max() > 0]
            for a, b in PAIRS:
                ca, cb = c[:, self.col[a]], c[:, self.col[b]]
                if ca.max(initial=0) > 0 and cb.max(initial=0) > 0:
                    blocks.append(ca * (cb.max() + 1) + cb)
            self._features = blocks
        return self._features

    def predict(self) -> np.ndarray:
        """Surrogate log-time for every candidate (ridge fit on the scored candidates that fit)."""
        e = self.e
        rows = np.array(sorted(i for i in e.results if e.time_of(i) < math.inf), dtype=np.int64)
        blocks = self.features()
        n = len(e.space)
        if rows.size == 0:
            return np.zeros(n)
        y = np.log([e.time_of(int(i)) for i in rows])
        cols, offsets, sizes = [], [], []
        off = 0
        for b in blocks:
            size = int(b.max()) + 1
            offsets.append(off)
            sizes.append(size)
            off += size
        X = np.zeros((rows.size, off))
        for b, o in zip(blocks, offsets):
            X[np.arange(rows.size), o + b[rows]] = 1.0
        mu = y.mean()
        A = X.T @ X + self.ridge * np.eye(off)
        w = np.linalg.solve(A, X.T @ (y - mu))
        pred = np.full(n, mu)
        for b, o in zip(blocks, offsets):
            pred += w[o + b]
        return pred

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
        e = self.e
        i = e.index.get(knobs)
        if i is not None and e.is_legal(i):
            return i
        if not e.space:
            return None
        diffs = np.array([sum(e.WEIGHTS[a] for a in AXES if getattr(k, a) != getattr(knobs, a)) for k in e.space])
        for j in np.lexsort((np.arange(len(e.space)), diffs)):
            if e.is_legal(int(j)):
                return int(j)
        return None

    def incumbent(self) -> int:
        return min(self.e.results, key=lambda i: (self.e.key(i), i))

    def climb(self, start: int) -> int:
        """Best-improvement hill climbing from ``start``; returns the local optimum."""
        e = self.e
        cur = start
        while True:
            nb = self.neighbours(cur)
            for i in nb:
                e.evaluate(i, "planner")
            best = min(nb + [cur], key=lambda i: (e.key(i), i))
            if e.key(best) < e.key(cur):
                cur = best
            else:
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
            pred = self.predict()
            ok = self.group_distance(inc) <= radius
            if e.legal_mask is not None:
                ok &= e.legal_mask
            for i in list(e.results) + list(e.failed) + [i for i, r in e.reasons.items() if r is not None]:
                ok[i] = False
            cand = np.nonzero(ok)[0]
            picked = 0
            for i in cand[np.lexsort((cand, pred[cand]))]:
                i = int(i)
                if e.legal_mask is None and not e.is_legal(i):
                    continue
                e.evaluate(i, "planner")
                picked += 1
                if picked >= self.batch:
                    break
            if picked == 0:
                stale = self.patience
                continue
            stale = stale + 1 if e.key(self.incumbent()) >= before else 0

    def run(self, seed_knobs: Knobs, *, between=None) -> None:
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
