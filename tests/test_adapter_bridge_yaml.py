"""Megatron-Bridge ConfigContainer YAMLs (a run's saved run_config.yaml) read into the plan.

The fixture ``tests/data/bridge/qwen3_moe_run_config.yaml`` is written in the shape Bridge's
``ConfigContainer.to_yaml`` gives (Megatron-LM megatron/training/config/container.py ``to_dict`` +
``yaml.safe_dump``: keys sorted, a ``_target_`` per section; functions, dtypes and enums as ``_target_`` nodes,
megatron/training/config/yaml_utils.py; fields of Bridge's GPTModelProvider / DistributedDataParallelConfig /
OptimizerConfig / MixedPrecisionConfig / CommOverlapConfig, Bridge @067f987).  The plan is checked against the
file's own values, and against the same run written as Megatron-LM flags.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from primus_launch.adapters import detect_kind, load_recipe, render_recipe
from primus_launch.adapters.megatron import plan_diffs, plan_from_argv
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, PlanError

FIXTURE = Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml"
CLUSTER = {"gpu": "h100-sxm", "num_nodes": 2, "gpus_per_node": 8}

# the same run as Megatron-LM pretrain_gpt.py flags
ARGV = """--num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 --group-query-attention
--num-query-groups 4 --kv-channels 128 --seq-length 4096 --vocab-size 151936 --normalization RMSNorm --swiglu
--untie-embeddings-and-output-weights --disable-bias-linear --qk-layernorm --position-embedding-type rope
--attention-dropout 0.0 --hidden-dropout 0.0 --num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 768
--moe-token-dispatcher-type alltoall --moe-grouped-gemm --moe-permute-fusion --tensor-model-parallel-size 2
--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 12 --expert-model-parallel-size 8
--expert-tensor-parallel-size 1 --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce
--overlap-param-gather --no-align-param-gather --micro-batch-size 1 --global-batch-size 256 --train-iters 1000
--bf16 --cross-entropy-loss-fusion --fp8-recipe tensorwise --manual-gc --manual-gc-interval 100""".split()
# (--fp8-recipe without --fp8-format: the OptimizerConfig.fp8_recipe Bridge's MixedPrecisionConfig.setup copies from
# its default 'tensorwise' into a bf16 run; it decides where the precision-aware optimizer keeps its master weights)


def _with_recipe_name(text: str, recipe: str) -> str:
    """The fixture with ``mixed_precision:`` as a recipe name; the dtype anchor it held (safe_dump aliases the one
    torch.bfloat16 object: ``&id001`` ... ``*id001``) written out where it is used."""
    start, end = text.index("mixed_precision:\n"), text.index("\nmodel:\n")
    return (text[:start] + f"mixed_precision: {recipe}" + text[end:]).replace(
        "*id001", "{_call_: false, _target_: torch.bfloat16}")


def _load(tmp_path: Path, text: str, name: str = "run_config.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return load_recipe(p, CLUSTER)


def test_plan_fields_are_the_files_values():
    doc = yaml.safe_load(FIXTURE.read_text())
    m, t, d = doc["model"], doc["train"], doc["ddp"]
    assert detect_kind(FIXTURE) == "bridge"
    plan = load_recipe(FIXTURE, CLUSTER)
    assert plan.source.format == "bridge-yaml" and plan.framework == "megatron"
    pm, pp, pt = plan.model, plan.parallel, plan.training
    assert (pm.num_layers, pm.hidden_size, pm.ffn_hidden_size, pm.num_attention_heads) == (
        m["num_layers"], m["hidden_size"], m["ffn_hidden_size"], m["num_attention_heads"])
    assert (pm.num_query_groups, pm.head_dim, pm.seq_length, pm.vocab_size) == (
        m["num_query_groups"], m["kv_channels"], m["seq_length"], m["vocab_size"])
    assert (pm.num_experts, pm.moe_router_topk, pm.moe_ffn_hidden_size) == (
        m["num_moe_experts"], m["moe_router_topk"], m["moe_ffn_hidden_size"])
    assert pm.swiglu and pm.activation == "silu"  # gated_linear_unit + activation_func silu
    assert pm.normalization == "rmsnorm" and pm.qk_layernorm and pm.position_embedding == "rope"
    assert pm.untie_embeddings_and_output_weights == (not m["share_embeddings_and_output_weights"])
    assert (pp.tp, pp.pp, pp.vpp, pp.cp, pp.ep, pp.etp, pp.sequence_parallel) == (
        m["tensor_model_parallel_size"], m["pipeline_model_parallel_size"],
        m["virtual_pipeline_model_parallel_size"], m["context_parallel_size"], m["expert_model_parallel_size"],
        m["expert_tensor_parallel_size"], m["sequence_parallel"])
    assert pp.dp_sharding == "optimizer" and d["use_distributed_optimizer"]
    assert (pt.micro_batch_size, pt.global_batch_size, pt.train_iters) == (
        t["micro_batch_size"], t["global_batch_size"], t["train_iters"])
    assert (pt.overlap_grad_reduce, pt.overlap_param_gather, pt.align_param_gather, pt.grad_reduce_in_fp32) == (
        d["overlap_grad_reduce"], d["overlap_param_gather"], d["align_param_gather"], d["grad_reduce_in_fp32"])
    assert pt.precision == "bf16" and pt.recompute.granularity == "none"
    assert pt.moe_grouped_gemm and pt.moe_token_dispatcher == "alltoall"
    # nothing dropped silently: Bridge-only fields in a note; train.manual_gc / manual_gc_interval read (moonstep:
    # cost/manual_gc.py prices the collections)
    assert any("model.init_method=torch.nn.init.normal_" in n for n in plan.source.notes)
    assert plan.model.name == "Qwen3-30B-A3B"  # model.hf_model_id: read as the model's name (user18)
    assert (pt.manual_gc, pt.manual_gc_interval) == (t["manual_gc"], t["manual_gc_interval"])


def test_same_run_as_megatron_flags_gives_the_same_plan():
    bridge = load_recipe(FIXTURE, CLUSTER)
    flags = plan_from_argv(ARGV, Cluster(**CLUSTER))
    for sec in ("model", "parallel", "training"):
        a, b = getattr(bridge, sec).model_dump(), getattr(flags, sec).model_dump()
        a.pop("name", None), b.pop("name", None)
        assert a == b, sec


def test_cluster_from_saved_data_parallel_size_and_overrides():
    plan = load_recipe(FIXTURE)  # comm_overlap.data_parallel_size 4 x TP 2 x PP 2 = 16 GPUs
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (2, 8)
    assert load_recipe(FIXTURE, {"gpu": "b200", "num_nodes": 4, "gpus_per_node": 8}).cluster.world_size == 32


def test_wrapper_toml_names_the_cluster(tmp_path):
    (tmp_path / "run_config.yaml").write_text(FIXTURE.read_text())
    w = tmp_path / "job.toml"
    w.write_text('[recipe]\npath = "run_config.yaml"\n[cluster]\ngpu = "h200"\nnodes = 4\ngpus_per_node = 8\n')
    plan = load_recipe(w)
    assert plan.cluster.gpu == "h200" and plan.cluster.world_size == 32 and plan.parallel.tp == 2


@pytest.mark.parametrize("recipe,precision,fp8_recipe,param_gather", [
    ("bf16_with_fp8_current_scaling_mixed", "fp8", "tensorwise", False),
    ("bf16_with_mxfp8_mixed", "fp8", "mxfp8", True),
    ("bf16-with-fp8-delayed-scaling-mixed", "fp8", "delayed", True),
    ("bf16_mixed", "bf16", None, False),
])
def test_mixed_precision_recipe_name(tmp_path, recipe, precision, fp8_recipe, param_gather):
    # mixed_precision as the recipe's name (Bridge training/mixed_precision.py): its fields win over the model's
    plan = _load(tmp_path, _with_recipe_name(FIXTURE.read_text(), recipe))
    assert (plan.training.precision, plan.training.fp8_recipe, plan.training.fp8_param_gather) == (
        precision, fp8_recipe, param_gather)
    if recipe == "bf16_with_fp8_current_scaling_mixed":  # first/last layers in bf16: the recipe's 1 / 1, read
        assert (plan.training.bf16_layers_start, plan.training.bf16_layers_end) == (1, 1)
        assert not any("bf16" in u.flag for u in plan.source.unmodelled)


def test_unknown_mixed_precision_recipe_is_one_line(tmp_path):
    text = _with_recipe_name(FIXTURE.read_text(), "bf17_mixed")
    with pytest.raises(UserError, match="mixed_precision='bf17_mixed'"):
        _load(tmp_path, text)


def test_activation_without_a_megatron_flag_is_reported(tmp_path):
    text = FIXTURE.read_text().replace("_target_: torch.nn.functional.silu", "_target_: torch.nn.functional.gelu")
    plan = _load(tmp_path, text)  # gated GELU (GeGLU): Megatron-LM has no flag for it
    assert plan.model.swiglu
    assert any(u.flag == "model.activation_func" for u in plan.source.unmodelled)


def test_gpt_model_config_with_nested_transformer(tmp_path):
    # megatron.training.models GPTModelConfig: the TransformerConfig under model.transformer
    text = """_target_: megatron.bridge.training.config.ConfigContainer
