"""user16: a tuned launch script whose node / GPU count changed kept a stale ``#SBATCH`` header, and TorchTitan's
``--nproc_per_node=${NGPU}`` was rewritten as a literal ``--nproc-per-node 4`` instead of editing ``NGPU=``.
Checked with bash itself: ``bash -n`` on the written script, then the script run with ``torchrun`` replaced by
``echo`` (and ``srun`` by a pass-through), so the launched argv is what bash expands, not what our reader says."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

HEADER = "#!/bin/bash\n#SBATCH --job-name=t\n#SBATCH --nodes=2\n#SBATCH --ntasks=2\n#SBATCH --gpus-per-node=8\n"
TITAN = HEADER + ("NGPU=8\nNNODES=2\nsrun torchrun --nnodes=${NNODES} --nproc_per_node=${NGPU} --rdzv_backend c10d "
                  "-m torchtitan.train --module llama3 --config llama3_8b --parallelism.tensor_parallel_degree 2 "
                  "--training.local_batch_size 2\n")
MEGATRON = HEADER + ("# primus-launch: gpu=h100-sxm\nNGPU=8\nNNODES=2\n"
                     "torchrun --nnodes=${NNODES} --nproc_per_node=${NGPU} pretrain_gpt.py --num-layers 4 "
                     "--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
                     "--micro-batch-size 1 --global-batch-size 32 --bf16 --tensor-model-parallel-size 2 "
                     "--train-iters 10 --vocab-size 32000\n")


def _launched(script: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(the #SBATCH directives as written, torchrun's --nnodes / --nproc_per_node as bash passes them)."""
    text = script.read_text()
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    run = subprocess.run(["bash", "-c", 'torchrun() { echo "$@"; }; srun() { "$@"; }; export -f torchrun srun; '
                          f'bash {script}'], capture_output=True, text=True, check=True)
    argv = run.stdout.split()
    opts = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("--n") and "=" in a}
    header = dict(re.findall(r"^#SBATCH (--[a-z-]+)=(\S+)", text, flags=re.M))
    return header, opts


@pytest.mark.parametrize("fmt", ["torchtitan", "megatron"])
def test_tuned_counts_reach_header_and_variables(tmp_path, fmt):
    src = tmp_path / "run.sh"
    src.write_text(TITAN if fmt == "torchtitan" else MEGATRON)
    out = tmp_path / "tuned.sh"
    if fmt == "torchtitan":
        from primus_launch.adapters.torchtitan_script import load_titan_script, write_titan_script
        plan = load_titan_script(src)
        write = write_titan_script
    else:
        from primus_launch.adapters.megatron import load_megatron, write_megatron
        plan = load_megatron(src)
        write = write_megatron
    header, opts = _launched(src)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (2, 8)
    assert header == {"--job-name": "t", "--nodes": "2", "--ntasks": "2", "--gpus-per-node": "8"}
    assert opts == {"--nnodes": "2", "--nproc_per_node": "8"}
    write(plan.with_changes(cluster={"num_nodes": 1, "gpus_per_node": 4}), src, out)
    header, opts = _launched(out)
    assert opts == {"--nnodes": "1", "--nproc_per_node": "4"}     # still ${NNODES} / ${NGPU}, assignments edited
    assert "--nproc_per_node=${NGPU}" in out.read_text() and "\nNGPU=4\n" in out.read_text()
    # one torchrun task per node: sbatch's allocation is the launch line's
    assert header == {"--job-name": "t", "--nodes": "1", "--ntasks": "1", "--gpus-per-node": "4"}
    # an unchanged plan writes the script unchanged
    write(plan, src, tmp_path / "same.sh")
    assert (tmp_path / "same.sh").read_text() == src.read_text()


def test_one_task_per_gpu_header_follows_the_gpu_count():
    """``--ntasks-per-node`` equal to the GPUs per node (srun starts every rank) follows the new GPU count,
    ``--gres=gpu:N`` too; ``-N`` short form with its value as the next word."""
    from primus_launch.adapters.sbatch_edit import sbatch_count_edits

    text = "#!/bin/bash\n#SBATCH -N 4\n#SBATCH --ntasks-per-node=8 --gres=gpu:h100:8\n#SBATCH -n 32\necho hi\n"
    out = text
    for a, b, v in sorted(sbatch_count_edits(text, 2, 4), reverse=True):
        out = out[:a] + v + out[b:]
    assert out == "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=4 --gres=gpu:h100:4\n#SBATCH -n 8\necho hi\n"
    assert sbatch_count_edits(text, 4, 8) == []
