"""Routing as it happens: how many more routed tokens the busiest EP rank gets than the mean, by router mode.

Every MoE layer's dispatch / combine all-to-all joins the EP group, so each layer waits for the rank
that received the most routed token copies: its experts' GEMMs, activation and permutations, and its
share of the all-to-all, take ``1 + delta`` times the balanced figure.  Per micro-batch and layer,
with ``E`` experts, top-``k``, ``u = E / ep`` experts per rank and ``N`` tokens routed in the EP group
(``T`` per rank x ``ep``):

- sampling: a token's ``k`` distinct experts fall on a rank's ``u`` experts hypergeometrically, so the
  rank's count over ``N`` independent tokens has mean ``N k u / E`` and variance
  ``N k (u/E)(1 - u/E)(E - k)/(E - 1)``: relative variance ``s2 = (1 - u/E)(E - k) / (N k u/E (E - 1))``;
- a learned router adds content-driven spread the tokens of one micro-batch do not average out (they
  come from a few documents): each expert's share moves by a relative ``c`` (independent across
  experts), the rank's by ``c / sqrt(u)``;

    sigma = sqrt(s2 + c^2 / u),   delta = sigma * g(ep),   g(n) = E[max of n standard normals]

Router modes (``router_mode``) and their ``c``:

- ``round_robin`` (forced load balancing through Primus-Turbo's DeepEP dispatcher, ``training.moe_force_round_robin``,
  or TorchTitan's ``debug.moe_force_load_balance`` with any dispatcher, :func:`forced_round_robin`:
  token ``i`` to the ``k`` experts from ``i k mod E``, the same on every rank, Primus
  ``core/extensions/primus_turbo.py`` ``PrimusTurboDeepEPTokenDispatcher.dispatch_preprocess``; since Primus 253b3322
  only with ``moe_router_force_load_balancing_type: even``, the reader's business): every expert gets
  ``T k / E`` of a rank's tokens, ``delta = 0``;
- ``forced`` (Megatron ``--moe-router-force-load-balancing``, benchmark runs): the router's logits are
  replaced by fresh N(0, 1) draws per token (megatron-core ``moe/router.py`` ``TopKRouter.forward``,
  ``moe_utils.RandomSTE``), so sampling alone: ``c = 0`` (``scripts/validation/forced_balance_imbalance.py``
  samples the same: 0.3-1.5 % at the judged rows' shapes);
- ``aux_loss`` (a load-balancing loss: Megatron ``aux_loss`` / ``seq_aux_loss`` / ``global_aux_loss``),
  ``expert_bias`` (auxiliary-loss-free bias updates, Megatron ``--moe-router-enable-expert-bias``) and
  ``none``: ``c`` = :data:`LEARNED_C` from the one public per-expert count of a trained router found:
  16 layers x 8 experts of a model trained with a balancing loss (shawntan/scattermoe#10, "Model-A",
  iteration 38350, 640 routed tokens per expert): the counts' variance is 2.42x the sampling variance
  (:func:`overdispersion`), ``c^2 = (2.42 - 1)(1 - 1/8) / 640``, c = 4.4 %.  No measurement of the
  bias-update or unbalanced routers at training shapes was found: they take the same ``c`` (stated in
  the explanation; ``none`` is a lower bound).

``g(n)`` by numerical integration of ``n x phi(x) Phi(x)^(n-1)`` (g(2) = 1/sqrt(pi), g(8) = 1.4236).

Token drop (Megatron ``--moe-expert-capacity-factor`` ``f``, NeMo's ``MegatronTokenDropCallback``: f = 1.0, padded):
megatron-core ``moe_utils.topk_routing_with_score_function`` keeps, per expert, at most ``capacity = ceil(f x T k /
E)`` of a rank's ``T`` tokens (``get_capacity``), so no expert -- and no rank, whose ``u`` experts each receive at
most ``f`` x their balanced count from every source rank -- exceeds ``f`` x the mean: ``delta <= f - 1``
(:func:`capped`).  With ``--moe-pad-expert-input-to-capacity`` the routing map *is* the capacity mask (``final_map =
capacity_mask``) and the alltoall dispatcher's ``preprocess`` sets every local expert's count to ``capacity x tp x
ep`` (``drop_and_pad``, token_dispatcher.py, core_r0.12.0 .. main): every rank computes exactly ``f`` x the balanced
count, ``delta = f - 1`` whatever the router (0 at f = 1.0); and its early return skips the routed-count D2H copy,
so the layer has no host-device sync (``roofline``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from primus_launch.plan import Plan

# the scattermoe#10 counts (module doc): 16 layers x 8 experts, 5120 routed copies per layer
SCATTERMOE_COUNTS: tuple[tuple[int, ...], ...] = (
    (628, 649, 658, 630, 668, 652, 634, 601), (654, 627, 632, 676, 586, 646, 647, 652),
    (643, 633, 660, 604, 634, 664, 647, 635), (613, 640, 656, 606, 659, 641, 648, 657),
    (609, 624, 627, 658, 587, 705, 624, 686), (653, 615, 679, 646, 605, 615, 641, 666),
    (702, 680, 599, 675, 622, 620, 605, 617), (711, 658, 672, 623, 590, 688, 609, 569),
    (644, 629, 632, 627, 652, 639, 645, 652), (644, 659, 585, 701, 595, 648, 618, 670),
    (781, 548, 647, 600, 636, 566, 713, 629), (601, 617, 667, 674, 602, 675, 596, 688),
    (642, 692, 647, 603, 690, 621, 614, 611), (684, 613, 667, 696, 580, 632, 634, 614),
    (622, 632, 593, 620, 607, 718, 726, 602), (595, 682, 652, 702, 613, 640, 668, 568),
)


def overdispersion(counts: tuple[tuple[int, ...], ...] = SCATTERMOE_COUNTS) -> float:
    """Mean over layers of the variance of the per-expert counts over the multinomial (sampling)
    variance ``mean (1 - 1/E)``."""
    out = []
    for row in counts:
        e = len(row)
        mean = sum(row) / e
        var = sum((x - mean) ** 2 for x in row) / e
        out.append(var / (mean * (1 - 1 / e)))
    return sum(out) / len(out)


def learned_spread(counts: tuple[tuple[int, ...], ...] = SCATTERMOE_COUNTS) -> float:
    """``c``: an expert's relative load spread beyond sampling (module doc)."""
    e = len(counts[0])
    mean = sum(sum(r) for r in counts) / (len(counts) * e)
    return math.sqrt(max(0.0, (overdispersion(counts) - 1.0) * (1 - 1 / e) / mean))


