"""Memory model vs measured memory of real megatron-core steps, published figures and identities.

Measured truth: one forward+backward of megatron-core 0.16.1 ``GPTModel`` layers at Llama-3.1-8B
sizes (h 4096, F 14336, 32 heads / 8 KV heads, vocab 128256, s 2048) under ``FakeTensorMode``,
tracked by ``torch.distributed._tools.mem_tracker.MemTracker`` (:mod:`mem_measure`).  The model is
evaluated with :data:`MCORE_LOCAL` (what megatron-core's local torch modules keep on CPU: fp32
norm copies, unfused RoPE tables); :data:`TE` differs only in those per-tensor terms.
"""

from __future__ import annotations

import pytest

from mem_measure import measure_step
from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.memory.estimate import estimate_memory, stage_memory
from primus_launch.projection.memory.activations import (
    KORTHIKANTI,
    MCORE_LOCAL,
    TE,
    layer_activation_bytes,
)
from primus_launch.projection.memory.params import stage_parameter_counts

ARCH = ModelArch(name="llama3.1-8b-shape", num_layers=2, hidden_size=4096, ffn_hidden_size=14336,
                 num_attention_heads=32, num_query_groups=8, vocab_size=128256, seq_length=2048)

RECOMPUTE = [
    dict(granularity="none"),
    dict(granularity="selective"),
    dict(granularity="full", method="uniform", num_layers=1),
    dict(granularity="full", method="uniform", num_layers=2),
    dict(granularity="full", method="block", num_layers=1),
]
PARALLEL = [dict(tp=1), dict(tp=2), dict(tp=2, sequence_parallel=True)]


def _plan(arch: ModelArch, recompute: dict, par: dict, mbs: int = 1) -> Plan:
    return Plan(model=arch, parallel=par, cluster=dict(gpus_per_node=par.get("tp", 1)),
                training=dict(global_batch_size=mbs, micro_batch_size=mbs, recompute=recompute,
                              grad_reduce_in_fp32=False, precision_aware_optimizer=True,
                              main_grads_dtype="bf16"))


def _model_step(plan: Plan) -> tuple[float, float]:
    """(activations, peak) the model predicts for the harness: one micro-batch, bf16 params and
    grads, no optimizer, no reserve (the plan's precision-aware optimizer reads the bf16 grad buffer, so
    its step makes no fp32 gradient copies: the step is not a phase of its own, as in the harness; the GEMM
    workspaces cuBLAS / TE allocate on a GPU are not tensors of the traced step: left out)."""
    st = stage_memory(plan, MCORE_LOCAL)[0]
    return st.activations_bytes, (st.parameters_bytes + st.gradients_bytes + st.activations_bytes + st.transient_bytes
                                  - st.workspace_bytes)


@pytest.mark.parametrize("par", PARALLEL, ids=["tp1", "tp2", "tp2-sp"])
@pytest.mark.parametrize("rc", RECOMPUTE, ids=["none", "selective", "full-uniform1", "full-uniform2", "full-block1"])
def test_full_step_activations_and_peak_within_3pct(rc, par):
    """Embedding + 2 decoder layers + output layer + loss: activations after forward, step peak."""
    plan = _plan(ARCH, rc, par)
    got = measure_step(plan, ARCH.num_layers, fused_swiglu=True)
    act, peak = _model_step(plan)
    # static = bf16 params + grads of the one GPU: exact
    assert got["static"] == pytest.approx(4 * stage_parameter_counts(plan, spec="local")[0], rel=1e-4)
    assert act == pytest.approx(got["activations"], rel=0.03)
    assert peak == pytest.approx(got["peak"], rel=0.03)
    # and within 3% of the peak's dynamic part (peak minus parameters and gradients) too
    dyn_got = got["peak"] - got["static"]
    assert peak - 4 * stage_parameter_counts(plan, spec="local")[0] == pytest.approx(dyn_got, rel=0.03)


@pytest.mark.parametrize("par", PARALLEL, ids=["tp1", "tp2", "tp2-sp"])
def test_per_layer_activations_exact_tensor_list(par):
    """Two layers minus one layer (embedding, no head): the bytes autograd keeps per layer."""
    for rc in RECOMPUTE[:3]:
        plan = _plan(ARCH, rc, par)
        one = measure_step(plan, 1, post_process=False, fused_swiglu=True)
        two = measure_step(plan, 2, post_process=False, fused_swiglu=True)
        la = layer_activation_bytes(ARCH, seq=ARCH.seq_length, mbs=1, tp=par["tp"],
                                    sp=par.get("sequence_parallel", False), impl=MCORE_LOCAL)
        want = {"none": la.full, "selective": la.full - la.core_attention, "full": la.layer_input}[rc["granularity"]]
        # recompute saves the RNG states (a few KB) beside the checkpoint input
        assert two["activations"] - one["activations"] == pytest.approx(want, rel=2e-3, abs=32768)
        # transient above the activations: the backward temporaries a sb ((g+2) F / t + h / spd),
        # with full recompute plus the rebuilt layer and its input gradient (a secondary term of
        # the peak: within 4% under SP, exact without)
        # (layers only: without the embedding, whose dense weight-gradient is a transient of its own)
        bare = measure_step(plan, 2, pre_process=False, post_process=False, fused_swiglu=True)
        extra = la.full + la.layer_input if rc["granularity"] == "full" else 0.0
        assert bare["peak"] - bare["static"] - bare["activations"] == pytest.approx(la.backward_temp + extra, rel=0.05)


# ---------------- published figures ----------------

def test_korthikanti_table2_formulas():
    """Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, per layer, 2-byte activations, MHA,
    GeLU with F = 4h, dropout, unfused attention: no parallelism ``sbh(34 + 5as/h)``; TP
    ``sbh(10 + 24/t + 5as/(ht))``; TP+SP ``sbh(34/t + 5as/(ht))``; TP+SP+selective
    ``34 sbh / t``; full recompute ``2 sbh`` (``/t`` with SP)."""
    for (s, b, h, a, t) in [(2048, 1, 6144, 48, 8), (2048, 1, 12288, 96, 8), (2048, 1, 20480, 128, 8),
                            (2048, 1, 25600, 160, 8)]:  # the paper's 22B, 175B, 530B, 1T models
        arch = ModelArch(num_layers=1, hidden_size=h, ffn_hidden_size=4 * h, num_attention_heads=a,
                         vocab_size=51200, seq_length=s, swiglu=False, normalization="layernorm",
                         position_embedding="learned")
        kw = dict(seq=s, mbs=b, impl=KORTHIKANTI)
        sbh = s * b * h
        assert layer_activation_bytes(arch, tp=1, sp=False, **kw).full == sbh * (34 + 5 * a * s / h)
        assert layer_activation_bytes(arch, tp=t, sp=False, **kw).full == pytest.approx(
            sbh * (10 + 24 / t + 5 * a * s / (h * t)))
        la = layer_activation_bytes(arch, tp=t, sp=True, **kw)
        assert la.full == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
        assert la.full - la.core_attention == pytest.approx(sbh * 34 / t)
        assert la.layer_input == pytest.approx(2 * sbh / t)


