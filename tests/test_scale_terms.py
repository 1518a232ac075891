"""Terms that grow with the GPU count (issue 28, "scale") against NVIDIA's published weak-scaling series.

NVIDIA/dgxc-benchmarking v24.11.1 (``scripts/validation/dgxc_runs.py``) measured Nemotron-4 340B (TP 8, PP 8, VP 12,
DP 2 -> 32) and GPT-3 175B (TP 4, PP 8, VP 12, DP 4 -> 64) on 128 .. 2,048 H100 with the work per GPU held
constant: the step time grows with the data-parallel group alone.  The model's growth comes from the DP
gradient reduce-scatter / parameter all-gather: one NCCL call per Megatron bucket, each paying NCCL's ring
latency, linear in the nodes of the group (``cost/collectives.py`` ``nccl_call_latency``, NCCL's own
``tuning.cc`` constants: nothing here is fitted to these rows).  The GPT-3 FP8 series is left out: its step
times are not monotone in the GPU count (5.92 / 5.96 / 6.44 / 6.72 / 6.24 s), noise larger than the effect.
Since the DP communication follows Megatron's interleaved schedule chunk by chunk (``cost/dp_comm.py``: each
chunk's reduce-scatter launched after its last backward and overlapping the later chunks' backward, its
all-gather ahead of its first forward), the Nemotron-4 FP8 series' loss is only partly the DP step: measured
9.5 %, projected 3.9 % (7.9 % with the whole stage's reduction behind one micro-batch's backward, more exposed
than the schedule leaves it); the rest is not modelled (``scripts/validation/README.md``, "Scale").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.dryrun import project_dry_run

ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).resolve().parents[1] / "scripts/validation/runs.json").read_text())["rows"]}
SERIES = ("dgxc2411_h100_fp8_nemotron4_340b", "dgxc2411_h100_bf16_nemotron4_340b", "dgxc2411_h100_bf16_gpt3_175b")


def _ratio(series: str) -> tuple[float, float]:
    """(measured, projected) tokens/s/GPU at 2,048 GPUs over the same at 128 GPUs."""
    lo, hi = ROWS[f"{series}_128gpu"], ROWS[f"{series}_2048gpu"]
    proj = [project_dry_run(Plan.model_validate(r["plan"])).tokens_per_sec_per_gpu for r in (lo, hi)]
    return hi["measured_tokens_per_sec_per_gpu"] / lo["measured_tokens_per_sec_per_gpu"], proj[1] / proj[0]


@pytest.mark.parametrize("series", SERIES[1:])
def test_weak_scaling_loss_from_128_to_2048_gpus(series):
    """Measured per-GPU throughput loss 128 -> 2,048 GPUs: Nemotron-4 BF16 4.7 %, GPT-3 BF16 1.2 %; the
    projection's within 3 points of each."""
    meas, proj = _ratio(series)
    assert proj == pytest.approx(meas, abs=0.03), (series, meas, proj)


def test_fp8_weak_scaling_loss_is_partly_the_dp_step():
    """Nemotron-4 FP8 loses 9.5 % from 128 to 2,048 GPUs; the DP step as Megatron's interleaved schedule hides
    it explains a loss in the same direction, and less than what was measured (module doc)."""
    meas, proj = _ratio(SERIES[0])
    assert meas < proj < 1.0, (meas, proj)


def test_without_nccl_latency_the_largest_loss_is_missed(monkeypatch):
    """The same series with the ring latency switched off (one latency per stage, as before): the Nemotron-4
    FP8 loss comes out under half the measured one -- the term carries the effect."""
    monkeypatch.setattr(coll, "NCCL_NET_STEP_S", 0.0)
    monkeypatch.setattr(coll, "NCCL_INTRA_STEP_S", 0.0)
    monkeypatch.setattr(coll, "NCCL_BASE_S", 0.0)
    coll.clear_caches()
    try:
        meas, proj = _ratio(SERIES[0])
    finally:
        monkeypatch.undo()
        coll.clear_caches()
    assert 1 - proj < 0.5 * (1 - meas), (meas, proj)


def test_explanation_names_the_dp_sync_term():
    """The explanation table's 'data-parallel gradient sync' row states the DP group's footprint, the bucket rule
    and NCCL's per-call latency (Nemotron-4 at 2,048 GPUs: 32 ranks, one per node: 8.4 + 31 x 14 = 442 us)."""
    from primus_launch.projection.cost.dp_comm import dp_sync_line
    from primus_launch.projection.explain import framework_rows

    plan = Plan.model_validate(ROWS[f"{SERIES[0]}_2048gpu"]["plan"])
    line = dict(framework_rows(plan))["data-parallel gradient sync"]
    assert line == dp_sync_line(plan)
    assert "32 ranks over 32 domain(s)" in line and "40M-parameter buckets" in line and "442 us" in line


def test_dp_sync_line_names_per_chunk_launches_only_with_the_overlap():
    """Megatron-LM training.py sets config.grad_sync_func only with overlap_grad_reduce and param_sync_func only
    with overlap_param_gather: without them the interleaved schedule launches no per-chunk DP communication (the
    projection prices it fully exposed) and the explanation line must not say it does."""
    from primus_launch.projection.cost.dp_comm import dp_sync_line

    plan = Plan.model_validate(ROWS[f"{SERIES[0]}_2048gpu"]["plan"])
    assert plan.parallel.vpp > 1 and plan.parallel.pp > 1

    def with_overlap(g: bool, a: bool) -> str:
        t = plan.training.model_copy(update={"overlap_grad_reduce": g, "overlap_param_gather": a})
        return dp_sync_line(plan.model_copy(update={"training": t}))

    on, off = with_overlap(True, True), with_overlap(False, False)
    assert "after the chunk's last backward" in on and "ahead of its first forward" in on
    assert "last backward" not in off and "first forward" not in off
    assert "after the pipeline" in off and "after the optimizer step" in off


def test_dp_sync_line_is_megatron_only():
    """The line states Megatron DDP's bucket rule: a TorchTitan DDP plan (dp_sharding none) has no such buckets and
    gets no line; the same plan under Megatron does."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Training
    from primus_launch.plan.sections import Source
    from primus_launch.projection.cost.dp_comm import dp_sync_line

    m = ModelArch(num_layers=4, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
                  vocab_size=128256, seq_length=8192, swiglu=True)
    mk = lambda fw: Plan(model=m, parallel=Parallelism(dp_sharding="none"), source=Source(framework=fw),  # noqa: E731
                         training=Training(global_batch_size=64, micro_batch_size=1),
                         cluster=Cluster(gpu="h100-sxm", num_nodes=2))
    assert dp_sync_line(mk("torchtitan")) == ""
    assert "16 ranks" in dp_sync_line(mk("megatron"))