LEARNED_C = round(learned_spread(), 4)


@lru_cache(maxsize=512)
def expected_max_normal(n: int) -> float:
    """``E[max of n independent standard normals]`` (0 for n <= 1), by the trapezoid rule over
    [-8, 8]: ``int x n phi(x) Phi(x)^(n-1) dx``."""
    if n <= 1:
        return 0.0
    steps, lo, hi = 4000, -8.0, 8.0
    dx = (hi - lo) / steps
    tot = 0.0
    for i in range(steps + 1):
        x = lo + i * dx
        w = 0.5 if i in (0, steps) else 1.0
        phi = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        tot += w * x * n * phi * cdf ** (n - 1)
    return tot * dx


def mode_of(force_balance: bool, aux_loss: bool, expert_bias: bool) -> str:
    """``forced`` | ``aux_loss`` | ``expert_bias`` | ``none`` from the router's flags (module doc)."""
    if force_balance:
        return "forced"
    if aux_loss:
        return "aux_loss"
    return "expert_bias" if expert_bias else "none"


def router_mode(plan: Plan) -> str:
    """The plan's router mode (:func:`mode_of`).  TorchTitan's gate bias (``moe_router_bias`` read from a
    TorchTitan model) is a router parameter, not a balancing bias."""
    t, m = plan.training, plan.model
    return mode_of(t.moe_router_force_load_balancing, t.moe_router_aux_loss,
                   m.moe_router_bias and plan.framework == "megatron")


