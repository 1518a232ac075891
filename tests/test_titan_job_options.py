"""Every option of a TorchTitan 0.3 launch line judged by name and type, as torchtitan's own parser judges it.

Before, only the sections read into the plan (training, parallelism, compile, debug, comm, the activation-checkpoint
policy) were checked: ``--optimizer.lr=abc``, ``--checkpoint.intervall 10``, ``--lr-scheduler.warmup-steps 1.5`` or
``--validation.enable`` (the v0.2 name) were accepted and ignored, where torchtitan exits.  The bundled snapshot now
holds every option tyro builds for each config function (``scripts/build_titan_snapshot.py``).

Truth: torchtitan 0.3.0's ``ConfigManager().parse_args`` on the same words (tyro 1.0.17, on the CPU): accepted, or
refused (``SystemExit`` / an error of a config's ``__post_init__``).  A job TOML of torchtitan v0.2 keeps its reader;
a misspelt key of a table read as neutral (``[checkpoint] intervall``) is refused as v0.2.2's ConfigManager refuses it.
"""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path

import pytest

from cli_run import run_cli
from primus_launch.adapters.torchtitan_argv import launch_job, parse_launch, plan_from_launch
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, PlanError

ROOT = Path(__file__).resolve().parents[1]
TITAN = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train"]
BASE = ["--module", "llama3", "--config", "llama3_8b"]

GOOD = [
    "--optimizer.implementation foreach", "--optimizer.implementation=fused_opt_states_bf16",
    "--optimizer.param-groups.0.optimizer-kwargs.lr 3e-4", "--optimizer.param_groups.0.optimizer_kwargs.lr=1e-3",
    "--optimizer.param-groups.0.optimizer-kwargs.betas 0.9 0.95", "--optimizer.param-groups.0.optimizer-kwargs.lr nan",
    "--lr-scheduler.warmup-steps 100", "--lr_scheduler.decay_type cosine", "--lr-scheduler.total-steps None",
    "--checkpoint.enable", "--checkpoint.no-enable", "--checkpoint.interval 500", "--checkpoint.async-mode async",
    "--checkpoint.exclude-from-loading dataloader,lr_scheduler", "--checkpoint.keep-latest-k 0",
    "--checkpoint.initial-load-path /ckpt/step-10", "--checkpoint.initial-load-path=", "--metrics.log-freq 5", "--metrics.enable-wandb",
    "--metrics.save-tb-folder=", "--validator.enable --validator.freq 100", "--validator.steps -1",
    "--validator.dataloader.num-workers 2", "--validator.dataloader.no-pin-memory", "--comm.init-timeout-seconds 600",
    "--profiler.enable-profiling --profiler.profile-freq 10", "--dump-folder /tmp/out", "--dump_folder=/tmp/out",
    "--dataloader.prefetch-factor None", "--debug.seed 42", "--training.steps 20 activation-checkpoint:full",
    "--training.max-norm 1", "--lr-scheduler.min-lr-factor 0",
]
BAD = [
    "--optimizer.lr=abc", "--optimizer.lr 3e-4", "--optimizer.name Muon", "--optimizer.param-groups.0.optimizer-kwargs.lr=abc",
    "--optimizer.param-groups.0.optimizer-kwargs.lr=", "--optimizer.implementation fast",
    "--optimizer.param-groups.0.optimizer-kwargs.betas 0.9 x", "--optimizer.param-groups.3.optimizer-kwargs.lr 1e-3",
    "--lr-scheduler.warmup-steps 1.5", "--lr-scheduler.decay-type exp", "--lr_scheduler.warmup_step 10",
    "--lr-scheduler.total-steps none", "--checkpoint.interval abc", "--checkpoint.intervall 10",
    "--checkpoint.async-mode yes", "--checkpoint.enable=true", "--checkpoint.enable false", "--checkpoint.no-interval",
    "--checkpoint.keep-latest-k=-1", "--checkpoint.keep-latest-k 1", "--checkpoint.interval 0", "--checkpoint.folder=",
    "--checkpoint.exclude-from-loading model,optimizer", "--checkpoint.initial-load-path ckpt/step-10",
    "--metrics.log-freq=", "--metrics.log_frequency 10", "--metrics.no-log-freq", "--validation.enable",
    "--validator.freq x", "--validator.steps 0", "--validator.dataloader.num-workers two",
    "--comm.init-timeout-seconds 1e3", "--profiler.profile-freq ten", "--profiling.enable-profiling",
    "--dataloader.prefetch-factor 2.5", "--dump-folder", "--job.dump-folder /tmp/x",
]


def _torchtitan_accepts(words: list[str]) -> bool:
    """torchtitan's own verdict: ``ConfigManager().parse_args`` (config registry + tyro + the configs' checks)."""
    from torchtitan.config.manager import ConfigManager

    logging.getLogger("torchtitan").setLevel(logging.ERROR)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
            ConfigManager().parse_args(BASE + words)
    except (SystemExit, ValueError, AssertionError):
        return False
    return True


