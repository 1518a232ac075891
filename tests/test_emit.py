"""Emitted launches (torchrun line, Slurm batch script) match the plan's nodes and GPUs (issue 7).

Checks read the emitted commands back with torchrun's own argument parser
(``torch.distributed.run.get_args_parser``), syntax-check the Slurm script with ``bash -n``, and
execute it with stand-in ``scontrol``/``srun``/``torchrun`` programs to see what each node runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from torch.distributed.run import get_args_parser

from primus_launch.launch.emit import shell_join, slurm_script, torchrun_command
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.adapters.torchrun_argv import split_torchrun


def _plan(nodes: int, gpus: int, tp: int = 2, pp: int = 2) -> Plan:
    return Plan(model=ModelArch(name="llama3-8b", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
                                num_attention_heads=32, num_query_groups=8, vocab_size=128256, seq_length=8192),
                parallel=Parallelism(tp=tp, pp=pp), training=Training(global_batch_size=384, micro_batch_size=1),
                cluster=Cluster(gpu="h200", num_nodes=nodes, gpus_per_node=gpus))


PROGRAM = ["pretrain_gpt.py", "--num-layers", "32", "--tensor-model-parallel-size", "2",
           "--data-path", "/data/my corpus_text_document", "--nnodes", "99", "--note=$HOME"]


def _torchrun_args(argv: list[str]):
    """What torchrun itself would parse from ``argv`` (a torchrun command)."""
    assert argv[0] == "torchrun"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PET_")}
    saved = os.environ.copy()
    try:
        os.environ.clear()
        os.environ.update(env)
        return get_args_parser().parse_args(argv[1:])
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize("nodes,gpus", [(1, 8), (4, 8), (16, 4), (2, 1)])
def test_torchrun_line_matches_plan(nodes, gpus):
    plan = _plan(nodes, gpus, tp=1 if gpus == 1 else 2, pp=1 if nodes * gpus < 4 else 2)
    cmd = torchrun_command(plan, PROGRAM)
    a = _torchrun_args(cmd)
    assert int(a.nnodes) * int(a.nproc_per_node) == plan.world_size
    assert (int(a.nnodes), int(a.nproc_per_node)) == (nodes, gpus)
    assert [a.training_script, *a.training_script_args] == PROGRAM  # program untouched
    if nodes == 1:
        assert a.standalone
    else:
        assert a.rdzv_backend == "c10d" and a.rdzv_endpoint == "${MASTER_ADDR}:${MASTER_PORT:-29500}"
        # printed for a shell, the endpoint expands on the node
        out = subprocess.run(["bash", "-c", f"MASTER_ADDR=n0; printf '%s\\n' {shell_join(cmd)}"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        assert "n0:29500" in out and out[-len(PROGRAM):] == PROGRAM


def test_torchrun_command_rewrites_only_topology_of_a_torchrun_command():
    given = ["torchrun", "--nnodes=1", "--nproc_per_node", "2", "--max-restarts", "3", "--master-addr",
             "10.1.2.3", "--master_port=6000", "--log-dir", "/tmp/logs", *PROGRAM]
    cmd = torchrun_command(_plan(4, 8), given)
    a = _torchrun_args(cmd)
    assert (int(a.nnodes), int(a.nproc_per_node)) == (4, 8)
    assert int(a.max_restarts) == 3 and a.log_dir == "/tmp/logs"  # the user's other options survive
    assert a.rdzv_endpoint == "10.1.2.3:6000" and a.rdzv_backend == "c10d"  # their own rendezvous host
    assert a.master_addr is None or a.master_addr == "127.0.0.1"
    assert [a.training_script, *a.training_script_args] == PROGRAM


def test_python_programs_become_torchrun_programs():
    plan = _plan(1, 8)
    a = _torchrun_args(torchrun_command(plan, ["python3", "train.py", "--steps", "5"]))
    assert (a.training_script, a.training_script_args, a.module) == ("train.py", ["--steps", "5"], False)
    a = _torchrun_args(torchrun_command(plan, [sys.executable, "-m", "torchtitan.train",
                                               "--job.config_file", "x.toml"]))
    assert a.module and a.training_script == "torchtitan.train"
    assert a.training_script_args == ["--job.config_file", "x.toml"]
    with pytest.raises(UserError):
        torchrun_command(plan, [])
    with pytest.raises(UserError, match="--bogus"):
        torchrun_command(plan, ["torchrun", "--bogus", "train.py"])


def _sbatch(script: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)$", script, flags=re.M))


@pytest.mark.parametrize("nodes,gpus", [(1, 8), (4, 8), (32, 8), (3, 4)])
def test_slurm_script_fields_and_syntax(tmp_path, nodes, gpus):
    plan = _plan(nodes, gpus, pp=1 if nodes * gpus % 4 else 2)
    script = slurm_script(plan, ["torchrun", "--nproc-per-node", "8", *PROGRAM], job_name="llama 8b/tune")
    sb = _sbatch(script)
    assert script.startswith("#!/bin/bash\n")
    assert int(sb["nodes"]) == nodes and int(sb["gpus-per-node"]) == gpus and sb["ntasks-per-node"] == "1"
    assert int(sb["nodes"]) * int(sb["gpus-per-node"]) == plan.world_size
    assert sb["job-name"] == "llama-8b-tune"
    # #SBATCH lines must all come before the first command, or sbatch ignores them
    first_cmd = next(i for i, l in enumerate(script.splitlines()) if l and not l.startswith("#"))
    assert all(i < first_cmd for i, l in enumerate(script.splitlines()) if l.startswith("#SBATCH"))
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_slurm_script_runs_one_torchrun_per_node_with_rendezvous_on_first_node(tmp_path):
    """Execute the script with stand-ins: scontrol lists the nodes, srun starts the command once per
    node, torchrun records its argv.  Each node must get the plan's topology and the first node."""
    plan = _plan(3, 4, pp=1)
    script = slurm_script(plan, PROGRAM)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "calls.jsonl"
    stubs = {
        # many lines, like a large allocation: a reader that stops early would SIGPIPE it
        "scontrol": '[ "$1 $2" = "show hostnames" ] || exit 1; printf "gpu-07\\ngpu-08\\ngpu-09\\n"; '
                    'for i in $(seq 1 20000); do echo "spare-$i"; done',
        "srun": 'n=""; while [ "${1#-}" != "$1" ]; do case "$1" in --nodes=*) n="${1#--nodes=}";; esac; '
                'shift; done; for i in $(seq 1 "$n"); do SLURM_NODEID=$((i-1)) "$@"; done',
        "torchrun": f'{shlex.quote(sys.executable)} -c "import json,sys,os; '
                    f'open({str(record)!r},\'a\').write(json.dumps([os.environ[\'SLURM_NODEID\']]+sys.argv[1:])+chr(10))" "$@"',
    }
    for name, body in stubs.items():
        p = bin_dir / name
        p.write_text(f"#!/bin/bash\n{body}\n")
        p.chmod(0o755)
    job = tmp_path / "job.sbatch"
    job.write_text(script)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu-[07-09]",
           "HOME": "/home/u"}
    r = subprocess.run(["bash", str(job)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    calls = [json.loads(l) for l in record.read_text().splitlines()]
    assert [c[0] for c in calls] == ["0", "1", "2"]  # one torchrun per node
    for c in calls:
        a = _torchrun_args(["torchrun", *c[1:]])
        assert (int(a.nnodes), int(a.nproc_per_node)) == (3, 4)
        assert (a.rdzv_backend, a.rdzv_endpoint, a.rdzv_id) == ("c10d", "gpu-07:29500", "4242")
        assert [a.training_script, *a.training_script_args] == PROGRAM  # "$HOME" stayed literal


def test_split_torchrun_follows_torchrun_parser():
    argv = ["python", "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", "-m",
            "torchtitan.train", "--job.config_file", "a.toml"]
    tr = split_torchrun(argv)
    assert tr.prefix == argv[:3] and tr.program == ["torchtitan.train", "--job.config_file", "a.toml"]
    assert tr.get("nproc_per_node") == "2" and tr.program_is_module and tr.argv() == argv
    assert split_torchrun(["bash", "train.sh"]) is None
    assert tr.replaced({"nproc_per_node": "8"}) == [*argv[:3], "--nproc-per-node", "8", *argv[4:]]


def test_program_of_recipe_files_and_loopback_endpoint():
    """A recipe file gives its own training command (Megatron script as the shell expands it, with
    the plan's values), and a script's loopback master address is not used as a multi-node endpoint."""
    from primus_launch.adapters import load_recipe
    from primus_launch.launch.emit import DEFAULT_RDZV_ENDPOINT, program_of_recipe

    root = Path(__file__).resolve().parents[1]
    tiny = load_recipe(root / "recipes" / "megatron" / "tiny_gpt_cpu.sh")
    prog = program_of_recipe(tiny.with_changes(parallel={"tp": 2, "pp": 1}))
    a = _torchrun_args(prog)
    assert (a.nnodes, a.nproc_per_node, a.module, a.training_script) == (
        "1", "2", True, "primus_launch.examples.tiny_mcore_train")
    args = a.training_script_args
    assert args[args.index("--tensor-model-parallel-size") + 1] == "2"
    assert args[args.index("--pipeline-model-parallel-size") + 1] == "1"
    big = load_recipe(root / "recipes" / "megatron" / "llama3.1_70b.sh")
    assert big.cluster.num_nodes > 1
    b = _torchrun_args(torchrun_command(big, program_of_recipe(big)))
    assert b.rdzv_endpoint == DEFAULT_RDZV_ENDPOINT and int(b.nnodes) == big.cluster.num_nodes
    assert b.training_script == "pretrain_gpt.py" and "--num-layers" in b.training_script_args
    titan = load_recipe(root / "recipes" / "torchtitan" / "llama3.1_8b.toml")
    t = _torchrun_args(torchrun_command(titan, program_of_recipe(titan)))
    assert t.module and t.training_script == "torchtitan.train"
    assert t.training_script_args == ["--job.config_file", titan.source.path]


def test_recipe_launches_keep_the_script_and_its_environment(tmp_path):
    """A TorchTitan 0.3 launch script was emitted as ``-m torchtitan.train --job.config_file SCRIPT.sh`` (the
    bash script given to torchtitan as its job TOML); a launch script's environment was dropped, so the
    emitted 8B Megatron line (TP 2 on H100) lacked the ``CUDA_DEVICE_MAX_CONNECTIONS=1`` Megatron-LM's
    validate_args asserts.  Both read back through torchrun's parser and ``bash -n``."""
    from primus_launch.adapters import load_recipe
    from primus_launch.launch.emit import env_words, launch_env_of_recipe, program_of_recipe

    root = Path(__file__).resolve().parents[1]
    titan = load_recipe(root / "recipes" / "torchtitan" / "llama3_8b_launch.sh").with_changes(parallel={"tp": 4})
    t = _torchrun_args(torchrun_command(titan, program_of_recipe(titan)))
    assert t.module and t.training_script == "torchtitan.train"
    args = t.training_script_args
    assert args[args.index("--module") + 1] == "llama3" and "--job.config_file" not in args
    assert args[args.index("--parallelism.tensor_parallel_degree") + 1] == "4"  # the plan's value
    assert launch_env_of_recipe(titan)["PYTORCH_ALLOC_CONF"] == "expandable_segments:True"
    mlm = load_recipe(root / "recipes" / "megatron" / "llama3.1_8b.sh")
    env = launch_env_of_recipe(mlm)
    assert env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    line = " ".join(env_words(env) + [shell_join(torchrun_command(mlm, program_of_recipe(mlm)))])
    words = shlex.split(line)
    assert words[0] == "CUDA_DEVICE_MAX_CONNECTIONS=1" and words[1] == "torchrun"
    script = tmp_path / "job.sh"
    script.write_text(slurm_script(mlm, program_of_recipe(mlm), env=env))
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1\n" in script.read_text()
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert env_words({"A": "x y"}) == ["A='x y'"]
