"""Bad-input classes of the robust15 round (``scripts/bad_input_campaign.py --only r15:``): a number field given a
word or a quoted number, read as each format's own loader reads it.

- AMD Primus experiment YAML: ``yaml.SafeLoader`` (primus/core/config/yaml_loader.py ``_load_yaml``), then
  ``${VAR:default}`` typed by ``_try_scalar`` only where a substitution happened (bool / int / float, else the
  string: ``${GBS:None}`` is 'None', ``${GBS:}`` is ''); every merged module value passes
  ``yaml_utils.set_value_by_key``, which makes the exact string 'null' None; nothing else is typed before Megatron-LM
  (backends/megatron/argument_builder.py ``MegatronArgBuilder.update`` coerces enum arguments only), whose
  ``validate_args`` compares the value with 0 (megatron/training/arguments.py ``assert args.global_batch_size > 0``):
  ``None`` / ``'Null'`` / ``"128"`` were read as the default or as the number; now refused naming the key.
- primus-cli overrides (primus/core/utils/arg_utils.py ``_coerce_cli_value_modern``, what train_runtime.py
  ``_apply_overrides`` uses, then ``deep_merge`` without ``set_value_by_key``): ``None`` is None (the default),
  ``null`` / ``~`` / ``yes`` / ``0x10`` stay strings (the reader typed them by YAML's rules); a number's string refused.
- Megatron-Bridge YAML (``ConfigContainer.from_yaml`` / omegaconf_utils.py ``process_config_with_overrides``: an
  untyped ``OmegaConf.create`` of the dataclass's dict, then ``setattr``) and NeMo (OmegaConf ``DictConfig``, read by
  ``cfg.get``): the string is kept, the batch arithmetic fails: refused (it was the default or the number).
- TorchTitan on a command line: tyro parses an ``int`` option with ``int()`` and refuses ``True`` / ``None`` (exit
  2); ``True`` was typed a boolean and refused as the TOML key's value: now named as the option written.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from cli_run import run_cli
from primus_launch.adapters.primus_cli import cli_overrides
from test_bad_input_robust11 import _refused_writing_nothing as _refused  # refused, nothing written

ROOT = Path(__file__).resolve().parents[1]
PRIMUS = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
BRIDGE = (ROOT / "tests/data/bridge/qwen3_moe_run_config.yaml").read_text()
NEMO = (ROOT / "tests/test_adapter_nemo_yaml.py").read_text().split('CONFIG = """\\\n')[1].split('"""')[0]
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
DRY = ["--dry-run", "--json"]


def _project(tmp_path: Path, files: dict[str, str], argv: list[str]) -> dict:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    rc, out, err, _ = run_cli(argv, tmp_path)
    assert rc == 0 and "Traceback" not in err, err[-400:]
    return json.loads(out)


def _primus_try_scalar(v: str):
    """The typing of primus/core/config/yaml_loader.py ``_try_scalar`` (bool words, ``-?\\d+``, its float pattern),
    applied only to a string a ``${...}`` substitution changed."""
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    if re.fullmatch(r"-?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)", v):
        return float(v)
    return v


# ------------------------------------------------------------------ Primus experiment YAML
@pytest.mark.parametrize("word", ["None", "'None'", "'Null'", '"128"', "'256'"])
def test_primus_string_for_a_number_is_refused(tmp_path: Path, word: str) -> None:
    got = yaml.safe_load(f"x: {word}")["x"]
    assert isinstance(got, str) and got != "null"  # a string Primus keeps: no set_value_by_key typing
    with pytest.raises(TypeError):
        got > 0  # Megatron-LM validate_args: assert args.global_batch_size > 0
    text = PRIMUS.replace("      global_batch_size: 256", f"      global_batch_size: {word}")
    line = _refused(tmp_path, {"r.yaml": text}, ["--project", "r.yaml", *DRY], "global_batch_size=", "unquoted")
    assert repr(got) in line


@pytest.mark.parametrize("default", ["None", "", "Null"])
def test_primus_env_default_word_is_refused_naming_the_placeholder(tmp_path: Path, default: str) -> None:
    assert isinstance(_primus_try_scalar(default), str)
    text = PRIMUS.replace("      global_batch_size: 256", f"      global_batch_size: ${{R15_GBS:{default}}}")
    _refused(tmp_path, {"r.yaml": text}, ["--project", "r.yaml", *DRY], f"global_batch_size: ${{R15_GBS:{default}}}")


def test_primus_env_value_word_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMUS_MBS", "None")
    rc, _, err, _ = run_cli(["--project", str(ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml"), *DRY], tmp_path)
    assert rc == 2 and "Traceback" not in err
    assert "micro_batch_size: ${PRIMUS_MBS:4} with PRIMUS_MBS='None'" in err


@pytest.mark.parametrize("word", ["null", "~", "", "'null'", "${R15_GBS:null}"])
def test_primus_null_is_still_the_default(tmp_path: Path, word: str) -> None:
    """YAML's null, and the exact string 'null' (yaml_utils.py set_value_by_key: ``if value == "null": value = None``)
    leave Megatron-LM's default: micro-batch 4 x DP 8 (TP 1 on one node of 8)."""
    raw = yaml.safe_load(f"x: {word}")["x"]
    raw = _primus_try_scalar(raw.replace("${R15_GBS:null}", "null")) if isinstance(raw, str) else raw
    assert raw is None or raw == "null"
    got = _project(tmp_path, {"r.yaml": PRIMUS.replace("      global_batch_size: 256", f"      global_batch_size: {word}")},
                   ["--project", "r.yaml", *DRY])
    assert got["plan"]["training"]["global_batch_size"] == 4 * 8


