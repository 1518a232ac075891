"""Tuned recipes must pass their framework's own start-up validation.

- The launch-environment rules of Megatron-LM's ``validate_args`` (plan/legality.py
  ``megatron_env_problems``), one test each, with the asserts' lines at core_v0.16.1;
- the Megatron writer puts what a tuned knob needs into the recipe (the tuned 8B script's ``export``,
  the 8B YAML's ``ENV_VARS``; an NVIDIA YAML's existing ``ENV_VARS``), and the reader gives it back;
- TorchTitan's own ``ConfigManager`` + ``ParallelDims`` + device mesh (installed torchtitan 0.3.0,
  fake process group) accepts a tuned launch script and rejects a broken one;
- with a Megatron-LM source tree in ``PRIMUS_LAUNCH_MLM_TREE`` (scripts/check_tuned_recipes.py runs
  without it in CI), Megatron-LM's own validation rejects the tuned 8B script without the
  environment fix and accepts it with it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.adapters import megatron_script as ms
from primus_launch.adapters.megatron import recipe_env
from primus_launch.adapters.megatron_yaml import from_yaml
from primus_launch.plan import PlanError
from primus_launch.plan.legality import arch_major, megatron_env_fixes, megatron_env_problems

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
# the change set a --tune of recipes/megatron/llama3.1_8b.{sh,yaml} on 8 x H100 chose (see
# scripts/validation/TUNED_RECIPES.md): Megatron-FSDP instead of TP 2, fine-grained offloading
TUNED_8B = dict(parallel=dict(tp=1, sequence_parallel=False, dp_sharding="optimizer_grads"),
                training=dict(offload=dict(activation_modules=("core_attn", "attn_proj"))))


def _plan(name: str, **changes: dict):
    plan = load_recipe(RECIPES / name)
    return plan.with_changes(**changes).model_copy(update={"source": plan.source}) if changes else plan


def _vars(problems: list) -> list[str]:
    return [f.split(" ", 1)[1] for f, _, _ in problems]


# --------------------------------------------------------------------------- legality rules
def test_megatron_fsdp_needs_more_than_one_connection():
    """arguments.py:687 (Megatron-FSDP) / :622 (torch FSDP2): CUDA_DEVICE_MAX_CONNECTIONS != "1"."""
    plan = _plan("megatron/llama3.1_8b.sh", parallel=dict(tp=1, sequence_parallel=False, dp_sharding="optimizer_grads"))
    assert _vars(megatron_env_problems(plan, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "hopper")) == [
        "CUDA_DEVICE_MAX_CONNECTIONS"]
    assert megatron_env_problems(plan, {}, "hopper") == []
    assert megatron_env_problems(plan, {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}, "hopper") == []
    assert megatron_env_fixes(plan, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "hopper") == {
        "CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    # with TP 2 as well, FSDP wins (validate_args only warns about the mix)
    both = _plan("megatron/llama3.1_8b.sh", parallel=dict(dp_sharding="full"))
    assert both.parallel.tp == 2 and _vars(megatron_env_problems(both, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}))


def test_tensor_parallel_before_blackwell_needs_one_connection():
    """arguments.py:951: TP or CP > 1 below compute capability 10, no FSDP, no EP overlap -> "1"."""
    plan = _plan("megatron/llama3.1_8b.sh")
    assert plan.parallel.tp == 2 and plan.parallel.dp_sharding == "optimizer"
    assert _vars(megatron_env_problems(plan, {}, "hopper")) == ["CUDA_DEVICE_MAX_CONNECTIONS"]
    assert _vars(megatron_env_problems(plan, {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, "cdna3")) == [
        "CUDA_DEVICE_MAX_CONNECTIONS"]
    assert megatron_env_problems(plan, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "hopper") == []
    assert megatron_env_problems(plan, {}, "blackwell") == []  # the requirement ends with Blackwell
    assert [arch_major(a) for a in ("ampere", "hopper", "blackwell", "blackwell_ultra", "cdna4", "")] == [
        8, 9, 10, 10, 9, 9]
    tp1 = _plan("megatron/llama3.1_8b.sh", parallel=dict(tp=1, sequence_parallel=False))
    assert megatron_env_problems(tp1, {}, "hopper") == []
    moe = _plan("megatron/mixtral_8x22b.sh")
    assert moe.parallel.tp > 1 and _vars(megatron_env_problems(moe, {}, "hopper"))
    # (at PP 4 with a virtual pipeline: megatron-core's TransformerConfig asserts one for the overlap)
    overlap = moe.with_changes(parallel=dict(vpp=2), training=dict(
        overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True, pipeline_schedule="interleaved_1f1b"))
    assert megatron_env_problems(overlap, {}, "hopper") == []  # only a warning there


def test_fine_grained_offloading_needs_cpu_offload_v1():
    """arguments.py:1226: --fine-grained-activation-offloading under TE >= 2.10 -> NVTE_CPU_OFFLOAD_V1=1."""
    plan = _plan("megatron/llama3.1_8b.sh", **TUNED_8B)
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    assert _vars(megatron_env_problems(plan, env, "hopper")) == ["NVTE_CPU_OFFLOAD_V1"]
    assert megatron_env_problems(plan, env, "hopper", te_version=(2, 9)) == []
    assert _vars(megatron_env_problems(plan, env, "hopper", te_version=(2, 10)))
    assert megatron_env_problems(plan, {**env, "NVTE_CPU_OFFLOAD_V1": "1"}, "hopper") == []
    assert megatron_env_fixes(plan, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "hopper") == {
        "CUDA_DEVICE_MAX_CONNECTIONS": "8", "NVTE_CPU_OFFLOAD_V1": "1"}


def test_te_cuda_graphs_with_expandable_segments_need_graph_register_off():
    """arguments.py:1248: TE CUDA graphs + expandable_segments:True -> NCCL_GRAPH_REGISTER=0."""
    plan = _plan("megatron/llama3.1_70b.sh", training=dict(cuda_graph_impl="transformer_engine"))
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert _vars(megatron_env_problems(plan, env)) == ["NCCL_GRAPH_REGISTER"]
    assert megatron_env_problems(plan, {**env, "NCCL_GRAPH_REGISTER": "0"}) == []
    assert megatron_env_problems(plan, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}) == []
    local = plan.with_changes(training=dict(cuda_graph_impl="local"))
    assert megatron_env_problems(local, env) == []


def test_torchtitan_plans_have_no_megatron_env_rules():
    assert megatron_env_problems(_plan("torchtitan/llama3.1_8b.toml"), {}) == []


# --------------------------------------------------------------------------- the writers
def test_tuned_8b_script_exports_what_its_knobs_need():
    plan = _plan("megatron/llama3.1_8b.sh", **TUNED_8B)
    text = (RECIPES / "megatron/llama3.1_8b.sh").read_text()
    out = render_recipe(plan, text)
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1\n" in text
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=8\nexport NVTE_CPU_OFFLOAD_V1=1\n" in out  # edited in place + added
    assert "--use-megatron-fsdp" in out and "--fine-grained-activation-offloading" in out
    env = ms.from_script(out, "tuned.sh").env_values()
    assert env == {"CUDA_DEVICE_MAX_CONNECTIONS": "8", "NVTE_CPU_OFFLOAD_V1": "1"}
    assert megatron_env_problems(plan, env, "hopper") == []
    assert render_recipe(_plan("megatron/llama3.1_8b.sh"), text) == text  # unchanged plan: identical


def test_tuned_8b_yaml_gets_env_vars():
    plan = _plan("megatron/llama3.1_8b.yaml", **TUNED_8B)
    out = render_recipe(plan, (RECIPES / "megatron/llama3.1_8b.yaml").read_text())
    rec = from_yaml(out, "tuned.yaml")
    assert rec.env == {"NVTE_CPU_OFFLOAD_V1": "1"}  # FSDP needs CMC unset or > 1: the YAML leaves it unset
    assert megatron_env_problems(plan, recipe_env(rec), "hopper") == []
    assert out.rstrip().endswith("ENV_VARS:\n  NVTE_CPU_OFFLOAD_V1: '1'")


def test_nvidia_yaml_env_vars_are_edited_in_place():
    """An NVIDIA recipe's ENV_VARS gets the new variable; an existing value is edited where it is."""
    text = ("ENV_VARS:\n  NCCL_NVLS_ENABLE: '0'\n  CUDA_DEVICE_MAX_CONNECTIONS: '1'\nARGS:\n  num_layers: 4\n")
    rec = from_yaml(text, "r.yaml")
    assert rec.env == {"NCCL_NVLS_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    out = ms.apply_edits(text, rec.env_edits({"CUDA_DEVICE_MAX_CONNECTIONS": "8", "NVTE_CPU_OFFLOAD_V1": "1"}), "r")
    assert out == ("ENV_VARS:\n  NCCL_NVLS_ENABLE: '0'\n  CUDA_DEVICE_MAX_CONNECTIONS: '8'\n"
                   "  NVTE_CPU_OFFLOAD_V1: '1'\nARGS:\n  num_layers: 4\n")
    assert from_yaml(out, "r.yaml").env["NVTE_CPU_OFFLOAD_V1"] == "1"


def test_script_environment_is_read_and_edited_where_written():
    text = ("#!/bin/bash\n# header\n\nexport CUDA_DEVICE_MAX_CONNECTIONS=${CMC:-1}\nLOCAL=3\nexport LOCAL\n"
            "declare -x DX=7\nNOT_EXPORTED=5\nNCCL_X=2 torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2\n")
    rec = ms.from_script(text, "s.sh")
    assert rec.env_values() == {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "DX": "7", "LOCAL": "3", "NCCL_X": "2"}
    out = ms.apply_edits(text, ms.env_edits(rec, {"CUDA_DEVICE_MAX_CONNECTIONS": "8", "NVTE_CPU_OFFLOAD_V1": "1",
                                                  "NCCL_X": "0"}), "s.sh")
    assert "${CMC:-8}" in out and "NCCL_X=0 torchrun" in out
    assert "export LOCAL\ndeclare" in out and out.count("export NVTE_CPU_OFFLOAD_V1=1\n") == 1
    back = ms.from_script(out, "s.sh").env_values()
    assert (back["CUDA_DEVICE_MAX_CONNECTIONS"], back["NVTE_CPU_OFFLOAD_V1"], back["NCCL_X"]) == ("8", "1", "0")
    # no export in the script: the new one goes after the header comments; `env VAR=value` prefixes count
    bare = "#!/bin/bash\n# c\n\nenv A=1 torchrun pretrain_gpt.py --num-layers 2\n"
    rec = ms.from_script(bare, "b.sh")
    assert rec.env_values() == {"A": "1"}
    out = ms.apply_edits(bare, ms.env_edits(rec, {"B": "2"}), "b.sh")
    assert out == "#!/bin/bash\n# c\n\nexport B=2\n\nenv A=1 torchrun pretrain_gpt.py --num-layers 2\n"


# --------------------------------------------------------------------------- TorchTitan's own validation
def test_torchtitan_accepts_a_tuned_launch_and_rejects_a_broken_one():
    from primus_launch.adapters.torchtitan_argv import program_start
    from primus_launch.adapters.torchtitan_script import script_argv
    from primus_launch.frameworks.titan_validate import TitanCase, check_titan_case

    path = RECIPES / "torchtitan/llama3_8b_launch.sh"
    plan = load_recipe(path)
    tuned = plan.with_changes(parallel=dict(tp=4), training=dict(micro_batch_size=1)).model_copy(
        update={"source": plan.source})
    out = render_recipe(tuned, path.read_text())
    argv = script_argv(out, str(path))
    argv = argv[program_start(argv):]
    assert "4" in argv and "--parallelism.tensor_parallel_degree" in argv
    ok = check_titan_case(TitanCase("tuned", argv, plan.cluster.world_size))
    assert ok.ok, ok
    bad = [("3" if a == "4" and argv[i - 1] == "--parallelism.tensor_parallel_degree" else a) for i, a in enumerate(argv)]
    v = check_titan_case(TitanCase("broken", bad, plan.cluster.world_size))
    assert not v.ok and v.stage == "parallel_dims" and "WORLD_SIZE(8)" in v.error


# --------------------------------------------------------------------------- Megatron-LM's own validation
@pytest.mark.skipif(not os.environ.get("PRIMUS_LAUNCH_MLM_TREE"), reason="needs a Megatron-LM source tree "
                    "(PRIMUS_LAUNCH_MLM_TREE); scripts/check_tuned_recipes.py runs it")
def test_megatron_lm_rejects_the_tuned_8b_script_without_its_environment():
    from primus_launch.frameworks.mlm_validate import Launch, validate_launches

    plan = _plan("megatron/llama3.1_8b.sh", **TUNED_8B)
    out = render_recipe(plan, (RECIPES / "megatron/llama3.1_8b.sh").read_text())
    rec = ms.from_script(out, "tuned.sh")
    argv = [t.text for t in rec.tokens[rec.script_index + 1:]]
    cases = [Launch("fixed", argv, rec.env_values(), 8, 8, 9),
             Launch("as before", argv, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, 8, 8, 9),
             Launch("no offload env", argv, {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, 8, 8, 9)]
    fixed, before, no_offload = validate_launches(os.environ["PRIMUS_LAUNCH_MLM_TREE"], cases)
    assert fixed.ok, fixed
    assert not before.ok and "CUDA_DEVICE_MAX_CONNECTIONS" in before.error
    assert not no_offload.ok and "NVTE_CPU_OFFLOAD_V1" in no_offload.error


def test_tune_of_a_script_with_positional_parameters_writes_it(tmp_path, capsys):
    """``--tune script.sh -- A B``: the words after ``--`` are the script's $1 $2 (Megatron-LM's example
    scripts take the tokenizer and data paths so), not a training command to render."""
    from primus_launch.cli import main

    text = (RECIPES / "megatron/tiny_gpt_cpu.sh").read_text().replace("--num-layers 4", "--num-layers $1")
    script = tmp_path / "tiny.sh"
    script.write_text(text)
    rc = main(["--tune", str(script), "--dry-run", "--budget", "3", "--workers", "1", "--", "4"])
    assert rc == 0, capsys.readouterr().err
    out = (tmp_path / "tiny.tuned.sh").read_text()
    assert "--num-layers $1" in out
    assert load_recipe(tmp_path / "tiny.tuned.sh", script_args=["4"]).model.num_layers == 4


def test_tuned_primus_experiment_gets_its_env():
    """A Primus experiment's top-level ``env:`` (primus/core/runtime/train_runtime.py exports it) gets
    NVTE_CPU_OFFLOAD_V1 when the tune turns fine-grained offloading on; Primus sets
    CUDA_DEVICE_MAX_CONNECTIONS itself (8 under FSDP, env_patches.py), so FSDP adds nothing."""
    from primus_launch.adapters.primus_yaml import experiment_env, megatron_launch_env

    path = RECIPES / "primus/MI355X/llama3.1_8b.yaml"
    text = path.read_text()
    plan = load_recipe(path)
    offload = plan.with_changes(training=dict(offload=dict(activation_modules=("core_attn",)))).model_copy(
        update={"source": plan.source})
    out = render_recipe(offload, text)
    assert experiment_env(text) == {} and experiment_env(out) == {"NVTE_CPU_OFFLOAD_V1": "1"}
    assert megatron_env_problems(offload, megatron_launch_env(offload, text), "cdna4")  # as Primus would start it
    assert megatron_env_problems(offload, megatron_launch_env(offload, out), "cdna4") == []
    fsdp = plan.with_changes(parallel=dict(tp=1, sequence_parallel=False, dp_sharding="optimizer_grads")).model_copy(
        update={"source": plan.source})
    out = render_recipe(fsdp, text)
    assert experiment_env(out) == {} and megatron_launch_env(fsdp, out)["CUDA_DEVICE_MAX_CONNECTIONS"] == "8"


def test_torch_fsdp2_rules_and_the_move_to_megatron_fsdp(tmp_path):
    """arguments.py:598 (--overlap-param-gather needs the distributed optimizer or Megatron-FSDP) and
    :608-620 (torch FSDP2: no PP, no EP, untied embeddings, no fp16): a recipe on --use-torch-fsdp2
    whose tuned plan breaks one is written with Megatron-FSDP instead, and reads back the same plan."""
    from primus_launch.plan.legality import torch_fsdp2_problems

    text = (RECIPES / "megatron/llama3.1_8b.sh").read_text().replace(
        "    --use-distributed-optimizer\n    --overlap-grad-reduce\n    --overlap-param-gather\n",
        "    --use-torch-fsdp2\n    --overlap-grad-reduce\n    --no-gradient-accumulation-fusion\n").replace(
        "CUDA_DEVICE_MAX_CONNECTIONS=1", "CUDA_DEVICE_MAX_CONNECTIONS=8")  # torch FSDP2 asserts != 1 (line 622)
    path = tmp_path / "fsdp2.sh"
    path.write_text(text)
    plan = load_recipe(path)
    assert plan.parallel.dp_sharding == "full" and not plan.training.overlap_param_gather
    assert torch_fsdp2_problems(plan) == []
    # a recipe of its own on torch FSDP2 with PP is refused, as validate_args refuses it (line 608)
    (tmp_path / "pp2.sh").write_text(text.replace("PP_SIZE=1", "PP_SIZE=2"))
    with pytest.raises(PlanError, match=r"--use-torch-fsdp2.*parallel\.pp 1 with torch FSDP2 \(here 2\)"):
        load_recipe(tmp_path / "pp2.sh")
    assert [f for f, _, _ in torch_fsdp2_problems(plan.with_changes(parallel=dict(pp=2), training=dict(
        overlap_param_gather=True)))] == ["training.overlap_param_gather", "parallel.pp"]
    # a change torch FSDP2 takes stays on it
    mbs = plan.with_changes(training=dict(micro_batch_size=2)).model_copy(update={"source": plan.source})
    assert "--use-torch-fsdp2" in render_recipe(mbs, text)
    # overlap_param_gather: Megatron-FSDP (optim_grads_params) instead
    opg = plan.with_changes(training=dict(overlap_param_gather=True)).model_copy(update={"source": plan.source})
    out = render_recipe(opg, text)
    assert "--use-torch-fsdp2" not in out and "--use-megatron-fsdp" in out and "optim_grads_params" in out
    assert "--ckpt-format fsdp_dtensor" in out
    (tmp_path / "opg.sh").write_text(out)
    back = load_recipe(tmp_path / "opg.sh")
    assert back.parallel.dp_sharding == "full" and back.training.overlap_param_gather
