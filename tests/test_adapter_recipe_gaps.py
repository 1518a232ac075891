"""Reader gaps the public-recipe surveys found (scripts/survey_recipes.py, scripts/survey_primus_titan.py).

Each case is a small file written from the upstream format's facts (CI has no Primus / Megatron-LM
checkout); the truth is what the file says, the framework's own rule (Primus's Turbo DeepEP patch,
its sync-free MoE options, megatron-core's ``is_layer_window_attention``, PyYAML's merge keys) or a
round trip through the writer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from primus_launch.adapters.megatron import load_megatron, render_megatron
from primus_launch.adapters.megatron_vocab import table_vocab
from primus_launch.adapters.primus_yaml import load_primus_yaml, render_primus_yaml
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, PlanError
from test_adapter_primus import MEGATRON_EXP, TREE, _tree

NODE = Cluster(gpu="mi355x", num_nodes=1, gpus_per_node=8)


def _exp(root: Path, extra: str, env: dict | None = None, model: str = "llama3_8B") -> Path:
    """The test tree's Megatron experiment with ``extra`` lines appended to its overrides."""
    p = root / "examples/megatron/configs/MI355X/llama3_8B-BF16-pretrain.yaml"
    p.write_text(MEGATRON_EXP.replace("${PRIMUS_MODEL:llama3_8B}", model)
                 .replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n" + extra))
    return p


@pytest.fixture
def primus(tmp_path):
    return _tree(tmp_path)


def _roundtrip(p: Path, plan) -> str:
    """The unchanged plan renders the file byte for byte; a tuned one (micro-batch 2) renders, re-reads
    as requested and changes only the micro-batch line.  Returns the tuned text."""
    text = p.read_text()
    assert render_primus_yaml(plan, text, p, env={}) == text
    q = plan.with_changes(training={"micro_batch_size": 2})
    out = render_primus_yaml(q, text, p, env={})
    changed = [(a, b) for a, b in zip(text.splitlines(), out.splitlines()) if a != b]
    assert len(out.splitlines()) == len(text.splitlines()) and changed == [
        ("      micro_batch_size: 1", "      micro_batch_size: 2")], changed
    return out


# ----------------------------------------------------------------------------- Primus MoE knobs
def test_turbo_deepep_round_trip_keeps_the_file(primus):
    # Primus's moe_dispatcher patch sets moe_token_dispatcher_type=flex itself when use_turbo_deepep
    # (primus/backends/megatron/patches/turbo/moe_dispatcher_patches.py): the file never says flex
    p = _exp(primus, "      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n"
                     "      use_turbo_deepep: true\n      moe_router_dtype: fp32\n", model="moe_tiny")
    plan = load_primus_yaml(p, NODE, env={})
    assert plan.training.moe_token_dispatcher == "deepep" and plan.parallel.ep == 4
    assert "moe_token_dispatcher_type" not in _roundtrip(p, plan)


def test_sync_free_stage_one_permute_fusion_round_trip(primus):
    # rocm_arg_validation._get_sync_free_moe_options: stage 1 turns on moe_permute_fusion
    p = _exp(primus, "      tensor_model_parallel_size: 1\n      expert_model_parallel_size: 4\n"
                     "      enable_primus_turbo: true\n      turbo_sync_free_moe_stage: 1\n", model="moe_tiny")
    plan = load_primus_yaml(p, NODE, env={})
    assert plan.training.moe_permute_fusion and plan.training.moe_token_dispatcher == "alltoall"
    assert "moe_permute_fusion" not in _roundtrip(p, plan)


# ----------------------------------------------------------------------------- Primus values
def test_window_size_as_a_yaml_list(primus):
    # GPT-OSS MLPerf config: window_size: [128, 0] and a per-layer list (Primus passes lists to Megatron)
    pattern = [1, 0] * 16
    p = _exp(primus, f"      window_size: [128, 0]\n      window_attn_skip_freq: {pattern}\n")
    plan = load_primus_yaml(p, NODE, env={})
    from megatron.core.transformer.utils import is_layer_window_attention

    assert plan.model.window_size == 128
    assert [plan.model.is_window_layer(i) for i in range(32)] == [
        is_layer_window_attention((128, 0), pattern, i + 1) for i in range(32)]
    _roundtrip(p, plan)


def test_mxfp4_recipe_reported_and_kept(primus):
    p = _exp(primus, "      fp4: e2m1\n      fp4_recipe: mxfp4\n")
    plan = load_primus_yaml(p, NODE, env={})
    assert plan.training.precision == "fp4" and plan.training.fp4_recipe is None
    assert ("--fp4-recipe", "mxfp4") in {(w.flag, w.value) for w in plan.source.unmodelled}
    assert "      fp4_recipe: mxfp4" in _roundtrip(p, plan).splitlines()


# ----------------------------------------------------------------------------- refusals by name
@pytest.mark.parametrize("extra,field", [
    # Qwen3.5 / Qwen3-Next preset: gated delta-net linear attention
    ("      experimental_attention_variant: gated_delta_net\n      linear_attention_freq: 4\n",
     "experimental_attention_variant='gated_delta_net'"),
    # LFM2 preset: short-convolution layers among the attention layers (Primus gpt_layer_specs)
    ("      lfm_layer_types: [conv, conv, full_attention" + ", conv" * 29 + "]\n", "lfm_layer_types="),
    ("      is_hybrid_model: true\n", "is_hybrid_model=True"),
    # Primus recompute of chosen layers without full granularity (Primus raises; read: test_recompute_layer_ids)
    ("      recompute_layer_ids: [0, 1]\n", "full when using recompute_layer_ids"),
])
def test_refused_by_name_in_one_line(primus, extra, field):
    with pytest.raises(PlanError) as ei:
        load_primus_yaml(_exp(primus, extra), NODE, env={})
    assert field in str(ei.value) and "\n" not in str(ei.value), str(ei.value)


def test_lfm_all_attention_reads_as_gpt(primus):
    plan = load_primus_yaml(_exp(primus, "      lfm_layer_types: [" + ", ".join(["full_attention"] * 32) + "]\n"),
                            NODE, env={})
    assert plan.model.num_layers == 32


def test_not_an_experiment_names_what_is_missing(primus):
    p = primus / "examples/megatron/configs/MI355X/te-precision.yaml"
    p.write_text("configs:\n  bf16:\n    training_recipe: {}\n")
    with pytest.raises(UserError, match="not a Primus experiment: no modules mapping"):
        load_primus_yaml(p, NODE, env={})


# ----------------------------------------------------------------------------- vocabulary table
@pytest.mark.parametrize("name,vocab", [("THUDM/glm-4-9b", 151552), ("zai-org/GLM-4.5-Air", 151552),
                                        ("MiniMaxAI/MiniMax-M2.5", 200064), ("zai-org/GLM-5", None),
                                        ("LiquidAI/LFM2-8B-A1B", None),
                                        # read18: NeMo launcher configs naming these ids were refused (config.json)
                                        ("bigcode/starcoder2-tokenizer", 49152), ("tiiuae/falcon-7b", 65024),
                                        ("THUDM/chatglm2-6b", 65024), ("THUDM/chatglm3-6b", 65024),
                                        ("THUDM/chatglm-6b", None)])
def test_public_tokenizer_table(name, vocab):
    hit = table_vocab(name)
    assert (hit[0] if hit else None) == vocab


def test_preset_tokenizer_gives_the_vocabulary_padded_as_megatron(primus):
    (primus / "primus/configs/models/megatron/glm_tiny.yaml").write_text(
        TREE["primus/configs/models/megatron/llama3_8B.yaml"].replace("meta-llama/Llama-3.1-8B", "THUDM/glm-4-9b"))
    plan = load_primus_yaml(_exp(primus, "", model="glm_tiny"), NODE, env={})
    # megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding: multiple of 128 x TP (TP=2)
    assert plan.model.vocab_size == 151552 and plan.model.padded_vocab_size(plan.parallel.tp) == 151552


# ----------------------------------------------------------------------------- NVIDIA YAMLs
FUNCTIONAL = """ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ENV_VARS:
  MODEL_ARGS:
    GPUS_PER_NODE: 1
BASE_MODEL_ARGS: &BASE_MODEL_ARGS
  --num-layers: 12
  --hidden-size: 512
  --num-attention-heads: 8
  --seq-length: 1024
  --max-position-embeddings: 1024
  --vocab-size: 32000
  --recompute-granularity: full
  --recompute-method: uniform
  --recompute-num-layers: 1
  --micro-batch-size: 4
  --bf16: true
MODEL_ARGS:
  <<: *BASE_MODEL_ARGS
  --micro-batch-size: 2
  --global-batch-size: 32
MODEL_ARGS_2:
  <<: *BASE_MODEL_ARGS
  --global-batch-size: 64
TEST_TYPE: checkpoint-consistency
"""


def test_functional_test_merge_keys(tmp_path):
    f = tmp_path / "model_config.yaml"
    f.write_text(FUNCTIONAL)
    one = Cluster(num_nodes=1, gpus_per_node=1)
    plan = load_megatron(f, one)
    truth = yaml.safe_load(FUNCTIONAL)["MODEL_ARGS"]  # PyYAML's own merge: local keys win
    m, t = plan.model, plan.training
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.seq_length, m.vocab_size) == (
        truth["--num-layers"], truth["--hidden-size"], truth["--num-attention-heads"], truth["--seq-length"],
        truth["--vocab-size"])
    assert (t.micro_batch_size, t.global_batch_size, t.precision) == (2, 32, "bf16")
    assert (t.recompute.granularity, t.recompute.method, t.recompute.num_layers) == ("full", "uniform", 1)
    text = f.read_text()
    assert render_megatron(plan, text) == text
    # a tuned value of a key only the shared anchor holds is added to MODEL_ARGS, where it wins
    q = plan.with_changes(training={"recompute": {"granularity": "full", "method": "block", "num_layers": 2}})
    out = render_megatron(q, text)
    assert out.count("--recompute-method: uniform") == 1 and yaml.safe_load(out)["MODEL_ARGS_2"][
        "--recompute-method"] == "uniform"
    f2 = tmp_path / "tuned.yaml"
    f2.write_text(out)
    back = load_megatron(f2, one)
    assert back.training.recompute == q.training.recompute


