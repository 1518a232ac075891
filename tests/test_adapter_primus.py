"""Primus experiment YAMLs: resolution as Primus does it, the plan field by field, writer round trips.

CI has no Primus checkout, so each test writes a small Primus tree into ``tmp_path`` from the facts
of AMD-AGI/Primus (``primus/configs/modules/<fw>/*.yaml`` with ``extends`` chains, model presets
chaining to ``language_model.yaml``, experiments under ``examples/<fw>/configs/<GPU>/`` with
``${VAR:default}`` templates, also inside the model name).  Truth: what the files say, Primus's
documented merge rules (module config wins over the model preset at the top level; overrides win
over both), and round trips.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from primus_launch.adapters import detect_kind, load_recipe, write_recipe
from primus_launch.adapters.primus_yaml import load_primus_yaml, plan_from_text, render_primus_yaml, resolve
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, PlanError

ROOT = Path(__file__).resolve().parents[1]
PRIMUS = shutil.which("primus-launch") or str(Path(sys.executable).with_name("primus-launch"))

TREE = {
    "primus/configs/modules/module_base.yaml": "trainable: false\nsink_level: null\nstderr_sink_level: INFO\n",
    "primus/configs/modules/megatron/trainer_base.yaml": """extends:
  - ../module_base.yaml
  - primus_turbo.yaml
  - torch_compile.yaml
  - zero_bubble.yaml
trainable: true
micro_batch_size: 2
global_batch_size: 128
bf16: true
fp16: false
fp8: null
grad_reduce_in_bf16: false
use_distributed_optimizer: false
overlap_grad_reduce: false
overlap_param_gather: false
tensor_model_parallel_size: 1
pipeline_model_parallel_size: 1
context_parallel_size: 1
expert_model_parallel_size: 1
sequence_parallel: true
recompute_granularity: null
recompute_method: null
recompute_num_layers: null
make_vocab_size_divisible_by: 128
lr: 2.5e-4
log_interval: 1
""",
    "primus/configs/modules/megatron/primus_turbo.yaml": """enable_primus_turbo: false
use_turbo_attention: false
use_turbo_deepep: false
turbo_deepep_num_cu: 32
turbo_sync_free_moe_stage: 0
""",
    "primus/configs/modules/megatron/torch_compile.yaml": "torch_compile:\n  enable: false\n  backend: inductor\n",
    "primus/configs/modules/megatron/zero_bubble.yaml": """patch_zero_bubble: false
enable_zero_bubble: true
zero_bubble_v_schedule: false
enable_1f1b_v: false
""",
    "primus/configs/modules/megatron/pre_trainer.yaml": """extends:
  - trainer_base.yaml
train_iters: 1000
global_batch_size: 16
seq_length: 1024
use_distributed_optimizer: true
""",
    "primus/configs/models/megatron/language_model.yaml": """num_layers: 24
hidden_size: 1024
num_attention_heads: 16
group_query_attention: false
num_query_groups: null
position_embedding_type: learned_absolute
max_position_embeddings: null
untie_embeddings_and_output_weights: true
ffn_hidden_size: null
kv_channels: null
add_bias_linear: false
swiglu: true
normalization: "LayerNorm"
tokenizer_type: null
tokenizer_model: null
vocab_size: null
num_experts: null
moe_layer_freq: 1
moe_router_topk: 2
moe_ffn_hidden_size: null
moe_token_dispatcher_type: allgather
""",
    "primus/configs/models/megatron/llama_base.yaml": """extends:
  - language_model.yaml
normalization: "RMSNorm"
position_embedding_type: rope
group_query_attention: true
global_batch_size: 999   # ignored: the module config has this top-level key
""",
    "primus/configs/models/megatron/llama3_8B.yaml": """extends:
  - llama_base.yaml
tokenizer_type: HuggingFaceTokenizer
tokenizer_model: meta-llama/Llama-3.1-8B
num_layers: 32
hidden_size: 4096
ffn_hidden_size: 14336
num_attention_heads: 32
num_query_groups: 8
max_position_embeddings: 8192
""",
    "primus/configs/models/megatron/moe_tiny.yaml": """extends:
  - llama_base.yaml
vocab_size: 32000
num_layers: 8
hidden_size: 1024
ffn_hidden_size: 2816
num_attention_heads: 16
num_query_groups: 4
max_position_embeddings: 8192
num_experts: 16
moe_router_topk: 2
moe_ffn_hidden_size: 1408
moe_token_dispatcher_type: alltoall
""",
    "primus/configs/modules/torchtitan/quantize.yaml": """quantize:
  linear:
    float8:
      enable_fsdp_float8_all_gather: false
      recipe_name: null
      filter_fqns: []
