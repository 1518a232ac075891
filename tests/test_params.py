"""Parameter counts per GPU of each PP stage vs the real modules the frameworks build (meta device).

Truth: megatron-core 0.16.1 ``GPTModel`` (local spec, MoE via ``moe_layer_freq``, MLA) built on a
fake process group of the plan's TP/PP/EP/expert-TP as the GPU of each PP stage
(:mod:`mcore_meta`), and torchtitan 0.3.0 registry models built on the meta device.
"""

from __future__ import annotations

import functools

import pytest
import torch

from mcore_meta import build_stage, count
from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.memory.params import (
    active_parameters,
    stage_parameter_counts,
    stage_parameter_split,
    total_parameters,
)

# Architectures as published (HF config.json of each model); Megatron pads the vocabulary to a
# multiple of 128 x TP.
LLAMA31_8B = ModelArch(name="llama3.1-8b", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
                       num_attention_heads=32, num_query_groups=8, vocab_size=128256,
                       make_vocab_size_divisible_by=128, seq_length=8192)
LLAMA31_70B = LLAMA31_8B.model_copy(update=dict(name="llama3.1-70b", num_layers=80, hidden_size=8192,
                                                ffn_hidden_size=28672, num_attention_heads=64))
LLAMA31_405B = LLAMA31_8B.model_copy(update=dict(name="llama3.1-405b", num_layers=126, hidden_size=16384,
                                                 ffn_hidden_size=53248, num_attention_heads=128))
MIXTRAL_8X22B = ModelArch(name="mixtral-8x22b", num_layers=56, hidden_size=6144, ffn_hidden_size=16384,
                          num_attention_heads=48, num_query_groups=8, vocab_size=32768,
                          make_vocab_size_divisible_by=128, seq_length=4096, num_experts=8, moe_router_topk=2)
DEEPSEEK_V3 = ModelArch(name="deepseek-v3", num_layers=61, hidden_size=7168, ffn_hidden_size=18432,
                        num_attention_heads=128, vocab_size=129280, make_vocab_size_divisible_by=128,
                        seq_length=4096, num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
                        moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3,
                        multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128,
                        qk_pos_emb_head_dim=64, v_head_dim=128, qk_layernorm=True)
GPT_LN = ModelArch(name="gpt-ln-bias", num_layers=8, hidden_size=1024, ffn_hidden_size=4096,
                   num_attention_heads=16, vocab_size=50257, make_vocab_size_divisible_by=128, seq_length=2048,
                   swiglu=False, normalization="layernorm", add_bias_linear=True,
                   untie_embeddings_and_output_weights=False, position_embedding="learned",
                   max_position_embeddings=2048)


def _plan(arch: ModelArch, nodes: int = 1, schedule: str = "1f1b", **par) -> Plan:
    return Plan(model=arch, parallel=par, training=dict(global_batch_size=4096, pipeline_schedule=schedule),
                cluster=dict(num_nodes=nodes))


CASES = [
    ("8b tp1", _plan(LLAMA31_8B)),
    ("8b tp2 pp4", _plan(LLAMA31_8B, tp=2, pp=4)),
    ("8b tp4 pp2 vpp4", _plan(LLAMA31_8B, nodes=1, schedule="interleaved_1f1b", tp=4, pp=2, vpp=4)),
    ("8b tied tp2 pp2", _plan(LLAMA31_8B.model_copy(update=dict(untie_embeddings_and_output_weights=False)),
                              tp=2, pp=2)),
    ("8b tied tp8", _plan(LLAMA31_8B.model_copy(update=dict(untie_embeddings_and_output_weights=False)), tp=8)),
    ("70b tp8 pp4", _plan(LLAMA31_70B, nodes=4, tp=8, pp=4)),
    ("70b tp4 pp4 uneven 18/18", _plan(LLAMA31_70B, nodes=2, tp=4, pp=4, pipeline_layers_first_stage=18,
                                       pipeline_layers_last_stage=18)),
    ("70b tp8 pp4 vpp5", _plan(LLAMA31_70B, nodes=4, schedule="interleaved_1f1b", tp=8, pp=4, vpp=5)),
    ("405b tp8 pp8 uneven 15/15", _plan(LLAMA31_405B, nodes=8, tp=8, pp=8, pipeline_layers_first_stage=15,
                                        pipeline_layers_last_stage=15)),
    ("mixtral tp2 pp4 ep8", _plan(MIXTRAL_8X22B, nodes=8, tp=2, pp=4, ep=8)),
    ("mixtral tp4 ep2 etp1 pp2", _plan(MIXTRAL_8X22B, nodes=2, tp=4, pp=2, ep=2, etp=1)),
    ("dsv3 tp2 ep64", _plan(DEEPSEEK_V3, nodes=16, tp=2, ep=64)),
    ("dsv3 tp4 pp4 ep32 etp1 first16", _plan(DEEPSEEK_V3, nodes=16, tp=4, pp=4, ep=32, etp=1,
                                             pipeline_layers_first_stage=16)),
    ("gpt layernorm+bias tied learned tp2 pp2", _plan(GPT_LN, tp=2, pp=2)),
]


