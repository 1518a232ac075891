"""Megatron's TE op-fuser grouped MLP (``training.moe_expert_gemm = te_fused``, issue 28's GPT-OSS study).

Source (Megatron-LM cd4afffa, the Megatron-Bridge 26.08 pin, ``megatron/core/transformer/moe/experts.py``): with
``--use-transformer-engine-op-fuser`` ``TEGroupedMLP.__init__`` asserts ``_is_fused_impl_supported()`` and
``forward`` returns ``_fused_forward`` before the per-expert ``_apply_bias`` loop and the eager clamp of
``weighted_bias_quick_geglu_impl``; the activation is TE's ``ScaledClampedQGeGLU`` (clamp inside) and FC2 scales
its bias by the router probabilities itself.  TE (``transformer_engine/pytorch/ops/fused/grouped_mlp.py``
``fuse_grouped_mlp_ops``) fuses FC1 + activation + FC2 into cudnn-frontend's CuTeDSL grouped GEMMs only for MXFP8 /
NVFP4 on sm100: then no separate activation pass and one kernel over all experts; otherwise the basic ops run
(TE's per-expert grouped GEMM, one activation kernel).  The layer lists must carry exactly that.
"""

from __future__ import annotations

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.projection.cost import elementwise_bytes as eb
from primus_launch.projection.cost import roofline as rl


def _oss(gemm: str, gpu: str, fp8: bool) -> Plan:
    m = ModelArch(num_layers=4, hidden_size=2880, ffn_hidden_size=2880, num_attention_heads=64, num_query_groups=8,
                  head_dim=64, vocab_size=201088, seq_length=4096, swiglu=True, activation="quick_gelu",
                  activation_clamp=7.0, add_bias_linear=True, position_embedding="yarn", softmax_type="learnable",
                  window_size=127, window_layer_pattern=(1, 0, 1, 0), num_experts=128, moe_router_topk=4,
                  moe_ffn_hidden_size=2880)
    t = Training(global_batch_size=64, micro_batch_size=1, moe_expert_gemm=gemm,
                 **({"precision": "fp8", "fp8_recipe": "mxfp8"} if fp8 else {}))
    return Plan(model=m, parallel=Parallelism(ep=8), training=t, cluster=Cluster(gpu=gpu, num_nodes=1))


def _names(plan: Plan) -> list[str]:
    return [o[0] for o in rl.layer_op_times(plan)["moe"]]


@pytest.mark.parametrize("gpu, fp8", [("b200", True), ("h100-sxm", False), ("b200", False)])
def test_op_fuser_runs_no_bias_loop_and_no_eager_clamp(gpu: str, fp8: bool):
    """te: the eager clamp + cat and the per-expert _apply_bias rows; te_fused: neither, the GEMMs kept."""
    unfused, fused = _names(_oss("te", gpu, fp8)), _names(_oss("te_fused", gpu, fp8))
    assert any("activation clamp" in n for n in unfused)
    assert any(n.startswith("experts FC2 bias x probs") for n in unfused)
    assert not any("activation clamp" in n or n.startswith("experts FC2 bias x probs") for n in fused)
    assert any(n.startswith("experts (grouped) FC1") for n in fused)
    assert any(n.startswith("experts (grouped) FC2") for n in fused)


def test_cutedsl_only_for_mxfp8_on_blackwell():
    """MXFP8 on B200: the activation rides in the GEMM epilogues (no quick-GeGLU kernel: its bytes, no launch; no
    per-expert launch loop); BF16 (TE fuses only MXFP8 / NVFP4) keeps the activation kernel and TE's per-expert GEMM
    host loop.  The epilogue row moves exactly the fused activation's bytes (ACT_FUSED, gated) over the routed rows."""
    plan = _oss("te_fused", "b200", True)
    mx, bf = _names(plan), _names(_oss("te_fused", "b200", False))
    assert not any(n.endswith("quick-GeGLU") for n in mx)
    assert any("activation in the epilogues" in n for n in mx)
    epi = next(o for o in rl.layer_op_times(plan)["moe"] if "in the GEMM epilogues" in o[0])
    assert epi[4][3] == pytest.approx(eb.ACT_FUSED[True][0] * 4096 * 4 * 2880)   # T x k rows per GPU (EP 8) x f
    k_te = rl.layer_op_times(_oss("te", "b200", True))["_kernels"]["moe"]
    k_f = rl.layer_op_times(plan)["_kernels"]["moe"]
    assert k_f[0] < k_te[0] and k_f[1] < k_te[1]
    assert not any(n.startswith("TE GroupedLinear host") for n in mx)
    assert any(n.endswith("quick-GeGLU") for n in bf)
    assert any(n.startswith("TE GroupedLinear host") for n in bf)