""",
    "primus/configs/modules/torchtitan/pre_trainer.yaml": """extends:
  - ../module_base.yaml
  - quantize.yaml
optimizer:
  name: AdamW
  lr: 0.0008
training:
  local_batch_size: 8
  global_batch_size: -1
  seq_len: 2048
  steps: 10000
  mixed_precision_param: bfloat16
parallelism:
  data_parallel_replicate_degree: 1
  data_parallel_shard_degree: -1
  tensor_parallel_degree: 1
  pipeline_parallel_degree: 1
  context_parallel_degree: 1
  expert_parallel_degree: 1
  pipeline_parallel_schedule: 1F1B
activation_checkpoint:
  mode: none
  selective_ac_option: "2"
compile:
  enable: true
  components:
    - model
    - loss
primus_turbo:
  enable_primus_turbo: true
  use_turbo_attention: true
  use_turbo_grouped_mm: false
""",
    "primus/configs/models/torchtitan/llama3.1_8B-fp8.yaml": """job:
  description: "Llama 3.1 8B training"
model:
  name: "llama3"
  flavor: "8B"
  converters:
    - primus_turbo
    - quantize.linear.float8
""",
}

MEGATRON_EXP = """work_group: ${PRIMUS_TEAM:amd}
user_name: ${PRIMUS_USER:root}
exp_name: ${PRIMUS_EXP_NAME:llama3_8B-pretrain}
workspace: ./output

modules:
  pre_trainer:
    framework: megatron
    config: pre_trainer.yaml
    # model to run
    model: ${PRIMUS_MODEL:llama3_8B}.yaml
    overrides:
      train_iters: 50
      micro_batch_size: 1
      global_batch_size: 128
      seq_length: 8192
      # parallel
      tensor_model_parallel_size: ${PRIMUS_TP:2}
      pipeline_model_parallel_size: 1
      overlap_grad_reduce: true
      overlap_param_gather: true
      lr: 1.0e-5
"""

TITAN_EXP = """work_group: ${PRIMUS_TEAM:amd}
user_name: ${PRIMUS_USER:root}
exp_name: llama3_8B-fp8
workspace: ./output

modules:
  pre_trainer:
    framework: torchtitan
    config: pre_trainer.yaml
    model: llama3.1_8B-fp8.yaml
    overrides:
      training:
        local_batch_size: 2
        seq_len: 8192  # sequence
        steps: 50
      activation_checkpoint:
        mode: "full"  # ["none", "selective", "full"]
      quantize:
        linear:
          float8:
            enable_fsdp_float8_all_gather: true
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "Primus"
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    meg = root / "examples/megatron/configs/MI355X/llama3_8B-BF16-pretrain.yaml"
    tt = root / "examples/torchtitan/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml"
    for p, t in ((meg, MEGATRON_EXP), (tt, TITAN_EXP)):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(t)
    return root


@pytest.fixture
def primus(tmp_path):
    return _tree(tmp_path)


def _meg(root: Path) -> Path:
    return root / "examples/megatron/configs/MI355X/llama3_8B-BF16-pretrain.yaml"


def _tt(root: Path) -> Path:
    return root / "examples/torchtitan/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml"


# ----------------------------------------------------------------------------- resolution
def test_resolution_follows_primus_merge_rules(primus):
    r = resolve(_meg(primus), env={})
    cfg = r.config
    assert r.framework == "megatron" and r.module == "pre_trainer"
    # extends chain of the module: module_base <- trainer_base <- pre_trainer
    assert (cfg["trainable"], cfg["stderr_sink_level"], cfg["use_distributed_optimizer"]) == (True, "INFO", True)
    # the model preset adds only the top-level keys the module config lacks (its 999 is ignored), the
    # overrides win over both; the preset chain language_model <- llama_base <- llama3_8B
    assert (cfg["global_batch_size"], cfg["micro_batch_size"], cfg["num_layers"]) == (128, 1, 32)
    assert (cfg["normalization"], cfg["position_embedding_type"], cfg["moe_router_topk"]) == ("RMSNorm", "rope", 2)
    assert cfg["model"] == "llama3_8B.yaml" and cfg["tensor_model_parallel_size"] == 2  # ${..:default} typed
    assert cfg["torch_compile"] == {"enable": False, "backend": "inductor"}
    env = resolve(_meg(primus), env={"PRIMUS_TP": "4", "PRIMUS_MODEL": "moe_tiny"}).config
    assert (env["tensor_model_parallel_size"], env["num_experts"]) == (4, 16)  # template inside the model name