def test_korthikanti_figure_reductions():
    """Sec. 6 of the paper: sequence parallelism + selective recompute cut activation memory by
    about 5x versus tensor parallelism alone for their 22B..1T models (Figure 7 shows ~5x)."""
    for h, a in [(6144, 48), (12288, 96), (20480, 128), (25600, 160)]:
        arch = ModelArch(num_layers=1, hidden_size=h, ffn_hidden_size=4 * h, num_attention_heads=a,
                         vocab_size=51200, seq_length=2048, swiglu=False, normalization="layernorm",
                         position_embedding="learned")
        tp_only = layer_activation_bytes(arch, seq=2048, mbs=1, tp=8, sp=False, impl=KORTHIKANTI).full
        la = layer_activation_bytes(arch, seq=2048, mbs=1, tp=8, sp=True, impl=KORTHIKANTI)
        ratio = tp_only / (la.full - la.core_attention)
        assert 4.0 < ratio < 6.5


def test_megatron_distributed_optimizer_bytes_per_param():
    """Megatron-LM docs (distrib_optimizer.md): bf16 params with fp32 grads take 18 bytes/param
    without and ``6 + 12/d`` with the distributed optimizer."""
    arch = ARCH.model_copy(update=dict(num_layers=8))
    for dp, sharding, want in [(8, "none", 18), (8, "optimizer", 6 + 12 / 8), (4, "optimizer", 6 + 12 / 4)]:
        plan = Plan(model=arch, parallel=dict(dp_sharding=sharding), cluster=dict(gpus_per_node=dp),
                    training=dict(global_batch_size=dp))
        st = stage_memory(plan)[0]
        static = st.parameters_bytes + st.gradients_bytes + st.optimizer_bytes
        assert static == pytest.approx(want * st.num_parameters, rel=1e-9)


# ---------------- identities of the full model ----------------

LLAMA70 = ModelArch(name="llama3.1-70b", num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
                    num_attention_heads=64, num_query_groups=8, vocab_size=128256,
                    make_vocab_size_divisible_by=128, seq_length=8192)


def _p70(**kw) -> Plan:
    par = dict(tp=8, pp=4, sequence_parallel=True, dp_sharding="optimizer")
    par.update(kw.pop("parallel", {}))
    tr = dict(global_batch_size=128)
    tr.update(kw.pop("training", {}))
    return Plan(model=LLAMA70, parallel=par, training=tr, cluster=dict(num_nodes=kw.pop("nodes", 8)))


def test_schedule_in_flight_and_recompute_order():
    r = estimate_memory(_p70())
    assert r.worst_stage == 0 and [s.microbatches_in_flight for s in r.stages] == [4, 3, 2, 1]
    acts = [s.activations_bytes for s in r.stages]
    assert acts[0] > acts[1] > acts[2]
    sel = estimate_memory(_p70(training=dict(recompute=dict(granularity="selective"))))
    full = estimate_memory(_p70(training=dict(recompute=dict(granularity="full"))))
    assert full.breakdown["activations"] < sel.breakdown["activations"] <= r.breakdown["activations"]
    # full recompute, uniform 1: per micro-batch only the layer inputs (2 sbh / t with SP)
    lpc = 20
    want = 4 * (lpc * 2 * 8192 * 8192 / 8 + 8 * 8192 + 4 * 8192 * 128)  # + token ids, fp32 RoPE table
    # (Transformer Engine gathers the SP input per GEMM: no persistent all-gather buffer)
    assert full.stages[0].activations_bytes == pytest.approx(want, rel=1e-6)


def test_verdict_band_and_capacity():
    """The verdict of :mod:`memory.verdict` against the device-reported capacity: fits when the band's top
    fits, does not fit when even its bottom does not, tight between; ``fits`` true for fits and tight;
    the margin is the only knob on top."""
    r = estimate_memory(_p70())
    assert r.capacity_bytes == 81089 * 1024**2  # torch total_memory of an H100 80GB HBM3
    assert sum(r.breakdown.values()) == pytest.approx(r.peak_bytes_per_gpu, abs=8)
    out, b = r.outside_allocator_bytes, r.band
    assert b.low < 0 < b.high and b.rows >= 5
    assert b.high_bytes == int((r.peak_bytes_per_gpu - out) * (1 + b.high) + out)
    assert r.verdict == "fits" and r.fits and b.high_bytes <= r.capacity_bytes
    # margins at the band's edges: just inside the top -> tight, just above the bottom -> does not fit
    m_top = 1 - b.high_bytes / r.capacity_bytes
    m_bottom = 1 - b.low_bytes / r.capacity_bytes
    tight = estimate_memory(_p70(), margin=m_top + 1e-4)
    assert tight.verdict == "tight" and tight.fits
    over = estimate_memory(_p70(), margin=m_bottom + 1e-4)
    assert over.verdict == "does not fit" and not over.fits
    # tp=1 pp=1: 70B cannot fit one 80 GB GPU
    big = Plan(model=LLAMA70, training=dict(global_batch_size=8), cluster=dict(num_nodes=1))
    assert estimate_memory(big).verdict == "does not fit"


def test_te_keeps_less_than_local():
    la_te = layer_activation_bytes(ARCH, seq=2048, mbs=1, tp=1, sp=False, impl=TE)
    la_local = layer_activation_bytes(ARCH, seq=2048, mbs=1, tp=1, sp=False, impl=MCORE_LOCAL)
    # the torch norms keep 8 bytes per element instead of 2 (two norms), plus RoPE tables; and TE's fused
    # attention copies v (get_qkv_layout) so the QKV output is freed, while the local spec keeps it beside
    # the RoPE'd q, k: q and k held twice, (nq + nkv) d per token
    assert la_local.full - la_te.full == 2 * 6 * 2048 * 4096 + 4 * 2 * 2048 * 128 + 2 * 2048 * (32 + 8) * 128


def test_in_flight_closed_forms_equal_schedule_walk():
    """1F1B / interleaved / GPipe closed forms == pipeline.activations_in_flight's walk."""
    from primus_launch.projection.memory.estimate import in_flight_closed_form
    from primus_launch.projection.pipeline.simulate import activations_in_flight

    for pp, vpp, m in [(2, 1, 1), (4, 1, 2), (4, 1, 8), (8, 1, 64), (4, 2, 8), (4, 2, 64), (8, 4, 64),
                       (2, 5, 8), (4, 3, 4)]:
        sched = ["1f1b", "gpipe"] if vpp == 1 else ["interleaved_1f1b"]
        for sc in sched:
            assert list(in_flight_closed_form(sc, pp, vpp, m)) == activations_in_flight(sc, pp, vpp, m), (sc, pp, vpp, m)
    # Megatron's micro-batch group of the interleaved schedule (warm-up (vpp - 1) g instead of (vpp - 1) pp)
    for pp, vpp, m, g in [(4, 3, 5, 5), (4, 2, 10, 5), (2, 3, 8, 3), (4, 2, 8, 8), (3, 2, 7, 4)]:
        got = list(in_flight_closed_form("interleaved_1f1b", pp, vpp, m, g))
        assert got == activations_in_flight("interleaved_1f1b", pp, vpp, m, group=g), (pp, vpp, m, g)


