"""user18: a Slurm batch script (or a command) that runs a Megatron-Bridge training script with ``--config-file
run_config.yaml`` was refused as "not a Megatron-LM flag recipe (Megatron-Bridge / NeMo recipes build the model in
Python ...)", while the run config it names is read.  The refusal now names that file and the command that projects
it on the script's cluster (#SBATCH's node count x GPUs per node), and that command reads."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.adapters.command_recipe import plan_from_command
from primus_launch.errors import UserError

FIXTURE = Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml"

SBATCH = """#!/bin/bash
#SBATCH --nodes=16
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
export CUDA_DEVICE_MAX_CONNECTIONS=1
srun python /opt/Megatron-Bridge/scripts/training/run_recipe.py --config-file {cfg}
"""


def _suggested(msg: str) -> tuple[str, dict]:
    m = re.search(r"--project (\S+) --gpu (\S+) --nodes (\d+) --gpus-per-node (\d+)", msg)
    assert m, msg
    return m.group(1), {"gpu": m.group(2), "num_nodes": int(m.group(3)), "gpus_per_node": int(m.group(4))}


def test_sbatch_running_a_bridge_config_names_it_and_its_cluster(tmp_path):
    cfg = tmp_path / "run_config.yaml"
    shutil.copy(FIXTURE, cfg)
    script = tmp_path / "train.sbatch"
    script.write_text(SBATCH.format(cfg=cfg))
    with pytest.raises(UserError) as ei:
        load_recipe(script)
    msg = str(ei.value)
    assert "build the model in Python" not in msg and "gpu: the default" in msg
    path, flags = _suggested(msg)
    assert path == str(cfg) and flags["num_nodes"] == 16 and flags["gpus_per_node"] == 8  # the #SBATCH allocation
    plan = load_recipe(path, flags)  # the suggestion reads: the config on the script's 128 GPUs
    assert plan.cluster.world_size == 128 and plan.model.num_layers == 48


def test_command_with_config_file_keeps_the_cluster_flags(tmp_path):
    with pytest.raises(UserError) as ei:
        plan_from_command(["python", "run_recipe.py", "--config-file", "run_config.yaml"],
                          {"num_nodes": 2, "gpu": "b200"})
    path, flags = _suggested(str(ei.value))
    assert (path, flags["gpu"], flags["num_nodes"]) == ("run_config.yaml", "b200", 2)

