"""The MoE layer's host path: the forward walked launch by launch from the dispatcher's host sync
(``cost/host_sync.py`` ``launch_bound_seconds``), the grouped experts' GEMM backends (``training.moe_expert_gemm``:
TE / TE-ROCm GroupedLinear, the legacy grouped_gemm library, Primus-Turbo's grouped GEMM) and Primus-Turbo's
sync-free MoE (``training.moe_sync_free``).

Truth: closed forms of the walk; Megatron-LM core_v0.16.1 ``experts.py`` (legacy GroupedMLP runs BF16 only) and
its argument parser; AMD's MoE blog Figure 1 (record ``primus-moe-blog-fig1-turbo-vs-hipblas-multistream``:
Turbo's grouped GEMM at 0.99-1.94x the hipBLAS multi-stream loop forward on MI325X).  ~3 s.
"""

from __future__ import annotations

import random

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import evidence as ev
from primus_launch.projection.cost import framework as fw
from primus_launch.projection.cost import moe_host
from primus_launch.projection.cost import roofline as rl
from primus_launch.projection.cost.compute import gemm_time
from primus_launch.projection.cost.host_sync import launch_bound_seconds

T = 20e-6


def _plan(gpu: str = "b200", precision: str = "bf16", recipe: str | None = None, **training) -> Plan:
    m = ModelArch(num_layers=4, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_query_groups=4,
                  head_dim=128, vocab_size=151936, seq_length=4096, swiglu=True, qk_layernorm=True, num_experts=128,
                  moe_router_topk=8, moe_ffn_hidden_size=768)
    return Plan(model=m, parallel=Parallelism(ep=8),
                training=Training(global_batch_size=64, micro_batch_size=1, moe_router_fusion=True, precision=precision,
                                  fp8_recipe=recipe, **training),
                cluster=Cluster(gpu=gpu, num_nodes=1))


def _rows(plan: Plan) -> list[tuple]:
    return rl.layer_op_times(plan)["moe"]


def test_walk_closed_forms():
    """GPU-bound: the op starts after its first launch; host-bound: N tiny kernels after the sync cost N launches
    (the brief's 'a sync followed by N launches costs N x launch time'); a C++ launch loop spreads the op's GPU
    work over its launches; captured scopes cost one graph replay and run back to back."""
    assert launch_bound_seconds([["moe", 1e-3, 4, 0.0, 0]], T) == pytest.approx(T + 1e-3)
    n, g = 50, 1e-6
    assert launch_bound_seconds([["moe", n * g, n, 0.0, 0]], T) == pytest.approx(n * T + g)
    h, launches = T + 8 * 10e-6, 9                      # one Python launch + 8 per-expert GEMMs from C++
    assert launch_bound_seconds([["moe", 8e-4, 1, 8 * 10e-6, 8]], T) == pytest.approx(
        max(h / launches + 8e-4, h + 8e-4 / launches))
    cap = frozenset({"attn", "moe_router"})
    assert launch_bound_seconds([["attn", 5e-4, 30, 0.0, 0], ["moe_router", 1e-4, 10, 0.0, 0]], T, cap) == \
        pytest.approx(fw.GRAPH_LAUNCH_S + 6e-4)


def test_walk_bounded_by_either_side_alone():
    """The walk is never shorter than the GPU's work or the host's launches, never longer than both in series."""
    rnd = random.Random(7)
    for _ in range(200):
        seq = [["moe", rnd.choice([1e-6, 2e-5, 3e-4, 2e-3]), rnd.randint(1, 12), rnd.choice([0.0, 8e-5]),
                rnd.choice([0, 8])] for _ in range(rnd.randint(1, 15))]
        e = launch_bound_seconds(seq, T)
        gpu = sum(x[1] for x in seq)
        host = sum(x[2] * T + x[3] for x in seq)
        assert max(gpu, host) - 1e-12 <= e <= gpu + host + 1e-12


def test_megatron_reads_and_writes_the_legacy_grouped_gemm():
    """--moe-use-legacy-grouped-gemm (core_v0.16.1 arguments.py) -> moe_expert_gemm = legacy, and back."""
    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.adapters.megatron_args import desired_args

    base = ("torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 2048 "
            "--num-attention-heads 16 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
            "--global-batch-size 64 --tokenizer-type GPT2BPETokenizer --bf16 --num-experts 64 --moe-router-topk 8 "
            "--expert-model-parallel-size 8 --moe-grouped-gemm --moe-permute-fusion").split()
    assert plan_from_argv(base).training.moe_expert_gemm == "te"
    legacy = plan_from_argv(base + ["--moe-use-legacy-grouped-gemm"])
    assert legacy.training.moe_expert_gemm == "legacy"
    assert "--moe-use-legacy-grouped-gemm" not in {u.flag for u in legacy.source.unmodelled}
    assert desired_args(legacy, {})["moe_use_legacy_grouped_gemm"] is True
    assert desired_args(plan_from_argv(base), {})["moe_use_legacy_grouped_gemm"] is False


