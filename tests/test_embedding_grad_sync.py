"""Megatron's word-embedding gradient all-reduce between the first and the last pipeline stage
(``cost/dp_comm.py`` ``embedding_grad_sync_s``, added to stages 0 and pp - 1 by ``steps/iteration.py``), and the
pipeline layout of the Bridge 25.11 DeepSeek-V3 PP 16 row as Megatron-Bridge v0.2.1 builds it.

Truth: megatron-core 0.16.1's own ``finalize_model_grads._get_shared_word_embedding_weight`` (installed; the same
condition as Megatron-LM 0d8e0714, the commit Bridge v0.2.1 pins) decides when the all-reduce runs; its size is the
embedding weight one TP rank holds; Bridge v0.2.1 ``src/megatron/bridge/recipes/deepseek/deepseek_v3.py``
``layout_map[(16, 1)]`` (transcribed below) is the row's layout.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost.dp_comm import embedding_grad_sync_s
from primus_launch.projection.cost.fsdp import fsdp_bytes
from primus_launch.projection.cost.roofline import layer_times_roofline
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.hardware.placement import layout, place
from primus_launch.projection.steps import iteration as it
from primus_launch.projection.steps.flow import run_steps

ROW = "mbridge2511_b200_fp8_mx_deepseek_v3_256gpu_pp16"


def _row(rid: str = ROW) -> Plan:
    rows = json.loads((Path(__file__).resolve().parents[1] / "scripts/validation/runs.json").read_text())["rows"]
    return Plan.model_validate(next(r for r in rows if r["id"] == rid)["plan"])


def _megatron_reduces(tied: bool, mtp: int) -> bool:
    """Whether megatron-core's finalize_model_grads finds a word-embedding weight to all-reduce."""
    fmg = importlib.import_module("megatron.core.distributed.finalize_model_grads")
    sentinel = object()
    module = SimpleNamespace(share_embeddings_and_output_weights=tied,
                             shared_embedding_or_output_weight=lambda: sentinel)
    return fmg._get_shared_word_embedding_weight(module, SimpleNamespace(mtp_num_layers=mtp)) is sentinel


@pytest.mark.parametrize("tied,mtp", [(False, 0), (False, 1), (True, 0), (True, 1)])
def test_runs_when_megatron_reduces(tied, mtp):
    plan = _row().with_changes(model={"untie_embeddings_and_output_weights": not tied, "mtp_num_layers": mtp},
                               parallel={"pipeline_layout": "Et*4|(t*4|)*14t" + "m" * mtp + "L"})
    s = embedding_grad_sync_s(plan, get_gpu(plan.cluster.gpu), layout(plan))
    assert (s > 0.0) == _megatron_reduces(tied, mtp)
    flat = plan.with_changes(parallel={"pp": 1, "pipeline_layout": None}, training={"global_batch_size": 256})
    assert embedding_grad_sync_s(flat, get_gpu(flat.cluster.gpu), layout(flat)) == 0.0   # embd group of one rank


def test_seconds_are_one_all_reduce_of_the_rank_embedding():
    plan = _row()
    m, p = plan.model, plan.parallel
    assert m.padded_vocab_size(p.tp) == 129280   # 129280 is already a multiple of 1280
    nbytes = 129280 * 7168 * 2.0                  # bf16 main grads (grad_reduce_in_fp32 off), TP 1
    assert fsdp_bytes(plan).grad == 2.0
    # first and last stage of one pipeline: tp cp dp (pp - 1) = 16 x 15 ranks apart, on different nodes
    grp = place(2, 16 * 15, 8)
    assert grp.nodes == 2
    s = embedding_grad_sync_s(plan, get_gpu("b200"), layout(plan))
    assert s == pytest.approx(coll.all_reduce(nbytes, grp, "b200"), rel=1e-12)
    # 1.85 GB through a 50 GB/s NIC each way: tens of milliseconds
    assert 0.03 < s < 0.06


def test_only_the_first_and_last_stage_tails_carry_it(monkeypatch):
    plan = _row()
    lt = layer_times_roofline(plan)
    with_ = run_steps(plan, lt).iteration.tails
    monkeypatch.setattr(it, "embedding_grad_sync_s", lambda *a: 0.0)
    without = run_steps(plan, lt).iteration.tails
    emb = embedding_grad_sync_s(plan, get_gpu("b200"), layout(plan))
    for rank, (a, b) in enumerate(zip(with_, without)):
        want = emb if rank in (0, plan.parallel.pp - 1) else 0.0
        assert a.dp_s - b.dp_s == pytest.approx(want, abs=1e-12)


def test_pp16_layout_is_bridge_v021_layout_map():
    # Bridge v0.2.1 deepseek_v3.py, layout_map[(16, 1)] with mtp_num_layers 1:
    #   [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder"] + ["mtp", "loss"]]
    bridge = [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder", "mtp", "loss"]]
    plan = _row()
    assert (plan.parallel.pp, plan.parallel.vpp, plan.num_microbatches) == (16, 1, 128)   # GBS 2048 / (MBS 1 x DP 16)
    got = []
    for row in plan.chunk_layout():
        (c,) = row
        got.append(["embedding"] * c.embedding + ["decoder"] * len(c.layers) + ["mtp"] * c.mtp + ["loss"] * c.loss)
    assert got == bridge
    # DeepSeek-V3's first_k_dense_replace = 3: the first stage's dense layers 0-2 and MoE layer 3
    assert [plan.model.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]
