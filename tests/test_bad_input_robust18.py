"""Bad-input classes of the robust18 round (``scripts/bad_input_campaign.py --only r18:``): recipes written for a
framework newer (or older) than the one the reader follows, and names the recipe does not hold.

- A wrapper's ``[software]`` torch / torchtitan newer than the modelled stack (torch 3.0, torchtitan 0.9.0) was priced
  as the current stack without a word; a torchtitan version on a Megatron-LM recipe was dropped silently.  Now noted.
- ``--virtual-pipeline-model-parallel-size 2`` on a Megatron-LM command line was read as VPP 2; Megatron-LM's parser
  has had no such flag since 2021 (dcef906978) and exits 'unrecognized arguments'.  Now refused, naming the flag to
  give.  The YAML / Primus key of that name (a TransformerConfig field) is read as before.
- A Megatron-Bridge run config's top-level key that is no field of Bridge's ``ConfigContainer`` (``mixed_precison:``)
  was dropped without a word; Bridge skips it with a warning.  Now noted, with the nearest section name.
- torchtitan main's batch / context names after 0.3.0 (pytorch/torchtitan#4121: ``training.max_context_length``,
  ``num_tokens_per_microbatch_per_dp_rank``, ...) were refused listing 0.3.0's fields; now the refusal says which
  0.3.0 field to give.
- ``--fp8-recipe mxfp8`` on a GPU without MX formats was refused as ``training.fp8_recipe='mxfp8'`` (the plan's name);
  now as the recipe writes it (``--fp8-recipe`` / ``fp8_recipe``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from cli_run import run_cli
from test_bad_input_robust9 import refused  # the one error line of a refused run (exit 2, naming words)
from test_bad_input_robust11 import _refused_writing_nothing as _refused  # refused, nothing written

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
PRIMUS = (ROOT / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
LAUNCH = (ROOT / "recipes/torchtitan/llama3_8b_launch.sh").read_text()
BRIDGE = (ROOT / "tests/data/bridge/qwen3_moe_run_config.yaml").read_text()
DRY = ["--dry-run", "--json"]


def _notes(tmp_path: Path, files: dict[str, str], recipe: str) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    rc, out, err, _ = run_cli(["--project", recipe, *DRY], tmp_path)
    assert rc == 0, err[-400:]
    assert "Traceback" not in err
    return json.loads(out)["plan"]["source"]["notes"]


# ---------------------------------------------------------------------------- [software] versions
@pytest.mark.parametrize("software, recipe, said, unsaid", [
    ('torch = "3.0"', "r.sh", ["software.torch='3.0': newer than torch 2.13"], []),
    ('torch = "2.99.0+cu130"', "r.sh", ["software.torch='2.99.0+cu130': newer"], []),
    ('torch = "2.13.1"', "r.sh", [], ["software.torch"]),  # a patch release of the modelled one
    ('torch = "2.8.0"', "r.sh", [], ["software.torch"]),  # older: priced as that release
    ('torchtitan = "0.9.0"', "r.toml", ["software.torchtitan='0.9.0': newer than torchtitan 0.3.0"], []),
    ('torchtitan = "0.3.0"', "r.toml", [], ["software.torchtitan"]),
    ('torchtitan = "0.2.0"', "r.toml", [], ["software.torchtitan"]),
    ('torchtitan = "0.3.0"', "r.sh", ["software.torchtitan='0.3.0': not read (a megatron recipe)"], []),
])
def test_a_software_version_the_models_cannot_price_is_noted(tmp_path, software, recipe, said, unsaid):
    wrapper = f'[recipe]\npath = "{recipe}"\n[software]\n{software}\n'
    notes = _notes(tmp_path, {"w.primus.toml": wrapper, "r.sh": BASH, "r.toml": TOML}, "w.primus.toml")
    for words in said:
        assert any(words in n for n in notes), notes
    for words in unsaid:
        assert not any(words in n for n in notes), notes


def test_the_modelled_versions_are_the_installed_stack():
    """The notes' 'current stack' is the one installed here (what the models were checked against)."""
    import importlib.metadata as md

    import torch

    from primus_launch.plan.software import MODELLED_TORCH, MODELLED_TORCHTITAN

    assert torch.__version__.startswith(MODELLED_TORCH + ".")
    assert md.version("torchtitan") == MODELLED_TORCHTITAN


