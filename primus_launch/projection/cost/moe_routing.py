"""Expected fan-out of one token's top-k routing over ranks and nodes (closed form).

Routing model: ``E`` experts in ``G`` contiguous groups of ``E/G`` (``G = 1``: no group limit);
a token picks ``g`` of the ``G`` groups uniformly at random, then ``k`` distinct experts uniformly
among the ``N = g * E/G`` experts of its groups (balanced routing, as the load-balancing loss /
DeepSeek-V3's bias update aim for; Megatron ``--moe-router-num-groups`` /
``--moe-router-group-topk``, DeepSeek-V3 ``n_group`` / ``topk_group``). Experts sit on the EP
ranks in contiguous blocks (Megatron / torch EP: rank ``r`` holds experts ``[r E/ep, (r+1) E/ep)``),
so a rank, and a node of ranks, is a contiguous block of ``u`` experts (a *unit*).

A unit is hit when at least one of the token's experts lies in it. For a set ``S`` of the groups
overlapping the unit, with ``c_S`` of the unit's experts inside them,

    P(exactly S of the m overlapping groups selected) = C(G - m, g - |S|) / C(G, g)
    P(unit missed | S)                                = C(N - c_S, k) / C(N, k)
    E[units hit] = sum_units sum_S P(S) * (1 - C(N - c_S, k) / C(N, k))

(hypergeometric occupancy). Examples: no group limit, ``E = 256, k = 8`` on 8 nodes of 32
experts: ``8 (1 - C(224, 8)/C(256, 8)) = 5.32`` nodes; DeepSeek-V3's 4-of-8 groups on the same
nodes: 3.62 nodes. A token's copies that leave the source's own unit: ``E[hit] * (1 - u/E)`` on
average over source positions (routing does not depend on where the token is).

Round robin (:func:`round_robin_units_hit`): Primus-Turbo's DeepEP dispatcher under forced load balancing
routes token ``i`` to the ``k`` consecutive experts ``(i k + j) mod E``, ``j < k`` (Primus
``core/extensions/primus_turbo.py`` ``PrimusTurboDeepEPTokenDispatcher.dispatch_preprocess``: ``token_indices =
arange(T k).view(T, k) % E``, passed to Primus-Turbo's ``DeepEPTokenDispatcher._pre_dispatch``, which uses them
in place of the router's top-k), the same on every rank.  The starts ``i k mod E`` cycle through the multiples of
``gcd(k, E)``, so the expected units hit is the average over one cycle of the distinct units
``floor(((s + j) mod E) / u)``: 1 where ``k`` divides ``u`` (DeepSeek-V3 E 256, k 8, 32 experts per rank;
Qwen3-30B-A3B 128 / 8 / 16), 1.2 for DeepSeek-V2 (160 / 6 / 20), 1.5 for DeepSeek-V2-Lite (64 / 6 / 8), against
3.6-5.3 for random routing.  Every expert gets ``T k / E`` tokens: no sampling spread.
"""

from __future__ import annotations

from functools import lru_cache
from math import comb, gcd


@lru_cache(maxsize=4096)
def expected_units_hit(num_experts: int, topk: int, unit_experts: int, num_groups: int = 1,
                       group_topk: int = 1) -> float:
    """Expected number of distinct units of ``unit_experts`` contiguous experts that one token's
    ``topk`` experts fall in (module doc)."""
    E, k, u = num_experts, topk, unit_experts
    G, g = max(1, num_groups), max(1, group_topk)
    if E <= 0 or k <= 0 or u <= 0 or E % G:
        raise ValueError(f"bad routing shape E={E} k={k} unit={u} groups={G}/{g}")
    u = min(u, E)
    sg = E // G
    N = g * sg
    k = min(k, N)
    total_miss = comb(N, k)
    norm = comb(G, g)
    units = -(-E // u)
    out = 0.0
    for i in range(units):
        lo, hi = i * u, min(E, (i + 1) * u)
        overlaps = []
        for grp in range(lo // sg, (hi - 1) // sg + 1):
            o = min(hi, (grp + 1) * sg) - max(lo, grp * sg)
            if o > 0:
                overlaps.append(o)
        m = len(overlaps)
        # number of subsets S of the overlapping groups by (|S|, c_S)
        states: dict[tuple[int, int], int] = {(0, 0): 1}
        for o in overlaps:
            nxt: dict[tuple[int, int], int] = dict(states)
            for (j, c), w in states.items():
                key = (j + 1, c + o)
                nxt[key] = nxt.get(key, 0) + w
            states = nxt
        p_hit = 0.0
        for (j, c), w in states.items():
            if j > g or g - j > G - m:
                continue
            p_sel = w * comb(G - m, g - j) / norm
            p_hit += p_sel * (1.0 - comb(N - c, k) / total_miss)
        out += p_hit
    return out


def expected_remote_units(num_experts: int, topk: int, unit_experts: int, num_groups: int = 1,
                          group_topk: int = 1) -> float:
    """Expected distinct units, other than the source's own, that one token is sent to:
    ``E[units hit] * (1 - 1/units)`` (module doc: the hypergeometric occupancy, averaged over source units)."""
    units = -(-num_experts // unit_experts)
    if units <= 1:
        return 0.0
    return expected_units_hit(num_experts, topk, unit_experts, num_groups, group_topk) * (1.0 - 1.0 / units)


@lru_cache(maxsize=1024)
def round_robin_units_hit(num_experts: int, topk: int, unit_experts: int) -> float:
    """Expected distinct units of ``unit_experts`` contiguous experts that one token's ``topk`` experts fall in
    under Primus-Turbo's forced round robin (module doc): the average over the cycle of starts ``i k mod E``."""
    E, k, u = num_experts, topk, unit_experts
    if E <= 0 or k <= 0 or u <= 0:
        raise ValueError(f"bad routing shape E={E} k={k} unit={u}")
    k, u = min(k, E), min(u, E)
    n = E // gcd(k, E)
    return sum(len({((i * k + j) % E) // u for j in range(k)}) for i in range(n)) / n
