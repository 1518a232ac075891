"""Probe the level of the per-tensor FP8 GEMM curves against their records' clock regime (issue 28).

The committed ``hopper/fp8`` / ``blackwell/fp8`` curves are one-level fits over records of two clock
regimes (``scripts/fit_kernels.py`` ``sustained_record`` / ``burst_record``): mamf-finder's short bursts
(``torch._scaled_mm`` with ``use_fast_accum`` at its default False: the split accumulator) and the Azure
guide's cuBLASLt runs after 10,000 warm-up iterations (fast accumulation, ``fastAccuMode = 1``, at the
power-limited clock).  The dry-run multiplies every curve by ``calibration.SUSTAINED_CLOCK`` (fitted on
the Hopper calibration rows); a curve partly standing on sustained records therefore carries part of
that clock twice.  This script prints, without changing the model:

1. each FP8 curve's log residual on its records, split by regime (committed curve, and the alternative
   ``fit_gemm(split=True)``: E from the burst records, the sustained ones at a free common level);
2. the model's FP8 / BF16 rate at the 12 GEMMs of TE's layer benchmark against TE's own same-card ratio
   (``te-h200-layer-pre-quantized-FP8CurrentScaling`` / ``-BF16``: fast accumulation, H200 NVL;
   ``te-b300-*``), records no curve is fitted to on Hopper;
3. every dense FP8 row of ``scripts/validate.py`` (and the group medians) under three curve levels:
   ``committed``; ``burst`` (the split fit's curve, x SUSTAINED_CLOCK as any curve); ``burst_fp8_clock``
   (the split fit's curve at its own sustained level in place of SUSTAINED_CLOCK where that is lower:
   what FP8's sustained records say an FP8 GEMM holds under a continuous load).

4. (``--static-tail``) the dense FP8 Hopper rows with ``contention.STATIC_TAIL`` removed.

    python scripts/fp8_level_probe.py [--rows] [--static-tail]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fit_kernels as fk  # noqa: E402
import validate as val  # noqa: E402

from primus_launch.projection.cost import calibration as cal  # noqa: E402
from primus_launch.projection.cost import compute  # noqa: E402
from primus_launch.projection.cost import roofline  # noqa: E402
from primus_launch.projection.cost import evidence as ev  # noqa: E402
from primus_launch.projection.cost.fitted import FITTED  # noqa: E402
from primus_launch.projection.cost.kernels import GemmCurve  # noqa: E402

FP8_CURVES = ("hopper/fp8", "blackwell/fp8", "blackwell_ultra/fp8")
TE_LAYER = {"h200": ("te-h200-layer-pre-quantized-FP8CurrentScaling", "te-h200-layer-pre-quantized-BF16"),
            "b300": ("te-b300-layer-pre-quantized-FP8CurrentScaling", "te-b300-layer-pre-quantized-BF16")}


def _curve(c: dict) -> GemmCurve:
    return GemmCurve(c["eff"], c["k0"], c["t0"])


def regime_residuals(key: str, c: dict) -> dict[str, list[tuple[str, float]]]:
    """log(model / measured) of curve ``c`` on each record of ``key``, by regime (burst / sustained / other);
    a sustained record is modelled at ``c['sustained_level']`` (1 when absent)."""
    arch, fmt = key.split("/")
    eta = FITTED["hbm"].get(arch, FITTED["hbm"]["hopper"])["eta"]
    out: dict[str, list[tuple[str, float]]] = {"burst": [], "sustained": [], "other": []}
    for r, gs in fk.gemm_records(arch, fmt):
        meas = sum(2.0 * m * n * k for m, n, k in gs) / (r["value"] * 1e12)
        model = fk._gemm_model_s(r, gs, fmt, _curve(c), eta, c.get("sustained_level", 1.0))
        kind = "sustained" if fk.sustained_record(r) else "burst" if fk.burst_record(r) else "other"
        out[kind].append((r["id"], math.log(model / meas)))
    return out


def te_layer_ratio(gpu: str) -> tuple[float, float]:
    """(TE's measured FP8 / BF16 rate over its layer benchmark's 12 GEMMs on ``gpu``, the model's at the
    same GEMMs with the curves in force)."""
    fp8_id, bf16_id = TE_LAYER[gpu]
    rf, rb = ev.record(fp8_id), ev.record(bf16_id)
    gemms = fk._layer_gemms(rf["shape"])
    t8 = sum(compute.gemm_time(m, n, k, gpu, "fp8") for m, n, k in gemms)
    t16 = sum(compute.gemm_time(m, n, k, gpu, "bf16") for m, n, k in gemms)
    return rf["value"] / rb["value"], t16 / t8


def alternative_curves(fp8_clock: bool) -> dict[str, dict]:
    """The split-regime FP8 curves; ``fp8_clock``: E scaled by ``sustained_level / SUSTAINED_CLOCK`` where
    that is below 1 (the FP8 curve then runs at its sustained records' level, not the step's clock)."""
    hbm = FITTED["hbm"]
    alt = fk.fit_gemm(hbm, split=True)
    out = {}
    for key in FP8_CURVES:
        c = dict(alt[key])
        sl = c.get("sustained_level")
        if fp8_clock and sl and sl < cal.SUSTAINED_CLOCK["power_limited"]:
            c["eff"] = c["eff"] * sl / cal.SUSTAINED_CLOCK["power_limited"]
        out[key] = c
    return out


def evaluate_with(curves: dict[str, dict] | None) -> list[dict]:
    """validate.py's rows projected with ``curves`` in place of the committed FP8 curves (None: as committed)."""
    saved = {k: FITTED["gemm"][k] for k in FP8_CURVES}
    try:
        if curves:
            for k, c in curves.items():
                FITTED["gemm"][k] = c
        roofline.clear_caches()
        return val.evaluate(val.load_rows())
    finally:
        for k, c in saved.items():
            FITTED["gemm"][k] = c
        roofline.clear_caches()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="print every dense FP8 row under each level")
    ap.add_argument("--static-tail", action="store_true",
                    help="also the dense FP8 Hopper rows with the Hopper static-tail SM contention removed")
    args = ap.parse_args(argv)

    split = fk.fit_gemm(FITTED["hbm"], split=True)
    print("1. FP8 curves: mean log(model/measured) by record regime")
    for key in FP8_CURVES:
        for label, c in (("committed", FITTED["gemm"][key]), ("split fit", split[key])):
            res = regime_residuals(key, c)
            parts = [f"{k} {statistics.mean(e for _, e in v):+.3f} (n={len(v)})" for k, v in res.items() if v]
            extra = f"  sustained_level {c['sustained_level']:.3f}" if "sustained_level" in c else ""
            print(f"  {key:20s} {label:10s} E {c['eff']:.4f} K0 {c['k0']:6.1f}{extra}  " + ", ".join(parts))

    print("2. FP8 / BF16 rate over TE's layer-benchmark GEMMs: TE measured vs model")
    levels = {"committed": None, "burst": alternative_curves(False), "burst_fp8_clock": alternative_curves(True)}
    for name, curves in levels.items():
        saved = {k: FITTED["gemm"][k] for k in FP8_CURVES}
        try:
            if curves:
                FITTED["gemm"].update(curves)
            roofline.clear_caches()
            for gpu in TE_LAYER:
                meas, model = te_layer_ratio(gpu)
                print(f"  {name:16s} {gpu}: TE {meas:.3f}  model {model:.3f}  ({100 * (model / meas - 1):+.1f} %)")
        finally:
            FITTED["gemm"].update(saved)
            roofline.clear_caches()

    print("3. dense FP8 rows (judged + calibration), signed error % under each level")
    res = {name: {r["id"]: r for r in evaluate_with(curves)} for name, curves in levels.items()}
    base = res["committed"]
    ids = [i for i, r in base.items() if r["primary"] == "dense_fp8"]
    if args.rows:
        print(f"  {'row':58s} {'family':10s} " + " ".join(f"{n:>16s}" for n in levels))
        for i in ids:
            print(f"  {i[:58]:58s} {base[i]['family']:10s} "
                  + " ".join(f"{100 * res[n][i]['err']:+16.1f}" for n in levels))
    for fam in ("hopper", "blackwell", "blackwell_ultra"):
        for role in ("judge", "calibration"):
            sel = [i for i in ids if base[i]["family"] == fam and base[i]["role"] == role]
            if not sel:
                continue
            meds = [statistics.median(abs(res[n][i]["err"]) for i in sel) for n in levels]
            means = [statistics.mean(res[n][i]["err"] for i in sel) for n in levels]
            print(f"  {fam:10s} {role:11s} n={len(sel):2d}  median |err| "
                  + " / ".join(f"{100 * m:.1f}" for m in meds) + "  mean "
                  + " / ".join(f"{100 * m:+.1f}" for m in means) + "  (" + " / ".join(levels) + ")")
    if args.static_tail:
        from primus_launch.projection.cost import contention as con

        saved_tail = dict(con.STATIC_TAIL)
        try:
            con.STATIC_TAIL.clear()
            roofline.clear_caches()
            no_tail = {r["id"]: r for r in val.evaluate(val.load_rows())}
        finally:
            con.STATIC_TAIL.update(saved_tail)
            roofline.clear_caches()
        print("4. dense FP8 Hopper rows without the Hopper static-tail contention (contention.STATIC_TAIL)")
        for i in ids:
            if base[i]["family"] == "hopper":
                print(f"  {i[:58]:58s} {100 * base[i]['err']:+6.1f} -> {100 * no_tail[i]['err']:+6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
