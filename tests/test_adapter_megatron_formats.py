"""Megatron-LM recipe formats (issue 11): NVIDIA nested YAMLs, launch-script constructs, every new
plan field read field by field, the writer expressing the tunable ones in each format's idiom,
vocabulary, model-family refusals and the CLI contract.

The files are minimal ones written from the upstream formats' facts (Megatron-LM
``examples/moe_recipes/**.yaml`` ``ARGS:`` blocks with underscore flag names, functional tests'
``model_config.yaml`` ``MODEL_ARGS:`` with ``--flag`` keys, ``examples/*/train_*.sh``); expected values
are what the file says and Megatron-LM's documented semantics (``arguments.py``, ``gpt_layer_specs.py``,
``transformer/utils.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primus_launch.adapters.megatron import load_megatron, render_megatron
from primus_launch.errors import UserError, one_line
from primus_launch.plan import Cluster, PlanError

# --------------------------------------------------------------------------- NVIDIA moe_recipes YAML
MOE_RECIPE = """\
DEPENDENCIES:
  pytorch_base_image: nvcr.io/nvidia/pytorch:26.03-py3
  dockerfile: |
    RUN bash -ex <<"EOF"
      pip install nothing
    EOF
ENV_VARS:
  NVTE_FUSED_ATTN: '1'
  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True
ARGS:
  tokenizer_type: HuggingFaceTokenizer
  tokenizer_model: unsloth/DeepSeek-V3
  num_layers: 4
  hidden_size: 1024
  ffn_hidden_size: 4096
  num_attention_heads: 16
  kv_channels: 64
  max_position_embeddings: 4096
  normalization: RMSNorm
  swiglu: true
  disable_bias_linear: true
  untie_embeddings_and_output_weights: true
  position_embedding_type: rope
  make_vocab_size_divisible_by: 3232
  multi_latent_attention: true
  q_lora_rank: 256
  kv_lora_rank: 128
  num_experts: 16
  moe_layer_freq: ([0]*1+[1]*3)
  moe_ffn_hidden_size: 512
  moe_shared_expert_intermediate_size: 512
  moe_router_topk: 4
  moe_router_fusion: true
  moe_z_loss_coeff: 0.001   # not modelled: reported
  mtp_num_layers: 1
  attention_dropout: 0.0
  hidden_dropout: 0.0
  seq_length: 4096
  moe_router_force_load_balancing: true
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 2
  expert_model_parallel_size: 8
  pipeline_model_parallel_layout: Et|(t|)*2tmL
  use_distributed_optimizer: true
  delay_wgrad_compute: true
  overlap_moe_expert_parallel_comm: true
  moe_token_dispatcher_type: flex
  moe_flex_dispatcher_backend: hybridep
  moe_grouped_gemm: true
  moe_permute_fusion: true
  recompute_granularity: selective
  recompute_modules:
  - mla_up_proj
  - mlp
  cuda_graph_impl: transformer_engine
  cuda_graph_scope:
  - attn
  - moe_router
  micro_batch_size: 1
  global_batch_size: 64
  cross_entropy_loss_fusion: true
  bf16: true
  fp8_recipe: blockwise
  fp8_format: e4m3
  fp8_param_gather: true
  use_precision_aware_optimizer: true
  exp_avg_dtype: bf16
  exp_avg_sq_dtype: bf16
  some_fork_only_knob: 3
  no_save_optim: true
