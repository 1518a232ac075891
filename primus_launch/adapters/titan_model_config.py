"""TorchTitan 0.3.0 model configs -> the fields of :class:`~primus_launch.plan.ModelArch`, and the model
families the projection models or refuses.

:func:`arch_fields_of_model_config` reads every field from the ``Decoder.Config`` object that
``torchtitan.models.<name>.model_registry(flavor).model`` returns (what torchtitan 0.3.0 builds is
listed in :mod:`primus_launch.adapters.torchtitan_arch`); :mod:`primus_launch.adapters.titan_snapshot`
runs it once per installed torchtitan version and keeps the result.
"""

from __future__ import annotations

from typing import Any

from primus_launch.plan import ModelArch, PlanError

SUPPORTED_MODELS = ("llama3", "qwen3", "deepseek_v3", "gpt_oss", "llama4")
# torchtitan model families (0.3.0 registry and earlier releases) the projection does not model
REFUSED_FAMILIES: dict[str, str] = {
    "flux": "a diffusion model (FLUX), not a decoder-only language model",
    "qwen3_5": "a hybrid model (Gated DeltaNet linear-attention layers) with a vision encoder",
    "kimi_k2_7": "a multimodal model (Kimi-VL / Kimi-K2.5 with a vision encoder)",
    "muse_glimmer": "a multimodal model with per-layer RoPE/no-RoPE attention and gain-centred norms",
    "vlm": "a vision-language model (torchtitan experiment)",
    "transformers_modeling_backend": "a Hugging Face transformers model run through torchtitan (name its "
                                     "torchtitan family instead)",
    "deepseek_v2": "the v0.1 DeepSeek-V2 experiment (Hugging Face checkpoint flavors), not in torchtitan's registry",
    "llama3_ft": "a fault-tolerance experiment of llama3, not a separate architecture",
}


def refuse(name: str) -> PlanError:
    """The one-line refusal for a torchtitan model family that is not modelled."""
    why = REFUSED_FAMILIES.get(name)
    allowed = f"one of {', '.join(SUPPORTED_MODELS)}"
    if why:
        return PlanError("model.name", name, f"{why}; not modelled (primus-launch models {', '.join(SUPPORTED_MODELS)})")
    return PlanError("model.name", name, allowed)


def _qualname(obj: Any) -> str:
    return type(obj).__qualname__


def _attn_fields(attn: Any) -> dict[str, Any]:
    """Attention sub-config -> ModelArch attention fields (GQA or DeepSeek MLA)."""
    if hasattr(attn, "kv_lora_rank"):  # DeepSeek-V3 MLA Attention.Config
        q_lora = attn.q_lora_rank or None
        return dict(
            num_attention_heads=attn.n_heads,
            num_query_groups=None,
            head_dim=None,
            multi_latent_attention=True,
            q_lora_rank=q_lora,
            kv_lora_rank=attn.kv_lora_rank,
            qk_head_dim=attn.qk_nope_head_dim,
            qk_pos_emb_head_dim=attn.qk_rope_head_dim,
            v_head_dim=attn.v_head_dim,
            add_qkv_bias=bool(attn.wkv_a.bias),
            add_bias_linear=bool(attn.wo.bias),
            qk_layernorm=False,
            max_position_embeddings=attn.rope.max_seq_len,
        )
    n_heads = attn.n_heads
    n_kv = attn.n_kv_heads or n_heads
    qkv = attn.qkv_linear
    head_dim = qkv.head_dim
    q_lin = getattr(qkv, "wqkv", None) or getattr(qkv, "wq")
    return dict(
        num_attention_heads=n_heads,
        num_query_groups=n_kv if n_kv != n_heads else None,
        head_dim=head_dim,
        add_qkv_bias=bool(q_lin.bias),
        add_bias_linear=bool(attn.wo.bias),
        qk_layernorm=getattr(attn, "qk_norm", None) is not None,
        max_position_embeddings=attn.rope.max_seq_len,
    )


def _window(attn: Any) -> int | None:
    """Keys left of the query a sliding-window layer attends to (GPT-OSS ``sliding_window_size`` s:
    torchtitan passes ``window_size=(s - 1, 0)`` to its attention), None for full attention."""
    s = getattr(attn, "sliding_window_size", None)
    return None if not s else int(s) - 1


