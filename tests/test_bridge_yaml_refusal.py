"""A Megatron-Bridge ConfigContainer YAML (its override files: examples/*/conf/*.yaml,
tutorials/recipes/llama/conf/llama32_1b_pretrain.yaml) is refused by name, in one line, instead of
failing on its first section ("--optimizer={...}: a single value, not a mapping")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.errors import UserError

OVERRIDE = """# Llama 3.2 1B pretraining overrides
dataset:
  seq_length: 4096
train:
  train_iters: 100
  global_batch_size: 8
  micro_batch_size: 1
optimizer:
  lr: 0.0003
  min_lr: 0.00003
scheduler:
  lr_warmup_iters: 20
checkpoint:
  save_interval: 50
"""


def test_bridge_override_yaml_is_refused_by_name(tmp_path):
    p = tmp_path / "llama32_1b_pretrain.yaml"
    p.write_text(OVERRIDE)
    with pytest.raises(UserError, match="Megatron-Bridge config YAML"):
        load_recipe(p)
    r = subprocess.run([sys.executable, "-m", "primus_launch", "--project", str(p), "--dry-run"],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_flat_megatron_yaml_with_a_model_key_is_still_read(tmp_path):
    # a top-level Megatron argument beside the sections: not a Bridge ConfigContainer
    p = tmp_path / "args.yaml"
    p.write_text("num_layers: 2\nhidden_size: 256\nnum_attention_heads: 4\nseq_length: 128\n"
                 "max_position_embeddings: 128\nmicro_batch_size: 1\nglobal_batch_size: 8\nvocab_size: 1000\n"
                 "train:\n  note: ignored\n")
    assert load_recipe(p, {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8}).model.num_layers == 2