"""


def _write(tmp_path: Path, rel: str, text: str) -> Path:
    p = tmp_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_moe_recipe_yaml_field_by_field(tmp_path):
    path = _write(tmp_path, "deepseek_v3/gb200/mxfp8_16GPU_TP1PP2EP8.yaml", MOE_RECIPE)
    plan = load_megatron(path)
    m, p, t, c = plan.model, plan.parallel, plan.training, plan.cluster
    assert plan.source.format == "megatron-nvidia-yaml"
    # the cluster comes from the path (folder = GPU, N GPU in the name), stated as a guess
    assert (c.gpu, c.num_nodes, c.gpus_per_node, c.nvlink_domain) == ("gb200", 4, 4, 72)
    assert any("guessed from the recipe's path" in n for n in plan.source.notes)
    # architecture
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.head_dim) == (4, 1024, 4096, 64)
    assert not m.add_bias_linear and m.swiglu and m.activation == "silu" and m.normalization == "rmsnorm"
    assert m.multi_latent_attention and (m.q_lora_rank, m.kv_lora_rank) == (256, 128)
    assert (m.num_experts, m.moe_router_topk, m.moe_ffn_hidden_size, m.moe_shared_expert_intermediate_size) == (
        16, 4, 512, 512)
    assert [m.is_moe_layer(i) for i in range(4)] == [False, True, True, True]
    assert m.mtp_num_layers == 1 and (m.attention_dropout, m.hidden_dropout) == (0.0, 0.0)
    # vocabulary: unsloth/DeepSeek-V3 = deepseek-ai/DeepSeek-V3 config.json vocab_size, padded as Megatron pads
    assert m.vocab_size == 129280 and m.padded_vocab_size(p.tp) == 129280
    # parallel layout: the layout string gives vpp = 4 stages / pp 2
    assert (p.tp, p.pp, p.vpp, p.ep, p.pipeline_layout) == (1, 2, 2, 8, "Et|(t|)*2tmL")
    assert [[len(ch.layers) for ch in rank] for rank in plan.chunk_layout()] == [[1, 1], [1, 1]]
    assert plan.chunk_layout()[1][1].mtp == 1 and plan.chunk_layout()[1][1].loss
    assert p.dp_sharding == "optimizer"
    # training
    assert (t.precision, t.fp8_recipe, t.fp8_param_gather) == ("fp8", "blockwise", True)
    assert t.precision_aware_optimizer and (t.exp_avg_dtype, t.exp_avg_sq_dtype, t.main_params_dtype) == (
        "bf16", "bf16", "fp32")
    assert t.recompute.granularity == "selective" and t.recompute.modules == ("mla_up_proj", "mlp")
    assert (t.cuda_graph_impl, t.cuda_graph_scope) == ("transformer_engine", ("attn", "moe_router"))
    assert t.moe_token_dispatcher == "hybridep" and t.moe_grouped_gemm and t.moe_permute_fusion
    assert t.overlap_moe_expert_parallel_comm and t.delay_wgrad_compute and t.moe_router_force_load_balancing
    assert t.cross_entropy_loss_fusion and (t.micro_batch_size, t.global_batch_size) == (1, 64)
    # what is not modelled is said, once each; unknown keys are notes; neutral ones are silent
    flags = {u.flag: u.value for u in plan.source.unmodelled}
    assert flags == {"--moe-z-loss-coeff": "0.001"} and t.moe_router_fusion
    assert any("--some-fork-only-knob" in n and "unknown" in n for n in plan.source.notes)
    # an unchanged plan renders the same bytes
    assert render_megatron(plan, MOE_RECIPE) == MOE_RECIPE


def test_megatron_defaults_the_reader_must_set(tmp_path):
    """Megatron defaults that differ from the plan's: dropout 0.1, grouped GEMM off, allgather dispatcher,
    non-gated GeLU."""
    text = MOE_RECIPE
    # (the EP overlap and delayed wgrad go too: megatron-core refuses the overlap with the allgather dispatcher)
    for key in ("attention_dropout", "hidden_dropout", "moe_grouped_gemm", "moe_permute_fusion",
                "moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "swiglu",
                "overlap_moe_expert_parallel_comm", "delay_wgrad_compute"):
        text = "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith(key + ":")) + "\n"
    plan = load_megatron(_write(tmp_path, "x.yaml", text), Cluster(num_nodes=2, gpus_per_node=8))
    m, t = plan.model, plan.training
    assert (m.attention_dropout, m.hidden_dropout) == (0.1, 0.1)
    assert not t.moe_grouped_gemm and not t.moe_permute_fusion and t.moe_token_dispatcher == "allgather"
    assert not m.swiglu and m.activation == "gelu"


# --------------------------------------------------------------------------- functional-test MODEL_ARGS
MODEL_ARGS = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  # Distributed args
  --tensor-model-parallel-size: 2
  --pipeline-model-parallel-size: 2
  --num-virtual-stages-per-pipeline-rank: 2
  --account-for-embedding-in-pipeline-split: true
  --account-for-loss-in-pipeline-split: true
  --context-parallel-size: 2
  --cp-comm-type: a2a
  --sequence-parallel: true
  --use-megatron-fsdp: true
  --data-parallel-sharding-strategy: "optim_grads"
  --use-distributed-optimizer: true
  # Network
  --num-layers: 6
  --hidden-size: 512
  --num-attention-heads: 8
  --group-query-attention: true
  --num-query-groups: 4
  --kv-channels: 64
  --seq-length: 1024
  --max-position-embeddings: 1024
  --position-embedding-type: yarn
  --quick-geglu: true
  --softmax-type: learnable
  --window-size: 128,0
  --window-attn-skip-freq: 2
  --add-qkv-bias: true
  --attention-backend: fused
  --micro-batch-size: 1
  --step-batch-size-schedule: "0:16 2B:32"
  --vocab-size: 1000
  --tokenizer-type: NullTokenizer
  --bf16: true
  --recompute-granularity: full
  --recompute-method: block
  --recompute-num-layers: 8
  --cpu-offloading-num-layers: 1
  --optimizer-cpu-offload: true
  --optimizer-offload-fraction: 0.5
  --manual-gc: true
  --log-interval: 1
TEST_TYPE: regular
"""


def test_functional_test_model_args_field_by_field(tmp_path):
    plan = load_megatron(_write(tmp_path, "model_config.yaml", MODEL_ARGS), Cluster(num_nodes=1, gpus_per_node=8))
    m, p, t = plan.model, plan.parallel, plan.training
    assert plan.source.format == "megatron-nvidia-yaml"
    assert (p.tp, p.pp, p.vpp, p.cp, p.cp_comm_type, p.sequence_parallel) == (2, 2, 2, 2, "a2a", True)
    assert p.account_for_embedding_in_pipeline_split and p.account_for_loss_in_pipeline_split
    # (6 layers + embedding + loss) / (pp 2 x vpp 2) = 2 slots per virtual stage
    assert [[len(c.layers) for c in rank] for rank in plan.chunk_layout()] == [[1, 2], [2, 1]]
    assert p.dp_sharding == "optimizer_grads"  # Megatron-FSDP optim_grads (ZeRO-2)
    assert (m.num_query_groups, m.head_dim, m.position_embedding, m.softmax_type) == (4, 64, "yarn", "learnable")
    assert m.swiglu and m.activation == "quick_gelu" and m.add_qkv_bias and m.add_bias_linear
    # --window-attn-skip-freq 2: layers 2, 4, 6 (1-based) keep full attention
    assert m.window_size == 128 and [m.is_window_layer(i) for i in range(6)] == [True, False] * 3
    assert (m.attention_dropout, m.hidden_dropout) == (0.1, 0.1)  # Megatron's defaults
    assert m.vocab_size == 1001  # NullTokenizer adds EOD
    # the steady batch of the schedule, said so
    assert t.global_batch_size == 32 and any("steady batch 32" in n for n in plan.source.notes)
    # block recompute of more layers than a chunk holds: the whole chunk, as Megatron accepts
    assert (t.recompute.granularity, t.recompute.method, t.recompute.num_layers) == ("full", "block", 8)
    assert t.attention_backend == "fused"
    assert (t.offload.activation_layers, t.offload.optimizer_fraction) == (1, 0.5)
    assert not plan.source.unmodelled and (t.manual_gc, t.manual_gc_interval) == (True, 0)  # read (moonstep)
    assert render_megatron(plan, MODEL_ARGS) == MODEL_ARGS


