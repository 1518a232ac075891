"""Launch-environment variables that change an iteration's time but that the projection does not read.

A Megatron-family recipe (a script's exports and ``VAR=value`` prefixes, a YAML's ``ENV_VARS``, a Bridge config's
``env_vars``), a Primus experiment's ``env:`` block (exported by Primus's runtime before the trainer starts) or a
TorchTitan launch script's exports and launch-line prefixes that sets one of these away from its default gets a
``not modelled`` warning, as a flag would
(user16: Megatron-LM's functional test ``gpt3_7b_tp1_pp4_memory_speed/model_config.yaml`` sets ``NCCL_ALGO: Ring``,
``NVTE_ALLOW_NONDETERMINISTIC_ALGO: 0`` and the LayerNorm SM margins; none was said).  Defaults and effects:

- ``NCCL_ALGO`` / ``NCCL_PROTO``: unset lets NCCL pick per call (``src/graph/tuning.cc``); the collective model
  prices that pick, so any forced value is not modelled (NCCL environment-variable documentation).
- ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` / ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``: bounds on the channels
  (SMs) a collective uses, unset by default (NCCL documentation).
- ``NVTE_FWD_LAYERNORM_SM_MARGIN`` / ``NVTE_BWD_LAYERNORM_SM_MARGIN``: SMs Transformer Engine's LayerNorm / RMSNorm
  kernels leave free, default 0 (TE 2.x ``pytorch/module/layernorm_linear.py`` ``os.getenv(..., "0")``).
- ``NVTE_ALLOW_NONDETERMINISTIC_ALGO``: default 1; 0 keeps only deterministic attention backends (TE 2.x
  ``attention/dot_product_attention/utils.py`` ``get_attention_backend``), slower backward.
"""

from __future__ import annotations

from collections.abc import Mapping

from primus_launch.plan import UnmodelledFlag

#: variable -> (its default as text, None: unset; the effect)
ENV_EFFECTS: dict[str, tuple[str | None, str]] = {
    "NCCL_ALGO": (None, "time: NCCL's collective algorithm forced (priced as NCCL's own choice per call)"),
    "NCCL_PROTO": (None, "time: NCCL's protocol forced (priced as NCCL's own choice per call)"),
    "NCCL_MIN_NCHANNELS": (None, "time: NCCL channel count bounded (priced on NCCL's default channels)"),
    "NCCL_MAX_NCHANNELS": (None, "time: NCCL channel count bounded (priced on NCCL's default channels)"),
    "NCCL_MIN_CTAS": (None, "time: NCCL CTA count bounded (priced on NCCL's default)"),
    "NCCL_MAX_CTAS": (None, "time: NCCL CTA count bounded (priced on NCCL's default)"),
    "NVTE_FWD_LAYERNORM_SM_MARGIN": ("0", "time: SMs the forward LayerNorm / RMSNorm kernels leave free"),
    "NVTE_BWD_LAYERNORM_SM_MARGIN": ("0", "time: SMs the backward LayerNorm / RMSNorm kernels leave free"),
    "NVTE_ALLOW_NONDETERMINISTIC_ALGO": ("1", "time: deterministic attention backends only (slower backward)"),
}


def env_unmodelled(env: Mapping[str, str], te: bool = True) -> list[UnmodelledFlag]:
    """The ``not modelled`` entries of the launch environment ``env``: each :data:`ENV_EFFECTS` variable set to a
    value other than its default (an empty value is unset), in the table's order; ``te`` False (TorchTitan: no
    Transformer Engine modules) leaves out the ``NVTE_*`` variables, which nothing of such a run reads."""
    out = []
    for var, (default, effect) in ENV_EFFECTS.items():
        if not te and var.startswith("NVTE_"):
            continue
        value = env.get(var)
        if value is None or str(value).strip() == "" or str(value).strip() == default:
            continue
        out.append(UnmodelledFlag(flag=var, value=str(value), effect=effect))
    return out
