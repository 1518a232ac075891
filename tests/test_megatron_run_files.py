"""A Megatron-LM functional test names its own files from the checkout's root, where Megatron-LM runs:
``--tp-comm-overlap-cfg tests/functional_tests/test_cases/<case>/tp_comm_overlap_cfg.yaml`` (Megatron-LM
main, gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_sp_tp_overlap).  The reader finds it
from the recipe's folder upwards, as the run would from the root."""

from __future__ import annotations

import pytest

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.errors import UserError
from primus_launch.plan import PlanError

CASE = "tests/functional_tests/test_cases/gpt/case_tp_overlap"
MODEL_CONFIG = f"""ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 1024
  --num-attention-heads: 16
  --seq-length: 2048
  --max-position-embeddings: 2048
  --micro-batch-size: 1
  --global-batch-size: 8
  --tensor-model-parallel-size: 2
  --pipeline-model-parallel-size: 2
  --sequence-parallel: true
  --tp-comm-overlap: true
  --tp-comm-overlap-cfg: {CASE}/tp_comm_overlap_cfg.yaml
  --vocab-size: 32000
  --bf16: true
"""
UB = """qkv_fprop:
  method: ring_exchange
  aggregate: 1
proj_fprop:
  method: pipeline
  num_sm: 4
  num_splits: 4
  set_sm_margin: 0
fc1_dgrad:
  method: bulk
  num_sm: 2
  set_sm_margin: 0
"""


def test_tp_comm_overlap_cfg_is_found_from_the_checkout_root(tmp_path, monkeypatch):
    case = tmp_path / "megatron" / CASE
    case.mkdir(parents=True)
    (case / "tp_comm_overlap_cfg.yaml").write_text(UB)
    (case / "model_config.yaml").write_text(MODEL_CONFIG)
    monkeypatch.chdir(tmp_path)  # not the checkout's root: the relative path does not resolve from here
    plan = load_recipe(case / "model_config.yaml", {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8})
    got = {c[0]: c[1:] for c in plan.training.tp_comm_overlap_cfg}
    assert got["proj_fprop"] == ("pipeline", 4, False) and got["fc1_dgrad"] == ("bulk", 2, False)
    assert got["qkv_fprop"][0] == "ring_exchange"
    assert render_recipe(plan, MODEL_CONFIG) == MODEL_CONFIG  # the render re-reads it from the root too
    tuned = plan.with_changes(training={"micro_batch_size": 2}).model_copy(update={"source": plan.source})
    assert "--micro-batch-size: 2" in render_recipe(tuned, MODEL_CONFIG)


def test_a_missing_cfg_is_still_refused_by_name(tmp_path):
    (tmp_path / "model_config.yaml").write_text(MODEL_CONFIG)
    with pytest.raises((UserError, PlanError), match="--tp-comm-overlap-cfg"):
        load_recipe(tmp_path / "model_config.yaml", {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8})
