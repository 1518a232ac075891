"""A decoder layer's attention block: input norm, QKV (or MLA's down / up projections), q/k norm, RoPE (fused,
eager, or Megatron's unfused YaRN path), the core attention (``cost/attention_kernels.py``; ring CP per step),
the output projection and the residual add.

Shapes (GEMM [M, N, K], T tokens on this CP rank, t = TP, a / g query / KV heads per TP rank, d head dim):
QKV [T, (a+2g)d, h], out-proj [T, h, a d]; MLA (DeepSeek-V2/V3, Megatron ``MLASelfAttention``): q-down
[T, r_q, h], q-up [T, a(d_qk+d_r), r_q], kv-down [T, r_kv+d_r, h], kv-up [T, a(d_qk+d_v), r_kv], out-proj
[T, h, a d_v].  RoPE bytes per element: :mod:`~primus_launch.projection.cost.elementwise_bytes` (sources there).
"""

from __future__ import annotations

from primus_launch.plan import ModelArch
from primus_launch.projection.cost.attention_kernels import core_attention, ring_attention
from primus_launch.projection.cost.bias_dropout_add import residual_bda
from primus_launch.projection.cost.elementwise_bytes import ROPE_EAGER, ROPE_FUSED, ROPE_MEGATRON_UNFUSED
from primus_launch.projection.cost.framework import Profile
from primus_launch.projection.cost.layer_ops import LayerOps
from primus_launch.projection.layer_times import PassTimes


