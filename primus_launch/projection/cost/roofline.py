"""The roofline layer costing of the dry run: the kernels of each layer on one GPU, timed from kernel-level
evidence.

:func:`layer_times_roofline` lists the kernels of one micro-batch through each kind of decoder
layer on ONE GPU with the plan's TP / CP / EP / expert-TP sharding applied (communication excluded:
that is :func:`primus_launch.projection.iteration.assemble`'s job) and times each with
:mod:`primus_launch.projection.cost.compute` (curves fitted to public kernel measurements) under the
framework's profile (:mod:`primus_launch.projection.cost.framework`: which kernels run, fused or
eager, and the host time of launching them).  Notation: b = micro-batch, s = sequence, t = TP,
T = b*s/cp tokens on this CP rank (GEMMs see all T after the SP all-gather), Tn = T/t with
sequence parallel else T (norms, residuals), h = hidden, a/g = query/KV heads, d = head dim,
f = FFN size, E/k = experts/top-k, A = 2 (bf16 bytes).

Forward kernels per dense layer (GEMM [M, N, K]):
  input norm (Tn*h elements), QKV [T, (a+2g)d/t, h], qk-norm, RoPE on q,k, core attention
  (b, a/t heads, s/cp queries x s keys, causal, sliding window where ``is_window_layer``;
  ``cp_comm_type = a2a``: s x s with a/(t cp) heads; ring CP (p2p, TorchTitan's rotations): one
  kernel per step at its own shape plus the framework's per-step helpers,
  ``cost/context_parallel.py``), out-proj [T, h, a*d/t], residual add
  (bias-dropout-add; +1 B mask per element with hidden dropout), pre-MLP norm,
  FC1 [T, (2 if gated else 1)*f/t, h], SwiGLU / GeLU, FC2 [T, h, f/t], residual add.
MLA attention (DeepSeek-V2/V3, Megatron ``MLASelfAttention``): q-down [T, r_q, h] (replicated
  over TP), q-norm, q-up [T, a(d_qk+d_r)/t, r_q] (or q [T, a(d_qk+d_r)/t, h]), kv-down
  [T, r_kv+d_r, h] (replicated), kv-norm, kv-up [T, a(d_qk+d_v)/t, r_kv], core attention with
  d_qk + d_r keys and d_v values, out-proj [T, h, a*d_v/t].
Unfused attention (``attention_backend`` unfused / local, e.g. Megatron 2021-22): QK^T as a
  batched GEMM [s/cp, s, d] x b*a/t, the fused scale-mask-softmax over the materialised s x s
  scores (2 B read + 2 B write per score; dropout mask +1 B), AV [s/cp, d, s]; backward 4 batched
  GEMMs and the softmax backward (6 B per score); causal masking saves nothing.
MoE layer: attention as above; router [Tn, E, h] (bf16) + softmax / top-k (fp32); permute and
  unpermute + weighted combine, each moving every routed copy once (2*T_e*k*h B; unfused
  permutation: index kernels moving 3x that), with the all-to-all dispatcher and several local
  experts a second "sort chunks by expert" permute; T_e = T*et/t tokens per GPU entering the
  experts; experts as one grouped GEMM (``moe_grouped_gemm``; the grouped-GEMM curve of the
  architecture where one was fitted) or one GEMM per local expert (E/ep GEMMs of M = T_e*ep*k/E
  tokens, balanced routing): FC1 [M, (2)f_e/et, h], FC2 [M, h, f_e/et]; shared experts as a dense
  MLP of size f_s.
Megatron paths a model's flags switch on (sources and traced byte / kernel counts at the constants):
  YaRN with mscale != 1 runs Megatron's own unfused RoPE (:data:`ROPE_MEGATRON_UNFUSED`); experts with
  biases (``add_bias_linear``, TEGroupedMLP) run the per-expert FC2 bias x probs chain
  (:data:`EXPERT_BIAS_BYTES`, fp32 with DeepEP / HybridEP probs) and force every bias-dropout-add unfused;
  a clamped gated activation (``activation_clamp``) runs an unfused clamp + cat before the fused
  quick-GeGLU (:data:`ACT_CLAMP`, recomputed with ``moe_act``).
Embedding (first stage): gather 4*T*h B forward; backward scatter-add into fp32 grads (weight-grad).
Head + loss (last stage): final norm, output GEMM [T, V/t, h] in bf16, cross-entropy over the logits
  (bytes per logit by profile: Megatron's vocab-parallel fp32 14 / 6, fused 4 / 4, torch 18 / 22).
MTP (per ``mtp`` layer, Megatron ``MultiTokenPredictionLayer``): enorm + hnorm (T*h each), the
  embedding gather of the shifted tokens, eh_proj [T, h/t, 2h]; its transformer layer and its
  output head + loss are priced as a decoder layer and a head (:mod:`iteration`).

Backward of a GEMM [M, N, K]: input-grad [M, K, N] (``bwd_input``) and weight-grad [K, N, M]
(``bwd_weight``).  Low-precision GEMMs run on the recipe's GEMM curve (``cost/fp8.py``) and add its
quantisation traffic: the inputs (X) in the forward pass (none for QKV / FC1 when TE's
LayerNormLinear writes them), the output gradients (dY) in the backward pass, and the weights once
per optimizer step (Megatron, TE weight caching: / micro-batches; none with ``fp8_param_gather``, but for
MXFP8 weights, cast whole after their BF16 all-gather: ``cost/fp8.py`` ``mx_params_gathered_bf16``)
or per micro-batch (torchao).  Element-wise kernels cost twice their forward bytes in backward
(permutes: once); attention backward is the fused-attention backward curve.

Host time: each op launches kernels (counts by profile); a pass of a layer takes
``max(GPU time, kernels x t_launch)``, minus what CUDA graphs capture (``cost/framework.py``; ``t_launch``
scaled by the host CPU, Grace vs x86); an MoE layer's forward between two token-dispatcher host-device syncs
(:data:`SYNC_BEFORE`) is walked op by op from an idle GPU (:func:`launch_bound_seconds`: the ops after the sync,
then the next layer's up to its sync), plus the host's wake-up after the wait.  A Megatron MoE layer also
launches its router's, dispatcher's and the grouped experts' small kernels (``cost/moe_host.py``: counts traced
from megatron-core's own MoELayer; TE / TE-ROCm GroupedLinear and the legacy grouped_gemm library launch one BLAS
GEMM per local expert, ``training.moe_expert_gemm``, at ``moe_host.expert_gemm_host_s`` each (the legacy library on
CDNA4 at its calibrated cost), Primus-Turbo's grouped GEMM one kernel; the all-to-all dispatcher's unfused chunk
sort host work per chunk, ``moe_host.chunk_sort_host``): rows "small ops"
(``KERNEL_MIN_S`` each on the GPU) and "... host" (host seconds only, before each linear's GEMMs).
"""

from __future__ import annotations

from functools import lru_cache

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost.compute import (KERNEL_MIN_S, arch_of, attention_time, elementwise_time, gemm_time,
                                              quant_time)
from primus_launch.projection.cost import fp8 as fp8m
from primus_launch.projection.cost import wgrad_accumulation as wacc
from primus_launch.projection.cost import host_runahead
from primus_launch.projection.cost import moe_host
from primus_launch.projection.cost import moe_padding
from primus_launch.projection.cost import moe_imbalance as mib
from primus_launch.projection.cost import titan_moe
from primus_launch.projection.cost import mamba
from primus_launch.projection.cost.contention import ub_factors
from primus_launch.projection.cost.framework import (GRAPH_LAUNCH_S, Profile, eager_host_per_kernel, graph_scopes,
                                                   profile_of)
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.layer_times import LayerTimes, PassTimes
from primus_launch.projection.memory.fp8 import SM100_ARCHS
from primus_launch.projection.memory.params import arch_from_key, arch_key

A = 2  # bytes of a bf16 activation element

# Graph scopes an MoE layer's forward runs before its token dispatcher's host-device sync: the router
# and the first permutation run, then the host waits for the routed-token counts (Megatron-Core
# core_r0.16.0 transformer/moe/token_dispatcher.py: the all-to-all dispatcher's ``d2h_event.synchronize()``
# at ``cuda_sync_point`` "before_ep_alltoall" (EP > 1) or "before_finish" (the grouped GEMM's CPU
# split sizes); the all-gather dispatcher's ``tokens_per_expert.cpu()``; DeepEP normal-mode dispatch
# waits for its received-token counter, HybridEP "without an upper bound ... will cause a CPU sync";
# TorchTitan's expert-parallel all-to-all ``input_splits.tolist()``).  One per MoE layer forward.
SYNC_BEFORE = frozenset({"attn", "moe_router", "moe_preprocess"})

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
CE_BYTES = {"megatron": (14.0, 6.0, 6, 4), "fused": (4.0, 4.0, 1, 1), "torch": (18.0, 22.0, 3, 3)}


def launch_bound_seconds(seq: list, host_s: float, graphs: frozenset = frozenset()) -> float:
    """When the GPU finishes ``seq`` -- ops ``[scope, GPU s, kernels, extra host s, extra launches]`` in launch
    order -- launched by one host thread into an idle GPU (the period of an MoE forward between two token-dispatcher
    syncs, :meth:`_Acc.times`).  Op ``i`` costs the host ``h_i = kernels x t_launch + extra host`` (``t_launch`` =
    ``host_s``; scopes in ``graphs`` launch nothing but one graph replay, ``framework.GRAPH_LAUNCH_S``, per run of
    captured ops) spread over its ``L_i = kernels + extra launches`` launches, and the GPU ``g_i`` spread over the
    same kernels.  With ``H`` the host clock and ``E`` the GPU's:

        E <- max(max(E, H + h_i / L_i) + g_i,  H + h_i + g_i / L_i);   H <- H + h_i

    (the op's first kernel starts once launched and the GPU is free; its last cannot start before it is
    launched): ``max(sum g, sum h)`` when one side dominates throughout, more when a host-bound run of small ops
    leaves the GPU idle and a GPU-bound run then makes the host wait -- what ``max(G, H)`` per pass hides.  A
    kernel of ``g / L < h / L`` (GPU faster than the launch) leaves the GPU idle ``h / L - g / L`` per launch."""
    E = H = 0.0
    captured = False
    for scope, g, n, hx, extra in seq:
        if scope in graphs:
            if not captured:
                H += GRAPH_LAUNCH_S
            captured = True
            E = max(E, H) + g
            continue
        captured = False
        h = n * host_s + hx
        L = n + extra
        if L <= 0:
            E = max(E, H) + g
            H += h
            continue
        E = max(max(E, H + h / L) + g, H + h + g / L)
        H += h
    return E