def test_megatron_validate_args_rules_are_one_line_errors(tmp_path):
    cl = Cluster(num_nodes=1, gpus_per_node=8)
    bad = MODEL_ARGS.replace("  --micro-batch-size: 1\n", "  --micro-batch-size: 1\n  --global-batch-size: 16\n")
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "a.yaml", bad), cl)
    assert one_line(e.value).startswith("--step-batch-size-schedule=") and "--global-batch-size" in one_line(e.value)
    bad = MODEL_ARGS.replace("  --num-virtual-stages-per-pipeline-rank: 2\n",
                             "  --num-virtual-stages-per-pipeline-rank: 2\n  --num-layers-per-virtual-pipeline-stage: 1\n")
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "b.yaml", bad), cl)
    assert "Megatron asserts" in one_line(e.value)
    bad = MODEL_ARGS.replace("  --bf16: true\n", "  --bf16: true\n  --fp8-format: hybrid\n  --fp4-format: e2m1\n")
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "c.yaml", bad), cl)
    assert one_line(e.value).startswith("--fp4-format='e2m1'")


# --------------------------------------------------------------------------- launch-script constructs
FRAGMENT = """\
# model sizes, sourced by the launch script
SEQ=2048
MODEL_ARGS=(--seq-length $SEQ --max-position-embeddings $SEQ)
"""

SCRIPT = r'''#!/bin/bash
# primus-launch: gpu=h100-sxm
source "$(dirname "$0")/model.env"
SIZE=${1:-small}
TOKENIZER=${2:-MOCK}
case "$SIZE" in
    small) LAYERS=4; HIDDEN=512 ;;
    big|large)
        LAYERS=8
        HIDDEN=1024
        ;;
    *) echo "unknown size"; exit 1 ;;
esac
if [[ "$TOKENIZER" == "MOCK" ]]; then
    TOK_ARGS=(--tokenizer-type NullTokenizer --vocab-size 1000)
else
    TOK_ARGS=(--tokenizer-type HuggingFaceTokenizer --tokenizer-model $TOKENIZER)
fi
diff <(echo a) <(echo b) > /dev/null
for n in 1 2; do echo $n; done
build_args() {
    local tp=$1
    ARGS=(--num-layers $LAYERS --hidden-size $HIDDEN --num-attention-heads 8 --tensor-model-parallel-size $tp)
}
build_args 2
CMD="torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py ${ARGS[*]} ${MODEL_ARGS[*]} ${TOK_ARGS[*]} \
  --micro-batch-size 1 --global-batch-size 64 --bf16 --recompute-granularity selective \
  --recompute-modules core_attn mlp --rampup-batch-size 16 16 1000"
srun --nodes=2 bash -c "$CMD"
'''


def _script(tmp_path: Path) -> Path:
    _write(tmp_path, "model.env", FRAGMENT)
    p = _write(tmp_path, "train.sh", SCRIPT)
    return p


def test_case_functions_source_positional_and_bash_c(tmp_path):
    path = _script(tmp_path)
    plan = load_megatron(path)
    m, p, t = plan.model, plan.parallel, plan.training
    assert plan.source.format == "megatron-bash"
    assert (m.num_layers, m.hidden_size, m.seq_length, m.vocab_size) == (4, 512, 2048, 1001)  # case small, sourced SEQ
    assert p.tp == 2  # the function's $1
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (2, 8)  # torchrun inside bash -c
    assert t.recompute.modules == ("core_attn", "mlp") and t.global_batch_size == 64
    notes = " ".join(plan.source.notes)
    assert "process substitution" in notes and "'for' loop not evaluated" not in notes  # `for n in 1 2`: run
    assert "--rampup-batch-size" in notes and "source" in notes
    # positional parameters: the case arm and the tokenizer come from $1 / $2
    big = load_megatron(path, script_args=("large", "Qwen/Qwen3-8B"))
    assert (big.model.num_layers, big.model.hidden_size, big.model.vocab_size) == (8, 1024, 151936)
    assert big.source.script_args == ["large", "Qwen/Qwen3-8B"]


