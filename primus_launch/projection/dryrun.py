"""Dry-run projection: per-layer compute times from the roofline/efficiency model, then assembly.

:func:`layer_times_roofline` lists the kernels of one micro-batch through a decoder layer on ONE
GPU with the plan's TP / CP / EP / expert-TP sharding applied (communication excluded: that is
:func:`primus_launch.projection.iteration.assemble`'s job) and times each with
:mod:`primus_launch.projection.compute`. Notation: b = micro-batch, s = sequence, t = TP,
T = b*s/cp tokens on this CP rank (GEMMs see all T after the SP all-gather), Tn = T/t with
sequence parallel else T (norms, residuals), h = hidden, a/g = query/KV heads, d = head dim,
f = FFN size, E/k = experts/top-k.

Forward kernels per dense layer (GEMM [M, N, K]):
  input norm (elementwise 4*Tn*h B), QKV [T, (a+2g)d/t, h], RoPE on q,k (4*T*(a+g)d/t B),
  core attention (b, a/t heads, s/cp queries x s keys, causal), out-proj [T, h, a*d/t],
  2 residual adds (6*Tn*h B each), pre-MLP norm, FC1 [T, (2 if SwiGLU else 1)*f/t, h],
  SwiGLU/GeLU (6 or 4 * T*f/t B), FC2 [T, h, f/t].
MLA attention (DeepSeek-V2/V3, Megatron ``MLASelfAttention``): q-down [T, r_q, h] (replicated
  over TP, TE "duplicated" linear), q-norm, q-up [T, a(d_qk+d_r)/t, r_q] (or q [T, a(d_qk+d_r)/t,
  h]), kv-down [T, r_kv+d_r, h] (replicated), kv-norm, kv-up [T, a(d_qk+d_v)/t, r_kv], core
  attention with d_qk + d_r keys and d_v values, out-proj [T, h, a*d_v/t].
MoE layer: attention as above; router [Tn, E, h] + softmax/top-k; permute and unpermute + weighted
  combine, each moving every routed copy once (read h + write h: 2*T_e*k*h B; a gather / scatter-add,
  as Megatron ``moe_utils.permute`` / ``unpermute`` and TE's fused ``moe_permute`` do), whose
  backward is the mirror gather / scatter of the same bytes (1x, not the 2x of norms);
  T_e = T*et/t tokens per GPU entering the experts; grouped expert GEMMs (one kernel) with
  E/ep local experts of M = T_e*ep*k/E tokens each (balanced routing): FC1 [M, (2)f_e/et, h],
  FC2 [M, h, f_e/et]; shared experts as a dense MLP of size f_s.
Embedding (first stage): gather 4*T*h B forward; backward scatter-add into fp32 grads (weight-grad).
Head + loss (last stage): final norm, output GEMM [T, V/t, h] in bf16, vocab-parallel
  cross-entropy over fp32 logits (~14 B per logit forward, 6 backward).

Backward of a GEMM [M, N, K]: input-grad [M, K, N] (``bwd_input``) and weight-grad [K, N, M]
(``bwd_weight``). FP8 GEMMs add their scaling casts: 5 B per element of input and weight forward,
5 B per output-gradient element and 2 B per element of fp8 transposes backward; element-wise kernels cost twice their forward bytes in backward (permutes: once); attention
backward is the flash-attention backward of :func:`compute.attention_time`.
"""

from __future__ import annotations

from functools import lru_cache

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.compute import attention_time, elementwise_time, gemm_time
from primus_launch.projection.iteration import LayerTimes, PassTimes, assemble
from primus_launch.projection.params import _arch, arch_key
from primus_launch.projection.result import ProjectionResult

A = 2  # bytes of a bf16 activation element


