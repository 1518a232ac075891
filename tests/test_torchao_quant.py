"""torchao's float8 / MX quantisation under torch.compile (cost/fp8.py ``torchao_compiled_bytes``).

1. The bytes per element and role against torchao's own roofline (the installed
   ``torchao/testing/training/roofline_utils.py``, ``get_tensor_memory_traffic_ovhd_s``), loaded by file
   path so that the test does not import the torchao package (its CUDA extensions, seconds of import).
2. The projected end-to-end speedups over BF16 against torchao's published Llama3-8B table on 8 H100s
   (pytorch/ao docs/source/workflows/training.md, record ``ao-e2e-h100-sxm-*``; torch.compile, FSDP2,
   per-op SAC, batch 1, sequence 8192 on Meta's 500 W H100s): float8 tensorwise with float8 all-gather
   7689.5 / 6150 = 1.250, float8 rowwise with bf16 all-gather 6768 / 6150 = 1.100.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import fp8 as fp8m
from primus_launch.projection.dryrun import project_dry_run

ROOT = Path(__file__).resolve().parents[1]


def _roofline_module():
    spec = importlib.util.find_spec("torchao")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchao not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "testing" / "training" / "roofline_utils.py"
    if not path.exists():
        pytest.skip("torchao without roofline_utils.py")
    s = importlib.util.spec_from_file_location("_ao_roofline_utils", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("recipe,ao_float8,ao_mx", [
    ("tensorwise", "tensorwise", None), ("rowwise", "rowwise", None),
    ("rowwise_with_gw_hp", "rowwise_with_gw_hp", None), ("mxfp8", None, "mxfp8_cublas"),
    ("nvfp4", None, "mxfp4_cutlass"),
])
def test_compiled_bytes_match_torchao_roofline(recipe, ao_float8, ao_mx):
    ru = _roofline_module()
    spec = {"peak_mem_bw_bytes_sec": 1.0, "pct_achievable_mem_bw": 1.0}
    n = 4096 * 4096   # large enough that no kernel sits at the launch floor

    def per_el(role, fuse):
        return float(sum(ru.get_tensor_memory_traffic_ovhd_s(spec, 4096, 4096, role, ao_float8, ao_mx,
                                                             fuse_with_prev=fuse))) / n

    act, w, post = fp8m.torchao_compiled_bytes(recipe)
    # activations and output gradients fuse their first read into the producer; weights do not
    assert act == pytest.approx(per_el("input", True), rel=1e-9)
    assert act == pytest.approx(per_el("grad_output", True), rel=1e-9)
    assert w == pytest.approx(per_el("weight", False), rel=1e-9)
    assert post == (4.0 if recipe == "rowwise" else 0.0)


def test_fp8_all_gather_weights_need_only_the_transposed_copy():
    assert fp8m.torchao_compiled_bytes("tensorwise", True)[1] == 2.0
    assert fp8m.torchao_compiled_bytes("rowwise", True)[1] == fp8m.torchao_compiled_bytes("rowwise")[1]


@pytest.fixture(scope="module")
def h100_llama3_8b() -> Plan:
    rows = json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]
    row = next(r for r in rows if r["id"] == "torchtitan_h100_8b_8gpu_FSDP_torchcompile")
    # torchao's table ran local batch 1 (the torchtitan row: 2)
    plan = Plan.model_validate(row["plan"]).with_changes(training={"micro_batch_size": 1, "global_batch_size": 8})
    assert plan.cluster.gpu == "h100-sxm-96gb-500w" and plan.framework == "torchtitan"
    assert plan.model.seq_length == 8192 and plan.world_size == 8
    return plan


def test_torchao_h100_speedups_over_bf16(h100_llama3_8b):
    p = h100_llama3_8b
    bf16 = project_dry_run(p.with_changes(training={"precision": "bf16"})).tokens_per_sec_per_gpu
    tw = project_dry_run(p.with_changes(training={"precision": "fp8", "fp8_recipe": "tensorwise",
                                                  "fp8_param_gather": True})).tokens_per_sec_per_gpu
    rw = project_dry_run(p.with_changes(training={"precision": "fp8", "fp8_recipe": "rowwise",
                                                  "fp8_param_gather": False})).tokens_per_sec_per_gpu
    assert tw / bf16 == pytest.approx(7689.5 / 6150, abs=0.06)   # projected 1.19 (the flat 2 B/element model: 1.23)
    assert rw / bf16 == pytest.approx(6768 / 6150, abs=0.05)   # projected 1.06 (the flat 2 B/element model: 1.21)
    assert rw < tw


def test_float8_tensorwise_tp_gathers_move_one_byte():
    """torchao's Float8ColwiseParallel / Float8RowwiseParallel (torchtitan's TP plan with float8 tensorwise)
    cast the input before its sequence-parallel all-gather and the output gradient before the backward
    all-gather: half the bf16 bytes; rowwise keeps torch's plain TP styles (bf16 gathers)."""
    from primus_launch.projection.cost.layer_collectives import rank_tokens, sp_gather_bytes

    rows = json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]
    row = next(r for r in rows if r["id"] == "torchtitan_asynctp_h100_70b_256gpu_float8_tensorwise_asynctp")
    plan = Plan.model_validate(row["plan"])
    assert plan.framework == "torchtitan" and plan.parallel.tp == 8 and plan.parallel.sequence_parallel
    act = rank_tokens(plan) * plan.model.hidden_size * 2.0
    g_in, g_dy, _ = sp_gather_bytes(plan)
    assert (g_in, g_dy) == (act / 2, act / 2)
    g_in, g_dy, _ = sp_gather_bytes(plan.with_changes(training={"fp8_recipe": "rowwise"}))
    assert (g_in, g_dy) == (act, act)
    g_in, g_dy, _ = sp_gather_bytes(plan.with_changes(training={"precision": "bf16", "fp8_recipe": None}))
    assert (g_in, g_dy) == (act, act)


def test_rowwise_with_gw_hp_keeps_the_weight_gradient_gemm_in_bf16(h100_llama3_8b):
    """torchao ROWWISE_WITH_GW_HP (torchao/float8/config.py): ``grad_weight_hp = input_t_hp @ grad_output_hp``,
    the forward and data-gradient GEMMs in float8."""
    from primus_launch.projection.cost.roofline import layer_op_times

    def fc1(training):
        ops = layer_op_times(h100_llama3_8b.with_changes(training=training))["dense"]
        return next(o for o in ops if o[0].startswith("MLP FC1"))

    hp = fc1({"precision": "fp8", "fp8_recipe": "rowwise_with_gw_hp"})
    bf = fc1({"precision": "bf16"})
    rw = fc1({"precision": "fp8", "fp8_recipe": "rowwise"})
    assert hp[3] == pytest.approx(bf[3], rel=1e-12)          # wgrad: the bf16 GEMM
    assert hp[1] == pytest.approx(rw[1], rel=1e-12) and hp[1] < 0.7 * bf[1]   # fprop: float8