DSV3 = ModelArch(name="deepseek-v3", num_layers=61, hidden_size=7168, ffn_hidden_size=18432,
                 num_attention_heads=128, vocab_size=129280, make_vocab_size_divisible_by=128,
                 seq_length=4096, num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
                 moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3,
                 multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, qk_layernorm=True)


@pytest.mark.parametrize("rc", RECOMPUTE, ids=["none", "selective", "full-uniform1", "full-uniform2", "full-block1"])
def test_stage_activations_equal_per_layer_sum(rc):
    """The stage arithmetic (dense-first + MoE layers, uneven first stage) equals a plain sum over
    the layers each rank holds, times the schedule's micro-batches in flight."""
    from primus_launch.projection.memory.estimate import in_flight_closed_form
    from primus_launch.projection.memory.activations import output_activation_bytes, rope_table_bytes
    from primus_launch.projection.memory.params import stage_layer_ids

    plan = Plan(model=DSV3, parallel=dict(tp=2, pp=4, ep=16, sequence_parallel=True, pipeline_layers_first_stage=16,
                                          dp_sharding="optimizer"),
                training=dict(global_batch_size=64, recompute=rc), cluster=dict(num_nodes=16))
    st = stage_memory(plan)
    kw = dict(seq=4096, mbs=1, tp=2, sp=True, ep=16)
    dense, moe = (layer_activation_bytes(DSV3, moe=x, **kw) for x in (False, True))
    flight = in_flight_closed_form("1f1b", 4, 1, plan.num_microbatches)
    for r, chunks in enumerate(stage_layer_ids(plan)):
        layers = [moe if i >= 3 else dense for i in chunks[0]]
        g = rc["granularity"]
        if g == "none":
            per = sum(x.full for x in layers)
        elif g == "selective":
            per = sum(x.full - x.core_attention for x in layers)
        elif rc["method"] == "uniform":
            per = len(layers[::rc["num_layers"]]) * dense.layer_input
        else:
            per = dense.layer_input + sum(x.full for x in layers[1:])
        per += rope_table_bytes(DSV3, seq=4096) + (8 * 4096 if r == 0 else 0)
        want = flight[r] * per  # TE gathers the SP input per GEMM: no persistent buffer
        if r == 3:
            want += output_activation_bytes(DSV3, seq=4096, mbs=1, tp=2, sp=True)[0]
        assert st[r].activations_bytes == pytest.approx(want, rel=1e-9, abs=2)


def test_prefilter_agrees_with_estimate_memory():
    import itertools

    from primus_launch.projection.memory.legality import prefilter

    base = _p70()
    seen = {"div": 0, "mem": 0, "ok": 0}
    for tp, pp, sp, shard, rc, mbs in itertools.product([1, 2, 4, 8], [1, 2, 4, 8], [False, True],
                                                         ["none", "optimizer"], ["none", "full"], [1, 2]):
        par = base.parallel.model_copy(update=dict(tp=tp, pp=pp, sequence_parallel=sp, dp_sharding=shard))
        tr = base.training.model_copy(update=dict(micro_batch_size=mbs, recompute=base.training.recompute.model_copy(
            update=dict(granularity=rc))))
        plan = base.model_copy(update=dict(parallel=par, training=tr))
        why = prefilter(plan, margin=0.1)
        from primus_launch.plan import legality_problems

        if legality_problems(plan):
            assert why and not why.startswith("memory") and "=" in why
            seen["div"] += 1
            continue
        rep = estimate_memory(plan, margin=0.1)
        assert (why is None) == rep.fits
        if why:
            assert why.startswith("memory") and "stage" in why
            seen["mem"] += 1
        else:
            seen["ok"] += 1
    assert min(seen.values()) > 0, seen


def test_zero_paper_figure1_model_states():
    """Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) Figure 1 / sec. 5: 7.5B parameters, 64-way
    DP, mixed-precision Adam (K = 12): baseline 120 GB, optimizer-state partitioning (P_os,
    Megatron's distributed optimizer) 31.4 GB, full partitioning (P_os+g+p, FSDP) 1.9 GB per GPU."""
    arch = ARCH.model_copy(update=dict(num_layers=8))
    psi = 7.5e9
    got = {}
    for shard in ("none", "optimizer", "full"):
        plan = Plan(model=arch, parallel=dict(dp_sharding=shard), cluster=dict(num_nodes=8),
                    training=dict(global_batch_size=64, grad_reduce_in_fp32=False))  # fp16 grads
        st = stage_memory(plan)[0]
        got[shard] = (st.parameters_bytes + st.gradients_bytes + st.optimizer_bytes) / st.num_parameters * psi / 1e9
    assert round(got["none"]) == 120
    assert round(got["optimizer"], 1) == 31.4
    assert round(got["full"], 1) == 1.9
    # torchtitan FSDP2: fp32 sharded params are the master copy (4 + 8) / 64; fp32 sharded grads
    # (4 / 64 once all reduced) count as far as the backward got at the peak moment
    plan = Plan(model=arch, parallel=dict(dp_sharding="full"), cluster=dict(num_nodes=8),
                training=dict(global_batch_size=64), source=dict(framework="torchtitan"))
    st = stage_memory(plan)[0]
    rope = 4 * arch.seq_length * arch.kv_channels * arch.num_layers  # per-block RoPE buffers
    assert st.parameters_bytes - rope + st.optimizer_bytes == pytest.approx(12 / 64 * st.num_parameters, rel=1e-6)
    assert 0 <= st.gradients_bytes <= 4 / 64 * st.num_parameters + 1


def test_moe_layer_activations_measured():
    """MoE layer (8 experts, top-2, a shared expert; megatron's allgather dispatcher and
    SequentialMLP, EP = TP = 1) on real CPU tensors (routing needs data, so no FakeTensorMode; small
    sizes): per-layer bytes kept equal the model's routing state + permuted tokens + expert
    fc1/fc2 inputs + shared expert, for every (token, expert) pair."""
    arch = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=896, num_attention_heads=4,
                     num_query_groups=2, vocab_size=1024, seq_length=128, num_experts=8, moe_router_topk=2,
                     moe_shared_expert_intermediate_size=256)
    for rc in ("none", "selective"):
        plan = Plan(model=arch, training=dict(global_batch_size=1, recompute=dict(granularity=rc)),
                    cluster=dict(gpus_per_node=1))
        one = measure_step(plan, 1, post_process=False, fused_swiglu=True, fake=False)
        two = measure_step(plan, 2, post_process=False, fused_swiglu=True, fake=False)
        la = layer_activation_bytes(arch, seq=128, mbs=1, tp=1, sp=False, moe=True, impl=MCORE_LOCAL)
        want = la.full if rc == "none" else la.full - la.core_attention
        assert two["activations"] - one["activations"] == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("tp", [1, 2])
