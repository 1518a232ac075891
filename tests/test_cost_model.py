"""Model FLOPs against the papers' closed forms and published figures; the GEMM/attention model."""

from __future__ import annotations

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost.compute import attention_time, elementwise_time, gemm_time
from primus_launch.projection.cost.flops import model_flops_per_iteration
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.memory.params import active_parameters


def _gpt(L, h, heads, s=2048, V=51200):
    return ModelArch(num_layers=L, hidden_size=h, ffn_hidden_size=4 * h, num_attention_heads=heads, vocab_size=V,
                     seq_length=s, swiglu=False, normalization="layernorm", position_embedding="learned",
                     add_bias_linear=True, untie_embeddings_and_output_weights=False)


def _plan(model, tp=8, pp=1, gbs=4, mbs=1, nodes=1, vpp=1):
    return Plan(model=model, parallel=Parallelism(tp=tp, pp=pp, vpp=vpp),
                training=Training(global_batch_size=gbs, micro_batch_size=mbs,
                                  pipeline_schedule="interleaved_1f1b" if vpp > 1 else "1f1b"),
                cluster=Cluster(gpu="a100-sxm-80gb", num_nodes=nodes))


# Korthikanti et al. 2022 (arXiv 2205.05198) Table 5 / sec. 6.3: model, gpus, tp, pp, vpp, batch,
# iteration time (s), published MFU (model FLOPs eq. 7, non-causal attention, A100 312 TF/s)
KORTHIKANTI = [
    ((48, 6144, 64), 8, 8, 1, 1, 4, 1.10, 0.415),
    ((96, 12288, 96), 64, 8, 8, 3, 64, 13.75, 0.514),
    ((105, 20480, 128), 280, 8, 35, 3, 280, 37.83, 0.560),
    ((128, 25600, 160), 512, 8, 64, 1, 512, 71.49, 0.563),
]


@pytest.mark.parametrize("arch,gpus,tp,pp,vpp,gbs,t_iter,mfu", KORTHIKANTI)
def test_megatron_flops_reproduce_published_mfu(arch, gpus, tp, pp, vpp, gbs, t_iter, mfu):
    """Megatron's formula without the causal halving equals the paper's eq. (7) and, fed the
    paper's measured iteration time, gives the paper's MFU."""
    L, h, heads = arch
    plan = _plan(_gpt(L, h, heads), tp=tp, pp=pp, vpp=vpp, gbs=gbs, nodes=gpus // 8)
    s, V, B = 2048, plan.model.padded_vocab_size(tp), gbs
    eq7 = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L))
    # GPT has biases and LayerNorms that eq. 7 ignores; Megatron's formula ignores them too
    assert model_flops_per_iteration(plan, causal_attention=False) == pytest.approx(eq7, rel=1e-12)
    got = model_flops_per_iteration(plan, causal_attention=False) / (t_iter * gpus * 312e12)
    assert got == pytest.approx(mfu, abs=0.006)


def test_causal_halving_and_narayanan_eq3():
    """Causal: the attention-score term is halved (Megatron's s/2). Narayanan et al. 2021 eq. (3)
    (full recompute counted) = eq. (7) + one more forward of the transformer layers."""
    L, h, s, V, B = 24, 2304, 2048, 51200, 512
    plan = Plan(model=_gpt(L, h, 24), parallel=Parallelism(tp=1),
                training=Training(global_batch_size=B), cluster=Cluster(gpu="a100-sxm-80gb", num_nodes=4))
    causal = model_flops_per_iteration(plan)
    full = model_flops_per_iteration(plan, causal_attention=False)
    assert full - causal == pytest.approx(B * s * L * 6 * h * s, rel=1e-12)   # 72BLsh^2 * s/(12h)
    logits = 6 * B * s * h * V
    eq3 = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    assert full + (full - logits) / 3 == pytest.approx(eq3, rel=1e-12)


def test_moe_mla_flops_match_activated_parameters():
    """DeepSeek-V3: outside the core-attention term, Megatron's count is 6 x activated parameters
    (non-embedding, norms aside) + the logits: checked against params.active_parameters, whose
    counts are verified against megatron-core's real modules."""
    m = ModelArch(num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128,
                  vocab_size=129280, seq_length=4096, num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
                  moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3, multi_latent_attention=True,
                  q_lora_rank=1536, kv_lora_rank=512)
    plan = Plan(model=m, parallel=Parallelism(tp=1, ep=8, pp=1), training=Training(global_batch_size=8),
                cluster=Cluster(gpu="h100-sxm", num_nodes=1))
    per_token = model_flops_per_iteration(plan) / plan.tokens_per_iteration
    n, s = m.num_attention_heads, m.seq_length
    core = 6 * m.num_layers * (s * n * (m.qk_head_dim + m.qk_pos_emb_head_dim) / 2 + s * n * m.v_head_dim / 2)
    h, V = m.hidden_size, m.vocab_size
    router = m.num_moe_layers * m.num_experts * h      # router GEMM: not counted by Megatron
    non_emb_active = active_parameters(m) - 2 * V * h - router
    assert (per_token - core - 6 * h * V) == pytest.approx(6 * non_emb_active, rel=0.002)


