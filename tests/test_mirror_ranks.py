"""The world-size-1 MoE piece is rank 0 of the run's expert-parallel layer (mirror_ranks).

Truth: ``tests/real_moe_rank.py`` -- megatron-core's real EP=2 MoE layer in 2 gloo processes that
hold the same tokens and router weights (the case in which the mirror's "every other rank holds this
rank's tensors" is exact): rank 0's router shape, local expert count and the rows each of its
experts received must be the piece's, for both of megatron's dispatchers.  The other tests check
what the mirror does where no 2-process run reaches here (expert-TP, E / ep below top-k) against the
balanced-routing count the docstring states, and that every other group still reaches gloo.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from primus_launch.plan import Plan

sys.path.insert(0, str(Path(__file__).parent))
from real_moe_rank import observe, same_on_every_rank  # noqa: E402


def _plan(ep: int, dispatcher: str, etp: int = 1, experts: int = 4, topk: int = 2, force: bool = False) -> Plan:
    return Plan.model_validate({
        "model": dict(num_layers=1, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=2,
                      vocab_size=256, seq_length=32, num_experts=experts, moe_router_topk=topk,
                      moe_ffn_hidden_size=96),
        "parallel": dict(ep=ep, etp=etp),
        "training": dict(global_batch_size=32, micro_batch_size=2, precision="fp32", moe_token_dispatcher=dispatcher,
                         moe_grouped_gemm=False, moe_permute_fusion=False,
                         moe_router_force_load_balancing=force),
        "cluster": {"gpus_per_node": ep * etp}})


#: each test starts at world size 1 (conftest.no_fake_world)
pytestmark = pytest.mark.usefixtures("no_fake_world")


def _piece(plan: Plan) -> dict:
    from primus_launch.projection.measure.build_mcore import pieces, world_size_one

    with world_size_one("cpu"):
        _, model = pieces(plan, "cpu", measure_layers=1)
        layer = next(lyr for lyr in model.decoder.layers if hasattr(lyr.mlp, "token_dispatcher"))
        m = plan.model
        return observe(layer, same_on_every_rank(layer, m.seq_length, plan.training.micro_batch_size, m.hidden_size))


DISPATCHERS = ("allgather", "alltoall")


@pytest.fixture(scope="module")
def real_rank0() -> dict:
    plans = [_plan(2, d).model_dump(mode="json") for d in DISPATCHERS]
    script = Path(__file__).with_name("real_moe_rank.py")
    done = subprocess.run([sys.executable, str(script), json.dumps(plans)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(zip(DISPATCHERS, json.loads(done.stdout.strip().splitlines()[-1])))


@pytest.mark.parametrize("dispatcher", DISPATCHERS)
def test_piece_routes_as_rank_zero_of_the_real_ep_run(real_rank0, dispatcher):
    real = real_rank0[dispatcher]
    got = _piece(_plan(2, dispatcher))
    assert real["router"] == [4, 64] and real["local_experts"] == 2  # megatron's EP=2 rank
    for key in ("router", "local_experts", "tokens_per_expert", "expert_rows", "output"):
        assert got[key] == real[key], (key, got[key], real[key])
    assert got["input_grad"] and real["input_grad"]
    # both ranks' tokens reach rank 0's experts: more than this rank's own share of them
    assert sum(real["tokens_per_expert"]) > 0


@pytest.mark.parametrize("dispatcher", DISPATCHERS)
@pytest.mark.parametrize("ep,etp,experts,topk", [(2, 2, 4, 2), (4, 1, 8, 8), (4, 1, 16, 4)])
def test_local_experts_receive_the_gathered_ranks_tokens(dispatcher, ep, etp, experts, topk):
    """Balanced routing (megatron's --moe-router-force-load-balancing): the local experts receive
    the tokens of ``ep * etp`` ranks, ``n T k (E / ep) / E`` rows in all; E / ep local experts even
    when that is below top-k (DeepSeek-V3: 256 experts over EP 64, top-8)."""
    plan = _plan(ep, dispatcher, etp=etp, experts=experts, topk=topk, force=True)
    got = _piece(plan)
    T = plan.model.seq_length * plan.training.micro_batch_size
    n = ep * etp
    assert got["local_experts"] == experts // ep and got["router"] == [experts, 64]
    assert len(got["tokens_per_expert"]) == experts // ep
    # each token's top-k experts are distinct, so this rank's own assignments to the local experts
    # are exact in expectation only: the mirror multiplies them by n
    want = n * T * topk * (experts // ep) / experts
    assert sum(got["tokens_per_expert"]) == got["expert_rows"]
    assert sum(got["tokens_per_expert"]) % n == 0
    assert 0.5 * want <= sum(got["tokens_per_expert"]) <= 1.5 * want
    if topk == experts:  # every token to every expert: exact
        assert got["tokens_per_expert"] == [n * T] * (experts // ep)


def test_mirrored_calls_leave_other_groups_to_torch():
    """Inside ``world_size_one`` the patched collectives serve a MirrorGroup and pass any other
    group through to torch (the world-size-1 gloo group here), and are restored after."""
    import torch.distributed as dist

    from primus_launch.projection.measure.build_mcore import world_size_one
    from primus_launch.projection.measure.mirror_ranks import MirrorGroup

    before = dist.all_gather_into_tensor
    with world_size_one("cpu"):
        x = torch.arange(6.0).reshape(3, 2)
        out = torch.empty(9, 2)
        dist.all_gather_into_tensor(out, x, group=MirrorGroup(3))
        assert torch.equal(out, torch.cat([x, x, x]))
        half = torch.empty(3, 2)
        dist.reduce_scatter_tensor(half, out, group=MirrorGroup(3))
        assert torch.equal(half, x)
        a2a = torch.empty(4, 2)
        dist.all_to_all_single(a2a, x, output_split_sizes=[2, 2], input_split_sizes=[2, 1], group=MirrorGroup(2))
        assert torch.equal(a2a, torch.cat([x[:2], x[:2]]))
        one = torch.empty(3, 2)
        dist.all_gather_into_tensor(one, x)  # the real world-size-1 group
        assert torch.equal(one, x)
    assert dist.all_gather_into_tensor is before


def test_mirrored_calls_on_empty_tensors():
    """A rank that routed no token to another's experts sends empty blocks: the mirror copes."""
    import torch.distributed as dist

    from primus_launch.projection.measure.build_mcore import world_size_one
    from primus_launch.projection.measure.mirror_ranks import MirrorGroup

    with world_size_one("cpu"):
        empty = torch.empty(0, 4)
        dist.all_gather_into_tensor(torch.empty(0, 4), empty, group=MirrorGroup(2))
        dist.reduce_scatter_tensor(torch.empty(0, 4), empty, group=MirrorGroup(2))
        out = torch.full((3, 4), 7.0)
        dist.all_to_all_single(out, torch.ones(2, 4), output_split_sizes=[2, 1], input_split_sizes=[0, 2],
                               group=MirrorGroup(2))
        assert torch.equal(out, torch.zeros(3, 4))  # nothing to rank 0 from a mirror that sends it nothing