def test_empty_model_args_is_not_a_recipe(tmp_path):
    f = tmp_path / "model_config.yaml"
    f.write_text("ENV_VARS:\n  NCCL_ALGO: Tree\nMODEL_ARGS:\nTEST_TYPE: regular\n")
    with pytest.raises(UserError, match="MODEL_ARGS is empty: no Megatron arguments"):
        load_megatron(f, Cluster(num_nodes=1, gpus_per_node=8))


def test_microbatch_group_size_read_where_megatron_accepts_it(tmp_path):
    # megatron/core/pipeline_parallel/schedules.py: the group size must lie in [pp, M] and the last
    # group be empty or >= pp; the default group (pp) with M=10, pp=4 is illegal, group 5 is legal
    body = FUNCTIONAL.replace("  --global-batch-size: 32\n", "  --global-batch-size: 40\n"
                              "  --pipeline-model-parallel-size: 4\n  --num-layers-per-virtual-pipeline-stage: 1\n"
                              "  --microbatch-group-size-per-virtual-pipeline-stage: 5\n")
    f = tmp_path / "model_config.yaml"
    f.write_text(body)
    plan = load_megatron(f, Cluster(num_nodes=1, gpus_per_node=8))  # dp 2: M = 40 / (2 x 2) = 10
    assert (plan.parallel.vpp, plan.parallel.microbatch_group, plan.num_microbatches) == (3, 5, 10)
    assert "--microbatch-group-size-per-virtual-pipeline-stage" not in {w.flag for w in plan.source.unmodelled}
    # M = 16 in groups of 5 leaves a last group of 1 < pp: Megatron raises, so does the reader
    f.write_text(body.replace("--global-batch-size: 40", "--global-batch-size: 64"))
    with pytest.raises(PlanError, match="global-batch-size|global_batch_size"):
        load_megatron(f, Cluster(num_nodes=1, gpus_per_node=8))