model:
  _target_: megatron.bridge.models.gpt.gpt_builder.GPTModelConfig
  position_embedding_type: rope
  seq_length: 2048
  share_embeddings_and_output_weights: true
  should_pad_vocab: false
  transformer:
    _target_: megatron.core.transformer.transformer_config.TransformerConfig
    activation_func:
      _call_: false
      _target_: torch.nn.functional.silu
    bf16: true
    ffn_hidden_size: 5632
    gated_linear_unit: true
    hidden_size: 2048
    num_attention_heads: 16
    num_layers: 16
    tensor_model_parallel_size: 2
  vocab_size: 32000
train:
  _target_: megatron.bridge.training.config.TrainingConfig
  global_batch_size: 32
  micro_batch_size: 2
"""
    plan = _load(tmp_path, text)
    assert (plan.model.num_layers, plan.model.hidden_size, plan.model.seq_length, plan.parallel.tp) == (16, 2048, 2048, 2)
    assert plan.model.swiglu and not plan.model.untie_embeddings_and_output_weights
    # should_pad_vocab false: GPTModelProvider.provide uses vocab_size as is
    assert plan.model.vocab_size == 32000 and plan.model.make_vocab_size_divisible_by == 1


def test_override_only_bridge_yaml_is_still_refused(tmp_path):
    text = ("_target_: megatron.bridge.training.config.ConfigContainer\nmodel:\n  tensor_model_parallel_size: 2\n"
            "train:\n  micro_batch_size: 1\n  global_batch_size: 8\n")
    p = tmp_path / "override.yaml"
    p.write_text(text)
    assert detect_kind(p) == "megatron"
    with pytest.raises(UserError, match="without model.num_layers"):
        load_recipe(p, CLUSTER)


def test_tune_edits_the_fields_in_place():
    text = FIXTURE.read_text()
    plan = load_recipe(FIXTURE, CLUSTER)
    assert render_recipe(plan, text) == text  # unchanged plan: identical text
    rc = plan.training.recompute.model_copy(update={"granularity": "full", "method": "uniform", "num_layers": 1})
    new = plan.model_copy(update={
        "parallel": plan.parallel.model_copy(update={"tp": 4, "pp": 4, "vpp": 1, "ep": 4}),
        "training": plan.training.model_copy(update={"micro_batch_size": 2, "recompute": rc,
                                                     "pipeline_schedule": "1f1b"})})
    out = render_recipe(new, text)
    changed = {a.strip() for a, b in zip(text.splitlines(), out.splitlines()) if a != b}
    assert changed == {"data_parallel_size: 4", "tensor_model_parallel_size: 2", "pipeline_model_parallel_size: 2",
                       "expert_model_parallel_size: 8", "virtual_pipeline_model_parallel_size: 2",
                       "recompute_granularity: null", "recompute_method: null", "recompute_num_layers: null",
                       "micro_batch_size: 1"}
    doc = yaml.safe_load(out)
    assert (doc["model"]["tensor_model_parallel_size"], doc["model"]["recompute_granularity"],
            doc["train"]["micro_batch_size"], doc["comm_overlap"]["data_parallel_size"]) == (4, "full", 2, 1)


def _tuned(plan, **training):
    return plan.model_copy(update={"training": plan.training.model_copy(update=training)})


def _round_trip(tmp_path, plan, text):
    """The tuned plan written into the config and read back (render_recipe already refuses a difference)."""
    out = render_recipe(plan, text)
    back = _load(tmp_path, out, "tuned.yaml")
    assert plan_diffs(plan, back) == []  # the fields a tuned recipe must keep (normalised as the writers compare)
    return out, yaml.safe_load(out)


def test_tuned_precision_aware_optimizer_keeps_the_optimizers_fp8_recipe(tmp_path):
    # the robust13 failure ("cannot express training.optimizer_fp8_recipe" from --tune --memory-margin 0.5): Bridge's
    # MixedPrecisionConfig.setup copies fp8_recipe (default 'tensorwise') into the OptimizerConfig of a bf16 run too
    # (training/mixed_precision.py update_config_with_precision_overrides, @067f987), so a plan turning the
    # precision-aware optimizer on runs with it: read with the optimizer off already, kept by the tuned plan
    text = FIXTURE.read_text()
    plan = load_recipe(FIXTURE, CLUSTER)
    assert (plan.training.precision_aware_optimizer, plan.training.optimizer_fp8_recipe) == (False, "tensorwise")
    out, doc = _round_trip(tmp_path, _tuned(plan, precision_aware_optimizer=True), text)
    assert doc["optimizer"]["use_precision_aware_optimizer"] is True and doc["mixed_precision"]["fp8_recipe"] == "tensorwise"
    assert sum(a != b for a, b in zip(text.splitlines(), out.splitlines())) == 1


def test_tuned_adam_moment_dtypes_are_torch_dtypes_and_leave_the_aliases(tmp_path):
    # the four state dtypes share one anchored torch.float32 object (&id002 / *id002); bf16 moments edit two of them
    text = FIXTURE.read_text()
    plan = load_recipe(FIXTURE, CLUSTER)
    _, doc = _round_trip(tmp_path, _tuned(plan, precision_aware_optimizer=True, exp_avg_dtype="bf16",
                                          exp_avg_sq_dtype="bf16"), text)
    o = doc["optimizer"]
    assert o["exp_avg_dtype"] == o["exp_avg_sq_dtype"] == {"_call_": False, "_target_": "torch.bfloat16"}
    assert o["main_params_dtype"] == o["main_grads_dtype"] == {"_call_": False, "_target_": "torch.float32"}


def test_tuned_fp8_is_written_in_mixed_precision(tmp_path):
    # mixed_precision's fields win over the model's (MixedPrecisionConfig.setup): FP8 is written there, fp8_param and
    # fp8_param_gather alike (its __setattr__ keeps them in sync)
    text = FIXTURE.read_text()
    plan = load_recipe(FIXTURE, CLUSTER)
    _, doc = _round_trip(tmp_path, _tuned(plan, precision="fp8", fp8_recipe="blockwise", fp8_param_gather=True), text)
    mp = doc["mixed_precision"]
    assert (mp["fp8"], mp["fp8_recipe"], mp["fp8_param"], mp["fp8_param_gather"]) == ("hybrid", "blockwise", True, True)
    assert (doc["model"]["fp8"], doc["model"]["fp8_recipe"]) == (None, "delayed")  # overwritten by setup: left


def test_tuned_precision_with_a_recipe_name(tmp_path):
    # mixed_precision: <name>: the recipe whose fields are the tuned precision, else one line
    text = _with_recipe_name(FIXTURE.read_text(), "bf16_mixed")
    plan = _load(tmp_path, text)
    _, doc = _round_trip(tmp_path, _tuned(plan, precision="fp8", fp8_recipe="delayed", fp8_param_gather=True), text)
    assert doc["mixed_precision"] == "bf16_with_fp8_delayed_scaling_mixed"
    with pytest.raises(UserError, match="cannot express .*fp8_recipe=blockwise.*mixed_precision='bf16_mixed'"):
        render_recipe(_tuned(plan, precision="fp8", fp8_recipe="blockwise", fp8_param_gather=True), text)


def test_tune_to_megatron_fsdp_edits_ddp_checkpoint_and_model():
    text = FIXTURE.read_text()
    plan = load_recipe(FIXTURE, CLUSTER)
    out = render_recipe(plan.model_copy(update={"parallel": plan.parallel.model_copy(update={"dp_sharding": "full"}),
                                                "training": plan.training.model_copy(
                                                    update={"gradient_accumulation_fusion": False})}), text)
    doc = yaml.safe_load(out)
    assert (doc["ddp"]["use_megatron_fsdp"], doc["ddp"]["data_parallel_sharding_strategy"],
            doc["checkpoint"]["ckpt_format"], doc["model"]["gradient_accumulation_fusion"]) == (
        True, "optim_grads_params", "fsdp_dtensor", False)


def test_project_dry_run_from_the_command_line():
    """The command line's answer, from the CLI's ``main`` in this process (``tests/cli_run.py``: the same argv,
    stdout and exit status; no second interpreter)."""
    from cli_run import run_cli

    rc, out, err, _ = run_cli(["--project", str(FIXTURE), "--dry-run"], Path(__file__).resolve().parents[1])
    assert rc == 0, err
    assert "tokens/s/GPU" in out and "comm_overlap.data_parallel_size=4" in out


def test_other_model_families_are_refused_by_name(tmp_path):
    text = FIXTURE.read_text().replace("megatron.bridge.models.qwen.qwen_provider.Qwen3MoEModelProvider",
                                       "megatron.bridge.models.qwen_vl.qwen3_vl_provider.Qwen3VLModelProvider")
    with pytest.raises(PlanError, match="model._target_=.*Qwen3VLModelProvider.*GPT-family decoders only"):
        _load(tmp_path, text)


def test_diffusion_transformer_override_is_refused_as_such(tmp_path):
    # read18: Bridge's WAN example overrides (examples/diffusion/recipes/wan/conf/*.yaml) state num_layers /
    # hidden_size with no _target_, so they looked like a GPT run config and were refused for a missing
    # --seq-length / tokenizer; crossattn_emb_size is a WanModelProvider field (diffusion/models/wan/wan_provider.py)
    text = ("model:\n  crossattn_emb_size: 5120\n  hidden_size: 5120\n  ffn_hidden_size: 13824\n"
            "  num_attention_heads: 40\n  num_layers: 40\n  tensor_model_parallel_size: 2\n"
            "train:\n  global_batch_size: 1\n  micro_batch_size: 1\n")
    with pytest.raises(PlanError, match="model.crossattn_emb_size=5120: .*diffusion transformers"):
        _load(tmp_path, text)
    text = FIXTURE.read_text().replace("megatron.bridge.models.qwen.qwen_provider.Qwen3MoEModelProvider",
                                       "megatron.bridge.diffusion.models.wan.wan_provider.WanModelProvider")
    with pytest.raises(PlanError, match="model._target_=.*WanModelProvider"):
        _load(tmp_path, text)


def test_fp8_fields_and_cuda_graph_enums(tmp_path):
    # MixedPrecisionConfig fields as saved (they win over the model's), cuda_graph_scope as CudaGraphScope enum nodes
    text = FIXTURE.read_text()
    mp, model = text.index("mixed_precision:\n"), text.index("\nmodel:\n")
    section = (text[mp:model].replace("  fp8: null", "  fp8: e4m3").replace("  fp8_recipe: tensorwise", "  fp8_recipe: mxfp8")
               .replace("  fp8_param_gather: false", "  fp8_param_gather: true"))
    text = text[:mp] + section + text[model:]
    text = text.replace("  cuda_graph_impl: none\n  cuda_graph_scope: []\n", """  cuda_graph_impl: transformer_engine
  cuda_graph_scope:
  - _args_:
    - 2
    _call_: true
    _name_: attn
    _target_: megatron.core.transformer.enums.CudaGraphScope
  - _args_:
    - 5
    _call_: true
    _name_: moe_router
    _target_: megatron.core.transformer.enums.CudaGraphScope
