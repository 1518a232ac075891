"""Latent MoE (``--moe-latent-size``), MTP and selective recompute on hybrid stacks (Nemotron 3 Super):
parameters, model FLOPs, readers, projection.

Truths, each independent of the code under test:

- the routed experts' parameters: megatron-core 0.16.1's own ``MLP(is_expert=True)`` with ``moe_latent_size`` set,
  built on the meta device over a fake process group (local Column/RowParallelLinear; TE is not on this machine);
- the two latent projections: megatron-core 0.16.1 ``moe/moe_layer.py`` builds them as ``TELinear(h, l,
  parallel_mode="duplicated")`` and ``TELinear(l, h, ...)`` -- TE cannot be built here, so the count is checked
  against that code's shapes in a worked example (Nemotron 3 Super: h 4096, l 1024, no bias);
- the Nemotron 3 Super architecture: Megatron-LM (mirror @d98e8a64) ``tests/functional_tests/test_cases/nemotron/
  nemotron3_super_release_gb200/model_config.yaml``; its totals: Megatron-Bridge ``docs/models/nemotron/
  nemotron3-super.md`` ("12B active parameters and 120B parameters in total");
- model FLOPs: Megatron-Bridge's published 26.06 / 26.08 tables (``performance-summary{,-archive}.md``, 'Model:
  Nemotron_3_Super'), TFLOP/s/GPU x 1e12 / tokens/s/GPU: the FLOPs per token its ``flop_utils.hybrid_flops``
  counted (latent MoE and the MTP pattern's layers included).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from primus_launch.adapters import load_recipe
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import ModelArch, Plan, PlanError
from primus_launch.projection.cost.flops import model_flops_per_token
from primus_launch.projection.memory.params import (_mlp_params, active_parameters, latent_proj_params,
                                                    total_parameters)

SUPER_PATTERN = "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME"
SUPER = ModelArch(name="nemotron-3-super", num_layers=88, hidden_size=4096, ffn_hidden_size=2688,
                  num_attention_heads=32, num_query_groups=2, head_dim=128, vocab_size=131072,
                  make_vocab_size_divisible_by=128, seq_length=8192, swiglu=False, activation="squared_relu",
                  position_embedding="none", num_experts=512, moe_router_topk=22,
                  moe_shared_expert_intermediate_size=5376, moe_router_bias=True, moe_latent_size=1024,
                  hybrid_pattern=SUPER_PATTERN, mamba_num_heads=128, mamba_head_dim=64, mamba_num_groups=8,
                  mamba_state_dim=128, hybrid_mtp_pattern="*E", mtp_num_layers=2)
# quoted from the Megatron-LM release test's model_config.yaml (flags as its YAML keys spell them)
SUPER_ARGV = (
    "torchrun --nproc-per-node 4 --nnodes 16 pretrain_hybrid.py --num-layers 88 --hidden-size 4096 "
    "--ffn-hidden-size 2688 --num-attention-heads 32 --group-query-attention --num-query-groups 2 --kv-channels 128 "
    f"--hybrid-layer-pattern {SUPER_PATTERN}/*E/*E --is-hybrid-model --mamba-num-heads 128 "
    "--position-embedding-type none --normalization RMSNorm --untie-embeddings-and-output-weights "
    "--disable-bias-linear --squared-relu --use-fused-weighted-squared-relu --seq-length 8192 "
    "--max-position-embeddings 8192 --vocab-size 131072 --attention-dropout 0.0 --hidden-dropout 0.0 "
    "--num-experts 512 --moe-router-topk 22 --moe-router-enable-expert-bias --moe-latent-size 1024 "
    "--moe-shared-expert-intermediate-size 5376 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend "
    "hybridep --moe-grouped-gemm --moe-permute-fusion --mtp-num-layers 2 --tensor-model-parallel-size 1 "
    "--expert-model-parallel-size 64 --micro-batch-size 1 --global-batch-size 512 --bf16 "
    "--use-distributed-optimizer").split()
CLUSTER = {"gpu": "gb300", "num_nodes": 16, "gpus_per_node": 4}


def _plan(arch: ModelArch = SUPER, **par) -> Plan:
    return Plan(model=arch, parallel={"ep": 64, **par}, training=dict(global_batch_size=512, micro_batch_size=1),
                cluster=CLUSTER)


# --------------------------------------------------------------------------- parameters
def test_latent_expert_parameters_equal_megatron_core():
    pytest.importorskip("megatron.core")
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from mcore_meta import cpu_current_device, init_fake_parallel
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    from primus_launch.frameworks import mcore_cpu

    init_fake_parallel(1, 1)
    mcore_cpu.seed_rng_tracker(1234)
    h, lat, f = 256, 64, 96
    cfg = TransformerConfig(num_layers=1, hidden_size=h, ffn_hidden_size=f, num_attention_heads=4, num_moe_experts=8,
                            moe_latent_size=lat, add_bias_linear=False, params_dtype=torch.bfloat16, bf16=True,
                            use_cpu_initialization=True, perform_initialization=False)
    with torch.device("meta"), cpu_current_device():
        expert = MLP(cfg, MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear),
                     is_expert=True, ffn_hidden_size=f)
    assert tuple(expert.linear_fc1.weight.shape) == (f, lat) and tuple(expert.linear_fc2.weight.shape) == (lat, f)
    arch = ModelArch(num_layers=1, hidden_size=h, ffn_hidden_size=f, num_attention_heads=4, vocab_size=128,
                     seq_length=128, num_experts=8, moe_latent_size=lat, swiglu=False, activation="relu")
    assert _mlp_params(arch, f, 1, False, arch.expert_hidden) == sum(p.numel() for p in expert.parameters())


def test_latent_projections_worked_example():
    # moe_layer.py: fc1_latent_proj TELinear(4096 -> 1024) + fc2_latent_proj TELinear(1024 -> 4096), no bias,
    # "duplicated" (whole on every TP rank): 2 x 4096 x 1024
    assert latent_proj_params(SUPER) == 2 * 4096 * 1024 == 8_388_608
    assert latent_proj_params(SUPER.model_copy(update={"moe_latent_size": None})) == 0


def test_super_totals_match_the_model_docs():
    main = SUPER.model_copy(update={"hybrid_mtp_pattern": None, "mtp_num_layers": 0})
    assert total_parameters(main) == pytest.approx(120e9, rel=0.01)      # "120B parameters in total"
    assert 12e9 <= active_parameters(main) < 13e9                        # "12B active parameters"
    # without the latent space the same experts would hold 4x the weights (h / l): far from 120B
    assert total_parameters(main.model_copy(update={"moe_latent_size": None})) > 400e9
    # the two MTP depths ('*E' each) add their own layers
    assert total_parameters(SUPER) > total_parameters(main) + 2 * 2.5e9


# --------------------------------------------------------------------------- FLOPs vs the published tables
@pytest.mark.parametrize("table,system,tokens,tflops", [
    ("26.06", "GB300", 9652, 817), ("26.06", "GB200", 6742, 571), ("26.06", "B300", 7867, 667),
    ("26.08", "GB300", 9856, 831), ("26.08", "GB200", 7040, 600), ("26.04.01", "GB300", 9344, 795),
    ("26.04.01", "GB200", 6656, 564), ("26.04.01", "B300", 7296, 623), ("26.04.01", "B200", 6400, 542)])
def test_super_flops_reproduce_bridge_tables(table, system, tokens, tflops):
    # the tables round TFLOP/s to integers; 26.04.01 also rounds tokens/s to multiples of 128 (+-0.9 %)
    rel = 0.01 if table == "26.04.01" else 0.007
    assert model_flops_per_token(_plan()) == pytest.approx(tflops * 1e12 / tokens, rel=rel)


def test_without_latent_or_mtp_the_tables_are_missed():
    target = 817e12 / 9652
    assert model_flops_per_token(_plan(SUPER.model_copy(update={"moe_latent_size": None}))) > 1.9 * target
    no_mtp = SUPER.model_copy(update={"hybrid_mtp_pattern": None, "mtp_num_layers": 0})
    assert model_flops_per_token(_plan(no_mtp)) < 0.93 * target


# --------------------------------------------------------------------------- readers
def test_megatron_argv_reads_latent_moe_and_the_mtp_pattern():
    plan = plan_from_argv(SUPER_ARGV, CLUSTER)
    m = plan.model
    assert m.hybrid_pattern == SUPER_PATTERN and m.num_layers == 88
    assert (m.hybrid_mtp_pattern, m.mtp_num_layers, m.moe_latent_size) == ("*E", 2, 1024)
    assert m.moe_fused_weighted_squared_relu


def test_mtp_depths_conflict_and_legacy_flag():
    argv = [a if a != "2" or SUPER_ARGV[i - 1] != "--mtp-num-layers" else "3" for i, a in enumerate(SUPER_ARGV)]
    with pytest.raises(PlanError) as e:
        plan_from_argv(argv, CLUSTER)
    assert "--mtp-num-layers" in str(e.value) and "\n" not in str(e.value)
    legacy = [a.split("/")[0] if a.startswith(SUPER_PATTERN) else a for a in SUPER_ARGV]
    legacy += ["--mtp-hybrid-override-pattern", "*E"]
    m = plan_from_argv(legacy, CLUSTER).model
    assert (m.hybrid_mtp_pattern, m.mtp_num_layers) == ("*E", 2)


def test_bridge_yaml_latent_moe(tmp_path):
    doc = yaml.safe_load((Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml").read_text())
    m = doc["model"]
    m.update({"_target_": "megatron.bridge.models.hybrid.hybrid_provider.HybridModelProvider",
              "hybrid_layer_pattern": SUPER_PATTERN + "/*E/*E", "num_layers": 88, "hidden_size": 4096,
              "ffn_hidden_size": 2688, "mamba_num_heads": 128, "mamba_head_dim": 64, "mamba_num_groups": 8,
              "mamba_state_dim": 128, "kv_channels": 128, "num_attention_heads": 32, "num_query_groups": 2,
              "seq_length": 8192, "num_moe_experts": 512, "moe_ffn_hidden_size": 2688,
              "moe_shared_expert_intermediate_size": 5376, "moe_router_topk": 22, "moe_latent_size": 1024,
              "mtp_num_layers": 2, "use_fused_weighted_squared_relu": True, "gated_linear_unit": False,
              "qk_layernorm": False,
              "activation_func": {"_call_": False, "_target_": "megatron.core.activations.squared_relu"},
              "position_embedding_type": "none", "tensor_model_parallel_size": 1, "expert_model_parallel_size": 8,
              "pipeline_model_parallel_size": 1, "virtual_pipeline_model_parallel_size": None,
              "sequence_parallel": False, "vocab_size": 131072, "recompute_modules": None})
    m.pop("transformer_layer_spec", None)
    p = tmp_path / "run_config.yaml"
    p.write_text(yaml.safe_dump(doc))
    plan = load_recipe(p, {"gpu": "gb300", "num_nodes": 16, "gpus_per_node": 4})
    assert plan.model.moe_latent_size == 1024 and plan.model.hybrid_mtp_pattern == "*E"
    assert plan.model.mtp_num_layers == 2 and plan.model.hybrid_pattern == SUPER_PATTERN


# --------------------------------------------------------------------------- projection
def test_projection_prices_the_latent_projections_and_the_mtp_layers():
    from primus_launch.projection.cost.moe_dispatch import dispatcher_collectives
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.dryrun import project_dry_run

    plan = plan_from_argv(SUPER_ARGV, CLUSTER)
    names = [op[0] for op in layer_op_times(plan)["hybrid_moe"]]
    assert any("fc1_latent_proj" in n for n in names) and any("fc2_latent_proj" in n for n in names)
    # the dispatcher moves l-wide tokens: its payload shrinks by h / l = 4 against the same plan without latent
    # (the alltoall dispatcher's sizes are bytes; the flex backends' are tokens, priced at the same l-wide width)
    a2a = plan.with_changes(training={"moe_token_dispatcher": "alltoall"})
    wide = a2a.with_changes(model={"moe_latent_size": None})
    lat_b = sum(c.nbytes for c in dispatcher_collectives(a2a)[0] if "prob" not in c.what)
    wide_b = sum(c.nbytes for c in dispatcher_collectives(wide)[0] if "prob" not in c.what)
    assert lat_b < 0.3 * wide_b
    res = project_dry_run(plan)
    no_mtp = project_dry_run(plan.with_changes(model={"hybrid_mtp_pattern": None, "mtp_num_layers": 0}))
    assert no_mtp.tokens_per_sec_per_gpu > res.tokens_per_sec_per_gpu > 0
    # a Mamba layer in the MTP depth stays refused in one line
    with pytest.raises(PlanError, match="model.hybrid_mtp_pattern"):
        project_dry_run(plan.with_changes(model={"hybrid_mtp_pattern": "M*E"}))


# --------------------------------------------------------------------------- selective recompute on hybrid stacks
def test_selective_recompute_per_symbol():
    """megatron-core 0.16.1: a hybrid stack's ``*`` / ``E`` layers are TransformerLayers (``--recompute-modules`` act in
    them as in a GPT layer's attention / MLP half), its ``MambaLayer`` has no recompute module (ssm/mamba_layer.py)."""
    from primus_launch.projection.memory.activations import layer_activation_bytes
    from primus_launch.projection.memory.mcore import hybrid_layer_bytes

    kw = dict(seq=8192, mbs=1, tp=1, sp=False)
    dense = layer_activation_bytes(SUPER, moe=False, **kw)
    moe = layer_activation_bytes(SUPER, moe=True, **kw)
    rest = (dense, moe, 8192, 1, False)
    mods = ("moe", "layernorm", "core_attn", "moe_act")
    assert hybrid_layer_bytes(SUPER, "M", *rest, modules=mods) == hybrid_layer_bytes(SUPER, "M", *rest)
    # '*': the GPT layer's core-attention drop only; 'E': the GPT MoE layer's MLP-side drops (moe takes moe_act in)
    assert hybrid_layer_bytes(SUPER, "*", *rest, modules=mods) == pytest.approx(
        dense.attention - (dense.full - dense.selective(("core_attn",))))
    assert hybrid_layer_bytes(SUPER, "E", *rest, modules=mods) == pytest.approx(
        moe.full - moe.attention - (moe.full - moe.selective(("moe", "layernorm", "moe_act"))))


def test_selective_recompute_projects_and_per_op_stays_refused():
    from primus_launch.projection.dryrun import project_dry_run

    plan = plan_from_argv(SUPER_ARGV, CLUSTER)
    sel = plan.with_changes(training={"recompute": {"granularity": "selective", "modules": ["moe", "core_attn"]}})
    a, b = project_dry_run(plan), project_dry_run(sel)
    assert b.tokens_per_sec_per_gpu < a.tokens_per_sec_per_gpu          # the re-run forwards
    assert b.memory.peak_bytes_per_gpu < a.memory.peak_bytes_per_gpu    # the dropped activations
    with pytest.raises(PlanError, match="training.recompute.granularity"):
        project_dry_run(plan.with_changes(training={"recompute": {"granularity": "op"}}))