def test_gemm_model_shape_effects():
    """The GEMM curve (cost/kernels.py) at shapes: saturation at E x clock, small K below it, wave
    quantisation, GEMVs on HBM, FP8 at most 2x BF16."""
    from primus_launch.projection.cost.compute import gemm_curve, hbm_eta

    g = "h100-sxm"
    spec = get_gpu(g)
    peak = spec.peak_flops("bf16")
    clk = cal.sustained_clock(g, spec.sustained_clock_fraction, spec.arch)
    curve, key = gemm_curve("hopper", "bf16")
    assert key == "hopper/bf16"
    big = gemm_time(16384, 16384, 16384, g)
    eff_big = 2 * 16384**3 / big / peak
    assert eff_big == pytest.approx(curve.eff * clk, rel=0.03)     # saturates at E (x the sustained clock)
    small_k = gemm_time(16384, 16384, 64, g)
    assert 2 * 16384 * 16384 * 64 / small_k / peak < eff_big
    # one wave of 132 tiles (12 x 11) vs. 133 tiles (7 x 19), compute-bound K: the 133rd tile
    # needs a second wave, nearly doubling the time per FLOP (wave quantisation)
    t132 = gemm_time(128 * 12, 128 * 11, 16384, g) / (12 * 11)
    t133 = gemm_time(128 * 7, 128 * 19, 16384, g) / (7 * 19)
    assert t133 / t132 > 1.8
    # a GEMV is memory-bound: time ~ bytes / (hbm_bw * eta) + t0
    gemv = gemm_time(1, 8192, 8192, g)
    gemv_bytes = (8192 + 8192 * 8192 + 8192) * 2
    assert gemv == pytest.approx(gemv_bytes / (spec.hbm_bw * hbm_eta("hopper")[0]) + curve.t0, rel=1e-9)
    # fp8 doubles the peak: at most 2x faster
    assert big / 2 <= gemm_time(16384, 16384, 16384, g, "fp8") < big


def test_attention_and_elementwise():
    from primus_launch.projection.cost.compute import KERNEL_MIN_S, attn_curve, hbm_eta

    g = "a100-sxm-80gb"
    f, b = attention_time(1, 32, 8192, 8192, 128, 128, True, g)
    fn, bn = attention_time(1, 32, 8192, 8192, 128, 128, False, g)
    c, key = attn_curve("ampere", "fa2")
    assert key == "ampere/fa2"
    assert f < 0.6 * fn
    assert b / f == pytest.approx(2.5 * c.fwd / c.bwd, rel=0.01)
    nbytes = 1e9
    assert elementwise_time(nbytes, g) == pytest.approx(nbytes / (get_gpu(g).hbm_bw * hbm_eta("ampere")[0])
                                                        + KERNEL_MIN_S)


def test_new_gpus_have_sourced_specs():
    """GB200 / GB300 NVL72 (4 GPUs per tray, 72 per NVLink domain), B300, MI350X with FP4 peaks."""
    for name, fp4 in (("gb200", 10e15), ("gb300", 15e15), ("b300", 14e15), ("mi350x", 9227.6e12), ("b200", 9e15)):
        g = get_gpu(name)
        assert g.source and g.arch and g.peak_flops_fp4 == fp4 and g.peak_flops("fp4") == fp4
    assert (get_gpu("gb200").gpus_per_node, get_gpu("gb200").scaleup_domain) == (4, 72)
    assert (get_gpu("gb300").gpus_per_node, get_gpu("gb300").scaleup_domain) == (4, 72)
    assert get_gpu("h100-sxm").scaleup_domain == 8 and get_gpu("h100-sxm").peak_flops("fp4") == get_gpu("h100-sxm").peak_flops_fp8
    # MI350X = MI355X's CDNA4 peaks at 2.2 / 2.4 GHz
    assert get_gpu("mi350x").peak_flops_bf16 == pytest.approx(get_gpu("mi355x").peak_flops_bf16 * 2.2 / 2.4, rel=1e-4)


