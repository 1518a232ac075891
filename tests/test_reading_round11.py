"""Reading round 11 (held-out audit of Megatron-LM, Megatron-Bridge, Primus and TorchTitan recipes at their
2026-08-22 snapshots): the constructs the audit found read wrong or refused without naming why.

- A Megatron-LM functional test states its run's GPU count in ``MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE``
  (``tests/functional_tests/shell_test_utils/run_ci_test.sh`` @d98e8a6 exports it as ``GPUS_PER_NODE`` for the
  ``MODEL_ARGS`` run); the reader took the default 1 x 8 and refused the run's batch as indivisible.
- A cluster rule broken on the default cluster (the recipe states no GPU count) now names that cluster.

The snippets are minimal ones written for these tests from the formats' facts, not copied from the recipes.
"""

from __future__ import annotations

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.plan import PlanError

_MODEL_ARGS = """\
MODEL_ENV_VARS:
  MODEL_ARGS:
    GPUS_PER_NODE: {gpn}
  MODEL_ARGS_2:
    GPUS_PER_NODE: 2
MODE: pretraining
MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 256
  --num-attention-heads: 4
  --seq-length: 128
  --max-position-embeddings: 128
  --micro-batch-size: 2
  --global-batch-size: 2
  --tensor-model-parallel-size: 1
  --vocab-size: 1000
  --tokenizer-type: NullTokenizer
  --bf16: true
MODEL_ARGS_2:
  --micro-batch-size: 1
  --global-batch-size: 2
"""


def _write(tmp_path, text, name="model_config.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_functional_test_gpus_per_node_is_the_run_cluster(tmp_path):
    plan = load_recipe(_write(tmp_path, _MODEL_ARGS.format(gpn=1)))
    c = plan.cluster
    assert (c.num_nodes, c.gpus_per_node) == (1, 1)
    assert plan.training.global_batch_size == 2 and plan.training.micro_batch_size == 2
    assert any("MODEL_ENV_VARS.MODEL_ARGS.GPUS_PER_NODE=1" in n for n in plan.source.notes)


def test_cluster_flags_beat_the_functional_test_count(tmp_path):
    text = _MODEL_ARGS.format(gpn=1).replace("--global-batch-size: 2", "--global-batch-size: 4", 1)
    plan = load_recipe(_write(tmp_path, text), {"gpus_per_node": 2, "num_nodes": 1})
    assert plan.cluster.gpus_per_node == 2
    assert not any("MODEL_ENV_VARS" in n for n in plan.source.notes)


def test_functional_test_gpus_per_node_must_be_a_count(tmp_path):
    with pytest.raises(PlanError, match=r"MODEL_ENV_VARS\.MODEL_ARGS\.GPUS_PER_NODE='x'"):
        load_recipe(_write(tmp_path, _MODEL_ARGS.format(gpn="x")))


def test_world_size_rule_on_the_default_cluster_names_it(tmp_path):
    text = _MODEL_ARGS.split("MODEL_ENV_VARS")[0] + "MODEL_ARGS:" + _MODEL_ARGS.split("\nMODEL_ARGS:")[1]
    text = text.replace("--tensor-model-parallel-size: 1", "--tensor-model-parallel-size: 1\n"
                        "  --pipeline-model-parallel-size: 16")
    text = text.replace("--num-layers: 4", "--num-layers: 16")
    with pytest.raises(PlanError) as e:
        load_recipe(_write(tmp_path, text))
    msg = str(e.value)
    assert "world size 8" in msg and "the recipe states no GPU count" in msg and "--nodes" in msg
    assert "\n" not in msg
