"""Helpers for the tuner tests: a small plan whose search space can be enumerated by brute force."""

from __future__ import annotations

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training


def small_dense_plan(framework: str = "megatron") -> Plan:
    """A 16-layer ~1.5B model on 2 x 8 GPUs: a space of a few hundred candidates."""
    m = ModelArch(name="toy-1.5b", num_layers=16, hidden_size=2048, ffn_hidden_size=8192, num_attention_heads=16,
                  num_query_groups=8, vocab_size=32000, seq_length=4096)
    return Plan(model=m, parallel=Parallelism(tp=2, pp=2, sequence_parallel=True,
                                              dp_sharding="optimizer" if framework == "megatron" else "full"),
                training=Training(global_batch_size=64, micro_batch_size=1),
                cluster=Cluster(gpu="h100-sxm", num_nodes=2, gpus_per_node=8), source=Source(framework=framework))


def small_moe_plan(gpu: str = "h100-sxm") -> Plan:
    """An 8-layer MoE (one dense layer first, shared experts, grouped GEMM) on 2 x 8 GPUs with
    selective recompute: every knob family of the space applies to it."""
    from primus_launch.plan import Recompute

    m = ModelArch(name="toy-moe", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                  num_query_groups=4, vocab_size=32000, seq_length=4096, num_experts=8, moe_router_topk=2,
                  moe_ffn_hidden_size=1024, moe_shared_expert_intermediate_size=1024,
                  moe_layer_pattern=(0, 1, 1, 1, 1, 1, 1, 1))
    return Plan(model=m, parallel=Parallelism(tp=2, pp=2, ep=2, sequence_parallel=True, dp_sharding="optimizer"),
                training=Training(global_batch_size=32, micro_batch_size=1,
                                  recompute=Recompute(granularity="selective", modules=("core_attn",))),
                cluster=Cluster(gpu=gpu, num_nodes=2, gpus_per_node=8), source=Source(framework="megatron"))
