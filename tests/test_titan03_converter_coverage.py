"""torchtitan 0.3.0 linear converters: what they leave in another precision than the plan prices is reported.

Truth: torchtitan 0.3.0's own ``ConfigManager`` parse of the launch line (the converters are applied to the model
config there: ``model_spec.model.lm_head`` becomes ``Float8Linear.Config`` / ``MXFP8Linear.Config`` when the
converter takes it); the GPU-capability checks of the converters are bypassed on this CPU-only machine.
Found by comparing every registry config with torchtitan's parse (read14): ``llama3_8b_mxfp8`` runs its lm_head
in MXFP8 and ``llama3_debugmodel_float8_emulate_lora`` emulates FP8, neither was reported."""

from __future__ import annotations

import logging

import pytest

from primus_launch.adapters.command_recipe import plan_from_command

TORCHRUN = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train"]


def _lm_head_type(module: str, config: str, monkeypatch) -> str:
    import torchtitan.components.quantization.float8 as f8
    import torchtitan.components.quantization.mx as mx
    import torchtitan.components.quantization.nvfp4 as nv
    from torchtitan.config.manager import ConfigManager

    for m in (f8, mx, nv):
        if hasattr(m, "has_cuda_capability"):
            monkeypatch.setattr(m, "has_cuda_capability", lambda major, minor: True)
    logging.getLogger("torchtitan").setLevel(logging.ERROR)
    cfg = ConfigManager().parse_args(["--module", module, "--config", config])
    return type(cfg.model_spec.model.lm_head).__qualname__


@pytest.mark.parametrize("module,config", [("llama3", "llama3_8b_mxfp8"), ("llama3", "llama3_405b"),
                                           ("llama3", "llama3_debugmodel_float8"),
                                           ("llama3", "llama3_debugmodel_nvfp4")])
def test_lm_head_precision_reported_as_torchtitan_converts_it(module, config, monkeypatch):
    plan = plan_from_command([*TORCHRUN, "--module", module, "--config", config])
    reported = any(u.value == "lm_head" for u in plan.source.unmodelled)
    assert reported == (_lm_head_type(module, config, monkeypatch) != "Linear.Config")


def test_float8_emulation_reported():
    plan = plan_from_command([*TORCHRUN, "--module", "llama3", "--config", "llama3_debugmodel_float8_emulate_lora"])
    assert any(u.flag == "Float8LinearConverter.emulate" for u in plan.source.unmodelled)
    plain = plan_from_command([*TORCHRUN, "--module", "llama3", "--config", "llama3_debugmodel_float8"])
    assert not any(u.flag.endswith(".emulate") for u in plain.source.unmodelled)
