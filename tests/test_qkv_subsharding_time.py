"""QKV sub-sharding's time terms (fewer query groups than TP ranks, megatron-core >= 0.16.0) against megatron-core
0.16.1's own ``SelfAttention.get_query_key_value_tensors`` and ``_AllGatherFromTensorParallelRegion``, run on CPU
for one TP rank with the process group's two NCCL calls replaced by recorders: the collectives it issues (op,
bytes, dtype, forward / backward) equal ``cost.layer_collectives``' ``qkv_gather`` calls, and the QKV GEMM width
and core-attention heads per rank equal the projection's (``cost.attention_block``).  Toy sizes: cheap."""

from __future__ import annotations

import types

import pytest
import torch

from qkv_shard import QKVShard

from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster
from primus_launch.projection.cost import layer_collectives as lc
from primus_launch.projection.cost.attention_block import qkv_subsharding

SEQ, MBS = 64, 2


def _plan(nq: int, nkv: int, d: int, tp: int, sp: bool = True):
    argv = (f"--num-layers 2 --hidden-size {nq * d} --num-attention-heads {nq} --group-query-attention "
            f"--num-query-groups {nkv} --kv-channels {d} --seq-length {SEQ} --max-position-embeddings {SEQ} "
            f"--micro-batch-size {MBS} --global-batch-size {4 * MBS} --vocab-size 1024 --bf16 "
            f"--tensor-model-parallel-size {tp}" + (" --sequence-parallel" if sp else "")).split()
    return plan_from_argv(argv, Cluster(gpu="h100-sxm", gpus_per_node=8))


class _Group:
    def __init__(self, n: int, rank: int):
        self.n, self.r = n, rank

    def size(self) -> int:
        return self.n

    def rank(self) -> int:
        return self.r