def test_calibration_rows_are_at_most_a_third():
    import json
    from pathlib import Path

    rows = json.loads((Path(__file__).resolve().parents[1] / "scripts/validation/runs.json").read_text())["rows"]
    cal_ids = {r["id"] for r in rows if r["role"] == "calibration"}
    # the framework constants' rows, plus the one row each unstated power cap is fitted on and the one row the ROCm
    # legacy grouped_gemm host cost is fitted on and the two rows the Mamba-2 SSD training factor is fitted on
    own = set(cal.POWER_LIMIT_ROWS.values()) | {cal.ROCM_LEGACY_GEMM_ROW} | set(cal.MAMBA_SSD_ROWS)
    assert set(cal.CALIBRATION_ROWS) | own == cal_ids
    assert not set(cal.CALIBRATION_ROWS) & own
    assert 3 * len(cal_ids) <= len(rows) and len(rows) >= 25


def test_user_gpu_file_feeds_the_compute_model(tmp_path):
    """A GPU added from a TOML file is used by the cost model; a power-capped clock fraction (set
    below 1, so it replaces the calibrated sustained clock) slows compute-bound GEMMs in proportion
    and leaves memory-bound ones unchanged."""
    from primus_launch.projection.hardware.gpus import load_gpu_file

    base = get_gpu("h100-sxm").model_dump(exclude={"name", "source", "vendor", "intra_node_link_bw", "tdp_watts",
                                                   "peak_flops_fp4", "nvlink_domain", "power_limit_w",
                                                   "peak_power_w"})
    lines = []
    for name, clock in (("test-full-clock", 0.9), ("test-half-clock", 0.45)):
        lines.append(f"[gpu.{name}]")
        lines += [f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in base.items()
                  if k != "sustained_clock_fraction"]
        lines.append(f"sustained_clock_fraction = {clock}")
    path = tmp_path / "gpus.toml"
    path.write_text("\n".join(lines) + "\n")
    assert load_gpu_file(path) == ["test-full-clock", "test-half-clock"]
    from primus_launch.projection.cost.compute import gemm_curve

    t0 = gemm_curve("hopper", "bf16")[0].t0
    big_full = gemm_time(8192, 8192, 8192, "test-full-clock") - t0
    big_half = gemm_time(8192, 8192, 8192, "test-half-clock") - t0
    assert big_half == pytest.approx(2 * big_full, rel=1e-9)
    assert gemm_time(1, 8192, 8192, "test-half-clock") == gemm_time(1, 8192, 8192, "test-full-clock")


# ---------------- issue 15, second pass: mechanisms from framework code ----------------

def _titan_plan(granularity="op", gpu="h100-sxm", **model):
    from primus_launch.plan import Source

    m = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=768, num_attention_heads=16, num_query_groups=16,
                  vocab_size=2048, seq_length=64, **model)
    return Plan(model=m, parallel=Parallelism(), training=Training(global_batch_size=1, micro_batch_size=1,
                                                                    recompute={"granularity": granularity}),
                cluster=Cluster(gpu=gpu, num_nodes=1, gpus_per_node=1), source=Source(framework="torchtitan"))


def test_op_sac_recomputes_the_mms_torchtitan_recomputes():
    """TorchTitan's per-op SAC (its own SelectiveAC policy, run on its own llama3 block on CPU)
    recomputes exactly the mms ``titan_sac.titan_block_mms`` marks (every second one), and the
    dry-run re-runs their forward GEMM time in backward, not the attention core."""
    import copy

    import torch

    from primus_launch.frameworks import titan_cpu

    titan_cpu.install()
    import torchtitan.distributed.activation_checkpoint as ac
    from torchtitan.models.llama3 import model_registry

    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.cost.titan_sac import titan_block_mms

    cfg = copy.deepcopy(model_registry("debugmodel").model)
    cfg.layers = cfg.layers[:1]
    titan_cpu.use_sdpa(cfg)
    titan_cpu.set_seq_len(cfg, 64)
    model = cfg.build()
    model.init_states()
    decisions = []
    orig = ac.create_selective_checkpoint_contexts

    def spy(policy, *a, **k):
        def logged(ctx, func, *args, **kw):
            d = policy(ctx, func, *args, **kw)
            if not ctx.is_recompute and func in (torch.ops.aten.mm.default, torch.ops.aten.linear.default):
                decisions.append((int(args[1].shape[-1]), d.name == "PREFER_RECOMPUTE"))
            return d
        return orig(logged, *a, **k)

    ac.create_selective_checkpoint_contexts = spy
    try:
        block = ac.SelectiveAC(ac.SelectiveAC.Config())._wrap_block(model.layers["0"])
        block(torch.randn(1, 64, cfg.dim, requires_grad=True), None).sum().backward()
    finally:
        ac.create_selective_checkpoint_contexts = orig
    plan = _titan_plan()
    ours = [(n, i % 2 == 0) for i, (_, _, n, _) in enumerate(titan_block_mms(plan.model, 64, 1, False), start=1)]
    assert decisions == ours
    lt = layer_times_roofline(plan)
    rec = lt.part("dense", "op_sac_mm").fwd_s
    assert 0 < rec < lt.part("dense", "gemm").fwd_s          # some of the mms, not all
    assert lt.part("dense", "attention").fwd_s > 0 and lt.part("dense", "non_matmul").fwd_s > 0


