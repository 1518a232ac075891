"""TorchTitan memory model vs torchtitan 0.3.0's own training step traced on the CPU.

Truth: :mod:`titan_trace` (torchtitan's model class, ``parallelize_llama`` with its TP/SP sharding,
FSDP2 and AC policies, ``cross_entropy_loss``, fused AdamW; fake process group, ``FakeTensorMode``,
torch's ``FSDPMemTracker``).  Shapes: Llama 3 8B blocks at real sizes (h 4096, F 14336, 32 heads / 8
KV heads, vocab 128256), 1-4 blocks, sequence 2048, micro-batch 1-2; the llama3 ``debugmodel``
flavor (h 256, vocab 2048) for block-dominated peaks.  The model is evaluated with
:data:`TITAN_CPU` (what the CPU kernels keep: the composite RMSNorm's fp32 copies, an SDPA kernel
that is not on SelectiveAC's save list); :data:`TITAN` differs only in those per-tensor terms.

Per term at the traced peak: parameters (fp32 shards + RoPE buffers), optimizer states, gradient
shards reduced so far, activations, and the transient rest (unsharded parameters, weight
gradients, reduce-scatter buffers, loss gradients); all within 3 % (they agree to the byte).
"""

from __future__ import annotations

import functools

import pytest

import titan_trace
from titan_trace import TitanCase
from primus_launch.adapters.torchtitan import arch_from_flavor
from primus_launch.plan import Plan
from primus_launch.projection.memory.estimate import titan_args, titan_stage_memory, estimate_memory
from primus_launch.projection.memory.titan import TITAN, TITAN_CPU, TitanImpl, layer_activation_bytes


# one trace per job shape in this file: the two-block cases of ``test_titan_block_activations_exact`` are the step
# cases ``ddp-noac``, ``tp2-fsdp4`` and ``tp2-fsdp4-op`` (TitanCase is frozen; the tests only read the result)
trace = functools.cache(titan_trace.trace)


def after_forward(c: TitanCase) -> dict:
    """The second step's categories once the loss is computed (``titan_trace.trace``'s ``after_forward``): from
    the whole step's trace where a step test of this file traces the case anyway, else from a trace that ends
    there (``forward_only``: the same bytes, the step's backward and optimizer not run)."""
    return (trace(c) if c in STEP_CASES else trace(c, forward_only=True))["after_forward"]


def plan_of(c: TitanCase) -> Plan:
    arch = arch_from_flavor(c.model, c.flavor).model_copy(update=dict(num_layers=c.layers, seq_length=c.seq))
    if isinstance(c.ac, int):
        rc = dict(granularity="full", method="every_n", num_layers=c.ac)
    else:
        rc = {"none": dict(granularity="none"), "full": dict(granularity="full", method="uniform", num_layers=1),
              "op": dict(granularity="op")}[c.ac]
    return Plan(model=arch, parallel=dict(tp=c.tp, cp=c.cp, dp_sharding="full", dp_replicate=c.dp_replicate,
                                          sequence_parallel=c.tp > 1,
                                          cp_comm_type="allgather" if c.attn == "flex" else "p2p"),
                training=dict(global_batch_size=c.mbs * c.dp_shard * c.dp_replicate, micro_batch_size=c.mbs,
                              recompute=rc, attention_backend="auto" if c.attn == "flex" else "flash",
                              precision="fp8" if c.float8 else "bf16", fp8_recipe=c.float8),
                cluster=dict(gpus_per_node=c.world), source=dict(framework="torchtitan"))


