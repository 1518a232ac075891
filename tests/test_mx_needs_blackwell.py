"""MXFP8 / NVFP4 recipes on a GPU that cannot run them are refused in one line (user15: ``--gpu h100-sxm`` with
TorchTitan's ``llama3_8b_mxfp8`` config, and a Primus MI300X experiment with ``fp8_recipe: mxfp8``, were projected
at the FP8 rate although the run does not start).

Truth: Transformer Engine's ``_compute_mxfp8_support`` / ``_compute_nvfp4_support``
(``transformer_engine/pytorch/quantization.py`` at d0067d0: compute capability >= 10.0) and torchao's MX converter
as TorchTitan 0.3.0 ships it -- read here from the installed torchtitan's own source, so the test fails if that
check moves; AMD's MX formats are CDNA4's (MI355X), not CDNA3's (MI300X / MI325X).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text().replace(
    "    --bf16", "    --bf16 --fp8-format e4m3 --fp8-recipe mxfp8")


def test_torchtitan_itself_refuses_mx_before_sm100():
    import torchtitan

    src = (Path(torchtitan.__file__).parent / "components/quantization/mx.py").read_text()
    assert "MXFP8 is only supported on SM100 or later" in src


@pytest.mark.parametrize("gpu,ok", [("h100-sxm", False), ("h200", False), ("mi300x", False), ("mi325x", False),
                                    ("b200", True), ("gb200", True), ("mi355x", True)])
def test_megatron_mxfp8_by_gpu(tmp_path, gpu, ok):
    (tmp_path / "r.sh").write_text(BASH)
    rc, out, err, _ = run_cli(["--dry-run", "--project", "r.sh", "--gpu", gpu], tmp_path)
    if ok:
        assert rc == 0, err[-400:]
        return
    assert rc == 2 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "--fp8-recipe='mxfp8'" in line and gpu in line and "10.0" in line, line


@pytest.mark.parametrize("gpu,ok", [("h100-sxm", False), ("mi300x", False), ("b200", True), ("b300", True)])
def test_nvfp4_by_gpu(gpu, ok):
    from primus_launch.plan import PlanError
    from primus_launch.projection.hardware.gpus import check_precision

    if ok:
        check_precision(gpu, "fp4", None, "nvfp4")
        return
    with pytest.raises(PlanError, match="NVFP4 needs compute capability >= 10.0"):
        check_precision(gpu, "fp4", None, "nvfp4")
