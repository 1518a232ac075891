"""Reading round 11 (held-out audit of Megatron-LM, Megatron-Bridge, Primus and TorchTitan recipes at their
2026-08-22 snapshots): the constructs the audit found read wrong or refused without naming why.

- A Megatron-LM functional test states its run's GPU count in ``MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE``
  (``tests/functional_tests/shell_test_utils/run_ci_test.sh`` @d98e8a6 exports it as ``GPUS_PER_NODE`` for the
  ``MODEL_ARGS`` run); the reader took the default 1 x 8 and refused the run's batch as indivisible.
- A cluster rule broken on the default cluster (the recipe states no GPU count) now names that cluster.

The snippets are minimal ones written for these tests from the formats' facts, not copied from the recipes.
"""

from __future__ import annotations

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.plan import PlanError

_MODEL_ARGS = """\
MODEL_ENV_VARS:
  MODEL_ARGS:
    GPUS_PER_NODE: {gpn}
  MODEL_ARGS_2:
    GPUS_PER_NODE: 2
MODE: pretraining
MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 256
  --num-attention-heads: 4
  --seq-length: 128
  --max-position-embeddings: 128
  --micro-batch-size: 2
  --global-batch-size: 2
  --tensor-model-parallel-size: 1
  --vocab-size: 1000
  --tokenizer-type: NullTokenizer
  --bf16: true
MODEL_ARGS_2:
  --micro-batch-size: 1
  --global-batch-size: 2
"""


