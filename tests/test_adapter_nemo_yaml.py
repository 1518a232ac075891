"""NeMo 1.0 training configs (NeMo-Framework-Launcher ``launcher_scripts/conf/training/<family>/<size>.yaml``)
read into the plan.

The configs here are small synthetic ones written in the launcher's style (run / trainer / exp_manager /
model sections, OmegaConf interpolations ``${training.model.x}``, ``${.x}``, ``${multiply:..}``), not copies
of its files.  The plan is checked against the same run written as Megatron-LM flags (NeMo 24.x
``megatron_base_model.build_transformer_config`` for the field meanings), the interpolations against the
launcher's resolvers (``launcher_scripts/main.py``: multiply, divide_ceil, divide_floor), and the tuned
write-back by reading it again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from primus_launch.adapters import detect_kind, load_recipe, render_recipe, tuned_path, write_recipe
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.adapters.nemo_interp import Resolver, Unresolved
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, PlanError

CONFIG = """\
defaults:
  - _self_
  - optional tp_overlap@model.ub_tp_comm_overlap_cfg:

run:
  name: llama_tiny
  results_dir: ${base_results_dir}/${.name}

trainer:
  num_nodes: 2
  devices: 8
  accelerator: gpu
  precision: bf16
  max_steps: 500 # consumed_samples = global_step * global_batch_size
  accumulate_grad_batches: 1

exp_manager:
  name: megatron_llama
  checkpoint_callback_params:
    model_parallel_size: ${multiply:${training.model.tensor_model_parallel_size}, ${training.model.pipeline_model_parallel_size}}

model:
  mcore_gpt: true
  micro_batch_size: 1
  global_batch_size: ${multiply:8, 16}  # 128
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 2
  virtual_pipeline_model_parallel_size: 2 # interleaved pipeline
  context_parallel_size: 1
  encoder_seq_length: 4096
  max_position_embeddings: ${.encoder_seq_length}
  num_layers: 8
  hidden_size: 1024
  ffn_hidden_size: ${multiply:${divide_floor:${.hidden_size}, 3}, 8}  # 2728
  num_attention_heads: 16
  num_query_groups: 4
  kv_channels: null
  normalization: rmsnorm
  bias: false
  activation: fast-swiglu
  position_embedding_type: rope
  share_embeddings_and_output_weights: false
  hidden_dropout: 0.0
  attention_dropout: 0.0
  make_vocab_size_divisible_by: 128
  persist_layer_norm: true
  sequence_parallel: true
  activations_checkpoint_granularity: selective
  activations_checkpoint_method: null
  activations_checkpoint_num_layers: null
  megatron_amp_O2: true
  transformer_engine: true
  fp8: false
  fp8_e4m3: false
  fp8_hybrid: true
  ub_tp_comm_overlap: false
  tokenizer:
    library: huggingface
    type: meta-llama/Meta-Llama-3-8B
  optim:
    name: mcore_distributed_optim
    overlap_grad_sync: true
    overlap_param_sync: true
    lr: 3e-4
  data:
    seq_length: ${training.model.encoder_seq_length}
    data_prefix: [1.0, "${data_dir}/my_text_document"]