def test_uneven_pipeline_split_names_the_ways_out(tmp_path):
    # megatron/training/arguments.py validate_args: with no uneven-stage flag and no virtual stages,
    # (num_layers + account-for) % pp must be 0 (GPT-OSS example 02_train.sh: 12 layers on PP=8)
    f = tmp_path / "model_config.yaml"
    f.write_text(FUNCTIONAL.replace("  --global-batch-size: 32\n", "  --global-batch-size: 32\n"
                                    "  --pipeline-model-parallel-size: 8\n"))
    with pytest.raises(PlanError) as ei:
        load_megatron(f, Cluster(num_nodes=1, gpus_per_node=8))
    msg = str(ei.value)
    assert msg.startswith("--pipeline-model-parallel-size=8: must divide --num-layers=12") and "\n" not in msg
    assert "--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 3" in msg  # user20: a pair
    f.write_text(FUNCTIONAL.replace("  --global-batch-size: 32\n", "  --global-batch-size: 32\n"
                                    "  --pipeline-model-parallel-size: 8\n  --decoder-first-pipeline-num-layers: 5\n"
                                    "  --decoder-last-pipeline-num-layers: 1\n"))
    plan = load_megatron(f, Cluster(num_nodes=1, gpus_per_node=8))
    assert [len([x for c in r for x in c.layers]) for r in plan.chunk_layout()] == [5, 1, 1, 1, 1, 1, 1, 1]


@pytest.mark.parametrize("extra,field", [
    # Primus sft_trainer.yaml: stage sft; LoRA adapters freeze the base weights
    ("      stage: sft\n      lora:\n        enabled: true\n        dim: 32\n", "lora.enabled=True: LoRA fine-tuning"),
    ("      stage: sft\n      lora:\n        enabled: false\n", "stage='sft': supervised fine-tuning"),
])
def test_fine_tuning_refused_by_name(primus, extra, field):
    with pytest.raises(PlanError) as ei:
        load_primus_yaml(_exp(primus, extra), NODE, env={})
    assert str(ei.value).startswith(field) and "\n" not in str(ei.value), str(ei.value)


@pytest.mark.parametrize("layers,ok", [(32, True), (8, False)])
def test_titan_preset_layer_count(primus, layers, ok):
    # Primus torchtitan presets may write model.n_layers next to the flavor (llama3.1_405B.yaml: 126)
    preset = primus / "primus/configs/models/torchtitan/llama3.1_8B-fp8.yaml"
    preset.write_text(preset.read_text().replace('  flavor: "8B"\n', f'  flavor: "8B"\n  n_layers: {layers}\n'))
    exp = primus / "examples/torchtitan/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml"
    if ok:  # torchtitan's own llama3 8B flavor has 32 layers
        plan = load_primus_yaml(exp, env={})
        assert plan.model.num_layers == 32 and "model.n_layers" not in {w.flag for w in plan.source.unmodelled}
    else:
        with pytest.raises(PlanError, match=r"model.n_layers=8: differs from llama3 8B's 32"):
            load_primus_yaml(exp, env={})