""")
    plan = _load(tmp_path, text)
    t = plan.training
    assert (t.precision, t.fp8_recipe, t.fp8_param_gather) == ("fp8", "mxfp8", True)
    assert (t.cuda_graph_impl, tuple(t.cuda_graph_scope)) == ("transformer_engine", ("attn", "moe_router"))


@pytest.mark.parametrize("old,new,said", [
    ("  tensor_model_parallel_size: 2", "  tensor_model_parallel_size: 3",
     "model.tensor_model_parallel_size=3: must divide num_attention_heads=32"),
    ("  global_batch_size: 256", "  global_batch_size: 250",
     "train.global_batch_size=250: must be divisible by micro_batch_size x dp = 1 x 4"),
    ("  micro_batch_size: 1", "  micro_batch_size: 0", "train.micro_batch_size=0: Input should be greater than 0"),
    ("  recompute_granularity: null", "  recompute_granularity: fulll",
     "model.recompute_granularity='fulll': one of full, selective"),
    ("  seq_length: 4096", "  seq_length: 4096.5", "dataset.seq_length='4096.5': an integer"),
])
def test_errors_name_the_configs_keys(tmp_path, old, new, said):
    """user15 (a Megatron-Bridge user's run_config.yaml): a refused value was named by the Megatron-LM flag it maps
    to (``--tensor-model-parallel-size=3``, ``--global-batch-size=250``, ``--seq-length='4096.5'``); the config
    writes ``model.tensor_model_parallel_size``, ``train.global_batch_size``, ``dataset.seq_length``."""
    text = FIXTURE.read_text()
    assert old in text
    bad = tmp_path / "run_config.yaml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises((UserError, PlanError)) as ei:
        load_recipe(bad)
    assert str(ei.value).startswith(said), str(ei.value)


def test_cluster_note_first_and_warnings_in_the_configs_keys(tmp_path):
    """user15: the warnings named ``--manual-gc`` (the config's ``train.manual_gc``), and the saved cluster's note
    (the answer's 16 GPUs, the GPU a default) was cut off the one-screen answer behind the unread-fields note."""
    # train.manual_gc is read since moonstep (cost/manual_gc.py): a flag still not modelled stands in for it
    fixture = tmp_path / FIXTURE.name
    fixture.write_text(FIXTURE.read_text().replace("  manual_gc: true\n", "  manual_gc: true\n"
                                                   "  empty_unused_memory_level: 1\n", 1))
    plan = load_recipe(fixture)
    assert plan.source.notes[0].startswith("cluster from comm_overlap.data_parallel_size=4: 16 x h100-sxm "
                                           "(2 nodes x 8; the GPU the default")
    assert {u.flag for u in plan.source.unmodelled} >= {"train.empty_unused_memory_level"}
    assert not any(u.flag.startswith("--") for u in plan.source.unmodelled)


def test_fp8_param_alone_is_reset_by_the_gather_default(tmp_path):
    # MixedPrecisionConfig's __init__ assigns fp8_param, then fp8_param_gather (declared after; default False), and
    # __setattr__ keeps the two alike: fp8_param: true without fp8_param_gather ends False (Bridge @067f987's class,
    # run on the CPU with a torch stub: MixedPrecisionConfig(fp8_param=True) -> fp8_param False, fp8_param_gather False)
    text = FIXTURE.read_text()
    mp, model = text.index("mixed_precision:\n"), text.index("\nmodel:\n")
    section = (text[mp:model].replace("  fp8: null", "  fp8: hybrid").replace("  fp8_param: false", "  fp8_param: true")
               .replace("  fp8_param_gather: false\n", ""))
    assert _load(tmp_path, text[:mp] + section + text[model:]).training.fp8_param_gather is False
    section = section.replace("  fp8_param: true", "  fp8_param: false\n  fp8_param_gather: true")
    assert _load(tmp_path, text[:mp] + section + text[model:]).training.fp8_param_gather is True


def test_tuned_mxfp8_param_gather_sets_the_grad_buffer_reuse(tmp_path):
    # Bridge's ConfigContainer.validate asserts reuse_grad_buf_for_mxfp8_param_ag for MXFP8 with fp8_param_gather
    # outside Megatron-FSDP (training/config.py @067f987); its bf16_with_mxfp8_mixed recipe sets it
    b200 = {"gpu": "b200", "num_nodes": 2, "gpus_per_node": 8}
    for text in (FIXTURE.read_text(), _with_recipe_name(FIXTURE.read_text(), "bf16_mixed")):
        path = tmp_path / "run_config.yaml"
        path.write_text(text)
        plan = load_recipe(path, b200)
        out = render_recipe(_tuned(plan, precision="fp8", fp8_recipe="mxfp8", fp8_param_gather=True), text)
        mp = yaml.safe_load(out)["mixed_precision"]
        assert mp == "bf16_with_mxfp8_mixed" if isinstance(mp, str) else (
            mp["fp8_recipe"], mp["fp8_param_gather"], mp["reuse_grad_buf_for_mxfp8_param_ag"]) == ("mxfp8", True, True)


@pytest.mark.parametrize("recipe_name", [None, "bf16_mixed"])
def test_tuned_fp8_with_megatrons_default_recipe_is_written_as_delayed(tmp_path, recipe_name):
    # the tuner's Megatron FP8 candidate names no scaling recipe (None: Megatron-LM's default, delayed; tuner/rules.py
    # fp8_recipes); Bridge's MixedPrecisionConfig always names one (default tensorwise), so it is written as delayed
    # (was: 'cannot express training.fp8_recipe', nothing written)
    text = FIXTURE.read_text() if recipe_name is None else _with_recipe_name(FIXTURE.read_text(), recipe_name)
    plan = load_recipe(FIXTURE, CLUSTER) if recipe_name is None else _load(tmp_path, text)
    out = render_recipe(_tuned(plan, precision="fp8", fp8_recipe=None, fp8_param_gather=True), text)
    back = _load(tmp_path, out, "tuned.yaml")
    assert (back.training.precision, back.training.fp8_recipe, back.training.fp8_param_gather) == ("fp8", "delayed", True)
    mp = yaml.safe_load(out)["mixed_precision"]
    assert mp == "bf16_with_fp8_delayed_scaling_mixed" if recipe_name else mp["fp8_recipe"] == "delayed"


@pytest.mark.parametrize("flags, says", [
    # --nodes 16 --gpus-per-node 8: the answer's 128 GPUs; the note said "16 x h100-sxm (2 nodes x 8 ...)" (user18)
    ({"num_nodes": 16, "gpus_per_node": 8}, "cluster gpu=h100-sxm: the default (the config names no GPU)"),
    ({"gpu": "h200"}, "cluster from comm_overlap.data_parallel_size=4: 16 x h200 (2 nodes x 8); pass"),
    ({"gpu": "h200", "num_nodes": 16}, None),
    ({"num_nodes": 2}, "cluster gpu=h100-sxm: the default (the config names no GPU); pass --gpu to override"),
])
def test_saved_cluster_note_says_the_answers_cluster(flags, says):
    """The saved ``comm_overlap.data_parallel_size`` note describes the cluster the plan is projected on, not the
    saved one, where cluster flags replaced part of it (the flags' world size is the run's, the GPU said default only
    while no --gpu names one)."""
    plan = load_recipe(FIXTURE, flags)
    assert plan.cluster.world_size == 8 * flags.get("num_nodes", 2)
    cluster_notes = [n for n in plan.source.notes if n.startswith("cluster")]
    if says is None:
        assert cluster_notes == []
    else:
        assert cluster_notes and cluster_notes[0].startswith(says), cluster_notes
        assert f"{plan.cluster.world_size} x" in cluster_notes[0] or "replaced by the cluster flags' 128" in \
            cluster_notes[0] or (plan.cluster.world_size == 16 and cluster_notes[0].endswith("override"))


@pytest.mark.parametrize("hf_id, name", [("Qwen/Qwen3-30B-A3B", "Qwen3-30B-A3B"),
                                         ("'Qwen/a\\nb'", "run_config"), ("null", "run_config")])
def test_model_named_by_hf_model_id(tmp_path, hf_id, name):
    """user18: the answer's model row said ``run_config`` (the file's stem) for the provider's saved
    ``hf_model_id: Qwen/Qwen3-30B-A3B``; an id that is not one plain word keeps the stem."""
    text = FIXTURE.read_text()
    assert "  hf_model_id: Qwen/Qwen3-30B-A3B\n" in text
    plan = _load(tmp_path, text.replace("  hf_model_id: Qwen/Qwen3-30B-A3B\n", f"  hf_model_id: {hf_id}\n"))
    assert plan.model.name == name
    assert not any("hf_model_id" in n for n in plan.source.notes)  # read for the name: not in the "not read" note
