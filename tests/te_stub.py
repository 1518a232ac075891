"""Transformer Engine's ``FusedAdam`` stubbed for megatron's ``OptimizerConfig`` on this CPU (no TE installed):
``__post_init__`` checks only the signature of TE's ``FusedAdam`` for the precision-aware optimizer (TE 2.14's
keyword arguments below)."""

from __future__ import annotations

import sys
import types


class FusedAdam:
    """TE 2.14 ``transformer_engine.pytorch.optimizers.FusedAdam``'s constructor signature, nothing else."""

    def __init__(self, params, master_weight_dtype=None, exp_avg_dtype=None, exp_avg_sq_dtype=None,
                 use_decoupled_grad=False, store_param_remainders=False):
        pass


def stub_te_fused_adam(monkeypatch) -> None:
    """Install empty ``transformer_engine`` / ``.pytorch`` / ``.pytorch.optimizers`` modules holding
    :class:`FusedAdam` for the test's duration (``monkeypatch`` puts ``sys.modules`` back)."""
    for name in ("transformer_engine", "transformer_engine.pytorch", "transformer_engine.pytorch.optimizers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules["transformer_engine.pytorch.optimizers"].FusedAdam = FusedAdam