def _write(tmp_path, text, name="model_config.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_functional_test_gpus_per_node_is_the_run_cluster(tmp_path):
    plan = load_recipe(_write(tmp_path, _MODEL_ARGS.format(gpn=1)))
    c = plan.cluster
    assert (c.num_nodes, c.gpus_per_node) == (1, 1)
    assert plan.training.global_batch_size == 2 and plan.training.micro_batch_size == 2
    assert any("MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE=1" in n for n in plan.source.notes)


def test_cluster_flags_beat_the_functional_test_count(tmp_path):
    text = _MODEL_ARGS.format(gpn=1).replace("--global-batch-size: 2", "--global-batch-size: 4", 1)
    plan = load_recipe(_write(tmp_path, text), {"gpus_per_node": 2, "num_nodes": 1})
    assert plan.cluster.gpus_per_node == 2
    assert not any("MODEL_ENV_VARS" in n for n in plan.source.notes)


def test_functional_test_gpus_per_node_must_be_a_count(tmp_path):
    with pytest.raises(PlanError, match=r"MODEL_ENV_VARS\.MODEL_ARGS\.GPUS_PER_NODE='x'"):
        load_recipe(_write(tmp_path, _MODEL_ARGS.format(gpn="x")))


def test_world_size_rule_on_the_default_cluster_names_it(tmp_path):
    text = _MODEL_ARGS.split("MODEL_ENV_VARS")[0] + "MODEL_ARGS:" + _MODEL_ARGS.split("\nMODEL_ARGS:")[1]
    # PP 12: a world of 8n GPUs holds it from 3 nodes (dp 2), where a global batch of one micro-batch cannot split;
    # no node count holds both (user20: a count that does is read instead, test_node_fit)
    text = text.replace("--tensor-model-parallel-size: 1", "--tensor-model-parallel-size: 1\n"
                        "  --pipeline-model-parallel-size: 12")
    text = text.replace("--num-layers: 4", "--num-layers: 12")
    with pytest.raises(PlanError) as e:
        load_recipe(_write(tmp_path, text))
    msg = str(e.value)
    assert "world size 8" in msg and "the recipe states no GPU count" in msg and "--nodes" in msg
    assert "\n" not in msg
    # PP 16 fits 2 nodes (dp 1): read there, the note saying so (user20)
    plan = load_recipe(_write(tmp_path, text.replace(": 12", ": 16")))
    assert plan.cluster.world_size == 16 and plan.source.nodes_fitted


# --------------------------------------------------------------------------- launch commands given after --
# A launch script's arguments, and the environment written before a Primus launch or torchtitan's run_train.sh,
# were dropped or refused when the run was given as a command (`primus-launch --project -- CMD`).
_POSITIONAL = """\
#!/bin/bash
TP=${1:-1}
MBS=${2:-1}
torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 \\
  --seq-length 128 --max-position-embeddings 128 --micro-batch-size $MBS --global-batch-size 64 \\
  --tensor-model-parallel-size $TP --vocab-size 1000 --tokenizer-type NullTokenizer --bf16
"""


def test_command_passes_its_arguments_to_the_script(tmp_path, monkeypatch):
    from primus_launch.adapters.command_recipe import plan_from_command

    _write(tmp_path, _POSITIONAL, "pos.sh")
    monkeypatch.chdir(tmp_path)
    for argv in (["bash", "pos.sh", "4", "2"], ["bash", "-e", "pos.sh", "4", "2"]):
        plan = plan_from_command(argv)
        assert (plan.parallel.tp, plan.training.micro_batch_size) == (4, 2)
        assert plan.source.script_args == ["4", "2"]
    assert load_recipe(tmp_path / "pos.sh", script_args=["4", "2"]).parallel.tp == 4  # the file form: the same


# torchtitan main run_train.sh (BSD-3-Clause upstream), its launch line: the script's arguments follow "$@"
_RUN_TRAIN_03 = """\
#!/usr/bin/bash
NGPU=${NGPU:-"8"}
MODULE=${MODULE:-"llama3"}
CONFIG=${CONFIG:-"llama3_debugmodel"}
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \\
-m torchtitan.train --module ${MODULE} --config ${CONFIG} "$@"
"""


def test_titan_script_arguments_are_its_overrides(tmp_path, monkeypatch):
    from primus_launch.adapters import check_writable
    from primus_launch.adapters.command_recipe import plan_from_command
    from primus_launch.errors import UserError

    p = _write(tmp_path, _RUN_TRAIN_03, "train.sh")
    alone = load_recipe(p)
    assert (alone.parallel.tp, alone.model.num_layers) == (1, 6)  # llama3_debugmodel, no arguments
    args = ["--parallelism.tensor_parallel_degree", "2", "--training.local_batch_size", "4"]
    plan = load_recipe(p, script_args=args)
    assert (plan.parallel.tp, plan.training.micro_batch_size) == (2, 4)
    monkeypatch.chdir(tmp_path)
    assert plan_from_command(["./train.sh", *args]).parallel.tp == 2
    with pytest.raises(UserError, match="script arguments '--parallelism.tensor_parallel_degree 2 "):
        check_writable(plan)  # a tuned script would run under these arguments
    check_writable(alone)


def test_v02_run_train_overrides_from_dollar_star(tmp_path):
    # torchtitan <= 0.2 run_train.sh: overrides="$*" then $overrides after --job.config_file
    from tests.test_command_recipe import RUN_TRAIN, ROOT

    toml = tmp_path / "torchtitan/models/llama3/train_configs/llama3_8b.toml"
    toml.parent.mkdir(parents=True)
    toml.write_text((ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text())
    p = _write(tmp_path, RUN_TRAIN, "run_train.sh")
    assert load_recipe(p).parallel.tp == 1
    assert load_recipe(p, script_args=["--parallelism.tensor_parallel_degree", "2"]).parallel.tp == 2


def test_run_train_call_with_its_environment_as_a_command(tmp_path, monkeypatch):
    from primus_launch.adapters import check_writable
    from primus_launch.adapters.command_recipe import plan_from_command, render_command
    from primus_launch.errors import UserError

    monkeypatch.chdir(tmp_path)
    argv = ["NGPU=4", "MODULE=llama3", "CONFIG=llama3_8b", "./run_train.sh", "--parallelism.tensor_parallel_degree",
            "2"]
    plan = plan_from_command(argv)
    # torchtitan 0.3.0 registry: llama3_8b is 32 layers of dim 4096
    assert (plan.model.num_layers, plan.model.hidden_size, plan.parallel.tp, plan.world_size) == (32, 4096, 2, 4)
    assert plan_from_command(["env", *argv]).parallel.tp == 2
    with pytest.raises(UserError, match="run_train.sh call is read, not rewritten"):
        check_writable(plan)
    with pytest.raises(UserError, match="run_train.sh call is read, not rewritten"):
        render_command(plan, argv)


def test_environment_before_another_script_is_its_start_environment(tmp_path, monkeypatch):
    # `TP=2 bash pos.sh`: the words are the environment the script starts in (envnote; refused before); pos.sh
    # sets TP from $1 whatever the environment says, so the plan keeps $1's default; a tune is refused by name
    from primus_launch.adapters.command_recipe import check_command_tunable, plan_from_command
    from primus_launch.errors import UserError

    _write(tmp_path, _POSITIONAL, "pos.sh")
    monkeypatch.chdir(tmp_path)
    assert plan_from_command(["TP=2", "bash", "pos.sh"]).parallel.tp == 1
    assert plan_from_command(["MBS=4", "bash", "pos.sh", "2"]).parallel.tp == 2
    with pytest.raises(UserError, match=r"^command: TP=2 before pos.sh: the tuned script would run with them"):
        check_command_tunable(["TP=2", "bash", "pos.sh"])


def test_primus_launch_as_a_command(tmp_path, monkeypatch):
    from primus_launch.adapters.command_recipe import plan_from_command
    from tests.test_adapter_primus import _tree
    from tests.test_primus_cli_script import MEG

    root = _tree(tmp_path)
    monkeypatch.chdir(root)
    plan = plan_from_command(["./primus-cli", "slurm", "srun", "-N", "2", "--", "train", "pretrain", "--config", MEG,
                              "--micro_batch_size", "2"])
    assert (plan.cluster.gpu, plan.cluster.num_nodes, plan.training.micro_batch_size) == ("mi355x", 2, 2)
    assert plan.source.format == "primus-cli-script"  # read, not tuned (check_writable refuses it)
    same = load_recipe(_write(root, f"./primus-cli slurm srun -N 2 -- train pretrain --config {MEG} "
                                    "--micro_batch_size 2\n", "run.sh"))
    assert same.model_dump(exclude={"source"}) == plan.model_dump(exclude={"source"})
    env_form = plan_from_command(["env", f"EXP={MEG}", "NNODES=2", "bash", "examples/run_pretrain.sh",
                                  "--micro_batch_size", "2"])
    assert env_form.model_dump(exclude={"source"}) == plan.model_dump(exclude={"source"})


def test_primus_launch_script_arguments_follow_dollar_at(tmp_path):
    from tests.test_adapter_primus import _tree
    from tests.test_primus_cli_script import MEG

    root = _tree(tmp_path)
    run = _write(root, f'#!/bin/bash\n./primus-cli direct -- train pretrain --config {MEG} "$@"\n', "run.sh")
    assert load_recipe(run, script_args=["--micro_batch_size", "2"]).training.micro_batch_size == 2
    assert load_recipe(run).training.micro_batch_size != 2


def test_a_megatron_script_named_run_pretrain_is_not_a_primus_launch(tmp_path, monkeypatch):
    from primus_launch.adapters.command_recipe import plan_from_command

    _write(tmp_path, _POSITIONAL, "run_pretrain.sh")
    monkeypatch.chdir(tmp_path)
    assert plan_from_command(["bash", "run_pretrain.sh", "2"]).parallel.tp == 2


def test_a_megatron_run_train_sh_with_an_environment_is_not_torchtitans(tmp_path, monkeypatch):
    from primus_launch.adapters.command_recipe import framework_of

    _write(tmp_path, _POSITIONAL, "run_train.sh")
    monkeypatch.chdir(tmp_path)
    for argv in (["TP=2", "./run_train.sh"], ["CONFIG=x", "./run_train.sh"]):
        assert framework_of(argv) == "script"  # read as the script it is, in that environment
