"""Issue 28's B300 Nemotron 3 Super MXFP8 rows (+44.9 / +56.2 %, GB300 twins +23.6 / +27.7 %):
``scripts/b300_super_probe.py``'s arithmetic against its published sources (the documented negative result in
``scripts/validation/README.md`` Known gaps, b300x): Bridge's B300 BF16 recipe of the same layout, its measured
TFLOP/s (Megatron-Bridge PR #6056) in the table's tokens, the expert count per GPU, and the expert-DP sync priced
on the DGX B300 datasheet's NIC."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _probe():
    sys.path.insert(0, str(ROOT / "scripts"))
    import b300_super_probe

    return b300_super_probe


def _diff(a: dict, b: dict, prefix: str = "") -> dict:
    out = {}
    for k in set(a) | set(b):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out.update(_diff(va, vb, f"{prefix}{k}."))
        elif va != vb:
            out[f"{prefix}{k}"] = (va, vb)
    return out


def test_bf16_twin_is_bridges_b300_bf16_recipe():
    """Megatron-Bridge @8f341b04f nemotron_3_workload_base_configs.py: B300_BF16_V1 = the B300 base (EP 8, TP 1,
    HybridEP, TE graphs of attn / mamba / moe_router / moe_preprocess) + recompute_modules ["moe_act", "layernorm"];
    nemotron_3_llm_pretrain.py: moe_router_padding_for_quantization only for fp8_mx / nvfp4; bf16_mixed has no FP8."""
    bp = _probe()
    row = bp.rows()[bp.MX_ROWS[0]]["plan"]
    twin = bp.bf16_twin(row)
    d = _diff(row, twin)
    assert set(d) == {"training.precision", "training.fp8_recipe", "training.fp8_param_gather",
                      "training.moe_router_padding_for_quantization", "training.recompute.granularity",
                      "training.recompute.modules"}
    assert twin["parallel"]["ep"] == 8 and twin["parallel"]["tp"] == 1
    assert twin["training"]["recompute"]["modules"] == ["moe_act", "layernorm"]
    assert twin["training"]["moe_token_dispatcher"] == "hybridep"


def test_tflops_read_as_tokens_by_the_tables_own_ratio():
    """The 26.06 table's B300 MXFP8 row: 667 TFLOP/s/GPU = 7,867 tokens/s/GPU (the held-out row's measurement);
    PR #6056's BF16 744 / 684 TFLOP/s and the 26.06.01 baseline 739 in the same units."""
    bp = _probe()
    assert bp.rows()[bp.MX_ROWS[0]]["measured_tokens_per_sec_per_gpu"] == bp.TABLE_TOKENS == 7867.0
    assert bp.tokens_of_tflops(667.0) == pytest.approx(7867.0)
    assert bp.tokens_of_tflops(744.0) == pytest.approx(8775.2, abs=0.1)
    assert bp.tokens_of_tflops(739.0) == pytest.approx(8716.2, abs=0.1)
    assert bp.BF16_PINNED / bp.BF16_UNPINNED == pytest.approx(1.0877, abs=1e-4)


def test_expert_weight_tensors_and_micro_batches():
    """Super's hybrid pattern holds 40 MoE ('E') layers, its two MTP depths '*E' one each: 42; 512 experts over EP 8
    are 64 local experts (B300), over EP 64 eight (GB300), two weights each (FC1, FC2); GBS 512 / (DP 64 x MBS 1)
    = 8 micro-batches."""
    bp = _probe()
    r = bp.rows()
    b300, gb300 = r[bp.MX_ROWS[0]]["plan"], r[bp.GB300]["plan"]
    assert bp.moe_layers(b300) == 42
    assert bp.expert_weight_tensors(b300) == 42 * 64 * 2 == 5376
    assert bp.expert_weight_tensors(gb300) == 42 * 8 * 2 == 672
    assert bp.micro_batches(b300) == 8


def test_expert_dp_reduce_scatter_runs_at_the_datasheet_nic():
    """Expert-DP 8 with one rank per DGX node: a ring reduce-scatter sends 7/8 of the bf16 expert gradients (14.8 B
    parameters per GPU at EP 8) through each GPU's own ConnectX-8 (800 Gb/s = 100 GB/s, DGX B300 datasheet): 0.259 s
    at line rate; the priced call sits between line rate and 85 % of it (NCCL's efficiency and per-call latency)."""
    bp = _probe()
    from primus_launch.plan import Plan
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.memory.params import stage_parameter_split

    plan = Plan.model_validate(bp.rows()[bp.MX_ROWS[0]]["plan"])
    lay = layout(plan)
    assert (lay.expert_dp.size, lay.expert_dp.per_node, lay.expert_dp.nodes) == (8, 1, 8)
    expert = stage_parameter_split(plan)[0].expert
    line = 2 * expert * 7 / 8 / 100e9
    assert 14.7e9 < expert < 14.9e9
    rs = coll.reduce_scatter(2 * expert, lay.expert_dp, "b300")
    assert line <= rs <= line / 0.85


def test_b200_inter_node_bytes_by_sampling_the_router():
    """Section ``pair``: the bytes one B200 GPU's NIC carries per step for HybridEP at EP 64 over 8 DGX nodes, against
    a sampled forced-balance router (megatron-core ``RandomSTE``: top-22 of 512 random logits per token): every
    (token, remote node) pair once, 1024-wide BF16 latent tokens, 4 calls x 42 MoE layers x 8 micro-batches."""
    import numpy as np

    p = _probe()
    plan = p.rows()[p.PAIR_ROWS[1]]["plan"]
    assert (plan["parallel"]["ep"], plan["cluster"]["gpus_per_node"], plan["model"]["moe_latent_size"]) == (64, 8, 1024)
    assert p.moe_layers(plan) == 42 and p.micro_batches(plan) == 8
    rng = np.random.default_rng(0)
    top = np.argsort(rng.standard_normal((4000, 512)), axis=1)[:, :22]
    node = top // 64
    remote = np.mean([len(set(row)) - (0 in set(row)) for row in node])   # the source rank sits on node 0
    sampled = 8192 * remote * 1024 * 2 * 4 * 42 * 8
    assert p.nic_bytes_per_step(plan) == pytest.approx(sampled, rel=0.01)
    # at 400 Gb/s (DGX B200: 8 x ConnectX-7 per node, one per GPU) that is ~3.0 s of a 10.24 s measured step
    assert p.nic_bytes_per_step(plan) / 50e9 == pytest.approx(3.0, rel=0.02)
    assert p.measured_step_s(p.rows()[p.PAIR_ROWS[1]]) == pytest.approx(512 * 8192 / (64 * 6400), rel=1e-12)