def test_sustained_clock_is_one_fraction_for_every_power_limited_architecture():
    """One calibrated clock fraction for Hopper, Blackwell (Ultra) and CDNA parts (no per-SKU or
    Hopper-only constant); Ampere and GPUs without an architecture stay at 1."""
    vals = {g: cal.sustained_clock(g, get_gpu(g).sustained_clock_fraction, get_gpu(g).arch)
            for g in ("h100-sxm", "h100-sxm-96gb-500w", "h200", "b200", "gb200", "b300", "gb300", "mi300x", "mi355x")}
    assert len(set(vals.values())) == 1 and 0.5 < vals["b200"] < 1.0
    assert cal.sustained_clock("a100-sxm-80gb", 1.0, "ampere") == 1.0
    assert cal.sustained_clock("x", 1.0, "") == 1.0
    assert set(cal.SUSTAINED_CLOCK) == {"power_limited"}


def test_te_userbuffers_sm_margins():
    """TP overlap with TE userbuffers (TE's default ub config): the reduce-scatter-overlapped forward
    GEMMs (proj, FC2) run with a 16-SM margin, U / (U - 16) slower; the ring-exchange ones lose 1 SM."""
    from primus_launch.plan.userbuffers import UB_SMS
    from primus_launch.projection.cost.contention import ub_factors
    from primus_launch.projection.cost.roofline import layer_op_times

    def ops(overlap):
        m = ModelArch(num_layers=2, hidden_size=4096, ffn_hidden_size=16384, num_attention_heads=32,
                      vocab_size=32000, seq_length=4096)
        plan = Plan(model=m, parallel=Parallelism(tp=4, sequence_parallel=True),
                    training=Training(global_batch_size=8, micro_batch_size=1, tp_comm_overlap=overlap),
                    cluster=Cluster(gpu="h100-sxm", num_nodes=1))
        return {o[0].split(" [")[0]: o for o in layer_op_times(plan)["dense"]}

    on, off = ops(True), ops(False)
    U = get_gpu("h100-sxm").num_sms
    assert on["MLP FC2"][1] / off["MLP FC2"][1] == pytest.approx(U / (U - UB_SMS["pipeline"]), rel=1e-9)
    assert on["QKV"][1] / off["QKV"][1] == pytest.approx(1 + 1 / U, rel=1e-9)
    assert on["QKV"][2] / off["QKV"][2] == pytest.approx(ub_factors("qkv", U)[1], rel=1e-9)
    assert on["core attention (cudnn) b1 h8 s4096x4096 d128/128"][1] == off["core attention (cudnn) b1 h8 s4096x4096 d128/128"][1]


def test_megatron_async_backward_tp_and_ep_warmup():
    """Megatron hides the column-parallel backward collectives behind dgrad / wgrad (exposed < raw);
    without it (pre-2021-09 Megatron, TorchTitan) the backward TP time is the raw one.  The 1F1B
    all-to-all overlap leaves 1 / micro-batches of the EP comm exposed with PP = 1."""
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.cost.ep_comm import ep_unpaired_fraction
    from primus_launch.projection.cost.tp_comm import tp_exposed, tp_layer_comm
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    m = ModelArch(num_layers=4, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                  num_query_groups=8, vocab_size=32000, seq_length=4096)
    base = Plan(model=m, parallel=Parallelism(tp=4, sequence_parallel=True),
                training=Training(global_batch_size=64, micro_batch_size=1), cluster=Cluster(gpu="h100-sxm", num_nodes=2))
    sync = base.model_copy(update={"training": base.training.model_copy(update={"tp_async_backward": False})})
    h100 = get_gpu("h100-sxm")
    raw = tp_layer_comm(base, h100, layout(base))
    f, b = tp_exposed(base, raw, layer_times_roofline(base), h100, layout(base))
    fs, bs = tp_exposed(sync, raw, layer_times_roofline(sync), h100, layout(sync))
    assert f == raw[0] and b < raw[1] and (fs, bs) == raw
    assert ep_unpaired_fraction(base) == pytest.approx(1 / base.num_microbatches)


