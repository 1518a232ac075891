"""A v0.1 / v0.2 TorchTitan job TOML that writes a field in the table an earlier layout kept it in (user14).

TorchTitan's ``ConfigManager`` refuses a field its ``JobConfig`` table lacks ("Invalid field names", torchtitan
v0.2.2 ``torchtitan/config/manager.py`` ``_dict_to_dataclass``); since v0.1.0 the parallel degrees live in
``[parallelism]`` (``Parallelism`` in ``config_manager.py`` of v0.1.0; earlier jobs wrote ``[training]
tensor_parallel_degree`` and ``[experimental] pipeline_parallel_degree``).  The reader listed the first as "not
known to primus-launch" and took the second as read while reading neither: TP=8 PP=2 were projected as TP=1 PP=1.
Truth: the table TorchTitan v0.2.2's JobConfig holds each field in (``adapters/titan_job_types.JOB_TYPES``, built
from it).
"""

from __future__ import annotations

import pytest

from primus_launch.adapters.titan_job_types import JOB_TYPES
from primus_launch.cli import main

JOB = """\
[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 2
seq_len = 8192
{training}
[parallelism]
data_parallel_shard_degree = -1
{parallelism}
{extra}"""


@pytest.mark.parametrize("training,extra,key", [
    ("tensor_parallel_degree = 8\n", "", "training.tensor_parallel_degree"),
    ("", "[experimental]\npipeline_parallel_degree = 2\n", "experimental.pipeline_parallel_degree"),
], ids=["training-tp", "experimental-pp"])
def test_a_field_in_its_old_table_is_refused_naming_its_table(tmp_path, capsys, training, extra, key):
    leaf = key.split(".", 1)[1]
    assert f"parallelism.{leaf}" in JOB_TYPES and key not in JOB_TYPES   # where torchtitan v0.2.2 holds it
    rec = tmp_path / "job.toml"
    rec.write_text(JOB.format(training=training, parallelism="", extra=extra))
    assert main(["--project", str(rec), "--dry-run", "--nodes", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"primus-launch: error: {key}=")
    assert f"did you mean parallelism.{leaf}?" in err[0]
    # written where TorchTitan reads it, it is read
    rec.write_text(JOB.format(training="", parallelism=f"{leaf} = {8 if 'tensor' in leaf else 2}\n", extra=""))
    assert main(["--project", str(rec), "--dry-run", "--nodes", "2"]) == 0
    out = capsys.readouterr().out
    assert ("TP=8" if "tensor" in leaf else "PP=2") in out


def test_assumed_cluster_note_names_the_flags_given(tmp_path, capsys):
    """A job stating no cluster, projected with --nodes 2: the note read "2 x 8 h100-sxm assumed ...; give --gpu /
    --nodes / --gpus-per-node" as if --nodes had not been given."""
    rec = tmp_path / "job.toml"
    rec.write_text(JOB.format(training="", parallelism="", extra=""))
    assert main(["--project", str(rec), "--dry-run", "--nodes", "2"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "note: cluster: 2 x 8 h100-sxm, --nodes given and the rest assumed (the job states no cluster; give " \
           "--gpu / --gpus-per-node)" in text
    assert main(["--project", str(rec), "--dry-run"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "assumed (the job states no cluster; give --gpu / --nodes / --gpus-per-node)" in text
