"""Reading a recipe from a training command line and rendering the tuned command (issue 7).

Truth used: the flags written in the command (and the recipe files they point at, read by the
adapters' own file readers), torchrun's own parser for the launcher options, and round trips
(render -> read gives the requested plan; the original files are untouched).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch.distributed.run import get_args_parser

from primus_launch.adapters import load_recipe
from primus_launch.adapters.torchtitan import load_torchtitan
from primus_launch.adapters.command_recipe import framework_of, plan_from_command, render_command
from primus_launch.errors import UserError
from primus_launch.plan import Cluster

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "recipes" / "megatron" / "tiny_gpt_cpu.sh"
TITAN_8B = ROOT / "recipes" / "torchtitan" / "llama3.1_8b.toml"
PRIMUS = shutil.which("primus-launch") or str(Path(sys.executable).with_name("primus-launch"))

MEGATRON_CMD = ["torchrun", "--nnodes", "4", "--nproc_per_node=8", "pretrain_gpt.py",
                "--num-layers", "32", "--hidden-size", "4096", "--ffn-hidden-size", "14336",
                "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8",
                "--seq-length", "8192", "--max-position-embeddings", "8192", "--swiglu",
                "--untie-embeddings-and-output-weights", "--padded-vocab-size", "128256",
                "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                "--micro-batch-size", "1", "--global-batch-size", "256", "--bf16",
                "--data-path", "/data/corpus text", "--lr", "3e-4"]


def _tiny_command() -> list[str]:
    """The torchrun command line written in the bundled tiny recipe."""
    text = TINY.read_text()
    cmd = text[text.index("\ntorchrun ") + 1:].replace("\\\n", " ").replace('"$@"', "")
    return shlex.split(cmd)


def test_megatron_flags_give_the_written_plan():
    plan = plan_from_command(MEGATRON_CMD, {"gpu": "h200", "num_nodes": None, "gpus_per_node": None})
    m, p, t, c = plan.model, plan.parallel, plan.training, plan.cluster
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads, m.kv_heads) == (32, 4096, 14336, 32, 8)
    assert (m.seq_length, m.vocab_size, m.swiglu) == (8192, 128256, True)
    assert (p.tp, p.pp, t.micro_batch_size, t.global_batch_size, t.precision) == (2, 2, 1, 256, "bf16")
    assert (c.gpu, c.num_nodes, c.gpus_per_node) == ("h200", 4, 8)  # torchrun's options, the override's GPU
    assert plan.dp == 8 and framework_of(MEGATRON_CMD) == "megatron"
    # overrides win over torchrun's options
    c2 = plan_from_command(MEGATRON_CMD, {"num_nodes": 2, "gpus_per_node": 4}).cluster
    assert (c2.num_nodes, c2.gpus_per_node, c2.gpu) == (2, 4, "h100-sxm")


def test_megatron_render_changes_only_tuned_tokens_and_cluster():
    plan = plan_from_command(MEGATRON_CMD)
    tuned = plan.with_changes(parallel={"tp": 4, "pp": 1}, training={"micro_batch_size": 2},
                              cluster={"num_nodes": 8})
    out = render_command(tuned, MEGATRON_CMD)
    changed = {i for i, (a, b) in enumerate(zip(out, MEGATRON_CMD)) if a != b}
    assert len(out) == len(MEGATRON_CMD)
    assert {MEGATRON_CMD[i - 1] for i in changed} <= {"--nnodes", "--tensor-model-parallel-size",
                                                      "--pipeline-model-parallel-size", "--micro-batch-size"}
    a = get_args_parser().parse_args(out[1:])
    assert (int(a.nnodes), int(a.nproc_per_node)) == (8, 8)
    again = plan_from_command(out)
    assert again.parallel == tuned.parallel and again.training == tuned.training and again.cluster == tuned.cluster
    assert render_command(plan, MEGATRON_CMD) == MEGATRON_CMD  # unchanged plan: identical command


def test_nproc_decided_on_node_needs_an_override():
    cmd = ["torchrun", "--nproc-per-node", "gpu", *MEGATRON_CMD[4:]]
    with pytest.raises(UserError, match="--gpus-per-node"):
        plan_from_command(cmd)
    assert plan_from_command(cmd, {"gpus_per_node": 8}).cluster.world_size == 8


def test_launch_script_command_reads_the_script_and_renders_a_sibling(tmp_path):
    script = tmp_path / "tiny.sh"
    shutil.copy(TINY, script)
    original = script.read_text()
    argv = ["bash", str(script)]
    plan = plan_from_command(argv)
    assert plan.model_dump(exclude={"source"}) == load_recipe(script).model_dump(exclude={"source"})
    assert (plan.parallel.pp, plan.cluster.world_size) == (2, 2) and framework_of(argv) == "script"
    tuned = plan.with_changes(parallel={"tp": 2, "pp": 1})
    out = render_command(tuned, argv)
    assert out == ["bash", str(tmp_path / "tiny.tuned.sh")]
    assert script.read_text() == original  # never over the user's recipe
    reread = plan_from_command(out)
    assert (reread.parallel.tp, reread.parallel.pp) == (2, 1)


def test_bare_script_token_is_spelled_relative(tmp_path, monkeypatch):
    shutil.copy(TINY, tmp_path / "tiny.sh")
    monkeypatch.chdir(tmp_path)
    plan = plan_from_command(["./tiny.sh"])
    assert render_command(plan.with_changes(training={"micro_batch_size": 4}), ["./tiny.sh", "--x"]) == [
        "./tiny.tuned.sh", "--x"]
    assert (tmp_path / "tiny.tuned.sh").stat().st_mode & 0o111  # still executable


def test_torchtitan_command_with_overrides(tmp_path):
    toml = tmp_path / "llama3_8b.toml"
    shutil.copy(TITAN_8B, toml)
    original = toml.read_text()
    argv = ["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "-m", "torchtitan.train",
            "--job.config_file", str(toml), "--training.steps", "50", "--parallelism.tensor_parallel_degree=2"]
    plan = plan_from_command(argv)
    file_plan = load_torchtitan(toml, Cluster(gpu=plan.cluster.gpu, num_nodes=2, gpus_per_node=8))
    assert framework_of(argv) == "torchtitan"
    assert plan.model == file_plan.model  # the TOML's model flavor
    assert (plan.parallel.tp, plan.training.train_iters) == (2, 50)  # the command's overrides win
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (2, 8)
    tuned = plan.with_changes(parallel={"tp": 4}, training={"train_iters": 50})
    out = render_command(tuned, argv)
    assert toml.read_text() == original
    tuned_toml = tmp_path / "llama3_8b.tuned.toml"
    assert out == [*argv[:8], str(tuned_toml), "--training.steps", "50", "--parallelism.tensor_parallel_degree=4"]
    reread = plan_from_command(out)
    assert reread.parallel == tuned.parallel and reread.model == tuned.model
    # the tuned file alone (without the command's overrides) says the same
    assert load_torchtitan(tuned_toml, tuned.cluster).parallel.tp == 4


def test_torchtitan_without_torchrun_uses_the_header_cluster(tmp_path):
    toml = tmp_path / "x.toml"
    shutil.copy(TITAN_8B, toml)
    plan = plan_from_command([sys.executable, "-m", "torchtitan.train", f"--job.config_file={toml}"])
    assert plan.cluster == load_torchtitan(toml).cluster
    with pytest.raises(UserError, match="no such file"):
        plan_from_command(["torchrun", "-m", "torchtitan.train", "--job.config_file", str(tmp_path / "nope.toml")])


def test_cli_tune_from_command_prints_a_tuned_command_that_reads_back(tmp_path):
    """``primus-launch --tune --dry-run --json -- torchrun ...``: the tuned command re-reads as the best plan."""
    from cli_run import run_cli

    cmd = _tiny_command()
    rc, out, err, _ = run_cli(["--tune", "--dry-run", "--json", "--", *cmd], tmp_path)  # main in this process
    assert rc == 0, err[-2000:]
    d = json.loads(out)
    tuned_cmd = d["tuned_command"]
    assert tuned_cmd[:8] == cmd[:8]  # same launcher and program
    best = plan_from_command(tuned_cmd)
    want = d["best_plan"]
    assert best.parallel.model_dump() == want["parallel"]
    assert best.training.model_dump(mode="json") == want["training"]
    assert best.cluster.model_dump() == want["cluster"]


def test_cli_refuses_to_launch_a_plan_that_does_not_fit_unless_forced(tmp_path):
    marker = tmp_path / "launched"
    prog = tmp_path / "pretrain_gpt.py"
    prog.write_text(f"import pathlib, sys; pathlib.Path({str(marker)!r}).write_text(' '.join(sys.argv[1:]))\n")
    big = [sys.executable, str(prog), "--num-layers", "80", "--hidden-size", "8192", "--ffn-hidden-size", "28672",
           "--num-attention-heads", "64", "--seq-length", "8192", "--max-position-embeddings", "8192",
           "--padded-vocab-size", "128256", "--micro-batch-size", "8", "--global-batch-size", "64", "--bf16"]
    base = [PRIMUS, "--project", "--dry-run", "--launch", "--gpu", "a100-sxm-80gb", "--nodes", "1",
            "--gpus-per-node", "8"]
    r = subprocess.run([*base, "--", *big], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "does not fit" in err[0] and "--force" in err[0]
    assert not marker.exists()
    r = subprocess.run([*base, "--force", "--", *big], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert marker.read_text() == " ".join(big[2:])  # the command ran, unchanged


RUN_TRAIN = """#!/usr/bin/bash
# as torchtitan <= 0.2's run_train.sh (BSD-3-Clause upstream): a job TOML relative to where it runs
set -ex
NGPU=${NGPU:-"4"}
CONFIG_FILE=${CONFIG_FILE:-"./torchtitan/models/llama3/train_configs/llama3_8b.toml"}
overrides=""
if [ $# -ne 0 ]; then
    overrides="$*"
fi
PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True" \\
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \\
--local-ranks-filter 0 --role rank --tee 3 \\
-m torchtitan.train --job.config_file ${CONFIG_FILE} --training.local_batch_size 3 $overrides
"""


@pytest.mark.parametrize("where", ["root", "nested"])
def test_launch_script_naming_a_job_toml_reads_the_toml(tmp_path, where):
    """Regression: torchtitan <= 0.2's run_train.sh (and the experiments' scripts) went to the Megatron
    reader: ``--num-layers=None: required``.  The TOML is found where the script runs it from (the
    repository's root: next to the script, or above it), the command's overrides and torchrun's GPU
    count apply; the TOML is an input no output may name."""
    from primus_launch.adapters import detect_kind, load_recipe
    from primus_launch.adapters.torchtitan import load_torchtitan

    toml = tmp_path / "torchtitan/models/llama3/train_configs/llama3_8b.toml"
    toml.parent.mkdir(parents=True)
    toml.write_text((ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text())
    script = tmp_path / ("run_train.sh" if where == "root" else "torchtitan/models/llama3/run_train.sh")
    script.write_text(RUN_TRAIN)
    assert detect_kind(script) == "torchtitan-config-script"
    plan = load_recipe(script)
    own = load_torchtitan(toml)
    assert plan.training.micro_batch_size == 3 != own.training.micro_batch_size  # the command's override
    assert plan.cluster.world_size == 4 and plan.model.num_layers == own.model.num_layers == 32
    # a tune's recipe is the TOML: --out must be one; a key the command passes would win over its tuned value
    from primus_launch.adapters.torchtitan_script import check_config_script_tunable

    with pytest.raises(UserError, match=r"--out='t.sh': the tuned recipe of run_train.sh is its job TOML"):
        check_config_script_tunable(script, "t.sh")
    check_config_script_tunable(script, "t.toml", plan.with_changes(training={"train_iters": 7}), plan)
    with pytest.raises(UserError, match=r"its command passes --training.local_batch_size 3, which wins"):
        check_config_script_tunable(script, None, plan.with_changes(training={"micro_batch_size": 2,
                                                                              "global_batch_size": 64}), plan)
    script.write_text(RUN_TRAIN.replace("llama3_8b.toml", "missing.toml"))
    with pytest.raises(UserError, match=r"--job.config_file='./torchtitan/models/llama3/train_configs/missing.toml'"
                                        r": no such file next to"):
        load_recipe(script)


def test_launch_script_given_relative_from_below_the_root_finds_its_toml(tmp_path, monkeypatch):
    """Regression: a run_train.sh named by a relative path from a folder below the checkout's root (``cd
    torchtitan/models/llama3; primus-launch run_train.sh``) looked for its job TOML only in the folders the
    relative path names (none above ``.``): ``no such file``.  The Megatron and Primus script readers already
    walked every folder above the resolved script (:func:`primus_launch.inputs.find_from_run_root`, now shared)."""
    from primus_launch.adapters import load_recipe

    toml = tmp_path / "torchtitan/models/llama3/train_configs/llama3_8b.toml"
    toml.parent.mkdir(parents=True)
    toml.write_text((ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text())
    (toml.parents[1] / "run_train.sh").write_text(RUN_TRAIN)
    monkeypatch.chdir(toml.parents[1])
    plan = load_recipe("run_train.sh")
    assert plan.model.num_layers == 32 and plan.training.micro_batch_size == 3


@pytest.mark.parametrize("argv", [
    MEGATRON_CMD,
    ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "llama3", "--config", "llama3_8b"],
    ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--job.config_file", str(TITAN_8B)],
    ["bash", str(ROOT / "recipes/torchtitan/llama3_8b_launch.sh")],
], ids=["megatron", "titan-launch", "titan-job", "titan-script"])
def test_a_command_s_default_gpu_is_noted(argv):
    """torchrun states nodes and processes, never the GPU kind: a launch command's plan was projected on the
    default GPU (``Cluster``'s) without a word, where a Megatron script's default is noted; it now says so, and
    not where ``--gpu`` names the GPU (the TorchTitan job's TOML states its H100s in its header comment:
    no note)."""
    default = Cluster.model_fields["gpu"].default
    plan = plan_from_command(argv)
    said = [n for n in plan.source.notes if n.startswith(f"cluster gpu={default}: the default")]
    assert plan.cluster.gpu == default
    assert len(said) == (0 if "--job.config_file" in argv else 1), plan.source.notes
    given = plan_from_command(argv, {"gpu": "b200"})
    assert given.cluster.gpu == "b200" and not any("the default (the launch command" in n for n in given.source.notes)


_MLM = ("pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 "
        "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --tokenizer-type NullTokenizer "
        "--vocab-size 32000 --bf16").split()


@pytest.mark.parametrize("launcher", [["torchrun", "--nnodes", "2", "--nproc-per-node", "8"], ["python"]])
def test_env_words_before_the_launcher_are_its_environment(launcher):
    """user16: ``NCCL_ALGO=Ring torchrun --nnodes 2 ...`` under ``--gpu a100-sxm-80gb`` noted "cluster gpu=h100-sxm:
    the default (... pass --gpu)" beside an a100 cluster, and NCCL_ALGO was not read.  Truth: torchrun's own parser
    reads the counts past the NAME=value words (a shell hands them to the environment, not to torchrun)."""
    argv = ["NCCL_ALGO=Ring", *launcher, *_MLM]
    if launcher[0] == "torchrun":
        tr = get_args_parser().parse_args(launcher[1:] + _MLM)
        want = ("a100-sxm-80gb", int(tr.nnodes), int(tr.nproc_per_node))
        ov = {"gpu": "a100-sxm-80gb"}
    else:
        want, ov = ("a100-sxm-80gb", 1, 8), {"gpu": "a100-sxm-80gb", "num_nodes": 1, "gpus_per_node": 8}
    plan = plan_from_command(argv, ov)
    assert (plan.cluster.gpu, plan.cluster.num_nodes, plan.cluster.gpus_per_node) == want
    assert not any("gpu=h100-sxm" in n for n in plan.source.notes), plan.source.notes
    assert {u.flag: u.value for u in plan.source.unmodelled}.get("NCCL_ALGO") == "Ring"
