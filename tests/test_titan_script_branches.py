"""A torchtitan launch script that sets the trainer's options in ``if`` / ``elif`` branches is refused in one line,
not read with the last branch's values (read14).

The script's lines are quoted from NVIDIA dgxc-benchmarking ``deepseek_v3/pretrain/torchtitan/launch.sh``
(@841f546, shortened): the degrees are chosen per ``GPU_TYPE``; the line scanner of ``torchtitan_script`` took
every assignment in order (whatever branch they sit in).  The truth is
bash's own run of the script (``bash`` is on every machine this runs on).  Each ``${X:-default}`` keeps the first
branch's value in the scanner, so a B200 job was read with the H100 branch's ``pipeline_parallel_degree=8``."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.errors import UserError

SCRIPT = """\
if [[ $GPU_TYPE == "h100" ]]; then
    export EXPERT_PARALLEL_DEGREE=${EXPERT_PARALLEL_DEGREE:-64}
    export PIPELINE_PARALLEL_DEGREE=${PIPELINE_PARALLEL_DEGREE:-8}
elif [[ $GPU_TYPE == "b200" ]]; then
    export EXPERT_PARALLEL_DEGREE=${EXPERT_PARALLEL_DEGREE:-64}
    export PIPELINE_PARALLEL_DEGREE=${PIPELINE_PARALLEL_DEGREE:-1}
fi
echo python -m torchtitan.train \\
--job.config_file=./job.toml \\
--parallelism.expert_parallel_degree=$EXPERT_PARALLEL_DEGREE \\
--parallelism.pipeline_parallel_degree=$PIPELINE_PARALLEL_DEGREE
"""

TOML = """
[model]
name = "deepseek_v3"
flavor = "16B"
[training]
local_batch_size = 2
seq_len = 2048
"""
# local batch 2: the flat script's PP 2 then has 2 micro-batches, which torch's Schedule1F1B needs (>= stages)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_branch_values_refused_not_misread(tmp_path):
    (tmp_path / "job.toml").write_text(TOML)
    script = tmp_path / "launch.sh"
    script.write_text(SCRIPT)
    ran = subprocess.run(["bash", str(script)], env={"GPU_TYPE": "b200"}, capture_output=True, text=True).stdout
    assert "--parallelism.pipeline_parallel_degree=1" in ran   # what bash runs on a B200
    with pytest.raises(UserError) as e:
        load_recipe(script, script_env={"GPU_TYPE": "b200"})
    msg = str(e.value)
    assert "\n" not in msg and "pipeline_parallel_degree=8" in msg and "pipeline_parallel_degree=1" in msg
    # the same command with no branches reads as bash runs it
    flat = tmp_path / "flat.sh"
    flat.write_text("export EXPERT_PARALLEL_DEGREE=4\nexport PIPELINE_PARALLEL_DEGREE=2\n" + "\n".join(SCRIPT.splitlines()[7:]))
    plan = load_recipe(flat)
    assert (plan.parallel.pp, plan.parallel.ep) == (2, 4)


# dgxc-benchmarking launch.sh (@d5c15e8, shortened): trainer flags in a variable with spaces, extended in a branch,
# expanded unquoted at the end of the command (bash word-splits it), the job TOML under $PWD
SPLIT = """\
LLMB_REPO=$PWD
EXTRA_TRAIN_ARGS="--compile.enable --compile.components=loss --compile.components=model "
if [[ $GPU_TYPE == "gb200" ]]; then
    EXTRA_TRAIN_ARGS+="--parallelism.expert_parallel_degree=4 "
fi
MXFP8_TRAIN_ARGS=""
echo python -m torchtitan.train \\
--job.config_file=$LLMB_REPO/job.toml \\
--training.local_batch_size=2 \\
${EXTRA_TRAIN_ARGS}${MXFP8_TRAIN_ARGS}
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_word_split_flags_read_as_bash_runs_them(tmp_path):
    """The scanner reads no multi-word variable; where that is all it differs from bash by, the plan has bash's
    words (``--compile.enable`` on an H100, and no gb200 branch's EP)."""
    (tmp_path / "job.toml").write_text(TOML)
    script = tmp_path / "launch.sh"
    script.write_text(SPLIT)
    ran = subprocess.run(["bash", str(script)], cwd=tmp_path, env={"GPU_TYPE": "h100"}, capture_output=True,
                         text=True).stdout.split()
    assert "--compile.enable" in ran and not any("expert_parallel" in w for w in ran)
    plan = load_recipe(script, script_env={"GPU_TYPE": "h100"})
    assert plan.training.compile and plan.training.micro_batch_size == 2 and plan.parallel.ep == 1
    # the branch taken: EP 4 from the word-split variable
    assert load_recipe(script, script_env={"GPU_TYPE": "gb200"}).parallel.ep == 4