class _Acc:
    """Accumulates forward / input-grad / weight-grad seconds; with ``ops`` a list, also records
    each kernel as ``(name, fwd, bwd_input, bwd_weight)`` (for :func:`layer_op_times`)."""

    __slots__ = ("f", "bi", "bw", "gpu", "prec", "ops")

    def __init__(self, gpu: str, prec: str, ops: list | None = None):
        self.f = self.bi = self.bw = 0.0
        self.gpu, self.prec = gpu, prec
        self.ops = ops

    def _rec(self, name: str, f0: float, bi0: float, bw0: float) -> None:
        if self.ops is not None:
            self.ops.append((name, self.f - f0, self.bi - bi0, self.bw - bw0))

    def gemm(self, m: int, n: int, k: int, batch: int = 1, prec: str | None = None, name: str = "gemm") -> None:
        f0, bi0, bw0 = self.f, self.bi, self.bw
        p = prec or self.prec
        g = self.gpu
        self.f += gemm_time(m, n, k, g, p, batch)
        self.bi += gemm_time(m, k, n, g, p, batch)
        self.bw += gemm_time(k, n, m, g, p, batch)
        if p == "fp8":
            # FP8 scaling casts (TE / torchao float8, tensorwise): read bf16 2 B + amax pass 2 B +
            # write fp8 1 B per element of the input and weight (forward) and of the output
            # gradient (backward); fp8 transposes for the weight-grad GEMM (1 B read + 1 B write)
            self.f += elementwise_time(5.0 * (m * k + k * n) * batch, g)
            self.bi += elementwise_time(5.0 * m * n * batch, g)
            self.bw += elementwise_time(2.0 * (m * k + m * n) * batch, g)
        if self.ops is not None:
            self._rec(f"{name} [{m}x{n}x{k}]" + (f" x{batch}" if batch > 1 else ""), f0, bi0, bw0)

    def elem(self, nbytes: float, name: str = "elementwise", bwd: float = 2.0) -> None:
        """A bandwidth-bound kernel; its backward moves ``bwd`` times the forward bytes."""
        t = elementwise_time(float(nbytes), self.gpu)
        tb = bwd * t
        self.f += t
        self.bi += tb
        self._rec(name, self.f - t, self.bi - tb, self.bw)

    def attn(self, b: int, heads: int, sq: int, skv: int, dqk: int, dv: int) -> tuple[float, float]:
        f, bw = attention_time(b, heads, sq, skv, dqk, dv, True, self.gpu)
        self.f += f
        self.bi += bw
        self._rec(f"core attention b{b} h{heads} s{sq}x{skv} d{dqk}/{dv}", self.f - f, self.bi - bw, self.bw)
        return f, bw

    def times(self) -> PassTimes:
        return PassTimes(self.f, self.bi, self.bw)


