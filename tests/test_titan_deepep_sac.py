"""What TorchTitan's per-op SAC keeps of an MoE block's DeepEP exchanges (memory round 40, branch dgxctitan).

pytorch/torchtitan c0c0bf965 (March 2026; dgxc-benchmarking's DeepSeek-V3 recipe runs a fork of it):
``models/deepseek_v3/parallelize.py`` puts ``torch.ops.deepep.dispatch`` / ``combine`` on the op-SAC save list
with the deepep backend; ``distributed/deepep/deepep.py``: ``dispatch`` returns ``recv_x`` with one row per
unique (token, destination rank) -- ``_permute_tokens`` repeats each received token once per local expert
afterwards -- and ``combine`` returns the rank's own ``T`` rows.  ``models/common/moe/moe.py``
``_debug_force_load_balance_routing``: token ``i`` -> experts ``arange(T k).reshape(T, k) % E``.  The tests
rebuild those rules here and compare with the plan the TorchTitan reader makes of the dgxc launch.
"""

from __future__ import annotations

import random

import pytest

from primus_launch.plan import Cluster

# dgxc-benchmarking deepseek_v3/pretrain/torchtitan: deepseek_v3_671b.toml + launch.sh (GPU_TYPE=h100, 1,024 GPUs)
DGXC_H100_1024 = """
[model]
name = "deepseek_v3"
flavor = "671B"
[optimizer]
name = "AdamW"
lr = 2.2e-4
[training]
local_batch_size = 16
seq_len = 4096
steps = 60
[parallelism]
data_parallel_shard_degree = 128
expert_parallel_degree = 64
pipeline_parallel_degree = 8
pipeline_parallel_schedule = "1F1B"
pipeline_parallel_first_stage_less_layers = 1
pipeline_parallel_last_stage_less_layers = 1
expert_parallel_comm_backend = "{backend}"
[activation_checkpoint]
mode = "selective"
selective_ac_option = "op"
[compile]
enable = true
components = ["model"]
[debug]
moe_force_load_balance = {force}
"""


def _plan(backend: str = "deepep", force: bool = True):
    from primus_launch.adapters.torchtitan import plan_from_text

    text = DGXC_H100_1024.format(backend=backend, force="true" if force else "false")
    return plan_from_text(text, cluster=Cluster(gpu="h100-sxm", num_nodes=128, gpus_per_node=8))


def _recv_rows_per_token(experts: list[list[int]], E: int, ep: int) -> float:
    """DeepEP's ``num_recv_tokens`` summed over ranks per source token: unique (token, rank) pairs, rank r holding
    experts [r E/ep, (r+1) E/ep) (torchtitan's EP shards the experts' dim 0)."""
    per = E // ep
    return sum(len({e // per for e in row}) for row in experts) / len(experts)


def test_forced_round_robin_keeps_three_rows_per_token():
    """Under ``debug.moe_force_load_balance`` each DeepSeek-V3 token reaches 2 of the 64 ranks (8 consecutive
    experts, 4 per rank): op-SAC keeps ``2 T`` dispatched + ``T`` combined rows, not ``2 x 8 T``."""
    from primus_launch.projection.cost.titan_sac import op_sac_a2a_rows

    plan = _plan()
    m = plan.model
    assert plan.training.moe_token_dispatcher == "deepep" and plan.training.moe_router_force_load_balancing
    assert plan.parallel.ep == 64 and plan.training.recompute.granularity in ("op", "selective")
    E, k, T = m.num_experts, m.moe_router_topk, 4096
    experts = [[(i * k + j) % E for j in range(k)] for i in range(T)]   # moe.py's arange(T k).reshape(T, k) % E
    d = _recv_rows_per_token(experts, E, plan.parallel.ep)
    assert d == 2.0
    assert op_sac_a2a_rows(plan) == pytest.approx(d + 1.0)


def test_learned_routing_matches_group_limited_sampling():
    """Without forced balance: DeepSeek-V3's group-limited top-k (4 of 8 groups, then 8 experts) sampled
    uniformly, the unique destination ranks per token agree with the plan's rows (d + 1) within sampling error."""
    from primus_launch.projection.cost.titan_sac import op_sac_a2a_rows

    plan = _plan(force=False)
    m = plan.model
    E, k, G, g = m.num_experts, m.moe_router_topk, m.moe_router_num_groups, m.moe_router_group_topk
    assert (E, k, G, g) == (256, 8, 8, 4)
    rng = random.Random(0)
    per_group = E // G
    experts = []
    for _ in range(20000):
        groups = rng.sample(range(G), g)
        pool = [gr * per_group + x for gr in groups for x in range(per_group)]
        experts.append(rng.sample(pool, k))
    d = _recv_rows_per_token(experts, E, plan.parallel.ep)
    assert op_sac_a2a_rows(plan) == pytest.approx(d + 1.0, rel=0.01)


def test_all_to_all_backend_keeps_every_routed_pair():
    """The standard backend's ``all_to_all_single`` carries every (token, expert) pair both ways: ``2 k`` rows, and
    the DeepEP block keeps ``a T h (2 k - 3)`` bytes less per MoE layer and micro-batch."""
    from primus_launch.projection.cost.titan_sac import op_sac_a2a_rows
    from primus_launch.projection.memory.titan import layer_activation_bytes, moe_tokens

    std, dpe = _plan(backend="standard"), _plan()
    m = std.model
    assert op_sac_a2a_rows(std) == 2.0 * m.moe_router_topk
    kw = dict(seq=m.seq_length, mbs=1, tp=1, ac="op", moe=True, ep=64)
    diff = (layer_activation_bytes(m, a2a_rows=op_sac_a2a_rows(std), **kw).kept
            - layer_activation_bytes(m, a2a_rows=op_sac_a2a_rows(dpe), **kw).kept)
    assert diff == pytest.approx(2 * moe_tokens(m.seq_length, tp=1, ep=64) * m.hidden_size * (2 * m.moe_router_topk - 3))