def test_mla_layer_activations_measured(tp):
    """DeepSeek-V3 attention (MLA: q/kv LoRA, decoupled RoPE, 128 heads, h 7168) + dense MLP at real
    sizes under FakeTensorMode, s 1024: per-layer bytes kept equal the model exactly."""
    arch = ModelArch(name="dsv3-dense", num_layers=2, hidden_size=7168, ffn_hidden_size=18432,
                     num_attention_heads=128, vocab_size=129280, seq_length=1024, multi_latent_attention=True,
                     q_lora_rank=1536, kv_lora_rank=512, qk_layernorm=True)
    plan = Plan(model=arch, parallel=dict(tp=tp), training=dict(global_batch_size=1), cluster=dict(gpus_per_node=tp))
    one = measure_step(plan, 1, post_process=False, fused_swiglu=True)
    two = measure_step(plan, 2, post_process=False, fused_swiglu=True)
    la = layer_activation_bytes(arch, seq=1024, mbs=1, tp=tp, sp=False, impl=MCORE_LOCAL)
    assert two["activations"] - one["activations"] == pytest.approx(la.full, rel=1e-6)


@pytest.mark.parametrize("hd,ad,backend,tp", [(0.1, 0.1, "auto", 1), (0.0, 0.0, "unfused", 1),
                                              (0.1, 0.1, "unfused", 2)],
                         ids=["dropout-flash", "unfused", "unfused-dropout-tp2"])
def test_dropout_and_unfused_attention_measured(hd, ad, backend, tp):
    """Megatron's default dropout (0.1 hidden + attention) and --attention-backend unfused (megatron's
    own DotProductAttention, the s x s probabilities kept) on megatron-core layers at Llama-8B sizes,
    s 1024: per-layer bytes kept equal the model (MCORE_LOCAL: torch's CPU dropout keeps a bf16
    noise tensor, the unfused softmax runs in fp32; TE keeps a bool mask and a bf16 softmax)."""
    from primus_launch.projection.memory.activations import impl_for

    arch = ModelArch(num_layers=2, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                     num_query_groups=8, vocab_size=128256, seq_length=1024, hidden_dropout=hd, attention_dropout=ad)
    plan = Plan(model=arch, parallel=dict(tp=tp), training=dict(global_batch_size=1, attention_backend=backend),
                cluster=dict(gpus_per_node=tp))
    one = measure_step(plan, 1, post_process=False, fused_swiglu=True)
    two = measure_step(plan, 2, post_process=False, fused_swiglu=True)
    la = layer_activation_bytes(arch, seq=1024, mbs=1, tp=tp, sp=False, impl=impl_for(arch, backend, MCORE_LOCAL))
    assert la.full == pytest.approx(two["activations"] - one["activations"], rel=0.01)
    # and the projection counts them (TE: bool masks 2 sbh/t... per layer; s x s probabilities)
    te = layer_activation_bytes(arch, seq=1024, mbs=1, tp=tp, sp=False, impl=impl_for(arch, backend))
    plain = layer_activation_bytes(arch.model_copy(update=dict(hidden_dropout=0.0, attention_dropout=0.0)),
                                   seq=1024, mbs=1, tp=tp, sp=False)
    assert te.full > plain.full


@pytest.mark.parametrize("rc", ["none"])
def test_moe_mla_layer_tp2_sp_measured(rc):
    """MoE + MLA layer (q/kv LoRA, decoupled RoPE, 8 experts top-2, a shared expert) at TP 2 with sequence
    parallelism on real CPU tensors (routing needs data; small sizes): the bytes kept per layer equal the
    model, the MLA latents (q/kv norms, up-projection inputs) sequence-sharded like the hidden states."""
    arch = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, vocab_size=1024,
                     seq_length=128, num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=128,
                     moe_shared_expert_intermediate_size=128, multi_latent_attention=True, q_lora_rank=64,
                     kv_lora_rank=32, qk_head_dim=32, qk_pos_emb_head_dim=16, v_head_dim=32, qk_layernorm=True)
    plan = Plan(model=arch, parallel=dict(tp=2, sequence_parallel=True),
                training=dict(global_batch_size=1, recompute=dict(granularity=rc)), cluster=dict(gpus_per_node=2))
    one = measure_step(plan, 1, post_process=False, fused_swiglu=True, fake=False)
    two = measure_step(plan, 2, post_process=False, fused_swiglu=True, fake=False)
    la = layer_activation_bytes(arch, seq=128, mbs=1, tp=2, sp=True, moe=True, impl=MCORE_LOCAL)
    want = la.full if rc == "none" else la.full - la.core_attention
    # selective recompute also keeps the checkpoint's RNG states (a few KB, 2 % at these sizes)
    assert want == pytest.approx(two["activations"] - one["activations"], rel=0.03)


def test_virtual_stages_run_megatrons_interleaved_schedule():
    """Megatron runs the interleaved schedule whenever virtual stages are set (get_forward_backward_func),
    whatever --pipeline-schedule says: a vpp > 1 plan keeps the interleaved warm-up in flight.  The
    MoE + MLA proxy of Megatron-LM's functional test gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed (TP2 PP2
    VPP4 EP4, 4 micro-batches of 4): rank 1 keeps 2 (pp - r - 1) + (vpp - 1) pp + 1 = 7 chunk-micro-batches,
    rank 0 9 -- not the 1F1B 1 and 2, which left the projection at a quarter of the measured peak."""
    from primus_launch.projection.memory.estimate import in_flight_closed_form

    assert in_flight_closed_form("1f1b", 2, 4, 4) == in_flight_closed_form("interleaved_1f1b", 2, 4, 4) == (9.0, 7.0)


@pytest.mark.parametrize("par", [dict(tp=1), dict(tp=2), dict(tp=2, sequence_parallel=True)], ids=["tp1", "tp2", "tp2-sp"])
def test_mtp_module_measured(par):
    """Multi-token prediction (DeepSeek-V3 / Megatron --mtp-num-layers 1) on megatron-core 0.16.1's own
    MultiTokenPredictionBlock (get_gpt_mtp_block_spec, local spec) at Llama-8B sizes, s 1024: the model
    with one MTP module minus the model without, after the forward (embedding, 2 layers, output layer and
    loss): the bytes kept equal memory_activations.mtp_activation_bytes; the parameters and gradients
    equal params.mtp_layer_parameters."""
    from primus_launch.projection.memory.activations import mtp_activation_bytes
    from primus_launch.projection.memory.params import mtp_layer_parameters

    base = ARCH.model_copy(update=dict(seq_length=1024))
    got = {}
    for n in (0, 1):
        plan = _plan(base.model_copy(update=dict(mtp_num_layers=n)), dict(granularity="none"), par)
        got[n] = measure_step(plan, 2, fused_swiglu=True)
    arch = base.model_copy(update=dict(mtp_num_layers=1))
    sp = par.get("sequence_parallel", False)
    want = mtp_activation_bytes(arch, seq=1024, mbs=1, tp=par["tp"], sp=sp, impl=MCORE_LOCAL)
    # under SP the CPU trace keeps 2 % more (fp32 RoPE inputs of the MTP layer's attention, not explained)
    assert got[1]["activations"] - got[0]["activations"] == pytest.approx(want, rel=0.03 if sp else 0.01)
    mtp = mtp_layer_parameters(arch, par["tp"], par["tp"], 1, spec="local")
    assert got[1]["static"] - got[0]["static"] == pytest.approx(4 * mtp.total, rel=1e-4)  # bf16 param + grad


