"""Issue 28's Qwen3-235B H100 reference (+14.3 %) against the DeepEP build its Megatron-LM recipe pins:
``scripts/hybridep_chunk_probe.py``'s figures against their public sources, and the documented negative result they
support (``scripts/validation/README.md`` Known gaps, branch qwenref15): HybridEP's 64-token combine chunks (DeepEP
a0d27f1) slow the unfused combine over NVLink, but the reference's combine is bound by its RDMA stage."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "recipes" / "megatron" / "qwen3_235b_a22b_h100_256gpu.yaml"


def _probe():
    sys.path.insert(0, str(ROOT / "scripts"))
    import hybridep_chunk_probe

    return hybridep_chunk_probe


def _reference_plan():
    from primus_launch.adapters import load_recipe

    return load_recipe(REFERENCE)


def test_ratios_are_the_published_kernel_times():
    """DeepEP PR #588 (comment of 2026-04-14): combine kernel over NVLink 315.61 us before the 64-token default,
    522.63 us after.  The RDMA bound: the hybrid-ep README's H100 kernel-only GB/s at 32 ranks, 8 SMs (combine 56.40,
    dispatch BF16 54.50; 128-token chunks) over DeepEP PR #634's 4 x 8 ranks (combine 105.41, dispatch 110.54 RDMA;
    64-token default)."""
    hp = _probe()
    assert hp.NVL_RATIO == pytest.approx(522.63 / 315.61)
    assert hp.NVL_RATIO == pytest.approx(1.656, abs=1e-3)
    assert hp.RDMA_RATIO == pytest.approx((56.40 / 54.50) / (105.41 / 110.54))
    assert hp.RDMA_RATIO == pytest.approx(1.085, abs=1e-3)


def test_combine_chunk_by_pin_and_environment():
    """128 tokens before DeepEP hybrid-ep a0d27f1 (2026-03-31: ``hybrid_ep_buffer.py`` default "128"), 64 from it on
    (``config.cuh`` ``Configurer``: ``get_env_int("NUM_OF_TOKENS_PER_CHUNK_COMBINE_API", 64)``); the recipe's
    ``ENV_VARS`` win.  The Megatron-LM H100 Qwen3-235B recipe pins cf78085 (2026-04-14) and sets no chunk."""
    hp = _probe()
    assert hp.combine_chunk("2026-02-09", None) == 128
    assert hp.combine_chunk("2026-04-14", None) == 64
    assert hp.combine_chunk("2026-04-29", 128) == 128
    ref = [r for r in hp.MLM_HYBRIDEP if r[0] == "mlm_moe_qwen3_235b_h100_bf16_256gpu_tp2pp8ep32"]
    assert len(ref) == 1 and ref[0][2] == "cf78085" and hp.combine_chunk(ref[0][3], ref[0][4]) == 64


def test_reference_combine_is_rdma_bound_beyond_the_nvlink_slowdown():
    """One combine per micro-batch of the reference: 2,048 tokens per rank (seq 4,096 / TP 2), top-8 of 128 experts
    over EP 32 on 4 nodes of 8.  Its RDMA stage binds with room for PR #588's NVLink slowdown (so the 64-token chunk
    leaves it unchanged), while the same model at EP 8 inside one node (Qwen3-30B H100 rows' layout) has no RDMA
    stage at all."""
    hp = _probe()
    plan = _reference_plan()
    assert (plan.parallel.ep, plan.parallel.tp, plan.cluster.gpus_per_node) == (32, 2, 8)
    t_rdma, t_nvl = hp.combine_stages(plan)
    assert t_rdma > 0 and t_nvl > 0
    assert t_nvl * hp.NVL_RATIO < t_rdma
    one_node = plan.model_copy(update={"parallel": plan.parallel.model_copy(update={"ep": 8})})
    r8, n8 = hp.combine_stages(one_node)
    assert r8 == 0.0 and n8 > 0


def test_slower_combine_is_scoped():
    """The context manager touches HybridEP combines only and restores the model on exit."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.hardware.placement import place

    hp = _probe()
    pl = place(8, 1, 8)
    args = (4096, 4096 * 2.0, pl, "h100-sxm", 128, 8)
    before = [coll.deepep_dispatch(*args, lib="hybridep", op=op, api=False) for op in ("dispatch", "combine")]
    with hp.slower_combine(nvl=2.0, rdma=1.0):
        inside = [coll.deepep_dispatch(*args, lib="hybridep", op=op, api=False) for op in ("dispatch", "combine")]
    after = [coll.deepep_dispatch(*args, lib="hybridep", op=op, api=False) for op in ("dispatch", "combine")]
    assert inside[0] == pytest.approx(before[0])
    assert inside[1] > 1.5 * before[1]
    assert after == pytest.approx(before)


def test_priced_logging_switches_reach_the_plan():
    """Megatron-LM dev @d48bd6be ``training.py`` computes ``calc_params_l2_norm(model)`` after every train step under
    ``--log-params-norm``, and ``optimizer.py`` ``count_zeros()`` in every step under ``--log-num-zeros-in-grad``; the
    moe_recipes set both true.  The row builder keeps them among the flags (other ``log_*`` keys are I/O only) and the
    bundled reference recipe states them, so the plan prices them (``cost/optimizer.py``)."""
    sys.path.insert(0, str(ROOT / "scripts" / "validation"))
    import build_current_runs as bcr

    flags, dropped, _false = bcr.yaml_flags({"log_params_norm": True, "log_num_zeros_in_grad": True,
                                             "log_interval": 1, "log_throughput": True})
    assert flags == ["--log-params-norm", "--log-num-zeros-in-grad"]
    assert set(dropped) == {"log_interval", "log_throughput"}
    t = _reference_plan().training
    assert t.log_params_norm and t.log_num_zeros_in_grad