def test_legacy_grouped_mlp_runs_bf16_experts_under_fp8():
    """experts.py GroupedMLP.forward: 'Currently GroupedMLP for MoE only supports bf16' (gg.ops.gmm takes bf16):
    with an MXFP8 recipe the legacy experts' GEMMs stay BF16 and skip the per-expert quantize launches."""
    def experts(plan):
        return {r[0].split(" [")[0]: r for r in _rows(plan) if r[0].startswith("experts (grouped) FC")}

    te = experts(_plan("b200", "fp8", "mxfp8"))
    leg = experts(_plan("b200", "fp8", "mxfp8", moe_expert_gemm="legacy"))
    assert {r[4][1] for r in te.values()} == {"mxfp8"} and {r[4][1] for r in leg.values()} == {"bf16"}
    assert leg["experts (grouped) FC1"][1] > te["experts (grouped) FC1"][1]     # BF16 is slower than MXFP8
    host = {r[0].split(":")[0]: r for r in _rows(_plan("b200", "fp8", "mxfp8", moe_expert_gemm="legacy"))
            if r[4][0] == "host_ops"}
    assert "legacy grouped_gemm (BF16) host" in host


def test_amd_expert_loop_host_and_turbo_single_kernel():
    """On CDNA, TE-ROCm GroupedLinear and the legacy library launch one BLAS GEMM per local expert (host row:
    moe_host.TE_GEMM_HOST_S each for TE-ROCm, calibration.ROCM_LEGACY_GEMM_HOST_S for the legacy library on CDNA4);
    Primus-Turbo's grouped GEMM is one launch: no host row."""
    def host_rows(plan):
        return [r for r in _rows(plan) if r[4][0] == "host_ops" and "host:" in r[0]]

    local = 128 // 8
    fac = fw.host_cpu_factor("mi355x")
    for gemm in ("te", "legacy"):
        rows = host_rows(_plan("mi355x", moe_expert_gemm=gemm))
        assert len(rows) == 1 and f"({local} BLAS GEMMs" in rows[0][0]
        # each ROCm path at its per-GEMM price of moe_host item 2, BF16
        hf, hb = (float(x) for x in rows[0][0].split("host: ")[1].split(" ms")[0].split(" / "))
        per = moe_host.expert_gemm_host_s(gemm, "cdna4")
        assert per == (cal.ROCM_LEGACY_GEMM_HOST_S if gemm == "legacy" else moe_host.TE_GEMM_HOST_S)
        assert (hf, hb) == pytest.approx(tuple(1e3 * fac * x for x in moe_host.grouped_linear_host(local, None, per)),
                                         abs=1e-3)
    assert host_rows(_plan("mi355x", moe_expert_gemm="turbo")) == []
    f_te, b_te = moe_host.grouped_linear_host(local, None)
    assert f_te == pytest.approx(2 * local * moe_host.TE_GEMM_HOST_S)
    assert b_te == pytest.approx(4 * local * moe_host.TE_GEMM_HOST_S)


@pytest.mark.parametrize("gpu", ["mi325x", "mi355x"])
def test_multistream_loop_within_the_blog_figure(gpu):
    """AMD's MoE blog Figure 1 (MI325X, 36 DeepSeek grouped-GEMM cases): Turbo's autotuned grouped GEMM runs at
    0.99-1.94x the hipBLAS multi-stream loop's speed forward.  The model's loop / Turbo time ratio on DeepSeek
    V2-Lite, V2 and V3 expert shapes (gate+up and down, 512-4096 tokens per expert, 8-32 local experts) lies in
    that range on CDNA (the loop's dense-curve time floored at the grouped kernel's, cost/grouped_gemm.py)."""
    rec = ev.record("primus-moe-blog-fig1-turbo-vs-hipblas-multistream")
    lo, hi = rec["shape"]["fwd_speedup_range"]
    shapes = [(2816, 2048), (2048, 1408), (3072, 5120), (5120, 1536), (4096, 7168), (7168, 2048)]
    for n, k in shapes:
        for experts, m in ((8, 512), (8, 2048), (16, 4096), (32, 1024), (20, 1228)):
            loop = gemm_time(m, n, k, gpu, "bf16", experts, "bf16", "te")
            turbo = gemm_time(m, n, k, gpu, "bf16", experts, "bf16", "any")
            assert lo <= loop / turbo <= hi, (n, k, experts, m, loop / turbo)


def test_sync_free_forward_has_no_sync_period():
    """Primus-Turbo sync-free MoE (stage >= 2): no host-device sync, so the forward is max(GPU, host) of the pass
    and the explanation has no sync row; Megatron's dispatcher syncs once per MoE forward."""
    synced = _rows(_plan("mi355x", moe_token_dispatcher="deepep", moe_expert_gemm="turbo"))
    free_plan = _plan("mi355x", moe_token_dispatcher="deepep", moe_expert_gemm="turbo", moe_sync_free=True)
    free = _rows(free_plan)
    assert any("host-device sync" in r[0] for r in synced) and not any("host-device sync" in r[0] for r in free)
    hf, _hb, gf, _gb = rl.layer_op_times(free_plan)["_host"]["moe"]
    assert rl.layer_times_roofline(free_plan).moe_layer.fwd_s == pytest.approx(max(hf, gf))


def test_cuda_graph_scopes_remove_the_walked_host():
    """Capturing attn / moe_router / moe_preprocess leaves one graph replay for the before-sync part: the walked
    forward is never longer than without graphs, and a whole-layer graph removes the sync."""
    plain = rl.layer_times_roofline(_plan("gb200")).moe_layer.fwd_s
    part = rl.layer_times_roofline(_plan("gb200", cuda_graph_impl="transformer_engine",
                                         cuda_graph_scope=("attn", "moe_router", "moe_preprocess"))).moe_layer.fwd_s
    assert part < plain
    full = _plan("gb200", cuda_graph_impl="local", cuda_graph_scope=("full_iteration",))
    assert not any("host-device sync" in r[0] for r in _rows(full))