@pytest.mark.parametrize("method,n", [("block", 2), ("uniform", 1)])
def test_mtp_module_under_full_recompute_measured(method, n):
    """--recompute-granularity full with an MTP module on megatron-core 0.16.1 (local spec, Llama-8B sizes,
    s 1024): ``uniform`` checkpoints the MTP module (MultiTokenPredictionLayer._checkpointed_forward keeps
    its two inputs); ``block`` warns "not supported for MTP yet" and runs it without recompute.  The
    model with one MTP module minus the model without, both under the same recompute, equals
    mtp_activation_bytes(recompute="full" | "none"); the stage estimate and the time model follow."""
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.memory.activations import mtp_activation_bytes

    base = ARCH.model_copy(update=dict(seq_length=1024))
    rc = dict(granularity="full", method=method, num_layers=n)
    got = {k: measure_step(_plan(base.model_copy(update=dict(mtp_num_layers=k)), rc, dict(tp=1)), 2,
                           fused_swiglu=True) for k in (0, 1)}
    arch = base.model_copy(update=dict(mtp_num_layers=1))
    kept = "full" if method == "uniform" else "none"
    want = mtp_activation_bytes(arch, seq=1024, mbs=1, tp=1, sp=False, impl=MCORE_LOCAL, recompute=kept)
    assert got[1]["activations"] - got[0]["activations"] == pytest.approx(want, rel=0.01)
    # the projection: block recomputes the decoder layers (time), never the MTP module (time and memory)
    big = ARCH.model_copy(update=dict(num_layers=8, mtp_num_layers=1))
    plans = {m_: _plan(big, dict(granularity="full", method=m_, num_layers=k), dict(tp=1))
             for m_, k in (("block", 8), ("uniform", 1))}
    t = {k: project_dry_run(v).iteration_time_s for k, v in plans.items()}
    assert t["block"] < t["uniform"]  # uniform also re-runs the MTP module's forward
    act = {k: stage_memory(v)[0].activations_bytes for k, v in plans.items()}
    full = mtp_activation_bytes(big, seq=big.seq_length, mbs=1, tp=1, sp=False, recompute="full")
    none_ = mtp_activation_bytes(big, seq=big.seq_length, mbs=1, tp=1, sp=False, recompute="none")
    assert act["block"] - act["uniform"] == pytest.approx(none_ - full, rel=1e-6)


RECOMPUTE_MODULES_DENSE = [("layernorm",), ("mlp",), ("core_attn", "layernorm", "mlp")]


@pytest.mark.parametrize("mods", RECOMPUTE_MODULES_DENSE, ids=["+".join(m) for m in RECOMPUTE_MODULES_DENSE])
def test_recompute_modules_dense_measured(mods):
    """--recompute-granularity selective --recompute-modules on megatron-core 0.16.1 (local spec, Llama-8B
    sizes, s 1024): bytes kept per layer equal LayerActivations.selective(modules) (layernorm: the
    output-discarding checkpoint drops each norm's internals and its output; mlp: fc1's output and fc2's
    input; the checkpoints' RNG states are a few KB)."""
    arch = ARCH.model_copy(update=dict(seq_length=1024))
    plan = _plan(arch, dict(granularity="selective", modules=mods), dict(tp=1))
    got = (measure_step(plan, 2, post_process=False, fused_swiglu=True)["activations"]
           - measure_step(plan, 1, post_process=False, fused_swiglu=True)["activations"])
    la = layer_activation_bytes(arch, seq=1024, mbs=1, tp=1, sp=False, impl=MCORE_LOCAL)
    assert la.selective(mods) == pytest.approx(got, rel=3e-3)


@pytest.mark.parametrize("mods", [("layernorm",), ("moe",), ("mlp",)], ids=["layernorm", "moe", "mlp"])
def test_recompute_modules_moe_measured(mods):
    """--recompute-modules on a megatron-core MoE + MLA layer (real CPU tensors, small sizes): layernorm
    (MLA's input norm and the MoE pre-MLP norm are separate modules), moe (the whole MoE layer keeps its
    input), mlp (``transformer_layer.py`` sets ``recompute_mlp`` only ``if not self.is_moe_layer``: an MoE
    layer keeps everything, as the DeepSeek-V3 GB200 BF16 OOM with recompute mlp shows); within 3 % or the checkpoints' RNG states (~16 KB each, 2-4 % at these sizes).  (shared_experts,
    measured the same way, dropped its shared expert's tensors to within its RNG state; not re-run here.)"""
    arch = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, vocab_size=1024,
                     seq_length=128, num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=128,
                     moe_shared_expert_intermediate_size=128, multi_latent_attention=True, q_lora_rank=64,
                     kv_lora_rank=32, qk_head_dim=32, qk_pos_emb_head_dim=16, v_head_dim=32, qk_layernorm=True)
    plan = Plan(model=arch, training=dict(global_batch_size=1, recompute=dict(granularity="selective", modules=mods)),
                cluster=dict(gpus_per_node=1))
    got = (measure_step(plan, 2, post_process=False, fused_swiglu=True, fake=False)["activations"]
           - measure_step(plan, 1, post_process=False, fused_swiglu=True, fake=False)["activations"])
    la = layer_activation_bytes(arch, seq=128, mbs=1, tp=1, sp=False, moe=True, impl=MCORE_LOCAL)
    if mods == ("mlp",):
        assert la.selective(mods) == la.full
    # each checkpoint also keeps its RNG states (~16 KB on this CPU torch; layernorm checkpoints two norms)
    assert la.selective(mods) == pytest.approx(got, rel=0.03, abs=2 * 16384)


def test_te_recompute_layernorm_only_where_norms_are_separate():
    """With Transformer Engine the dense layers' norms are fused into their first linear (input_layernorm
    and pre_mlp_layernorm are IdentityOp, transformer_layer.py skips them): layernorm recompute changes
    nothing there; MLA's input norm and MoE's pre-MLP norm are separate (stats + their output dropped)."""
    dense = layer_activation_bytes(ARCH, seq=2048, mbs=1, tp=1, sp=False)
    assert dense.selective(("layernorm",)) == dense.full
    assert dense.selective(("mlp",)) == dense.full - 2 * 2048 * (3 * 14336 + 4096) - 4 * 2048
    moe = layer_activation_bytes(DSV3, seq=4096, mbs=1, tp=2, sp=True, moe=True)
    assert moe.full - moe.selective(("layernorm",)) == 2 * (4 * 4096 / 2 + 2 * 4096 * 7168 / 2)


def _p8(**tr) -> Plan:
    t = dict(global_batch_size=8)
    t.update(tr)
    return Plan(model=ARCH.model_copy(update=dict(num_layers=8)), parallel=dict(dp_sharding="optimizer"),
                training=t, cluster=dict(gpus_per_node=8))