def test_fused_layer_is_the_unfused_less_the_rows_it_does_not_run():
    """BF16 on H100 (basic ops: same per-expert GEMMs): the te_fused MoE layer's kernel seconds equal te's less
    exactly its clamp and _apply_bias rows (a closed-form identity over the layer list; the host launch-bound row
    and the busiest-rank extra, which follow from the kernels, are left out)."""
    ops_te = rl.layer_op_times(_oss("te", "h100-sxm", False))["moe"]
    ops_f = rl.layer_op_times(_oss("te_fused", "h100-sxm", False))["moe"]

    def tot(ops):
        return sum(o[1] + o[2] + o[3] for o in ops
                   if not o[0].startswith(("host launch-bound", "routing imbalance")))

    gone = sum(o[1] + o[2] + o[3] for o in ops_te
               if "activation clamp" in o[0] or o[0].startswith("experts FC2 bias x probs"))
    assert gone > 0
    assert tot(ops_f) == pytest.approx(tot(ops_te) - gone, rel=1e-9)


def test_megatron_reader_maps_the_op_fuser():
    """--use-transformer-engine-op-fuser with --moe-grouped-gemm reads as te_fused (no longer 'not modelled');
    without it te; the writer puts the flag back."""
    from primus_launch.adapters.megatron import plan_from_argv

    base = ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "--num-layers", "4", "--hidden-size", "2048",
            "--ffn-hidden-size", "6144", "--num-attention-heads", "32", "--seq-length", "4096",
            "--max-position-embeddings", "4096", "--swiglu", "--num-experts", "128", "--moe-ffn-hidden-size", "768",
            "--moe-router-topk", "8", "--expert-model-parallel-size", "8", "--moe-grouped-gemm",
            "--micro-batch-size", "1", "--global-batch-size", "64", "--bf16", "--vocab-size", "151936"]
    cl = Cluster(gpu="b200", num_nodes=1, gpus_per_node=8)
    on = plan_from_argv(base + ["--use-transformer-engine-op-fuser"], cl)
    assert on.training.moe_expert_gemm == "te_fused"
    assert plan_from_argv(base, cl).training.moe_expert_gemm == "te"
    from primus_launch.adapters.megatron import render_argv

    assert "--use-transformer-engine-op-fuser" in render_argv(on, base)
    off = on.model_copy(update={"training": on.training.model_copy(update={"moe_expert_gemm": "te"})})
    assert "--use-transformer-engine-op-fuser" not in render_argv(off, base + ["--use-transformer-engine-op-fuser"])
    from primus_launch.adapters.megatron_flags import MODELLED_FLAGS, NOT_MODELLED_FLAGS
    assert "--use-transformer-engine-op-fuser" in MODELLED_FLAGS
    assert "--use-transformer-engine-op-fuser" not in NOT_MODELLED_FLAGS
    # what of the op fuser is not priced (the attention / dense-MLP linears Megatron also builds from TE ops)
    # is reported, never silent; without --moe-grouped-gemm the whole path is reported
    notes = {u.flag: u.effect for u in on.source.unmodelled}
    assert "outside the MoE experts" in notes["--use-transformer-engine-op-fuser"]
    plain = plan_from_argv([x for x in base if x != "--moe-grouped-gemm"] + ["--use-transformer-engine-op-fuser"], cl)
    assert plain.training.moe_expert_gemm == "te"
    assert "does not apply" in {u.flag: u.effect for u in plain.source.unmodelled}["--use-transformer-engine-op-fuser"]


@pytest.mark.parametrize("gpu", ["mi355x", "b200"])
def test_cutedsl_needs_compute_capability_10(gpu: str):
    """NVFP4 (GEMM format fp4, which MI355X also has): TE fuses the grouped MLP only on compute capability 10.x
    (grouped_mlp.py: get_device_compute_capability()[0] != 10 -> not supported; TE-ROCm has no CuTeDSL kernels), so
    on MI355X the basic ops run -- the activation kernel and the per-expert GEMM launch loop -- as on B200 they do
    not."""
    p = _oss("te_fused", gpu, False)
    p = p.model_copy(update={"training": p.training.model_copy(update={"precision": "fp4"})})
    names = _names(p)
    fused = gpu == "b200"
    assert any("activation in the epilogues" in n for n in names) is fused
    assert any(n.endswith("quick-GeGLU") for n in names) is not fused
    assert any(n.startswith("TE GroupedLinear host") for n in names) is not fused