def test_script_edits_land_inside_the_bash_c_string(tmp_path):
    path = _script(tmp_path)
    plan = load_megatron(path)
    new = plan.with_changes(training={"micro_batch_size": 2, "recompute": {"modules": ("core_attn", "mlp", "moe_act")}})
    out = render_megatron(new.model_copy(update={"source": plan.source}), SCRIPT)
    assert "--micro-batch-size 2 --global-batch-size 64" in out
    assert "--recompute-modules core_attn mlp moe_act --rampup" in out
    back = load_megatron(_write(tmp_path, "train2.sh", out))
    assert back.training.micro_batch_size == 2 and back.training.recompute.modules == ("core_attn", "mlp", "moe_act")


def test_unevaluable_value_is_a_note_not_a_parse_error(tmp_path):
    text = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
            "--seq-length 64 --micro-batch-size 1 --vocab-size 100 --data-path $(cat paths.txt) <(cat x)\n")
    plan = load_megatron(_write(tmp_path, "r.sh", text))
    assert any("command substitution" in n for n in plan.source.notes)
    assert any("process substitution" in n for n in plan.source.notes)


# --------------------------------------------------------------------------- writer: every tunable field
def _changes_roundtrip(tmp_path: Path, name: str, text: str, changes: dict, cluster: Cluster | None = None):
    path = _write(tmp_path, name, text)
    plan = load_megatron(path, cluster)
    new = plan.with_changes(**changes).model_copy(update={"source": plan.source})
    out = render_megatron(new, text)
    assert out != text
    back = load_megatron(_write(tmp_path, "back_" + name, out), cluster)
    return new, back, out


TUNABLE = dict(
    parallel={"pipeline_layout": None, "pp": 2, "vpp": 1, "pipeline_layers_first_stage": 1,
              "pipeline_layers_last_stage": 3},
    training={"recompute": {"granularity": "selective", "modules": ("core_attn", "moe_act")}, "pipeline_schedule": "1f1b",
              "cuda_graph_impl": "local", "cuda_graph_scope": ("attn",), "overlap_moe_expert_parallel_comm": False,
              "delay_wgrad_compute": False, "moe_token_dispatcher": "deepep", "fp8_recipe": "mxfp8",
              "fp8_param_gather": False, "exp_avg_dtype": "fp32", "exp_avg_sq_dtype": "fp16",
              "offload": {"activation_layers": 1, "optimizer_fraction": 1.0}},
)


def _same_tunables(a, b) -> None:
    for sec in ("parallel", "training"):
        da, db = getattr(a, sec).model_dump(), getattr(b, sec).model_dump()
        assert da == db, {k: (da[k], db[k]) for k in da if da[k] != db[k]}


def test_writer_underscore_yaml_expresses_new_fields(tmp_path):
    new, back, out = _changes_roundtrip(tmp_path, "deepseek_v3/gb200/mxfp8_16GPU_TP1PP2EP8.yaml", MOE_RECIPE, TUNABLE)
    _same_tunables(new, back)
    assert "decoder_first_pipeline_num_layers: 1" in out and "pipeline_model_parallel_layout" not in out
    assert "  - core_attn\n  - moe_act\n" in out and "cuda_graph_impl: local" in out
    assert "moe_flex_dispatcher_backend: deepep" in out and "fp8_recipe: mxfp8" in out
    assert "cpu_offloading_num_layers: 1" in out and "optimizer_cpu_offload: true" in out
    assert "DEPENDENCIES:" in out and "moe_z_loss_coeff: 0.001   # not modelled: reported" in out  # rest kept


def test_writer_dash_flag_yaml_expresses_new_fields(tmp_path):
    cl = Cluster(num_nodes=1, gpus_per_node=8)
    # the fixture has attention sinks: flash leaves TE no backend, nor does ring CP (plan/te_attention.py)
    changes = dict(parallel={"dp_sharding": "full", "account_for_embedding_in_pipeline_split": False,
                             "account_for_loss_in_pipeline_split": False, "vpp": 1, "cp": 1, "cp_comm_type": "p2p"},
                   training={"attention_backend": "unfused", "cuda_graph_impl": "transformer_engine", "pipeline_schedule": "1f1b",
                             "offload": {"optimizer_fraction": 0.0, "activation_layers": 0},
                             "recompute": {"granularity": "selective", "method": "uniform", "num_layers": None,
                                           "modules": ("core_attn", "layernorm")}})
    new, back, out = _changes_roundtrip(tmp_path, "model_config.yaml", MODEL_ARGS, changes, cl)
    _same_tunables(new, back)
    assert '--data-parallel-sharding-strategy: "optim_grads_params"' in out or \
        "--data-parallel-sharding-strategy: optim_grads_params" in out
    # the functional-test runner's list form (user20: brackets stripped, words split; test_functional_test_lists)
    assert '--recompute-modules: "[core_attn layernorm]"' in out and "--attention-backend: unfused" in out
    assert "--manual-gc: true" in out and "# Distributed args" in out


