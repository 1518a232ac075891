"""A launch line that runs another script (Megatron-LM's READMEs: ``bash examples/llama/
train_llama3_8b_h100_fp8.sh CKPT TB TOKENIZER DATA``) is read through the script it runs, with its
positional arguments, found next to the caller or from the run's root above it."""

from __future__ import annotations

import pytest

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.errors import UserError

TRAIN = """#!/bin/bash
CHECKPOINT_PATH=${1:-"checkpoints/llama3_8b_fp8"}
TOKENIZER_ARG=${3:-"MOCK"}
GPUS_PER_NODE=8
NUM_NODES=${NUM_NODES:-1}
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py \\
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \\
    --group-query-attention --num-query-groups 8 --swiglu --seq-length 8192 --max-position-embeddings 8192 \\
    --micro-batch-size 1 --global-batch-size 128 --bf16 --fp8-format hybrid --vocab-size 128256 \\
    --save $CHECKPOINT_PATH
"""


def test_bash_examples_script_with_arguments(tmp_path):
    ex = tmp_path / "Megatron-LM" / "examples" / "llama"
    ex.mkdir(parents=True)
    (ex / "train_llama3_8b_h100_fp8.sh").write_text(TRAIN)
    docs = tmp_path / "Megatron-LM" / "runs"
    docs.mkdir()
    line = "NUM_NODES=2 bash examples/llama/train_llama3_8b_h100_fp8.sh \\\n    /workspace/ckpt /workspace/tb MOCK\n"
    caller = docs / "launch.sh"
    caller.write_text(line)
    plan = load_recipe(caller)
    assert (plan.model.num_layers, plan.model.num_query_groups, plan.training.precision) == (32, 8, "fp8")
    assert plan.world_size == 16  # NUM_NODES=2, a prefix of the call, is in the called script's environment
    assert render_recipe(plan, line) == line
    exported = docs / "exported.sh"
    exported.write_text("export NUM_NODES=2\n./examples/llama/train_llama3_8b_h100_fp8.sh\n")
    assert load_recipe(exported).world_size == 16


# ROCm/Megatron-LM renwuli/disable_te_qwen1.5 tune_qwen1.5_7b.sh: a driver that exports a few variables and runs
# `bash train_qwen1.5_7b.sh`, whose batch sizes are defaults (MBS="${MBS:-8}"): a tuned value is written as the
# variable before the driver's `bash` command (the called script is not copied), which bash passes to the run; the
# log file the default also names (`| tee $LOG`) is no argument of the training command
CALLED = """#!/bin/bash
MBS="${MBS:-8}"
GBS="${GBS:-256}"
TP="${TP:-1}"
LOG="logs/log_${MBS}.txt"
torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 \\
    --seq-length 64 --vocab-size 100 --tensor-model-parallel-size $TP --micro-batch-size $MBS \\
    --global-batch-size $GBS --bf16 2>&1 | tee $LOG
"""


def test_called_script_default_is_tuned_before_the_bash_command(tmp_path):
    (tmp_path / "train.sh").write_text(CALLED)
    driver = tmp_path / "tune.sh"
    text = "export PYTORCH_TUNABLEOP_ENABLED=1\nbash train.sh\n"
    driver.write_text(text)
    plan = load_recipe(driver)
    assert (plan.training.micro_batch_size, plan.training.global_batch_size) == (8, 256)
    assert render_recipe(plan, text) == text
    tuned = plan.with_changes(training={"micro_batch_size": 2, "global_batch_size": 128}).model_copy(
        update={"source": plan.source})
    out = render_recipe(tuned, text)
    assert out == "export PYTORCH_TUNABLEOP_ENABLED=1\nMBS=2 GBS=128 bash train.sh\n"
    driver.write_text(out)
    back = load_recipe(driver)
    assert (back.training.micro_batch_size, back.training.global_batch_size) == (2, 128)
    assert (tmp_path / "train.sh").read_text() == CALLED  # the called script is not written


def test_called_script_default_shared_by_another_argument_is_refused(tmp_path):
    # the default also makes another argument's value (--tensorboard-dir .../mbs8): `MBS=2 bash train.sh` would change
    # it too, so the tune refuses in one line naming the called script, as before
    (tmp_path / "train.sh").write_text(CALLED.replace("--bf16", "--bf16 --tensorboard-dir tb/mbs$MBS"))
    driver = tmp_path / "tune.sh"
    text = "bash train.sh\n"
    driver.write_text(text)
    plan = load_recipe(driver)
    tuned = plan.with_changes(training={"micro_batch_size": 2}).model_copy(update={"source": plan.source})
    with pytest.raises(UserError) as e:
        render_recipe(tuned, text)
    assert "train.sh" in str(e.value) and "another file" in str(e.value) and "\n" not in str(e.value)
