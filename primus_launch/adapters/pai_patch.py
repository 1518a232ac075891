"""Flags of Pai-Megatron-Patch's own models (alibaba/Pai-Megatron-Patch, ``megatron_patch/arguments.py``) that
change the model's shape, read onto the plan's Megatron-LM fields.

Pai's scripts pass them to Megatron-LM's parser extended with Pai's arguments; Megatron-LM itself does not
know them (so they are "unknown" flags to the reader).  Two change what the model is:

- **Shared experts of Pai's legacy MoE models** (``--enable-shared-expert``): the Qwen1.5 / Qwen2 MoE models
  size the shared expert's MLP with ``--shared-moe-ffn-hidden-size``
  (``megatron_patch/model/qwen2/transformer/mlp.py``: ``ffn_hidden_size = config.shared_moe_ffn_hidden_size``),
  the DeepSeek-V2 model with ``--num-shared-experts`` x ``--moe-ffn-hidden-size``
  (``megatron_patch/model/deepseek_v2/transformer/mlp.py`` at 7097866: ``moe_ffn_hidden_size *
  num_shared_experts``); the plan's ``moe_shared_expert_intermediate_size`` is that width (Megatron-LM's
  ``--moe-shared-expert-intermediate-size`` means the same: the shared MLP's hidden width).
- **Multi-latent attention of Pai's legacy DeepSeek-V2 model**: its ``SelfAttention``
  (``megatron_patch/model/deepseek_v2/transformer/attention.py`` at 7097866) always projects through
  ``--kv-lora-rank`` (and ``--q-lora-rank`` when set), with Pai's ``--qk-nope-head-dim`` /
  ``--qk-rope-head-dim`` head split and ``--v-head-dim``; such scripts give no ``--multi-latent-attention``
  (a Megatron-LM switch Pai's model does not read).  Read as MLA when ``--kv-lora-rank`` comes with Pai's
  head-split flags and Megatron's switch is absent.

One changes how the model runs: **Pai's legacy entry points** (``pretrain_megatron_<family>.py``,
``finetune_megatron_<family>.py``: the ``run_pretrain_megatron_*.sh`` / ``run_finetune_megatron_*.sh`` scripts
of ``examples/llama2``, ``llama3``, ``qwen1_5`` ... at a098ca5, where ``*_mcore_*`` scripts run megatron-core)
build Pai's own ``GPTModel`` on ``megatron.model`` (``megatron_patch/model/llama2/gpt_model.py`` ->
``language_model.py`` -> ``transformer.py`` ``ParallelTransformer``: Megatron-LM's legacy layer, or
``transformer_engine.pytorch.TransformerLayer`` under ``--transformer-impl transformer_engine``), not
megatron-core's ``GPTModel``.  The projection prices megatron-core's layers; the legacy model is reported as
not modelled (:func:`legacy_program`), as Megatron-LM's own ``--use-legacy-models`` is.
"""

from __future__ import annotations

import re
from typing import Any

from primus_launch.plan import PlanError, UnmodelledFlag

_LEGACY_PROGRAM = re.compile(r"(?:pretrain|finetune)_megatron_\w+\.py")


def _value(a: dict[str, Any], flag: str) -> Any:
    """The value of a Pai flag as a script (``--flag``) or a YAML (``flag_name``) spells it, else None."""
    for key in (flag, flag[2:].replace("-", "_")):
        if a.get(key) not in (None, ""):
            return a[key]
    return None


def _int(a: dict[str, Any], flag: str) -> int | None:
    v = _value(a, flag)
    if v is None or v is True:
        return None
    try:
        return int(str(v))
    except ValueError:
        raise PlanError(flag, v, "an integer (Pai-Megatron-Patch megatron_patch/arguments.py)") from None


#: the keys read here (the reader's "unknown flag" notes leave them out)
KEYS: tuple[str, ...] = tuple(k for f in ("--enable-shared-expert", "--num-shared-experts", "--shared-moe-ffn-hidden-size",
                                          "--qk-nope-head-dim", "--qk-rope-head-dim")
                              for k in (f, f[2:].replace("-", "_")))


def shared_expert_size(a: dict[str, Any], moe_ffn: int | None) -> tuple[int, str] | None:
    """(shared-expert MLP width, note) of Pai's legacy ``--enable-shared-expert`` models, or None when the
    switch is absent.  Raises ``PlanError`` when it is set without a width the models read."""
    on = _value(a, "--enable-shared-expert")
    if on in (None, False) or str(on).lower() in ("false", "0"):
        return None
    width = _int(a, "--shared-moe-ffn-hidden-size")
    if width is not None:
        return width, f"shared expert {width} wide (Pai-Megatron-Patch --enable-shared-expert --shared-moe-ffn-hidden-size)"
    n = _int(a, "--num-shared-experts")
    if n is not None and moe_ffn:
        return n * moe_ffn, (f"shared expert {n} x {moe_ffn} = {n * moe_ffn} wide (Pai-Megatron-Patch --enable-shared-"
                             "expert --num-shared-experts x --moe-ffn-hidden-size, its DeepSeek-V2 model)")
    raise PlanError("--enable-shared-expert", True, "needs --shared-moe-ffn-hidden-size or --num-shared-experts with "
                                                     "--moe-ffn-hidden-size (Pai-Megatron-Patch's shared-expert width)")


def legacy_mla(a: dict[str, Any], mla: bool) -> tuple[dict[str, int], str] | None:
    """Plan fields (multi_latent_attention and the head split) of Pai's legacy DeepSeek-V2 attention, and a
    note; None unless ``--kv-lora-rank`` comes with Pai's head-split flags and no ``--multi-latent-attention``."""
    if mla or a.get("kv_lora_rank") is None:
        return None
    nope, rope = _int(a, "--qk-nope-head-dim"), _int(a, "--qk-rope-head-dim")
    if nope is None and rope is None:
        return None
    out: dict[str, int] = {}
    if nope is not None:
        out["qk_head_dim"] = nope
    if rope is not None:
        out["qk_pos_emb_head_dim"] = rope
    return out, ("multi-latent attention read from --kv-lora-rank with Pai-Megatron-Patch's --qk-nope-head-dim / "
                 "--qk-rope-head-dim (its DeepSeek-V2 model always runs MLA; no --multi-latent-attention given)")


def legacy_program(program: str | None) -> UnmodelledFlag | None:
    """The not-modelled report of a Pai-Megatron-Patch legacy entry point (``pretrain_megatron_llama.py``: Pai's
    ``megatron.model`` GPT, module docstring), None for any other program."""
    base = (program or "").replace("\\", "/").rsplit("/", 1)[-1]
    if not _LEGACY_PROGRAM.fullmatch(base):
        return None
    return UnmodelledFlag(flag="training program", value=base, effect=(
        "time: Pai-Megatron-Patch's legacy (non-core) GPT model (megatron_patch/model/<family>/gpt_model.py on "
        "megatron.model's ParallelTransformer), priced as megatron-core's GPTModel"))