# ---------------------------------------------------------------------------- a YAML-only VPP name on a command line
def test_the_yaml_vpp_name_is_no_megatron_command_line_flag():
    """Independent truth: the flag table derived from Megatron-LM's own parser (core_r0.16.0 / main / dev)."""
    from primus_launch.adapters import megatron_flags

    assert megatron_flags.by_option().get("--virtual-pipeline-model-parallel-size") is None
    assert megatron_flags.by_option().get("--num-virtual-stages-per-pipeline-rank") is not None


@pytest.mark.parametrize("pp", ["1", "2"])
def test_the_yaml_vpp_name_on_a_command_line_is_refused(tmp_path, pp):
    text = BASH.replace("    --bf16\n", "    --bf16 --virtual-pipeline-model-parallel-size 2\n", 1)
    text = text.replace("PP_SIZE=1", f"PP_SIZE={pp}", 1)
    assert "--virtual-pipeline-model-parallel-size 2" in text and f"PP_SIZE={pp}" in text
    _refused(tmp_path, {"r.sh": text}, ["--project", "r.sh", *DRY], "--virtual-pipeline-model-parallel-size=2",
             "unrecognized arguments", "--num-virtual-stages-per-pipeline-rank")


def test_the_yaml_vpp_name_after_dashdash_is_refused(tmp_path):
    cmd = ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "--num-layers", "32", "--hidden-size", "4096",
           "--num-attention-heads", "32", "--seq-length", "4096", "--max-position-embeddings", "4096",
           "--micro-batch-size", "1", "--global-batch-size", "64", "--pipeline-model-parallel-size", "2",
           "--virtual-pipeline-model-parallel-size", "2", "--bf16"]
    rc, _, err, _ = run_cli(["--project", *DRY, "--", *cmd], tmp_path)
    refused(rc, err, "--virtual-pipeline-model-parallel-size=2", "unrecognized arguments")


def test_the_vpp_key_of_a_primus_experiment_is_still_read(tmp_path):
    text = PRIMUS.replace("      pipeline_model_parallel_size: 1\n",
                          "      pipeline_model_parallel_size: 2\n      virtual_pipeline_model_parallel_size: 2\n", 1)
    assert "virtual_pipeline_model_parallel_size: 2" in text
    (tmp_path / "r.yaml").write_text(text)
    rc, out, err, _ = run_cli(["--project", "r.yaml", *DRY], tmp_path)
    assert rc == 0, err[-300:]
    assert json.loads(out)["plan"]["parallel"]["vpp"] == 2


# ---------------------------------------------------------------------------- Bridge sections
def test_every_section_of_a_saved_bridge_run_config_is_a_container_field():
    """Independent truth: the top-level keys Megatron-Bridge itself wrote into a run_config.yaml."""
    from primus_launch.adapters.bridge_yaml import _CONTAINER_FIELDS

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    assert set(yaml.load(BRIDGE, Loader=_Loader)) <= _CONTAINER_FIELDS


@pytest.mark.parametrize("section, words", [
    ("mixed_precison", ["mixed_precison: not a section of Megatron-Bridge's ConfigContainer", "did you mean "
                                                                                              "mixed_precision?"]),
    ("optimiser", ["optimiser: not a section of Megatron-Bridge's ConfigContainer", "did you mean optimizer?"]),
    ("my_launcher", ["my_launcher: not a section of Megatron-Bridge's ConfigContainer"]),
])
def test_a_bridge_section_of_no_container_field_is_noted(tmp_path, section, words):
    notes = _notes(tmp_path, {"b.yaml": BRIDGE + f"{section}:\n  fp8: hybrid\n"}, "b.yaml")
    for w in words:
        assert any(w in n for n in notes), notes


def test_a_bridge_run_config_of_known_sections_has_no_such_note(tmp_path):
    notes = _notes(tmp_path, {"b.yaml": BRIDGE}, "b.yaml")
    assert not any("not a section of Megatron-Bridge" in n for n in notes), notes


# ---------------------------------------------------------------------------- torchtitan main's names
def test_the_later_names_are_none_of_torchtitan_030s_and_name_its_fields():
    """Independent truth: the installed torchtitan 0.3.0's config dataclasses."""
    from torchtitan.config import configs

    from primus_launch.adapters.titan_newer import RENAMED_AFTER_030

    tables = {"training": configs.TrainingConfig, "parallelism": configs.ParallelismConfig}
    for later, (instead, _why) in RENAMED_AFTER_030.items():
        table, key = later.split(".")
        fields = {f.name for f in dataclasses.fields(tables[table])}
        assert key not in fields
        t0, k0 = instead.split(".")
        assert k0 in {f.name for f in dataclasses.fields(tables[t0])}


