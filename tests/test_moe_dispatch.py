"""The dry run prices exactly the collectives megatron-core's MoE token dispatchers issue.

Truth: megatron-core 0.16.1's own ``MoELayer`` run forward + backward on a fake process group, its
collective calls recorded where megatron issues them (``tests/dispatch_trace.py``, one subprocess
for all cases, about 10 s).  Routing is balanced by construction where the model assumes it
(all-to-all cases route every token to every expert: top-k = E), so bytes compare exactly.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.projection.cost.moe_dispatch import HANDLE_DISPATCH, _group, dispatcher_collectives
from primus_launch.projection.hardware.placement import layout

CASES = [
    # allgather: routing map, probs, tokens gathered over TP x EP; sizes independent of the routing
    dict(dispatcher="allgather", tp=1, ep=2, etp=1, num_experts=4, topk=2, hidden=64, seq=16, batch=2),
    # TP=2 with sequence parallel, expert TP 1: the dispatcher's group is TP x EP = EP
    dict(dispatcher="allgather", tp=2, ep=2, etp=1, num_experts=4, topk=2, hidden=64, seq=16, batch=2),
    dict(dispatcher="alltoall", tp=1, ep=2, etp=1, num_experts=4, topk=4, hidden=64, seq=16, batch=2),
    # expert TP 2: the expert-TP all-gathers / reduce-scatters around the all-to-alls
    dict(dispatcher="alltoall", tp=1, ep=2, etp=2, num_experts=2, topk=2, hidden=64, seq=16, batch=2),
]


def _plan(c: dict) -> Plan:
    world = max(c["tp"], c["etp"] * c["ep"])
    return Plan(model=ModelArch(num_layers=2, hidden_size=c["hidden"], ffn_hidden_size=2 * c["hidden"],
                                num_attention_heads=4, vocab_size=1024, seq_length=c["seq"],
                                num_experts=c["num_experts"], moe_router_topk=c["topk"],
                                moe_ffn_hidden_size=2 * c["hidden"]),
                parallel=Parallelism(tp=c["tp"], ep=c["ep"], etp=c["etp"], sequence_parallel=c["tp"] > 1),
                training=Training(global_batch_size=c["batch"] * world, micro_batch_size=c["batch"],
                                  moe_token_dispatcher=c["dispatcher"]),
                cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=world))


@pytest.fixture(scope="module")
def traces() -> list[list[dict]]:
    script = Path(__file__).with_name("dispatch_trace.py")
    out = subprocess.run([sys.executable, str(script), json.dumps(CASES)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c['dispatcher']}-tp{c['tp']}-ep{c['ep']}-etp{c['etp']}"
                                                      for c in CASES])
def test_dispatcher_collectives_match_megatron(traces, i):
    """Per phase the multiset of (op, bytes, group size) the model prices equals the calls of the
    real dispatcher (count, sizes by the NCCL convention, and group)."""
    plan = _plan(CASES[i])
    ep_pl = layout(plan).ep
    fwd, bwd = dispatcher_collectives(plan)
    model = Counter((ph, c.op, c.nbytes, _group(c.group, plan, ep_pl).size)
                    for ph, calls in (("fwd", fwd), ("bwd", bwd)) for c in calls)
    real = Counter((r["phase"], r["op"], r["nbytes"], r["group_size"]) for r in traces[i])
    assert model == real
    # the old pricing had one pair per direction; the framework issues more
    assert len(fwd) > 2


def test_flex_dispatcher_is_one_dispatch_and_combine_each_way():
    """DeepEP / HybridEP (flex dispatcher): one fused dispatch + one fused combine in forward; their
    autograd backwards are a combine and a dispatch (megatron ``transformer/moe/fused_a2a.py``)."""
    from megatron.core.transformer.moe import fused_a2a

    assert "buffer.combine(" in inspect.getsource(fused_a2a.FusedDispatch.backward)
    assert "buffer.dispatch(" in inspect.getsource(fused_a2a.FusedCombine.backward)
    assert "combine_with_unpermute(" in inspect.getsource(fused_a2a.HybridEPDispatch.backward)
    assert "dispatch_with_permute(" in inspect.getsource(fused_a2a.HybridEPCombine.backward)
    for d in ("deepep", "hybridep"):
        fwd, bwd = dispatcher_collectives(_plan({**CASES[2], "dispatcher": d}))
        assert [c.what for c in fwd] == ["dispatch", "combine"]
        assert [c.what for c in bwd] == ["combine", HANDLE_DISPATCH]


def test_hybridep_backward_dispatch_reuses_the_forward_handle():
    """Only HybridEP's forward dispatch builds the routing metadata (the routing map goes in, so DeepEP hybrid-ep
    runs ``metadata_preprocessing``: an NCCL all-gather of the ``[T, E]`` routing map and a preprocessing kernel);
    the backward's dispatch (the combine's gradient) passes the forward's handle and token count instead
    (megatron-core 0.16.1 ``fused_a2a.py``), so its torch-API time is at most the dispatch's, across IB the
    combine's (the other call on the handle)."""
    from megatron.core.transformer.moe import fused_a2a

    from primus_launch.projection.cost import collectives as coll

    fwd_src = inspect.getsource(fused_a2a.HybridEPDispatch.forward)
    bwd_src = inspect.getsource(fused_a2a.HybridEPCombine.backward)
    assert "routing_map=routing_map" in fwd_src
    assert "fp8_dispatch = False" in fwd_src   # BF16 dispatch: the fits take the README's BF16 figures
    assert "handle=handle" in bwd_src and "routing_map" not in bwd_src
    assert "num_permuted_tokens=ctx.num_permuted_tokens" in bwd_src
    for nodes, ranks in ((8, 64), (4, 32), (2, 16), (1, 8), (1, 32)):
        d, c = (coll.hybridep_api_overhead(op, nodes, ranks) for op in ("dispatch", "combine"))
        assert coll.hybridep_api_overhead(HANDLE_DISPATCH, nodes, ranks) == min(d, c)
        if nodes > 1:   # across IB the handle-less dispatch (its routing-map all-gather crosses the NIC) costs more
            assert d > c
    # the README's dispatch (no handle) at 8 IB nodes costs more than the handle path
    assert coll.hybridep_api_overhead("dispatch", 8, 64) > 2 * coll.hybridep_api_overhead(HANDLE_DISPATCH, 8, 64)
