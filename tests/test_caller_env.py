"""The caller's environment and a launch script's default expansions (adapters/caller_env.py).

``TP=4 bash train.sh`` runs TP=4 where the script says ``TP=${TP:-2}`` (bash(1), "Parameter Expansion":
``${p:-w}`` / ``${p-w}`` / ``${p:=w}`` use ``w`` only when ``p`` is unset (or null)); the plan is the script as
written, so ``TP=4 primus-launch --project train.sh`` reads TP=2 and says so in one note -- exactly when the
environment sets a variable the script reads to a value that changes the plan.  Each expectation below is the
value bash gives the variable (the script is run by bash itself in the first test).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.adapters.caller_env import command_effects, env_note, recipe_effects

_ARGS = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
         "--vocab-size 1000 --tokenizer-type NullTokenizer --bf16 --micro-batch-size 1 --global-batch-size 64")
_CMD = f"torchrun --nproc-per-node 8 pretrain_gpt.py {_ARGS} --tensor-model-parallel-size $TP\n"
FORMS = {"colon-dash": "TP=${TP:-2}\n", "assign-default": ": ${TP:=2}\n", "export-dash": "export TP=${TP-2}\n",
         "test-z": '[ -z "$TP" ] && TP=2\n'}


def _script(tmp_path: Path, body: str, name: str = "train.sh") -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/bash\n" + body)
    return p


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_default_form_is_noted_when_the_environment_sets_another_value(tmp_path, form):
    p = _script(tmp_path, FORMS[form] + _CMD)
    if shutil.which("bash"):  # bash itself: the variable's value with TP=4 in its environment, and without
        probe = FORMS[form] + 'echo "$TP"\n'
        run = {e: subprocess.run(["bash", "-c", probe], env={"TP": e} if e else {}, capture_output=True, text=True)
               .stdout.strip() for e in ("4", "")}
        assert run == {"4": "4", "": "2"}
    plan = load_recipe(p)
    assert plan.parallel.tp == 2  # the script as written
    (e,) = recipe_effects(p, plan, {"TP": "4", "HOME": "/root"})
    assert (e.name, e.value, e.changes) == ("TP", "4", (("parallel.tp", 2, 4),))
    assert plan.parallel.tp == 2  # the note never changes the plan
    note = env_note(e, "train.sh", command="bash train.sh")
    assert "TP=4 is set in this environment" in note and "runs tp=4" in note and "plan has tp=2" in note
    assert "primus-launch --project -- TP=4 bash train.sh" in note


def test_no_note_when_unset_equal_set_by_the_script_or_feeding_nothing(tmp_path):
    p = _script(tmp_path, "TP=${TP:-2}\nPP=1\nLOGS=${LOGS:-/tmp/logs}\n" + _CMD.replace("\n", " --pipeline-model-"
                                                                                     "parallel-size $PP\n"))
    plan = load_recipe(p)
    assert recipe_effects(p, plan, {}) == []  # unset
    assert recipe_effects(p, plan, {"TP": "2"}) == []  # equal
    assert recipe_effects(p, plan, {"PP": "2"}) == []  # the script sets PP before reading it
    assert recipe_effects(p, plan, {"LOGS": "/data"}) == []  # read, but it feeds nothing in the plan
    assert recipe_effects(p, plan, {"GBS": "128"}) == []  # not read at all
    assert [e.name for e in recipe_effects(p, plan, {"TP": "4", "PP": "2", "LOGS": "/x"})] == ["TP"]


def test_a_command_prefix_counts_and_leaves_no_note(tmp_path, monkeypatch):
    from primus_launch.adapters.command_recipe import plan_from_command

    _script(tmp_path, FORMS["colon-dash"] + _CMD)
    monkeypatch.chdir(tmp_path)
    plan = plan_from_command(["TP=4", "bash", "train.sh"])
    assert plan.parallel.tp == 4  # the command's own environment: as bash runs it
    assert command_effects(["TP=4", "bash", "train.sh"], plan, {"TP": "8"})[0] == []  # the prefix beats it
    base = plan_from_command(["bash", "train.sh"])
    effects, label = command_effects(["bash", "train.sh"], base, {"TP": "4"})
    assert label == "train.sh" and [(e.name, e.changes) for e in effects] == [("TP", (("parallel.tp", 2, 4),))]
    # a value the plan cannot take (TP 8 over 4 attention heads): still noted, with the reading's one line
    (e,), _ = command_effects(["bash", "train.sh"], base, {"TP": "8"})
    assert e.changes == () and "num_attention_heads" in e.error and "fails" in env_note(e, "train.sh")


def test_tune_note_says_where_the_tuned_value_goes(tmp_path):
    from primus_launch.adapters import render_recipe

    p = _script(tmp_path, FORMS["colon-dash"] + _CMD)
    plan = load_recipe(p)
    (e,) = recipe_effects(p, plan, {"TP": "4"})
    note = env_note(e, "train.sh", tuning=True)
    assert "writes the tuned values where the script's are" in note and "unset TP" in note
    tuned = plan.with_changes(parallel={"tp": 1}).model_copy(update={"source": plan.source})
    assert "TP=${TP:-1}" in render_recipe(tuned, p.read_text())  # the default: what TP=4 beats at launch


def test_cli_prints_the_note_and_refuses_to_launch_with_it(tmp_path, monkeypatch, capsys):
    from primus_launch.cli import main

    p = _script(tmp_path, FORMS["colon-dash"] + _CMD)
    monkeypatch.setenv("TP", "4")
    assert main(["--project", str(p), "--dry-run", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["plan"]["parallel"]["tp"] == 2
    assert err.count("TP=4 is set in this environment") == 1
    assert main(["--project", str(p), "--dry-run", "--launch"]) != 0
    assert "--launch: TP=4 in this environment would change the run" in capsys.readouterr().err
    monkeypatch.setenv("TP", "2")
    assert main(["--project", str(p), "--dry-run", "--json"]) == 0
    assert "is set in this environment" not in capsys.readouterr().err


_JOB = ('[model]\nname = "llama3"\nflavor = "{flavor}"\n[training]\nlocal_batch_size = 2\nseq_len = 2048\n'
        "[parallelism]\ntensor_parallel_degree = 1\n")
_RUN_TRAIN_V02 = """\
#!/usr/bin/bash
NGPU=${NGPU:-"8"}
export LOG_RANK=${LOG_RANK:-0}
CONFIG_FILE=${CONFIG_FILE:-"./train_configs/debug_model.toml"}
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --local-ranks-filter ${LOG_RANK} \\
-m torchtitan.train --job.config_file ${CONFIG_FILE} "$@"
"""


def test_torchtitan_run_train_ngpu_and_config_file(tmp_path):
    # torchtitan v0.2.2 run_train.sh: NGPU and CONFIG_FILE default in the script; LOG_RANK feeds no plan field
    (tmp_path / "train_configs").mkdir()
    (tmp_path / "train_configs/debug_model.toml").write_text(_JOB.format(flavor="debugmodel"))
    (tmp_path / "train_configs/l8b.toml").write_text(_JOB.format(flavor="8B"))
    p = tmp_path / "run_train.sh"
    p.write_text(_RUN_TRAIN_V02)
    plan = load_recipe(p)
    assert plan.world_size == 8 and plan.model.num_layers == 6  # llama3 debugmodel
    env = {"NGPU": "4", "LOG_RANK": "3", "CONFIG_FILE": "./train_configs/l8b.toml"}
    got = {e.name: dict((f, (a, b)) for f, a, b in e.changes) for e in recipe_effects(p, plan, env)}
    assert set(got) == {"NGPU", "CONFIG_FILE"}
    assert got["NGPU"]["cluster.gpus_per_node"] == (8, 4)
    assert got["CONFIG_FILE"]["model.num_layers"] == (6, 32)  # llama3 8B


def test_run_train_call_and_primus_launcher(tmp_path, monkeypatch):
    from primus_launch.adapters.command_recipe import plan_from_command
    from tests.test_adapter_primus import _tree
    from tests.test_primus_cli_script import MEG

    # torchtitan's README call: run_train.sh reads NGPU=${NGPU:-8} where the call does not give it
    argv = ["MODULE=llama3", "CONFIG=llama3_debugmodel", "./run_train.sh"]
    monkeypatch.chdir(tmp_path)
    plan = plan_from_command(argv)
    (e,), label = command_effects(argv, plan, {"NGPU": "2", "MODULE": "other"})  # MODULE: the call gives it
    assert (label, e.name) == ("run_train.sh", "NGPU") and ("cluster.gpus_per_node", 8, 2) in e.changes
    # a Primus launch script: NNODES=${NNODES:-1} before primus-cli
    root = _tree(tmp_path)
    run = root / "run.sh"
    run.write_text(f"#!/bin/bash\nNNODES=${{NNODES:-1}}\n./primus-cli slurm srun -N $NNODES -- train pretrain "
                   f"--config {MEG}\n")
    plan = load_recipe(run)
    assert plan.cluster.num_nodes == 1
    (e,) = recipe_effects(run, plan, {"NNODES": "2"})
    assert ("cluster.num_nodes", 1, 2) in e.changes


def test_a_variable_read_in_a_sourced_file_counts(tmp_path):
    # Megatron-LM scripts keep their knobs in a sourced fragment (source config.sh): its ${TP:-2} is read too
    (tmp_path / "config.sh").write_text("TP=${TP:-2}\n")
    p = _script(tmp_path, "source config.sh\n" + _CMD)
    plan = load_recipe(p)
    assert plan.parallel.tp == 2
    (e,) = recipe_effects(p, plan, {"TP": "4"})
    assert e.changes == (("parallel.tp", 2, 4),)


def test_launch_of_a_command_with_its_environment_runs_it_in_that_environment(tmp_path, monkeypatch):
    # --project --launch -- TP=4 bash x.sh: projected with TP=4 and run with it (env(1) puts it in the environment)
    import primus_launch.launch.launcher as launcher
    from primus_launch.cli import main

    _script(tmp_path, FORMS["colon-dash"] + _CMD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TP", raising=False)
    ran = []
    monkeypatch.setattr(launcher, "run_command", lambda argv: ran.append(argv) or 0)
    assert main(["--project", "--dry-run", "--launch", "--", "TP=4", "bash", "train.sh"]) == 0
    assert ran == [["env", "TP=4", "bash", "train.sh"]]