def test_megatron_plan_field_by_field(primus):
    plan = load_primus_yaml(_meg(primus), env={})
    m, p, t, c = plan.model, plan.parallel, plan.training, plan.cluster
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads, m.kv_heads) == (32, 4096, 14336, 32, 8)
    assert (m.vocab_size, m.seq_length, m.normalization, m.position_embedding, m.swiglu) == (
        128256, 8192, "rmsnorm", "rope", True)
    assert (p.tp, p.pp, p.sequence_parallel, p.dp_sharding) == (2, 1, True, "optimizer")
    assert (t.micro_batch_size, t.global_batch_size, t.train_iters, t.precision) == (1, 128, 50, "bf16")
    assert (t.overlap_grad_reduce, t.overlap_param_gather, t.recompute.granularity) == (True, True, "none")
    # the GPU from the folder name and the smallest node count that fits, both stated
    assert (c.gpu, c.num_nodes, c.gpus_per_node) == ("mi355x", 1, 8)
    assert any("MI355X" in n for n in plan.source.notes) and plan.source.format == "primus-yaml"
    given = load_primus_yaml(_meg(primus), Cluster(gpu="mi300x", num_nodes=4, gpus_per_node=8), env={})
    assert given.cluster.world_size == 32 and given.dp == 16 and not any("MI355X" in n for n in given.source.notes)


