"""A TorchTitan job TOML states its cluster in the same ``# primus-launch:`` comment as a Megatron script / YAML
(user16: a TOML's ``# primus-launch: gpu=h200 nodes=4 gpus_per_node=8`` was dropped for 1 x 8 H100 with the note
"the job states no cluster").  Truth: the comment the user wrote, and the Megatron YAML reader's reading of the
very same comment."""

from __future__ import annotations

from pathlib import Path

from primus_launch.adapters import load_recipe
from primus_launch.adapters.torchtitan import plan_from_text, render_torchtitan
from primus_launch.plan import Cluster

JOB = """{comment}
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 1
seq_len = 8192
[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 2
"""

MEGATRON_YAML = """{comment}
num_layers: 32
hidden_size: 4096
ffn_hidden_size: 14336
num_attention_heads: 32
seq_length: 8192
max_position_embeddings: 8192
vocab_size: 128256
micro_batch_size: 1
global_batch_size: 64
tensor_model_parallel_size: 2
bf16: true
"""


def _cl(p) -> tuple[str, int, int]:
    return p.cluster.gpu, p.cluster.num_nodes, p.cluster.gpus_per_node


def test_comment_states_the_cluster_like_a_megatron_yaml(tmp_path: Path):
    comment = "# primus-launch: gpu=h200 nodes=4 gpus_per_node=8"
    plan = plan_from_text(JOB.format(comment=comment))
    (tmp_path / "m.yaml").write_text(MEGATRON_YAML.format(comment=comment))
    assert _cl(plan) == ("h200", 4, 8) == _cl(load_recipe(tmp_path / "m.yaml"))
    assert plan.source.nodes_fitted is False  # stated by the user, not fitted
    assert not any("states no cluster" in n for n in plan.source.notes)
    assert any("'# primus-launch:' comment" in n for n in plan.source.notes)


def test_gpu_only_comment_keeps_the_assumed_node_count_and_says_so():
    plan = plan_from_text(JOB.format(comment="# primus-launch: gpu=mi300x"))
    assert _cl(plan) == ("mi300x", 1, 8)
    assert any("GPU from the file's '# primus-launch:' comment" in n for n in plan.source.notes)


def test_comment_beats_the_upstream_note_header_and_flags_beat_the_comment():
    text = JOB.format(comment="# NOTE: this toml config is a preset for 64 A100 GPUs.\n"
                              "# primus-launch: gpu=b200 nodes=2 gpus_per_node=8")
    assert _cl(plan_from_text(text)) == ("b200", 2, 8)
    # a flag replaces its own key only (as a script's comment), not the GPU count the NOTE header states
    assert _cl(plan_from_text(text, overrides={"num_nodes": 3})) == ("b200", 3, 8)
    assert _cl(plan_from_text(text, cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))) == \
        ("h100-sxm", 1, 8)


def test_tuned_job_rewrites_the_comment_and_reads_back_on_the_new_cluster():
    text = JOB.format(comment="# primus-launch: gpu=h200 nodes=4 gpus_per_node=8")
    plan = plan_from_text(text, cluster=Cluster(gpu="b200", num_nodes=2, gpus_per_node=8))
    out = render_torchtitan(plan, text)
    assert out.splitlines()[0] == "# primus-launch: gpu=b200 nodes=2 gpus_per_node=8"
    assert "preset for" not in out  # one statement of the cluster, not two that could disagree
    assert _cl(plan_from_text(out)) == ("b200", 2, 8)
    # the same cluster: the file is left byte for byte
    assert render_torchtitan(plan_from_text(text), text) == text


def test_bad_count_in_the_comment_is_one_line_naming_it():
    import pytest

    from primus_launch.plan import PlanError

    with pytest.raises(PlanError) as e:
        plan_from_text(JOB.format(comment="# primus-launch: gpu=h200 nodes=four"))
    assert e.value.field == "nodes" and "primus-launch:" in str(e.value)


LAUNCH = """#!/usr/bin/bash
# primus-launch: gpu=b200
torchrun --nnodes 2 --nproc_per_node=8 -m torchtitan.train --module llama3 --config llama3_8b \\
  --parallelism.tensor_parallel_degree 2 --training.local_batch_size 1 --training.disable_cuda_graphs
"""


def test_launch_script_comment_names_the_gpu_torchrun_the_counts(tmp_path: Path):
    """A TorchTitan 0.3 launch script's ``# primus-launch: gpu=b200`` was dropped for "gpu=h100-sxm: the default"
    (user16).  Truth: the comment for the GPU; torchrun's own parser for the counts."""
    from torch.distributed.run import get_args_parser

    from primus_launch.adapters.torchtitan_script import render_titan_script

    f = tmp_path / "run.sh"
    f.write_text(LAUNCH)
    tr = get_args_parser().parse_args(["--nnodes", "2", "--nproc_per_node=8", "-m", "torchtitan.train"])
    plan = load_recipe(f)
    assert _cl(plan) == ("b200", int(tr.nnodes), int(tr.nproc_per_node))
    assert not any("the default" in n for n in plan.source.notes)
    assert _cl(load_recipe(f, {"gpu": "h200"}))[0] == "h200"  # the flag wins
    out = render_titan_script(plan.with_changes(cluster={"gpu": "gb200"}), LAUNCH, str(f))
    assert "# primus-launch: gpu=gb200" in out
    g = tmp_path / "tuned.sh"
    g.write_text(out)
    assert _cl(load_recipe(g))[0] == "gb200"
