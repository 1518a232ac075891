"""The core-attention kernels of a layer: fused attention on the fitted curve of the framework's implementation,
FP8 attention scaled from it, ring context parallelism's per-step kernels and helpers, and the unfused path.

Formulas: fused, ``attention_time`` (``cost/compute.py``; the form ``t = FLOPs / rate (1 + Tc/S if causal) + t0``
of ``cost/kernels.py``, curves fitted to the kernel benchmarks of ``docs/kernel-evidence.md``); FP8, the BF16 time
times the measured FP8 / BF16 ratio plus TE's quantise kernels (``cost/fp8_attention.py``: cudnn-frontend's
published benchmark results); ring CP, one fused kernel per step at its own shape plus the helpers' bytes at
streaming speed (``cost/context_parallel.py``); unfused, batched BF16 GEMMs for QK^T and AV and the
scale-mask-softmax over the materialised ``sq x skv`` scores (4 B per score forward, 6 B backward, +3 B with
dropout).
"""

from __future__ import annotations

from primus_launch.projection.cost.compute import KERNEL_MIN_S, attention_time, elementwise_time, gemm_time, quant_time
from primus_launch.projection.cost.layer_ops import LayerOps
from primus_launch.projection.layer_times import PassTimes


def core_attention(acc: LayerOps, b: int, heads: int, sq: int, skv: int, dqk: int, dv: int, window: int | None,
                   dropout: float = 0.0, kv_heads: int | None = None) -> PassTimes:
    """The core attention of ``b`` x ``heads`` heads, ``sq`` queries over ``skv`` keys (causal, ``window``):
    the fused-attention curve of the profile's implementation (``cost/compute.py`` ``attention_time``,
    fitted to the kernel benchmarks of ``docs/kernel-evidence.md``), FP8 attention scaled by
    :func:`_fp8_scaled`, or the unfused path (:func:`unfused_attention`)."""
    impl = acc.prof.attention
    if impl == "unfused":
        return unfused_attention(acc, b, heads, sq, skv, dqk, dv, dropout)
    f, bw = attention_time(b, heads, sq, skv, dqk, dv, True, acc.gpu, impl, window)
    tag = ""
    if acc.f8a is not None and impl in ("cudnn", "fused"):
        f, bw, tag = _fp8_scaled(acc, f, bw, b, heads, kv_heads or heads, sq, skv, dqk, dv, window)
    acc.add(f, bw, 0.0, "attention")
    f, bw = f * acc.slow, bw * acc.slow
    acc.count(1, 2)
    from primus_launch.projection.cost.kernels import attention_flops

    acc.record(f"core attention ({impl}{tag}) b{b} h{heads} s{sq}x{skv} d{dqk}/{dv}"
               + (f" window {window}" if window else ""), f, bw, 0.0,
               ("attention", impl, attention_flops(b, heads, sq, skv, dqk, dv, True, window)))
    return PassTimes(f, bw, 0.0)


def _fp8_scaled(acc: LayerOps, f: float, bw: float, b: int, heads: int, kv_heads: int, sq: int, skv: int, dqk: int,
                dv: int, window: int | None) -> tuple[float, float, str]:
    """FP8 / MXFP8 core attention (``training.fp8_attention``): the BF16 times ``f`` / ``bw`` times the
    measured FP8 / BF16 ratio, plus TE's quantise kernels around it (``cost/fp8_attention.py``); a case the
    records do not cover keeps the BF16 times (the reason goes into the op's name)."""
    from primus_launch.projection.cost import fp8_attention as f8

    arch, recipe, sinks = acc.f8a
    key, why = f8.fp8_attention_case(arch, recipe, dqk, True, window, sinks)
    if key is None:
        return f, bw, f"; fp8_attention not applied: {why}"
    rf, rb = f8.ratio(key, "fwd", skv, window), f8.ratio(key, "bwd", skv, window)
    f, bw = f * rf, bw * rb
    qf, qb = f8.quant_bytes(key[3], float(b * sq * heads * dqk), float(b * skv * kv_heads * (dqk + dv)),
                            float(b * sq * heads * dv))
    tf, tb = quant_time(qf, acc.gpu, recipe or "delayed"), quant_time(qb, acc.gpu, recipe or "delayed")
    acc.add(tf, tb, 0.0, "non_matmul")
    acc.count(2, 1)
    acc.record(f"FP8 attention quantise ({key[3]}: Q/K/V, O; dO)", tf * acc.slow, tb * acc.slow, 0.0,
               ("quant", recipe or "delayed", 0.0, qf + qb, "te"))
    return f, bw, f", {key[3]}: x{rf:.2f} fwd, x{rb:.2f} bwd"