def test_primus_knobs(primus):
    exp = _meg(primus)
    moe = {"PRIMUS_MODEL": "moe_tiny", "PRIMUS_TP": "1"}

    def with_over(extra: str, env: dict) -> object:
        exp.write_text(MEGATRON_EXP.replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n" + extra))
        return load_primus_yaml(exp, Cluster(gpu="mi355x", num_nodes=1, gpus_per_node=8), env=env)

    base = with_over("      expert_model_parallel_size: 4\n", moe)
    assert base.training.moe_token_dispatcher == "alltoall" and base.parallel.ep == 4
    deepep = with_over("      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n"
                       "      use_turbo_deepep: true\n      use_turbo_attention: true\n", moe)
    assert deepep.training.moe_token_dispatcher == "deepep"
    assert {w.flag for w in deepep.source.unmodelled} >= {"use_turbo_attention"}
    # sync-free stages as Primus's rocm_arg_validation._get_sync_free_moe_options sets them: stage 2 = Turbo DeepEP
    # without the host sync (PrimusTurboDeepEPTokenDispatcher: num_worst_tokens, device token counts) + Turbo
    # grouped GEMM; stage 1 = fused router + permutation only (the dispatcher still synchronises)
    sync = with_over("      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n"
                     "      turbo_sync_free_moe_stage: 2\n", moe)
    st = sync.training
    assert (st.moe_token_dispatcher, st.moe_sync_free, st.moe_expert_gemm, st.moe_router_fusion,
            st.moe_permute_fusion) == ("deepep", True, "turbo", True, True)
    assert "turbo_sync_free_moe_stage" not in {w.flag for w in sync.source.unmodelled}
    s1 = with_over("      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n      moe_permute_fusion: false\n"
                   "      turbo_sync_free_moe_stage: 1\n      moe_use_legacy_grouped_gemm: true\n", moe).training
    assert (s1.moe_sync_free, s1.moe_expert_gemm, s1.moe_router_fusion, s1.moe_permute_fusion,
            s1.moe_token_dispatcher) == (False, "legacy", True, True, "alltoall")
    gg = with_over("      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n"
                   "      use_turbo_grouped_gemm: true\n", moe)
    assert gg.training.moe_expert_gemm == "turbo" and not gg.training.moe_sync_free
    assert "use_turbo_grouped_gemm" not in {w.flag for w in gg.source.unmodelled}
    assert with_over("      expert_model_parallel_size: 4\n      use_turbo_grouped_gemm: true\n",
                     moe).training.moe_expert_gemm == "te"   # Primus-Turbo off: the knob does nothing
    s3 = with_over("      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n"
                   "      turbo_sync_free_moe_stage: 3\n", moe)
    assert s3.training.moe_sync_free and "turbo_sync_free_moe_stage" in {w.flag for w in s3.source.unmodelled}
    off = with_over("      expert_model_parallel_size: 4\n      use_turbo_deepep: true\n", moe)  # turbo disabled
    assert off.training.moe_token_dispatcher == "alltoall"
    zb = with_over("      pipeline_model_parallel_size: 2\n      patch_zero_bubble: true\n", {})
    assert (zb.parallel.pp, zb.training.pipeline_schedule, zb.parallel.vpp) == (2, "zb_h1", 1)
    zbv = with_over("      pipeline_model_parallel_size: 2\n      patch_zero_bubble: true\n"
                    "      zero_bubble_v_schedule: true\n", {})
    assert (zbv.training.pipeline_schedule, zbv.parallel.vpp) == ("zbv", 2)
    comp = with_over("      torch_compile:\n        enable: true\n      num_seq_splits: 2\n", {})
    assert comp.training.compile and "num_seq_splits" in {w.flag for w in comp.source.unmodelled}


def test_titan_plan_field_by_field(primus):
    plan = load_primus_yaml(_tt(primus), env={})
    m, p, t, c = plan.model, plan.parallel, plan.training, plan.cluster
    assert (m.name, m.seq_length, c.gpu, c.world_size) == ("llama3-8B", 8192, "mi300x", 8)
    assert (p.tp, p.dp_sharding, plan.dp, t.micro_batch_size, t.global_batch_size) == (1, "full", 8, 2, 16)
    assert (t.precision, t.fp8_recipe, t.fp8_param_gather, t.compile) == ("fp8", "tensorwise", True, True)
    assert (t.recompute.granularity, t.train_iters) == ("full", 50)
    # its float8 converter leaves filter_fqns at [] (the output layer runs float8; priced bf16): warned
    assert [w.flag for w in plan.source.unmodelled] == ["primus_turbo", "quantize.linear.float8.filter_fqns"]


@pytest.mark.parametrize("mutate,field", [
    (lambda t: t.replace("${PRIMUS_TP:2}", "${PRIMUS_NEEDED}"), "PRIMUS_NEEDED"),
    (lambda t: t.replace("framework: megatron", "framework: maxtext"), "modules.pre_trainer.framework='maxtext'"),
    (lambda t: t.replace("config: pre_trainer.yaml", "config: nope.yaml"), "nope.yaml"),
    (lambda t: t.replace("llama3_8B}", "gpt9}"), "gpt9.yaml"),
    (lambda t: t.replace("  pre_trainer:", "  evaluator:"), "trainer"),
])
def test_errors_are_one_line(primus, mutate, field):
    exp = _meg(primus)
    exp.write_text(mutate(MEGATRON_EXP))
    with pytest.raises((UserError, PlanError)) as ei:
        load_primus_yaml(exp, env={})
    assert field in str(ei.value) and "\n" not in str(ei.value), str(ei.value)


def test_checkout_found_by_walking_up_or_given(primus, tmp_path):
    outside = tmp_path / "elsewhere" / "exp.yaml"
    outside.parent.mkdir()
    shutil.copy(_meg(primus), outside)
    with pytest.raises(UserError, match="--primus-root"):
        load_primus_yaml(outside, env={})
    a = load_primus_yaml(outside, primus_root=primus, env={})
    b = load_primus_yaml(outside, primus_root=primus / "primus" / "configs", env={})
    assert a.model == b.model and a.model.num_layers == 32
    assert detect_kind(outside) == "primus"
    flat = tmp_path / "flat.yaml"
    flat.write_text("num_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: 128\n"
                    "micro_batch_size: 1\nvocab_size: 100\n")
    assert detect_kind(flat) == "megatron"


# ----------------------------------------------------------------------------- writing
def _diff(a: str, b: str) -> list[str]:
    return [ln for ln in difflib.unified_diff(a.splitlines(), b.splitlines(), n=0, lineterm="")
            if ln[:1] in "+-" and ln[:3] not in ("---", "+++")]


def test_megatron_writer_edits_overrides_in_place(primus):
    exp = _meg(primus)
    text = exp.read_text()
    plan = load_primus_yaml(exp, env={})
    assert render_primus_yaml(plan, text, exp, env={}) == text  # unchanged plan: same bytes
    q = plan.with_changes(parallel={"tp": 4}, training={"micro_batch_size": 2, "recompute": {
        "granularity": "full", "method": "uniform", "num_layers": 1}})
    out = render_primus_yaml(q, text, exp, env={})
    assert _diff(text, out) == [
        "-      micro_batch_size: 1", "+      micro_batch_size: 2",
        "-      tensor_model_parallel_size: ${PRIMUS_TP:2}", "+      tensor_model_parallel_size: ${PRIMUS_TP:4}",
        "+      recompute_granularity: full", "+      recompute_method: uniform", "+      recompute_num_layers: 1"]
    # with the variable set, the template would not take the tuned value: the literal is written
    set_env = render_primus_yaml(load_primus_yaml(exp, env={"PRIMUS_TP": "2"}).with_changes(parallel={"tp": 4}),
                                 text, exp, env={"PRIMUS_TP": "2"})
    assert "      tensor_model_parallel_size: 4" in set_env.splitlines()
    written = write_recipe(q.model_copy(update={"source": plan.source}))
    assert written.name == "llama3_8B-BF16-pretrain.tuned.yaml" and exp.read_text() == text
    back = load_recipe(written, {"gpu": "mi355x", "num_nodes": 1, "gpus_per_node": 8})
    assert back.parallel == q.parallel and back.training == q.training
    assert back.model.model_copy(update={"name": q.model.name}) == q.model


def test_megatron_writer_keeps_what_a_dispatcher_switch_can_keep(primus):
    """A tuned switch from Turbo DeepEP on sync-free stage 1 to the all-to-all keeps stage 1 (permute
    fusion and the fused router need no Turbo DeepEP), so the fused router reads back; a plan whose
    FSDP implementation Megatron would not run (torch FSDP2 off full sharding) compares as the
    implementation the run gets, as the Megatron writer renders it."""
    exp = _meg(primus)
    moe = {"PRIMUS_MODEL": "moe_tiny", "PRIMUS_TP": "1"}
    exp.write_text(MEGATRON_EXP.replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n      expert_model_parallel_size: 4\n"
                                        "      enable_primus_turbo: true\n      use_turbo_deepep: true\n"
                                        "      turbo_sync_free_moe_stage: 1\n"))
    cl = Cluster(gpu="mi355x", num_nodes=1, gpus_per_node=8)
    plan = load_primus_yaml(exp, cl, env=moe)
    assert plan.training.moe_token_dispatcher == "deepep" and plan.training.moe_router_fusion
    q = plan.with_changes(training={"moe_token_dispatcher": "alltoall"})
    out = render_primus_yaml(q, exp.read_text(), exp, env=moe)
    assert "      turbo_sync_free_moe_stage: 0" not in out.splitlines()
    exp.write_text(out)
    back = load_primus_yaml(exp, cl, env=moe)
    assert back.training.moe_token_dispatcher == "alltoall" and back.training.moe_router_fusion
    exp.write_text(MEGATRON_EXP.replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n      use_torch_fsdp2: true\n"
                                        "      use_distributed_optimizer: false\n      overlap_param_gather: false\n"))
    fsdp2 = load_primus_yaml(exp, cl, env={})
    assert (fsdp2.parallel.dp_sharding, fsdp2.parallel.fsdp_impl) == ("full", "torch_fsdp2")
    q = fsdp2.with_changes(parallel={"dp_sharding": "optimizer"})
    exp.write_text(render_primus_yaml(q, exp.read_text(), exp, env={}))  # was: cannot express parallel.fsdp_impl
    assert load_primus_yaml(exp, cl, env={}).parallel.dp_sharding == "optimizer"


