"""A recipe that states no GPUs per node is read on its GPU's reference node (user20).

Truth: a GB200 NVL72 compute tray holds 4 GPUs (NVIDIA GB200 NVL72 datasheet: 18 compute trays, 72 GPUs; NVIDIA
dgxc-benchmarking's deepseek_v3/pretrain/torchtitan/launch.sh sets ``GPUS_PER_NODE=4`` for gb200, 8 for h100 / b200;
Megatron-LM's moe_recipes name GB200 runs by 4-GPU nodes), which the hardware database's ``GPUSpec.gpus_per_node``
holds as "a reader's default for Cluster.gpus_per_node".  ``--gpu gb200 --nodes 8`` of a Megatron-LM functional test
(no cluster stated) was 8 x 8 = 64 GPUs.  A count the recipe, its launcher or the flags state is kept.
"""

from __future__ import annotations

import pytest

from primus_launch.adapters.megatron import load_megatron
from primus_launch.projection.hardware.gpus import get_gpu

_YAML = """\
MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 1024
  --num-attention-heads: 16
  --seq-length: 2048
  --max-position-embeddings: 2048
  --vocab-size: 32000
  --tensor-model-parallel-size: 2
  --micro-batch-size: 1
  --global-batch-size: 64
  --bf16: true
"""


def _read(tmp_path, text=_YAML, name="model_config.yaml", **flags):
    p = tmp_path / name
    p.write_text(text)
    return load_megatron(p, overrides=flags or None)


def test_gb200_without_a_stated_node_size_takes_the_tray(tmp_path):
    assert get_gpu("gb200").gpus_per_node == 4 and get_gpu("h100-sxm").gpus_per_node == 8
    plan = _read(tmp_path, gpu="gb200", num_nodes=8)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (8, 4) and plan.cluster.world_size == 32
    assert any("gpus_per_node=4 (gb200's reference node)" in n for n in plan.source.notes)
    # without --gpu the default GPU's node, as before
    assert _read(tmp_path).cluster.gpus_per_node == 8


@pytest.mark.parametrize("how", ["flag", "comment", "torchrun"])
def test_a_stated_node_size_is_kept(tmp_path, how):
    if how == "flag":
        plan = _read(tmp_path, gpu="gb200", num_nodes=2, gpus_per_node=8)
    elif how == "comment":
        plan = _read(tmp_path, "# primus-launch: gpu=gb200 gpus_per_node=8\n" + _YAML)
    else:
        script = ("#!/bin/bash\n# primus-launch: gpu=gb200\ntorchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py "
                  "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                  "--max-position-embeddings 2048 --vocab-size 32000 --tensor-model-parallel-size 2 "
                  "--micro-batch-size 1 --global-batch-size 64 --bf16\n")
        plan = _read(tmp_path, script, "train.sh")
    assert plan.cluster.gpu == "gb200" and plan.cluster.gpus_per_node == 8
