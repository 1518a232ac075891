"""Primus's flash-linear-attention (FLA) runtime knobs as a recipe states them: which loss the Mamba model runs.

Primus fd1eeabb (also at 84035edc) ``primus/backends/megatron/patches/fla_runtime_patches.py``:

- ``_FLA_RUNTIME_KNOBS`` (l. 82-92): nine (YAML field, environment variable, default) triples, among them
  ``fused_ce_mode`` / ``PRIMUS_FUSED_CE`` / 1 and ``fused_ce_chunks`` / ``PRIMUS_FUSED_CE_CHUNKS`` / 32;
- the patch runs only when ``_has_any_fla_runtime_field`` (l. 104-112): one of the nine YAML fields is not None,
  or one of the nine variables is in the environment -- so ``PRIMUS_FLA_SWIGLU=1`` alone, or
  ``use_fla_fused_swiglu: true`` alone, turns the fused loss on at its defaults;
- when it runs, each knob is the variable (``int(...)`` for the integer knobs, l. 95-101), else the YAML value,
  else the default (l. 136-150).  When it does not run, ``args.fused_ce_mode`` keeps the merged YAML value
  (``null`` in ``mamba_base.yaml``): no fused loss.

``patches/mamba_fused_ce_patches.py`` (l. 43-65, 78-103): ``MambaModel.__init__`` reads that value; 2 ->
FLA ``FusedCrossEntropyLoss(inplace_backward=True)`` on the output layer's logits, 1 ->
``FusedLinearCrossEntropyLoss(reduction='mean', num_chunks=fused_ce_chunks)`` on the final hidden states and the
output weight, anything else (0, None) -> the stock output layer and vocab-parallel cross-entropy; an FLA that
does not import falls back to the stock loss (not readable from a recipe: FLA is taken as installed).  Only
``MambaModel`` is patched: a GPT model keeps Megatron's loss whatever the knobs say.

The environment is the recipe's: the launch script's exports / the command's ``NAME=value`` words, then the
experiment's top-level ``env:`` block, which Primus's ``train_runtime.py`` ``_apply_config_env`` writes over
them (``os.environ[k] = str(v)``) -- never the environment primus-launch itself runs in.  The plan's
``training.loss_impl`` / ``loss_chunks`` carry the result; ``memory.activations`` and ``cost.stage_extras``
price it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

#: (YAML field, environment variable) of Primus's FLA runtime knobs (fla_runtime_patches.py l. 82-92)
FLA_KNOBS: tuple[tuple[str, str], ...] = (
    ("use_fla_fused_swiglu", "PRIMUS_FLA_SWIGLU"), ("use_fla_fused_rmsnorm", "PRIMUS_FLA_NORM"),
    ("use_fla_fused_gated_norm", "PRIMUS_FLA_NORM"), ("use_fla_short_conv", "PRIMUS_FLA_CONV"),
    ("use_fla_data", "PRIMUS_FLA_DATA"), ("fla_cache_dir", "PRIMUS_FLA_CACHE_DIR"),
    ("fused_ce_mode", "PRIMUS_FUSED_CE"), ("fused_ce_chunks", "PRIMUS_FUSED_CE_CHUNKS"),
    ("fla_mla_attn", "PRIMUS_FLA_MLA_ATTN"))
#: the knobs' effects beyond the loss, reported as not modelled when the environment turns them on
FLA_KERNEL_ENV = {"PRIMUS_FLA_SWIGLU": "time: FLA's Triton SwiGLU in the MLPs",
                  "PRIMUS_FLA_NORM": "time: FLA's Triton RMSNorm / fused gated norm",
                  "PRIMUS_FLA_CONV": "time: FLA's Triton causal conv1d",
                  "PRIMUS_FLA_MLA_ATTN": "time: MLA core attention through flash_attn_func"}
DEFAULT_MODE, DEFAULT_CHUNKS = 1, 32
_FALSE = ("0", "", "false", "False")


def _knob(cfg: Mapping[str, Any], env: Mapping[str, str], field: str, var: str, default: int) -> tuple[Any, str]:
    """(value, where from) of an integer knob when the patch runs: the variable (Primus ``int()``), the YAML field,
    the default."""
    if var in env:
        raw = env[var]
        try:
            return int(str(raw).strip()), f"{var}={raw} in the launch environment"
        except ValueError:
            from primus_launch.plan import PlanError

            raise PlanError(var, raw, "a whole number (Primus fla_runtime_patches.py reads it with int(); "
                                      f"{field}: 0 off, 1 chunked FLA fused linear cross-entropy, 2 FLA fused "
                                      "cross-entropy)") from None
    if cfg.get(field) is not None:
        v = cfg[field]
        if isinstance(v, bool) or not isinstance(v, int):  # "1" quoted: Primus compares with 1 and 2 as numbers
            from primus_launch.plan import PlanError

            raise PlanError(field, v, "a whole number, unquoted (Primus compares it with the numbers 0 / 1 / 2; "
                                      "a quoted '1' is no mode)")
        return v, f"{field}: {v}"
    return default, f"{field} default {default}"


def fla_triggered(cfg: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """Primus's ``_has_any_fla_runtime_field``: a knob set in the configuration or its variable in the
    environment."""
    return any(cfg.get(f) is not None or v in env for f, v in FLA_KNOBS)


def fla_loss(cfg: Mapping[str, Any], env: Mapping[str, str], mamba: bool) -> tuple[str, int, Optional[str]]:
    """(``training.loss_impl``, ``training.loss_chunks``, a note or None) of a Primus Megatron configuration
    ``cfg`` (merged) launched in ``env`` (the recipe's environment, module doc); ``mamba``: model_type mamba
    (``MambaModel``, the only model Primus patches).  A variable that is not a whole number, or a mode-1 chunk
    count below 1 (FLA divides by it), is a one-line :class:`~primus_launch.plan.PlanError`."""
    if not fla_triggered(cfg, env):
        return "framework", 1, None
    mode, why = _knob(cfg, env, "fused_ce_mode", "PRIMUS_FUSED_CE", DEFAULT_MODE)
    if not mamba:
        return "framework", 1, (f"{why}: Primus wires FLA's fused loss into MambaModel only "
                                "(mamba_fused_ce_patches.py); this GPT model keeps Megatron's loss"
                                if mode not in (0, None) else None)
    if mode == 2:
        return "fla", 1, (f"{why}: the output logits go through FLA's FusedCrossEntropyLoss (in-place backward; "
                          "Primus mamba_fused_ce_patches.py)")
    if mode != 1:
        return "framework", 1, None
    chunks, cwhy = _knob(cfg, env, "fused_ce_chunks", "PRIMUS_FUSED_CE_CHUNKS", DEFAULT_CHUNKS)
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        from primus_launch.plan import PlanError

        raise PlanError("fused_ce_chunks", chunks, "a whole number >= 1 (FLA FusedLinearCrossEntropyLoss num_chunks)")
    return "fla_linear", chunks, (f"{why}, {cwhy}: the output layer and loss run as FLA's "
                                  f"FusedLinearCrossEntropyLoss in up to {chunks} token chunks, gradients computed in "
                                  "the forward (Primus mamba_fused_ce_patches.py)")


def fla_kernel_env(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(variable, value, effect) of the FLA kernel switches ``env`` turns on (Primus reads them as booleans:
    anything but 0 / '' / false), none of which is modelled."""
    return [(v, env[v], eff) for v, eff in FLA_KERNEL_ENV.items() if v in env and env[v] not in _FALSE]