def test_titan_writer_adds_missing_sections(primus):
    exp = _tt(primus)
    text = exp.read_text()
    plan = load_primus_yaml(exp, env={})
    assert render_primus_yaml(plan, text, exp, env={}) == text
    q = plan.with_changes(parallel={"tp": 2, "sequence_parallel": True}, training={
        "micro_batch_size": 4, "global_batch_size": 16,
        "recompute": {"granularity": "op", "method": "uniform", "num_layers": None}})
    out = render_primus_yaml(q, text, exp, env={})
    assert _diff(text, out) == [
        "-        local_batch_size: 2", "+        local_batch_size: 4",
        '-        mode: "full"  # ["none", "selective", "full"]',
        '+        mode: "selective"  # ["none", "selective", "full"]',
        '+        selective_ac_option: op',
        "+      parallelism:", "+        tensor_parallel_degree: 2"]
    exp2 = exp.with_name("tuned.yaml")
    exp2.write_text(out)
    back = load_primus_yaml(exp2, env={})
    assert back.parallel == q.parallel and back.training == q.training


def test_cli_contract(primus, tmp_path):
    from cli_run import run_cli  # the answers of runs that succeed: the CLI's main in this process

    exp = _meg(primus)
    rc, out, err, _ = run_cli(["--project", str(exp), "--dry-run", "--json"], tmp_path)
    assert rc == 0, err
    d = json.loads(out)
    assert d["plan"]["source"]["format"] == "primus-yaml"
    assert any(ln.startswith("primus-launch: note: cluster.gpu=mi355x") for ln in err.splitlines())
    outside = tmp_path / "exp.yaml"
    shutil.copy(exp, outside)
    r = subprocess.run([PRIMUS, "--project", str(outside), "--dry-run"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--primus-root" in r.stderr
    wrapper = tmp_path / "job.toml"
    wrapper.write_text(f'[recipe]\npath = "exp.yaml"\nprimus_root = "{primus}"\n[cluster]\ngpu = "mi300x"\n'
                       'nodes = 2\ngpus_per_node = 8\n')
    rc, out, err, _ = run_cli(["--project", str(wrapper), "--dry-run", "--json", "--primus-root", str(primus)],
                              tmp_path)
    assert rc == 0, err
    assert json.loads(out)["plan"]["cluster"]["num_nodes"] == 2


# ----- an experiment that is only an ``extends:`` chain (Primus's llama3_8B-BF16-lora-sft.yaml form) ----
BUNDLED = ROOT / "recipes" / "primus" / "MI355X" / "llama3.1_8b.yaml"


@pytest.fixture
def chained(tmp_path) -> Path:
    """``top.yaml`` = ``extends: [base.yaml]`` + a name, over the bundled flattened experiment (whose
    ``modules.pre_trainer`` has no ``overrides``-free twin: the chain's top file has no ``modules``)."""
    (tmp_path / "base.yaml").write_text(BUNDLED.read_text())
    (tmp_path / "top.yaml").write_text("extends:\n  - base.yaml\nexp_name: chained\n")
    return tmp_path


def test_extends_only_experiment_is_read_as_primus(chained):
    """Regression: a YAML whose trainer comes from its ``extends`` chain was sniffed as a Megatron
    argument YAML (no top-level ``modules``) and refused with ``--num-layers=None: required``."""
    assert detect_kind(chained / "top.yaml") == "primus"
    top, base = load_recipe(chained / "top.yaml"), load_recipe(chained / "base.yaml")
    assert top.model_dump(exclude={"source": True, "model": {"name"}}) == \
        base.model_dump(exclude={"source": True, "model": {"name"}})
    assert top.training.global_batch_size == 256 and top.model.num_layers == 32  # as base.yaml writes them


@pytest.mark.parametrize("top,words", [
    ("extends:\n  - missing.yaml\n", "extends="),
    ("extends: other.yaml\nnum_layers: 2\n", "no modules.<name>.framework"),
])
def test_extends_chain_errors_name_the_chain(chained, top, words):
    (chained / "other.yaml").write_text("hidden_size: 8\n")
    (chained / "top.yaml").write_text(top)
    with pytest.raises(UserError, match=re.escape(words)):
        load_recipe(chained / "top.yaml")


def test_writer_adds_several_keys_under_one_new_overrides_block(chained):
    """Regression: each key added under a missing ``modules.pre_trainer.overrides`` wrote its own
    ``modules:`` block (duplicate keys: PyYAML keeps the last, so the tune's FSDP switch re-read as
    another plan and the write was refused).  Three keys, one block, re-read as the tuned plan."""
    plan = load_recipe(chained / "top.yaml")
    tuned = plan.with_changes(parallel={"dp_sharding": "optimizer_grads", "fsdp_impl": "megatron_fsdp"},
                              training={"micro_batch_size": 2})
    text = render_primus_yaml(tuned, (chained / "top.yaml").read_text(), chained / "top.yaml")
    assert text.count("modules:") == 1 and text.count("overrides:") == 1
    assert text.startswith("extends:\n  - base.yaml\nexp_name: chained\n")
    out = chained / "top.tuned.yaml"
    out.write_text(text)
    got = load_recipe(out)
    assert got.parallel.dp_sharding == "optimizer_grads" and got.training.micro_batch_size == 2


def test_forced_round_robin_only_where_primus_routes_round_robin(primus):
    """Forced balance is Turbo DeepEP's round robin (Primus ``PrimusTurboDeepEPTokenDispatcher.dispatch_preprocess``)
    only under Turbo's dispatcher (``enable_primus_turbo`` + ``use_turbo_deepep``: Primus
    ``patches/turbo/moe_dispatcher_patches.py`` ``_is_turbo_deepep_can_patch``) and, since Primus 253b3322
    (2026-07-16), only with ``moe_router_force_load_balancing_type: even``; ``uniform`` is Megatron's random logits,
    and Megatron's own DeepEP (``moe_enable_deepep`` without Turbo) never routes round robin."""
    from primus_launch.projection.cost.moe_imbalance import forced_round_robin

    exp = _meg(primus)
    moe = {"PRIMUS_MODEL": "moe_tiny", "PRIMUS_TP": "1"}

    def plan(extra: str):
        exp.write_text(MEGATRON_EXP.replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n      expert_model_parallel_size: 4\n"
                                            "      moe_router_force_load_balancing: true\n" + extra))
        return load_primus_yaml(exp, Cluster(gpu="mi355x", num_nodes=1, gpus_per_node=8), env=moe)

    turbo = "      enable_primus_turbo: true\n      use_turbo_deepep: true\n"
    assert forced_round_robin(plan(turbo))                                              # before 253b3322
    assert forced_round_robin(plan(turbo + "      moe_router_force_load_balancing_type: even\n"))
    uniform = plan(turbo + "      moe_router_force_load_balancing_type: uniform\n")
    assert uniform.training.moe_token_dispatcher == "deepep" and not forced_round_robin(uniform)
    own = plan("      moe_enable_deepep: true\n      moe_token_dispatcher_type: flex\n")  # Megatron's DeepEP
    assert own.training.moe_token_dispatcher == "deepep" and not forced_round_robin(own)
    # all-to-all with "even": Primus's router routes round robin there too, priced as random: said, not silent
    a2a = plan("      moe_router_force_load_balancing_type: even\n")
    assert not forced_round_robin(a2a)
    assert "moe_router_force_load_balancing_type" in {w.flag for w in a2a.source.unmodelled}
    # the tuner's switch of Megatron's own DeepEP to the all-to-all writes back (the field is read under deepep only)
    own = plan("      moe_enable_deepep: true\n      moe_token_dispatcher_type: flex\n")
    q = own.with_changes(training={"moe_token_dispatcher": "alltoall"})
    out = render_primus_yaml(q, exp.read_text(), exp, env=moe)
    exp.write_text(out)
    assert load_primus_yaml(exp, Cluster(gpu="mi355x", num_nodes=1, gpus_per_node=8),
                            env=moe).training.moe_token_dispatcher == "alltoall"


def test_tuned_dispatcher_switch_off_sync_free_stage_2_writes_back(primus):
    """user11: tuning AMD's ``deepseek_v2_lite-BF16-pretrain.yaml`` (Turbo DeepEP, ``turbo_sync_free_moe_stage: 2``)
    ended in "cannot express training.moe_sync_free in this Primus config" and wrote nothing: the tuner's candidate
    on the all-to-all dispatcher kept ``moe_sync_free`` (Primus-Turbo DeepEP's sync-free MoE), which the writer's
    stage 1 cannot say (and stage 2's implied Turbo grouped GEMM, kept by the plan, was lost on the way down).  The
    tuner's knobs now leave sync-free with DeepEP, the writer states ``use_turbo_grouped_gemm`` where stage 2 implied
    it, and the written config reads back to the candidate."""
    from primus_launch.tuner.knobs import apply_knobs, knobs_of

    exp = _meg(primus)
    moe = {"PRIMUS_MODEL": "moe_tiny", "PRIMUS_TP": "1"}
    exp.write_text(MEGATRON_EXP.replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n      expert_model_parallel_size: 4\n"
                                        "      enable_primus_turbo: true\n      use_turbo_deepep: true\n"
                                        "      turbo_sync_free_moe_stage: 2\n"))
    cl = Cluster(gpu="mi355x", num_nodes=1, gpus_per_node=8)
    plan = load_primus_yaml(exp, cl, env=moe)
    assert plan.training.moe_token_dispatcher == "deepep" and plan.training.moe_sync_free
    k = knobs_of(plan)
    assert apply_knobs(plan, k).training.moe_sync_free  # unchanged knobs keep it
    q = apply_knobs(plan, k._replace(dispatcher="alltoall"))
    assert q.training.moe_token_dispatcher == "alltoall" and not q.training.moe_sync_free
    exp.write_text(render_primus_yaml(q, exp.read_text(), exp, env=moe))
    back = load_primus_yaml(exp, cl, env=moe)
    assert back.training.moe_token_dispatcher == "alltoall" and not back.training.moe_sync_free
    assert back.training.moe_expert_gemm == q.training.moe_expert_gemm == "turbo"  # stage 2's grouped GEMM, now said