CASES = {
    "fsdp8-noac": TitanCase(),
    "fsdp8-full": TitanCase(ac="full", layers=4),
    "fsdp8-op": TitanCase(ac="op"),
    "fsdp8-op-mbs2": TitanCase(ac="op", mbs=2),
    "fsdp8-every2": TitanCase(ac=2, layers=4),
    "ddp-noac": TitanCase(dp_shard=1, dp_replicate=1),
    "ddp-full": TitanCase(dp_shard=1, ac="full", layers=4),
    "hsdp2x4": TitanCase(dp_replicate=2, dp_shard=4),
    "tp2-fsdp4": TitanCase(tp=2, dp_shard=4),
    "tp2-fsdp4-op": TitanCase(tp=2, dp_shard=4, ac="op"),
    "debug-full": TitanCase(flavor="debugmodel", layers=4, ac="full"),
    "debug-op": TitanCase(flavor="debugmodel", layers=4, ac="op"),
    # context parallelism: torchtitan 0.3.0's FlexAttention (shape-level stand-in of torch's flex op,
    # titan_trace._FlexStandIn) with K/V all-gathered, SDPA with torch's ring attention (the
    # flash-attention op a GPU dispatches, which the CP dispatcher has its rule for)
    "cp2-flex": TitanCase(cp=2, dp_shard=4, attn="flex", seq=1024),
    "cp2-flex-full": TitanCase(cp=2, dp_shard=4, attn="flex", ac="full", layers=4, seq=1024),
    "cp2-ring": TitanCase(cp=2, dp_shard=4, flash=True),
    "cp4-ring-op": TitanCase(cp=4, dp_shard=2, flash=True, ac="op", seq=4096),
    # torchtitan's Float8LinearConverter (torchao 0.18.0 Float8Linear keeps the bf16 input and weight for
    # backward; its fp8 casts are transients below the step's peak)
    "float8-rowwise": TitanCase(float8="rowwise", flash=True),
    "float8-tensorwise-op": TitanCase(float8="tensorwise", flash=True, ac="op"),
    "float8-rowwise-full-debug": TitanCase(flavor="debugmodel", layers=4, float8="rowwise", flash=True, ac="full"),
}
QWEN3_MOE_STEP = TitanCase(model="qwen3", flavor="debugmodel_moe", layers=2, seq=512, dp_shard=8, flash=True)
STEP_CASES = frozenset(CASES.values()) | {QWEN3_MOE_STEP}  # the cases whose whole step a test reads
# the flash-attention op is on SelectiveAC's save list (the CPU SDPA kernel is not)
IMPL = {name: TitanImpl(norm_bytes=8, sdpa_on_save_list=True) for name, c in CASES.items() if c.flash}


def _cat(snap: dict, name: str) -> int:
    return sum(v for k, v in snap.items() if getattr(k, "value", k) == name)


@pytest.mark.parametrize("name", list(CASES))
def test_titan_step_per_term_within_3pct(name):
    c = CASES[name]
    got = trace(c)
    st = titan_stage_memory(*titan_args(plan_of(c)), IMPL.get(name, TITAN_CPU))[0]
    pk = got["peak_snapshot"]
    params = _cat(pk, "Sharded Param") + _cat(pk, "Buffer")
    opt, grads, acts = _cat(pk, "OptState"), _cat(pk, "Sharded Grad"), _cat(pk, "Activation")
    rest = got["peak"] - params - opt - grads - acts
    # static terms: exact
    assert st.parameters_bytes == pytest.approx(params, rel=1e-4)
    assert st.optimizer_bytes == pytest.approx(opt, rel=1e-4)
    assert _cat(got["static"], "Sharded Param") + _cat(got["static"], "Buffer") == pytest.approx(params, rel=1e-9)
    # at the peak
    assert st.allocated_bytes == pytest.approx(got["peak"], rel=0.03)
    assert st.gradients_bytes == pytest.approx(grads, rel=0.03, abs=2**20)
    assert st.activations_bytes == pytest.approx(acts, rel=0.03, abs=2**20)
    assert st.transient_bytes == pytest.approx(rest, rel=0.03, abs=2**20)


@pytest.mark.parametrize("ac", ["none", "op", "full"])
@pytest.mark.parametrize("tp", [1, 2])
def test_titan_block_activations_exact(ac, tp):
    """Two blocks minus one block, after the forward (loss included in both): the bytes one
    torchtitan block keeps under each AC policy."""
    one = after_forward(TitanCase(layers=1, ac=ac, tp=tp, dp_shard=4 if tp > 1 else 1))
    two = after_forward(TitanCase(layers=2, ac=ac, tp=tp, dp_shard=4 if tp > 1 else 1))
    got = _cat(two, "Activation") - _cat(one, "Activation")
    arch = arch_from_flavor("llama3", "8B")
    la = layer_activation_bytes(arch, seq=2048, mbs=1, tp=tp, ac=ac, impl=TITAN_CPU, attn="sdpa")
    assert la.kept == pytest.approx(got, rel=2e-3)


