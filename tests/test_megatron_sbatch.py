"""A Slurm batch script's world size: the ``#SBATCH`` allocation, the SLURM_* variables Slurm sets from it
(sbatch(1) "OUTPUT ENVIRONMENT VARIABLES": SLURM_NNODES, SLURM_JOB_NUM_NODES, SLURM_NTASKS_PER_NODE,
SLURM_GPUS_ON_NODE ...) and ``srun``'s inheritance of ``--nodes`` / ``--ntasks-per-node`` from it.  Before,
``torchrun --nnodes $SLURM_NNODES`` and a bare ``srun python pretrain_gpt.py`` were read as one node
(one process), silently."""

from __future__ import annotations

import pytest

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.adapters.megatron_script import sbatch_allocation

ARGS = ("--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 --max-position-embeddings 4096 "
        "--micro-batch-size 2 --global-batch-size 256 --bf16 --vocab-size 32000")

CASES = {
    # torchrun under srun, its node count from the allocation's environment
    "torchrun_env": ("#!/bin/bash\n#SBATCH -N 4\n#SBATCH --gpus-per-node=8\n"
                     f"srun torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 --rdzv_backend c10d pretrain_gpt.py {ARGS}\n",
                     4, 8),
    # one task per GPU started by srun itself: both counts inherited from #SBATCH
    "srun_inherits": (f"#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\nsrun python pretrain_gpt.py {ARGS}\n",
                      4, 8),
    # a default that Slurm's variable overrides inside the job
    "default_overridden": ("#!/bin/bash\n#SBATCH --nodes 2\nNNODES=${SLURM_NNODES:-1}\n"
                           f"torchrun --nnodes $NNODES --nproc_per_node 8 pretrain_gpt.py {ARGS}\n", 2, 8),
    # srun's own options win over the header
    "srun_own": (f"#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --gres=gpu:8\nsrun -N 1 --ntasks-per-node=8 python pretrain_gpt.py {ARGS}\n",
                 1, 8),
    # getopt's attached short forms (srun(1): -N, --nodes=<minnodes>[-maxnodes]; -n, --ntasks=<number>)
    "srun_attached": (f"#!/bin/bash\n#SBATCH --nodes=8\nsrun -N4 --ntasks-per-node=8 python pretrain_gpt.py {ARGS}\n",
                      4, 8),
    "srun_total_tasks": (f"#!/bin/bash\nsrun -N4 -n32 -l python pretrain_gpt.py {ARGS}\n", 4, 8),
    # the job's total tasks from the header (sbatch(1): -n, --ntasks=<number>), spread over its nodes
    "sbatch_total_tasks": (f"#!/bin/bash\n#SBATCH -N 2\n#SBATCH -n16\nsrun python pretrain_gpt.py {ARGS}\n", 2, 8),
    "sbatch_total_tasks_long": (f"#!/bin/bash\n#SBATCH --nodes=4 --ntasks 32\nsrun python pretrain_gpt.py {ARGS}\n",
                                4, 8),
    "srun_total_tasks_long": (f"#!/bin/bash\n#SBATCH --ntasks-per-node=4\n"
                              f"srun --nodes=2 --ntasks=16 python pretrain_gpt.py {ARGS}\n", 2, 8),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_world_size_from_the_allocation(tmp_path, name):
    text, nodes, gpn = CASES[name]
    p = tmp_path / f"{name}.sh"
    p.write_text(text)
    plan = load_recipe(p)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (nodes, gpn)
    assert render_recipe(plan, text) == text


def test_header_parsing_stops_at_the_first_command():
    text = ("#!/bin/bash\n#SBATCH --job-name=x -N2-4\n#SBATCH --gres=gpu:h100:8 # eight\n#SBATCH --ntasks-per-node 8\n"
            "echo hi\n#SBATCH --nodes=16\n")
    assert sbatch_allocation(text) == {"nodes": 4, "gpus_per_node": 8, "ntasks_per_node": 8}


def test_a_slurm_suffix_is_a_launch_script(tmp_path):
    text, nodes, gpn = CASES["srun_inherits"]
    p = tmp_path / "train.slurm"
    p.write_text(text)
    plan = load_recipe(p)
    assert (plan.source.format, plan.world_size) == ("megatron-bash", nodes * gpn)


def test_sbatch_here_document_runs_the_training_command(tmp_path):
    # Megatron-LM examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh: the arguments joined into a command string
    # ("... ${ARGS[@]}": bash joins the elements with spaces there), submitted with `sbatch <<EOF` whose
    # #SBATCH lines give the allocation and whose srun runs `bash -x -c "$CMD"`
    text = ("#!/bin/bash\nARGS=(\n  " + ARGS.replace(" --", "\n  --") + "\n)\n"
            'CMD="cd /workspace; python pretrain_gpt.py ${ARGS[@]}"\n'
            "sbatch <<EOF\n#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n"
            'srun --mpi=pmix -l bash -x -c "${CMD}" 2>&1 | tee log.txt\nEOF\n')
    p = tmp_path / "sbatch_run.sh"
    p.write_text(text)
    plan = load_recipe(p)
    assert (plan.model.num_layers, plan.model.hidden_size, plan.training.global_batch_size) == (24, 2048, 256)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (2, 8)
    assert render_recipe(plan, text) == text
    tuned = plan.with_changes(training={"micro_batch_size": 1}).model_copy(update={"source": plan.source})
    assert "--micro-batch-size\n  1" in render_recipe(tuned, text) or "--micro-batch-size 1" in render_recipe(tuned, text)


def test_header_allocation_reaches_srun_bash_c(tmp_path):
    text = ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n"
            f'CMD="python pretrain_gpt.py {ARGS}"\nsrun bash -c "$CMD"\n')
    p = tmp_path / "job.sh"
    p.write_text(text)
    assert load_recipe(p).world_size == 16


def test_srun_total_tasks_must_spread_evenly(tmp_path):
    from primus_launch.plan import PlanError

    p = tmp_path / "uneven.sh"
    p.write_text(f"#!/bin/bash\nsrun -N4 -n30 python pretrain_gpt.py {ARGS}\n")
    with pytest.raises(PlanError, match="-n.*30.*multiple of the node count 4"):
        load_recipe(p)


def test_sbatch_total_tasks_must_spread_evenly(tmp_path):
    from primus_launch.plan import PlanError

    p = tmp_path / "uneven_header.sh"
    p.write_text(f"#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks=30\nsrun python pretrain_gpt.py {ARGS}\n")
    with pytest.raises(PlanError, match="#SBATCH --ntasks.*30.*multiple of the node count 4"):
        load_recipe(p)