def test_errors_and_notes_name_the_experiments_keys(primus):
    """user15 (an AMD engineer's MI355X experiments): a refused value or a reader note named the Megatron flag the
    key maps to (``--fp8-format='e5m2'``, 'divide by --pipeline-model-parallel-size=12', a note on
    '--pipeline-model-parallel-layout ...'); the experiment writes ``fp8:``, ``pipeline_model_parallel_size:``.
    A global batch that no node count splits was refused as 'tp*cp*pp=... must divide world size 8' (the 1-node
    fallback of the fitted cluster) in Megatron flag names; it is now the batch's own rule, with the fitted node
    count said.  The cluster's notes (GPU guessed, nodes fitted) come first: the one-screen answer shows the first
    notes that fit, and the fitted 16 nodes of a DeepSeek-V3 experiment 'tuned for 32N' were cut off."""
    exp = _meg(primus)

    def refused(text: str) -> str:
        exp.write_text(text)
        with pytest.raises((UserError, PlanError)) as ei:
            load_primus_yaml(exp, env={})
        return str(ei.value)

    extra = lambda s: MEGATRON_EXP.replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n" + s)  # noqa: E731
    assert refused(extra("      fp8: e5m2\n")).startswith("fp8='e5m2': one of e4m3, hybrid")
    layout = refused(extra("      pipeline_model_parallel_layout: 'Et*8|t*8|t*8|t*8,L'\n"
                           "      pipeline_model_parallel_size: 3\n"))
    assert "divide by pipeline_model_parallel_size=3" in layout and "--" not in layout
    gbs = refused(MEGATRON_EXP.replace("global_batch_size: 128", "global_batch_size: 127"))
    assert gbs.startswith("global_batch_size=127: must be divisible by micro_batch_size x dp = 1 x 4 (on 1 node(s)")
    assert "give --nodes" in gbs and "world size" not in gbs
    exp.write_text(extra("      rampup_batch_size: [32, 32, 1000]\n"))
    notes = load_primus_yaml(exp, env={}).source.notes
    assert "rampup_batch_size 32 32 1000: the steady batch (global_batch_size) is projected, not the ramp" in notes
    assert [n.startswith("cluster") for n in notes[:2]] == [True, True] and not notes[2].startswith("cluster")