def _we_accept(words: list[str]) -> bool:
    try:
        launch_job(parse_launch(TITAN + BASE + words))
    except (UserError, PlanError) as e:
        assert "\n" not in str(e)  # one line
        return False
    return True


@pytest.mark.parametrize("case", [pytest.param(c, id=f"good:{c}") for c in GOOD] +
                         [pytest.param(c, id=f"bad:{c}") for c in BAD])
def test_verdict_agrees_with_torchtitans_parser(case):
    pytest.importorskip("torchtitan")
    words = case.split()
    truth = _torchtitan_accepts(words)
    assert truth == (case in GOOD)  # the case lists say what torchtitan does
    assert _we_accept(words) == truth


@pytest.mark.parametrize("case, words", [
    ("--optimizer.lr=abc", ("--optimizer.lr", "'abc'", "param_groups.0.optimizer_kwargs.lr")),
    ("--optimizer.param-groups.0.optimizer-kwargs.lr=", ("optimizer_kwargs.lr=''", "a number")),
    ("--lr-scheduler.decay-type exp", ("decay_type='exp'", "linear, sqrt, cosine")),
    ("--checkpoint.intervall 10", ("--checkpoint.intervall", "did you mean --checkpoint.interval")),
    ("--validation.enable", ("'validation' is no section", "--validator.enable")),
    ("--checkpoint.keep-latest-k 1", ("keep-latest-k=1", "at least 2")),
])
def test_refusal_is_one_line_naming_the_field_value_and_what_is_allowed(tmp_path, case, words):
    rc, out, err, _ = run_cli(["--project", "--dry-run", "--", *TITAN, *BASE, *case.split()], tmp_path)
    assert rc != 0 and "Traceback" not in err
    line = err.strip()
    assert "\n" not in line, line
    for w in words:
        assert w in line, line


def test_options_that_change_time_or_memory_are_reported_not_modelled():
    words = ["--checkpoint.enable", "--checkpoint.async-mode", "async_with_pinned_mem", "--validator.enable",
             "--optimizer.implementation", "fused_opt_states_bf16", "--optimizer.param-groups.0.optimizer-name", "SGD",
             "--optimizer.param-groups.0.optimizer-kwargs.lr", "1e-3", "--metrics.log-freq", "1",
             "--comm.train-timeout-seconds", "600", "--dump-folder", "/tmp/out"]
    cluster = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)
    before = {u.flag for u in plan_from_launch(TITAN + BASE, cluster).source.unmodelled}  # the config's own
    plan = plan_from_launch(TITAN + BASE + words, cluster)
    flags = {u.flag: u.value for u in plan.source.unmodelled if u.flag not in before}
    assert flags == {"--checkpoint.enable": "true", "--checkpoint.async_mode": "async_with_pinned_mem",
                     "--validator.enable": "true", "--optimizer.implementation": "fused_opt_states_bf16",
                     "--optimizer.param_groups.0.optimizer_name": "SGD"}


def test_job_toml_misspelt_key_of_a_neutral_table_is_refused(tmp_path):
    """torchtitan v0.2.2 ``ConfigManager._dict_to_dataclass`` refuses a field its JobConfig lacks ("Invalid field
    names"); ``[checkpoint] intervall`` was read as a neutral key (interval kept at the default)."""
    toml = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
    (tmp_path / "c.toml").write_text(toml.replace("[checkpoint]\n", "[checkpoint]\nintervall = 10\n", 1))
    rc, _, err, _ = run_cli(["--project", "c.toml", "--dry-run"], tmp_path)
    assert rc != 0 and "Traceback" not in err
    assert "checkpoint.intervall=10" in err and "checkpoint.interval?" in err
    rc, _, err, _ = run_cli(["--project", "--dry-run", "--", *TITAN, "--job.config_file", "c.toml"], tmp_path)
    assert rc != 0 and "checkpoint.intervall" in err


USER_MODULE = '''import dataclasses
from dataclasses import dataclass

from torchtitan.models.llama3.config_registry import llama3_debugmodel
from torchtitan.trainer import Trainer


@dataclass(kw_only=True, slots=True)
class MyConfig(Trainer.Config):
    my_knob: int = 3


def my_debug():
    base = llama3_debugmodel()
    return MyConfig(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.init})
'''


