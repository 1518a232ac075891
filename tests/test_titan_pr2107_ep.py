"""TorchTitan's standard expert-parallel path and its forced balanced routing, against torchtitan's own code
(issue 28: pytorch/torchtitan PR #2107's DeepSeek-V3 671B standard / DeepEP pair).

- ``debug.moe_force_load_balance`` is a round robin (token ``i`` to the ``k`` experts from ``i k mod E``) in the
  PR's commit (36a4b6942, read from the mirror) and in torchtitan 0.3.0 (installed): every expert the same count
  and, at DeepSeek-V3's 8 experts per EP rank, every token on ONE rank -- which the DeepEP dispatch's bytes and the
  routing-imbalance term must see (``cost/moe_imbalance.forced_round_robin``);
- the standard path's rank-major -> expert-major sort is ``_permute``'s gather and ``_unpermute``'s scatter, the
  glue rows of ``cost/titan_moe.py``; no generic chunk sort / unsort beside them (``cost/moe_layer._sort_chunks``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import titan_moe
from primus_launch.projection.cost.moe_routing import expected_units_hit, round_robin_units_hit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import titan_ep_pr2107_trace as tr  # noqa: E402

ROWS = {r["id"]: r for r in json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]}
STD, DEP = ("titanpr_dsv3_671b_h100_512gpu_pp8_ep32_standard", "titanpr_dsv3_671b_h100_512gpu_pp8_ep32_deepep")


def _plan(rid: str) -> Plan:
    return Plan.model_validate(ROWS[rid]["plan"])


def _round_robin_fn(src: str):
    """``TokenChoiceTopKRouter._debug_force_load_balance_routing`` compiled out of a torchtitan source file."""
    import torch

    tree = ast.parse(src)
    fn = next(n for n in ast.walk(tree)
              if isinstance(n, ast.FunctionDef) and n.name == "_debug_force_load_balance_routing")
    fn.decorator_list = []
    mod = ast.Module(body=[fn], type_ignores=[])
    ns: dict = {"torch": torch}
    exec(compile(ast.fix_missing_locations(mod), "<torchtitan>", "exec"), ns)   # noqa: S102 - torchtitan's own code
    return ns["_debug_force_load_balance_routing"]


def _routes(fn, shape: tuple[int, ...], E: int, k: int):
    import torch

    me = types.SimpleNamespace(top_k=k, num_experts=E)
    ids, _ = fn(me, torch.rand(*shape, E))
    return ids.reshape(-1, k)


def _check_round_robin(ids, E: int, k: int) -> None:
    import torch

    counts = torch.bincount(ids.reshape(-1), minlength=E)
    assert int(counts.min()) == int(counts.max())   # every expert exactly T k / E
    for ep in (8, 32, 64):
        u = E // ep
        distinct = torch.tensor([len(set((r // u).tolist())) for r in ids]).float().mean().item()
        assert distinct == pytest.approx(round_robin_units_hit(E, k, u), rel=1e-9)


@pytest.mark.parametrize("E,k", [(256, 8), (64, 6)])
def test_torchtitan_030_forced_balance_is_the_round_robin(E, k):
    """torchtitan 0.3.0's router (installed, ``models/common/moe.py``) under ``_debug_force_load_balance``: equal
    counts, and the distinct EP ranks per token are :func:`round_robin_units_hit` (1 for DeepSeek-V3 at EP 32, 2 at
    EP 64; a random top-k would hit ~7.3 of 32 ranks)."""
    pytest.importorskip("torch")
    from torchtitan.models.common.moe import TokenChoiceTopKRouter

    ids = _routes(TokenChoiceTopKRouter._debug_force_load_balance_routing, (2, (E // 2) * 4), E, k)
    _check_round_robin(ids, E, k)
    if E == 256:
        assert round_robin_units_hit(256, 8, 8) == 1.0 and round_robin_units_hit(256, 8, 4) == 2.0
        assert expected_units_hit(256, 8, 8) > 5.0


def test_pr2107_commit_forced_balance_is_the_round_robin():
    """The same at the PR's commit (36a4b6942 ``torchtitan/models/moe/moe.py``, from the mirror)."""
    pytest.importorskip("torch")
    src = tr.source("torchtitan/models/moe/moe.py")
    if src is None:
        pytest.skip("torchtitan mirror / commit 36a4b6942 not available")
    ids = _routes(_round_robin_fn(src), (4096,), 256, 8)
    _check_round_robin(ids, 256, 8)


