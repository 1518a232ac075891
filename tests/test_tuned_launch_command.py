"""user18: a tuned recipe file that holds no training command (a Megatron-Bridge run config, a Megatron YAML) could
not be launched: ``--tune R.yaml --emit slurm`` said "give the command after --" after the whole search, and
``--tune R.yaml --emit slurm -- CMD`` was refused as the YAML's positional parameters.  Now the command after ``--``
runs with its word for the recipe pointed at the tuned file, and a command naming the recipe nowhere (it would run
the original) or a missing one is refused before the search, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from primus_launch.cli import main
from primus_launch.launch.tuned_command import recipe_words, with_tuned_recipe

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/megatron/llama3.1_8b.yaml"


def test_words_naming_the_recipe_point_at_the_tuned_file(tmp_path, monkeypatch):
    cfg = tmp_path / "run_config.yaml"
    cfg.write_text("x: 1\n")
    tuned = tmp_path / "run_config.tuned.yaml"
    monkeypatch.chdir(tmp_path)
    cmd = ["torchrun", "run.py", "--config-file", "run_config.yaml", "--c2=./run_config.yaml", str(cfg),
           "run_config.yaml.bak", "--other=x.yaml"]
    assert recipe_words(cmd, cfg) == [3, 4, 5]
    assert with_tuned_recipe(cmd, cfg, tuned) == [
        "torchrun", "run.py", "--config-file", "run_config.tuned.yaml", "--c2=./run_config.tuned.yaml", str(tuned),
        "run_config.yaml.bak", "--other=x.yaml"]
    elsewhere = tmp_path / "out" / "t.yaml"
    assert with_tuned_recipe(["a", "run_config.yaml"], cfg, elsewhere) == ["a", str(elsewhere)]


def _tune(tmp_path, *extra: str) -> tuple[int, Path]:
    recipe = tmp_path / RECIPE.name
    shutil.copy(RECIPE, recipe)
    rc = main(["--tune", str(recipe), "--dry-run", "--max-work", "2000", *extra])
    return rc, recipe


def test_emit_runs_the_command_on_the_tuned_file(tmp_path, capsys):
    recipe = tmp_path / RECIPE.name
    rc, recipe = _tune(tmp_path, "--emit", "torchrun", "--", "python", "pretrain_gpt.py", "--yaml-cfg",
                       str(recipe))
    out = capsys.readouterr().out.strip().splitlines()
    tuned = recipe.with_name(recipe.stem + ".tuned.yaml")
    assert rc == 0 and tuned.is_file()
    assert out[-1].endswith(f"pretrain_gpt.py --yaml-cfg {tuned}"), out[-1]


@pytest.mark.parametrize("extra, says", [
    (("--emit", "slurm", "--", "python", "pretrain_gpt.py", "--yaml-cfg", "other.yaml"),
     "would run the original recipe, not the tuned one"),
    (("--emit", "slurm"), "is no launch script and holds no training command; give the command"),
    (("--launch",), "is no launch script; give the command that runs it after --"),
])
def test_refused_before_the_search(tmp_path, capsys, extra, says):
    rc, recipe = _tune(tmp_path, *extra)
    err = capsys.readouterr().err
    assert rc == 2 and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [recipe.name]  # nothing written: refused before the search


SCRIPT = """#!/bin/bash
#SBATCH --nodes=1
#SBATCH --gpus-per-node=8
export CUDA_DEVICE_MAX_CONNECTIONS={cmc}
CFG=$1
srun torchrun --nproc-per-node 8 pretrain_gpt.py --yaml-cfg "$CFG"
"""


def test_launch_script_and_its_environment(tmp_path, monkeypatch):
    from primus_launch.launch.tuned_command import launch_env, launch_script

    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text("x: 1\n")
    (tmp_path / "train.sh").write_text(SCRIPT.format(cmc=1))
    cmd = ["NCCL_DEBUG=WARN", "sbatch", "--nodes", "1", "train.sh", "r.yaml"]
    assert launch_script(cmd, "r.yaml") == ("train.sh", ["r.yaml"], {"NCCL_DEBUG": "WARN"})
    assert launch_env(cmd, "r.yaml") == ("train.sh", {"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    assert launch_env(["torchrun", "pretrain_gpt.py", "--yaml-cfg", "r.yaml"], "r.yaml") == ("the command", {})


@pytest.mark.parametrize("cmc", ["1", "8"])
def test_tuned_plan_against_the_launch_scripts_environment(tmp_path, capsys, monkeypatch, cmc):
    """user19: ``--tune R.yaml --emit/--launch -- sbatch train.sh R.yaml`` with a script exporting
    CUDA_DEVICE_MAX_CONNECTIONS=1 (the original's tp 2 on H100 needs it) emitted the launch of a tuned plan on
    Megatron-FSDP, which Megatron's validate_args stops at start-up.  The tuned plan (read back from the written
    file) is checked against the script's exports (truth: ``megatron_env_problems``, Megatron-LM's asserts) and
    the launch refused in one line naming the variable, its value and what the plan needs, before anything is
    written (tune17: the tuned recipe and its trial log were left behind by the refusal).  Megatron-Bridge's
    ``env_vars`` could not override the export (``os.environ.setdefault``)."""
    from primus_launch.adapters import load_recipe
    from primus_launch.plan.legality import megatron_env_problems
    from primus_launch.projection.hardware.gpus import gpu_arch

    plain = tmp_path / "plain"  # the same tune without the launch: its tuned plan, read back from its file
    plain.mkdir()
    assert _tune(plain)[0] == 0
    capsys.readouterr()
    best = load_recipe(plain / (RECIPE.stem + ".tuned.yaml"))
    probs = megatron_env_problems(best, {"CUDA_DEVICE_MAX_CONNECTIONS": cmc}, gpu_arch(best.cluster.gpu))
    if cmc == "1":
        assert probs, "the scenario: the tune leaves tp x FSDP where CUDA_DEVICE_MAX_CONNECTIONS=1 stops Megatron"
    launch = tmp_path / "launch"
    launch.mkdir()
    monkeypatch.chdir(launch)
    (launch / "train.sh").write_text(SCRIPT.format(cmc=cmc))
    rc, recipe = _tune(launch, "--emit", "torchrun", "--", "sbatch", "train.sh", RECIPE.name)
    out, err = capsys.readouterr()
    tuned = recipe.with_name(recipe.stem + ".tuned.yaml")
    if probs:
        (_, value, allowed), = probs
        line = err.strip().splitlines()[-1]
        assert rc == 2 and f"train.sh sets CUDA_DEVICE_MAX_CONNECTIONS={value}" in line and allowed in line, err
        assert "not launched, nothing written" in line
        assert sorted(p.name for p in launch.iterdir()) == sorted([recipe.name, "train.sh"])  # no file left behind
    else:
        assert rc == 0 and tuned.is_file() and out.strip().splitlines()[-1].endswith(f"train.sh {tuned.name}"), out