def test_yarn_rope_unfused_in_megatron_unless_mla():
    """Megatron falls back to its unfused RoPE for YaRN with a concentration factor != 1 (TE's fused
    RoPE has no mscale): GPT-OSS-style GQA with YaRN pays Megatron's own unfused RoPE bytes
    (rope_utils._apply_rotary_pos_emb_bshd, tests/test_cost_gpt_oss.py), plain RoPE does not."""
    from primus_launch.projection.cost.elementwise_bytes import ROPE_FUSED, ROPE_MEGATRON_UNFUSED
    from primus_launch.projection.cost.roofline import layer_op_times

    def rope(pos):
        m = ModelArch(num_layers=2, hidden_size=2880, ffn_hidden_size=2880, num_attention_heads=64,
                      num_query_groups=8, head_dim=64, vocab_size=32000, seq_length=4096, position_embedding=pos)
        plan = Plan(model=m, parallel=Parallelism(), training=Training(global_batch_size=8, micro_batch_size=1),
                    cluster=Cluster(gpu="b200", num_nodes=1))
        return next(o for o in layer_op_times(plan)["dense"] if o[0].startswith("RoPE"))[4][3]

    assert rope("yarn") / rope("rope") == pytest.approx(ROPE_MEGATRON_UNFUSED[0] / ROPE_FUSED[0])


# ---------------- ring context parallelism: per-step kernels and helpers (issue 15, third pass) -------