def _mcore_calls(monkeypatch, *, nq: int, nkv: int, d: int, t: int, rank: int):
    """megatron-core 0.16.1's attention input path for one rank: (collective calls as (phase, op, bytes, dtype),
    query heads, key heads, value heads)."""
    attention = pytest.importorskip("megatron.core.transformer.attention")
    mappings = pytest.importorskip("megatron.core.tensor_parallel.mappings")
    calls: list[tuple] = []
    phase = ["fwd"]

    def all_gather(out, inp, group=None):  # torch.distributed.all_gather_into_tensor's contract
        calls.append((phase[0], "all_gather", out.numel() * out.element_size(), out.dtype))
        out.copy_(torch.cat([inp] * group.size(), dim=0))

    def reduce_scatter(inp, group=None, **_):
        calls.append((phase[0], "reduce_scatter", inp.numel() * inp.element_size(), inp.dtype))
        return inp.chunk(group.size(), dim=0)[group.rank()].clone()

    monkeypatch.setattr(mappings, "dist_all_gather_func", all_gather)
    monkeypatch.setattr(mappings, "_reduce_scatter_along_first_dim", reduce_scatter)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    group = _Group(t, rank)
    # the real autograd function (forward all-gather, backward reduce-scatter) on the stand-in group
    monkeypatch.setattr(attention, "all_gather_last_dim_from_tensor_parallel_region",
                        lambda x, group_=None: mappings._AllGatherFromTensorParallelRegion.apply(x, group))
    monkeypatch.setattr(attention, "get_tensor_model_parallel_rank", lambda: rank)
    sub = nkv < t
    h = nq * d
    fake = types.SimpleNamespace(
        linear_qkv=QKVShard(h, (nq + 2 * nkv) * d // t),
        config=types.SimpleNamespace(num_query_groups=nkv, test_mode=False),
        world_size=t,
        # SelfAttention.__init__ (attention.py:289-303)
        num_attention_heads_per_partition=nq // nkv if sub else nq // t,
        num_query_groups_per_partition=1 if sub else nkv // t,
        hidden_size_per_attention_head=d,
        q_layernorm=None, k_layernorm=None,
    )
    hidden = torch.randn(SEQ, MBS, h, dtype=torch.bfloat16, requires_grad=True)
    q, k, v = attention.SelfAttention.get_query_key_value_tensors(fake, hidden)
    phase[0] = "bwd"
    (q.float().sum() + k.float().sum() + v.float().sum()).backward()
    return calls, q.shape[2], k.shape[2], v.shape[2]


@pytest.mark.parametrize("nq,nkv,d,t", [(16, 4, 32, 8), (32, 4, 16, 8), (16, 2, 32, 8), (16, 1, 32, 4),
                                        (16, 4, 32, 4), (16, 4, 32, 2)])
def test_collectives_and_heads_match_megatron_core(monkeypatch, nq, nkv, d, t):
    """Every rank: one bf16 all-gather of the full-width QKV output forward and one reduce-scatter of its gradient
    backward when ``nkv < t`` (none otherwise), of the bytes ``tp_calls`` lists as ``qkv_gather``; the rank's
    query heads ``nq / t`` and one key / value head, which the projection's core attention uses, and the QKV
    shard width ``qkv_subsharding`` prices."""
    plan = _plan(nq, nkv, d, t)
    model = sorted((c.phase, c.op, c.nbytes) for c in lc.tp_calls(plan) if c.where == "qkv_gather")
    assert lc.rank_tokens(plan) == SEQ * MBS
    for rank in range(t):
        calls, hq, hk, hv = _mcore_calls(monkeypatch, nq=nq, nkv=nkv, d=d, t=t, rank=rank)
        assert all(dt == torch.bfloat16 for *_, dt in calls)
        assert sorted((p, op, float(n)) for p, op, n, _ in calls) == model
        assert (hq, hk, hv) == (nq // t, max(1, nkv // t), max(1, nkv // t))
    if nkv < t:
        assert [c.op for c in sorted(lc.layer_calls(plan), key=lambda c: c.where) if c.where == "qkv_gather"] == [
            "all_gather", "reduce_scatter"]
        assert qkv_subsharding(plan.model, t) == (nq + 2 * nkv) * d // t  # the column-parallel shard, not (nq/t+2)d
    else:
        assert model == []


def test_subsharding_terms_in_the_projection():
    """The same plan at TP 8 over 4 query groups vs the 8-group model: the QKV GEMM row is the shard width, the
    copies and the always-exposed all-gather + reduce-scatter are named rows; TorchTitan / 4-group TP 4 have none."""
    from primus_launch.projection.explain import comm_rows, op_rows

    plan = _plan(32, 4, 128, 8)
    names = [r.name for r in op_rows(plan) if r.kind == "dense"]
    assert f"QKV [{SEQ * MBS}x{(32 + 8) * 128 // 8}x{32 * 128}]" in names
    assert any(n.startswith("QKV sub-sharding") for n in names)
    rows = [r for r in comm_rows(plan) if "QKV sub-sharding" in r[0]]
    assert len(rows) == 1 and rows[0][1] > 0 and rows[0][1:3] == rows[0][3:5]
    assert not [r for r in comm_rows(_plan(32, 4, 128, 4)) if "QKV sub-sharding" in r[0]]


def test_measured_builder_states_the_substitution():
    """The world-size-1 megatron builder cannot build a sub-sharded layer: it builds one whole group per rank
    (never ``kv_heads // tp`` = 0 groups) and says so."""
    from primus_launch.projection.measure.build_mcore import _megatron_substitutions
    from primus_launch.projection.measure.piece import piece_shapes

    plan = _plan(32, 4, 128, 8)
    assert all(v.get("kv_heads", 1) == 1 for v in piece_shapes(plan).values() if "kv_heads" in v)
    subs = _megatron_substitutions(plan, "cpu", [(False, False)])
    assert any("sub-sharding" in s.what for s in subs)
    assert not any("sub-sharding" in s.what for s in _megatron_substitutions(_plan(32, 4, 128, 4), "cpu",
                                                                               [(False, False)]))