def test_tune_on_flagged_cluster_drops_the_fitted_cluster_note(primus):
    """user15: ``--tune exp.yaml --nodes 4`` of an experiment whose layout is not legal on 4 nodes read it on its own
    fitted cluster and printed that read's 'cluster: 1 node(s) x 8 GPUs, the smallest node count that fits' beside
    a search on 4 nodes; the note on the node count goes with --nodes, the folder's GPU guess stays."""
    from primus_launch.cli_tune import _flagged_cluster_notes

    plan = load_primus_yaml(_meg(primus), env={})
    seed = plan.with_changes(cluster={"num_nodes": 4})
    kept = _flagged_cluster_notes(seed, {"num_nodes": 4}).source.notes
    assert not any(n.startswith("cluster: 1 node(s)") for n in kept)
    assert kept[0] == "cluster.gpu=mi355x: guessed from the folder name 'MI355X'" and len(kept) == len(plan.source.notes) - 1
    assert _flagged_cluster_notes(seed, {"gpu": "mi300x"}).source.notes[0].startswith("cluster: 1 node(s)")


def test_tuned_experiment_says_its_cluster_and_launch(primus):
    """user15: a tuned Primus experiment holds no cluster (Primus configs state none), yet the tune's node count
    (fitted or --nodes) is what it was tuned for; the tune says it with Primus's own launch line."""
    from primus_launch.cli_tune import primus_cluster_line

    plan = load_primus_yaml(_meg(primus), Cluster(gpu="mi355x", num_nodes=4, gpus_per_node=8), env={})
    assert primus_cluster_line(plan, "x.tuned.yaml") == (
        "tuned for 4 node(s) x 8 mi355x (a Primus experiment states no cluster): "
        "EXP=x.tuned.yaml NNODES=4 bash examples/run_slurm_pretrain.sh")
    four = plan.with_changes(cluster={"gpus_per_node": 4, "num_nodes": 8})
    assert "NNODES=8 GPUS_PER_NODE=4 bash" in primus_cluster_line(four, "x.tuned.yaml")