def ring_attention(acc: LayerOps, b: int, heads: int, kv_heads: int, s: int, cp: int, dqk: int, dv: int,
                   flavor: str) -> PassTimes:
    """Load-balanced causal ring attention over ``cp`` ranks (``cost/context_parallel.py``): one
    fused-attention kernel per step at its own shape, plus the framework's per-step helpers
    (copies, output / LSE merges, dq / dk,dv accumulation) at streaming speed."""
    from primus_launch.projection.cost.kernels import attention_flops
    from primus_launch.projection.cost import context_parallel as cpm

    impl = acc.prof.attention
    f = bw = 0.0
    n_steps = 0.0
    for sq, skv, causal, n in cpm.ring_steps(s, cp):
        tf, tb = attention_time(b, heads, sq, skv, dqk, dv, causal, acc.gpu, impl, None)
        f += n * tf
        bw += n * tb
        n_steps += n
    acc.add(f, bw, 0.0, "attention")
    f0, b0 = f * acc.slow, bw * acc.slow
    c = max(1, s // cp)
    eq, eo, ekv = float(b * c * heads * dqk), float(b * c * heads * dv), float(b * c * kv_heads * (dqk + dv))
    hf, hb = cpm.helper_bytes(flavor, cp, eq, eo, ekv)
    kf, kb = cpm.STEP_KERNELS[flavor]
    tf = elementwise_time(hf, acc.gpu) + (cp * (kf - 1) - 1) * KERNEL_MIN_S
    tb = elementwise_time(hb, acc.gpu) + (cp * (kb - 1) - 1) * KERNEL_MIN_S
    acc.add(tf, tb, 0.0, "attention")
    tf, tb = tf * acc.slow, tb * acc.slow
    acc.count(cp * kf, cp * kb)
    acc.record(f"core attention ({impl}) ring: {cp} steps of b{b} h{heads} s{c}: 1 causal {c}x{c}, "
               f"{cp - 1} of {c}x{c // 2} / {c // 2}x{c} d{dqk}/{dv}", f0, b0, 0.0,
               ("attention", impl, attention_flops(b, heads, c, s, dqk, dv, True, None)))
    acc.record(f"CP ring helpers ({flavor}: copies, output/LSE merges, dq/dkv accumulation)", tf, tb, 0.0,
               ("elementwise", "hbm", 0.0, hf))
    return PassTimes(f0 + tf, b0 + tb, 0.0)


def unfused_attention(acc: LayerOps, b: int, heads: int, sq: int, skv: int, dqk: int, dv: int,
                      dropout: float) -> PassTimes:
    """Unfused attention (module doc): QK^T and AV as batched BF16 GEMMs, the scale-mask-softmax over the
    materialised ``sq x skv`` scores at 4 B per score forward, 6 B backward (+3 B with dropout), and the
    backward's four batched GEMMs."""
    g, bh = acc.gpu, b * heads
    f0, bi0 = acc.f, acc.bi
    qk = gemm_time(sq, skv, dqk, g, "bf16", bh)
    av = gemm_time(sq, dv, skv, g, "bf16", bh)
    scores = float(bh) * sq * skv
    sm_f = elementwise_time(scores * (4.0 + (3.0 if dropout else 0.0)), g)
    sm_b = elementwise_time(scores * (6.0 + (3.0 if dropout else 0.0)), g)
    # backward: dP = dO V^T [sq, skv, dv], dV = P^T dO [skv, dv, sq], dS K [sq, dqk, skv], dS^T Q [skv, dqk, sq]
    bwd = (gemm_time(sq, skv, dv, g, "bf16", bh) + gemm_time(skv, dv, sq, g, "bf16", bh)
           + gemm_time(sq, dqk, skv, g, "bf16", bh) + gemm_time(skv, dqk, sq, g, "bf16", bh))
    acc.add(qk + sm_f + av, bwd + sm_b, 0.0, "attention")
    acc.count(3 + (1 if dropout else 0), 5)
    acc.record(f"core attention (unfused: QK^T, softmax over s x s, AV) b{b} h{heads} s{sq}x{skv} d{dqk}",
               acc.f - f0, acc.bi - bi0, 0.0, ("attention", "unfused", 2.0 * bh * sq * skv * (dqk + dv)))
    return PassTimes(acc.f - f0, acc.bi - bi0, 0.0)
