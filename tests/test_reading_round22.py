"""Reading round 22: recipes written for torchtitan main, and ``${oc.env:...}`` in Megatron-Bridge's ``env_vars``.

torchtitan main (pytorch/torchtitan b5bcd76c6) renamed the batch fields of ``torchtitan/config/configs.py`` after
0.3.0 (PR #4121 "fold batch dim", 73aed7f6c): ``training.num_tokens_per_microbatch_per_dp_rank`` /
``num_tokens_per_train_step`` / ``max_context_length`` and ``parallelism.num_pp_microbatches`` stand where 0.3.0 has
``local_batch_size`` / ``global_batch_size`` / ``seq_len`` / ``pipeline_parallel_microbatch_size``, and its config
modules import ``torchtitan.components.data`` (PR #4088, Grain).  The installed torchtitan 0.3.0 refuses all of them
(its own ``TrainingConfig`` / ``ParallelismConfig`` and module tree are asserted here, so the test fails if 0.3.0's
names change); the reader refuses them naming the field and saying they were written for a newer torchtitan.
Before: a launch-line option was refused as a typo, a config module importing ``torchtitan.components.data`` was an
internal error (exit 70).

Megatron-Bridge resolves ``${oc.env:NAME,default}`` in ``env_vars`` from the launching shell
(``ConfigContainer.from_yaml``: ``OmegaConf.to_container(resolve=True)``) and applies it with
``os.environ.setdefault``; the reader took the text literally as the variable's value.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from primus_launch.errors import UserError
from primus_launch.plan import PlanError

REFUSED = (UserError, PlanError)
NEWER = "written for a torchtitan newer than 0.3.0"
MAIN_NAMES = {"training": ("num_tokens_per_microbatch_per_dp_rank", "num_tokens_per_train_step", "max_context_length"),
              "parallelism": ("num_pp_microbatches",)}


def _titan_config_fields() -> dict[str, set[str]]:
    pytest.importorskip("torchtitan")
    from torchtitan.config import ParallelismConfig, TrainingConfig

    return {"training": {f.name for f in dataclasses.fields(TrainingConfig)},
            "parallelism": {f.name for f in dataclasses.fields(ParallelismConfig)}}


def test_the_installed_torchtitan_lacks_mains_names():
    """The ground the refusals stand on: torchtitan 0.3.0's own config classes hold the old names, not main's."""
    fields = _titan_config_fields()
    for section, names in MAIN_NAMES.items():
        assert not set(names) & fields[section]
    assert {"local_batch_size", "global_batch_size", "seq_len"} <= fields["training"]
    assert "pipeline_parallel_microbatch_size" in fields["parallelism"]
    assert importlib.util.find_spec("torchtitan.components.data") is None


_LAUNCH = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "llama3",
           "--config", "llama3_8b"]


@pytest.mark.parametrize("option", [f"--{s}.{n}" for s, ns in MAIN_NAMES.items() for n in ns] +
                         ["--training.max-context-length"])
def test_a_launch_line_with_mains_batch_options_is_refused_as_newer(option):
    _titan_config_fields()
    from primus_launch.adapters.command_recipe import plan_from_command

    with pytest.raises(REFUSED) as e:
        plan_from_command(_LAUNCH + [option, "8192"])
    msg = str(e.value)
    assert option in msg and NEWER in msg and "\n" not in msg


def test_a_launch_lines_own_names_still_read():
    _titan_config_fields()
    from primus_launch.adapters.command_recipe import plan_from_command

    plan = plan_from_command(_LAUNCH + ["--training.seq_len", "4096", "--training.local_batch_size", "2"])
    assert (plan.model.seq_length, plan.training.micro_batch_size) == (4096, 2)


def test_a_job_toml_with_mains_names_is_refused_as_newer(tmp_path):
    from primus_launch.adapters import load_recipe

    p = tmp_path / "main.toml"
    p.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nmax_context_length = 8192\nsteps = 10\n')
    with pytest.raises(REFUSED) as e:
        load_recipe(p, {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8})
    assert "training.max_context_length" in str(e.value) and NEWER in str(e.value)


_MODULES = {
    # a config module as torchtitan main writes one (its model registries import the Grain loaders)
    "mainstyle_a": "from torchtitan.components.data import GrainDataLoader\n"
                   "from torchtitan.trainer import Trainer\n\n\ndef run() -> Trainer.Config:\n    return None\n",
    # main's batch fields given to 0.3.0's TrainingConfig
    "mainstyle_b": "from torchtitan.config import TrainingConfig\nfrom torchtitan.models.llama3 import model_registry\n"
                   "from torchtitan.trainer import Trainer\n\n\ndef run() -> Trainer.Config:\n"
                   "    return Trainer.Config(model_spec=model_registry('8B'), training=TrainingConfig("
                   "num_tokens_per_microbatch_per_dp_rank=8192, max_context_length=8192))\n",
}


@pytest.mark.parametrize("name,needle", [("mainstyle_a", "torchtitan.components.data"),
                                         ("mainstyle_b", "training.num_tokens_per_microbatch_per_dp_rank")])
def test_a_config_module_written_for_main_is_refused_by_name(tmp_path, monkeypatch, name, needle):
    _titan_config_fields()
    from primus_launch.adapters.command_recipe import plan_from_command

    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "config_registry.py").write_text(_MODULES[name])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path / "cache"))
    launch = _LAUNCH[:-4] + ["--module", name, "--config", "run"]
    try:
        with pytest.raises(REFUSED) as e:
            plan_from_command(launch)
    finally:
        for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[m]
    msg = str(e.value)
    assert needle in msg and "newer than 0.3.0" in msg and "\n" not in msg


# ----------------------------------------------------------------------------- Megatron-Bridge env_vars
FIXTURE = Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml"
CLUSTER = {"gpu": "h100-sxm", "num_nodes": 2, "gpus_per_node": 8}


def _with_env(tmp_path: Path, body: str):
    from primus_launch.adapters import load_recipe

    text = FIXTURE.read_text()
    assert "\nenv_vars: {}\n" in text
    p = tmp_path / "run_config.yaml"
    p.write_text(text.replace("\nenv_vars: {}\n", f"\nenv_vars:\n{body}"))
    return load_recipe(p, CLUSTER)


@pytest.mark.parametrize("var", ["PYTORCH_CUDA_ALLOC_CONF", "CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO"])
def test_an_env_var_the_plan_reads_from_the_shell_is_refused(tmp_path, var):
    with pytest.raises(REFUSED) as e:
        _with_env(tmp_path, f"  {var}: ${{oc.env:{var},1}}\n")
    msg = str(e.value)
    assert f"env_vars.{var}" in msg and "oc.env" in msg and "\n" not in msg


def test_an_env_var_the_plan_does_not_read_is_left_out_and_said(tmp_path):
    base = _with_env(tmp_path, "  NCCL_ALGO: Ring\n")
    plan = _with_env(tmp_path, "  NCCL_ALGO: Ring\n  WANDB_DIR: ${oc.env:HOME}/wandb\n")
    notes = " ".join(plan.source.notes)
    assert "env_vars.WANDB_DIR" in notes and "oc.env" in notes
    assert plan.parallel == base.parallel and plan.training == base.training


def test_an_env_var_written_as_a_value_still_reads(tmp_path):
    plan = _with_env(tmp_path, "  NCCL_ALGO: Ring\n")
    assert {u.flag: u.value for u in plan.source.unmodelled}.get("NCCL_ALGO") == "Ring"


# ----------------------------------------------------------------------------- Primus megatron_bridge backend
_PRIMUS_BRIDGE = """work_group: amd
user_name: root
exp_name: qwen3_32b_pretrain
workspace: ./output
modules:
  pre_trainer:
    framework: megatron_bridge
    config: pretrain_trainer.yaml
    model: qwen3_32b.yaml
    overrides:
      flavor: qwen3_32b_pretrain_config
      global_batch_size: 128
      tensor_model_parallel_size: 2