@pytest.mark.parametrize("old, new, words", [
    ("--training.local_batch_size 2", "--training.num_tokens_per_microbatch_per_dp_rank 16384",
     ("--training.num_tokens_per_microbatch_per_dp_rank='16384'", "0.3.0 calls it training.local_batch_size")),
    ("--training.local_batch_size 2", "--training.local_batch_size 2 --training.max_context_length 4096",
     ("--training.max_context_length='4096'", "0.3.0 calls it training.seq_len")),
    ("--training.local_batch_size 2", "--training.local_batch_size 2 --parallelism.num_pp_microbatches 4",
     ("--parallelism.num_pp_microbatches='4'", "0.3.0 calls it parallelism.pipeline_parallel_microbatch_size")),
])
def test_a_torchtitan_main_name_on_a_launch_line_names_the_030_field(tmp_path, old, new, words):
    assert old in LAUNCH
    _refused(tmp_path, {"r.sh": LAUNCH.replace(old, new, 1)}, ["--project", "r.sh", *DRY], *words, "#4121")


@pytest.mark.parametrize("old, new, words", [
    ("seq_len = 8192", "max_context_length = 8192", ("training.max_context_length=8192", "0.3.0 calls it training.seq_len")),
    ("local_batch_size = 1", "num_tokens_per_train_step = 65536",
     ("training.num_tokens_per_train_step=65536", "0.3.0 calls it training.global_batch_size")),
])
def test_a_torchtitan_main_name_in_a_toml_names_the_030_field(tmp_path, old, new, words):
    assert old in TOML
    _refused(tmp_path, {"r.toml": TOML.replace(old, new, 1)}, ["--project", "r.toml", *DRY], *words)


# ---------------------------------------------------------------------------- the FP8 recipe named as written
@pytest.mark.parametrize("mode", ["--project", "--tune"])
def test_mxfp8_on_hopper_names_the_megatron_flag(tmp_path, mode):
    text = BASH.replace("    --bf16\n", "    --bf16 --fp8-format hybrid --fp8-recipe mxfp8\n", 1)
    assert "--fp8-recipe mxfp8" in text
    extra = ["--max-work", "50"] if mode == "--tune" else []
    line = _refused(tmp_path, {"r.sh": text}, [mode, "r.sh", *DRY, "--gpu", "h100-sxm", *extra],
                    "--fp8-recipe='mxfp8'", "h100-sxm")
    assert "training.fp8_recipe" not in line


def test_mxfp8_on_cdna3_names_the_primus_key(tmp_path):
    text = PRIMUS.replace("      train_iters: 50\n", "      train_iters: 50\n      fp8: hybrid\n      fp8_recipe: mxfp8\n", 1)
    assert "fp8_recipe: mxfp8" in text
    line = _refused(tmp_path, {"r.yaml": text}, ["--project", "r.yaml", *DRY, "--gpu", "mi300x"], "fp8_recipe='mxfp8'",
                    "mi300x")
    assert "training.fp8_recipe" not in line


def test_mxfp8_on_blackwell_projects(tmp_path):
    text = BASH.replace("    --bf16\n", "    --bf16 --fp8-format hybrid --fp8-recipe mxfp8\n", 1)
    (tmp_path / "r.sh").write_text(text)
    rc, out, err, _ = run_cli(["--project", "r.sh", *DRY, "--gpu", "b200"], tmp_path)
    assert rc == 0, err[-300:]
    assert json.loads(out)["plan"]["training"]["fp8_recipe"] == "mxfp8"


def test_a_bridge_mixed_precision_value_is_named_as_mixed_precision(tmp_path):
    """MixedPrecisionConfig.setup writes mixed_precision's fields over the model's: a refusal of its fp8 names it
    (it named model.fp8, the model's own null the file also holds)."""
    old = "  fp8: null\n  fp8_amax"
    assert old in BRIDGE and "\n  fp8: null\n  fp8_param: false\n" in BRIDGE  # the model's own fp8 too
    line = _refused(tmp_path, {"b.yaml": BRIDGE.replace(old, "  fp8: e5m2\n  fp8_amax", 1)},
                    ["--project", "b.yaml", *DRY], "mixed_precision.fp8='e5m2'", "e4m3, hybrid")
    assert "model.fp8" not in line