def test_cluster_comment_is_read_below_the_flags_and_kept_in_step_by_a_tune(primus):
    """user16: an experiment's ``# primus-launch: gpu=mi300x nodes=4`` (the comment Megatron scripts / YAMLs and
    NeMo / Bridge configs state their cluster in) was dropped: the GPU guessed from the folder ('MI355X') and the
    node count fitted.  Truth: the comment as written; the folder guess and the flags as before."""
    exp = _meg(primus)
    exp.write_text("# primus-launch: gpu=mi300x nodes=4\n" + MEGATRON_EXP)
    plan = load_primus_yaml(exp, env={})
    assert (plan.cluster.gpu, plan.cluster.num_nodes, plan.cluster.gpus_per_node) == ("mi300x", 4, 8)
    assert plan.source.nodes_fitted is False and not any("guessed from the folder" in n for n in plan.source.notes)
    assert plan.source.notes[0].startswith("cluster gpu=mi300x nodes=4: from the file's '# primus-launch:' comment")
    flagged = load_primus_yaml(exp, env={}, overrides={"num_nodes": 2})  # a flag beats its own key only
    assert (flagged.cluster.gpu, flagged.cluster.num_nodes) == ("mi300x", 2)
    # a tune on another cluster rewrites the comment's values, so the tuned file reads back on it
    moved = plan.with_changes(cluster={"gpu": "mi355x", "num_nodes": 2})
    out = render_primus_yaml(moved, exp.read_text(), exp, env={})
    assert out.splitlines()[0] == "# primus-launch: gpu=mi355x nodes=2"
    back = plan_from_text(out, exp, env={})
    assert (back.cluster.gpu, back.cluster.num_nodes) == ("mi355x", 2)
    assert render_primus_yaml(plan, exp.read_text(), exp, env={}) == exp.read_text()  # unchanged: byte for byte