def test_torchtitan_forced_balance_prices_the_round_robin():
    """Both #2107 plans: the round robin (no busiest-rank excess; DeepEP's bytes at one destination rank / node per
    token); a Megatron plan's forced balance (random logits) and Primus-Turbo's flag keep their old meaning."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.cost.moe_dispatch import dispatcher_times
    from primus_launch.projection.cost.moe_imbalance import forced_round_robin, plan_imbalance
    from primus_launch.projection.hardware.placement import layout

    for rid in (STD, DEP):
        p = _plan(rid)
        assert p.framework == "torchtitan" and p.training.moe_router_force_load_balancing
        assert forced_round_robin(p) and plan_imbalance(p).delta == 0.0 and plan_imbalance(p).mode == "round_robin"
    p = _plan(DEP)
    lay = layout(p)
    f, _ = dispatcher_times(p, p.cluster.gpu, lay.ep)
    m = p.model
    T = p.training.micro_batch_size * m.seq_length
    args = (T, float(m.expert_hidden * 2), lay.ep, p.cluster.gpu, m.num_experts, m.moe_router_topk,
            m.moe_router_num_groups or 1, m.moe_router_group_topk or 1, "deepep")
    rr = sum(coll.deepep_dispatch(*args, op=op, round_robin=True) for op in ("dispatch", "combine"))
    rnd = sum(coll.deepep_dispatch(*args, op=op, round_robin=False) for op in ("dispatch", "combine"))
    assert f == pytest.approx(rr, rel=1e-9) and rr < 0.5 * rnd
    mg = p.model_copy(update={"source": p.source.model_copy(update={"framework": "megatron"})})
    assert mg.framework == "megatron"
    assert not forced_round_robin(mg) and plan_imbalance(mg).mode == "forced"
    off = p.model_copy(update={"training": p.training.model_copy(update={"moe_router_force_load_balancing": False})})
    assert not forced_round_robin(off)


@pytest.fixture(scope="module")
def pr2107_trace() -> dict:
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "titan_ep_pr2107_trace.py")], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    return res


def test_pr2107_standard_dispatch_sorts_once_each_way(pr2107_trace):
    """``ExpertParallel._token_dispatch`` / ``_token_combine`` at 36a4b6942 move ``[*, h]`` rows only in
    ``_permute`` (cat + padded gather) and ``_unpermute`` (scatter), forward and backward: their bytes are the glue
    table's two rows (within the padding rows: 8 per local expert), and the exchanges are the three forward / two
    backward all-to-alls ``moe_dispatch`` lists for TorchTitan."""
    from primus_launch.projection.cost.moe_dispatch import dispatcher_collectives

    t = pr2107_trace
    R, h = t["rows"], t["h"]
    ops = {o.name.split(" (")[0]: o for o in titan_moe.glue_ops(False, 8)}
    perm, unperm = ops["_permute"], ops["_unpermute"]
    want_f = (perm.fwd_routed + unperm.fwd_routed) * R * h
    want_b = (perm.bwd_routed + unperm.bwd_routed) * R * h
    got_f, got_b = sum(b for _, b in t["fwd"]), sum(b for _, b in t["bwd"])
    assert {n for n, _ in t["fwd"]} == {"aten::cat", "aten::index", "aten::index_put_"}
    assert want_f <= got_f <= want_f * 1.08 and want_b <= got_b <= want_b * 1.08
    fwd, bwd = dispatcher_collectives(_plan(STD))
    assert (len(fwd), len(bwd)) == (t["a2a_fwd"], t["a2a_bwd"]) == (3, 2)


def test_titan_glue_layer_has_no_second_chunk_sort():
    """The #2107 standard plan (v0.2-era eager glue, 8 local experts): its MoE layer sorts with the glue's
    ``_permute`` / ``_unpermute`` only; the generic "sort chunks" / "unsort chunks" rows (Megatron's
    ``sort_chunks_by_idxs``, which stand for the compiled permutes of torchtitan 0.3) come back without the glue."""
    from primus_launch.projection.cost.roofline import layer_op_times

    p = _plan(STD)
    assert p.training.moe_glue_eager and p.model.num_experts // p.parallel.ep > 1
    names = [r[0] for r in layer_op_times(p)["moe"]]
    assert sum(n.startswith("_permute") for n in names) == 1 and sum(n.startswith("_unpermute") for n in names) == 1
    assert not [n for n in names if "sort chunks" in n]
    q = p.model_copy(update={"training": p.training.model_copy(update={"moe_glue_eager": False})})
    qn = [r[0] for r in layer_op_times(q)["moe"]]
    assert "sort chunks by local expert" in qn and "unsort chunks" in qn
    assert not [n for n in qn if n.startswith("_permute")]


@pytest.fixture(scope="module", params=[False, True], ids=["score_after", "score_before"])
def deepep_trace(request) -> dict:
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "titan_deepep_glue_trace.py"), str(int(request.param))],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    res["score_before"] = request.param
    return res


def test_deepep_glue_matches_the_pr2107_file(deepep_trace):
    """``titan_moe.deepep_glue_ops`` against 36a4b6942's ``dispatch_tokens`` / ``combine_tokens`` run on the CPU
    (one rank: every token received once, ``R_recv = T``): forward and backward bytes of the ``[*, h]`` ops exactly
    (the out + routed add is ``DeepEPMoE.forward``'s, outside the two functions: left out of the comparison)."""
    t = deepep_trace
    T, k, h = t["T"], t["k"], t["h"]
    ops = [o for o in titan_moe.deepep_glue_ops(t["score_before"], 1.0) if not o.name.startswith("out +")]
    want_f = sum(o.fwd_routed * T * k + o.fwd_token * T for o in ops) * h
    want_b = sum(o.bwd_routed * T * k + o.bwd_token * T for o in ops) * h
    assert sum(b for _, b in t["fwd"]) == pytest.approx(want_f, rel=1e-9)
    assert sum(b for _, b in t["bwd"]) == pytest.approx(want_b, rel=1e-9)
    assert {n for n, _ in t["fwd"]} == {"aten::index_select", "aten::mul", "aten::zeros", "aten::scatter_add_"}


def test_deepep_plan_prices_the_deepep_glue_not_the_all_to_all_glue():
    """The #2107 DeepEP plan's MoE layer: DeepEP's glue rows (received tokens = the round robin's one rank per
    token), none of the all-to-all path's (routing gather, ``_permute``, unsort, top-k ``bmm``); the standard
    plan keeps the all-to-all glue."""
    from primus_launch.projection.cost.roofline import layer_op_times

    dep = [r[0] for r in layer_op_times(_plan(DEP))["moe"] if r[0].endswith("(eager)")]
    std = [r[0] for r in layer_op_times(_plan(STD))["moe"] if r[0].endswith("(eager)")]
    assert [n.split(" (")[0] for n in dep] == [o.name.split(" (")[0] for o in titan_moe.deepep_glue_ops(False, 1.0)]
    assert not [n for n in dep if "routing gather" in n or n.startswith("_permute ") or "bmm" in n]
    assert any("routing gather" in n for n in std) and any("bmm" in n for n in std)
    p = _plan(DEP)
    rows = {r[0].split(" (")[0]: r for r in layer_op_times(p)["moe"]}
    m = p.model
    T, k, h = m.seq_length, m.moe_router_topk, m.hidden_size
    o = titan_moe.deepep_glue_ops(False, round_robin_units_hit(m.num_experts, k, m.num_experts // p.parallel.ep))[0]
    assert o.fwd_token == 2.0   # one received copy per token at EP 32 under the round robin
    assert rows["_permute_tokens"][1] > 0 and (o.fwd_routed * T * k + o.fwd_token * T) * h == 2.25 * T * k * h
