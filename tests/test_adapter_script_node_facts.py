"""Launch-script idioms the ROCm/Megatron-LM branch scripts use (survey: scripts/survey_recipes.py --source over
their root scripts): the processes per node taken from the node's own GPU count, and a tokenizer file the
script downloads before the run.

Each script here is written for the test in the shape those scripts have.  Truths: bash's and the launchers'
semantics (``torch.cuda.device_count()`` prints the node's GPU count, ``nvidia-smi -L`` one line per GPU;
``wget -O FILE URL`` writes URL's content to FILE), the public-tokenizer table's Llama 2 entry (32,000, from
meta-llama/Llama-2-7b-hf ``config.json``), and the writer's round trip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from primus_launch.adapters.launcher_counts import is_node_gpu_query
from primus_launch.adapters.megatron import load_megatron, render_megatron
from primus_launch.adapters.megatron_vocab import table_vocab
from primus_launch.plan import Cluster, PlanError

QUERY = '`python3 -c "import torch; print(torch.cuda.device_count())"`'
MODEL = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 "
         "--micro-batch-size 1 --global-batch-size 32 --bf16")


def _script(tmp_path: Path, head: str, launch: str, tail: str = "--vocab-size 32000") -> Path:
    p = tmp_path / "train.sh"
    p.write_text(f"#!/bin/bash\n{head}\n{launch} pretrain_gpt.py {MODEL} {tail}\n")
    return p


@pytest.mark.parametrize("source", [
    QUERY,
    '$(python -c "import torch; print(torch.cuda.device_count())")',
    "$(nvidia-smi -L | wc -l)",
    "`nvidia-smi --list-gpus 2>/dev/null | wc -l`",
])
def test_the_node_gpu_queries_are_recognised(source):
    assert is_node_gpu_query(source)


@pytest.mark.parametrize("source", ['$(python -c "print(8)")', "$(nvidia-smi -L | head -1)", "$(nproc)",
                                    '$(python -c "import torch; print(torch.cuda.device_count() // 2)")'])
def test_other_command_output_is_not_a_gpu_count(source):
    assert not is_node_gpu_query(source)


@pytest.mark.parametrize("launch", [
    "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES",
    'DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES"\ntorchrun $DISTRIBUTED_ARGS',
])
def test_processes_per_node_from_the_node_gpu_count_are_the_cluster_gpus(tmp_path, launch):
    p = _script(tmp_path, f"GPUS_PER_NODE={QUERY}\nNNODES=2", launch)
    plan = load_megatron(p)
    # every GPU of each node: the cluster's gpus_per_node (the default cluster's, said in a note)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (2, Cluster().gpus_per_node)
    assert any("device_count()" in n and "falls back to" in n for n in plan.source.notes)
    four = load_megatron(p, overrides={"gpus_per_node": 4})
    assert (four.cluster.num_nodes, four.cluster.gpus_per_node) == (2, 4)
    assert not any("falls back to" in n for n in four.source.notes)
    text = p.read_text()
    assert render_megatron(plan, text) == text
    tuned = render_megatron(plan.with_changes(training={"micro_batch_size": 2}), text)
    assert QUERY in tuned and "--micro-batch-size 2" in tuned


def test_through_eval_of_a_command_string(tmp_path):
    # ROCm's basetrain70b.sh: run_cmd="torchrun $DISTRIBUTED_ARGS ..."; eval $run_cmd
    p = tmp_path / "train.sh"
    p.write_text(f"#!/bin/bash\nGPUS_PER_NODE={QUERY}\nNNODES=1\nDISTRIBUTED_ARGS=\"--nproc_per_node $GPUS_PER_NODE "
                 f"--nnodes $NNODES\"\nrun_cmd=\"torchrun $DISTRIBUTED_ARGS pretrain_gpt.py {MODEL} --vocab-size 32000\"\n"
                 "eval $run_cmd\n")
    plan = load_megatron(p, overrides={"gpus_per_node": 4})
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node, plan.dp) == (1, 4, 4)


def test_other_command_output_for_the_count_stays_refused(tmp_path):
    p = _script(tmp_path, "GPUS_PER_NODE=$(nproc)", "torchrun --nproc_per_node $GPUS_PER_NODE")
    with pytest.raises(PlanError, match="--nproc_per_node.*command substitution; pass the cluster explicitly"):
        load_megatron(p)


WGET = ("TOKENIZER_MODEL=experiment/tokenizer.model\nif ! [ -f \"$TOKENIZER_MODEL\" ]; then\n"
        "wget -O $TOKENIZER_MODEL https://huggingface.co/NousResearch/Llama-2-7b-chat-hf/resolve/main/tokenizer.model\nfi")
TOK = "--tokenizer-type Llama2Tokenizer --tokenizer-model $TOKENIZER_MODEL"


@pytest.mark.parametrize("fetch", [WGET, WGET.replace("wget -O", "curl -L -o"),
                                   WGET.replace("wget -O $TOKENIZER_MODEL", "wget -q --output-document=$TOKENIZER_MODEL")])
def test_a_tokenizer_the_script_downloads_is_named_by_its_address(tmp_path, monkeypatch, fetch):
    monkeypatch.chdir(tmp_path)  # experiment/tokenizer.model is not on this machine
    p = _script(tmp_path, fetch, "torchrun --nproc_per_node 8", TOK)
    plan = load_megatron(p)
    assert plan.model.vocab_size == table_vocab("meta-llama/Llama-2-7b-hf")[0] == 32000
    assert any("downloads from https://huggingface.co/NousResearch/Llama-2-7b-chat-hf" in n for n in plan.source.notes)
    text = p.read_text()
    assert render_megatron(plan, text) == text
    assert "--micro-batch-size 2" in render_megatron(plan.with_changes(training={"micro_batch_size": 2}), text)


def test_without_the_download_the_tokenizer_stays_unknown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = _script(tmp_path, "TOKENIZER_MODEL=experiment/tokenizer.model", "torchrun --nproc_per_node 8", TOK)
    with pytest.raises(PlanError, match="--tokenizer-model.*vocabulary size unknown"):
        load_megatron(p)


def test_a_local_tokenizer_file_wins_over_the_address(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "vocab.txt").write_text("".join(f"t{i}\n" for i in range(1000)))
    fetch = WGET.replace("tokenizer.model\nif", "vocab.txt\nif")
    p = _script(tmp_path, fetch, "torchrun --nproc_per_node 8",
                "--tokenizer-type BertWordPieceLowerCase --vocab-file $TOKENIZER_MODEL")
    assert load_megatron(p).model.vocab_size == 1000  # the file as it is on this machine, not the address's table entry


# a base script the teams' driver scripts run (ROCm/Megatron-LM branches: tune_basetrain.sh runs BASHFILE with
# `MBS=$MBS BS=$BS bash $BASHFILE`; run.sh runs `bash tune_basetrain.sh MBS=8 BS=256`, which exports its KEY=VALUE
# arguments in a loop)
BASE = f"""#!/bin/bash
for ARGUMENT in "$@"
do
   KEY=$(echo $ARGUMENT | cut -f1 -d=)
   KEY_LENGTH=${{#KEY}}
   VALUE="${{ARGUMENT:$KEY_LENGTH+1}}"
   export "$KEY"="$VALUE"
done
MBS="${{MBS:-2}}"
BS="${{BS:-32}}"
torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 \\
  --seq-length 512 --max-position-embeddings 512 --micro-batch-size $MBS --global-batch-size $BS --bf16 --vocab-size 32000
"""


@pytest.mark.parametrize("driver, before, after", [
    ('MBS="${MBS:-3}"\nBS="${BS:-48}"\nMBS=$MBS BS=$BS bash base.sh\n', 'MBS="${MBS:-3}"', 'MBS="${MBS:-6}"'),
    ("bash base.sh MBS=3 BS=48\n", "MBS=3 BS=48", "MBS=6 BS=48"),
])
def test_a_value_the_driver_passes_to_the_script_it_runs_is_tuned_where_the_driver_writes_it(tmp_path, driver, before,
                                                                                             after):
    (tmp_path / "base.sh").write_text(BASE)
    p = tmp_path / "run.sh"
    p.write_text("#!/bin/bash\n" + driver)
    plan = load_megatron(p)
    assert (plan.training.micro_batch_size, plan.training.global_batch_size) == (3, 48)
    text = p.read_text()
    assert render_megatron(plan, text) == text
    out = render_megatron(plan.with_changes(training={"micro_batch_size": 6}), text)
    assert out == text.replace(before, after)  # the driver's own words; base.sh is not touched
    p.write_text(out)
    assert load_megatron(p).training.micro_batch_size == 6
