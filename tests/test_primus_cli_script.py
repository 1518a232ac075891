"""A Primus run as its README launches it: ``primus-cli slurm srun -N 4 -- train pretrain --config X.yaml
--key value ...`` (Primus docs/02-user-guide/configuration-system.md: CLI overrides, ``--key value`` /
``--key=value`` / ``key=value``, dotted keys nest, merged last).  The experiment is the bundled test tree
of tests/test_adapter_primus.py."""

from __future__ import annotations

import pytest

from primus_launch.adapters import detect_kind, load_recipe, render_recipe
from primus_launch.adapters.primus_cli import cli_overrides
from primus_launch.errors import UserError
from primus_launch.plan import PlanError
from tests.test_adapter_primus import _tree

MEG = "examples/megatron/configs/MI355X/llama3_8B-BF16-pretrain.yaml"
TT = "examples/torchtitan/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml"


def test_cli_override_forms():
    got = cli_overrides(["--micro_batch_size", "2", "--global_batch_size=256", "recompute_granularity=full",
                         "--use_flash_attn", "--training.seq_len", "4096", "stray"])
    assert got == {"micro_batch_size": 2, "global_batch_size": 256, "recompute_granularity": "full",
                   "use_flash_attn": True, "training": {"seq_len": 4096}}


def test_megatron_experiment_with_cli_overrides_env_and_nodes(tmp_path):
    root = _tree(tmp_path)
    run = root / "run.sh"
    text = ("#!/bin/bash\nexport PRIMUS_TP=4\n"
            f"./primus-cli slurm srun -N 4 -- train pretrain --config {MEG} \\\n"
            "    --micro_batch_size 2 --global_batch_size=512 recompute_granularity=full --recompute_method uniform "
            "--recompute_num_layers 1\n")
    run.write_text(text)
    assert detect_kind(run) == "primus-cli"
    plan = load_recipe(run)
    assert (plan.cluster.gpu, plan.cluster.num_nodes, plan.cluster.gpus_per_node) == ("mi355x", 4, 8)
    assert plan.parallel.tp == 4  # ${PRIMUS_TP:2} from the script's export
    assert (plan.training.micro_batch_size, plan.training.global_batch_size) == (2, 512)  # CLI beats overrides
    assert plan.training.recompute.granularity == "full" and plan.model.num_layers == 32
    with pytest.raises(UserError, match="a Primus launch .* is read, not written"):
        render_recipe(plan, text)


def test_torchtitan_experiment_and_nnodes(tmp_path):
    root = _tree(tmp_path)
    run = root / "scripts" / "run.sh"
    run.parent.mkdir()
    run.write_text(f"NNODES=2 ./runner/primus-cli direct -- train pretrain --config {TT} "
                   "--training.local_batch_size 4\n")
    plan = load_recipe(run)
    assert (plan.cluster.num_nodes, plan.training.micro_batch_size, plan.model.seq_length) == (2, 4, 8192)


def test_missing_config_is_one_line(tmp_path):
    run = tmp_path / "run.sh"
    run.write_text("./primus-cli direct -- train pretrain --config examples/nope.yaml\n")
    with pytest.raises(UserError, match="--config='examples/nope.yaml'"):
        load_recipe(run)


def test_example_script_and_main_py_forms(tmp_path):
    # Primus docs/02-user-guide/megatron-lm-training.md: NNODES=8 EXP=... bash examples/run_slurm_pretrain.sh --key v
    root = _tree(tmp_path)
    run = root / "bench.sh"
    run.write_text(f"NNODES=2 EXP={MEG} bash examples/run_slurm_pretrain.sh --micro_batch_size 4 "
                   "--global_batch_size 256 --recompute_num_layers 1 --recompute_granularity full "
                   "--recompute_method block\n")
    assert detect_kind(run) == "primus-cli"
    plan = load_recipe(run)
    assert (plan.cluster.num_nodes, plan.training.micro_batch_size, plan.training.global_batch_size) == (2, 4, 256)
    assert (plan.training.recompute.method, plan.training.recompute.num_layers) == ("block", 1)
    main = root / "main.sh"
    main.write_text(f"export EXP={MEG}\ntorchrun --nnodes 2 --nproc_per_node 4 primus/cli/main.py train pretrain "
                    "--config $EXP --tensor_model_parallel_size 1 --global_batch_size 64\n")
    plan = load_recipe(main)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node, plan.parallel.tp) == (2, 4, 1)


def test_other_primus_commands_are_refused_by_name(tmp_path):
    run = tmp_path / "proj.sh"
    run.write_text("./primus-cli direct -- projection memory --config examples/megatron/configs/MI300X/x.yaml\n")
    assert detect_kind(run) == "primus-cli"
    with pytest.raises(UserError, match="runs 'projection memory', not 'train pretrain'"):
        load_recipe(run)


def test_world_size_error_names_the_launchs_node_count(tmp_path):
    """user15: ``NNODES=4 EXP=X bash examples/run_slurm_pretrain.sh`` with a global batch the 4 nodes cannot split
    said 'must be divisible by micro_batch_size x dp = 1 x 16' without saying where the 16 came from."""
    root = _tree(tmp_path)
    run = root / "bench.sh"
    run.write_text(f"NNODES=4 EXP={MEG} bash examples/run_slurm_pretrain.sh --global_batch_size 24\n")
    with pytest.raises((UserError, PlanError), match=r"global_batch_size=24: .*dp = 1 x 16 \(nodes from the launch's NNODES=4\)"):
        load_recipe(run)


def test_launch_cluster_notes(tmp_path):
    """user15: ``primus-cli slurm srun -N 4 -- train pretrain --config X`` took the GPU from X's folder name without a
    note (the YAML alone says it); ``EXP=X bash examples/run_pretrain.sh`` without NNODES (the script's default: 1
    node) was projected on the fitted node count with the YAML's note 'Primus configs do not state the node count'."""
    root = _tree(tmp_path)
    run = root / "run.sh"
    run.write_text(f"./primus-cli slurm srun -N 4 -- train pretrain --config {MEG}\n")
    notes = load_recipe(run).source.notes
    assert notes[1] == "cluster.gpu=mi355x: guessed from the folder name 'MI355X'"
    run.write_text(f"EXP={MEG} bash examples/run_pretrain.sh\n")
    notes = load_recipe(run).source.notes
    assert any(n.startswith("cluster: 1 node(s) x 8 GPUs, the fewest the parallel layout fits: the launch sets no "
                            "NNODES (examples/run_pretrain.sh and run_slurm_pretrain.sh default to 1 node)")
               for n in notes), notes
