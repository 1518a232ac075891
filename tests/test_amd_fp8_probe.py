"""``scripts/amd_fp8_probe.py --implied`` (issue 28, AMD group; Known gaps 'AMD legacy-loop host cost by row'): the
host seconds per legacy expert GEMM at which a row's projection meets its measurement.

On ``calibration.ROCM_LEGACY_GEMM_ROW`` the probe must give back ``calibration.ROCM_LEGACY_GEMM_HOST_S``: that
constant was fitted by bisection on exactly that row (``scripts/calibrate.py --rocm-legacy-only``), so the two
bisections agree or one of them is broken.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import amd_fp8_probe as probe  # noqa: E402
import validate  # noqa: E402

from primus_launch.projection.cost import calibration as cal  # noqa: E402


def test_implied_host_cost_of_the_calibration_row_is_the_committed_constant():
    row = next(r for r in validate.load_rows() if r["id"] == cal.ROCM_LEGACY_GEMM_ROW)
    committed = cal.ROCM_LEGACY_GEMM_HOST_S
    us = probe.implied_host_us(validate, row)
    assert cal.ROCM_LEGACY_GEMM_HOST_S == committed  # the probe restores the constant
    assert us is not None
    assert us == pytest.approx(committed * 1e6, rel=0.01)


def test_a_row_that_keeps_its_sign_has_no_implied_value():
    """A bracket the row's error never crosses gives None, not an end of the bracket."""
    row = next(r for r in validate.load_rows() if r["id"] == cal.ROCM_LEGACY_GEMM_ROW)
    assert probe.implied_host_us(validate, row, lo_us=1.0, hi_us=50.0, steps=2) is None