def attention_block(acc: LayerOps, m: ModelArch, b: int, s: int, cp: int, t: int, T: int, Tn: int,
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
    sq, skv, heads = (s, s, max(1, a // cp)) if cp_a2a else (s // cp, s, a)
    # ring (P2P) CP: per-step kernels and helpers (cost/context_parallel.py); TE's all-gather CP and
    # windowed layers keep one kernel of s/cp queries over the s keys
    ring = ""
    if cp > 1 and not cp_a2a and window is None and acc.prof.attention != "unfused":
        if acc.prof.name.startswith("torchtitan"):
            ring = "torch"
        elif cp_kind != "allgather":
            ring = "te"
    attend = (sq, skv, heads, ring, window)
    core = (_mla_attention(acc, m, b, s, cp, T, a, attend) if m.multi_latent_attention
            else _gqa_attention(acc, m, b, s, cp, t, T, a, attend))
    residual_bda(acc, m, Tn, bda_unfused)
    return core


def _mla_attention(acc: LayerOps, m: ModelArch, b: int, s: int, cp: int, T: int, a: int,
                   attend: tuple[int, int, int, str, int | None]) -> PassTimes:
    """MLA's projections (module doc: q-down / q-norm / q-up or q, kv-down, kv-norm, kv-up), RoPE on the rope parts
    of q and k, the core attention with ``d_qk + d_r`` keys and ``d_v`` values, and the out-projection; ``attend``:
    (queries, keys, heads, ring CP flavour or "", window) of the core attention; returns its times."""
    h = m.hidden_size
    fused_in = acc.prof.norm_linear
    sq, skv, heads, ring, window = attend
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
        core = ring_attention(acc, b, heads, heads, s, cp, dqk + dr, dv, ring)
    else:
        core = core_attention(acc, b, heads, sq, skv, dqk + dr, dv, window, m.attention_dropout)
    acc.mods = ()
    acc.gemm(T, h, a * dv, name="attention out-proj")
    return core


def _gqa_attention(acc: LayerOps, m: ModelArch, b: int, s: int, cp: int, t: int, T: int, a: int,
                   attend: tuple[int, int, int, str, int | None]) -> PassTimes:
    """QKV [T, (a+2g)d, h] (split where ``training.bf16_linears`` keeps some in BF16), q/k norm, RoPE (fused, eager,
    or Megatron's unfused YaRN path: :func:`rope_fused`), the core attention and the out-projection; ``attend`` as
    :func:`_mla_attention`'s; returns the core attention's times."""
    h = m.hidden_size
    fused_in = acc.prof.norm_linear
    sq, skv, heads, ring, window = attend
    d = m.kv_channels
    g = max(1, m.kv_heads // t)
    sub = m.kv_heads < t   # Megatron's QKV sub-sharding (legality: Megatron only): see qkv_subsharding
    width = qkv_subsharding(m, t) if sub else (a + 2 * g) * d
    keep = {"wq": a * d, "wk": g * d, "wv": g * d}
    hp = sum(n for r, n in keep.items() if r in acc.bf16) if acc.recipe else 0
    if hp:
        # linears a torchao converter's filter_fqns leaves in BF16 (torchtitan v0.2's separate wq / wk / wv):
        # the low-precision ones as one GEMM, the BF16 ones as another (training.bf16_linears)
        lo = width - hp
        if lo:
            acc.gemm(T, lo, h, name="QKV (" + ", ".join(r for r in keep if r not in acc.bf16) + ")",
                     input_fused=fused_in, ub="qkv")
        acc.gemm(T, hp, h, lowp=False, name="QKV (" + ", ".join(r for r in keep if r in acc.bf16) + ", bf16)",
                 input_fused=fused_in, ub="qkv")
    else:
        acc.gemm(T, width, h, name="QKV", input_fused=fused_in, ub="qkv")
    if sub:
        full = (m.num_attention_heads + 2 * m.kv_heads) * d
        acc.elem(4.0 * T * full, "QKV sub-sharding: gathered output's concat (bwd: zero-fill + concat)", 1.5, (1, 3))
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
        # torchtitan < 0.2.0's Qwen3 TP: the forward on the gathered q / k (every head), the backward on the
        # rank's heads (cost/titan_qk_norm.py; the gradients come back head-sharded)
        rope_heads = m.num_attention_heads + m.kv_heads if acc.prof.qk_replicated else a + g
        acc.elem(nb * T * rope_heads * d, label + (" (q / k replicated)" if acc.prof.qk_replicated else ""),
                 bwd * (a + g) / rope_heads, (2 * kf, 2 * kb))
    acc.mods = ("core_attn",)
    if ring:
        core = ring_attention(acc, b, heads, g, s, cp, d, d, ring)
    else:
        core = core_attention(acc, b, heads, sq, skv, d, d, window, m.attention_dropout, kv_heads=g)
    acc.mods = ()
    acc.gemm(T, h, a * d, name="attention out-proj" + (" (bf16)" if "wo" in acc.bf16 else ""), ub="proj",
             lowp="wo" not in acc.bf16)
    return core


def qkv_subsharding(m: ModelArch, t: int) -> int:
    """The QKV GEMM's output width per rank under megatron-core's QKV sub-sharding (fewer query groups ``ng`` than
    TP ranks ``t``; >= 0.16.0, f7dfb99795), as megatron-core 0.16.1 ``transformer/attention.py`` does it:

    - the fused QKV linear stays column-parallel over its full ``(nq + 2 ng) d`` output (``SelfAttention.__init__``
      ``linear_qkv_out_dim``; ``ColumnParallelLinear`` divides it by ``t``): ``(nq + 2 ng) d / t`` per rank, the
      model's QKV FLOPs over ``t`` -- no key / value head is computed twice by the GEMM;
    - ``get_query_key_value_tensors`` (:1398-1414, :1465-1476) all-gathers that output to the full width (priced in
      ``cost/tp_comm.py`` ``qkv_subshard_comm``), slices the rank's group (``nq / ng`` query heads, one key and
      one value head) and indexes its ``nq / t`` query heads: views;
    - the core attention is built with ``num_query_groups = t`` (:310-316), so it sees ``nq / t`` query heads and
      one key / value head (``_gqa_attention``'s ``g = 1``); the ``t / ng`` ranks of a group hold the same key /
      value head, and the norm / RoPE of k run on each of them (``nq / t + 1`` heads per rank).

    ``_gqa_attention`` adds the bandwidth-bound copies around the gather: forward the concatenation of the gathered
    chunks (``mappings.py`` ``_gather_along_last_dim``: ``torch.cat(...)``, read + write ``T (nq + 2 ng) d`` bf16);
    backward the slices' gradient (a zero-filled full-width tensor, the group's slice copied in) and the
    reduce-scatter's split-and-concatenate (``_reduce_scatter_along_last_dim``): 1.5 times the forward bytes, three
    kernels."""
    return (m.num_attention_heads + 2 * m.kv_heads) * m.kv_channels // t


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

