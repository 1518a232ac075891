"""read20: torchtitan 0.3 launch lines whose config builds another trainer than ``torchtitan.trainer.Trainer``.

Truth is torchtitan 0.3.0's own ``ConfigManager`` (``config/manager.py``: a shorthand of
``_supported_experiments`` is loaded from ``torchtitan.experiments.<name>.config_registry``) and the class the
loaded config builds (``train.py`` runs ``config.build()``, which constructs ``type(config)._owner``,
``config/configurable.py``).  ``--module graph_trainer.llama3`` was refused as an unknown registry ("config
registries: deepseek_v3, gpt_oss, llama3, qwen3"), and the same config named by its module path
(``torchtitan.experiments.graph_trainer.llama3.config_registry``) was read as a plain Trainer run with compile,
no note: GraphTrainer traces the whole step, shards with SimpleFSDP and applies its own graph memory policy.
Now both are refused naming the trainer; a config that builds Trainer (the integration tests' recipes
module, a user's ``Trainer.Config`` subclass) still reads.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest

from primus_launch.plan import PlanError

pytest.importorskip("torchtitan")

LAUNCH = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train"]


def _torchtitan_loads(module: str, config: str):
    """The config torchtitan 0.3.0's ConfigManager builds for ``--module M --config C``."""
    from torchtitan.config.manager import ConfigManager

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return ConfigManager().parse_args(["--module", module, "--config", config])
    finally:
        logging.disable(logging.NOTSET)


def _read(module: str, config: str):
    from primus_launch.adapters.command_recipe import plan_from_command

    plan = plan_from_command([*LAUNCH, "--module", module, "--config", config])
    return plan[0] if isinstance(plan, tuple) else plan


@pytest.mark.parametrize("module, config", [
    ("graph_trainer.llama3", "graph_trainer_llama3_8b"),
    ("torchtitan.experiments.graph_trainer.llama3.config_registry", "graph_trainer_llama3_8b"),
    ("graph_trainer.qwen3", "graph_trainer_qwen3_14b"),
    ("torchft.llama3", "llama3_torchft_debugmodel"),
])
def test_another_trainers_config_is_refused_naming_it(module, config, tmp_path, monkeypatch):
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path))
    from torchtitan.trainer import Trainer

    owner = type(_torchtitan_loads(module, config))._owner
    assert owner is not Trainer  # torchtitan loads it, and it builds another trainer
    with pytest.raises(PlanError) as e:
        _read(module, config)
    msg = str(e.value)
    assert f"{owner.__module__}.{owner.__qualname__}" in msg and "\n" not in msg
    assert "config registries" not in msg  # not the unknown-registry line: torchtitan resolves the shorthand


@pytest.mark.parametrize("module, config", [
    ("torchtitan_recipes.tests.features", "llama3_debugmodel_tp2_compile"),
    ("torchtitan_recipes.tests.models", "qwen3_debugmodel_fsdp2_tp2_cp2"),
])
def test_a_config_that_builds_trainer_still_reads(module, config, tmp_path, monkeypatch):
    """torchtitan's integration-test recipes (``MODULE=torchtitan_recipes.tests.features CONFIG=...``, as
    ``tests/integration_tests/run_tests.py`` launches them) build Trainer and read as its ConfigManager does."""
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path))
    from torchtitan.trainer import Trainer

    cfg = _torchtitan_loads(module, config)
    assert type(cfg)._owner is Trainer
    plan = _read(module, config)
    assert plan.parallel.tp == cfg.parallelism.tensor_parallel_degree
    assert plan.parallel.cp == cfg.parallelism.context_parallel_degree
    assert plan.model.seq_length == cfg.training.seq_len
    assert plan.training.compile == (cfg.compile.enable and "model" in cfg.compile.components)


def test_a_csv_schedule_is_refused_as_one(tmp_path, monkeypatch):
    """``llama3_debugmodel_pp2_custom_csv`` (torchtitan 0.3.0's integration-test recipes): torch's
    ``get_schedule_class`` takes ``PipelineScheduleMulti`` (torchtitan runs the CSV's actions); the reader
    refused it as a value outside the schedule names, now as a CSV schedule it does not model."""
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path))
    from torch.distributed.pipelining.schedules import get_schedule_class

    module, config = "torchtitan_recipes.tests.features", "llama3_debugmodel_pp2_custom_csv"
    cfg = _torchtitan_loads(module, config)
    assert get_schedule_class(cfg.parallelism.pipeline_parallel_schedule) is not None
    assert cfg.parallelism.pipeline_parallel_schedule_csv
    with pytest.raises(PlanError) as e:
        _read(module, config)
    assert "pipeline_parallel_schedule_csv" in str(e.value) and "not modelled" in str(e.value)
