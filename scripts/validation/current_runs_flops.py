"""Megatron-LM dev num_floating_point_operations (BSHD, no packing), per token; mirrors
megatron/training/training.py @ d48bd6be (dev) and Megatron-Bridge v0.4.2 flop_utils.transformer_flops."""

def flops_per_token(L, h, s, V, heads, kv_heads=None, kv_channels=None, ffn=0, swiglu=True,
                    num_experts=None, topk=1, moe_ffn=None, shared=0, dense_first=0, mtp=0,
                    mla=None, gated_mult=None, swa=None):
    """Model FLOPs per token (fwd + bwd = 3x fwd). ``swa=(n_swa_layers, window)``: Megatron-Bridge 26.08 (09ce5f13c) flop_utils counts a sliding-window
    layer's core attention over the average causal window context ``w - w (w - 1) / (2 s)`` instead of ``s / 2``."""
    fe = 3 if swiglu else 2
    if gated_mult is not None:
        fe = gated_mult
    kv_heads = kv_heads or heads
    kv_channels = kv_channels or h // heads
    if num_experts:
        n_moe = L - dense_first
        n_dense = dense_first
        last_is_moe = 1
    else:
        n_moe, n_dense, last_is_moe = 0, L, 0
    n_moe += last_is_moe * mtp
    n_dense += (1 - last_is_moe) * mtp
    nl = L + mtp
    moe_ffn = moe_ffn or ffn
    mlp = 6 * h * (ffn * fe * n_dense + (moe_ffn * topk * fe) * n_moe + shared * fe * n_moe)
    if mla:
        q_lora, kv_lora, qk, rope, v = mla
        q_term = q_lora * (h + heads * (qk + rope) + 1) if q_lora else h * heads * (qk + rope)
        tok = 6 * (q_term + kv_lora * (h + heads * (qk + v) + 1) + h * rope + heads * v * h)
        core = 6 * (heads * (qk + rope) / 2 + heads * v / 2)
    else:
        q = kv_channels * heads
        kvp = kv_channels * kv_heads
        tok = 6 * (h * (q + 2 * kvp) + q * h)
        core = 6 * q / 2 * 2
    attn = tok * nl + s * core * nl
    if swa:
        n_swa, w = swa
        ctx = w - w * (w - 1) / (2 * s) if w < s else s / 2
        attn += core * n_swa * (2 * ctx - s)
    mtp_t = 6 * mtp * (3 * h + 2 * h * h)
    logit = 6 * h * V * (mtp + 1)
    return mlp + attn + mtp_t + logit

DSV3 = dict(L=61, h=7168, V=129280, heads=128, ffn=18432, num_experts=256, topk=8, moe_ffn=2048,
            shared=2048, dense_first=3, mla=(1536, 512, 128, 64, 128))
KIMI_K2 = dict(L=61, h=7168, V=163840, heads=64, ffn=18432, num_experts=384, topk=8, moe_ffn=2048,
               shared=2048, dense_first=1, mla=(1536, 512, 128, 64, 128))
QWEN3_30B = dict(L=48, h=2048, V=151936, heads=32, kv_heads=4, kv_channels=128, ffn=6144,
                 num_experts=128, topk=8, moe_ffn=768)
QWEN3_235B = dict(L=94, h=4096, V=151936, heads=64, kv_heads=4, kv_channels=128, ffn=12288,
                  num_experts=128, topk=8, moe_ffn=1536)
LLAMA3_8B = dict(L=32, h=4096, V=128256, heads=32, kv_heads=8, ffn=14336)
LLAMA3_70B = dict(L=80, h=8192, V=128256, heads=64, kv_heads=8, ffn=28672)
LLAMA31_405B = dict(L=126, h=16384, V=128256, heads=128, kv_heads=8, ffn=53248)
GPTOSS_120B = dict(L=36, h=2880, V=201088, heads=64, kv_heads=8, kv_channels=64, ffn=2880,
                   num_experts=128, topk=4, moe_ffn=2880)


def hybrid_flops_per_token(pattern, h, s, V, heads, kv_heads, kv_channels, ffn=0, swiglu=False, topk=1, moe_ffn=0,
                           shared=0, m_state=128, m_head_dim=64, m_groups=8, m_heads=None, mtp=0):
    """Model FLOPs per token of a hybrid Mamba stack (fwd + bwd = 3x fwd), restating Megatron-Bridge @09ce5f13c
    src/megatron/bridge/training/utils/flop_utils.py ``hybrid_flops`` (= Megatron-LM training.py's hybrid branch):
    attention ``4 h p (h + h g / n) + 2 h p s`` (p = kv_channels n / h), MLP ``4 f h (x 3/2 gated)``, MoE
    ``4 h (f_e k + f_s) (x 3/2 gated)``, Mamba ``2 h (2 d + 2 G N + H) + 7 d N + 2 d h`` with d = 2h ALWAYS (H the
    configured heads), logits ``2 h V (1 + mtp)``."""
    p = kv_channels * heads / h
    g = 1.5 if swiglu else 1.0
    attn = 4 * h * p * (h + h * kv_heads / heads) + 2 * h * p * s
    mlp = 4 * ffn * h * g
    moe = 4 * h * (moe_ffn * topk + shared) * g
    d = 2 * h
    nh = m_heads or d // m_head_dim
    mamba = 2 * h * (2 * d + 2 * m_groups * m_state + nh) + 7 * d * m_state + 2 * d * h
    fwd = (pattern.count("*") * attn + pattern.count("-") * mlp + pattern.count("E") * moe + pattern.count("M") * mamba
           + 2 * h * V * (1 + mtp))
    return 3 * fwd
