"""TorchTitan model flavors -> :class:`~primus_launch.plan.ModelArch`, read from torchtitan's own registry.

Source of truth: torchtitan 0.3.0 ``torchtitan.models.<name>.model_registry(flavor)`` returns a
``ModelSpec`` whose ``.model`` is the fully specified ``Decoder.Config`` (``dim``, ``vocab_size``,
``enable_weight_tying``, ``lm_head`` and a ``layers`` list of per-block configs with ``attention``,
``feed_forward`` and ``moe`` sub-configs).  :func:`arch_fields_of_model_config` reads every
:class:`ModelArch` field from those config objects (``Linear.Config.in_features/out_features/bias``,
``RMSNorm.Config``, ``GroupedExperts.Config``, ``TokenChoiceTopKRouter.Config``, DeepSeek's MLA
``Attention.Config``, GPT-OSS's sinks / sliding window / YaRN RoPE), never from a hand table.

Reading torchtitan costs seconds (it imports torch), so the fields are read once per installed
torchtitan version into a snapshot (:mod:`primus_launch.adapters.titan_snapshot`, by
:mod:`primus_launch.adapters.titan_model_config`); a dry run only reads the snapshot.  What torchtitan 0.3.0 builds (checked on the meta device, see the tests):

- the MoE load-balancing ``expert_bias_E`` and ``tokens_per_expert_E`` are *buffers*, not
  parameters; the router gate ``Linear`` has ``bias=False`` except GPT-OSS -> ``moe_router_bias``;
- DeepSeek-V3 ``model_registry`` defaults to ``num_mtp_layers=0``; ``mtp_layers`` -> ``mtp_num_layers``;
- the shared experts are one ``FeedForward`` of hidden size ``moe_hidden_dim * num_shared_experts``
  (``shared_experts.w1.out_features``);
- GPT-OSS (``gpt_oss``): per-head attention sinks (``softmax_type="learnable"``), sliding window of
  ``sliding_window_size`` tokens on even layers (``window_size`` = keys left of the query = size - 1,
  as its varlen attention is given ``(size - 1, 0)``), YaRN RoPE, biases on QKV / output / router /
  experts, and the clamped ``x * sigmoid(1.702 x)`` gate (``activation="quick_gelu"``, gated);
- rope caches are buffers; norms are weight-only RMSNorm; ``enable_weight_tying`` ties
  ``tok_embeddings`` and ``lm_head`` (Qwen3 0.6B/1.7B/4B, Llama3 1B/3B).

Families of the 0.3.0 registry the projection does not model are refused by name
(``titan_model_config.REFUSED_FAMILIES``).
"""

from __future__ import annotations

from typing import Any, Optional

from primus_launch.plan import ModelArch, PlanError

from primus_launch.adapters.titan_model_config import SUPPORTED_MODELS, refuse