def test_writer_script_expresses_new_fields(tmp_path):
    base = ("torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \\\n"
            "    --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 \\\n"
            "    --max-position-embeddings 1024 --vocab-size 1000 --micro-batch-size 1 --global-batch-size 16 \\\n"
            "    --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 --moe-grouped-gemm \\\n"
            "    --pipeline-model-parallel-size 2 --bf16 --fp8-format hybrid --use-distributed-optimizer\n")
    changes = dict(parallel={"pipeline_layout": "Et|tt|t|L", "vpp": 2, "account_for_loss_in_pipeline_split": False},
                   training={"moe_token_dispatcher": "hybridep", "overlap_moe_expert_parallel_comm": True,
                             "delay_wgrad_compute": True, "fp8_recipe": "tensorwise", "fp8_param_gather": True,
                             "precision_aware_optimizer": True, "exp_avg_dtype": "bf16",
                             "cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ("attn", "moe_router"),
                             "pipeline_schedule": "interleaved_1f1b",
                             "offload": {"activation_modules": ("expert_fc1", "moe_act")}})
    new, back, out = _changes_roundtrip(tmp_path, "moe.sh", base, changes)
    _same_tunables(new, back)
    for s in ("--pipeline-model-parallel-layout 'Et|tt|t|L'", "--moe-token-dispatcher-type flex",
              "--moe-flex-dispatcher-backend hybridep", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
              "--fp8-recipe tensorwise", "--fp8-param-gather", "--use-precision-aware-optimizer",
              "--exp-avg-dtype bf16", "--cuda-graph-scope attn moe_router", "--fine-grained-activation-offloading",
              "--offload-modules expert_fc1 moe_act"):
        assert s in out, s
    # and back to the original plan: the original bytes
    orig = load_megatron(_write(tmp_path, "orig.sh", base))
    assert render_megatron(orig, out) != out


# --------------------------------------------------------------------------- vocabulary
BASE = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
        "--seq-length 64 --micro-batch-size 1 --tensor-model-parallel-size 2 ")


@pytest.mark.parametrize("name,size", [
    ("Qwen/Qwen3-235B-A22B", 151936), ("unsloth/DeepSeek-V3", 129280), ("meta-llama/Llama-3.1-405B", 128256),
    ("mistralai/Mixtral-8x22B-v0.1", 32768), ("openai/gpt-oss-120b", 201088), ("moonshotai/Kimi-K2-Instruct", 163840),
    ("deepseek-ai/DeepSeek-V2-Lite", 102400), ("Qwen/Qwen2.5-72B", 152064), ("/models/Llama-2-7b-hf", 32000)])
def test_public_tokenizer_table(tmp_path, name, size):
    plan = load_megatron(_write(tmp_path, "r.sh", BASE + f"--tokenizer-type HuggingFaceTokenizer --tokenizer-model {name}\n"))
    assert plan.model.vocab_size == size
    assert plan.model.padded_vocab_size(2) == -(-size // 256) * 256  # 128 x TP, as Megatron pads
    assert any("config.json vocab_size" in n for n in plan.source.notes)


def test_local_tokenizer_file_and_unknown_tokenizer(tmp_path):
    tok = tmp_path / "tok" / "tokenizer.json"
    tok.parent.mkdir()
    tok.write_text(json.dumps({"model": {"vocab": {f"t{i}": i for i in range(300)}},
                               "added_tokens": [{"id": 300, "content": "<eos>"}, {"id": 301, "content": "<pad>"}]}))
    plan = load_megatron(_write(tmp_path, "r.sh", BASE + f"--tokenizer-type HuggingFaceTokenizer --tokenizer-model {tok.parent}\n"))
    assert plan.model.vocab_size == 302
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "u.sh", BASE + "--tokenizer-type HuggingFaceTokenizer --tokenizer-model acme/x\n"))
    line = one_line(e.value)
    assert "\n" not in line and "acme/x" in line and "--vocab-size" in line
    # a tokenizer type alone (Megatron-LM examples/gpt3/gpt_config.yaml: tokenizer_model null): the flag named is
    # the one whose value is shown
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "t.sh", BASE + "--tokenizer-type GPTSentencePieceTokenizer\n"))
    assert one_line(e.value).startswith("--tokenizer-type='GPTSentencePieceTokenizer'")


# Pai-Megatron-Patch (alibaba/Pai-Megatron-Patch a098ca5, megatron_patch/tokenizer build_tokenizer): the
# tokenizer is loaded from --load and sets padded_vocab_size itself (base + --extra-vocab-size, unpadded); the
# scripts' own comment says "151643 + 293 = 151936" (examples/qwen2_vl/run_mcore_qwen.sh)
@pytest.mark.parametrize("extra,size", [
    ("--patch-tokenizer-type Qwen2Tokenizer --extra-vocab-size 293 --load /ckpt/x", 151936),
    ("--patch-tokenizer-type Qwen2Tokenizer --extra-vocab-size 421 --load /ckpt/x", 152064),
    ("--patch-tokenizer-type LLama3Tokenizer --extra-vocab-size 256 --load /ckpt/x", 128256),
    ("--patch-tokenizer-type LLama2Tokenizer --extra-vocab-size 0", 32000),
    # DeepSeekV2Tokenizer serves V2 / V3 / Moonlight: the checkpoint --load names (its config.json rows)
    ("--patch-tokenizer-type DeepSeekV2Tokenizer --extra-vocab-size 467 --load /mnt/DeepSeek-V3-to-mcore", 129280),
    ("--patch-tokenizer-type DeepSeekV2Tokenizer --extra-vocab-size 2400 --load /m/DeepSeek-V2-Lite-to-mcore", 102400),
    # Megatron's own --padded-vocab-size wins (examples/qwen3/run_mcore_qwen3.sh)
    ("--patch-tokenizer-type Qwen3Tokenizer --padded-vocab-size 151936", 151936),
])
def test_pai_patch_tokenizer_vocabulary(tmp_path, extra, size):
    plan = load_megatron(_write(tmp_path, "pai.sh", BASE + extra + "\n"))
    assert plan.model.vocab_size == size
    assert plan.model.padded_vocab_size(2) == size  # Pai does not pad to 128 x TP
    assert not any("unknown Megatron-LM flag --patch-tokenizer-type" in n for n in plan.source.notes)


