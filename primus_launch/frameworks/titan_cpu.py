"""Shims that let torchtitan 0.3.0 model classes train on a CPU-only torch.

Facts behind each (/work/shared/notes/frameworks-on-cpu.md):

1. The default language-model attention is ``FlexAttention``, which has no CPU backward (and
   ``get_attention_config("sdpa")`` refuses SDPA for language models because it cannot consume
   per-document positions).  For plain causal training on one document per sequence,
   :func:`use_sdpa` swaps each layer config's ``inner_attention`` for torchtitan's own
   ``ScaledDotProductAttention.Config()`` (``is_causal=True``) -- the same ``F.scaled_dot_product_
   attention`` core; no masks are then needed (``attention_masks=None``).
2. ``torchtitan.tools.utils.device_type`` falls back to ``"cuda"`` when no accelerator exists, and
   ``ParallelDims`` builds its device mesh with it: :func:`install` points it (and the modules
   that imported it) at ``"cpu"`` / ``torch.cpu``.
3. RoPE caches are sized by the flavor's ``max_seq_len`` (131,072 for llama3): :func:`set_seq_len`
   resizes them to the training sequence, as ``Decoder.Config.update_from_config`` does for a
   trainer.

FSDP2 on gloo needs a sum reduction (PREMUL_SUM is unsupported) -- not needed by the
single-process measurement here.

Usage::

    from primus_launch.frameworks import titan_cpu
    titan_cpu.install()
    cfg = copy.deepcopy(model_registry(flavor).model)
    titan_cpu.use_sdpa(cfg); titan_cpu.set_seq_len(cfg, 2048)
    model = cfg.build(); model.init_states()
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import torch

_INSTALLED = False
_PATCHED: list[Any] = []  # the torchtitan modules whose device_type install() pointed at the CPU


def install(device: str | torch.device = "cpu") -> None:
    """Point torchtitan's device type at the CPU when ``device`` is the CPU (idempotent); on a CUDA
    device, give back ``"cuda"`` / ``torch.cuda`` to the modules an earlier CPU install in the
    process changed (a GPU measurement after a CPU one)."""
    global _INSTALLED
    if torch.device(device).type != "cpu":
        if _INSTALLED:
            # the patched modules, and those imported after the CPU install, which copied the patched
            # ``torchtitan.tools.utils.device_type`` (``from ... import device_type``): torchtitan's own
            # ``get_device_info`` never answers "cpu" (``_get_available_device_type() or "cuda"``)
            late = [m for n, m in list(sys.modules.items())
                    if n.startswith("torchtitan.") and getattr(m, "device_type", None) == "cpu"]
            for mod in _PATCHED + late:
                mod.device_type = "cuda"
                if hasattr(mod, "device_module"):
                    mod.device_module = torch.cuda
            _PATCHED.clear()
            _INSTALLED = False
        return
    if _INSTALLED:
        return
    import torchtitan.tools.utils as tutils

    for name, mod in list(sys.modules.items()):
        if name.startswith("torchtitan.") and getattr(mod, "device_type", None) == "cuda":
            mod.device_type = "cpu"
            if hasattr(mod, "device_module"):
                mod.device_module = torch.cpu
            _PATCHED.append(mod)
    if tutils not in _PATCHED:
        tutils.device_type, tutils.device_module = "cpu", torch.cpu
        _PATCHED.append(tutils)
    _INSTALLED = True


def use_sdpa(model_config: Any) -> Any:
    """Replace every layer's ``attention.inner_attention`` with ``ScaledDotProductAttention``."""
    from torchtitan.models.common.attention import ScaledDotProductAttention

    for lc in model_config.layers:
        attn = getattr(lc, "attention", None)
        if attn is not None and hasattr(attn, "inner_attention"):
            attn.inner_attention = ScaledDotProductAttention.Config()
    return model_config


def set_seq_len(model_config: Any, seq_len: int) -> Any:
    """RoPE caches sized for ``seq_len`` (``dataclasses.replace(rope, max_seq_len=seq_len)``)."""
    for lc in model_config.layers:
        attn = getattr(lc, "attention", None)
        if attn is not None and getattr(attn, "rope", None) is not None:
            attn.rope = dataclasses.replace(attn.rope, max_seq_len=seq_len)
    return model_config
