"""Hybrid Mamba-2 / attention stacks (Nemotron-H, Nemotron 3): parameters, model FLOPs, readers, projection.

Truths, each independent of the code under test:

- parameters: megatron-core 0.16.1's own ``MambaMixer`` built on the meta device over a fake process group
  (``mcore_meta``), with local Column/RowParallelLinear for ``in_proj`` / ``out_proj`` (TE is not on this machine,
  so the input norm TE fuses into ``in_proj`` is counted apart) and a stand-in for mamba_ssm's ``RMSNormGated``
  (a CUDA/Triton package; without it megatron-core binds a MagicMock): one weight of the size the mixer asks for;
- model FLOPs: Megatron-Bridge's published 26.06 table (docs/performance-summary-archive.md, 'Model:
  Nemotron_3_Nano'): TFLOP/s/GPU x 1e12 / tokens/s/GPU, the FLOPs per token its flop_utils.hybrid_flops counted;
- the layer allocation without a pattern: megatron-core 0.16.1 ``ssm/mamba_hybrid_layer_allocation.py``;
- the Nemotron 3 Nano architecture: Megatron-Bridge @067f987 ``recipes/nemotronh/h100/nemotron_3_nano.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from primus_launch.adapters import load_recipe
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.adapters.megatron_args import allocate_hybrid
from primus_launch.plan import ModelArch, Plan, PlanError
from primus_launch.projection.cost.flops import model_flops_per_token
from primus_launch.projection.cost.mamba import mamba_layer_params
from primus_launch.projection.memory.params import stage_parameter_counts, total_parameters

NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
NANO = ModelArch(name="nemotron-3-nano", num_layers=52, hidden_size=2688, ffn_hidden_size=1856,
                 num_attention_heads=32, num_query_groups=2, head_dim=128, vocab_size=131072,
                 make_vocab_size_divisible_by=128, seq_length=8192, swiglu=False, activation="squared_relu",
                 position_embedding="none", num_experts=128, moe_router_topk=6, moe_ffn_hidden_size=1856,
                 moe_shared_expert_intermediate_size=3712, moe_router_bias=True, hybrid_pattern=NANO_PATTERN,
                 mamba_num_heads=64, mamba_head_dim=64, mamba_num_groups=8, mamba_state_dim=128)
NANO_ARGV = (
    "torchrun --nproc-per-node 8 pretrain_mamba.py --num-layers 52 --hidden-size 2688 --ffn-hidden-size 1856 "
    "--num-attention-heads 32 --group-query-attention --num-query-groups 2 --kv-channels 128 --seq-length 8192 "
    "--max-position-embeddings 8192 --vocab-size 131072 --normalization RMSNorm --squared-relu "
    "--position-embedding-type none --untie-embeddings-and-output-weights --disable-bias-linear "
    "--attention-dropout 0 --hidden-dropout 0 --hybrid-override-pattern " + NANO_PATTERN + " --mamba-num-heads 64 "
    "--mamba-head-dim 64 --mamba-num-groups 8 --mamba-state-dim 128 --num-experts 128 --moe-router-topk 6 "
    "--moe-ffn-hidden-size 1856 --moe-shared-expert-intermediate-size 3712 --moe-grouped-gemm "
    "--moe-token-dispatcher-type alltoall --expert-model-parallel-size 8 --micro-batch-size 1 "
    "--global-batch-size 256 --bf16 --use-distributed-optimizer").split()


def _plan(arch: ModelArch = NANO, **par) -> Plan:
    return Plan(model=arch, parallel={"ep": 8, **par}, training=dict(global_batch_size=512, micro_batch_size=2),
                cluster=dict(gpu="gb200", num_nodes=4, gpus_per_node=4))


# --------------------------------------------------------------------------- parameters vs megatron-core
@pytest.mark.parametrize("tp", [1, 2])
def test_mamba_mixer_parameters_equal_megatron_core(tp):
    pytest.importorskip("megatron.core")
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    import megatron.core.ssm.mamba_mixer as mm
    from mcore_meta import cpu_current_device, init_fake_parallel
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.transformer_config import TransformerConfig

    from primus_launch.frameworks import mcore_cpu

    class GatedNormStandIn(torch.nn.Module):   # mamba_ssm RMSNormGated: one weight of hidden_size, no bias
        def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True, device=None, dtype=None):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(hidden_size, device=device, dtype=dtype))

    init_fake_parallel(tp, 1)
    mcore_cpu.seed_rng_tracker(1234)
    h, heads, hd, groups, state = 256, 16, 32, 4, 64
    cfg = TransformerConfig(num_layers=2, hidden_size=h, num_attention_heads=4, mamba_num_heads=heads,
                            mamba_head_dim=hd, mamba_num_groups=groups, mamba_state_dim=state,
                            tensor_model_parallel_size=tp, params_dtype=torch.bfloat16, bf16=True,
                            use_cpu_initialization=True, perform_initialization=False)
    saved = mm.HAVE_MAMBA_SSM, mm.ExtendedRMSNorm
    mm.HAVE_MAMBA_SSM, mm.ExtendedRMSNorm = True, GatedNormStandIn
    try:
        with torch.device("meta"), cpu_current_device():
            mixer = mm.MambaMixer(cfg, mm.MambaMixerSubmodules(in_proj=ColumnParallelLinear,
                                                               out_proj=RowParallelLinear),
                                  d_model=h, pg_collection=ProcessGroupCollection.use_mpu_process_groups())
    finally:
        mm.HAVE_MAMBA_SSM, mm.ExtendedRMSNorm = saved
    real = sum(p.numel() for p in mixer.parameters())
    arch = ModelArch(num_layers=1, hidden_size=h, ffn_hidden_size=4 * h, num_attention_heads=4, vocab_size=128,
                     seq_length=128, hybrid_pattern="M", mamba_num_heads=heads, mamba_head_dim=hd,
                     mamba_num_groups=groups, mamba_state_dim=state)
    assert mamba_layer_params(arch, tp) == real + h   # + the RMSNorm TE fuses into in_proj (LayerNormLinear)


def test_nano_total_parameters_match_the_model_card():
    # NVIDIA-Nemotron-3-Nano-30B-A3B: 31.6B total parameters (HF model card); checkpoint in bf16
    assert total_parameters(NANO) == pytest.approx(31.6e9, rel=0.005)
    split = stage_parameter_counts(_plan(NANO, pp=2))
    assert len(split) == 2 and sum(split) < total_parameters(NANO)   # experts sharded over EP 8


# --------------------------------------------------------------------------- FLOPs vs the published table
@pytest.mark.parametrize("system,tokens,tflops", [
    ("GB300", 39749, 885), ("GB200", 33522, 747), ("B300", 37316, 831), ("H100", 14719, 328)])
def test_hybrid_flops_reproduce_bridge_table(system, tokens, tflops):
    # Megatron-Bridge 26.06 table (performance-summary-archive.md), Nemotron_3_Nano pre-training rows
    assert model_flops_per_token(_plan()) == pytest.approx(tflops * 1e12 / tokens, rel=0.004)


# --------------------------------------------------------------------------- readers
def test_megatron_argv_reads_the_hybrid_stack():
    plan = plan_from_argv(NANO_ARGV)
    m = plan.model
    assert m.hybrid_pattern == NANO_PATTERN and m.num_moe_layers == 23 and m.hybrid_pattern.count("*") == 6
    assert (m.mamba_num_heads, m.mamba_head_dim, m.mamba_num_groups, m.mamba_state_dim) == (64, 64, 8, 128)
    assert m.activation == "squared_relu" and not m.swiglu
    assert m.position_embedding == "none"   # Megatron-LM's choice 'none', not an unset flag
    assert total_parameters(m) == total_parameters(NANO.model_copy(update={"name": m.name, "moe_router_bias": False,
                                                                           "max_position_embeddings": 8192}))


@pytest.mark.parametrize("L,attn,mlp", [(24, 0.0, 0.0), (52, 0.08, 0.5), (48, 0.1, 0.3), (7, 0.3, 0.2)])
def test_auto_allocation_equals_megatron_core(L, attn, mlp):
    from megatron.core.ssm import mamba_hybrid_layer_allocation as alloc

    assert allocate_hybrid(L, attn, mlp) == "".join(alloc._allocate_auto(L, attn, mlp))


def test_pretrain_mamba_without_pattern_allocates_like_megatron_core():
    argv = ("torchrun --nproc-per-node 8 pretrain_mamba.py --num-layers 52 --hidden-size 2048 --num-attention-heads 32 "
            "--seq-length 4096 --max-position-embeddings 4096 --vocab-size 131072 --normalization RMSNorm "
            "--position-embedding-type none --micro-batch-size 1 --global-batch-size 64 --bf16").split()
    assert plan_from_argv(argv).model.hybrid_pattern == "M" * 52   # pretrain_mamba.py, ratios 0 / 0
    m = plan_from_argv(argv + ["--hybrid-attention-ratio", "0.1", "--hybrid-mlp-ratio", "0.4"]).model
    assert m.hybrid_pattern == allocate_hybrid(52, 0.1, 0.4) and m.position_embedding == "none"
    with pytest.raises(PlanError, match="--mamba-num-groups"):   # 2 x 2048 / 64 = 64 heads: 48 groups do not divide
        plan_from_argv(argv + ["--mamba-num-groups", "48"])


def test_pipeline_separators_are_refused_in_one_line():
    argv = [a if a != NANO_PATTERN else NANO_PATTERN[:26] + "|" + NANO_PATTERN[26:] for a in NANO_ARGV]
    with pytest.raises(PlanError) as e:
        plan_from_argv(argv)
    assert "--hybrid-override-pattern" in str(e.value) and "\n" not in str(e.value)


def test_bridge_yaml_hybrid_provider(tmp_path):
    """A Bridge run_config.yaml of Nemotron 3 Nano: the Qwen3 fixture's sections with the model section of
    Bridge's HybridModelProvider and the nemotron_3_nano recipe's architecture values."""
    doc = yaml.safe_load((Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml").read_text())
    m = doc["model"]
    m.update({"_target_": "megatron.bridge.models.hybrid.hybrid_provider.HybridModelProvider",
              "hybrid_layer_pattern": NANO_PATTERN, "num_layers": 52, "hidden_size": 2688, "ffn_hidden_size": 1856,
              "mamba_num_heads": 64, "mamba_head_dim": 64, "mamba_num_groups": 8, "mamba_state_dim": 128,
              "kv_channels": 128, "num_attention_heads": 32, "num_query_groups": 2, "seq_length": 8192,
              "num_moe_experts": 128, "moe_ffn_hidden_size": 1856, "moe_shared_expert_intermediate_size": 3712,
              "moe_router_topk": 6, "gated_linear_unit": False, "qk_layernorm": False,
              "activation_func": {"_call_": False, "_target_": "megatron.core.activations.squared_relu"},
              "position_embedding_type": "none", "tensor_model_parallel_size": 1,
              "pipeline_model_parallel_size": 1, "virtual_pipeline_model_parallel_size": None,
              "sequence_parallel": False, "vocab_size": 131072, "recompute_modules": None})
    m.pop("transformer_layer_spec", None)
    p = tmp_path / "run_config.yaml"
    p.write_text(yaml.safe_dump(doc))
    plan = load_recipe(p, {"gpu": "gb200", "num_nodes": 4, "gpus_per_node": 4})
    assert plan.model.hybrid_pattern == NANO_PATTERN and plan.model.mamba_num_heads == 64
    assert plan.source.format == "bridge-yaml"


# --------------------------------------------------------------------------- plan rules and projection
def test_pattern_rules():
    with pytest.raises(ValueError, match="model.hybrid_pattern"):
        _plan(NANO.model_copy(update={"hybrid_pattern": NANO_PATTERN[:-1]}))
    with pytest.raises(ValueError, match="parallel.tp"):   # 64 heads but 8 groups: tp 16 splits no group
        Plan(model=NANO, parallel=dict(tp=16, ep=1), training=dict(global_batch_size=64),
             cluster=dict(gpu="gb200", num_nodes=4, gpus_per_node=4))


def test_projection_prices_every_symbol_and_refuses_what_it_does_not_model():
    from primus_launch.projection.api import project
    from primus_launch.projection.cost.roofline import layer_op_times, layer_times_roofline
    from primus_launch.projection.dryrun import project_dry_run

    plan = _plan()
    lt = layer_times_roofline(plan)
    assert set(lt.hybrid) == {"M", "*", "E"} and all(v.fwd_s > 0 for v in lt.hybrid.values())
    names = [op[0] for op in layer_op_times(plan)["hybrid_mamba"]]
    assert any("SSD chunk scan" in n for n in names) and any("causal_conv1d" in n for n in names)
    res = project_dry_run(plan)
    assert res.tokens_per_sec_per_gpu > 0 and res.memory.peak_bytes_per_gpu > 0
    from primus_launch.projection.explain import explain_text

    text = explain_text(plan)
    assert "SSD chunk scan" in text and "kernels per hybrid layer" in text
    with pytest.raises(PlanError, match="parallel.dp_sharding"):
        project_dry_run(plan.with_changes(parallel={"dp_sharding": "full"}))
    # context parallelism is priced (tests/test_hybrid_cp.py)
    assert project_dry_run(plan.with_changes(parallel={"cp": 2})).tokens_per_sec_per_gpu > 0
    # the measured path cannot build Mamba layers without mamba_ssm: the dry run is substituted, said in a note
    meas = project(plan, dry_run=False)
    assert any("not measured" in n for n in meas.notes)


def test_primus_model_type_mamba_reads_as_hybrid(tmp_path):
    """Primus ``model_type: mamba`` (megatron_pretrain_trainer.py: pretrain_mamba.py's provider): the 370M preset of
    AMD-AGI/Primus ``primus/configs/models/megatron/mamba_370M.yaml`` (48 layers, hidden 1024, state 16, no pattern:
    every layer Mamba) and a hybrid preset with its override pattern (``zebra_llama_300M_mamba_hybrid.yaml``'s)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_adapter_primus import _meg, _tree

    from primus_launch.adapters.primus_yaml import load_primus_yaml
    from primus_launch.plan import Cluster

    root = _tree(tmp_path)
    models = root / "primus/configs/models/megatron"
    (models / "mamba_370M.yaml").write_text(
        "extends:\n  - language_model.yaml\nmodel_type: mamba\nis_hybrid_model: false\nswiglu: false\n"
        "position_embedding_type: rope\nuse_rotary_position_embeddings: false\nnum_layers: 48\nhidden_size: 1024\n"
        "num_attention_heads: 16\nffn_hidden_size: null\nmamba_state_dim: 16\nmamba_head_dim: 64\n"
        "mamba_num_groups: 8\nvocab_size: 50257\n")
    (models / "hybrid_24.yaml").write_text(
        "extends:\n  - mamba_370M.yaml\nnum_layers: 24\nffn_hidden_size: 4096\nis_hybrid_model: true\n"
        "hybrid_override_pattern: \"*-M-M-M-*-M-M-M-*-M-M-M-\"\nmamba_state_dim: 64\n")
    exp = _meg(root)
    for preset, pattern, state in (("mamba_370M", "M" * 48, 16), ("hybrid_24", "*-M-M-M-*-M-M-M-*-M-M-M-", 64)):
        plan = load_primus_yaml(exp, Cluster(gpu="mi300x", num_nodes=1, gpus_per_node=8),
                                env={"PRIMUS_MODEL": preset, "PRIMUS_TP": "1"})
        assert plan.model.hybrid_pattern == pattern and plan.model.mamba_state_dim == state


def test_te_scoped_graphs_of_a_hybrid_stack_follow_layer_is_graphable():
    """megatron-core 0.16.1 cuda_graphs.py ``_layer_is_graphable``: a MambaLayer is graphed with ``mamba`` in the
    scope, an attention layer with ``attn``, an MoE layer with a moe scope; a Mamba layer is not graphed by ``attn``."""
    from primus_launch.projection.memory.te_graphs import hybrid_graph_bytes

    kw = dict(kept=100.0, shared_in_graph=False, tokens=10, hidden=4, mbs=1, seq=8)
    assert hybrid_graph_bytes(("attn",), "M", **kw) == (0.0, 0.0)
    assert hybrid_graph_bytes(("mamba",), "M", **kw) == (100.0, 80.0)
    assert hybrid_graph_bytes(("attn", "mamba"), "*", **kw) == (100.0, 80.0 + 64.0)   # + the [1, 1, 8, 8] mask
    assert hybrid_graph_bytes(("moe_router", "moe_preprocess"), "E", **kw) == (0.0, 0.0)
    assert hybrid_graph_bytes((), "-", **kw) == (100.0, 80.0)


@pytest.mark.parametrize("layers, ratio, pattern", [
    # Primus zebra_llama_300M_gdn_hybrid.yaml: "allocate_layers(num_layers=24, 0.25): blocks [ATTN, MAMBA, MAMBA,
    # MAMBA] x 3", each followed by its MLP
    (24, 0.25, "*-M-M-M-" * 3),
    (32, 0.25, "*-M-M-M-" * 4),   # hylo_mamba_1B_hybrid.yaml (Llama 3.2 1B: 16 blocks + 16 MLPs)
    (20, 0.25, "*-M-M-M-M-" * 2),  # A = int(10 x 0.25) = 2, M = 8: 4 Mamba per block, none left over
    (16, 0.75, "*-" * 4 + "*-M-" * 2),  # above 0.5: A = 6, M = 2
    (8, 0.0, "M-" * 4),
])
def test_primus_hybrid_stack_allocation(layers, ratio, pattern):
    """Primus ``hybrid_block.py`` ``HybridStack.allocate_layers`` (fd1eeabb), restated: mixer / MLP pairs."""
    from primus_launch.adapters.primus_yaml import primus_hybrid_stack_pattern

    assert primus_hybrid_stack_pattern(layers, ratio) == pattern


def test_primus_hybrid_stack_spec_reads_primus_allocation(tmp_path):
    """AMD-AGI/Primus ``examples/megatron/configs/MI300X/hylo_llama_mamba_1B_BF16-pretrain.yaml`` (84035edc): model
    ``hylo_mamba_1B_hybrid.yaml`` (32 layers, hidden 2048, FFN 8192, ``hybrid_attention_ratio: 0.25``, no pattern) and
    ``spec: [primus.backends.megatron.core.models.hybrid.hybrid_mamba_mla_layer_specs, hybrid_stack_spec]``.
    Megatron-LM d3528a2's ``mamba_builders.py`` hands MambaModel only ``hybrid_layer_pattern`` (None), so Primus's
    HybridStack allocates from the ratio itself: 4 attention + 12 Mamba mixers, each followed by an MLP -- not
    megatron-core's 8 attention + 24 Mamba layers.  The Gated DeltaNet / KDA stacks of the same module are refused
    in one line.
    """
    sys.path.insert(0, str(Path(__file__).parent))
    from test_adapter_primus import _meg, _tree

    from primus_launch.adapters.primus_yaml import load_primus_yaml
    from primus_launch.plan import Cluster

    root = _tree(tmp_path)
    (root / "primus/configs/models/megatron/hylo_1B.yaml").write_text(
        "extends:\n  - language_model.yaml\nmodel_type: mamba\nis_hybrid_model: true\nswiglu: true\n"
        "position_embedding_type: none\nnum_layers: 32\nhidden_size: 2048\nffn_hidden_size: 8192\n"
        "num_attention_heads: 32\nhybrid_attention_ratio: 0.25\nmamba_state_dim: 64\nmamba_head_dim: 64\n"
        "mamba_num_groups: 8\nvocab_size: 128256\n")
    exp = _meg(root)
    text = exp.read_text()
    mod = "primus.backends.megatron.core.models.hybrid.hybrid_mamba_mla_layer_specs"

    def plan(stack: str, module: str = mod):
        exp.write_text(text.replace("    overrides:\n", f"    overrides:\n      spec: ['{module}', '{stack}']\n"))
        return load_primus_yaml(exp, Cluster(gpu="mi300x", num_nodes=1, gpus_per_node=8),
                                env={"PRIMUS_MODEL": "hylo_1B", "PRIMUS_TP": "1"})

    assert plan("hybrid_stack_spec").model.hybrid_pattern == "*-M-M-M-" * 4
    # Primus's pure-Mamba stack (mamba_block.py MambaStack: no list -> [MAMBA] * num_layers) ignores the ratio
    pure = "primus.backends.megatron.core.models.mamba.mamba_layer_specs"
    assert plan("mamba_stack_spec", pure).model.hybrid_pattern == "M" * 32
    for stack in ("gdn_hybrid_stack_spec", "kda_hybrid_stack_spec"):
        with pytest.raises(PlanError) as e:
            plan(stack)
        assert e.value.field == "spec" and "not modelled" in str(e.value)


@pytest.mark.parametrize("ratio", ["'0.25'", "1.5", "-0.1", "true"])
def test_primus_hybrid_stack_ratio_out_of_range_is_one_line(tmp_path, ratio):
    """review12: a non-numeric ``hybrid_attention_ratio`` ended in a traceback (``float('x')``); the ratio is the
    attention share of the stack's mixers (``HybridStack.allocate_layers``), so 0..1 (Megatron-LM's own
    ``--hybrid-attention-ratio`` check: ``0.0 <= ratio <= 1.0``)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_adapter_primus import _meg, _tree

    from primus_launch.adapters.primus_yaml import load_primus_yaml
    from primus_launch.plan import Cluster

    root = _tree(tmp_path)
    (root / "primus/configs/models/megatron/hylo_1B.yaml").write_text(
        "extends:\n  - language_model.yaml\nmodel_type: mamba\nis_hybrid_model: true\nswiglu: true\n"
        "position_embedding_type: none\nnum_layers: 32\nhidden_size: 2048\nffn_hidden_size: 8192\n"
        f"num_attention_heads: 32\nhybrid_attention_ratio: {ratio}\nmamba_state_dim: 64\nmamba_head_dim: 64\n"
        "mamba_num_groups: 8\nvocab_size: 128256\n")
    exp = _meg(root)
    mod = "primus.backends.megatron.core.models.hybrid.hybrid_mamba_mla_layer_specs"
    exp.write_text(exp.read_text().replace("    overrides:\n", f"    overrides:\n      spec: ['{mod}', 'hybrid_stack_spec']\n"))
    with pytest.raises(PlanError) as e:
        load_primus_yaml(exp, Cluster(gpu="mi300x", num_nodes=1, gpus_per_node=8),
                         env={"PRIMUS_MODEL": "hylo_1B", "PRIMUS_TP": "1"})
    assert e.value.field == "hybrid_attention_ratio" and ("from 0 to 1" in str(e.value) or ": a number" in str(e.value))
