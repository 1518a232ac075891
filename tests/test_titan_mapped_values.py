"""The v0.2 job-TOML keys read into the plan, checked by the values TorchTitan allows (titanval).

Before, these keys were judged only where the reader used them, so a bad value passed whenever it went unused
or was a string: ``[model] converters = "float8"`` was read as FP8, ``recipe_name = "colwise"`` and
``mxfp8_dim1_cast_kernel_choice = "cutlass"`` passed with the converter off, ``selective_ac_option = 2`` (an
integer) was read as every-2nd-layer AC.  And an unknown key far from every name (``[metrics] log_frequency``)
passed silently; a misspelt ``[training.dataloader]`` key was said to be no field of ``[training]``.

Truth (torchtitan v0.2.2, read from the tag; none of these keys is a parser option of 0.3.0): its ConfigManager
builds the dataclasses as the TOML gives them (``torchtitan/config/manager.py:160-180``, no value check; run on the
CPU with that tag's config package and tyro 1.0.17 it returns ``converters='float8'``, ``recipe_name='colwise'``
as written) and refuses an unknown field of any (sub-)table (``manager.py:164-170``: "Invalid field names in
<class ...DataLoader>"); the fields' types are ``job_config.py:118`` ``converters: list[str]``, ``:738``
``recipe_name: Literal["tensorwise", "rowwise", "rowwise_with_gw_hp"] | None``, ``:768``
``mxfp8_dim1_cast_kernel_choice: Literal["triton", "cuda", "torch"]``, ``:795`` grouped-mm ``recipe_name:
Literal["mxfp8"]``, ``:757`` / ``:802`` ``fqns: list[str] | str``, ``:655`` ``selective_ac_option: str``, ``:367``
``module_fqns_per_model_part: list[list[str]] | None``; ``protocols/model_converter.py:62`` looks every converter
name up in the registry (``quantize.{linear,grouped_mm}.{float8,mx}``: ``components/quantization/float8.py:238-239``,
``mx.py:171-172``); ``distributed/activation_checkpoint.py:177-183`` takes ``"op"`` or ``.isdigit()``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from primus_launch.adapters.torchtitan import plan_from_text
from primus_launch.plan import PlanError

ROOT = Path(__file__).resolve().parents[1]
BASE = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()


def _job(table: str, line: str) -> str:
    """The 8B recipe with ``line`` set in ``[table]`` (the recipe's own line for that key dropped)."""
    key = line.split("=", 1)[0].strip()
    lines = [x for x in BASE.splitlines() if x.split("=", 1)[0].strip() != key or "=" not in x]
    text = "\n".join(lines) + "\n"
    head = f"[{table}]\n"
    return text.replace(head, head + line + "\n", 1) if head in text else text + f"\n{head}{line}\n"


def _refused_in_one_line(text: str, words: tuple[str, ...]) -> None:
    """Reading ``text`` raises a one-line PlanError holding every one of ``words``."""
    with pytest.raises(PlanError) as e:
        plan_from_text(text)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


@pytest.mark.parametrize("table, line, words", [
    ("model", 'converters = "float8"', ("model.converters='float8'", "a list of converter names")),
    ("model", 'converters = ["float8", 3]', ("model.converters=", "a list of converter names")),
    ("model", 'converters = ["fp8"]', ("model.converters=['fp8']", "quantize.linear.float8")),
    ("quantize.linear.float8", 'recipe_name = "colwise"',
     ("quantize.linear.float8.recipe_name='colwise'", "tensorwise, rowwise, rowwise_with_gw_hp")),
    ("float8", 'recipe_name = "colwise"', ("float8.recipe_name='colwise'", "rowwise_with_gw_hp")),
    ("quantize.linear.mx", 'mxfp8_dim1_cast_kernel_choice = "cutlass"',
     ("mxfp8_dim1_cast_kernel_choice='cutlass'", "triton, cuda, torch")),
    ("quantize.grouped_mm.mx", 'recipe_name = "mxfp4"', ("grouped_mm.mx.recipe_name='mxfp4'", "mxfp8")),
    ("quantize.grouped_mm.float8", "fqns = 3", ("grouped_mm.float8.fqns=3", "module names")),
    ("activation_checkpoint", "selective_ac_option = 2", ("selective_ac_option=2", "a string")),
    ("activation_checkpoint", 'selective_ac_option = " 2 "', ("selective_ac_option=' 2 '", "'op'")),
    ("parallelism", 'module_fqns_per_model_part = ["layers.0"]', ("module_fqns_per_model_part=", "lists")),
])
def test_a_bad_value_of_a_key_read_into_the_plan_is_refused_in_one_line(table, line, words):
    _refused_in_one_line(_job(table, line), words)


@pytest.mark.parametrize("table, line", [
    ("model", 'converters = ["quantize.linear.float8"]'), ("model", 'converters = ["float8"]'),
    ("quantize.linear.float8", 'recipe_name = "rowwise"'),
    ("quantize.linear.mx", 'mxfp8_dim1_cast_kernel_choice = "cuda"'),
    ("quantize.grouped_mm.float8", 'fqns = "experts"'), ("quantize.grouped_mm.mx", 'fqns = ["experts"]'),
    ("activation_checkpoint", 'selective_ac_option = "0"'), ("activation_checkpoint", "selective_ac_option = '2'"),
    ("parallelism", 'module_fqns_per_model_part = [["tok_embeddings", "layers.0"], ["layers.1", "norm", "output"]]'),
    ("checkpoint", "last_save_model_weights_only = false"),  # a v0.1.0 field (config_manager.py), not v0.2.2's
    ("job", "print_args = false"),  # v0.1.0 too
])
def test_a_value_torchtitan_allows_is_read(table, line):
    plan_from_text(_job(table, line))


def test_an_unknown_converter_may_come_from_the_jobs_own_import():
    """``experimental.custom_import`` runs the user's module first: it may register converters of its own."""
    text = _job("model", 'converters = ["my_converter"]') + '\n[experimental]\ncustom_import = "my_pkg"\n'
    plan = plan_from_text(text)
    assert any(f.value == "my_converter" for f in plan.source.unmodelled)


@pytest.mark.parametrize("table, line, words", [
    ("metrics", "log_frequency = 10", ("metrics.log_frequency=10", "[metrics]", "refuses unknown fields")),
    ("training.dataloader", "num_wrokers = 2", ("[training.dataloader]", "training.dataloader.num_workers")),
    ("training.dataloader", "foo = 2", ("training.dataloader.foo=2", "[training.dataloader]")),
    ("parallelism", "spmd = true", ("parallelism.spmd=True", "[parallelism]")),
])
def test_an_unknown_key_of_a_torchtitan_table_is_refused_naming_its_table(table, line, words):
    _refused_in_one_line(_job(table, line), words)


def test_architecture_given_as_fields_is_not_an_unknown_key():
    """``[model._arch]``: the architecture given as fields (this reader's own key, ``torchtitan._model_arch``; the
    memory cases of Llama 2 flavors no torchtitan registry holds use it).  The unknown-key refusal took its fields for
    misspelt TorchTitan keys and dropped seven TorchTitan memory cases from the validation; truth: the case file."""
    import json
    from pathlib import Path

    import tomli_w

    from primus_launch.adapters.torchtitan import plan_from_text

    cases = json.loads((Path(__file__).resolve().parents[1] / "scripts/validation/memory_cases.json").read_text())
    cases = cases["cases"] if isinstance(cases, dict) else cases
    case = next(c for c in cases if c["id"] == "titan_perfdoc_llama2_13b_a100_64gpu_fsdp64_lbs2_sacop")
    plan = plan_from_text(tomli_w.dumps(case["torchtitan_config"]))
    arch = case["torchtitan_config"]["model"]["_arch"]
    assert (plan.model.num_layers, plan.model.hidden_size, plan.model.vocab_size) == (
        arch["num_layers"], arch["hidden_size"], arch["vocab_size"])