"""

# the same run as Megatron-LM pretrain_gpt.py flags
ARGV = """--num-layers 8 --hidden-size 1024 --ffn-hidden-size 2728 --num-attention-heads 16 --group-query-attention
--num-query-groups 4 --seq-length 4096 --max-position-embeddings 4096 --normalization RMSNorm --disable-bias-linear
--swiglu --position-embedding-type rope --untie-embeddings-and-output-weights --hidden-dropout 0.0
--attention-dropout 0.0 --make-vocab-size-divisible-by 128 --tokenizer-type HuggingFaceTokenizer
--tokenizer-model meta-llama/Meta-Llama-3-8B --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
--num-virtual-stages-per-pipeline-rank 2 --context-parallel-size 1 --sequence-parallel
--recompute-granularity selective --micro-batch-size 1 --global-batch-size 128 --train-iters 500 --bf16
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather""".split()
CLUSTER = Cluster(gpu="h100-sxm", num_nodes=2, gpus_per_node=8)


def _write(tmp_path: Path, text: str, name: str = "llama_tiny.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _one_line(e: BaseException) -> str:
    return str(e).strip()


def _comparable(plan) -> dict:
    d = plan.model_dump()
    d.pop("source")
    d["model"].pop("name")
    return d


def test_detected_by_content_and_read_as_the_same_plan_as_megatron_flags(tmp_path):
    p = _write(tmp_path, CONFIG)
    assert detect_kind(p) == "nemo1"
    plan = load_recipe(p)
    assert plan.source.format == "nemo1-yaml"
    assert plan.cluster == CLUSTER  # trainer.num_nodes x trainer.devices on the default GPU
    assert _comparable(plan) == _comparable(plan_from_argv(ARGV, CLUSTER))


def test_default_gpu_is_said_in_a_note_unless_stated(tmp_path):
    """user14: a NeMo config (``trainer:`` states nodes and devices, no GPU kind) was projected on the default GPU
    without a word, where a Megatron script or YAML that names none gets a note; the note goes once a
    ``# primus-launch: gpu=`` comment or ``--gpu`` names it (truth: the plan's GPU is the Cluster default)."""
    gpu = Cluster.model_fields["gpu"].default
    plan = load_recipe(_write(tmp_path, CONFIG))
    assert plan.cluster.gpu == gpu
    said = [n for n in plan.source.notes if f"cluster gpu={gpu}: the default" in n]
    assert len(said) == 1 and "--gpu" in said[0] and "num_nodes" not in said[0], plan.source.notes
    stated = load_recipe(_write(tmp_path, "# primus-launch: gpu=b200\n" + CONFIG))
    assert stated.cluster.gpu == "b200" and not any(": the default" in n for n in stated.source.notes)
    flagged = load_recipe(_write(tmp_path, CONFIG), cluster_overrides={"gpu": "h200"})
    assert flagged.cluster.gpu == "h200" and not any(": the default" in n for n in flagged.source.notes)


def test_fields_as_nemo_defines_them(tmp_path):
    plan = load_recipe(_write(tmp_path, CONFIG))
    m, par, t = plan.model, plan.parallel, plan.training
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads, m.num_query_groups) == (
        8, 1024, 2728, 16, 4)
    assert (m.seq_length, m.max_position_embeddings, m.normalization, m.swiglu, m.add_bias_linear) == (
        4096, 4096, "rmsnorm", True, False)
    assert (par.tp, par.pp, par.vpp, par.cp, par.sequence_parallel, par.dp_sharding) == (2, 2, 2, 1, True, "optimizer")
    assert (t.micro_batch_size, t.global_batch_size, t.recompute.granularity, t.train_iters) == (1, 128, "selective", 500)
    # NeMo _vocab_size_with_padding: Llama 3's 128,256 rows padded to a multiple of 128 x TP 2 = 256: 128,256 already is
    assert m.vocab_size == 128256 and m.padded_vocab_size(par.tp) == 128256


def test_interpolations_resolve_as_the_launcher_does():
    data = yaml.safe_load(CONFIG)
    r = Resolver(data, "x.yaml")
    assert r.at(("model", "global_batch_size")) == 128
    assert r.at(("model", "ffn_hidden_size")) == 2728  # floor(1024 / 3) * 8
    assert r.at(("model", "max_position_embeddings")) == 4096  # ${.encoder_seq_length}: a sibling
    assert r.at(("model", "data", "seq_length")) == 4096  # absolute, under the launcher's training group
    assert r.at(("exp_manager", "checkpoint_callback_params", "model_parallel_size")) == 4
    outside = r.at(("run", "results_dir"))  # ${base_results_dir} lives in the launcher's main config
    assert isinstance(outside, Unresolved) and outside == "${base_results_dir}/llama_tiny"
    assert Resolver({"a": {"b": 7, "c": {"d": "${..b}"}, "e": "${divide_floor:${.b}, 2}"}}, "x").at(("a", "c", "d")) == 7
    assert Resolver({"a": {"b": 7, "e": "${divide_floor:${.b}, 2}"}}, "x").at(("a", "e")) == 3
    assert Resolver({"a": {"b": 7, "e": "${divide_ceil:${.b}, 2}"}}, "x").at(("a", "e")) == 4


def test_interpolation_cycle_and_missing_key_refused_in_one_line():
    with pytest.raises(UserError, match="cycle"):
        Resolver({"a": "${training.b}", "b": "${training.a}"}, "x.yaml").at(("a",))
    with pytest.raises(UserError, match=r"a: .*'model.nope'"):
        Resolver({"a": "${training.model.nope}", "model": {}}, "x.yaml").at(("a",))


