"""``scripts/amd_multinode_probe.py`` (issue 28, AMD; Known gaps 'AMD multi-node'): which traffic of the multi-node
MI355X rows crosses the NIC at all, against Megatron's own rank order, and the free-network what-if leaves the
fabric as it found it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import amd_multinode_probe as probe  # noqa: E402
import validate  # noqa: E402

from primus_launch.plan import Plan  # noqa: E402


def _domains(groups: list[list[int]], per_node: int) -> int:
    """The most scale-up domains (nodes of ``per_node`` consecutive ranks) one group of ``groups`` spans."""
    return max(len({r // per_node for r in g}) for g in groups)


def test_placement_of_the_multinode_rows_is_megatrons_rank_order():
    """Each multi-node MI355X row's EP, expert-DP and DP groups span the domains megatron-core 0.16.1's
    ``RankGenerator`` gives them (order ``tp-cp-ep-dp-pp``; experts: tp = ETP, dp = expert DP) on nodes of 8 ranks:
    every row's EP 8 inside one node, so no expert all-to-all crosses the NIC."""
    ps = pytest.importorskip("megatron.core.parallel_state")
    rows = probe.multinode_rows(validate)
    assert len(rows) >= 11
    for r in rows:
        plan = Plan.model_validate(r["plan"])
        p, n = plan.parallel, plan.cluster.gpus_per_node
        dense = ps.RankGenerator(tp=p.tp, ep=1, dp=plan.dp, pp=p.pp, cp=p.cp, order="tp-cp-ep-dp-pp")
        expert = ps.RankGenerator(tp=p.expert_tp, ep=p.ep, dp=plan.expert_dp, pp=p.pp, cp=1, order="tp-cp-ep-dp-pp")
        got = probe.placement(plan)
        assert got["ep"] == (p.ep, _domains(expert.get_ranks("ep"), n)), r["id"]
        assert got["edp"] == (plan.expert_dp, _domains(expert.get_ranks("dp"), n)), r["id"]
        assert got["dp"] == (plan.dp, _domains(dense.get_ranks("dp"), n)), r["id"]
        assert got["ep"][1] == 1, r["id"]


def test_free_network_what_if_restores_the_fabric():
    from primus_launch.projection.hardware.fabric import measured_fabric_fields

    rows = probe.multinode_rows(validate)[:1]
    before = {x["id"]: x["err"] for x in validate.evaluate(rows)}
    free = probe.free_network_errors(validate, rows)
    assert measured_fabric_fields("mi355x") is None
    assert {x["id"]: x["err"] for x in validate.evaluate(rows)} == before
    assert free.keys() == before.keys()
