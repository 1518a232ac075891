"""Bad-input classes of the robust12 round (``scripts/bad_input_campaign.py --only r12:``).

Each refused case runs the CLI's ``main`` in this process: a non-zero exit, one ``primus-launch: error:`` line naming
the field as the user wrote it and the value, no traceback, nothing written.

- A bound or rule of the plan's model section named by the plan's field (``model.num_experts=99999999``,
  ``model.moe_router_num_groups=3``): now by the Megatron flag (``--num-experts``) or the Primus key
  (``moe_router_num_groups``) the value was read from.
- A Primus value from the environment (``PRIMUS_TP=abc`` under ``tensor_model_parallel_size: ${PRIMUS_TP:1}``) named
  the Megatron flag, not the variable; ``PRIMUS_TP=1e400`` was shown as 'inf'.
- NeMo ``${oc.env:X}`` / ``${oc.decode:...}`` were "needs a whole number" / "an interpolation outside the file".
- ``--project r.sh/`` (a file named as a folder) read r.sh; bash says "Not a directory".
- ``--gpus-per-node 16`` on h100-sxm (an 8-GPU reference server) priced as one 16-GPU NVLink domain without a word.
- A script that ``exit``s before its training command: "no training command found".
- The virtual-stage count named ``--num-layers-per-virtual-pipeline-stage`` with the count (``--num-virtual-stages-per-
  pipeline-rank 2`` on one stage: "--num-layers-per-virtual-pipeline-stage=2"; its own value 4 shown as 8).
- A Primus ``modules:`` with no trainer naming a framework: "read it as a Primus recipe"; a Primus module with no model:
  "--num-layers=None ... Megatron-Bridge / NeMo recipes build the model in Python".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_run import run_cli
from test_bad_input_robust9 import refused  # the one error line of a refused run (exit 2, naming words)

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
PRIMUS = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
NEMO = (ROOT / "tests" / "test_adapter_nemo_yaml.py").read_text().split('CONFIG = """\\\n')[1].split('"""')[0]
DRY = ["--dry-run", "--json"]


from test_bad_input_robust11 import _refused_writing_nothing as _refused  # refused, nothing written


def _moe(text: str) -> str:
    return text.replace("    --bf16\n", "    --bf16 --num-experts 8 --moe-router-topk 2 --moe-router-num-groups 3 "
                                       "--moe-router-group-topk 1\n", 1)


# -------------------------------------------------------------------------- model fields named as written
@pytest.mark.parametrize("name, text, words", [
    ("r.sh", BASH.replace("    --bf16\n", "    --bf16 --num-experts 99999999\n"), ("--num-experts=99999999", "65,536")),
    ("r.sh", _moe(BASH), ("--moe-router-num-groups=3", "must divide")),
    ("r.sh", BASH.replace("--max-position-embeddings 131072", "--max-position-embeddings 4096"),
     ("--max-position-embeddings=4096",)),
    ("r.yaml", PRIMUS.replace("      expert_model_parallel_size: 1\n", "      expert_model_parallel_size: 1\n"
                              "      num_experts: 8\n      moe_router_topk: 2\n      moe_router_num_groups: 3\n"
                              "      moe_router_group_topk: 1\n"), ("moe_router_num_groups=3", "must divide")),
    ("r.yaml", PRIMUS.replace("pipeline_model_parallel_size: 1", "pipeline_model_parallel_size: 0"),
     ("pipeline_model_parallel_size=0",)),
])
def test_a_model_bound_names_the_field_as_written(tmp_path, name, text, words):
    line = _refused(tmp_path, {name: text}, ["--project", name, *DRY], *words)
    assert "error: model." not in line and "error: --pipeline-model-parallel-size" not in line, line


def test_a_derived_model_value_keeps_the_plan_name():
    """A value no flag wrote (here the head dimension Megatron derives, hidden / heads) is not named by a flag."""
    from primus_launch.adapters.megatron_args import _model_as_written
    from primus_launch.plan import PlanError

    e = PlanError("model.head_dim", 0, "greater than 0")
    assert _model_as_written(e, {"hidden_size": 4096}) is e
    assert _model_as_written(e, {"kv_channels": 0}).field == "--kv-channels"
    assert _model_as_written(PlanError("model.num_experts", 1, "x"), {"num_experts": True}).field == "model.num_experts"


# ------------------------------------------------------------------------------- Primus environment values
@pytest.mark.parametrize("value, words", [("abc", ("PRIMUS_TP='abc'", "an integer")),
                                          ("1e400", ("PRIMUS_TP='1e400'", "an integer")),
                                          ("0", ("PRIMUS_TP='0'", "greater than 0"))])
def test_a_primus_value_from_the_environment_names_the_variable(tmp_path, monkeypatch, value, words):
    monkeypatch.setenv("PRIMUS_TP", value)
    line = _refused(tmp_path, {"r.yaml": PRIMUS}, ["--project", "r.yaml", *DRY],
                    "tensor_model_parallel_size: ${PRIMUS_TP:1}", *words)
    assert "inf" not in line


# ------------------------------------------------------------------------------------- NeMo resolvers
@pytest.mark.parametrize("old, new, words", [
    ("num_layers: 8", "num_layers: ${oc.env:NL,8}", ("model.num_layers='${oc.env:NL,8}'", "resolver ${oc.env:NL,8} "
                                                     "not evaluated", "environment variable NL", "write the value")),
    ("micro_batch_size: 1", "micro_batch_size: ${oc.env:MBS}", ("model.micro_batch_size=", "no default")),
    ("tensor_model_parallel_size: 2", "tensor_model_parallel_size: ${oc.decode:${oc.env:TP}}",
     ("resolver ${oc.decode:${oc.env:TP}} not evaluated", "multiply, divide_ceil, divide_floor")),
    ("hidden_size: 1024", "hidden_size: ${cluster.hidden}", ("${cluster.hidden} names a key outside the file",)),
    ("num_nodes: 2", "num_nodes: ${oc.env:NNODES,2}", ("trainer.num_nodes=", "environment variable NNODES")),
])
def test_a_nemo_resolver_not_evaluated_is_named(tmp_path, old, new, words):
    assert old in NEMO
    line = _refused(tmp_path, {"n.yaml": NEMO.replace(old, new, 1)}, ["--project", "n.yaml", *DRY], *words)
    assert "whole number" not in line


# --------------------------------------------------------------------------------- a file named as a folder
@pytest.mark.parametrize("argv", [["--project", "r.sh/"], ["--project", "r.sh/."], ["--tune", "r.sh/", "--out", "t.sh"],
                                  ["--project", "r.sh", "--gpu-file", "g.toml/"]])
def test_a_file_named_with_a_trailing_slash_is_refused(tmp_path, argv):
    _refused(tmp_path, {"r.sh": BASH, "g.toml": "[gpu.h100-sxm]\ntdp_watts = 700\n"}, [*argv, *DRY],
             "/", "Not a directory", "without the '/'")


# ------------------------------------------------------------------------------- a node past the server
def test_a_node_larger_than_the_reference_server_is_noted(tmp_path):
    """h100-sxm: gpus_per_node 8, no larger NVLink domain in the database (HGX H100: 4 or 8 GPUs a baseboard)."""
    from primus_launch.projection.hardware.gpus import get_gpu

    spec = get_gpu("h100-sxm")
    assert spec.scaleup_domain == 8 and spec.gpus_per_node == 8
    (tmp_path / "r.sh").write_text(BASH)
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--gpus-per-node", "16"], tmp_path)
    assert rc == 0, err[-300:]
    text = " ".join(out.split())
    assert "gpus_per_node=16: h100-sxm's reference server has 8 GPUs" in text and "domain of 16 GPUs" in text
    rc, out, _, _ = run_cli(["--project", "r.sh", "--dry-run", "--gpus-per-node", "8"], tmp_path)
    assert rc == 0 and "reference server" not in out
    rc, out, _, _ = run_cli(["--project", "r.sh", "--dry-run", "--gpu", "gb200", "--gpus-per-node", "16"], tmp_path)
    assert rc == 0 and "reference server" not in out  # inside gb200's NVL72 domain


# ---------------------------------------------------------------------------------- exit before training
@pytest.mark.parametrize("text, words", [
    (BASH.replace("torchrun", "exit 0\ntorchrun", 1), ("'exit 0'", "before any training command")),
    ("#!/bin/bash\nexit 1\n" + BASH, ("line 2", "'exit 1'")),
])
def test_a_script_that_exits_before_training_is_refused(tmp_path, text, words):
    assert "torchrun" in BASH
    _refused(tmp_path, {"r.sh": text}, ["--project", "r.sh", *DRY], *words)


def test_an_exit_after_the_training_command_projects(tmp_path):
    (tmp_path / "r.sh").write_text(BASH + "\nexit $?\n")
    rc, out, err, _ = run_cli(["--project", "r.sh", *DRY], tmp_path)
    assert rc == 0 and '"iteration_time_s"' in out, err[-300:]


# --------------------------------------------------------------------------------- virtual stages named
@pytest.mark.parametrize("extra, words", [
    ("--num-virtual-stages-per-pipeline-rank 2", ("--num-virtual-stages-per-pipeline-rank=2", "requires pp > 1")),
    ("--virtual-pipeline-model-parallel-size 2", ("--virtual-pipeline-model-parallel-size=2",)),
    ("--num-layers-per-virtual-pipeline-stage 4", ("--num-layers-per-virtual-pipeline-stage=4", "8 virtual stages")),
    ("--pipeline-model-parallel-layout 'Et*16|t*16L'", ("--pipeline-model-parallel-layout='Et*16|t*16L'",
                                                        "2 virtual stages per rank", "size=1")),
])
def test_a_virtual_stage_count_is_named_by_the_flag_given(tmp_path, extra, words):
    assert "--pipeline-model-parallel-size $PP_SIZE" in BASH and re.search(r"(?m)^PP_SIZE=\S*1", BASH)
    _refused(tmp_path, {"r.sh": BASH.replace("    --bf16\n", f"    --bf16 {extra}\n", 1)}, ["--project", "r.sh", *DRY],
             *words)


# ------------------------------------------------------------------------------- Primus modules
@pytest.mark.parametrize("modules, words", [
    ("modules:\n  pre_trainer: null\n", ("modules.pre_trainer=None", "framework")),
    ("modules: []\n", ("modules=a list", "framework")),
    ("modules:\n  pre_trainer:\n    config: x.yaml\n", ("modules.pre_trainer=a mapping without framework",)),
    ("modules:\n  pre_trainer:\n    framework: megatron\n", ("modules.pre_trainer: no model", "num_layers")),
])
def test_a_primus_module_without_trainer_or_model_is_named(tmp_path, modules, words):
    text = PRIMUS.split("modules:")[0] + modules
    line = _refused(tmp_path, {"r.yaml": text}, ["--project", "r.yaml", *DRY], *words)
    assert "Megatron-Bridge" not in line and "read it as" not in line