def test_fields_that_change_time_or_memory_are_reported(tmp_path):
    text = (CONFIG.replace("  megatron_amp_O2: true", "  megatron_amp_O2: false\n  fsdp: true")
            .replace("    lr: 3e-4", "    lr: 3e-4\n    bucket_cap_mb: 200")
            .replace("  activation: fast-swiglu", "  activation: geglu"))
    plan = load_recipe(_write(tmp_path, text))
    flags = {u.flag for u in plan.source.unmodelled}
    assert {"model.megatron_amp_O2", "model.fsdp", "model.optim.bucket_cap_mb", "model.activation"} <= flags


@pytest.mark.parametrize("old,new,match", [
    ("  mcore_gpt: true", "  mcore_gpt: true\n  encoder:\n    num_layers: 4", r"model family .*model\.encoder"),
    ("    library: huggingface\n    type: meta-llama/Meta-Llama-3-8B", "    library: sentencepiece\n    model: null",
     r"model\.tokenizer\.model=None"),
    ("    type: meta-llama/Meta-Llama-3-8B", "    type: acme/secret-model", r"model\.tokenizer\.model='acme/secret-model'"),
    ("  num_nodes: 2", "  num_nodes: ${cluster.nodes}", r"trainer\.num_nodes='\$\{cluster\.nodes\}'"),
    ("  accumulate_grad_batches: 1", "  accumulate_grad_batches: 4", r"trainer\.accumulate_grad_batches=4"),
    ("  fp8: false", "  fp8: true", None),  # fp8_hybrid: read, not refused
    ("  global_batch_size: ${multiply:8, 16}  # 128", "  global_batch_size: 12", r"model\.global_batch_size=12"),
    # review7a: these ended in a ValueError traceback, or named the Megatron-LM flag instead of the file's key
    ("  num_query_groups: 4", "  num_query_groups: ${data_dir}", r"model\.num_query_groups='\$\{data_dir\}': an integer"),
    ("  make_vocab_size_divisible_by: 128", "  make_vocab_size_divisible_by: x", r"model\.make_vocab_size_divisible_by='x'"),
    ("  hidden_dropout: 0.0", "  hidden_dropout: abc", r"^model\.hidden_dropout='abc'"),
    ("  num_layers: 8", "  num_layers: 8.0", r"model\.num_layers=8\.0: .*whole number"),
    # OmegaConf keeps a quoted 'false' as a string, true where NeMo hands it to Megatron-Core (was read as false)
    ("  sequence_parallel: true", "  sequence_parallel: 'false'", r"model\.sequence_parallel='false': true or false unquoted"),
    # OmegaConf's loader refuses a key given twice (yaml.safe_load kept the last: 9 layers)
    ("  num_layers: 8", "  num_layers: 8\n  num_layers: 9", r"num_layers: given twice in one mapping \(lines \d+ and \d+\)"),
])
def test_refusals_name_the_field_in_one_line(tmp_path, old, new, match):
    assert old in CONFIG
    p = _write(tmp_path, CONFIG.replace(old, new))
    if match is None:
        assert load_recipe(p).training.precision == "fp8"
        return
    with pytest.raises((UserError, PlanError)) as e:
        load_recipe(p)
    line = _one_line(e.value)
    assert "\n" not in line and __import__("re").search(match, line), line


def test_tuned_write_back_edits_in_place_and_reads_back(tmp_path):
    p = _write(tmp_path, CONFIG)
    plan = load_recipe(p)
    tuned = plan.model_copy(update={
        "parallel": plan.parallel.model_copy(update={"tp": 4, "pp": 1, "vpp": 1}),
        "training": plan.training.model_copy(update={"micro_batch_size": 2, "global_batch_size": 256,
                                                     "pipeline_schedule": "1f1b"}),
        "cluster": plan.cluster.model_copy(update={"num_nodes": 4})})
    out = render_recipe(tuned, CONFIG)
    changed = [(a, b) for a, b in zip(CONFIG.splitlines(), out.splitlines()) if a != b]
    assert len(CONFIG.splitlines()) == len(out.splitlines())  # values replaced, nothing reflowed
    assert changed == [("  num_nodes: 2", "  num_nodes: 4"), ("  micro_batch_size: 1", "  micro_batch_size: 2"),
                       ("  global_batch_size: ${multiply:8, 16}  # 128", "  global_batch_size: 256  # 128"),
                       ("  tensor_model_parallel_size: 2", "  tensor_model_parallel_size: 4"),
                       ("  pipeline_model_parallel_size: 2", "  pipeline_model_parallel_size: 1"),
                       ("  virtual_pipeline_model_parallel_size: 2 # interleaved pipeline",
                        "  virtual_pipeline_model_parallel_size: null # interleaved pipeline")]
    assert "${multiply:${divide_floor:${.hidden_size}, 3}, 8}" in out  # untouched interpolations stay
    back = load_recipe(_write(tmp_path, out, "back.yaml"))
    assert _comparable(back) == _comparable(tuned)
    assert render_recipe(plan, CONFIG) == CONFIG  # an unchanged plan writes the file unchanged
    written = write_recipe(tuned)
    assert written == tuned_path(p) and p.read_text() == CONFIG  # never over the input