# a fork's own tokenizer type that adds --extra-vocab-size itself (ROCm/Megatron-LM renwuli/disable_te_qwen1.5
# megatron/tokenizer/tokenizer.py: QWen2Tokenizer -> padded_vocab_size = tokenizer.vocab_size + extra_vocab_size, no
# padding to 128 x TP): its scripts give 293 for Qwen1.5-7B and -14B alike; Qwen1.5 checkpoints named by --load
# (Pai-Megatron-Patch examples/qwen1_5: "293 for models smaller than 14b, 421 for the others", on 151643)
@pytest.mark.parametrize("extra,size", [
    ("--tokenizer-type QWen2Tokenizer --tokenizer-model Qwen/Qwen1.5-14B --extra-vocab-size 293", 151936),
    ("--tokenizer-type QWen2Tokenizer --tokenizer-model Qwen/Qwen1.5-7B", 151643),
    # the fork's Qwen 1.0 tiktoken type (renwuli/disable_te_qwen qwen_tokenizer.py: SPECIAL_START_ID 151643, 3 + 205
    # special tokens): a fixed size, which Megatron pads as usual (to 128 x TP = 256: 152064)
    ("--tokenizer-type QWenTokenizer --vocab-file /workspace/qwen.tiktoken", 151851),
    ("--patch-tokenizer-type LLamaTokenizer --extra-vocab-size 293 --load /mnt/Qwen1.5-0.5B-hf-to-megatron-tp1-pp1",
     151936),
    ("--patch-tokenizer-type LLamaTokenizer --extra-vocab-size 421 --load /mnt/Qwen1.5-72B-hf-to-megatron", 152064),
])
def test_fork_tokenizer_and_qwen15_vocabulary(tmp_path, extra, size):
    plan = load_megatron(_write(tmp_path, "q15.sh", BASE + extra + "\n"))
    assert plan.model.vocab_size == size
    # set by the tokenizer code, not padded to 128 x TP; the fixed-size type is padded
    assert plan.model.padded_vocab_size(2) == (152064 if size == 151851 else size)
    assert not any("unknown Megatron-LM flag --extra-vocab-size" in n for n in plan.source.notes)


def test_pai_patch_tokenizer_unknown_checkpoint_is_one_line(tmp_path):
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "pai.sh", BASE + "--patch-tokenizer-type MixtralTokenizer --load /ckpt/mine\n"))
    line = one_line(e.value)
    assert "\n" not in line and "--patch-tokenizer-type" in line and "MixtralTokenizer" in line and "/ckpt/mine" in line


# Pai-Megatron-Patch's legacy models (megatron_patch/model/deepseek_v2 at 7097866, model/qwen2): a shared expert
# switched on by its own flag, and DeepSeek-V2's attention always MLA (no --multi-latent-attention in its scripts)
PAI_MOE = BASE + "--num-experts 8 --moe-ffn-hidden-size 32 --expert-model-parallel-size 2 --vocab-size 100 "


def test_pai_legacy_shared_expert_and_mla(tmp_path):
    plan = load_megatron(_write(tmp_path, "dsv2.sh", PAI_MOE + "--enable-shared-expert --num-shared-experts 2 "
                                "--kv-lora-rank 16 --qk-nope-head-dim 8 --qk-rope-head-dim 4 --v-head-dim 8\n"))
    m = plan.model
    assert m.moe_shared_expert_intermediate_size == 2 * 32
    assert m.multi_latent_attention and (m.kv_lora_rank, m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim) == (16, 8, 4, 8)
    assert not any("unknown Megatron-LM flag --qk-" in n or "--enable-shared-expert: not read" in n for n in plan.source.notes)
    qwen = load_megatron(_write(tmp_path, "q2.sh", PAI_MOE + "--enable-shared-expert --shared-moe-ffn-hidden-size 96\n"))
    assert qwen.model.moe_shared_expert_intermediate_size == 96 and not qwen.model.multi_latent_attention
    # Megatron-LM's own spelling is read as before: the switch decides MLA, Pai's split flags are only noted
    mcore = load_megatron(_write(tmp_path, "v3.sh", PAI_MOE + "--moe-shared-expert-intermediate-size 64 "
                                 "--multi-latent-attention --kv-lora-rank 16 --qk-nope-head-dim 8\n"))
    assert mcore.model.moe_shared_expert_intermediate_size == 64 and mcore.model.qk_head_dim == 128
    assert any("--qk-nope-head-dim" in n for n in mcore.source.notes)
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "bad.sh", PAI_MOE + "--enable-shared-expert\n"))
    assert "--enable-shared-expert" in one_line(e.value) and "\n" not in one_line(e.value)