class _Acc:
    """Accumulates forward / input-grad / weight-grad GPU seconds and launched kernels per graph
    scope; with ``ops`` a list, also records each op as ``(name, fwd, bwd_input, bwd_weight, info)``
    (``info``: kind, curve key, forward FLOPs) for :func:`layer_op_times` and the explanation."""

    __slots__ = ("f", "bi", "bw", "kf", "kb", "gpu", "prec", "prof", "fmt", "recipe", "ops", "scope", "qf", "qb",
                 "qw", "nq", "nkf", "nkb", "wq_div", "fused_in", "mods", "sums", "slow", "ub", "gf", "sync", "hsf",
                 "hsb", "seq", "pend", "expert_gemm", "fp8_gather", "bf16", "f8a", "dim1x", "qx", "wacc", "hbx")

    def __init__(self, gpu: str, prec: str, prof: Profile, fmt: str, recipe: str | None, wq_div: float,
                 ops: list | None = None, insitu: float = 1.0, ub: tuple | None = None):
        self.f = self.bi = self.bw = 0.0
        self.kf: dict[str, int] = {}
        self.kb: dict[str, int] = {}
        self.gpu, self.prec, self.prof, self.fmt, self.recipe = gpu, prec, prof, fmt, recipe
        self.ops = ops
        self.scope = "other"
        self.qf = self.qb = self.qw = 0.0   # quantisation bytes: forward inputs, backward dY, weights
        self.nq = 0
        self.nkf = self.nkb = 0    # quantisation kernels on the GPU, forward / backward (quant_flush's floor)
        self.wq_div = wq_div
        self.fused_in = False
        self.mods: tuple[str, ...] = ()
        self.sums: dict[str, list[float]] = {}
        self.slow = 1.0 / insitu   # calibration.FRAMEWORK_EFF: kernels in a step vs the benchmarks
        self.ub = ub               # TE userbuffers TP overlap (None: off): its per-GEMM overrides (cost/contention.py)
        self.gf: dict[str, float] = {}   # forward GPU seconds per graph scope
        self.sync = False          # a host-device sync splits the forward pass (MoE dispatch, :meth:`times`)
        self.hsf: dict[str, float] = {}   # host seconds beyond the counted kernels, per graph scope (cost/moe_host.py)
        self.hsb: dict[str, float] = {}
        # the forward in launch order, one entry per op: [scope, GPU s, kernels, extra host s] (:meth:`times`)
        self.seq: list[list] = []
        self.pend: list | None = None
        self.expert_gemm = "te"   # plan.training.moe_expert_gemm (the grouped experts' GEMM backend)
        self.fp8_gather = False   # plan.training.fp8_param_gather (torchao: FSDP float8 all-gather)
        self.bf16: frozenset[str] = frozenset()   # plan.training.bf16_linears (attention linears left in BF16)
        self.f8a: tuple | None = None   # plan.training.fp8_attention: (arch, recipe, sinks) (cost/fp8_attention.py)
        # torchao MXFP8 linears' slower dim1 cast kernel (plan.training.mx_dim1_cast_kernel): extra streaming bytes
        # per element cast along dim1 (cost/fp8.py mx_dim1_extra_bytes) and their backward sum
        self.dim1x = 0.0
        self.qx = 0.0
        # --no-gradient-accumulation-fusion: HBM bytes per weight element of the add / copy into main_grad after
        # each weight-gradient GEMM (cost/wgrad_accumulation.py bytes_per_weight_element; 0: fused)
        self.wacc = 0.0
        # (backward host s, its excess over the backward GPU s charged alone, index of the host-bound op row)
        # as :meth:`times` left them, for the pass-wide pooling of cost/host_runahead.py
        self.hbx: tuple[float, float, int | None] = (0.0, 0.0, None)

    def _add(self, f: float, bi: float, bw: float, cat: str, extra: tuple[str, ...] = ()) -> None:
        """Add to the totals and to the shares of the active modules (recompute, overlap), of the
        op category ``cat``: ``gemm``, ``attention`` (the core-attention kernels) or ``non_matmul``
        (everything else: what TorchTitan's per-op SAC recomputes), and of the scope (``scope:attn``,
        ``scope:moe_router``, ...: where Megatron's fine-grained schedule cuts a layer)."""
        k = self.slow
        f, bi, bw = f * k, bi * k, bw * k
        self.f += f
        self.gf[self.scope] = self.gf.get(self.scope, 0.0) + f
        self._op()[1] += f
        self.bi += bi
        self.bw += bw
        for k in self.mods + extra + (cat, "scope:" + self.scope):
            v = self.sums.setdefault(k, [0.0, 0.0, 0.0])
            v[0] += f
            v[1] += bi
            v[2] += bw

    def _op(self) -> list:
        """The forward entry of the op being priced (closed by :meth:`_rec`): [scope, GPU s, kernels, host s]."""
        if self.pend is None or self.pend[0] != self.scope:
            self._close()
            self.pend = [self.scope, 0.0, 0, 0.0, 0]
        return self.pend

    def _close(self) -> None:
        if self.pend is not None and (self.pend[1] > 0 or self.pend[2] or self.pend[3] > 0):
            self.seq.append(self.pend)
        self.pend = None

    def _k(self, nf: int, nb: int) -> None:
        self.kf[self.scope] = self.kf.get(self.scope, 0) + nf
        self.kb[self.scope] = self.kb.get(self.scope, 0) + nb
        self._op()[2] += nf

    def host(self, f: float, b: float, launches: int = 0) -> None:
        """Host seconds beyond ``kernels x t_launch`` in the current scope (``launches`` kernels launched from a
        C++ loop, e.g. TE GroupedLinear's per-expert GEMMs), part of the next op's launches (:meth:`times`)."""
        self.hsf[self.scope] = self.hsf.get(self.scope, 0.0) + f
        self.hsb[self.scope] = self.hsb.get(self.scope, 0.0) + b
        e = self._op()
        e[3] += f
        e[4] += launches

    def _rec(self, name: str, f: float, bi: float, bw: float, info: tuple, close: bool = True) -> None:
        if close:
            self._close()
        if self.ops is not None:
            self.ops.append((name, f, bi, bw, info))

    def gemm(self, m: int, n: int, k: int, batch: int = 1, lowp: bool = True, name: str = "gemm",
             separate: bool = False, input_fused: bool = False, ub: str | None = None, col: bool = False,
             grouped_kernel: bool = False, main_grad: bool = True) -> None:
        """A GEMM [m,n,k] x ``batch`` (``separate``: ``batch`` independent kernels, not grouped) with
        its backward; ``lowp``: in the plan's FP8/FP4 recipe (else bf16); ``ub``: the layer GEMM it is
        for TE userbuffers (``qkv`` / ``proj`` / ``fc1`` / ``fc2``), slowed by the SMs its overlapped
        communication holds when the plan overlaps TP communication (``cost/contention.py``);
        ``grouped_kernel``: the framework runs it through its grouped-GEMM kernel even when
        ``batch`` is 1 (TorchTitan's ``GroupedExperts`` calls ``torch._grouped_mm`` for any number of
        local experts: torchtitan v0.2.1 ``models/moe/moe.py`` ``_run_experts_grouped_mm``, 0.3.0
        ``models/common/moe.py`` ``GroupedExperts._grouped_mm``); ``main_grad``: its weight runs Megatron's
        gradient-accumulation fusion path (not the MoE router's plain autograd gate), so without the fusion
        one bandwidth-bound kernel per weight (``batch`` of them) moves ``k n wacc`` bytes after the weight-gradient
        GEMM (``cost/wgrad_accumulation.py``)."""
        g = self.gpu
        fmt = self.fmt if lowp and self.recipe else "bf16"
        # torchao rowwise_with_gw_hp keeps the weight-gradient GEMM in bf16 (torchao/float8/config.py
        # ROWWISE_WITH_GW_HP: cast_config_input_for_grad_weight / cast_config_grad_output_for_grad_weight disabled)
        fmt_w = "bf16" if self.recipe == "rowwise_with_gw_hp" else fmt
        if separate and batch > 1:
            f = batch * gemm_time(m, n, k, g, "bf16", 1, fmt)
            bi = batch * gemm_time(m, k, n, g, "bf16", 1, fmt)
            bw = batch * gemm_time(k, n, m, g, "bf16", 1, fmt_w)
            kern = batch
        else:
            gr = ""
            if batch > 1 or grouped_kernel:
                if self.prof.name.startswith("torchtitan"):
                    gr = "torch"
                elif self.prof.name == "megatron-te" and self.expert_gemm != "turbo" and not cutedsl_grouped_mlp(
                        self.expert_gemm, self.fmt, arch_of(g)):
                    # TE / TE-ROCm GroupedLinear or the legacy grouped_gemm library: one BLAS GEMM per expert on
                    # four streams (cost/grouped_gemm.py)
                    gr = "te"
                else:
                    # a single grouped kernel (Primus-Turbo's CK / hipBLASLt grouped GEMM, the CuTeDSL grouped
                    # GEMM of Megatron's TE op-fuser MLP)
                    gr = "any"
            f = gemm_time(m, n, k, g, "bf16", batch, fmt, gr)
            bi = gemm_time(m, k, n, g, "bf16", batch, fmt, gr)
            bw = gemm_time(k, n, m, g, "bf16", batch, fmt_w, gr, wgrad=True)
            kern = 1
        if ub and self.ub is not None:
            cf, cb, cw = ub_factors(ub, get_gpu(g).num_sms, self.ub)
            f, bi, bw = f * cf, bi * cb, bw * cw
        acc_kernels = batch if (self.wacc and main_grad) else 0
        if acc_kernels:
            bw += batch * elementwise_time(float(k * n) * self.wacc, g)
        # column-parallel linears (their backward collectives overlap their dgrad / wgrad GEMMs)
        self._add(f, bi, bw, "gemm", ("tp_col",) if ub in ("qkv", "fc1") or col else ())
        f, bi, bw = f * self.slow, bi * self.slow, bw * self.slow
        self._k(kern, 2 * kern + acc_kernels)
        if fmt != "bf16":
            # quantised operands (cost/fp8.py): X forward (unless the norm wrote it), dY backward,
            # W per step or per micro-batch
            # kernels per quantised tensor (cost/moe_host.py QUANT_KERNELS_PER_TENSOR: TE current scaling
            # amax + scale + cast = 3, MX / block 1, delayed one fused cast-transpose); TE GroupedLinear
            # quantises each expert's split apart (split_quantize; delayed: one multi-tensor kernel)
            per = moe_host.QUANT_KERNELS_PER_TENSOR.get(self.recipe or "", 1)
            nk = (batch * per if per else 1) if (batch > 1 and not separate and self.prof.name == "megatron-te") \
                else max(1, per) * (batch if separate else 1)
            if not input_fused:
                self.qf += m * k * batch
                self.nq += 1
                self.nkf += nk
            self.qb += m * n * batch
            self.qw += k * n * batch
            self.nq += 1
            self.nkb += nk
            if self.dim1x and batch == 1 and not grouped_kernel:
                # an MX linear's backward casts its input, weight and output gradient along dim1 (torchao
                # mx_formats mx_linear.py mx_mm.backward); the grouped experts' casts stay CUDA (torchao
                # moe_training scaled_grouped_mm.py _MXFP8GroupedMM: cast_kernel_choice=CUDA)
                self.qx += self.dim1x * (m * k + m * n + k * n)
        self._rec(f"{name} [{m}x{n}x{k}]" + (f" x{batch}" if batch > 1 else ""), f, bi, bw,
                  ("grouped_gemm" if (batch > 1 or grouped_kernel) and not separate else "gemm", fmt,
                   2.0 * m * n * k * batch))

    def elem(self, nbytes: float, name: str, bwd: float = 2.0, kernels: tuple[int, int] = (1, 1)) -> None:
        """A bandwidth-bound op; its backward moves ``bwd`` times the forward bytes."""
        t = elementwise_time(float(nbytes), self.gpu)
        tb = elementwise_time(float(nbytes) * bwd, self.gpu) if bwd > 0 else 0.0
        if kernels[0] > 1:
            t += (kernels[0] - 1) * 2e-6
        self._add(t, tb, 0.0, "non_matmul")
        t, tb = t * self.slow, tb * self.slow
        self._k(*kernels)
        self._rec(name, t, tb, 0.0, ("elementwise", "hbm", 0.0, nbytes))

    def norm(self, elems: float, m: ModelArch, name: str) -> None:
        """A norm over ``elems`` elements: streaming bytes and kernels of :data:`NORM_FUSED` (TE / fused),
        else eager PyTorch's :data:`RMSNORM_EAGER` / :data:`LAYERNORM_EAGER` (backward 2x the forward bytes)."""
        p = self.prof
        if p.fused_norm:
            nb, kf, kb = NORM_FUSED
        else:
            nb, kf, kb = RMSNORM_EAGER if m.normalization == "rmsnorm" else LAYERNORM_EAGER
        self.elem(nb * elems, name, 2.0, (kf, kb))

    def attn(self, b: int, heads: int, sq: int, skv: int, dqk: int, dv: int, window: int | None,
             dropout: float = 0.0, kv_heads: int | None = None) -> PassTimes:
        """The core attention of ``b`` x ``heads`` heads, ``sq`` queries over ``skv`` keys (causal, ``window``):
        the fused-attention curve of the profile's implementation (``cost/compute.py`` ``attention_time``,
        fitted to the kernel benchmarks of ``docs/kernel-evidence.md``), FP8 attention scaled by
        :meth:`_attn_fp8`, or the unfused path (:meth:`_attn_unfused`)."""
        impl = self.prof.attention
        if impl == "unfused":
            return self._attn_unfused(b, heads, sq, skv, dqk, dv, dropout)
        f, bw = attention_time(b, heads, sq, skv, dqk, dv, True, self.gpu, impl, window)
        tag = ""
        if self.f8a is not None and impl in ("cudnn", "fused"):
            f, bw, tag = self._attn_fp8(f, bw, b, heads, kv_heads or heads, sq, skv, dqk, dv, window)
        self._add(f, bw, 0.0, "attention")
        f, bw = f * self.slow, bw * self.slow
        self._k(1, 2)
        from primus_launch.projection.cost.kernels import attention_flops

        self._rec(f"core attention ({impl}{tag}) b{b} h{heads} s{sq}x{skv} d{dqk}/{dv}" + (f" window {window}" if window else ""),
                  f, bw, 0.0, ("attention", impl, attention_flops(b, heads, sq, skv, dqk, dv, True, window)))
        return PassTimes(f, bw, 0.0)

    def _attn_fp8(self, f: float, bw: float, b: int, heads: int, kv_heads: int, sq: int, skv: int, dqk: int, dv: int,
                  window: int | None) -> tuple[float, float, str]:
        """FP8 / MXFP8 core attention (``training.fp8_attention``): the BF16 times ``f`` / ``bw`` times the
        measured FP8 / BF16 ratio, plus TE's quantise kernels around it (``cost/fp8_attention.py``); a case the
        records do not cover keeps the BF16 times (the reason goes into the op's name)."""
        from primus_launch.projection.cost import fp8_attention as f8

        arch, recipe, sinks = self.f8a
        key, why = f8.fp8_attention_case(arch, recipe, dqk, True, window, sinks)
        if key is None:
            return f, bw, f"; fp8_attention not applied: {why}"
        rf, rb = f8.ratio(key, "fwd", skv, window), f8.ratio(key, "bwd", skv, window)
        f, bw = f * rf, bw * rb
        qf, qb = f8.quant_bytes(key[3], float(b * sq * heads * dqk), float(b * skv * kv_heads * (dqk + dv)),
                                float(b * sq * heads * dv))
        tf, tb = quant_time(qf, self.gpu, recipe or "delayed"), quant_time(qb, self.gpu, recipe or "delayed")
        self._add(tf, tb, 0.0, "non_matmul")
        self._k(2, 1)
        self._rec(f"FP8 attention quantise ({key[3]}: Q/K/V, O; dO)", tf * self.slow, tb * self.slow, 0.0,
                  ("quant", recipe or "delayed", 0.0, qf + qb, "te"))
        return f, bw, f", {key[3]}: x{rf:.2f} fwd, x{rb:.2f} bwd"

    def attn_ring(self, b: int, heads: int, kv_heads: int, s: int, cp: int, dqk: int, dv: int,
                  flavor: str) -> PassTimes:
        """Load-balanced causal ring attention over ``cp`` ranks (``cost/context_parallel.py``): one
        fused-attention kernel per step at its own shape, plus the framework's per-step helpers
        (copies, output / LSE merges, dq / dk,dv accumulation) at streaming speed."""
        from primus_launch.projection.cost.kernels import attention_flops
        from primus_launch.projection.cost import context_parallel as cpm

        impl = self.prof.attention
        f = bw = 0.0
        n_steps = 0.0
        for sq, skv, causal, n in cpm.ring_steps(s, cp):
            tf, tb = attention_time(b, heads, sq, skv, dqk, dv, causal, self.gpu, impl, None)
            f += n * tf
            bw += n * tb
            n_steps += n
        self._add(f, bw, 0.0, "attention")
        f0, b0 = f * self.slow, bw * self.slow
        c = max(1, s // cp)
        eq, eo, ekv = float(b * c * heads * dqk), float(b * c * heads * dv), float(b * c * kv_heads * (dqk + dv))
        hf, hb = cpm.helper_bytes(flavor, cp, eq, eo, ekv)
        kf, kb = cpm.STEP_KERNELS[flavor]
        tf = elementwise_time(hf, self.gpu) + (cp * (kf - 1) - 1) * KERNEL_MIN_S
        tb = elementwise_time(hb, self.gpu) + (cp * (kb - 1) - 1) * KERNEL_MIN_S
        self._add(tf, tb, 0.0, "attention")
        tf, tb = tf * self.slow, tb * self.slow
        self._k(cp * kf, cp * kb)
        self._rec(f"core attention ({impl}) ring: {cp} steps of b{b} h{heads} s{c}: 1 causal {c}x{c}, "
                  f"{cp - 1} of {c}x{c // 2} / {c // 2}x{c} d{dqk}/{dv}", f0, b0, 0.0,
                  ("attention", impl, attention_flops(b, heads, c, s, dqk, dv, True, None)))
        self._rec(f"CP ring helpers ({flavor}: copies, output/LSE merges, dq/dkv accumulation)", tf, tb, 0.0,
                  ("elementwise", "hbm", 0.0, hf))
        return PassTimes(f0 + tf, b0 + tb, 0.0)

    def _attn_unfused(self, b: int, heads: int, sq: int, skv: int, dqk: int, dv: int, dropout: float) -> PassTimes:
        """Unfused attention (module doc): QK^T and AV as batched BF16 GEMMs, the scale-mask-softmax over the
        materialised ``sq x skv`` scores at 4 B per score forward, 6 B backward (+3 B with dropout), and the
        backward's four batched GEMMs."""
        g, bh = self.gpu, b * heads
        f0, bi0 = self.f, self.bi
        qk = gemm_time(sq, skv, dqk, g, "bf16", bh)
        av = gemm_time(sq, dv, skv, g, "bf16", bh)
        scores = float(bh) * sq * skv
        sm_f = elementwise_time(scores * (4.0 + (3.0 if dropout else 0.0)), g)
        sm_b = elementwise_time(scores * (6.0 + (3.0 if dropout else 0.0)), g)
        # backward: dP = dO V^T [sq, skv, dv], dV = P^T dO [skv, dv, sq], dS K [sq, dqk, skv], dS^T Q [skv, dqk, sq]
        bwd = (gemm_time(sq, skv, dv, g, "bf16", bh) + gemm_time(skv, dv, sq, g, "bf16", bh)
               + gemm_time(sq, dqk, skv, g, "bf16", bh) + gemm_time(skv, dqk, sq, g, "bf16", bh))
        self._add(qk + sm_f + av, bwd + sm_b, 0.0, "attention")
        self._k(3 + (1 if dropout else 0), 5)
        self._rec(f"core attention (unfused: QK^T, softmax over s x s, AV) b{b} h{heads} s{sq}x{skv} d{dqk}",
                  self.f - f0, self.bi - bi0, 0.0, ("attention", "unfused", 2.0 * bh * sq * skv * (dqk + dv)))
        return PassTimes(self.f - f0, self.bi - bi0, 0.0)

    def quant_flush(self, name: str = "FP8 quantisation (casts, amax, transposes)") -> None:
        """Charge the layer's accumulated quantisation bytes (cost/fp8.py) as one op row."""
        if not self.recipe or (self.qf == 0 and self.qb == 0 and self.qw == 0):
            return
        if self.prof.name == "torchtitan-compile":
            # torchao under inductor: per-role bytes of torchao's roofline (activations / output gradients fuse
            # their first read into the producer, weights do not; rowwise adds the wgrad post-scale pass) at
            # streaming speed (cost/fp8.py torchao_compiled_bytes)
            ba, bwt, bpost = fp8m.torchao_compiled_bytes(self.recipe, self.fp8_gather)
            recipe = None
        else:
            ba = bwt = fp8m.bytes_per_element(self.recipe, arch_of(self.gpu))
            bpost, recipe = 0.0, self.recipe
        qt = (lambda nb: elementwise_time(nb, self.gpu)) if recipe is None else (lambda nb: quant_time(nb, self.gpu, recipe))
        f = qt(ba * self.qf + bwt * self.qw / self.wq_div) if (self.qf or self.qw) else 0.0
        b = qt(ba * self.qb + bpost * self.qw) if (self.qb or bpost * self.qw) else 0.0
        if recipe is not None:
            # each quantisation kernel takes at least KERNEL_MIN_S on the GPU (record ao-kernel-min-duration):
            # n kernels sharing the bytes take max(bytes time, n t_min) -- small expert splits are floor-bound
            f = max(f, self.nkf * KERNEL_MIN_S) if f else f
            b = max(b, self.nkb * KERNEL_MIN_S) if b else b
        qx = self.qx
        if qx:   # the MX linears' dim1 casts on a slower kernel than the CUDA one (cost/fp8.py)
            b += elementwise_time(qx, self.gpu)
        self._add(f, b, 0.0, "non_matmul")
        f, b = f * self.slow, b * self.slow
        self._k(self.nq, self.nq)
        self._rec((f"FP8 quantisation [{self.recipe}; Triton/torch dim1]" if qx else f"{name} [{self.recipe}]"), f, b, 0.0, ("quant", self.recipe, 0.0,
                                                          ba * (self.qf + self.qb) + bwt * self.qw / self.wq_div
                                                          + bpost * self.qw, "te" if recipe else "torchao", qx))
        self.qf = self.qb = self.qw = self.qx = 0.0
        self.nq = 0
        self.nkf = self.nkb = 0

    def times(self, host_s: float, graphs: frozenset) -> PassTimes:
        """GPU times, raised to the host time of the launched kernels where that is longer.

        Without a host-device sync a pass repeats layer after layer with the host running ahead as far as it
        can: ``max(GPU, host)``.  With ``sync`` (an MoE layer whose token dispatcher waits on the host for the
        routed-token counts, :data:`SYNC_BEFORE`) the forward is periodic between two syncs: the host wakes
        (``t_launch``), launches the layer's part after its sync and the next layer's part up to the sync into an
        idle GPU, then waits for the GPU to drain; :func:`launch_bound_seconds` walks those ops kernel by kernel
        (each op's GPU work starts when its first kernel is launched and cannot end before its last one is)."""
        self._close()
        if host_s <= 0:
            return PassTimes(self.f, self.bi, self.bw)
        hf, hb = self._host_seconds(host_s, graphs)
        f = max(self.f, hf)
        if self.sync:
            i1 = next((i for i, e in enumerate(self.seq) if e[0] not in SYNC_BEFORE), len(self.seq))
            f = host_s + launch_bound_seconds(self.seq[i1:] + self.seq[:i1], host_s, graphs)
        bi = self.bi
        if hb > self.bi + self.bw:
            bi = hb - self.bw
        self.hbx = (hb, bi - self.bi, len(self.ops) if self.ops is not None else None)
        self._rec_host_bound(f - self.f - (host_s if self.sync else 0.0), bi - self.bi, hf, hb, graphs)
        return PassTimes(f, bi, self.bw)

    def pool_backward(self, t: PassTimes, bi: float) -> PassTimes:
        """``t`` with the input-grad seconds ``bi`` of the pass-wide host pooling (cost/host_runahead.py), the
        host-bound row of the op list rewritten to match."""
        i = self.hbx[2]
        if self.ops is not None and i is not None and i < len(self.ops) and abs(bi - t.bwd_input_s) > 1e-12:
            name, f, _, w, info = self.ops[i]
            self.ops[i] = (name + " (backward pooled over the pass: cost/host_runahead.py)", f,
                           max(0.0, bi - self.bi), w, info)
        return PassTimes(t.fwd_s, bi, t.bwd_weight_s)

    def _rec_host_bound(self, ef: float, eb: float, hf: float, hb: float, graphs: frozenset) -> None:
        """Name the host on the critical path in the op list: the seconds a pass takes beyond its GPU work
        because the host launches its kernels more slowly than the GPU runs them (:meth:`times`), with the
        host's own time and the CUDA-graph scopes that already remove launches."""
        if self.ops is None or (ef <= 1e-9 and eb <= 1e-9):
            return
        cap = ", ".join(sorted(sc for sc in graphs if sc in self.kf)) or "none"
        self._rec(f"host launch-bound: the CPU launches this layer in {1e3 * hf:.2f} / {1e3 * hb:.2f} ms "
                  f"(fwd / bwd) against its GPU work (CUDA-graph scopes captured: {cap})",
                  max(0.0, ef), max(0.0, eb), 0.0,
                  ("host", "cost/framework.py host launch per kernel x the kernels outside CUDA graphs + "
                           "cost/moe_host.py" + ("; forward walked launch by launch from the dispatcher's sync "
                                                 "(roofline.launch_bound_seconds)" if self.sync else "")
                           + "; on the critical path", 0.0, 0.0))

    def kernels(self) -> int:
        return sum(self.kf.values()) + sum(self.kb.values())

    def _host_seconds(self, host_s: float, graphs: frozenset) -> tuple[float, float]:
        """Host seconds of the forward and of the backward: the kernels launched outside the captured
        ``graphs`` scopes at ``host_s`` each, the extra host time of :meth:`host`, and one graph replay
        per pass when any scope is captured."""
        hf = sum(n for sc, n in self.kf.items() if sc not in graphs) * host_s
        hb = sum(n for sc, n in self.kb.items() if sc not in graphs) * host_s
        hf += sum(v for sc, v in self.hsf.items() if sc not in graphs)
        hb += sum(v for sc, v in self.hsb.items() if sc not in graphs)
        g = GRAPH_LAUNCH_S if any(sc in graphs for sc in self.kf) else 0.0
        return hf + g, hb + g

    def host_summary(self, host_s: float, graphs: frozenset) -> tuple[float, float, float, float]:
        """(host forward, host backward, GPU forward, GPU backward) seconds of one pass pair (:meth:`times`)."""
        return (*self._host_seconds(host_s, graphs), self.f, self.bi + self.bw)

    def shares(self, kind: str, out: dict) -> None:
        for k, v in self.sums.items():
            out[f"{kind}:{k}"] = PassTimes(*v)


def _attention_block(acc: _Acc, m: ModelArch, b: int, s: int, cp: int, t: int, T: int, Tn: int,
                     window: int | None, cp_a2a: bool, cp_kind: str = "p2p", bda_unfused: bool = False) -> PassTimes:
    """A layer's attention block (module doc, "Forward kernels per dense layer" and "MLA attention"): input
    norm, QKV (or MLA's down / up projections), qk-norm, RoPE, core attention (ring CP per step,
    ``cost/context_parallel.py``), out-proj and the residual add; returns the core attention's times."""
    h = m.hidden_size
    a = max(1, m.num_attention_heads // t)
    acc.scope = "attn"
    acc.mods = ("layernorm",)
    acc.norm(Tn * h, m, "input norm")
    acc.mods = ()
    fused_in = acc.prof.norm_linear
    sq, skv, heads = (s, s, max(1, a // cp)) if cp_a2a else (s // cp, s, a)
    # ring (P2P) CP: per-step kernels and helpers (cost/context_parallel.py); TE's all-gather CP and
    # windowed layers keep one kernel of s/cp queries over the s keys
    ring = ""
    if cp > 1 and not cp_a2a and window is None and acc.prof.attention != "unfused":
        if acc.prof.name.startswith("torchtitan"):
            ring = "torch"
        elif cp_kind != "allgather":
            ring = "te"
    if m.multi_latent_attention:
        dqk, dr, dv = m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim
        if m.q_lora_rank:
            acc.gemm(T, m.q_lora_rank, h, name="MLA q down", input_fused=fused_in)
            acc.norm(T * m.q_lora_rank, m, "MLA q norm")
            acc.mods = ("mla_up_proj",)
            acc.gemm(T, a * (dqk + dr), m.q_lora_rank, name="MLA q up", input_fused=fused_in, col=True)
            acc.mods = ()
        else:
            acc.gemm(T, a * (dqk + dr), h, name="MLA q", input_fused=fused_in, col=True)
        acc.gemm(T, m.kv_lora_rank + dr, h, name="MLA kv down", input_fused=fused_in)
        acc.norm(T * m.kv_lora_rank, m, "MLA kv norm")
        acc.mods = ("mla_up_proj",)
        acc.gemm(T, a * (dqk + dv), m.kv_lora_rank, name="MLA kv up", input_fused=fused_in, col=True)
        acc.mods = ()
        nb, kf, kb = ROPE_FUSED if acc.prof.fused_rope else ROPE_EAGER
        acc.elem(nb * T * (a + 1) * dr, "RoPE (rope parts of q, k)", 2.0, (kf, kb))
        acc.mods = ("core_attn",)
        if ring:
            core = acc.attn_ring(b, heads, heads, s, cp, dqk + dr, dv, ring)
        else:
            core = acc.attn(b, heads, sq, skv, dqk + dr, dv, window, m.attention_dropout)
        acc.mods = ()
        acc.gemm(T, h, a * dv, name="attention out-proj")
    else:
        d = m.kv_channels
        g = max(1, m.kv_heads // t)
        keep = {"wq": a * d, "wk": g * d, "wv": g * d}
        hp = sum(n for r, n in keep.items() if r in acc.bf16) if acc.recipe else 0
        if hp:
            # linears a torchao converter's filter_fqns leaves in BF16 (torchtitan v0.2's separate wq / wk / wv):
            # the low-precision ones as one GEMM, the BF16 ones as another (training.bf16_linears)
            lo = (a + 2 * g) * d - hp
            if lo:
                acc.gemm(T, lo, h, name="QKV (" + ", ".join(r for r in keep if r not in acc.bf16) + ")",
                         input_fused=fused_in, ub="qkv")
            acc.gemm(T, hp, h, lowp=False, name="QKV (" + ", ".join(r for r in keep if r in acc.bf16) + ", bf16)",
                     input_fused=fused_in, ub="qkv")
        else:
            acc.gemm(T, (a + 2 * g) * d, h, name="QKV", input_fused=fused_in, ub="qkv")
        if m.qk_layernorm:
            acc.norm(T * (a + g) * d, m, "q/k norm")
        if m.position_embedding in ("rope", "yarn"):
            label = "RoPE"
            if rope_fused(acc.prof, m):
                nb, kf, kb = ROPE_FUSED
                bwd = 2.0
            elif acc.prof.name == "megatron-te":
                nb, nbb, kf, kb = ROPE_MEGATRON_UNFUSED
                bwd, label = nbb / nb, "RoPE (Megatron unfused: YaRN mscale)"
            else:
                nb, kf, kb = ROPE_EAGER
                bwd = 2.0
            acc.elem(nb * T * (a + g) * d, label, bwd, (2 * kf, 2 * kb))
        acc.mods = ("core_attn",)
        if ring:
            core = acc.attn_ring(b, heads, g, s, cp, d, d, ring)
        else:
            core = acc.attn(b, heads, sq, skv, d, d, window, m.attention_dropout, kv_heads=g)
        acc.mods = ()
        acc.gemm(T, h, a * d, name="attention out-proj" + (" (bf16)" if "wo" in acc.bf16 else ""), ub="proj",
                 lowp="wo" not in acc.bf16)
    _residual_bda(acc, m, Tn, bda_unfused)
    return core


def _residual_bda(acc: _Acc, m: ModelArch, Tn: int, unfused: bool) -> None:
    """The bias-dropout-add after a linear with ``add_bias_linear``: fused (one kernel, 6 B per element;
    +1 B dropout mask) or, with ``bias_dropout_fusion`` off, Megatron's ``_bias_dropout_add_func``
    (megatron/core/fusions/fused_bias_dropout.py): ``x + bias`` (4 B), dropout (no kernel at p = 0:
    ATen ``dropout`` returns its input), ``residual + out`` (6 B); its backward reduces the bias grad over
    the tokens (2 B) and adds it to main_grad (DDP hook): 2 kernels each way."""
    drop = 1.0 if m.hidden_dropout else 0.0
    if unfused:
        nb = 10 + 2 * drop
        acc.elem(nb * Tn * m.hidden_size, "residual add (unfused bias + dropout + add)", 2.0 / nb,
                 (2 + (1 if drop else 0), 2))
    else:
        acc.elem((6 + drop) * Tn * m.hidden_size, "residual add (bias-dropout-add)", 1.0, (1, 0))


def _host_ops(acc: _Acc, traced: tuple[int, int], counted: tuple[int, int], what: str) -> None:
    """The launches Megatron's MoE code makes in the current scope beyond the ``counted`` ones of the priced
    rows (``traced``: :func:`moe_host.framework_kernels`), each a tiny kernel of ``KERNEL_MIN_S`` on the GPU
    (all-to-all launches included: their transfer is priced in the iteration)."""
    nf, nb = max(0, traced[0] - counted[0]), max(0, traced[1] - counted[1])
    if nf == 0 and nb == 0:
        return
    f, b = nf * KERNEL_MIN_S, nb * KERNEL_MIN_S
    acc._add(f, b, 0.0, "non_matmul")
    acc._k(nf, nb)
    acc._rec(f"{what}: small ops ({nf} fwd / {nb} bwd launches beyond the rows above)", f * acc.slow, b * acc.slow,
             0.0, ("host_ops", f"cost/moe_host.py: {traced[0]} / {traced[1]} launches in scope {acc.scope}, traced "
                               "from megatron-core 0.16.1 MoELayer (tests/moe_host_trace.py)", 0.0, 0.0))


def _routing_imbalance(acc: _Acc, start: tuple[float, float, float], imb) -> None:
    """Charge the busiest EP rank's routed-token excess (``cost/moe_imbalance.py``, ``imb``) on the receiving
    rank's expert work since ``start`` (the accumulator's totals where it began: sort, expert GEMMs,
    activation, bias, unsort) as its own row."""
    if imb.delta == 0.0:   # negative: padded to a capacity factor below 1 (every rank computes less)
        return
    d = [imb.delta * (now - was) for now, was in zip((acc.f, acc.bi, acc.bw), start)]
    if not any(d):
        return
    mods = acc.mods
    acc.mods = mods + ("moe",) if "moe" not in mods else mods
    acc._add(d[0] / acc.slow, d[1] / acc.slow, d[2] / acc.slow, "gemm")
    acc.mods = mods
    acc._rec(f"routing imbalance: {imb.text()}", d[0], d[1], d[2],
             ("imbalance", "cost/moe_imbalance.py: busiest rank = mean x (1 + sigma g(ep)); "
                           + ("sampling of forced-balance routing" if imb.mode == "forced" else
                              "sampling + learned-router spread c from shawntan/scattermoe#10 counts"), 0.0, 0.0))


def _titan_glue(acc: _Acc, m: ModelArch, Te: int, stage: str) -> None:
    """TorchTitan v0.2's eager MoE glue at one point of the layer (``stage`` "pre": routing gather and score
    multiply, before the dispatch; "permute": ``_permute`` after the all-to-all; "combine": ``_unpermute``,
    unsort, top-k combine, shared + routed add), one row per
    op group at the bytes and launches ``cost/titan_moe.py`` counts from torchtitan v0.2.1's code; each launch
    costs the host eager PyTorch's ``t_launch`` (the ops are outside the compiled submodules)."""
    k, h = m.moe_router_topk, m.hidden_size
    for o in titan_moe.glue_ops(bool(m.moe_score_before_experts), k):
        if o.stage != stage:
            continue
        f = (o.fwd_routed * Te * k + o.fwd_token * Te) * h
        b = (o.bwd_routed * Te * k + o.bwd_token * Te) * h
        # eager ATen dispatch on the host, not the compiled graph's launch cost (cost/framework.py)
        extra = eager_host_per_kernel(acc.prof) - acc.prof.host_per_kernel
        if extra > 0:
            acc.host(o.kernels[0] * extra, o.kernels[1] * extra)
        acc.elem(f, f"{o.name} (eager)", b / f if f else 0.0, o.kernels)


def te_grouped_mlp_bias(m: ModelArch, prof: Profile, grouped: bool) -> bool:
    """Whether the MoE experts are Megatron's ``TEGroupedMLP`` with biases (``add_bias_linear``): then
    its FC2 bias runs the unfused per-expert ``_apply_bias`` (:data:`EXPERT_BIAS_BYTES`) and
    ``bias_dropout_fusion`` must be off (experts.py ``TEGroupedMLP.__init__`` asserts "bias_dropout_fusion
    is not supported in TEGroupedMLP when add_bias_linear=True"; Megatron-Bridge's GPT-OSS provider sets
    ``bias_dropout_fusion = False``), so every bias-dropout-add of the model is unfused
    (:func:`_residual_bda`)."""
    return bool(m.is_moe and m.add_bias_linear and grouped and prof.name == "megatron-te")


def rope_fused(prof: Profile, m: ModelArch) -> bool:
    """Whether RoPE runs as one fused kernel.  Megatron-Core falls back to its unfused RoPE
    (``models/common/embeddings/rope_utils.py`` ``apply_rotary_pos_emb``: "mscale=... is not supported by
    TE's fused RoPE. Using unfused implementation.") whenever the YaRN concentration factor is not 1:
    ``0.1 ln(s) mscale + 1`` over ``0.1 ln(s) mscale_all_dim + 1``, which is not 1 with Megatron's
    defaults (``mscale`` 1, ``mscale_all_dim`` 0) for any scaling factor ``s`` > 1 (GPT-OSS: 32 ->
    1.35).  MLA models (DeepSeek-V3) set ``mscale_all_dim = mscale`` (factor 1) and keep the fused
    kernel.  The plan does not carry the YaRN mscales: a stated assumption by attention type."""
    if not prof.fused_rope:
        return False
    if prof.name == "megatron-te" and m.position_embedding == "yarn" and not m.multi_latent_attention:
        return False
    return True


def cutedsl_grouped_mlp(expert_gemm: str, fmt: str, arch: str) -> bool:
    """Whether Megatron's TE op-fuser grouped MLP (``moe_expert_gemm == "te_fused"``) runs as cudnn-frontend's CuTeDSL
    grouped GEMMs with the activation in their epilogues: TE ``fuse_grouped_mlp_ops`` fuses only under an MXFP8 /
    NVFP4 recipe (GEMM format ``mxfp8`` / ``fp4``) where ``ops/fused/grouped_mlp.py`` (Transformer Engine d0067d0)
    finds ``get_device_compute_capability()[0] == 10`` (``memory/fp8.py`` :data:`SM100_ARCHS`; TE-ROCm has no such
    kernels); elsewhere TE's basic ops run (per-expert GEMMs, one activation kernel)."""
    return expert_gemm == "te_fused" and fmt in ("mxfp8", "fp4") and arch in SM100_ARCHS


def _mlp(acc: _Acc, m: ModelArch, T: int, ffn_local: int, batch: int = 1, name: str = "MLP",
         separate: bool = False, input_fused: bool = False, ub: bool = False, grouped_kernel: bool = False,
         lowp: bool = True, host_each: tuple[float, float, int] | None = None, epilogue_act: bool = False,
         clamp_fused: bool = False, width: int | None = None) -> None:
    """FC1, activation, FC2 (``batch`` experts) on ``width``-wide tokens (default the hidden size; a latent MoE's
    experts: ``moe_latent_size``); ``host_each``: (forward, backward host seconds, launches) each
    linear's C++ launch loop adds before its GEMMs (TE GroupedLinear's per-expert GEMMs, cost/moe_host.py);
    ``epilogue_act``: the activation (and its clamp) runs in the GEMMs' epilogues -- Megatron's TE op-fuser grouped
    MLP (``training.moe_expert_gemm = te_fused``: cudnn-frontend's CuTeDSL ``grouped_gemm_glu`` forward, FC1 + bias
    + GLU + probability scale, and ``grouped_gemm_dglu`` backward, FC2 dgrad + dGLU + dbias; TE
    ``transformer_engine/pytorch/ops/fused/grouped_mlp.py``): no separate kernel and no clamp, but the epilogues
    still move the activation's bytes beyond a plain GEMM's output (forward the f-wide activation output, ~2 B per f
    element; backward the saved 2f pre-activation read and its 2f gradient written, ~8 B), priced as the fused
    activation pass (:data:`ACT_FUSED`: 6 / 12 B per f element) with no launch, i.e. not hidden under the mainloop:
    Megatron-Bridge's 26.06 -> 26.06.01 GPT-OSS 120B tables (same recipes; cudnn-frontend #256, the dGLU kernel
    "10x slower") imply ~1 ms per layer and micro-batch for ``grouped_gemm_dglu`` at exactly 10x, where the plain
    grouped GEMM prices 0.4 (``python scripts/gptoss_diff.py``); no per-kernel measurement of either CuTeDSL kernel
    is public;
    ``clamp_fused``: the clamp runs inside the activation kernel (TE ``ScaledClampedQGeGLU``), no separate
    clamp + cat (:data:`ACT_CLAMP`)."""
    h = width or m.hidden_size
    gated = m.swiglu
    mods = acc.mods
    if host_each:
        acc.host(*host_each)
    acc.gemm(T, (2 if gated else 1) * ffn_local, h, batch, name=f"{name} FC1", separate=separate,
             input_fused=input_fused, ub="fc1" if ub else None, grouped_kernel=grouped_kernel, lowp=lowp)
    nb, kf, kb = (ACT_FUSED if acc.prof.fused_act else ACT_EAGER)[gated]
    if "moe" in mods:
        acc.mods = mods + ("moe_act",)
    act = {"silu": "SwiGLU", "quick_gelu": "quick-GeGLU", "gelu": "GeGLU"}.get(m.activation, m.activation) \
        if gated else m.activation
    if epilogue_act:
        acc.elem(nb * T * ffn_local * batch, f"{name} {act} in the GEMM epilogues (its HBM bytes, no launch)", 2.0,
                 (0, 0))
        acc.mods = mods
        if host_each:
            acc.host(*host_each)
        acc.gemm(T, h, ffn_local, batch, name=f"{name} FC2 (activation in the epilogues)", separate=separate,
                 ub="fc2" if ub else None, grouped_kernel=grouped_kernel, lowp=lowp)
        return
    if gated and m.activation_clamp and "moe" in mods and not separate and acc.prof.name == "megatron-te" \
            and not clamp_fused:
        fb, bb, ckf, ckb = ACT_CLAMP
        acc.elem(fb * T * ffn_local * batch, f"{name} activation clamp (unfused clamp, clamp, cat)", bb / fb,
                 (ckf, ckb))
    acc.elem(nb * T * ffn_local * batch, f"{name} {act}", 2.0,
             (kf * (batch if separate else 1), kb * (batch if separate else 1)))
    acc.mods = mods
    if host_each:
        acc.host(*host_each)
    acc.gemm(T, h, ffn_local, batch, name=f"{name} FC2", separate=separate, ub="fc2" if ub else None,
             grouped_kernel=grouped_kernel, lowp=lowp)


def _titan_block_mms(m: ModelArch, T: int, t: int, moe: bool) -> list[tuple[str, int, int, int]]:
    """The ``aten.mm`` calls of one TorchTitan transformer block's forward, in program order, as
    ``(name, M, N, K)`` with TP sharding applied (torchtitan 0.3.0: attention ``FusedQKVLinear`` =
    one ``wqkv`` mm, SDPA, then ``wo``; ``FeedForward``: ``w2(silu(w1(x)) * w3(x))`` = ``w1, w3,
    w2``; DeepSeek-V3 MLA: ``wq`` (or ``wq_a, wq_b``), ``wkv_a, wkv_b``, ``wo``; MoE: the shared
    experts' ``w1, w3, w2``, the routed experts run ``torch._grouped_mm``, not ``aten.mm``).  Checked
    against torchtitan's own ``SelectiveAC`` decisions on its llama3 block
    (``tests/test_cost_model.py``)."""
    h = m.hidden_size
    a = max(1, m.num_attention_heads // t)
    out: list[tuple[str, int, int, int]] = []
    if m.multi_latent_attention:
        dqk, dr, dv = m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim
        if m.q_lora_rank:
            out += [("wq_a", T, m.q_lora_rank, h), ("wq_b", T, a * (dqk + dr), m.q_lora_rank)]
        else:
            out.append(("wq", T, a * (dqk + dr), h))
        out += [("wkv_a", T, m.kv_lora_rank + dr, h), ("wkv_b", T, a * (dqk + dv), m.kv_lora_rank),
                ("wo", T, h, a * dv)]
    else:
        d, g = m.kv_channels, max(1, m.kv_heads // t)
        out += [("wqkv", T, (a + 2 * g) * d, h), ("wo", T, h, a * d)]
    f = (m.moe_shared_expert_intermediate_size if moe else m.ffn_hidden_size) // t
    if f > 0:
        out += [("w1", T, f, h)] + ([("w3", T, f, h)] if m.swiglu else []) + [("w2", T, h, f)]
    return out


def _op_sac_recompute_fwd(acc: "_Acc", m: ModelArch, T: int, t: int, moe: bool) -> float:
    """Forward GEMM seconds TorchTitan's per-op SAC re-runs in the backward of one block: every
    second ``aten.mm`` of the block's forward (``torchtitan/distributed/activation_checkpoint.py``
    ``SelectiveAC``: "Save all compute/comm ops, except every second mm/linear"; the same rule in
    ``models/llama3/infra/parallelize.py`` ``_custom_policy`` since 2024) and the MoE router gate,
    whose shape is always recomputed (``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``).
    Attention outputs are saved (SDPA ops are in the save list), the rest is ``non_matmul``."""
    fmt = acc.fmt if acc.recipe else "bf16"
    tot = 0.0
    for i, (_, mm, n, k) in enumerate(_titan_block_mms(m, T, t, moe), start=1):
        if i % 2 == 0:
            tot += gemm_time(mm, n, k, acc.gpu, "bf16", 1, fmt)
    if moe:
        tot += gemm_time(T, m.num_experts, m.hidden_size, acc.gpu, "bf16", 1, "bf16")
    return tot * acc.slow


@lru_cache(maxsize=65536)
def _layer_times(key: tuple, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, gpu: str, cfg: tuple) -> LayerTimes:
    return _build_layers(key, tp, cp, ep, etp, sp, b, gpu, cfg, None)


def _cfg(plan: Plan) -> tuple:
    """The plan settings, besides shapes and sharding, that change kernel times (hashable)."""
    t, p = plan.training, plan.parallel
    arch = arch_of(plan.cluster.gpu)
    prof = profile_of(plan, arch)
    lowp = t.precision in ("fp8", "fp4")
    recipe = fp8m.recipe_of(plan) if lowp else None
    fmt = fp8m.gemm_format(recipe, arch) if recipe else "bf16"
    if recipe and prof.weight_quant_per_microbatch:
        wq_div = 1.0
    elif recipe and t.fp8_param_gather and not fp8m.mx_params_gathered_bf16(plan):
        wq_div = float("inf")
    else:
        wq_div = float(max(1, plan.num_microbatches))
    host = prof.host_per_kernel
    ub = tuple(t.tp_comm_overlap_cfg) if t.tp_comm_overlap and p.tp > 1 and plan.framework == "megatron" else None
    return (prof, recipe, fmt, wq_div, host, graph_scopes(plan), t.moe_grouped_gemm, t.moe_token_dispatcher,
            p.cp_comm_type, t.precision, cal.framework_eff(plan.framework), ub,
            (t.moe_router_force_load_balancing, t.moe_router_fusion, t.moe_router_aux_loss, t.moe_router_fp32,
             mib.forced_round_robin(plan), t.moe_expert_capacity_factor, t.moe_pad_expert_input_to_capacity),
            (t.moe_expert_gemm, t.moe_sync_free, bool(t.moe_glue_eager), bool(t.moe_router_padding_for_quantization),
             backward_syncs(plan)),
            bool(t.fp8_param_gather),
            frozenset(t.bf16_linears), bool(t.fp8_attention) and recipe is not None and plan.framework == "megatron",
            t.mx_dim1_cast_kernel if recipe == "mxfp8" and plan.framework == "torchtitan" else "cuda",
            wacc.bytes_per_weight_element(plan))


def _build_layers(key: tuple, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, gpu: str, cfg: tuple,
                  ops: dict | None) -> LayerTimes:
    """The kernels of each layer kind (module doc); with ``ops`` a dict, each kind's op list is
    stored in it under ``dense`` / ``moe`` / ``dense_window`` / ``moe_window`` / ``embedding`` /
    ``head`` / ``mtp``."""
    m = arch_from_key(key)
    prof, recipe, fmt, wq_div, host, graphs, grouped, dispatcher, cp_type, prec, insitu, ub, router, moe_impl, f8g, \
        bf16_lin, fp8_attn, mx_dim1, wacc_bytes = cfg
    expert_gemm, sync_free, glue_eager, router_pad, bwd_sync = moe_impl
    # TorchTitan v0.2's MoE glue as its eager ATen kernels (cost/titan_moe.py) instead of the generic permutes
    titan_glue = glue_eager and prof.name.startswith("torchtitan")
    # router mode of the routing-imbalance term (cost/moe_imbalance.py): forced balance, aux loss, expert bias
    router_mode = (router[0], router[2], bool(m.moe_router_bias) and prof.name == "megatron-te")
    cp_a2a = cp_type in ("a2a", "a2a+p2p")

    made: dict[str, _Acc] = {}

    def new(kind: str) -> _Acc:
        lst = ops.setdefault(kind, []) if ops is not None else None
        made[kind] = _Acc(gpu, prec, prof, fmt, recipe, wq_div, lst, insitu, ub)
        made[kind].expert_gemm = expert_gemm
        made[kind].fp8_gather = f8g
        made[kind].bf16 = bf16_lin
        made[kind].f8a = (arch_of(gpu), recipe, m.softmax_type != "vanilla") if fp8_attn else None
        made[kind].dim1x = fp8m.mx_dim1_extra_bytes(mx_dim1)
        made[kind].wacc = wacc_bytes
        return made[kind]

    s, h = m.seq_length, m.hidden_size
    T = b * s // cp
    Tn = T // tp if sp else T
    fused_in = prof.norm_linear
    bda_unfused = te_grouped_mlp_bias(m, prof, grouped)

    def dense_layer(kind: str, window: int | None, attention: bool = True) -> tuple[PassTimes, PassTimes, int]:
        acc = new(kind)
        core = (_attention_block(acc, m, b, s, cp, tp, T, Tn, window, cp_a2a, cp_type, bda_unfused) if attention
                else None)
        acc.scope = "mlp"
        acc.mods = ("layernorm",)
        acc.norm(Tn * h, m, "pre-MLP norm")
        acc.mods = ("mlp",)
        _mlp(acc, m, T, m.ffn_hidden_size // tp, input_fused=fused_in, ub=True)
        acc.mods = ()
        _residual_bda(acc, m, Tn, bda_unfused)
        acc.quant_flush()
        if "_" not in kind or kind.startswith("hybrid_"):   # per-module shares (selective recompute)
            acc.shares(kind, shares)
            if prof.name.startswith("torchtitan"):
                shares[f"{kind}:op_sac_mm"] = PassTimes(_op_sac_recompute_fwd(acc, m, T, tp, False), 0.0, 0.0)
        return acc.times(host, graphs), core, acc.kernels()

    def moe_layer(kind: str, window: int | None, attention: bool = True) -> tuple[PassTimes, int]:
        acc = new(kind)
        if attention:
            _attention_block(acc, m, b, s, cp, tp, T, Tn, window, cp_a2a, cp_type, bda_unfused)
        acc.scope = "moe_router"
        acc.mods = ("layernorm",)
        acc.norm(Tn * h, m, "pre-MLP norm")
        acc.mods = ("moe",)
        E, k = m.num_experts, m.moe_router_topk
        acc.gemm(Tn, E, h, lowp=False, name="router", main_grad=False)
        # Megatron's traced launches per scope (cost/moe_host.py); the router's beyond its GEMM (1 fwd, 2 bwd)
        # are the score / top-k / aux-loss row's
        mfk = {}
        rk = (4, 4)
        if prof.name == "megatron-te":
            force_balance, router_fused, aux_loss, router_fp32 = router[:4]
            mfk = moe_host.framework_kernels(dispatcher, ep, prof.fused_permute, aux_loss, router_fp32, force_balance,
                                             router_fused)
            rk = (max(1, mfk["moe_router"][0] - 1), max(1, mfk["moe_router"][1] - 2))
            what = ("fused " if router_fused else "") + "top-k" + (" / aux loss" if aux_loss else "")
        else:
            what = "softmax / top-k / aux loss"
        acc.elem(Tn * E * 4 * 3, f"router {what} (fp32; {rk[0]} / {rk[1]} launches)", 2.0, rk)
        acc.scope = "moe_preprocess"
        # a latent MoE (moe_latent_size l): fc1_latent_proj h -> l on the layer's tokens before the dispatch
        # (megatron-core moe/moe_layer.py preprocess; TELinear parallel_mode "duplicated": whole on each TP rank);
        # the permutes, dispatch, experts and combine then move l-wide tokens
        hx = m.expert_hidden
        if m.moe_latent_size:
            acc.gemm(Tn, hx, h, name="fc1_latent_proj (h -> latent)")
        Te = max(1, T * etp // tp)
        perm_k = (1, 1) if prof.fused_permute else (6, 6)
        perm_x = 1.0 if prof.fused_permute else 3.0
        held = acc.mods   # the permutes' own shares (cost/ep_comm.py: which stream runs them under the EP overlap)
        acc.mods = held + ("moe_permute",)
        if titan_glue:
            _titan_glue(acc, m, Te, "pre")
        else:
            acc.elem(perm_x * 2 * Te * k * hx * A, "permute" + ("" if prof.fused_permute else " (unfused index ops)"),
                     1.0, perm_k)
        acc.mods = held
        if mfk:
            _host_ops(acc, mfk.get("moe_preprocess", (0, 0)), perm_k, "dispatch preprocess")
        local = max(1, E // ep)
        acc.scope = "moe"   # after the dispatch (token_dispatcher dispatch_postprocess)
        e0 = (acc.f, acc.bi, acc.bw)   # the receiving rank's expert work starts here (routing imbalance)
        cs_f = cs_b = 0.0
        if dispatcher == "alltoall" and ep > 1 and local > 1:
            acc.elem(2 * Te * k * hx * A, "sort chunks by local expert", 1.0, (2, 2))
            # the unfused sort's per-chunk host work (cost/moe_host.py item 4): the dispatch sort's share here,
            # the combine sort's at the unsort below
            # only where the framework sorts per chunk (Profile.sorts_per_chunk: Megatron, not TorchTitan)
            cs_f, cs_b = (prof.host_cpu_factor * x for x in
                          moe_host.chunk_sort_host(dispatcher, ep, local, prof.fused_permute)) \
                if prof.sorts_per_chunk else (0.0, 0.0)
            if cs_f or cs_b:
                sh = moe_host.CHUNK_SORT_DISPATCH_SHARE
                acc.host(sh * cs_f, sh * cs_b)
                acc._rec(f"unfused chunk sort host: {1e3 * cs_f:.3f} / {1e3 * cs_b:.3f} ms ({ep * local} chunks, "
                         "both sorts)", 0.0, 0.0, 0.0,
                         ("host_ops", f"cost/moe_host.py item 4: {1e6 * moe_host.CHUNK_SORT_HOST_S[0]:.1f} / "
                                      f"{1e6 * moe_host.CHUNK_SORT_HOST_S[1]:.1f} us per chunk (megatron-core "
                                      "sort_chunks_by_idxs timed on CPU, scripts/amd_multinode_probe.py "
                                      "--chunk-sort); on the critical path where the layer is host-bound", 0.0, 0.0),
                         close=False)
        # the dispatcher's host-device sync (SYNC_BEFORE): Megatron always (split sizes of the
        # grouped GEMM / all-to-all, or DeepEP / HybridEP counts); TorchTitan only with EP
        # (torch._grouped_mm takes device offsets)
        # (a whole-layer CUDA graph needs static expert shapes: no sync to split it)
        # (a whole-layer CUDA graph needs static expert shapes: no sync to split it; Primus-Turbo's sync-free
        # MoE keeps the token counts on the device)
        # (the alltoall dispatcher's drop_and_pad, --moe-pad-expert-input-to-capacity: static counts, preprocess
        # returns before the D2H copy, cost/moe_imbalance.py)
        padded = router[6] and router[5] is not None and dispatcher == "alltoall" and prof.name == "megatron-te"
        acc.sync = ((prof.name == "megatron-te" or ep > 1) and host > 0 and "moe" not in graphs and not sync_free
                    and not padded)
        if acc.sync:
            acc._rec("token dispatcher host-device sync (host wakes after the D2H wait)", host, 0.0,
                     0.0, ("host", f"roofline.launch_bound_seconds: 1 x host launch {1e6 * host:.1f} us; the ops "
                                   "after the sync and the next layer's up to it launched into an idle GPU", 0.0, 0.0))
        if titan_glue:   # ExpertParallel._token_dispatch: _permute after the all-to-all (and its host sync)
            _titan_glue(acc, m, Te, "permute")
        m_e = max(1, -(-Te * ep * k // E))
        # legacy GroupedMLP (grouped_gemm's gmm) runs its experts in BF16 whatever the recipe (experts.py
        # GroupedMLP.forward: "Currently GroupedMLP for MoE only supports bf16"; gmm takes bf16 only)
        legacy = grouped and prof.name == "megatron-te" and expert_gemm == "legacy"
        # Megatron's TE op-fuser grouped MLP (moe_expert_gemm = te_fused): experts.py _fused_forward returns before
        # the per-expert _apply_bias loop (FC2's bias is scaled by the probabilities inside TE's op); TE fuses
        # GroupedLinear + activation + GroupedLinear into cudnn-frontend's CuTeDSL grouped GEMMs only for MXFP8 /
        # NVFP4 on sm100 (ops/fused/grouped_mlp.py fuse_grouped_mlp_ops: the activation in their epilogues, one
        # kernel over all experts, _mlp); otherwise the basic ops run: TE's per-expert grouped GEMM and one fused
        # scaled (clamped) activation kernel
        fused_mlp = grouped and prof.name == "megatron-te" and expert_gemm == "te_fused"
        cutedsl = fused_mlp and cutedsl_grouped_mlp(expert_gemm, fmt, arch_of(gpu))
        per_expert = grouped and prof.name == "megatron-te" and expert_gemm != "turbo" and not cutedsl
        # TEGroupedMLP's TE Fp8Padding / Fp8Unpadding around the experts (cost/moe_padding.py)
        te_pad = moe_padding.te_padding_copies(prof.name, recipe, dispatcher, expert_gemm, grouped, router_pad)
        if te_pad:
            pad_b, probs_b = moe_padding.padding_copy_bytes(m_e * local, hx, A)
            npk = moe_padding.launches_per_copy(local)
            al = moe_padding.align_size(recipe, prec)
            acc.elem(pad_b + probs_b, f"TE Fp8Padding: experts' input and probs padded to {al}-row multiples "
                     "(TEGroupedMLP)", 1.0, (2 * npk, 2 * npk))
        host_each = None
        if per_expert:
            gemm_host = moe_host.expert_gemm_host_s(expert_gemm, arch_of(gpu))
            hf_, hb_ = (prof.host_cpu_factor * x for x in
                        moe_host.grouped_linear_host(local, None if legacy else recipe, gemm_host))
            host_each = (hf_ / 2, hb_ / 2, local)
        _mlp(acc, m, m_e, m.expert_ffn // etp, batch=local,
             name="experts (grouped)" if grouped else "experts (one GEMM per expert)", separate=not grouped,
             grouped_kernel=grouped and prof.name.startswith("torchtitan"), lowp=not legacy, host_each=host_each,
             epilogue_act=cutedsl, clamp_fused=fused_mlp, width=hx)
        if grouped and prof.name.startswith("torchtitan") and recipe == "mxfp8" and fmt == "mxfp8":
            # torchao's MXFP8 grouped GEMM: the weight gradient's two K-groups scale rearranges per grouped GEMM, a
            # serial loop of one iteration per 128 tokens of a group (cost/titan_moe.py); TorchTitan's experts
            # run w1, w3 and w2 as three grouped GEMMs (models/moe/moe.py _run_experts_grouped_mm)
            calls = 3 if m.swiglu else 2
            tb = titan_moe.k_groups_rearrange_seconds(m_e, calls)
            acc._add(0.0, 0.0, tb, "non_matmul")
            acc._k(0, calls * titan_moe.K_GROUPS_PER_GEMM)
            acc._rec(f"torchao MXFP8 wgrad scale rearrange ({calls * titan_moe.K_GROUPS_PER_GEMM} x 2d K-groups, "
                     f"{-(-m_e // titan_moe.TOKENS_PER_ITER)} serial iterations each)", 0.0, 0.0, tb * acc.slow,
                     ("serial", "cost/titan_moe.py k_groups_rearrange_seconds: records "
                                     "ao-b200-moe-wgrad-triton_mx_block_rearrange_2d_K_groups-*", 0.0, 0.0))
        if per_expert:
            what = "legacy grouped_gemm (BF16)" if legacy else "TE GroupedLinear"
            acc._rec(f"{what} host: {1e3 * hf_:.3f} / {1e3 * hb_:.3f} ms ({local} BLAS GEMMs per linear "
                     "and pass" + (", per-expert quantize" if recipe and not legacy else "") + ")", 0.0, 0.0, 0.0,
                     ("host_ops", f"cost/moe_host.py: {1e6 * gemm_host:.0f} us per GEMM ("
                                  + ("calibration.ROCM_LEGACY_GEMM_HOST_S: the legacy grouped_gemm on ROCm, fitted "
                                     f"on {cal.ROCM_LEGACY_GEMM_ROW}" if gemm_host != moe_host.TE_GEMM_HOST_S
                                     else "record raft1736-cublaslt-launch-host")
                                  + "); on the critical path where the layer is host-bound (host launch-bound row)",
                      0.0, 0.0), close=False)
        if bda_unfused and not fused_mlp:
            if dispatcher in ("deepep", "hybridep"):   # fp32 probs (EXPERT_BIAS_BYTES_FP32_PROBS)
                (fb, bb), kern, pd = EXPERT_BIAS_BYTES_FP32_PROBS, (2 * local + 2, 8 * local + 3), "fp32"
            else:
                (fb, bb), kern, pd = EXPERT_BIAS_BYTES, (2 * local + 1, 6 * local + 2), "bf16"
            acc.elem(fb * m_e * local * hx, f"experts FC2 bias x probs (TEGroupedMLP._apply_bias: {local} experts, "
                     f"{pd} probs)", bb / fb, kern)
        if te_pad:
            acc.elem(pad_b, "TE Fp8Unpadding: experts' output unpadded (TEGroupedMLP)", 1.0, (npk, npk))
        if dispatcher == "alltoall" and ep > 1 and local > 1:
            acc.elem(2 * Te * k * hx * A, "unsort chunks", 1.0, (2, 2))
            if cs_f or cs_b:   # the combine sort's share (cost/moe_host.py item 4)
                sh = 1.0 - moe_host.CHUNK_SORT_DISPATCH_SHARE
                acc.host(sh * cs_f, sh * cs_b)
        if not router[4]:   # Primus-Turbo's forced round robin: every expert the same count (cost/moe_imbalance.py)
            _routing_imbalance(acc, e0, mib.capped(mib.rank_imbalance(E, k, ep, Te * ep, mib.mode_of(*router_mode)),
                                                   router[5], router[6]))
        held = acc.mods
        acc.mods = held + ("moe_unpermute",)
        if titan_glue:
            _titan_glue(acc, m, Te, "combine")
        else:
            acc.elem(perm_x * 2 * Te * k * hx * A, "unpermute + weighted combine", 1.0, perm_k)
        acc.mods = held
        if mfk:
            sorts = 4 if dispatcher == "alltoall" and ep > 1 and local > 1 else 0
            _host_ops(acc, mfk["moe"], (perm_k[0] + sorts, perm_k[1] + sorts), "token dispatch / combine")
        if m.moe_latent_size:   # fc2_latent_proj l -> h after the combine (moe_layer.py postprocess)
            acc.scope = "moe"
            acc.gemm(Tn, h, hx, name="fc2_latent_proj (latent -> h)")
        if m.moe_shared_expert_intermediate_size:
            acc.scope = "mlp"
            acc.mods = ("shared_experts",)
            _mlp(acc, m, T, m.moe_shared_expert_intermediate_size // tp, name="shared expert", input_fused=fused_in)
        acc.scope = "other"
        acc.mods = ()
        acc.elem(6.0 * Tn * h, "residual add", 1.0, (1, 0))
        acc.quant_flush()
        if "_" not in kind or kind.startswith("hybrid_"):   # per-module shares (selective recompute)
            acc.shares(kind, shares)
            if prof.name.startswith("torchtitan"):
                shares[f"{kind}:op_sac_mm"] = PassTimes(_op_sac_recompute_fwd(acc, m, T, tp, True), 0.0, 0.0)
        return acc.times(host, graphs), acc.kernels()

    shares: dict = {}
    if m.is_hybrid:
        return _hybrid_layers(m, new, dense_layer, moe_layer, b, s, cp, tp, T, Tn, cp_a2a, cp_type, bda_unfused,
                              host, graphs, gpu, ops, made, shares, bwd_sync)
    dense, attn, _ = dense_layer("dense", None)
    window = m.window_size
    has_window = window is not None and m.num_window_layers > 0
    dense_w = dense_layer("dense_window", window)[0] if has_window else None
    moe = moe_w = None
    if m.is_moe:
        moe = moe_layer("moe", None)[0]
        if has_window:
            moe_w = moe_layer("moe_window", window)[0]

    emb, head, mtp = _stage_extras(new, m, T, Tn, tp, gpu, host, graphs)
    _ops_summary(ops, made, host, graphs)
    return LayerTimes(dense_layer=dense, moe_layer=moe, embedding=emb, head_loss=head, attn_core=attn,
                      dense_window_layer=dense_w, moe_window_layer=moe_w, mtp_extra=mtp, parts=shares)


def _stage_extras(new, m: ModelArch, T: int, Tn: int, tp: int, gpu: str, host: float,
                  graphs: frozenset) -> tuple[PassTimes, PassTimes, PassTimes | None]:
    """(embedding, output head + loss, one MTP depth's own modules or None) of a stage, GPT and hybrid stacks alike:
    the embedding gather (``4 T h`` bytes forward) and its gradient scatter-add (``T h (A + 4 + 4)``); the final
    norm, the bf16 output GEMM [T, V/t, h] and the cross-entropy's ``T V/t`` x :data:`CE_BYTES` traffic; MTP's
    enorm / hnorm, embedding gather and ``eh_proj`` [T, h/t, 2h] (megatron-core ``multi_token_prediction.py``)."""
    h = m.hidden_size
    acc = new("embedding")
    acc.f += elementwise_time(4.0 * T * h, gpu) * acc.slow
    acc.bw += elementwise_time(float(T * h * (A + 4 + 4)), gpu) * acc.slow
    acc._k(1, 2)
    acc._rec("embedding gather / grad scatter-add", acc.f, 0.0, acc.bw, ("elementwise", "hbm", 0.0, 0.0))
    emb = acc.times(host, frozenset())

    acc = new("head")
    V = m.padded_vocab_size(tp) // tp
    acc.norm(Tn * h, m, "final norm")
    acc.gemm(T, V, h, lowp=False, name="output layer (bf16)")
    ce = acc.prof.ce
    fb, bb, kf, kb = CE_BYTES[ce]
    f0, bi0 = acc.f, acc.bi
    acc.f += elementwise_time(float(T * V * fb), gpu) * acc.slow
    acc.bi += elementwise_time(float(T * V * bb), gpu) * acc.slow
    acc._k(kf, kb)
    acc._rec(f"cross-entropy ({ce})", acc.f - f0, acc.bi - bi0, 0.0, ("elementwise", "hbm", 0.0, T * V * fb))
    head = acc.times(host, frozenset())

    mtp = None
    if m.mtp_num_layers:
        acc = new("mtp")
        acc.norm(Tn * h, m, "MTP enorm")
        acc.norm(Tn * h, m, "MTP hnorm")
        acc.elem(4.0 * T * h, "MTP embedding gather", 1.0, (1, 1))
        acc.gemm(T, max(1, h // tp), 2 * h, name="MTP eh_proj")
        acc.quant_flush()
        mtp = acc.times(host, graphs)
    return emb, head, mtp


def _ops_summary(ops: dict | None, made: dict, host: float, graphs: frozenset) -> None:
    """Store each layer kind's kernel counts and host summary in ``ops`` (``_kernels``, ``_host``)."""
    if ops is not None:
        ops["_kernels"] = {k: (sum(a.kf.values()), sum(a.kb.values())) for k, a in made.items()}
        ops["_host"] = {k: a.host_summary(host, graphs if k not in ("embedding", "head") else frozenset())
                        for k, a in made.items()}


def _mamba_mixer(acc: _Acc, m: ModelArch, t: int, T: int, Tn: int, gpu: str, bda_unfused: bool) -> None:
    """A Mamba layer (``cost/mamba.py``): the input norm fused into ``in_proj`` [T, (2 d_i + 2GN + H)/t, h],
    megatron-core's two layout copies, causal_conv1d over the x / B / C channels, the SSD chunk scan (priced from its
    H100 measurement), the gated RMSNorm, ``out_proj`` [T, h, d_i/t] and the residual add."""
    h = m.hidden_size
    acc.scope = "mamba"
    acc.mods = ("layernorm",)
    acc.norm(Tn * h, m, "Mamba input norm")
    acc.mods = ()
    acc.gemm(T, max(1, mamba.in_proj_width(m) // t), h, name="Mamba in_proj", input_fused=acc.prof.norm_linear,
             ub="fc1", col=True)
    acc.elem(mamba.layout_copy_bytes(m, T, t), "Mamba layout copies (zxBCdt to b-l-d, y back to l-b-d)", 1.0, (2, 2))
    acc.elem(mamba.conv1d_bytes(m, T, t), "causal_conv1d (x, B, C) + SiLU (backward: forward recomputed)",
             mamba.CONV_BWD_OVER_FWD, (1, 2))
    spec = get_gpu(gpu)
    f, bi = mamba.ssd_scan_seconds(m, T, t, spec.hbm_bw, spec.name)
    acc._add(f, bi, 0.0, "non_matmul")
    acc._k(5, 14)
    acc._rec("SSD chunk scan (mamba_chunk_scan_combined)", f * acc.slow, bi * acc.slow, 0.0,
             ("kernel", mamba.SSD_SOURCE, 0.0, 0.0))
    gf, gb = mamba.ssd_gate_bytes(m, T, t)
    acc.elem(gf, "SSD z gate (read z, write out_x; backward _chunk_scan_bwd_dz)", gb / gf, (0, 1))
    acc.elem(mamba.gated_norm_bytes(m, T, t), "gated RMSNorm (norm(y) * silu(z))", 2.0, (1, 2))
    acc.gemm(T, h, max(1, m.mamba_d_inner // t), name="Mamba out_proj", ub="fc2")
    acc.scope = "other"
    _residual_bda(acc, m, Tn, bda_unfused)


HYBRID_ACC = {"*": "hybrid_attn", "-": "hybrid_mlp", "E": "hybrid_moe", "M": "hybrid_mamba"}


def _pool_hybrid_backward(m: ModelArch, kinds: dict[str, PassTimes], made: dict) -> None:
    """Replace each hybrid layer kind's backward host exposure by its share of the stack's pooled one
    (cost/host_runahead.py; layers counted in ``hybrid_pattern`` plus ``mtp_num_layers`` x ``hybrid_mtp_pattern``)."""
    pat = (m.hybrid_pattern or "") + (m.hybrid_mtp_pattern or "") * (m.mtp_num_layers or 0)
    items = {}
    for sym, t in kinds.items():
        acc = made[HYBRID_ACC[sym]]
        hb, x, _ = acc.hbx
        items[sym] = (pat.count(sym), PassTimes(t.fwd_s, acc.bi, acc.bw), hb, x)
    for sym, bi in host_runahead.pooled_backward(items).items():
        kinds[sym] = made[HYBRID_ACC[sym]].pool_backward(kinds[sym], bi)


def _hybrid_layers(m: ModelArch, new, dense_layer, moe_layer, b: int, s: int, cp: int, tp: int, T: int, Tn: int,
                   cp_a2a: bool, cp_type: str, bda_unfused: bool, host: float, graphs: frozenset, gpu: str,
                   ops: dict | None, made: dict, shares: dict, bwd_sync: bool = True) -> LayerTimes:
    """The layer kinds of a hybrid stack (``hybrid_pattern``): each symbol is a layer of its own, priced as the
    matching part of a GPT layer -- ``*`` the attention block (norm, QKV, core attention, out-proj, residual), ``-``
    the MLP (norm, FC1, activation, FC2, residual), ``E`` the MoE part (norm, router, dispatch, experts, shared
    experts, residual) -- or :func:`_mamba_mixer`; returned in ``LayerTimes.hybrid`` by symbol (``dense_layer`` is
    the attention layer's, ``moe_layer`` the MoE layer's)."""
    kinds: dict[str, PassTimes] = {}
    attn = None
    pat = (m.hybrid_pattern or "") + ((m.hybrid_mtp_pattern or "") if m.mtp_num_layers else "")
    if "*" in pat:
        acc = new("hybrid_attn")
        attn = _attention_block(acc, m, b, s, cp, tp, T, Tn, None, cp_a2a, cp_type, bda_unfused)
        acc.quant_flush()
        acc.shares("hybrid_attn", shares)
        kinds["*"] = acc.times(host, graphs)
    if "-" in pat:
        kinds["-"] = dense_layer("hybrid_mlp", None, attention=False)[0]
    if "E" in pat:
        kinds["E"] = moe_layer("hybrid_moe", None, attention=False)[0]
    if "M" in pat:
        acc = new("hybrid_mamba")
        _mamba_mixer(acc, m, tp, T, Tn, gpu, bda_unfused)
        acc.quant_flush()
        kinds["M"] = acc.times(host, graphs)
    if not bwd_sync and host > 0:
        _pool_hybrid_backward(m, kinds, made)
    # an MTP depth's own modules; its layers are priced by symbol (steps/stage.py)
    emb, head, mtp = _stage_extras(new, m, T, Tn, tp, gpu, host, graphs)
    _ops_summary(ops, made, host, graphs)
    first = next(iter(kinds.values()))
    return LayerTimes(dense_layer=kinds.get("*", first), moe_layer=kinds.get("E"), embedding=emb, head_loss=head,
                      attn_core=attn, parts=shares, hybrid=kinds, mtp_extra=mtp)


def clear_caches() -> None:
    """Forget every cached time (after calibration constants change)."""
    from primus_launch.projection.cost import collectives, compute
    from primus_launch.projection.cost import framework

    compute.clear_caches()
    collectives.clear_caches()
    framework.clear_caches()
    _layer_times.cache_clear()


def layer_times_roofline(plan: Plan) -> LayerTimes:
    """Compute-only times of one micro-batch per layer kind on one GPU (module doc)."""
    p, t = plan.parallel, plan.training
    return _layer_times(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel,
                        t.micro_batch_size, plan.cluster.gpu, _cfg(plan))


def backward_syncs(plan: Plan) -> bool:
    """Whether the backward re-runs the MoE dispatcher's host sync, so its host launches cannot run ahead across
    layers (cost/host_runahead.py): :func:`syncs_in_backward` of the plan's recompute and EP overlap."""
    r = plan.training.recompute
    return syncs_in_backward(r.granularity, r.modules, plan.training.overlap_moe_expert_parallel_comm)


def syncs_in_backward(granularity: str, modules, ep_overlap: bool) -> bool:
    """Full recompute, ``moe`` among the selective-recompute ``modules``, or the 1F1B EP overlap (a forward
    interleaved with each backward): the backward then re-runs the dispatcher's forward and its host sync."""
    return granularity == "full" or (granularity == "selective" and "moe" in (modules or ())) or bool(ep_overlap)


def floor_cfg(plan: Plan) -> tuple:
    """:func:`_cfg` of ``plan`` at the floor of the settings that only add time: no host launch time
    (``host_per_kernel`` 0, so no CUDA-graph scope matters: :meth:`_Acc.times` returns the GPU work),
    no TE userbuffers slowdown (its factors are >= 1, ``cost/contention.py``) and the FP8 weights
    quantised zero times per micro-batch (``wq_div`` = inf, as with FP8 parameter all-gather), no unfused
    ``main_grad`` accumulation (``cost/wgrad_accumulation.py``: the tuner turns the fusion off with FSDP).  Plans
    that differ only in ``tp_comm_overlap``, ``fp8_param_gather``, CUDA graphs and the micro-batch count
    share it (the tuner's bound key)."""
    c = list(_cfg(plan))
    c[3], c[4], c[5], c[11] = float("inf"), 0.0, frozenset(), None   # wq_div, host, graphs, ub
    c[14] = False   # fp8_param_gather only changes the per-step weight casts, zero at wq_div = inf
    c[-1] = 0.0     # the unfused main_grad accumulation (>= 0 s; follows dp_sharding: tuner/knobs.py apply_knobs)
    return tuple(c)


def layer_times_floor(plan: Plan) -> LayerTimes:
    """A floor of :func:`layer_times_roofline` over the plans that differ from ``plan`` only in TP
    communication overlap, FP8 parameter all-gather, CUDA graphs and the number of micro-batches:
    the same kernels' GPU seconds at :func:`floor_cfg` (a pass is ``max(GPU, host)``, the userbuffers
    factors are >= 1, the per-step weight casts >= 0).  The lower bounds of the tuner's
    branch-and-bound search (``tuner/bounds.py``) stand on it; ``tests/test_tuner_bounds.py`` checks
    every pass time below the roofline's on sampled plans of the bundled recipes."""
    p, t = plan.parallel, plan.training
    return _layer_times(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel,
                        t.micro_batch_size, plan.cluster.gpu, floor_cfg(plan))


def layer_op_times(plan: Plan) -> dict[str, list[tuple[str, float, float, float, tuple]]]:
    """Per layer kind (``dense``, ``moe``, ``dense_window``, ``moe_window``, ``embedding``, ``head``,
    ``mtp``), the ops of one micro-batch on one GPU as ``(name, forward s, input-grad s, weight-grad
    s, info)``; their GPU times sum to :func:`layer_times_roofline` unless the layer is host-bound.
    ``"_kernels"``: per kind, the (forward, backward) kernels launched."""
    p, t = plan.parallel, plan.training
    ops: dict = {}
    _build_layers(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel, t.micro_batch_size,
                  plan.cluster.gpu, _cfg(plan), ops)
    return ops


def kernels_per_step(plan: Plan) -> int:
    """Kernels one GPU launches in one iteration (every decoder layer, recomputed forwards, embedding,
    head + loss), by the profile's decomposition; used to fit the host launch cost
    (``cost/framework.py``)."""
    n = layer_op_times(plan)["_kernels"]
    m, t = plan.model, plan.training
    n_moe = m.num_moe_layers
    n_dense = m.num_layers - n_moe
    per_mb = n_dense * sum(n["dense"]) + n_moe * sum(n.get("moe", (0, 0)))
    if t.recompute.granularity == "full":
        per_mb += n_dense * n["dense"][0] + n_moe * n.get("moe", (0, 0))[0]
    per_mb += sum(n["embedding"]) + sum(n["head"])
    return per_mb * plan.num_microbatches