def test_project_dry_run_from_the_command_line(tmp_path):
    """The command line's answer, from the CLI's ``main`` in this process (``tests/cli_run.py``: the same argv,
    stdout and exit status; no second interpreter)."""
    from cli_run import run_cli

    p = _write(tmp_path, CONFIG)
    rc, out, err, _ = run_cli(["--project", str(p), "--dry-run"], Path(__file__).resolve().parents[1])
    assert rc == 0, err
    assert "tokens/s/GPU" in out and "2 x 8" in out


def test_tuner_searches_only_what_nemo1_can_write(tmp_path):
    """No Megatron-FSDP sharding, pipeline layouts, CUDA graphs or DeepEP for a NeMo 1.0 config: NeMo's
    MegatronGPTModel has no keys for them (the writer would add keys NeMo never reads)."""
    from primus_launch.tuner import rules
    from primus_launch.tuner.space import Space, SpaceConfig

    plan = load_recipe(_write(tmp_path, CONFIG))
    assert rules.knobs_for(plan) == frozenset({"tp_comm_overlap"})
    shardings = {k.dp_sharding for k in Space(plan, SpaceConfig(max_mbs=1, max_cp=1, max_vpp=2))}
    assert shardings <= {"none", "optimizer"}


def test_tuned_values_replace_null_keys_instead_of_adding_duplicates(tmp_path):
    from primus_launch.plan import Recompute

    text = CONFIG.replace("  virtual_pipeline_model_parallel_size: 2 # interleaved pipeline",
                          "  virtual_pipeline_model_parallel_size: null # interleaved pipeline")
    plan = load_recipe(_write(tmp_path, text))
    rc = Recompute(granularity="full", method="uniform", num_layers=1)
    tuned = plan.model_copy(update={"parallel": plan.parallel.model_copy(update={"vpp": 2}),
                                    "training": plan.training.model_copy(update={
                                        "recompute": rc, "pipeline_schedule": "interleaved_1f1b"})})
    out = render_recipe(tuned, text)
    for key in ("virtual_pipeline_model_parallel_size", "activations_checkpoint_granularity",
                "activations_checkpoint_method", "activations_checkpoint_num_layers"):
        assert out.count(f"\n  {key}:") == 1, key
    doc = yaml.safe_load(out)["model"]
    assert (doc["virtual_pipeline_model_parallel_size"], doc["activations_checkpoint_granularity"],
            doc["activations_checkpoint_method"], doc["activations_checkpoint_num_layers"]) == (2, "full", "uniform", 1)


def test_warnings_name_the_configs_keys_as_written(tmp_path):
    """user15 (NeMo-Framework-Launcher's conf/training/mixtral/mixtral_8x7b.yaml): ``masked_softmax_fusion: false``
    was warned as ``--no-masked-softmax-fusion=true``, a Megatron-LM flag the NeMo user never wrote; it is named as
    the config writes it, with its value."""
    text = CONFIG.replace("  hidden_dropout: 0.0", "  hidden_dropout: 0.0\n  masked_softmax_fusion: false")
    plan = load_recipe(_write(tmp_path, text))
    got = {(u.flag, u.value) for u in plan.source.unmodelled}
    assert ("model.masked_softmax_fusion", "false") in got
    assert not any(u.flag.startswith("--") for u in plan.source.unmodelled), got