def _attention_block(acc: _Acc, m: ModelArch, b: int, s: int, cp: int, t: int, T: int, Tn: int) -> PassTimes:
    h = m.hidden_size
    a = m.num_attention_heads // t
    acc.elem(4 * Tn * h * A, "input norm")
    if m.multi_latent_attention:
        dqk, dr, dv = m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim
        if m.q_lora_rank:
            acc.gemm(T, m.q_lora_rank, h, name="MLA q down")
            acc.elem(4 * T * m.q_lora_rank * A, "MLA q norm")
            acc.gemm(T, a * (dqk + dr), m.q_lora_rank, name="MLA q up")
        else:
            acc.gemm(T, a * (dqk + dr), h, name="MLA q")
        acc.gemm(T, m.kv_lora_rank + dr, h, name="MLA kv down")
        acc.elem(4 * T * m.kv_lora_rank * A, "MLA kv norm")
        acc.gemm(T, a * (dqk + dv), m.kv_lora_rank, name="MLA kv up")
        acc.elem(4 * T * (a + 1) * dr * A, "RoPE (rope parts of q, k)")
        f, bw = acc.attn(b, a, s // cp, s, dqk + dr, dv)
        acc.gemm(T, h, a * dv, name="attention out-proj")
    else:
        d = m.kv_channels
        g = max(1, m.kv_heads // t)
        acc.gemm(T, (a + 2 * g) * d, h, name="QKV")
        if m.position_embedding == "rope":
            acc.elem(4 * T * (a + g) * d * A, "RoPE")
        f, bw = acc.attn(b, a, s // cp, s, d, d)
        acc.gemm(T, h, a * d, name="attention out-proj")
    acc.elem(6 * Tn * h * A, "residual add")
    acc.elem(4 * Tn * h * A, "pre-MLP norm")
    return PassTimes(f, bw, 0.0)


def _mlp(acc: _Acc, m: ModelArch, T: int, ffn_local: int, batch: int = 1, name: str = "MLP") -> None:
    h = m.hidden_size
    acc.gemm(T, (2 if m.swiglu else 1) * ffn_local, h, batch, name=f"{name} FC1")
    acc.elem((6 if m.swiglu else 4) * T * ffn_local * A * batch, f"{name} {'SwiGLU' if m.swiglu else 'GeLU'}")
    acc.gemm(T, h, ffn_local, batch, name=f"{name} FC2")


@lru_cache(maxsize=65536)
def _layer_times(key: tuple, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, prec: str,
                 gpu: str) -> LayerTimes:
    return _build_layers(key, tp, cp, ep, etp, sp, b, prec, gpu, None)


def _build_layers(key: tuple, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, prec: str, gpu: str,
                  ops: dict | None) -> LayerTimes:
    """The kernels of each layer kind (module doc); with ``ops`` a dict, each kind's kernel list
    is stored in it under ``dense`` / ``moe`` / ``embedding`` / ``head``."""
    m = _arch(key)

    def new(kind: str) -> _Acc:
        lst = None
        if ops is not None:
            lst = ops.setdefault(kind, [])
        return _Acc(gpu, prec, lst)
    s, h = m.seq_length, m.hidden_size
    T = b * s // cp
    Tn = T // tp if sp else T

    acc = new("dense")
    attn = _attention_block(acc, m, b, s, cp, tp, T, Tn)
    _mlp(acc, m, T, m.ffn_hidden_size // tp)
    acc.elem(6 * Tn * h * A, "residual add")
    dense = acc.times()

    moe = None
    if m.is_moe:
        acc = new("moe")
        _attention_block(acc, m, b, s, cp, tp, T, Tn)
        E, k = m.num_experts, m.moe_router_topk
        acc.gemm(Tn, E, h, prec="bf16", name="router")  # fp32/bf16 in practice
        acc.elem(Tn * E * 4 * 3, "router softmax / top-k (fp32)")
        Te = max(1, T * etp // tp)
        acc.elem(2 * Te * k * h * A, "permute", bwd=1.0)
        local = max(1, E // ep)
        m_e = max(1, -(-Te * ep * k // E))
        _mlp(acc, m, m_e, m.expert_ffn // etp, batch=local, name="experts (grouped)")
        acc.elem(2 * Te * k * h * A, "unpermute + weighted combine", bwd=1.0)
        if m.moe_shared_expert_intermediate_size:
            _mlp(acc, m, T, m.moe_shared_expert_intermediate_size // tp, name="shared expert")
        acc.elem(6 * Tn * h * A, "residual add")
        moe = acc.times()

    acc = new("embedding")
    acc.f += elementwise_time(4.0 * T * h * A, gpu)
    acc.bw += elementwise_time(float(T * h * (A + 4 + 4)), gpu)
    acc._rec("embedding gather / grad scatter-add", 0.0, 0.0, 0.0)  # fresh accumulator: all of it
    emb = acc.times()

    acc = new("head")
    V = m.padded_vocab_size(tp) // tp
    acc.elem(4 * Tn * h * A, "final norm")
    acc.gemm(T, V, h, prec="bf16", name="output layer (bf16)")
    f0, bi0, bw0 = acc.f, acc.bi, acc.bw
    acc.f += elementwise_time(float(T * V * 14), gpu)     # cross-entropy forward
    acc.bi += elementwise_time(float(T * V * 6), gpu)     # softmax grad
    acc._rec("cross-entropy (fp32 logits)", f0, bi0, bw0)
    head = acc.times()
    return LayerTimes(dense_layer=dense, moe_layer=moe, embedding=emb, head_loss=head, attn_core=attn)


def clear_caches() -> None:
    """Forget every cached time (after calibration constants change)."""
    from primus_launch.projection import collectives, compute

    compute.clear_caches()
    _layer_times.cache_clear()
    for f in (collectives._links, collectives.all_reduce, collectives.all_gather, collectives.reduce_scatter,
              collectives.all_to_all, collectives.deepep_dispatch, collectives.p2p):
        f.cache_clear()


def layer_times_roofline(plan: Plan) -> LayerTimes:
    """Compute-only times of one micro-batch per layer kind on one GPU (module doc)."""
    p, t = plan.parallel, plan.training
    return _layer_times(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel,
                        t.micro_batch_size, t.precision, plan.cluster.gpu)


def layer_op_times(plan: Plan) -> dict[str, list[tuple[str, float, float, float]]]:
    """Per layer kind (``dense``, ``moe``, ``embedding``, ``head``), the kernels of one
    micro-batch on one GPU as ``(name, forward s, input-grad s, weight-grad s)``; they sum to
    :func:`layer_times_roofline` (communication excluded)."""
    p, t = plan.parallel, plan.training
    ops: dict = {}
    _build_layers(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel, t.micro_batch_size,
                  t.precision, plan.cluster.gpu, ops)
    return ops


def project_dry_run(plan: Plan, *, memory_margin: float = 0.05, record_timeline: bool = False) -> ProjectionResult:
    """Dry-run projection of ``plan``: roofline layer times assembled into an iteration."""
    return assemble(plan, layer_times_roofline(plan), "dry-run", record_timeline=record_timeline,
                    memory_margin=memory_margin)