"""


def test_a_primus_megatron_bridge_experiment_says_why_and_what_is_read_instead(tmp_path):
    """Primus's megatron_bridge backend (``config_utils.load_recipe_config``) calls the Bridge recipe function named
    by ``flavor``; the reader points at the run_config.yaml Bridge saves (``checkpoint_utils.CONFIG_FILE``)."""
    from primus_launch.adapters import load_recipe

    p = tmp_path / "qwen3_32b_pretrain.yaml"
    p.write_text(_PRIMUS_BRIDGE)
    with pytest.raises(REFUSED) as e:
        load_recipe(p, {"gpu": "mi300x", "num_nodes": 1, "gpus_per_node": 8})
    msg = str(e.value)
    assert "modules.pre_trainer.framework" in msg and "qwen3_32b_pretrain_config" in msg
    assert "run_config.yaml" in msg and "\n" not in msg


def _launch_wrapper(tmp_path: Path, version: str) -> Path:
    script = Path(__file__).resolve().parents[1] / "recipes" / "torchtitan" / "llama3_8b_launch.sh"
    (tmp_path / "launch.sh").write_text(script.read_text())
    w = tmp_path / "run.primus.toml"
    w.write_text(f'[recipe]\npath = "launch.sh"\n\n[cluster]\ngpu = "h100-sxm"\nnodes = 1\ngpus_per_node = 8\n\n'
                 f'[software]\ntorchtitan = "{version}"\n')
    return w


def test_a_launch_stated_newer_than_the_registry_read_is_refused(tmp_path):
    """A --module / --config launch is read from the installed torchtitan's registry (0.3.0 here, asserted above);
    a wrapper stating a newer torchtitan names functions whose bodies differ (main's token budgets)."""
    _titan_config_fields()
    from primus_launch.adapters import load_recipe

    with pytest.raises(REFUSED) as e:
        load_recipe(_launch_wrapper(tmp_path, "0.4.0"))
    assert "software.torchtitan" in str(e.value) and "0.4.0" in str(e.value) and "\n" not in str(e.value)
    plan = load_recipe(_launch_wrapper(tmp_path, "0.3.0"))  # the registry's own version reads
    assert plan.software.torchtitan == "0.3.0"
