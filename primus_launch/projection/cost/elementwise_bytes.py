"""Bytes per element and kernel counts of the element-wise ops of a layer (norms, activations, RoPE, the
experts' bias, the activation clamp, cross-entropy), fused vs eager, each with the framework code it was counted
from; :class:`~primus_launch.projection.cost.layer_ops.LayerOps` prices them at streaming speed
(``compute.elementwise_time``: ``nbytes / (B_hbm eta) + t_min``, ``eta`` the fitted streaming efficiency).

Tuples are (bytes per element forward, kernels forward, kernels backward) unless a comment says otherwise; the
backward of a norm / activation / RoPE moves twice its forward bytes.
"""

from __future__ import annotations

A = 2  # bytes of a bf16 activation element

# (bytes per element forward, kernels forward, kernels backward) of the element-wise ops, fused vs
# eager PyTorch (cost/framework.py)
NORM_FUSED = (4.0, 1, 2)
RMSNORM_EAGER = (36.0, 6, 10)
LAYERNORM_EAGER = (4.0, 1, 2)
ACT_FUSED = {True: (6.0, 1, 1), False: (4.0, 1, 1)}     # gated (SwiGLU) / plain (GeLU), per f element
ACT_EAGER = {True: (10.0, 2, 4), False: (4.0, 1, 1)}
ROPE_FUSED = (4.0, 1, 1)
ROPE_EAGER = (20.0, 3, 3)
# Megatron-Core's own unfused RoPE, per q or k tensor (bytes per element forward, backward; kernels forward,
# backward), counted from megatron/core/models/common/embeddings/rope_utils.py ``_apply_rotary_pos_emb_bshd``
# (Megatron-LM 2edffadb, the Megatron-Bridge 26.04 / v0.4.2 pin): forward ``cos(freqs) * mscale -> .to``,
# the same for sin (6 kernels on the [s, 1, 1, d] freqs: no bytes per element), then ``t * cos_`` (4 B),
# ``_rotate_half``: ``-x2`` on half the elements (2 B) and ``cat((-x2, x1))`` (4 B), ``* sin_`` (4 B),
# ``+`` (6 B), ``cat((t, t_pass))`` (4 B): 24 B, 12 kernels; autograd backward: ``grad * sin_`` (4 B),
# ``neg`` (2 B), the chunk's split-backward ``cat`` (4 B), ``grad * cos_`` (4 B), the two grads summed (6 B),
# the empty ``t_pass`` slice's ``slice_backward`` (a zero gradient of t's size, 2 B) added to t's (6 B):
# 28 B, 7 kernels (``t[..., :rot_dim]`` over the whole head is no slice).  Checked op by op against
# megatron-core's own function traced under a dispatch mode (tests/test_cost_gpt_oss.py).
ROPE_MEGATRON_UNFUSED = (24.0, 28.0, 12, 7)
# TEGroupedMLP's expert FC2 bias (Megatron-LM 2edffadb megatron/core/transformer/moe/experts.py
# ``TEGroupedMLP._apply_bias``, FC2 built with ``skip_bias_add=True``): a Python loop over the local experts
# of ``t + b * p`` (probs in the router's dtype, bf16 unless --moe-router-dtype) then ``torch.cat``.
# Forward, per element of the [rows, h] expert output: ``b * p`` writes 2 B, ``t + .`` 6 B, the cat 4 B =
# 12 B in 2 kernels per expert + 1.  Backward (autograd): per expert ``grad * p`` (4 B) + its sum over rows
# (2 B) for b, ``grad * b`` (4 B) + its sum over h (2 B) for p; the split-backward cat of the output's
# grad (4 B) = 16 B; kernels 4 per expert + 2 cats + the DDP hook ``main_grad.add_(grad)`` of each FC1 and
# FC2 bias (megatron/core/distributed/distributed_data_parallel.py ``_make_backward_post_hook``: TE fuses
# the FC1 bias grad into its wgrad GEMM, transformer_engine/pytorch/module/grouped_linear.py backward, but
# neither bias grad goes to main_grad in place).
EXPERT_BIAS_BYTES = (12.0, 16.0)
# The same with fp32 probs (DeepEP / HybridEP dispatch them in fp32: token_dispatcher.py "DeepEP only supports
# float32 probs" / "HybridEP only supports float32 probs", ``token_probs.float()``): ``b * p`` and ``t + .`` are
# fp32 (4 B, 10 B), the cat fp32 (8 B) and ``.to(bf16)`` (6 B) = 28 B in 2 per expert + 2 kernels; backward the
# cast back to fp32 (6 B), per expert the bf16 cast of t's grad (6 B) and the fp32 ``grad * p`` / ``grad * b``
# (8 B each) and sums (4 B each), the output's split-backward cat (4 B) = 40 B in 6 per expert + 3 kernels
# (+ the 2 DDP bias hooks per expert).  Traced in tests/test_cost_gpt_oss.py.
EXPERT_BIAS_BYTES_FP32_PROBS = (28.0, 40.0)
# The clamp of a gated activation (--activation-func-clamp-value, GPT-OSS 7.0) in TEGroupedMLP's fused path
# (Megatron-LM 2edffadb megatron/core/fusions/fused_bias_geglu.py ``weighted_bias_quick_geglu_impl``): before
# the fused (torch.compile) weighted quick-GeGLU it runs, unfused, ``x_glu.clamp(max=c)`` and
# ``x_linear.clamp(-c, c)`` (read + write 2 B of one half each: 4 B per output element f) and
# ``torch.cat`` back to 2f (8 B per f), plus ``torch.tensor(linear_offset, device=...)`` (one host-to-device
# copy): 16 B per f in 3 kernels + 1 copy.  Autograd backward: ATen ``clamp_backward`` =
# ``where(x <= c, grad, 0)`` (compare 3 B + where 5 B per f) for the glu half, ``where((x >= -c) & (x <= c),
# grad, 0)`` (3 + 3 + 3 + 5 B) for the linear half, each with its ``scalar_tensor(0)``, the chunk's
# split-backward ``cat`` (8 B): 30 B per f in 9 kernels.  Inside ``bias_act_func``, so --recompute-modules
# moe_act re-runs the forward.  Both passes checked against megatron-core's function traced under a dispatch
# mode (tests/test_cost_gpt_oss.py).
ACT_CLAMP = (16.0, 30.0, 4, 9)
# cross-entropy over the logits, per logit and by ``Profile.ce``: (bytes forward, bytes backward, kernels
# forward, kernels backward) of Megatron's vocab-parallel fp32 loss, a fused loss kernel, eager torch
CE_BYTES = {"megatron": (14.0, 6.0, 6, 4), "fused": (4.0, 4.0, 1, 1), "torch": (18.0, 22.0, 3, 3)}