# Pai-Megatron-Patch's legacy entry points (a098ca5: examples/llama2/pretrain_megatron_llama.py builds
# megatron_patch/model/llama2/gpt_model.py on megatron.model's ParallelTransformer; run_pretrain_megatron_*.sh
# run it, run_pretrain_mcore_*.sh run megatron-core): the legacy model is reported as not modelled, as
# Megatron-LM's --use-legacy-models is; megatron-core entry points and Megatron-LM's own are not
@pytest.mark.parametrize("program,legacy", [
    ("pretrain_megatron_llama.py", True), ("../llama2/pretrain_megatron_llama.py", True),
    ("finetune_megatron_llama_withGA.py", True), ("pretrain_mcore_llama.py", False), ("pretrain_gpt.py", False),
])
def test_pai_legacy_program_reported(tmp_path, program, legacy):
    text = BASE.replace("pretrain_gpt.py", program) + "--vocab-size 100\n"
    plan = load_megatron(_write(tmp_path, "pai.sh", text))
    hits = [u for u in plan.source.unmodelled if u.flag == "training program"]
    assert bool(hits) == legacy
    if legacy:
        assert hits[0].value == program.rsplit("/", 1)[-1] and hits[0].effect.startswith("time:")
    assert plan.model.num_layers == 2 and plan.parallel.tp == 2  # read as before


@pytest.mark.parametrize("env,backend", [
    ("export NVTE_FLASH_ATTN=1 NVTE_FUSED_ATTN=0", "flash"),   # Pai-Megatron-Patch FL=true
    ("export NVTE_FLASH_ATTN=0 NVTE_FUSED_ATTN=1", "fused"),   # FL=false
    ("export NVTE_FLASH_ATTN=0\nexport NVTE_FUSED_ATTN=0", "unfused"),
    ("export NVTE_FLASH_ATTN=1", "auto"),
])
def test_te_attention_variables_choose_the_backend(tmp_path, env, backend):
    """Without --attention-backend, Transformer Engine's NVTE_FLASH_ATTN / NVTE_FUSED_ATTN opt-outs pick the
    attention the run uses; the flag, when given, wins; the unchanged plan renders the same text."""
    text = env + "\n" + BASE + "--vocab-size 100\n"
    plan = load_megatron(_write(tmp_path, "te.sh", text))
    assert plan.training.attention_backend == backend
    assert render_megatron(plan, text) == text
    if backend != "auto":
        assert any("NVTE_FUSED_ATTN" in n or "NVTE_FLASH_ATTN" in n for n in plan.source.notes)
    flag = load_megatron(_write(tmp_path, "flag.sh", env + "\n" + BASE + "--vocab-size 100 --attention-backend fused\n"))
    assert flag.training.attention_backend == "fused"


# --------------------------------------------------------------------------- model families refused
@pytest.mark.parametrize("program,extra,family", [
    ("pretrain_bert.py", "", "BERT"), ("pretrain_t5.py", "", "T5"),
    ("examples/multimodal/train.py", "", "multimodal"), ("pretrain_vlm.py", "", "multimodal"),
    ("pretrain_gpt.py", "--experimental-attention-variant gated_delta_net ", "experimental attention"),
    ("pretrain_gpt.py", "--encoder-num-layers 2 ", "T5"),
    # a vision-language script whose program name does not say so (Pai-Megatron-Patch examples/qwen2_vl:
    # pretrain_qwen.py with Megatron-LM examples/multimodal's --disable-vision-class-token)
    ("pretrain_qwen.py", "--position-embedding-type mrope --disable-vision-class-token ", "multimodal"),
    ("pretrain_gpt.py", "--freeze-ViT ", "multimodal"),
    ("tools/run_text_generation_server.py", "", "not a training program"),
])
def test_families_not_modelled_are_refused_by_name(tmp_path, program, extra, family):
    text = BASE.replace("pretrain_gpt.py", program) + extra + "--vocab-size 100\n"
    with pytest.raises(PlanError) as e:
        load_megatron(_write(tmp_path, "f.sh", text))
    line = one_line(e.value)
    assert family in line and "\n" not in line