def test_precision_aware_optimizer_and_offload_bytes_per_param():
    """Megatron --use-precision-aware-optimizer (megatron/core/optimizer: TE FusedAdam with
    --main-grads-dtype / --main-params-dtype / --exp-avg-dtype / --exp-avg-sq-dtype): gradient buffer and
    optimizer state bytes per parameter follow the dtypes (distributed optimizer: states / DP);
    --optimizer-cpu-offload keeps the offloaded fraction of the states on the host.  With fp32 main params
    and bf16 parameters TE's FusedAdam holds the master copy as int16 remainders (store_param_remainders,
    2 bytes; tests/test_memory_te_graphs.py checks megatron's OptimizerConfig), except under an fp8 recipe
    other than delayed, where megatron keeps its own fp32 copy."""
    base = stage_memory(_p8())[0]
    n = base.num_parameters
    assert base.gradients_bytes == 4 * n and base.optimizer_bytes == pytest.approx(12 * n / 8, rel=1e-9)
    pa = stage_memory(_p8(precision_aware_optimizer=True, main_grads_dtype="bf16", exp_avg_dtype="bf16",
                          exp_avg_sq_dtype="bf16"))[0]
    assert pa.gradients_bytes == 2 * n and pa.optimizer_bytes == pytest.approx((2 + 2 + 2) * n / 8, rel=1e-9)
    mx = stage_memory(_p8(precision="fp8", fp8_recipe="mxfp8", precision_aware_optimizer=True, main_grads_dtype="bf16",
                          exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"))[0]
    assert mx.optimizer_bytes == pytest.approx((4 + 2 + 2) * n / 8, rel=1e-9)
    pa8 = stage_memory(_p8(precision_aware_optimizer=True, main_params_dtype="fp16", exp_avg_dtype="fp8",
                           exp_avg_sq_dtype="bf16"))[0]
    assert pa8.optimizer_bytes == pytest.approx((2 + 1 + 2) * n / 8, rel=1e-9)
    # HybridDeviceOptimizer leaves Megatron's fp32 main params on the device (test below): 4 + 8 x 0.25 bytes
    off = stage_memory(_p8(offload=dict(optimizer_fraction=0.75)))[0]
    assert off.optimizer_bytes == pytest.approx((4 + 0.25 * 8) * n / 8, rel=1e-9)
    # under the precision-aware optimizer the master copies are the HybridDeviceOptimizer's own (fp32, on the
    # parameter's device): master and moments leave together
    pa_off = stage_memory(_p8(precision_aware_optimizer=True, offload=dict(optimizer_fraction=0.75)))[0]
    assert pa_off.optimizer_bytes == pytest.approx(0.25 * 12 * n / 8, rel=1e-9)


def test_optimizer_cpu_offload_keeps_fp32_masters_on_device_published():
    """--optimizer-cpu-offload: Megatron's DistributedOptimizer builds the fp32 main-param shards on the device
    (Megatron-LM d98e8a64dd ``distrib_optimizer.py`` ``_build_model_and_main_param_groups``) and hands them to
    HybridDeviceOptimizer, which gives the offloaded ones a pinned host copy and keeps the device tensor
    (``cpu_offloading/hybrid_optimizer.py`` ``_get_sub_optimizer_param_groups``): only the moments leave.
    Published: Megatron-Bridge skills/nemo-mbridge-perf-cpu-offloading/card.yaml (Qwen3-30B-A3B, TP2 PP2 EP4,
    16 H100) measured 3.8 / 7.6 / 11.6 / 15.3 GB saved at 25 / 50 / 75 / 100 % against a 47.2 GB baseline."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "scripts"), str(root / "scripts" / "validation")]
    import validate_memory as vm

    vm.load_gpus()
    cases = {c["id"]: c for c in json.loads((root / "scripts/validation/memory_cases.json").read_text())["cases"]}
    pre = "mbridge_qwen3_30b_h100_bf16_16gpu_tp2pp2ep4_"
    base = stage_memory(vm.plan_of_case(cases[pre + "baseline"]))[0].allocated_bytes
    for tag, saved_gb in (("optoffload25", 3.8), ("optoffload50", 7.6), ("optoffload75", 11.6), ("optoffload100", 15.3)):
        got = base - stage_memory(vm.plan_of_case(cases[pre + tag]))[0].allocated_bytes
        assert got / 1e9 == pytest.approx(saved_gb, rel=0.08), tag


def test_zero2_shards_gradients_and_fp8_weight_caches():
    """dp_sharding optimizer_grads (Megatron-FSDP optim_grads, ZeRO-2): gradients / DP, plus one layer's
    unsharded gradients in flight; fp8 (TE): each linear caches its quantized weight, rowwise + columnwise
    (+2 bytes per linear parameter), with --fp8-param-gather the weight itself is fp8 (-1, and only the
    columnwise copy cached: +1), MXFP8 adds its e8m0 scales (1/32 each)."""
    from primus_launch.projection.memory.estimate import linear_params

    z1 = stage_memory(_p8())[0]
    z2p = _p8().with_changes(parallel=dict(dp_sharding="optimizer_grads"))
    z2 = stage_memory(z2p)[0]
    n = z1.num_parameters
    assert z2.gradients_bytes == pytest.approx(4 * n / 8, rel=1e-9) and z2.optimizer_bytes == z1.optimizer_bytes
    assert z2.transient_bytes >= 4 * (n - 2 * 128256 * 4096) / 8  # a layer's fp32 gradients unsharded
    p8 = _p8(precision="fp8")
    from primus_launch.projection.memory.params import arch_key

    lin = linear_params(arch_key(p8.model), 1, 1, 1, p8.chunk_layout()[0], n)
    assert lin == 8 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)
    fp8 = stage_memory(p8)[0]
    assert fp8.parameters_bytes - z1.parameters_bytes == pytest.approx(2 * lin, rel=1e-9)
    gather = stage_memory(_p8(precision="fp8", fp8_param_gather=True))[0]
    assert gather.parameters_bytes - z1.parameters_bytes == pytest.approx(0, abs=1)  # -1 + 1 per linear param
    mx = stage_memory(_p8(precision="fp8", fp8_recipe="mxfp8"))[0]
    assert mx.parameters_bytes - z1.parameters_bytes == pytest.approx(2 * (1 + 1 / 32) * lin, rel=1e-9)


def test_activation_offload_moves_layers_and_modules_to_host():
    """--cpu-offloading-num-layers N: N layers' activations of each micro-batch leave the GPU (one layer
    reloaded at a time); --offload-modules: the named modules' inputs (e.g. the core attention's q, k, v,
    the attention projection's input) leave it, but for the margin (megatron post_warmup_callback): one
    layer's groups, kept on the GPU."""
    p = _p70(training=dict(recompute=dict(granularity="none")))
    base = stage_memory(p)[0]
    la = layer_activation_bytes(LLAMA70, seq=8192, mbs=1, tp=8, sp=True)
    off = stage_memory(p.with_changes(training=dict(offload=dict(activation_layers=5))))[0]
    assert base.activations_bytes - off.activations_bytes == pytest.approx(4 * 5 * la.full, rel=1e-9)
    mods = stage_memory(p.with_changes(training=dict(offload=dict(activation_modules=("attn_proj", "core_attn")))))[0]
    d = dict(la.offloadable)
    assert base.activations_bytes - mods.activations_bytes == pytest.approx(
        (4 * 20 - 1) * (d["core_attn"] + d["attn_proj"]), rel=1e-9)


def test_cpu_offloading_layers_follow_te_offload_order():
    """--cpu-offloading-num-layers K (TE 2.13/2.14 cpu_offload.py DefaultOffloadSynchronizer, the source's
    own statement): with equal layers of T bytes the saved activations on the GPU peak at (L - K) T, at
    every step of the forward and the backward; a reloaded layer takes a released one's place, so a
    PP-1 plan's allocated peak drops by exactly K layers' activations (no reload transient on top)."""
    from primus_launch.projection.memory.offload import te_offload_alive, te_offload_peak

    for L, K in ((80, 40), (80, 20), (12, 1), (12, 11), (5, 3)):
        steps = te_offload_alive(L, K)
        assert max(len(a) for _, _, a in steps) == L - K
        assert all(j in a for _, j, a in steps)  # a layer's tensors are on the GPU when it runs
        assert te_offload_peak([3.0] * L, K) == (L - K) * 3.0
    # offloaded layers larger than the rest: the forward's first window of L - K layers is the peak, before
    # layer 0's release at layer L - K = 2 (finish_offload_map)
    assert te_offload_peak([8.0, 4.0, 2.0, 1.0], 2) == 12.0
    assert te_offload_peak([1.0, 2.0, 4.0, 8.0], 2) == 12.0
    p = _p70(parallel=dict(pp=1, tp=8), training=dict(recompute=dict(granularity="none")))
    base = stage_memory(p)[0]
    la = layer_activation_bytes(LLAMA70, seq=8192, mbs=1, tp=8, sp=True)
    for K in (20, 40):
        off = stage_memory(p.with_changes(training=dict(offload=dict(activation_layers=K))))[0]
        assert base.allocated_bytes - off.allocated_bytes == pytest.approx(K * la.full, rel=1e-9)
        assert off.transient_bytes == base.transient_bytes


def test_cp_comm_type_buffers_order():
    """Context-parallel attention buffers on top of the layer's backward: all-gathered K/V grow with the
    CP degree, the ring keeps two K/V chunks each way, Ulysses exchanges Q, K, V and the output."""
    from primus_launch.projection.memory.estimate import cp_comm_bytes

    kw = dict(seq=32768, mbs=1, tp=8, cp=8, a=2)
    kv = 2 * 32768 / 8 * 2 * 8 * 128 / 8
    assert cp_comm_bytes(LLAMA70, "allgather", **kw) == pytest.approx(8 * kv)
    assert cp_comm_bytes(LLAMA70, "p2p", **kw) == pytest.approx(4 * kv)
    assert cp_comm_bytes(LLAMA70, "a2a", **kw) == pytest.approx(kv + 2 * 2 * 32768 / 8 * 64 * 128 / 8)


def test_tuner_prefilter_honours_memory_basis():
    """tune(..., memory_basis=...) passes the basis to the pre-filter and the score: a plan whose reserved
    peak exceeds the usable capacity but whose allocated peak does not is kept on the allocated basis."""
    from primus_launch.tuner.search import default_prefilter, default_score

    plan = _p70()
    rep = estimate_memory(plan)
    cap = rep.capacity_bytes
    low = rep.band.low
    mid = (rep.reserved_peak_bytes + rep.allocated_peak_bytes) / 2 * (1 + low) + rep.outside_allocator_bytes
    margin = 1 - mid / cap  # between the two bases' band bottoms
    assert default_prefilter(margin, "reserved")(plan) is not None
    assert default_prefilter(margin, "allocated")(plan) is None
    assert default_score(margin, "allocated")(plan).memory.fits and not default_score(margin, "reserved")(plan).memory.fits


def test_transformer_impl_local_reads_as_the_local_spec_published():
    """``--transformer-impl local`` builds megatron-core's local spec (Megatron-LM d98e8a64dd ``gpt_builders.py``
    ``use_te = args.transformer_impl == "transformer_engine"``; ``models/backends.py`` ``LocalSpecProvider
    .core_attention`` = ``DotProductAttention``, the unfused attention keeping the ``s x s`` scores): the reader
    sets ``training.attention_backend`` local whatever ``--attention-backend`` says.  Published: Megatron-LM's
    functional tests ``gpt/gpt3_mcore_tp1_pp2`` / ``tp1_pp4`` (local spec, 12 x 512, 8 heads, seq 1024, MBS 4,
    one 8-H100 node) log mem-max-allocated-bytes 3,633,177,600 / 2,746,575,872 B at iteration 50 on the last rank; read as TE
    flash attention the projection was 29 % / 20 % short."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "scripts"), str(root / "scripts" / "validation")]
    import validate_memory as vm

    vm.load_gpus()
    cases = {c["id"]: c for c in json.loads((root / "scripts/validation/memory_cases.json").read_text())["cases"]}
    for pp in (2, 4):
        case = cases[f"mlm_functional_gpt_gpt3_mcore_tp1_pp{pp}"]
        plan = vm.plan_of_case(case)
        assert plan.training.attention_backend == "local"
        got = stage_memory(plan)[-1].allocated_bytes / 2**30
        assert got == pytest.approx(case["measured_peak"]["gib"], rel=0.05), pp


def test_mtp_module_under_selective_recompute_measured():
    """--recompute-granularity selective with an MTP module on megatron-core 0.16.1 (local spec, Llama-8B
    sizes, s 1024): the module's TransformerLayer is built from the same config, so --recompute-modules act
    in it as in a decoder layer -- the model with one MTP module minus the model without, both under the same
    modules, equals mtp_activation_bytes("none") less what the modules drop from a layer
    (``LayerActivations.selective``).  Before, the stage estimate took the core attention off the MTP layer
    whatever the modules (none of these recompute it)."""
    from primus_launch.projection.memory.activations import mtp_activation_bytes

    mods = ("layernorm", "mlp")
    base = ARCH.model_copy(update=dict(seq_length=1024))
    rc = dict(granularity="selective", modules=list(mods))
    got = {k: measure_step(_plan(base.model_copy(update=dict(mtp_num_layers=k)), rc, dict(tp=1)), 2,
                           fused_swiglu=True) for k in (0, 1)}
    arch = base.model_copy(update=dict(mtp_num_layers=1))
    la = layer_activation_bytes(arch, seq=1024, mbs=1, tp=1, sp=False, impl=MCORE_LOCAL)
    want = mtp_activation_bytes(arch, seq=1024, mbs=1, tp=1, sp=False, impl=MCORE_LOCAL) - (la.full - la.selective(mods))
    assert got[1]["activations"] - got[0]["activations"] == pytest.approx(want, rel=0.01)
    # the stage estimate charges the MTP module that: one chunk, one micro-batch in flight
    big = ARCH.model_copy(update=dict(num_layers=4))
    act = {k: stage_memory(_plan(big.model_copy(update=dict(mtp_num_layers=k)), rc, dict(tp=1)))[0].activations_bytes
           for k in (0, 1)}
    lb = layer_activation_bytes(big, seq=big.seq_length, mbs=1, tp=1, sp=False)
    mtp_b = mtp_activation_bytes(big.model_copy(update=dict(mtp_num_layers=1)), seq=big.seq_length, mbs=1, tp=1,
                                 sp=False) - (lb.full - lb.selective(mods))
    assert act[1] - act[0] == pytest.approx(mtp_b, rel=0.02)


def test_precision_aware_optimizer_with_cpu_offload_keeps_fp32_states(monkeypatch):
    """--use-precision-aware-optimizer with --optimizer-cpu-offload: megatron-core 0.16.1
    ``optimizer/__init__.py`` builds the HybridDeviceOptimizer with ``param_update_in_fp32=True`` and the plain
    ``Adam`` / ``CPUAdam`` classes, never with --exp-avg-dtype / --exp-avg-sq-dtype / --main-params-dtype (run
    here with the constructor replaced by a recorder); its ``_get_sub_optimizer_param_groups`` gives every bf16
    shard kept on the device an fp32 clone, and ``_set_sub_optimizer_grads`` a new fp32 gradient made from the
    bf16 ``decoupled_grad`` (both run on the CPU, fraction 0).  The model: ``(1 - f) x (4 + 8 + 4)`` bytes per
    local parameter whatever the state dtypes (it took bf16 moments and no gradient copy before)."""
    import megatron.core.optimizer as mopt
    import torch
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.optimizer.cpu_offloading.hybrid_optimizer import HybridDeviceOptimizer

    seen = {}

    class Stop(Exception):
        pass

    def record(param_groups, **kw):
        seen.update(kw)
        raise Stop

    import megatron.core.optimizer.optimizer_config as oc

    monkeypatch.setattr(oc, "is_te_min_version", lambda *a, **k: True)  # TE 2.14 (not installed here)
    monkeypatch.setattr(mopt, "HybridDeviceOptimizer", record)
    cfg = OptimizerConfig(optimizer="adam", lr=1e-4, bf16=True, use_distributed_optimizer=True,
                          use_precision_aware_optimizer=True, optimizer_cpu_offload=True,
                          optimizer_offload_fraction=0.75, exp_avg_dtype=torch.bfloat16,
                          exp_avg_sq_dtype=torch.bfloat16, main_grads_dtype=torch.bfloat16)
    w = torch.nn.Parameter(torch.zeros(4, 8, dtype=torch.bfloat16))
    with pytest.raises(Stop):
        mopt._get_megatron_optimizer_based_on_param_groups(cfg, model_chunks=[], param_groups=[{"params": [w]}])
    assert seen["param_update_in_fp32"] is True
    assert not {"exp_avg_dtype", "exp_avg_sq_dtype", "master_weight_dtype"} & set(seen)

    hdo = object.__new__(HybridDeviceOptimizer)
    hdo.param_groups, hdo.param_update_in_fp32 = [{"params": [w]}], True
    _groups, _gpu_groups, to_cpu, _back, to_fp32 = hdo._get_sub_optimizer_param_groups(0.0)
    assert to_fp32[w].dtype == torch.float32 and w not in to_cpu  # kept where the shard is, in fp32
    hdo.param_to_fp32_param, hdo.gpu_params_map_cpu_copy, hdo.cpu_optimizers = to_fp32, to_cpu, []
    w.decoupled_grad = torch.ones(4, 8, dtype=torch.bfloat16)
    hdo._set_sub_optimizer_grads()
    g32 = to_fp32[w].grad
    assert g32.dtype == torch.float32 and g32.untyped_storage().data_ptr() != w.decoupled_grad.untyped_storage().data_ptr()

    st = stage_memory(_p8(precision_aware_optimizer=True, main_grads_dtype="bf16", exp_avg_dtype="bf16",
                          exp_avg_sq_dtype="bf16", offload=dict(optimizer_fraction=0.75)))[0]
    n = st.num_parameters
    assert st.optimizer_bytes == pytest.approx(0.25 * (4 + 8 + 4) * n / 8, rel=1e-9)


@pytest.mark.parametrize("gated,act", [(False, "gelu"), (True, "silu")], ids=["gelu", "swiglu-fused"])
def test_expert_probs_multiply_keeps_the_activation_output(gated, act):
    """The routed experts' ``act(x) * probs`` (megatron-core 0.16.1 ``transformer/mlp.py`` with ``per_token_scale``,
    ``moe/experts.py`` ``bias_act_func``): megatron's own expert ``MLP`` run on the CPU with routing probabilities,
    the distinct ``[tokens, Fe]``-sized storages autograd keeps counted: a plain GeLU (the small MoE functional
    tests: ``--no-bias-gelu-fusion``, no bias) keeps fc1's output, the activation's output and fc2's input (3);
    the fused weighted SwiGLU fc1's ``2 Fe`` output and fc2's input (3 = 2 + 1) -- the model's ``g + 1`` plus
    :func:`weighted_activation_bytes` / (a tokens Fe).  Before, the GeLU experts' activation output was missing
    (the small MoE functional tests 4-8 % low)."""
    import torch
    import torch.nn.functional as F
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    from mcore_meta import init_fake_parallel
    from primus_launch.frameworks import mcore_cpu
    from primus_launch.projection.memory.activations import weighted_activation_bytes

    import torch._dynamo

    was = torch._dynamo.config.disable
    torch._dynamo.config.disable = True  # megatron's jit_fuser (torch.compile): eager saves the same tensors
    mcore_cpu.install()
    init_fake_parallel(1, 1)
    n, h, fe = 96, 64, 256
    cfg = TransformerConfig(num_layers=1, hidden_size=h, ffn_hidden_size=fe, num_attention_heads=4,
                            activation_func=F.silu if act == "silu" else F.gelu, gated_linear_unit=gated,
                            add_bias_linear=False, bias_activation_fusion=gated, params_dtype=torch.bfloat16,
                            bf16=True, use_cpu_initialization=True, perform_initialization=False,
                            gradient_accumulation_fusion=False, num_moe_experts=4, moe_ffn_hidden_size=fe)
    mlp = MLP(cfg, MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear), is_expert=True,
              ffn_hidden_size=fe)
    x = torch.randn(n, h, dtype=torch.bfloat16, requires_grad=True)
    probs = torch.rand(n, dtype=torch.float32, requires_grad=True)
    kept = {}

    def pack(t):
        if t.dim() == 2 and t.shape[0] == n and t.shape[1] in (fe, 2 * fe):
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            mlp(x, probs)
    finally:
        torch._dynamo.config.disable = was
    got = sum(kept.values()) / (2 * n * fe)
    arch = ModelArch(num_layers=2, hidden_size=h, ffn_hidden_size=fe, num_attention_heads=4, vocab_size=1024,
                     seq_length=n, num_experts=4, moe_router_topk=1, swiglu=gated, activation=act)
    extra = weighted_activation_bytes(arch, pairs=n, etp=1, a=2) / (2 * n * fe)
    assert got == (2 if gated else 1) + 1 + extra == 3
