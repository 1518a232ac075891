"""``realrun.timed_collectives``: the per-call accounting ``scripts/validate_measure.py`` sets beside
the priced collectives.

Truth: the calls themselves (a world-size-1 gloo group in this process: each call's key must carry
the collectives model's size convention and the group's size, async calls their wait), and for a
real 2-process EP=2 run megatron's MoE layer under the allgather dispatcher, whose calls per layer
and micro-batch ``projection/cost/moe_dispatch.py`` lists (checked against a traced megatron run by
``tests/test_moe_dispatch.py``): the recorder must find exactly those, no more, no fewer.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from primus_launch.plan import Plan
from primus_launch.projection.cost.moe_dispatch import dispatcher_collectives
from primus_launch.projection.measure.realrun import run_real, timed_collectives


@pytest.fixture()
def world1():
    import torch.distributed as dist

    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install("cpu")
    created = not dist.is_initialized()
    if created:
        mcore_cpu.init_single_process()
    yield
    if created:
        dist.destroy_process_group()


def test_keys_sizes_async_and_restore(world1):
    import torch.distributed as dist
    from megatron.core.tensor_parallel import layers, mappings

    before = (dist.all_reduce, dist.all_gather_into_tensor, mappings.dist_all_gather_func,
              layers.dist_reduce_scatter_func)
    x = torch.ones(1000, dtype=torch.bfloat16)
    rec: dict = {}
    on = [False]
    with timed_collectives(rec, on):
        dist.all_reduce(x)  # off: not recorded
        on[0] = True
        dist.all_reduce(x)
        dist.all_reduce(tensor=torch.ones(10, dtype=torch.float32))
        out = torch.empty(1000, dtype=torch.bfloat16)
        mappings.dist_all_gather_func(out, x)          # megatron's alias: the gathered output, 2000 B
        layers.dist_reduce_scatter_func(torch.empty(500, dtype=torch.float32), torch.ones(500))  # the input
        work = dist.all_reduce(x, async_op=True)
        assert "all_reduce|2000|1" in rec and len(rec["all_reduce|2000|1"]) == 1  # async: not until wait()
        work.wait()
    assert {k: len(v) for k, v in rec.items()} == {"all_reduce|2000|1": 2, "all_reduce|40|1": 1,
                                                    "all_gather|2000|1": 1, "reduce_scatter|2000|1": 1}
    entries = [c[2] for v in rec.values() for c in v]
    assert all(w >= 0 and c >= 0 and q >= 0 and s >= 0 for v in rec.values() for w, c, _, q, s in v)
    assert len(set(entries)) == len(entries)
    assert (dist.all_reduce, dist.all_gather_into_tensor, mappings.dist_all_gather_func,
            layers.dist_reduce_scatter_func) == before


def test_ep2_run_records_the_dispatchers_calls():
    plan = Plan.model_validate({
        "model": dict(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=2,
                      vocab_size=256, seq_length=32, num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=64),
        "parallel": dict(ep=2),
        "training": dict(global_batch_size=8, micro_batch_size=2, precision="bf16", moe_token_dispatcher="allgather",
                         moe_grouped_gemm=False, moe_permute_fusion=False, moe_router_force_load_balancing=True),
        "cluster": dict(gpu="h100-sxm", gpus_per_node=2),
    })
    calls: list = []
    run_real(plan, iters=2, warmup=1, calls=calls, timeout_s=300)
    fwd, bwd = dispatcher_collectives(plan)
    per_iter = plan.num_microbatches * plan.model.num_layers
    want = Counter()
    for c in fwd + bwd:
        want[f"{c.op}|{int(c.nbytes)}|2"] += per_iter * 2  # 2 timed iterations
    assert len(calls) == 2
    for rank_calls in calls:
        got = Counter({k: len(v) for k, v in rank_calls.items() if not k.endswith("|1")})  # groups of one: no-ops
        assert got == want
        # every call paired across ranks: the same keys, the same counts, entries on one clock
        assert {k: len(v) for k, v in rank_calls.items()} == {k: len(v) for k, v in calls[0].items()}
