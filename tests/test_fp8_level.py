"""The clock regimes of the per-tensor FP8 GEMM records (``scripts/fit_kernels.py`` ``sustained_record`` /
``burst_record``, ``fit_gemm(split=True)``; ``scripts/fp8_level_probe.py``).

Truth: the records of ``projection/data/kernel_evidence.json``.  mamf-finder's FP8 figures are short
bursts (``torch._scaled_mm``, split accumulator); the Azure guide's cuBLASLt tables were taken after
10,000 warm-up iterations (fast accumulation), at the clock the board power leaves.  Fitted with one
free level for the sustained records, the burst records fix the curve and the sustained ones sit at a
common fraction of it, below the step-level ``SUSTAINED_CLOCK`` the BF16-dominated calibration rows give:
an FP8 GEMM loop holds a lower clock than that, not a higher one (issue 28, point 4).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import fit_kernels as fk  # noqa: E402

from primus_launch.projection.cost import calibration as cal  # noqa: E402
from primus_launch.projection.cost import evidence as ev  # noqa: E402
from primus_launch.projection.cost.fitted import FITTED  # noqa: E402
from primus_launch.projection.cost.kernels import GemmCurve  # noqa: E402


@pytest.fixture(scope="module")
def split_fit():
    return fk.fit_gemm(FITTED["hbm"], split=True)


def test_regimes_of_the_hopper_fp8_records():
    recs = [r for r, _ in fk.gemm_records("hopper", "fp8")]
    burst = {r["id"] for r in recs if fk.burst_record(r)}
    sustained = {r["id"] for r in recs if fk.sustained_record(r)}
    assert burst == {r["id"] for r in recs if r["id"].startswith("mamf-")}
    assert sustained == {r["id"] for r in recs if r["id"].startswith("azure-")}
    assert not burst & sustained and burst | sustained == {r["id"] for r in recs}
    assert ev.record("mamf-fp8-h100-sxm-1024x9216x14336")["value"] == pytest.approx(1402.6)


def _mean_log(key: str, c: dict, which) -> float:
    arch, fmt = key.split("/")
    eta = FITTED["hbm"][arch]["eta"] if arch in FITTED["hbm"] else FITTED["hbm"]["hopper"]["eta"]
    errs = []
    for r, gs in fk.gemm_records(arch, fmt):
        if not which(r):
            continue
        meas = sum(2.0 * m * n * k for m, n, k in gs) / (r["value"] * 1e12)
        model = fk._gemm_model_s(r, gs, fmt, GemmCurve(c["eff"], c["k0"], c["t0"]), eta, c.get("sustained_level", 1.0))
        errs.append(math.log(model / meas))
    return statistics.mean(errs)


@pytest.mark.parametrize("key", ["hopper/fp8", "blackwell/fp8"])
def test_split_fit_puts_the_curve_on_the_burst_records(split_fit, key):
    c = split_fit[key]
    assert abs(_mean_log(key, c, fk.burst_record)) < 0.06
    assert abs(_mean_log(key, c, fk.sustained_record)) < 0.02
    # the sustained FP8 records sit below the calibrated step clock (power-bound FP8 GEMM loops)
    assert 0.7 < c["sustained_level"] < cal.SUSTAINED_CLOCK["power_limited"]


def test_committed_curve_sits_between_the_regimes():
    """The committed one-level Hopper FP8 curve runs slower than the burst records and at or above the
    sustained ones (what ``scripts/fp8_level_probe.py`` reports; the dry-run then applies SUSTAINED_CLOCK)."""
    c = FITTED["gemm"]["hopper/fp8"]
    assert "sustained_level" not in c
    assert _mean_log("hopper/fp8", c, fk.burst_record) > 0.10
    assert _mean_log("hopper/fp8", c, fk.sustained_record) < 0.0


def test_only_power_limited_mixed_curves_split(split_fit):
    split = {k for k, c in split_fit.items() if "sustained_level" in c}
    assert split == {"hopper/fp8", "blackwell/fp8", "blackwell_ultra/fp8"}
    for k, c in split_fit.items():   # every other curve is the committed one
        if "relative_to" in c:   # Blackwell MXFP8: the (split) per-tensor curve over TE's same-card pair ratio
            base = split_fit[c["relative_to"]]
            assert c["eff"] == pytest.approx(base["eff"] / c["ratio"], abs=1e-4) and c["k0"] == base["k0"], k
        elif k not in split:
            assert c["eff"] == FITTED["gemm"][k]["eff"] and c["k0"] == FITTED["gemm"][k]["k0"], k