def _llama4(dim: int, n_layers: int, n_heads: int, n_kv: Optional[int], vocab: int, multiple_of: int,
            ffn_mult: Optional[float], experts: int, step: int) -> dict[str, Any]:
    """ModelArch fields of torchtitan v0.2.2 ``models/llama4`` (``model/args.py`` TransformerModelArgs,
    ``model/model.py`` TransformerBlock; ``models/moe/moe.py`` MoEArgs: top_k 1, one shared expert,
    router gate without bias, ``score_before_experts`` True): layer ``i`` is MoE when ``(i + 1) % interleave_moe_layer_step == 0``;
    dense FFN = ``multiple_of``-rounded ``ffn_mult * int(8 dim / 3)``; expert FFN = the same before
    rounding, divided by top_k + shared experts (``auto_scale_hidden_dim``), then rounded up; the shared
    expert has the expert FFN size.  Llama 4 Scout (17bx16e) and Maverick (17bx128e) give 8192 / 16384,
    as the published Hugging Face configs state (intermediate_size / intermediate_size_mlp)."""
    h = int(2 * 4 * dim / 3)
    h = int(ffn_mult * h) if ffn_mult is not None else h
    dense = multiple_of * ((h + multiple_of - 1) // multiple_of)
    moe = int(h / 2)
    moe += -moe % multiple_of
    pattern = [1 if (i + 1) % step == 0 else 0 for i in range(n_layers)]
    f: dict[str, Any] = dict(
        num_layers=n_layers, hidden_size=dim, vocab_size=vocab, make_vocab_size_divisible_by=1,
        untie_embeddings_and_output_weights=True, normalization="rmsnorm", position_embedding="rope", swiglu=True,
        num_attention_heads=n_heads, num_query_groups=n_kv if n_kv and n_kv != n_heads else None,
        head_dim=dim // n_heads, max_position_embeddings=1048576 if experts != 16 else 10485760,
        num_experts=experts, moe_router_topk=1, moe_ffn_hidden_size=moe, moe_shared_expert_intermediate_size=moe,
        moe_score_before_experts=True, ffn_hidden_size=dense if 0 in pattern else moe)
    if 0 in pattern:
        f["moe_layer_pattern"] = pattern
    return f


LEGACY_FAMILIES: dict[str, dict[str, dict[str, Any]]] = {
    "llama4": {  # torchtitan v0.2.2 torchtitan/models/llama4/__init__.py llama4_args (not in 0.3.0)
        "debugmodel": _llama4(256, 6, 16, None, 2048, 256, None, 8, 2),
        "17bx16e": _llama4(5120, 48, 40, 8, 202048, 2048, 1.2, 16, 1),
        "17bx128e": _llama4(5120, 48, 40, 8, 202048, 2048, 1.2, 128, 2),
    },
}
LEGACY_NOTE = {"llama4": "model llama4: not in torchtitan 0.3.0's registry; its architecture is torchtitan v0.2.2's "
                         "llama4_args (chunked/NoPE attention of the *_irope flavors is not modelled)"}


def _registry_fields(model_name: str, flavor: str) -> dict[str, Any]:
    from primus_launch.adapters.titan_snapshot import model_arch_fields

    legacy = LEGACY_FAMILIES.get(model_name)
    if legacy is not None:
        if flavor not in legacy:
            raise PlanError("model.flavor", flavor, f"{model_name} flavors are {', '.join(legacy)}")
        return {"name": f"{model_name}-{flavor}", **legacy[flavor]}
    return model_arch_fields(model_name, flavor)


def flavors(model_name: str) -> list[str]:
    """The flavors torchtitan's registry knows for ``model_name``."""
    from primus_launch.adapters.titan_snapshot import model_flavors

    if model_name in LEGACY_FAMILIES:
        return list(LEGACY_FAMILIES[model_name])
    return model_flavors(model_name)


def model_spec(model_name: str, flavor: str) -> Any:
    """``torchtitan.models.<name>.model_registry(flavor)`` (imports torchtitan: tests and the measured
    path only) with a one-line error for unknown models and flavors."""
    import importlib

    if model_name not in SUPPORTED_MODELS:
        raise refuse(model_name)
    if model_name in LEGACY_FAMILIES:
        raise PlanError("model.name", model_name, f"not in the installed torchtitan's registry, so it cannot be built "
                                                  f"and measured here; project it with --dry-run")
    known = flavors(model_name)
    if flavor not in known:
        raise PlanError("model.flavor", flavor, f"{model_name} flavors are {', '.join(known)}")
    return importlib.import_module(f"torchtitan.models.{model_name}").model_registry(flavor)


def arch_from_fields(fields: dict[str, Any], seq_len: int | None = None) -> ModelArch:
    """A :class:`ModelArch` from snapshot fields and the training sequence length."""
    if seq_len is not None and seq_len <= 0:
        raise PlanError("training.seq_len", seq_len, "must be a positive integer")
    data = dict(fields)
    for k in ("window_layer_pattern", "moe_layer_pattern"):
        if data.get(k) is not None:
            data[k] = tuple(data[k])
    data["seq_length"] = seq_len or data["max_position_embeddings"]
    return ModelArch(**data)


def arch_from_flavor(model_name: str, flavor: str, seq_len: int | None = None) -> ModelArch:
    """Architecture of torchtitan's ``model_registry(flavor)`` model as a :class:`ModelArch`.

    ``seq_len`` is the training sequence length (``[training] seq_len``); without it the flavor's
    RoPE ``max_seq_len`` is used.  Raises :class:`PlanError` naming ``model.name`` or
    ``model.flavor`` when torchtitan has no such model (or one the projection does not model).
    """
    if seq_len is not None and seq_len <= 0:
        raise PlanError("training.seq_len", seq_len, "must be a positive integer")
    return arch_from_fields(_registry_fields(model_name, flavor), seq_len)
