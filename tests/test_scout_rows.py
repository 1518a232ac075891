"""The TorchTitan Llama 4 Scout GB200 validation rows (issue 28, "MoE coarse") use torchao's local batch.

torchao's moe_training README published the run first (pytorch/ao 2f903f81a, 2025-11-07) with "Local batch size: 1",
AC none, and its tokens/s table (6169 / 7401, b7959dd6e); torchtitan's later copy of the list says 10.  Independent
truth for choosing 1: without AC autograd keeps, per token of the local batch and per layer, the two SwiGLU inputs
(w1 and w3 outputs, hidden 8192) of the top-1 routed expert and of the shared expert (torchtitan v0.2.1
models/moe/moe.py), a closed-form lower bound of 48 x 81920 x 4 x 8192 x 2 B = 240 GiB at local batch 10, more than a
GB200 holds; the memory model must say the same, and must let local batch 1 fit (the run ran).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.dryrun import project_dry_run

RUNS = Path(__file__).resolve().parents[1] / "scripts" / "validation" / "runs.json"
IDS = ("torchtitan_gb200_llama4_scout_bf16", "torchtitan_gb200_llama4_scout_mxfp8")


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    return {r["id"]: r for r in json.loads(RUNS.read_text())["rows"] if r["id"] in IDS}


def _swiglu_bound(plan: Plan, local_batch: int) -> float:
    """Bytes of the SwiGLU inputs autograd keeps without AC (module doc): layers x tokens x (routed top-k + shared)
    x 2 tensors x hidden x 2 B."""
    m = plan.model
    tokens = local_batch * m.seq_length
    per_token = (m.moe_router_topk * m.moe_ffn_hidden_size + m.moe_shared_expert_intermediate_size) * 2 * 2
    return m.num_layers * tokens * per_token


@pytest.mark.parametrize("row_id", IDS)
def test_scout_rows_local_batch_one_fits_ten_cannot(rows: dict[str, dict], row_id: str) -> None:
    plan = Plan.model_validate(rows[row_id]["plan"])
    assert plan.training.micro_batch_size == 1 and plan.training.recompute.granularity in (None, "none")
    assert plan.training.global_batch_size == 256   # local batch 1 x FSDP 256
    one = project_dry_run(plan).memory
    d = plan.model_dump()
    d["training"].update(micro_batch_size=10, global_batch_size=2560)
    ten = project_dry_run(Plan.model_validate(d)).memory
    bound = _swiglu_bound(plan, 10)
    assert bound / 2**30 == pytest.approx(240, abs=0.5)
    assert bound > ten.capacity_bytes                      # the closed form alone rules local batch 10 out
    assert ten.allocated_peak_bytes >= bound and not ten.fits
    assert one.fits and one.allocated_peak_bytes >= _swiglu_bound(plan, 1)