@pytest.mark.parametrize("ac", ["none", "op"])
def test_qwen3_dense_block_activations_exact(ac):
    """A torchtitan qwen3 0.6B dense block (per-head q / k RMSNorm, ``nq d`` = 2048 != ``h`` = 1024; flash
    attention as on a GPU, the CPU's composite RMSNorm) without AC and under SelectiveAC: two blocks minus one
    after the forward equal the model's block to the trace's RNG seeds (MEMORY.md round 29)."""
    impl = TitanImpl(norm_bytes=8, sdpa_on_save_list=True)
    arch = arch_from_flavor("qwen3", "0.6B")
    one, two = (after_forward(TitanCase(model="qwen3", flavor="0.6B", layers=n, seq=256, dp_shard=1, flash=True,
                                        ac=ac)) for n in (1, 2))
    got = _cat(two, "Activation") - _cat(one, "Activation")
    la = layer_activation_bytes(arch, seq=256, mbs=1, tp=1, ac=ac, impl=impl, attn="sdpa")
    assert la.kept == pytest.approx(got, abs=64)


def test_gpu_kernels_and_compile_change_only_their_terms():
    """TITAN (CUDA fused RMSNorm: bf16 input; flash SDPA saved by op-SAC) vs the CPU trace's kernels,
    and compiled vs eager: closed-form differences per block."""
    arch = arch_from_flavor("llama3", "8B")
    s, h, F = 8192, 4096, 14336
    cpu = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, impl=TITAN_CPU)
    gpu = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, impl=TITAN)
    assert cpu.full - gpu.full == 2 * 6 * s * h  # two norms keep 2 instead of 8 bytes per element
    op_cpu = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, ac="op", impl=TITAN_CPU, attn="sdpa")
    op_gpu = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, ac="op", impl=TITAN, attn="sdpa")
    assert op_gpu.kept - op_cpu.kept == 2 * s * h + 4 * 32 * s  # SDPA output + fp32 log-sum-exp
    flex = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, ac="op", impl=TITAN, attn="flex")
    assert flex.kept - op_gpu.kept == 4 * 32 * s  # flex also keeps its fp32 max_scores
    comp = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, compiled=True, impl=TITAN)
    assert gpu.full - comp.full == 2 * s * F  # compiled: silu(w1) recomputed, w1/w3 outputs and w2's input kept


def test_compiled_block_keeps_what_inductors_partitioner_saves():
    """torch.compile of a torchtitan Llama 3 8B block (meta device, real sizes, s 2048): the tensors
    inductor's partitioner passes from the forward to the backward graph (titan_trace.compiled_block_saved_bytes)
    equal the model's compiled block, which keeps a_sbF less than eager (silu(w1) recomputed)."""
    from titan_trace import compiled_block_saved_bytes

    arch = arch_from_flavor("llama3", "8B")
    got = compiled_block_saved_bytes("8B", seq=2048, mbs=1)
    la = layer_activation_bytes(arch, seq=2048, mbs=1, tp=1, compiled=True, impl=TITAN, attn="sdpa")
    assert la.full == pytest.approx(got, rel=1e-3)
    eager = layer_activation_bytes(arch, seq=2048, mbs=1, tp=1, compiled=False, impl=TITAN, attn="sdpa")
    assert eager.full - got == pytest.approx(2 * 2048 * 14336, rel=1e-3)


def test_compiled_qwen3_dense_block_keeps_one_attention_output():
    """torch.compile of a torchtitan qwen3 0.6B dense block (meta device, real sizes, s 512; per-head q / k norms,
    ``nq d`` = 2048 != ``h`` = 1024): the tensors inductor's partitioner passes to the backward equal the model's
    compiled block -- wo's input is a view of the flash output's ``[b, s, heads, d]`` storage, so the attention
    output counts once (the model counted it twice for qwen3 until round 29: +``a sb nq d`` per block)."""
    from titan_trace import compiled_block_saved_bytes

    arch = arch_from_flavor("qwen3", "0.6B")
    got = compiled_block_saved_bytes("0.6B", seq=512, mbs=1, model="qwen3")
    la = layer_activation_bytes(arch, seq=512, mbs=1, tp=1, compiled=True, impl=TITAN, attn="sdpa")
    assert la.full == pytest.approx(got, abs=64)  # the trace's two uint64 RNG seeds