# --------------------------------------------------------------------------- CLI contract per format
def _cli(argv, capsys):
    from primus_launch.cli import main

    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_contract_nvidia_yaml_and_script(tmp_path, capsys):
    path = _write(tmp_path, "deepseek_v3/gb200/mxfp8_16GPU_TP1PP2EP8.yaml", MOE_RECIPE)
    rc, out, err = _cli(["--project", path, "--dry-run", "--json", "--gpu", "h100-sxm", "--nodes", "2",
                         "--gpus-per-node", "8"], capsys)
    assert rc == 0, err
    d = json.loads(out)
    assert {"flag": "--moe-z-loss-coeff", "value": "0.001"}.items() <= d["warnings"][0].items()
    assert "primus-launch: warning: --moe-z-loss-coeff=0.001: not modelled" in err
    assert d["plan"]["source"]["format"] == "megatron-nvidia-yaml"
    # script: positional parameters after --
    script = _script(tmp_path)
    rc, out, err = _cli(["--project", script, "--dry-run", "--json", "--", "large"], capsys)
    assert rc == 0, err
    assert json.loads(out)["plan"]["model"]["num_layers"] == 8
    # user errors: exit 2, one line
    bad = _write(tmp_path, "bad.yaml", MOE_RECIPE.replace("tokenizer_model: unsloth/DeepSeek-V3", "tokenizer_model: acme/x"))
    rc, out, err = _cli(["--project", bad, "--dry-run"], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("primus-launch: error: ") and "--vocab-size" in lines[0]
    fam = _write(tmp_path, "m.sh", BASE.replace("pretrain_gpt.py", "pretrain_bert.py") + "--vocab-size 100\n")
    rc, out, err = _cli(["--project", fam, "--dry-run"], capsys)
    assert rc == 2 and "BERT" in err and len([ln for ln in err.splitlines() if ln.strip()]) == 1


def test_yaml_cli_error_on_nemo_config(tmp_path):
    text = "MODEL_ARGS:\n  trainer.num_nodes: 1\n  model.config.num_layers: 2\n  data.seq_length: 64\n"
    with pytest.raises(UserError) as e:
        load_megatron(_write(tmp_path, "n.yaml", text))
    assert "NeMo" in one_line(e.value)


def test_nemo1_launcher_training_config_is_refused_by_name(tmp_path):
    """NeMo-Framework-Launcher launcher_scripts/conf/training/**.yaml (NeMo 1.0 megatron_gpt_config.yaml layout):
    refused naming the layout, not read as a Megatron-LM argument YAML that 'names no model flag'."""
    text = ("trainer:\n  num_nodes: 2\n  devices: 8\n  precision: bf16\nexp_manager:\n  name: x\nmodel:\n"
            "  mcore_gpt: true\n  micro_batch_size: 1\n  global_batch_size: 64\n  tensor_model_parallel_size: 2\n"
            "  encoder_seq_length: 4096\n  num_layers: 4\n  hidden_size: 512\n  num_attention_heads: 8\n")
    with pytest.raises(UserError) as e:
        load_megatron(_write(tmp_path, "llama.yaml", text))
    line = one_line(e.value)
    assert "NeMo 1.0" in line and "model.encoder_seq_length" in line and "\n" not in line


# Megatron-LM tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap (the
# flags that shape its schedule): 12 layers on pp 4 x 3 virtual stages, 40 / (4 x dp 2) = 5 micro-batches
# in one group of 5 -- an interleaved run Megatron accepts only because of the group size
MB_GROUP_ARGS = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  --num-layers: 12
  --hidden-size: 512
  --num-attention-heads: 8
  --seq-length: 1024
  --max-position-embeddings: 1024
  --micro-batch-size: 4
  --global-batch-size: 40
  --tokenizer-type: NullTokenizer
  --vocab-size: 1000
  --pipeline-model-parallel-size: 4
  --num-layers-per-virtual-pipeline-stage: 1
  --microbatch-group-size-per-virtual-pipeline-stage: 5
  --bf16: true
"""


def test_microbatch_group_read_projected_and_written_back(tmp_path):
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.pipeline.orders import megatron_interleaved_warmup

    plan = load_megatron(_write(tmp_path, "model_config.yaml", MB_GROUP_ARGS), Cluster(num_nodes=1, gpus_per_node=8))
    p = plan.parallel
    assert (p.pp, p.vpp, p.microbatch_group, plan.num_microbatches) == (4, 3, 5, 5)
    assert not plan.source.unmodelled  # the group is modelled, not warned about
    assert project_dry_run(plan).iteration_time_s > 0
    # rank 0 keeps Megatron's warm-up + 1 chunk-micro-batches, 2 (pp - 1) + (vpp - 1) g + 1 (capped at m vpp;
    # get_pp_rank_microbatches, the warm-up checked against Megatron's schedule in test_pipeline.py): at 20
    # micro-batches a group of 5 keeps 17 where the default group (pp = 4) keeps 15
    acts = {g: project_dry_run(plan.with_changes(parallel={"microbatch_group": g}, training={"global_batch_size": 160}))
            .memory.stages[0].activations_bytes for g in (5, 4)}
    flight = {g: megatron_interleaved_warmup(4, 3, 20, 0, g) + 1 for g in (5, 4)}
    assert flight == {5: 17, 4: 15}
    # rank 0: no loss, no SP buffer; its first chunk also keeps the embedding's token ids, which the walk of
    # the schedule weighs as they are (memory.inflight)
    assert acts[5] / acts[4] == pytest.approx(17 / 15, rel=1e-3)
    # without the group the same batch is refused (5 micro-batches, pp 4), naming the field
    with pytest.raises(ValueError, match="training.global_batch_size"):
        plan.with_changes(parallel={"microbatch_group": None})
    assert render_megatron(plan, MB_GROUP_ARGS) == MB_GROUP_ARGS
    tuned = render_megatron(plan.with_changes(parallel={"microbatch_group": 4}, training={"global_batch_size": 64}),
                            MB_GROUP_ARGS)
    assert "--microbatch-group-size-per-virtual-pipeline-stage: 4\n" in tuned


@pytest.mark.parametrize("mode,refused", [("inference", True), ("rl", True), ("pretraining", False), (None, False)])
def test_functional_test_mode_other_than_pretraining_is_refused(tmp_path, mode, refused):
    """Regression: Megatron-LM's 59 ``MODE: inference`` functional tests (gpt_dynamic_inference_*, ...) were
    projected as training runs; run_ci_test.sh reads ``MODE`` (default pretraining) to pick what runs."""
    from primus_launch.adapters import load_recipe
    from primus_launch.errors import UserError

    args = ("MODEL_ARGS:\n  --num-layers: 2\n  --hidden-size: 64\n  --num-attention-heads: 4\n  --seq-length: 128\n"
            "  --max-position-embeddings: 128\n  --micro-batch-size: 1\n  --global-batch-size: 8\n  --vocab-size: 1000\n")
    f = tmp_path / "model_config.yaml"
    f.write_text(("" if mode is None else f"MODE: {mode}\n") + args)
    if refused:
        with pytest.raises(UserError, match=f"MODE='{mode}': a Megatron-LM functional test of {mode}"):
            load_recipe(f)
    else:
        assert load_recipe(f).model.num_layers == 2