@pytest.mark.parametrize("name,plan", CASES, ids=[c[0] for c in CASES])
def test_stage_counts_equal_megatron_core(name, plan):
    mine = stage_parameter_split(plan, spec="local")
    assert [s.total for s in mine] == stage_parameter_counts(plan, spec="local")
    for rank in range(plan.parallel.pp):
        chunks = build_stage(plan, rank)
        assert mine[rank].total == count(chunks), (name, rank)
        # expert params: megatron marks them allreduce=False (reduced over expert-DP instead)
        assert mine[rank].expert == count(chunks, expert_only=True), (name, rank)


def test_te_spec_differs_from_local_only_in_mla_down_projections():
    """TE's ``TELinear`` "duplicated" down projections are whole on every TP rank."""
    for plan in (CASES[5][1], CASES[9][1]):
        assert stage_parameter_counts(plan) == stage_parameter_counts(plan, spec="local")
    plan = CASES[11][1]  # dsv3 tp2
    h, ql, kvl, dr = 7168, 1536, 512, 64
    extra = 61 * (h * ql + h * (kvl + dr)) // 2
    assert stage_parameter_counts(plan)[0] - stage_parameter_counts(plan, spec="local")[0] == extra


def test_totals_equal_megatron_tp1_pp1():
    # tp = pp = ep = 1: the one GPU holds the whole model; equals total_parameters with padded vocab
    for arch in (LLAMA31_8B, MIXTRAL_8X22B):
        plan = _plan(arch)
        assert stage_parameter_counts(plan) == [total_parameters(arch)]
        assert count(build_stage(plan, 0)) == total_parameters(arch)


TITAN = [("llama3", "8B"), ("llama3", "70B"), ("llama3", "405B"), ("qwen3", "235B-A22B"),
         ("deepseek_v3", "671B"), ("qwen3", "debugmodel_moe")]


@functools.lru_cache(maxsize=8)
def _titan_meta(name: str, flavor: str):
    from primus_launch.adapters.torchtitan_arch import model_spec

    with torch.device("meta"):
        return model_spec(name, flavor).model.build()


@pytest.mark.parametrize("name,flavor", TITAN)
def test_totals_equal_torchtitan(name, flavor):
    from primus_launch.adapters.torchtitan import arch_from_flavor

    model = _titan_meta(name, flavor)
    real = sum(p.numel() for p in model.parameters())
    arch = arch_from_flavor(name, flavor)
    assert total_parameters(arch) == real
    # per-layer equality (not only the sum): each decoder block of the real model
    from primus_launch.projection.memory.params import layer_parameter_counts

    blocks = list(model.layers.values()) if hasattr(model.layers, "values") else list(model.layers)
    for i, blk in enumerate(blocks[:5]):
        moe = arch.is_moe and i >= arch.moe_dense_first_layers
        assert sum(p.numel() for p in blk.parameters()) == layer_parameter_counts(arch, 1, 1, 1, moe).total


def test_published_totals():
    """Published sizes: Llama 3.1 405B = 405.85B (torchtitan, HF); DeepSeek-V3 671B main model
    (technical report, arXiv 2412.19437: 671B total, 37B activated; the 14B MTP module excluded)."""
    assert total_parameters(LLAMA31_405B.model_copy(update=dict(make_vocab_size_divisible_by=1))) == 405_853_388_800
    ds = DEEPSEEK_V3.model_copy(update=dict(make_vocab_size_divisible_by=1))
    assert round(total_parameters(ds) / 1e9) == 671
    # 37B activated: the routed top-8 + shared experts, attention, dense layers and the output head;
    # the input embedding is a lookup (37.55B with it, 36.63B without: both round to the report's 37B
    # only without it, so the report counts compute-carrying weights)
    assert round((active_parameters(ds) - ds.vocab_size * ds.hidden_size) / 1e9) == 37


@pytest.mark.parametrize("name,flavor,pp", [("llama3", "405B", 8), ("qwen3", "235B-A22B", 8),
                                            ("deepseek_v3", "671B", 8), ("llama3", "70B", 2)])
def test_stage_counts_equal_torchtitan_pipeline_split(name, flavor, pp):
    """torchtitan's own PP split (``_generate_llm_fqn_per_model_part``: embeddings and norm+head
    weigh one layer each) of the real meta-built model: per-stage sums of the modules each stage
    holds equal stage_parameter_counts for the same layout (TP = EP = 1)."""
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part

    from primus_launch.adapters.torchtitan import arch_from_flavor

    model = _titan_meta(name, flavor)
    arch = arch_from_flavor(name, flavor)
    mods = dict(model.named_modules())
    parts = _generate_llm_fqn_per_model_part(pp, arch.num_layers)
    real = [sum(p.numel() for fqn in part if fqn in mods for p in mods[fqn].parameters()) for part in parts]
    assert sum(real) == sum(p.numel() for p in model.parameters())  # every module found
    layers = [sum(fqn.startswith("layers.") for fqn in part) for part in parts]
    assert len(set(layers[1:-1])) <= 1  # expressible as first / even middle / last
    plan = Plan(model=arch, parallel=dict(pp=pp, pipeline_layers_first_stage=layers[0],
                                          pipeline_layers_last_stage=layers[-1]),
                training=dict(global_batch_size=pp), cluster=dict(gpus_per_node=pp))
    assert plan.layers_per_stage() == layers
    assert stage_parameter_counts(plan) == real
