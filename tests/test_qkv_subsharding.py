"""Fewer query groups than TP ranks: megatron-core >= 0.16.0's QKV activation sub-sharding (f7dfb99795).

Legality against megatron-core 0.16.1's own ``TransformerConfig`` (TP a multiple or a divisor of the query groups);
the bytes the attention keeps (``memory.activations._te_qkv_kept``) against megatron-core 0.16.1's own
``SelfAttention.get_query_key_value_tensors`` run on CPU with the tensor-parallel gather replaced by a local
stand-in, Transformer Engine's RMSNorm and fused attention restated by what they save (``inputmat`` + fp32
``rsigma``; ``q``, ``k``, ``v`` made contiguous by ``get_qkv_layout``), and the saved tensors counted by storage
through ``torch.autograd.graph.saved_tensors_hooks``.  Cheap: one layer's projections at toy sizes."""

from __future__ import annotations

import types

import pytest
import torch

from qkv_shard import QKVShard

from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster, ModelArch, PlanError
from primus_launch.plan.legality import legality_problems
from primus_launch.projection.memory.activations import _te_qkv_kept

ARGV = ("--num-layers 2 --hidden-size 512 --num-attention-heads 16 --group-query-attention --num-query-groups 4 "
        "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 16 "
        "--vocab-size 32000 --bf16").split()


def _tp_problems(tp: int, framework: str = "megatron") -> list:
    plan = plan_from_argv(ARGV + ["--tensor-model-parallel-size", str(tp)], Cluster(gpu="h100-sxm", gpus_per_node=8))
    if framework != "megatron":
        plan = plan.model_copy(update={"source": plan.source.model_copy(update={"framework": framework})})
    return [p for p in legality_problems(plan) if p[0] == "parallel.tp"]


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_megatron_tp_may_exceed_the_query_groups(tp):
    """4 query groups: TP 1 / 2 / 4 (divisors) and 8 (a multiple) are legal for Megatron, as megatron-core
    0.16.1's ``TransformerConfig.__post_init__`` accepts them."""
    assert _tp_problems(tp) == []
    mc = pytest.importorskip("megatron.core.transformer.transformer_config")
    mc.TransformerConfig(num_layers=2, hidden_size=512, num_attention_heads=16, num_query_groups=4,
                         tensor_model_parallel_size=tp)


def test_tp_neither_multiple_nor_divisor_is_refused():
    """A TP that neither divides nor is divided by the query groups is
    refused, as ``TransformerConfig`` raises: 6 groups (24 heads) at TP 4."""
    mc = pytest.importorskip("megatron.core.transformer.transformer_config")
    with pytest.raises(ValueError, match="multiple or divisor"):
        mc.TransformerConfig(num_layers=2, hidden_size=768, num_attention_heads=24, num_query_groups=6,
                             tensor_model_parallel_size=4)
    argv = list(ARGV)
    for flag, value in (("--num-query-groups", "6"), ("--num-attention-heads", "24"), ("--hidden-size", "768")):
        argv[argv.index(flag) + 1] = value
    with pytest.raises(PlanError, match="must divide num_query_groups=6 or be a multiple of it"):
        plan_from_argv(argv + ["--tensor-model-parallel-size", "4"], Cluster(gpu="h100-sxm", gpus_per_node=8))


def test_torchtitan_still_shards_whole_kv_heads():
    """torchtitan's colwise wk / wv split whole KV heads: TP 8 over 4 groups stays refused there."""
    assert _tp_problems(8, framework="torchtitan")


class _TENormSaves(torch.autograd.Function):
    """What TE's RMSNorm saves for backward: its input and fp32 rsigma per row (the weight is a parameter)."""

    @staticmethod
    def forward(ctx, x):
        rsigma = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
        ctx.save_for_backward(x, rsigma)
        return (x.float() * rsigma[..., None]).to(x.dtype)

    @staticmethod
    def backward(ctx, g):  # pragma: no cover - only the forward's saved tensors are counted
        return g


class _FusedAttnSaves(torch.autograd.Function):
    """What TE's fused attention saves of its inputs: q, k, v (O and the softmax statistics are counted with
    the core attention's output in ``layer_activation_bytes``)."""

    @staticmethod
    def forward(ctx, q, k, v):
        ctx.save_for_backward(q, k, v)
        return q.clone()

    @staticmethod
    def backward(ctx, g):  # pragma: no cover
        return g, None, None


class _Norm(torch.nn.Module):
    def forward(self, x):
        return _TENormSaves.apply(x)