def test_compiled_block_keeps_the_repeat_kv_copies():
    """torchtitan up to v0.2.1 (and Primus v0.5.0's 5fb7cc2e) expanded K and V to the query heads with
    ``repeat_kv`` before SDPA: inductor's partitioner keeps the expanded copies (it does not recompute the
    expansion in the backward), 2 (nq - nkv) d per token more than 0.3.0's ``enable_gqa`` block -- the traced
    Llama 3 8B block (meta device, s 2048) against the model's ``sdpa_repeat_kv`` block, compiled; eager
    SDPA's autograd node keeps its (expanded) inputs the same way."""
    from titan_trace import compiled_block_saved_bytes

    arch = arch_from_flavor("llama3", "8B")
    s = 2048
    got = compiled_block_saved_bytes("8B", seq=s, mbs=1, repeat_kv=True)
    la = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, compiled=True, impl=TITAN, attn="sdpa_repeat_kv")
    assert la.full == pytest.approx(got, rel=1e-3)
    gqa = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, compiled=True, impl=TITAN, attn="sdpa")
    assert la.full - gqa.full == 2 * s * 2 * (32 - 8) * 128
    eager = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, impl=TITAN, attn="sdpa_repeat_kv")
    eager_gqa = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, impl=TITAN, attn="sdpa")
    assert eager.full - eager_gqa.full == la.full - gqa.full
    # SelectiveAC recomputes the copies: the op-SAC blocks differ only by wk's output, which the TOML-era
    # block's separate projections recompute (test_compiled_op_sac_block_with_separate_projections)
    op = dict(seq=s, mbs=1, tp=1, ac="op", impl=TITAN)
    assert (layer_activation_bytes(arch, attn="sdpa", **op).kept
            - layer_activation_bytes(arch, attn="sdpa_repeat_kv", **op).kept) == 2 * s * 8 * 128


def test_compiled_op_sac_block_keeps_only_what_its_backward_reads():
    """torch.compile of a torchtitan Llama 3 8B block wrapped by torchtitan's own SelectiveAC (meta device,
    s 2048): inductor's partitioner honours the policy's tags (PREFER_RECOMPUTE ops are recomputed) but saves
    a MUST_SAVE output only where the backward graph reads it -- block input, wqkv's and w1's outputs, the
    flash output and log-sum-exp; w2's output (the 5th mm, on the list) feeds only the block output and is not
    kept, where eager SelectiveAC caches it.  The model's compiled op block equals the traced bytes."""
    from titan_trace import compiled_block_saved_bytes

    arch = arch_from_flavor("llama3", "8B")
    s = 2048
    got = compiled_block_saved_bytes("8B", seq=s, mbs=1, ac="op")
    kw = dict(seq=s, mbs=1, tp=1, ac="op", impl=TITAN, attn="sdpa")
    la = layer_activation_bytes(arch, compiled=True, **kw)
    assert la.kept == pytest.approx(got, rel=1e-3)
    assert got == pytest.approx(2 * s * (4096 + 6144 + 4096 + 14336) + 4 * 32 * s, rel=1e-3)
    assert layer_activation_bytes(arch, compiled=False, **kw).kept - la.kept == 2 * s * 4096


def test_compiled_op_sac_block_under_tp_drops_w2_and_its_reduce_scatter_output():
    """The same under TP 2 with sequence parallelism (torchtitan's ``parallelize_llama``: DTensor weights, SelectiveAC,
    FSDP2; fake process group): the partitioner keeps the block input (sequence shard), wqkv's and w1's outputs at
    the full sequence, the attention output / lse of the local heads and wo's reduce-scatter output, not w2's
    output nor its reduce-scatter output -- the model's compiled op block under TP, to the byte."""
    from titan_trace import compiled_tp_block_saved_bytes

    arch = arch_from_flavor("llama3", "8B")
    s, t = 2048, 2
    got = compiled_tp_block_saved_bytes("8B", seq=s, tp=t)
    la = layer_activation_bytes(arch, seq=s, mbs=1, tp=t, ac="op", compiled=True, impl=TITAN, attn="sdpa")
    assert la.kept == pytest.approx(got, rel=1e-3)
    eager = layer_activation_bytes(arch, seq=s, mbs=1, tp=t, ac="op", compiled=False, impl=TITAN, attn="sdpa")
    assert eager.kept - la.kept == 2 * s * 4096 + 2 * s * 4096 / t