def test_primus_env_number_is_typed_and_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _primus_try_scalar("128") == 128
    monkeypatch.setenv("R15_GBS", "128")
    text = PRIMUS.replace("      global_batch_size: 256", "      global_batch_size: ${R15_GBS:64}")
    got = _project(tmp_path, {"r.yaml": text}, ["--project", "r.yaml", *DRY])
    assert got["plan"]["training"]["global_batch_size"] == 128


# ------------------------------------------------------------------ primus-cli overrides
def _modern(value: str):
    """primus/core/utils/arg_utils.py:14-36 ``_coerce_cli_value_modern`` as its code states it."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value == "None" or value[:1] in "[({":
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
    if "." in value:
        try:
            return float(value)
        except ValueError:
            pass
    try:
        return int(value)
    except ValueError:
        return value


@pytest.mark.parametrize("word", ["None", "null", "~", "yes", "0x10", "1e5", "1.5", "128", "True", "[1, 2]", "1_000"])
def test_primus_cli_words_typed_as_primus_types_them(word: str) -> None:
    got = cli_overrides(["--x", word])["x"]
    want = _modern(word)
    assert got == want and (isinstance(got, str) if isinstance(want, str) else type(got) is type(want))
    if word in ("null", "~", "yes", "0x10"):
        assert yaml.safe_load(word) != word  # YAML would type these (the reader's old rule): Primus does not


def test_primus_cli_none_is_the_default_and_null_refused(tmp_path: Path) -> None:
    from primus_launch.adapters import load_recipe
    from primus_launch.plan import PlanError
    from test_adapter_primus import _tree

    root = _tree(tmp_path)
    meg = "examples/megatron/configs/MI355X/llama3_8B-BF16-pretrain.yaml"
    run = root / "run.sh"
    tail = " --recompute_granularity full --recompute_method uniform --recompute_num_layers 1\n"
    run.write_text(f"#!/bin/bash\n./primus-cli slurm srun -N 4 -- train pretrain --config {meg} --global_batch_size "
                   "None" + tail)
    plan = load_recipe(run)
    dp = 4 * 8 // (plan.parallel.tp * plan.parallel.pp * plan.parallel.cp)
    assert plan.training.global_batch_size == plan.training.micro_batch_size * dp  # Megatron-LM's default
    for word in ("null", "~"):
        run.write_text(f"#!/bin/bash\n./primus-cli slurm srun -N 4 -- train pretrain --config {meg} "
                       f"--global_batch_size {word}" + tail)
        with pytest.raises(PlanError, match=re.escape(f"global_batch_size={word!r}") + ".*None for the default"):
            load_recipe(run)


# ------------------------------------------------------------------ Megatron-Bridge / NeMo YAML
@pytest.mark.parametrize("key, line, word", [
    ("train.global_batch_size", "  global_batch_size: 256", "None"),
    ("train.global_batch_size", "  global_batch_size: 256", "'null'"),
    ("train.micro_batch_size", "  micro_batch_size: 1", '"1"'),
    ("dataset.seq_length", "  seq_length: 4096", "'None'"),
])
def test_bridge_string_for_a_number_is_refused(tmp_path: Path, key: str, line: str, word: str) -> None:
    assert isinstance(yaml.safe_load(f"x: {word}")["x"], str)  # from_yaml / OmegaConf's SafeLoader subclass alike
    text = BRIDGE.replace(line, line.split(":")[0] + ": " + word, 1)
    _refused(tmp_path, {"b.yaml": text}, ["--project", "b.yaml", *DRY], f"{key}=", "unquoted")


def test_bridge_number_still_read(tmp_path: Path) -> None:
    got = _project(tmp_path, {"b.yaml": BRIDGE.replace("  global_batch_size: 256", "  global_batch_size: 128", 1)},
                   ["--project", "b.yaml", *DRY])
    assert got["plan"]["training"]["global_batch_size"] == 128


_NEMO_GBS = re.compile(r"(?m)^(\s+global_batch_size: )(.*)$")


@pytest.mark.parametrize("word, words", [("None", "unquoted"), ("'null'", "unquoted"), ("'128'", "unquoted"),
                                         ("???", "MissingMandatoryValue")])
def test_nemo_string_for_a_number_is_refused(tmp_path: Path, word: str, words: str) -> None:
    assert isinstance(yaml.safe_load(f"x: {word}")["x"], str)
    m = _NEMO_GBS.search(NEMO)
    text = NEMO[:m.start()] + m.group(1) + word + NEMO[m.end():]
    _refused(tmp_path, {"n.yaml": text}, ["--project", "n.yaml", *DRY], "model.global_batch_size=", words)


def test_nemo_interpolation_and_number_still_read(tmp_path: Path) -> None:
    m = _NEMO_GBS.search(NEMO)
    got = _project(tmp_path, {"n.yaml": NEMO[:m.start()] + m.group(1) + "64" + NEMO[m.end():]},
                   ["--project", "n.yaml", *DRY])
    assert got["plan"]["training"]["global_batch_size"] == 64
    got = _project(tmp_path, {"n.yaml": NEMO}, ["--project", "n.yaml", *DRY])  # ${multiply:8, 16}
    assert got["plan"]["training"]["global_batch_size"] == 128


# ------------------------------------------------------------------ TorchTitan command line
@pytest.mark.parametrize("word", ["True", "false", "None"])
def test_titan_int_option_given_a_word_is_refused_as_written(tmp_path: Path, word: str) -> None:
    tyro = pytest.importorskip("tyro")
    configs = pytest.importorskip("torchtitan.config.configs")
    with pytest.raises(SystemExit) as e:  # torchtitan's own dataclass, under its parser
        tyro.cli(configs.TrainingConfig, args=["--local-batch-size", word])
    assert e.value.code == 2
    cmd = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--job.config_file", "r.toml",
           "--training.local_batch_size", word]
    _refused(tmp_path, {"r.toml": TOML}, ["--project", *DRY, "--", *cmd],
             f"--training.local_batch_size={word!r}", "expected an integer")



# ------------------------------------------------------------------ Primus TorchTitan module
@pytest.mark.parametrize("word", ["null", "~", "'null'"])
def test_primus_titan_null_for_an_int_is_refused(tmp_path: Path, word: str) -> None:
    """Primus merges the None over TorchTitan's default (backends/torchtitan/argument_builder.py ``deep_merge``); a
    plain ``int`` field (torchtitan v0.2.2 ``local_batch_size: int = 8``; 0.3.0 configs.py alike) then fails in the
    trainer (v0.2.2 train.py:200 ``local_batch_size * batch_degree``).  It was read as the default."""
    from primus_launch.adapters import load_recipe
    from primus_launch.plan import PlanError
    from test_adapter_primus import _tree

    configs = pytest.importorskip("torchtitan.config.configs")
    field = {f.name: f for f in __import__("dataclasses").fields(configs.TrainingConfig)}["local_batch_size"]
    assert field.type in (int, "int")
    with pytest.raises(TypeError):
        None * 8  # noqa: B018 - what the trainer computes
    tt = _tree(tmp_path) / "examples/torchtitan/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml"
    tt.write_text(re.sub(r"(?m)^(\s+local_batch_size: ).*$", lambda m: m.group(1) + word, tt.read_text(), count=1))
    with pytest.raises(PlanError, match=r"training\.local_batch_size='null'"):
        load_recipe(tt)
