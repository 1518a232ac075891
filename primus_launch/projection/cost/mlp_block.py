"""A layer's MLP block -- FC1, activation, FC2 -- for a dense MLP, the shared experts and the routed experts alike
(``batch`` experts as one grouped GEMM or one GEMM each).

Shapes: FC1 [T, (2 if gated else 1) f, h], FC2 [T, h, f] (f the FFN size per TP / expert-TP rank); the activation
moves :data:`~primus_launch.projection.cost.elementwise_bytes.ACT_FUSED` / ``ACT_EAGER`` bytes per f element, the
GPT-OSS clamp ``ACT_CLAMP`` (sources in ``cost/elementwise_bytes.py``; the CuTeDSL epilogue case in :func:`mlp`).
"""

from __future__ import annotations

from primus_launch.plan import ModelArch
from primus_launch.projection.cost.elementwise_bytes import ACT_CLAMP, ACT_EAGER, ACT_FUSED
from primus_launch.projection.cost.layer_ops import LayerOps


def mlp(acc: LayerOps, m: ModelArch, T: int, ffn_local: int, batch: int = 1, name: str = "MLP",
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