@dataclass(frozen=True)
class Imbalance:
    """The busiest EP rank's routed-token excess over the mean (module doc)."""

    mode: str
    delta: float          # busiest rank / mean - 1
    sigma: float          # relative spread of one rank's count
    ranks: int
    tokens: float         # tokens routed in the EP group per micro-batch and layer
    learned: float        # c

    def text(self) -> str:
        """One line for the report: the mode, the busiest rank's excess ``delta``, the per-rank spread
        ``sigma`` and the learned-router term ``c``; under a padded token drop, every rank's share of the
        balanced count (module doc)."""
        if "capacity" in self.mode and self.sigma == 0.0:
            return (f"router {self.mode}: every one of {self.ranks} EP ranks computes {100 * (1 + self.delta):.0f}% "
                    "of the balanced routed tokens (token drop, padded to the capacity)")
        return (f"router {self.mode}: busiest of {self.ranks} EP ranks gets +{100 * self.delta:.1f}% routed tokens "
                f"(spread {100 * self.sigma:.2f}% per rank" + (f", learned-router c {100 * self.learned:.1f}%"
                                                              if self.learned else ", sampling only") + ")")


def rank_imbalance(num_experts: int, topk: int, ep: int, tokens: float, mode: str) -> Imbalance:
    """The busiest of ``ep`` ranks' excess for ``tokens`` routed in the EP group (module doc)."""
    E, k = int(num_experts), int(topk)
    if ep <= 1 or E <= 0 or tokens <= 0:
        return Imbalance(mode, 0.0, 0.0, ep, tokens, 0.0)
    u = max(1, E // ep)
    f = u / E
    k = min(k, E)
    s2 = (1 - f) * (E - k) / (tokens * k * f * max(1, E - 1)) if E > 1 else 0.0
    c = 0.0 if mode == "forced" else LEARNED_C
    sigma = math.sqrt(s2 + c * c / u)
    return Imbalance(mode, sigma * expected_max_normal(ep), sigma, ep, tokens, c)


def capped(imb: Imbalance, factor: float | None, padded: bool) -> Imbalance:
    """``imb`` under a capacity factor (module doc, token drop): padded, exactly ``factor - 1``; dropping
    only, at most ``factor - 1``; no factor, ``imb`` as it is."""
    if factor is None or imb.ranks <= 1:
        return imb
    bound = float(factor) - 1.0
    if padded:
        return Imbalance(f"{imb.mode}, capacity {factor:g} padded", bound, 0.0, imb.ranks, imb.tokens, 0.0)
    if imb.delta <= bound:
        return imb
    return Imbalance(f"{imb.mode}, capacity {factor:g}", bound, imb.sigma, imb.ranks, imb.tokens, imb.learned)


def forced_round_robin(plan: Plan) -> bool:
    """Whether the plan's forced routing is a round robin -- token ``i`` to the ``k`` experts from ``i k mod E``
    (module doc, ``round_robin``): Primus-Turbo's DeepEP dispatcher's (``training.moe_force_round_robin`` with
    ``moe_router_force_load_balancing`` and the deepep dispatcher), or TorchTitan's, whatever its dispatcher.
    TorchTitan's ``debug.moe_force_load_balance`` has been that round robin since it came (pytorch/torchtitan
    99fee810b, PR #1670 'Fake balanced routing in MoE'; at 36a4b6942, PR #2107, ``models/moe/moe.py``
    ``TokenChoiceTopKRouter._debug_force_load_balance_routing``: ``torch.arange(n_tokens * top_k).reshape(n_tokens,
    top_k) % num_experts``; torchtitan 0.3.0 ``models/common/moe.py``, the same over ``bs * slen * top_k``):
    every expert gets exactly ``T k / E`` of each rank's tokens, and a token's ``k`` experts are consecutive."""
    t = plan.training
    if not t.moe_router_force_load_balancing:
        return False
    return plan.framework == "torchtitan" or (t.moe_force_round_robin and t.moe_token_dispatcher == "deepep")


def plan_imbalance(plan: Plan) -> Imbalance:
    """:func:`rank_imbalance` of a plan's MoE layers: ``T`` tokens per rank (micro-batch x sequence /
    CP / TP x expert-TP: what one rank routes) x EP; Primus-Turbo's forced round robin: none."""
    m, p, t = plan.model, plan.parallel, plan.training
    if not m.is_moe:
        return Imbalance("dense", 0.0, 0.0, 1, 0.0, 0.0)
    T = t.micro_batch_size * m.seq_length / p.cp / p.tp * p.expert_tp
    if forced_round_robin(plan):
        return Imbalance("round_robin", 0.0, 0.0, p.ep, T * p.ep, 0.0)
    return capped(rank_imbalance(m.num_experts, m.moe_router_topk, p.ep, T * p.ep, router_mode(plan)),
                  t.moe_expert_capacity_factor, t.moe_pad_expert_input_to_capacity)
