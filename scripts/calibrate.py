"""Fit the free constants of the dry-run cost model on the CALIBRATION rows only.

Rows: ``scripts/validation/runs.json`` with ``role == "calibration"`` (every third row in file
order, a third of all rows; see ``scripts/validation/build_runs.py``). Loss: root-mean-square of log(projected / measured)
tokens/s/GPU (squares weigh the worst rows, as the issue bounds the worst case). Search: coordinate descent with shrinking multiplicative steps inside bounds
(deterministic; no scipy). Free constants (``primus_launch/projection/calibration.py``):
GEMM_EFF_MAX[ampere|hopper], ATTN_EFF_MAX[ampere|hopper], FP8_GEMM_REL,
SUSTAINED_CLOCK[h100-sxm-96gb-500w], TP_OVERLAP_HIDDEN. ``--write`` rewrites the CALIBRATED block of
calibration.py atomically with the result; judge rows are never looked at.

    python scripts/calibrate.py [--write]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from primus_launch.projection import calibration as cal  # noqa: E402
from primus_launch.projection.dryrun import clear_caches  # noqa: E402
from validate import evaluate, load_rows  # noqa: E402

# name, getter/setter path, start, lower, upper
PARAMS = [  # starting points: vendor-typical large-GEMM / FlashAttention-2 fractions of peak
    ("GEMM_EFF_MAX.ampere", 0.80, 0.40, 0.95),
    ("GEMM_EFF_MAX.hopper", 0.70, 0.35, 0.95),
    ("ATTN_EFF_MAX.ampere", 0.60, 0.20, 0.90),
    ("ATTN_EFF_MAX.hopper", 0.35, 0.15, 0.90),
    ("FP8_GEMM_REL", 0.80, 0.40, 1.00),
    ("SUSTAINED_CLOCK.h100-sxm-96gb-500w", 0.85, 0.60, 1.00),
    ("TP_OVERLAP_HIDDEN", 0.60, 0.10, 0.95),
]


def _set(name: str, value: float) -> None:
    if "." in name:
        d, k = name.split(".", 1)
        getattr(cal, d)[k] = value
    else:
        setattr(cal, name, value)


def apply(x: list[float]) -> None:
    for (name, *_), v in zip(PARAMS, x):
        _set(name, v)
    cal.GEMM_EFF_DEFAULT = sum(cal.GEMM_EFF_MAX.values()) / len(cal.GEMM_EFF_MAX)
    cal.ATTN_EFF_DEFAULT = sum(cal.ATTN_EFF_MAX.values()) / len(cal.ATTN_EFF_MAX)
    clear_caches()


def loss(x: list[float], rows: list[dict]) -> float:
    apply(x)
    res = evaluate(rows)
    return math.sqrt(sum(math.log(r["projected"] / r["measured"]) ** 2 for r in res) / len(res))


def fit(rows: list[dict], rounds: int = 6) -> tuple[list[float], float]:
    x = [p[1] for p in PARAMS]
    best = loss(x, rows)
    step = 0.16
    for _ in range(rounds):
        improved = True
        while improved:
            improved = False
            for i, (_, _, lo, hi) in enumerate(PARAMS):
                for direction in (1 + step, 1 / (1 + step)):
                    y = list(x)
                    y[i] = min(hi, max(lo, x[i] * direction))
                    if y[i] == x[i]:
                        continue
                    val = loss(y, rows)
                    if val < best - 1e-6:
                        x, best, improved = y, val, True
        step /= 2
    apply(x)
    return x, best


def write_block(x: list[float], score: float, ids: list[str]) -> None:
    path = ROOT / "primus_launch" / "projection" / "calibration.py"
    text = path.read_text()
    g_amp, g_hop, a_amp, a_hop, fp8, clk, tpo = (round(v, 4) for v in x)
    block = (
        "# BEGIN CALIBRATED\n"
        f"GEMM_EFF_MAX = {{\"ampere\": {g_amp}, \"hopper\": {g_hop}}}\n"
        f"GEMM_EFF_DEFAULT = {round((g_amp + g_hop) / 2, 4)}\n"
        f"ATTN_EFF_MAX = {{\"ampere\": {a_amp}, \"hopper\": {a_hop}}}\n"
        f"ATTN_EFF_DEFAULT = {round((a_amp + a_hop) / 2, 4)}\n"
        f"FP8_GEMM_REL = {fp8}\n"
        f"SUSTAINED_CLOCK = {{\"h100-sxm-96gb-500w\": {clk}}}\n"
        f"TP_OVERLAP_HIDDEN = {tpo}\n"
        f"CALIBRATION_ROWS: list[str] = {ids!r}\n"
        f"CALIBRATION_SCORE = {round(score, 5)}  # rms of log(projected/measured) on CALIBRATION_ROWS\n"
        "# END CALIBRATED"
    )
    new = re.sub(r"# BEGIN CALIBRATED.*?# END CALIBRATED", lambda _m: block, text, flags=re.S)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the CALIBRATED block of calibration.py")
    args = ap.parse_args(argv)
    rows = [r for r in load_rows() if r["role"] == "calibration"]
    x, score = fit(rows)
    for (name, *_), v in zip(PARAMS, x):
        print(f"{name:40s} {v:.4f}")
    print(f"calibration rows: {len(rows)}; rms log err {score:.4f}")
    if args.write:
        write_block(x, score, [r["id"] for r in rows])
        print("wrote primus_launch/projection/calibration.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