def _legacy(method: str, layers: str, mcore: bool = False) -> str:
    """CONFIG as a 2023 launcher config: NeMo's own ParallelTransformer (no mcore_gpt), selective recompute with
    ``method`` / ``layers``; PP 2 over 8 layers (4 a stage)."""
    text = CONFIG.replace("  mcore_gpt: true\n", "  mcore_gpt: true\n" if mcore else "")
    return text.replace("  activations_checkpoint_method: null", f"  activations_checkpoint_method: {method}") \
        .replace("  activations_checkpoint_num_layers: null", f"  activations_checkpoint_num_layers: {layers}")


def test_selective_with_a_method_as_nemo_reads_it(tmp_path):
    # read18: 130 launcher configs of 2023 branches (gpt3/126m.yaml ...: selective, block, 0) were refused with
    # Megatron-LM's validate_args rule (no method with selective).  NeMo v1.20 nlp/modules/common/megatron/
    # transformer.py ParallelTransformer: block checkpoints core attention where `index < num_layers` (0: none),
    # uniform in every layer; Megatron-Core TransformerConfig (mcore_gpt) ignores the method under selective and
    # raises on a recompute_num_layers that is not None.
    none = load_recipe(_write(tmp_path, _legacy("block", "0")))
    assert none.training.recompute.granularity == "none"
    assert any("checkpoints no layer" in n for n in none.source.notes)
    every = load_recipe(_write(tmp_path, _legacy("uniform", "null"), "u.yaml"))
    assert every.training.recompute.granularity == "selective" and not every.source.unmodelled
    assert load_recipe(_write(tmp_path, _legacy("block", "4"), "b4.yaml")).training.recompute.granularity == "selective"
    part = load_recipe(_write(tmp_path, _legacy("block", "1"), "b1.yaml"))  # 1 of each stage's 4 layers
    assert part.training.recompute.granularity == "selective"
    assert [u.flag for u in part.source.unmodelled] == ["model.activations_checkpoint_num_layers"]
    assert load_recipe(_write(tmp_path, _legacy("block", "null", mcore=True), "m.yaml")).training.recompute \
        .granularity == "selective"
    with pytest.raises(PlanError, match="model.activations_checkpoint_num_layers=0: null with"):
        load_recipe(_write(tmp_path, _legacy("block", "0", mcore=True), "m0.yaml"))
    # tuned to selective on every layer: the file's block method is rewritten uniform, and reads back so
    text = _legacy("block", "0")
    tuned = none.with_changes(training={"recompute": {"granularity": "selective", "method": "uniform",
                                                      "num_layers": None}}).model_copy(update={"source": none.source})
    out = render_recipe(tuned, text)
    assert "  activations_checkpoint_method: uniform" in out
    assert load_recipe(_write(tmp_path, out, "back.yaml")).training.recompute.granularity == "selective"


@pytest.mark.parametrize("granularity,reported", [("null", False), ("selective", False), ("full", True)])
def test_partial_checkpoint_fields_reported_only_under_full_checkpointing(tmp_path, granularity, reported):
    """``num_micro_batches_with_partial_activation_checkpoints`` / ``activations_checkpoint_layers_per_pipeline`` pick
    which micro-batches / layers a *full* checkpoint covers: NeMo's ParallelTransformer reads them in
    ``_checkpointed_forward`` (method 'block'), run only under granularity 'full' (as megatron-core 0.16.1's
    TransformerBlock, ``recompute_granularity == 'full'``).  The launcher's llama2_13b.yaml sets both to 0 with
    granularity null: nothing to report (user16).  Under 'full' they are reported, not ignored."""
    old = "  activations_checkpoint_granularity: selective\n  activations_checkpoint_method: null\n"
    method = "block" if granularity == "full" else "null"
    num = "  activations_checkpoint_num_layers: 1" if granularity == "full" else "  activations_checkpoint_num_layers: null"
    text = (CONFIG.replace(old, f"  activations_checkpoint_granularity: {granularity}\n"
                                f"  activations_checkpoint_method: {method}\n")
            .replace("  activations_checkpoint_num_layers: null", num + "\n  activations_checkpoint_layers_per_pipeline: 0\n"
                     "  num_micro_batches_with_partial_activation_checkpoints: 0"))
    assert old in CONFIG and "per_pipeline" in text
    plan = load_recipe(_write(tmp_path, text))
    flags = {u.flag for u in plan.source.unmodelled}
    keys = {"model.activations_checkpoint_layers_per_pipeline", "model.num_micro_batches_with_partial_activation_checkpoints"}
    assert (keys <= flags) is reported and not (keys & flags and not reported)