def _kept_by_mcore(monkeypatch, *, nq: int, nkv: int, d: int, t: int, rank: int, qk_norm: bool,
                   sq: int = 8, b: int = 2) -> int:
    """Bytes of the distinct activation storages saved between megatron-core 0.16.1's QKV linear output and the
    core attention, for one TP rank of ``t``."""
    attention = pytest.importorskip("megatron.core.transformer.attention")
    h = 64
    local_width = (nq + 2 * nkv) * d // t
    sub = nkv < t
    # the tensor-parallel gather (sub-sharding only): a new full-width tensor, as the all-gather's output is
    monkeypatch.setattr(attention, "all_gather_last_dim_from_tensor_parallel_region",
                        lambda x, group=None: torch.cat([x] * t, dim=-1))
    monkeypatch.setattr(attention, "get_tensor_model_parallel_rank", lambda: rank)
    fake = types.SimpleNamespace(
        linear_qkv=QKVShard(h, local_width),
        config=types.SimpleNamespace(num_query_groups=nkv, test_mode=False),
        world_size=t,
        num_attention_heads_per_partition=nq // nkv if sub else nq // t,
        num_query_groups_per_partition=1 if sub else nkv // t,
        hidden_size_per_attention_head=d,
        q_layernorm=_Norm() if qk_norm else None,
        k_layernorm=_Norm() if qk_norm else None,
    )
    hidden = torch.randn(sq, b, h, dtype=torch.bfloat16, requires_grad=True)
    skip = {hidden.untyped_storage().data_ptr(), fake.linear_qkv.lin.weight.untyped_storage().data_ptr()}
    saved: dict[int, int] = {}

    def pack(x):
        ptr = x.untyped_storage().data_ptr()
        if ptr not in skip:
            saved[ptr] = x.untyped_storage().nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        q, k, v = attention.SelfAttention.get_query_key_value_tensors(fake, hidden)
        q, k = q * 2.0, k * 2.0  # RoPE: new q, k; neither fused nor unfused RoPE saves its input
        _FusedAttnSaves.apply(q.contiguous(), k.contiguous(), v.contiguous())  # get_qkv_layout's copies
    return sum(saved.values())


@pytest.mark.parametrize("nq,nkv,t,qk_norm", [
    (16, 4, 8, True), (16, 4, 8, False), (32, 4, 8, True), (16, 2, 8, True),  # sub-sharded (nkv < t)
    (16, 4, 2, True), (16, 4, 2, False), (16, 4, 4, True),  # one or more whole groups per rank
])
def test_kept_bytes_match_megatron_core(monkeypatch, nq, nkv, t, qk_norm):
    """``_te_qkv_kept`` equals the storages megatron-core's code keeps alive, on every TP rank: in the
    sub-sharded case the norms' saved inputs are views of the all-gathered full-width QKV output, which stays
    whole; otherwise the rank's QKV output (and the query's reshape copy when a rank holds several groups)."""
    d, sq, b = 16, 8, 2
    arch = ModelArch(num_layers=2, hidden_size=nq * d, ffn_hidden_size=4 * nq * d, num_attention_heads=nq,
                     num_query_groups=nkv, head_dim=d, vocab_size=1024, seq_length=sq, qk_layernorm=qk_norm)
    sb = sq * b
    model = _te_qkv_kept(arch, sb=sb, tp=t, a=2, qkv=2 * sb * (nq + 2 * nkv) * d / t)
    for rank in range(t):
        assert _kept_by_mcore(monkeypatch, nq=nq, nkv=nkv, d=d, t=t, rank=rank, qk_norm=qk_norm,
                              sq=sq, b=b) == model


def test_subsharding_keeps_the_gathered_qkv_under_qk_norm():
    """Qwen3-30B-A3B's attention (32 heads, 4 groups of 128, QK norm) at TP 8: the kept bytes exceed the
    TP-sharded q / k / v by the full-width QKV output (40 x 128 per token), which TP 4 does not keep."""
    arch = ModelArch(num_layers=48, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32,
                     num_query_groups=4, head_dim=128, vocab_size=151936, seq_length=4096, qk_layernorm=True)
    sb = 4096
    at8 = _te_qkv_kept(arch, sb=sb, tp=8, a=2, qkv=2 * sb * 40 * 128 / 8)
    assert at8 == 2 * sb * (32 / 8 + 2) * 128 + 2 * sb * 40 * 128 + 4 * sb * (32 / 8 + 1)