def test_a_users_module_is_judged_by_its_own_options(tmp_path, monkeypatch):
    """A user's ``Trainer.Config`` subclass adds a top-level ``my_knob: int``: torchtitan's parser takes
    ``--my-knob 5`` and refuses ``--my-knob x`` / ``--my-knobb 5``; the option table read with the user's config
    (cached with it) judges the same."""
    pytest.importorskip("torchtitan")
    (tmp_path / "my_titan_cfgs").mkdir()
    (tmp_path / "my_titan_cfgs" / "__init__.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path / "cache"))
    from torchtitan.config.manager import ConfigManager

    for case in ("--my-knob 5", "--my-knob x", "--my-knobb 5", "--optimizer.lr 1e-3", "--training.steps 3"):
        sink = io.StringIO()
        try:
            with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
                ConfigManager().parse_args(["--module", "my_titan_cfgs", "--config", "my_debug", *case.split()])
            truth = True
        except SystemExit:
            truth = False
        try:
            launch_job(parse_launch([*TITAN, "--module", "my_titan_cfgs", "--config", "my_debug", *case.split()]))
            ours = True
        except (UserError, PlanError):
            ours = False
        assert ours == truth, case


@pytest.mark.parametrize("table, line, words", [
    # read19: 'bfloat16' runs (a TOML's value is a tyro default, kept unchecked; FSDP2's reduce_dtype is
    # TORCH_DTYPE_MAP[value]): tests/test_reading_forks.py; a dtype outside that map is refused
    ("training", "mixed_precision_reduce = 'float64'", ("training.mixed_precision_reduce='float64'", "float32")),
    ("training.dataloader", "num_workers = 'two'", ("training.dataloader.num_workers='two'", "an integer")),
    ("validation.dataloader", "pin_memory = 'yes'", ("validation.dataloader.pin_memory='yes'", "true or false")),
    ("parallelism", "context_parallel_load_balancer = 3", ("context_parallel_load_balancer=3", "a string")),
])
def test_job_toml_keys_typed_by_torchtitan_v022s_own_dataclasses(table, line, words):
    """Keys of v0.2.2's JobConfig the hand table lacked (``[training.dataloader]``, ``mixed_precision_reduce:
    Literal["float32"]``, ``context_parallel_load_balancer: str | None``) were not judged: the table built from
    v0.2.2's job_config.py (scripts/build_titan_job_types.py) types them."""
    from primus_launch.adapters.torchtitan import plan_from_text

    text = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
    text = text.replace(f"[{table}]\n", f"[{table}]\n{line}\n", 1) if f"[{table}]\n" in text else \
        text + f"\n[{table}]\n{line}\n"
    with pytest.raises(PlanError) as e:
        plan_from_text(text)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_v022_types_agree_with_the_hand_table():
    """Where both name a key, v0.2.2's generated type is the hand table's (``X | None`` read as ``X``)."""
    import json

    from primus_launch.adapters import titan_job_types as jt

    gen = json.loads((ROOT / "primus_launch/data/torchtitan-0.2.2-job.json").read_text())["types"]
    assert len(gen) > 140
    for key, kind in gen.items():
        if key in jt.HAND_TYPES and kind != "other":
            base = kind.split(":", 1)[1] if isinstance(kind, str) and kind.startswith("opt:") else kind
            want = tuple(base) if isinstance(base, list) else {"strs": "strs"}.get(base, base)
            assert jt.HAND_TYPES[key] == want, key


def test_job_command_takes_none_where_v022_types_the_key_optional(tmp_path):
    """tyro takes the word ``None`` for an ``X | None`` field (checked for torchtitan 0.3's ``--lr-scheduler.total-steps
    None`` in the verdict test above; v0.2.2 types ``lr_scheduler.total_steps: int | None``): accepted on a job-TOML
    command (was 'expected a int'); ``--training.steps None`` (``int``) stays refused."""
    (tmp_path / "c.toml").write_text((ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text())
    cmd = ["--project", "--dry-run", "--", *TITAN, "--job.config_file", "c.toml"]
    rc, _, err, _ = run_cli(cmd + ["--lr_scheduler.total_steps", "None"], tmp_path)
    assert rc == 0, err
    rc, _, err, _ = run_cli(cmd + ["--training.steps", "None"], tmp_path)
    assert rc != 0 and "--training.steps='None': expected an integer" in err and "Traceback" not in err


def test_a_users_module_without_an_option_table_is_said(tmp_path, monkeypatch):
    """review12: where torchtitan's parser cannot render a user's config's option table (``titan_snapshot``
    ``load_user_config`` keeps the entry without one), its options went unchecked without a word; the plan now
    says so.  Truth: the same user module with its table judges its options silently (previous test)."""
    pytest.importorskip("torchtitan")
    import primus_launch.adapters.titan_snapshot as ts
    from primus_launch.adapters.torchtitan_argv import plan_from_launch
    from primus_launch.plan import Cluster

    (tmp_path / "my_titan_cfgs2").mkdir()
    (tmp_path / "my_titan_cfgs2" / "__init__.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path / "cache"))

    def broken(cfg):
        raise RuntimeError("tyro cannot render it")

    monkeypatch.setattr(ts, "argv_table", broken)
    plan = plan_from_launch([*TITAN, "--module", "my_titan_cfgs2", "--config", "my_debug", "--training.steps", "3"],
                            Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))
    assert any("were not checked by name or type" in n for n in plan.source.notes), plan.source.notes