def test_compiled_op_sac_block_with_separate_projections():
    """torchtitan before 'Fused QKV GQAttention' (2026-04-16; every TOML release, ``sdpa_repeat_kv`` plans) ran
    three q / k / v linears (0.3.0's own ``QKVLinear``, traced here under SelectiveAC + compile): the every-
    second-mm rule then saves wq (1) and wv (3) and recomputes wk (2); the model's TOML-era op block equals the
    traced bytes."""
    from titan_trace import compiled_block_saved_bytes

    arch = arch_from_flavor("llama3", "8B")
    s = 2048
    got = compiled_block_saved_bytes("8B", seq=s, mbs=1, ac="op", fuse_qkv=False)
    la = layer_activation_bytes(arch, seq=s, mbs=1, tp=1, ac="op", compiled=True, impl=TITAN, attn="sdpa_repeat_kv")
    assert la.kept == pytest.approx(got, rel=1e-3)
    assert got == pytest.approx(2 * s * (4096 + 4096 + 1024 + 4096 + 14336) + 4 * 32 * s, rel=1e-3)


def _titan_plan(**kw) -> Plan:
    arch = arch_from_flavor("llama3", "8B")
    par = dict(dp_sharding="full")
    par.update(kw.pop("parallel", {}))
    tr = dict(global_batch_size=16, micro_batch_size=2, recompute=dict(granularity="op"))
    tr.update(kw.pop("training", {}))
    return Plan(model=arch, parallel=par, training=tr, cluster=dict(gpu="h100-sxm-96gb-500w"),
                source=dict(framework="torchtitan"))


def test_cp_shards_fsdp_over_dp_shard_times_cp():
    """torchtitan's FSDP mesh is dp_shard x cp: with 8 GPUs, FSDP 4 x CP 2 shards static memory 8 ways."""
    base = estimate_memory(_titan_plan())
    cp2 = estimate_memory(_titan_plan(parallel=dict(cp=2), training=dict(global_batch_size=8)))
    assert cp2.stages[0].parameters_bytes == base.stages[0].parameters_bytes
    assert cp2.stages[0].optimizer_bytes == base.stages[0].optimizer_bytes


def test_pp_keeps_unsharded_params_and_fp32_grads():
    """PP with FSDP: the stage's bf16 parameters stay unsharded and fp32 gradients accumulate
    unsharded across micro-batches: 6 bytes per stage parameter on top of the sharded state."""
    p = _titan_plan(parallel=dict(pp=2), training=dict(global_batch_size=32, micro_batch_size=1,
                                                      recompute=dict(granularity="full")))
    st = estimate_memory(p, memory_basis="allocated").stages[0]
    assert st.transient_bytes >= 6 * st.num_parameters


def test_memory_basis_allocated_below_reserved_and_named():
    p = _titan_plan()
    res = estimate_memory(p, memory_basis="reserved")
    alloc = estimate_memory(p, memory_basis="allocated")
    assert alloc.memory_basis == "allocated" and res.memory_basis == "reserved"
    assert alloc.allocated_peak_bytes == res.allocated_peak_bytes
    assert alloc.peak_bytes_per_gpu == res.allocated_peak_bytes + res.outside_allocator_bytes
    assert res.peak_bytes_per_gpu == res.reserved_peak_bytes + res.outside_allocator_bytes
    assert res.reserved_peak_bytes > res.allocated_peak_bytes
    assert sum(res.breakdown.values()) == res.peak_bytes_per_gpu
    assert sum(alloc.breakdown.values()) == alloc.peak_bytes_per_gpu


# deepseek_v3's first block is dense: its traces start at block 1 (first_layer), so that one and two blocks are MoE
# blocks and the second minus the first is block 2 -- the block the 2- and 3-block traces from block 0 differ by
@pytest.mark.parametrize("model,flavor,first", [("qwen3", "debugmodel_moe", 0), ("deepseek_v3", "debugmodel", 1)],
                         ids=["qwen3-moe", "deepseek-mla-moe"])
def test_titan_moe_block_activations(model, flavor, first):
    """torchtitan MoE blocks (qwen3: GQA with per-head q/k RMSNorm, 64 experts top-8; deepseek_v3: MLA
    with its latent kv norm, 8 experts top-3 + a shared expert) through parallelize_qwen3 /
    parallelize_deepseekv3 under FakeTensorMode (attention as the fused GPU kernels keep it: flash, or
    cuDNN-like for MLA's d_qk != d_v): one more block's bytes after the forward equal the model's MoE block
    (router scores, top-k and dispatch indices, permuted tokens, grouped-GEMM w1/w3/silu/w2 tensors, the
    combine's fp32 copy, shared expert)."""
    impl = TitanImpl(norm_bytes=8, sdpa_on_save_list=True)
    got = [after_forward(TitanCase(model=model, flavor=flavor, layers=n, seq=512, dp_shard=8, flash=True,
                                   first_layer=first)) for n in (1, 2)]
    per = _cat(got[1], "Activation") - _cat(got[0], "Activation")
    arch = arch_from_flavor(model, flavor)
    la = layer_activation_bytes(arch, seq=512, mbs=1, tp=1, impl=impl, moe=True, attn="sdpa")
    assert la.full == pytest.approx(per, rel=1e-3)


