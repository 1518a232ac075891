"""The memory projection's error band from the published peaks ``scripts/validate_memory.py`` compares.

For every published peak the validation compares exactly (``scripts/validation/memory_cases.json``:
pytorch/torchtitan benchmark reserved peaks, Megatron-LM functional-test allocated peaks of the last rank,
Megatron-Bridge and TorchTitan reports; peaks a source states only roughly are left out, as the
validation's statistics leave them out), ``published / projected - 1`` on the same basis and rank; per
framework its 10th and 90th percentiles (linear interpolation), count, median and extremes.  With
``--write`` the figures replace ``BANDS`` in ``primus_launch/projection/memory/band_data.py`` (atomic
write); without, they are printed.

    PYTHONPATH=. python scripts/memory_band.py [--write]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_memory import collect, evaluate  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "primus_launch" / "projection" / "memory" / "band_data.py"


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of ``xs``."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def errors() -> dict[str, list[tuple[str, float]]]:
    """framework -> [(row, published / projected - 1)] over the exactly published peaks."""
    out: dict[str, list[tuple[str, float]]] = {"megatron": [], "torchtitan": []}
    for it in collect(("case",)):
        r = evaluate(it)
        if r.get("measured_gib") and not r.get("peak_approx") and r.get("framework") in out:
            out[r["framework"]].append((r["id"], r["measured_gib"] / r["projected_gib"] - 1))
    return out


def bands(errs: dict[str, list[tuple[str, float]]]) -> dict[str, tuple]:
    out = {}
    pooled = [e for rows in errs.values() for _, e in rows]
    for key, xs in [(k, [e for _, e in v]) for k, v in errs.items()] + [("all", pooled)]:
        if xs:
            out[key] = (round(quantile(xs, 0.1), 4), round(quantile(xs, 0.9), 4), len(xs),
                        round(statistics.median(xs), 4), round(min(xs), 4), round(max(xs), 4))
    return out


def write(b: dict[str, tuple]) -> None:
    text = DATA.read_text()
    body = "BANDS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in b.items()) + "}\n"
    new = re.sub(r"BANDS = \{\n.*?\n\}\n", body, text, flags=re.S)
    fd, tmp = tempfile.mkstemp(dir=DATA.parent, prefix=".band_data.", suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.replace(tmp, DATA)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite BANDS in memory/band_data.py")
    a = ap.parse_args()
    errs = errors()
    for fw, rows in errs.items():
        for rid, e in rows:
            print(f"{fw:10s} {rid[:64]:64s} published / projected - 1 = {e:+.3f}")
    b = bands(errs)
    for k, (lo, hi, n, med, mn, mx) in b.items():
        print(f"band {k:10s} rows {n:3d}  p10 {lo:+.3f}  p90 {hi:+.3f}  median {med:+.3f}  min {mn:+.3f}  max {mx:+.3f}")
    if a.write:
        write(b)
        print(f"wrote {DATA}")


if __name__ == "__main__":
    main()
