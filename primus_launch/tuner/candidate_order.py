"""The order in which the branch and bound (``branch_bound.py``) meets its structural candidates and their
nodes: level-1 bounds first, each candidate refined with its tail floor and put back in line, then its nodes
lowest bound first, their memory groups priced; it depends on the bounds and the memory groups only, never on
the incumbent, so a copy run ahead names the expansions the search will ask for next (``expansion.py``)."""

from __future__ import annotations

import heapq
from typing import Optional

import numpy as np

from primus_launch.tuner.bounds import BoundModel


class Order:
    """The order in which the search meets structural candidates, which does not depend on the
    incumbent (only where it stops does): the unrefined ones by level-1 bound (ties in the space's
    order), each refined with its tail floor into ``pending``; when its bound is the lowest of both
    lines its nodes are met (:meth:`step`): back in line at a higher node's bound, expanded, or bounded
    out by memory.  :meth:`head` is the next event, :meth:`take` consumes it; a copy
    (:meth:`ahead`) runs forward to name the candidates the search will expand next."""

    def __init__(self, lb: np.ndarray, bm: BoundModel, tails: Optional[dict[int, float]] = None):
        self.lb, self.bm = lb, bm
        self.order = np.lexsort((np.arange(len(lb)), lb))
        self.at = 0
        self.pending: list[tuple[float, int]] = []
        self.tails: dict[int, float] = {} if tails is None else tails
        self.refs: dict[int, np.ndarray] = {}
        self.memory: dict[int, bool] = {}
        self.nodes: dict[int, list[tuple[float, tuple]]] = {}
        self.node_memo: dict[tuple[int, tuple], tuple[bool, frozenset, frozenset]] = {}
        #: the memory groups this order's steps found may fit (the certificate's count; an :meth:`ahead` copy's own)
        self.fit: set = set()
        #: per candidate met at the head, the first of its :meth:`node_list` not yet shown out by memory
        self.at_node: dict[int, int] = {}

    def tail(self, s: int) -> float:
        """``BoundModel.tail`` of ``s`` (computed once, shared with :meth:`ahead` copies)."""
        if s not in self.tails:
            self.tails[s] = self.bm.tail(s)
        return self.tails[s]

    def refined(self, s: int) -> np.ndarray:
        """``BoundModel.refined_variants`` of ``s`` (computed once, shared with :meth:`ahead` copies)."""
        if s not in self.refs:
            self.refs[s] = self.bm.refined_variants(s)
        return self.refs[s]

    def memory_out(self, s: int) -> bool:
        """``BoundModel.memory_out`` of ``s`` (computed once, shared with :meth:`ahead` copies)."""
        if s not in self.memory:
            self.memory[s] = self.bm.memory_out(s)
        return self.memory[s]

    def node_list(self, s: int) -> list[tuple[float, tuple]]:
        """``BoundModel.node_bounds`` of ``s`` (computed once, shared with :meth:`ahead` copies)."""
        if s not in self.nodes:
            self.nodes[s] = self.bm.node_bounds(s)
        return self.nodes[s]

    def node_map(self, s: int) -> dict[tuple, float]:
        """Node -> bound of ``s`` (what :meth:`BranchBound.expand` bounds each plan by first)."""
        return {nk: b for b, nk in self.node_list(s)}

    def _node_out(self, s: int, nk: tuple) -> tuple[bool, frozenset, frozenset]:
        key = (s, nk)
        if key not in self.node_memo:
            tried: set = set()
            fit: set = set()
            out = self.bm.node_out(s, nk, tried, fit)
            self.node_memo[key] = (out, frozenset(tried), frozenset(fit))
        return self.node_memo[key]

    def step(self, s: int, bound: float, priced: Optional[set] = None) -> Optional[bool]:
        """A refined candidate ``s`` met at the head with ``bound``: its nodes (:meth:`node_list`) from
        the first not yet shown out, lowest bound first; a node whose bound is above ``bound`` puts ``s``
        back in line at that bound (False); else the node's memory groups are priced
        (``BoundModel.node_out``, into ``priced``): one that may fit expands ``s`` (None), all out moves
        on to the next node; every node out: ``s`` is bounded out by memory (True).  Depends only on the
        bounds and the memory groups, never on the incumbent."""
        nodes = self.node_list(s)
        i = self.at_node.get(s, 0)
        while i < len(nodes):
            b, nk = nodes[i]
            if b > bound:
                self.at_node[s] = i
                heapq.heappush(self.pending, (b, s))
                return False
            out, tried, fit = self._node_out(s, nk)
            if priced is not None:
                priced.update(tried)
                self.fit.update(fit)
            if not out:
                self.at_node[s] = i
                return None
            i += 1
        self.at_node[s] = i
        return True

    def head(self) -> Optional[tuple[bool, float, int]]:
        """``(expand, bound, s)``: an expansion of a refined candidate (True), or the next unrefined
        one (False); None at the end."""
        nxt = (float(self.lb[self.order[self.at]]), int(self.order[self.at])) if self.at < len(self.order) \
            else (float("inf"), -1)
        if self.pending and self.pending[0] <= nxt:
            return True, self.pending[0][0], self.pending[0][1]
        return (False, nxt[0], nxt[1]) if self.at < len(self.order) else None

    def take(self, priced: Optional[set] = None) -> Optional[bool]:
        """Consume the head: a refined candidate, expanded (None), bounded out by memory (True) or put
        back in line at its next node's bound (False) (:meth:`step`, its memory groups priced into
        ``priced``); or an unrefined candidate, bounded out by memory (True) or refined and put back in
        line (False)."""
        expand, bound, s = self.head()
        if expand:
            heapq.heappop(self.pending)
            return self.step(s, bound, priced)
        self.at += 1
        if self.memory_out(s):
            return True
        heapq.heappush(self.pending, (max(float(self.lb[s]), float(self.refined(s).min())), s))
        return False

    def ahead(self) -> "Order":
        """A copy to run forward (``expansion.Ahead``): its own position, queue and per-candidate node cursor,
        the bounds' and memory verdicts' caches shared."""
        o = Order.__new__(Order)
        o.lb, o.bm, o.order, o.at, o.pending = self.lb, self.bm, self.order, self.at, list(self.pending)
        o.tails, o.memory, o.refs = self.tails, self.memory, self.refs   # shared: each computed once
        o.nodes, o.node_memo = self.nodes, self.node_memo
        o.at_node = dict(self.at_node)
        o.fit = set()
        return o

    def next_expansion(self) -> Optional[int]:
        """Run forward to the next expansion and consume it: its candidate (None at the end)."""
        while (h := self.head()) is not None:
            if self.take() is None:
                return h[2]
        return None

    def rest(self) -> list[int]:
        """The candidates not yet met: the unrefined ones left in order, then the refined ones in line."""
        return [int(x) for x in self.order[self.at:]] + [s for _, s in self.pending]