def test_titan_moe_step_qwen3():
    """A qwen3 MoE step (2 blocks, FSDP 8, no AC): parameters (with qwen3's fp32 cos|sin RoPE caches),
    optimizer, gradients and activations at the traced peak within 3 %, the total too."""
    c = QWEN3_MOE_STEP
    got = trace(c)
    st = titan_stage_memory(*titan_args(plan_of(c)), TitanImpl(norm_bytes=8, sdpa_on_save_list=True))[0]
    pk = got["peak_snapshot"]
    assert st.parameters_bytes == pytest.approx(_cat(pk, "Sharded Param") + _cat(pk, "Buffer"), rel=1e-4)
    assert st.optimizer_bytes == pytest.approx(_cat(pk, "OptState"), rel=1e-4)
    assert st.gradients_bytes == pytest.approx(_cat(pk, "Sharded Grad"), rel=0.03)
    assert st.activations_bytes == pytest.approx(_cat(pk, "Activation"), rel=0.03)
    assert st.allocated_bytes == pytest.approx(got["peak"], rel=0.03)


def test_compiled_loss_keeps_the_logits_and_writes_a_bf16_gradient():
    """torchtitan's ``cross_entropy_loss`` torch.compile'd (``components/loss.py`` ``build_cross_entropy_loss``;
    inductor on the CPU): the forward allocates only two fp32 values per token beside the scalar loss (it keeps
    the bf16 logits it was given), the backward one bf16 logits-sized gradient -- what
    :func:`titan_loss_bytes` states; eager, the loss keeps fp32 log-probabilities and its backward two fp32
    logits-sized tensors.  A plan with ``compile_loss`` differs from one without by exactly that."""
    import re

    import torch
    from torch._inductor.utils import run_and_get_code
    from torchtitan.components.loss import cross_entropy_loss

    from primus_launch.projection.memory.estimate import titan_loss_bytes

    b, n, v = 2, 16, 512
    x = torch.randn(b, n, v, dtype=torch.bfloat16, requires_grad=True)
    t = torch.randint(0, v, (b, n))
    torch._dynamo.reset()
    f = torch.compile(cross_entropy_loss)
    _, codes = run_and_get_code(lambda: f(x, t).backward())
    torch._dynamo.reset()
    fw, bw = ([(tuple(int(d) for d in s.split(",") if d.strip()), dt)
               for s, dt in re.findall(r"empty_strided_cpu\(\((.*?)\), \(.*?\), (torch\.\w+)\)", c)] for c in codes)
    big = [(s, dt) for s, dt in fw + bw if len(s) > 1 and s[1] == v]
    assert big == [((b * n, v), "torch.bfloat16")]  # the backward's gradient, nothing logits-sized in the forward
    assert sum(s[0] * 4 for s, dt in fw if dt == "torch.float32" and len(s) == 2) == 8 * b * n
    kept, grad = titan_loss_bytes(sb=b * n, vocab=v)
    assert (kept, grad) == (2 * b * n * v + 8 * b * n, 2 * b * n * v)
    arch = arch_from_flavor("llama3", "8B").model_copy(update=dict(num_layers=2, seq_length=8192))
    p = Plan(model=arch, parallel=dict(dp_sharding="full"), cluster=dict(gpus_per_node=8),
             training=dict(global_batch_size=16, micro_batch_size=2, compile=True), source=dict(framework="torchtitan"))
    eager = titan_stage_memory(*titan_args(p), TITAN)[0]
    comp = titan_stage_memory(*titan_args(p.with_changes(training=dict(compile_loss=True))), TITAN)[0]
    sb, V = 2 * 8192, arch.vocab_size
    # the loss backward's level: fp32 log-probs + two fp32 gradients eager, bf16 logits + stats + a bf16 gradient
    assert eager.allocated_bytes - comp.allocated_bytes == pytest.approx((4 + 8) * sb * V - (2 * sb * V + 8 * sb + 2 * sb * V),
                                                                         rel=1e-6)