def arch_fields_of_model_config(name: str, flavor: str, cfg: Any) -> dict[str, Any]:
    """Every :class:`ModelArch` field (but ``seq_length``) of a torchtitan ``Decoder.Config``.

    ``cfg`` is ``model_registry(flavor).model`` (or the ``model_spec.model`` of a config function);
    read by attribute only, so no torch import happens here.  Raises :class:`PlanError` for a
    structure the plan cannot express.
    """
    if name in REFUSED_FAMILIES:
        raise refuse(name)
    layers = list(cfg.layers)
    first = layers[0]
    rope = first.attention.rope
    fields: dict[str, Any] = dict(
        name=f"{name}-{flavor}",
        num_layers=len(layers),
        hidden_size=cfg.dim,
        vocab_size=cfg.vocab_size,
        make_vocab_size_divisible_by=1,
        untie_embeddings_and_output_weights=not cfg.enable_weight_tying,
        normalization="rmsnorm",
        position_embedding="yarn" if getattr(rope, "scaling", None) == "yarn" else "rope",
        swiglu=True,
    )
    fields.update(_attn_fields(first.attention))
    attn_init = getattr(first.attention, "param_init", None) or {}
    if "sinks" in attn_init:  # GPT-OSS: one learnable sink logit per head
        fields["softmax_type"] = "learnable"
    windows = [_window(lc.attention) for lc in layers]
    sizes = {w for w in windows if w is not None}
    if len(sizes) > 1:
        raise PlanError("model.flavor", flavor, "sliding windows of different sizes are not modelled")
    if sizes:
        fields["window_size"] = sizes.pop()
        if any(w is None for w in windows):
            fields["window_layer_pattern"] = [0 if w is None else 1 for w in windows]

    moe_flags = [getattr(lc, "moe", None) is not None for lc in layers]
    moe_layers = [lc for lc, m in zip(layers, moe_flags) if m]
    dense = [lc for lc, m in zip(layers, moe_flags) if not m]
    if moe_layers:
        moe = moe_layers[0].moe
        experts = moe.routed_experts.inner_experts
        shared = getattr(moe, "shared_experts", None)
        n_dense_first = moe_flags.index(True)
        leading = all(moe_flags[n_dense_first:])
        fields.update(
            num_experts=moe.num_experts,
            moe_router_topk=moe.router.top_k,
            moe_ffn_hidden_size=experts.hidden_dim,
            moe_shared_expert_intermediate_size=shared.w1.out_features if shared is not None else 0,
            moe_router_bias=bool(moe.router.gate.bias),
            # group-limited routing (DeepSeek-V3: 8 groups, tokens routed within the best 4)
            moe_router_num_groups=getattr(moe.router, "num_expert_groups", None),
            moe_router_group_topk=getattr(moe.router, "num_limited_groups", None),
        )
        if leading:
            fields["moe_dense_first_layers"] = n_dense_first
        else:
            fields["moe_layer_pattern"] = [int(m) for m in moe_flags]
        if "GptOss" in _qualname(experts):
            fields["activation"] = "quick_gelu"  # x * sigmoid(1.702 x), clamped (gpt_oss/moe.py)
            fields["add_bias_linear"] = True  # mlp1/mlp2 biases
    if dense:
        fields["ffn_hidden_size"] = dense[0].feed_forward.w1.out_features
        if not fields.get("add_bias_linear"):
            fields["add_bias_linear"] = bool(dense[0].feed_forward.w1.bias)
    else:
        # all-MoE model (Qwen3-MoE, GPT-OSS): the dense FFN size is unused; torchtitan's config has
        # none, so the expert FFN stands in (keeps TP divisibility checks meaningful).
        fields["ffn_hidden_size"] = fields["moe_ffn_hidden_size"]
    mtp = getattr(cfg, "mtp_layers", None) or []
    if mtp:
        fields["mtp_num_layers"] = len(mtp)
    ModelArch(**{**fields, "seq_length": 1})  # validate now, so a snapshot never holds an illegal arch
    return fields


# ----------------------------------------------------------------------------- Llama 4 (torchtitan v0.2.x)
