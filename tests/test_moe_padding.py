"""TE Fp8Padding around Megatron's grouped experts (cost/moe_padding.py), checked against megatron-core 0.16.1's
own code (installed) and as a closed-form identity of the roofline's MoE layer."""

from __future__ import annotations

import inspect
import json
import types
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import moe_padding as mp
from primus_launch.projection.cost.roofline import layer_op_times

ROOT = Path(__file__).resolve().parents[1]
ROW = "mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu"   # alltoall, MXFP8, TE GroupedLinear, no router padding


@pytest.fixture(scope="module")
def row_plan() -> dict:
    rows = json.loads((ROOT / "scripts" / "validation" / "runs.json").read_text())["rows"]
    return next(r for r in rows if r["id"] == ROW)["plan"]


def _with(base: dict, **training) -> Plan:
    d = json.loads(json.dumps(base))
    d["training"].update(training)
    return Plan.model_validate(d)


@pytest.mark.parametrize("precision,recipe", [("fp8", "mxfp8"), ("fp8", "delayed"), ("fp8", "tensorwise"),
                                              ("fp8", "blockwise"), ("fp4", "nvfp4")])
def test_align_size_is_megatrons(precision, recipe):
    """The rows per expert are megatron-core's own ``get_align_size_for_quantization``."""
    from megatron.core.enums import Fp4Recipe, Fp8Recipe
    from megatron.core.transformer.moe.moe_utils import get_align_size_for_quantization

    cfg = types.SimpleNamespace(fp8="e4m3" if precision == "fp8" else None,
                                fp8_recipe=Fp8Recipe(recipe) if precision == "fp8" else None,
                                fp4="e2m1" if precision == "fp4" else None,
                                fp4_recipe=Fp4Recipe(recipe) if precision == "fp4" else None)
    assert mp.align_size(recipe, precision) == get_align_size_for_quantization(cfg)


def test_megatron_pads_experts_where_the_module_says():
    """megatron-core 0.16.1: TEGroupedMLP pads / unpads under FP8 / FP4; the all-to-all dispatcher aligns the
    counts only under router padding; HybridEP passes the alignment to its dispatch."""
    from megatron.core.transformer.moe import experts, token_dispatcher

    fwd = inspect.getsource(experts.TEGroupedMLP.forward)
    assert "self.config.fp8 or self.config.fp4" in fwd
    assert "quantization_padding(" in fwd and "quantization_unpadding(" in fwd
    pre = inspect.getsource(token_dispatcher.MoEAlltoAllTokenDispatcher.dispatch_preprocess)
    assert "if self.config.moe_router_padding_for_quantization:" in pre and "pad_routing_map" in pre
    hyb = inspect.getsource(token_dispatcher._HybridEPManager.dispatch)
    assert "pad_multiple=self.pad_multiple" in hyb and "get_align_size_for_quantization" in hyb


def test_forced_balance_counts_are_unaligned_and_router_padding_aligns_them():
    """Megatron's own top-k routing of random logits (what --moe-router-force-load-balancing draws) leaves the
    per-expert counts unaligned, so TE's ``m_splits == padded_m_splits`` shortcut does not fire; megatron's
    ``pad_routing_map`` makes every count a multiple, adding fewer than ``a`` tokens per expert."""
    import torch
    from megatron.core.transformer.moe.moe_utils import pad_routing_map, topk_routing_with_score_function

    torch.manual_seed(0)
    _, routing = topk_routing_with_score_function(torch.randn(4096, 128), 8)
    counts = routing.sum(0)
    a = mp.align_size("mxfp8", "fp8")
    assert int((counts % a == 0).sum()) < 16        # the 16 local experts of EP 8 all aligned: essentially never
    padded = pad_routing_map(routing, a).sum(0)
    assert bool((padded % a == 0).all())
    assert bool(((padded - counts) < a).all()) and bool((padded >= counts).all())


def test_padding_ops_are_the_only_difference(row_plan):
    """The Bridge B200 row's MoE layer carries the pad and unpad copies, each moving the routed tokens once like
    the all-to-all dispatcher's chunk sort; with router padding, HybridEP, BF16 or the legacy GroupedMLP the op
    list is the same minus those two rows."""
    ops = layer_op_times(_with(row_plan))["moe"]
    pads = [o for o in ops if o[0].startswith("TE Fp8")]
    assert [o[0].split(":")[0] for o in pads] == ["TE Fp8Padding", "TE Fp8Unpadding"]
    sort = next(o for o in ops if o[0] == "sort chunks by local expert")
    unpad = pads[1]
    # same bytes (2 N h 2), the sort launches one kernel more (2 us each beyond the first, forward only)
    assert unpad[1] == pytest.approx(sort[1], abs=3e-6) and unpad[2] == pytest.approx(sort[2], rel=1e-9)
    assert pads[0][1] > unpad[1]          # plus the probabilities' pad
    # the busiest EP rank's extra (routing imbalance) scales the receiving rank's expert work, pads included
    def same(lst):
        return [o[:4] for o in lst if not o[0].startswith(("TE Fp8", "routing imbalance", "host launch-bound"))]

    rest = same(ops)
    for variant in (dict(moe_router_padding_for_quantization=True), dict(moe_expert_gemm="legacy")):
        other = layer_op_times(_with(row_plan, **variant))["moe"]
        assert not [o for o in other if o[0].startswith("TE Fp8")]
        if "moe_expert_gemm" not in variant:
            assert same(other) == rest
            # three launches each way: input, probs and output (one TE multi_padding kernel per <= 64 experts)
            k_pad, k_no = (layer_op_times(_with(row_plan, **v))["_kernels"]["moe"] for v in ({}, variant))
            assert (k_pad[0] - k_no[0], k_pad[1] - k_no[1]) == (3, 3)
    hyb = layer_op_times(_with(row_plan, moe_token_dispatcher="hybridep"))["moe"]
    assert not [o for o in hyb if o[0].startswith("TE Fp8")]
    bf16 = layer_op_times(_with(row_plan, precision="bf16", fp8_recipe=None, fp8_param_gather=False))["moe"]
    assert not [o for o in bf16 if o[0].startswith("TE Fp8")]


def test_router_padding_flag_is_read():
    """Both spellings of Megatron's flag reach the plan field (the alias turns the other on in
    ``TransformerConfig.__post_init__``)."""
    from primus_launch.adapters.megatron import plan_from_argv

    base = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4", "--seq-length", "512",
            "--max-position-embeddings", "512", "--micro-batch-size", "1", "--global-batch-size", "8",
            "--num-experts", "8", "--moe-router-topk", "2", "--expert-model-parallel-size", "2",
            "--vocab-size", "1024"]
    for flag in ("--moe-router-padding-for-quantization", "--moe-router-padding-for-fp8"):
        assert plan_from_argv(base + [flag]).training.moe_router_padding_for_quantization
    assert not plan_from_argv(base).training.moe_router_padding_for_quantization
