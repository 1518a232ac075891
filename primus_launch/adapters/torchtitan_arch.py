"""TorchTitan model flavors -> :class:`~primus_launch.plan.ModelArch`, read from torchtitan's own registry.

Source of truth: torchtitan 0.3.0 ``torchtitan.models.<name>.model_registry(flavor)`` returns a
``ModelSpec`` whose ``.model`` is the fully specified ``Decoder.Config`` (``dim``, ``vocab_size``,
``enable_weight_tying``, ``lm_head`` and a ``layers`` list of per-block configs with ``attention``,
``feed_forward`` and ``moe`` sub-configs).  Every :class:`ModelArch` field below is read from those
config objects (``Linear.Config.in_features/out_features/bias``, ``RMSNorm.Config``,
``GroupedExperts.Config``, ``TokenChoiceTopKRouter.Config``, DeepSeek's MLA ``Attention.Config``),
never from a hand table.

What torchtitan 0.3.0 actually builds (checked on the meta device, see the tests):

- the MoE load-balancing ``expert_bias_E`` and ``tokens_per_expert_E`` are *buffers*, not
  parameters; the router gate ``Linear`` has ``bias=False``  -> ``moe_router_bias`` = gate bias;
- DeepSeek-V3 ``model_registry`` defaults to ``num_mtp_layers=0``: no MTP block is built;
- the shared experts are one ``FeedForward`` of hidden size ``moe_hidden_dim * num_shared_experts``
  (``shared_experts.w1.out_features``);
- rope caches are buffers; norms are weight-only RMSNorm; ``enable_weight_tying`` ties
  ``tok_embeddings`` and ``lm_head`` (Qwen3 0.6B/1.7B/4B, Llama3 1B/3B).
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Any

from primus_launch.plan import ModelArch, PlanError

SUPPORTED_MODELS = ("llama3", "qwen3", "deepseek_v3")


def _registry_module(model_name: str) -> Any:
    if model_name not in SUPPORTED_MODELS:
        raise PlanError("model.name", model_name, f"one of {', '.join(SUPPORTED_MODELS)}")
    return importlib.import_module(f"torchtitan.models.{model_name}")


def flavors(model_name: str) -> list[str]:
    """The flavors torchtitan's registry knows for ``model_name``."""
    mod = _registry_module(model_name)
    table = next(v for k, v in vars(mod).items() if k.endswith("_configs") and isinstance(v, dict))
    return list(table)


def model_spec(model_name: str, flavor: str) -> Any:
    """``torchtitan.models.<name>.model_registry(flavor)`` with a one-line error for unknown flavors."""
    mod = _registry_module(model_name)
    known = flavors(model_name)
    if flavor not in known:
        raise PlanError("model.flavor", flavor, f"{model_name} flavors are {', '.join(known)}")
    return mod.model_registry(flavor)


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
        qk_layernorm=attn.qk_norm is not None,
        max_position_embeddings=attn.rope.max_seq_len,
    )


@lru_cache(maxsize=64)
def _arch_cached(model_name: str, flavor: str, seq_len: int | None) -> ModelArch:
    cfg = model_spec(model_name, flavor).model
    layers = list(cfg.layers)
    first = layers[0]
    fields: dict[str, Any] = dict(
        name=f"{model_name}-{flavor}",
        num_layers=len(layers),
        hidden_size=cfg.dim,
        vocab_size=cfg.vocab_size,
        make_vocab_size_divisible_by=1,
        untie_embeddings_and_output_weights=not cfg.enable_weight_tying,
        normalization="rmsnorm",
        position_embedding="rope",
        swiglu=True,
    )
    fields.update(_attn_fields(first.attention))
    fields["seq_length"] = seq_len or fields["max_position_embeddings"]

    dense = [lc for lc in layers if getattr(lc, "moe", None) is None]
    moe_layers = [lc for lc in layers if getattr(lc, "moe", None) is not None]
    # dense layers must be a leading block (DeepSeek first_k_dense); anything else is not expressible
    n_dense_first = next((i for i, lc in enumerate(layers) if getattr(lc, "moe", None) is not None), len(layers))
    if moe_layers and n_dense_first != len(dense):
        raise PlanError("model.flavor", flavor, "MoE layers interleaved with dense layers are not supported")

    if moe_layers:
        moe = moe_layers[0].moe
        experts = moe.routed_experts.inner_experts
        shared = moe.shared_experts
        fields.update(
            num_experts=moe.num_experts,
            moe_router_topk=moe.router.top_k,
            moe_ffn_hidden_size=experts.hidden_dim,
            moe_shared_expert_intermediate_size=shared.w1.out_features if shared is not None else 0,
            moe_dense_first_layers=n_dense_first,
            moe_router_bias=bool(moe.router.gate.bias),
            # group-limited routing (DeepSeek-V3: 8 groups, tokens routed within the best 4)
            moe_router_num_groups=getattr(moe.router, "num_expert_groups", None),
            moe_router_group_topk=getattr(moe.router, "num_limited_groups", None),
        )
    if dense:
        fields["ffn_hidden_size"] = dense[0].feed_forward.w1.out_features
        if not fields.get("add_bias_linear"):
            fields["add_bias_linear"] = bool(dense[0].feed_forward.w1.bias)
    else:
        # all-MoE model (Qwen3-MoE): the dense FFN size is unused; torchtitan's config has none,
        # so the expert FFN stands in (keeps TP divisibility checks meaningful).
        fields["ffn_hidden_size"] = fields["moe_ffn_hidden_size"]
    return ModelArch(**fields)


def arch_from_flavor(model_name: str, flavor: str, seq_len: int | None = None) -> ModelArch:
    """Architecture of torchtitan 0.3.0's ``model_registry(flavor)`` model as a :class:`ModelArch`.

    ``seq_len`` is the training sequence length (``[training] seq_len``); without it the flavor's
    RoPE ``max_seq_len`` is used.  Raises :class:`PlanError` naming ``model.name`` or
    ``model.flavor`` when torchtitan has no such model.
    """
    if seq_len is not None and seq_len <= 0:
        raise PlanError("training.seq_len", seq_len, "must be a positive integer")
    return _arch_cached(model_name, flavor, seq_len).model_copy(deep=True)
