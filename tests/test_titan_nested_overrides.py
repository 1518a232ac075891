"""A torchtitan <= 0.2 command's override of a nested field (``--quantize.linear.float8.recipe_name rowwise``:
torchtitan v0.2.2 ``config/job_config.py`` ``Quantize.linear.float8`` is a dataclass inside a dataclass, and
tyro's flag names every level) sets that field, as the same value written in the job TOML's
``[quantize.linear.float8]`` table does.  It was written as a key ``"linear.float8.recipe_name"`` of
``[quantize]`` and lost: the FP8 recipe read as tensorwise (read14; found by comparing commands with
torchtitan v0.2.2's own ``ConfigManager``, run from ``git archive v0.2.2 torchtitan``)."""

from __future__ import annotations

from primus_launch.adapters.titan_job_argv import plan_from_job_command

TOML = """
[model]
name = "llama3"
flavor = "8B"
converters = ["quantize.linear.float8"]
[training]
local_batch_size = 1
seq_len = 2048
[quantize.linear.float8]
enable_fsdp_float8_all_gather = false
"""

RUN = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train"]


def test_nested_override_equals_the_toml_table(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(TOML)
    written = tmp_path / "written.toml"
    written.write_text(TOML.replace("enable_fsdp_float8_all_gather = false",
                                    'enable_fsdp_float8_all_gather = false\nrecipe_name = "rowwise"\n'
                                    'filter_fqns = ["output", "wo"]'))
    by_file = plan_from_job_command([*RUN, "--job.config_file", str(written)])
    only = plan_from_job_command([*RUN, "--job.config_file", str(job), "--quantize.linear.float8.recipe_name",
                                  "rowwise"])
    assert only.training.fp8_recipe == "rowwise"
    for spelled in (["--quantize.linear.float8.recipe_name", "rowwise", "--quantize.linear.float8.filter_fqns",
                     "output,wo"],
                    ["--quantize.linear.float8.recipe-name=rowwise", "--quantize.linear.float8.filter-fqns=output,wo"]):
        by_flag = plan_from_job_command([*RUN, "--job.config_file", str(job), *spelled])
        assert by_flag.training.fp8_recipe == by_file.training.fp8_recipe == "rowwise"
        assert by_flag.training.bf16_linears == by_file.training.bf16_linears == ("wo",)