def test_ring_steps_keep_the_causal_flops_and_add_helpers():
    """Load-balanced ring attention (TE AttnFuncWithCP / torch _templated_ring_attention) runs one
    causal c x c kernel and cp-1 half blocks: the same FLOPs as one causal attention of the rank's
    s/cp queries over all s keys (closed form); the framework's helpers add HBM traffic that grows
    with cp, PyTorch's fp32 merges more than TE's bf16 ones."""
    from primus_launch.projection.cost.compute import attention_flops
    from primus_launch.projection.cost import context_parallel as cpm

    s, cp, b, h, d = 262144, 8, 1, 32, 128
    ring = sum(n * attention_flops(b, h, sq, skv, d, d, causal) for sq, skv, causal, n in cpm.ring_steps(s, cp))
    assert ring == pytest.approx(attention_flops(b, h, s // cp, s, d, d, True), rel=1e-12)
    e = float(b * (s // cp) * h * d)
    te2, te8 = cpm.helper_bytes("te", 2, e, e, e / 2), cpm.helper_bytes("te", 8, e, e, e / 2)
    pt8 = cpm.helper_bytes("torch", 8, e, e, e / 2)
    assert cpm.helper_bytes("te", 1, e, e, e) == (0.0, 0.0)
    assert te8[0] > te2[0] > 0 and te8[1] > te2[1] > 0
    assert pt8[0] > 4 * te8[0] and pt8[1] > te8[1]


def test_ring_cp_in_the_layer_and_titan_fp32_dkv():
    """A CP layer lists its ring kernels and helpers; TorchTitan's backward CP traffic carries the fp32
    dK,dV rotation (twice the bytes of the bf16 K,V it rotates in forward)."""
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.cost.cp_comm import cp_layer_comm
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout

    m = ModelArch(num_layers=2, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                  num_query_groups=8, vocab_size=128256, seq_length=131072)
    mk = lambda fw: Plan(model=m, parallel=Parallelism(cp=4, cp_comm_type="p2p"),  # noqa: E731
                         training=Training(global_batch_size=2), cluster=Cluster(gpu="h100-sxm"),
                         source=Source(framework=fw))
    for fw in ("megatron", "torchtitan"):
        names = [o[0] for o in layer_op_times(mk(fw))["dense"]]
        assert any("ring: 4 steps" in n for n in names) and any(n.startswith("CP ring helpers") for n in names)
    te, pt = mk("megatron"), mk("torchtitan")
    f_te, b_te = cp_layer_comm(te, get_gpu("h100-sxm"), layout(te))
    f_pt, b_pt = cp_layer_comm(pt, get_gpu("h100-sxm"), layout(pt))
    assert f_pt == pytest.approx(f_te, rel=1e-9)
    assert b_pt - f_pt == pytest.approx(2 * f_te, rel=0.05) and b_te == pytest.approx(2 * f_te, rel=1e-9)


def test_fsdp_under_pipeline_parallelism_follows_torch_pipelining():
    """FSDP + PP (torch pipelining): parameters gathered once per schedule (reshard_after_forward
    False by default under PP), the stage's gradients reduce-scattered at once after its last backward
    (REDUCE_GRAD, exposed): dp_comm = that reduce-scatter + the first micro-batch's gather exposure,
    independent of the micro-batch count; 'always' re-gathers every micro-batch."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.memory.params import stage_parameter_split

    m = ModelArch(num_layers=8, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                  num_query_groups=8, vocab_size=128256, seq_length=4096)

    def plan(gbs, reshard="default"):
        return Plan(model=m, parallel=Parallelism(pp=2, dp_sharding="full", fsdp_reshard_after_forward=reshard),
                    training=Training(global_batch_size=gbs, micro_batch_size=1),
                    cluster=Cluster(gpu="h100-sxm", num_nodes=2), source=Source(framework="torchtitan"))
    p8, p16 = plan(64), plan(128)
    lay = layout(p8)
    rs = max(coll.reduce_scatter(4.0 * sp.dense, lay.dp_shard, "h100-sxm") + coll.reduce_scatter(4.0 * sp.expert, lay.expert_dp, "h100-sxm")
             for sp in stage_parameter_split(p8))
    d8, d16 = (project_dry_run(p).time_breakdown["dp_comm"] for p in (p8, p16))
    assert rs <= d8 <= 1.2 * rs and d16 == pytest.approx(d8, rel=0.1)
    assert project_dry_run(plan(64, "always")).time_breakdown["dp_comm"] > d8


def test_moe_dispatch_host_sync_splits_the_forward():
    """An MoE layer's token dispatcher waits on the host for the routed-token counts (Megatron's
    d2h_event.synchronize, DeepEP / HybridEP counters): the forward is two segments, the second
    launched into an empty queue: max(g1 + max(g2, h2), h1 + h2) + 2 t_launch (closed form of
    layer_ops.LayerOps.times), never below the unsplit max(g1 + g2, h1 + h2)."""
    from primus_launch.projection.cost.framework import profile_of
    from primus_launch.projection.cost.host_sync import SYNC_BEFORE
    from primus_launch.projection.cost.layer_ops import LayerOps

    plan = Plan(model=ModelArch(num_layers=2, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                                vocab_size=32000, seq_length=1024),
                training=Training(global_batch_size=8), cluster=Cluster(gpu="b200"))
    prof = profile_of(plan, "blackwell")
    acc = LayerOps("b200", "bf16", prof, "bf16", None, 1.0)
    acc.scope = "attn"
    acc.elem(2e10, "big attention-side op", 2.0, (1, 1))         # long GPU segment before the sync
    acc.scope = "moe"
    for i in range(40):                                          # many tiny kernels after it
        acc.elem(1e3, f"tiny {i}", 2.0, (1, 1))
    t = prof.host_per_kernel
    g1 = sum(v for sc, v in acc.gf.items() if sc in SYNC_BEFORE)
    g2 = acc.f - g1
    h1, h2 = 1 * t, 40 * t
    unsplit = acc.times(t, frozenset()).fwd_s
    assert unsplit == pytest.approx(max(g1 + g2, h1 + h2))
    acc.sync = True
    split = acc.times(t, frozenset()).fwd_s
    assert split == pytest.approx(max(g1 + max(g2, h2), h1 + h2) + 2 * t)
    assert split > unsplit + 0.9 * (h2 - g2)


def test_userbuffers_cfg_from_megatron_yaml(tmp_path):
    """``--tp-comm-overlap-cfg`` is read (not reported unmodelled) and merged over TE's defaults per
    layer GEMM as TE's ``initialize_ub`` does; Megatron-Bridge's FP8 H100 70B config (transcribed in
    scripts/validation/ub_cfgs from Bridge v0.4.2 comm_overlap.py) turns the proj/FC2 forward into
    copy-engine ring exchange with a 1-SM margin (U/(U-1)) and the bulk QKV/FC1 overlaps into
    no-margin kernels holding 4 / 24 / 2 / 4 SMs (1 + n/U); a layer TE does not know is refused."""
    from pathlib import Path

    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.plan import PlanError
    from primus_launch.projection.cost.roofline import layer_op_times

    root = Path(__file__).resolve().parents[1]
    cfg = root / "scripts/validation/ub_cfgs/userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192.yaml"
    argv = ("pretrain_gpt.py --num-layers 4 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
            "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
            "--swiglu --micro-batch-size 1 --global-batch-size 16 --vocab-size 128256 --bf16 "
            "--tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap").split()
    te = plan_from_argv(argv, Cluster(gpu="h100-sxm", num_nodes=1))
    br = plan_from_argv(argv + ["--tp-comm-overlap-cfg", str(cfg)], Cluster(gpu="h100-sxm", num_nodes=1))
    assert te.training.tp_comm_overlap_cfg == ()
    got = {c[0]: c[1:] for c in br.training.tp_comm_overlap_cfg}
    assert got["proj_fprop"] == ("ring_exchange", 1, True) and got["fc2_fprop"] == ("ring_exchange", 1, True)
    assert got["qkv_wgrad"] == ("bulk", 24, False) and got["fc1_dgrad"] == ("bulk", 2, False)
    assert not any(u.flag.startswith("--tp-comm-overlap") for u in br.source.unmodelled)
    U = get_gpu("h100-sxm").num_sms
    a = {o[0].split(" [")[0]: o for o in layer_op_times(te)["dense"]}
    b = {o[0].split(" [")[0]: o for o in layer_op_times(br)["dense"]}
    assert b["MLP FC2"][1] / a["MLP FC2"][1] == pytest.approx((U / (U - 1)) / (U / (U - 16)), rel=1e-9)
    assert b["QKV"][3] / a["QKV"][3] == pytest.approx((1 + 24 / U) / (U / (U - 16)), rel=1e-9)
    assert b["MLP FC1"][2] / a["MLP FC1"][2] == pytest.approx((1 + 2 / U) / (U / (U - 16)), rel=1e-9)
    bad = tmp_path / "ub.yaml"
    bad.write_text("qkv_fprop_typo:\n  method: bulk\n")
    with pytest.raises(PlanError):
        plan_from_argv(argv + ["--tp-comm-overlap-cfg", str(bad)], Cluster(gpu="h100-sxm", num_nodes=1))


def test_fp8_sequence_parallel_gathers_are_quantised():
    """Megatron + TE with a per-tensor FP8 recipe all-gathers FP8 (1 B per element: the norm output
    before QKV / FC1, the row-parallel output gradient, the backward re-gather; TE
    ``grad_output_preprocess`` / ``_all_gather_fp8``); MXFP8 gathers the usages it needs (1, 2, 1 B
    + 1/32 scales); reduce-scatters stay bf16; a bf16 plan is unchanged."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.cost.tp_comm import tp_layer_comm
    from primus_launch.projection.hardware.gpus import get_gpu

    m = ModelArch(num_layers=4, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                  num_query_groups=8, vocab_size=32000, seq_length=8192)

    def plan(**t):
        return Plan(model=m, parallel=Parallelism(tp=4, sequence_parallel=True),
                    training=Training(global_batch_size=16, micro_batch_size=1, **t),
                    cluster=Cluster(gpu="h100-sxm", num_nodes=1))

    bf, cs, mx = plan(), plan(precision="fp8", fp8_recipe="tensorwise"), plan(precision="fp8", fp8_recipe="mxfp8")
    lay = layout(bf)
    nb = 8192 * 8192 * 2.0
    ag2, ag1, rs = (coll.all_gather(nb, lay.tp, "h100-sxm"), coll.all_gather(nb / 2, lay.tp, "h100-sxm"),
                    coll.reduce_scatter(nb, lay.tp, "h100-sxm"))
    h100 = get_gpu("h100-sxm")
    assert tp_layer_comm(bf, h100, lay) == pytest.approx((2 * (ag2 + rs), 2 * (2 * ag2 + rs)), rel=1e-12)
    assert tp_layer_comm(cs, h100, lay) == pytest.approx((2 * (ag1 + rs), 2 * (2 * ag1 + rs)), rel=1e-12)
    agm = coll.all_gather(nb / 2 * (1 + 1 / 32), lay.tp, "h100-sxm")
    agm2 = coll.all_gather(nb * (1 + 1 / 32), lay.tp, "h100-sxm")
    assert tp_layer_comm(mx, h100, lay) == pytest.approx((2 * (agm + rs), 2 * (agm2 + agm + rs)), rel=1e-12)
    assert ag1 < ag2


def test_torch_pipelining_skips_no_sync_unless_the_stage_module_is_fsdp():
    """Installed torch's own code: _PipelineStageBase.backward_maybe_with_nosync turns FSDP's gradient
    sync / reshard-after-backward off only when the stage module itself is an FSDPModule; a stage
    module that merely CONTAINS FSDP units (NeMo AutoModel's MoE parallelizer shards model.model,
    blocks, experts, embedding, lm_head, not the stage's DeepseekV3ForCausalLM) keeps FSDP2's defaults:
    every micro-batch's backward reduce-scatters (plan fsdp_pp_grad_sync = "microbatch")."""
    import torch
    from torch import nn
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.pipelining.stage import _PipelineStageBase

    calls = []

    class Unit(FSDPModule, nn.Module):       # records what the stage asks of an FSDP unit
        def set_is_last_backward(self, v):
            calls.append(("last", v))

        def set_reshard_after_backward(self, v, **kw):
            calls.append(("reshard", v))

        def set_requires_gradient_sync(self, v, **kw):
            calls.append(("sync", v))

    def unit():   # as fully_shard does it: swap the class of a built module (FSDPModule.__new__ strips itself)
        u = nn.Module()
        u.__class__ = Unit
        return u

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = unit()

    class FakeStage:
        pass

    def run(submod):
        calls.clear()
        st = FakeStage()
        st.submod = submod
        x = torch.ones(3, requires_grad=True)
        y = x * 2.0
        _PipelineStageBase.backward_maybe_with_nosync(
            st, "full", {"stage_output": (y,), "output_grads": (torch.ones(3),), "input_values": (x,)})
        return list(calls)

    assert ("sync", False) in run(unit())     # stage module is the FSDP root: no-sync (TorchTitan)
    assert run(Outer()) == []                 # FSDP units inside a plain stage module: untouched


def _moe_fsdp_plan(sync="microbatch", gbs=64, ep_nodes=2, expert_fp32=None):
    m = ModelArch(num_layers=8, hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=32,
                  num_query_groups=8, vocab_size=32000, seq_length=4096, num_experts=64, moe_router_topk=4,
                  moe_ffn_hidden_size=1536)
    ep = 8 * ep_nodes
    return Plan(model=m, parallel=Parallelism(pp=2, ep=ep, dp_sharding="full", fsdp_pp_grad_sync=sync),
                training=Training(global_batch_size=gbs, micro_batch_size=1, moe_token_dispatcher="deepep",
                                  expert_grad_reduce_in_fp32=expert_fp32),
                cluster=Cluster(gpu="h100-sxm", num_nodes=8))


def test_fsdp_per_microbatch_sync_under_pipelining():
    """fsdp_pp_grad_sync = "microbatch": every micro-batch pays its layers' exposed FSDP time and the
    chunk ends (no reduce-scatter after the pipeline), so dp_comm doubles exactly with the micro-batch
    count (closed form), and it includes at least the chunk-end wait for the first layer's non-expert
    reduce-scatter on every chunk pass (FSDP2 _root_post_backward_final_callback); 'schedule' keeps
    one reduce-scatter per schedule."""
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.cost.fsdp import fsdp_unit_comm
    from primus_launch.projection.hardware.gpus import get_gpu

    d8, d16 = (project_dry_run(_moe_fsdp_plan(gbs=g)).time_breakdown["dp_comm"] for g in (64, 128))
    assert d16 == pytest.approx(2 * d8, rel=1e-9)
    p = _moe_fsdp_plan()
    lay = layout(p)
    rs_first = fsdp_unit_comm(p, get_gpu("h100-sxm"), lay, False)[2]      # layer 0 is dense here
    assert d8 >= p.num_microbatches * rs_first
    s8, s16 = (project_dry_run(_moe_fsdp_plan("schedule", gbs=g)).time_breakdown["dp_comm"] for g in (64, 128))
    assert s16 == pytest.approx(s8, rel=0.1) and d8 > s8


def test_fsdp_expert_reduce_dtype_and_nic_sharing():
    """Expert gradients reduce-scattered in bf16 when expert_grad_reduce_in_fp32 is False (AutoModel:
    the experts' fully_shard has no MixedPrecisionPolicy): the collective of 2 bytes per expert
    parameter.  The EP phases share the NIC with the FSDP collectives crossing nodes (closed form of
    cost.fsdp.fsdp_ep_nic_sharing): combine delayed by what of the next layer's gathers is left after
    the experts' forward, dispatch-backward by the experts' reduce-scatter, each at most half the
    layer's EP time; nothing when the EP group stays inside one node."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.cost.ep_comm import ep_layer_comm
    from primus_launch.projection.cost.fsdp import fsdp_ep_nic_sharing, fsdp_unit_comm
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.memory.params import layer_parameter_counts

    p = _moe_fsdp_plan(expert_fp32=False)
    lay = layout(p)
    assert lay.expert_dp.size == 2 and lay.expert_dp.nodes == 2 and lay.ep.nodes == 2
    sp = layer_parameter_counts(p.model, 1, 1, p.parallel.ep, True)
    h100 = get_gpu("h100-sxm")
    ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(p, h100, lay, True)
    assert rs_e == pytest.approx(coll.reduce_scatter(2.0 * sp.expert, lay.expert_dp, "h100-sxm"))
    assert fsdp_unit_comm(_moe_fsdp_plan(), h100, lay, True)[3] > rs_e
    lt = layer_times_roofline(p)
    ep = ep_layer_comm(p, h100, lay)
    nf, nb = fsdp_ep_nic_sharing(p, lt, h100, lay, ep)
    experts_f = lt.part("moe", "scope:moe").fwd_s
    assert nf == pytest.approx(min(ep[0] / 2, max(0.0, ag_d + ag_e - experts_f)))
    assert nb == pytest.approx(min(ep[1] / 2, rs_e)) and nb > 0
    q = _moe_fsdp_plan(ep_nodes=1)
    lq = layout(q)
    assert fsdp_ep_nic_sharing(q, layer_times_roofline(q), h100, lq, ep_layer_comm(q, h100, lq)) == (0.0, 0.0)
