"""TorchTitan adapter tests: architecture from torchtitan's registry vs meta-device builds."""

from __future__ import annotations

import pytest
import torch

from primus_launch.adapters.torchtitan import arch_from_flavor
from primus_launch.adapters.torchtitan_arch import model_spec
from primus_launch.plan import PlanError

FLAVORS = [
    ("llama3", "debugmodel"), ("llama3", "8B"), ("llama3", "70B"), ("llama3", "405B"), ("llama3", "1B"),
    ("qwen3", "0.6B"), ("qwen3", "32B"), ("qwen3", "debugmodel_moe"), ("qwen3", "30B-A3B"),
    ("qwen3", "235B-A22B"),
    ("deepseek_v3", "debugmodel"), ("deepseek_v3", "16B"), ("deepseek_v3", "671B"),
]


def _simple_count(a) -> int:
    """Closed-form parameter count of a torchtitan decoder (SwiGLU, RMSNorm weights, no biases)."""
    h = a.hidden_size
    if a.multi_latent_attention:
        H, qk = a.num_attention_heads, a.qk_head_dim + a.qk_pos_emb_head_dim
        q = h * H * qk if a.q_lora_rank is None else h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * H * qk
        attn = (q + h * (a.kv_lora_rank + a.qk_pos_emb_head_dim) + a.kv_lora_rank
                + a.kv_lora_rank * H * (a.qk_head_dim + a.v_head_dim) + H * a.v_head_dim * h)
    else:
        d = a.kv_channels
        attn = h * (a.num_attention_heads + 2 * a.kv_heads) * d + a.num_attention_heads * d * h
        attn += 2 * d if a.qk_layernorm else 0
    dense = 3 * h * a.ffn_hidden_size
    moe = (a.num_experts * 3 * h * a.expert_ffn + h * a.num_experts
           + 3 * h * a.moe_shared_expert_intermediate_size) if a.is_moe else 0
    n_dense = a.moe_dense_first_layers if a.is_moe else a.num_layers
    emb = a.vocab_size * h * (2 if a.untie_embeddings_and_output_weights else 1)
    return n_dense * (attn + dense + 2 * h) + (a.num_layers - n_dense) * (attn + moe + 2 * h) + h + emb


@pytest.mark.parametrize("name,flavor", FLAVORS)
def test_arch_matches_registry_and_meta_build(name, flavor):
    spec = model_spec(name, flavor)
    cfg = spec.model
    a = arch_from_flavor(name, flavor, seq_len=4096)
    assert a.vocab_size == cfg.vocab_size
    assert a.hidden_size == cfg.dim
    assert a.num_layers == len(cfg.layers)
    assert a.seq_length == 4096
    assert a.untie_embeddings_and_output_weights == (not cfg.enable_weight_tying)
    with torch.device("meta"):
        model = cfg.build()
    assert sum(p.numel() for p in model.parameters()) == _simple_count(a)


def test_known_values():
    a = arch_from_flavor("llama3", "8B")
    assert (a.num_attention_heads, a.kv_heads, a.ffn_hidden_size, a.kv_channels) == (32, 8, 14336, 128)
    q = arch_from_flavor("qwen3", "235B-A22B")
    assert (q.num_experts, q.moe_router_topk, q.moe_ffn_hidden_size, q.qk_layernorm, q.kv_heads) == (
        128, 8, 1536, True, 4)
    d = arch_from_flavor("deepseek_v3", "671B")
    assert d.multi_latent_attention and (d.q_lora_rank, d.kv_lora_rank, d.moe_dense_first_layers) == (1536, 512, 3)
    assert (d.num_experts, d.moe_router_topk, d.moe_shared_expert_intermediate_size, d.ffn_hidden_size) == (
        256, 8, 2048, 18432)
    assert arch_from_flavor("deepseek_v3", "16B").q_lora_rank is None


def test_unknown_flavor_and_model():
    with pytest.raises(PlanError, match=r"model\.flavor='9B'"):
        arch_from_flavor("llama3", "9B")
    with pytest.raises(PlanError, match=r"model\.name='gpt5'"):
        arch_from_flavor("gpt5", "8B")
