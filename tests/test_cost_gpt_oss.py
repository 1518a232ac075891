"""GPT-OSS physics of the dry-run cost model (issue 15), checked against megatron-core's own functions.

Megatron-core's unfused RoPE, TEGroupedMLP's per-expert FC2 bias and the clamp before the fused
quick-GeGLU are traced on meta tensors under a dispatch mode: every non-view ATen op is one kernel on
the GPU, and its tensor bytes (inputs + output) are its HBM traffic.  The cost model's constants must
match those traces; the layer lists must carry them exactly where Megatron runs them.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.projection.cost import elementwise_bytes as eb
from primus_launch.projection.cost import roofline as rl


class _Ops(TorchDispatchMode):
    """Records (op, bytes in, bytes out) of every non-view ATen op, counting only the tensors of at
    least ``min_numel`` elements (the activations, not the per-expert biases or broadcast tables)."""

    def __init__(self, min_numel: int = 0):
        super().__init__()
        self.ops: list[tuple[str, int, int]] = []
        self.min_numel = min_numel

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not func.is_view:
            def nb(x):
                big = isinstance(x, torch.Tensor) and x.numel() >= self.min_numel
                return x.numel() * x.element_size() if big else 0
            leaves = torch.utils._pytree.tree_leaves
            self.ops.append((str(func), sum(nb(a) for a in leaves((args, kwargs))), sum(nb(o) for o in leaves(out))))
        return out


def _traced(fn, grad, min_numel: int = 0):
    with _Ops(min_numel) as f:
        y = fn()
    g = torch.randn_like(y) if grad is None else grad
    with _Ops(min_numel) as b:
        y.backward(g)
    return f.ops, b.ops


def test_megatron_unfused_rope_matches_rope_utils():
    """``_apply_rotary_pos_emb_bshd`` with mscale != 1 (YaRN): 12 forward kernels (6 on the small freqs),
    24 B per element of q/k; backward 7 kernels, 28 B per element (ROPE_MEGATRON_UNFUSED)."""
    from megatron.core.models.common.embeddings.rope_utils import _apply_rotary_pos_emb_bshd

    s, b, h, d = 64, 2, 4, 32
    t = torch.randn(s, b, h, d, dtype=torch.bfloat16, device="meta", requires_grad=True)
    freqs = torch.randn(s, 1, 1, d, device="meta")
    # count the q/k-sized tensors (and their halves), not the s x d cos / sin tables
    fwd, bwd = _traced(lambda: _apply_rotary_pos_emb_bshd(t, freqs, mscale=1.35), None, t.numel() // 2)
    nb_f, nb_b, kf, kb = eb.ROPE_MEGATRON_UNFUSED
    assert (len(fwd), len(bwd)) == (kf, kb)
    assert sum(i + o for _, i, o in fwd) / t.numel() == pytest.approx(nb_f)
    assert sum(i + o for _, i, o in bwd) / t.numel() == pytest.approx(nb_b)


@pytest.mark.parametrize("probs_dtype", ["bf16", "fp32"])
def test_te_grouped_mlp_apply_bias_matches_experts_py(probs_dtype):
    """TEGroupedMLP._apply_bias over E experts.  bf16 probs (alltoall / allgather dispatchers): 2E+1
    forward kernels moving 12 B per output element; backward 4E+2 autograd kernels moving 16 B, plus
    Megatron DDP's ``main_grad.add_`` of the FC1 and FC2 bias of each expert (2E) = EXPERT_BIAS_BYTES
    and the row's (2E+1, 6E+2) kernels.  fp32 probs (DeepEP / HybridEP deliver them): the chain runs in
    fp32 and casts back, 28 B forward in 2E+2 kernels, 40 B backward in 6E+3 (+ the 2E DDP bias hooks)
    = EXPERT_BIAS_BYTES_FP32_PROBS."""
    from megatron.core.transformer.moe.experts import TEGroupedMLP

    E, n, h = 3, 8, 16
    fp32 = probs_dtype == "fp32"
    out = torch.randn(E * n, h, dtype=torch.bfloat16, device="meta", requires_grad=True)
    biases = [torch.randn(h, dtype=torch.bfloat16, device="meta", requires_grad=True) for _ in range(E)]
    probs = torch.randn(E * n, 1, dtype=torch.float32 if fp32 else torch.bfloat16, device="meta",
                        requires_grad=True)
    grad = torch.randn(E * n, h, dtype=torch.bfloat16, device="meta")
    fwd, bwd = _traced(lambda: TEGroupedMLP._apply_bias(out, biases, [n] * E, probs), grad, n * h)
    fb, bb = eb.EXPERT_BIAS_BYTES_FP32_PROBS if fp32 else eb.EXPERT_BIAS_BYTES
    if fp32:
        assert len(fwd) == 2 * E + 2 and len(bwd) == 6 * E + 3
    else:
        assert len(fwd) == 2 * E + 1 and len(bwd) + 2 * E == 6 * E + 2
    assert sum(i + o for _, i, o in fwd) / (E * n * h) == pytest.approx(fb)
    assert sum(i + o for _, i, o in bwd) / (E * n * h) == pytest.approx(bb)


def test_activation_clamp_matches_fused_bias_geglu():
    """weighted_bias_quick_geglu_impl with clamp_value: before the fused kernel, clamp + clamp + cat
    (16 B per output element f); their backward 30 B per f in 9 kernels (ACT_CLAMP; the 4th forward
    kernel is the linear-offset tensor's host-to-device copy, which a meta trace does not show)."""
    import megatron.core.fusions.fused_bias_geglu as fbg

    class _FusedKernel:  # the torch.compile'd weighted quick-GeGLU itself is priced as ACT_FUSED
        @staticmethod
        def apply(inp, w, fp8, off):
            return inp[..., : inp.shape[-1] // 2]

    n, f = 8, 16
    x = torch.randn(n, 2 * f, dtype=torch.bfloat16, device="meta", requires_grad=True)
    w = torch.randn(n, 1, dtype=torch.bfloat16, device="meta")
    orig = fbg.WeightedQuickGeGLUFunction
    fbg.WeightedQuickGeGLUFunction = _FusedKernel
    try:
        fwd, bwd = _traced(lambda: fbg.weighted_bias_quick_geglu_impl(x, None, w, False, 1.0, 7.0), None, n * f)
    finally:
        fbg.WeightedQuickGeGLUFunction = orig
    bwd = [o for o in bwd if "slice_backward" not in o[0]]   # the stand-in's own slice
    fb, bb, kf, kb = eb.ACT_CLAMP
    assert len(fwd) == kf - 1 and len(bwd) == kb
    assert sum(i + o for _, i, o in fwd) / (n * f) == pytest.approx(fb)
    assert sum(i + o for _, i, o in bwd) / (n * f) == pytest.approx(bb)


def _oss(bias: bool = True, clamp: float | None = 7.0, softmax: str = "learnable", backend: str = "auto") -> Plan:
    m = ModelArch(num_layers=4, hidden_size=2880, ffn_hidden_size=2880, num_attention_heads=64, num_query_groups=8,
                  head_dim=64, vocab_size=201088, seq_length=4096, swiglu=True, activation="quick_gelu",
                  activation_clamp=clamp, add_bias_linear=bias, position_embedding="yarn", softmax_type=softmax,
                  window_size=127, window_layer_pattern=(1, 0, 1, 0), num_experts=128, moe_router_topk=4,
                  moe_ffn_hidden_size=2880)
    return Plan(model=m, parallel=Parallelism(ep=8), training=Training(global_batch_size=64, micro_batch_size=1,
                                                                         attention_backend=backend),
                cluster=Cluster(gpu="h100-sxm", num_nodes=1))


def test_gpt_oss_layer_lists_the_bias_clamp_and_unfused_bda():
    """With biases (TEGroupedMLP): the per-expert bias row over every routed row (T*k per GPU with balanced
    routing) and an unfused bias-dropout-add; the clamp row over the same rows x f; none of them without."""
    ops = rl.layer_op_times(_oss())["moe"]
    by = {o[0].split(" (")[0] if o[0].startswith("experts FC2") else o[0]: o for o in ops}
    rows, h, f, local = 4096 * 4, 2880, 2880, 128 // 8
    bias = next(o for o in ops if o[0].startswith("experts FC2 bias x probs"))
    assert bias[4][3] == pytest.approx(eb.EXPERT_BIAS_BYTES[0] * rows * h)
    clamp = next(o for o in ops if "activation clamp" in o[0])
    assert clamp[4][3] == pytest.approx(eb.ACT_CLAMP[0] * rows * f)
    assert "residual add (unfused bias + dropout + add)" in by
    assert any(o[0] == "RoPE (Megatron unfused: YaRN mscale)" for o in ops)
    k_bias = rl.layer_op_times(_oss())["_kernels"]["moe"]
    plain = rl.layer_op_times(_oss(bias=False, clamp=None))
    names = [o[0] for o in plain["moe"]]
    assert not any(n.startswith("experts FC2 bias") or "clamp" in n for n in names)
    assert "residual add (bias-dropout-add)" in names
    kf = k_bias[0] - plain["_kernels"]["moe"][0]
    assert kf == (2 * local + 1) + eb.ACT_CLAMP[2] + 1   # bias row, clamp row, the unfused BDA's second kernel


def test_sinks_keep_te_on_cudnn_fused_attention():
    """TE disables FlashAttention for softmax_type off-by-one / learnable: auto and fused run cuDNN fused
    attention, unfused the unfused path; --attention-backend flash leaves TE no backend (Megatron turns the
    other two off), a plan error naming the field; vanilla softmax with flash stays on FlashAttention-3."""
    from primus_launch.plan import PlanError
    from primus_launch.projection.cost.framework import profile_of

    assert profile_of(_oss(), "hopper").attention == "cudnn"
    assert profile_of(_oss(backend="fused"), "hopper").attention == "cudnn"
    assert profile_of(_oss(backend="unfused"), "hopper").attention == "unfused"
    assert profile_of(_oss(softmax="vanilla", backend="flash"), "hopper").attention == "fa3"
    with pytest.raises((PlanError, ValueError), match="training.attention_backend"):
        _oss(backend="flash")


def test_megatron_adapter_reads_the_activation_clamp():
    """--activation-func-clamp-value becomes model.activation_clamp (no longer an 'unmodelled' flag)."""
    from primus_launch.adapters.megatron import plan_from_argv

    argv = ("--num-layers 2 --hidden-size 256 --ffn-hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            "--vocab-size 1000 --micro-batch-size 1 --global-batch-size 8 --quick-geglu "
            "--activation-func-clamp-value 7.0").split()
    plan = plan_from_argv(argv)
    assert plan.model.activation_clamp == 7.0 and plan.model.activation == "quick_gelu"
    assert "--activation-func-clamp-value" not in [u.flag for u in plan.source.unmodelled]


def test_sinks_are_reported_not_modelled_per_framework():
    """Attention sinks have no public training-kernel measurement: every projection of a model with them
    carries a 'not modelled' warning naming how its framework runs them (TE cuDNN; torchtitan's post-kernel
    rescale), and the sliding window when the model has one; vanilla softmax carries none."""
    from primus_launch.plan import Source
    from primus_launch.projection.cost.flags import unmodelled_flags

    def sink_warnings(plan: Plan) -> list[str]:
        return [u.effect for u in unmodelled_flags(plan) if u.flag == "model.softmax_type"]

    (te,) = sink_warnings(_oss())
    assert "not modelled" in te and "cuDNN" in te and "sliding window" in te
    titan = _oss().model_copy(update={"source": Source(framework="torchtitan")})
    (tt,) = sink_warnings(titan)
    assert "not modelled" in tt and "apply_attention_sink_rescale" in tt
    assert sink_warnings(_oss(softmax="vanilla")) == []
